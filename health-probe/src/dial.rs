//! Establishing the connection the way grpc-go's blocking dial does: resolve, connect,
//! TLS handshake, HTTP/2 handshake, and wait for the server's SETTINGS frame, so that
//! a peer which accepts TCP but never speaks HTTP/2 is a connection failure.
//!
//! Name resolution avoids getaddrinfo for the common cases (the binary is statically
//! linked): `localhost` and an empty host are 127.0.0.1 then ::1, IP literals are
//! parsed; other names go to `resolve` (/etc/hosts, then DNS).

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::oneshot;

use crate::oserror::io_error;

/// Where to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// A parsed `-addr`: the endpoint and the `:authority` to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub endpoint: Endpoint,
    pub authority: String,
}

impl Target {
    /// The host name the server's certificate is checked against by default.
    pub fn tls_host(&self) -> &str {
        match &self.endpoint {
            Endpoint::Tcp { host, .. } if !host.is_empty() => host,
            _ => "localhost",
        }
    }
}

/// Go's `net.SplitHostPort`, in its words.
fn split_host_port(addr: &str) -> Result<(&str, &str), String> {
    let missing = || format!("address {addr}: missing port in address");
    let too_many = || format!("address {addr}: too many colons in address");
    if let Some(rest) = addr.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(format!("address {addr}: missing ']' in address"));
        };
        let host = &rest[..end];
        return match rest[end + 1..].strip_prefix(':') {
            Some(port) if !port.contains(':') => Ok((host, port)),
            Some(_) => Err(too_many()),
            None if rest.len() == end + 1 => Err(missing()),
            None => Err(format!("address {addr}: unexpected ']' in address")),
        };
    }
    let Some(colon) = addr.rfind(':') else {
        return Err(missing());
    };
    let host = &addr[..colon];
    if host.contains(':') {
        return Err(too_many());
    }
    if host.contains('[') || host.contains(']') {
        return Err(format!("address {addr}: unexpected '[' in address"));
    }
    Ok((host, &addr[colon + 1..]))
}

/// Parses `-addr` as grpc-go's dial does: `host:port`, `:port`, `[v6]:port`, and the
/// `dns:///`, `passthrough:///`, `unix:` and `unix://` target forms. The error is a
/// dial error (the Go tool reports it as a connection failure).
pub fn parse_target(addr: &str) -> Result<Target, String> {
    if let Some(path) = addr
        .strip_prefix("unix://")
        .or_else(|| addr.strip_prefix("unix:"))
    {
        if path.is_empty() {
            return Err(format!("invalid unix socket address {addr:?}"));
        }
        return Ok(Target {
            endpoint: Endpoint::Unix(PathBuf::from(path)),
            authority: "localhost".into(),
        });
    }
    let mut hostport = addr;
    for scheme in ["dns:", "passthrough:"] {
        if let Some(rest) = addr.strip_prefix(scheme) {
            // scheme://[authority]/endpoint
            if let Some(rest) = rest.strip_prefix("//") {
                hostport = rest.split_once('/').map_or(rest, |(_, ep)| ep);
            }
        }
    }
    let (host, port) = split_host_port(hostport).map_err(|e| format!("dial tcp: {e}"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("dial tcp: address {hostport}: invalid port"))?;
    let authority = if host.is_empty() {
        format!("localhost:{port}")
    } else {
        hostport.to_string()
    };
    Ok(Target {
        endpoint: Endpoint::Tcp {
            host: host.to_string(),
            port,
        },
        authority,
    })
}

/// The addresses to try for `host`, in order.
async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let h = host.trim_end_matches('.');
    if h.is_empty() || h.eq_ignore_ascii_case("localhost") {
        return Ok(vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
        ]);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if host.contains('%') {
        if let Ok(sa) = format!("[{host}]:{port}").parse::<SocketAddrV6>() {
            return Ok(vec![SocketAddr::V6(sa)]);
        }
    }
    let ips = crate::resolve::lookup(host)
        .await
        .map_err(|e| format!("dial tcp: {e}"))?;
    Ok(ips
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

/// A byte stream to the server, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// What the connection is doing, for the verbose explanation of a connect timeout.
pub type Stage = Cell<&'static str>;

async fn connect_stream(
    target: &Target,
    tls: Option<(&Arc<rustls::ClientConfig>, &str)>,
    stage: &Stage,
) -> Result<Box<dyn Io>, String> {
    let tcp = match &target.endpoint {
        Endpoint::Unix(path) => {
            stage.set("connecting to the unix socket");
            let s = UnixStream::connect(path)
                .await
                .map_err(|e| format!("dial unix {}: connect: {}", path.display(), io_error(&e)))?;
            return match tls {
                Some((cfg, name)) => tls_handshake(s, cfg, name, stage).await,
                None => Ok(Box::new(s)),
            };
        }
        Endpoint::Tcp { host, port } => {
            stage.set("resolving the address");
            let addrs = resolve(host, *port).await?;
            stage.set("connecting over TCP");
            // Like Go's dialer: try each address in turn, report the first error.
            let mut first_err = None;
            let mut conn = None;
            for a in addrs {
                match TcpStream::connect(a).await {
                    Ok(s) => {
                        conn = Some(s);
                        break;
                    }
                    Err(e) => {
                        first_err.get_or_insert(format!("dial tcp {a}: connect: {}", io_error(&e)));
                    }
                }
            }
            conn.ok_or_else(|| first_err.unwrap_or_default())?
        }
    };
    // Small request/response exchanges: don't let Nagle delay them.
    let _ = tcp.set_nodelay(true);
    let tcp = QuickAck(tcp);
    match tls {
        Some((cfg, name)) => tls_handshake(tcp, cfg, name, stage).await,
        None => Ok(Box::new(tcp)),
    }
}

/// A TCP stream that acknowledges what it reads at once (`TCP_QUICKACK`, re-armed
/// after every read, since Linux clears it). A server that leaves Nagle's algorithm
/// on (tonic's `serve_with_incoming` does) holds the rest of its reply until the
/// response headers are acknowledged; with delayed ACKs that costs 40 ms per call.
struct QuickAck(TcpStream);

impl AsyncRead for QuickAck {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.0).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let _ = socket2::SockRef::from(&this.0).set_tcp_quickack(true);
        }
        res
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

async fn tls_handshake<S: Io + 'static>(
    stream: S,
    cfg: &Arc<rustls::ClientConfig>,
    name: &str,
    stage: &Stage,
) -> Result<Box<dyn Io>, String> {
    stage.set("in the TLS handshake");
    let server_name = crate::tls::server_name(name)?;
    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(server_name, stream)
        .await
        .map_err(|e| format!("authentication handshake failed: {}", io_error(&e)))?;
    Ok(Box::new(tls))
}

/// Connects and completes the HTTP/2 handshake, up to the server's SETTINGS frame.
/// The caller bounds it with the connect timeout.
pub async fn connect(
    target: &Target,
    tls: Option<(&Arc<rustls::ClientConfig>, &str)>,
    stage: &Stage,
) -> Result<SendRequest<Bytes>, String> {
    let stream = connect_stream(target, tls, stage).await?;
    stage.set("in the HTTP/2 handshake");
    let (tx, rx) = oneshot::channel();
    let io = Preface::new(stream, tx, tls.is_some());
    let (send, conn) = h2::client::Builder::new()
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| format!("http2 handshake failed: {e}"))?;
    tokio::spawn(conn);
    stage.set("waiting for the server's HTTP/2 settings");
    match rx.await {
        Ok(Ok(())) => Ok(send),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("connection closed before the server's HTTP/2 settings arrived".into()),
    }
}

type Signal = oneshot::Sender<Result<(), String>>;

/// Passes bytes through unchanged, and reports whether the first 9 bytes the server
/// sends are the header of an HTTP/2 SETTINGS frame (the server connection preface).
struct Preface<T: AsyncRead + Unpin> {
    inner: T,
    head: [u8; 9],
    len: usize,
    tls: bool,
    tx: Option<Signal>,
    write_err: Option<String>,
}

impl<T: AsyncRead + Unpin> Drop for Preface<T> {
    /// The connection went away before the preface was judged: say what is known.
    fn drop(&mut self) {
        if self.tx.is_none() {
            return;
        }
        if self.len > 0 {
            // e.g. h2 itself rejected a TLS alert's record header as a frame header
            let msg = self.not_http2();
            self.signal(Err(msg));
        } else if let Some(e) = self.write_err.take() {
            self.signal(Err(e));
        }
    }
}

impl<T: AsyncRead + Unpin> Preface<T> {
    fn new(inner: T, tx: Signal, tls: bool) -> Self {
        Preface {
            inner,
            head: [0; 9],
            len: 0,
            tls,
            tx: Some(tx),
            write_err: None,
        }
    }

    fn signal(&mut self, r: Result<(), String>) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(r);
        }
    }

    fn not_http2(&self) -> String {
        let head = &self.head[..self.len];
        let hint = if !self.tls && head.len() >= 2 && head[0] == 0x15 && head[1] == 0x03 {
            " (it answered with a TLS alert: does it need -tls?)"
        } else if !self.tls && head.starts_with(b"HTTP/") {
            " (it answered in HTTP/1)"
        } else {
            ""
        };
        format!(
            "server did not answer with the HTTP/2 server preface, got {:?}{hint}",
            String::from_utf8_lossy(head)
        )
    }

    /// Until the server's preface is judged, a failed write is remembered and hidden
    /// (reported as done), so that the connection goes on reading: the reason the
    /// server closed (a TLS alert, say) is usually still there to be read, and is a
    /// better message than "broken pipe". A dead socket reads EOF or an error at once.
    fn hide_write_error<R>(&mut self, res: Poll<io::Result<R>>, done: R) -> Poll<io::Result<R>> {
        match res {
            Poll::Ready(Err(e)) if self.tx.is_some() => {
                if self.write_err.is_none() {
                    self.write_err = Some(format!("writing to the server: {}", io_error(&e)));
                }
                Poll::Ready(Ok(done))
            }
            res => res,
        }
    }

    fn observe(&mut self, new: &[u8]) {
        if new.is_empty() {
            let msg = if self.len == 0 {
                "connection closed by the server before its HTTP/2 settings".to_string()
            } else {
                self.not_http2()
            };
            self.signal(Err(msg));
            return;
        }
        let n = new.len().min(9 - self.len);
        self.head[self.len..self.len + n].copy_from_slice(&new[..n]);
        self.len += n;
        if self.len == 9 {
            let h = self.head;
            // type SETTINGS (4), not an ACK, stream 0
            let is_settings = h[3] == 4 && h[4] & 1 == 0 && h[5] & 0x7f == 0 && h[6..] == [0; 3];
            let r = if is_settings {
                Ok(())
            } else {
                Err(self.not_http2())
            };
            self.signal(r);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Preface<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if this.tx.is_some() {
            match &res {
                Poll::Ready(Ok(())) => this.observe(&buf.filled()[before..]),
                Poll::Ready(Err(e)) => {
                    let msg = format!("reading from the server: {}", io_error(e));
                    this.signal(Err(msg));
                }
                Poll::Pending => {}
            }
        }
        res
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Preface<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.hide_write_error(res, buf.len())
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        let len = bufs.iter().map(|b| b.len()).sum();
        this.hide_write_error(res, len)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        this.hide_write_error(res, ())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.hide_write_error(res, ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, authority: &str) -> Result<Target, String> {
        Ok(Target {
            endpoint: Endpoint::Tcp {
                host: host.into(),
                port,
            },
            authority: authority.into(),
        })
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("localhost:9446"),
            tcp("localhost", 9446, "localhost:9446")
        );
        assert_eq!(parse_target(":8080"), tcp("", 8080, "localhost:8080"));
        assert_eq!(
            parse_target("[::1]:50051"),
            tcp("::1", 50051, "[::1]:50051")
        );
        assert_eq!(
            parse_target("dns:///svc.ns:80"),
            tcp("svc.ns", 80, "svc.ns:80")
        );
        assert_eq!(
            parse_target("passthrough:///10.0.0.1:80"),
            tcp("10.0.0.1", 80, "10.0.0.1:80")
        );
        assert_eq!(
            parse_target("unix:///tmp/s.sock").map(|t| t.endpoint),
            Ok(Endpoint::Unix("/tmp/s.sock".into()))
        );
        assert_eq!(
            parse_target("unix:rel.sock").map(|t| t.endpoint),
            Ok(Endpoint::Unix("rel.sock".into()))
        );
        assert_eq!(
            parse_target("localhost"),
            Err("dial tcp: address localhost: missing port in address".into())
        );
        assert_eq!(
            parse_target("::1:80"),
            Err("dial tcp: address ::1:80: too many colons in address".into())
        );
        assert_eq!(
            parse_target("host:http"),
            Err("dial tcp: address host:http: invalid port".into())
        );
        assert_eq!(
            parse_target("h:1").map(|t| t.tls_host().to_string()),
            Ok("h".into())
        );
        assert_eq!(
            parse_target(":1").map(|t| t.tls_host().to_string()),
            Ok("localhost".into())
        );
    }

    #[test]
    fn preface_detection() {
        let check = |chunks: &[&[u8]]| {
            let (tx, mut rx) = oneshot::channel();
            let mut p = Preface::new(tokio::io::empty(), tx, false);
            for c in chunks {
                p.observe(c);
            }
            rx.try_recv().ok()
        };
        let settings: &[u8] = &[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3];
        assert_eq!(check(&[settings]), Some(Ok(())));
        assert_eq!(check(&[&settings[..2], &settings[2..]]), Some(Ok(())));
        assert_eq!(check(&[&settings[..5]]), None);
        let http1 = check(&[b"HTTP/1.1 400 Bad Request\r\n"]);
        assert!(matches!(http1, Some(Err(e)) if e.contains("HTTP/1")));
        let closed = check(&[b""]);
        assert!(matches!(closed, Some(Err(e)) if e.contains("closed")));
        let alert = check(&[&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32], b""]);
        assert!(matches!(alert, Some(Err(e)) if e.contains("-tls")));
    }
}
