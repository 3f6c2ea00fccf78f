//! Go's `time.Duration`: parsing (`time.ParseDuration`) and printing (`Duration.String`),
//! so that flags and messages read exactly as grpc-health-probe's do.

use std::fmt;

/// A signed count of nanoseconds, like Go's `time.Duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub i64);

const NS: u64 = 1;
const US: u64 = 1_000 * NS;
const MS: u64 = 1_000 * US;
const SEC: u64 = 1_000 * MS;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;

impl GoDuration {
    pub const fn from_secs(s: i64) -> Self {
        GoDuration(s * SEC as i64)
    }

    pub fn from_std(d: std::time::Duration) -> Self {
        GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }

    /// The duration as a std one; negative durations become zero.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }

    /// Parses Go duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, e.g. `300ms`, `1.5s`,
    /// `1m30s`, `2h`; a bare `0` is allowed. The error is Go's message.
    pub fn parse(orig: &str) -> Result<Self, String> {
        let invalid = || format!("time: invalid duration {orig:?}");
        let mut s = orig.as_bytes();
        let mut neg = false;
        if let Some(&c) = s.first() {
            if c == b'-' || c == b'+' {
                neg = c == b'-';
                s = &s[1..];
            }
        }
        if s == b"0" {
            return Ok(GoDuration(0));
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            if !(s[0] == b'.' || s[0].is_ascii_digit()) {
                return Err(invalid());
            }
            // [0-9]*
            let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
            let pre = digits > 0;
            let mut v: u64 = 0;
            for &c in &s[..digits] {
                v = v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(c - b'0')))
                    .filter(|&v| v <= 1 << 63)
                    .ok_or_else(invalid)?;
            }
            s = &s[digits..];
            // (\.[0-9]*)?
            let mut post = false;
            let mut frac: u64 = 0;
            let mut scale: u64 = 1;
            if s.first() == Some(&b'.') {
                s = &s[1..];
                let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
                post = digits > 0;
                let mut overflow = false;
                for &c in &s[..digits] {
                    if overflow {
                        continue;
                    }
                    match frac
                        .checked_mul(10)
                        .and_then(|f| f.checked_add(u64::from(c - b'0')))
                        .filter(|&f| f <= 1 << 63)
                        .zip(scale.checked_mul(10))
                    {
                        Some((f, sc)) => {
                            frac = f;
                            scale = sc;
                        }
                        None => overflow = true,
                    }
                }
                s = &s[digits..];
            }
            if !pre && !post {
                return Err(invalid());
            }
            // unit: everything up to the next '.' or digit
            let ulen = s
                .iter()
                .take_while(|&&c| c != b'.' && !c.is_ascii_digit())
                .count();
            if ulen == 0 {
                return Err(format!("time: missing unit in duration {orig:?}"));
            }
            let unit_str = &s[..ulen];
            s = &s[ulen..];
            let unit = match unit_str {
                b"ns" => NS,
                b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => US,
                b"ms" => MS,
                b"s" => SEC,
                b"m" => MIN,
                b"h" => HOUR,
                _ => {
                    return Err(format!(
                        "time: unknown unit {:?} in duration {orig:?}",
                        String::from_utf8_lossy(unit_str)
                    ))
                }
            };
            if v > (1 << 63) / unit {
                return Err(invalid());
            }
            v *= unit;
            if frac > 0 {
                let add = u128::from(frac) * u128::from(unit) / u128::from(scale);
                v = u64::try_from(u128::from(v) + add)
                    .ok()
                    .filter(|&v| v <= 1 << 63)
                    .ok_or_else(invalid)?;
            }
            total = total
                .checked_add(v)
                .filter(|&t| t <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        if neg {
            // total <= 2^63, so the negation fits
            return Ok(GoDuration((total as i128).wrapping_neg() as i64));
        }
        i64::try_from(total).map(GoDuration).map_err(|_| invalid())
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
