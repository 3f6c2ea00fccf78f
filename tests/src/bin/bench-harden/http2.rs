//! Raw HTTP/2 (the h2 crate): connections with a chosen stream window,
//! gRPC frames sent whole, counted or cut short, and the answers read back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};
use tokio::net::TcpStream;

use super::grpc::{code_name, short};
use super::EVAL_PATH;

/// Aborts a task when dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A raw HTTP/2 client connection, driven by a task of its own.
pub(super) struct H2 {
    pub(super) send: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    _conn: AbortOnDrop,
}

/// Connects; `window`: the initial stream window (default: 16 MiB).
pub(super) async fn h2_connect(addr: SocketAddr, window: Option<u32>) -> anyhow::Result<H2> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow!("TCP connect to {addr}: timeout"))??;
    tcp.set_nodelay(true)?;
    let mut builder = h2::client::Builder::new();
    match window {
        Some(w) => builder.initial_window_size(w),
        None => builder
            .initial_window_size(16 << 20)
            .initial_connection_window_size(16 << 20),
    };
    let (send, mut conn) =
        tokio::time::timeout(Duration::from_secs(5), builder.handshake::<_, Bytes>(tcp))
            .await
            .map_err(|_| anyhow!("HTTP/2 handshake with {addr}: timeout"))??;
    let ping = conn.ping_pong();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let h2 = H2 {
        send,
        addr,
        _conn: AbortOnDrop(task),
    };
    // The PONG comes after the server's SETTINGS, which are then applied (its
    // stream limit, say) before the caller opens streams.
    if let Some(mut ping) = ping {
        tokio::time::timeout(Duration::from_secs(5), ping.ping(h2::Ping::opaque()))
            .await
            .map_err(|_| anyhow!("HTTP/2 PING to {addr}: no PONG within 5 s"))??;
    }
    Ok(h2)
}

impl H2 {
    /// Opens an EvaluateFunction stream: its headers are sent, no body yet.
    pub(super) async fn open(
        &self,
        gzip: bool,
    ) -> anyhow::Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
        let mut builder = http::Request::builder()
            .method("POST")
            .uri(format!("http://{}{EVAL_PATH}", self.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if gzip {
            builder = builder.header("grpc-encoding", "gzip");
        }
        let req = builder.body(())?;
        let mut send = self.send.clone().ready().await?;
        Ok(send.send_request(req, false)?)
    }

    /// One unary call with a raw body: the answer's label and message.
    pub(super) async fn call(&self, gzip: bool, body: Bytes, limit: Duration) -> (String, String) {
        let attempt = async {
            let (resp, mut stream) = self.open(gzip).await?;
            send_all(&mut stream, body, true).await?;
            anyhow::Ok(read_answer(resp).await)
        };
        match tokio::time::timeout(limit, attempt).await {
            Err(_) => (format!("no answer within {limit:?}"), String::new()),
            Ok(Err(err)) => (
                format!("error: {}", short(&format!("{err:#}"), 80)),
                String::new(),
            ),
            Ok(Ok(ans)) => (ans.label(), ans.message().to_string()),
        }
    }
}

/// A gRPC length-prefixed frame: flag, declared length, payload.
pub(super) fn grpc_frame(compressed: bool, declared: usize, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + payload.len());
    b.put_u8(u8::from(compressed));
    b.put_u32(u32::try_from(declared).unwrap_or(u32::MAX));
    b.put_slice(payload);
    b.freeze()
}

/// Sends `data` as the stream's window allows.
async fn send_all(
    stream: &mut h2::SendStream<Bytes>,
    data: Bytes,
    end: bool,
) -> anyhow::Result<()> {
    send_counted(stream, data, end, &AtomicUsize::new(0)).await
}

/// [`send_all`], counting the bytes handed to the connection in `sent`.
pub(super) async fn send_counted(
    stream: &mut h2::SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    sent: &AtomicUsize,
) -> anyhow::Result<()> {
    if data.is_empty() {
        stream.send_data(Bytes::new(), end)?;
        return Ok(());
    }
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let mut n = stream.capacity();
        if n == 0 {
            n = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                None => bail!("the stream closed while sending"),
                Some(r) => r?,
            };
        }
        if n == 0 {
            continue;
        }
        let chunk = data.split_to(n.min(data.len()));
        sent.fetch_add(chunk.len(), Ordering::Relaxed);
        stream.send_data(chunk, end && data.is_empty())?;
    }
    Ok(())
}

/// An HTTP/2 answer to a gRPC call.
#[derive(Debug)]
pub(super) enum Answer {
    /// `:status`, `grpc-status` (headers or trailers), `grpc-message`.
    Status(u16, Option<i32>, String),
    Error(String),
}

impl Answer {
    fn message(&self) -> &str {
        match self {
            Answer::Status(_, _, m) => m,
            Answer::Error(_) => "",
        }
    }

    pub(super) fn label(&self) -> String {
        match self {
            Answer::Status(200, Some(c), _) => code_name(*c),
            Answer::Status(http, Some(c), _) => format!("HTTP {http} {}", code_name(*c)),
            Answer::Status(http, None, _) => format!("HTTP {http} without grpc-status"),
            Answer::Error(e) => e.clone(),
        }
    }
}

pub(super) fn h2_error(err: &h2::Error) -> String {
    match err.reason() {
        Some(reason) if err.is_go_away() => format!("GOAWAY {reason:?}"),
        Some(reason) if err.is_reset() => format!("RST_STREAM {reason:?}"),
        Some(reason) => format!("h2 {reason:?}"),
        None => format!("h2: {}", short(&err.to_string(), 80)),
    }
}

pub(super) fn grpc_status(headers: &http::HeaderMap) -> Option<(i32, String)> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let msg = headers
        .get("grpc-message")
        .map(|v| percent_decode(v.as_bytes()))
        .unwrap_or_default();
    Some((code, msg))
}

fn percent_decode(v: &[u8]) -> String {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' && i + 2 < v.len() {
            if let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(&v[i + 1..i + 3]), 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the whole answer (body released as it comes).
pub(super) async fn read_answer(resp: h2::client::ResponseFuture) -> Answer {
    let resp = match resp.await {
        Ok(r) => r,
        Err(err) => return Answer::Error(h2_error(&err)),
    };
    let http = resp.status().as_u16();
    let (parts, mut body) = resp.into_parts();
    if let Some((code, msg)) = grpc_status(&parts.headers) {
        return Answer::Status(http, Some(code), msg);
    }
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(chunk) => {
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            Err(err) => return Answer::Error(h2_error(&err)),
        }
    }
    match body.trailers().await {
        Ok(Some(t)) => match grpc_status(&t) {
            Some((code, msg)) => Answer::Status(http, Some(code), msg),
            None => Answer::Status(http, None, String::new()),
        },
        Ok(None) => Answer::Status(http, None, String::new()),
        Err(err) => Answer::Error(h2_error(&err)),
    }
}

/// The protobuf of an EvaluateFunctionRequest whose `resource_list` is
/// `rl_len` bytes, up to the first `take` bytes of it: the field's tag and
/// length, then YAML.
pub(super) fn request_prefix(rl_len: usize, take: usize) -> Vec<u8> {
    let mut msg = vec![0x0a];
    let mut v = rl_len as u64;
    while v >= 0x80 {
        msg.push((v as u8) | 0x80);
        v >>= 7;
    }
    msg.push(v as u8);
    let yaml = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: stalled\n  data:\n    big: ";
    msg.extend_from_slice(yaml);
    while msg.len() < take {
        msg.push(b'x');
    }
    msg.truncate(take);
    msg
}

pub(super) fn varint_len(v: usize) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// A ResourceList of about `size` bytes: one ConfigMap with a big value.
pub(super) fn big_rl(size: usize) -> Bytes {
    let head = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: big\n  data:\n    big: ";
    let mut s = String::with_capacity(size + 1);
    s.push_str(head);
    while s.len() + 1 < size {
        s.push('x');
    }
    s.push('\n');
    Bytes::from(s)
}
