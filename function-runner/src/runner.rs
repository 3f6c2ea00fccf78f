//! The runner, from parts built by its caller: the FunctionConfigs in use
//! (an index, fixed or replaced by the cluster's watch), a backend (its own
//! crate's or module's constructor checked its settings) and the runner's
//! own settings. It puts together the pod cache over the backend, the idle
//! pools and warming the FunctionConfigs ask for, and the evaluators in
//! their fixed order (exec, built-in, pod). `serve` and `eval`/`render`
//! compose it (`bin/function-runner`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use runner_core::backend::{Backend, PodSpec};
use runner_core::config::{ImageIndex, LiveIndex};

use crate::backend::metered::MeteredBackend;
use crate::builtin::{BuiltinEvaluator, Builtins, BuiltinsMode};
use crate::cache::{CacheSettings, PodCache, PodRequestSettings};
use crate::evaluator::{Evaluator, ExecEvaluator, ExecPools, MultiEvaluator, PodEvaluator};
use crate::metrics::RunnerMetrics;
use crate::tag_resolution::{TagResolver, TagResolving};

/// The FunctionConfigs the runner serves.
#[derive(Debug, Clone)]
pub struct Functions {
    /// The index in use: fixed, or replaced as the cluster's FunctionConfigs
    /// change.
    pub index: LiveIndex,
    /// The documents rejected at start, said: a call for an image that
    /// matches nothing names them (one may have been meant for it).
    pub rejected: Vec<String>,
}

impl Functions {
    /// FunctionConfigs that never change.
    pub fn fixed(configs: &runner_core::config::FunctionConfigs) -> Self {
        Functions {
            index: configs.fixed(),
            rejected: configs.rejected.clone(),
        }
    }
}

/// The runner's own settings (each backend has its own).
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub cache: CacheSettings,
    /// Start a pod per FunctionConfig podExecutor at start, and for those
    /// the cluster's FunctionConfigs add later.
    pub warm_up: bool,
    /// Largest gRPC message, both directions.
    pub max_message_bytes: usize,
    /// Retries of a call to a pod that broke off at the transport.
    pub max_grpc_retries: usize,
    /// binaryExecutor functions: processes kept started per binary, unless
    /// its FunctionConfig says (`--prespawn`; 0: spawn per call). `None`:
    /// none even where a FunctionConfig asks ([`ExecPools::off`]).
    pub prespawn: Option<usize>,
    /// `eval -e`: added to the environment of binaryExecutor binaries.
    pub function_env: Vec<(String, String)>,
    /// Which of the catalog's images of built-in names run built-in where
    /// no FunctionConfig says otherwise (`--builtins`; goExecutor entries
    /// run built-in in every mode).
    pub builtins: BuiltinsMode,
    /// Porch's `--disable-runtimes`: which of the exec and pod evaluators
    /// run (built-ins run either way).
    pub runtimes: Runtimes,
    /// `serve`: resolves a request's tag constraint against the image's
    /// registry before the chain ([`TagResolving`]); `None` (`eval`,
    /// `render`, which resolve Kptfile tags themselves): constraints are
    /// matched against the FunctionConfigs' tags only.
    pub tag_resolver: Option<Arc<TagResolver>>,
    /// The span export's counters, served with the runner's metrics
    /// (`serve` with tracing on).
    pub export_stats: Option<telemetry::ExportStats>,
}

/// The runtimes of Porch's `--disable-runtimes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtimes {
    /// FunctionConfig binaryExecutor binaries.
    pub exec: bool,
    /// Pods, of whatever backend; off: no pod is started, warmed or pooled.
    pub pod: bool,
}

impl Default for Runtimes {
    fn default() -> Self {
        Runtimes {
            exec: true,
            pod: true,
        }
    }
}

impl Default for RunnerSettings {
    fn default() -> Self {
        RunnerSettings {
            cache: CacheSettings::default(),
            warm_up: false,
            max_message_bytes: proto::DEFAULT_MAX_MESSAGE_BYTES,
            max_grpc_retries: 2,
            prespawn: None,
            function_env: Vec::new(),
            builtins: BuiltinsMode::default(),
            runtimes: Runtimes::default(),
            tag_resolver: None,
            export_stats: None,
        }
    }
}

/// The assembled runner.
pub struct Runner {
    pub evaluator: Arc<dyn Evaluator>,
    pub cache: PodCache,
    pub metrics: Arc<RunnerMetrics>,
    /// The FunctionConfigs in use (replaced as the cluster's change).
    pub index: LiveIndex,
    /// Which images run built-in.
    pub builtins: Builtins,
    /// Warms the images that FunctionConfig changes add (`warm_up`).
    _live_warming: Option<WarmOnChange>,
    /// Tells the backend which idle pools the FunctionConfigs want.
    _pool_sync: PoolSync,
    /// The backend, closed after the pods are stopped.
    backend: Arc<dyn Backend>,
    /// The exec evaluator's pre-spawned processes.
    exec_pools: Arc<ExecPools>,
}

impl Runner {
    /// The runner over `backend` for `functions`; with `warm_up`, the pod
    /// cache warmed first.
    pub async fn new(
        functions: Functions,
        backend: Arc<dyn Backend>,
        settings: RunnerSettings,
    ) -> Runner {
        let Functions { index, rejected } = functions;
        let mut metrics = RunnerMetrics::new();
        if let Some(pools) = backend.pool_metrics() {
            metrics.register_pools(pools);
        }
        if let Some(stats) = &settings.export_stats {
            metrics.register_export(stats);
        }
        let metrics = Arc::new(metrics);
        if let Some(ready) = backend.ready() {
            metrics.follow_backend_ready(ready);
        }
        let metered = Arc::new(MeteredBackend::new(backend.clone(), metrics.clone()));
        let cache = PodCache::spawn(metered, settings.cache);
        // Idle pools (podExecutor idlePods) are kept whether or not the cache is warmed:
        // the FunctionConfig asks for them.
        let pods = settings.runtimes.pod;
        let pool_sync = PoolSync::spawn(
            backend.clone(),
            if pods {
                index.clone()
            } else {
                LiveIndex::fixed(Arc::new(ImageIndex::default()))
            },
            settings.cache,
        );
        let live_warming = if settings.warm_up && pods {
            let current = index.current();
            let images = warm_list(&current, &HashSet::new());
            if !images.is_empty() {
                tracing::info!(count = images.len(), "warming the pod cache");
                cache.warm(images).await;
            }
            // FunctionConfigs applied later (or whose tags change) warm as the ones read
            // at start did.
            Some(WarmOnChange::spawn(cache.clone(), index.clone(), &current))
        } else {
            None
        };
        let exec_pools = Arc::new(
            settings
                .prespawn
                .map_or_else(ExecPools::off, ExecPools::new),
        );
        let builtins = Builtins::new(index.clone(), settings.builtins);
        let mut chain: Vec<Box<dyn Evaluator>> = Vec::with_capacity(3);
        if settings.runtimes.exec {
            chain.push(Box::new(
                ExecEvaluator::with_pools(
                    index.clone(),
                    settings.max_message_bytes,
                    exec_pools.clone(),
                )
                .with_env(settings.function_env.clone()),
            ));
        }
        chain.push(Box::new(
            BuiltinEvaluator::new(builtins.clone(), settings.max_message_bytes)
                .with_metrics(metrics.clone()),
        ));
        if pods {
            chain.push(Box::new(PodEvaluator::new(
                cache.clone(),
                index.clone(),
                settings.max_message_bytes,
                settings.max_grpc_retries,
            )));
        }
        let why = builtins.clone();
        let chain = MultiEvaluator::new(chain)
            .with_rejected(rejected)
            .with_not_built_in(Arc::new(move |image: &str, tag: &str| {
                why.not_reproduced(image, tag)
            }));
        let evaluator: Arc<dyn Evaluator> = match settings.tag_resolver {
            Some(resolver) => Arc::new(TagResolving::new(
                resolver,
                index.clone(),
                settings.runtimes.exec,
                Box::new(chain),
            )),
            None => Arc::new(chain),
        };
        Runner {
            evaluator,
            cache,
            metrics,
            index,
            builtins,
            _live_warming: live_warming,
            _pool_sync: pool_sync,
            backend,
            exec_pools,
        }
    }

    /// Whether the backend can start pods, where it can tell (the kube
    /// backend: whether the API server grants the rights it needs).
    pub fn ready(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.backend.ready()
    }

    /// Stops every pod this runner owns.
    pub async fn shutdown(&self, grace: Duration) {
        self.exec_pools.close();
        if tokio::time::timeout(grace, self.cache.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("pods did not all stop within {grace:?}");
        }
        // A backend may wait for its deletes under way (the kube backend,
        // which may also delete an uninstalled Deployment's pods, then sends
        // its last events).
        let close_within = grace.max(self.backend.close_within());
        if tokio::time::timeout(close_within, self.backend.close())
            .await
            .is_err()
        {
            tracing::warn!("the backend did not close within {close_within:?}");
        }
    }
}

/// The images of `index` to warm, with their pod settings, but those in `done`. Pooled
/// functions are not: their idle pool is their warmth.
fn warm_list(index: &ImageIndex, done: &HashSet<String>) -> Vec<(String, PodRequestSettings)> {
    index
        .warm_images()
        .into_iter()
        .filter(|image| !done.contains(image))
        .map(|image| {
            let settings = index
                .pod_settings_for(&image, "")
                .map(|m| PodRequestSettings::from(&m))
                .unwrap_or_default();
            (image, settings)
        })
        .filter(|(_, settings)| settings.idle_pods == 0)
        .collect()
}

/// The idle pools `index` wants: one per podExecutor tag with `idlePods`.
fn pool_list(index: &ImageIndex, cache: &CacheSettings) -> Vec<PodSpec> {
    index
        .warm_images()
        .into_iter()
        .filter_map(|image| index.pod_settings_for(&image, ""))
        .filter(|m| m.idle_pods > 0)
        .map(|m| PodSpec {
            image: m.resolved_image,
            ready_timeout: cache.ready_timeout,
            ttl: m.ttl.unwrap_or(cache.default_ttl),
            overrides: m.template_overrides,
            prespawn: m.prespawn,
            pids_limit: m.pids_limit,
            idle_pods: m.idle_pods,
            single_use: m.single_use,
        })
        .collect()
}

/// Hands the backend the idle pools of the FunctionConfigs: those read at start, and
/// again whenever the cluster's change.
struct PoolSync(tokio::task::JoinHandle<()>);

impl PoolSync {
    fn spawn(backend: Arc<dyn Backend>, mut index: LiveIndex, cache: CacheSettings) -> Self {
        let first = pool_list(&index.current(), &cache);
        if !first.is_empty() {
            tracing::info!(
                pools = first.len(),
                "keeping idle pools (podExecutor idlePods)"
            );
        }
        backend.set_pools(first);
        // A fixed index ends the task at once.
        PoolSync(tokio::spawn(async move {
            while index.changed().await {
                backend.set_pools(pool_list(&index.current(), &cache));
            }
        }))
    }
}

impl Drop for PoolSync {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Warms each image a new index adds to the warm list (a FunctionConfig applied, or new
/// podExecutor tags), once: an image already warm, or warmed and since expired by its TTL,
/// is not started again by an unrelated change. Stops with the runner (dropped) or once no
/// index can change any more.
struct WarmOnChange(tokio::task::JoinHandle<()>);

impl WarmOnChange {
    fn spawn(cache: PodCache, mut index: LiveIndex, first: &ImageIndex) -> Self {
        let mut warmed: HashSet<String> = first.warm_images().into_iter().collect();
        WarmOnChange(tokio::spawn(async move {
            while index.changed().await {
                let current = index.current();
                let images = warm_list(&current, &warmed);
                // A tag dropped and added again later warms again.
                warmed = current.warm_images().into_iter().collect();
                if images.is_empty() {
                    continue;
                }
                tracing::info!(
                    count = images.len(),
                    images = ?images.iter().map(|(image, _)| image.as_str()).collect::<Vec<_>>(),
                    "warming the pods of changed FunctionConfigs"
                );
                cache.warm(images).await;
            }
        }))
    }
}

impl Drop for WarmOnChange {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use futures::future::BoxFuture;
    use runner_core::backend::{BackendError, PodEvent, PodId, PodSpec, ReadyPod, StopReason};
    use runner_core::config::test_support::config;
    use tokio::sync::mpsc;

    /// Reports the image of every start; its pods need no endpoint (nothing calls them).
    struct Starts(mpsc::UnboundedSender<String>);

    impl Backend for Starts {
        fn name(&self) -> &'static str {
            "starts"
        }

        fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
            let _ = self.0.send(spec.image.clone());
            Box::pin(async move {
                Ok(ReadyPod {
                    id: PodId(spec.image),
                    endpoint: "http://127.0.0.1:1".into(),
                })
            })
        }

        fn stop(&self, _: PodId, _: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
            Box::pin(async { Ok(()) })
        }

        fn set_events(&self, _: mpsc::UnboundedSender<PodEvent>) {}
    }

    fn index_of(specs: &[(&str, &str)]) -> Arc<ImageIndex> {
        let configs: Vec<_> = specs
            .iter()
            .map(|(name, spec)| config(name, spec))
            .collect();
        let (index, errors) = ImageIndex::build(&configs, "example.com/fns");
        assert!(errors.is_empty(), "{errors:?}");
        Arc::new(index)
    }

    async fn next(starts: &mut mpsc::UnboundedReceiver<String>) -> Option<String> {
        tokio::time::timeout(Duration::from_secs(10), starts.recv())
            .await
            .ok()
            .flatten()
    }

    /// #31 item 3: a FunctionConfig applied or given new tags while the runner runs gets its
    /// pods warmed; images already warmed are not started again by an unrelated change.
    #[tokio::test]
    async fn a_changed_index_warms_only_the_images_it_adds() {
        let (tx, mut starts) = mpsc::unbounded_channel();
        let cache = PodCache::spawn(Arc::new(Starts(tx)), CacheSettings::default());
        let first = index_of(&[("a", "image: a\npodExecutor:\n  tags: [v1]\n")]);
        let (publisher, live) = LiveIndex::new(first.clone());
        let warming = WarmOnChange::spawn(cache.clone(), live, &first);

        publisher.publish(index_of(&[
            ("a", "image: a\npodExecutor:\n  tags: [v1, v2]\n"),
            ("b", "image: b\npodExecutor:\n  tags: [v1]\n"),
        ]));
        let mut started = vec![next(&mut starts).await, next(&mut starts).await];
        started.sort();
        assert_eq!(
            started,
            [
                Some("example.com/fns/a:v2".to_string()),
                Some("example.com/fns/b:v1".to_string())
            ]
        );
        // A change that adds no image starts nothing (a:v1 was warm from the start).
        publisher.publish(index_of(&[
            ("a", "image: a\npodExecutor:\n  tags: [v1, v2]\n"),
            ("b", "image: b\npodExecutor:\n  tags: [v1]\n"),
            (
                "c",
                "image: c\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/true\n",
            ),
        ]));
        publisher.publish(index_of(&[(
            "a",
            "image: a\npodExecutor:\n  tags: [v1, v3]\n",
        )]));
        assert_eq!(
            next(&mut starts).await.as_deref(),
            Some("example.com/fns/a:v3")
        );
        drop(warming);
        cache.shutdown().await;
    }

    /// A backend whose close takes `takes`, and which says it may take
    /// `within`; it can keep pools, whose figures it hands the runner.
    struct Closing {
        takes: Duration,
        within: Duration,
        closed: Arc<std::sync::atomic::AtomicBool>,
        pools: Option<runner_core::backend::metrics::PoolMetrics>,
    }

    impl Backend for Closing {
        fn name(&self) -> &'static str {
            "closing"
        }

        fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
            Box::pin(async move {
                Err(BackendError::UnknownImage {
                    image: spec.image,
                    reason: "none here".into(),
                })
            })
        }

        fn stop(&self, _: PodId, _: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
            Box::pin(async { Ok(()) })
        }

        fn set_events(&self, _: mpsc::UnboundedSender<PodEvent>) {}

        fn close(&self) -> BoxFuture<'static, ()> {
            let (takes, closed) = (self.takes, self.closed.clone());
            Box::pin(async move {
                tokio::time::sleep(takes).await;
                closed.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        }

        fn close_within(&self) -> Duration {
            self.within
        }

        fn pool_metrics(&self) -> Option<runner_core::backend::metrics::PoolMetrics> {
            self.pools.clone()
        }
    }

    fn no_functions() -> Functions {
        Functions {
            index: LiveIndex::fixed(index_of(&[])),
            rejected: Vec::new(),
        }
    }

    /// A backend's close gets as long as the backend says it takes (the
    /// docker backend's sweep and removals, the kube backend's deletes),
    /// or the runner's grace if longer.
    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_as_long_as_the_backends_close_may_take() {
        for (within, done) in [(Duration::from_secs(30), true), (Duration::ZERO, false)] {
            let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let backend = Closing {
                takes: Duration::from_secs(20),
                within,
                closed: closed.clone(),
                pools: None,
            };
            let runner =
                Runner::new(no_functions(), Arc::new(backend), RunnerSettings::default()).await;
            runner.shutdown(Duration::from_secs(1)).await;
            assert_eq!(
                closed.load(std::sync::atomic::Ordering::SeqCst),
                done,
                "{within:?}"
            );
        }
    }

    /// The idle pools' figures a backend keeps are served with the
    /// runner's metrics; a backend without pools adds no series.
    #[tokio::test]
    async fn the_backends_pool_figures_are_served_with_the_runners() {
        let pools = runner_core::backend::metrics::PoolMetrics::default();
        pools.set("example.com/fns/a:v1", 2, 1);
        let with = |pools| Closing {
            takes: Duration::ZERO,
            within: Duration::ZERO,
            closed: Default::default(),
            pools,
        };
        let runner = Runner::new(
            no_functions(),
            Arc::new(with(Some(pools))),
            RunnerSettings::default(),
        )
        .await;
        let text = runner.metrics.render(None);
        assert!(
            text.contains("function_runner_pool_size{image=\"example.com/fns/a:v1\"} 2"),
            "{text}"
        );
        runner.shutdown(Duration::from_secs(1)).await;
        let runner = Runner::new(
            no_functions(),
            Arc::new(with(None)),
            RunnerSettings::default(),
        )
        .await;
        assert!(!runner.metrics.render(None).contains("pool_size"));
        runner.shutdown(Duration::from_secs(1)).await;
    }
}
