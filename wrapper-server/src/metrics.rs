//! Prometheus metrics of the wrapper, and a minimal `/metrics` HTTP endpoint
//! (also used by the function runner) so no HTTP server stack is pulled in.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How one EvaluateFunction call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    FunctionFailed,
    InvalidOutput,
    StartFailed,
    DeadlineExceeded,
    Cancelled,
    OutputTooLarge,
    Busy,
    ShuttingDown,
    /// The request itself was refused: over the size limit, or not a
    /// well-formed EvaluateFunctionRequest.
    RequestRejected,
    Internal,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::FunctionFailed => "function_failed",
            Outcome::InvalidOutput => "invalid_output",
            Outcome::StartFailed => "start_failed",
            Outcome::DeadlineExceeded => "deadline_exceeded",
            Outcome::Cancelled => "cancelled",
            Outcome::OutputTooLarge => "output_too_large",
            Outcome::Busy => "busy",
            Outcome::ShuttingDown => "shutting_down",
            Outcome::RequestRejected => "request_rejected",
            Outcome::Internal => "internal",
        }
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        encoder.write_str(self.as_str())
    }
}

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
        Self {
            registry,
            evaluations,
            duration,
            in_flight,
            input_bytes,
            output_bytes,
        }
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

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
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

/// A registry in Prometheus' text exposition format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// Renders the metrics text for one scrape.
pub type Render = Arc<dyn Fn() -> futures::future::BoxFuture<'static, String> + Send + Sync>;

/// A [`Render`] of the wrapper's own metrics.
pub fn render_with(metrics: Arc<Metrics>) -> Render {
    Arc::new(move || {
        let text = metrics.encode();
        Box::pin(async move { text })
    })
}

/// Serves `GET /metrics` (any path, in fact) over plain HTTP/1.1 until
/// `shutdown` resolves. `render` is called per scrape.
pub async fn serve_http<F>(listener: TcpListener, render: Render, shutdown: F)
where
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    loop {
        let (mut stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    tracing::warn!(%err, "metrics: accept failed");
                    continue;
                }
            },
        };
        let render = render.clone();
        tokio::spawn(async move {
            // Read the request head (bounded); its content does not matter.
            let mut head = Vec::with_capacity(1024);
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            })
            .await;
            if read != Ok(true) {
                return;
            }
            let (status, body) = if head.starts_with(b"GET ") {
                ("200 OK", render().await)
            } else {
                (
                    "405 Method Not Allowed",
                    String::from("only GET is served\n"),
                )
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
