//! The probe itself: connect within `-connect-timeout`, call
//! `grpc.health.v1.Health/Check` within `-rpc-timeout`, and map the outcome to
//! grpc-health-probe's messages and exit codes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::header::{HeaderValue, USER_AGENT};
use hyper::client::conn::http2::SendRequest;
use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
use tonic::codec::CompressionEncoding;
use tonic::metadata::{AsciiMetadataValue, BinaryMetadataValue, MetadataKey};
use tonic::Code;

use crate::dial::{self, Stage};
use crate::duration::GoDuration;
use crate::flags::Options;

pub const STATUS_CONNECTION_FAILURE: i32 = 2;
pub const STATUS_RPC_FAILURE: i32 = 3;
pub const STATUS_UNHEALTHY: i32 = 4;

/// Go's `codes.Code.String()`.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// The health service over one HTTP/2 connection, setting the user agent.
struct H2 {
    send: SendRequest<tonic::body::Body>,
    user_agent: HeaderValue,
}

type ResponseFuture = Pin<
    Box<dyn Future<Output = Result<http::Response<hyper::body::Incoming>, hyper::Error>> + Send>,
>;

impl tower::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.send.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<tonic::body::Body>) -> Self::Future {
        req.headers_mut()
            .insert(USER_AGENT, self.user_agent.clone());
        Box::pin(self.send.send_request(req))
    }
}

fn elapsed(since: Instant) -> GoDuration {
    GoDuration::from_std(since.elapsed())
}

/// Runs the probe; returns the exit code after printing the outcome on stderr.
pub async fn run(o: &Options, tls: Option<Arc<rustls::ClientConfig>>) -> i32 {
    let target = match dial::parse_target(&o.addr) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: failed to connect service at {:?}: {e}", o.addr);
            return STATUS_CONNECTION_FAILURE;
        }
    };
    // grpc-go uses the TLS server name, when one is set, as the :authority.
    let (authority, tls_name) = if o.tls_server_name.is_empty() {
        (target.authority.clone(), target.tls_host().to_string())
    } else {
        (o.tls_server_name.clone(), o.tls_server_name.clone())
    };

    if o.verbose {
        eprintln!("establishing connection");
    }
    let conn_start = Instant::now();
    let stage = Stage::new("starting");
    let connecting = dial::connect(
        &target,
        tls.as_ref().map(|c| (c, tls_name.as_str())),
        &stage,
    );
    let send = match tokio::time::timeout(o.connect_timeout.to_std(), connecting).await {
        Ok(Ok(send)) => send,
        Ok(Err(e)) => {
            eprintln!("error: failed to connect service at {:?}: {e}", o.addr);
            return STATUS_CONNECTION_FAILURE;
        }
        Err(_) => {
            if o.verbose {
                eprintln!("> gave up {}", stage.get());
            }
            eprintln!(
                "timeout: failed to connect service {:?} within {}",
                o.addr, o.connect_timeout
            );
            return STATUS_CONNECTION_FAILURE;
        }
    };
    let conn_duration = elapsed(conn_start);
    if o.verbose {
        eprintln!("connection established (took {conn_duration})");
    }

    let rpc_start = Instant::now();
    let result = tokio::time::timeout(
        o.rpc_timeout.to_std(),
        check(o, send, &authority, tls.is_some()),
    )
    .await;
    let rpc_duration = elapsed(rpc_start);
    let status = match result {
        Ok(Ok(status)) => status,
        Ok(Err(s)) if s.code() == Code::Unimplemented => {
            eprintln!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                s.message()
            );
            return STATUS_RPC_FAILURE;
        }
        Ok(Err(s)) if s.code() != Code::DeadlineExceeded => {
            eprintln!(
                "error: health rpc failed: rpc error: code = {} desc = {}",
                code_name(s.code()),
                s.message()
            );
            return STATUS_RPC_FAILURE;
        }
        Ok(Err(_)) | Err(_) => {
            eprintln!(
                "timeout: health rpc did not complete within {}",
                o.rpc_timeout
            );
            return STATUS_RPC_FAILURE;
        }
    };

    let name = match ServingStatus::try_from(status) {
        Ok(s) => s.as_str_name().to_string(),
        Err(_) => status.to_string(),
    };
    if status != ServingStatus::Serving as i32 {
        eprintln!("service unhealthy (responded with {name:?})");
        return STATUS_UNHEALTHY;
    }
    if o.verbose {
        eprintln!("time elapsed: connect={conn_duration} rpc={rpc_duration}");
    }
    eprintln!("status: {name}");
    0
}

/// The Check call; returns the raw serving status.
async fn check(
    o: &Options,
    send: SendRequest<tonic::body::Body>,
    authority: &str,
    tls: bool,
) -> Result<i32, tonic::Status> {
    let scheme = if tls { "https" } else { "http" };
    let origin: http::Uri = format!("{scheme}://{authority}")
        .parse()
        .map_err(|e| tonic::Status::internal(format!("invalid authority {authority:?}: {e}")))?;
    let user_agent = HeaderValue::try_from(format!(
        "{} health-probe/{}",
        o.user_agent,
        env!("CARGO_PKG_VERSION")
    ))
    .map_err(|e| tonic::Status::internal(format!("invalid user agent: {e}")))?;
    let mut client = HealthClient::with_origin(H2 { send, user_agent }, origin);
    if o.gzip {
        client = client
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
    }
    let mut req = tonic::Request::new(HealthCheckRequest {
        service: o.service.clone(),
    });
    req.set_timeout(o.rpc_timeout.to_std());
    let md = req.metadata_mut();
    for (k, v) in &o.rpc_headers {
        let bad = |e: &dyn std::fmt::Display| {
            tonic::Status::internal(format!("invalid header {k:?}: {e}"))
        };
        if k.ends_with("-bin") {
            let key = MetadataKey::from_bytes(k.as_bytes()).map_err(|e| bad(&e))?;
            md.append_bin(key, BinaryMetadataValue::from_bytes(v.as_bytes()));
        } else {
            let key = MetadataKey::from_bytes(k.as_bytes()).map_err(|e| bad(&e))?;
            let val = AsciiMetadataValue::try_from(v.as_str()).map_err(|e| bad(&e))?;
            md.append(key, val);
        }
    }
    let resp = client.check(req).await?;
    Ok(resp.into_inner().status)
}
