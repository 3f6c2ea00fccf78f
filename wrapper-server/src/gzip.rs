//! Gzip-compressed EvaluateFunction requests: inflated here as they arrive,
//! bounded, and handed to tonic's generated server uncompressed.
//!
//! Why not let tonic inflate them: it decompresses a message into one
//! buffer that doubles as it grows, to the limit (6 MiB by default) and a
//! little past it, and frees it when the message turns out too large.
//! glibc's malloc (the binary is glibc static-pie) serves a buffer that
//! large with `mmap`, and freeing it raises its mmap threshold to the
//! buffer's size and its trim threshold to twice that: from then on buffers
//! of up to that size come from the heap, and that much freed heap is kept
//! rather than given back, in each arena the calls' threads use. Each gzip
//! bomb refused at the limit would thus keep the wrapper larger by about
//! twice the limit for good (issue #27; bench-harden item 6 and the
//! hardening test `malformed_requests_leave_no_memory_behind` check it).
//!
//! Here a message is inflated twice. First as it arrives, into a counter
//! that keeps nothing (over the limit, it stops there), which also checks
//! the gzip data whole (its CRC and length); the compressed frames are kept.
//! Only a message that passed is inflated again, from those frames, into
//! one buffer of exactly its length. A refused message (past the limit,
//! corrupt, cut short) thus allocates no more than the decoder's state
//! (about 75 KiB) and its compressed bytes, and leaves nothing behind.
//! The inflated bytes are not kept from the first pass (in pieces under the
//! mmap threshold): heap pieces go back to the OS only when nothing was
//! allocated above them in their arena meanwhile, which a busy wrapper
//! cannot promise, so a bomb's pieces could stay. The price is a second
//! inflate of a compressed call's message (clients seldom compress; Porch
//! and kpt never do).
//!
//! A message goes on to tonic only whole, as a prefix with its inflated
//! length and then its bytes: tonic reserves a message's announced length
//! as soon as its prefix arrives, so a prefix announcing more than is sent
//! would make it allocate up to the limit for nothing. Uncompressed
//! messages (compressed flag 0) of a gzip request are held whole the same
//! way.
//!
//! Only the body's first message is handed on: EvaluateFunction is unary.
//! What follows it is read to the end of the body (the client's trailers
//! are still handed on) and dropped unchecked, as the streamed path drops
//! it (`BodyReader::finish` in [`crate::stream`]). tonic's unary server
//! would decode further messages only to throw them away; inflating them
//! here would let one DATA frame (up to 1 MiB) carry a hundred or more
//! small bombs, each inflated to the limit in the same poll. So at most one
//! message per request is ever inflated.
//!
//! Errors are those of the streamed path where it has one
//! ([`RequestError`]); a corrupt message gets tonic's own words.

use std::collections::VecDeque;
use std::io::Write as _;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use krm_fn::call::{CallError, RequestError};
use tonic::Status;

/// The gRPC message prefix: compressed flag, then the length (u32, big end).
const PREFIX: usize = 5;

/// The `grpc-encoding` this module inflates, spelt as tonic accepts it.
const GZIP: &[u8] = b"gzip";

/// Whether the request is gzip-encoded; if so, its `grpc-encoding` is taken
/// off, since the body is handed on uncompressed ([`Inflating`]).
pub(crate) fn take_gzip(headers: &mut http::HeaderMap) -> bool {
    let gzip = headers
        .get("grpc-encoding")
        .is_some_and(|v| v.as_bytes() == GZIP);
    if gzip {
        headers.remove("grpc-encoding");
    }
    gzip
}

/// A gzip request's body with its messages inflated (see the module docs).
pub(crate) struct Inflating<B> {
    body: B,
    /// Largest message, inflated or not (`--max-request-body-size`).
    max: usize,
    state: State,
    /// Frames ready to hand on: a whole message, or the client's trailers.
    out: VecDeque<Frame<Bytes>>,
    /// The body ended, or was refused: nothing more is read.
    done: bool,
}

enum State {
    /// Reading a message's prefix; `got` bytes of it are in.
    Prefix { head: [u8; PREFIX], got: usize },
    /// Checking a compressed message as it arrives (inflated into a
    /// counter), `left` bytes of which are to come; its frames so far.
    Inflating {
        decoder: Box<flate2::write::GzDecoder<Counter>>,
        compressed: Vec<Bytes>,
        left: usize,
    },
    /// Holding an uncompressed message until its `left` last bytes are in.
    Plain {
        prefix: [u8; PREFIX],
        parts: Vec<Bytes>,
        left: usize,
    },
    /// The message was handed on: the rest of the body is dropped.
    After,
}

impl State {
    fn start() -> Self {
        State::Prefix {
            head: [0; PREFIX],
            got: 0,
        }
    }
}

impl<B> Inflating<B> {
    pub(crate) fn new(body: B, max: usize) -> Self {
        Self {
            body,
            max,
            state: State::start(),
            out: VecDeque::new(),
            done: false,
        }
    }

    /// Takes in one DATA frame of the body.
    fn feed(&mut self, mut data: Bytes) -> Result<(), Status> {
        loop {
            self.hand_on_if_whole()?;
            if data.is_empty() {
                return Ok(());
            }
            match &mut self.state {
                State::Prefix { head, got } => {
                    let n = (PREFIX - *got).min(data.len());
                    head[*got..*got + n].copy_from_slice(&data[..n]);
                    data.advance(n);
                    *got += n;
                    if *got == PREFIX {
                        let head = *head;
                        self.state = self.message(head)?;
                    }
                }
                State::Inflating {
                    decoder,
                    compressed,
                    left,
                } => {
                    let part = data.split_to((*left).min(data.len()));
                    *left -= part.len();
                    inflate(decoder, &part).map_err(|err| refusal(self.max, err))?;
                    compressed.push(part);
                }
                State::Plain { parts, left, .. } => {
                    let part = data.split_to((*left).min(data.len()));
                    *left -= part.len();
                    parts.push(part);
                }
                State::After => return Ok(()),
            }
        }
    }

    /// What comes after a message's prefix.
    fn message(&self, head: [u8; PREFIX]) -> Result<State, Status> {
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > self.max {
            return Err(rejected(RequestError::TooLarge { len, max: self.max }));
        }
        match head[0] {
            0 => Ok(State::Plain {
                prefix: head,
                parts: Vec::new(),
                left: len,
            }),
            1 => Ok(State::Inflating {
                decoder: Box::new(flate2::write::GzDecoder::new(Counter {
                    max: self.max,
                    len: 0,
                })),
                compressed: Vec::new(),
                left: len,
            }),
            flag => Err(rejected(RequestError::InvalidCompressionFlag(flag))),
        }
    }

    /// Once the message is whole: its frames go to `out`, and what follows
    /// is dropped.
    fn hand_on_if_whole(&mut self) -> Result<(), Status> {
        let whole = match &self.state {
            State::Prefix { .. } | State::After => false,
            State::Inflating { left, .. } | State::Plain { left, .. } => *left == 0,
        };
        if !whole {
            return Ok(());
        }
        match std::mem::replace(&mut self.state, State::After) {
            State::Prefix { .. } | State::After => {}
            State::Inflating {
                decoder,
                compressed,
                ..
            } => {
                let len = match decoder.finish() {
                    Ok(counter) => counter.len,
                    // `finish` gives the decoder up even when it fails: the
                    // limit is told apart by the error's kind.
                    Err(err) => return Err(refusal(self.max, err)),
                };
                let message =
                    inflate_whole(&compressed, len).map_err(|err| refusal(self.max, err))?;
                let len = u32::try_from(len)
                    .map_err(|_| rejected(RequestError::TooLarge { len, max: self.max }))?;
                let mut prefix = BytesMut::with_capacity(PREFIX);
                prefix.put_u8(0);
                prefix.put_u32(len);
                self.out.push_back(Frame::data(prefix.freeze()));
                self.out.push_back(Frame::data(message));
            }
            State::Plain { prefix, parts, .. } => {
                self.out
                    .push_back(Frame::data(Bytes::copy_from_slice(&prefix)));
                self.out.extend(parts.into_iter().map(Frame::data));
            }
        }
        Ok(())
    }

    /// The body ended: fine between messages only.
    fn end(&mut self) -> Result<(), Status> {
        self.hand_on_if_whole()?;
        match &self.state {
            State::Prefix { got: 0, .. } | State::After => Ok(()),
            State::Prefix { .. } => Err(rejected(RequestError::TruncatedPrefix)),
            State::Inflating { left, .. } | State::Plain { left, .. } => {
                Err(rejected(RequestError::TruncatedMessage {
                    remaining: *left,
                }))
            }
        }
    }

    /// Refused or ended: whatever was held goes at once, so that a refused
    /// message's memory is given back before the answer is sent.
    fn stop(&mut self) {
        self.done = true;
        self.state = State::start();
    }
}

/// The answer to an inflating error: over the limit (`max`), or corrupt data.
fn refusal(max: usize, err: std::io::Error) -> Status {
    if err.kind() == OVER_LIMIT {
        Status::resource_exhausted(format!(
            "the request message inflates past the limit of {max} bytes \
             (--max-request-body-size): refused while inflating"
        ))
    } else {
        // tonic's words for the same case.
        Status::internal(format!("Error decompressing: {err}, while sending request"))
    }
}

fn rejected(err: RequestError) -> Status {
    Status::from(CallError::from(err))
}

/// Writes `part` into the decoder. What follows the gzip member inside the
/// message (the decoder takes no more) is ignored, as tonic's decoder
/// (`flate2::read::GzDecoder` on the message) ignores it.
fn inflate<W: std::io::Write>(
    decoder: &mut flate2::write::GzDecoder<W>,
    mut part: &[u8],
) -> std::io::Result<()> {
    while !part.is_empty() {
        let n = decoder.write(part)?;
        if n == 0 {
            return Ok(());
        }
        part = &part[n..];
    }
    Ok(())
}

/// The second inflate of a message that passed the first: into one buffer
/// of its `len` bytes (the same data inflates to the same bytes; a writer
/// bounded at `len` makes sure of it).
fn inflate_whole(compressed: &[Bytes], len: usize) -> std::io::Result<Bytes> {
    let mut out = BytesMut::with_capacity(len).limit(len);
    let mut decoder = flate2::write::GzDecoder::new((&mut out).writer());
    for part in compressed {
        inflate(&mut decoder, part)?;
    }
    decoder.finish()?;
    #[cfg(test)]
    tests::INFLATED.with(|n| n.set(n.get() + len));
    Ok(out.into_inner().freeze())
}

/// The error kind [`Counter`] fails with past the limit; flate2 passes a
/// writer's errors on unchanged and makes none of this kind itself.
const OVER_LIMIT: std::io::ErrorKind = std::io::ErrorKind::FileTooLarge;

/// Counts what is written into it, at most `max` bytes, and keeps nothing.
struct Counter {
    max: usize,
    len: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.max - self.len {
            return Err(std::io::Error::new(
                OVER_LIMIT,
                "the message inflates past the limit",
            ));
        }
        self.len += buf.len();
        #[cfg(test)]
        tests::INFLATED.with(|n| n.set(n.get() + buf.len()));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<B> Body for Inflating<B>
where
    B: Body<Data = Bytes, Error = Status> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if let Some(frame) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let result = match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.feed(data),
                    // The client's trailers, which tonic keeps.
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Some(Err(status)) => Err(status),
                None => {
                    let ended = this.end();
                    this.stop();
                    ended
                }
            };
            if let Err(status) = result {
                this.stop();
                this.out.clear();
                return Poll::Ready(Some(Err(status)));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.out.is_empty() && self.done
    }

    fn size_hint(&self) -> SizeHint {
        // Inflated, the length is not known before the end.
        SizeHint::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use tonic::Code;

    thread_local! {
        /// Bytes inflated on this thread, by either pass.
        pub(super) static INFLATED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    /// `body` in DATA frames of `frame` bytes, through [`Inflating`]: the
    /// bytes handed on and how many frames, or the error.
    async fn run(body: &[u8], frame: usize, max: usize) -> Result<(Vec<u8>, usize), Status> {
        let frames: Vec<Result<Frame<Bytes>, Status>> = body
            .chunks(frame)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let mut inflating = Inflating::new(StreamBody::new(futures::stream::iter(frames)), max);
        let mut out = Vec::new();
        let mut frames = 0;
        while let Some(frame) = inflating.frame().await {
            out.extend_from_slice(&frame?.into_data().unwrap());
            frames += 1;
        }
        assert!(inflating.is_end_stream());
        Ok((out, frames))
    }

    #[tokio::test]
    async fn the_first_message_is_handed_on_inflated_and_whole() {
        let first: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let second = b"a short one".to_vec();
        // Whatever follows the first message is dropped, even malformed.
        let mut body = framed(1, &gzip(&first));
        body.extend(framed(0, &second));
        body.extend(framed(1, &gzip(b"")));
        body.extend(framed(1, b"not gzip"));
        body.extend([7, 0, 0]);
        for frame in [1, 3, 5, 7, 1000, 1 << 20] {
            let (out, _) = run(&body, frame, first.len()).await.unwrap();
            assert!(out == framed(0, &first), "frames of {frame}");
        }
        // An uncompressed first message, then a compressed one.
        let mut body = framed(0, &second);
        body.extend(framed(1, &gzip(&first)));
        let (out, _) = run(&body, 1000, first.len()).await.unwrap();
        assert_eq!(out, framed(0, &second));
        // A compressed message goes on as its prefix and one frame.
        let (_, frames) = run(&framed(1, &gzip(&first)), 7, first.len())
            .await
            .unwrap();
        assert_eq!(frames, 2);
    }

    #[tokio::test]
    async fn one_frame_of_many_small_bombs_inflates_one_message() {
        let max = 1 << 20;
        let bomb = framed(1, &gzip(&vec![0; max]));
        let mut frame = Vec::new();
        while frame.len() + bomb.len() <= 1 << 20 {
            frame.extend_from_slice(&bomb);
        }
        assert!(frame.len() / bomb.len() > 100, "{}", bomb.len());
        INFLATED.with(|n| n.set(0));
        let (out, frames) = run(&frame, frame.len(), max).await.unwrap();
        assert_eq!(out.len(), PREFIX + max);
        assert_eq!(frames, 2);
        // Checked once and inflated once: the first message only.
        assert_eq!(INFLATED.with(std::cell::Cell::get), 2 * max);
    }

    #[tokio::test]
    async fn a_bomb_is_refused_at_the_limit() {
        let bomb = gzip(&vec![0; 8 << 20]);
        assert!(bomb.len() < 16 * 1024, "{}", bomb.len());
        let err = run(&framed(1, &bomb), 16 * 1024, 1 << 20)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
        assert!(
            err.message().contains("--max-request-body-size"),
            "{}",
            err.message()
        );
        // Exactly the limit passes.
        let (out, _) = run(&framed(1, &gzip(&[7; 1 << 20])), 4096, 1 << 20)
            .await
            .unwrap();
        assert_eq!(out.len(), PREFIX + (1 << 20));
    }

    #[tokio::test]
    async fn malformed_bodies_are_refused_with_what_was_wrong() {
        let good = gzip(b"apiVersion: v1");
        let mut corrupt = good.clone();
        let mid = corrupt.len() / 2;
        corrupt[mid] ^= 0xff;
        let mut bad_crc = good.clone();
        let crc = bad_crc.len() - 8;
        bad_crc[crc] ^= 0xff;
        let cases: Vec<(Vec<u8>, Code, &str)> = vec![
            (
                framed(1, b"not gzip at all!"),
                Code::Internal,
                "Error decompressing",
            ),
            (framed(1, &corrupt), Code::Internal, "Error decompressing"),
            (framed(1, &bad_crc), Code::Internal, "Error decompressing"),
            // The gzip data stops early (its message ends there too).
            (
                framed(1, &good[..good.len() - 4]),
                Code::Internal,
                "Error decompressing",
            ),
            // The message stops early.
            (
                framed(1, &good)[..PREFIX + 6].to_vec(),
                Code::Internal,
                "ended",
            ),
            (
                framed(0, b"abc")[..PREFIX + 1].to_vec(),
                Code::Internal,
                "ended",
            ),
            (vec![1, 0, 0], Code::Internal, "prefix"),
            (framed(2, b"x"), Code::Internal, "compression flag"),
            // Announced over the limit: refused from the prefix.
            (
                vec![1, 0, 0x10, 0, 1],
                Code::ResourceExhausted,
                "--max-request-body-size",
            ),
        ];
        for (body, code, want) in cases {
            let err = run(&body, 3, 1 << 20).await.unwrap_err();
            assert_eq!(err.code(), code, "{body:?}: {err:?}");
            assert!(err.message().contains(want), "{body:?}: {}", err.message());
        }
        // No message at all is tonic's to answer.
        assert!(run(b"", 3, 1 << 20).await.unwrap().0.is_empty());
    }

    #[tokio::test]
    async fn what_follows_the_gzip_member_in_its_message_is_ignored() {
        let mut message = gzip(b"kind: ResourceList");
        message.extend_from_slice(b"trailing bytes");
        let (out, _) = run(&framed(1, &message), 4, 1 << 20).await.unwrap();
        assert_eq!(out, framed(0, b"kind: ResourceList"));
    }

    #[test]
    fn only_gzip_is_taken_off() {
        let mut h = http::HeaderMap::new();
        assert!(!take_gzip(&mut h));
        h.insert("grpc-encoding", http::HeaderValue::from_static("deflate"));
        assert!(!take_gzip(&mut h));
        assert!(h.contains_key("grpc-encoding"));
        h.insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
        assert!(take_gzip(&mut h));
        assert!(!h.contains_key("grpc-encoding"));
    }
}
