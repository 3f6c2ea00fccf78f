//! Go durations (`300ms`, `1h30m`): read as Go's `time.ParseDuration` reads them and
//! printed as Go's `Duration.String` prints them.
//!
//! Two readers share the one parser. The health probe's `-connect-timeout` and
//! `-rpc-timeout` flags are Go's `time.Duration` ([`GoDuration`]): they accept, refuse and
//! print exactly what grpc-health-probe does, in Go's words. FunctionConfig's
//! `podExecutor.timeToLive` is a Go duration string in a document Porch also reads
//! ([`PositiveDuration`], [`parse_go_duration`]): there it becomes a [`std::time::Duration`],
//! so it cannot be negative but may exceed Go's ±292 years, and its errors say which units
//! are valid, since they end up in a config error a user has to act on.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NS: u64 = 1;
const US: u64 = 1_000 * NS;
const MS: u64 = 1_000 * US;
const SEC: u64 = 1_000 * MS;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;

/// The largest magnitude Go's `time.Duration` admits: 2^63 ns, as `-2^63` is valid.
const GO_MAX: u128 = 1 << 63;
/// The largest [`Duration`] in nanoseconds.
const STD_MAX: u128 = u64::MAX as u128 * SEC as u128 + (SEC as u128 - 1);

/// Why a duration string is not valid: the checks of Go's `time.ParseDuration`, in its
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Invalid<'a> {
    /// Nothing (or only a sign).
    Empty,
    /// A unit or other text where a number should start.
    ExpectedNumber,
    MissingUnit,
    UnknownUnit(&'a str),
    /// More than the caller's range holds.
    Overflow,
}

impl Invalid<'_> {
    /// Go's error text, which grpc-health-probe users see.
    fn go_message(self, input: &str) -> String {
        match self {
            Invalid::MissingUnit => format!("time: missing unit in duration {input:?}"),
            Invalid::UnknownUnit(unit) => {
                format!("time: unknown unit {unit:?} in duration {input:?}")
            }
            Invalid::Empty | Invalid::ExpectedNumber | Invalid::Overflow => {
                format!("time: invalid duration {input:?}")
            }
        }
    }

    /// The reason a [`DurationError`] gives.
    fn reason(self) -> String {
        match self {
            Invalid::Empty => "empty duration".to_string(),
            Invalid::ExpectedNumber => "expected a number".to_string(),
            Invalid::MissingUnit => {
                "missing unit (valid units are ns, us, µs, ms, s, m, h)".to_string()
            }
            Invalid::UnknownUnit(unit) => {
                format!("unknown unit \"{unit}\" (valid units are ns, us, µs, ms, s, m, h)")
            }
            Invalid::Overflow => "overflow".to_string(),
        }
    }
}

/// The one parser: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` or a bare `0` (with or without sign),
/// e.g. `300ms`, `1.5s`, `1h30m`, `10µs`, as `(negative, nanoseconds)` with at most `max`
/// nanoseconds. Fractions are exact to the nanosecond (truncated); like Go, a fraction
/// keeps only the digits that fit in 2^63 (some 19), as later ones are worth less than a
/// nanosecond.
fn parse_nanos(input: &str, max: u128) -> Result<(bool, u128), Invalid<'_>> {
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok((negative, 0));
    }
    if s.is_empty() {
        return Err(Invalid::Empty);
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(Invalid::ExpectedNumber);
        }
        // [0-9]*: Go stops at the first digit past its range, before looking at the unit.
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut value: u128 = 0;
        for c in s[..digits].bytes() {
            value = value * 10 + u128::from(c - b'0');
            if value > max {
                return Err(Invalid::Overflow);
            }
        }
        let whole = digits > 0;
        s = &s[digits..];
        // (\.[0-9]*)?
        let mut fraction_digits = false;
        let mut fraction: u64 = 0;
        let mut scale: u64 = 1;
        if let Some(rest) = s.strip_prefix('.') {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            fraction_digits = digits > 0;
            let mut full = false;
            for c in rest[..digits].bytes() {
                if full {
                    continue;
                }
                match fraction
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(c - b'0')))
                    .filter(|&f| f <= 1 << 63)
                    .zip(scale.checked_mul(10))
                {
                    Some((f, sc)) => {
                        fraction = f;
                        scale = sc;
                    }
                    None => full = true,
                }
            }
            s = &rest[digits..];
        }
        if !whole && !fraction_digits {
            return Err(Invalid::ExpectedNumber);
        }
        // The unit: everything up to the next '.' or digit.
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let unit = match unit {
            "" => return Err(Invalid::MissingUnit),
            "ns" => NS,
            "us" | "\u{b5}s" | "\u{3bc}s" => US,
            "ms" => MS,
            "s" => SEC,
            "m" => MIN,
            "h" => HOUR,
            other => return Err(Invalid::UnknownUnit(other)),
        };
        let unit = u128::from(unit);
        if value > max / unit {
            return Err(Invalid::Overflow);
        }
        value *= unit;
        if fraction > 0 {
            value += u128::from(fraction) * unit / u128::from(scale);
            if value > max {
                return Err(Invalid::Overflow);
            }
        }
        total += value;
        if total > max {
            return Err(Invalid::Overflow);
        }
    }
    Ok((negative, total))
}

// ---------------------------------------------------------------------------------------------
// Go's time.Duration
// ---------------------------------------------------------------------------------------------

/// A signed count of nanoseconds, like Go's `time.Duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub i64);

impl GoDuration {
    pub const fn from_secs(s: i64) -> Self {
        GoDuration(s * SEC as i64)
    }

    pub fn from_std(d: Duration) -> Self {
        GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }

    /// The duration as a std one; negative durations become zero.
    pub fn to_std(self) -> Duration {
        Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }

    /// Parses Go duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, e.g. `300ms`, `1.5s`,
    /// `1m30s`, `2h`; a bare `0` is allowed. The error is Go's message.
    pub fn parse(orig: &str) -> Result<Self, String> {
        let (negative, nanos) = parse_nanos(orig, GO_MAX).map_err(|e| e.go_message(orig))?;
        if negative {
            // nanos <= 2^63, so the negation fits.
            return Ok(GoDuration((nanos as i128).wrapping_neg() as i64));
        }
        i64::try_from(nanos)
            .map(GoDuration)
            .map_err(|_| Invalid::Overflow.go_message(orig))
    }
}

/// Appends `v / 10^prec`'s fractional digits (".5", ".125"), trailing zeros and the
/// point omitted when zero; returns the integer part.
fn frac(out: &mut String, v: u64, prec: u32) -> u64 {
    let p = 10u64.pow(prec);
    let f = v % p;
    if f != 0 {
        let digits = format!("{f:0width$}", width = prec as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    v / p
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.0 < 0;
        let u = self.0.unsigned_abs();
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        if u < SEC {
            let (prec, unit) = match u {
                0 => return f.write_str("0s"),
                u if u < US => (0, "ns"),
                u if u < MS => (3, "\u{b5}s"),
                _ => (6, "ms"),
            };
            let mut fr = String::new();
            let int = frac(&mut fr, u, prec);
            out.push_str(&int.to_string());
            out.push_str(&fr);
            out.push_str(unit);
        } else {
            let mut fr = String::new();
            let secs = frac(&mut fr, u, 9);
            let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
            if h > 0 {
                out.push_str(&format!("{h}h{m}m"));
            } else if m > 0 {
                out.push_str(&format!("{m}m"));
            }
            out.push_str(&format!("{s}{fr}s"));
        }
        f.write_str(&out)
    }
}

// ---------------------------------------------------------------------------------------------
// Durations in configuration documents
// ---------------------------------------------------------------------------------------------

/// A Go duration string that could not be parsed (or is negative, or zero where a
/// positive duration is needed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid duration \"{}\": {}", self.input, self.reason)
    }
}

impl std::error::Error for DurationError {}

/// Parses a Go `time.ParseDuration` string: an optional sign and a sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`,
/// `m`, `h`), e.g. `300ms`, `30m`, `1h30m`, `1.5s`, `2h`. `0` needs no unit.
/// Negative durations are rejected (a [`Duration`] cannot be negative); `0s` is accepted.
/// Fractions are exact to the nanosecond (digits beyond nanosecond precision truncate).
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: String| DurationError {
        input: input.to_string(),
        reason,
    };
    let (negative, nanos) = parse_nanos(input, STD_MAX).map_err(|e| err(e.reason()))?;
    if negative && nanos > 0 {
        return Err(err("negative durations are not allowed".to_string()));
    }
    let sec = u128::from(SEC);
    // nanos <= STD_MAX: the seconds fit a u64 and the remainder a u32.
    Ok(Duration::new((nanos / sec) as u64, (nanos % sec) as u32))
}

/// A positive duration written as a Go duration string (`30m`, `1h30m`). Keeps the original
/// text so that it serialises back unchanged. Deserialising rejects invalid, zero and
/// negative durations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositiveDuration {
    duration: Duration,
    text: String,
}

impl PositiveDuration {
    /// Parses a positive Go duration string.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let duration = parse_go_duration(text)?;
        if duration.is_zero() {
            return Err(DurationError {
                input: text.to_string(),
                reason: "must be greater than zero".to_string(),
            });
        }
        Ok(PositiveDuration {
            duration,
            text: text.to_string(),
        })
    }

    /// The parsed duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for PositiveDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for PositiveDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for PositiveDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = PositiveDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"30m\" or \"1h30m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PositiveDuration, E> {
                PositiveDuration::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::GoDuration;

    fn p(s: &str) -> Result<i64, String> {
        GoDuration::parse(s).map(|d| d.0)
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(p("1s"), Ok(1_000_000_000));
        assert_eq!(p("300ms"), Ok(300_000_000));
        assert_eq!(p("1.5s"), Ok(1_500_000_000));
        assert_eq!(p(".5s"), Ok(500_000_000));
        assert_eq!(p("1.s"), Ok(1_000_000_000));
        assert_eq!(p("1m30s"), Ok(90_000_000_000));
        assert_eq!(p("2h"), Ok(7_200_000_000_000));
        assert_eq!(p("1h2m3s4ms5us6ns"), Ok(3_723_004_005_006));
        assert_eq!(p("10µs"), Ok(10_000));
        assert_eq!(p("10μs"), Ok(10_000));
        assert_eq!(p("0"), Ok(0));
        assert_eq!(p("-0"), Ok(0));
        assert_eq!(p("+5s"), Ok(5_000_000_000));
        assert_eq!(p("-1.5h"), Ok(-5_400_000_000_000));
        assert_eq!(p("0.000000001s"), Ok(1));
        assert_eq!(p("2562047h47m16.854775807s"), Ok(i64::MAX));
        assert_eq!(p("-2562047h47m16.854775808s"), Ok(i64::MIN));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in [
            "",
            "1",
            "10",
            "s",
            ".s",
            "1x",
            "1sec",
            "-",
            "1s2",
            "1..5s",
            " 1s",
            "1 s",
            "2562047h47m16.854775808s",
            "9999999999999999999h",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(p("1"), Err("time: missing unit in duration \"1\"".into()));
        assert_eq!(
            p("1x"),
            Err("time: unknown unit \"x\" in duration \"1x\"".into())
        );
    }

    #[test]
    fn prints_like_go() {
        let s = |ns: i64| GoDuration(ns).to_string();
        assert_eq!(s(0), "0s");
        assert_eq!(s(1), "1ns");
        assert_eq!(s(1_500), "1.5µs");
        assert_eq!(s(500_000_000), "500ms");
        assert_eq!(s(1_234_567), "1.234567ms");
        assert_eq!(s(1_000_000_000), "1s");
        assert_eq!(s(1_500_000_000), "1.5s");
        assert_eq!(s(90_000_000_000), "1m30s");
        assert_eq!(s(7_200_000_000_000), "2h0m0s");
        assert_eq!(s(3_723_004_005_006), "1h2m3.004005006s");
        assert_eq!(s(-1_000_000_000), "-1s");
        assert_eq!(s(-300_000_000), "-300ms");
        assert_eq!(s(i64::MAX), "2562047h47m16.854775807s");
        assert_eq!(s(i64::MIN), "-2562047h47m16.854775808s");
    }
}

/// Tests of the configuration forms: [`parse_go_duration`] and [`PositiveDuration`]
/// (imported as `GoDuration`).
#[cfg(test)]
mod config_tests {
    use std::time::Duration;

    use super::{parse_go_duration, DurationError, PositiveDuration as GoDuration};

    #[test]
    fn go_durations_parse() {
        let cases = [
            ("300ms", Duration::from_millis(300)),
            ("30m", Duration::from_secs(1800)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5s", Duration::from_millis(1500)),
            ("2h", Duration::from_secs(7200)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("+5s", Duration::from_secs(5)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("10ns", Duration::from_nanos(10)),
            ("7us", Duration::from_micros(7)),
            ("7µs", Duration::from_micros(7)),
            ("7μs", Duration::from_micros(7)),
            ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("1.0000000019s", Duration::new(1, 1)),
            ("1.5h", Duration::from_secs(5400)),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_go_duration(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn go_durations_reject() {
        let cases = [
            ("", "empty duration"),
            ("-", "empty duration"),
            (
                "5",
                "missing unit (valid units are ns, us, µs, ms, s, m, h)",
            ),
            (
                "5x",
                "unknown unit \"x\" (valid units are ns, us, µs, ms, s, m, h)",
            ),
            (
                "1h-5m",
                "unknown unit \"h-\" (valid units are ns, us, µs, ms, s, m, h)",
            ),
            (".s", "expected a number"),
            ("s", "expected a number"),
            ("-5m", "negative durations are not allowed"),
            (
                "30 m",
                "unknown unit \" m\" (valid units are ns, us, µs, ms, s, m, h)",
            ),
            ("99999999999999999999999999999999h", "overflow"),
            ("9999999999999999999h", "overflow"),
        ];
        for (input, reason) in cases {
            assert_eq!(
                parse_go_duration(input),
                Err(DurationError {
                    input: input.to_string(),
                    reason: reason.to_string()
                }),
                "{input}"
            );
        }
        assert_eq!(
            parse_go_duration("-5m").map_err(|e| e.to_string()),
            Err("invalid duration \"-5m\": negative durations are not allowed".to_string())
        );
    }

    #[test]
    fn go_duration_type_is_positive_and_keeps_text() {
        let d = GoDuration::parse("1h30m").expect("valid");
        assert_eq!(d.duration(), Duration::from_secs(5400));
        assert_eq!(d.as_str(), "1h30m");
        assert_eq!(d.to_string(), "1h30m");
        assert_eq!(
            GoDuration::parse("0s").map_err(|e| e.to_string()),
            Err("invalid duration \"0s\": must be greater than zero".to_string())
        );
    }
}
