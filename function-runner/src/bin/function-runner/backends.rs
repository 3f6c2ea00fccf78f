//! The backends as `serve`, `eval` and `render` build them, each from its
//! own settings, checked by its own constructor: the process and docker
//! backends behind idle pools kept by this runner (their pods are its
//! alone); the kube backend keeps its pools in the cluster.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use function_runner::backend::process::{FunctionMap, ProcessBackend};
use runner_core::backend::metrics::PoolMetrics;
use runner_core::backend::pool::Pooled;
use runner_core::backend::Backend;
use runner_docker::{Docker, DockerBackend, DockerSettings};

/// Which backend creates pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendKind {
    /// Each pod is a wrapper-server child process on a loopback port.
    Process,
    /// Each pod is a Kubernetes Pod with a ClusterIP Service.
    Kube,
    /// Each pod is a container of the function's image on the local Docker
    /// engine.
    Docker,
}

/// How long the Docker engine may take to answer at start.
const DOCKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `--process-functions`' map of images to the commands they run, if
/// given.
pub(crate) fn function_map(path: Option<&Path>) -> anyhow::Result<FunctionMap> {
    match path {
        Some(path) => Ok(FunctionMap::load(path).context("--process-functions")?),
        None => Ok(FunctionMap::Unset),
    }
}

/// Pods as `wrapper` child processes (default: the one beside this
/// program) running what `functions` maps their image to, with `env` added
/// to their environment.
pub(crate) fn process(
    wrapper: Option<PathBuf>,
    functions: FunctionMap,
    max_message_bytes: usize,
    env: Vec<(String, String)>,
) -> Arc<dyn Backend> {
    let wrapper = wrapper.unwrap_or_else(ProcessBackend::default_wrapper_path);
    let process = ProcessBackend::new(wrapper, functions, max_message_bytes).with_env(env);
    Arc::new(Pooled::new(Arc::new(process), PoolMetrics::default()))
}

/// Pods as containers on the Docker engine `engine` (connected here if not
/// given).
pub(crate) async fn docker(
    engine: Option<Docker>,
    settings: DockerSettings,
) -> anyhow::Result<Arc<dyn Backend>> {
    let setup = async {
        let engine = match engine {
            Some(engine) => engine,
            None => runner_docker::connect(DOCKER_CONNECT_TIMEOUT).await?,
        };
        DockerBackend::new(engine, settings).await
    };
    let docker = setup.await.context("--backend docker")?;
    Ok(Arc::new(Pooled::new(
        Arc::new(docker),
        PoolMetrics::default(),
    )))
}
