//! Item 5: unread answers.
//!
//! One connection with a stream window of 0, 30 requests of 4 MiB never read:
//! the wrapper's memory, streams accepted vs refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prost::Message;

use super::grpc::{code_name, request, short, Hist};
use super::http2::{
    big_rl, grpc_frame, grpc_status, h2_connect, h2_error, send_counted, AbortOnDrop,
};
use super::procs::{mem, secs};
use super::{Bins, Report, IMAGE_CAT};

#[derive(Debug, Clone)]
enum St {
    Waiting,
    Sending,
    Sent,
    Done(String),
}

/// What the answer's headers (or the stream's end) say.
fn head_label(r: &Result<http::Response<h2::RecvStream>, h2::Error>) -> String {
    match r {
        Err(err) => h2_error(err),
        Ok(r) => match grpc_status(r.headers()) {
            Some((c, _)) => format!("error status in headers: {}", code_name(c)),
            None => format!(
                "answer headers :status {} (accepted; answer unread)",
                r.status().as_u16()
            ),
        },
    }
}

pub(super) async fn item5(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &[], &["cat"])?;
    let pid = w.pid();
    rep.row("wrapper memory at start", mem(pid));
    let rl = big_rl((4 << 20) - 200);
    let msg = request(&rl, IMAGE_CAT).encode_to_vec();
    let body = grpc_frame(false, msg.len(), &msg);
    rep.row("request size", format!("{} B each, 30 of them", body.len()));
    let h2 = Arc::new(h2_connect(w.addr, Some(0)).await?);
    let states: Arc<Mutex<Vec<St>>> = Arc::new(Mutex::new(vec![St::Waiting; 30]));
    let progress: Vec<Arc<AtomicUsize>> = (0..30).map(|_| Arc::default()).collect();
    let set_state = |states: &Arc<Mutex<Vec<St>>>, i: usize, st: St| {
        if let Some(s) = states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(i)
        {
            *s = st;
        }
    };
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for (i, sent) in progress.iter().enumerate() {
        let (h2, states, body) = (h2.clone(), states.clone(), body.clone());
        let sent = sent.clone();
        let task = tokio::spawn(async move {
            let (resp, mut stream) = match h2.open(false).await {
                Ok(s) => s,
                Err(err) => {
                    set_state(
                        &states,
                        i,
                        St::Done(format!("open: {}", short(&format!("{err:#}"), 60))),
                    );
                    return;
                }
            };
            set_state(&states, i, St::Sending);
            tokio::pin!(resp);
            // The answer may come (or the stream be reset) before the
            // request is whole.
            let early = tokio::select! {
                r = send_counted(&mut stream, body, true, &sent) => Err(r),
                a = &mut resp => Ok(a),
            };
            let answer = match early {
                Ok(a) => {
                    let label = format!("{} (before the request was whole)", head_label(&a));
                    set_state(&states, i, St::Done(label));
                    let _keep = (a, stream, h2);
                    std::future::pending::<()>().await;
                    return;
                }
                Err(Err(err)) => {
                    // The stream's end says why, if it came.
                    let why = match tokio::time::timeout(Duration::from_secs(1), &mut resp).await {
                        Ok(a) => head_label(&a),
                        Err(_) => match err.downcast_ref::<h2::Error>() {
                            Some(e) => h2_error(e),
                            None => short(&format!("{err:#}"), 60),
                        },
                    };
                    set_state(&states, i, St::Done(format!("send failed: {why}")));
                    return;
                }
                Err(Ok(())) => {
                    set_state(&states, i, St::Sent);
                    (&mut resp).await
                }
            };
            set_state(&states, i, St::Done(head_label(&answer)));
            // Never read; keep the stream open.
            let _keep = (answer, stream, h2);
            std::future::pending::<()>().await;
        });
        tasks.push(AbortOnDrop(task));
    }
    let all_sent = |states: &Arc<Mutex<Vec<St>>>| {
        states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .all(|s| !matches!(s, St::Waiting | St::Sending))
    };
    while !all_sent(&states) && t0.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent_after = t0.elapsed();
    // A moment for the last answers to be made.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut hist = Hist::default();
    for (i, s) in states
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .enumerate()
    {
        let sent = progress[i].load(Ordering::Relaxed);
        match s {
            St::Waiting => hist.add("not opened (waiting for a stream slot)", ""),
            St::Sending if sent == 0 => hist.add(
                "queued by the client, nothing sent (server's stream limit reached)",
                "",
            ),
            St::Sending => hist.add("still sending its request", ""),
            St::Sent => hist.add("sent, no answer headers yet", ""),
            St::Done(l) => hist.add(l, ""),
        }
    }
    rep.row(
        "all 30 sent (or gave up) after",
        if all_sent(&states) || sent_after < Duration::from_secs(20) {
            secs(sent_after)
        } else {
            format!("not all within 20 s ({})", secs(sent_after))
        },
    );
    rep.row(
        "server's SETTINGS_MAX_CONCURRENT_STREAMS (as the client applies it)",
        h2.send.current_max_send_streams().to_string(),
    );
    rep.row("wrapper memory then", mem(pid));
    rep.row("streams", hist.show(false));
    let refused = hist
        .0
        .iter()
        .filter(|(k, _)| k.contains("REFUSED_STREAM") || k.starts_with("error status"))
        .map(|(_, (n, _))| n)
        .sum::<usize>();
    let accepted = hist
        .0
        .iter()
        .filter(|(k, _)| k.starts_with("answer headers") || k.starts_with("sent, no answer"))
        .map(|(_, (n, _))| n)
        .sum::<usize>();
    rep.row(
        "accepted (answered or sent and pending) / refused (REFUSED_STREAM or error status)",
        format!("{accepted} / {refused}"),
    );
    drop(tasks);
    drop(h2);
    Ok(())
}
