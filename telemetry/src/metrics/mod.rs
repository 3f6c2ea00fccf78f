//! `OTEL_METRICS_EXPORTER=otlp`: the binaries' Prometheus metrics, pushed
//! to an OTLP collector every `OTEL_METRIC_EXPORT_INTERVAL` milliseconds.
//!
//! The binaries keep their metrics in prometheus-client registries, which
//! the Prometheus endpoint renders as text. Rather than keep a second set
//! of instruments at every place a metric moves, the push reads that same
//! text: a [`Source`] renders it, [`text`] parses it, and one observable
//! instrument per series (registered from the text read at start) reports
//! the latest values when the SDK's `PeriodicReader` collects.
//!
//! The mapping, which keeps the Prometheus names so that a collector that
//! exports to Prometheus gives back the names the endpoint shows:
//!
//! | Prometheus family `x`         | OTel instrument(s)                          |
//! |-------------------------------|---------------------------------------------|
//! | counter (`x_total`)           | `x`, ObservableCounter (f64)                |
//! | gauge, unknown, stateset      | `x`, ObservableGauge (f64)                  |
//! | info (`x_info`)               | `x_info`, ObservableGauge                   |
//! | histogram                     | `x_bucket` (attribute `le`), `x_sum`, `x_count`: ObservableCounters of the cumulative series |
//! | summary                       | `x` (attribute `quantile`), ObservableGauge; `x_sum`, `x_count`, ObservableCounters |
//! | gaugehistogram                | `x_bucket`, `x_gsum`, `x_gcount`, ObservableGauges |
//!
//! Labels are attributes; `_created` samples, exemplars and timestamps are
//! not sent; nor are values that are not finite (NaN, ±Inf: OTLP/JSON
//! cannot carry them and a counter cannot be one). The instruments are
//! registered from the text read at start, and again each interval for
//! families first seen later (prometheus-client writes nothing of a
//! labelled family before its first series): such a family is pushed from
//! the interval after it appears. A family whose type changes keeps its
//! first instruments, which then report nothing. A name OpenTelemetry does
//! not allow (a `:` in it) is skipped.
//!
//! Export never holds a call up: the reader collects and exports on a
//! thread of its own; the source is rendered as a task on the runtime
//! (bounded wait); the exporter's requests run with the runtime's reactor
//! (tonic's and hyper's clients need it); a failure is said once per change
//! of state.

pub mod text;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use opentelemetry::metrics::{AsyncInstrument, MeterProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::Resource;

use crate::{env, Error};
use text::{Exposition, Family, Kind};

/// Renders the current metrics text (Prometheus / OpenMetrics). The same
/// type as the binaries' `krm_fn::metrics::Render`.
pub type Source = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = String> + Send>> + Send + Sync>;

/// How long one rendering of the source may take.
const RENDER_TIMEOUT: Duration = Duration::from_secs(2);

/// `OTEL_METRIC_EXPORT_INTERVAL`'s default (the specification's).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The push, from [`MetricsPush::start`] until [`MetricsPush::shutdown`].
pub struct MetricsPush {
    provider: SdkMeterProvider,
    stopped: AtomicBool,
    /// Registers the families that appear after the start.
    watch: tokio::task::JoinHandle<()>,
    bridge: Arc<Mutex<Bridge>>,
    source: Source,
}

impl std::fmt::Debug for MetricsPush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsPush").finish_non_exhaustive()
    }
}

impl MetricsPush {
    /// Starts pushing what `source` renders over OTLP with `protocol`;
    /// endpoint, headers, timeout and compression from the
    /// `OTEL_EXPORTER_OTLP_(METRICS_)*` variables (the SDK's builders read
    /// them), the interval from `OTEL_METRIC_EXPORT_INTERVAL`. `service`
    /// names the process unless `OTEL_SERVICE_NAME` (or `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`) does. Call it within the tokio runtime
    /// the exports are to run on.
    pub async fn start(
        protocol: env::Protocol,
        service: &str,
        source: Source,
    ) -> Result<MetricsPush, Error> {
        let (exporter, target) = otlp_exporter(protocol)?;
        let runtime = tokio::runtime::Handle::current();
        let first = match tokio::time::timeout(RENDER_TIMEOUT, source()).await {
            Ok(text) => text::parse(&text),
            Err(_) => {
                tracing::warn!("rendering the metrics took too long: none are pushed");
                Exposition::default()
            }
        };
        let interval = export_interval();
        let latest = Arc::new(Latest {
            source: source.clone(),
            runtime: runtime.clone(),
            // Every instrument's callback asks for the text in one
            // collection: render once per collection, not once per series.
            max_age: (interval / 2).min(Duration::from_secs(1)),
            state: Mutex::new((Arc::new(first.clone()), Instant::now())),
        });
        let exporter = PushOnRuntime {
            inner: exporter,
            runtime,
            failing: AtomicBool::new(false),
            target: target.clone(),
        };
        let reader = PeriodicReader::builder(exporter)
            .with_interval(interval)
            .build();
        let mut resource = Resource::builder();
        if let Some(service) = crate::default_service(service) {
            resource = resource.with_service_name(service.to_string());
        }
        let provider = SdkMeterProvider::builder()
            .with_resource(resource.build())
            .with_reader(reader)
            .build();
        let mut bridge = Bridge {
            meter: provider.meter("krm-runtime"),
            latest,
            registered: HashSet::new(),
        };
        bridge.register(&first);
        let bridge = Arc::new(Mutex::new(bridge));
        let watched = bridge.clone();
        let rendered = source.clone();
        tracing::info!(
            target = %target,
            ?interval,
            families = first.families.len(),
            "pushing metrics (OTEL_METRICS_EXPORTER=otlp)"
        );
        // Registering an instrument while the reader collects could wait
        // on the collection: new families are registered here, on the
        // runtime, never from a callback.
        let watch = tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Ok(text) = tokio::time::timeout(RENDER_TIMEOUT, rendered()).await {
                    // Off the runtime's threads: building an instrument
                    // may wait for a collection, whose callbacks wait for
                    // a render on the runtime (one worker: a stall).
                    let watched = watched.clone();
                    let _ = tokio::task::spawn_blocking(move || register(&watched, &text)).await;
                }
            }
        });
        Ok(MetricsPush {
            provider,
            stopped: AtomicBool::new(false),
            watch,
            bridge,
            source,
        })
    }

    /// Pushes once more and stops, bounded by `timeout`. Call it within the
    /// runtime, before it ends: the last push runs on it.
    pub async fn shutdown(&self, timeout: Duration) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.watch.abort();
        // The last push has what came since the last interval, new
        // families included.
        if let Ok(text) = tokio::time::timeout(RENDER_TIMEOUT, (self.source)()).await {
            // Off the runtime's threads, as in the watch.
            let bridge = self.bridge.clone();
            let _ = tokio::task::spawn_blocking(move || register(&bridge, &text)).await;
        }
        let provider = self.provider.clone();
        // The SDK waits for its reader's thread: not on a runtime thread.
        let stopping = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(timeout));
        match tokio::time::timeout(timeout + Duration::from_millis(500), stopping).await {
            Ok(Ok(Ok(()))) => tracing::debug!("metrics pushed at exit"),
            Ok(Ok(Err(err))) => tracing::warn!(error = %err, "pushing metrics at exit failed"),
            Ok(Err(err)) => tracing::warn!(error = %err, "pushing metrics at exit failed"),
            Err(_) => tracing::warn!(?timeout, "pushing metrics at exit took too long"),
        }
    }
}

impl Drop for MetricsPush {
    fn drop(&mut self) {
        // Dropped without `shutdown` (an early exit): the SDK's own drop
        // would push once more and wait for it, maybe on a runtime thread.
        // Let a thread of its own wait instead.
        self.watch.abort();
        if !self.stopped.swap(true, Ordering::AcqRel) {
            let provider = self.provider.clone();
            let _ = std::thread::Builder::new()
                .name("metrics-push-stop".into())
                .spawn(move || drop(provider));
        }
    }
}

/// Registers the new families of `text`, which is also the latest values
/// (a collection soon after, the last at exit, reads it as it is).
fn register(bridge: &Mutex<Bridge>, text: &str) {
    let parsed = Arc::new(text::parse(text));
    let mut bridge = bridge.lock().unwrap_or_else(PoisonError::into_inner);
    bridge.register(&parsed);
    *bridge
        .latest
        .state
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = (parsed, Instant::now());
}

/// The instruments, by family.
struct Bridge {
    meter: opentelemetry::metrics::Meter,
    latest: Arc<Latest>,
    registered: HashSet<String>,
}

impl Bridge {
    /// Registers the instruments of the families not yet registered.
    fn register(&mut self, exposition: &Exposition) {
        for family in &exposition.families {
            if !self.registered.insert(family.name.clone()) {
                continue;
            }
            tracing::debug!(family = family.name, kind = ?family.kind, "pushing a metric family");
            for series in series(family) {
                if !otel_name(&series.instrument) {
                    tracing::debug!(
                        name = series.instrument,
                        "not a name OpenTelemetry allows: not pushed"
                    );
                    continue;
                }
                let read = Reader {
                    latest: self.latest.clone(),
                    family: family.name.clone(),
                    kind: family.kind,
                    samples: series.samples,
                };
                let callback = move |observer: &dyn AsyncInstrument<f64>| read.observe(observer);
                if series.counter {
                    let mut builder = self
                        .meter
                        .f64_observable_counter(series.instrument)
                        .with_callback(callback);
                    if !family.help.is_empty() {
                        builder = builder.with_description(family.help.clone());
                    }
                    if !family.unit.is_empty() {
                        builder = builder.with_unit(family.unit.clone());
                    }
                    // The callback now belongs to the provider; the
                    // handle itself holds nothing.
                    let _ = builder.build();
                } else {
                    let mut builder = self
                        .meter
                        .f64_observable_gauge(series.instrument)
                        .with_callback(callback);
                    if !family.help.is_empty() {
                        builder = builder.with_description(family.help.clone());
                    }
                    if !family.unit.is_empty() {
                        builder = builder.with_unit(family.unit.clone());
                    }
                    // The callback now belongs to the provider; the
                    // handle itself holds nothing.
                    let _ = builder.build();
                }
            }
        }
    }
}

/// One instrument of a family: its name, kind and the samples it reports.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    instrument: String,
    counter: bool,
    /// The sample names it reads.
    samples: Vec<String>,
}

/// The instruments of a family (the table in the module's documentation).
fn series(family: &Family) -> Vec<Series> {
    let n = &family.name;
    let one = |instrument: String, counter: bool, samples: &[String]| Series {
        instrument,
        counter,
        samples: samples.to_vec(),
    };
    let suffixed = |suffix: &str| format!("{n}{suffix}");
    match family.kind {
        Kind::Counter => {
            // `x_total`, or `x` in the old text format (whose family may
            // itself be named `x_total`).
            let name = n.strip_suffix("_total").unwrap_or(n).to_string();
            vec![one(name, true, &[suffixed("_total"), n.clone()])]
        }
        Kind::Histogram => ["_bucket", "_sum", "_count"]
            .iter()
            .map(|s| one(suffixed(s), true, &[suffixed(s)]))
            .collect(),
        Kind::GaugeHistogram => ["_bucket", "_gsum", "_gcount"]
            .iter()
            .map(|s| one(suffixed(s), false, &[suffixed(s)]))
            .collect(),
        Kind::Summary => vec![
            one(n.clone(), false, std::slice::from_ref(n)),
            one(suffixed("_sum"), true, &[suffixed("_sum")]),
            one(suffixed("_count"), true, &[suffixed("_count")]),
        ],
        Kind::Info => {
            let name = if n.ends_with("_info") {
                n.clone()
            } else {
                suffixed("_info")
            };
            vec![one(name.clone(), false, &[name])]
        }
        Kind::Gauge | Kind::StateSet | Kind::Unknown => {
            vec![one(n.clone(), false, std::slice::from_ref(n))]
        }
    }
}

/// OpenTelemetry's instrument name syntax.
fn otel_name(name: &str) -> bool {
    name.len() <= 255
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
}

/// One instrument's callback: its samples in the latest text.
struct Reader {
    latest: Arc<Latest>,
    family: String,
    kind: Kind,
    samples: Vec<String>,
}

impl Reader {
    fn observe(&self, observer: &dyn AsyncInstrument<f64>) {
        let latest = self.latest.current();
        let Some(family) = latest.family(&self.family) else {
            return;
        };
        // A family whose type changed is no longer the instrument's.
        if family.kind != self.kind {
            return;
        }
        for sample in &family.samples {
            if !sample.value.is_finite() || !self.samples.contains(&sample.name) {
                continue;
            }
            let attributes: Vec<KeyValue> = sample
                .labels
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect();
            observer.observe(sample.value, &attributes);
        }
    }
}

/// The latest text, rendered again when a collection asks and it is older
/// than `max_age`.
struct Latest {
    source: Source,
    runtime: tokio::runtime::Handle,
    max_age: Duration,
    state: Mutex<(Arc<Exposition>, Instant)>,
}

impl Latest {
    /// Called by the callbacks, on the reader's thread (never a runtime
    /// thread): waits, bounded, for the source rendered on the runtime.
    fn current(&self) -> Arc<Exposition> {
        let lock = || self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (latest, stale) = {
            let state = lock();
            (state.0.clone(), state.1.elapsed() >= self.max_age)
        };
        if !stale {
            return latest;
        }
        // Rendered without the lock held: `register`, which takes it, is
        // not held up by the wait.
        let rendered = self.render().map(|text| Arc::new(text::parse(&text)));
        let mut state = lock();
        if let Some(parsed) = &rendered {
            state.0 = parsed.clone();
        }
        // Failed or not: the other callbacks of this collection do not
        // wait again.
        state.1 = Instant::now();
        state.0.clone()
    }

    fn render(&self) -> Option<String> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let source = self.source.clone();
        // A runtime that is gone drops the task, and with it `tx`: the wait
        // ends at once.
        drop(self.runtime.spawn(async move {
            if let Ok(text) = tokio::time::timeout(RENDER_TIMEOUT, source()).await {
                let _ = tx.try_send(text);
            }
        }));
        match rx.recv_timeout(RENDER_TIMEOUT + Duration::from_millis(500)) {
            Ok(text) => Some(text),
            Err(err) => {
                tracing::debug!(error = %err, "rendering the metrics failed: the last values are pushed");
                None
            }
        }
    }
}

/// `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds), as the SDK's reader reads
/// it, but 0 or nonsense is the default (to the SDK, 0 would be a busy
/// loop).
fn export_interval() -> Duration {
    std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_INTERVAL)
}

/// The OTLP metric exporter for `protocol` (the SDK's builders read the
/// endpoint, headers, timeout and compression), and where it sends, for the
/// log.
fn otlp_exporter(
    protocol: env::Protocol,
) -> Result<(opentelemetry_otlp::MetricExporter, String), Error> {
    use opentelemetry_otlp::{MetricExporter, Protocol, WithExportConfig as _};
    let built = match protocol {
        env::Protocol::Grpc => {
            use opentelemetry_otlp::WithTonicConfig as _;
            let mut builder = MetricExporter::builder().with_tonic();
            if let Some(tls) = crate::transport::grpc_tls("METRICS")? {
                builder = builder.with_tls_config(tls);
            }
            builder.build()
        }
        env::Protocol::HttpProtobuf | env::Protocol::HttpJson => {
            use opentelemetry_otlp::WithHttpConfig as _;
            MetricExporter::builder()
                .with_http()
                .with_http_client(crate::transport::http_client("METRICS")?)
                .with_protocol(match protocol {
                    env::Protocol::HttpJson => Protocol::HttpJson,
                    _ => Protocol::HttpBinary,
                })
                .build()
        }
    };
    let exporter = built.map_err(|source| Error::MetricsExporter { protocol, source })?;
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .unwrap_or_else(|_| "the default endpoint".to_string());
    Ok((exporter, format!("{endpoint} ({protocol})")))
}

/// The exporter, its requests run with the runtime's reactor and timers
/// (the reader calls it from its own thread through a plain executor), its
/// failures said once per change of state.
struct PushOnRuntime<E> {
    inner: E,
    runtime: tokio::runtime::Handle,
    failing: AtomicBool,
    target: String,
}

impl<E> std::fmt::Debug for PushOnRuntime<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushOnRuntime")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl<E: PushMetricExporter> PushMetricExporter for PushOnRuntime<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        // The batch is borrowed, so it cannot go to a task of the runtime
        // as the spans do: the export is polled here, within the runtime's
        // context. A runtime that has shut down (its timers would panic) is
        // seen first: a task spawned on it is cancelled at once.
        let result = if self.runtime.spawn(async {}).await.is_err() {
            Err(OTelSdkError::InternalFailure(
                "the runtime has stopped".into(),
            ))
        } else {
            Entered {
                runtime: &self.runtime,
                inner: Box::pin(self.inner.export(metrics)),
            }
            .await
        };
        match &result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::AcqRel) {
                    tracing::info!(target = %self.target, "pushing metrics works again");
                }
            }
            Err(err) => {
                if !self.failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        target = %self.target,
                        error = %err,
                        "pushing metrics failed: they are pushed again at the next interval, and this is said again only once it works"
                    );
                }
            }
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// A future polled within a runtime's context.
struct Entered<'a> {
    runtime: &'a tokio::runtime::Handle,
    inner: Pin<Box<dyn Future<Output = OTelSdkResult> + Send + 'a>>,
}

impl Future for Entered<'_> {
    type Output = OTelSdkResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<OTelSdkResult> {
        let _entered = self.runtime.enter();
        self.inner.as_mut().poll(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn family(text: &str) -> Family {
        text::parse(text).families.remove(0)
    }

    fn names(family: &Family) -> Vec<(String, bool)> {
        series(family)
            .into_iter()
            .map(|s| (s.instrument, s.counter))
            .collect()
    }

    #[test]
    fn names_keep_prometheus_but_the_total_suffix() {
        let counter = family("# TYPE wrapper_server_evaluations counter\n");
        assert_eq!(
            series(&counter),
            [Series {
                instrument: "wrapper_server_evaluations".into(),
                counter: true,
                samples: vec![
                    "wrapper_server_evaluations_total".into(),
                    "wrapper_server_evaluations".into()
                ],
            }]
        );
        let old = family("# TYPE c_total counter\nc_total 1\n");
        assert_eq!(names(&old), [("c".to_string(), true)]);
        let hist = family("# TYPE d_seconds histogram\n");
        assert_eq!(
            names(&hist),
            [
                ("d_seconds_bucket".to_string(), true),
                ("d_seconds_sum".to_string(), true),
                ("d_seconds_count".to_string(), true)
            ]
        );
        assert_eq!(
            names(&family("# TYPE g gauge\n")),
            [("g".to_string(), false)]
        );
        assert_eq!(
            names(&family("# TYPE build info\n")),
            [("build_info".to_string(), false)]
        );
        assert_eq!(
            names(&family("# TYPE s summary\n")),
            [
                ("s".to_string(), false),
                ("s_sum".to_string(), true),
                ("s_count".to_string(), true)
            ]
        );
        assert!(otel_name("function_runner_pods"));
        assert!(!otel_name("job:rate5m"));
        assert!(!otel_name("_x"));
    }

    /// A callback renders the source on the runtime (from a thread that is
    /// not the runtime's, as the reader's is) and reports the finite
    /// samples of its series, labels as attributes; `_created` is not one
    /// of a counter's series. (The OTLP path is tested end to end in
    /// tests/tests/telemetry.rs.)
    #[test]
    fn a_reader_reports_finite_samples_with_their_labels() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let text = "# TYPE a counter\na_total{outcome=\"ok\"} 2\na_total{outcome=\"x\"} NaN\na_created 1\n# EOF\n";
        let source: Source = Arc::new(move || Box::pin(async move { text.to_string() }));
        let latest = Arc::new(Latest {
            source,
            runtime: runtime.handle().clone(),
            max_age: Duration::ZERO,
            state: Mutex::new((Arc::default(), Instant::now())),
        });
        let reader = Reader {
            latest,
            family: "a".into(),
            kind: Kind::Counter,
            samples: vec!["a_total".into(), "a".into()],
        };
        struct Seen(Mutex<Vec<(f64, Vec<KeyValue>)>>);
        impl AsyncInstrument<f64> for Seen {
            fn observe(&self, value: f64, attributes: &[KeyValue]) {
                self.0.lock().unwrap().push((value, attributes.to_vec()));
            }
        }
        let seen = Seen(Mutex::new(Vec::new()));
        reader.observe(&seen);
        let seen = seen.0.into_inner().unwrap();
        assert_eq!(seen, [(2.0, vec![KeyValue::new("outcome", "ok")])]);
    }
}
