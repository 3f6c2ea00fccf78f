//! What stands between the calls and the collector: a bounded queue that
//! drops (and counts) rather than waits, an exporter that runs on the
//! process's tokio runtime and says once per change of state whether export
//! works, and the console exporter.
//!
//! The SDK's `BatchSpanProcessor` already never blocks `on_end` (a full
//! queue drops the span) and exports from a thread of its own; but it keeps
//! its drop count to itself and calls the exporter through
//! `futures_executor::block_on`, where tonic's and hyper's clients need a
//! tokio reactor. So [`Bounded`] counts the queue in front of it (never
//! letting it fill, so every drop is ours and counted) and [`OnRuntime`]
//! runs each export as a task on the runtime and awaits its handle.

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The export's own counters, for the binary's metrics endpoint.
#[derive(Debug, Clone, Default)]
pub struct ExportStats {
    exported: Counter,
    dropped: Family<[(&'static str, &'static str); 1], Counter>,
}

/// Why a span was dropped (`reason` label of `otel_spans_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The queue was full: the exporter is slower than spans end.
    QueueFull,
    /// The collector refused the batch or could not be reached.
    ExportFailed,
}

impl ExportStats {
    /// Adds `otel_spans_exported_total` and `otel_spans_dropped_total{reason}`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "otel_spans_exported",
            "Spans the collector accepted",
            self.exported.clone(),
        );
        registry.register(
            "otel_spans_dropped",
            "Spans not exported: reason=queue_full (the exporter fell behind) or export_failed (the collector refused or could not be reached)",
            self.dropped.clone(),
        );
    }

    pub fn exported(&self) -> u64 {
        self.exported.get()
    }

    pub fn dropped(&self, why: Dropped) -> u64 {
        self.dropped.get_or_create(&[("reason", why.label())]).get()
    }

    fn add_dropped(&self, why: Dropped, n: usize) {
        self.dropped
            .get_or_create(&[("reason", why.label())])
            .inc_by(n as u64);
    }
}

impl Dropped {
    fn label(self) -> &'static str {
        match self {
            Dropped::QueueFull => "queue_full",
            Dropped::ExportFailed => "export_failed",
        }
    }
}

/// State shared by one exporter's processor and exporter halves.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Spans handed to the batch processor and not yet exported.
    queued: AtomicUsize,
    capacity: usize,
    /// Said in the log when it changes.
    failing: AtomicBool,
    full: AtomicBool,
    stats: ExportStats,
    /// Where spans go, for the log.
    target: String,
}

impl Shared {
    pub(crate) fn new(capacity: usize, stats: ExportStats, target: String) -> Arc<Self> {
        Arc::new(Self {
            queued: AtomicUsize::new(0),
            capacity: capacity.max(1),
            failing: AtomicBool::new(false),
            full: AtomicBool::new(false),
            stats,
            target,
        })
    }
}

/// The batch processor, behind a queue count that drops at capacity.
#[derive(Debug)]
pub(crate) struct Bounded {
    inner: BatchSpanProcessor,
    shared: Arc<Shared>,
}

impl Bounded {
    pub(crate) fn new(inner: BatchSpanProcessor, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let shared = &self.shared;
        if shared.queued.fetch_add(1, Ordering::AcqRel) >= shared.capacity {
            shared.queued.fetch_sub(1, Ordering::AcqRel);
            shared.stats.add_dropped(Dropped::QueueFull, 1);
            if !shared.full.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    target = %shared.target,
                    capacity = shared.capacity,
                    "the span queue is full: spans are dropped (otel_spans_dropped_total) until the exporter catches up"
                );
            }
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// An exporter whose exports run as tasks on the runtime it was made on.
pub(crate) struct OnRuntime<E> {
    inner: Arc<E>,
    runtime: tokio::runtime::Handle,
    shared: Arc<Shared>,
}

impl<E> fmt::Debug for OnRuntime<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnRuntime")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

impl<E> OnRuntime<E> {
    pub(crate) fn new(inner: E, runtime: tokio::runtime::Handle, shared: Arc<Shared>) -> Self {
        Self {
            inner: Arc::new(inner),
            runtime,
            shared,
        }
    }
}

impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let shared = &self.shared;
        let left = shared
            .queued
            .fetch_sub(n, Ordering::AcqRel)
            .saturating_sub(n);
        if left <= shared.capacity / 2 && shared.full.swap(false, Ordering::AcqRel) {
            tracing::info!(target = %shared.target, "the span queue has room again");
        }
        let inner = Arc::clone(&self.inner);
        let result = match self
            .runtime
            .spawn(async move { inner.export(batch).await })
            .await
        {
            Ok(result) => result,
            Err(err) => Err(OTelSdkError::InternalFailure(format!(
                "the export task ended: {err}"
            ))),
        };
        match &result {
            Ok(()) => {
                shared.stats.exported.inc_by(n as u64);
                if shared.failing.swap(false, Ordering::AcqRel) {
                    tracing::info!(target = %shared.target, "exporting spans works again");
                }
            }
            Err(err) => {
                shared.stats.add_dropped(Dropped::ExportFailed, n);
                if !shared.failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        target = %shared.target,
                        error = %err,
                        "exporting spans failed: they are dropped (otel_spans_dropped_total) until it works again"
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Called by the processor before any export, when nothing else
        // holds the exporter.
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.set_resource(resource),
            None => tracing::debug!("the exporter's resource could not be set: an export holds it"),
        }
    }
}

/// `OTEL_TRACES_EXPORTER=console`: one line per span on stderr.
#[derive(Debug, Default)]
pub(crate) struct Console;

impl SpanExporter for Console {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut out = String::new();
        for span in &batch {
            let ms = span
                .end_time
                .duration_since(span.start_time)
                .unwrap_or_default()
                .as_secs_f64()
                * 1000.0;
            out.push_str(&format!(
                "span {:?} trace_id={} span_id={} parent_id={} kind={:?} duration_ms={ms:.3} status={:?}",
                span.name,
                span.span_context.trace_id(),
                span.span_context.span_id(),
                span.parent_span_id,
                span.span_kind,
                span.status,
            ));
            for kv in &span.attributes {
                out.push_str(&format!(" {}={}", kv.key, kv.value));
            }
            out.push('\n');
        }
        std::io::stderr()
            .lock()
            .write_all(out.as_bytes())
            .map_err(|err| OTelSdkError::InternalFailure(err.to_string()))
    }
}
