//! The probe itself: connect within `-connect-timeout`, call
//! `grpc.health.v1.Health/Check` within `-rpc-timeout`, and map the outcome to
//! grpc-health-probe's messages and exit codes.

use std::sync::Arc;
use std::time::Instant;

use krm_fn::duration::GoDuration;

use crate::dial::{self, Stage};
use crate::flags::Options;
use crate::grpc::{self, Code};

pub const STATUS_CONNECTION_FAILURE: i32 = 2;
pub const STATUS_RPC_FAILURE: i32 = 3;
pub const STATUS_UNHEALTHY: i32 = 4;

/// `grpc.health.v1.HealthCheckResponse.ServingStatus` names.
fn serving_status_name(status: i32) -> String {
    match status {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => n.to_string(),
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
            log!("error: failed to connect service at {:?}: {e}", o.addr);
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
        log!("establishing connection");
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
            log!("error: failed to connect service at {:?}: {e}", o.addr);
            return STATUS_CONNECTION_FAILURE;
        }
        Err(_) => {
            if o.verbose {
                log!("> gave up {}", stage.get());
            }
            log!(
                "timeout: failed to connect service {:?} within {}",
                o.addr,
                o.connect_timeout
            );
            return STATUS_CONNECTION_FAILURE;
        }
    };
    let conn_duration = elapsed(conn_start);
    if o.verbose {
        log!("connection established (took {conn_duration})");
    }

    let rpc_start = Instant::now();
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Like grpc-go, which appends "grpc-go/VERSION" to the given user agent.
    let user_agent = match o.user_agent.as_str() {
        "" => format!("health-probe/{}", env!("CARGO_PKG_VERSION")),
        ua => format!("{ua} health-probe/{}", env!("CARGO_PKG_VERSION")),
    };
    let message = grpc::encode_health_request(&o.service);
    let call = grpc::Call {
        scheme,
        authority: &authority,
        path: "/grpc.health.v1.Health/Check",
        user_agent: &user_agent,
        timeout: o.rpc_timeout.to_std(),
        metadata: &o.rpc_headers,
        gzip: o.gzip,
        message: &message,
    };
    let result = tokio::time::timeout(o.rpc_timeout.to_std(), async {
        let reply = grpc::unary(send, &call).await?;
        grpc::decode_health_response(&reply)
    })
    .await;
    let rpc_duration = elapsed(rpc_start);
    let status = match result {
        Ok(Ok(status)) => status,
        Ok(Err(s)) if s.code == Code::UNIMPLEMENTED => {
            log!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                s.message
            );
            return STATUS_RPC_FAILURE;
        }
        Ok(Err(s)) if s.code != Code::DEADLINE_EXCEEDED => {
            log!("error: health rpc failed: {s}");
            return STATUS_RPC_FAILURE;
        }
        Ok(Err(_)) | Err(_) => {
            log!(
                "timeout: health rpc did not complete within {}",
                o.rpc_timeout
            );
            return STATUS_RPC_FAILURE;
        }
    };

    let name = serving_status_name(status);
    if status != 1 {
        log!("service unhealthy (responded with {name:?})");
        return STATUS_UNHEALTHY;
    }
    if o.verbose {
        log!("time elapsed: connect={conn_duration} rpc={rpc_duration}");
    }
    log!("status: {name}");
    0
}
