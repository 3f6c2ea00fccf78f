//! The runner's Prometheus metrics, served by [`krm_fn::metrics`], and the
//! backend decorator that records pod starts.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use runner_core::backend::metrics::PoolMetrics;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct EvalLabels {
    image: String,
    outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ImageLabel {
    image: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

/// The `image` label value of calls for images the runner does not know.
pub const OTHER_IMAGES: &str = "other";

/// Most distinct `image` label values (each costs a counter per outcome and
/// a histogram).
pub const MAX_IMAGE_LABELS: usize = 1000;

/// The pod cache's figures at one instant, as the metrics show them
/// (`PodCache::figures` reads them from the cache's task).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheFigures {
    /// Calls handed a pod that was ready, and calls that waited for one.
    pub hits: u64,
    pub misses: u64,
    /// Pods starting, and pods ready.
    pub starting: i64,
    pub ready: i64,
}

/// The runner's metrics. Cache figures are read from the cache actor at
/// scrape time, so the warm path pays nothing for them.
pub struct RunnerMetrics {
    registry: Registry,
    /// Images with a label value of their own.
    labeled: std::sync::Mutex<std::collections::HashSet<String>>,
    evaluations: Family<EvalLabels, Counter>,
    latency: Family<ImageLabel, Histogram, fn() -> Histogram>,
    pod_starts: Family<OutcomeLabel, Counter>,
    pod_start_seconds: Histogram,
    cache_hits: Counter,
    cache_misses: Counter,
    pods: Family<StateLabel, Gauge>,
    pod_stops: Family<ReasonLabel, Counter>,
    builtin_evaluations: Family<BuiltinLabels, Counter>,
    /// 1 while the backend can start pods, 0 while it cannot.
    backend_ready: Gauge,
    /// What `backend_ready` shows, read at scrape time.
    backend_readiness: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuiltinLabels {
    function: String,
    outcome: String,
}

impl Default for RunnerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RunnerMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("function_runner");
        let evaluations = Family::<EvalLabels, Counter>::default();
        registry.register(
            "evaluations",
            "EvaluateFunction calls by image and outcome (gRPC code)",
            evaluations.clone(),
        );
        let latency: Family<ImageLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 18)));
        registry.register(
            "evaluation_duration_seconds",
            "EvaluateFunction latency by image",
            latency.clone(),
        );
        let pod_starts = Family::<OutcomeLabel, Counter>::default();
        registry.register("pod_starts", "Pod starts by outcome", pod_starts.clone());
        let pod_start_seconds = Histogram::new(exponential_buckets(0.005, 2.0, 16));
        registry.register(
            "pod_start_duration_seconds",
            "Time from pod start to SERVING",
            pod_start_seconds.clone(),
        );
        let cache_hits = Counter::default();
        registry.register(
            "cache_hits",
            "Calls served by a ready pod",
            cache_hits.clone(),
        );
        let cache_misses = Counter::default();
        registry.register(
            "cache_misses",
            "Calls that waited for a pod to start",
            cache_misses.clone(),
        );
        let pods = Family::<StateLabel, Gauge>::default();
        registry.register("pods", "Pods owned by this runner, by state", pods.clone());
        let pod_stops = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "pod_stops",
            "Pods this runner let go, by why: idle_ttl, template_changed, taken_away (another runner drains it, or it is deleted), start_given_up, shutdown, uninstalled (the runner's Deployment is deleted), max_pods (idle the longest when another function needed room), single_use (served its one call), pool_shrunk (its idle pool shrank or went), failed",
            pod_stops.clone(),
        );
        let builtin_evaluations = Family::<BuiltinLabels, Counter>::default();
        registry.register(
            "builtin_evaluations",
            "EvaluateFunction calls answered by a built-in function, by function and outcome (gRPC code)",
            builtin_evaluations.clone(),
        );
        let backend_ready = Gauge::default();
        backend_ready.set(1);
        registry.register(
            "backend_ready",
            "1 while the backend can start pods, 0 while it cannot (the kube backend: the API server refuses the runner a right it needs to list or start its pods; the runner's health is NOT_SERVING meanwhile)",
            backend_ready.clone(),
        );
        Self {
            backend_ready,
            backend_readiness: Default::default(),
            registry,
            labeled: Default::default(),
            evaluations,
            latency,
            pod_starts,
            pod_start_seconds,
            cache_hits,
            cache_misses,
            pods,
            pod_stops,
            builtin_evaluations,
        }
    }

    /// Serves the idle pools' series a backend keeps.
    /// Adds the span export's counters (`otel_spans_*`).
    pub fn register_export(&mut self, stats: &telemetry::ExportStats) {
        stats.register(&mut self.registry);
    }

    pub fn register_pools(&mut self, pools: PoolMetrics) {
        pools.register(&mut self.registry);
    }

    /// A pod start ended, after `took`: Ready or failed.
    pub fn observe_pod_start(&self, ready: bool, took: std::time::Duration) {
        let outcome = if ready { "ok" } else { "failed" };
        self.pod_starts
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
        if ready {
            self.pod_start_seconds.observe(took.as_secs_f64());
        }
    }

    /// The runner let go of a pod, for this reason
    /// ([`runner_core::backend::StopReason::as_str`]).
    pub fn observe_pod_stop(&self, reason: &str) {
        self.pod_stops
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// A call answered by a built-in function (also counted in
    /// `evaluations` by the server).
    pub(crate) fn observe_builtin(&self, function: &str, code: tonic::Code) {
        self.builtin_evaluations
            .get_or_create(&BuiltinLabels {
                function: function.to_string(),
                outcome: format!("{code:?}"),
            })
            .inc();
    }

    /// Counts a call. `image`: the image as its label value, for an image the
    /// runner knows (see the caller); `None` for any other name, which all
    /// share [`OTHER_IMAGES`], so that requests cannot grow the metrics
    /// without bound. Past [`MAX_IMAGE_LABELS`] distinct images, known ones
    /// share it too.
    pub(crate) fn observe_call(&self, image: Option<&str>, code: tonic::Code, started: Instant) {
        let image = match image {
            Some(image) if self.label_for(image) => image.to_string(),
            _ => OTHER_IMAGES.to_string(),
        };
        let outcome = format!("{code:?}");
        self.evaluations
            .get_or_create(&EvalLabels {
                image: image.clone(),
                outcome,
            })
            .inc();
        self.latency
            .get_or_create(&ImageLabel { image })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Whether `image` has (or may get) a label value of its own.
    fn label_for(&self, image: &str) -> bool {
        let mut labeled = self
            .labeled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if labeled.contains(image) {
            return true;
        }
        if labeled.len() >= MAX_IMAGE_LABELS {
            return false;
        }
        labeled.insert(image.to_string());
        true
    }

    /// `backend_ready` shows what `ready` says.
    pub fn follow_backend_ready(&self, ready: tokio::sync::watch::Receiver<bool>) {
        let _ = self.backend_readiness.set(ready);
    }

    /// The metrics text, with the cache's current figures.
    pub fn render(&self, cache: Option<CacheFigures>) -> String {
        if let Some(ready) = self.backend_readiness.get() {
            self.backend_ready.set(i64::from(*ready.borrow()));
        }
        if let Some(cache) = cache {
            // Counters only move forward: set them to the actor's totals.
            let hits = cache.hits.saturating_sub(self.cache_hits.get());
            self.cache_hits.inc_by(hits);
            let misses = cache.misses.saturating_sub(self.cache_misses.get());
            self.cache_misses.inc_by(misses);
            self.pods
                .get_or_create(&StateLabel {
                    state: "starting".into(),
                })
                .set(cache.starting);
            self.pods
                .get_or_create(&StateLabel {
                    state: "ready".into(),
                })
                .set(cache.ready);
        }
        krm_fn::metrics::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #31 item 1: the backend's readiness is in the metrics, read at each
    /// scrape; 1 when the backend cannot tell.
    #[test]
    fn backend_ready_follows_the_backends_readiness() {
        let metrics = RunnerMetrics::new();
        assert!(metrics
            .render(None)
            .contains("function_runner_backend_ready 1"));
        let (ready, readiness) = tokio::sync::watch::channel(false);
        metrics.follow_backend_ready(readiness);
        assert!(metrics
            .render(None)
            .contains("function_runner_backend_ready 0"));
        ready.send_replace(true);
        assert!(metrics
            .render(None)
            .contains("function_runner_backend_ready 1"));
    }
}
