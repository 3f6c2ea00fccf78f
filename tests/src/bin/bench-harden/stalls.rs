//! Item 4: stalled uploads.
//!
//! `--max-concurrent-evaluations 4`, 4 uploads stalled 100 bytes into a 1 MiB
//! message, then a call every 300 ms for `--stall-secs`: answers, time to the
//! first OK.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use tokio::task::JoinSet;

use super::grpc::{call, connect, request, small_rl, Hist};
use super::http2::{grpc_frame, h2_connect, read_answer, request_prefix, varint_len, AbortOnDrop};
use super::procs::secs;
use super::{Bins, Cli, Report, IMAGE_CAT};

pub(super) async fn item4(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &["--max-concurrent-evaluations", "4"], &["cat"])?;
    const DECLARED: usize = 1 << 20;
    let window = Duration::from_secs_f64(cli.stall_secs);
    let msg = request_prefix(DECLARED - 1 - varint_len(DECLARED), 100);
    let stall_answers: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let mut stalls = Vec::new();
    let t0 = Instant::now();
    for _ in 0..4 {
        let h2 = h2_connect(w.addr, None).await?;
        let (resp, mut stream) = tokio::time::timeout(Duration::from_secs(5), h2.open(false))
            .await
            .map_err(|_| anyhow!("opening a stream: timeout"))??;
        stream.send_data(grpc_frame(false, DECLARED, &msg), false)?;
        let answers = stall_answers.clone();
        let task = tokio::spawn(async move {
            let ans = read_answer(resp).await;
            answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((ans.label(), t0.elapsed()));
            // Keep the stream (and the connection) open.
            let _keep = (h2, stream);
            std::future::pending::<()>().await;
        });
        stalls.push(AbortOnDrop(task));
    }
    let stalled_at = Instant::now();
    let client = connect(&w.endpoint()).await?;
    let rl = small_rl();
    let mut set = JoinSet::new();
    for k in 1u32.. {
        let at = stalled_at + Duration::from_millis(300) * k;
        if at > stalled_at + window {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        let (mut client, rl) = (client.clone(), rl.clone());
        set.spawn(async move {
            let sent = stalled_at.elapsed();
            let res = call(&mut client, request(&rl, IMAGE_CAT), Duration::from_secs(5)).await;
            (sent, res.map(|_| ()).map_err(|f| f.code))
        });
    }
    let mut hist = Hist::default();
    let mut first_ok: Option<Duration> = None;
    while let Some(r) = set.join_next().await {
        let (sent, res) = r?;
        match res {
            Ok(()) => {
                hist.add("OK", "");
                first_ok = Some(first_ok.map_or(sent, |f| f.min(sent)));
            }
            Err(code) => hist.add(&code, ""),
        }
    }
    rep.row(
        "ordinary calls after the stall (one every 300 ms, 5 s deadline)",
        format!("{} in {}", hist.total(), secs(window)),
    );
    rep.row(
        "… RESOURCE_EXHAUSTED",
        hist.count("RESOURCE_EXHAUSTED").to_string(),
    );
    rep.row("… OK", hist.count("OK").to_string());
    rep.row("… all answers", hist.show(false));
    rep.row(
        "stall start → first OK call sent",
        first_ok.map_or_else(|| format!("none within {}", secs(window)), secs),
    );
    let answers = stall_answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    rep.row(
        "the 4 stalled uploads' answers (time since the stall)",
        if answers.is_empty() {
            "none within the run".to_string()
        } else {
            answers
                .iter()
                .map(|(l, d)| format!("{l} at {}", secs(*d)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    drop(stalls);
    drop(w);
    Ok(())
}
