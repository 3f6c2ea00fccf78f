//! The bench's processes: servers started and stopped, /proc read for
//! memory, descendants and marked processes, and everything killed at the
//! end.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{Bins, Report, START_TIMEOUT};

/// A server child process; on drop it and every descendant are SIGKILLed.
pub(super) struct Server {
    child: Child,
    pub(super) addr: SocketAddr,
    logs: Arc<Mutex<String>>,
    /// The write end of the wrapper's stdin, for `--exit-with-stdin`.
    _lifeline: Option<ChildStdin>,
    pub(super) metrics_port: Option<u16>,
}

impl Server {
    pub(super) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(super) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(super) fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), sig);
    }

    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn logs_tail(&self) -> String {
        let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
        tail_chars(&logs, 1500)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_tree(&mut self.child);
    }
}

/// The last `n` characters of `s`.
pub(super) fn tail_chars(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// Kills `child` and its descendants (SIGKILL), and reaps it (10 s at most).
fn kill_tree(child: &mut Child) {
    let pid = child.id() as i32;
    let desc = descendants(pid);
    for d in &desc {
        track(*d);
    }
    let _ = child.kill();
    for d in desc {
        let _ = kill(Pid::from_raw(d), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Processes this bench caused to exist (pid, start time), killed by
/// [`sweep`] if still alive: pods orphaned by their runner, for example.
static TRACKED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());
/// Command-line markers of functions' processes, killed by [`sweep`].
static MARKERS: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(super) fn track(pid: i32) {
    if let Some(st) = proc_stat(pid) {
        TRACKED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((pid, st.start));
    }
}

/// Kills what is left of every tracked process and marked function.
pub(super) fn sweep() {
    let tracked: Vec<(i32, u64)> =
        std::mem::take(&mut *TRACKED.lock().unwrap_or_else(PoisonError::into_inner));
    for (pid, start) in tracked {
        if proc_stat(pid).is_some_and(|st| st.start == start && st.state != 'Z') {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let markers: Vec<String> = MARKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for marker in markers {
        kill_marked(&marker, &[]);
    }
}

struct Stat {
    state: char,
    ppid: i32,
    start: u64,
}

fn proc_stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        // field 22 of stat; `rest` starts at field 3
        start: f.get(19)?.parse().ok()?,
    })
}

pub(super) fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|st| st.state != 'Z' && st.state != 'X')
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for pid in all_pids() {
        if let Some(st) = proc_stat(pid) {
            children.entry(st.ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Live wrapper-server children of `pid` (a runner's pods).
pub(super) fn pods_of(pid: i32) -> Vec<i32> {
    e2e_tests::children_of(pid as u32)
        .into_iter()
        .filter(|(p, state)| *state != 'Z' && comm(*p) == "wrapper-server")
        .map(|(p, _)| p)
        .collect()
}

/// Live processes whose command line contains `marker`, but for `exclude`.
pub(super) fn marked(marker: &str, exclude: &[i32]) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|pid| !exclude.contains(pid) && *pid != std::process::id() as i32)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
        .filter(|pid| alive(*pid))
        .collect()
}

pub(super) fn kill_marked(marker: &str, exclude: &[i32]) -> usize {
    let pids = marked(marker, exclude);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    pids.len()
}

/// A `sleep` argument unique to this bench run, set and use: `30.PPPPPSU`.
pub(super) fn marker(b: &Bins, use_: u8) -> String {
    let m = format!(
        "30.{:06}{}{}",
        std::process::id() % 1_000_000,
        b.index,
        use_
    );
    MARKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(m.clone());
    m
}

/// `(VmRSS, VmHWM)` of `pid`, KiB.
pub(super) fn mem_kib(pid: i32) -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub(super) fn mb(kib: Option<u64>) -> String {
    kib.map_or_else(
        || "?".into(),
        |k| format!("{:.1} MB", k as f64 * 1024.0 / 1e6),
    )
}

pub(super) fn mem(pid: i32) -> String {
    let (rss, hwm) = mem_kib(pid);
    format!("VmRSS {} / VmHWM {}", mb(rss), mb(hwm))
}

pub(super) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub(super) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn render_cmd(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Spawns `cmd` and waits (bounded) for the log line containing `marker`
/// with `addr=`; the rest of stderr keeps being drained (its tail kept).
fn spawn_server(
    mut cmd: Command,
    marker: &'static str,
    lifeline: bool,
    metrics_port: Option<u16>,
) -> anyhow::Result<Server> {
    cmd.env("RUST_LOG", "info")
        .stdin(if lifeline {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?;
    track(child.id() as i32);
    let stdin = child.stdin.take();
    let Some(stderr) = child.stderr.take() else {
        kill_tree(&mut child);
        bail!("no stderr pipe");
    };
    let logs = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = logs.clone();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
                l.push('\n');
                if l.len() > 256 << 10 {
                    let cut = l.len() - (128 << 10);
                    let cut = (cut..l.len()).find(|i| l.is_char_boundary(*i)).unwrap_or(0);
                    l.drain(..cut);
                }
            }
            if line.contains(marker) {
                if let (Some(tx), Some(addr)) = (tx.take(), log_addr(&line)) {
                    let _ = tx.send(addr);
                }
            }
        }
    });
    let got = tokio::task::block_in_place(|| rx.recv_timeout(START_TIMEOUT));
    let mut server = Server {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        logs,
        _lifeline: stdin,
        metrics_port,
    };
    match got.ok().and_then(|a| a.parse::<SocketAddr>().ok()) {
        Some(addr) => {
            server.addr = addr;
            Ok(server)
        }
        None => {
            let status = server.exited();
            Err(anyhow!(
                "no {marker:?} log line with an address within {START_TIMEOUT:?} (exit: {status:?}); logs:\n{}",
                server.logs_tail()
            ))
        }
    }
}

fn log_addr(line: &str) -> Option<String> {
    if let Some(start) = line.find("addr=") {
        let rest = &line[start + 5..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        return Some(rest[..end].trim_matches('"').to_string());
    }
    let key = "\"addr\":\"";
    let start = line.find(key)? + key.len();
    let rest = &line[start..];
    Some(rest[..rest.find('"')?].to_string())
}

impl Bins {
    fn wrapper_cmd(&self, extra: &[&str], entrypoint: &[&str]) -> Command {
        let mut cmd = Command::new(self.dir.join("wrapper-server"));
        cmd.args(["--host", "127.0.0.1", "--port", "0"])
            .args(extra)
            .args(&self.wrapper_args)
            .arg("--")
            .args(entrypoint);
        cmd
    }

    /// `wrapper-server --host 127.0.0.1 --port 0 EXTRA... AFTER-ARGS... -- ENTRYPOINT...`
    pub(super) fn start_wrapper(
        &self,
        rep: &mut Report,
        extra: &[&str],
        entrypoint: &[&str],
    ) -> anyhow::Result<Server> {
        let cmd = self.wrapper_cmd(extra, entrypoint);
        rep.cmds.push(render_cmd(&cmd));
        spawn_server(cmd, "wrapper-server serving", false, None)
    }

    /// The wrapper as the process backend starts a pod: `--print-address
    /// --exit-with-stdin`, its stdin a pipe this bench holds.
    pub(super) fn start_pod_wrapper(
        &self,
        rep: &mut Report,
        entrypoint: &[&str],
    ) -> anyhow::Result<Server> {
        let max = proto::DEFAULT_MAX_MESSAGE_BYTES.to_string();
        let cmd = self.wrapper_cmd(
            &[
                "--print-address",
                "--exit-with-stdin",
                "--max-request-body-size",
                &max,
            ],
            entrypoint,
        );
        rep.cmds.push(render_cmd(&cmd));
        spawn_server(cmd, "wrapper-server serving", true, None)
    }

    /// `function-runner serve` on the process backend with `fns` as its
    /// function map, metrics on a free port.
    pub(super) fn start_runner(&self, rep: &mut Report, fns: &Path) -> anyhow::Result<Server> {
        let mut last = None;
        // The free metrics port is found by binding and releasing it: another
        // process may take it first, then the runner fails and is retried.
        for _ in 0..3 {
            let port = free_port()?;
            let mut cmd = Command::new(self.dir.join("function-runner"));
            cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
                .args(["--metrics-port", &port.to_string()])
                .arg("--process-functions")
                .arg(fns)
                .arg("--wrapper-server")
                .arg(self.dir.join("wrapper-server"))
                .args(&self.runner_args);
            let line = render_cmd(&cmd);
            match spawn_server(cmd, "function-runner serving", false, Some(port)) {
                Ok(server) => {
                    rep.cmds.push(line);
                    return Ok(server);
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("the runner did not start")))
    }
}

/// A directory of process-backend functions: `cat-fn` and `sleep-cat`
/// (sleeps 50 ms, then cats).
pub(super) fn functions_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, script) in [
        ("cat-fn", "#!/bin/sh\nexec cat\n"),
        ("sleep-cat", "#!/bin/sh\nsleep 0.05\nexec cat\n"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}
