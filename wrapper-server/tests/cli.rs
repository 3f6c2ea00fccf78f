//! The wrapper-server command line, run as a real process.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_wrapper-server");

/// Runs `cmd` to its end; a wrapper that serves instead of exiting fails the
/// test after 30 s rather than hanging it.
fn run(cmd: &mut Command) -> Output {
    e2e_tests::output_within(cmd, None, Duration::from_secs(30)).unwrap()
}

#[test]
fn missing_entrypoint_is_a_usage_error() {
    let out = run(Command::new(BIN).args(["--port", "0"]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ENTRYPOINT"), "{stderr}");
}

#[test]
fn bad_metrics_addr_is_named() {
    let out = run(Command::new(BIN).args(["--metrics-addr", "nowhere", "--", "cat"]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--metrics-addr") && stderr.contains("nowhere"),
        "{stderr}"
    );
}

#[test]
fn port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = run(Command::new(BIN).args(["--host", "127.0.0.1", "--port", &port, "--", "cat"]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("listening on 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(stderr.contains("in use"), "{stderr}");
}

#[test]
fn install_copies_the_real_binary_which_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe-src");
    std::fs::write(&probe, b"#!/bin/sh\necho probe\n").unwrap();
    let target = dir.path().join("tools");
    let out = run(Command::new(BIN).args([
        "install",
        target.to_str().unwrap(),
        "--probe",
        probe.to_str().unwrap(),
    ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = target.join("wrapper-server");
    let version = run(Command::new(&installed).arg("--version"));
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("wrapper-server "));
    for name in ["health-probe", "grpc-health-probe"] {
        assert_eq!(
            std::fs::read(target.join(name)).unwrap(),
            std::fs::read(&probe).unwrap()
        );
    }
}

#[test]
fn install_into_unwritable_place_fails_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let probe = dir.path().join("p");
    std::fs::write(&probe, b"").unwrap();
    let out = run(Command::new(BIN).args([
        "install",
        file.join("sub").to_str().unwrap(),
        "--probe",
        probe.to_str().unwrap(),
    ]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a-file/sub"), "{stderr}");
}
