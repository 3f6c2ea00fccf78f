//! yaml.v3's tag resolution (`resolve.go`, go.yaml.in/yaml/v3 v3.0.4).
//!
//! [`resolve_plain`] answers what `resolve("", value)` answers for its tag:
//! the tag a plain scalar gets when read, and what the encoder checks to
//! decide whether a `!!str` must be quoted. It follows Go's `strconv`
//! (`ParseInt`, `ParseUint`, `ParseFloat`) and `time.Parse` (Go 1.19) as far
//! as `resolve` uses them, so edge cases (`08` is a float, `0b-1` an int,
//! `1e400` a string) come out as they do in kpt.

use std::borrow::Cow;

pub const NULL_TAG: &str = "!!null";
pub const BOOL_TAG: &str = "!!bool";
pub const STR_TAG: &str = "!!str";
pub const INT_TAG: &str = "!!int";
pub const FLOAT_TAG: &str = "!!float";
pub const TIMESTAMP_TAG: &str = "!!timestamp";
pub const SEQ_TAG: &str = "!!seq";
pub const MAP_TAG: &str = "!!map";
pub const BINARY_TAG: &str = "!!binary";
pub const MERGE_TAG: &str = "!!merge";

pub const LONG_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// `shortTag`: `tag:yaml.org,2002:x` → `!!x`; anything else unchanged.
pub fn short_tag(tag: &str) -> Cow<'_, str> {
    match tag.strip_prefix(LONG_TAG_PREFIX) {
        Some(rest) => Cow::Owned(format!("!!{rest}")),
        None => Cow::Borrowed(tag),
    }
}

/// `longTag`: `!!x` → `tag:yaml.org,2002:x`; anything else unchanged.
pub fn long_tag(tag: &str) -> Cow<'_, str> {
    match tag.strip_prefix("!!") {
        Some(rest) => Cow::Owned(format!("{LONG_TAG_PREFIX}{rest}")),
        None => Cow::Borrowed(tag),
    }
}

/// `resolveTable`: the first byte's hint. 0 means "only a string" (so `<<`
/// resolves to `!!str` here; yaml.v3's decoder gives it `!!merge` itself).
fn hint(first: u8) -> u8 {
    match first {
        b'+' | b'-' => b'S',
        b'0'..=b'9' => b'D',
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => b'M',
        b'.' => b'.',
        _ => 0,
    }
}

/// `resolveMap`: the values known by spelling.
fn resolve_map(value: &str) -> Option<&'static str> {
    Some(match value {
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => BOOL_TAG,
        "" | "~" | "null" | "Null" | "NULL" => NULL_TAG,
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => FLOAT_TAG,
        "<<" => MERGE_TAG,
        _ => return None,
    })
}

/// The tag yaml.v3 gives a plain scalar with this value: the tag of
/// `resolve("", value)`.
pub fn resolve_plain(value: &str) -> &'static str {
    let h = match value.as_bytes().first() {
        None => b'N',
        Some(&c) => hint(c),
    };
    if h == 0 {
        return STR_TAG;
    }
    if let Some(tag) = resolve_map(value) {
        return tag;
    }
    match h {
        b'.' if go_parse_float_ok(value.as_bytes()) => return FLOAT_TAG,
        b'D' | b'S' => {
            // Timestamps are tried on the value as written (tag "").
            if parse_timestamp(value.as_bytes()) {
                return TIMESTAMP_TAG;
            }
            let plain: Cow<'_, str> = if value.contains('_') {
                Cow::Owned(value.replace('_', ""))
            } else {
                Cow::Borrowed(value)
            };
            let plain = plain.as_bytes();
            if go_parse_int(plain, 0).is_some() || go_parse_uint(plain, 0).is_some() {
                return INT_TAG;
            }
            if yaml_style_float(plain) && go_parse_float_ok(plain) {
                return FLOAT_TAG;
            }
            if let Some(rest) = plain.strip_prefix(b"0b") {
                if go_parse_int(rest, 2).is_some() || go_parse_uint(rest, 2).is_some() {
                    return INT_TAG;
                }
            } else if let Some(rest) = plain.strip_prefix(b"-0b") {
                if go_parse_neg_int(rest, 2) {
                    return INT_TAG;
                }
            }
            if let Some(rest) = plain.strip_prefix(b"0o") {
                if go_parse_int(rest, 8).is_some() || go_parse_uint(rest, 8).is_some() {
                    return INT_TAG;
                }
            } else if let Some(rest) = plain.strip_prefix(b"-0o") {
                if go_parse_neg_int(rest, 8) {
                    return INT_TAG;
                }
            }
        }
        // '.' that is no float; 'M' and 'N': only the map above knows them.
        _ => {}
    }
    STR_TAG
}

/// `isBase60Float`: YAML 1.1 sexagesimal floats (`1:20`), which yaml.v3
/// quotes when it marshals a Go string (not on the Node path).
pub fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&c) = b.first() else {
        return false;
    };
    if !(c == b'+' || c == b'-' || c.is_ascii_digit()) || !b.contains(&b':') {
        return false;
    }
    // ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
    let mut i = usize::from(c == b'+' || c == b'-');
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    i += 1;
    while b.get(i).is_some_and(|&c| c.is_ascii_digit() || c == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let Some(&d1) = b.get(i).filter(|c| c.is_ascii_digit()) else {
            return false;
        };
        i += 1;
        // A second digit must be taken when present: nothing else may
        // follow a digit here.
        if b.get(i).is_some_and(u8::is_ascii_digit) {
            if d1 > b'5' {
                return false;
            }
            i += 1;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(|&c| c.is_ascii_digit() || c == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

/// `isOldBool`: YAML 1.1 booleans, quoted when yaml.v3 marshals a Go string.
pub fn is_old_bool(s: &str) -> bool {
    matches!(
        s,
        "y" | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "on"
            | "On"
            | "ON"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(b: &[u8]) -> bool {
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

fn lower(c: u8) -> u8 {
    c | (b'x' - b'X')
}

/// Go's `strconv.underscoreOK`: underscores only between digits (or after
/// a base prefix), never last.
fn underscore_ok(s: &[u8]) -> bool {
    // saw: b'^' start, b'0' digit or prefix, b'_' underscore, b'!' other.
    let mut saw = b'^';
    let mut s = s;
    if let Some(b'-' | b'+') = s.first() {
        s = &s[1..];
    }
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(lower(s[1]), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = lower(s[1]) == b'x';
    }
    while i < s.len() {
        let c = s[i];
        i += 1;
        if c.is_ascii_digit() || hex && (b'a'..=b'f').contains(&lower(c)) {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// Go's `strconv.ParseUint(s, base, 64)`, `None` on any error. Base 0 takes
/// a `0b`/`0o`/`0x`/`0` prefix and allows underscores.
fn go_parse_uint(s0: &[u8], base: u32) -> Option<u64> {
    if s0.is_empty() {
        return None;
    }
    let base0 = base == 0;
    let mut s = s0;
    let mut base = u64::from(base);
    if base0 {
        base = 10;
        if s[0] == b'0' {
            if s.len() >= 3 && lower(s[1]) == b'b' {
                base = 2;
                s = &s[2..];
            } else if s.len() >= 3 && lower(s[1]) == b'o' {
                base = 8;
                s = &s[2..];
            } else if s.len() >= 3 && lower(s[1]) == b'x' {
                base = 16;
                s = &s[2..];
            } else {
                base = 8;
                s = &s[1..];
            }
        }
    }
    let mut underscores = false;
    let mut n: u64 = 0;
    for &c in s {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => c - b'0',
            _ if lower(c).is_ascii_lowercase() => lower(c) - b'a' + 10,
            _ => return None,
        };
        if u64::from(d) >= base {
            return None;
        }
        n = n.checked_mul(base)?.checked_add(u64::from(d))?;
    }
    if underscores && !underscore_ok(s0) {
        return None;
    }
    Some(n)
}

/// Go's `strconv.ParseInt(s, base, 64)` (sign, then `ParseUint`).
fn go_parse_int(s: &[u8], base: u32) -> Option<i64> {
    let (neg, rest) = match s.first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let un = go_parse_uint(rest, base)?;
    const CUTOFF: u64 = 1 << 63;
    if neg {
        if un > CUTOFF {
            return None;
        }
        Some((un as i64).wrapping_neg())
    } else {
        i64::try_from(un).ok()
    }
}

/// `strconv.ParseInt("-"+rest, base, 64)` succeeds (a sign in `rest` makes
/// `ParseUint` fail, as in Go).
fn go_parse_neg_int(rest: &[u8], base: u32) -> bool {
    go_parse_uint(rest, base).is_some_and(|un| un <= 1 << 63)
}

/// Go's `strconv.ParseFloat(s, 64)` succeeds, for the decimal forms
/// `resolve` can hand it (it only calls it on values starting with `.` or
/// matching `yamlStyleFloat`, so hexadecimal floats, `inf` and `nan` never
/// reach it). Ports `readFloat`'s syntax (underscores checked by
/// `underscoreOK`) and fails on overflow (`ErrRange`), as Go does.
fn go_parse_float_ok(s: &[u8]) -> bool {
    let mut i = 0;
    if let Some(b'+' | b'-') = s.first() {
        i += 1;
    }
    if i + 2 < s.len() && s[i] == b'0' && lower(s[i + 1]) == b'x' {
        // Hexadecimal: not reachable from resolve (see above).
        return false;
    }
    let mut underscores = false;
    let mut sawdot = false;
    let mut sawdigits = false;
    while i < s.len() {
        match s[i] {
            b'_' => underscores = true,
            b'.' if !sawdot => sawdot = true,
            b'0'..=b'9' => sawdigits = true,
            _ => break,
        }
        i += 1;
    }
    if !sawdigits {
        return false;
    }
    if i < s.len() && lower(s[i]) == b'e' {
        i += 1;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            i += 1;
        }
        if !s.get(i).is_some_and(u8::is_ascii_digit) {
            return false;
        }
        while i < s.len() && (s[i].is_ascii_digit() || s[i] == b'_') {
            underscores |= s[i] == b'_';
            i += 1;
        }
    }
    if underscores && !underscore_ok(&s[..i]) {
        return false;
    }
    if i != s.len() {
        return false;
    }
    // Range: Go fails where the value rounds to infinity; Rust's parser
    // rounds the same way and gives infinity there.
    let text: Cow<'_, [u8]> = if underscores {
        Cow::Owned(s.iter().copied().filter(|&c| c != b'_').collect())
    } else {
        Cow::Borrowed(s)
    };
    std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .is_some_and(f64::is_finite)
}

/// `parseTimestamp`: the value starts with `YYYY-` and one of yaml.v3's
/// `allowedTimestampFormats` parses it with Go 1.19's `time.Parse`.
fn parse_timestamp(s: &[u8]) -> bool {
    let i = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if i != 4 || i == s.len() || s[i] != b'-' {
        return false;
    }
    // "2006-1-2T15:4:5.999999999Z07:00", the same with "t",
    // "2006-1-2 15:4:5.999999999", "2006-1-2".
    parse_time_layout(s, Some(b'T'), true)
        || parse_time_layout(s, Some(b't'), true)
        || parse_time_layout(s, Some(b' '), false)
        || parse_time_layout(s, None, false)
}

fn is_digit_at(s: &[u8], i: usize) -> bool {
    s.get(i).is_some_and(u8::is_ascii_digit)
}

/// `time.getnum(s, false)`: one or two digits.
fn getnum(s: &[u8]) -> Option<(u32, &[u8])> {
    if !is_digit_at(s, 0) {
        return None;
    }
    if !is_digit_at(s, 1) {
        return Some((u32::from(s[0] - b'0'), &s[1..]));
    }
    Some((
        u32::from(s[0] - b'0') * 10 + u32::from(s[1] - b'0'),
        &s[2..],
    ))
}

/// `time.atoi`: an optional sign and digits, nothing else (empty is 0).
fn time_atoi_ok(s: &[u8]) -> bool {
    let s = match s.first() {
        Some(b'+' | b'-') => &s[1..],
        _ => s,
    };
    s.iter().all(u8::is_ascii_digit)
}

/// Go 1.19 `time.Parse` of one of yaml.v3's layouts: `sep` is the byte
/// between date and time (`None`: date only), `tz` whether `Z07:00` follows.
fn parse_time_layout(s: &[u8], sep: Option<u8>, tz: bool) -> bool {
    // "2006": four digits (checked by the caller), then "-".
    let year: u32 = s[..4].iter().fold(0, |n, &c| n * 10 + u32::from(c - b'0'));
    let v = &s[4..];
    let Some(v) = v.strip_prefix(b"-") else {
        return false;
    };
    let Some((month, v)) = getnum(v) else {
        return false;
    };
    if !(1..=12).contains(&month) {
        return false;
    }
    let Some(v) = v.strip_prefix(b"-") else {
        return false;
    };
    let Some((day, mut v)) = getnum(v) else {
        return false;
    };
    if let Some(sep) = sep {
        if sep == b' ' {
            // `skip`: a space in the layout matches any run of spaces.
            if v.first().is_some_and(|&c| c != b' ') {
                return false;
            }
            while let Some(rest) = v.strip_prefix(b" ") {
                v = rest;
            }
        } else {
            let Some(rest) = v.strip_prefix(&[sep]) else {
                return false;
            };
            v = rest;
        }
        let Some((hour, rest)) = getnum(v) else {
            return false;
        };
        if hour >= 24 {
            return false;
        }
        let Some(rest) = rest.strip_prefix(b":") else {
            return false;
        };
        let Some((min, rest)) = getnum(rest) else {
            return false;
        };
        if min >= 60 {
            return false;
        }
        let Some(rest) = rest.strip_prefix(b":") else {
            return false;
        };
        let Some((sec, rest)) = getnum(rest) else {
            return false;
        };
        if sec >= 60 {
            return false;
        }
        v = rest;
        // stdFracSecond9: a '.' or ',' and up to nine digits, if present.
        if v.len() >= 2 && (v[0] == b'.' || v[0] == b',') && v[1].is_ascii_digit() {
            let mut i = 0;
            while i < 9 && i + 1 < v.len() && v[i + 1].is_ascii_digit() {
                i += 1;
            }
            v = &v[1 + i..];
        }
        if tz {
            // stdISO8601ColonTZ: "Z" or a sign, hh, ':', mm.
            if let Some(rest) = v.strip_prefix(b"Z") {
                v = rest;
            } else {
                if v.len() < 6 || v[3] != b':' {
                    return false;
                }
                if !time_atoi_ok(&v[1..3]) || !time_atoi_ok(&v[4..6]) {
                    return false;
                }
                if v[0] != b'+' && v[0] != b'-' {
                    return false;
                }
                v = &v[6..];
            }
        }
    }
    if !v.is_empty() {
        return false; // extra text
    }
    day >= 1 && day <= days_in(month, year)
}

fn days_in(month: u32, year: u32) -> u32 {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
