//! `evaluate`: EvaluateFunction through wrapper-server vs spawning the
//! program directly: latency (p50, p90) and throughput with concurrent
//! clients.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use bytes::Bytes;
use e2e_tests::{bin, Wrapper};
use tokio::task::JoinSet;

use super::calls::{call_std, call_tokio, call_wrapper, connect, payload, Client};
use super::footprint::wait_serving;
use super::stats::{join_ratios, load_average, met, path_str, size_label, which, Samples};
use super::{Clients, EvaluateArgs};

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
pub(super) enum Running {
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
pub(super) async fn start_wrapper(
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

pub(super) struct Bench {
    pub(super) program: PathBuf,
    pub(super) server: Running,
    pub(super) endpoint: String,
    pub(super) client: Client,
    shared: Vec<Client>,
    per_task: Vec<Client>,
}

impl Bench {
    pub(super) async fn start(
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
pub(super) fn round_order<T: Copy>(v: &[T], round: usize) -> Vec<T> {
    let mut v = v.to_vec();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

pub(super) async fn evaluate(args: &EvaluateArgs) -> anyhow::Result<()> {
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
