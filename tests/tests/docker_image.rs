//! The init image, built from `Dockerfile` with the real Docker engine (the
//! `FROM scratch` base needs no registry), used the way pods use it:
//! install into a shared volume, then run a function container whose
//! entrypoint is the installed wrapper-server, probed by the installed
//! grpc-health-probe. Skipped (with a note) where no Docker engine answers.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};
use std::time::Duration;

use e2e_tests::{bin, eventually_blocking, output_within, prerequisite, require_docker};

/// One `docker` command, bounded: generous, since a build on a busy machine
/// takes a while, but a hung engine fails the test instead of hanging it.
fn docker(args: &[&str]) -> Output {
    output_within(
        Command::new("docker").args(args),
        None,
        Duration::from_secs(300),
    )
    .unwrap()
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

/// Everything the test creates in the engine, all named up front and removed
/// when the test ends however it ends: containers first (every container is
/// named, so one whose `docker run` was cut short goes too), then the
/// volumes and images they used.
struct Cleanup {
    containers: Vec<String>,
    volumes: Vec<String>,
    images: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for (cmd, names) in [
            (&["rm", "-f", "-v"][..], &self.containers),
            (&["volume", "rm", "-f"], &self.volumes),
            (&["rmi", "-f"], &self.images),
        ] {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let _ = output_within(
                Command::new("docker").args(cmd).args(names),
                None,
                Duration::from_secs(60),
            );
        }
    }
}

#[test]
fn init_image_installs_tools_and_serves_a_function() {
    let Some(()) = prerequisite(require_docker()) else {
        return;
    };
    let id = std::process::id();
    let tag = format!("krm-wrapper-test:{id}");
    let fn_tag = format!("{tag}-fn");
    let volume = format!("krm-tools-{id}");
    let porch_volume = format!("{volume}-porch");
    let fn_container = format!("krm-fn-{id}");
    let install_container = format!("krm-install-{id}");
    let porch_container = format!("krm-porch-cp-{id}");
    let probe_containers = [format!("krm-probe-{id}-0"), format!("krm-probe-{id}-1")];
    let _cleanup = Cleanup {
        containers: [&fn_container, &install_container, &porch_container]
            .into_iter()
            .chain(&probe_containers)
            .cloned()
            .collect(),
        volumes: vec![volume.clone(), porch_volume.clone()],
        images: vec![fn_tag.clone(), tag.clone()],
    };
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
    ok(docker(&[
        "run",
        "--rm",
        "--name",
        &install_container,
        "--user",
        "0",
        "-v",
        &mount,
        &tag,
    ]));
    // 2. Porch's template form: `cp` on the image's PATH (wrapper-server
    // itself, as /bin/cp).
    ok(docker(&["volume", "create", &porch_volume]));
    let porch_mount = format!("{porch_volume}:/porch-tools");
    ok(docker(&[
        "run",
        "--rm",
        "--name",
        &porch_container,
        "--user",
        "0",
        "-v",
        &porch_mount,
        "--entrypoint",
        "cp",
        &tag,
        "-a",
        "/home/nonroot/wrapper-server/.",
        "/porch-tools",
    ]));
    // Both forms produced runnable tools in the volume.
    for (tool, name) in [
        "/wrapper-server-tools/grpc-health-probe",
        "/porch-tools/grpc-health-probe",
    ]
    .into_iter()
    .zip(&probe_containers)
    {
        let mounts = ["-v", &mount, "-v", &porch_mount];
        let out = docker(
            &[
                &["run", "--rm", "--name", name],
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
    let mut serving = None;
    let ready = eventually_blocking(Duration::from_secs(60), || {
        let out = docker(&[
            "exec",
            &fn_container,
            "/wrapper-server-tools/grpc-health-probe",
            "-addr",
            "localhost:9446",
        ]);
        serving = out.status.success().then_some(out);
        serving.is_some()
    });
    assert!(
        ready,
        "function container never became ready: {}",
        ok(docker(&["logs", &fn_container]))
    );
    let out = serving.unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("status: SERVING"));
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

/// `./build-images.sh TAG` (docs/deploy.md): both images, `FROM scratch`,
/// each with its entrypoint. From the debug binaries the test run already
/// built (`BINARIES=DIR`): the script's own release build would take CI
/// longer than the rest of the tests.
#[test]
fn build_images_sh_builds_both_images() {
    let Some(()) = prerequisite(require_docker()) else {
        return;
    };
    let tag = format!("e2e-{}", std::process::id());
    let images = [
        format!("wrapper-server:{tag}"),
        format!("function-runner:{tag}"),
    ];
    let porch_runner = format!("e2e-porch-runner-{}", std::process::id());
    let _cleanup = Cleanup {
        containers: vec![porch_runner.clone()],
        volumes: Vec::new(),
        images: images.to_vec(),
    };
    let binaries = bin("function-runner").parent().unwrap().to_path_buf();
    let out = output_within(
        Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../build-images.sh"))
            .arg(&tag)
            .env("BINARIES", &binaries),
        None,
        Duration::from_secs(600),
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (image, entrypoint) in [
        (
            &images[0],
            r#"["/wrapper-server","install","/wrapper-server-tools"]"#,
        ),
        (&images[1], r#"["/function-runner"]"#),
    ] {
        assert!(stdout.contains(image.as_str()), "{image} listed: {stdout}");
        let got = ok(docker(&[
            "image",
            "inspect",
            "--format",
            "{{json .Config.Entrypoint}}",
            image,
        ]));
        assert_eq!(got.trim(), entrypoint, "{image}");
    }

    // The runner image answers Porch's Deployment as written (its command
    // and its readiness probe, deployments/porch/2-function-runner.yaml),
    // as the user Porch's securityContext names; outside a cluster it
    // serves on the process backend.
    ok(docker(&[
        "run",
        "-d",
        "--name",
        &porch_runner,
        "--user",
        "10001:10001",
        "--entrypoint",
        "/home/nonroot/server",
        &images[1],
        "--pod-namespace=porch-fn-system",
        "--max-request-body-size=6291456",
        "--max-parallel-pods-per-function=2",
        "--max-waitlist-length=1",
        "--warm-up-pod-cache=true",
        "--functions=/home/nonroot/functions",
    ]));
    let probe = || {
        docker(&[
            "exec",
            &porch_runner,
            "/home/nonroot/grpc-health-probe",
            "-addr",
            "localhost:9445",
        ])
    };
    let serving = eventually_blocking(Duration::from_secs(30), || probe().status.success());
    let logs = docker(&["logs", &porch_runner]);
    assert!(
        serving,
        "Porch's readiness probe never passed: {:?}; runner's log: {}{}",
        probe(),
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr)
    );
    // grpc-health-probe's answer, on stderr as its log.
    let out = probe();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "status: SERVING"
    );
}
