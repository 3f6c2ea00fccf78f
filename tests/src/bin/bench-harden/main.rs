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

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use clap::Parser;
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use tonic::transport::Channel;

use cancels::item2;
use escapes::item7;
use gzip_bombs::item6;
use metrics::item1;
use procs::{load_average, secs, shell_quote, sweep};
use sigterm::item3;
use stalls::item4;
use stderr::item8;
use unread::item5;

mod cancels;
mod escapes;
mod grpc;
mod gzip_bombs;
mod http2;
mod metrics;
mod procs;
mod sigterm;
mod stalls;
mod stderr;
mod unread;

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
