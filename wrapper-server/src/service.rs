//! What every EvaluateFunction call of the wrapper shares: its function,
//! the gate that admits calls, the metrics; and the buffered path, tonic's
//! generated server, for the requests that the streamed path leaves to it
//! (compressed ones).

use std::sync::Arc;
use std::time::Instant;

use krm_fn::call::{deadline, CallError, Function, Gate};
use proto::pb::function_evaluator_server::FunctionEvaluator;
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::metrics::{CallMetrics, Metrics, Outcome};

/// The wrapper's state, shared by every call.
pub(crate) struct Service {
    pub(crate) function: Function,
    pub(crate) gate: Gate,
    pub(crate) metrics: Arc<Metrics>,
    /// Bound on reading one call's request (`--request-read-timeout`).
    pub(crate) request_read_timeout: std::time::Duration,
    /// Calls per client connection.
    pub(crate) connections: crate::conn::Connections,
}

/// The server span of one EvaluateFunction call (exported when tracing is
/// on), continuing the caller's trace when its headers carry one.
pub(crate) fn call_span(headers: &http::HeaderMap) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        target: "otel",
        "evaluator.FunctionEvaluator/EvaluateFunction",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = proto::EVALUATOR_SERVICE,
        rpc.method = "EvaluateFunction",
        image = Empty,
        outcome = Empty,
        input_bytes = Empty,
        output_bytes = Empty,
        rpc.grpc.status_code = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    telemetry::propagate::set_parent(&span, headers);
    span
}

impl Service {
    /// Accounts for a finished call (metrics, its span) and logs it, without
    /// contents.
    pub(crate) fn log_call(
        &self,
        image: &str,
        result: &Result<EvaluateFunctionResponse, CallError>,
        started: Instant,
        call: &mut CallMetrics,
        span: &tracing::Span,
    ) {
        let outcome = match result {
            Ok(_) => Outcome::Ok,
            Err(err) => err.outcome(),
        };
        let output_bytes = result.as_ref().map_or(0, |r| r.resource_list.len());
        call.finish(outcome, output_bytes);
        if !span.is_disabled() {
            span.record("image", image);
            span.record("outcome", outcome.as_str());
            span.record("input_bytes", call.input_bytes());
            span.record("output_bytes", output_bytes);
            match result {
                Ok(_) => span.record("rpc.grpc.status_code", 0),
                Err(err) => {
                    span.record("rpc.grpc.status_code", err.code() as i32);
                    span.record("otel.status_code", "ERROR");
                    span.record("otel.status_description", tracing::field::display(err))
                }
            };
        }
        tracing::info!(
            image = %image,
            outcome = outcome.as_str(),
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            input_bytes = call.input_bytes(),
            output_bytes,
            "evaluated"
        );
    }
}

/// EvaluateFunction with the whole request decoded first.
#[derive(Clone)]
pub(crate) struct Buffered(pub(crate) Arc<Service>);

#[tonic::async_trait]
impl FunctionEvaluator for Buffered {
    async fn evaluate_function(
        &self,
        request: Request<EvaluateFunctionRequest>,
    ) -> Result<Response<EvaluateFunctionResponse>, Status> {
        let service = &self.0;
        let started = Instant::now();
        let deadline = deadline::from_headers(request.metadata().as_ref());
        let span = call_span(request.metadata().as_ref());
        let req = request.into_inner();
        let image = service.function.name_or_entrypoint(req.image);
        let mut call = service.metrics.start_call(req.resource_list.len());
        let result = async {
            let admission =
                tracing::info_span!(target: "otel", "admission", refused = tracing::field::Empty);
            let admitted = service.gate.admit();
            if let Err(err) = &admitted {
                admission.record("refused", tracing::field::display(err));
            }
            drop(admission);
            let _admitted = admitted?;
            service
                .function
                .run(&image, req.resource_list, deadline)
                .await
        }
        .instrument(span.clone())
        .await;
        service.log_call(&image, &result, started, &mut call, &span);
        result.map(Response::new).map_err(Status::from)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use krm_fn::exec::ExecSpec;
    use std::time::Duration;
    use tonic::Code;

    fn service(entrypoint: &[&str]) -> Buffered {
        let entrypoint = ExecSpec::from_argv(entrypoint.iter().copied()).unwrap();
        Buffered(Arc::new(Service {
            function: Function::new(entrypoint, 1 << 20, 1 << 20, "--max-output-bytes"),
            gate: Gate::new(None),
            metrics: Arc::new(Metrics::new()),
            request_read_timeout: Duration::from_secs(30),
            connections: Default::default(),
        }))
    }

    #[tokio::test]
    async fn deadline_from_grpc_timeout_answers_deadline_exceeded() {
        let svc = service(&["/bin/sh", "-c", "sleep 30"]);
        let mut req = Request::new(EvaluateFunctionRequest {
            resource_list: Bytes::from_static(b"x"),
            image: "img".into(),
            tag: String::new(),
        });
        req.metadata_mut()
            .insert("grpc-timeout", "200m".parse().unwrap());
        let started = Instant::now();
        let err = svc.evaluate_function(req).await.unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert!(err.message().contains("img"), "{}", err.message());
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn draining_refuses_new_calls_with_unavailable() {
        let svc = service(&["cat"]);
        let drain = svc.0.gate.drain().clone();
        tokio::spawn(async move { drain.drain().await });
        tokio::task::yield_now().await;
        assert!(svc.0.gate.drain().is_draining());
        let err = svc
            .evaluate_function(Request::new(EvaluateFunctionRequest::default()))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        assert_eq!(svc.0.gate.drain().in_flight(), 0);
    }
}
