//! The init image, built from `Dockerfile` with the real Docker engine (the
//! `FROM scratch` base needs no registry), used the way pods use it:
//! install into a shared volume, then run a function container whose
//! entrypoint is the installed wrapper-server, probed by the installed
//! grpc-health-probe. Skipped (with a note) where no Docker engine answers.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use e2e_tests::bin;

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "docker failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn docker_available() -> bool {
    Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Removes the named containers, volumes and image when the test ends.
struct Cleanup(Vec<Vec<String>>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for cmd in self.0.iter().rev() {
            let _ = Command::new("docker").args(cmd).output();
        }
    }
}

#[test]
fn init_image_installs_tools_and_serves_a_function() {
    if !docker_available() {
        eprintln!("SKIPPED: no Docker engine answers");
        return;
    }
    let tag = format!("krm-wrapper-test:{}", std::process::id());
    let volume = format!("krm-tools-{}", std::process::id());
    let fn_container = format!("krm-fn-{}", std::process::id());
    let _cleanup = Cleanup(vec![
        vec!["rmi".into(), "-f".into(), tag.clone()],
        vec!["volume".into(), "rm".into(), "-f".into(), volume.clone()],
        vec!["rm".into(), "-f".into(), fn_container.clone()],
    ]);
    // Build context: just the binaries.
    let ctx = tempfile::tempdir().unwrap();
    for name in ["wrapper-server", "health-probe", "example-fn"] {
        std::fs::copy(bin(name), ctx.path().join(name)).unwrap();
    }
    let dockerfile = concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile");
    ok(docker(&[
        "build",
        "-q",
        "-t",
        &tag,
        "-f",
        dockerfile,
        ctx.path().to_str().unwrap(),
    ]));

    // 1. Our init container: `wrapper-server install /wrapper-server-tools`.
    ok(docker(&["volume", "create", &volume]));
    let mount = format!("{volume}:/wrapper-server-tools");
    ok(docker(&["run", "--rm", "--user", "0", "-v", &mount, &tag]));
    // 2. Porch's template form, with the image's /bin/cp.
    let porch_volume = format!("{volume}-porch");
    let _cleanup_porch = Cleanup(vec![vec![
        "volume".into(),
        "rm".into(),
        "-f".into(),
        porch_volume.clone(),
    ]]);
    ok(docker(&["volume", "create", &porch_volume]));
    let porch_mount = format!("{porch_volume}:/porch-tools");
    ok(docker(&[
        "run",
        "--rm",
        "--user",
        "0",
        "-v",
        &porch_mount,
        "--entrypoint",
        "/bin/cp",
        &tag,
        "-a",
        "/home/nonroot/wrapper-server/.",
        "/porch-tools",
    ]));
    // Both forms produced runnable tools in the volume.
    for tool in [
        "/wrapper-server-tools/grpc-health-probe",
        "/porch-tools/grpc-health-probe",
    ] {
        let mounts = ["-v", &mount, "-v", &porch_mount];
        let out = docker(
            &[
                &["run", "--rm"],
                &mounts[..],
                &["--entrypoint", tool, &tag, "-version"],
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // 3. A function container: its own image has only the function; the
    // wrapper comes from the shared volume and is PID 1.
    let fn_ctx = tempfile::tempdir().unwrap();
    std::fs::copy(bin("example-fn"), fn_ctx.path().join("example-fn")).unwrap();
    std::fs::write(
        fn_ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY example-fn /example-fn\n",
    )
    .unwrap();
    let fn_tag = format!("{tag}-fn");
    let _cleanup_fn = Cleanup(vec![vec!["rmi".into(), "-f".into(), fn_tag.clone()]]);
    ok(docker(&[
        "build",
        "-q",
        "-t",
        &fn_tag,
        fn_ctx.path().to_str().unwrap(),
    ]));
    ok(docker(&[
        "run",
        "-d",
        "--name",
        &fn_container,
        "-v",
        &mount,
        "--entrypoint",
        "/wrapper-server-tools/wrapper-server",
        &fn_tag,
        "--port",
        "9446",
        "--",
        "/example-fn",
    ]));
    // Readiness, the way the kubelet would run it: exec the probe until 0.
    let mut ready = false;
    for _ in 0..100 {
        let out = docker(&[
            "exec",
            &fn_container,
            "/wrapper-server-tools/grpc-health-probe",
            "-addr",
            "localhost:9446",
        ]);
        if out.status.success() {
            assert!(String::from_utf8_lossy(&out.stderr).contains("status: SERVING"));
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        ready,
        "function container never became ready: {}",
        ok(docker(&["logs", &fn_container]))
    );
    let out = docker(&[
        "exec",
        &fn_container,
        "/wrapper-server-tools/health-probe",
        "-addr",
        "127.0.0.1:9446",
        "-service",
        "evaluator.FunctionEvaluator",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // docker stop sends SIGTERM to PID 1: the wrapper drains and exits 0.
    ok(docker(&["stop", "-t", "20", &fn_container]));
    let code = ok(docker(&[
        "inspect",
        "-f",
        "{{.State.ExitCode}}",
        &fn_container,
    ]));
    assert_eq!(
        code.trim(),
        "0",
        "logs: {}",
        ok(docker(&["logs", &fn_container]))
    );
}
