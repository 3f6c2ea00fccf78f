//! `nodelay`: Nagle on the server's accepted sockets: the release binary vs a
//! tonic echo server with Nagle on and off, and direct spawn.

use std::time::{Duration, Instant};

use anyhow::ensure;
use e2e_tests::health_status;

use super::calls::{call_tokio, call_wrapper, connect, payload};
use super::evaluate::{round_order, start_wrapper};
use super::pieces::start_echo;
use super::stats::{size_label, which, Samples};
use super::{NodelayArgs, SERVING};

pub(super) async fn nodelay(args: &NodelayArgs) -> anyhow::Result<()> {
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
