//! W3C trace context (and baggage) across gRPC calls: read from an incoming
//! call's headers into its span's parent, written from a span into an
//! outgoing call's metadata. Both do nothing for a disabled span (tracing
//! off), so the call path pays nothing then.

use opentelemetry::propagation::{
    Extractor, Injector, TextMapCompositePropagator, TextMapPropagator,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::env::Propagator;

/// The propagators `OTEL_PROPAGATORS` named, in order.
pub(crate) fn composite(names: &[Propagator]) -> TextMapCompositePropagator {
    let propagators: Vec<Box<dyn TextMapPropagator + Send + Sync>> = names
        .iter()
        .map(|p| -> Box<dyn TextMapPropagator + Send + Sync> {
            match p {
                Propagator::TraceContext => Box::new(TraceContextPropagator::new()),
                Propagator::Baggage => Box::new(BaggagePropagator::new()),
            }
        })
        .collect();
    TextMapCompositePropagator::new(propagators)
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct Metadata<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for Metadata<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// Makes the trace context in `headers` (a `traceparent`, with the process's
/// propagators) the parent of `span`. Without one, `span` starts a trace.
pub fn set_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    if span.is_disabled() {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    // Fails only for a span already started in OpenTelemetry's terms.
    let _ = span.set_parent(parent);
}

/// Writes `span`'s trace context into an outgoing call's metadata, so that
/// the callee's spans are its children.
pub fn inject(span: &tracing::Span, metadata: &mut tonic::metadata::MetadataMap) {
    if span.is_disabled() {
        return;
    }
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut Metadata(metadata))
    });
}

/// Sets an attribute on `span`'s OpenTelemetry span, for values known only
/// once the span has begun (not a declared field). Nothing when disabled.
pub fn set_attribute(
    span: &tracing::Span,
    key: &'static str,
    value: impl Into<opentelemetry::Value>,
) {
    if !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// Marks `span` as failed with `description` (OpenTelemetry status ERROR).
pub fn set_error(span: &tracing::Span, description: impl Into<std::borrow::Cow<'static, str>>) {
    if !span.is_disabled() {
        span.set_status(opentelemetry::trace::Status::error(description));
    }
}
