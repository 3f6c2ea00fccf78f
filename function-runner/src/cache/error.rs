//! Why the cache could not hand out a pod, and the gRPC code each reason
//! decides.

use runner_core::backend::BackendError;

/// Why the cache could not hand out a pod.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CacheError {
    /// Starting the pod failed; every caller waiting for it gets this. (The
    /// backend's error names the image.)
    #[error("{source}")]
    PodStart {
        image: String,
        #[source]
        source: BackendError,
    },
    /// [`PodCache::shutdown`] was called.
    #[error("the pod cache is shutting down")]
    ShuttingDown,
    /// `--max-pods` pods exist and none is idle: no room for another.
    #[error(
        "no pod for {image}: all {max} pods the runner may have (--max-pods) are busy with calls"
    )]
    Full { image: String, max: usize },
    /// The cache task ended (it panicked); nothing can be served.
    #[error("the pod cache task is gone")]
    ActorGone,
}

impl CacheError {
    /// The gRPC code this error decides, walking its causes: the first that
    /// decides one wins (`None`: none does).
    pub fn code(&self) -> Option<tonic::Code> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(err) = cause {
            if let Some(err) = err.downcast_ref::<CacheError>() {
                match err {
                    CacheError::ShuttingDown => return Some(tonic::Code::Unavailable),
                    CacheError::Full { .. } => return Some(tonic::Code::ResourceExhausted),
                    CacheError::PodStart { .. } | CacheError::ActorGone => {}
                }
            }
            match err.downcast_ref::<BackendError>() {
                Some(BackendError::UnknownImage { .. }) => return Some(tonic::Code::NotFound),
                // The runner cannot start pods now (and says NOT_SERVING):
                // another replica, or a later try, may.
                Some(BackendError::Refused { .. }) => return Some(tonic::Code::Unavailable),
                _ => {}
            }
            cause = err.source();
        }
        None
    }
}
