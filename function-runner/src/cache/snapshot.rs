//! The cache's state at one instant, as its task reports it: for the
//! metrics and the tests.

use runner_core::backend::PodId;
use tokio::time::Instant;

/// What a pod is doing, as shown in a [`CacheSnapshot`]. Failed pods are not
/// listed: a failure removes the pod from the cache at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// `Backend::start` has not answered yet.
    Starting,
    /// Serving; leases are handed out on it.
    Ready,
}

/// One pod in a [`CacheSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSnapshot {
    /// `None` while starting: the backend names the pod when it is ready.
    pub id: Option<PodId>,
    pub state: PodState,
    /// Leases out (ready) or live waiters (starting).
    pub load: usize,
    /// When the GC may delete the pod once idle; `None` while starting.
    pub expiry: Option<Instant>,
}

/// The pods of one image in a [`CacheSnapshot`], in creation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSnapshot {
    pub image: String,
    pub pods: Vec<PodSnapshot>,
    /// Callers waiting for a pod of this image to start.
    pub waiters: usize,
}

/// Totals since the cache started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// `Backend::start` calls.
    pub pod_starts: u64,
    /// Starts that failed (or were not answered in time).
    pub pod_start_failures: u64,
    /// Calls served at once by a ready pod.
    pub hits: u64,
    /// Calls that had to wait for a pod to start.
    pub misses: u64,
    /// Pods removed because they failed or a caller saw UNAVAILABLE.
    pub evictions: u64,
    /// Pods deleted by the GC because their TTL passed.
    pub gc_deletions: u64,
}

/// The cache's state at one instant, for tests and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheSnapshot {
    /// Sorted by image.
    pub images: Vec<ImageSnapshot>,
    pub counters: CacheCounters,
    pub shutting_down: bool,
}

impl CacheSnapshot {
    /// The entry of `image`, if the cache has pods for it.
    pub fn image(&self, image: &str) -> Option<&ImageSnapshot> {
        self.images.iter().find(|i| i.image == image)
    }
}
