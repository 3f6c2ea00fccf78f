//! Item 3: SIGTERM with open connections.
//!
//! Wrapper and runner, with an idle TCP connection / a bare HTTP/2 preface /
//! half a request open: seconds from SIGTERM to exit (`--term-cap-secs`, then
//! SIGKILL), a health Check on a new connection 0.5 s after SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use nix::sys::signal::Signal;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::grpc::{call, connect, health_check, request, small_rl};
use super::http2::{grpc_frame, h2_connect, request_prefix};
use super::procs::{alive, functions_dir, pods_of, secs, track};
use super::{Bins, Cli, Report, IMAGE_CAT, PREFACE};

#[derive(Debug, Clone, Copy)]
enum Held {
    Idle,
    Preface,
    HalfRequest,
}

impl Held {
    fn name(self) -> &'static str {
        match self {
            Held::Idle => "(a) idle TCP connection",
            Held::Preface => "(b) bare HTTP/2 preface + SETTINGS",
            Held::HalfRequest => "(c) half a request",
        }
    }
}

/// What keeps a connection open (dropped at the end).
type Holder = Box<dyn std::any::Any + Send>;

async fn hold(addr: SocketAddr, kind: Held) -> anyhow::Result<Holder> {
    match kind {
        Held::Idle => Ok(Box::new(
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
                .await
                .map_err(|_| anyhow!("connect: timeout"))??,
        )),
        Held::Preface => {
            let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
                .await
                .map_err(|_| anyhow!("connect: timeout"))??;
            let mut bytes = PREFACE.to_vec();
            // An empty SETTINGS frame: length 0, type 4, flags 0, stream 0.
            bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            s.write_all(&bytes).await?;
            Ok(Box::new(s))
        }
        Held::HalfRequest => {
            let h2 = h2_connect(addr, None).await?;
            let (resp, mut stream) = tokio::time::timeout(Duration::from_secs(5), h2.open(false))
                .await
                .map_err(|_| anyhow!("opening a stream: timeout"))??;
            // A frame announcing 1000 bytes, 60 of them sent.
            let msg = request_prefix(1000 - 3, 60);
            stream.send_data(grpc_frame(false, 1000, &msg), false)?;
            Ok(Box::new((h2, resp, stream)))
        }
    }
}

pub(super) async fn item3(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let cap = Duration::from_secs_f64(cli.term_cap_secs);
    for who in ["wrapper", "runner"] {
        for kind in [Held::Idle, Held::Preface, Held::HalfRequest] {
            let key = format!("{who}, {}", kind.name());
            if let Err(err) = term_run(b, rep, who, kind, cap, &key).await {
                rep.row(format!("{key}: error"), format!("{err:#}"));
            }
        }
    }
    Ok(())
}

async fn term_run(
    b: &Bins,
    rep: &mut Report,
    who: &str,
    kind: Held,
    cap: Duration,
    key: &str,
) -> anyhow::Result<()> {
    let fns = functions_dir()?;
    let mut srv = if who == "wrapper" {
        b.start_wrapper(rep, &[], &["cat"])?
    } else {
        b.start_runner(rep, fns.path())?
    };
    let mut pods = Vec::new();
    if who == "runner" {
        let mut client = connect(&srv.endpoint()).await?;
        if let Err(f) = call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            bail!("the warm-up call through the runner failed: {f:?}");
        }
        pods = pods_of(srv.pid());
        for p in &pods {
            track(*p);
        }
    }
    let holder = hold(srv.addr, kind).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    srv.signal(Signal::SIGTERM);
    let endpoint = srv.endpoint();
    let health = tokio::spawn(async move {
        tokio::time::sleep_until((t0 + Duration::from_millis(500)).into()).await;
        health_check(endpoint).await
    });
    let mut pods_alive = pods.len();
    let exit = loop {
        if let Some(status) = srv.exited() {
            break Some((t0.elapsed(), status));
        }
        pods_alive = pods.iter().filter(|p| alive(**p)).count();
        if t0.elapsed() > cap {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let health = health
        .await
        .unwrap_or_else(|e| format!("check task failed: {e}"));
    rep.row(
        format!("{key}: exit after SIGTERM"),
        match exit {
            Some((d, status)) => format!("{} ({status})", secs(d)),
            None => format!(">{:.0} s (then SIGKILLed)", cap.as_secs_f64()),
        },
    );
    rep.row(
        format!("{key}: health Check on a new connection 0.5 s after SIGTERM"),
        health,
    );
    if who == "runner" {
        rep.row(
            format!("{key}: pods alive at the last look before the runner exited"),
            format!("{pods_alive} of {}", pods.len()),
        );
    }
    drop(holder);
    Ok(())
}
