//! The Prometheus `/metrics` endpoint of both binaries: plain HTTP/1.1 on
//! hyper's server, one short-lived connection per scrape.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may last in all, answer included (the write
/// timeout): a client that stops reading cannot hold a rendered answer in
/// memory for longer. Prometheus' default scrape timeout is 10 s.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed at once. With the timeout,
/// this bounds the memory that scrapers (or clients that never read) hold.
const MAX_CONNECTIONS: usize = 8;

/// A registry in Prometheus' text exposition format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// Renders the metrics text for one scrape.
pub type Render = Arc<dyn Fn() -> futures::future::BoxFuture<'static, String> + Send + Sync>;

/// Serves `GET /metrics` (any path, in fact) until `shutdown` resolves.
/// `render` is called per scrape.
pub async fn serve_http<F>(listener: TcpListener, render: Render, shutdown: F)
where
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    tracing::warn!(%err, "metrics: accept failed");
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("metrics: too many connections; closing one");
            drop(stream);
            continue;
        };
        let render = render.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
            let render = render.clone();
            async move { Ok::<_, std::convert::Infallible>(answer(req.method(), &render).await) }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(READ_TIMEOUT)
            .keep_alive(false)
            .serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _slot = slot;
            match tokio::time::timeout(CONNECTION_TIMEOUT, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::debug!(%err, "metrics: connection failed"),
                Err(_) => tracing::debug!("metrics: connection timed out"),
            }
        });
    }
}

async fn answer(method: &http::Method, render: &Render) -> http::Response<Full<Bytes>> {
    let (status, body) = if method == http::Method::GET {
        (http::StatusCode::OK, render().await)
    } else {
        (
            http::StatusCode::METHOD_NOT_ALLOWED,
            String::from("only GET is served\n"),
        )
    };
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
