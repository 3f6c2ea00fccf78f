//! Go duration strings (`30m`, `1h30m`), as FunctionConfig's `podExecutor.timeToLive`
//! writes them.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Go duration string that could not be parsed (or is negative).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration \"{input}\": {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

/// Parses a Go `time.ParseDuration` string: an optional sign and a sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`,
/// `m`, `h`), e.g. `300ms`, `30m`, `1h30m`, `1.5s`, `2h`. `0` needs no unit.
/// Negative durations are rejected (a [`Duration`] cannot be negative); `0s` is accepted.
/// Fractions are exact to the nanosecond (digits beyond nanosecond precision truncate).
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        // Integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, rest) = s.split_at(int_len);
        s = rest;
        // Fraction.
        let mut frac_digits = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (digits, rest) = rest.split_at(frac_len);
            frac_digits = digits;
            s = rest;
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(err("expected a number"));
        }
        // Unit.
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => {
                return Err(err(
                    "missing unit (valid units are ns, us, µs, ms, s, m, h)",
                ))
            }
            _ => {
                return Err(err(&format!(
                    "unknown unit \"{unit}\" (valid units are ns, us, µs, ms, s, m, h)"
                )))
            }
        };
        let int_value: u128 = if int_digits.is_empty() {
            0
        } else {
            // More than 30 digits overflows any sensible duration anyway.
            if int_digits.len() > 30 {
                return Err(err("overflow"));
            }
            int_digits.parse().map_err(|_| err("overflow"))?
        };
        let mut value = int_value
            .checked_mul(unit_ns)
            .ok_or_else(|| err("overflow"))?;
        // Keep at most 18 fraction digits: beyond that no unit reaches a nanosecond.
        let frac_digits = &frac_digits[..frac_digits.len().min(18)];
        if !frac_digits.is_empty() {
            let frac: u128 = frac_digits.parse().map_err(|_| err("overflow"))?;
            let scale = 10u128.pow(frac_digits.len() as u32);
            value = value
                .checked_add(frac * unit_ns / scale)
                .ok_or_else(|| err("overflow"))?;
        }
        total = total.checked_add(value).ok_or_else(|| err("overflow"))?;
    }
    if negative && total > 0 {
        return Err(err("negative durations are not allowed"));
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| err("overflow"))?;
    // The remainder is < 1e9 and always fits.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// A positive duration written as a Go duration string (`30m`, `1h30m`). Keeps the original
/// text so that it serialises back unchanged. Deserialising rejects invalid, zero and
/// negative durations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration {
    duration: Duration,
    text: String,
}

impl GoDuration {
    /// Parses a positive Go duration string.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let duration = parse_go_duration(text)?;
        if duration.is_zero() {
            return Err(DurationError {
                input: text.to_string(),
                reason: "must be greater than zero".to_string(),
            });
        }
        Ok(GoDuration {
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

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"30m\" or \"1h30m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                GoDuration::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
