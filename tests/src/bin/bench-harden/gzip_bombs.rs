//! Item 6: gzip bombs (issue #11), and the memory they and other malformed
//! requests leave behind (issue #27 item 4).
//!
//! 10 gzip requests inflating to `--bomb-mib` MiB (deflate tops out near
//! 1030:1, so 48 MiB is the most that stays under 50 KiB on the wire), then
//! 990 malformed ones of 10 kinds, gzip bombs among them: answers, memory
//! before/after each.

use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::bail;
use bytes::Bytes;
use prost::Message;
use tokio::task::JoinSet;

use super::grpc::{call, connect, request, small_rl, Hist};
use super::http2::{grpc_frame, h2_connect, request_prefix, varint_len};
use super::procs::{mem, mem_kib};
use super::{Bins, Cli, Report, IMAGE_CAT};

/// A gzip-compressed EvaluateFunctionRequest whose `resource_list` is
/// `mib` MiB of zeros: (compressed, inflated length). Made once per run.
fn gzip_bomb(mib: usize) -> anyhow::Result<(Bytes, usize)> {
    static BOMB: OnceLock<(Bytes, usize)> = OnceLock::new();
    if let Some(b) = BOMB.get() {
        return Ok(b.clone());
    }
    let rl_len = mib << 20;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let head = request_prefix(rl_len, 1 + varint_len(rl_len));
    enc.write_all(&head)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        enc.write_all(&zeros)?;
    }
    let out = (Bytes::from(enc.finish()?), head.len() + rl_len);
    Ok(BOMB.get_or_init(|| out).clone())
}

/// The kinds of [`malformed`] request, as the report names them.
const KINDS: &str = "0 gzip bomb, 1 gzip cut short inside a whole message, \
    2 gzip message announcing the limit of which 16 bytes come, \
    3 gzip message announcing more than the limit, 4 gzip with compressed flag 2, \
    5 not gzip data, 6 compressed flag without grpc-encoding, \
    7 garbage protobuf, 8 truncated frame, 9 overlong field";

/// Malformed request `i` (of kind `i % 10`, see [`KINDS`]): whether it goes
/// with `grpc-encoding: gzip`, and its body. `bomb` is a gzip bomb's message.
fn malformed(i: usize, bomb: &Bytes) -> (bool, Bytes) {
    let msg = request(&small_rl(), IMAGE_CAT).encode_to_vec();
    let gz = gzip(&msg);
    let limit = proto::DEFAULT_MAX_MESSAGE_BYTES;
    match i % 10 {
        0 => (true, grpc_frame(true, bomb.len(), bomb)),
        1 => (true, grpc_frame(true, gz.len() / 2, &gz[..gz.len() / 2])),
        2 => (true, grpc_frame(true, limit, &gz[..16])),
        3 => (true, grpc_frame(true, limit + 1, &gz[..16])),
        4 => {
            let mut frame = grpc_frame(true, gz.len(), &gz).to_vec();
            frame[0] = 2;
            (true, Bytes::from(frame))
        }
        5 => (true, grpc_frame(true, 16, b"not gzip at all!")),
        6 => (false, grpc_frame(true, msg.len(), &msg)),
        // wire type 7 everywhere
        7 => {
            let junk = [0xffu8; 64];
            (false, grpc_frame(false, junk.len(), &junk))
        }
        // a frame announcing 1000 bytes, 10 sent, then the end
        8 => (false, grpc_frame(false, 1000, b"\x0a\x08abcdefg")),
        // a length-delimited field longer than the message
        _ => (false, grpc_frame(false, 8, b"\x0a\xff\xff\x03abcd")),
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing into a Vec does not fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

pub(super) async fn item6(cli: &Cli, b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    let w = b.start_wrapper(rep, &[], &["cat"])?;
    let pid = w.pid();
    let mut client = connect(&w.endpoint()).await?;
    if let Err(f) = call(
        &mut client,
        request(&small_rl(), IMAGE_CAT),
        Duration::from_secs(30),
    )
    .await
    {
        bail!("an ordinary call failed: {f:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = mem(pid);
    let before_kib = mem_kib(pid).0;
    let mib = cli.bomb_mib;
    let (bomb, inflated) = tokio::task::spawn_blocking(move || gzip_bomb(mib)).await??;
    rep.row(
        "gzip request",
        format!(
            "{:.1} KiB on the wire, {} B ({:.0} MiB) inflated",
            bomb.len() as f64 / 1024.0,
            inflated,
            inflated as f64 / f64::from(1u32 << 20)
        ),
    );
    let h2 = h2_connect(w.addr, None).await?;
    let mut gz = Hist::default();
    for _ in 0..10 {
        let (label, message) = h2
            .call(
                true,
                grpc_frame(true, bomb.len(), &bomb),
                Duration::from_secs(30),
            )
            .await;
        gz.add(&label, &message);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_gzip = mem(pid);
    let mut other = Hist::default();
    let h2 = Arc::new(h2);
    for chunk in (0..990).collect::<Vec<_>>().chunks(8) {
        let mut set = JoinSet::new();
        for &i in chunk {
            let h2 = h2.clone();
            let bomb = bomb.clone();
            set.spawn(async move {
                let (gzip, body) = malformed(i, &bomb);
                (i % 10, h2.call(gzip, body, Duration::from_secs(10)).await)
            });
        }
        while let Some(r) = set.join_next().await {
            let (kind, (label, _)) = r?;
            other.add(&format!("kind {kind}: {label}"), "");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    rep.row("10 gzip bombs: answers", gz.show(true));
    rep.row(
        format!("990 malformed ({KINDS}): answers"),
        other.show(false),
    );
    rep.row("wrapper memory before", before);
    rep.row("… after the 10 gzip bombs", after_gzip);
    rep.row("… after the 990 others", mem(pid));
    let growth = match (mem_kib(pid).0, before_kib) {
        (Some(after), Some(before)) => {
            format!("{:+.1} MB", (after as f64 - before as f64) * 1024.0 / 1e6)
        }
        _ => "?".into(),
    };
    rep.row("VmRSS growth over the 1,000 requests", growth);
    Ok(())
}
