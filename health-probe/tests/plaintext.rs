//! The probe against plaintext servers, run as the real binary.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::codec::CompressionEncoding;
use tonic::transport::Server;
use tonic_health::pb::health_server::HealthServer;

#[tokio::test]
async fn serving_default_service() {
    let addr = health_server().await;
    let o = probe(&["-addr", &addr]).await;
    expect(&o, 0, "status: SERVING");
    assert_eq!(o.stdout, "");
}

#[tokio::test]
async fn serving_named_service() {
    let addr = health_server().await;
    let o = probe(&["-addr", &addr, "-service", "svc.Up"]).await;
    expect(&o, 0, "status: SERVING");
}

#[tokio::test]
async fn not_serving_is_exit_4() {
    let addr = health_server().await;
    let o = probe(&["-addr", &addr, "-service", "svc.Down"]).await;
    expect(&o, 4, "service unhealthy (responded with \"NOT_SERVING\")");
}

#[tokio::test]
async fn unknown_service_is_not_found_exit_3() {
    let addr = health_server().await;
    let o = probe(&["-addr", &addr, "-service", "no.Such"]).await;
    expect(
        &o,
        3,
        "error: health rpc failed: rpc error: code = NotFound desc = service not registered",
    );
}

struct NoEval;

#[tonic::async_trait]
impl proto::pb::function_evaluator_server::FunctionEvaluator for NoEval {
    async fn evaluate_function(
        &self,
        _req: tonic::Request<proto::pb::EvaluateFunctionRequest>,
    ) -> Result<tonic::Response<proto::pb::EvaluateFunctionResponse>, tonic::Status> {
        Err(tonic::Status::internal("not in this test"))
    }
}

#[tokio::test]
async fn server_without_health_is_unimplemented_exit_3() {
    let router = Server::builder()
        .add_service(proto::pb::function_evaluator_server::FunctionEvaluatorServer::new(NoEval));
    let addr = serve(router).await;
    let o = probe(&["-addr", &addr]).await;
    expect_prefix(
        &o,
        3,
        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ",
    );
    assert_eq!(o.stderr.lines().count(), 1, "{o:#?}");
}

#[tokio::test]
async fn go_style_flag_forms() {
    let addr = health_server().await;
    let port = addr.rsplit(':').next().expect("port");
    let localhost = format!("localhost:{port}");
    let empty_host = format!(":{port}");
    let eq = format!("-addr={addr}");
    let dd = format!("--addr={addr}");
    for args in [
        vec![eq.as_str(), "-service=svc.Down"],
        vec!["--addr", &addr, "--service", "svc.Down"],
        vec![dd.as_str(), "--service=svc.Down", "-tls=false", "-v=false"],
        vec!["-addr", &localhost, "-service", "svc.Down"],
        vec!["-addr", &empty_host, "-service", "svc.Down"],
        vec![
            "-connect-timeout",
            "1m30s",
            "-rpc-timeout=2.5s",
            "-addr",
            &addr,
            "-service",
            "svc.Down",
        ],
    ] {
        let o = probe(&args).await;
        expect(&o, 4, "service unhealthy (responded with \"NOT_SERVING\")");
    }
    // parsing stops at the first non-flag argument, as Go's flag package does
    let o = probe(&["-addr", &addr, "extra", "-service", "svc.Down"]).await;
    expect(&o, 0, "status: SERVING");
}

#[tokio::test]
async fn headers_and_user_agent_reach_the_server() {
    let rec = Recorder::default();
    let addr = serve(Server::builder().add_service(HealthServer::new(rec.clone()))).await;
    let o = probe(&[
        "-addr",
        &addr,
        "-rpc-header",
        "X-Token: secret value",
        "--rpc-header=x-multi:one",
        "-rpc-header",
        "x-multi: two",
        "-rpc-header",
        "trace-bin: raw\u{1}bytes",
    ])
    .await;
    expect(&o, 0, "status: SERVING");
    let calls = rec.calls();
    assert_eq!(calls.len(), 1);
    let md = &calls[0];
    let ua = md
        .get("user-agent")
        .expect("user-agent")
        .to_str()
        .expect("ascii");
    assert!(ua.starts_with("grpc_health_probe "), "{ua}");
    assert_eq!(md.get("x-token").expect("x-token"), "secret value");
    let multi: Vec<_> = md.get_all("x-multi").iter().collect();
    assert_eq!(multi, ["one", "two"]);
    let bin = md
        .get_bin("trace-bin")
        .expect("trace-bin")
        .to_bytes()
        .expect("base64");
    assert_eq!(&bin[..], b"raw\x01bytes");
    // the deadline is sent as grpc-timeout
    assert!(md.get("grpc-timeout").is_some(), "{md:?}");

    let o = probe(&["-addr", &addr, "-user-agent", "kubelet-probe/1.0"]).await;
    expect(&o, 0, "status: SERVING");
    let calls = rec.calls();
    let ua = calls[1]
        .get("user-agent")
        .expect("user-agent")
        .to_str()
        .expect("ascii");
    assert!(ua.starts_with("kubelet-probe/1.0 "), "{ua}");
}

#[tokio::test]
async fn gzip() {
    let health = standard_health()
        .await
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    let addr = serve(Server::builder().add_service(health)).await;
    let o = probe(&["-addr", &addr, "-gzip", "-service", "svc.Down"]).await;
    expect(&o, 4, "service unhealthy (responded with \"NOT_SERVING\")");
    let o = probe(&["-addr", &addr, "-gzip"]).await;
    expect(&o, 0, "status: SERVING");

    // A server that does not take gzip answers UNIMPLEMENTED, as with the Go probe.
    let addr = health_server().await;
    let o = probe(&["-addr", &addr, "-gzip"]).await;
    expect_prefix(
        &o,
        3,
        "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ",
    );
    assert!(o.stderr.contains("gzip"), "{o:#?}");
}

#[tokio::test]
async fn rpc_timeout_is_deadline_exceeded_exit_3() {
    let rec = Recorder {
        hang: true,
        ..Default::default()
    };
    let addr = serve(Server::builder().add_service(HealthServer::new(rec.clone()))).await;
    let o = probe(&["-addr", &addr, "-rpc-timeout", "300ms"]).await;
    expect(&o, 3, "timeout: health rpc did not complete within 300ms");
    assert!(o.elapsed < Duration::from_secs(5), "{o:#?}");
    assert_eq!(rec.calls().len(), 1);
}

#[tokio::test]
async fn silent_listener_is_connect_timeout_exit_2() {
    let (l, addr) = bind().await;
    // Accept and hold connections without ever answering.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let addr = addr.to_string();
    let o = probe(&["-addr", &addr, "-connect-timeout", "500ms"]).await;
    expect(
        &o,
        2,
        &format!("timeout: failed to connect service \"{addr}\" within 500ms"),
    );
    assert!(o.elapsed >= Duration::from_millis(450), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "{o:#?}");

    // the same in the TLS handshake
    let o = probe(&[
        "-addr",
        &addr,
        "-tls",
        "-tls-no-verify",
        "-connect-timeout",
        "300ms",
    ])
    .await;
    expect(
        &o,
        2,
        &format!("timeout: failed to connect service \"{addr}\" within 300ms"),
    );
    assert!(o.elapsed < Duration::from_secs(5), "{o:#?}");
}

#[tokio::test]
async fn http1_server_is_connection_failure_exit_2() {
    let (l, addr) = bind().await;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
                // keep the connection open: the probe must not wait for it to close
                let _ = s.read(&mut buf).await;
            });
        }
    });
    let addr = addr.to_string();
    let o = probe(&["-addr", &addr, "-connect-timeout", "10s"]).await;
    expect_prefix(
        &o,
        2,
        &format!("error: failed to connect service at \"{addr}\": server did not answer with the HTTP/2 server preface"),
    );
    assert!(o.stderr.contains("HTTP/1"), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "{o:#?}");
}

#[tokio::test]
async fn closed_port_is_exit_2() {
    let (l, addr) = bind().await;
    drop(l);
    let addr = addr.to_string();
    let o = probe(&["-addr", &addr]).await;
    expect(
        &o,
        2,
        &format!(
            "error: failed to connect service at \"{addr}\": dial tcp {addr}: connect: connection refused"
        ),
    );
}

#[tokio::test]
async fn unix_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("health.sock");
    let l = tokio::net::UnixListener::bind(&path).expect("bind unix");
    let router = Server::builder().add_service(standard_health().await);
    tokio::spawn(router.serve_with_incoming(UnixListenerStream::new(l)));
    let addr = format!("unix://{}", path.display());
    let o = probe(&["-addr", &addr, "-service", "svc.Down"]).await;
    expect(&o, 4, "service unhealthy (responded with \"NOT_SERVING\")");
}

#[tokio::test]
async fn verbose_reports_options_and_timings() {
    let addr = health_server().await;
    let o = probe(&["-addr", &addr, "-v"]).await;
    assert_eq!(o.code, 0, "{o:#?}");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines[0], "parsed options:");
    assert_eq!(
        lines[1],
        format!("> addr={addr} conn_timeout=1s rpc_timeout=1s")
    );
    assert!(lines.contains(&"establishing connection"), "{o:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("connection established (took ")),
        "{o:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("time elapsed: connect=")),
        "{o:#?}"
    );
    assert_eq!(lines.last(), Some(&"status: SERVING"));
}

#[tokio::test]
async fn bad_arguments_are_exit_1() {
    for (args, first_line) in [
        (vec![], "error: -addr not specified"),
        (vec!["-service", "x"], "error: -addr not specified"),
        (vec!["-addr", "x:1", "-nope"], "flag provided but not defined: -nope"),
        (vec!["-addr", "x:1", "--nope=1"], "flag provided but not defined: -nope"),
        (vec!["-addr"], "flag needs an argument: -addr"),
        (
            vec!["-addr", "x:1", "-connect-timeout", "abc"],
            "invalid value \"abc\" for flag -connect-timeout: parse error",
        ),
        (
            vec!["-addr", "x:1", "-rpc-timeout=10"],
            "invalid value \"10\" for flag -rpc-timeout: parse error",
        ),
        (
            vec!["-addr", "x:1", "-connect-timeout", "0s"],
            "error: -connect-timeout must be greater than zero (specified: 0s)",
        ),
        (
            vec!["-addr", "x:1", "-rpc-timeout", "-500ms"],
            "error: -rpc-timeout must be greater than zero (specified: -500ms)",
        ),
        (
            vec!["-addr", "x:1", "-tls=maybe"],
            "invalid boolean value \"maybe\" for -tls: parse error",
        ),
        (
            vec!["-addr", "x:1", "-rpc-header", "novalue"],
            "invalid value \"novalue\" for flag -rpc-header: invalid RPC header, expected 'key: value', got \"novalue\"",
        ),
        (
            vec!["-addr", "x:1", "-tls-ca-cert", "ca.pem"],
            "error: specified -tls-ca-cert without specifying -tls",
        ),
        (
            vec!["-addr", "x:1", "-tls-no-verify"],
            "error: specified -tls-no-verify without specifying -tls",
        ),
        (
            vec!["-addr", "x:1", "-tls-server-name", "n"],
            "error: specified -tls-server-name without specifying -tls",
        ),
        (
            vec!["-addr", "x:1", "-tls", "-tls-client-cert", "c.pem"],
            "error: specified -tls-client-cert without specifying -tls-client-key",
        ),
        (
            vec!["-addr", "x:1", "-tls", "-tls-client-key", "k.pem"],
            "error: specified -tls-client-key without specifying -tls-client-cert",
        ),
        (
            vec!["-addr", "x:1", "-tls", "-tls-no-verify", "-tls-ca-cert", "ca.pem"],
            "error: cannot specify -tls-ca-cert with -tls-no-verify (CA cert would not be used)",
        ),
        (
            vec!["-addr", "x:1", "-tls", "-tls-no-verify", "-tls-server-name", "n"],
            "error: cannot specify -tls-server-name with -tls-no-verify (server name would not be used)",
        ),
        (vec!["-addr", "x:1", "-alts"], "error: -alts is not supported by this health probe"),
        (vec!["-addr", "x:1", "-spiffe"], "error: -spiffe is not supported by this health probe"),
        (vec!["-addr", "x:1", "-tls", "-alts"], "error: cannot specify -tls with -alts"),
        (
            vec!["-addr", "x:1", "-alts", "-spiffe"],
            "error: -alts and -spiffe are mutually incompatible",
        ),
    ] {
        let o = probe(&args).await;
        assert_eq!(o.code, 1, "{args:?}: {o:#?}");
        assert_eq!(o.stderr.lines().next(), Some(first_line), "{args:?}: {o:#?}");
        // Go's flag package follows a syntax error with the usage
        let is_syntax = !first_line.starts_with("error: ");
        assert_eq!(o.stderr.contains("Usage:"), is_syntax, "{args:?}: {o:#?}");
    }
}

#[tokio::test]
async fn help_and_version() {
    let o = probe(&["-h"]).await;
    assert_eq!(o.code, 0, "{o:#?}");
    assert!(o.stderr.starts_with("Usage:\n  -addr string\n"), "{o:#?}");
    assert!(o.stderr.contains("  -rpc-header value\n"), "{o:#?}");

    let o = probe(&["-version"]).await;
    assert_eq!(o.code, 0, "{o:#?}");
    assert_eq!(
        o.stdout,
        format!("health-probe {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(o.stderr, "");
}

#[tokio::test]
async fn malformed_addresses_are_connection_failures() {
    let o = probe(&["-addr", "localhost"]).await;
    expect(
        &o,
        2,
        "error: failed to connect service at \"localhost\": dial tcp: address localhost: missing port in address",
    );
    let o = probe(&["-addr", "::1:80"]).await;
    expect(
        &o,
        2,
        "error: failed to connect service at \"::1:80\": dial tcp: address ::1:80: too many colons in address",
    );
}
