//! `function-runner serve` end to end on the process backend: real runner,
//! real wrapper-server "pods", real functions, a real gRPC client.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{
    bin, children_of, eventually, eventually_async, example_request, example_rl, health_status,
    output_within, process_alive, Gate, Wrapper,
};
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;
use tonic::Code;

fn request(image: &str) -> EvaluateFunctionRequest {
    example_request(image)
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A process-functions directory holding `example-fn`, and a free port for
/// metrics.
struct Fixture {
    dir: tempfile::TempDir,
    metrics_port: u16,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pods")).unwrap();
        std::fs::copy(bin("example-fn"), dir.path().join("pods/example-fn")).unwrap();
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let metrics_port = probe.local_addr().unwrap().port();
        Self { dir, metrics_port }
    }

    fn pods(&self) -> String {
        self.dir.path().join("pods").to_string_lossy().into_owned()
    }

    /// A FunctionConfig directory holding `yaml`, for `--functions`.
    fn functions(&self, yaml: &str) -> std::path::PathBuf {
        let dir = self.dir.path().join("functions");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("configs.yaml"), yaml).unwrap();
        dir
    }

    fn start(&self, extra: &[&str]) -> Wrapper {
        let port = self.metrics_port.to_string();
        let pods = self.pods();
        let mut args = vec![
            "--process-functions",
            pods.as_str(),
            "--metrics-port",
            port.as_str(),
        ];
        args.extend_from_slice(extra);
        Wrapper::start_runner(&args).unwrap()
    }

    async fn metrics(&self) -> String {
        self.try_metrics().await.unwrap()
    }

    /// `/metrics`, or the error of a connection the endpoint turned away
    /// (when its connections are all taken, it closes new ones at once).
    async fn try_metrics(&self) -> std::io::Result<String> {
        e2e_tests::http_get(&format!("127.0.0.1:{}", self.metrics_port), "/metrics").await
    }
}

/// The wrapper-server processes the runner started.
fn wrapper_pids(runner_pid: u32) -> Vec<i32> {
    children_of(runner_pid)
        .into_iter()
        .filter(|(pid, state)| {
            *state != 'Z'
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "wrapper-server")
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[tokio::test]
async fn serves_through_a_process_pod_and_reuses_it() {
    let fx = Fixture::new();
    let runner = fx.start(&[]);
    assert_eq!(health_status(&runner.endpoint(), "").await.unwrap(), 1);
    assert_eq!(
        health_status(&runner.endpoint(), "evaluator.FunctionEvaluator")
            .await
            .unwrap(),
        1
    );
    let mut client = runner.client().await.unwrap();
    for _ in 0..3 {
        let resp = client
            .evaluate_function(request("example.com/fns/example-fn:v1"))
            .await
            .unwrap()
            .into_inner();
        assert!(String::from_utf8_lossy(&resp.resource_list).contains("owner: team-shop"));
        assert_eq!(&resp.log[..], b"example-fn: processed ResourceList\n");
    }
    assert_eq!(
        wrapper_pids(runner.child.id()).len(),
        1,
        "one pod serves all calls"
    );
    let text = fx.metrics().await;
    assert!(
        text.contains("function_runner_pod_starts_total{outcome=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("function_runner_evaluations_total{image=\"example.com/fns/example-fn:v1\",outcome=\"Ok\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("function_runner_cache_misses_total 1"),
        "{text}"
    );
    assert!(
        text.contains("function_runner_cache_hits_total 2"),
        "{text}"
    );
    assert!(
        text.contains("function_runner_pods{state=\"ready\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("function_runner_pod_start_duration_seconds_count 1"),
        "{text}"
    );
}

#[tokio::test]
async fn concurrent_first_calls_start_one_pod() {
    let fx = Fixture::new();
    let runner = fx.start(&["--max-waitlist-length", "1000"]);
    let mut calls = Vec::new();
    for _ in 0..40 {
        let mut client = runner.client().await.unwrap();
        calls.push(tokio::spawn(async move {
            client
                .evaluate_function(request("example-fn:v1"))
                .await
                .map(|r| r.into_inner())
        }));
    }
    for call in calls {
        let resp = call.await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&resp.resource_list).contains("tier: frontend"));
    }
    let text = fx.metrics().await;
    assert!(
        text.contains("function_runner_pod_starts_total{outcome=\"ok\"} 1"),
        "{text}"
    );
    assert_eq!(wrapper_pids(runner.child.id()).len(), 1);
}

#[tokio::test]
async fn binary_executor_is_tried_before_pods() {
    let fx = Fixture::new();
    let configs = fx.functions("apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: cat\n  namespace: porch-fn-system\nspec:\n  image: cat-fn\n  binaryExecutor:\n    tags: [v1.0.0, v1.2.0]\n    path: upper.sh\n");
    write_script(&configs.join("upper.sh"), "exec cat");
    // The default prefix names a registry that refuses at once (nothing
    // listens on port 1): a constraint resolved against it fails fast.
    let runner = fx.start(&[
        "--functions",
        configs.to_str().unwrap(),
        "--default-image-prefix",
        "127.0.0.1:1/fns",
    ]);
    let mut client = runner.client().await.unwrap();
    // Short name, default prefix, semver constraint on the tag.
    let mut req = request("cat-fn");
    req.tag = ">=1.1, <2".into();
    let resp = client.evaluate_function(req).await.unwrap().into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());
    let resp = client
        .evaluate_function(request("127.0.0.1:1/fns/cat-fn:v1.0.0"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());
    assert!(
        wrapper_pids(runner.child.id()).is_empty(),
        "exec needs no pod"
    );
    // A constraint no configured tag satisfies is resolved against the
    // image's registry (issue 41): here one that cannot be reached.
    let mut req = request("cat-fn");
    req.tag = ">=3".into();
    let err = client.evaluate_function(req).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains(">=3") && err.message().contains("127.0.0.1:1"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_mapped_entrypoint_that_cannot_run_fails_the_call_saying_why() {
    let fx = Fixture::new();
    let map = fx.dir.path().join("functions.yaml");
    std::fs::write(
        &map,
        "example.com/gone:v1: [/nonexistent/gone-fn]\nexample.com/typo:v1: [no-such-krm-fn]\n",
    )
    .unwrap();
    let port = fx.metrics_port.to_string();
    let runner = Wrapper::start_runner(&[
        "--process-functions",
        map.to_str().unwrap(),
        "--metrics-port",
        &port,
    ])
    .unwrap();
    let mut client = runner.client().await.unwrap();
    for (image, says) in [
        (
            "example.com/gone:v1",
            "/nonexistent/gone-fn: No such file or directory",
        ),
        (
            "example.com/typo:v1",
            "\"no-such-krm-fn\" is not found on PATH",
        ),
    ] {
        let err = client.evaluate_function(request(image)).await.unwrap_err();
        assert!(err.message().contains(says), "{image}: {err:?}");
    }
}

#[tokio::test]
async fn unknown_image_is_not_found_and_function_errors_pass_through() {
    let fx = Fixture::new();
    write_script(
        &fx.dir.path().join("pods/failing"),
        "cat >/dev/null; echo 'it broke' >&2; exit 3",
    );
    let runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    let err = client
        .evaluate_function(request("example.com/no-such-fn:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("no-such-fn"), "{}", err.message());
    let err = client
        .evaluate_function(request("example.com/failing:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(
        err.message().contains("it broke") && err.message().contains("exit code 3"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn a_killed_pod_is_replaced_and_calls_still_succeed() {
    let fx = Fixture::new();
    let runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    client
        .evaluate_function(request("example-fn"))
        .await
        .unwrap();
    let pods = wrapper_pids(runner.child.id());
    assert_eq!(pods.len(), 1);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pods[0]), Signal::SIGKILL).unwrap();
    // The very next call may reach the dead pod (UNAVAILABLE → evict, retry)
    // or find it already evicted; either way it succeeds on a new pod.
    let resp = client
        .evaluate_function(request("example-fn"))
        .await
        .unwrap()
        .into_inner();
    assert!(String::from_utf8_lossy(&resp.resource_list).contains("owner: team-shop"));
    let now = wrapper_pids(runner.child.id());
    assert_eq!(now.len(), 1);
    assert_ne!(now[0], pods[0]);
}

#[tokio::test]
async fn sigterm_stops_every_pod_and_exits_zero() {
    let fx = Fixture::new();
    write_script(&fx.dir.path().join("pods/other-fn"), "exec cat");
    let mut runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    client
        .evaluate_function(request("example-fn"))
        .await
        .unwrap();
    client.evaluate_function(request("other-fn")).await.unwrap();
    let pods = wrapper_pids(runner.child.id());
    assert_eq!(pods.len(), 2);
    runner.signal(Signal::SIGTERM);
    let status = runner.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(status.code(), Some(0));
    for pid in pods {
        assert!(!process_alive(pid), "pod {pid} left behind");
    }
}

#[tokio::test]
async fn pods_never_outlive_a_killed_runner() {
    let fx = Fixture::new();
    let mut runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    client
        .evaluate_function(request("example-fn"))
        .await
        .unwrap();
    let pods = wrapper_pids(runner.child.id());
    assert_eq!(pods.len(), 1);
    // SIGKILL: no chance to clean up. The pod sees its stdin lifeline close.
    runner.signal(Signal::SIGKILL);
    runner.wait_exit(Duration::from_secs(10)).await.unwrap();
    let gone = eventually(Duration::from_secs(10), || {
        pods.iter().all(|&p| !process_alive(p))
    })
    .await;
    assert!(gone, "pods {pods:?} outlived the runner");
}

#[tokio::test]
async fn sigterm_drains_in_flight_calls_then_stops_pods() {
    let fx = Fixture::new();
    let gate = Gate::new().unwrap();
    write_script(
        &fx.dir.path().join("pods/slow-fn"),
        &gate.script("exec cat"),
    );
    let mut runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    let in_flight = tokio::spawn(async move { client.evaluate_function(request("slow-fn")).await });
    assert!(gate.wait_started().await);
    let pods = wrapper_pids(runner.child.id());
    runner.signal(Signal::SIGTERM);
    let endpoint = runner.endpoint();
    let not_serving = eventually_async(Duration::from_secs(10), async || {
        health_status(&endpoint, "").await.ok() == Some(2)
    })
    .await;
    assert!(not_serving, "runner health never turned NOT_SERVING");
    let err = runner
        .client()
        .await
        .unwrap()
        .evaluate_function(request("slow-fn"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    gate.open().unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), in_flight)
        .await
        .expect("the in-flight call never finished")
        .unwrap()
        .unwrap()
        .into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());
    let status = runner.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(status.code(), Some(0));
    for pid in pods {
        assert!(!process_alive(pid), "pod {pid} left behind");
    }
}

#[tokio::test]
async fn eval_image_runs_a_process_pod_like_eval_exec() {
    let fx = Fixture::new();
    let pkg = |name: &str| {
        let dir = fx.dir.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("app.yaml"),
            "# the app\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # inline\nspec:\n  replicas: 1\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n",
        )
        .unwrap();
        dir
    };
    let (by_image, by_exec) = (pkg("by-image"), pkg("by-exec"));
    let runner_bin = bin("function-runner");
    let eval = |cmd: &mut std::process::Command| {
        output_within(cmd, None, Duration::from_secs(60)).unwrap()
    };
    let out = eval(
        std::process::Command::new(&runner_bin)
            .args([
                "eval",
                by_image.to_str().unwrap(),
                "--image",
                "example.com/fns/example-fn:v1",
            ])
            .args(["--process-functions", &fx.pods(), "--", "owner=me"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("[RUNNING] \"example.com/fns/example-fn:v1\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("[PASS] \"example.com/fns/example-fn:v1\""),
        "{stderr}"
    );
    let out = eval(
        std::process::Command::new(&runner_bin)
            .args([
                "eval",
                by_exec.to_str().unwrap(),
                "--exec",
                bin("example-fn").to_str().unwrap(),
            ])
            .args(["--", "owner=me"]),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = std::fs::read_to_string(by_image.join("app.yaml")).unwrap();
    let b = std::fs::read_to_string(by_exec.join("app.yaml")).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("owner: me"), "{a}");

    // An image nobody serves: a clear error, exit 1.
    let out = eval(
        std::process::Command::new(&runner_bin)
            .args([
                "eval",
                by_image.to_str().unwrap(),
                "--image",
                "example.com/fns/nothing:v1",
            ])
            .args(["--process-functions", &fx.pods()]),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// #28: `eval -e` reaches an image function run as a local process: a
/// process pod's (through its wrapper, whose environment it inherits) and
/// a binaryExecutor's. `--mount`, `--network` and `--as-current-user` do
/// not apply there, and the run says so once.
#[tokio::test]
async fn eval_env_reaches_process_functions() {
    let fx = Fixture::new();
    let body = "echo \"A=${A-<unset>} B=${B-<unset>}\" >&2; exec cat";
    write_script(&fx.dir.path().join("pods/env-fn"), body);
    let script = fx.dir.path().join("env-bin");
    write_script(&script, body);
    let fns = fx.functions(&format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: env-bin\nspec:\n  image: example.com/fns/env-bin\n  binaryExecutor:\n    tags: [v1]\n    path: {}\n",
        script.display()
    ));
    let pkg = fx.dir.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    for image in ["example.com/fns/env-fn:v1", "example.com/fns/env-bin:v1"] {
        let out = output_within(
            std::process::Command::new(bin("function-runner"))
                .args(["eval", pkg.to_str().unwrap(), "--image", image])
                .args(["--process-functions", &fx.pods()])
                .args(["--functions", fns.to_str().unwrap()])
                .args(["-e", "A=1", "-e", "A=two words", "-e", "B="])
                .args(["--network", "--mount", "type=tmpfs,dst=/m"]),
            None,
            Duration::from_secs(60),
        )
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{image}: {stderr}");
        assert!(
            stderr.contains(" Stderr: A=two words B="),
            "{image}: {stderr}"
        );
        assert_eq!(
            stderr
                .matches("[USING] --mount and --network are for Docker containers: not applied")
                .count(),
            1,
            "{image}: {stderr}"
        );
    }
}

/// #11 item 1: unknown image names, however many, share one label value,
/// and clients that never read /metrics cannot pile up answers.
#[tokio::test]
async fn unknown_images_do_not_grow_the_metrics() {
    let fx = Fixture::new();
    let runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    client
        .evaluate_function(request("example.com/fns/example-fn:v1"))
        .await
        .unwrap();
    for i in 0..300 {
        let name = format!("example.com/unknown/{}-{i}:v1", "x".repeat(400));
        let err = client.evaluate_function(request(&name)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    }
    let text = fx.metrics().await;
    assert!(
        text.contains(
            "function_runner_evaluations_total{image=\"other\",outcome=\"NotFound\"} 300"
        ),
        "{text}"
    );
    assert!(
        text.contains("image=\"example.com/fns/example-fn:v1\""),
        "{text}"
    );
    assert!(!text.contains("unknown/"), "an unknown name became a label");
    assert!(text.len() < 64 * 1024, "{} bytes of metrics", text.len());
    // Clients that hold connections (here: say nothing): past a few, the
    // endpoint closes new ones at once, and answers again once they are
    // gone. (Its answers are small now; with the 10 s write timeout, what
    // clients that never read can hold is bounded.)
    use tokio::io::AsyncReadExt;
    let mut silent = Vec::new();
    for _ in 0..8 {
        let conn = tokio::net::TcpStream::connect(("127.0.0.1", fx.metrics_port))
            .await
            .unwrap();
        silent.push(conn);
    }
    let mut extra = tokio::net::TcpStream::connect(("127.0.0.1", fx.metrics_port))
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut buf))
        .await
        .expect("an extra connection is closed at once")
        .unwrap_or(0);
    assert_eq!(n, 0, "an extra connection was served");
    drop(silent);
    // The slots free up as the server notices the closed connections; until
    // then a new one is turned away (a reset), and that is retried.
    let served = e2e_tests::eventually_async(Duration::from_secs(10), async || {
        fx.try_metrics()
            .await
            .is_ok_and(|t| t.contains("function_runner_evaluations_total"))
    })
    .await;
    assert!(served);
}

/// #11 item 9: image names are checked (INVALID_ARGUMENT, quoted once and
/// cut), and nothing a name holds can forge a log line.
#[tokio::test]
async fn malformed_image_names_are_refused_and_never_logged_raw() {
    let fx = Fixture::new();
    let runner = fx.start(&[]);
    let mut client = runner.client().await.unwrap();
    let long = format!("example.com/fns/{}:v1", "x".repeat(64 * 1024));
    let err = client.evaluate_function(request(&long)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().len() < 1024, "{} bytes", err.message().len());
    let forged = "example.com/fns/x:v1\n\u{1b}[31mERROR forged line";
    let err = client.evaluate_function(request(forged)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(!err.message().contains('\u{1b}'), "{}", err.message());
    // A known name is quoted once in an error (the process backend's map has
    // no such function).
    let err = client
        .evaluate_function(request("example.com/fns/nothing-here:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(
        err.message().matches("nothing-here").count(),
        1,
        "{}",
        err.message()
    );
    let logs = runner.logs();
    assert!(!logs.contains('\u{1b}'), "raw ESC in the logs");
    assert!(
        !logs
            .lines()
            .any(|l| l.starts_with("\u{1b}")
                || l.contains("ERROR forged line") && !l.contains("\\n")),
        "{logs}"
    );
}

/// #11 item 14: what a new user stumbled on, said plainly.
#[tokio::test]
async fn start_up_and_usage_mistakes_are_said_plainly() {
    let run = |args: &[&str]| {
        let out = e2e_tests::output_within(
            std::process::Command::new(bin("function-runner")).args(args),
            None,
            Duration::from_secs(30),
        )
        .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // An error chain is said once.
    let err = run(&[
        "serve",
        "--process-functions",
        "/nonexistent.yaml",
        "--port",
        "0",
    ]);
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
    // --functions on a missing path says it is missing.
    let err = run(&["serve", "--functions", "/nonexistent", "--port", "0"]);
    assert!(err.contains("No such file or directory"), "{err}");
    // A function argument before `--`: where it goes.
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().to_str().unwrap();
    let err = run(&[
        "eval",
        pkg,
        "--image",
        "set-namespace:v0.4.1",
        "namespace=foo",
    ]);
    assert!(
        err.contains("tip: function arguments go after `--`"),
        "{err}"
    );
    // `eval --image` without a function map and without a Docker engine
    // says neither is there.
    let out = e2e_tests::output_within(
        std::process::Command::new(bin("function-runner"))
            .args(["eval", pkg, "--image", "example.com/fn/x:v1"])
            .env("DOCKER_HOST", format!("unix://{pkg}/no-engine.sock")),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no function map was given"), "{err}");
    assert!(
        err.contains("[USING] process (no Docker engine answers"),
        "{err}"
    );
    // The wrapper's entrypoint without `--`.
    let out = e2e_tests::output_within(
        std::process::Command::new(bin("wrapper-server")).arg("/bin/cat"),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("entrypoint goes after `--`"), "{err}");
}

/// #11 item 14: a FunctionConfig rejected at start is named when a call
/// finds no function; the start says what was loaded; one "pod ready" per
/// pod.
#[tokio::test]
async fn rejected_function_configs_are_named_and_pods_logged_once() {
    let fx = Fixture::new();
    let fns = fx.functions("apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: bad\n  namespace: porch-fn-system\nspec:\n  image: example.com/fns/meant:v1\n  podExecutor:\n    tags: [v1]\n    maxParallelExecutions: x\n");
    let runner = fx.start(&["--functions", fns.to_str().unwrap()]);
    let mut client = runner.client().await.unwrap();
    let err = client
        .evaluate_function(request("example.com/fns/meant:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    assert!(err.message().contains("configs.yaml"), "{}", err.message());
    assert!(
        err.message().contains("maxParallelExecutions"),
        "{}",
        err.message()
    );
    client
        .evaluate_function(request("example.com/fns/example-fn:v1"))
        .await
        .unwrap();
    // The runner's stderr is read by a thread of its own: the line logged
    // just before the answer may arrive a moment after it (this flaked).
    eventually(Duration::from_secs(10), || {
        runner.logs().contains("pod ready")
    })
    .await;
    let logs = runner.logs();
    assert!(
        logs.lines().any(|l| l.contains("FunctionConfigs read")
            && l.contains("loaded=0")
            && l.contains("rejected=1")),
        "{logs}"
    );
    assert_eq!(logs.matches("pod ready").count(), 1, "{logs}");
}

/// #13: FunctionConfig `prespawn`. A binaryExecutor's processes wait in
/// the runner (one fresh process per call), and a podExecutor's is passed
/// to its pod's wrapper as `--prespawn`.
#[tokio::test]
async fn function_config_prespawn_for_binaries_and_pods() {
    let fx = Fixture::new();
    let script = fx.dir.path().join("pid-fn");
    // Waiting, it is a `cat` (after its start-up line).
    write_script(&script, "echo pid=$$ >&2; exec cat");
    let fns = fx.functions(&format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: pid-fn\nspec:\n  image: example.com/fns/pid-fn\n  binaryExecutor:\n    tags: [v1]\n    path: {}\n    prespawn: 2\n---\napiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: example-fn\nspec:\n  image: example.com/fns/example-fn\n  podExecutor:\n    tags: [v1]\n    prespawn: 3\n",
        script.display()
    ));
    let runner = fx.start(&["--functions", fns.to_str().unwrap()]);
    let mut client = runner.client().await.unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        let resp = client
            .evaluate_function(request("example.com/fns/pid-fn:v1"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.resource_list, example_rl().as_bytes());
        let log = String::from_utf8(resp.log.to_vec()).unwrap();
        assert!(
            seen.insert(log.clone()),
            "one process served two calls: {log}"
        );
    }
    let pid = runner.child.id();
    let cat_children = || {
        children_of(pid)
            .into_iter()
            .filter(|(p, s)| {
                *s != 'Z'
                    && std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.starts_with("cat\0"))
            })
            .count()
    };
    assert!(
        eventually(Duration::from_secs(20), || cat_children() == 2).await,
        "two waiting: {:?}",
        children_of(pid)
    );
    // The pod's wrapper got `--prespawn 3`.
    client
        .evaluate_function(request("example.com/fns/example-fn:v1"))
        .await
        .unwrap();
    let wrapper_args = children_of(pid).into_iter().find_map(|(p, _)| {
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        args[0].ends_with("wrapper-server").then_some(args)
    });
    let args = wrapper_args.expect("a wrapper-server child");
    assert!(
        args.windows(2).any(|w| w == ["--prespawn", "3"]),
        "{args:?}"
    );
}

/// #13: `eval` calls its function once, so a binaryExecutor's `prespawn`
/// would only start processes to kill them: it starts the function once.
#[tokio::test]
async fn eval_starts_a_binary_executor_once_despite_prespawn() {
    let fx = Fixture::new();
    let starts = fx.dir.path().join("starts");
    let script = fx.dir.path().join("counted-fn");
    write_script(
        &script,
        // The pause keeps the call going while a pool, if any, fills.
        &format!(
            "echo started >> '{}'; sleep 0.3; exec cat",
            starts.display()
        ),
    );
    let fns = fx.functions(&format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: counted-fn\nspec:\n  image: example.com/fns/counted-fn\n  binaryExecutor:\n    tags: [v1]\n    path: {}\n    prespawn: 3\n",
        script.display()
    ));
    let pkg = fx.dir.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    let out = output_within(
        std::process::Command::new(bin("function-runner")).args([
            "eval",
            pkg.to_str().unwrap(),
            "--image",
            "example.com/fns/counted-fn:v1",
            "--functions",
            fns.to_str().unwrap(),
        ]),
        None,
        Duration::from_secs(60),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("[PASS]"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&starts).unwrap(),
        "started\n",
        "{stderr}"
    );
}

/// #23: a catalog image runs built in: no pod is started for it, it answers
/// as the catalog's container would, and the metrics count it as built-in;
/// a FunctionConfig that gives the image a pod keeps the pod, and
/// `--no-default-builtins` turns the default off.
#[tokio::test]
async fn the_catalogs_functions_run_built_in() {
    let fx = Fixture::new();
    // example-fn stands in for a pod of the catalog's set-labels:v0.2.
    std::fs::copy(bin("example-fn"), fx.dir.path().join("pods/set-labels")).unwrap();
    let functions = fx.functions(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: labels\nspec:\n  image: gcr.io/kpt-fn/set-labels\n  podExecutor:\n    tags: [v0.2]\n",
    );
    let runner = fx.start(&[
        "--functions",
        functions.to_str().unwrap(),
        "--warm-up-pod-cache=false",
    ]);
    let mut client = runner.client().await.unwrap();
    let mut req = request("gcr.io/kpt-fn/set-namespace:v0.4.1");
    req.resource_list = example_rl()
        .replace("    owner: team-shop\n", "    namespace: prod\n")
        .into();
    let resp = client.evaluate_function(req).await.unwrap().into_inner();
    let out = String::from_utf8_lossy(&resp.resource_list);
    assert!(
        out.contains("    namespace: prod\n") && !out.contains("namespace: shop"),
        "{out}"
    );
    assert!(out.contains("\nresults:\n"), "{out}");
    assert!(
        wrapper_pids(runner.child.id()).is_empty(),
        "a pod was started for a built-in"
    );
    // A config the function refuses is the function's error.
    let err = client
        .evaluate_function(request(
            "ghcr.io/kptdev/krm-functions-catalog/apply-replacements:v0.1.2",
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    // The podExecutor tag is a pod.
    let resp = client
        .evaluate_function(request("gcr.io/kpt-fn/set-labels:v0.2"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(&resp.log[..], b"example-fn: processed ResourceList\n");
    assert_eq!(wrapper_pids(runner.child.id()).len(), 1);
    // A tag the built-in does not reproduce (a moving one here) is a pod
    // of the image too, with no FunctionConfig; a release it reproduces
    // stays built in.
    std::fs::copy(bin("example-fn"), fx.dir.path().join("pods/set-namespace")).unwrap();
    let resp = client
        .evaluate_function(request("gcr.io/kpt-fn/set-namespace:v0.4"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(&resp.log[..], b"example-fn: processed ResourceList\n");
    assert_eq!(wrapper_pids(runner.child.id()).len(), 2);
    let resp = client
        .evaluate_function(request("gcr.io/kpt-fn/set-namespace:v0.4.2"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(&resp.log[..], b"example-fn: processed ResourceList\n");
    assert_eq!(wrapper_pids(runner.child.id()).len(), 2);
    let metrics = fx.metrics().await;
    for line in [
        "function_runner_builtin_evaluations_total{function=\"set-namespace\",outcome=\"Ok\"} 2",
        "function_runner_builtin_evaluations_total{function=\"apply-replacements\",outcome=\"Internal\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
    drop(client);
    drop(runner);

    let fx = Fixture::new();
    let runner = fx.start(&["--no-default-builtins"]);
    let mut client = runner.client().await.unwrap();
    let err = client
        .evaluate_function(request("gcr.io/kpt-fn/set-namespace:v0.4.1"))
        .await
        .unwrap_err();
    // No process function of that name: the process backend's NOT_FOUND.
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
}

/// #30 item 2: a caller naming one function under many prefixes gets one
/// process pod (pods are keyed by what they run), and `--max-pods` bounds
/// the pods of all functions: past it the least recently used idle one
/// goes, and with every pod busy a call gets RESOURCE_EXHAUSTED naming the
/// flag.
#[tokio::test]
async fn one_function_under_many_names_is_one_pod_and_max_pods_bounds_them_all() {
    let fx = Fixture::new();
    let pods = fx.dir.path().join("pods");
    // Slow functions hold their pod busy while the next call comes.
    for name in ["slow-a", "slow-b", "slow-c"] {
        write_script(&pods.join(name), "sleep 3; cat");
    }
    let runner = fx.start(&["--max-pods", "2"]);
    let mut client = runner.client().await.unwrap();
    for n in 1..=30 {
        client
            .evaluate_function(request(&format!("r{n}.example.com/fns/example-fn:v1")))
            .await
            .unwrap();
    }
    assert_eq!(
        wrapper_pids(runner.child.id()).len(),
        1,
        "one pod for one function under 30 names"
    );

    // At the limit: example-fn's idle pod makes room for slow-a; then
    // slow-a and slow-b busy, slow-c finds no room.
    let busy = |image: &'static str| {
        let mut client = client.clone();
        tokio::spawn(async move { client.evaluate_function(request(image)).await })
    };
    let a = busy("slow-a:v1");
    let b = busy("slow-b:v1");
    // The second of them to arrive made room.
    let made_room = eventually(Duration::from_secs(10), || {
        runner.logs().contains("to make room (--max-pods)")
    })
    .await;
    assert!(made_room, "{}", runner.logs());
    let mut refused = None;
    let full = eventually_async(Duration::from_secs(20), async || {
        refused = client.evaluate_function(request("slow-c:v1")).await.err();
        refused
            .as_ref()
            .is_some_and(|s| s.code() == tonic::Code::ResourceExhausted)
    })
    .await;
    assert!(full, "{refused:?}\n{}", runner.logs());
    assert!(
        refused.unwrap().message().contains("--max-pods"),
        "the flag is named"
    );
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
    assert_eq!(
        wrapper_pids(runner.child.id()).len(),
        2,
        "never more than --max-pods"
    );
    // Idle again: the next function takes the least recently used one's place.
    client
        .evaluate_function(request("slow-c:v1"))
        .await
        .unwrap();
    let two = eventually(Duration::from_secs(10), || {
        wrapper_pids(runner.child.id()).len() == 2
    })
    .await;
    assert!(two, "{:?}", wrapper_pids(runner.child.id()));
}

/// The value of the metric line starting with `series` (name and labels,
/// or the name alone for a series without labels).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find(|line| line.starts_with(series))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// `state-fn` ([`e2e_tests::stateful::PROCESS_SCRIPT`]) in the fixture's pods, and a FunctionConfig
/// directory for it whose podExecutor has `executor` (YAML lines indented
/// by four) besides its tag.
fn stateful(fx: &Fixture, executor: &str) -> std::path::PathBuf {
    let state = fx.dir.path().join("state");
    write_script(
        &fx.dir.path().join("pods/state-fn"),
        &format!(
            "STATE={}\n{}",
            state.display(),
            e2e_tests::stateful::PROCESS_SCRIPT
        ),
    );
    fx.functions(&format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: state-fn\nspec:\n  image: example.com/fns/state-fn\n  podExecutor:\n    tags: [v1]\n{executor}"
    ))
}

/// #25: a single-use function with an idle pool: two pods wait before any
/// call; every call, sequential or in a burst past the pool, gets a fresh
/// pod no other call had; used pods are stopped and the pool refilled; the
/// metrics count the claims and show the pool.
#[tokio::test]
async fn single_use_calls_claim_fresh_pods_from_an_idle_pool() {
    let fx = Fixture::new();
    let fns = stateful(&fx, "    idlePods: 2\n    singleUse: true\n");
    let runner = fx.start(&["--functions", fns.to_str().unwrap()]);
    let pid = runner.child.id();
    // The pool fills before any call.
    let two = eventually(Duration::from_secs(20), || wrapper_pids(pid).len() == 2).await;
    assert!(two, "{:?}\n{}", wrapper_pids(pid), runner.logs());
    let mut client = runner.client().await.unwrap();
    let mut pods = std::collections::HashSet::new();
    let mut seen = |log: &[u8]| {
        let log = String::from_utf8_lossy(log).into_owned();
        assert!(log.contains(" fresh"), "a used pod served a call: {log}");
        assert!(pods.insert(log.clone()), "a pod served two calls: {log}");
    };
    for _ in 0..4 {
        let resp = client
            .evaluate_function(request("example.com/fns/state-fn:v1"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.resource_list, example_rl().as_bytes());
        seen(&resp.log);
    }
    // A burst of three times the pool: the pool's two at once, the others
    // as their pods become ready.
    let burst: Vec<_> = (0..6)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move {
                client
                    .evaluate_function(request("example.com/fns/state-fn:v1"))
                    .await
            })
        })
        .collect();
    for call in burst {
        seen(&call.await.unwrap().unwrap().into_inner().log);
    }
    // Used pods go; the pool is two again.
    let refilled = eventually(Duration::from_secs(20), || wrapper_pids(pid).len() == 2).await;
    assert!(refilled, "{:?}", wrapper_pids(pid));
    let text = fx.metrics().await;
    assert_eq!(
        metric(&text, "function_runner_pool_claims_total{"),
        Some(10.0),
        "{text}"
    );
    assert_eq!(metric(&text, "function_runner_pool_size{"), Some(2.0));
    assert_eq!(
        metric(
            &text,
            "function_runner_pod_stops_total{reason=\"single_use\"}"
        ),
        Some(10.0),
        "{text}"
    );
    let misses = metric(&text, "function_runner_pool_misses_total{").unwrap_or(0.0);
    assert!(misses >= 4.0, "the burst emptied the pool: {text}");
    assert!(
        metric(
            &text,
            "function_runner_pool_replacement_duration_seconds_count"
        )
        .unwrap()
            >= 10.0,
        "{text}"
    );
}

/// #25: a multi-use function with an idle pool: its first call is served by
/// the pool's pod at once (no miss), later calls reuse that pod as any
/// cached pod, and the pool is refilled behind it.
#[tokio::test]
async fn a_pooled_multi_use_function_claims_once_then_reuses_its_pod() {
    let fx = Fixture::new();
    let fns = stateful(&fx, "    idlePods: 1\n");
    let runner = fx.start(&["--functions", fns.to_str().unwrap(), "--warm-up-pod-cache"]);
    let pid = runner.child.id();
    let ready = eventually_async(Duration::from_secs(20), async || {
        let text = fx.metrics().await;
        metric(&text, "function_runner_pool_idle_pods{") == Some(1.0)
    })
    .await;
    assert!(ready, "{}", runner.logs());
    assert_eq!(
        wrapper_pids(pid).len(),
        1,
        "warming starts no pod of its own"
    );
    let mut client = runner.client().await.unwrap();
    let mut logs = Vec::new();
    for _ in 0..3 {
        let resp = client
            .evaluate_function(request("example.com/fns/state-fn:v1"))
            .await
            .unwrap()
            .into_inner();
        logs.push(String::from_utf8_lossy(&resp.log).into_owned());
    }
    assert!(logs[0].contains(" fresh"), "{logs:?}");
    assert!(
        logs[1].contains(" used") && logs[2].contains(" used"),
        "{logs:?}"
    );
    let pod = |log: &str| log.split_whitespace().next().map(str::to_string);
    assert_eq!(pod(&logs[0]), pod(&logs[2]), "one pod serves them all");
    let text = fx.metrics().await;
    assert_eq!(
        metric(&text, "function_runner_pool_claims_total{"),
        Some(1.0)
    );
    assert_eq!(
        metric(&text, "function_runner_pool_misses_total{").unwrap_or(0.0),
        0.0
    );
    let two = eventually(Duration::from_secs(20), || wrapper_pids(pid).len() == 2).await;
    assert!(two, "the claimed pod and the pool's new one");
}

/// #44: Porch's command line as its Deployment writes it (the program named
/// `server`, flags with no command, Go's one-dash flags), outside a cluster:
/// the process backend serves; `--functions` is Porch's folder of binaries,
/// and a binaryExecutor whose binary is not in it runs built-in where the
/// image has a built-in, else in a pod, said once per binary.
#[tokio::test]
async fn porchs_command_line_serves_and_missing_binaries_fall_back() {
    let fx = Fixture::new();
    let functions = fx.functions(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: set-namespace\nspec:\n  image: set-namespace\n  prefixes: [\"\", ghcr.io/kptdev/krm-functions-catalog]\n  binaryExecutor:\n    tags: [v0.4.2]\n    path: set-namespace\n---\napiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: example-fn\nspec:\n  image: example.com/fns/example-fn\n  binaryExecutor:\n    tags: [v1]\n    path: example-fn\n",
    );
    let server = fx.dir.path().join("server");
    std::os::unix::fs::symlink(bin("function-runner"), &server).unwrap();
    let mut cmd = std::process::Command::new(&server);
    cmd.env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args([
            "--pod-namespace=porch-fn-system",
            "--max-request-body-size=6291456",
            "--max-parallel-pods-per-function=2",
            "--max-waitlist-length=1",
            "--warm-up-pod-cache=true",
            "-log-level",
            "2",
            "-port",
            "0",
            "-host",
            "127.0.0.1",
        ])
        .arg(format!("--functions={}", functions.display()))
        .args(["--process-functions", &fx.pods()])
        .args(["--metrics-port", "0"]);
    let runner = Wrapper::spawn(cmd, "function-runner serving").unwrap();
    assert!(
        runner.logs().contains("backend=Process"),
        "{}",
        runner.logs()
    );
    let mut client = runner.client().await.unwrap();
    for _ in 0..2 {
        // The catalog's image, its binary missing: built in.
        let mut req = request("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2");
        req.resource_list = example_rl()
            .replace("    owner: team-shop\n", "    namespace: prod\n")
            .into();
        let resp = client.evaluate_function(req).await.unwrap().into_inner();
        let out = String::from_utf8_lossy(&resp.resource_list);
        assert!(out.contains("    namespace: prod\n"), "{out}");
        // Not the catalog's, its binary missing: its pod.
        let resp = client
            .evaluate_function(request("example.com/fns/example-fn:v1"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(&resp.log[..], b"example-fn: processed ResourceList\n");
    }
    assert_eq!(wrapper_pids(runner.child.id()).len(), 1);
    let logs = runner.logs();
    assert_eq!(
        logs.matches("binaryExecutor: the binary does not exist")
            .count(),
        2,
        "once per binary: {logs}"
    );
    drop(client);
    drop(runner);

    // Flags first, no command: Porch's command line too; `-disable-runtimes
    // pod` (Porch's local-dev form) starts no pod, built-ins still answer.
    let mut cmd = std::process::Command::new(bin("function-runner"));
    cmd.env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args([
            "-disable-runtimes",
            "pod",
            "-port",
            "0",
            "-host",
            "127.0.0.1",
        ])
        .arg(format!("--functions={}", functions.display()))
        .args(["--process-functions", &fx.pods(), "--metrics-port", "0"]);
    let runner = Wrapper::spawn(cmd, "function-runner serving").unwrap();
    let mut client = runner.client().await.unwrap();
    let err = client
        .evaluate_function(request("example.com/fns/example-fn:v1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    client
        .evaluate_function(request(
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2",
        ))
        .await
        .unwrap();
    assert!(wrapper_pids(runner.child.id()).is_empty());
}
