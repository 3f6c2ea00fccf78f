//! `malloc`: glibc malloc's mmap/trim thresholds: the release binary as is vs
//! with GLIBC_TUNABLES, interleaved: latency, server CPU and RSS per call.

use anyhow::bail;

use super::calls::{call_tokio, call_wrapper, connect, payload};
use super::evaluate::{round_order, start_wrapper, Running};
use super::stats::{process_cpu_ms, size_label, vm_kib, which, Samples};
use super::MallocArgs;

pub(super) async fn malloc(args: &MallocArgs) -> anyhow::Result<()> {
    println!(
        "## malloc: wrapper-server with glibc's default malloc thresholds vs `GLIBC_TUNABLES={}`\n",
        args.tunables
    );
    let program = which("cat")?;
    let envs = [
        Vec::new(),
        vec![("GLIBC_TUNABLES".to_string(), args.tunables.clone())],
    ];
    let names = [
        "release wrapper-server, default malloc",
        "release wrapper-server, GLIBC_TUNABLES",
    ];
    let mut servers = Vec::new();
    for env in &envs {
        let (running, endpoint) = start_wrapper(&program, None, env).await?;
        let pid = match &running {
            Running::Child(w) => w.child.id(),
            Running::Task(_) => bail!("not a child process"),
        };
        let client = connect(&endpoint).await?;
        servers.push((running, client, pid));
    }
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
        let mut cpu = vec![0.0; direct];
        for round in 0..=args.rounds {
            for &i in &round_order(&order, round) {
                let mut s = Samples::default();
                if i == direct {
                    for _ in 0..calls {
                        s.push(call_tokio(&program, &input).await?);
                    }
                } else {
                    let (_, client, pid) = &mut servers[i];
                    let cpu0 = process_cpu_ms(*pid)?;
                    for _ in 0..calls {
                        s.push(call_wrapper(client, &input).await?);
                    }
                    if round > 0 {
                        cpu[i] += process_cpu_ms(*pid)? - cpu0;
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
        println!("| variant | p50 ms | p90 ms | p50 / direct | server CPU ms per call | VmHWM MiB | VmRSS after MiB |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let base = all[direct].p50();
        for (i, s) in all.iter().enumerate() {
            match servers.get(i) {
                Some((_, _, pid)) => println!(
                    "| {} | {:.3} | {:.3} | {:.2} | {:.2} | {:.1} | {:.1} |",
                    names[i],
                    s.p50(),
                    s.p90(),
                    s.p50() / base,
                    cpu[i] / s.len() as f64,
                    vm_kib(*pid, "VmHWM:")? as f64 / 1024.0,
                    vm_kib(*pid, "VmRSS:")? as f64 / 1024.0
                ),
                None => println!(
                    "| direct spawn (tokio::process) | {:.3} | {:.3} | 1.00 | | | |",
                    s.p50(),
                    s.p90()
                ),
            }
        }
        println!();
    }
    drop(servers);
    Ok(())
}
