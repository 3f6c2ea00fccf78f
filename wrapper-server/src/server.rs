//! The gRPC side of the wrapper: `evaluator.FunctionEvaluator` and health on
//! one port, one function process per call.
//!
//! A call goes: admission (draining? over the concurrency cap?) →
//! [`exec::run`] under the call's deadline → [`outcome`] maps exit status and
//! stdout to the answer of DESIGN.md's outcome table.
//!
//! EvaluateFunction requests are served by [`crate::stream`], which writes
//! the ResourceList into the function while the request is still arriving;
//! requests it does not handle (a compressed request, another method) go to
//! tonic's generated server around [`WrapperService`], which buffers the
//! whole request first. Both share admission, deadline and outcome mapping.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use proto::pb::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use tonic::server::NamedService;
use tonic::{Code, Request, Response, Status};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::exec::{self, ExecError, ExecSpec, Limits, Output};
use crate::metrics::{CallMetrics, Metrics, Outcome};
use crate::results;

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
    service: WrapperService,
}

/// Services whose health the wrapper reports: the server as a whole and the
/// evaluator.
pub const HEALTH_SERVICES: [&str; 2] = ["", proto::EVALUATOR_SERVICE];

impl Wrapper {
    pub fn new(config: ServerConfig, metrics: Arc<Metrics>) -> Self {
        let mut limits = Limits::new(config.max_output_bytes);
        // stderr goes back in the same response message as stdout.
        limits.max_stderr_bytes = config.max_message_bytes;
        let service = WrapperService {
            inner: Arc::new(Inner {
                limits,
                slots: config.max_concurrent.map(|n| Arc::new(Semaphore::new(n))),
                config,
                drain: Drain::default(),
                metrics,
            }),
        };
        Self { service }
    }

    #[cfg(test)]
    pub(crate) fn inner(&self) -> Arc<Inner> {
        self.service.inner.clone()
    }

    #[cfg(test)]
    pub(crate) fn drain(&self) -> Drain {
        self.service.inner.drain.clone()
    }

    /// Serves until `shutdown` resolves, then drains (see [`serve_evaluator`]).
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), tonic::transport::Error> {
        let inner = self.service.inner.clone();
        let max = inner.config.max_message_bytes;
        let drain = inner.drain.clone();
        // Compressed requests (gzip, as grpc-go clients can send them) take
        // the buffered path.
        let buffered = FunctionEvaluatorServer::new(self.service)
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let evaluator = crate::stream::Evaluator::new(inner, buffered);
        serve_evaluator(listener, evaluator, drain, max, shutdown).await
    }
}

/// Serves `evaluator` (an `evaluator.FunctionEvaluator` server) and gRPC
/// health on `listener` until `shutdown` resolves, then drains: health turns
/// NOT_SERVING for [`HEALTH_SERVICES`], the evaluator refuses new calls
/// (through `drain`), in-flight calls finish, and only then are connections
/// closed, so probes and watchers see NOT_SERVING rather than a refused
/// connection. Used by the wrapper and by the function runner.
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

#[derive(Clone)]
pub struct WrapperService {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ServerConfig,
    pub(crate) limits: Limits,
    slots: Option<Arc<Semaphore>>,
    drain: Drain,
    pub(crate) metrics: Arc<Metrics>,
}

/// Held while an admitted call runs: counts it for the drain, and holds its
/// concurrency slot.
pub(crate) struct Admission {
    _drain: DrainGuard,
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Graceful drain: counts calls in progress, and once draining refuses new
/// ones and lets the drain wait for the last one. Shared with the runner.
#[derive(Clone, Default)]
pub struct Drain(Arc<DrainState>);

#[derive(Default)]
struct DrainState {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Drain {
    /// Admits a call, or `None` once draining. The call counts until the
    /// guard drops (finished, failed or cancelled).
    pub fn enter(&self) -> Option<DrainGuard> {
        // Counted before the check, so `drain` either waits for this call
        // or this call sees the drain.
        self.0.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = DrainGuard(self.clone());
        (!self.0.draining.load(Ordering::SeqCst)).then_some(guard)
    }

    pub fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::SeqCst)
    }

    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// Starts draining and resolves once no admitted call is running.
    pub async fn drain(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        loop {
            let idle = self.0.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            idle.await;
        }
    }
}

pub struct DrainGuard(Drain);

impl Drop for DrainGuard {
    fn drop(&mut self) {
        if self.0 .0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0 .0.idle.notify_waiters();
        }
    }
}

#[tonic::async_trait]
impl FunctionEvaluator for WrapperService {
    async fn evaluate_function(
        &self,
        request: Request<EvaluateFunctionRequest>,
    ) -> Result<Response<EvaluateFunctionResponse>, Status> {
        let inner = &self.inner;
        let started = Instant::now();
        // The deadline is enforced here rather than by tonic's own timeout
        // layer, which answers CANCELLED; a few ms early so ours wins.
        let deadline = Inner::deadline(started, grpc_timeout(request.metadata()));
        let req = request.into_inner();
        let image = inner.image_or_entrypoint(req.image);
        let mut call = inner.metrics.start_call(req.resource_list.len());
        let result = inner.evaluate(&image, req.resource_list, deadline).await;
        inner.log_call(&image, &result, started, &mut call);
        result.map(Response::new).map_err(|(_, status)| status)
    }
}

pub(crate) type CallError = (Outcome, Status);

impl Inner {
    /// The image a call names, or the entrypoint if it names none.
    pub(crate) fn image_or_entrypoint(&self, image: String) -> String {
        if image.is_empty() {
            self.config.entrypoint.display_program()
        } else {
            image
        }
    }

    /// The call's deadline: a few ms before the client's `grpc-timeout`, so
    /// that our DEADLINE_EXCEEDED (and the kill) wins over the client's own.
    pub(crate) fn deadline(started: Instant, timeout: Option<Duration>) -> Option<Instant> {
        timeout.map(|d| started + d.saturating_sub(Duration::from_millis(5)))
    }

    /// Admits a call, or refuses it: draining, or at the concurrency cap.
    pub(crate) fn admit(&self) -> Result<Admission, CallError> {
        let Some(drain) = self.drain.enter() else {
            return Err((
                Outcome::ShuttingDown,
                Status::unavailable("wrapper-server is shutting down; retry on another pod"),
            ));
        };
        let slot = match &self.slots {
            None => None,
            Some(slots) => Some(slots.clone().try_acquire_owned().map_err(|_| {
                (
                    Outcome::Busy,
                    Status::resource_exhausted(format!(
                        "wrapper-server is already running {} evaluations (--max-concurrent-evaluations)",
                        self.config.max_concurrent.unwrap_or_default()
                    )),
                )
            })?),
        };
        Ok(Admission {
            _drain: drain,
            _slot: slot,
        })
    }

    /// Accounts for a finished call (metrics) and logs it, without contents.
    pub(crate) fn log_call(
        &self,
        image: &str,
        result: &Result<EvaluateFunctionResponse, CallError>,
        started: Instant,
        call: &mut CallMetrics,
    ) {
        let outcome = match result {
            Ok(_) => Outcome::Ok,
            Err((outcome, _)) => *outcome,
        };
        let output_bytes = result.as_ref().map_or(0, |r| r.resource_list.len());
        call.finish(outcome, output_bytes);
        tracing::info!(
            image = %image,
            outcome = outcome.as_str(),
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            input_bytes = call.input_bytes(),
            output_bytes,
            "evaluated"
        );
    }

    async fn evaluate(
        &self,
        image: &str,
        input: Bytes,
        deadline: Option<Instant>,
    ) -> Result<EvaluateFunctionResponse, CallError> {
        let _admitted = self.admit()?;
        let run = exec::run(&self.config.entrypoint, input, &self.limits);
        // Past the deadline the run is dropped: its process group is killed.
        let Some(output) = before(deadline, run).await else {
            return Err(deadline_exceeded(image));
        };
        self.answer(image, output)
    }

    /// The answer for a call whose function ran (or could not run).
    pub(crate) fn answer(
        &self,
        image: &str,
        output: Result<Output, ExecError>,
    ) -> Result<EvaluateFunctionResponse, CallError> {
        match output {
            Ok(output) => outcome(image, output, self.config.max_message_bytes),
            Err(err @ ExecError::Spawn { .. }) => Err((
                Outcome::StartFailed,
                Status::internal(format!("cannot start function {image:?}: {err}")),
            )),
            Err(ExecError::OutputTooLarge { limit }) => Err((
                Outcome::OutputTooLarge,
                Status::resource_exhausted(format!(
                    "function {image:?} wrote more than {limit} bytes on stdout (--max-output-bytes); it was stopped"
                )),
            )),
            Err(err @ ExecError::Io { .. }) => Err((
                Outcome::Internal,
                Status::internal(format!("running function {image:?}: {err}")),
            )),
        }
    }
}

/// Runs `fut` to completion, or until `deadline` (`None` then; `fut` is
/// dropped).
pub(crate) async fn before<T>(
    deadline: Option<Instant>,
    fut: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(fut.await),
        Some(deadline) => tokio::time::timeout_at(deadline.into(), fut).await.ok(),
    }
}

/// The answer when a call's deadline passed (its processes were killed).
pub(crate) fn deadline_exceeded(image: &str) -> CallError {
    (
        Outcome::DeadlineExceeded,
        Status::deadline_exceeded(format!(
            "function {image:?} did not finish before the deadline; its processes were killed"
        )),
    )
}

/// Longest stderr quoted in an error message: statuses travel in HTTP/2
/// headers, and grpc-go clients refuse header lists over 16 KiB.
const MAX_QUOTED_STDERR: usize = 4 * 1024;
/// Longest list of results quoted in an error message.
const MAX_QUOTED_RESULTS: usize = 8 * 1024;

/// Maps a finished process to the answer of DESIGN.md's outcome table.
pub fn outcome(
    image: &str,
    output: Output,
    max_message_bytes: usize,
) -> Result<EvaluateFunctionResponse, CallError> {
    let parsed = results::parse_output(&output.stdout);
    if output.status.success() {
        return match parsed {
            Ok(_) => fit_response(image, output, max_message_bytes),
            Err(err) => Err((
                Outcome::InvalidOutput,
                Status::internal(format!(
                    "function {image:?} exited 0 but its output is not a ResourceList: {err}{}",
                    quote_stderr(&output.stderr)
                )),
            )),
        };
    }
    let status = output.status;
    let message = match parsed {
        Ok(rl) if !rl.results.is_empty() => format!(
            "failed to evaluate function {image:?} ({status}) with structured results:\n{}{}",
            truncate_text(&results::format_results(&rl.results), MAX_QUOTED_RESULTS),
            quote_stderr(&output.stderr)
        ),
        Ok(_) => format!("failed to evaluate function {image:?} ({status}){}", quote_stderr(&output.stderr)),
        Err(err) => format!(
            "failed to evaluate function {image:?} ({status}); its output is not a ResourceList: {err}{}",
            quote_stderr(&output.stderr)
        ),
    };
    Err((Outcome::FunctionFailed, Status::internal(message)))
}

/// Builds the OK answer, shortening the log (keeping its end, where errors
/// usually are) if stdout and stderr together exceed the message limit.
fn fit_response(
    image: &str,
    output: Output,
    max_message_bytes: usize,
) -> Result<EvaluateFunctionResponse, CallError> {
    let mut resp = EvaluateFunctionResponse {
        resource_list: output.stdout,
        log: output.stderr,
    };
    let over = resp.encoded_len().saturating_sub(max_message_bytes);
    if over > 0 {
        if over <= resp.log.len() {
            // Drop `over` bytes of log, plus a little for the shorter varint.
            let keep = resp.log.len().saturating_sub(over + 16);
            resp.log = resp.log.slice(resp.log.len() - keep..);
        } else {
            return Err((
                Outcome::OutputTooLarge,
                Status::resource_exhausted(format!(
                    "function {image:?} output ({} bytes) does not fit the {max_message_bytes}-byte message limit (--max-request-body-size)",
                    resp.resource_list.len()
                )),
            ));
        }
    }
    Ok(resp)
}

fn quote_stderr(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim_end();
    if text.is_empty() {
        String::new()
    } else {
        format!("\nstderr:\n{}", truncate_tail(text, MAX_QUOTED_STDERR))
    }
}

/// The first `max` bytes of `text` (on a char boundary), marked if cut.
fn truncate_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} more bytes)", &text[..end], text.len() - end)
}

/// The last `max` bytes of `text` (on a char boundary), marked if cut.
fn truncate_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("... ({start} bytes before)\n{}", &text[start..])
}

/// The `grpc-timeout` the client sent (`<digits><unit>`, units H M S m u n).
pub fn grpc_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    grpc_timeout_header(metadata.as_ref())
}

/// [`grpc_timeout`] from HTTP headers.
pub(crate) fn grpc_timeout_header(headers: &http::HeaderMap) -> Option<Duration> {
    parse_grpc_timeout(headers.get("grpc-timeout")?.to_str().ok()?)
}

fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// tonic answers a request over the decoding limit with OUT_OF_RANGE; the
/// gRPC spec and grpc-go say RESOURCE_EXHAUSTED, which is what Porch and its
/// clients expect. Our handler never answers OUT_OF_RANGE itself, so every
/// OUT_OF_RANGE leaving this service is that case.
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::exec::ExitStatus;

    fn out(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            status: ExitStatus::Code(code),
            stdout: Bytes::copy_from_slice(stdout.as_bytes()),
            stderr: Bytes::copy_from_slice(stderr.as_bytes()),
            stderr_truncated: false,
        }
    }

    fn service(entrypoint: &[&str]) -> WrapperService {
        let config = ServerConfig {
            entrypoint: ExecSpec::from_argv(entrypoint.iter().copied()).unwrap(),
            max_message_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_concurrent: None,
        };
        Wrapper::new(config, Arc::new(Metrics::new())).service
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
        let drain = svc.inner.drain.clone();
        tokio::spawn(async move { drain.drain().await });
        tokio::task::yield_now().await;
        assert!(svc.inner.drain.is_draining());
        let err = svc
            .evaluate_function(Request::new(EvaluateFunctionRequest::default()))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        assert_eq!(svc.inner.drain.in_flight(), 0);
    }

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(parse_grpc_timeout("1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("10u"), Some(Duration::from_micros(10)));
        assert_eq!(
            parse_grpc_timeout("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(parse_grpc_timeout("123456789S"), None, "more than 8 digits");
        assert_eq!(parse_grpc_timeout("1x"), None);
        assert_eq!(parse_grpc_timeout("S"), None);
    }

    #[test]
    fn ok_response_is_stdout_unchanged_and_stderr_as_log() {
        let rl = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
        let resp = outcome("img", out(0, rl, "note\n"), 1 << 20).unwrap();
        assert_eq!(&resp.resource_list[..], rl.as_bytes());
        assert_eq!(&resp.log[..], b"note\n");
    }

    #[test]
    fn log_is_shortened_to_fit_the_message_limit() {
        let rl = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
        let stderr = format!("{}END", "x".repeat(2000));
        let resp = outcome("img", out(0, rl, &stderr), 1000).unwrap();
        assert!(resp.encoded_len() <= 1000);
        assert!(resp.log.ends_with(b"END"));
        assert_eq!(&resp.resource_list[..], rl.as_bytes());
    }

    #[test]
    fn stdout_over_the_message_limit_is_resource_exhausted() {
        let rl = format!(
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n# {}\n",
            "x".repeat(2000)
        );
        let (outcome, status) = outcome("img", out(0, &rl, ""), 1000).unwrap_err();
        assert_eq!(outcome, Outcome::OutputTooLarge);
        assert_eq!(status.code(), Code::ResourceExhausted);
    }

    #[test]
    fn long_stderr_is_quoted_by_its_tail() {
        let stderr = format!("{}TAIL", "y".repeat(10_000));
        let (_, status) = outcome("img", out(1, "", &stderr), 1 << 20).unwrap_err();
        assert!(status.message().len() < MAX_QUOTED_STDERR + 200);
        assert!(status.message().ends_with("TAIL"));
    }
}
