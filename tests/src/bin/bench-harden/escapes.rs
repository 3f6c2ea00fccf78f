//! Item 7: escaping processes.
//!
//! (a) a wrapper started as a pod (`--exit-with-stdin`, its stdin held), 6
//! calls whose function detaches a `sleep`, SIGKILL after 1 s: the calls'
//! processes alive 3 s later; (b) a detached child keeping stdout open:
//! processes left after each of 5 calls. Processes are found by a unique
//! `sleep 30.NNNNNNNN` argument and killed afterwards.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::grpc::{call, connect, request, small_rl};
use super::http2::AbortOnDrop;
use super::procs::{alive, kill_marked, marked, marker, pods_of, secs, track};
use super::{Bins, Report, IMAGE_CAT};

pub(super) async fn item7(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    // (a) the pod's wrapper SIGKILLed with calls running
    let m = marker(b, 1);
    let script = format!("setsid sleep {m} & sleep {m}");
    let mut w = b.start_pod_wrapper(rep, &["/bin/sh", "-c", &script])?;
    let wpid = w.pid();
    let client = connect(&w.endpoint()).await?;
    let mut calls = Vec::new();
    for _ in 0..6 {
        let mut client = client.clone();
        calls.push(AbortOnDrop(tokio::spawn(async move {
            let _ = call(
                &mut client,
                request(&small_rl(), IMAGE_CAT),
                Duration::from_secs(60),
            )
            .await;
        })));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = marked(&m, &[wpid]);
    for p in &running {
        track(*p);
    }
    w.signal(Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    while w.exited().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = marked(&m, &[wpid]);
    rep.row(
        "(a) 6 calls, wrapper SIGKILLed after 1 s: the calls' processes alive before the kill → 3 s after",
        format!("{} → {}", running.len(), left.len()),
    );
    drop(calls);
    drop(w);
    let killed = kill_marked(&m, &[]);
    rep.row(
        "(a) survivors killed by the bench at the end",
        killed.to_string(),
    );

    // (c) the same through the runner (process backend): its pod's wrapper
    // SIGKILLed with calls running. Only the processes alive before the kill
    // are counted (the runner retries the calls on a new pod).
    let m = marker(b, 3);
    let fns = tempfile::tempdir()?;
    let path = fns.path().join("daemon-fn");
    std::fs::write(&path, format!("#!/bin/sh\nsetsid sleep {m} &\nsleep {m}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    let runner = b.start_runner(rep, fns.path())?;
    let client = connect(&runner.endpoint()).await?;
    let mut calls = Vec::new();
    for _ in 0..6 {
        let mut client = client.clone();
        calls.push(AbortOnDrop(tokio::spawn(async move {
            let _ = call(
                &mut client,
                request(&small_rl(), "example.com/fns/daemon-fn:v1"),
                Duration::from_secs(60),
            )
            .await;
        })));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = pods_of(runner.pid());
    let running = marked(&m, &pods);
    for p in &running {
        track(*p);
    }
    for pod in &pods {
        let _ = kill(Pid::from_raw(*pod), Signal::SIGKILL);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = running.iter().filter(|p| alive(**p)).count();
    rep.row(
        "(c) through the runner: 6 calls on its pod, the pod's wrapper SIGKILLed: the calls' processes alive before the kill → 3 s after",
        format!("{} → {}", running.len(), left),
    );
    drop(calls);
    drop(runner);
    kill_marked(&m, &[]);

    // (b) a detached child that keeps stdout open
    let m = marker(b, 2);
    let script = format!("setsid sh -c \"sleep {m}\" & cat");
    let w = b.start_wrapper(rep, &[], &["/bin/sh", "-c", &script])?;
    let wpid = w.pid();
    let mut client = connect(&w.endpoint()).await?;
    let mut outcomes = Vec::new();
    let mut counts = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let res = call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(10),
        )
        .await;
        outcomes.push(format!(
            "{} {}",
            match res {
                Ok(_) => "OK".to_string(),
                Err(f) => f.code,
            },
            secs(t.elapsed())
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let left = marked(&m, &[wpid]);
        for p in &left {
            track(*p);
        }
        counts.push(left.len().to_string());
    }
    rep.row("(b) 5 sequential calls: answers", outcomes.join(", "));
    rep.row(
        "(b) processes left 1 s after each call (cumulative)",
        counts.join(", "),
    );
    drop(w);
    kill_marked(&m, &[]);
    Ok(())
}
