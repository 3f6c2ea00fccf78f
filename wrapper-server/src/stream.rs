//! EvaluateFunction streamed: the ResourceList is written into the
//! function's stdin while the request body is still arriving, straight from
//! the HTTP/2 DATA frames (no copy in user space).
//!
//! tonic's generated server would first collect the whole message into one
//! buffer (a copy of the request), decode it, and only then could the
//! function start; its answer is copied once more into an encode buffer.
//! Here the function is spawned as soon as the `resource_list` field's
//! header has arrived, and stdout is sent as it is (see `ok_response`). The
//! DATA frames of the list are still kept, as they came, until the request
//! is whole: a call whose client stalls is run again on all of them (see
//! `run_streamed`). So the request is held in memory until it is in, as
//! with tonic, but once, never copied into one buffer. The gain is that
//! copy wherever the body is already in when the handler runs, and the
//! overlap of upload and run where it is not.
//!
//! What is parsed by hand is only the framing: the gRPC message prefix
//! (compressed flag, length) and, up to `resource_list`, the protobuf field
//! keys and lengths. Every other byte of the message (the fields before and
//! after `resource_list`, known or not) is kept and decoded with prost at
//! the end, so unknown fields are ignored and malformed ones refused exactly
//! as a generated decoder does. Protobuf's rule that the last occurrence of
//! a field wins is kept too: if `resource_list` comes again later in the
//! message, the streamed run is discarded and the function runs on the last
//! value.
//!
//! Requests this path does not take go to the buffered server: a
//! `grpc-encoding` other than `identity` (compressed messages; gzip is
//! inflated on the way, see [`crate::gzip`]), and any other method of the
//! service, unchanged.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use krm_fn::call::{deadline, Admission, CallError, Function, RequestError};
use krm_fn::exec::{ExecError, Input, Output};
use prost::Message;
use proto::pb::function_evaluator_server::FunctionEvaluatorServer;
use proto::pb::EvaluateFunctionResponse;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tonic::Status;
use tracing::Instrument as _;

use crate::metrics::CallMetrics;
use crate::service::{Buffered, Service};

/// The one method served here.
pub(crate) const EVALUATE_PATH: &str = "/evaluator.FunctionEvaluator/EvaluateFunction";

/// Chunks queued between the request body and the function's stdin. The
/// HTTP/2 flow-control window bounds what is in flight anyway; this only
/// lets the body run a little ahead of the pipe.
const QUEUED_CHUNKS: usize = 16;

/// Up to this size a response's ResourceList is copied into one frame with
/// its framing; larger ones are sent as they are.
const SMALL_RESPONSE: usize = 64 * 1024;

/// The `evaluator.FunctionEvaluator` service: EvaluateFunction streamed into
/// the function, everything else to the buffered tonic server.
#[derive(Clone)]
pub(crate) struct Evaluator {
    service: Arc<Service>,
    buffered: FunctionEvaluatorServer<Buffered>,
}

impl Evaluator {
    pub(crate) fn new(service: Arc<Service>, buffered: FunctionEvaluatorServer<Buffered>) -> Self {
        Self { service, buffered }
    }
}

impl NamedService for Evaluator {
    const NAME: &'static str = proto::EVALUATOR_SERVICE;
}

impl tower::Service<http::Request<Body>> for Evaluator {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The generated server is always ready too.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != EVALUATE_PATH {
            return Box::pin(tower::Service::call(&mut self.buffered, req));
        }
        let service = self.service.clone();
        if !identity_encoding(req.headers()) {
            let buffered = self.buffered.clone();
            return Box::pin(async move { Ok(evaluate_buffered(&service, buffered, req).await) });
        }
        Box::pin(async move { Ok(evaluate(&service, req).await) })
    }
}

/// A compressed EvaluateFunction, which tonic's generated server decodes
/// whole (gzip inflated first, bounded, by [`crate::gzip`]): it takes a
/// slot on its connection first, as a streamed call does, holds it until
/// its answer is sent, and its request must arrive within the read timeout.
async fn evaluate_buffered(
    service: &Service,
    mut buffered: FunctionEvaluatorServer<Buffered>,
    req: http::Request<Body>,
) -> http::Response<Body> {
    let peer = peer_of(&req);
    let held = Held {
        connection_slot: service.connections.acquire(peer).await,
        admission: None,
    };
    let timeout = service.request_read_timeout;
    let (mut parts, body) = req.into_parts();
    let body = ReadBy {
        body,
        timer: Box::pin(tokio::time::sleep(timeout)),
        timeout,
    };
    // Gzip is inflated here, bounded, not by tonic: see `crate::gzip`.
    let body = if crate::gzip::take_gzip(&mut parts.headers) {
        Body::new(crate::gzip::Inflating::new(
            body,
            service.function.max_message_bytes,
        ))
    } else {
        Body::new(body)
    };
    let req = http::Request::from_parts(parts, body);
    let resp = match tower::Service::call(&mut buffered, req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    resp.map(|body| Body::new(Holding::new(body, held, timeout, peer)))
}

/// A request body that fails once `timer` fires before it ended
/// (`--request-read-timeout`).
struct ReadBy {
    body: Body,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    timeout: std::time::Duration,
}

impl http_body::Body for ReadBy {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            let err = CallError::from(RequestError::ReadTimeout {
                after: self.timeout,
            });
            return Poll::Ready(Some(Err(Status::from(err))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The client's address: the key of its connection's slots.
fn peer_of(req: &http::Request<Body>) -> Option<std::net::SocketAddr> {
    req.extensions()
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
}

/// No `grpc-encoding`, or `identity`: messages are not compressed.
fn identity_encoding(headers: &http::HeaderMap) -> bool {
    headers
        .get("grpc-encoding")
        .is_none_or(|v| v.as_bytes() == b"identity")
}

async fn evaluate(service: &Service, req: http::Request<Body>) -> http::Response<Body> {
    let started = Instant::now();
    let deadline = deadline::from_headers(req.headers());
    let span = crate::service::call_span(req.headers());
    let mut call = service.metrics.start_call(0);
    // The function's name, known once the request's other fields are decoded.
    let mut image = None;
    // The call's slot on its connection and its admission, held until its
    // answer is sent.
    let peer = peer_of(&req);
    let mut held = Held::default();
    let body = req.into_body();
    let call_fut = async {
        // From the call's start until it is admitted (or refused): the wait
        // for a slot on its connection and the request up to its
        // ResourceList.
        let admission =
            tracing::info_span!(target: "otel", "admission", refused = tracing::field::Empty);
        // Waits (its request unread) for a slot on its connection; the
        // drain ends the wait, the call would be refused after it.
        held.connection_slot = unless_draining(service.gate.drain(), async {
            Ok(service.connections.acquire(peer).await)
        })
        .instrument(admission.clone())
        .await?;
        // The request must arrive in full within the read timeout, from now.
        let body = BodyReader::new(
            body,
            tokio::time::Instant::now() + service.request_read_timeout,
            service.request_read_timeout,
        );
        run_call(
            service,
            body,
            &mut call,
            &mut image,
            &mut held.admission,
            admission,
        )
        .await
    };
    // Past the deadline the call is dropped: its process group is killed.
    let finished = deadline::before(deadline, call_fut)
        .instrument(span.clone())
        .await;
    let image = image.unwrap_or_else(|| service.function.name_or_entrypoint(String::new()));
    let result = finished.unwrap_or_else(|| {
        Err(CallError::DeadlineExceeded {
            image: image.clone(),
        })
    });
    service.log_call(&image, &result, started, &mut call, &span);
    match result {
        Ok(resp) => ok_response(resp)
            .map(|body| Body::new(Holding::new(body, held, service.request_read_timeout, peer))),
        Err(err) => Status::from(err).into_http(),
    }
}

/// A response body that holds the call's admission until its last frame
/// was taken (or it is dropped: the client went away). An answer the client
/// does not read keeps counting against the concurrency cap and the drain,
/// so unread answers cannot pile up in memory beyond the cap.
///
/// Data goes out in slices of at most [`SEND_SLICE`]: hyper takes the next
/// frame only once the stream has send capacity, so an answer is counted
/// until its last slice is on its way, not once it sits whole in h2's
/// buffer. An answer not sent in full within the timeout (the client does
/// not read it) closes its connection, which frees what it held: hyper does
/// not poll a body whose stream has no send window, so the timer runs in a
/// task of its own.
struct Holding {
    body: Body,
    held: Option<Held>,
    /// The rest of a data frame larger than a slice.
    rest: Bytes,
    /// Closes the connection when the answer took too long; aborted once it
    /// is sent (or dropped).
    timer: Option<tokio::task::AbortHandle>,
}

/// Largest data frame handed to hyper at once (see [`Holding`]).
const SEND_SLICE: usize = 256 * 1024;

impl Holding {
    /// `send_timeout`: how long the whole answer may take to be sent to
    /// `peer`.
    fn new(
        body: Body,
        held: Held,
        send_timeout: std::time::Duration,
        peer: Option<std::net::SocketAddr>,
    ) -> Self {
        let timer = peer.map(|peer| {
            tokio::spawn(async move {
                tokio::time::sleep(send_timeout).await;
                tracing::info!(%peer, "an answer was not read within --request-read-timeout: closing its connection");
                krm_fn::server::close_connection(peer);
            })
            .abort_handle()
        });
        Self {
            body,
            held: Some(held),
            rest: Bytes::new(),
            timer,
        }
    }

    fn slice(&mut self, mut data: Bytes) -> Frame<Bytes> {
        if data.len() > SEND_SLICE {
            self.rest = data.split_off(SEND_SLICE);
        }
        Frame::data(data)
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
    }
}

/// What a call holds until its answer is sent.
#[derive(Default)]
struct Held {
    connection_slot: Option<tokio::sync::OwnedSemaphorePermit>,
    admission: Option<Admission>,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if !self.rest.is_empty() {
            let rest = std::mem::take(&mut self.rest);
            return Poll::Ready(Some(Ok(self.slice(rest))));
        }
        match std::pin::Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(self.slice(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            Poll::Ready(None) => {
                self.held = None;
                if let Some(timer) = self.timer.take() {
                    timer.abort();
                }
                Poll::Ready(None)
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let mut hint = self.body.size_hint();
        let rest = self.rest.len() as u64;
        hint.set_lower(hint.lower() + rest);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// The fields of EvaluateFunctionRequest, with `resource_list` repeated: on
/// the wire a repeated `bytes` field is the same as a singular one given
/// several times, so this sees every occurrence (the last one wins).
#[derive(Clone, PartialEq, prost::Message)]
struct RequestFields {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    resource_list: Vec<Bytes>,
    #[prost(string, tag = "2")]
    image: String,
    #[prost(string, tag = "3")]
    tag: String,
}

/// How long an admitted call may wait for its client before it sent any of
/// its ResourceList; and how long, counted the same way, a call whose
/// request is still arriving may go on once the drain has started.
///
/// The function starts as soon as the ResourceList's header is in, so that
/// upload and run overlap; but an admitted call holds a concurrency slot and
/// keeps the drain waiting, which a client that stops sending (or trickles)
/// must not be able to do until `--request-read-timeout`. So an upload must
/// keep up a minimum rate ([`StallClock`]): it may spend this much waiting
/// for its client, plus a second per [`RATE_FLOOR`] bytes received, at most
/// [`MOST_CREDIT`] in hand. Past that the function is stopped, the slot
/// given back, the rest of the request read unadmitted, and the function
/// run again on the whole input ([`run_streamed`]): a slow client loses
/// the overlap, no more. Only time spent waiting for the client counts: a
/// function slow to read its stdin holds the client back through flow
/// control, which is not a stall. Two seconds leaves the other calls of a
/// server whose slots all stalled served within a few seconds. Constants
/// rather than flags: they only decide when the overlap is given up, and
/// `--request-read-timeout` still bounds the whole read.
const STALL_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// The slowest upload that keeps its slot, in bytes per second of waiting
/// for the client: each this many bytes received earn one more second.
/// Half a megabit per second: 16 uploads sharing one 8 Mbit/s connection
/// keep theirs, while a client that trickles must pay that much bandwidth
/// for every slot it holds.
const RATE_FLOOR: u64 = 64 * 1024;

/// The most client-wait an upload can have in hand: a client that sent much
/// and then stops gives its slot back within this (a rate alone would let
/// it keep its slot a second per [`RATE_FLOOR`] bytes it sent before).
const MOST_CREDIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Time spent waiting for the client, counted against what the upload
/// earned ([`STALL_BOUND`]), and once the drain started against
/// [`STALL_BOUND`] alone.
struct StallClock {
    /// Client-wait still in hand.
    left: std::time::Duration,
    /// Client-wait since the drain started.
    draining: std::time::Duration,
}

impl StallClock {
    fn new() -> Self {
        Self {
            left: STALL_BOUND,
            draining: std::time::Duration::ZERO,
        }
    }

    /// `n` more bytes of the request came in.
    fn received(&mut self, n: usize) {
        let earned = std::time::Duration::from_millis(
            u64::try_from(n).unwrap_or(u64::MAX).saturating_mul(1000) / RATE_FLOOR,
        );
        self.left = (self.left + earned).min(MOST_CREDIT);
    }

    /// `read` (a cancel-safe read of the request), or `None` if the client
    /// used up what it had in hand first (the read is then dropped, nothing
    /// consumed). UNAVAILABLE once it waited [`STALL_BOUND`] in all since
    /// the drain started.
    async fn wait<T>(
        &mut self,
        drain: &krm_fn::drain::Drain,
        read: impl Future<Output = Result<T, CallError>>,
    ) -> Result<Option<T>, CallError> {
        let from = tokio::time::Instant::now();
        let stalled = tokio::time::sleep_until(from + self.left);
        let mut drain_from = drain.is_draining().then_some(from);
        let cut_after = STALL_BOUND.saturating_sub(self.draining);
        tokio::pin!(read, stalled);
        let done = loop {
            let cut = async {
                match drain_from {
                    Some(at) => tokio::time::sleep_until(at + cut_after).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                read = &mut read => break read.map(Some),
                () = &mut stalled => break Ok(None),
                () = drain.draining(), if drain_from.is_none() => {
                    drain_from = Some(tokio::time::Instant::now());
                }
                () = cut => break Err(CallError::ShuttingDown),
            }
        };
        self.left = self.left.saturating_sub(from.elapsed());
        if let Some(at) = drain_from {
            self.draining += at.elapsed();
        }
        done
    }
}

/// `fut`, unless the drain starts first: then UNAVAILABLE at once. For the
/// parts of a call that is not admitted: it would be refused on admission
/// anyway, and waiting for its client must not keep the shutdown waiting.
async fn unless_draining<T>(
    drain: &krm_fn::drain::Drain,
    fut: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    tokio::select! {
        biased;
        done = fut => done,
        () = drain.draining() => Err(CallError::ShuttingDown),
    }
}

/// Reads the request and runs the function on it; see the module docs.
async fn run_call(
    service: &Service,
    mut body: BodyReader,
    call: &mut CallMetrics,
    image: &mut Option<String>,
    admitted: &mut Option<Admission>,
    admission: tracing::Span,
) -> Result<EvaluateFunctionResponse, CallError> {
    let function = &service.function;
    // Up to the ResourceList's header the call is not admitted: a client
    // that stalls before it holds no slot, and the drain ends it.
    let (mut msg, mut other, streamed) = unless_draining(service.gate.drain(), async {
        let len = body.message_prefix(function.max_message_bytes).await?;
        let mut msg = MessageReader {
            body,
            remaining: len,
        };
        // Everything of the message but the streamed `resource_list`.
        let mut other = BytesMut::new();
        let streamed = msg.find_resource_list(&mut other).await?;
        if streamed.is_none() {
            // Nothing to stream: the whole request is read first.
            msg.rest_into(&mut other).await?;
            msg.body.finish().await?;
        }
        Ok((msg, other, streamed))
    })
    .instrument(admission.clone())
    .await?;
    // Admitted only now, right before the function starts.
    let admit = service.gate.admit();
    if let Err(err) = &admit {
        admission.record("refused", tracing::field::display(err));
    }
    drop(admission);
    *admitted = Some(admit?);
    // The other fields, when decoded while the function still ran.
    let mut decoded = None;
    let streamed_output = match streamed {
        None => None,
        Some(n) => {
            call.add_input_bytes(n);
            run_streamed(
                service,
                &mut msg,
                &mut other,
                n,
                admitted,
                (&mut *image, &mut decoded),
            )
            .await?
        }
    };
    let fields = match decoded {
        Some(fields) => fields,
        None => RequestFields::decode(other.freeze()).map_err(RequestError::from)?,
    };
    let image: &str = image.insert(function.name_or_entrypoint(fields.image));
    let output = match (fields.resource_list.last(), streamed_output) {
        // The streamed value was the only (hence last) one.
        (None, Some(output)) => output,
        (last, _) => {
            let input = last.cloned().unwrap_or_default();
            if streamed.is_none() {
                call.add_input_bytes(input.len());
            }
            function.exec(input).await
        }
    };
    function.answer(image, output)
}

/// Runs the function on the ResourceList (`n` bytes, next in `msg`) while
/// the rest of the request arrives, and returns its output once the whole
/// request is in (the fields after the list in `other`, decoded into
/// `found` when they decode, so that a deadline names the image). `None`
/// if, after a stall, it was not run again: a later `resource_list` wins or
/// the request does not decode (the caller runs or refuses it).
///
/// If the client stalls (falls below the rate [`STALL_BOUND`] describes),
/// the function is stopped and the call's admission given back; the rest is
/// read, unadmitted, under the read timeout (a drain ends it then, as before
/// admission); the call is admitted again and the function runs on the
/// whole list. The list read so far is kept for that: slices of the DATA
/// frames, no copy.
///
/// Once the drain has started, a call still waiting for its client is not
/// work in flight: after [`STALL_BOUND`] more of waiting for the client, it
/// ends with UNAVAILABLE (the function killed). Time the feed spends held
/// up by the function (not reading its stdin) is not counted: that call is
/// work in flight, waited for until the grace.
async fn run_streamed(
    service: &Service,
    msg: &mut MessageReader,
    other: &mut BytesMut,
    n: usize,
    admitted: &mut Option<Admission>,
    found: (&mut Option<String>, &mut Option<RequestFields>),
) -> Result<Option<Result<Output, ExecError>>, CallError> {
    let function = &service.function;
    let drain = service.gate.drain();
    let mut kept: Vec<Bytes> = Vec::new();
    let mut left = n;
    // Already all here (small requests): written at once. Else fed to the
    // function chunk by chunk as the body arrives.
    let (input, mut tx) = if msg.body.chunk.len() >= n {
        let list = if n == 0 {
            Bytes::new()
        } else {
            msg.chunk(n).await?
        };
        left = 0;
        kept.push(list.clone());
        (Input::Bytes(list), None)
    } else {
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUED_CHUNKS);
        (Input::Chunks { rx, len: n }, Some(tx))
    };
    let mut stall = StallClock::new();
    {
        let run = function.exec(input);
        // `true` once the whole request is in; `false` if the client stalled.
        // Boxed, so that it can be dropped (giving back what it borrows)
        // while the function may still run.
        let mut feed = Box::pin(async {
            while left > 0 {
                let Some(chunk) = stall.wait(drain, msg.chunk(left)).await? else {
                    return Ok(false);
                };
                left -= chunk.len();
                stall.received(chunk.len());
                kept.push(chunk.clone());
                // A closed channel: the function stopped reading stdin (or
                // exited). The rest is read and kept all the same.
                if let Some(sender) = &tx {
                    if sender.send(chunk).await.is_err() {
                        tx = None;
                    }
                }
            }
            tx = None; // EOF on the function's stdin
            Ok::<_, CallError>(
                stall.wait(drain, msg.rest_into(other)).await?.is_some()
                    && stall.wait(drain, msg.body.finish()).await?.is_some(),
            )
        });
        tokio::pin!(run);
        let mut output = None;
        // A broken request, or the drain's cut, ends the call at once,
        // killing the function.
        let whole = loop {
            tokio::select! {
                out = &mut run, if output.is_none() => output = Some(out),
                fed = &mut feed => break fed?,
            }
        };
        drop(feed);
        if whole {
            // The whole request is here while the function may still run.
            decode_found(function, other, found);
            drop(kept);
            return Ok(Some(match output {
                Some(output) => output,
                None => run.await,
            }));
        }
        // Stalled: `run` is dropped with this block, killing the function.
    }
    *admitted = None;
    tracing::info!(
        received = n - left,
        resource_list_bytes = n,
        "a client stalled its upload: its function was stopped and its slot given back until the request is in"
    );
    unless_draining(drain, async {
        while left > 0 {
            let chunk = msg.chunk(left).await?;
            left -= chunk.len();
            kept.push(chunk);
        }
        msg.rest_into(other).await?;
        msg.body.finish().await
    })
    .await?;
    *admitted = Some(service.gate.admit()?);
    let (image, decoded) = found;
    decode_found(function, other, (&mut *image, &mut *decoded));
    // A later `resource_list` wins (the caller runs the function on it), and
    // a request that does not decode is refused: either way, not run here.
    if decoded
        .as_ref()
        .is_none_or(|fields| !fields.resource_list.is_empty())
    {
        return Ok(None);
    }
    Ok(Some(function.exec(kept_input(kept, n)).await))
}

/// Decodes the request's other fields, whole now, so that a deadline that
/// ends the function names it by its image (`image` follows
/// `resource_list` in every encoder's order).
fn decode_found(
    function: &Function,
    other: &BytesMut,
    found: (&mut Option<String>, &mut Option<RequestFields>),
) {
    let (image, decoded) = found;
    if let Ok(fields) = RequestFields::decode(&other[..]) {
        *image = Some(function.name_or_entrypoint(fields.image.clone()));
        *decoded = Some(fields);
    }
}

/// The kept chunks of a ResourceList (`len` bytes) as the function's input,
/// without copying them into one buffer: all queued at once, then the end.
fn kept_input(kept: Vec<Bytes>, len: usize) -> Input {
    if let [one] = kept.as_slice() {
        return Input::Bytes(one.clone());
    }
    let (tx, rx) = tokio::sync::mpsc::channel(kept.len().max(1));
    for chunk in kept {
        // Room for every chunk, and the receiver is right here.
        let _ = tx.try_send(chunk);
    }
    Input::Chunks { rx, len }
}

/// The OK answer: one gRPC message, then `grpc-status: 0` in the trailers.
///
/// The function's stdout goes out as it is, in a frame of its own (HTTP/2
/// sends it without copying it): only the framing before it and the log
/// field after it are encoded here.
fn ok_response(resp: EvaluateFunctionResponse) -> http::Response<Body> {
    let len = resp.encoded_len();
    let EvaluateFunctionResponse { resource_list, log } = resp;
    let mut head =
        BytesMut::with_capacity(32 + resource_list.len().min(SMALL_RESPONSE) + log.len());
    head.put_u8(0);
    // `fit_response` kept the message within the limit, which fits in u32.
    head.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    let mut tail = BytesMut::new();
    let mut frames = Vec::with_capacity(4);
    // proto3: an empty field is not encoded at all.
    if !resource_list.is_empty() {
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut head);
        prost::encoding::encode_varint(resource_list.len() as u64, &mut head);
    }
    if !log.is_empty() {
        prost::encoding::bytes::encode(2, &log, &mut tail);
    }
    if resource_list.len() <= SMALL_RESPONSE {
        // Small: one frame, copied (cheaper than three).
        head.extend_from_slice(&resource_list);
        head.extend_from_slice(&tail);
        frames.push(Ok::<_, Status>(Frame::data(head.freeze())));
    } else {
        frames.push(Ok(Frame::data(head.freeze())));
        frames.push(Ok(Frame::data(resource_list)));
        if !tail.is_empty() {
            frames.push(Ok(Frame::data(tail.freeze())));
        }
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    frames.push(Ok(Frame::trailers(trailers)));
    let mut response =
        http::Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// The request body, read a DATA frame at a time.
struct BodyReader {
    body: Body,
    /// The unread rest of the current DATA frame.
    chunk: Bytes,
    ended: bool,
    /// The whole body must have arrived by then (`--request-read-timeout`),
    /// deadline or not: a stalled upload must not hold its slot forever.
    read_by: tokio::time::Instant,
    read_timeout: std::time::Duration,
}

impl BodyReader {
    fn new(body: Body, read_by: tokio::time::Instant, read_timeout: std::time::Duration) -> Self {
        Self {
            body,
            chunk: Bytes::new(),
            ended: false,
            read_by,
            read_timeout,
        }
    }

    /// Makes `chunk` non-empty; `false` at the end of the body.
    async fn fill(&mut self) -> Result<bool, CallError> {
        while self.chunk.is_empty() {
            if self.ended {
                return Ok(false);
            }
            let frame = tokio::time::timeout_at(self.read_by, self.body.frame())
                .await
                .map_err(|_| RequestError::ReadTimeout {
                    after: self.read_timeout,
                })?;
            match frame {
                None => self.ended = true,
                // The client reset the stream or the connection broke.
                Some(Err(source)) => return Err(CallError::Cancelled { source }),
                Some(Ok(frame)) => {
                    // Trailers from a client carry nothing we use.
                    if let Ok(data) = frame.into_data() {
                        self.chunk = data;
                    }
                }
            }
        }
        Ok(true)
    }

    /// The 5-byte gRPC message prefix: returns the message length.
    async fn message_prefix(&mut self, max: usize) -> Result<usize, CallError> {
        let mut prefix = [0u8; 5];
        for (i, byte) in prefix.iter_mut().enumerate() {
            if !self.fill().await? {
                return Err(if i == 0 {
                    RequestError::MissingMessage
                } else {
                    RequestError::TruncatedPrefix
                }
                .into());
            }
            *byte = self.chunk[0];
            self.chunk = self.chunk.slice(1..);
        }
        match prefix[0] {
            0 => {}
            1 => return Err(RequestError::CompressedWithoutEncoding.into()),
            f => return Err(RequestError::InvalidCompressionFlag(f).into()),
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if len > max {
            return Err(RequestError::TooLarge { len, max }.into());
        }
        Ok(len)
    }

    /// Reads the body to its end. Bytes after the one message are ignored,
    /// as tonic's unary server ignores further messages.
    async fn finish(&mut self) -> Result<(), CallError> {
        while self.fill().await? {
            self.chunk = Bytes::new();
        }
        Ok(())
    }
}

/// The request message: its length is known from the prefix.
struct MessageReader {
    body: BodyReader,
    remaining: usize,
}

impl MessageReader {
    /// Up to `max` next bytes of the message (at least one), without copying.
    async fn chunk(&mut self, max: usize) -> Result<Bytes, CallError> {
        let max = max.min(self.remaining);
        if max == 0 {
            return Err(malformed("a field runs past the end of the message"));
        }
        if !self.body.fill().await? {
            return Err(RequestError::TruncatedMessage {
                remaining: self.remaining,
            }
            .into());
        }
        let n = max.min(self.body.chunk.len());
        self.remaining -= n;
        Ok(self.body.chunk.split_to(n))
    }

    async fn byte(&mut self) -> Result<u8, CallError> {
        Ok(self.chunk(1).await?[0])
    }

    /// The next `n` bytes of the message, appended to `out`.
    async fn copy_into(&mut self, mut n: usize, out: &mut BytesMut) -> Result<(), CallError> {
        if n > self.remaining {
            return Err(malformed("a field runs past the end of the message"));
        }
        while n > 0 {
            let chunk = self.chunk(n).await?;
            n -= chunk.len();
            out.extend_from_slice(&chunk);
        }
        Ok(())
    }

    /// The rest of the message, appended to `out`.
    async fn rest_into(&mut self, out: &mut BytesMut) -> Result<(), CallError> {
        self.copy_into(self.remaining, out).await
    }

    /// A varint, its bytes also appended to `out`. The bytes are gathered
    /// here (they may span DATA frames); prost decodes and checks them.
    async fn varint(&mut self, out: &mut BytesMut) -> Result<u64, CallError> {
        let start = out.len();
        // A varint is at most 10 bytes; prost refuses longer or overflowing ones.
        for _ in 0..10 {
            let b = self.byte().await?;
            out.put_u8(b);
            if b & 0x80 == 0 {
                break;
            }
        }
        prost::encoding::decode_varint(&mut &out[start..]).map_err(|_| malformed("invalid varint"))
    }

    /// Reads fields up to the first `resource_list` (field 1, bytes), copying
    /// them to `other`, and returns that field's length with the message
    /// positioned at its first byte. `None` if the message has no such field
    /// before its end, or before something this scan leaves to prost (a
    /// group, an invalid wire type): the rest is then in `other`.
    async fn find_resource_list(
        &mut self,
        other: &mut BytesMut,
    ) -> Result<Option<usize>, CallError> {
        while self.remaining > 0 {
            let key_at = other.len();
            let key = self.varint(other).await?;
            match (key >> 3, key & 7) {
                (1, 2) => {
                    other.truncate(key_at);
                    let mut scratch = BytesMut::new();
                    let len = self.varint(&mut scratch).await?;
                    return match usize::try_from(len) {
                        Ok(len) if len <= self.remaining => Ok(Some(len)),
                        _ => Err(malformed("resource_list runs past the end of the message")),
                    };
                }
                (_, 0) => {
                    self.varint(other).await?;
                }
                (_, 1) => self.copy_into(8, other).await?,
                (_, 5) => self.copy_into(4, other).await?,
                (_, 2) => {
                    let len = self.varint(other).await?;
                    let len = usize::try_from(len)
                        .map_err(|_| malformed("a field runs past the end of the message"))?;
                    self.copy_into(len, other).await?;
                }
                _ => {
                    self.rest_into(other).await?;
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }
}

fn malformed(what: &'static str) -> CallError {
    RequestError::Malformed(what).into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fuzz;
