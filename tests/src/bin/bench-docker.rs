//! `bench-docker`: the docker backend against `kpt fn eval --image` (its
//! `docker run` per call), side by side in one run, printed as markdown.
//!
//! ```sh
//! ./build-images.sh            # release binaries; wrapper-server:dev
//! target/x86_64-unknown-linux-gnu/release/bench-docker --rounds 10
//! ```
//!
//! Each round runs, in turn: kpt's one call; our `eval` cold (a new
//! container: the tools installed, the container created and started, the
//! call, the teardown); our `eval --keep-warm` on a container kept from the
//! round before; and a batch of warm calls through `serve --backend docker`
//! (gRPC client → runner → Unix socket → wrapper → function). It also
//! reads each cold start's create → SERVING time from the runner's
//! `pod ready ms=` line. Images are built here, `FROM scratch`, from the
//! example function, and removed at the end.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use clap::Parser;
use e2e_tests::{bin, build_image_with_files, docker, output_within, remove_images, Wrapper};
use proto::pb::EvaluateFunctionRequest;

#[derive(Debug, Parser)]
#[command(name = "bench-docker", about = "Benchmarks: the docker backend vs kpt")]
struct Cli {
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Warm gRPC calls per round.
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// The init image (./build-images.sh tags wrapper-server:dev).
    #[arg(long, default_value = "wrapper-server:dev")]
    wrapper_image: String,
}

fn package(dir: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("app.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # inline\nspec:\n  replicas: 1\n",
    )?;
    Ok(())
}

/// Runs `cmd`, which must succeed; its wall time and stderr.
fn timed(cmd: &mut Command) -> anyhow::Result<(Duration, String)> {
    let start = Instant::now();
    let out = output_within(cmd, None, Duration::from_secs(120))?;
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(out.status.success(), "{cmd:?} failed: {stderr}");
    Ok((took, stderr))
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The `ms=` of the runner's `pod ready` line in `log`.
fn pod_ready_ms(log: &str) -> Option<Duration> {
    let line = log.lines().find(|l| l.contains("pod ready"))?;
    let rest = &line[line.find(" ms=")? + 4..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    Some(Duration::from_millis(rest[..end].parse().ok()?))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let kpt = e2e_tests::require_kpt()?;
    e2e_tests::require_docker()?;
    let image = format!("krm-bench/example-fn:{}", std::process::id());
    let passwd = tempfile::NamedTempFile::new()?;
    std::fs::write(
        passwd.path(),
        "nobody:x:65534:65534:nobody:/:/sbin/nologin\n",
    )?;
    build_image_with_files(
        &image,
        "FROM scratch\nCOPY example-fn /example-fn\nCOPY passwd /etc/passwd\nENTRYPOINT [\"/example-fn\"]",
        &["example-fn"],
        &[("passwd", passwd.path())],
    )?;
    let result = run(&cli, &kpt, &image).await;
    remove_images(&[image]);
    result
}

async fn run(cli: &Cli, kpt: &Path, image: &str) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let sockets = work.path().join("sockets");
    let pkg = work.path().join("pkg");
    let fr = bin("function-runner");
    let eval = |keep_warm: bool| {
        let mut cmd = Command::new(&fr);
        cmd.env("RUST_LOG", "function_runner=info")
            .arg("eval")
            .arg(&pkg)
            .args(["--image", image])
            .args(["--wrapper-server-image", &cli.wrapper_image])
            .arg("--docker-socket-dir")
            .arg(&sockets);
        if keep_warm {
            cmd.args(["--keep-warm", "10m"]);
        }
        cmd.args(["--", "owner=me"]);
        cmd
    };
    // The warm container for `--keep-warm`, and the runner for gRPC calls.
    package(&pkg)?;
    timed(&mut eval(true))?;
    let sockets_serve = work.path().join("sockets-serve");
    let runner = Wrapper::start_runner(&[
        "--backend",
        "docker",
        "--wrapper-server-image",
        &cli.wrapper_image,
        "--docker-socket-dir",
        sockets_serve.to_str().context("path")?,
        "--metrics-port",
        "0",
    ])?;
    let mut client = runner.client().await?;
    let rl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/resourcelist.yaml"
    ))?;
    let request = || EvaluateFunctionRequest {
        resource_list: rl.clone().into(),
        image: image.to_string(),
        tag: String::new(),
    };
    client.evaluate_function(request()).await?;

    let (mut kpt_t, mut cold_t, mut ready_t, mut kept_t, mut warm_t) =
        (vec![], vec![], vec![], vec![], vec![]);
    for round in 0..cli.rounds {
        package(&pkg)?;
        let (t, _) = timed(
            Command::new(kpt)
                .args(["fn", "eval"])
                .arg(&pkg)
                .args(["--image", image, "--image-pull-policy", "never", "--"])
                .arg("owner=me"),
        )?;
        kpt_t.push(t);
        package(&pkg)?;
        let (t, log) = timed(&mut eval(false))?;
        cold_t.push(t);
        ready_t.push(pod_ready_ms(&log).context("no `pod ready ms=` line")?);
        package(&pkg)?;
        let (t, log) = timed(&mut eval(true))?;
        ensure!(
            log.contains("reusing a kept-warm container"),
            "round {round}: the kept container was not reused: {log}"
        );
        kept_t.push(t);
        for _ in 0..cli.calls {
            let start = Instant::now();
            client.evaluate_function(request()).await?;
            warm_t.push(start.elapsed());
        }
    }
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    let mut runner = runner;
    runner.wait_exit(Duration::from_secs(60)).await?;
    // The kept container: removed by hand (it would idle out in 10 minutes).
    let out = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=krm-fn.dev/image={image}"),
    ])?;
    for id in String::from_utf8_lossy(&out.stdout).lines() {
        let _ = docker(&["rm", "-f", id]);
    }
    for root in [&sockets, &sockets_serve] {
        let root = std::fs::canonicalize(root)?;
        let filter = format!("label=krm-fn.dev/socket-root={}", root.display());
        let out = docker(&["volume", "ls", "-q", "--filter", &filter])?;
        for v in String::from_utf8_lossy(&out.stdout).lines() {
            let _ = docker(&["volume", "rm", v]);
        }
    }

    let kpt_m = median(&mut kpt_t);
    let rows = [
        ("`kpt fn eval --image` (one `docker run`)", kpt_m),
        (
            "ours `eval --image`, cold (whole command)",
            median(&mut cold_t),
        ),
        (
            "ours cold start, create → SERVING (`pod ready ms=`)",
            median(&mut ready_t),
        ),
        (
            "ours `eval --image --keep-warm`, warm (whole command)",
            median(&mut kept_t),
        ),
        (
            "ours warm call through `serve --backend docker` (gRPC)",
            median(&mut warm_t),
        ),
    ];
    println!(
        "{} rounds ({} warm calls each), medians; ratio = kpt / ours\n",
        cli.rounds, cli.calls
    );
    println!("| what | median | kpt / it |\n|---|---:|---:|");
    for (what, t) in rows {
        println!(
            "| {what} | {} | {:.1}× |",
            ms(t),
            kpt_m.as_secs_f64() / t.as_secs_f64()
        );
    }
    Ok(())
}
