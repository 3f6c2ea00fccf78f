//! The runner's Kubernetes backend: function pods in a cluster, a Pod and a
//! ClusterIP Service per pod, with Porch's names, labels and annotations
//! ([`template`]), running the function image's own entrypoint
//! ([`entrypoint`]) behind the wrapper; images from private registries are
//! read, and pulled, with credentials and a CA ([`registry`]). Beside the
//! pods, the FunctionConfig objects of the cluster: their CRD ([`crd`]) and
//! the watch that applies them live ([`config_watch`]).
//!
//! The runner (`function-runner`) uses this crate only through
//! [`runner_core::backend::Backend`] and the FunctionConfig index it
//! publishes to, so a reader or a build of the runner without this backend
//! never sees kube-rs.

pub mod access;
pub mod backoff;
pub mod config_watch;
mod connect;
pub mod crd;
pub mod entrypoint;
#[cfg(test)]
mod fake_api;
pub mod lifecycle;
mod names;
pub mod owner;
pub mod pods;
pub mod registry;
pub mod source;
pub mod template;

pub use connect::{connect, ConnectError, Connected};
pub use names::*;
