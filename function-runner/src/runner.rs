//! Assembles the runner from its options: FunctionConfigs → image index;
//! backend → pod cache; exec, built-in and pod evaluators in a fixed chain. Used by
//! `serve` and by `eval --image`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::docker::{DockerBackend, DockerSettings, DockerSetupError};
use crate::backend::kube::entrypoint::Entrypoints;
use crate::backend::kube::pods::{KubeBackend, KubeSettings};
use crate::backend::kube::registry::{RegistryError, RegistrySettings};
use crate::backend::process::{FunctionMap, FunctionMapError, ProcessBackend};
use crate::backend::Backend;
use crate::builtin::{BuiltinEvaluator, Builtins};
use crate::cache::{CacheSettings, PodCache, PodRequestSettings};
use crate::config::cluster::{self, ConfigWatch, WatchSettings};
use crate::config::{self, ImageIndex, LiveIndex};
use crate::evaluator::{Evaluator, ExecEvaluator, ExecPools, MultiEvaluator, PodEvaluator};
use crate::metrics::MeteredBackend;
use crate::metrics::RunnerMetrics;

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
                Arc::new(
                    ProcessBackend::new(
                        opts.wrapper_server.clone(),
                        functions,
                        opts.max_message_bytes,
                    )
                    .with_env(opts.function_env.clone()),
                )
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
                if crate::backend::kube::template::label_value(&settings.owner).is_empty() {
                    return Err(RunnerError::KubeSettings(
                        "the runner id (--runner-id, HOSTNAME) has no letter or digit: it must label this runner's pods",
                    ));
                }
                settings.ttl = opts.cache.default_ttl;
                settings.scan_interval = opts.cache.scan_interval;
                settings.pull_secret = opts.registries.pull_secret();
                let entrypoints = Entrypoints::with_settings(&opts.registries)?;
                let client = kube_client().await.map_err(RunnerError::Kube)?;
                Arc::new(KubeBackend::new(client, settings, entrypoints))
            }
            BackendKind::Docker => {
                let settings = opts.docker.clone().unwrap_or_default();
                let docker = crate::backend::docker::connect(DOCKER_CONNECT_TIMEOUT).await?;
                Arc::new(DockerBackend::new(docker, settings).await?)
            }
        };
        let closer = backend.clone();
        let backend = Arc::new(MeteredBackend::new(backend, metrics.clone()));
        let cache = PodCache::spawn(backend, opts.cache);
        // --- FunctionConfigs in the cluster (kube mode): they join the directory's, and the
        // index is replaced as they change. Read before warming, which they take part in.
        let (publisher, index) = LiveIndex::new(index);
        let config_watch = match opts.cluster_configs.clone() {
            Some(settings) => {
                let client = kube_client().await.map_err(RunnerError::Kube)?;
                Some(cluster::start(client, settings, configs, publisher).await)
            }
            None => None,
        };
        // --- end of the cluster's FunctionConfigs
        if opts.warm_up {
            let index = index.current();
            let images: Vec<(String, PodRequestSettings)> = index
                .warm_images()
                .into_iter()
                .map(|image| {
                    let settings = index
                        .pod_settings_for(&image, "")
                        .map(|m| PodRequestSettings::from(&m))
                        .unwrap_or_default();
                    (image, settings)
                })
                .collect();
            if !images.is_empty() {
                tracing::info!(count = images.len(), "warming the pod cache");
                cache.warm(images).await;
            }
        }
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
            backend: closer,
            exec_pools,
        })
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
        if tokio::time::timeout(grace, self.backend.close())
            .await
            .is_err()
        {
            tracing::warn!("the backend did not close within {grace:?}");
        }
    }
}
