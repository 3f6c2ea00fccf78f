//! `footprint`: binary sizes, idle RSS, exec to SERVING, RSS growth during a
//! large call.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use e2e_tests::{bin, health_status, Wrapper};

use super::calls::{call_wrapper, connect, payload};
use super::stats::{met, path_str, vm_kib, which, Samples};
use super::{FootprintArgs, SERVING};

/// Polls health until `""` is SERVING.
pub(super) async fn wait_serving(endpoint: &str, timeout: Duration) -> anyhow::Result<()> {
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

pub(super) async fn footprint(args: &FootprintArgs) -> anyhow::Result<()> {
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
