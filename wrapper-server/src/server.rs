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
    /// From SIGTERM until every connection is closed (`--shutdown-grace`).
    pub shutdown_grace: std::time::Duration,
    /// How long a call's request may take to arrive in full
    /// (`--request-read-timeout`).
    pub request_read_timeout: std::time::Duration,
}

/// Streams one connection may have open at once; a client with more waits
/// for a free stream. Well above the calls one connection may run at once
/// ([`crate::conn::CALLS_PER_CONNECTION`]), because h2 counts a stream the
/// client reset until the server has let go of it: a client that cancels
/// and at once starts another call would, at this cap, have the new stream
/// refused.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 64;

/// Each stream's flow-control window. A call waiting for a slot on its
/// connection does not read its request, so this is what each such stream
/// can make the server hold (the connection's window is refilled as the
/// running calls read theirs). 1 MiB still streams a 6 MiB request at
/// loopback speed: the window is topped up as the function reads.
pub const STREAM_WINDOW: u32 = 1 << 20;

/// The wrapper's gRPC services, ready to serve.
pub struct Wrapper {
    service: Arc<Service>,
    shutdown_grace: std::time::Duration,
}

impl Wrapper {
    pub fn new(config: ServerConfig, metrics: Arc<Metrics>) -> Self {
        Self::with_prespawn(config, metrics, None)
    }

    /// [`Wrapper::new`], whose calls take their processes from `prespawn`
    /// while it has some waiting (`--prespawn`).
    pub fn with_prespawn(
        config: ServerConfig,
        metrics: Arc<Metrics>,
        prespawn: Option<Arc<krm_fn::prespawn::Pool>>,
    ) -> Self {
        let mut function = Function::new(
            config.entrypoint,
            config.max_message_bytes,
            config.max_output_bytes,
            "--max-output-bytes",
        );
        function.prespawn = prespawn;
        let service = Service {
            function,
            gate: Gate::new(config.max_concurrent),
            metrics,
            request_read_timeout: config.request_read_timeout,
            connections: Default::default(),
        };
        Self {
            service: Arc::new(service),
            shutdown_grace: config.shutdown_grace,
        }
    }

    /// The count of calls in flight, which also tells how long none ran.
    pub fn drain(&self) -> krm_fn::drain::Drain {
        self.service.gate.drain().clone()
    }

    #[cfg(test)]
    pub(crate) fn service(&self) -> Arc<Service> {
        self.service.clone()
    }

    /// Serves until `shutdown` resolves, then drains (see
    /// [`krm_fn::server::serve_evaluator`]).
    pub async fn serve(
        self,
        listener: impl Into<krm_fn::server::Listener>,
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
        let options = krm_fn::server::ServeOptions {
            max_message_bytes: max,
            max_streams_per_connection: MAX_STREAMS_PER_CONNECTION,
            stream_window: Some(STREAM_WINDOW),
            shutdown_grace: self.shutdown_grace,
            readiness: None,
        };
        krm_fn::server::serve_evaluator(listener, evaluator, drain, options, shutdown).await
    }
}
