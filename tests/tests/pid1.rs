//! wrapper-server really running as PID 1 of a PID namespace
//! (`unshare --pid --fork --mount-proc`, util-linux, needs root): orphans
//! are reaped without stealing exit statuses, SIGTERM drains, a second
//! SIGTERM exits at once.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use e2e_tests::{
    bin, children_of, eventually, eventually_async, health_status, prerequisite, process_alive,
    require_command, require_root, resource_list, Gate, Wrapper,
};
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;
use tonic::Code;

/// Starts the wrapper as PID 1 of a new PID namespace; `None` (see
/// [`prerequisite`]) where this machine does not allow it.
fn start_as_pid1(script: &str) -> Option<(Wrapper, i32)> {
    prerequisite(require_root().and_then(|()| require_command("unshare", &["--version"])))?;
    let mut cmd = Command::new("unshare");
    // `--kill-child`: when `unshare` dies (the `Wrapper` kills it on drop),
    // the wrapper, PID 1 of the namespace, is SIGKILLed, which kills
    // everything in the namespace. Killing `unshare` alone would leave the
    // wrapper running, re-parented and still listening.
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(bin("wrapper-server"))
        .args(["--host", "127.0.0.1", "--port", "0"]);
    let w = Wrapper::start_command(cmd, &[], &["/bin/sh", "-c", script]).unwrap();
    // The wrapper's pid as seen from here: the only child of `unshare`.
    let kids = children_of(w.child.id());
    assert_eq!(kids.len(), 1, "unshare should have one child: {kids:?}");
    let host_pid = kids[0].0;
    let ns_pid = std::fs::read_to_string(format!("/proc/{host_pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .unwrap();
    assert_eq!(ns_pid, "1", "wrapper-server must be PID 1 in its namespace");
    Some((w, host_pid))
}

fn request(rl: &str) -> EvaluateFunctionRequest {
    EvaluateFunctionRequest {
        resource_list: rl.to_string().into(),
        image: "example.com/fn/pid1:v1".into(),
        tag: String::new(),
    }
}

#[tokio::test]
async fn orphans_are_reaped_and_exit_statuses_are_not_stolen() {
    // Each call leaves background processes behind (killed with the group,
    // then re-parented to PID 1 as zombies), and exits with the code given
    // on its first input line.
    let script = "read code; (sleep 30 &); (sleep 30 &) ; sh -c 'sleep 30' & cat >/dev/null; \
                  echo 'apiVersion: config.kubernetes.io/v1'; echo 'kind: ResourceList'; echo 'items: []'; exit $code";
    let Some((w, host_pid)) = start_as_pid1(script) else {
        return;
    };
    let mut calls = Vec::new();
    for i in 0..24 {
        let mut client = w.client().await.unwrap();
        let code = i % 3; // 0, 1, 2
        calls.push(tokio::spawn(async move {
            let res = client
                .evaluate_function(request(&format!("{code}\n")))
                .await;
            (code, res)
        }));
    }
    for call in calls {
        let (code, res) = call.await.unwrap();
        match (code, res) {
            (0, Ok(_)) => {}
            (code, Err(status)) if code != 0 => {
                assert_eq!(status.code(), Code::Internal);
                assert!(
                    status.message().contains(&format!("exit code {code}")),
                    "exit status lost or stolen: {}",
                    status.message()
                );
            }
            (code, res) => panic!("call with exit code {code} answered {res:?}"),
        }
    }
    // No zombie is left under PID 1, and no function process survives.
    assert!(
        eventually(Duration::from_secs(10), || children_of(host_pid as u32)
            .is_empty())
        .await,
        "left behind under PID 1: {:?}",
        children_of(host_pid as u32)
    );
}

#[tokio::test]
async fn sigterm_drains_then_exits_zero() {
    let gate = Gate::new().unwrap();
    let script = gate.script("cat");
    let Some((mut w, host_pid)) = start_as_pid1(&script) else {
        return;
    };
    let mut client = w.client().await.unwrap();
    let rl = resource_list(3);
    let r = rl.clone();
    let in_flight = tokio::spawn(async move { client.evaluate_function(request(&r)).await });
    assert!(gate.wait_started().await);

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(host_pid), Signal::SIGTERM).unwrap();
    // Health turns NOT_SERVING (2) for both names, on new connections too.
    let endpoint = w.endpoint();
    let drained_health = eventually_async(Duration::from_secs(10), async || {
        let a = health_status(&endpoint, "").await.ok();
        let b = health_status(&endpoint, "evaluator.FunctionEvaluator")
            .await
            .ok();
        a == Some(2) && b == Some(2)
    })
    .await;
    assert!(drained_health, "health never turned NOT_SERVING");
    // New calls are refused while the old one runs.
    let mut late = w.client().await.unwrap();
    let err = late.evaluate_function(request(&rl)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(!in_flight.is_finished());

    // The in-flight call finishes with its answer, then the server exits 0.
    gate.open().unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), in_flight)
        .await
        .expect("the in-flight call never finished")
        .unwrap()
        .unwrap();
    assert_eq!(&resp.into_inner().resource_list[..], rl.as_bytes());
    let status = w.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(status.code(), Some(0), "graceful drain must exit 0");
}

#[tokio::test]
async fn second_sigterm_exits_at_once_and_kills_functions() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!("echo $$ >> {p}; sleep 3600", p = pids.display());
    let Some((mut w, host_pid)) = start_as_pid1(&script) else {
        return;
    };
    let mut client = w.client().await.unwrap();
    let _call = tokio::spawn(async move { client.evaluate_function(request("x")).await });
    let mut fn_pid = None;
    assert!(
        eventually(Duration::from_secs(20), || {
            fn_pid = std::fs::read_to_string(&pids)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            fn_pid.is_some()
        })
        .await
    );
    let pid = nix::unistd::Pid::from_raw(host_pid);
    nix::sys::signal::kill(pid, Signal::SIGTERM).unwrap();
    // Wait until the drain began, then the second signal.
    assert!(eventually(Duration::from_secs(10), || w.logs().contains("draining")).await);
    nix::sys::signal::kill(pid, Signal::SIGTERM).unwrap();
    let status = w.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(status.code(), Some(143));
    // The function ran in the namespace; its pid there is not ours, so check
    // that nothing is left in the namespace at all.
    assert!(!process_alive(host_pid));
}
