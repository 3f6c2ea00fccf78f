//! `bench-harden`: the faults of issue #11 (items 1–8) measured side by side
//! on two sets of binaries, printed as one markdown table per item.
//!
//! ```sh
//! bench-harden --before OLD/ --after NEW/ \
//!     [--after-wrapper-args "--shutdown-grace 5s"] [--after-runner-args "..."] [--only 1,3,5]
//! ```
//!
//! Each DIR holds `wrapper-server` and `function-runner` (release builds).
//! `--after-wrapper-args` / `--after-runner-args` are appended (split on
//! whitespace) to the command lines of the "after" servers this bench starts
//! itself; the wrapper pods a runner starts get whatever flags the runner
//! gives them. Everything runs on 127.0.0.1 with ephemeral ports; every wait
//! is bounded; every process started (and whatever it started) is killed
//! when its item ends, on error too.
//!
//! What each item sends, and reports:
//! 1. Runner (process backend): `--metrics-calls` calls with distinct unknown
//!    1 KiB images; one `/metrics` body's size; VmRSS/VmHWM after 10 s of 4
//!    clients that pipeline 50 GETs each and never read.
//! 2. One channel, 8 steady callers and 16 that cancel after 0-50 ms, for
//!    `--storm-secs`, to a wrapper (`sh -c 'sleep 0.05; cat'`) and through a
//!    runner: steady ok/failed by code; the runner's pods started (its
//!    wrapper-server children sampled every 50 ms, and its pod-start metric).
//! 3. Wrapper and runner, with an idle TCP connection / a bare HTTP/2 preface /
//!    half a request open: seconds from SIGTERM to exit (`--term-cap-secs`,
//!    then SIGKILL), a health Check on a new connection 0.5 s after SIGTERM.
//! 4. `--max-concurrent-evaluations 4`, 4 uploads stalled 100 bytes into a
//!    1 MiB message, then a call every 300 ms for `--stall-secs`: answers,
//!    time to the first OK.
//! 5. One connection with a stream window of 0, 30 requests of 4 MiB never
//!    read: the wrapper's memory, streams accepted vs refused.
//! 6. 10 gzip requests inflating to `--bomb-mib` MiB (deflate tops out near
//!    1030:1, so 48 MiB is the most that stays under 50 KiB on the wire), then
//!    990 malformed ones: answers, memory before/after each.
//! 7. (a) a wrapper started as a pod (`--exit-with-stdin`, its stdin held),
//!    6 calls whose function detaches a `sleep`, SIGKILL after 1 s: the calls'
//!    processes alive 3 s later; (b) a detached child keeping stdout open:
//!    processes left after each of 5 calls. Processes are found by a unique
//!    `sleep 30.NNNNNNNN` argument and killed afterwards.
//! 8. 10 MB of stderr then `REAL ERROR: x` and exit 1: the INTERNAL message's
//!    end; the OK path's `log` (3 short lines; a 10 MB line then 2 more).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use prost::Message;
use proto::health::{HealthCheckRequest, HealthClient};
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tonic::transport::Channel;

type Client = FunctionEvaluatorClient<Channel>;

const EVAL_PATH: &str = "/evaluator.FunctionEvaluator/EvaluateFunction";
/// Images the runner's process backend serves (see [`functions_dir`]).
const IMAGE_CAT: &str = "example.com/fns/cat-fn:v1";
const IMAGE_SLEEP_CAT: &str = "example.com/fns/sleep-cat:v1";
/// How long a server may take to log the address it serves on.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one item may run on one set of binaries, in all.
const ITEM_TIMEOUT: Duration = Duration::from_secs(900);
/// The HTTP/2 client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Debug, Parser)]
#[command(
    name = "bench-harden",
    about = "Issue #11 items 1-8: before vs after, one markdown table per item"
)]
struct Cli {
    /// Directory of the "before" binaries (wrapper-server, function-runner).
    #[arg(long)]
    before: PathBuf,
    /// Directory of the "after" binaries.
    #[arg(long)]
    after: PathBuf,
    /// Extra flags for the after wrapper-server command lines (split on
    /// whitespace), e.g. "--shutdown-grace 5s".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    after_wrapper_args: String,
    /// Extra flags for the after `function-runner serve` command lines.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    after_runner_args: String,
    /// Items to run, comma-separated (1-8).
    #[arg(long, value_delimiter = ',', default_values_t = [1u8, 2, 3, 4, 5, 6, 7, 8])]
    only: Vec<u8>,
    /// Item 1: calls with distinct unknown image names.
    #[arg(long, default_value_t = 3000)]
    metrics_calls: usize,
    /// Item 2: seconds the cancel storm lasts.
    #[arg(long, default_value_t = 12.0)]
    storm_secs: f64,
    /// Item 3: seconds to wait for an exit after SIGTERM before SIGKILL.
    #[arg(long, default_value_t = 40.0)]
    term_cap_secs: f64,
    /// Item 4: seconds of ordinary calls (one every 300 ms) after the stall.
    #[arg(long, default_value_t = 15.0)]
    stall_secs: f64,
    /// Item 6: MiB a gzip bomb inflates to.
    #[arg(long, default_value_t = 48)]
    bomb_mib: usize,
}

/// One set of binaries and the extra flags for its servers.
#[derive(Debug, Clone)]
struct Bins {
    label: &'static str,
    index: usize,
    dir: PathBuf,
    wrapper_args: Vec<String>,
    runner_args: Vec<String>,
}

/// What one item measured on one set of binaries.
#[derive(Debug, Default)]
struct Report {
    cmds: Vec<String>,
    rows: Vec<(String, String)>,
}

impl Report {
    fn row(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.rows.push((key.into(), value.into()));
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let split = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let sets = [
        Bins {
            label: "before",
            index: 0,
            dir: cli.before.clone(),
            wrapper_args: Vec::new(),
            runner_args: Vec::new(),
        },
        Bins {
            label: "after",
            index: 1,
            dir: cli.after.clone(),
            wrapper_args: split(&cli.after_wrapper_args),
            runner_args: split(&cli.after_runner_args),
        },
    ];
    for set in &sets {
        for name in ["wrapper-server", "function-runner"] {
            let path = set.dir.join(name);
            if !path.is_file() {
                bail!("{} ({}) has no {name}", set.dir.display(), set.label);
            }
        }
    }
    println!("# bench-harden: issue #11 items 1-8, before vs after\n");
    println!(
        "command: `{}`\n",
        std::env::args()
            .map(|a| shell_quote(&a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "machine: nproc {}, load average at the start {}\n",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average()
    );
    // Interrupted, the items' futures are dropped: their guards kill what
    // they started, then the sweep kills what is left.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let result = tokio::select! {
        r = run(&cli, &sets) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted (SIGINT)")),
        _ = sigterm.recv() => Err(anyhow!("terminated (SIGTERM)")),
    };
    sweep();
    println!("load average at the end: {}", load_average());
    result
}

async fn run(cli: &Cli, sets: &[Bins; 2]) -> anyhow::Result<()> {
    for item in 1..=8u8 {
        if !cli.only.contains(&item) {
            continue;
        }
        let mut reports = Vec::new();
        for bins in sets {
            let mut rep = Report::default();
            let started = Instant::now();
            let res = tokio::time::timeout(ITEM_TIMEOUT, run_item(item, cli, bins, &mut rep)).await;
            match res {
                Ok(Ok(())) => {}
                Ok(Err(err)) => rep.row("**error**", format!("{err:#}")),
                Err(_) => rep.row(
                    "**error**",
                    format!("the item did not finish within {ITEM_TIMEOUT:?}"),
                ),
            }
            rep.row("bench wall time", secs(started.elapsed()));
            sweep();
            reports.push(rep);
        }
        print_table(item, &sets[..], &reports);
    }
    Ok(())
}

async fn run_item(item: u8, cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    match item {
        1 => item1(cli, b, rep).await,
        2 => item2(cli, b, rep).await,
        3 => item3(cli, b, rep).await,
        4 => item4(cli, b, rep).await,
        5 => item5(b, rep).await,
        6 => item6(cli, b, rep).await,
        7 => item7(b, rep).await,
        8 => item8(b, rep).await,
        _ => bail!("no item {item}"),
    }
}

fn title(item: u8) -> &'static str {
    match item {
        1 => "Runner memory through metrics",
        2 => "Cancels on a shared connection",
        3 => "SIGTERM with open connections",
        4 => "A stalled upload holds a slot",
        5 => "Unread answers",
        6 => "Gzip bombs",
        7 => "Escaping processes",
        8 => "stderr keeps its end",
        _ => "?",
    }
}

fn print_table(item: u8, sets: &[Bins], reports: &[Report]) {
    println!("## Item {item}: {}\n", title(item));
    for (bins, rep) in sets.iter().zip(reports) {
        println!("{} ({}):", bins.label, bins.dir.display());
        let mut seen = HashSet::new();
        for cmd in &rep.cmds {
            if seen.insert(cmd) {
                println!("    {cmd}");
            }
        }
        if rep.cmds.is_empty() {
            println!("    (no server started)");
        }
    }
    println!();
    let mut keys: Vec<&str> = Vec::new();
    for rep in reports {
        for (k, _) in &rep.rows {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    println!("| figure | before | after |");
    println!("|---|---|---|");
    for key in keys {
        let cell = |rep: &Report| {
            let values: Vec<&str> = rep
                .rows
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect();
            if values.is_empty() {
                "-".to_string()
            } else {
                md(&values.join("; "))
            }
        };
        let before = reports.first().map(cell).unwrap_or_default();
        let after = reports.get(1).map(cell).unwrap_or_default();
        println!("| {} | {before} | {after} |", md(key));
    }
    println!();
}

/// A table cell: one line, `|` escaped.
fn md(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

// ---------------------------------------------------------------------------
// Processes: servers, /proc, cleanup

/// A server child process; on drop it and every descendant are SIGKILLed.
struct Server {
    child: Child,
    addr: SocketAddr,
    logs: Arc<Mutex<String>>,
    /// The write end of the wrapper's stdin, for `--exit-with-stdin`.
    _lifeline: Option<ChildStdin>,
    metrics_port: Option<u16>,
}

impl Server {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), sig);
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
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
fn tail_chars(s: &str, n: usize) -> String {
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

fn track(pid: i32) {
    if let Some(st) = proc_stat(pid) {
        TRACKED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((pid, st.start));
    }
}

/// Kills what is left of every tracked process and marked function.
fn sweep() {
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

fn alive(pid: i32) -> bool {
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
fn pods_of(pid: i32) -> Vec<i32> {
    e2e_tests::children_of(pid as u32)
        .into_iter()
        .filter(|(p, state)| *state != 'Z' && comm(*p) == "wrapper-server")
        .map(|(p, _)| p)
        .collect()
}

/// Live processes whose command line contains `marker`, but for `exclude`.
fn marked(marker: &str, exclude: &[i32]) -> Vec<i32> {
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

fn kill_marked(marker: &str, exclude: &[i32]) -> usize {
    let pids = marked(marker, exclude);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    pids.len()
}

/// A `sleep` argument unique to this bench run, set and use: `30.PPPPPSU`.
fn marker(b: &Bins, use_: u8) -> String {
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
fn mem_kib(pid: i32) -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mb(kib: Option<u64>) -> String {
    kib.map_or_else(
        || "?".into(),
        |k| format!("{:.1} MB", k as f64 * 1024.0 / 1e6),
    )
}

fn mem(pid: i32) -> String {
    let (rss, hwm) = mem_kib(pid);
    format!("VmRSS {} / VmHWM {}", mb(rss), mb(hwm))
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn shell_quote(s: &str) -> String {
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
    fn start_wrapper(
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
    fn start_pod_wrapper(&self, rep: &mut Report, entrypoint: &[&str]) -> anyhow::Result<Server> {
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
    fn start_runner(&self, rep: &mut Report, fns: &Path) -> anyhow::Result<Server> {
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
fn functions_dir() -> anyhow::Result<tempfile::TempDir> {
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

// ---------------------------------------------------------------------------
// gRPC through tonic

async fn connect(endpoint: &str) -> anyhow::Result<Client> {
    tokio::time::timeout(
        Duration::from_secs(10),
        e2e_tests::evaluator_client(endpoint, 64 << 20),
    )
    .await
    .map_err(|_| anyhow!("connecting to {endpoint}: no connection within 10 s"))?
}

fn small_rl() -> Bytes {
    Bytes::from(e2e_tests::resource_list(2))
}

fn request(rl: &Bytes, image: &str) -> EvaluateFunctionRequest {
    EvaluateFunctionRequest {
        resource_list: rl.clone(),
        image: image.into(),
        tag: String::new(),
    }
}

#[derive(Debug, Clone)]
struct Fail {
    code: String,
    message: String,
}

/// One call with a deadline of `limit` (sent as `grpc-timeout`, and
/// enforced here too).
async fn call(
    client: &mut Client,
    req: EvaluateFunctionRequest,
    limit: Duration,
) -> Result<EvaluateFunctionResponse, Fail> {
    let mut r = tonic::Request::new(req);
    r.set_timeout(limit);
    match tokio::time::timeout(limit + Duration::from_secs(2), client.evaluate_function(r)).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(st)) => Err(Fail {
            code: code_name(st.code() as i32),
            message: st.message().to_string(),
        }),
        Err(_) => Err(Fail {
            code: "no answer (client timeout)".into(),
            message: String::new(),
        }),
    }
}

fn code_name(c: i32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(c)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("code {c}"), |n| (*n).to_string())
}

/// Counts by label, with the first message seen for each.
#[derive(Debug, Default, Clone)]
struct Hist(BTreeMap<String, (usize, String)>);

impl Hist {
    fn add(&mut self, label: &str, message: &str) {
        let e = self
            .0
            .entry(label.to_string())
            .or_insert_with(|| (0, short(message, 100)));
        e.0 += 1;
    }

    fn merge(&mut self, other: Hist) {
        for (k, (n, m)) in other.0 {
            let e = self.0.entry(k).or_insert((0, m));
            e.0 += n;
        }
    }

    fn count(&self, label: &str) -> usize {
        self.0.get(label).map_or(0, |e| e.0)
    }

    fn total(&self) -> usize {
        self.0.values().map(|e| e.0).sum()
    }

    fn show(&self, with_messages: bool) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .iter()
            .map(|(k, (n, m))| {
                if with_messages && !m.is_empty() {
                    format!("{k} ×{n} (first: {m:?})")
                } else {
                    format!("{k} ×{n}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// At most `n` characters of `s`, marked when cut.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// What a health Check on a new connection answers, or why it does not.
async fn health_check(endpoint: String) -> String {
    let ep = match tonic::transport::Endpoint::from_shared(endpoint) {
        Ok(ep) => ep
            .connect_timeout(Duration::from_secs(1))
            .timeout(Duration::from_secs(2)),
        Err(err) => return format!("bad endpoint: {err}"),
    };
    let channel = match tokio::time::timeout(Duration::from_secs(3), ep.connect()).await {
        Err(_) => return "connect: no answer within 3 s".into(),
        Ok(Err(err)) => return format!("connect: {}", describe(&err)),
        Ok(Ok(c)) => c,
    };
    let mut health = HealthClient::new(channel);
    let check = health.check(HealthCheckRequest {
        service: String::new(),
    });
    match tokio::time::timeout(Duration::from_secs(3), check).await {
        Err(_) => "Check: no answer within 3 s".into(),
        Ok(Ok(resp)) => match resp.into_inner().status {
            0 => "UNKNOWN".into(),
            1 => "SERVING".into(),
            2 => "NOT_SERVING".into(),
            3 => "SERVICE_UNKNOWN".into(),
            s => format!("status {s}"),
        },
        Ok(Err(st)) => format!(
            "Check: {} {}",
            code_name(st.code() as i32),
            short(st.message(), 80)
        ),
    }
}

/// "connection refused" when an I/O error of that kind is in the chain, else
/// the chain's messages.
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return "connection refused".into();
            }
        }
        parts.push(e.to_string());
        cur = e.source();
    }
    short(&parts.join(": "), 120)
}

// ---------------------------------------------------------------------------
// Raw HTTP/2

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A raw HTTP/2 client connection, driven by a task of its own.
struct H2 {
    send: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    _conn: AbortOnDrop,
}

/// Connects; `window`: the initial stream window (default: 16 MiB).
async fn h2_connect(addr: SocketAddr, window: Option<u32>) -> anyhow::Result<H2> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow!("TCP connect to {addr}: timeout"))??;
    tcp.set_nodelay(true)?;
    let mut builder = h2::client::Builder::new();
    match window {
        Some(w) => builder.initial_window_size(w),
        None => builder
            .initial_window_size(16 << 20)
            .initial_connection_window_size(16 << 20),
    };
    let (send, mut conn) =
        tokio::time::timeout(Duration::from_secs(5), builder.handshake::<_, Bytes>(tcp))
            .await
            .map_err(|_| anyhow!("HTTP/2 handshake with {addr}: timeout"))??;
    let ping = conn.ping_pong();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let h2 = H2 {
        send,
        addr,
        _conn: AbortOnDrop(task),
    };
    // The PONG comes after the server's SETTINGS, which are then applied (its
    // stream limit, say) before the caller opens streams.
    if let Some(mut ping) = ping {
        tokio::time::timeout(Duration::from_secs(5), ping.ping(h2::Ping::opaque()))
            .await
            .map_err(|_| anyhow!("HTTP/2 PING to {addr}: no PONG within 5 s"))??;
    }
    Ok(h2)
}

impl H2 {
    /// Opens an EvaluateFunction stream: its headers are sent, no body yet.
    async fn open(
        &self,
        gzip: bool,
    ) -> anyhow::Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
        let mut builder = http::Request::builder()
            .method("POST")
            .uri(format!("http://{}{EVAL_PATH}", self.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if gzip {
            builder = builder.header("grpc-encoding", "gzip");
        }
        let req = builder.body(())?;
        let mut send = self.send.clone().ready().await?;
        Ok(send.send_request(req, false)?)
    }

    /// One unary call with a raw body: the answer's label and message.
    async fn call(&self, gzip: bool, body: Bytes, limit: Duration) -> (String, String) {
        let attempt = async {
            let (resp, mut stream) = self.open(gzip).await?;
            send_all(&mut stream, body, true).await?;
            anyhow::Ok(read_answer(resp).await)
        };
        match tokio::time::timeout(limit, attempt).await {
            Err(_) => (format!("no answer within {limit:?}"), String::new()),
            Ok(Err(err)) => (
                format!("error: {}", short(&format!("{err:#}"), 80)),
                String::new(),
            ),
            Ok(Ok(ans)) => (ans.label(), ans.message().to_string()),
        }
    }
}

/// A gRPC length-prefixed frame: flag, declared length, payload.
fn grpc_frame(compressed: bool, declared: usize, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + payload.len());
    b.put_u8(u8::from(compressed));
    b.put_u32(u32::try_from(declared).unwrap_or(u32::MAX));
    b.put_slice(payload);
    b.freeze()
}

/// Sends `data` as the stream's window allows.
async fn send_all(
    stream: &mut h2::SendStream<Bytes>,
    data: Bytes,
    end: bool,
) -> anyhow::Result<()> {
    send_counted(stream, data, end, &AtomicUsize::new(0)).await
}

/// [`send_all`], counting the bytes handed to the connection in `sent`.
async fn send_counted(
    stream: &mut h2::SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    sent: &AtomicUsize,
) -> anyhow::Result<()> {
    if data.is_empty() {
        stream.send_data(Bytes::new(), end)?;
        return Ok(());
    }
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let mut n = stream.capacity();
        if n == 0 {
            n = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                None => bail!("the stream closed while sending"),
                Some(r) => r?,
            };
        }
        if n == 0 {
            continue;
        }
        let chunk = data.split_to(n.min(data.len()));
        sent.fetch_add(chunk.len(), Ordering::Relaxed);
        stream.send_data(chunk, end && data.is_empty())?;
    }
    Ok(())
}

/// An HTTP/2 answer to a gRPC call.
#[derive(Debug)]
enum Answer {
    /// `:status`, `grpc-status` (headers or trailers), `grpc-message`.
    Status(u16, Option<i32>, String),
    Error(String),
}

impl Answer {
    fn message(&self) -> &str {
        match self {
            Answer::Status(_, _, m) => m,
            Answer::Error(_) => "",
        }
    }

    fn label(&self) -> String {
        match self {
            Answer::Status(200, Some(c), _) => code_name(*c),
            Answer::Status(http, Some(c), _) => format!("HTTP {http} {}", code_name(*c)),
            Answer::Status(http, None, _) => format!("HTTP {http} without grpc-status"),
            Answer::Error(e) => e.clone(),
        }
    }
}

fn h2_error(err: &h2::Error) -> String {
    match err.reason() {
        Some(reason) if err.is_go_away() => format!("GOAWAY {reason:?}"),
        Some(reason) if err.is_reset() => format!("RST_STREAM {reason:?}"),
        Some(reason) => format!("h2 {reason:?}"),
        None => format!("h2: {}", short(&err.to_string(), 80)),
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<(i32, String)> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let msg = headers
        .get("grpc-message")
        .map(|v| percent_decode(v.as_bytes()))
        .unwrap_or_default();
    Some((code, msg))
}

fn percent_decode(v: &[u8]) -> String {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' && i + 2 < v.len() {
            if let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(&v[i + 1..i + 3]), 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the whole answer (body released as it comes).
async fn read_answer(resp: h2::client::ResponseFuture) -> Answer {
    let resp = match resp.await {
        Ok(r) => r,
        Err(err) => return Answer::Error(h2_error(&err)),
    };
    let http = resp.status().as_u16();
    let (parts, mut body) = resp.into_parts();
    if let Some((code, msg)) = grpc_status(&parts.headers) {
        return Answer::Status(http, Some(code), msg);
    }
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(chunk) => {
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            Err(err) => return Answer::Error(h2_error(&err)),
        }
    }
    match body.trailers().await {
        Ok(Some(t)) => match grpc_status(&t) {
            Some((code, msg)) => Answer::Status(http, Some(code), msg),
            None => Answer::Status(http, None, String::new()),
        },
        Ok(None) => Answer::Status(http, None, String::new()),
        Err(err) => Answer::Error(h2_error(&err)),
    }
}

/// The protobuf of an EvaluateFunctionRequest whose `resource_list` is
/// `rl_len` bytes, up to the first `take` bytes of it: the field's tag and
/// length, then YAML.
fn request_prefix(rl_len: usize, take: usize) -> Vec<u8> {
    let mut msg = vec![0x0a];
    let mut v = rl_len as u64;
    while v >= 0x80 {
        msg.push((v as u8) | 0x80);
        v >>= 7;
    }
    msg.push(v as u8);
    let yaml = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: stalled\n  data:\n    big: ";
    msg.extend_from_slice(yaml);
    while msg.len() < take {
        msg.push(b'x');
    }
    msg.truncate(take);
    msg
}

fn varint_len(v: usize) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// A ResourceList of about `size` bytes: one ConfigMap with a big value.
fn big_rl(size: usize) -> Bytes {
    let head = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: big\n  data:\n    big: ";
    let mut s = String::with_capacity(size + 1);
    s.push_str(head);
    while s.len() + 1 < size {
        s.push('x');
    }
    s.push('\n');
    Bytes::from(s)
}

// ---------------------------------------------------------------------------
// Item 1: runner memory through metrics

/// A 1 KiB image name no function serves, distinct per `i`.
fn unknown_image(i: usize) -> String {
    let prefix = "example.com/unknown/";
    let suffix = format!("-{i:06}");
    format!(
        "{prefix}{}{suffix}",
        "a".repeat(1024 - prefix.len() - suffix.len())
    )
}

/// One `GET /metrics` body, bytes.
async fn metrics_body_len(port: u16) -> anyhow::Result<usize> {
    let fetch = async {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(h) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
                let cl = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if cl.is_some_and(|cl| buf.len() >= h + 4 + cl) {
                    break;
                }
            }
        }
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(30), fetch)
        .await
        .map_err(|_| anyhow!("GET /metrics: no whole answer within 30 s"))??;
    let h = find(&buf, b"\r\n\r\n").context("GET /metrics: no header end")?;
    let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
    let body = &buf[h + 4..];
    if head.contains("transfer-encoding: chunked") {
        return Ok(dechunked_len(body));
    }
    Ok(body.len())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunked_len(mut body: &[u8]) -> usize {
    let mut total = 0;
    while let Some(eol) = find(body, b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        total += size;
        body = body.get(eol + 2 + size + 2..).unwrap_or(&[]);
    }
    total
}

async fn item1(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let runner = b.start_runner(rep, fns.path())?;
    let pid = runner.pid();
    let port = runner.metrics_port.context("no metrics port")?;
    rep.row("runner memory at start", mem(pid));
    let client = connect(&runner.endpoint()).await?;
    let rl = small_rl();
    let n = cli.metrics_calls;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..16 {
        let (mut client, next, rl) = (client.clone(), next.clone(), rl.clone());
        set.spawn(async move {
            let mut hist = Hist::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let req = request(&rl, &unknown_image(i));
                match call(&mut client, req, Duration::from_secs(10)).await {
                    Ok(_) => hist.add("OK", ""),
                    Err(f) => hist.add(&f.code, &f.message),
                }
            }
            hist
        });
    }
    let mut hist = Hist::default();
    while let Some(h) = set.join_next().await {
        hist.merge(h?);
    }
    rep.row(
        format!("{n} calls with distinct unknown 1 KiB images: answers"),
        hist.show(false),
    );
    rep.row("those calls' wall time", secs(started.elapsed()));
    rep.row("runner memory after them", mem(pid));
    let body = metrics_body_len(port).await?;
    rep.row(
        "one GET /metrics body",
        format!("{body} B ({:.2} MB)", body as f64 / 1e6),
    );
    // 4 clients that pipeline 50 GETs each and never read.
    let pipelined = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(50);
    let mut socks = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::time::timeout(
            Duration::from_secs(5),
            TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        .map_err(|_| anyhow!("metrics connect: timeout"))??;
        // Bounded: 50 requests are ~2 KB, far under a socket buffer.
        tokio::time::timeout(Duration::from_secs(5), s.write_all(pipelined.as_bytes()))
            .await
            .map_err(|_| anyhow!("metrics write: timeout"))??;
        socks.push(s);
    }
    let t0 = Instant::now();
    let mut peak = 0;
    while t0.elapsed() < Duration::from_secs(10) {
        peak = peak.max(mem_kib(pid).0.unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    rep.row(
        "runner memory after 10 s with 4 clients that sent 50 pipelined GETs each and never read",
        mem(pid),
    );
    rep.row("peak VmRSS sampled in those 10 s", mb(Some(peak)));
    drop(socks);
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 2: cancels

/// xorshift64*, enough for jitter.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Rng((t ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

struct Storm {
    steady: Hist,
    cancelled: usize,
    finished_before_cancel: usize,
}

/// One channel; 8 steady callers and 16 cancellers for `dur`.
async fn storm(endpoint: &str, image: &str, dur: Duration) -> anyhow::Result<Storm> {
    let client = connect(endpoint).await?;
    let rl = small_rl();
    let end = Instant::now() + dur;
    let mut steady = JoinSet::new();
    for _ in 0..8 {
        let (mut client, rl, image) = (client.clone(), rl.clone(), image.to_string());
        steady.spawn(async move {
            let mut hist = Hist::default();
            while Instant::now() < end {
                match call(&mut client, request(&rl, &image), Duration::from_secs(10)).await {
                    Ok(_) => hist.add("OK", ""),
                    Err(f) => hist.add(&f.code, &f.message),
                }
            }
            hist
        });
    }
    let mut cancellers = JoinSet::new();
    for i in 0..16u64 {
        let (mut client, rl, image) = (client.clone(), rl.clone(), image.to_string());
        cancellers.spawn(async move {
            let mut rng = Rng::new(i + 1);
            let (mut cancelled, mut finished) = (0, 0);
            while Instant::now() < end {
                let after = Duration::from_millis(rng.below(51));
                let fut = client.evaluate_function(request(&rl, &image));
                match tokio::time::timeout(after, fut).await {
                    Ok(_) => finished += 1,
                    Err(_) => cancelled += 1,
                }
            }
            (cancelled, finished)
        });
    }
    let mut out = Storm {
        steady: Hist::default(),
        cancelled: 0,
        finished_before_cancel: 0,
    };
    while let Some(h) = steady.join_next().await {
        out.steady.merge(h?);
    }
    while let Some(r) = cancellers.join_next().await {
        let (c, f) = r?;
        out.cancelled += c;
        out.finished_before_cancel += f;
    }
    Ok(out)
}

fn storm_rows(rep: &mut Report, who: &str, s: &Storm) {
    let ok = s.steady.count("OK");
    rep.row(
        format!("{who}: steady calls ok / failed"),
        format!("{ok} / {}", s.steady.total() - ok),
    );
    let mut failures = s.steady.clone();
    failures.0.remove("OK");
    rep.row(
        format!("{who}: steady failures by code"),
        failures.show(true),
    );
    rep.row(
        format!("{who}: cancelled calls (finished before their cancel)"),
        format!("{} ({})", s.cancelled, s.finished_before_cancel),
    );
}

/// Collects the distinct pods (wrapper-server children) of `runner` every
/// 50 ms until stopped.
struct PodSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<HashSet<i32>>,
}

impl PodSampler {
    fn start(runner: i32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut seen = HashSet::new();
            while !flag.load(Ordering::Relaxed) {
                for p in pods_of(runner) {
                    if seen.insert(p) {
                        track(p);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen
        });
        PodSampler { stop, task }
    }

    async fn finish(self) -> anyhow::Result<HashSet<i32>> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self.task.await?)
    }
}

/// `function_runner_pod_starts_total{...}` lines of the runner's metrics.
async fn pod_starts_metric(port: u16) -> String {
    let fetch = async {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut text = Vec::new();
        conn.read_to_end(&mut text).await?;
        anyhow::Ok(String::from_utf8_lossy(&text).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(10), fetch).await {
        Ok(Ok(text)) => {
            let lines: Vec<String> = text
                .lines()
                .filter(|l| l.starts_with("function_runner_pod_starts_total"))
                .map(|l| {
                    l.trim_start_matches("function_runner_pod_starts_total")
                        .to_string()
                })
                .collect();
            if lines.is_empty() {
                "none".into()
            } else {
                lines.join(", ")
            }
        }
        Ok(Err(err)) => format!("error: {err}"),
        Err(_) => "no answer within 10 s".into(),
    }
}

async fn item2(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let dur = Duration::from_secs_f64(cli.storm_secs);
    {
        let w = b.start_wrapper(rep, &[], &["/bin/sh", "-c", "sleep 0.05; cat"])?;
        let s = storm(&w.endpoint(), IMAGE_SLEEP_CAT, dur).await?;
        storm_rows(rep, "wrapper", &s);
    }
    let fns = functions_dir()?;
    let runner = b.start_runner(rep, fns.path())?;
    let mut client = connect(&runner.endpoint()).await?;
    if let Err(f) = call(
        &mut client,
        request(&small_rl(), IMAGE_SLEEP_CAT),
        Duration::from_secs(60),
    )
    .await
    {
        bail!("the warm-up call through the runner failed: {f:?}");
    }
    let before: HashSet<i32> = pods_of(runner.pid()).into_iter().collect();
    for p in &before {
        track(*p);
    }
    let sampler = PodSampler::start(runner.pid());
    let s = storm(&runner.endpoint(), IMAGE_SLEEP_CAT, dur).await?;
    let seen = sampler.finish().await?;
    storm_rows(rep, "runner", &s);
    let new = seen.difference(&before).count();
    rep.row(
        "runner: pods started during the storm (distinct wrapper-server children, sampled every 50 ms)",
        format!("{new} (pods before: {})", before.len()),
    );
    rep.row(
        "runner: pods alive at the end",
        pods_of(runner.pid()).len().to_string(),
    );
    if let Some(port) = runner.metrics_port {
        rep.row(
            "runner: function_runner_pod_starts_total (whole run, warm-up included)",
            pod_starts_metric(port).await,
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 3: SIGTERM with open connections

#[derive(Debug, Clone, Copy)]
enum Held {
    Idle,
    Preface,
    HalfRequest,
}

impl Held {
    fn name(self) -> &'static str {
        match self {
            Held::Idle => "(a) idle TCP connection",
            Held::Preface => "(b) bare HTTP/2 preface + SETTINGS",
            Held::HalfRequest => "(c) half a request",
        }
    }
}

/// What keeps a connection open (dropped at the end).
type Holder = Box<dyn std::any::Any + Send>;

async fn hold(addr: SocketAddr, kind: Held) -> anyhow::Result<Holder> {
    match kind {
        Held::Idle => Ok(Box::new(
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
                .await
                .map_err(|_| anyhow!("connect: timeout"))??,
        )),
        Held::Preface => {
            let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
                .await
                .map_err(|_| anyhow!("connect: timeout"))??;
            let mut bytes = PREFACE.to_vec();
            // An empty SETTINGS frame: length 0, type 4, flags 0, stream 0.
            bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            s.write_all(&bytes).await?;
            Ok(Box::new(s))
        }
        Held::HalfRequest => {
            let h2 = h2_connect(addr, None).await?;
            let (resp, mut stream) = tokio::time::timeout(Duration::from_secs(5), h2.open(false))
                .await
                .map_err(|_| anyhow!("opening a stream: timeout"))??;
            // A frame announcing 1000 bytes, 60 of them sent.
            let msg = request_prefix(1000 - 3, 60);
            stream.send_data(grpc_frame(false, 1000, &msg), false)?;
            Ok(Box::new((h2, resp, stream)))
        }
    }
}

async fn item3(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let cap = Duration::from_secs_f64(cli.term_cap_secs);
    for who in ["wrapper", "runner"] {
        for kind in [Held::Idle, Held::Preface, Held::HalfRequest] {
            let key = format!("{who}, {}", kind.name());
            if let Err(err) = term_run(b, rep, who, kind, cap, &key).await {
                rep.row(format!("{key}: error"), format!("{err:#}"));
            }
        }
    }
    Ok(())
}

async fn term_run(
    b: &Bins,
    rep: &mut Report,
    who: &str,
    kind: Held,
    cap: Duration,
    key: &str,
) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let mut srv = if who == "wrapper" {
        b.start_wrapper(rep, &[], &["cat"])?
    } else {
        b.start_runner(rep, fns.path())?
    };
    let mut pods = Vec::new();
    if who == "runner" {
        let mut client = connect(&srv.endpoint()).await?;
        if let Err(f) = call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            bail!("the warm-up call through the runner failed: {f:?}");
        }
        pods = pods_of(srv.pid());
        for p in &pods {
            track(*p);
        }
    }
    let holder = hold(srv.addr, kind).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    srv.signal(Signal::SIGTERM);
    let endpoint = srv.endpoint();
    let health = tokio::spawn(async move {
        tokio::time::sleep_until((t0 + Duration::from_millis(500)).into()).await;
        health_check(endpoint).await
    });
    let mut pods_alive = pods.len();
    let exit = loop {
        if let Some(status) = srv.exited() {
            break Some((t0.elapsed(), status));
        }
        pods_alive = pods.iter().filter(|p| alive(**p)).count();
        if t0.elapsed() > cap {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let health = health
        .await
        .unwrap_or_else(|e| format!("check task failed: {e}"));
    rep.row(
        format!("{key}: exit after SIGTERM"),
        match exit {
            Some((d, status)) => format!("{} ({status})", secs(d)),
            None => format!(">{:.0} s (then SIGKILLed)", cap.as_secs_f64()),
        },
    );
    rep.row(
        format!("{key}: health Check on a new connection 0.5 s after SIGTERM"),
        health,
    );
    if who == "runner" {
        rep.row(
            format!("{key}: pods alive at the last look before the runner exited"),
            format!("{pods_alive} of {}", pods.len()),
        );
    }
    drop(holder);
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 4: stalled uploads

async fn item4(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &["--max-concurrent-evaluations", "4"], &["cat"])?;
    const DECLARED: usize = 1 << 20;
    let window = Duration::from_secs_f64(cli.stall_secs);
    let msg = request_prefix(DECLARED - 1 - varint_len(DECLARED), 100);
    let stall_answers: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let mut stalls = Vec::new();
    let t0 = Instant::now();
    for _ in 0..4 {
        let h2 = h2_connect(w.addr, None).await?;
        let (resp, mut stream) = tokio::time::timeout(Duration::from_secs(5), h2.open(false))
            .await
            .map_err(|_| anyhow!("opening a stream: timeout"))??;
        stream.send_data(grpc_frame(false, DECLARED, &msg), false)?;
        let answers = stall_answers.clone();
        let task = tokio::spawn(async move {
            let ans = read_answer(resp).await;
            answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((ans.label(), t0.elapsed()));
            // Keep the stream (and the connection) open.
            let _keep = (h2, stream);
            std::future::pending::<()>().await;
        });
        stalls.push(AbortOnDrop(task));
    }
    let stalled_at = Instant::now();
    let client = connect(&w.endpoint()).await?;
    let rl = small_rl();
    let mut set = JoinSet::new();
    for k in 1u32.. {
        let at = stalled_at + Duration::from_millis(300) * k;
        if at > stalled_at + window {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        let (mut client, rl) = (client.clone(), rl.clone());
        set.spawn(async move {
            let sent = stalled_at.elapsed();
            let res = call(&mut client, request(&rl, IMAGE_CAT), Duration::from_secs(5)).await;
            (sent, res.map(|_| ()).map_err(|f| f.code))
        });
    }
    let mut hist = Hist::default();
    let mut first_ok: Option<Duration> = None;
    while let Some(r) = set.join_next().await {
        let (sent, res) = r?;
        match res {
            Ok(()) => {
                hist.add("OK", "");
                first_ok = Some(first_ok.map_or(sent, |f| f.min(sent)));
            }
            Err(code) => hist.add(&code, ""),
        }
    }
    rep.row(
        "ordinary calls after the stall (one every 300 ms, 5 s deadline)",
        format!("{} in {}", hist.total(), secs(window)),
    );
    rep.row(
        "… RESOURCE_EXHAUSTED",
        hist.count("RESOURCE_EXHAUSTED").to_string(),
    );
    rep.row("… OK", hist.count("OK").to_string());
    rep.row("… all answers", hist.show(false));
    rep.row(
        "stall start → first OK call sent",
        first_ok.map_or_else(|| format!("none within {}", secs(window)), secs),
    );
    let answers = stall_answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    rep.row(
        "the 4 stalled uploads' answers (time since the stall)",
        if answers.is_empty() {
            "none within the run".to_string()
        } else {
            answers
                .iter()
                .map(|(l, d)| format!("{l} at {}", secs(*d)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    drop(stalls);
    drop(w);
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 5: unread answers

#[derive(Debug, Clone)]
enum St {
    Waiting,
    Sending,
    Sent,
    Done(String),
}

/// What the answer's headers (or the stream's end) say.
fn head_label(r: &Result<http::Response<h2::RecvStream>, h2::Error>) -> String {
    match r {
        Err(err) => h2_error(err),
        Ok(r) => match grpc_status(r.headers()) {
            Some((c, _)) => format!("error status in headers: {}", code_name(c)),
            None => format!(
                "answer headers :status {} (accepted; answer unread)",
                r.status().as_u16()
            ),
        },
    }
}

async fn item5(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &[], &["cat"])?;
    let pid = w.pid();
    rep.row("wrapper memory at start", mem(pid));
    let rl = big_rl((4 << 20) - 200);
    let msg = request(&rl, IMAGE_CAT).encode_to_vec();
    let body = grpc_frame(false, msg.len(), &msg);
    rep.row("request size", format!("{} B each, 30 of them", body.len()));
    let h2 = Arc::new(h2_connect(w.addr, Some(0)).await?);
    let states: Arc<Mutex<Vec<St>>> = Arc::new(Mutex::new(vec![St::Waiting; 30]));
    let progress: Vec<Arc<AtomicUsize>> = (0..30).map(|_| Arc::default()).collect();
    let set_state = |states: &Arc<Mutex<Vec<St>>>, i: usize, st: St| {
        if let Some(s) = states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(i)
        {
            *s = st;
        }
    };
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for (i, sent) in progress.iter().enumerate() {
        let (h2, states, body) = (h2.clone(), states.clone(), body.clone());
        let sent = sent.clone();
        let task = tokio::spawn(async move {
            let (resp, mut stream) = match h2.open(false).await {
                Ok(s) => s,
                Err(err) => {
                    set_state(
                        &states,
                        i,
                        St::Done(format!("open: {}", short(&format!("{err:#}"), 60))),
                    );
                    return;
                }
            };
            set_state(&states, i, St::Sending);
            tokio::pin!(resp);
            // The answer may come (or the stream be reset) before the
            // request is whole.
            let early = tokio::select! {
                r = send_counted(&mut stream, body, true, &sent) => Err(r),
                a = &mut resp => Ok(a),
            };
            let answer = match early {
                Ok(a) => {
                    let label = format!("{} (before the request was whole)", head_label(&a));
                    set_state(&states, i, St::Done(label));
                    let _keep = (a, stream, h2);
                    std::future::pending::<()>().await;
                    return;
                }
                Err(Err(err)) => {
                    // The stream's end says why, if it came.
                    let why = match tokio::time::timeout(Duration::from_secs(1), &mut resp).await {
                        Ok(a) => head_label(&a),
                        Err(_) => match err.downcast_ref::<h2::Error>() {
                            Some(e) => h2_error(e),
                            None => short(&format!("{err:#}"), 60),
                        },
                    };
                    set_state(&states, i, St::Done(format!("send failed: {why}")));
                    return;
                }
                Err(Ok(())) => {
                    set_state(&states, i, St::Sent);
                    (&mut resp).await
                }
            };
            set_state(&states, i, St::Done(head_label(&answer)));
            // Never read; keep the stream open.
            let _keep = (answer, stream, h2);
            std::future::pending::<()>().await;
        });
        tasks.push(AbortOnDrop(task));
    }
    let all_sent = |states: &Arc<Mutex<Vec<St>>>| {
        states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .all(|s| !matches!(s, St::Waiting | St::Sending))
    };
    while !all_sent(&states) && t0.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent_after = t0.elapsed();
    // A moment for the last answers to be made.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut hist = Hist::default();
    for (i, s) in states
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .enumerate()
    {
        let sent = progress[i].load(Ordering::Relaxed);
        match s {
            St::Waiting => hist.add("not opened (waiting for a stream slot)", ""),
            St::Sending if sent == 0 => hist.add(
                "queued by the client, nothing sent (server's stream limit reached)",
                "",
            ),
            St::Sending => hist.add("still sending its request", ""),
            St::Sent => hist.add("sent, no answer headers yet", ""),
            St::Done(l) => hist.add(l, ""),
        }
    }
    rep.row(
        "all 30 sent (or gave up) after",
        if all_sent(&states) || sent_after < Duration::from_secs(20) {
            secs(sent_after)
        } else {
            format!("not all within 20 s ({})", secs(sent_after))
        },
    );
    rep.row(
        "server's SETTINGS_MAX_CONCURRENT_STREAMS (as the client applies it)",
        h2.send.current_max_send_streams().to_string(),
    );
    rep.row("wrapper memory then", mem(pid));
    rep.row("streams", hist.show(false));
    let refused = hist
        .0
        .iter()
        .filter(|(k, _)| k.contains("REFUSED_STREAM") || k.starts_with("error status"))
        .map(|(_, (n, _))| n)
        .sum::<usize>();
    let accepted = hist
        .0
        .iter()
        .filter(|(k, _)| k.starts_with("answer headers") || k.starts_with("sent, no answer"))
        .map(|(_, (n, _))| n)
        .sum::<usize>();
    rep.row(
        "accepted (answered or sent and pending) / refused (REFUSED_STREAM or error status)",
        format!("{accepted} / {refused}"),
    );
    drop(tasks);
    drop(h2);
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 6: gzip bombs

/// A gzip-compressed EvaluateFunctionRequest whose `resource_list` is
/// `mib` MiB of zeros: (compressed, inflated length). Made once per run.
fn gzip_bomb(mib: usize) -> anyhow::Result<(Bytes, usize)> {
    static BOMB: OnceLock<(Bytes, usize)> = OnceLock::new();
    if let Some(b) = BOMB.get() {
        return Ok(b.clone());
    }
    let rl_len = mib << 20;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let head = request_prefix(rl_len, 1 + varint_len(rl_len));
    enc.write_all(&head)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        enc.write_all(&zeros)?;
    }
    let out = (Bytes::from(enc.finish()?), head.len() + rl_len);
    Ok(BOMB.get_or_init(|| out).clone())
}

fn malformed(i: usize) -> (bool, Bytes) {
    match i % 5 {
        // garbage protobuf: wire type 7 everywhere
        0 => {
            let junk = [0xffu8; 64];
            (false, grpc_frame(false, junk.len(), &junk))
        }
        // a frame announcing 1000 bytes, 10 sent, then the end
        1 => (false, grpc_frame(false, 1000, b"\x0a\x08abcdefg")),
        // the compressed flag without grpc-encoding
        2 => {
            let msg = request(&small_rl(), IMAGE_CAT).encode_to_vec();
            (false, grpc_frame(true, msg.len(), &msg))
        }
        // grpc-encoding gzip, not gzip data
        3 => (true, grpc_frame(true, 16, b"not gzip at all!")),
        // a length-delimited field longer than the message
        _ => (false, grpc_frame(false, 8, b"\x0a\xff\xff\x03abcd")),
    }
}

async fn item6(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &[], &["cat"])?;
    let pid = w.pid();
    let mut client = connect(&w.endpoint()).await?;
    if let Err(f) = call(
        &mut client,
        request(&small_rl(), IMAGE_CAT),
        Duration::from_secs(30),
    )
    .await
    {
        bail!("an ordinary call failed: {f:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = mem(pid);
    let mib = cli.bomb_mib;
    let (bomb, inflated) = tokio::task::spawn_blocking(move || gzip_bomb(mib)).await??;
    rep.row(
        "gzip request",
        format!(
            "{:.1} KiB on the wire, {} B ({:.0} MiB) inflated",
            bomb.len() as f64 / 1024.0,
            inflated,
            inflated as f64 / f64::from(1u32 << 20)
        ),
    );
    let h2 = h2_connect(w.addr, None).await?;
    let mut gz = Hist::default();
    for _ in 0..10 {
        let (label, message) = h2
            .call(
                true,
                grpc_frame(true, bomb.len(), &bomb),
                Duration::from_secs(30),
            )
            .await;
        gz.add(&label, &message);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_gzip = mem(pid);
    let mut other = Hist::default();
    let h2 = Arc::new(h2);
    for chunk in (0..990).collect::<Vec<_>>().chunks(8) {
        let mut set = JoinSet::new();
        for &i in chunk {
            let h2 = h2.clone();
            set.spawn(async move {
                let (gzip, body) = malformed(i);
                (i % 5, h2.call(gzip, body, Duration::from_secs(10)).await)
            });
        }
        while let Some(r) = set.join_next().await {
            let (kind, (label, _)) = r?;
            other.add(&format!("kind {kind}: {label}"), "");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    rep.row("10 gzip bombs: answers", gz.show(true));
    rep.row(
        "990 malformed (0 garbage protobuf, 1 truncated frame, 2 compressed flag without encoding, 3 bad gzip, 4 overlong field): answers",
        other.show(false),
    );
    rep.row("wrapper memory before", before);
    rep.row("… after the 10 gzip bombs", after_gzip);
    rep.row("… after the 990 others", mem(pid));
    Ok(())
}

// ---------------------------------------------------------------------------
// Item 7: escaping processes

async fn item7(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
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

// ---------------------------------------------------------------------------
// Item 8: stderr

async fn item8(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    {
        let w = b.start_wrapper(
            rep,
            &[],
            &[
                "/bin/sh",
                "-c",
                r#"head -c 10000000 /dev/zero | tr "\0" e >&2; echo "REAL ERROR: x" >&2; exit 1"#,
            ],
        )?;
        let mut client = connect(&w.endpoint()).await?;
        match call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            Ok(_) => rep.row("10 MB stderr then REAL ERROR, exit 1: answer", "OK (!)"),
            Err(f) => {
                rep.row(
                    "10 MB stderr then REAL ERROR, exit 1: answer",
                    format!("{} ({} B message)", f.code, f.message.len()),
                );
                rep.row(
                    "… message contains `REAL ERROR: x`",
                    if f.message.contains("REAL ERROR: x") {
                        "yes"
                    } else {
                        "**no**"
                    },
                );
                rep.row(
                    "… message's last 60 chars",
                    format!("{:?}", tail_chars(&f.message, 60)),
                );
            }
        }
    }
    for (label, script) in [
        (
            "OK path, 3 short stderr lines",
            r#"echo "log line 1" >&2; echo "log line 2" >&2; echo "LAST LOG LINE" >&2; cat"#,
        ),
        (
            "OK path, 10 MB stderr line then 2 more",
            r#"head -c 10000000 /dev/zero | tr "\0" e >&2; echo >&2; echo "log line 2" >&2; echo "LAST LOG LINE" >&2; cat"#,
        ),
    ] {
        let w = b.start_wrapper(rep, &[], &["/bin/sh", "-c", script])?;
        let mut client = connect(&w.endpoint()).await?;
        match call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            Ok(resp) => {
                let log = String::from_utf8_lossy(&resp.log);
                rep.row(
                    format!("{label}: `log` has the last line"),
                    format!(
                        "{} ({} B log)",
                        if log.contains("LAST LOG LINE") {
                            "yes"
                        } else {
                            "**no**"
                        },
                        resp.log.len()
                    ),
                );
                rep.row(
                    format!("{label}: `log`'s last 60 chars"),
                    format!("{:?}", tail_chars(&log, 60)),
                );
            }
            Err(f) => rep.row(
                format!("{label}: answer"),
                format!("{} {:?}", f.code, short(&f.message, 100)),
            ),
        }
    }
    Ok(())
}
