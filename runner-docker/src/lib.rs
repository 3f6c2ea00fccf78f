//! The `docker` backend: each "pod" is a container of the function's own
//! image on the local Docker engine, with `wrapper-server` as its
//! entrypoint, as a Kubernetes pod of Porch's is.
//!
//! # A pod
//! - **Tools.** An init container from the wrapper image runs `wrapper-server
//!   install /wrapper-server-tools` into a volume. The tools are the same for
//!   every pod, so one volume per runner holds them, installed once (at the
//!   first start), and every function container mounts it read-only. With
//!   no wrapper image named and none in the engine, the static binaries
//!   beside this program are bind-mounted read-only instead ([`tools`]).
//! - **The function container**: the function's image, entrypoint
//!   `/wrapper-server-tools/wrapper-server`, and after `--` the image's own
//!   Entrypoint and Cmd (from the engine's image inspect). Stricter than `kpt
//!   fn eval`'s `docker run`: no network, user 65534 (kpt's `nobody`, by
//!   number, so images without /etc/passwd work), no new privileges, no
//!   capabilities, a read-only root filesystem with a tmpfs `/tmp`; memory
//!   and CPU from the FunctionConfig's `templateOverrides.container.resources`.
//!   `eval`'s kpt flags ([`ContainerOptions`]) add an environment and
//!   mounts, or give it the host's network or the caller's user.
//! - **Reached through a Unix socket**: with no network, the wrapper listens
//!   on `wrapper.sock` in a host directory (one per pod, under
//!   `--docker-socket-dir`) mounted into the container; the runner dials
//!   `unix:` that path. The engine must be local (it bind-mounts a path of
//!   this host).
//! - **Ready** once the wrapper printed its address (read from the attached
//!   stdout) and its health Watch says SERVING. **Failed** when the container
//!   exits or is OOM-killed, from the engine's events stream (no polling);
//!   a container that exits while starting fails the start with its exit
//!   code and the end of its log.
//!
//! # What is left behind, and who removes it
//! Everything is labelled `krm-fn.dev/managed` and with the runner instance
//! that made it. A runner holds a lock file (`flock`) in its own directory
//! under the socket directory for its whole life, so another runner can tell
//! a live one from a crashed one without guessing from time. Stopping a pod
//! removes its container and directory; a runner's exit removes its tools
//! volume; and at start a runner removes what crashed runners left (their
//! lock is free): containers, volumes, directories.
//!
//! # Kept warm (`eval --keep-warm`)
//! Pods made with a keep-warm duration are not stopped when the runner lets
//! go of them: they stay for a later `eval` to find by label (image and a
//! fingerprint of everything that shaped the container) and reuse, and exit
//! by themselves once unused that long (`wrapper-server --exit-after-idle`),
//! the engine then removing them (AutoRemove). Their tools volume and
//! directory go with the next sweep after they are gone.

// The backend, and the jobs it does on its shared state.
mod backend;
mod events;
mod start;
mod state;
mod sweep;

// Below them: the settings and names, the tools, the function container's
// options and resources, and the engine and the host.
mod connect;
mod engine;
mod errors;
mod host;
mod names;
mod options;
mod resources;
mod settings;
pub mod tools;

pub use backend::DockerBackend;
pub use bollard::Docker;
pub use connect::{connect, engine_host};
pub use errors::{DockerSetupError, StartError};
pub use names::{
    IMAGE_LABEL, KEEP_WARM_LABEL, MANAGED_LABEL, RUNNER_LABEL, SOCKET_DIR_LABEL, SOCKET_ROOT_LABEL,
};
pub use options::{ContainerOptions, StorageMount};
pub use settings::{DockerSettings, DEFAULT_WRAPPER_IMAGE};
pub use start::DEFAULT_PIDS_LIMIT;
pub use tools::{choose_tools, Tools};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
