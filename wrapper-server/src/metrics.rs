//! Prometheus metrics of the wrapper; [`krm_fn::metrics`] serves them.

use std::sync::Arc;
use std::time::Instant;

pub use krm_fn::call::Outcome;
use krm_fn::metrics::{encode, Render};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: Outcome,
}

/// The wrapper's metrics, registered in [`Metrics::registry`].
pub struct Metrics {
    registry: Registry,
    evaluations: Family<OutcomeLabel, Counter>,
    duration: Histogram,
    in_flight: Gauge,
    input_bytes: Counter,
    output_bytes: Counter,
    prespawned: Gauge,
    /// Where `prespawned` is read from when the metrics are encoded.
    pool: std::sync::OnceLock<Arc<krm_fn::prespawn::Pool>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("wrapper_server");
        let evaluations = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "evaluations",
            "EvaluateFunction calls by outcome",
            evaluations.clone(),
        );
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 18));
        registry.register(
            "evaluation_duration_seconds",
            "Wall time of EvaluateFunction calls",
            duration.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "evaluations_in_flight",
            "Calls running now",
            in_flight.clone(),
        );
        let input_bytes = Counter::default();
        registry.register(
            "input_bytes",
            "ResourceList bytes received",
            input_bytes.clone(),
        );
        let output_bytes = Counter::default();
        registry.register(
            "output_bytes",
            "ResourceList bytes returned",
            output_bytes.clone(),
        );
        let prespawned = Gauge::default();
        registry.register(
            "prespawned_processes",
            "Function processes started and waiting for a call (--prespawn)",
            prespawned.clone(),
        );
        Self {
            registry,
            prespawned,
            pool: std::sync::OnceLock::new(),
            evaluations,
            duration,
            in_flight,
            input_bytes,
            output_bytes,
        }
    }

    /// [`Metrics::new`], with the span export's counters when tracing is on.
    pub fn with_telemetry(telemetry: &telemetry::Telemetry) -> Self {
        let mut metrics = Self::new();
        if telemetry.tracing() {
            telemetry.stats().register(&mut metrics.registry);
        }
        metrics
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Starts accounting for one call. If the returned guard is dropped
    /// before [`CallMetrics::finish`] (the client went away), the call counts
    /// as cancelled.
    pub fn start_call(self: &Arc<Self>, input_bytes: usize) -> CallMetrics {
        self.in_flight.inc();
        self.input_bytes.inc_by(input_bytes as u64);
        CallMetrics {
            metrics: self.clone(),
            started: Instant::now(),
            input_bytes,
            finished: false,
        }
    }

    /// Reports the waiting processes of `pool` (the gauge).
    pub fn watch_prespawn(&self, pool: Arc<krm_fn::prespawn::Pool>) {
        let _ = self.pool.set(pool);
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        if let Some(pool) = self.pool.get() {
            self.prespawned
                .set(i64::try_from(pool.waiting()).unwrap_or(i64::MAX));
        }
        encode(&self.registry)
    }
}

/// One call's accounting; see [`Metrics::start_call`].
pub struct CallMetrics {
    metrics: Arc<Metrics>,
    started: Instant,
    input_bytes: usize,
    finished: bool,
}

impl CallMetrics {
    pub fn finish(&mut self, outcome: Outcome, output_bytes: usize) {
        if self.finished {
            return;
        }
        self.finished = true;
        let m = &self.metrics;
        m.in_flight.dec();
        m.output_bytes.inc_by(output_bytes as u64);
        m.evaluations.get_or_create(&OutcomeLabel { outcome }).inc();
        m.duration.observe(self.started.elapsed().as_secs_f64());
    }

    pub fn input_bytes(&self) -> usize {
        self.input_bytes
    }

    /// Counts input that became known after the call started (a streamed
    /// request's ResourceList).
    pub fn add_input_bytes(&mut self, n: usize) {
        self.input_bytes += n;
        self.metrics.input_bytes.inc_by(n as u64);
    }
}

impl Drop for CallMetrics {
    fn drop(&mut self) {
        if !self.finished {
            tracing::info!(
                outcome = "cancelled",
                "client went away; function processes killed"
            );
            self.finish(Outcome::Cancelled, 0);
        }
    }
}

/// A [`Render`] of the wrapper's own metrics.
pub fn render_with(metrics: Arc<Metrics>) -> Render {
    Arc::new(move || {
        let text = metrics.encode();
        Box::pin(async move { text })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use krm_fn::metrics::serve_http;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn metrics_are_served_over_http() {
        let metrics = Arc::new(Metrics::new());
        metrics.start_call(10).finish(Outcome::Ok, 20);
        drop(metrics.start_call(5)); // cancelled
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_http(listener, render_with(metrics.clone()), async {
            let _ = rx.await;
        }));
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        conn.read_to_string(&mut text).await.unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.contains("wrapper_server_evaluations_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("wrapper_server_evaluations_total{outcome=\"cancelled\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("wrapper_server_input_bytes_total 15"),
            "{text}"
        );
        assert!(
            text.contains("wrapper_server_output_bytes_total 20"),
            "{text}"
        );
        assert!(
            text.contains("wrapper_server_evaluations_in_flight 0"),
            "{text}"
        );
        assert!(
            text.contains("wrapper_server_evaluation_duration_seconds_count 2"),
            "{text}"
        );
        tx.send(()).unwrap();
        server.await.unwrap();
    }
}
