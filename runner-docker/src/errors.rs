//! Why the docker backend could not be set up, and why a pod did not start.

use std::path::PathBuf;
use std::time::Duration;

/// Why the docker backend could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DockerSetupError {
    #[error("no Docker engine answers (DOCKER_HOST, else /var/run/docker.sock): {0}")]
    Engine(#[source] bollard::errors::Error),
    #[error("--docker-socket-dir {}: {reason}", .path.display())]
    SocketDir { path: PathBuf, reason: String },
}

/// Why a docker pod did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the wrapper image {image:?} is not in the Docker engine (build it: ./build-images.sh, or set --wrapper-server-image): {source}")]
    WrapperImage {
        image: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("no wrapper-server for the function container: the wrapper image {image:?} is not in the Docker engine, and {host} (put the static wrapper-server and health-probe beside function-runner, build the image: ./build-images.sh, or set --wrapper-server-image)")]
    NoTools { image: String, host: String },
    #[error("the image is not in the Docker engine and pulling it failed: {0}")]
    Pull(#[source] bollard::errors::Error),
    #[error("inspecting the image: {0}")]
    Inspect(#[source] bollard::errors::Error),
    #[error("the image has no Entrypoint and no Cmd: there is no function to run (kpt runs an image's Entrypoint; give it one)")]
    NoCommand,
    #[error("{what}: {source}")]
    Engine {
        what: &'static str,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("the init container (wrapper image {image:?}) failed{}: {log}", code.map(|c| format!(" with exit code {c}")).unwrap_or_default())]
    Install {
        image: String,
        code: Option<i64>,
        log: String,
    },
    #[error("the init container did not finish within {timeout:?}")]
    InstallTimeout { timeout: Duration },
    #[error("making the socket directory {}: {source}", .path.display())]
    SocketDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the socket directory {}: {reason}", .path.display())]
    Confinement { path: PathBuf, reason: String },
    #[error("the container's output ended before the wrapper listened")]
    NoAddress,
    #[error("health: {0}")]
    Health(String),
    #[error("{reason} while starting; its log: {log}")]
    Exited { reason: String, log: String },
    #[error("{0}")]
    Died(String),
    #[error("resources: {0}")]
    Resources(String),
    #[error("--mount: {0}")]
    Mount(String),
    #[error("timed out")]
    Timeout,
}
