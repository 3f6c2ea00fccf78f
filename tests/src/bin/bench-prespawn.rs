//! `bench-prespawn`: wrapper-server with `--prespawn` against without, and
//! against the client spawning the function itself, side by side in one
//! run, printed as markdown (#13).
//!
//! ```sh
//! cargo build --release --workspace --bins
//! target/x86_64-unknown-linux-gnu/release/bench-prespawn --rounds 6
//! ```
//!
//! Three measures, each alternating its variants per round (A/B, then B/A):
//! - `cat` at 1 KiB, sequential calls: p50 through the wrapper with
//!   pre-spawn, without, and a direct spawn of `cat` by the client;
//! - a Python function (PyYAML, sets a label on every item), sequential:
//!   p50 with pre-spawn and without;
//! - `cat` at 1 KiB, 16 concurrent clients on one connection: calls per
//!   second with pre-spawn and without.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e_tests::{evaluator_client, resource_list, Wrapper};
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use proto::pb::EvaluateFunctionRequest;
use tonic::transport::Channel;

#[derive(Debug, Parser)]
#[command(
    name = "bench-prespawn",
    about = "Benchmarks: wrapper-server --prespawn"
)]
struct Cli {
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Sequential calls per variant per round.
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// `--prespawn N` of the pre-spawning wrappers.
    #[arg(long, default_value_t = 2)]
    prespawn: usize,
    /// Concurrent clients for throughput.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Milliseconds between the paced Python calls (both variants): time
    /// for the pool to start a replacement, as between a pipeline's calls.
    #[arg(long, default_value_t = 250)]
    gap_ms: u64,
    /// Seconds per throughput variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
}

const PYTHON_FN: &str = r#"import sys, yaml
rl = yaml.safe_load(sys.stdin)
for item in rl.get("items") or []:
    item.setdefault("metadata", {}).setdefault("labels", {})["bench"] = "yes"
yaml.safe_dump(rl, sys.stdout)
"#;

struct Server {
    _wrapper: Wrapper,
    client: FunctionEvaluatorClient<Channel>,
}

async fn server(prespawn: usize, entrypoint: &[&str]) -> anyhow::Result<Server> {
    let n = prespawn.to_string();
    let wrapper = Wrapper::start(&["--prespawn", &n], entrypoint)?;
    let client = evaluator_client(&wrapper.endpoint(), 64 << 20).await?;
    Ok(Server {
        _wrapper: wrapper,
        client,
    })
}

fn request(rl: &str) -> EvaluateFunctionRequest {
    EvaluateFunctionRequest {
        resource_list: rl.to_string().into(),
        image: String::new(),
        tag: String::new(),
    }
}

async fn call(client: &mut FunctionEvaluatorClient<Channel>, rl: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    client.evaluate_function(request(rl)).await?;
    Ok(start.elapsed())
}

/// The client spawning `cat` itself: stdin written, stdout read to the end.
fn direct_cat(rl: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(rl.as_bytes())?;
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.stdout.len() == rl.len(), "cat answered short");
    Ok(start.elapsed())
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn throughput(
    client: &FunctionEvaluatorClient<Channel>,
    rl: &str,
    clients: usize,
    secs: f64,
) -> anyhow::Result<f64> {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let mut client = client.clone();
        let rl = rl.to_string();
        tasks.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                client.evaluate_function(request(&rl)).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut total = 0;
    while let Some(n) = tasks.join_next().await {
        total += n??;
    }
    Ok(total as f64 / secs)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // ~1 KiB: the size of resource_list's 7 items.
    let small = resource_list(7);
    let dir = tempfile::tempdir()?;
    let py = dir.path().join("label.py");
    std::fs::write(&py, PYTHON_FN)?;
    let python = which_python()?;
    let py_argv = [python.as_str(), py.to_str().context("path")?];

    let mut cat_pre = server(cli.prespawn, &["cat"]).await?;
    let mut cat_no = server(0, &["cat"]).await?;
    let mut py_pre = server(cli.prespawn, &py_argv).await?;
    let mut py_no = server(0, &py_argv).await?;
    // Warm-up: page in, fill the pools.
    for s in [&mut cat_pre, &mut cat_no, &mut py_pre, &mut py_no] {
        for _ in 0..3 {
            call(&mut s.client, &small).await?;
        }
    }
    let (mut lat_pre, mut lat_no, mut lat_direct) = (vec![], vec![], vec![]);
    let (mut py_lat_pre, mut py_lat_no) = (vec![], vec![]);
    let (mut py_paced_pre, mut py_paced_no) = (vec![], vec![]);
    let (mut tput_pre, mut tput_no) = (0.0, 0.0);
    for round in 0..cli.rounds {
        let flip = round % 2 == 1;
        for step in 0..3 {
            let which = if flip { 2 - step } else { step };
            for _ in 0..cli.calls {
                match which {
                    0 => lat_pre.push(call(&mut cat_pre.client, &small).await?),
                    1 => lat_no.push(call(&mut cat_no.client, &small).await?),
                    _ => lat_direct.push(direct_cat(&small)?),
                }
            }
        }
        for step in 0..2 {
            let pre = (step == 0) != flip;
            for _ in 0..cli.calls / 5 {
                if pre {
                    py_lat_pre.push(call(&mut py_pre.client, &small).await?);
                } else {
                    py_lat_no.push(call(&mut py_no.client, &small).await?);
                }
            }
            for _ in 0..cli.calls / 5 {
                tokio::time::sleep(Duration::from_millis(cli.gap_ms)).await;
                if pre {
                    py_paced_pre.push(call(&mut py_pre.client, &small).await?);
                } else {
                    py_paced_no.push(call(&mut py_no.client, &small).await?);
                }
            }
        }
        for step in 0..2 {
            let pre = (step == 0) != flip;
            let server = if pre { &cat_pre } else { &cat_no };
            let t = throughput(&server.client, &small, cli.clients, cli.seconds).await?;
            if pre {
                tput_pre += t / cli.rounds as f64;
            } else {
                tput_no += t / cli.rounds as f64;
            }
        }
        eprintln!("round {}/{} done", round + 1, cli.rounds);
    }
    let (pre, no, direct) = (p50(lat_pre), p50(lat_no), p50(lat_direct));
    let (py_pre_p50, py_no_p50) = (p50(py_lat_pre), p50(py_lat_no));
    let (paced_pre, paced_no) = (p50(py_paced_pre), p50(py_paced_no));
    println!(
        "{} rounds; `--prespawn {}`; {} B ResourceList; {} sequential calls per variant per round ({} for Python)\n",
        cli.rounds,
        cli.prespawn,
        small.len(),
        cli.calls,
        cli.calls / 5
    );
    println!(
        "| measure | with pre-spawn | without | direct spawn | ratio |\n|---|---:|---:|---:|---|"
    );
    println!(
        "| `cat` p50 | {} | {} | {} | pre / direct {:.2}×, pre / without {:.2}× |",
        ms(pre),
        ms(no),
        ms(direct),
        pre.as_secs_f64() / direct.as_secs_f64(),
        pre.as_secs_f64() / no.as_secs_f64()
    );
    println!(
        "| Python (PyYAML) p50, calls {} ms apart | {} | {} | | pre / without {:.2}× |",
        cli.gap_ms,
        ms(paced_pre),
        ms(paced_no),
        paced_pre.as_secs_f64() / paced_no.as_secs_f64()
    );
    println!(
        "| Python (PyYAML) p50, back to back | {} | {} | | pre / without {:.2}× |",
        ms(py_pre_p50),
        ms(py_no_p50),
        py_pre_p50.as_secs_f64() / py_no_p50.as_secs_f64()
    );
    println!(
        "| `cat`, {} clients, calls/s | {:.0} | {:.0} | | pre / without {:.2}× |",
        cli.clients,
        tput_pre,
        tput_no,
        tput_pre / tput_no
    );
    Ok(())
}

/// The Python with PyYAML (`python3`).
fn which_python() -> anyhow::Result<String> {
    let out = Command::new("python3")
        .args(["-c", "import sys, yaml; print(sys.executable)"])
        .output()
        .context("python3")?;
    anyhow::ensure!(out.status.success(), "python3 with PyYAML is needed");
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}
