//! Item 1: runner memory through metrics.
//!
//! Runner (process backend): `--metrics-calls` calls with distinct unknown 1
//! KiB images; one `/metrics` body's size; VmRSS/VmHWM after 10 s of 4 clients
//! that pipeline 50 GETs each and never read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::grpc::{call, connect, request, small_rl, Hist};
use super::procs::{functions_dir, mb, mem, mem_kib, secs};
use super::{Bins, Cli, Report};

/// A 1 KiB image name no function serves, distinct per `i`.
fn unknown_image(i: usize) -> String {
    let prefix = "example.com/unknown/";
    let suffix = format!("-{i:06}");
    format!(
        "{prefix}{}{suffix}",
        "a".repeat(1024 - prefix.len() - suffix.len())
    )
}

/// One `GET /metrics` body, bytes.
async fn metrics_body_len(port: u16) -> anyhow::Result<usize> {
    let fetch = async {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(h) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
                let cl = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if cl.is_some_and(|cl| buf.len() >= h + 4 + cl) {
                    break;
                }
            }
        }
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(30), fetch)
        .await
        .map_err(|_| anyhow!("GET /metrics: no whole answer within 30 s"))??;
    let h = find(&buf, b"\r\n\r\n").context("GET /metrics: no header end")?;
    let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
    let body = &buf[h + 4..];
    if head.contains("transfer-encoding: chunked") {
        return Ok(dechunked_len(body));
    }
    Ok(body.len())
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunked_len(mut body: &[u8]) -> usize {
    let mut total = 0;
    while let Some(eol) = find(body, b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        total += size;
        body = body.get(eol + 2 + size + 2..).unwrap_or(&[]);
    }
    total
}

pub(super) async fn item1(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let runner = b.start_runner(rep, fns.path())?;
    let pid = runner.pid();
    let port = runner.metrics_port.context("no metrics port")?;
    rep.row("runner memory at start", mem(pid));
    let client = connect(&runner.endpoint()).await?;
    let rl = small_rl();
    let n = cli.metrics_calls;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..16 {
        let (mut client, next, rl) = (client.clone(), next.clone(), rl.clone());
        set.spawn(async move {
            let mut hist = Hist::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let req = request(&rl, &unknown_image(i));
                match call(&mut client, req, Duration::from_secs(10)).await {
                    Ok(_) => hist.add("OK", ""),
                    Err(f) => hist.add(&f.code, &f.message),
                }
            }
            hist
        });
    }
    let mut hist = Hist::default();
    while let Some(h) = set.join_next().await {
        hist.merge(h?);
    }
    rep.row(
        format!("{n} calls with distinct unknown 1 KiB images: answers"),
        hist.show(false),
    );
    rep.row("those calls' wall time", secs(started.elapsed()));
    rep.row("runner memory after them", mem(pid));
    let body = metrics_body_len(port).await?;
    rep.row(
        "one GET /metrics body",
        format!("{body} B ({:.2} MB)", body as f64 / 1e6),
    );
    // 4 clients that pipeline 50 GETs each and never read.
    let pipelined = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(50);
    let mut socks = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::time::timeout(
            Duration::from_secs(5),
            TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        .map_err(|_| anyhow!("metrics connect: timeout"))??;
        // Bounded: 50 requests are ~2 KB, far under a socket buffer.
        tokio::time::timeout(Duration::from_secs(5), s.write_all(pipelined.as_bytes()))
            .await
            .map_err(|_| anyhow!("metrics write: timeout"))??;
        socks.push(s);
    }
    let t0 = Instant::now();
    let mut peak = 0;
    while t0.elapsed() < Duration::from_secs(10) {
        peak = peak.max(mem_kib(pid).0.unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    rep.row(
        "runner memory after 10 s with 4 clients that sent 50 pipelined GETs each and never read",
        mem(pid),
    );
    rep.row("peak VmRSS sampled in those 10 s", mb(Some(peak)));
    drop(socks);
    Ok(())
}
