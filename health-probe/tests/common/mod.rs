//! Helpers for the tests: run the real binary, start servers on 127.0.0.1 port 0.
//! Listeners are bound before the server task is spawned, so the probe never races
//! the server's start (the kernel queues the connection until it is accepted).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::metadata::MetadataMap;
use tonic::transport::server::Router;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::ServingStatus;

/// What the probe did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs the probe binary with `args`; a probe that hangs fails the test after 30 s.
pub async fn probe(args: &[&str]) -> Outcome {
    let start = Instant::now();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_health-probe"))
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the probe did not finish within 30s")
        .expect("the probe runs");
    let o = Outcome {
        code: out.status.code().expect("the probe exited normally"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    };
    // HEALTH_PROBE_TEST_LOG=1 cargo test -- --nocapture shows every run.
    if std::env::var_os("HEALTH_PROBE_TEST_LOG").is_some() {
        eprintln!(
            "probe {args:?} -> {} in {:?}\n{}",
            o.code, o.elapsed, o.stderr
        );
    }
    o
}

/// Asserts the exit code and that stderr is exactly `stderr` (one line).
#[track_caller]
pub fn expect(o: &Outcome, code: i32, stderr: &str) {
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (code, format!("{stderr}\n").as_str()),
        "{o:#?}"
    );
}

/// Asserts the exit code and that stderr starts with `prefix`.
#[track_caller]
pub fn expect_prefix(o: &Outcome, code: i32, prefix: &str) {
    assert!(
        o.code == code && o.stderr.starts_with(prefix),
        "expected exit {code} and stderr starting with {prefix:?}, got {o:#?}"
    );
}

pub async fn bind() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("local addr");
    (l, addr)
}

/// Serves `router` on a fresh port; returns `127.0.0.1:PORT`.
pub async fn serve(router: Router) -> String {
    let (l, addr) = bind().await;
    tokio::spawn(router.serve_with_incoming(TcpListenerStream::new(l)));
    addr.to_string()
}

/// The standard health service: "" SERVING, "svc.Up" SERVING, "svc.Down" NOT_SERVING.
pub async fn standard_health() -> HealthServer<impl Health> {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("svc.Up", ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("svc.Down", ServingStatus::NotServing)
        .await;
    service
}

/// A plaintext server with the standard health service.
pub async fn health_server() -> String {
    serve(Server::builder().add_service(standard_health().await)).await
}

/// A health service that records the metadata of each Check and answers SERVING, or
/// never answers when `hang`.
#[derive(Clone, Default)]
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<MetadataMap>>>,
    pub hang: bool,
}

impl Recorder {
    pub fn calls(&self) -> Vec<MetadataMap> {
        self.seen.lock().expect("lock").clone()
    }
}

#[tonic::async_trait]
impl Health for Recorder {
    async fn check(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.seen.lock().expect("lock").push(req.metadata().clone());
        if self.hang {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(HealthCheckResponse {
            status: tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
        }))
    }

    type WatchStream = tokio_stream::Empty<Result<HealthCheckResponse, Status>>;

    async fn watch(
        &self,
        _req: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}
