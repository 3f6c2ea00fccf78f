//! `compare`: several wrapper-server binaries side by side in one run, with
//! the floor under them: sequential EvaluateFunction latency through each
//! binary, a direct spawn of the function, and gRPC echoes of the same bytes
//! over loopback with no process, served by a process of their own: tonic's
//! generated server (decodes and encodes the message), and a raw HTTP/2 echo
//! that sends the request's DATA frames back as they came. The floor is the
//! raw echo plus the direct spawn: moving the bytes both ways, and the
//! function's run, each at its cheapest. Variants alternate within each
//! round, so noise and drift hit all of them alike; every ratio is taken
//! against the direct spawn of the same round.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, Context};

use super::calls::{call_std, call_tokio, call_wrapper, connect, payload, Client};
use super::evaluate::{round_order, start_wrapper, Running};
use super::pieces::start_echo;
use super::stats::{join_ratios, load_average, size_label, which, Samples};
use super::CompareArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    /// The n-th `--wrapper-server`.
    Wrapper(usize),
    Echo,
    RawEcho,
    DirectStd,
    DirectTokio,
}

/// The process of the echo servers (`echo-server`); killed on drop.
struct EchoChild(Child);

impl Drop for EchoChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `bench-wrapper echo-server`: serves the echoes until killed, after
/// printing their endpoints on stdout (tonic's, then the raw one).
pub(super) async fn echo_server() -> anyhow::Result<()> {
    let (_server, endpoint) = start_echo(Duration::ZERO, true).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{endpoint}");
    println!("http://{}", listener.local_addr()?);
    loop {
        let (sock, _) = listener.accept().await?;
        sock.set_nodelay(true)?;
        tokio::spawn(async move {
            if let Err(e) = raw_echo_connection(sock).await {
                eprintln!("raw echo: {e}");
            }
        });
    }
}

/// The transfer floor: each request's body sent back as it came (its DATA
/// frames kept, no copy, nothing decoded) once it is whole, then
/// `grpc-status: 0`. The request's message (ResourceList, image) decodes
/// as a response (ResourceList, log). Windows and frame size as the
/// wrapper's buffered settings (room for a whole request, 1 MiB frames).
async fn raw_echo_connection(sock: tokio::net::TcpStream) -> anyhow::Result<()> {
    let window = u32::try_from(proto::DEFAULT_MAX_MESSAGE_BYTES * 2)?;
    let mut conn = h2::server::Builder::new()
        .initial_window_size(window)
        .initial_connection_window_size(window)
        .max_frame_size(1 << 20)
        .handshake::<_, bytes::Bytes>(sock)
        .await?;
    while let Some(accepted) = conn.accept().await {
        let (req, mut respond) = accepted?;
        tokio::spawn(async move {
            let mut body = req.into_body();
            let mut kept = Vec::new();
            while let Some(data) = body.data().await {
                let Ok(data) = data else { return };
                let _ = body.flow_control().release_capacity(data.len());
                // The client's empty end-of-stream frame, sent back with
                // no end of stream, would count against h2's budget of
                // empty frames on the client's connection.
                if !data.is_empty() {
                    kept.push(data);
                }
            }
            let resp = http::Response::builder()
                .header("content-type", "application/grpc")
                .body(())
                .unwrap_or_default();
            let Ok(mut send) = respond.send_response(resp, false) else {
                return;
            };
            for data in kept {
                if send.send_data(data, false).is_err() {
                    return;
                }
            }
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let _ = send.send_trailers(trailers);
        });
    }
    Ok(())
}

fn spawn_echo() -> anyhow::Result<(EchoChild, String, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("echo-server")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the echo server")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let child = EchoChild(child);
    let mut lines = std::io::BufReader::new(stdout).lines();
    // The first line is `machine_notes`; the endpoints are the lines after.
    let mut endpoint = || {
        lines
            .find_map(|l| l.ok().filter(|l| l.starts_with("http://")))
            .ok_or_else(|| anyhow!("the echo server printed no endpoint"))
    };
    let tonic = endpoint()?;
    let raw = endpoint()?;
    Ok((child, tonic, raw))
}

pub(super) async fn compare(args: &CompareArgs) -> anyhow::Result<()> {
    let program = which(&args.function)?;
    println!(
        "## compare: wrapper-server binaries side by side, direct spawn of `{}`, gRPC echo with no process\n",
        args.function
    );
    let mut wrappers: Vec<(Running, Client)> = Vec::new();
    for (i, bin) in args.wrapper_server.iter().enumerate() {
        println!("- W{i}: {}", bin.display());
        let (running, endpoint) = start_wrapper(&program, Some(bin), &[]).await?;
        wrappers.push((running, connect(&endpoint).await?));
    }
    let (_echo_child, echo_endpoint, raw_endpoint) = spawn_echo()?;
    let mut echo = connect(&echo_endpoint).await?;
    let mut raw = connect(&raw_endpoint).await?;
    println!(
        "\n{} rounds, {} sequential calls per variant per round, one client each\n",
        args.rounds, args.calls
    );
    let mut variants: Vec<Variant> = (0..wrappers.len()).map(Variant::Wrapper).collect();
    variants.extend([
        Variant::Echo,
        Variant::RawEcho,
        Variant::DirectStd,
        Variant::DirectTokio,
    ]);
    for &size in &args.sizes {
        let input = payload(size)?;
        let mut all: BTreeMap<Variant, Samples> = BTreeMap::new();
        // Per round: each variant's p50 over the round's best direct p50.
        let mut per_round: BTreeMap<Variant, Vec<f64>> = BTreeMap::new();
        // Round 0 is the warm-up, not recorded.
        for round in 0..=args.rounds {
            let mut p50s = BTreeMap::new();
            for v in round_order(&variants, round) {
                let mut s = Samples::default();
                for _ in 0..args.calls {
                    let took = match v {
                        Variant::Wrapper(i) => call_wrapper(&mut wrappers[i].1, &input).await?,
                        Variant::Echo => call_wrapper(&mut echo, &input).await?,
                        Variant::RawEcho => call_wrapper(&mut raw, &input).await?,
                        Variant::DirectTokio => call_tokio(&program, &input).await?,
                        Variant::DirectStd => {
                            let program: PathBuf = program.clone();
                            let input = input.clone();
                            tokio::task::spawn_blocking(move || call_std(&program, &input))
                                .await??
                        }
                    };
                    s.push(took);
                }
                p50s.insert(v, s.p50());
                if round > 0 {
                    all.entry(v).or_default().0.extend(s.0);
                }
            }
            if round == 0 {
                continue;
            }
            let direct = p50s[&Variant::DirectStd].min(p50s[&Variant::DirectTokio]);
            for (&v, &p) in &p50s {
                per_round.entry(v).or_default().push(p / direct);
            }
            eprintln!(
                "size {size}: round {round}/{} done (load {})",
                args.rounds,
                load_average()
            );
        }
        report(size, &args.wrapper_server, &all, &per_round);
    }
    Ok(())
}

fn name(v: Variant, bins: &[PathBuf]) -> String {
    match v {
        Variant::Wrapper(i) => format!("W{i} {}", bins[i].display()),
        Variant::Echo => "tonic gRPC echo (decodes, encodes), no process".into(),
        Variant::RawEcho => {
            "raw HTTP/2 echo of the request's frames, no process (floor part 1)".into()
        }
        Variant::DirectStd => "direct spawn, std::process + writer thread".into(),
        Variant::DirectTokio => "direct spawn, tokio::process".into(),
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

fn report(
    size: usize,
    bins: &[PathBuf],
    all: &BTreeMap<Variant, Samples>,
    per_round: &BTreeMap<Variant, Vec<f64>>,
) {
    println!("### {} payload\n", size_label(size));
    println!("| variant | calls | p50 ms | p90 ms | p50 / direct, all calls | median of per-round ratios | per-round ratios |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let p = |v: Variant| all.get(&v).map_or(f64::NAN, Samples::p50);
    let direct = p(Variant::DirectStd).min(p(Variant::DirectTokio));
    for (&v, s) in all {
        let rounds = &per_round[&v];
        println!(
            "| {} | {} | {:.3} | {:.3} | **{:.2}** | {:.2} | {} |",
            name(v, bins),
            s.len(),
            s.p50(),
            s.p90(),
            s.p50() / direct,
            median(rounds),
            join_ratios(rounds)
        );
    }
    let floor = p(Variant::RawEcho) + direct;
    println!(
        "\nFloor (raw echo p50 + direct p50): {floor:.3} ms = **{:.2}×** direct.",
        floor / direct
    );
    for i in 0..bins.len() {
        let w = p(Variant::Wrapper(i));
        println!(
            "- W{i}: {w:.3} ms, {:.2}× the floor, {:+.3} ms above it",
            w / floor,
            w - floor
        );
    }
    println!();
}
