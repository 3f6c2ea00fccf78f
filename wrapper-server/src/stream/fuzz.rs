//! Fuzzing the request framing read by hand: the gRPC message prefix and
//! the protobuf keys up to `resource_list` ([`BodyReader`],
//! [`MessageReader`]), on request bodies of arbitrary bytes cut into
//! arbitrary DATA frames; and gzip requests inflated, bounded
//! ([`crate::gzip::Inflating`]). Knobs: see the `fuzzing` crate
//! (`FUZZ_SECONDS`, `FUZZ_INPUT_SECONDS`, `ARBTEST_SEED`).
//!
//! The reference is what tonic's generated server does with the same body:
//! the first message decoded whole by prost.

use std::io::Write as _;
use std::time::Duration;

use fuzzing::arbitrary::Result as ArbResult;
use fuzzing::{bytes as fuzz_bytes, Unstructured};
use prost::encoding::{encode_key, encode_varint, WireType};
use proto::pb::EvaluateFunctionRequest;

use super::*;

/// A request body and how it arrives.
#[derive(Debug)]
struct Request {
    body: Vec<u8>,
    /// DATA frame sizes (see [`fuzz_bytes::chunk_sizes`]).
    frames: Vec<usize>,
    /// `--max-request-body-size`.
    max: usize,
}

impl fuzzing::Input for Request {
    fn size(&self) -> usize {
        self.body.len()
    }
}

/// A message as encoders write it, or odder: fields in any order, repeated,
/// unknown ones of every wire type, groups, wrong wire types.
fn message(u: &mut Unstructured<'_>) -> ArbResult<Vec<u8>> {
    let mut m = Vec::new();
    for _ in 0..u.int_in_range(0..=6u8)? {
        match u.int_in_range(0..=9u8)? {
            0..=3 => {
                let len = u.int_in_range(0..=2048usize)?;
                let list: Vec<u8> = (0..len).map(|i| b"kind: ResourceList\n"[i % 19]).collect();
                encode_key(1, WireType::LengthDelimited, &mut m);
                encode_varint(list.len() as u64, &mut m);
                m.extend_from_slice(&list);
            }
            4 => prost::encoding::string::encode(2, &"example.com/fn:v1".to_owned(), &mut m),
            5 => prost::encoding::string::encode(3, &"v1".to_owned(), &mut m),
            6 => {
                // An unknown field, any wire type (3 and 4: a group's
                // start and end; 6 and 7: invalid).
                let field = u.int_in_range(1..=40u32)?;
                let wire = u.int_in_range(0..=7u64)?;
                encode_varint((u64::from(field) << 3) | wire, &mut m);
                match wire {
                    0 => encode_varint(u.arbitrary()?, &mut m),
                    1 => m.extend_from_slice(&u.arbitrary::<[u8; 8]>()?),
                    2 => {
                        let n = u.int_in_range(0..=64u8)?;
                        encode_varint(u64::from(n), &mut m);
                        m.extend(std::iter::repeat_n(b'x', n.into()));
                    }
                    5 => m.extend_from_slice(&u.arbitrary::<[u8; 4]>()?),
                    _ => {}
                }
            }
            7 => {
                // A length past the end, or a 10-byte varint.
                encode_key(1, WireType::LengthDelimited, &mut m);
                encode_varint(u.arbitrary()?, &mut m);
            }
            _ => {
                let junk: Vec<u8> = u.arbitrary()?;
                m.extend(junk.into_iter().take(32));
            }
        }
    }
    Ok(m)
}

fn request(u: &mut Unstructured<'_>) -> ArbResult<Request> {
    let message = message(u)?;
    let mut body = Vec::new();
    body.push(match u.int_in_range(0..=15u8)? {
        0 => 1,
        1 => u.arbitrary()?,
        _ => 0,
    });
    let len = match u.int_in_range(0..=9u8)? {
        0 => u.arbitrary()?,
        1 => u32::try_from(message.len()).unwrap() + u.int_in_range(1..=8u32)?,
        2 => u32::try_from(message.len())
            .unwrap()
            .saturating_sub(u.int_in_range(1..=8u32)?),
        _ => u32::try_from(message.len()).unwrap(),
    };
    body.extend_from_slice(&len.to_be_bytes());
    body.extend_from_slice(&message);
    if u.ratio(1, 6)? {
        // A second message, or trailing bytes: ignored.
        let more: Vec<u8> = u.arbitrary()?;
        body.extend(more.into_iter().take(64));
    }
    if u.ratio(1, 5)? {
        body = fuzz_bytes::mutate(u, &body, &[], &[], 64 * 1024)?;
    }
    let frames = fuzz_bytes::chunk_sizes(u, body.len())?;
    let max = if u.ratio(1, 6)? {
        u.int_in_range(0..=4096usize)?
    } else {
        4 << 20
    };
    Ok(Request { body, frames, max })
}

fn body_of(r: &Request) -> Body {
    let frames: Vec<std::result::Result<Frame<Bytes>, Status>> =
        fuzz_bytes::split(&r.body, &r.frames)
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
    Body::new(StreamBody::new(futures::stream::iter(frames)))
}

/// What the streamed path makes of the request: the ResourceList the
/// function would run on, the image and the tag (`run_call`'s reading,
/// without the function).
async fn streamed(r: &Request) -> std::result::Result<(Bytes, String, String), CallError> {
    let read_by = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut body = BodyReader::new(body_of(r), read_by, Duration::from_secs(60));
    let len = body.message_prefix(r.max).await?;
    let mut msg = MessageReader {
        body,
        remaining: len,
    };
    let mut other = BytesMut::new();
    let mut list = BytesMut::new();
    if let Some(n) = msg.find_resource_list(&mut other).await? {
        let mut left = n;
        while left > 0 {
            let chunk = msg.chunk(left).await?;
            left -= chunk.len();
            list.extend_from_slice(&chunk);
        }
    }
    msg.rest_into(&mut other).await?;
    msg.body.finish().await?;
    let fields = RequestFields::decode(other.freeze()).map_err(RequestError::from)?;
    let list = fields
        .resource_list
        .last()
        .cloned()
        .unwrap_or(list.freeze());
    Ok((list, fields.image, fields.tag))
}

/// What tonic's generated server makes of it: the first message, whole.
fn reference(r: &Request) -> Option<(Bytes, String, String)> {
    let b = &r.body;
    if b.len() < 5 || b[0] != 0 {
        return None;
    }
    let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
    if len > r.max || b.len() - 5 < len {
        return None;
    }
    let req = EvaluateFunctionRequest::decode(&b[5..5 + len]).ok()?;
    Some((req.resource_list, req.image, req.tag))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// The streamed path reads what tonic's decoder reads, and refuses what
/// it refuses, whatever the DATA frames.
#[test]
fn fuzz_streamed_request_framing() {
    let rt = runtime();
    let stats = fuzzing::run(
        "wrapper-server request framing",
        Duration::from_secs(8),
        request,
        move |r: &Request| {
            let got = rt.block_on(streamed(r));
            let want = reference(r);
            match (&got, &want) {
                (Ok(got), Some(want)) => assert_eq!(got, want),
                (Err(_), None) => {}
                _ => panic!("streamed {got:?}, tonic's decoder {want:?}"),
            }
            got.is_ok()
        },
    );
    stats.assert_both_paths("request framing", 0.05);
}

/// Gzip requests: what is handed on is the first message, inflated, never
/// more than the limit; a valid one exactly as flate2 inflates it.
#[test]
fn fuzz_gzip_requests() {
    let rt = runtime();
    let stats = fuzzing::run(
        "wrapper-server gzip requests",
        Duration::from_secs(6),
        |u: &mut Unstructured<'_>| {
            let n = u.int_in_range(0..=64 * 1024usize)?;
            let fill: u8 = u.arbitrary()?;
            let data: Vec<u8> = (0..n).map(|i| fill.wrapping_add((i % 7) as u8)).collect();
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&data).unwrap();
            let mut message = gz.finish().unwrap();
            if u.ratio(1, 3)? {
                message = fuzz_bytes::mutate(u, &message, &[], &[], 64 * 1024)?;
            }
            let mut body = vec![u8::from(u.ratio(7, 8)?)];
            let len = u32::try_from(message.len()).unwrap();
            let len = if u.ratio(1, 8)? { u.arbitrary()? } else { len };
            body.extend_from_slice(&len.to_be_bytes());
            body.extend_from_slice(&message);
            if u.ratio(1, 5)? {
                body = fuzz_bytes::mutate(u, &body, &[], &[], 64 * 1024)?;
            }
            let frames = fuzz_bytes::chunk_sizes(u, body.len())?;
            let max = *u.choose(&[1024, 16 * 1024, 64 * 1024, 4 << 20])?;
            Ok(Request { body, frames, max })
        },
        move |r: &Request| {
            let got = rt.block_on(async {
                let mut inflating = crate::gzip::Inflating::new(body_of(r), r.max);
                let mut out = Vec::new();
                while let Some(frame) = inflating.frame().await {
                    out.extend_from_slice(&frame?.into_data().unwrap());
                    assert!(out.len() <= 5 + r.max, "{} bytes handed on", out.len());
                }
                Ok::<_, Status>(out)
            });
            let Ok(out) = got else {
                return false;
            };
            if r.body.first() == Some(&1) && !out.is_empty() {
                let len = u32::from_be_bytes([r.body[1], r.body[2], r.body[3], r.body[4]]) as usize;
                let mut want = Vec::new();
                let mut dec = flate2::read::GzDecoder::new(&r.body[5..5 + len]);
                std::io::Read::read_to_end(&mut dec, &mut want).unwrap();
                assert_eq!(out[0], 0);
                assert_eq!(&out[5..], &want[..]);
            }
            true
        },
    );
    stats.assert_both_paths("gzip requests", 0.05);
}
