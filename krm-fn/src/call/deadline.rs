//! A call's deadline, from the client's `grpc-timeout`.
//!
//! Servers enforce it themselves rather than through tonic's timeout layer,
//! which answers CANCELLED where clients expect DEADLINE_EXCEEDED; and a
//! little before the client's own timer, so that our answer (and the kill of
//! the function's processes) wins.

use std::future::Future;
use std::time::Duration;

// tokio's clock, so that tests with paused time see deadlines move with it.
use tokio::time::Instant;

/// How much earlier than the client's deadline a server answers: a tenth
/// of the timeout, at most 100 ms. The server counts from when its handler
/// runs, later than the client started its timer by the request's transit
/// and the server's scheduling; a fixed few ms lost that race on a busy
/// machine (the client's own timer fired, and the call ended CANCELLED
/// instead of DEADLINE_EXCEEDED).
fn headroom(timeout: Duration) -> Duration {
    (timeout / 10).min(Duration::from_millis(100))
}

/// The call's deadline: [`headroom`] before the client's `grpc-timeout`.
pub fn deadline(started: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|d| started + d.saturating_sub(headroom(d)))
}

/// The deadline of a call starting now with these headers.
pub fn from_headers(headers: &http::HeaderMap) -> Option<Instant> {
    deadline(Instant::now(), grpc_timeout(headers))
}

/// Runs `fut` to completion, or until `deadline` (`None` then; `fut` is
/// dropped).
///
/// An `Either`, not an `async fn` with `fut` awaited in one arm and wrapped
/// in the other: such an `async fn` holds `fut` twice, and nested call
/// layers then multiply a call's future (and, in debug builds, the poll
/// frames: enough to overflow a 2 MiB worker stack). No deadline arms no
/// timer.
pub fn before<F: Future>(
    deadline: Option<Instant>,
    fut: F,
) -> impl Future<Output = Option<F::Output>> {
    use futures::future::Either;
    use futures::FutureExt;
    match deadline {
        None => Either::Left(fut.map(Some)),
        Some(deadline) => Either::Right(tokio::time::timeout_at(deadline, fut).map(Result::ok)),
    }
}

/// The `grpc-timeout` the client sent (`<digits><unit>`, units H M S m u n).
/// Requests whose timeout does not parse are refused before they get here
/// (`server::guard`).
pub fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    parse_grpc_timeout(headers.get("grpc-timeout")?.to_str().ok()?).ok()
}

/// Err (why) if the request has a `grpc-timeout` that does not parse.
pub fn check_grpc_timeout(headers: &http::HeaderMap) -> Result<(), String> {
    match headers.get("grpc-timeout") {
        None => Ok(()),
        Some(v) => {
            let text = v.to_str().map_err(|_| "not ASCII".to_string())?;
            parse_grpc_timeout(text).map(drop)
        }
    }
}

/// grpc-go's `decodeTimeout`: at most 8 digits, then one unit.
fn parse_grpc_timeout(value: &str) -> Result<Duration, String> {
    if value.len() < 2 {
        return Err(format!("timeout string is too short: {value:?}"));
    }
    if value.len() > 9 {
        return Err(format!("timeout string is too long: {value:?}"));
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("timeout value is not a number: {value:?}"));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("timeout value is not a number: {value:?}"))?;
    let hours = |n: u64, per: u64| n.checked_mul(per).map(Duration::from_secs);
    match unit {
        "H" => hours(n, 3600).ok_or_else(|| format!("timeout overflows: {value:?}")),
        "M" => hours(n, 60).ok_or_else(|| format!("timeout overflows: {value:?}")),
        "S" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_millis(n)),
        "u" => Ok(Duration::from_micros(n)),
        "n" => Ok(Duration::from_nanos(n)),
        _ => Err(format!("timeout unit is not recognized: {value:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_answers_a_tenth_early_at_most_100_ms() {
        let now = Instant::now();
        let at = |ms| deadline(now, Some(Duration::from_millis(ms))).map(|d| d - now);
        assert_eq!(at(200), Some(Duration::from_millis(180)));
        assert_eq!(at(1500), Some(Duration::from_millis(1400)));
        assert_eq!(at(60_000), Some(Duration::from_millis(59_900)));
        assert_eq!(deadline(now, None), None);
    }

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(parse_grpc_timeout("1S"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_grpc_timeout("250m"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2H"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("10u"), Ok(Duration::from_micros(10)));
        assert_eq!(
            parse_grpc_timeout("99999999n"),
            Ok(Duration::from_nanos(99_999_999))
        );
        for bad in ["123456789S", "1x", "S", "+5S", "-1S", "1", "xyz"] {
            assert!(parse_grpc_timeout(bad).is_err(), "{bad}");
        }
    }
}
