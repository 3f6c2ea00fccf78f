//! How the backend is set up: its settings, and the tools its function
//! containers may be given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::options::ContainerOptions;

/// The init image built from `Dockerfile` by `./build-images.sh`.
pub const DEFAULT_WRAPPER_IMAGE: &str = "wrapper-server:dev";

/// How the docker backend is set up.
#[derive(Debug, Clone)]
pub struct DockerSettings {
    /// The init image (`Dockerfile`): `wrapper-server install DIR` as its
    /// entrypoint, as named by the user (`--wrapper-server-image`). `None`:
    /// [`DEFAULT_WRAPPER_IMAGE`] if the engine has it, else the binaries in
    /// `tools_dir` ([`choose_tools`](crate::choose_tools)).
    pub wrapper_image: Option<String>,
    /// Where `wrapper-server` and `health-probe` are looked for when no
    /// wrapper image is named or present: beside this program by default.
    pub tools_dir: PathBuf,
    /// The tools, already chosen by the caller (`eval` says which before it
    /// starts); `None`: the backend chooses when it is set up.
    pub tools: Option<Tools>,
    /// The host directory under which each pod gets its socket directory.
    pub socket_dir: PathBuf,
    /// Largest gRPC message, both directions (the wrapper's flag).
    pub max_message_bytes: usize,
    /// `eval --keep-warm`: pods outlive the runner, reusable, for this long
    /// after their last call.
    pub keep_warm: Option<Duration>,
    /// `eval`'s `-e`, `--mount`, `--network`, `--as-current-user` and
    /// `render --allow-network`: none by default.
    pub container: ContainerOptions,
}

impl Default for DockerSettings {
    fn default() -> Self {
        DockerSettings {
            wrapper_image: None,
            tools_dir: runner_core::backend::binaries_dir(),
            tools: None,
            socket_dir: Self::default_socket_dir(),
            max_message_bytes: proto::DEFAULT_MAX_MESSAGE_BYTES,
            keep_warm: None,
            container: ContainerOptions::default(),
        }
    }
}

impl DockerSettings {
    /// The default socket directory: private to this user, in the temporary
    /// directory.
    pub fn default_socket_dir() -> PathBuf {
        std::env::temp_dir().join(format!(
            "krm-fn-docker-{}",
            rustix::process::geteuid().as_raw()
        ))
    }
}

/// Where the tools come from; see [`crate::tools`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tools {
    /// Installed by this init image into a volume.
    Image(String),
    /// Bind-mounted from this host.
    Host { wrapper: PathBuf, probe: PathBuf },
    /// Neither: no wrapper image in the engine and no usable binaries beside
    /// this program (why not). The first start fails with it.
    Missing { image: String, host: String },
}

impl std::fmt::Display for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tools::Image(image) => write!(f, "wrapper-server from the image {image}"),
            Tools::Host { wrapper, .. } => write!(
                f,
                "wrapper-server and health-probe from {} (mounted read-only; no wrapper image in the engine)",
                wrapper.parent().unwrap_or(Path::new("/")).display()
            ),
            Tools::Missing { image, host } => write!(
                f,
                "no wrapper-server for function containers: the image {image} is not in the engine and {host}"
            ),
        }
    }
}
