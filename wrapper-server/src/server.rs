//! The wrapper's gRPC server: `evaluator.FunctionEvaluator` and health on
//! one port, one function process per call.
//!
//! EvaluateFunction requests are served by [`crate::stream`], which writes
//! the ResourceList into the function while the request is still arriving;
//! the requests it does not take go to the buffered path in
//! [`crate::service`]. Both admit, run and answer through [`krm_fn::call`].

use std::future::Future;
use std::sync::Arc;

use krm_fn::call::{Function, Gate};
use krm_fn::exec::ExecSpec;
use proto::pb::function_evaluator_server::FunctionEvaluatorServer;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::service::{Buffered, Service};
use crate::stream;

/// How the server runs functions.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The function's entrypoint, run once per call.
    pub entrypoint: ExecSpec,
    /// Limit on request and response messages (`--max-request-body-size`).
    pub max_message_bytes: usize,
    /// Limit on what the function may write on stdout (`--max-output-bytes`).
    pub max_output_bytes: usize,
    /// At most this many calls run at once; the rest get RESOURCE_EXHAUSTED.
    pub max_concurrent: Option<usize>,
}

/// The wrapper's gRPC services, ready to serve.
pub struct Wrapper {
    service: Arc<Service>,
}

impl Wrapper {
    pub fn new(config: ServerConfig, metrics: Arc<Metrics>) -> Self {
        let service = Service {
            function: Function::new(
                config.entrypoint,
                config.max_message_bytes,
                config.max_output_bytes,
                "--max-output-bytes",
            ),
            gate: Gate::new(config.max_concurrent),
            metrics,
        };
        Self {
            service: Arc::new(service),
        }
    }

    #[cfg(test)]
    pub(crate) fn service(&self) -> Arc<Service> {
        self.service.clone()
    }

    /// Serves until `shutdown` resolves, then drains (see
    /// [`krm_fn::server::serve_evaluator`]).
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), tonic::transport::Error> {
        let max = self.service.function.max_message_bytes;
        let drain = self.service.gate.drain().clone();
        // Compressed requests (gzip, as grpc-go clients can send them) take
        // the buffered path.
        let buffered = FunctionEvaluatorServer::new(Buffered(self.service.clone()))
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let evaluator = stream::Evaluator::new(self.service, buffered);
        krm_fn::server::serve_evaluator(listener, evaluator, drain, max, shutdown).await
    }
}
