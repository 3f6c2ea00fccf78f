//! Item 8: stderr.
//!
//! 10 MB of stderr then `REAL ERROR: x` and exit 1: the INTERNAL message's
//! end; the OK path's `log` (3 short lines; a 10 MB line then 2 more).

use std::time::Duration;

use super::grpc::{call, connect, request, short, small_rl};
use super::procs::tail_chars;
use super::{Bins, Report, IMAGE_CAT};

pub(super) async fn item8(b: &Bins, rep: &mut Report) -> anyhow::Result<()> {
    {
        let w = b.start_wrapper(
            rep,
            &[],
            &[
                "/bin/sh",
                "-c",
                r#"head -c 10000000 /dev/zero | tr "\0" e >&2; echo "REAL ERROR: x" >&2; exit 1"#,
            ],
        )?;
        let mut client = connect(&w.endpoint()).await?;
        match call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            Ok(_) => rep.row("10 MB stderr then REAL ERROR, exit 1: answer", "OK (!)"),
            Err(f) => {
                rep.row(
                    "10 MB stderr then REAL ERROR, exit 1: answer",
                    format!("{} ({} B message)", f.code, f.message.len()),
                );
                rep.row(
                    "… message contains `REAL ERROR: x`",
                    if f.message.contains("REAL ERROR: x") {
                        "yes"
                    } else {
                        "**no**"
                    },
                );
                rep.row(
                    "… message's last 60 chars",
                    format!("{:?}", tail_chars(&f.message, 60)),
                );
            }
        }
    }
    for (label, script) in [
        (
            "OK path, 3 short stderr lines",
            r#"echo "log line 1" >&2; echo "log line 2" >&2; echo "LAST LOG LINE" >&2; cat"#,
        ),
        (
            "OK path, 10 MB stderr line then 2 more",
            r#"head -c 10000000 /dev/zero | tr "\0" e >&2; echo >&2; echo "log line 2" >&2; echo "LAST LOG LINE" >&2; cat"#,
        ),
    ] {
        let w = b.start_wrapper(rep, &[], &["/bin/sh", "-c", script])?;
        let mut client = connect(&w.endpoint()).await?;
        match call(
            &mut client,
            request(&small_rl(), IMAGE_CAT),
            Duration::from_secs(60),
        )
        .await
        {
            Ok(resp) => {
                let log = String::from_utf8_lossy(&resp.log);
                rep.row(
                    format!("{label}: `log` has the last line"),
                    format!(
                        "{} ({} B log)",
                        if log.contains("LAST LOG LINE") {
                            "yes"
                        } else {
                            "**no**"
                        },
                        resp.log.len()
                    ),
                );
                rep.row(
                    format!("{label}: `log`'s last 60 chars"),
                    format!("{:?}", tail_chars(&log, 60)),
                );
            }
            Err(f) => rep.row(
                format!("{label}: answer"),
                format!("{} {:?}", f.code, short(&f.message, 100)),
            ),
        }
    }
    Ok(())
}
