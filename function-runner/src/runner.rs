//! Assembles the runner from its options: FunctionConfigs → image index;
//! backend → pod cache; exec, built-in and pod evaluators in a fixed chain. Used by
//! `serve` and by `eval --image`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::process::{FunctionMap, FunctionMapError, ProcessBackend};
use crate::builtin::{BuiltinEvaluator, Builtins};
use crate::cache::{CacheSettings, PodCache, PodRequestSettings};
use crate::evaluator::{Evaluator, ExecEvaluator, ExecPools, MultiEvaluator, PodEvaluator};
use crate::metrics::MeteredBackend;
use crate::metrics::RunnerMetrics;
use runner_core::backend::pool::Pooled;
use runner_core::backend::{Backend, PodSpec};
use runner_core::config::{self, ImageIndex, LiveIndex};
use runner_docker::{DockerBackend, DockerSettings, DockerSetupError};
use runner_kube::config_watch::{self, ConfigWatch, WatchSettings};
use runner_kube::entrypoint::Entrypoints;
use runner_kube::owner;
use runner_kube::pods::{KubeBackend, KubeSettings};
use runner_kube::registry::{RegistryError, RegistrySettings};

/// Which backend creates pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Each pod is a wrapper-server child process on a loopback port.
    Process,
    /// Each pod is a Kubernetes Pod with a ClusterIP Service.
    Kube,
    /// Each pod is a container of the function's image on the local Docker
    /// engine.
    Docker,
}

#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Directory of FunctionConfig documents (`--functions`); `None`: none.
    pub functions: Option<PathBuf>,
    /// Porch's pod cache config (`--pod-cache-config`): functions to keep
    /// pods for, with their pod settings.
    pub pod_cache_config: Option<PathBuf>,
    pub default_image_prefix: String,
    pub cache: CacheSettings,
    pub warm_up: bool,
    pub max_message_bytes: usize,
    pub max_grpc_retries: usize,
    pub backend: BackendKind,
    /// `wrapper-server` binary for the process backend.
    pub wrapper_server: PathBuf,
    /// Image → entrypoint map for the process backend.
    pub process_functions: Option<PathBuf>,
    /// The kube backend's settings (its `ttl` is taken from `cache`).
    pub kube: Option<KubeSettings>,
    /// The docker backend's settings.
    pub docker: Option<DockerSettings>,
    /// `eval -e`: added to the environment of the functions that run as
    /// local processes (binaryExecutor binaries, process pods); the docker
    /// backend's containers get theirs from `docker`.
    pub function_env: Vec<(String, String)>,
    /// binaryExecutor functions: processes kept started per binary, unless
    /// its FunctionConfig says (`--prespawn`; 0: spawn per call). `None`:
    /// none even where a FunctionConfig asks ([`ExecPools::off`]).
    pub prespawn: Option<usize>,
    /// How the kube backend reaches registries: plain HTTP ones, private
    /// ones' credentials and CA, the pull Secret.
    pub registries: RegistrySettings,
    /// FunctionConfig objects to watch in the cluster (kube mode); `None`: none.
    pub cluster_configs: Option<WatchSettings>,
    /// The catalog's images of built-in names run built-in where no
    /// FunctionConfig says otherwise (`--no-default-builtins` turns it off;
    /// goExecutor entries run built-in either way).
    pub default_builtins: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("--functions {path}: {reason}")]
    Functions { path: PathBuf, reason: String },
    #[error("--process-functions: {0}")]
    FunctionMap(#[from] FunctionMapError),
    #[error("{0}")]
    PodCacheConfig(#[from] config::PodCacheConfigError),
    #[error("--backend kube: {0}")]
    KubeSettings(&'static str),
    #[error(
        "--backend kube: connecting to the cluster (KUBECONFIG, or the pod's service account): {0}"
    )]
    Kube(#[source] kube::Error),
    #[error("--backend kube: private registries: {0}")]
    Registry(#[from] RegistryError),
    #[error("--backend docker: {0}")]
    Docker(#[from] DockerSetupError),
}

/// How long the Docker engine may take to answer at start.
const DOCKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client for the cluster (KUBECONFIG, or the pod's service account)
/// whose requests name the runner: kube-rs sends no User-Agent, and an API
/// server's audit log and metrics tell clients apart by it.
async fn kube_client() -> Result<kube::Client, kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("function-runner/", env!("CARGO_PKG_VERSION"))),
    ));
    kube::Client::try_from(config)
}

/// The assembled runner.
pub struct Runner {
    pub evaluator: Arc<dyn Evaluator>,
    pub cache: PodCache,
    pub metrics: Arc<RunnerMetrics>,
    /// The FunctionConfigs in use (replaced as the cluster's change).
    pub index: LiveIndex,
    /// Which images run built-in (`eval` and `render` run them on their
    /// own tree, without the evaluator).
    pub builtins: Builtins,
    /// Keeps the cluster's FunctionConfigs watched while the runner lives.
    _config_watch: Option<ConfigWatch>,
    /// Warms the images that FunctionConfig changes add (`--warm-up-pod-cache`).
    _live_warming: Option<WarmOnChange>,
    /// Tells the backend which idle pools the FunctionConfigs want.
    _pool_sync: PoolSync,
    /// The backend, closed after the pods are stopped.
    backend: Arc<dyn Backend>,
    /// The exec evaluator's pre-spawned processes.
    exec_pools: Arc<ExecPools>,
}

impl Runner {
    /// Builds the runner and, if asked, starts warming the pod cache. Bad
    /// FunctionConfig documents are logged with file and field; the good
    /// ones are used.
    pub async fn start(opts: RunnerOptions) -> Result<Runner, RunnerError> {
        // Every rejected document, kept: a call for an image that matches
        // nothing names them (one may have been meant for it).
        let mut rejected = Vec::new();
        let mut configs = match &opts.functions {
            None => Vec::new(),
            Some(dir) => {
                match std::fs::metadata(dir) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        return Err(RunnerError::Functions {
                            path: dir.clone(),
                            reason: "not a directory".into(),
                        })
                    }
                    Err(err) => {
                        return Err(RunnerError::Functions {
                            path: dir.clone(),
                            reason: err.to_string(),
                        })
                    }
                }
                let report = config::load_dir_with_prefix(dir, &opts.default_image_prefix);
                for err in &report.errors {
                    tracing::error!("FunctionConfig: {err}");
                    rejected.push(err.to_string());
                }
                tracing::info!(
                    loaded = report.configs.len(),
                    rejected = report.errors.len(),
                    dir = %dir.display(),
                    "FunctionConfigs read (--functions)"
                );
                report.configs
            }
        };
        if let Some(path) = &opts.pod_cache_config {
            let from_cache_config = config::load_pod_cache_config(path)?;
            tracing::info!(
                loaded = from_cache_config.len(),
                path = %path.display(),
                "pod cache config read (--pod-cache-config)"
            );
            configs.extend(from_cache_config);
        }
        let (index, errors) = ImageIndex::build(&configs, &opts.default_image_prefix);
        for err in &errors {
            tracing::error!("FunctionConfig: {err}");
            rejected.push(err.to_string());
        }
        let index = Arc::new(index);
        let metrics = Arc::new(RunnerMetrics::new());
        let backend: Arc<dyn Backend> = match opts.backend {
            BackendKind::Process => {
                let functions = match &opts.process_functions {
                    Some(path) => FunctionMap::load(path)?,
                    None => FunctionMap::Unset,
                };
                let process = ProcessBackend::new(
                    opts.wrapper_server.clone(),
                    functions,
                    opts.max_message_bytes,
                )
                .with_env(opts.function_env.clone());
                Arc::new(Pooled::new(Arc::new(process), metrics.pools()))
            }
            BackendKind::Kube => {
                let mut settings = opts
                    .kube
                    .clone()
                    .ok_or(RunnerError::KubeSettings("no kube settings"))?;
                if settings.wrapper_image.is_empty() {
                    return Err(RunnerError::KubeSettings(
                        "the wrapper image is not set (WRAPPER_SERVER_IMAGE or --wrapper-server-image)",
                    ));
                }
                if runner_kube::template::label_value(&settings.owner).is_empty() {
                    return Err(RunnerError::KubeSettings(
                        "the runner id (--runner-id, HOSTNAME) has no letter or digit: it must label this runner's pods",
                    ));
                }
                settings.ttl = opts.cache.default_ttl;
                settings.scan_interval = opts.cache.scan_interval;
                settings.pull_secret = opts.registries.pull_secret();
                let entrypoints = Entrypoints::with_settings(&opts.registries)?;
                let client = kube_client().await.map_err(RunnerError::Kube)?;
                if let Some(pod) = &settings.runner_pod {
                    match owner::find(&client, &settings.runner_namespace, pod).await {
                        Ok(Some(deployment)) => {
                            tracing::info!(
                                deployment = %deployment.name,
                                owner_reference = deployment.reference_from(&settings.namespace).is_some(),
                                "function pods belong to the runner's Deployment: they go when it is deleted"
                            );
                            settings.deployment = Some(deployment);
                        }
                        Ok(None) => tracing::info!(
                            pod = %pod,
                            "the runner is not run by a Deployment: its function pods go when it stops"
                        ),
                        Err(err) => tracing::warn!(
                            "{err}: function pods will not go with the runner's Deployment"
                        ),
                    }
                }
                Arc::new(
                    KubeBackend::new(client, settings, entrypoints)
                        .with_pool_metrics(metrics.pools()),
                )
            }
            BackendKind::Docker => {
                let mut settings = opts.docker.clone().unwrap_or_default();
                let docker = match settings.engine.take() {
                    Some(docker) => docker,
                    None => runner_docker::connect(DOCKER_CONNECT_TIMEOUT).await?,
                };
                let docker = DockerBackend::new(docker, settings).await?;
                Arc::new(Pooled::new(Arc::new(docker), metrics.pools()))
            }
        };
        let closer = backend.clone();
        if let Some(ready) = backend.ready() {
            metrics.follow_backend_ready(ready);
        }
        let backend = Arc::new(MeteredBackend::new(backend, metrics.clone()));
        let cache = PodCache::spawn(backend, opts.cache);
        // --- FunctionConfigs in the cluster (kube mode): they join the directory's, and the
        // index is replaced as they change. Read before warming, which they take part in.
        let (publisher, index) = LiveIndex::new(index);
        let config_watch = match opts.cluster_configs.clone() {
            Some(settings) => {
                let client = kube_client().await.map_err(RunnerError::Kube)?;
                Some(config_watch::start(client, settings, configs, publisher).await)
            }
            None => None,
        };
        // --- end of the cluster's FunctionConfigs
        // Idle pools (podExecutor idlePods) are kept whether or not the cache is warmed:
        // the FunctionConfig asks for them.
        let pool_sync = PoolSync::spawn(
            closer.clone(),
            index.clone(),
            opts.cache,
            config_watch.is_some(),
        );
        let live_warming = if opts.warm_up {
            let current = index.current();
            let images = warm_list(&current, &HashSet::new());
            if !images.is_empty() {
                tracing::info!(count = images.len(), "warming the pod cache");
                cache.warm(images).await;
            }
            // FunctionConfigs applied later (or whose tags change) warm as the ones read
            // at start did; only the cluster's change while the runner runs.
            config_watch
                .is_some()
                .then(|| WarmOnChange::spawn(cache.clone(), index.clone(), &current))
        } else {
            None
        };
        let exec_pools = Arc::new(opts.prespawn.map_or_else(ExecPools::off, ExecPools::new));
        let builtins = Builtins::new(index.clone(), opts.default_builtins);
        let evaluator: Arc<dyn Evaluator> = Arc::new(
            MultiEvaluator::new(vec![
                Box::new(
                    ExecEvaluator::with_pools(
                        index.clone(),
                        opts.max_message_bytes,
                        exec_pools.clone(),
                    )
                    .with_env(opts.function_env.clone()),
                ),
                Box::new(
                    BuiltinEvaluator::new(builtins.clone(), opts.max_message_bytes)
                        .with_metrics(metrics.clone()),
                ),
                Box::new(PodEvaluator::new(
                    cache.clone(),
                    index.clone(),
                    opts.max_message_bytes,
                    opts.max_grpc_retries,
                )),
            ])
            .with_rejected(rejected),
        );
        Ok(Runner {
            evaluator,
            cache,
            metrics,
            index,
            builtins,
            _config_watch: config_watch,
            _live_warming: live_warming,
            _pool_sync: pool_sync,
            backend: closer,
            exec_pools,
        })
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
        // The kube backend waits for its deletes under way, may delete an
        // uninstalled Deployment's pods, then sends its last events.
        let close_within = grace.max(runner_kube::pods::CLOSE_WITHIN);
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
struct PoolSync(Option<tokio::task::JoinHandle<()>>);

impl PoolSync {
    fn spawn(
        backend: Arc<dyn Backend>,
        mut index: LiveIndex,
        cache: CacheSettings,
        live: bool,
    ) -> Self {
        let first = pool_list(&index.current(), &cache);
        if !first.is_empty() {
            tracing::info!(
                pools = first.len(),
                "keeping idle pools (podExecutor idlePods)"
            );
        }
        backend.set_pools(first);
        if !live {
            return PoolSync(None);
        }
        PoolSync(Some(tokio::spawn(async move {
            while index.changed().await {
                backend.set_pools(pool_list(&index.current(), &cache));
            }
        })))
    }
}

impl Drop for PoolSync {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
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
}
