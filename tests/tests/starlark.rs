//! #26: the built-in `starlark` function through the real binaries: its
//! programs run in the sandbox process (`function-runner
//! __starlark-sandbox`), and hostile ones (a loop, an allocation, endless
//! recursion, the network) fail alone while the runner goes on serving,
//! leaving no process behind and its memory where it was.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e_tests::{
    bin, children_of, eventually, example_request, output_within, process_alive, vm_rss_kib,
    Wrapper,
};
use proto::pb::EvaluateFunctionRequest;
use tonic::Code;

const IMAGE: &str = "gcr.io/kpt-fn/starlark:v0.5.1";

/// A ResourceList of two Deployments and a StarlarkRun with `program`.
fn resource_list(program: &str) -> String {
    let body: String = program.lines().map(|l| format!("      {l}\n")).collect();
    let deployment = |name: &str| {
        format!("  - apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: {name} # keep me\n    spec:\n      replicas: 1\n")
    };
    format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n{}{}functionConfig:\n  apiVersion: fn.kpt.dev/v1alpha1\n  kind: StarlarkRun\n  metadata:\n    name: prog\n  source: |\n{body}",
        deployment("a"),
        deployment("b")
    )
}

fn request(program: &str) -> EvaluateFunctionRequest {
    let mut req = example_request(IMAGE);
    req.resource_list = resource_list(program).into();
    req
}

const LABEL_A: &str = "for r in ctx.resource_list[\"items\"]:\n  if r[\"metadata\"][\"name\"] == \"a\":\n    r[\"metadata\"][\"labels\"] = {\"app\": \"a\"}";

/// The sandbox processes the runner has now.
fn sandboxes(runner: u32) -> usize {
    children_of(runner)
        .into_iter()
        .filter(|(pid, state)| {
            *state != 'Z'
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__starlark-sandbox"))
        })
        .count()
}

#[tokio::test]
async fn hostile_programs_fail_alone_and_the_runner_goes_on_serving() {
    let runner = Wrapper::start_runner(&["--starlark-memory-limit", "64Mi"]).unwrap();
    let pid = runner.child.id();
    let mut client = runner.client().await.unwrap();

    // An ordinary program: only what it touched changed.
    let resp = client
        .evaluate_function(request(LABEL_A))
        .await
        .unwrap()
        .into_inner();
    let out = String::from_utf8_lossy(&resp.resource_list);
    assert!(out.contains("    labels:\n      app: a\n"), "{out}");
    assert!(out.contains("name: b # keep me"), "{out}");
    let before = vm_rss_kib(pid).unwrap();

    // A loop without end, stopped at its deadline; another call is served
    // meanwhile.
    let mut looping = client.clone();
    let forever = tokio::spawn(async move {
        let mut req = tonic::Request::new(request("while True:\n  pass"));
        req.set_timeout(Duration::from_secs(3));
        let started = Instant::now();
        (looping.evaluate_function(req).await, started.elapsed())
    });
    assert!(eventually(Duration::from_secs(10), || sandboxes(pid) == 1).await);
    let served = Instant::now();
    client.evaluate_function(request(LABEL_A)).await.unwrap();
    assert!(
        served.elapsed() < Duration::from_secs(2),
        "{:?}",
        served.elapsed()
    );
    let (answer, took) = forever.await.unwrap();
    let err = answer.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The sandbox was killed, not left running.
    assert!(eventually(Duration::from_secs(5), || sandboxes(pid) == 0).await);

    // Memory without bound, recursion without end, the network: each an
    // error naming what stopped it, a few times over.
    for _ in 0..3 {
        for (program, said) in [
            (
                "x = \"x\" * 1000000\ny = x * 2000",
                "over its memory budget of 64 MiB (--starlark-memory-limit 64Mi)",
            ),
            (
                "l = []\nfor i in range(100000000):\n  l.append([i])",
                "over its memory budget of 64 MiB",
            ),
            (
                "def f(n):\n  return f(n + 1)\nf(0)",
                "calls nest deeper than",
            ),
            (
                "load(\"http.star\", \"http\")\nhttp.get(\"http://127.0.0.1:1/\")",
                "no network",
            ),
            ("fail(\"stop here\")", "fail: stop here"),
            // More than a call may answer is not read into the runner.
            (
                "ctx.resource_list[\"items\"][0][\"metadata\"][\"x\"] = \"y\" * 8000000",
                "output is over 6291456 bytes",
            ),
        ] {
            let err = client
                .evaluate_function(request(program))
                .await
                .unwrap_err();
            assert!(
                err.message().contains(said),
                "{program}: {:?} {}",
                err.code(),
                err.message()
            );
        }
    }
    assert!(eventually(Duration::from_secs(5), || sandboxes(pid) == 0).await);
    client.evaluate_function(request(LABEL_A)).await.unwrap();
    // The programs' memory was the sandboxes'; the runner's is where it was.
    let after = vm_rss_kib(pid).unwrap();
    assert!(
        after < before + 5 * 1024,
        "the runner grew from {before} KiB to {after} KiB"
    );
}

/// `function-runner eval DIR ARGS...`: its exit code and stderr.
fn eval(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = output_within(
        std::process::Command::new(bin("function-runner"))
            .arg("eval")
            .arg(dir)
            .args(args),
        None,
        Duration::from_secs(60),
    )
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn eval_names_the_budget_and_leaves_the_package_alone() {
    let dir = tempfile::tempdir().unwrap();
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm # mine\ndata:\n  a: '1'\n";
    let path = dir.path().join("app.yaml");
    std::fs::write(&path, app).unwrap();
    let (code, stderr) = eval(
        dir.path(),
        &[
            "--image",
            "starlark:v0.5.2",
            "--starlark-memory-limit",
            "32Mi",
            "--",
            "source=x = [1] * 1000000000",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("[error]: function-input: the program went over its memory budget of 32 MiB (--starlark-memory-limit 32Mi)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), app);

    // The same package with a program that fits, and a bad size.
    let (code, stderr) = eval(
        dir.path(),
        &[
            "--image",
            "gcr.io/kpt-fn/starlark:v0.5.2",
            "--",
            "source=for r in ctx.resource_list['items']:\n  r['data']['b'] = '2'",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        // Written anew, as kpt writes a function's changed resource.
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm # mine\ndata:\n  a: \"1\"\n  b: \"2\"\n"
    );
    let (code, stderr) = eval(
        dir.path(),
        &["--image", "starlark", "--starlark-memory-limit", "lots"],
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("\"lots\" is not a size"), "{stderr}");
}

/// An `eval` that is killed (or stopped by Ctrl-C: the sandbox has a
/// process group of its own, which the terminal's signal misses) takes
/// its sandbox with it: `eval` has no deadline, and a loop would run on.
#[tokio::test]
async fn a_sandbox_goes_with_the_eval_that_started_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("app.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    let mut eval = std::process::Command::new(bin("function-runner"))
        .arg("eval")
        .arg(dir.path())
        .args([
            "--image",
            "starlark:v0.5.2",
            "--",
            "source=while True:\n  pass",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = eval.id();
    let sandbox = || {
        children_of(pid).into_iter().find(|(p, _)| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__starlark-sandbox"))
        })
    };
    assert!(eventually(Duration::from_secs(10), || sandbox().is_some()).await);
    let (child, _) = sandbox().unwrap();
    eval.kill().unwrap();
    eval.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(5), || !process_alive(child)).await,
        "the sandbox {child} outlived its eval"
    );
}
