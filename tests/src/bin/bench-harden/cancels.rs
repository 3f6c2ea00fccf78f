//! Item 2: cancels.
//!
//! One channel, 8 steady callers and 16 that cancel after 0-50 ms, for
//! `--storm-secs`, to a wrapper (`sh -c 'sleep 0.05; cat'`) and through a
//! runner: steady ok/failed by code; the runner's pods started (its
//! wrapper-server children sampled every 50 ms, and its pod-start metric).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::grpc::{call, connect, request, small_rl, Hist};
use super::procs::{functions_dir, pods_of, track};
use super::{Bins, Cli, Report, IMAGE_SLEEP_CAT};

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

pub(super) async fn item2(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
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
