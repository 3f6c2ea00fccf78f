//! The idle pools' Prometheus series (podExecutor `idlePods`): kept by the
//! backend that keeps the pools, registered and served by the runner.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ImageLabel {
    image: String,
}

/// The idle pools' figures (podExecutor `idlePods`), kept by the backend
/// that keeps the pools. Cheap to clone: every clone updates the same
/// series.
#[derive(Clone)]
pub struct PoolMetrics {
    size: Family<ImageLabel, Gauge>,
    idle: Family<ImageLabel, Gauge>,
    claims: Family<ImageLabel, Counter>,
    misses: Family<ImageLabel, Counter>,
    replacement_seconds: Histogram,
}

impl Default for PoolMetrics {
    /// Series of their own, registered nowhere (tests, and `eval`).
    fn default() -> Self {
        PoolMetrics {
            size: Family::default(),
            idle: Family::default(),
            claims: Family::default(),
            misses: Family::default(),
            replacement_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 16)),
        }
    }
}

impl PoolMetrics {
    /// Registers the series in the runner's registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "pool_size",
            "Idle pods wanted per pooled function (podExecutor idlePods)",
            self.size.clone(),
        );
        registry.register(
            "pool_idle_pods",
            "Idle pods per pooled function: started, Ready and unclaimed",
            self.idle.clone(),
        );
        registry.register(
            "pool_claims",
            "Pods claimed from a function's idle pool",
            self.claims.clone(),
        );
        registry.register(
            "pool_misses",
            "Claims that found the pool empty and waited for its next pod",
            self.misses.clone(),
        );
        registry.register(
            "pool_replacement_duration_seconds",
            "Time from a pool pod's start to Ready",
            self.replacement_seconds.clone(),
        );
    }

    fn label(image: &str) -> ImageLabel {
        ImageLabel {
            image: image.to_string(),
        }
    }

    /// The pool of `image` wants `size` idle pods and has `idle`.
    pub fn set(&self, image: &str, size: usize, idle: usize) {
        let label = Self::label(image);
        self.size.get_or_create(&label).set(size as i64);
        self.idle.get_or_create(&label).set(idle as i64);
    }

    /// The pool of `image` went: its series go too.
    pub fn remove(&self, image: &str) {
        let label = Self::label(image);
        self.size.remove(&label);
        self.idle.remove(&label);
    }

    /// A claim on the pool of `image` begins.
    pub fn claimed(&self, image: &str) {
        self.claims.get_or_create(&Self::label(image)).inc();
    }

    /// A claim on the pool of `image` found none idle: it waits.
    pub fn missed(&self, image: &str) {
        self.misses.get_or_create(&Self::label(image)).inc();
    }

    /// A pool pod became Ready this long after its start.
    pub fn replaced(&self, took: std::time::Duration) {
        self.replacement_seconds.observe(took.as_secs_f64());
    }

    /// (claims, misses) of `image`, for tests.
    pub fn claims_of(&self, image: &str) -> (u64, u64) {
        let label = Self::label(image);
        (
            self.claims.get_or_create(&label).get(),
            self.misses.get_or_create(&label).get(),
        )
    }
}
