//! The gRPC server both binaries run: an `evaluator.FunctionEvaluator`
//! service and gRPC health on one port, with a graceful drain.

use std::future::Future;
use std::task::{Context, Poll};

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use tonic::server::NamedService;
use tonic::Code;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::drain::Drain;

/// Services whose health is reported: the server as a whole and the
/// evaluator.
pub const HEALTH_SERVICES: [&str; 2] = ["", proto::EVALUATOR_SERVICE];

/// Serves `evaluator` (an `evaluator.FunctionEvaluator` server) and gRPC
/// health on `listener` until `shutdown` resolves, then drains: health turns
/// NOT_SERVING for [`HEALTH_SERVICES`], the evaluator refuses new calls
/// (through `drain`), in-flight calls finish, and only then are connections
/// closed, so probes and watchers see NOT_SERVING rather than a refused
/// connection.
pub async fn serve_evaluator<S>(
    listener: TcpListener,
    evaluator: S,
    drain: Drain,
    max_message_bytes: usize,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let health = HealthReporter::new();
    for name in HEALTH_SERVICES {
        health
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let health_service = tonic_health::pb::health_server::HealthServer::new(
        tonic_health::server::HealthService::from_health_reporter(health.clone()),
    );
    let stop = async move {
        shutdown.await;
        for name in HEALTH_SERVICES {
            health
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
        tracing::info!(
            in_flight = drain.in_flight(),
            "draining: health NOT_SERVING, new calls refused"
        );
        drain.drain().await;
    };
    // tonic's `tcp_nodelay` only applies to listeners it binds itself: set it
    // on each accepted socket, or Nagle adds ~40 ms to small answers.
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            if let Err(err) = stream.set_nodelay(true) {
                tracing::debug!(%err, "TCP_NODELAY");
            }
        })
    });
    // Room for a whole request in flight; HTTP/2 caps windows at 2^31-1.
    let window = u32::try_from(max_message_bytes.saturating_mul(2).clamp(1 << 20, 1 << 30))
        .unwrap_or(1 << 30);
    tonic::transport::Server::builder()
        .initial_connection_window_size(window)
        .initial_stream_window_size(window)
        .max_frame_size(1 << 20)
        .add_service(health_service)
        .add_service(MapOutOfRange(evaluator))
        .serve_with_incoming_shutdown(incoming, stop)
        .await
}

/// tonic answers a request over the decoding limit with OUT_OF_RANGE; the
/// gRPC spec and grpc-go say RESOURCE_EXHAUSTED, which is what Porch and its
/// clients expect. Our handlers never answer OUT_OF_RANGE themselves, so
/// every OUT_OF_RANGE leaving this service is that case.
#[derive(Clone)]
struct MapOutOfRange<S>(S);

impl<S> NamedService for MapOutOfRange<S>
where
    S: NamedService,
{
    const NAME: &'static str = S::NAME;
}

impl<S, B> tower::Service<http::Request<B>> for MapOutOfRange<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let fut = self.0.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            let out_of_range = (Code::OutOfRange as i32).to_string();
            if resp
                .headers()
                .get("grpc-status")
                .is_some_and(|v| v.as_bytes() == out_of_range.as_bytes())
            {
                let exhausted = (Code::ResourceExhausted as i32).to_string();
                if let Ok(v) = http::HeaderValue::from_str(&exhausted) {
                    resp.headers_mut().insert("grpc-status", v);
                }
            }
            Ok(resp)
        })
    }
}
