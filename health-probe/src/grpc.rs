//! Just enough of gRPC over HTTP/2 for one unary call, written against the `h2` crate
//! directly (a general gRPC stack would double the binary's Rust code): request
//! headers and framing, `grpc-timeout`, metadata, gzip, and the status from trailers,
//! headers or the HTTP status, as grpc-go reports them.

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri};
use std::time::Duration;

/// A gRPC status code; the names are Go's (`codes.Code.String()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code(pub u32);

impl Code {
    pub const OK: Code = Code(0);
    pub const CANCELED: Code = Code(1);
    pub const UNKNOWN: Code = Code(2);
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    pub const PERMISSION_DENIED: Code = Code(7);
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    pub const UNIMPLEMENTED: Code = Code(12);
    pub const INTERNAL: Code = Code(13);
    pub const UNAVAILABLE: Code = Code(14);
    pub const UNAUTHENTICATED: Code = Code(16);

    pub fn name(self) -> String {
        const NAMES: [&str; 17] = [
            "OK",
            "Canceled",
            "Unknown",
            "InvalidArgument",
            "DeadlineExceeded",
            "NotFound",
            "AlreadyExists",
            "PermissionDenied",
            "ResourceExhausted",
            "FailedPrecondition",
            "Aborted",
            "OutOfRange",
            "Unimplemented",
            "Internal",
            "Unavailable",
            "DataLoss",
            "Unauthenticated",
        ];
        match NAMES.get(self.0 as usize) {
            Some(n) => (*n).to_string(),
            None => format!("Code({})", self.0),
        }
    }
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub message: String,
}

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Status {
    /// grpc-go's `status.Error` text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rpc error: code = {} desc = {}",
            self.code.name(),
            self.message
        )
    }
}

/// The largest response message accepted (grpc-go's default).
const MAX_MESSAGE: usize = 4 << 20;

/// One unary call.
pub struct Call<'a> {
    pub scheme: &'a str,
    pub authority: &'a str,
    pub path: &'a str,
    pub user_agent: &'a str,
    pub timeout: Duration,
    /// `(lowercase name, value)`; values of `-bin` names are raw bytes.
    pub metadata: &'a [(String, String)],
    pub gzip: bool,
    pub message: &'a [u8],
}

/// `grpc-timeout`: at most 8 digits, in the finest unit that fits, rounded up.
pub fn encode_timeout(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, per) in [
        ("n", 1u128),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
        ("M", 60_000_000_000),
        ("H", 3_600_000_000_000),
    ] {
        let v = ns.div_ceil(per);
        if v <= 99_999_999 {
            return format!("{v}{unit}");
        }
    }
    "99999999H".into()
}

/// Standard base64 without padding, as gRPC sends `-bin` metadata.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// `grpc-message` is percent-encoded.
pub fn percent_decode(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The CRC-32 of gzip (IEEE, reflected).
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// gzip with stored (uncompressed) deflate blocks: valid gzip for any decoder, and
/// a health check request is a few bytes, so there is nothing to gain by squeezing.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut blocks = data.chunks(0xffff).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        out.push(u8::from(blocks.peek().is_none())); // BFINAL, BTYPE=00
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// Decompresses one gzip member.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "invalid gzip data".to_string();
    if data.len() < 18 || data[0..3] != [0x1f, 0x8b, 8] {
        return Err(bad());
    }
    let flags = data[3];
    let mut i = 10;
    if flags & 4 != 0 {
        let xlen = u16::from_le_bytes([data[i], data[i + 1]]) as usize;
        i += 2 + xlen;
    }
    for bit in [8, 16] {
        if flags & bit != 0 {
            let end = data
                .get(i..)
                .and_then(|d| d.iter().position(|&c| c == 0))
                .ok_or_else(bad)?;
            i += end + 1;
        }
    }
    if flags & 2 != 0 {
        i += 2;
    }
    let body = data.get(i..data.len() - 8).ok_or_else(bad)?;
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_MESSAGE)
        .map_err(|e| format!("gzip: {e}"))?;
    let trailer = &data[data.len() - 8..];
    if trailer[..4] != crc32(&out).to_le_bytes() {
        return Err("gzip: checksum mismatch".into());
    }
    Ok(out)
}

/// grpc-go's mapping of an HTTP status (when the response is not a gRPC one).
fn http_status_code(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::INTERNAL,
        401 => Code::UNAUTHENTICATED,
        403 => Code::PERMISSION_DENIED,
        404 => Code::UNIMPLEMENTED,
        429 | 502 | 503 | 504 => Code::UNAVAILABLE,
        _ => Code::UNKNOWN,
    }
}

/// grpc-go's mapping of HTTP/2 errors.
fn h2_status(e: &h2::Error) -> Status {
    let code = match e.reason() {
        _ if e.is_io() || e.is_go_away() => Code::UNAVAILABLE,
        Some(h2::Reason::REFUSED_STREAM) => Code::UNAVAILABLE,
        Some(h2::Reason::CANCEL) => Code::CANCELED,
        Some(h2::Reason::ENHANCE_YOUR_CALM) => Code::RESOURCE_EXHAUSTED,
        Some(h2::Reason::INADEQUATE_SECURITY) => Code::PERMISSION_DENIED,
        _ => Code::INTERNAL,
    };
    Status::new(code, e.to_string())
}

/// The status in `headers` (trailers, or the headers of a trailers-only response).
fn status_from(headers: &HeaderMap) -> Option<Status> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let message = headers
        .get("grpc-message")
        .map(|m| percent_decode(m.as_bytes()))
        .unwrap_or_default();
    Some(Status::new(Code(code), message))
}

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), Status> {
    let bad =
        |e: &dyn std::fmt::Display| Status::new(Code::INTERNAL, format!("header {name:?}: {e}"));
    Ok((
        HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(&e))?,
        HeaderValue::from_str(value).map_err(|e| bad(&e))?,
    ))
}

/// Makes the call; returns the response message.
pub async fn unary(send: SendRequest<Bytes>, call: &Call<'_>) -> Result<Vec<u8>, Status> {
    let uri = Uri::builder()
        .scheme(call.scheme)
        .authority(call.authority)
        .path_and_query(call.path)
        .build()
        .map_err(|e| Status::new(Code::INTERNAL, format!("invalid request address: {e}")))?;
    let mut req = Request::new(());
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    for (name, value) in [
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("user-agent", call.user_agent),
        ("grpc-timeout", &encode_timeout(call.timeout)),
    ] {
        let (n, v) = header(name, value)?;
        h.insert(n, v);
    }
    if call.gzip {
        for name in ["grpc-encoding", "grpc-accept-encoding"] {
            let (n, v) = header(name, "gzip")?;
            h.insert(n, v);
        }
    }
    for (name, value) in call.metadata {
        let (n, v) = if name.ends_with("-bin") {
            header(name, &base64(value.as_bytes()))?
        } else {
            header(name, value)?
        };
        h.append(n, v);
    }

    let (flag, payload) = if call.gzip {
        (1u8, gzip(call.message))
    } else {
        (0u8, call.message.to_vec())
    };
    let mut body = Vec::with_capacity(5 + payload.len());
    body.push(flag);
    body.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    body.extend_from_slice(&payload);

    let mut send = send.ready().await.map_err(|e| h2_status(&e))?;
    let (response, mut stream) = send.send_request(req, false).map_err(|e| h2_status(&e))?;
    stream
        .send_data(Bytes::from(body), true)
        .map_err(|e| h2_status(&e))?;
    let response = response.await.map_err(|e| h2_status(&e))?;
    let (parts, mut recv) = response.into_parts();

    if parts.status != http::StatusCode::OK {
        return Err(Status::new(
            http_status_code(parts.status),
            format!(
                "unexpected HTTP status code received from server: {} ({})",
                parts.status.as_u16(),
                parts.status.canonical_reason().unwrap_or("unknown")
            ),
        ));
    }
    // Trailers-only: the status is in the headers.
    if let Some(status) = status_from(&parts.headers) {
        if recv.is_end_stream() || status.code != Code::OK {
            return Err(if status.code == Code::OK {
                Status::new(Code::INTERNAL, "server sent no response message")
            } else {
                status
            });
        }
    }
    let content_type = parts
        .headers
        .get("content-type")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if !content_type.starts_with("application/grpc") {
        return Err(Status::new(
            Code::UNKNOWN,
            format!("transport: received unexpected content-type {content_type:?}"),
        ));
    }

    let mut data = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.map_err(|e| h2_status(&e))?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        if data.len() + chunk.len() > MAX_MESSAGE + 5 {
            return Err(Status::new(
                Code::RESOURCE_EXHAUSTED,
                format!("grpc: received message larger than max ({MAX_MESSAGE})"),
            ));
        }
        data.extend_from_slice(&chunk);
    }
    let trailers = recv.trailers().await.map_err(|e| h2_status(&e))?;
    let status = trailers.as_ref().and_then(status_from).ok_or_else(|| {
        Status::new(
            Code::INTERNAL,
            "server closed the stream without sending trailers",
        )
    })?;
    if status.code != Code::OK {
        return Err(status);
    }

    if data.len() < 5 {
        return Err(Status::new(
            Code::INTERNAL,
            "server sent no response message",
        ));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    let message = data
        .get(5..5 + len)
        .ok_or_else(|| Status::new(Code::INTERNAL, "truncated response message"))?;
    match data[0] {
        0 => Ok(message.to_vec()),
        1 => {
            let encoding = parts
                .headers
                .get("grpc-encoding")
                .map(|v| v.as_bytes())
                .unwrap_or_default();
            if encoding != b"gzip" {
                return Err(Status::new(
                    Code::INTERNAL,
                    format!(
                        "grpc: compressed message with unsupported grpc-encoding {:?}",
                        String::from_utf8_lossy(encoding)
                    ),
                ));
            }
            gunzip(message).map_err(|e| Status::new(Code::INTERNAL, e))
        }
        f => Err(Status::new(
            Code::INTERNAL,
            format!("invalid compressed flag {f} in response"),
        )),
    }
}

/// `grpc.health.v1.HealthCheckRequest { service }`, protobuf-encoded.
pub fn encode_health_request(service: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(service.len() + 6);
    if !service.is_empty() {
        out.push(0x0a); // field 1, length-delimited
        let mut n = service.len();
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(service.as_bytes());
    }
    out
}

fn varint(buf: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*i)?;
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The `status` (field 1) of a `grpc.health.v1.HealthCheckResponse`; unknown fields
/// are skipped, a missing status is 0 (UNKNOWN).
pub fn decode_health_response(buf: &[u8]) -> Result<i32, Status> {
    let bad = || {
        Status::new(
            Code::INTERNAL,
            "grpc: failed to unmarshal the received message",
        )
    };
    let mut status = 0i32;
    let mut i = 0;
    while i < buf.len() {
        let key = varint(buf, &mut i).ok_or_else(bad)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = varint(buf, &mut i).ok_or_else(bad)? as i32,
            (_, 0) => {
                varint(buf, &mut i).ok_or_else(bad)?;
            }
            (_, 1) => i += 8,
            (_, 2) => i += varint(buf, &mut i).ok_or_else(bad)? as usize,
            (_, 5) => i += 4,
            _ => return Err(bad()),
        }
    }
    if i > buf.len() {
        return Err(bad());
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(encode_timeout(Duration::from_secs(1)), "1000000u");
        assert_eq!(encode_timeout(Duration::from_millis(300)), "300000u");
        assert_eq!(encode_timeout(Duration::from_nanos(1500)), "1500n");
        assert_eq!(encode_timeout(Duration::from_secs(3600)), "3600000m");
        assert_eq!(encode_timeout(Duration::from_secs(200_000)), "200000S");
        assert_eq!(encode_timeout(Duration::from_secs(u64::MAX)), "99999999H");
    }

    #[test]
    fn base64_without_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg");
        assert_eq!(base64(b"fo"), "Zm8");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg");
        assert_eq!(base64(b"raw\x01bytes"), "cmF3AWJ5dGVz");
    }

    #[test]
    fn grpc_message_decoding() {
        assert_eq!(percent_decode(b"a%20b%25c"), "a b%c");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
        assert_eq!(percent_decode("caf%C3%A9".as_bytes()), "café");
    }

    #[test]
    fn gzip_round_trip() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        for data in [&b""[..], b"\x0a\x06svc.Up", &vec![7u8; 70_000]] {
            let z = gzip(data);
            assert_eq!(gunzip(&z).as_deref(), Ok(data));
        }
        // a real gzip stream (deflate-compressed, with a file name), made by Python's gzip
        let real = [
            0x1f, 0x8b, 0x08, 0x08, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x78, 0x00, 0xcb, 0x48,
            0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
        ];
        assert_eq!(gunzip(&real).as_deref(), Ok(&b"hello"[..]));
        assert!(gunzip(&real[..20]).is_err());
    }

    #[test]
    fn health_messages() {
        assert_eq!(encode_health_request(""), b"");
        assert_eq!(encode_health_request("svc.Up"), b"\x0a\x06svc.Up");
        let long = "s".repeat(200);
        assert_eq!(&encode_health_request(&long)[..3], b"\x0a\xc8\x01");
        assert_eq!(decode_health_response(b""), Ok(0));
        assert_eq!(decode_health_response(b"\x08\x01"), Ok(1));
        // unknown fields of every wire type around the status
        assert_eq!(
            decode_health_response(b"\x10\x05\x1a\x02hi\x08\x02\x25\0\0\0\0\x29\0\0\0\0\0\0\0\0"),
            Ok(2)
        );
        assert!(decode_health_response(b"\x08").is_err());
        assert!(decode_health_response(b"\x1a\x05hi").is_err());
    }

    #[test]
    fn status_text_is_grpc_gos() {
        let s = Status::new(Code(5), "service not registered");
        assert_eq!(
            s.to_string(),
            "rpc error: code = NotFound desc = service not registered"
        );
        assert_eq!(Code(99).name(), "Code(99)");
    }
}
