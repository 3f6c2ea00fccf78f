//! `bench-runner`: the speed of `function-runner serve` (warm path, cold starts),
//! measured side by side in one run, printed as markdown.
//!
//! ```sh
//! cargo build --release --workspace --bins
//! target/x86_64-unknown-linux-gnu/release/bench-runner warm --rounds 6
//! target/x86_64-unknown-linux-gnu/release/bench-runner cold --calls 1000
//! ```
//!
//! - `warm`: 16 concurrent clients calling a warm process pod through
//!   `serve`, vs the same clients calling a `wrapper-server` around the same
//!   function directly. Rounds alternate A/B, B/A.
//! - `cold`: N concurrent first calls for a cold image through `serve`;
//!   counts pod starts (from the runner's metrics) and completions.
//! - `builtin`: a built-in `set-namespace` call against a warm process pod
//!   running `cat` (the cheapest thing a pod can run), through `serve`: the
//!   p50 of one client's sequential calls, then the throughput of 16.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use clap::{Parser, Subcommand};
use e2e_tests::{evaluator_client, resource_list, Wrapper};
use proto::pb::EvaluateFunctionRequest;
use tokio::task::JoinSet;

#[derive(Debug, Parser)]
#[command(name = "bench-runner", about = "Benchmarks: function-runner serve")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Warm-path throughput: through serve vs direct to the wrapper.
    Warm {
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds per variant per round.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Items in the ResourceList (about 150 bytes each).
        #[arg(long, default_value_t = 7)]
        items: usize,
    },
    /// N concurrent first calls for a cold image.
    Cold {
        #[arg(long, default_value_t = 1000)]
        calls: usize,
    },
    /// The cost of tracing: p50 of one client's sequential calls to a
    /// warm process pod's `cat` through serve, with tracing off, on (a real
    /// OTLP receiver, in this process) and on with the collector down.
    Tracing {
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        /// Sequential calls per variant per round.
        #[arg(long, default_value_t = 2000)]
        calls: usize,
    },
    /// A built-in set-namespace call against a warm process pod's `cat`
    /// call, through serve: p50 of one client, then 16-client throughput.
    Builtin {
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        /// Sequential calls per variant per round (for the p50).
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds per variant per round (throughput).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Warm {
            rounds,
            clients,
            seconds,
            items,
        } => warm(rounds, clients, Duration::from_secs_f64(seconds), items).await,
        Cmd::Cold { calls } => cold(calls).await,
        Cmd::Builtin {
            rounds,
            calls,
            clients,
            seconds,
        } => builtin(rounds, calls, clients, Duration::from_secs_f64(seconds)).await,
        Cmd::Tracing { rounds, calls } => tracing_cost(rounds, calls).await,
    }
}

/// A directory with a `cat-fn` executable for the process backend.
fn functions_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("cat-fn");
    std::fs::write(&path, "#!/bin/sh\nexec cat\n")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// The image of the process pod running `cat`.
const CAT_IMAGE: &str = "example.com/fns/cat-fn:v1";

fn request(rl: &bytes::Bytes) -> EvaluateFunctionRequest {
    request_for(CAT_IMAGE, rl)
}

fn request_for(image: &str, rl: &bytes::Bytes) -> EvaluateFunctionRequest {
    EvaluateFunctionRequest {
        resource_list: rl.clone(),
        image: image.into(),
        tag: String::new(),
    }
}

/// Calls per second with `clients` concurrent clients (one connection each)
/// for `duration`.
async fn throughput(
    endpoint: &str,
    clients: usize,
    duration: Duration,
    rl: &bytes::Bytes,
) -> anyhow::Result<f64> {
    throughput_of(endpoint, CAT_IMAGE, clients, duration, rl).await
}

/// [`throughput`] of calls for `image`.
async fn throughput_of(
    endpoint: &str,
    image: &'static str,
    clients: usize,
    duration: Duration,
    rl: &bytes::Bytes,
) -> anyhow::Result<f64> {
    let mut set = JoinSet::new();
    let start = Instant::now();
    for _ in 0..clients {
        let mut client = evaluator_client(endpoint, 64 << 20).await?;
        let rl = rl.clone();
        set.spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < duration {
                client.evaluate_function(request_for(image, &rl)).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut total = 0;
    while let Some(n) = set.join_next().await {
        total += n??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

async fn warm(
    rounds: usize,
    clients: usize,
    duration: Duration,
    items: usize,
) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let cat = fns.path().join("cat-fn");
    let direct = Wrapper::start(&[], &[cat.to_str().context("path")?])?;
    let runner = Wrapper::start_runner(&[
        "--metrics-port",
        "0",
        "--process-functions",
        fns.path().to_str().context("path")?,
    ])?;
    let rl = bytes::Bytes::from(resource_list(items));
    // Warm both: the runner starts its pod on the first call.
    for endpoint in [direct.endpoint(), runner.endpoint()] {
        evaluator_client(&endpoint, 64 << 20)
            .await?
            .evaluate_function(request(&rl))
            .await?;
    }
    println!(
        "warm path, {clients} clients, {} B ResourceList, {:.1} s per variant per round\n",
        rl.len(),
        duration.as_secs_f64()
    );
    println!("| round | direct wrapper calls/s | through serve calls/s | ratio |");
    println!("|---|---|---|---|");
    let (mut sum_direct, mut sum_serve) = (0.0, 0.0);
    for round in 0..rounds {
        let (d, s) = if round % 2 == 0 {
            let d = throughput(&direct.endpoint(), clients, duration, &rl).await?;
            let s = throughput(&runner.endpoint(), clients, duration, &rl).await?;
            (d, s)
        } else {
            let s = throughput(&runner.endpoint(), clients, duration, &rl).await?;
            let d = throughput(&direct.endpoint(), clients, duration, &rl).await?;
            (d, s)
        };
        sum_direct += d;
        sum_serve += s;
        println!("| {round} | {d:.0} | {s:.0} | {:.3} |", s / d);
    }
    println!(
        "| all | {:.0} | {:.0} | **{:.3}** |",
        sum_direct / rounds as f64,
        sum_serve / rounds as f64,
        sum_serve / sum_direct
    );
    Ok(())
}

async fn metrics(port: u16) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let mut text = String::new();
    conn.read_to_string(&mut text).await?;
    Ok(text)
}

async fn cold(calls: usize) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let port_arg = port.to_string();
    let runner = Wrapper::start_runner(&[
        "--metrics-port",
        &port_arg,
        "--process-functions",
        fns.path().to_str().context("path")?,
    ])?;
    let rl = bytes::Bytes::from(resource_list(7));
    // One HTTP/2 connection carries all calls, as porch-server's does.
    let client = evaluator_client(&runner.endpoint(), 64 << 20).await?;
    let start = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..calls {
        let mut client = client.clone();
        let rl = rl.clone();
        set.spawn(async move { client.evaluate_function(request(&rl)).await });
    }
    let mut ok = 0;
    while let Some(res) = set.join_next().await {
        if res?.is_ok() {
            ok += 1;
        }
    }
    let elapsed = start.elapsed();
    let text = metrics(port).await?;
    let starts = text
        .lines()
        .find(|l| l.starts_with("function_runner_pod_starts_total{outcome=\"ok\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or("0")
        .to_string();
    println!("| concurrent first calls | completed OK | pod starts | wall time |");
    println!("|---|---|---|---|");
    println!(
        "| {calls} | {ok} | {starts} | {:.0} ms |",
        elapsed.as_secs_f64() * 1000.0
    );
    ensure!(ok == calls, "{} calls failed", calls - ok);
    ensure!(
        starts == "1",
        "expected exactly one pod start, saw {starts}"
    );
    Ok(())
}

/// The median latency of `calls` sequential calls for `image`, in µs.
async fn p50(endpoint: &str, image: &str, calls: usize, rl: &bytes::Bytes) -> anyhow::Result<f64> {
    let mut client = evaluator_client(endpoint, 64 << 20).await?;
    let mut took = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        client.evaluate_function(request_for(image, rl)).await?;
        took.push(start.elapsed());
    }
    took.sort();
    Ok(took[calls / 2].as_secs_f64() * 1e6)
}

const BUILTIN_IMAGE: &str = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2";

async fn builtin(
    rounds: usize,
    calls: usize,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<()> {
    ensure!(
        calls > 0 && rounds > 0,
        "--calls and --rounds must be positive"
    );
    let fns = functions_dir()?;
    let runner = Wrapper::start_runner(&[
        "--metrics-port",
        "0",
        "--process-functions",
        fns.path().to_str().context("path")?,
    ])?;
    // 1 KiB: seven ConfigMaps and set-namespace's config.
    let mut text = resource_list(7);
    text.push_str("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n    namespace: prod\n");
    let rl = bytes::Bytes::from(text);
    let endpoint = runner.endpoint();
    // Warm the pod, and check that the built-in answers.
    for image in [CAT_IMAGE, BUILTIN_IMAGE] {
        let resp = evaluator_client(&endpoint, 64 << 20)
            .await?
            .evaluate_function(request_for(image, &rl))
            .await?
            .into_inner();
        ensure!(!resp.resource_list.is_empty(), "{image}: empty answer");
    }
    println!(
        "built-in set-namespace vs a warm process pod's cat, through serve, {} B ResourceList\n",
        rl.len()
    );
    println!("| round | cat p50 µs | built-in p50 µs | p50 ratio (cat/built-in) | cat calls/s ({clients} clients) | built-in calls/s | throughput ratio (built-in/cat) |");
    println!("|---|---|---|---|---|---|---|");
    let mut all = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [CAT_IMAGE, BUILTIN_IMAGE]
        } else {
            [BUILTIN_IMAGE, CAT_IMAGE]
        };
        let mut lat = [0.0; 2];
        let mut tput = [0.0; 2];
        for image in order {
            let i = usize::from(image == BUILTIN_IMAGE);
            lat[i] = p50(&endpoint, image, calls, &rl).await?;
            tput[i] = throughput_of(&endpoint, image, clients, duration, &rl).await?;
        }
        println!(
            "| {round} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.1} |",
            lat[0],
            lat[1],
            lat[0] / lat[1],
            tput[0],
            tput[1],
            tput[1] / tput[0]
        );
        all.push((lat, tput));
    }
    /// A round's p50s and throughputs, cat first.
    type Round = ([f64; 2], [f64; 2]);
    let rounds_run: &[Round] = &all;
    let mean =
        |f: fn(&Round) -> f64| rounds_run.iter().map(f).sum::<f64>() / rounds_run.len() as f64;
    let (lc, lb) = (mean(|r| r.0[0]), mean(|r| r.0[1]));
    let (tc, tb) = (mean(|r| r.1[0]), mean(|r| r.1[1]));
    println!(
        "| mean | {lc:.0} | {lb:.0} | **{:.1}** | {tc:.0} | {tb:.0} | **{:.1}** |",
        lc / lb,
        tb / tc
    );
    Ok(())
}

/// See [`Cmd::Tracing`].
async fn tracing_cost(rounds: usize, calls: usize) -> anyhow::Result<()> {
    ensure!(
        calls > 0 && rounds > 0,
        "--calls and --rounds must be positive"
    );
    let fns = functions_dir()?;
    let receiver =
        e2e_tests::otlp::Receiver::grpc(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?;
    let dead_endpoint = format!("http://{}", dead.local_addr()?);
    drop(dead);
    let start = |endpoint: Option<&str>| -> anyhow::Result<Wrapper> {
        let mut cmd = std::process::Command::new(e2e_tests::bin("function-runner"));
        cmd.args([
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--metrics-port",
            "0",
        ])
        .arg("--process-functions")
        .arg(fns.path());
        if let Some(endpoint) = endpoint {
            cmd.env("OTEL_TRACES_EXPORTER", "otlp")
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
        }
        Wrapper::spawn(cmd, "function-runner serving")
    };
    let variants = [
        ("off", start(None)?),
        ("on", start(Some(&receiver.endpoint()))?),
        ("collector down", start(Some(&dead_endpoint))?),
    ];
    let rl = bytes::Bytes::from(resource_list(7));
    for (_, runner) in &variants {
        // Warm the pod.
        evaluator_client(&runner.endpoint(), 64 << 20)
            .await?
            .evaluate_function(request(&rl))
            .await?;
    }
    println!(
        "tracing off, on, and on with the collector down: p50 of {calls} sequential calls to a warm process pod's cat through serve, {} B ResourceList\n",
        rl.len()
    );
    println!("| round | off p50 µs | on p50 µs | down p50 µs | on/off | down/off |");
    println!("|---|---|---|---|---|---|");
    let mut sums = [0.0; 3];
    for round in 0..rounds {
        let mut lat = [0.0; 3];
        // Each round starts with the next variant.
        for k in 0..3 {
            let i = (round + k) % 3;
            lat[i] = p50(&variants[i].1.endpoint(), CAT_IMAGE, calls, &rl).await?;
        }
        for i in 0..3 {
            sums[i] += lat[i];
        }
        println!(
            "| {round} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            lat[0],
            lat[1],
            lat[2],
            lat[1] / lat[0],
            lat[2] / lat[0]
        );
    }
    let n = rounds as f64;
    println!(
        "| mean | {:.0} | {:.0} | {:.0} | **{:.2}** | **{:.2}** |",
        sums[0] / n,
        sums[1] / n,
        sums[2] / n,
        sums[1] / sums[0],
        sums[2] / sums[0]
    );
    // Let the last batch go out before counting.
    tokio::time::sleep(Duration::from_secs(6)).await;
    println!(
        "\nspans received with tracing on: {} (calls made: {})",
        receiver.spans().len(),
        rounds * calls + 1
    );
    Ok(())
}
