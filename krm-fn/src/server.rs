//! The gRPC server both binaries run: an `evaluator.FunctionEvaluator`
//! service and gRPC health on one port, with a graceful drain.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::StreamExt;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::server::NamedService;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::Code;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::drain::Drain;

pub mod guard;

/// Services whose health is reported: the server as a whole and the
/// evaluator.
pub const HEALTH_SERVICES: [&str; 2] = ["", proto::EVALUATOR_SERVICE];

/// Sets health from `readiness` as it changes, until `draining`.
async fn follow_readiness(
    mut readiness: tokio::sync::watch::Receiver<bool>,
    health: HealthReporter,
    draining: CancellationToken,
) {
    loop {
        let ready = *readiness.borrow_and_update();
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in HEALTH_SERVICES {
            health.set_service_status(name, status).await;
        }
        // A drain that began while the status was set is not undone.
        if draining.is_cancelled() {
            for name in HEALTH_SERVICES {
                health
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            return;
        }
        tokio::select! {
            changed = readiness.changed() => if changed.is_err() { return },
            () = draining.cancelled() => return,
        }
    }
}

/// Default for `--shutdown-grace`: under Kubernetes' default termination
/// grace period (30 s), leaving the runner time to stop its pods after.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// After the drain, how long connections get to close on their own (GOAWAY
/// sent, no new streams) before they are closed under the client.
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// Streams a client may have reset before the server accepted them, per
/// connection, before h2 answers with GOAWAY `too_many_resets`. h2's default
/// (20) is a defence against "rapid reset" floods, but ordinary gRPC
/// cancellations reach it on a busy machine, and the GOAWAY fails every
/// other call on the connection. The concurrent-streams cap already bounds
/// what a flood can keep open, so this can be generous.
const MAX_PENDING_ACCEPT_RESETS: usize = 1024;

/// How a server is bounded.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Largest gRPC message, both directions.
    pub max_message_bytes: usize,
    /// Streams open at once on one connection (more wait in the client).
    pub max_streams_per_connection: u32,
    /// Each stream's HTTP/2 flow-control window: what a client may send on
    /// a stream whose request the server is not reading yet. `None`: room
    /// for a whole request (twice the message limit). The connection's
    /// window is then made room for every stream's: were it smaller, the
    /// data of streams not read yet could fill it and starve the streams
    /// being read.
    pub stream_window: Option<u32>,
    /// From the shutdown signal until every connection is closed: calls
    /// still running when it ends are cancelled.
    pub shutdown_grace: Duration,
    /// Whether the server can do its job now, if something tells (the
    /// runner: whether its backend can start pods): health follows it,
    /// SERVING while true, NOT_SERVING while false, until the drain.
    pub readiness: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Where a server accepts connections: a TCP port, or a Unix socket (the
/// runner's docker backend reaches a function container that has no
/// network through a socket in a directory mounted into it).
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Listener::Tcp(listener)
    }
}

impl From<UnixListener> for Listener {
    fn from(listener: UnixListener) -> Self {
        Listener::Unix(listener)
    }
}

/// A Unix connection's stand-in for a peer address, unique per connection
/// in this process: the per-connection bookkeeping (call slots, the close
/// tokens of [`close_connection`]) is keyed by peer address, and Unix peers
/// have none. Unique local addresses (`fd00::/8`), port 0: no TCP peer has
/// port 0.
fn unix_peer() -> std::net::SocketAddr {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ip = std::net::Ipv6Addr::from((0xfd00u128 << 112) | u128::from(n));
    std::net::SocketAddr::new(ip.into(), 0)
}

/// Serves `evaluator` (an `evaluator.FunctionEvaluator` server) and gRPC
/// health on `listener` until `shutdown` resolves, then drains: health turns
/// NOT_SERVING for [`HEALTH_SERVICES`] (and keeps answering on old and new
/// connections), the evaluator refuses new calls (through `drain`), and
/// in-flight calls may finish within `shutdown_grace`. Then every connection
/// is sent GOAWAY and, [`CLOSE_WAIT`] later, closed, whatever its client
/// does: an idle connection, a bare preface or half a request cannot hold
/// the process.
///
/// Every request is checked as grpc-go checks it first ([`guard`]).
pub async fn serve_evaluator<S>(
    listener: impl Into<Listener>,
    evaluator: S,
    drain: Drain,
    options: ServeOptions,
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
    let ready = options.readiness.as_ref().is_none_or(|r| *r.borrow());
    for name in HEALTH_SERVICES {
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        health.set_service_status(name, status).await;
    }
    let draining = CancellationToken::new();
    // However serving ends, readiness stops being followed.
    let _stop_following = draining.clone().drop_guard();
    if let Some(readiness) = options.readiness.clone() {
        tokio::spawn(follow_readiness(
            readiness,
            health.clone(),
            draining.clone(),
        ));
    }
    let health_service = tonic_health::pb::health_server::HealthServer::new(
        tonic_health::server::HealthService::from_health_reporter(health.clone()),
    );
    let close_all = CancellationToken::new();
    let stop = {
        let close_all = close_all.clone();
        async move {
            shutdown.await;
            // Readiness no longer moves health: the drain holds it down.
            draining.cancel();
            let grace = options.shutdown_grace;
            let close_at = tokio::time::Instant::now() + grace;
            for name in HEALTH_SERVICES {
                health
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            tracing::info!(
                in_flight = drain.in_flight(),
                grace_ms = grace.as_millis() as u64,
                "draining: health NOT_SERVING, new calls refused"
            );
            // Calls get the grace but the last moments, kept for closing.
            let drain_by = close_at - grace.min(CLOSE_WAIT);
            if tokio::time::timeout_at(drain_by, drain.drain())
                .await
                .is_err()
            {
                tracing::warn!(
                    in_flight = drain.in_flight(),
                    "shutdown grace ran out: cancelling the calls still running"
                );
            }
            // Returning stops the accept loop and sends GOAWAY on every
            // connection; those still open a moment later are closed.
            let force_at = close_at.min(tokio::time::Instant::now() + CLOSE_WAIT);
            tokio::spawn(async move {
                tokio::time::sleep_until(force_at).await;
                close_all.cancel();
            });
        }
    };
    // tonic's `tcp_nodelay` only applies to listeners it binds itself: set it
    // on each accepted socket, or Nagle adds ~40 ms to small answers.
    let accepted: std::pin::Pin<Box<dyn tokio_stream::Stream<Item = std::io::Result<Io>> + Send>> =
        match listener.into() {
            Listener::Tcp(listener) => Box::pin(TcpListenerStream::new(listener).map(|conn| {
                conn.map(|stream| {
                    if let Err(err) = stream.set_nodelay(true) {
                        tracing::debug!(%err, "TCP_NODELAY");
                    }
                    let peer = stream.peer_addr().ok();
                    Io::Tcp(stream, peer)
                })
            })),
            Listener::Unix(listener) => Box::pin(
                UnixListenerStream::new(listener)
                    .map(|conn| conn.map(|stream| Io::Unix(stream, unix_peer()))),
            ),
        };
    let incoming = accepted.map(move |conn| {
        conn.map(|io| {
            // Each connection can also be closed alone (`close_connection`).
            let token = close_all.child_token();
            let registered = io
                .peer()
                .map(|peer| (peer, register_connection(peer, &token)));
            let mut conn = Closable::new(io, &token);
            conn.registered = registered;
            conn
        })
    });
    // Room for a whole request in flight; HTTP/2 caps windows at 2^31-1.
    let window = u32::try_from(
        options
            .max_message_bytes
            .saturating_mul(2)
            .clamp(1 << 20, 1 << 30),
    )
    .unwrap_or(1 << 30);
    let (stream_window, connection_window) = match options.stream_window {
        None => (window, window),
        Some(w) => (
            w,
            u32::try_from(u64::from(w) * u64::from(options.max_streams_per_connection))
                .unwrap_or(i32::MAX as u32)
                .min(i32::MAX as u32)
                .max(window),
        ),
    };
    tonic::transport::Server::builder()
        .initial_connection_window_size(connection_window)
        .initial_stream_window_size(stream_window)
        .max_frame_size(1 << 20)
        .max_concurrent_streams(options.max_streams_per_connection)
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESETS))
        .layer(guard::RequireGrpcLayer)
        .add_service(health_service)
        .add_service(MapOutOfRange(evaluator))
        .serve_with_incoming_shutdown(incoming, stop)
        .await
}

/// Closes the connection from `peer` (as at the end of a shutdown), if it
/// is still open: for a client that holds what it was sent and never reads
/// it.
pub fn close_connection(peer: std::net::SocketAddr) {
    if let Some((_, token)) = lock_close_tokens().get(&peer) {
        token.cancel();
    }
}

type CloseTokens = std::collections::HashMap<std::net::SocketAddr, (u64, CancellationToken)>;

static CLOSE_TOKENS: std::sync::LazyLock<std::sync::Mutex<CloseTokens>> =
    std::sync::LazyLock::new(Default::default);

static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn lock_close_tokens() -> std::sync::MutexGuard<'static, CloseTokens> {
    CLOSE_TOKENS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers a connection's close token; returns its number, with which
/// [`Closable`]'s drop forgets it.
fn register_connection(peer: std::net::SocketAddr, token: &CancellationToken) -> u64 {
    let n = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    lock_close_tokens().insert(peer, (n, token.clone()));
    n
}

/// An accepted connection, with its peer address (for a Unix one, a
/// stand-in: [`unix_peer`]).
enum Io {
    Tcp(TcpStream, Option<std::net::SocketAddr>),
    Unix(UnixStream, std::net::SocketAddr),
}

impl Io {
    fn peer(&self) -> Option<std::net::SocketAddr> {
        match self {
            Io::Tcp(_, peer) => *peer,
            Io::Unix(_, peer) => Some(*peer),
        }
    }
}

/// Forwards to the stream inside, whichever it is.
macro_rules! io_forward {
    ($self:ident, $s:ident => $e:expr) => {
        match &mut $self.stream {
            Io::Tcp(stream, _) => {
                let $s = Pin::new(stream);
                $e
            }
            Io::Unix(stream, _) => {
                let $s = Pin::new(stream);
                $e
            }
        }
    };
}

/// An accepted connection that ends (EOF on read, an error on write) once
/// `close` is cancelled, whatever state its HTTP/2 session is in.
struct Closable {
    stream: Io,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    is_closed: bool,
    /// Its entry for [`close_connection`].
    registered: Option<(std::net::SocketAddr, u64)>,
}

impl Drop for Closable {
    fn drop(&mut self) {
        if let Some((peer, n)) = self.registered {
            let mut tokens = lock_close_tokens();
            if tokens.get(&peer).is_some_and(|(m, _)| *m == n) {
                tokens.remove(&peer);
            }
        }
    }
}

impl Closable {
    fn new(stream: Io, close: &CancellationToken) -> Self {
        Self {
            stream,
            closed: Box::pin(close.clone().cancelled_owned()),
            is_closed: false,
            registered: None,
        }
    }

    /// Whether the close came; registers the task to be woken when it does.
    fn poll_closed(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.is_closed && self.closed.as_mut().poll(cx).is_ready() {
            self.is_closed = true;
        }
        self.is_closed
    }
}

fn closed_error() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "server shut down")
}

impl AsyncRead for Closable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.poll_closed(cx) {
            return Poll::Ready(Ok(()));
        }
        io_forward!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Closable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.poll_closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        io_forward!(self, s => s.poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.poll_closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        io_forward!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.poll_closed(cx) {
            return Poll::Ready(Ok(()));
        }
        io_forward!(self, s => s.poll_shutdown(cx))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if self.poll_closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        io_forward!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Io::Tcp(stream, _) => stream.is_write_vectored(),
            Io::Unix(stream, _) => stream.is_write_vectored(),
        }
    }
}

impl Connected for Closable {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        match &self.stream {
            Io::Tcp(stream, _) => stream.connect_info(),
            Io::Unix(_, peer) => TcpConnectInfo {
                local_addr: None,
                remote_addr: Some(*peer),
            },
        }
    }
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
