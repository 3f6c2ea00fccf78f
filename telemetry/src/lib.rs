//! OpenTelemetry for the runner, the wrapper and `eval`/`render`, set up from
//! the standard `OTEL_*` variables (see [`env`]), with the SDK's exporters.
//!
//! Spans are `tracing` spans of the target [`TARGET`], made with
//! [`span!`]: the OpenTelemetry layer takes those and nothing else, and the
//! log takes everything but those (a call's log lines stay as they were).
//! With tracing off (the default) no layer wants them, so each such span
//! is disabled at its call site once and costs a branch afterwards: no
//! thread, no connection, no allocation.
//!
//! Export never holds a call up: spans go to a bounded queue (full: dropped
//! and counted), a batch processor's thread hands them to an exporter that
//! runs on the tokio runtime; failures are counted and said once per
//! change of state ([`export`]).

pub mod env;
mod export;
pub mod metrics;
pub mod propagate;
mod transport;

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

pub use env::{EnvError, Settings};
pub use export::{Dropped, ExportStats};

/// The `tracing` target of the spans that are exported.
pub const TARGET: &str = "otel";

/// The log filter's directive that turns [`TARGET`] off.
const TARGET_OFF: &str = "otel=off";

/// An exported span: `tracing::info_span!` with the target [`TARGET`].
/// Fields named `otel.kind`, `otel.name`, `otel.status_code` are the span's
/// kind, name and status (tracing-opentelemetry's conventions).
#[macro_export]
macro_rules! span {
    ($name:expr) => { ::tracing::info_span!(target: "otel", $name) };
    ($name:expr, $($fields:tt)*) => { ::tracing::info_span!(target: "otel", $name, $($fields)*) };
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
    #[error("OTEL_TRACES_EXPORTER=otlp ({protocol}): {source}")]
    Exporter {
        protocol: env::Protocol,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("OTEL_METRICS_EXPORTER=otlp ({protocol}): {source}")]
    MetricsExporter {
        protocol: env::Protocol,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The process's telemetry: the tracer provider when tracing is on, the
/// export's counters either way.
pub struct Telemetry {
    settings: Settings,
    provider: Option<SdkTracerProvider>,
    stats: ExportStats,
}

impl Telemetry {
    /// Tracing off, whatever the environment says.
    pub fn off() -> Self {
        Self {
            settings: Settings::default(),
            provider: None,
            stats: ExportStats::default(),
        }
    }

    /// Sets up what the `OTEL_*` variables ask for. `service` names the
    /// process unless `OTEL_SERVICE_NAME` (or `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`) does. Exports run on the current tokio
    /// runtime: call it within one.
    pub fn from_env(service: &str) -> Result<Self, Error> {
        let settings = Settings::from_env()?;
        Self::with_settings(settings, default_service(service))
    }

    /// [`Telemetry::from_env`] with the settings given (the resource, sampler
    /// and exporter details still come from the environment).
    pub fn with_settings(settings: Settings, service: Option<&str>) -> Result<Self, Error> {
        let stats = ExportStats::default();
        if settings.traces.is_empty() {
            return Ok(Self {
                settings,
                provider: None,
                stats,
            });
        }
        let runtime = tokio::runtime::Handle::current();
        let mut resource = Resource::builder();
        if let Some(service) = service {
            resource = resource.with_service_name(service.to_string());
        }
        let mut provider = SdkTracerProvider::builder().with_resource(resource.build());
        for exporter in &settings.traces {
            let config = BatchConfigBuilder::default();
            let capacity = queue_size();
            let config = config.with_max_queue_size(capacity).build();
            let processor = match *exporter {
                env::TracesExporter::Console => {
                    let shared = export::Shared::new(capacity, stats.clone(), "stderr".into());
                    let exporter =
                        export::OnRuntime::new(export::Console, runtime.clone(), shared.clone());
                    export::Bounded::new(
                        BatchSpanProcessor::builder(exporter)
                            .with_batch_config(config)
                            .build(),
                        shared,
                    )
                }
                env::TracesExporter::Otlp(protocol) => {
                    let (exporter, target) = otlp_exporter(protocol)?;
                    let shared = export::Shared::new(capacity, stats.clone(), target);
                    let exporter =
                        export::OnRuntime::new(exporter, runtime.clone(), shared.clone());
                    export::Bounded::new(
                        BatchSpanProcessor::builder(exporter)
                            .with_batch_config(config)
                            .build(),
                        shared,
                    )
                }
            };
            provider = provider.with_span_processor(processor);
        }
        let provider = provider.build();
        opentelemetry::global::set_text_map_propagator(propagate::composite(&settings.propagators));
        Ok(Self {
            settings,
            provider: Some(provider),
            stats,
        })
    }

    /// The variables a function pod's wrapper needs to export its spans as
    /// this process does (into the same traces): this process's trace
    /// settings, under the wrapper's own service name. Empty with tracing
    /// off. Not `OTEL_EXPORTER_OTLP_HEADERS`: it may hold a credential,
    /// which a pod's spec would show to whoever may read pods (a pod
    /// template can take it from a Secret).
    pub fn forwarded_env(&self) -> Vec<(String, String)> {
        if !self.tracing() {
            return Vec::new();
        }
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(name, _)| FORWARDED.contains(&name.as_str()) || name.starts_with("OTEL_BSP_"))
            .collect();
        env.sort();
        env.push(("OTEL_SERVICE_NAME".into(), "wrapper-server".into()));
        env
    }

    /// Whether spans are exported.
    pub fn tracing(&self) -> bool {
        self.provider.is_some()
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The export's counters (zero with tracing off).
    pub fn stats(&self) -> &ExportStats {
        &self.stats
    }

    /// Installs the global `tracing` subscriber: the log (`fmt`, on stderr,
    /// text or JSON, filtered by `filter`) and, with tracing on, the
    /// OpenTelemetry layer for the spans of [`TARGET`].
    pub fn init_subscriber(&self, filter: tracing_subscriber::EnvFilter, json: bool, ansi: bool) {
        use tracing_subscriber::filter::{filter_fn, FilterExt as _};
        let Some(provider) = &self.provider else {
            // Tracing off: one global filter, as a log alone has, that turns
            // the exported spans' target off. Per-layer filters would cost
            // every call: the registry still makes (and closes) each span
            // that all of its layers' filters refuse, and asks the filters
            // again at every call site (measured: BENCHMARKS.md, issue 41).
            let filter = match TARGET_OFF.parse() {
                Ok(off) => filter.add_directive(off),
                Err(_) => filter,
            };
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(log_layer(json, ansi))
                .try_init();
            return;
        };
        // Tracing on: the log takes everything but the exported spans, the
        // OpenTelemetry layer those alone.
        let fmt = log_layer(json, ansi)
            .with_filter(filter.and(filter_fn(|meta| meta.target() != TARGET)));
        let otel = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("krm-runtime"))
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_filter(filter_fn(|meta| meta.target() == TARGET));
        // Another subscriber already set (tests in one process): keep it.
        let _ = tracing_subscriber::registry()
            .with(fmt)
            .with(otel)
            .try_init();
    }

    /// Exports what is queued, bounded by `timeout`, and stops exporting.
    /// Call it within the runtime, before it ends: the exports run on it.
    pub async fn shutdown(&self, timeout: Duration) {
        let Some(provider) = self.provider.clone() else {
            return;
        };
        let flushing = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(timeout));
        match tokio::time::timeout(timeout + Duration::from_millis(500), flushing).await {
            Ok(Ok(Ok(()))) => tracing::debug!("spans flushed"),
            Ok(Ok(Err(err))) => tracing::warn!(error = %err, "flushing spans at exit failed"),
            Ok(Err(err)) => tracing::warn!(error = %err, "flushing spans at exit failed"),
            Err(_) => tracing::warn!(
                ?timeout,
                "flushing spans at exit took too long: the rest are dropped"
            ),
        }
    }
}

/// `service`, unless `OTEL_SERVICE_NAME` (or `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`) names the process: the SDK's resource reads
/// those, and they win.
pub(crate) fn default_service(service: &str) -> Option<&str> {
    let service_named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| {
            v.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    (!service_named).then_some(service)
}

/// The trace settings [`Telemetry::forwarded_env`] passes on.
const FORWARDED: &[&str] = &[
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_PROPAGATORS",
];

/// The log: text or JSON lines on stderr.
fn log_layer<S>(json: bool, ansi: bool) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        // If whoever reads our stderr is gone, logging must not panic.
        .log_internal_errors(false)
        .with_writer(std::io::stderr);
    if json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    }
}

/// `OTEL_BSP_MAX_QUEUE_SIZE`, as the SDK reads it (default 2048).
fn queue_size() -> usize {
    std::env::var("OTEL_BSP_MAX_QUEUE_SIZE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(2048)
}

/// The OTLP span exporter for `protocol`; endpoint, headers, timeout and
/// compression from the `OTEL_EXPORTER_OTLP_(TRACES_)*` variables, which
/// the SDK's builders read. Also says where spans go, for the log.
fn otlp_exporter(
    protocol: env::Protocol,
) -> Result<(opentelemetry_otlp::SpanExporter, String), Error> {
    use opentelemetry_otlp::{Protocol, SpanExporter, WithHttpConfig as _, WithTonicConfig as _};
    let built = match protocol {
        env::Protocol::Grpc => {
            let mut builder = SpanExporter::builder().with_tonic();
            if let Some(tls) = transport::grpc_tls("TRACES")? {
                builder = builder.with_tls_config(tls);
            }
            builder.build()
        }
        env::Protocol::HttpProtobuf | env::Protocol::HttpJson => SpanExporter::builder()
            .with_http()
            .with_http_client(transport::http_client("TRACES")?)
            .with_protocol(match protocol {
                env::Protocol::HttpJson => Protocol::HttpJson,
                _ => Protocol::HttpBinary,
            })
            .build(),
    };
    let exporter = built.map_err(|source| Error::Exporter { protocol, source })?;
    let endpoint =
        transport::endpoint("TRACES").unwrap_or_else(|| "the default endpoint".to_string());
    Ok((exporter, format!("{endpoint} ({protocol})")))
}
