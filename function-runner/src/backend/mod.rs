//! Backends create and delete the "pods" that serve one function image each.
//!
//! A pod is anything that serves `evaluator.FunctionEvaluator` and gRPC health
//! on an address the runner can reach: a `wrapper-server` child process on a
//! loopback port (`process`, the embedded default), a Docker container
//! (`docker`) or a Kubernetes Pod behind a ClusterIP Service (`kube`).
//!
//! The pod cache owns all bookkeeping; a backend only does the side effects
//! and reports a pod's death on the event channel it was given.

pub mod process;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

/// Identifies one pod across its whole life. Unique within a runner process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(pub String);

impl fmt::Display for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the cache asks a backend to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSpec {
    /// The fully qualified function image (registry/name:tag or @digest).
    pub image: String,
    /// How long `start` may take before the pod counts as failed.
    pub ready_timeout: Duration,
}

/// A pod that answered SERVING on its health service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyPod {
    pub id: PodId,
    /// Where EvaluateFunction is served, as a URI (`http://127.0.0.1:40123`).
    pub endpoint: String,
}

/// A pod event the backend reports after `start` returned: the pod died or
/// was deleted by someone else. The cache evicts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    Failed { id: PodId, reason: String },
}

/// Why a backend could not start or stop a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("no function is known for image {image:?}: {reason}")]
    UnknownImage { image: String, reason: String },
    #[error("pod for {image:?} did not become ready within {timeout:?}: {detail}")]
    ReadyTimeout {
        image: String,
        timeout: Duration,
        detail: String,
    },
    #[error("pod for {image:?} failed to start: {reason}")]
    StartFailed { image: String, reason: String },
    #[error("deleting pod {id}: {reason}")]
    StopFailed { id: PodId, reason: String },
}

/// The side effects of pod management. Object safe so that `serve` can pick
/// a backend at run time.
pub trait Backend: Send + Sync + 'static {
    /// Short name for logs and metrics (`process`, `docker`, `kube`).
    fn name(&self) -> &'static str;

    /// Starts a pod for `spec.image` and resolves once its health service
    /// says SERVING (no fixed sleeps), or with an error once it failed or
    /// `spec.ready_timeout` passed. A pod that fails to become ready must be
    /// cleaned up by the backend before the error is returned.
    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>>;

    /// Deletes a pod. Deleting a pod that is already gone is success.
    fn stop(&self, id: PodId) -> BoxFuture<'static, Result<(), BackendError>>;

    /// Hands the backend the channel on which it reports pods that died
    /// after `start` returned. Called once, before the first `start`.
    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>);
}
