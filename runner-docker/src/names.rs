//! The names this backend gives what it makes: the labels on its
//! containers and volumes, and the paths in a function container where the
//! wrapper's tools and socket are mounted.

/// Marks everything this backend creates.
pub const MANAGED_LABEL: &str = "krm-fn.dev/managed";
/// The runner instance that created it.
pub const RUNNER_LABEL: &str = "krm-fn.dev/runner";
/// The function image a container serves.
pub const IMAGE_LABEL: &str = "krm-fn.dev/image";
/// The host directory of a container's socket.
pub const SOCKET_DIR_LABEL: &str = "krm-fn.dev/socket-dir";
/// The socket directory of the runner that made it: a runner sweeps only
/// what runners of its own socket directory left, whose locks it can see.
pub const SOCKET_ROOT_LABEL: &str = "krm-fn.dev/socket-root";
/// On a kept-warm container: the fingerprint a reuser must match.
pub const KEEP_WARM_LABEL: &str = "krm-fn.dev/keep-warm";

/// Where the tools volume is mounted in every container.
pub(crate) const TOOLS_DIR: &str = "/wrapper-server-tools";
/// Where a pod's socket directory is mounted in its container.
pub(crate) const SOCKET_MOUNT: &str = "/krm-fn";
pub(crate) const SOCKET_NAME: &str = "wrapper.sock";
