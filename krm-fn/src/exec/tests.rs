//! Calls end to end: input and output round trips, limits, exit statuses,
//! and the process group's and its escaped descendants' end.

use super::*;
use e2e_tests::eventually;

fn sh(script: &str) -> ExecSpec {
    ExecSpec::from_argv(["/bin/sh", "-c", script]).unwrap()
}

fn limits() -> Limits {
    Limits::new(1024 * 1024)
}

#[tokio::test]
async fn cat_round_trips_input() {
    let input = Bytes::from_static(b"apiVersion: v1\nkind: ResourceList\n");
    let out = run(
        &ExecSpec::from_argv(["cat"]).unwrap(),
        input.clone(),
        &limits(),
    )
    .await
    .unwrap();
    assert_eq!(out.status, ExitStatus::Code(0));
    assert_eq!(out.stdout, input);
    assert!(out.stderr.is_empty());
}

#[tokio::test]
async fn exit_code_and_stderr_are_reported() {
    let out = run(&sh("echo oops >&2; exit 3"), Bytes::new(), &limits())
        .await
        .unwrap();
    assert_eq!(out.status, ExitStatus::Code(3));
    assert_eq!(&out.stderr[..], b"oops\n");
}

#[tokio::test]
async fn large_input_and_output_do_not_deadlock() {
    // 4 MiB through cat: both pipes fill up many times over.
    let input = Bytes::from(vec![b'x'; 4 * 1024 * 1024]);
    let out = run(
        &ExecSpec::from_argv(["cat"]).unwrap(),
        input.clone(),
        &Limits::new(8 << 20),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout.len(), input.len());
    assert_eq!(out.stdout, input);
}

#[tokio::test]
async fn function_that_never_reads_stdin_answers() {
    let input = Bytes::from(vec![b'x'; 4 * 1024 * 1024]);
    let out = run(&sh("echo done"), input, &limits()).await.unwrap();
    assert_eq!(&out.stdout[..], b"done\n");
    assert!(out.status.success());
}

#[tokio::test]
async fn output_over_limit_is_an_error() {
    let spec = sh("head -c 3000000 /dev/zero");
    let err = run(&spec, Bytes::new(), &Limits::new(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ExecError::OutputTooLarge { limit: 1000 }),
        "{err}"
    );
}

#[tokio::test]
async fn stderr_over_limit_keeps_its_head_and_its_tail() {
    // 10 MB of filler between the first line and the last words.
    let spec = sh(
        "echo FIRST >&2; head -c 10000000 /dev/zero | tr '\\0' e >&2; \
         echo >&2; echo 'REAL ERROR: x' >&2; echo ok",
    );
    let out = run(&spec, Bytes::new(), &Limits::new(1000)).await.unwrap();
    assert!(out.stderr_truncated);
    assert_eq!(&out.stdout[..], b"ok\n");
    let text = String::from_utf8(out.stderr.to_vec()).unwrap();
    assert!(text.starts_with("FIRST\neee"), "{text}");
    assert!(text.ends_with("eee\nREAL ERROR: x\n"), "{text}");
    // 1000 kept of 6 + 10,000,000 + 1 + 14 written.
    let omitted = 6 + 10_000_000 + 1 + 14 - 1000;
    let marker = format!("\n... ({omitted} bytes of stderr omitted) ...\n");
    assert!(text.contains(&marker), "{text}");
    assert_eq!(text.len(), 1000 + marker.len());
}

#[test]
fn head_tail_is_exact_at_and_under_the_limit() {
    for (writes, limit) in [
        (vec![&b"abcd"[..]], 4),
        (vec![b"ab", b"", b"c"], 4),
        (vec![b"abc", b"defgh"], 8),
    ] {
        let mut kept = HeadTail::new(limit);
        let mut all = Vec::new();
        for w in &writes {
            kept.push(w);
            all.extend_from_slice(w);
        }
        assert_eq!(kept.finish(), (Bytes::from(all), false));
    }
    // One byte over, in pieces of every size: head 2, tail 2, 1 omitted.
    for piece in 1..=5 {
        let mut kept = HeadTail::new(4);
        for chunk in b"abcde".chunks(piece) {
            kept.push(chunk);
        }
        let (bytes, cut) = kept.finish();
        assert!(cut);
        assert_eq!(
            &bytes[..],
            &b"ab\n... (1 bytes of stderr omitted) ...\nde"[..],
            "piece {piece}"
        );
    }
}

#[tokio::test]
async fn missing_program_is_a_spawn_error() {
    let spec = ExecSpec::from_argv(["/nonexistent/fn"]).unwrap();
    let err = run(&spec, Bytes::new(), &limits()).await.unwrap_err();
    match err {
        ExecError::Spawn { program, source } => {
            assert_eq!(program, "/nonexistent/fn");
            assert_eq!(source.kind(), io::ErrorKind::NotFound);
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn grandchild_holding_stdout_does_not_keep_call_open() {
    // The leader exits at once; a background grandchild keeps stdout open
    // for an hour. The call must end promptly and kill the grandchild.
    // Bounded: were the call to wait for the grandchild, the test fails
    // after 30 s (and dropping the call kills the group) instead of
    // hanging for the hour.
    let spec = sh("sleep 3600 & echo $! ; exit 0");
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), run(&spec, Bytes::new(), &limits()))
        .await
        .expect("the call waited for the grandchild")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    let pid: i32 = std::str::from_utf8(&out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Its pipes closed at exit; it turns zombie a moment later.
    assert!(
        eventually(Duration::from_secs(5), || !process_alive(pid)).await,
        "grandchild {pid} survived the call"
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let script = format!(
        "sleep 3600 & echo $! >> {p}; echo $$ >> {p}; wait",
        p = pidfile.display()
    );
    let spec = sh(&script);
    let limits = limits();
    let call = run(&spec, Bytes::new(), &limits);
    // Give the call until both pids are written, then drop it.
    let written = || std::fs::read_to_string(&pidfile).is_ok_and(|text| text.lines().count() == 2);
    tokio::select! {
        _ = call => panic!("call ended by itself"),
        both = eventually(Duration::from_secs(30), written) => assert!(both, "pids never written"),
    }
    let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    // Dropped above: the group is killed synchronously with SIGKILL.
    assert!(
        eventually(Duration::from_secs(5), || pids
            .iter()
            .all(|&p| !process_alive(p)))
        .await,
        "processes {pids:?} survived the cancelled call"
    );
}

/// Alive and not a zombie.
fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A pre-spawned process gets, without a fork, what std's spawn gives a
/// call's process (the same signal mask and ignored signals, the same
/// open files, the environment with the spec's variables and the marker)
/// plus a session of its own, which it leads; a bare name is found on
/// PATH, a missing program is the spawn's error, and a spec with a working
/// directory (std's spawn, forking) still runs there.
#[tokio::test]
async fn a_waiting_process_leads_its_own_session_without_a_fork() {
    async fn both(script: &str) -> (String, String) {
        let mut spec = ExecSpec::from_argv(["sh", "-c", script]).unwrap();
        spec.env.push(("X".into(), "from the spec".into()));
        assert!(session::posix_spawn_can(&spec));
        let mut out = Vec::new();
        for spawned in [spawn_waiting(&spec).unwrap(), spawn(&spec).unwrap()] {
            let o = run_spawned(spawned, Bytes::from_static(b"go\n"), &limits())
                .await
                .unwrap();
            assert_eq!(o.status, ExitStatus::Code(0));
            out.push(String::from_utf8_lossy(&o.stdout).into_owned());
        }
        (out.remove(0), out.remove(0))
    }
    // `exec`: the program reports on itself, as its spawn left it (a shell
    // blocks signals around its own forks).
    let (waiting, call) = both("read _; exec grep -E '^(SigBlk|SigIgn):' /proc/self/status").await;
    assert_eq!(waiting, call);
    assert!(waiting.contains("SigBlk:\t0000000000000000"), "{waiting}");
    let (waiting, call) = both("read _; exec ls /proc/self/fd").await;
    assert_eq!(waiting, call);
    let (waiting, call) = both("read _; echo \"x=$X marker=${KRM_FN_SPAWN:+set}\"").await;
    assert_eq!(waiting, call);
    assert_eq!(waiting, "x=from the spec marker=set\n");

    let before = session::SPAWNS.load(Ordering::Relaxed);
    let spawned = spawn_waiting(&ExecSpec::from_argv(["cat"]).unwrap()).unwrap();
    assert!(
        session::SPAWNS.load(Ordering::Relaxed) > before,
        "spawned by posix_spawn, not by std's Command"
    );
    let pid = Pid::from_raw(spawned.id() as i32).unwrap();
    assert_eq!(
        rustix::process::getsid(Some(pid)).unwrap(),
        pid,
        "its own session"
    );
    drop(spawned);

    let missing = ExecSpec::from_argv(["/no/such/program"]).unwrap();
    let err = spawn_waiting(&missing).unwrap_err();
    assert!(err.to_string().contains("No such file"), "{err}");

    let mut in_dir = sh("read _; pwd");
    in_dir.current_dir = Some("/tmp".into());
    assert!(!session::posix_spawn_can(&in_dir));
    let spawned = spawn_waiting(&in_dir).unwrap();
    let pid = Pid::from_raw(spawned.id() as i32).unwrap();
    assert_eq!(rustix::process::getsid(Some(pid)).unwrap(), pid);
    let out = run_spawned(spawned, Bytes::from_static(b"go\n"), &limits())
        .await
        .unwrap();
    assert_eq!(&out.stdout[..], b"/tmp\n");
}
