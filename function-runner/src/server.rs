//! `function-runner serve`: Porch's `evaluator.FunctionEvaluator` and gRPC
//! health on one port, and Prometheus metrics.
//!
//! A call goes: [`RunnerService::evaluate_function`] → the evaluator chain
//! (exec, then pod) under the call's deadline → its error, if any, becomes
//! a status in [`crate::evaluator`].

use std::sync::Arc;
use std::time::Instant;

use krm_fn::call::deadline;
use krm_fn::drain::Drain;
use proto::pb::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::evaluator::{validate_image, EvalError, EvalRequest, Evaluator};
use crate::metrics::RunnerMetrics;
use runner_core::config::LiveIndex;

/// The runner's `evaluator.FunctionEvaluator`.
#[derive(Clone)]
pub struct RunnerService {
    evaluator: Arc<dyn Evaluator>,
    metrics: Arc<RunnerMetrics>,
    drain: Drain,
    /// The FunctionConfigs: an image they configure is "known" to metrics.
    index: Option<LiveIndex>,
}

impl RunnerService {
    pub fn new(evaluator: Arc<dyn Evaluator>, metrics: Arc<RunnerMetrics>) -> Self {
        Self {
            evaluator,
            metrics,
            drain: Drain::default(),
            index: None,
        }
    }

    /// Images configured in `index` get metrics labels of their own, however
    /// their calls end.
    pub fn with_index(mut self, index: LiveIndex) -> Self {
        self.index = Some(index);
        self
    }

    fn configured(&self, image: &str) -> bool {
        self.index.as_ref().is_some_and(|index| {
            let index = index.current();
            index.binary_for(image, "").is_some()
                || index.pod_settings_for(image, "").is_some()
                || index.go_for(image, "").is_some()
        })
    }
}

#[tonic::async_trait]
impl FunctionEvaluator for RunnerService {
    async fn evaluate_function(
        &self,
        request: Request<EvaluateFunctionRequest>,
    ) -> Result<Response<EvaluateFunctionResponse>, Status> {
        let Some(_admitted) = self.drain.enter() else {
            return Err(EvalError::ShuttingDown.into());
        };
        let started = Instant::now();
        let deadline = deadline::from_headers(request.metadata().as_ref());
        let span = call_span(request.metadata().as_ref());
        let request = request.into_inner();
        if let Err(err) = validate_image(&request.image) {
            let shown = krm_fn::call::shown_name(&request.image);
            tracing::info!(image = %shown, %err, "refused");
            self.metrics.observe_call(None, err.code(), started);
            record_outcome(&span, err.code(), Some(&err));
            return Err(err.into());
        }
        let image = request.image.clone();
        if !span.is_disabled() {
            span.record("image", image.as_str());
            span.record("tag", krm_fn::call::shown_name(&request.tag).as_ref());
        }
        let result = self
            .evaluator
            .evaluate(EvalRequest { request, deadline })
            .instrument(span.clone())
            .await;
        // A metrics label of its own only for an image the runner knows: a
        // FunctionConfig's, or one it ran or whose pod answered. Unknown
        // names, however many, share one label value.
        let known = match &result {
            Ok(_) => true,
            Err(err) => err.image_is_known() || self.configured(&image),
        };
        let result = result.map_err(Status::from);
        let code = result
            .as_ref()
            .map_or_else(Status::code, |_| tonic::Code::Ok);
        self.metrics
            .observe_call(known.then_some(image.as_str()), code, started);
        record_outcome(&span, code, result.as_ref().err());
        tracing::info!(%image, outcome = ?code, ms = started.elapsed().as_millis() as u64, "evaluated");
        result.map(Response::new)
    }
}

/// The server span of one call (exported when tracing is on), continuing
/// the caller's trace when its headers carry one. The evaluator that takes
/// the call records itself in `evaluator`.
fn call_span(headers: &tonic::codegen::http::HeaderMap) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        target: "otel",
        "evaluator.FunctionEvaluator/EvaluateFunction",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = proto::EVALUATOR_SERVICE,
        rpc.method = "EvaluateFunction",
        image = Empty,
        tag = Empty,
        evaluator = Empty,
        builtin_release = Empty,
        rpc.grpc.status_code = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    telemetry::propagate::set_parent(&span, headers);
    span
}

fn record_outcome(span: &tracing::Span, code: tonic::Code, err: Option<&impl std::fmt::Display>) {
    if span.is_disabled() {
        return;
    }
    span.record("rpc.grpc.status_code", code as i32);
    if let Some(err) = err {
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", tracing::field::display(err));
    }
}

/// Streams one client connection may have open at once. Porch's server
/// sends all its calls over one connection, so this is high; a client with
/// more waits for a free stream.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// Serves the runner until `shutdown` resolves, then drains: health turns
/// NOT_SERVING, new calls get UNAVAILABLE, in-flight calls finish within
/// the grace, then every connection is closed.
pub async fn serve(
    listener: TcpListener,
    service: RunnerService,
    options: krm_fn::server::ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let drain = service.drain.clone();
    let evaluator = FunctionEvaluatorServer::new(service)
        .max_decoding_message_size(options.max_message_bytes)
        .max_encoding_message_size(options.max_message_bytes);
    krm_fn::server::serve_evaluator(listener, evaluator, drain, options, shutdown).await
}
