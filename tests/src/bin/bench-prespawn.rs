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
//!   pre-spawn, without, a direct spawn of `cat` by the client, and the
//!   floor: the client starting `cat` a little early, then timing from its
//!   first byte written (`--cat-only`: this measure alone);
//! - Python functions, sequential, calls `--gap-ms` apart: a PyYAML label
//!   setter and, with `--kubed PATH`, the PyPI package `kubed-krm` (its
//!   `kubectl-kubed` entry point, a `Filter` functionConfig). p50 through
//!   the wrapper with pre-spawn and without, and the floor: the client
//!   itself starting the function `--gap-ms` early, then writing its input
//!   and waiting for its exit (what a free wrapper would take), beside the
//!   client starting it cold;
//! - `cat` at 1 KiB, 16 concurrent clients on one connection: calls per
//!   second with pre-spawn and without.
//!
//! kubed-krm, in a venv (the functions run with the venv's interpreter;
//! see BENCHMARKS.md on why a venv):
//!
//! ```sh
//! python3 -m venv /tmp/kv && /tmp/kv/bin/pip install kubed-krm==0.0.8 pyyaml
//! bench-prespawn --python /tmp/kv/bin/python --kubed /tmp/kv/bin/kubectl-kubed
//! ```
//!
//! Also printed: the wrapper's own CPU per `cat` call (not its functions'),
//! calls 120 ms apart, from /proc in clock ticks (10 ms: with 50 calls per
//! variant per round, ±0.2 ms per call in one round).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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
    /// Sequential `cat` calls per variant per round (a fifth of it for the
    /// Python functions).
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// `--prespawn N` of the pre-spawning wrappers.
    #[arg(long, default_value_t = 2)]
    prespawn: usize,
    /// Concurrent clients for throughput.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Milliseconds between the paced Python calls (every variant): time
    /// for the pool to start a replacement, as between a pipeline's calls;
    /// also how early the client starts the function for the floor.
    #[arg(long, default_value_t = 250)]
    gap_ms: u64,
    /// Seconds per throughput variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// The Python interpreter, with PyYAML (default: `python3`'s).
    #[arg(long)]
    python: Option<PathBuf>,
    /// kubed-krm's `kubectl-kubed` entry point: measures kubed-krm too.
    #[arg(long)]
    kubed: Option<PathBuf>,
    /// Only the sequential `cat` latencies (e.g. under `perf record`).
    #[arg(long)]
    cat_only: bool,
    /// Another wrapper-server binary (repeatable; e.g. an older build):
    /// its pre-spawning server is measured beside this one's in the
    /// sequential `cat` rotation.
    #[arg(long = "other-wrapper")]
    other_wrappers: Vec<PathBuf>,
    /// Milliseconds between the sequential `cat` calls (every variant;
    /// 0: back to back, the pool's refill beside the next call).
    #[arg(long, default_value_t = 0)]
    cat_gap_ms: u64,
}

const PYTHON_FN: &str = r#"import sys, yaml
rl = yaml.safe_load(sys.stdin)
for item in rl.get("items") or []:
    item.setdefault("metadata", {}).setdefault("labels", {})["bench"] = "yes"
yaml.safe_dump(rl, sys.stdout)
"#;

/// Between the calls whose CPU is counted: more than twice the wrapper's
/// 50 ms between orphan sweeps.
const CPU_GAP: Duration = Duration::from_millis(120);

/// kubed-krm's `Filter` (group `krm.kubed.io`): keeps the items it
/// targets. The annotation makes it answer with a ResourceList.
const KUBED_FUNCTION_CONFIG: &str = r#"functionConfig:
  apiVersion: krm.kubed.io/v1
  kind: Filter
  metadata:
    name: keep-some
    annotations:
      config.kubernetes.io/function: |
        exec:
          path: kubectl-kubed
  target:
    kind: ConfigMap
    name: cm-[0-3]
"#;

struct Server {
    wrapper: Wrapper,
    client: FunctionEvaluatorClient<Channel>,
}

impl Server {
    /// CPU time the wrapper process itself used so far (user + system,
    /// not its functions': those are its children's), from /proc.
    fn cpu(&self) -> anyhow::Result<Duration> {
        let pid = self.wrapper.child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command, which is in parentheses and may hold
        // spaces: utime and stime are the 14th and 15th of the line.
        let rest = stat.rsplit_once(')').context("stat")?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?.context("CLK_TCK")?;
        Ok(Duration::from_secs_f64(ticks as f64 / hz as f64))
    }
}

async fn server(prespawn: usize, entrypoint: &[&str]) -> anyhow::Result<Server> {
    server_of(&e2e_tests::bin("wrapper-server"), prespawn, entrypoint).await
}

/// [`server`], of the wrapper-server binary at `path`.
async fn server_of(
    path: &std::path::Path,
    prespawn: usize,
    entrypoint: &[&str],
) -> anyhow::Result<Server> {
    let mut cmd = Command::new(path);
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let n = prespawn.to_string();
    let wrapper = Wrapper::start_command(cmd, &["--prespawn", &n], entrypoint)
        .with_context(|| format!("starting {}", path.display()))?;
    let client = evaluator_client(&wrapper.endpoint(), 64 << 20).await?;
    Ok(Server { wrapper, client })
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

/// Starts `argv` with its three streams piped.
fn start(argv: &[&str]) -> anyhow::Result<Child> {
    Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", argv[0]))
}

/// Gives a started function `rl` on stdin and waits for its output and its
/// exit, as the wrapper does (stderr drained on a thread so it cannot
/// block). Returns the time from the first byte written.
fn drive(mut child: Child, rl: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut stderr = child.stderr.take().context("stderr")?;
    let drain = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stderr.read_to_end(&mut buf).map(|_| buf)
    });
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(rl.as_bytes())?;
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .context("stdout")?
        .read_to_end(&mut out)?;
    let status = child.wait()?;
    let elapsed = start.elapsed();
    let err = drain.join().expect("stderr thread")?;
    anyhow::ensure!(
        status.success() && !out.is_empty(),
        "function failed ({status}): {}",
        String::from_utf8_lossy(&err)
    );
    Ok(elapsed)
}

/// How long before its call the floor's `cat` is started: time for it to
/// reach its first read, as a pre-spawned one has.
const CAT_EARLY: Duration = Duration::from_millis(3);

/// The client running `cat` itself on `rl`: stdin written, stdout read to
/// the end. `early`: started that long before its input, and timed from
/// its first byte written (the floor of a pre-spawned call: what a wrapper
/// with no cost of its own would add to its pre-spawned `cat`); `None`:
/// timed from before the spawn (a direct spawn).
fn run_cat(rl: &str, early: Option<Duration>) -> anyhow::Result<Duration> {
    let mut start = Instant::now();
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    if let Some(early) = early {
        std::thread::sleep(early);
        start = Instant::now();
    }
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(rl.as_bytes())?;
    let out = child.wait_with_output()?;
    let elapsed = start.elapsed();
    anyhow::ensure!(out.stdout.len() == rl.len(), "cat answered short");
    Ok(elapsed)
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
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

/// One Python function under test, its wrappers and its samples.
struct PyFn {
    name: &'static str,
    argv: Vec<String>,
    rl: String,
    pre: Server,
    no: Server,
    /// Paced: through the wrapper with pre-spawn, without; the client
    /// starting it `gap` early (the floor), and cold.
    paced: [Vec<Duration>; 4],
    /// Back to back, through the wrapper with pre-spawn and without.
    back_to_back: [Vec<Duration>; 2],
}

impl PyFn {
    async fn new(
        name: &'static str,
        argv: Vec<String>,
        rl: String,
        prespawn: usize,
    ) -> anyhow::Result<PyFn> {
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (mut pre, mut no) = (server(prespawn, &args).await?, server(0, &args).await?);
        // Warm-up: page in, fill the pools, and check that it answers.
        for _ in 0..3 {
            call(&mut pre.client, &rl).await?;
            call(&mut no.client, &rl).await?;
        }
        drive(start(&args)?, &rl)?;
        Ok(PyFn {
            name,
            argv,
            rl,
            pre,
            no,
            paced: Default::default(),
            back_to_back: Default::default(),
        })
    }

    async fn round(&mut self, flip: bool, calls: usize, gap: Duration) -> anyhow::Result<()> {
        let args: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        for step in 0..2 {
            let pre = (step == 0) != flip;
            let (server, samples) = if pre {
                (&mut self.pre, &mut self.back_to_back[0])
            } else {
                (&mut self.no, &mut self.back_to_back[1])
            };
            for _ in 0..calls {
                samples.push(call(&mut server.client, &self.rl).await?);
            }
        }
        for step in 0..4 {
            let which = if flip { 3 - step } else { step };
            for _ in 0..calls {
                let sample = match which {
                    0 => {
                        tokio::time::sleep(gap).await;
                        call(&mut self.pre.client, &self.rl).await?
                    }
                    1 => {
                        tokio::time::sleep(gap).await;
                        call(&mut self.no.client, &self.rl).await?
                    }
                    2 => {
                        let child = start(&args)?;
                        tokio::time::sleep(gap).await;
                        drive(child, &self.rl)?
                    }
                    _ => {
                        tokio::time::sleep(gap).await;
                        // From before the spawn, as a wrapper without
                        // pre-spawn counts it.
                        let t0 = Instant::now();
                        let child = start(&args)?;
                        let spawned = t0.elapsed();
                        spawned + drive(child, &self.rl)?
                    }
                };
                self.paced[which].push(sample);
            }
        }
        Ok(())
    }

    fn report(self, gap_ms: u64) {
        let [pre, no, floor, cold] = self.paced.map(p50);
        println!(
            "| {}, calls {gap_ms} ms apart | {} | {} | {} | {} | pre / without {:.3}×; floor / cold {:.3}×; pre − floor {:+.2} ms |",
            self.name,
            ms(pre),
            ms(no),
            ms(floor),
            ms(cold),
            ratio(pre, no),
            ratio(floor, cold),
            (pre.as_secs_f64() - floor.as_secs_f64()) * 1000.0,
        );
        let [pre, no] = self.back_to_back.map(p50);
        println!(
            "| {}, back to back | {} | {} | | | pre / without {:.3}× |",
            self.name,
            ms(pre),
            ms(no),
            ratio(pre, no)
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let gap = Duration::from_millis(cli.gap_ms);
    // ~1 KiB: the size of resource_list's 7 items.
    let small = resource_list(7);
    let dir = tempfile::tempdir()?;
    let py = dir.path().join("label.py");
    std::fs::write(&py, PYTHON_FN)?;
    let python = match &cli.python {
        Some(p) => p.to_str().context("--python: not UTF-8")?.to_string(),
        None => which_python()?,
    };
    let py_calls = (cli.calls / 5).max(1);

    let mut cat_pre = server(cli.prespawn, &["cat"]).await?;
    let mut cat_no = server(0, &["cat"]).await?;
    let mut others = Vec::new();
    for path in &cli.other_wrappers {
        others.push((server_of(path, cli.prespawn, &["cat"]).await?, Vec::new()));
    }
    let mut pyfns = vec![
        PyFn::new(
            "Python (PyYAML label setter)",
            vec![python.clone(), py.to_str().context("path")?.to_string()],
            small.clone(),
            cli.prespawn,
        )
        .await?,
    ];
    if let Some(kubed) = &cli.kubed {
        let kubed = kubed.to_str().context("--kubed: not UTF-8")?.to_string();
        pyfns.push(
            PyFn::new(
                "kubed-krm (`Filter`)",
                vec![kubed],
                format!("{small}{KUBED_FUNCTION_CONFIG}"),
                cli.prespawn,
            )
            .await
            .context("kubed-krm")?,
        );
    }
    // Warm-up: page in, fill the pools.
    for s in [&mut cat_pre, &mut cat_no]
        .into_iter()
        .chain(others.iter_mut().map(|(s, _)| s))
    {
        for _ in 0..3 {
            call(&mut s.client, &small).await?;
        }
    }
    let (mut lat_pre, mut lat_no, mut lat_direct, mut lat_early) = (vec![], vec![], vec![], vec![]);
    // The wrappers' own CPU over their paced `cat` calls.
    let (mut cpu_pre, mut cpu_no) = (Duration::ZERO, Duration::ZERO);
    let (mut tput_pre, mut tput_no) = (0.0, 0.0);
    for round in 0..cli.rounds {
        let flip = round % 2 == 1;
        let variants = 4 + others.len();
        for step in 0..variants {
            let which = if flip { variants - 1 - step } else { step };
            for _ in 0..cli.calls {
                if cli.cat_gap_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(cli.cat_gap_ms)).await;
                }
                match which {
                    0 => lat_pre.push(call(&mut cat_pre.client, &small).await?),
                    1 => lat_no.push(call(&mut cat_no.client, &small).await?),
                    2 => lat_direct.push(run_cat(&small, None)?),
                    3 => lat_early.push(run_cat(&small, Some(CAT_EARLY))?),
                    n => {
                        let (server, lat) = &mut others[n - 4];
                        lat.push(call(&mut server.client, &small).await?);
                    }
                }
            }
        }
        if cli.cat_only {
            eprintln!("round {}/{} done", round + 1, cli.rounds);
            continue;
        }
        // The wrappers' own CPU per call, calls paced so that each gets the
        // orphan sweeps it would alone (a sweep runs at most every 50 ms);
        // each call's are over before the next, and before the last read.
        for step in 0..2 {
            let pre = (step == 0) != flip;
            let (server, cpu) = if pre {
                (&mut cat_pre, &mut cpu_pre)
            } else {
                (&mut cat_no, &mut cpu_no)
            };
            let before = server.cpu()?;
            for _ in 0..cli.calls {
                call(&mut server.client, &small).await?;
                tokio::time::sleep(CPU_GAP).await;
            }
            *cpu += server.cpu()? - before;
        }
        for f in &mut pyfns {
            f.round(flip, py_calls, gap).await?;
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
    let (pre, no, direct, early) = (p50(lat_pre), p50(lat_no), p50(lat_direct), p50(lat_early));
    println!(
        "{} rounds; `--prespawn {}`; {} B ResourceList; {} sequential calls per variant per round ({py_calls} for Python); Python: {python}\n",
        cli.rounds,
        cli.prespawn,
        small.len(),
        cli.calls,
    );
    println!(
        "| measure | with pre-spawn | without | client: started early (floor) / direct spawn | client: cold | ratio |\n|---|---:|---:|---:|---:|---|"
    );
    println!(
        "| `cat` p50 | {} | {} | {} / {} | | pre / direct {:.2}×, pre / without {:.2}×; pre − floor {:+.3} ms |",
        ms(pre),
        ms(no),
        ms(early),
        ms(direct),
        ratio(pre, direct),
        ratio(pre, no),
        (pre.as_secs_f64() - early.as_secs_f64()) * 1000.0,
    );
    for (path, (_, lat)) in cli.other_wrappers.iter().zip(others) {
        let other = p50(lat);
        println!(
            "| `cat` p50, pre-spawn by {} | {} | | {} / {} | | pre / direct {:.2}×; pre − floor {:+.3} ms |",
            path.display(),
            ms(other),
            ms(early),
            ms(direct),
            ratio(other, direct),
            (other.as_secs_f64() - early.as_secs_f64()) * 1000.0,
        );
    }
    if cli.cat_only {
        return Ok(());
    }
    let per_call = |cpu: Duration| cpu.as_secs_f64() * 1000.0 / (cli.rounds * cli.calls) as f64;
    println!(
        "| `cat`, the wrapper's own CPU per call, calls 120 ms apart | {:.2} ms | {:.2} ms | | | pre / without {:.2}× |",
        per_call(cpu_pre),
        per_call(cpu_no),
        per_call(cpu_pre) / per_call(cpu_no)
    );
    for f in pyfns {
        f.report(cli.gap_ms);
    }
    println!(
        "| `cat`, {} clients, calls/s | {:.0} | {:.0} | | | pre / without {:.2}× |",
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
