//! What grpc-go checks before a request reaches a handler: the method is
//! POST, the content type is gRPC's, and a `grpc-timeout` parses. A request
//! that fails any of them is answered here, as grpc-go answers it, and the
//! handler (the function) never runs.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either, Ready};
use tonic::body::Body;
use tonic::Code;

use crate::call::deadline;

/// The layer that puts [`RequireGrpc`] in front of every service.
#[derive(Clone, Copy, Default)]
pub struct RequireGrpcLayer;

impl<S> tower::Layer<S> for RequireGrpcLayer {
    type Service = RequireGrpc<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireGrpc(inner)
    }
}

#[derive(Clone)]
pub struct RequireGrpc<S>(S);

impl<S> tower::Service<http::Request<Body>> for RequireGrpc<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<
        Ready<Result<Self::Response, S::Error>>,
        BoxFuture<'static, Result<Self::Response, S::Error>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match refusal(&req) {
            Some(resp) => Either::Left(futures::future::ready(Ok(resp))),
            None => Either::Right(Box::pin(self.0.call(req))),
        }
    }
}

/// grpc-go's early answer for a request it will not serve, if this is one,
/// checked in grpc-go's order: HTTP 415 + INVALID_ARGUMENT for a content type
/// that is not `application/grpc[+…|;…]`, 400 + INTERNAL for a malformed
/// `grpc-timeout`, 405 + INTERNAL for a method other than POST.
pub fn refusal<B>(req: &http::Request<B>) -> Option<http::Response<Body>> {
    let content_type = req.headers().get(http::header::CONTENT_TYPE);
    if !content_type.is_some_and(|v| is_grpc_content_type(v.as_bytes())) {
        let shown = content_type.map_or_else(String::new, |v| {
            crate::call::shown_name(&String::from_utf8_lossy(v.as_bytes())).into_owned()
        });
        return Some(early_answer(
            http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InvalidArgument,
            &format!("invalid gRPC request content-type {shown:?}"),
        ));
    }
    if let Err(err) = deadline::check_grpc_timeout(req.headers()) {
        return Some(early_answer(
            http::StatusCode::BAD_REQUEST,
            Code::Internal,
            &format!("malformed grpc-timeout: {err}"),
        ));
    }
    if req.method() != http::Method::POST {
        return Some(early_answer(
            http::StatusCode::METHOD_NOT_ALLOWED,
            Code::Internal,
            &format!(
                "received a request with method {}, expecting POST",
                crate::call::shown_name(req.method().as_str())
            ),
        ));
    }
    None
}

/// `application/grpc`, or it followed by `+subtype` or `;params`
/// (case-sensitive, as grpc-go's check).
fn is_grpc_content_type(value: &[u8]) -> bool {
    const BASE: &[u8] = b"application/grpc";
    value.starts_with(BASE) && matches!(value.get(BASE.len()), None | Some(b'+' | b';'))
}

fn early_answer(http_status: http::StatusCode, code: Code, message: &str) -> http::Response<Body> {
    let mut resp = tonic::Status::new(code, message).into_http::<Body>();
    *resp.status_mut() = http_status;
    resp
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn req(method: &str, content_type: Option<&str>, timeout: Option<&str>) -> http::Request<()> {
        let mut b = http::Request::builder()
            .method(method)
            .uri("/evaluator.FunctionEvaluator/EvaluateFunction");
        if let Some(ct) = content_type {
            b = b.header("content-type", ct);
        }
        if let Some(t) = timeout {
            b = b.header("grpc-timeout", t);
        }
        b.body(()).unwrap()
    }

    fn answer(r: &http::Request<()>) -> Option<(u16, String, String)> {
        refusal(r).map(|resp| {
            let h = resp.headers();
            let get = |k: &str| {
                h.get(k)
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default()
            };
            (
                resp.status().as_u16(),
                get("grpc-status"),
                get("grpc-message"),
            )
        })
    }

    #[test]
    fn grpc_requests_pass() {
        for ct in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc;charset=utf-8",
        ] {
            assert_eq!(answer(&req("POST", Some(ct), None)), None, "{ct}");
        }
        assert_eq!(
            answer(&req("POST", Some("application/grpc"), Some("5S"))),
            None
        );
    }

    #[test]
    fn other_requests_get_grpc_gos_answers() {
        let (status, code, msg) = answer(&req("GET", Some("application/grpc"), None)).unwrap();
        assert_eq!((status, code.as_str()), (405, "13"));
        assert!(msg.contains("GET"), "{msg}");
        // grpc-go's order: the content type first, then the timeout.
        let (status, ..) = answer(&req("GET", Some("text/plain"), Some("xyz"))).unwrap();
        assert_eq!(status, 415);
        let (status, ..) = answer(&req("GET", Some("application/grpc"), Some("xyz"))).unwrap();
        assert_eq!(status, 400);
        for ct in [
            Some("text/plain"),
            Some("application/grpcx"),
            Some("application/json"),
            None,
        ] {
            let (status, code, msg) = answer(&req("POST", ct, None)).unwrap();
            assert_eq!((status, code.as_str()), (415, "3"), "{ct:?}");
            assert!(
                msg.contains("invalid%20gRPC%20request%20content-type"),
                "{msg}"
            );
        }
        for t in ["xyz", "1", "123456789S", "5s", ""] {
            let (status, code, msg) =
                answer(&req("POST", Some("application/grpc"), Some(t))).unwrap();
            assert_eq!((status, code.as_str()), (400, "13"), "{t:?}");
            assert!(msg.starts_with("malformed%20grpc-timeout"), "{msg}");
        }
    }
}
