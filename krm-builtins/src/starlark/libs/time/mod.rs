//! `time.star` (Go Starlark's `lib/time`): `now()`, `parse_duration(d)`,
//! `parse_time(x, format="2006-01-02T15:04:05Z07:00", location="UTC")`,
//! `from_timestamp(sec, nsec=0)`, `time(year=0, month=1, day=1, hour=0,
//! minute=0, second=0, nanosecond=0, location="UTC")`,
//! `is_valid_timezone(loc)`, and the durations `nanosecond` ...
//! `hour`.
//!
//! What differs from Go's:
//! - A duration is an int of nanoseconds (Go's is a Duration value):
//!   `time.hour * 2`, `d // time.second` and `d / time.minute` work as
//!   Go's do; `d.seconds` and `str(d)` as Go writes it do not.
//! - A time is a struct: Go's `year`, `month`, `day`, `hour`, `minute`,
//!   `second`, `nanosecond`, `unix`, `unix_nano`, `format(layout)` and
//!   `in_location(loc)`, and ours: `rfc3339` (the time as RFC 3339, what
//!   `format` gives with the default layout), `offset` (seconds east of
//!   UTC), `zone` (the zone's abbreviation, "" for an unnamed offset) and
//!   `_instant` (`(unix, nanosecond)`, first in the order structs compare
//!   in, so `<` orders times). `==` is false between two time values
//!   (their methods differ): compare `unix_nano`. There is no `+`/`-`
//!   between times and durations: add to `unix_nano` and use
//!   `from_timestamp(0, n)`.
//! - There is no time zone database (the sandbox opens no files): the
//!   only locations are UTC (`"UTC"`, `""`, and `"Local"`, the catalog
//!   container's local zone) and the fixed offsets a parsed text gives
//!   (`+02:00`). `is_valid_timezone` is true for those names only.
//!
//! Layouts are Go's (`2006-01-02 15:04:05.000 -0700 MST`, `Jan`,
//! `Monday`, `_2`, `002`, `PM`, ...), with Go's rules and parse errors.

use std::time::{SystemTime, UNIX_EPOCH};

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::AllocDict;
use starlark::values::list_or_tuple::UnpackListOrTuple;
use starlark::values::tuple::AllocTuple;
use starlark::values::{Heap, Value};

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("_time", members);
}

/// The module's symbol, and the time structs with their methods.
pub(super) const PRELUDE: &str = r#"
def _wrap(fields):
    sec, nsec, offset, zone = fields["unix"], fields["nanosecond"], fields["offset"], fields["zone"]

    def format(layout):
        return _time.format(sec, nsec, offset, zone, layout)

    def in_location(location):
        return _wrap(_time.in_location(sec, nsec, location))

    fields["format"] = format
    fields["in_location"] = in_location
    return struct(**fields)

def _now():
    return _wrap(_time.now())

def _parse_time(x, format = "2006-01-02T15:04:05Z07:00", location = "UTC"):
    return _wrap(_time.parse_time(x, format, location))

def _from_timestamp(sec, nsec = 0):
    return _wrap(_time.from_timestamp(sec, nsec))

def _time_(year = 0, month = 1, day = 1, hour = 0, minute = 0, second = 0, nanosecond = 0, location = "UTC"):
    return _wrap(_time.time((year, month, day, hour, minute, second, nanosecond), location))

time = struct(
    from_timestamp = _from_timestamp,
    is_valid_timezone = _time.is_valid_timezone,
    now = _now,
    parse_duration = _time.parse_duration,
    parse_time = _parse_time,
    time = _time_,
    nanosecond = 1,
    microsecond = 1000,
    millisecond = 1000000,
    second = 1000000000,
    minute = 60000000000,
    hour = 3600000000000,
)
"#;

const RFC3339: &str = "2006-01-02T15:04:05Z07:00";

impl Time {
    /// The Starlark fields of a time (the prelude adds its methods).
    fn fields<'v>(&self, heap: Heap<'v>) -> Value<'v> {
        let c = self.civil();
        let fields: Vec<(&str, Value<'v>)> = vec![
            (
                "_instant",
                heap.alloc(AllocTuple([heap.alloc(self.sec), heap.alloc(self.nsec)])),
            ),
            ("year", heap.alloc(c.year)),
            ("month", heap.alloc(c.month)),
            ("day", heap.alloc(c.day)),
            ("hour", heap.alloc(c.hour)),
            ("minute", heap.alloc(c.minute)),
            ("second", heap.alloc(c.second)),
            ("nanosecond", heap.alloc(self.nsec)),
            ("unix", heap.alloc(self.sec)),
            ("unix_nano", heap.alloc(self.unix_nano())),
            ("offset", heap.alloc(self.offset)),
            ("zone", heap.alloc(self.zone.as_str())),
            ("rfc3339", heap.alloc(format_time(self, RFC3339))),
        ];
        heap.alloc(AllocDict(fields))
    }
}

/// A location by name: its offset and zone name (UTC only, see the
/// module's doc).
fn zone_for(function: &str, name: &str) -> anyhow::Result<(i32, &'static str)> {
    match name {
        "" | "UTC" | "Local" => Ok((0, "UTC")),
        other => Err(anyhow::anyhow!(
            "time.{function}: unknown time zone {other} (the built-in starlark function has no time zone database: only UTC, and the fixed offsets of parsed times)"
        )),
    }
}

mod clock;
mod layout;
use clock::{date, Time, NANOS};
use layout::{byte_at, format_time, head, is_digit_at, parse_time_text, quote, tail};

/// Go's `time.ParseDuration`, in nanoseconds.
fn duration_nanos(text: &str) -> Result<i64, String> {
    let orig = text.as_bytes();
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(&c) = s.first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            s = tail(s, 1);
        }
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(byte_at(s, 0) == b'.' || is_digit_at(s, 0)) {
            return Err(invalid());
        }
        // The integer part.
        let mut v: u64 = 0;
        let int_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
        for &b in head(s, int_len) {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        s = tail(s, int_len);
        // The fraction, digits past what fits ignored.
        let (mut f, mut scale, mut frac_len) = (0u64, 1f64, 0usize);
        let mut has_frac = false;
        if s.first() == Some(&b'.') {
            s = tail(s, 1);
            frac_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
            let mut overflow = false;
            for &b in head(s, frac_len) {
                if overflow {
                    continue;
                }
                match f
                    .checked_mul(10)
                    .and_then(|y| y.checked_add(u64::from(b - b'0')))
                {
                    Some(y) if y <= LIMIT => {
                        f = y;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            s = tail(s, frac_len);
            has_frac = true;
        }
        if int_len == 0 && (!has_frac || frac_len == 0) {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|&&b| b != b'.' && !b.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let unit_text = head(s, unit_len);
        s = tail(s, unit_len);
        let unit: u64 = match unit_text {
            b"ns" => 1,
            // `us`, `µs` (U+00B5) and `μs` (U+03BC).
            b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(unit_text),
                    quote(orig)
                ))
            }
        };
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            let extra = (f as f64 * (unit as f64 / scale)) as u64;
            v = v
                .checked_add(extra)
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        d = d
            .checked_add(v)
            .filter(|d| *d <= LIMIT)
            .ok_or_else(invalid)?;
    }
    if neg {
        return Ok(0i64.wrapping_sub_unsigned(d));
    }
    i64::try_from(d).map_err(|_| invalid())
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn now<'v>(heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
        let ns = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(0),
            Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(0),
        };
        let t = Time::from_nanos(ns)
            .ok_or_else(|| anyhow::anyhow!("time.now: the clock is out of range"))?;
        Ok(t.fields(heap))
    }

    fn parse_time<'v>(
        #[starlark(require = pos)] x: &str,
        #[starlark(require = pos)] format: &str,
        #[starlark(require = pos)] location: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        zone_for("parse_time", location)?;
        let t = parse_time_text(format, x).map_err(|e| anyhow::anyhow!("time.parse_time: {e}"))?;
        Ok(t.fields(heap))
    }

    fn from_timestamp<'v>(
        #[starlark(require = pos)] sec: i64,
        #[starlark(require = pos)] nsec: i64,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let t = Time::from_nanos(i128::from(sec) * NANOS + i128::from(nsec))
            .ok_or_else(|| anyhow::anyhow!("time.from_timestamp: the time is out of range"))?;
        Ok(t.fields(heap))
    }

    fn time<'v>(
        #[starlark(require = pos)] fields: UnpackListOrTuple<i64>,
        #[starlark(require = pos)] location: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let (offset, _) = zone_for("time", location)?;
        let &[year, month, day, hour, minute, second, nanosecond] = fields.items.as_slice() else {
            return Err(anyhow::anyhow!(
                "time.time: expected the seven fields of a time"
            ));
        };
        let t = date(year, month, day, hour, minute, second, nanosecond, offset)
            .ok_or_else(|| anyhow::anyhow!("time.time: the time is out of range"))?;
        Ok(t.fields(heap))
    }

    fn in_location<'v>(
        #[starlark(require = pos)] sec: i64,
        #[starlark(require = pos)] nsec: u32,
        #[starlark(require = pos)] location: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let (offset, zone) = zone_for("in_location", location)?;
        let t = Time {
            sec,
            nsec,
            offset,
            zone: zone.to_owned(),
        };
        Ok(t.fields(heap))
    }

    fn format(
        #[starlark(require = pos)] sec: i64,
        #[starlark(require = pos)] nsec: u32,
        #[starlark(require = pos)] offset: i32,
        #[starlark(require = pos)] zone: &str,
        #[starlark(require = pos)] layout: &str,
    ) -> anyhow::Result<String> {
        let t = Time {
            sec,
            nsec,
            offset,
            zone: zone.to_owned(),
        };
        Ok(format_time(&t, layout))
    }

    fn parse_duration<'v>(
        #[starlark(require = pos)] d: Value<'v>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        if d.get_type() == "int" {
            return Ok(d);
        }
        let Some(s) = d.unpack_str() else {
            return Err(anyhow::anyhow!(
                "time.parse_duration: got {}, want string or int (a duration in nanoseconds)",
                d.get_type()
            ));
        };
        let ns = duration_nanos(s).map_err(|e| anyhow::anyhow!("time.parse_duration: {e}"))?;
        Ok(heap.alloc(ns))
    }

    fn is_valid_timezone(#[starlark(require = pos)] loc: &str) -> anyhow::Result<bool> {
        Ok(zone_for("is_valid_timezone", loc).is_ok())
    }
}
