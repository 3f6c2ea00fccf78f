//! A pod handed out: the lease a call holds while it uses the pod, which
//! gives the pod's load back when dropped, whatever the reason.

use std::fmt;
use std::sync::Arc;

use runner_core::backend::PodId;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::Channel;

use super::error::CacheError;

/// What every lease of one pod shares: created once when the pod is ready.
pub(super) struct PodShared {
    pub(super) image: Arc<str>,
    /// Unique per pod and cache; a release names its pod by it, so a lease on
    /// an evicted pod can never touch a newer pod.
    pub(super) serial: u64,
    pub(super) id: PodId,
    pub(super) endpoint: String,
    /// One HTTP/2 connection per pod, shared by all callers.
    pub(super) channel: Channel,
    pub(super) releases: mpsc::UnboundedSender<Arc<PodShared>>,
}

/// The right to send calls to one pod. Counts 1 against the pod's load until
/// dropped, whatever the reason for the drop.
pub struct PodLease {
    pub(super) pod: Arc<PodShared>,
    /// False only for a lease the actor could not deliver and took back itself.
    armed: bool,
}

impl PodLease {
    pub(super) fn new(pod: Arc<PodShared>) -> Self {
        PodLease { pod, armed: true }
    }

    /// Where the pod serves EvaluateFunction (`http://127.0.0.1:40123`).
    pub fn endpoint(&self) -> &str {
        &self.pod.endpoint
    }

    /// The pod, as named by the backend; pass it to [`PodCache::evict`].
    pub fn pod_id(&self) -> &PodId {
        &self.pod.id
    }

    /// The function image this pod serves.
    pub fn image(&self) -> &str {
        &self.pod.image
    }

    /// The pod's channel (connected lazily, shared by all its leases).
    pub fn channel(&self) -> Channel {
        self.pod.channel.clone()
    }

    /// Drops the lease without a release message; the actor already
    /// accounted for it.
    pub(super) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for PodLease {
    fn drop(&mut self) {
        if self.armed {
            // The actor being gone is fine: nobody counts load any more.
            let _ = self.pod.releases.send(Arc::clone(&self.pod));
        }
    }
}

impl fmt::Debug for PodLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodLease")
            .field("image", &self.pod.image)
            .field("pod", &self.pod.id)
            .field("endpoint", &self.pod.endpoint)
            .finish()
    }
}

pub(super) type Reply = oneshot::Sender<Result<PodLease, CacheError>>;
