//! `pieces`: where a call's time and CPU go: direct spawn, the wrapper's exec
//! core in process, the ResourceList check, gRPC round trip and transfer, the
//! whole call; CPU per call of caller, wrapper-server and function. Also the
//! tonic echo server `nodelay` compares against.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context};
use bytes::Bytes;
use e2e_tests::bin;
use proto::health::{HealthCheckRequest, HealthClient};
use proto::pb::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};

use super::calls::{call_tokio, call_wrapper, connect, connect_big_frames, payload};
use super::evaluate::{round_order, Bench, Running};
use super::stats::{indent_items, size_label, CpuSnap, Samples};
use super::{Clients, PiecesArgs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Piece {
    Direct,
    ExecCore,
    Check,
    CheckIndented,
    HealthRtt,
    GrpcEcho,
    GrpcEchoBigFrames,
    EvaluateBigFrames,
    Evaluate,
}

impl Piece {
    fn name(self) -> &'static str {
        match self {
            Piece::Direct => "direct spawn (tokio::process), the baseline",
            Piece::ExecCore => "wrapper's exec core in process (`exec::run`), no gRPC",
            Piece::Check => "ResourceList check of the output (`results::parse_output`)",
            Piece::CheckIndented => {
                "the same check, items indented 2 more columns (`  - apiVersion`; +15% bytes)"
            }
            Piece::HealthRtt => "gRPC round trip, tiny message (health Check, open connection)",
            Piece::GrpcEcho => {
                "gRPC transfer only: EvaluateFunction to an in-process tonic echo (same settings, TCP_NODELAY), no process"
            }
            Piece::Evaluate => "EvaluateFunction through wrapper-server, whole call",
            Piece::GrpcEchoBigFrames => {
                "the same echo, client advertising 1 MiB HTTP/2 frames (default 16 KiB)"
            }
            Piece::EvaluateBigFrames => {
                "EvaluateFunction through wrapper-server, client advertising 1 MiB HTTP/2 frames"
            }
        }
    }
}

pub(super) async fn pieces(args: &PiecesArgs) -> anyhow::Result<()> {
    println!(
        "## pieces: where an EvaluateFunction call's time goes\n\nserver: {}\n",
        args.wrapper_server
            .as_deref()
            .map_or_else(|| bin("wrapper-server"), PathBuf::from)
            .display()
    );
    let mut bench = Bench::start(
        args.wrapper_server.as_deref(),
        &args.wrapper_env,
        &args.function,
        0,
        Clients::Shared,
    )
    .await?;
    let server_pid = match &bench.server {
        Running::Child(w) => Some(w.child.id()),
        Running::Task(_) => None,
    };
    let spec =
        krm_fn::exec::ExecSpec::from_argv([bench.program.as_os_str()]).context("empty argv")?;
    let limits = krm_fn::exec::Limits::new(proto::DEFAULT_MAX_MESSAGE_BYTES);
    let channel = tonic::transport::Endpoint::from_shared(bench.endpoint.clone())?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut health = HealthClient::new(channel);
    let (_echo_server, echo_endpoint) = start_echo(Duration::ZERO, true).await?;
    let mut echo = connect(&echo_endpoint).await?;
    let mut echo_big = connect_big_frames(&echo_endpoint).await?;
    let mut wrapper_big = connect_big_frames(&bench.endpoint).await?;
    let variants = [
        Piece::Direct,
        Piece::ExecCore,
        Piece::Check,
        Piece::CheckIndented,
        Piece::HealthRtt,
        Piece::GrpcEcho,
        Piece::GrpcEchoBigFrames,
        Piece::EvaluateBigFrames,
        Piece::Evaluate,
    ];
    for &size in &args.sizes {
        let input = payload(size)?;
        let indented = indent_items(&input);
        let calls = if size >= 1 << 20 {
            args.large_calls
        } else {
            args.calls
        };
        let mut all: BTreeMap<Piece, Samples> = BTreeMap::new();
        // CPU of whole calls, per process: for Direct and Evaluate batches.
        let mut cpu: BTreeMap<Piece, (CpuSnap, usize)> = BTreeMap::new();
        for round in 0..=args.rounds {
            // Round 0 is the warm-up, not recorded.
            for v in round_order(&variants, round) {
                let mut s = Samples::default();
                let cpu0 = CpuSnap::take(server_pid)?;
                for _ in 0..calls {
                    let started = Instant::now();
                    match v {
                        Piece::Direct => {
                            s.push(call_tokio(&bench.program, &input).await?);
                        }
                        Piece::Evaluate => {
                            s.push(call_wrapper(&mut bench.client, &input).await?);
                        }
                        Piece::ExecCore => {
                            let out = krm_fn::exec::run(&spec, input.clone(), &limits)
                                .await
                                .map_err(|e| anyhow!("exec::run: {e}"))?;
                            s.push(started.elapsed());
                            ensure!(out.stdout == input, "exec core answered other bytes");
                        }
                        Piece::Check | Piece::CheckIndented => {
                            let doc: &[u8] = if v == Piece::Check { &input } else { &indented };
                            let started = Instant::now();
                            let res = krm_results::parse_output(doc);
                            s.push(started.elapsed());
                            ensure!(res.is_ok(), "payload is not a ResourceList");
                        }
                        Piece::GrpcEcho => {
                            s.push(call_wrapper(&mut echo, &input).await?);
                        }
                        Piece::GrpcEchoBigFrames => {
                            s.push(call_wrapper(&mut echo_big, &input).await?);
                        }
                        Piece::EvaluateBigFrames => {
                            s.push(call_wrapper(&mut wrapper_big, &input).await?);
                        }
                        Piece::HealthRtt => {
                            health
                                .check(HealthCheckRequest {
                                    service: String::new(),
                                })
                                .await?;
                            s.push(started.elapsed());
                        }
                    }
                }
                if round > 0 {
                    if matches!(v, Piece::Direct | Piece::Evaluate) {
                        let used = CpuSnap::take(server_pid)?.minus(&cpu0);
                        let entry = cpu.entry(v).or_default();
                        entry.0 = entry.0.plus(&used);
                        entry.1 += calls;
                    }
                    all.entry(v).or_default().0.extend(s.0);
                }
            }
        }
        println!(
            "### {} payload ({calls} per piece per round, {} rounds)\n",
            size_label(size),
            args.rounds
        );
        println!("| piece | n | p50 ms | p90 ms |");
        println!("|---|---:|---:|---:|");
        for (v, s) in &all {
            println!(
                "| {} | {} | {:.3} | {:.3} |",
                v.name(),
                s.len(),
                s.p50(),
                s.p90()
            );
        }
        let p = |v: Piece| all.get(&v).map_or(f64::NAN, Samples::p50);
        println!();
        println!(
            "Derived (p50s): exec core − direct = {:.3} ms; whole call − exec core − check = {:.3} ms (gRPC transfer, encode/decode, server handling); check {:.2} ms/MiB with items at column 0, {:.2} ms/MiB indented\n",
            p(Piece::ExecCore) - p(Piece::Direct),
            p(Piece::Evaluate) - p(Piece::ExecCore) - p(Piece::Check),
            p(Piece::Check) / (input.len() as f64 / f64::from(1u32 << 20)),
            p(Piece::CheckIndented) / (indented.len() as f64 / f64::from(1u32 << 20))
        );
        println!("CPU per call (mean ms, user+sys):\n");
        println!("| path | caller (this process) | wrapper-server | function (`cat`) | total |");
        println!("|---|---:|---:|---:|---:|");
        for (v, (used, n)) in &cpu {
            let n = *n as f64;
            let (name, caller, children) = match v {
                Piece::Direct => ("direct spawn", used.this, used.children),
                _ => ("through wrapper-server", used.this, used.server_children),
            };
            let server = if *v == Piece::Direct {
                0.0
            } else {
                used.server
            };
            println!(
                "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
                caller / n,
                server / n,
                children / n,
                (caller + server + children) / n
            );
        }
        println!();
        if let (Some((d, dn)), Some((w, wn))) = (cpu.get(&Piece::Direct), cpu.get(&Piece::Evaluate))
        {
            // When every core is busy, calls/s is inversely proportional to
            // CPU per call. Whatever the server does, it must at least do the
            // direct caller's part (spawn, write stdin, read stdout), so its
            // CPU cannot be below that caller's: a bound on the throughput
            // ratio that no server implementation can pass.
            let (dn, wn) = (*dn as f64, *wn as f64);
            let direct_total = (d.this + d.children) / dn;
            let floor = (w.this + w.server_children) / wn + d.this / dn;
            println!(
                "Throughput bound from CPU per call: a server that spent only the direct caller's CPU ({:.3} ms) and nothing on its socket would reach at most {direct_total:.3} / ({:.3} + {:.3} + {:.3}) = **{:.2}** of the direct throughput (caller through the wrapper + function + direct caller's share).\n",
                d.this / dn,
                w.this / wn,
                w.server_children / wn,
                d.this / dn,
                direct_total / floor
            );
        }
    }
    Ok(())
}

/// A FunctionEvaluator that answers the request's bytes: the gRPC transfer
/// without any process.
struct Echo {
    /// Waits this long before answering, as a function would take.
    delay: Duration,
}

#[tonic::async_trait]
impl FunctionEvaluator for Echo {
    async fn evaluate_function(
        &self,
        request: tonic::Request<EvaluateFunctionRequest>,
    ) -> Result<tonic::Response<EvaluateFunctionResponse>, tonic::Status> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Ok(tonic::Response::new(EvaluateFunctionResponse {
            resource_list: request.into_inner().resource_list,
            log: Bytes::new(),
        }))
    }
}

/// Serves [`Echo`] in this process with wrapper-server's transport settings
/// (message limits, windows, frame size), with or without TCP_NODELAY on
/// the accepted sockets.
pub(super) async fn start_echo(
    delay: Duration,
    nodelay: bool,
) -> anyhow::Result<(Running, String)> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    sock.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let listener = sock.listen(1024)?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let max = proto::DEFAULT_MAX_MESSAGE_BYTES;
    let window = u32::try_from(max * 2)?;
    let incoming =
        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(nodelay));
    let task = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .initial_connection_window_size(window)
            .initial_stream_window_size(window)
            .max_frame_size(1 << 20)
            .add_service(
                FunctionEvaluatorServer::new(Echo { delay })
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = served {
            eprintln!("echo server: {e}");
        }
    });
    Ok((Running::Task(task), endpoint))
}
