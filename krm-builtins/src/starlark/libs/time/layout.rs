//! Go's time layouts (`time/format.go`'s `nextStdChunk`, `Format`,
//! `Parse`) for `time.star`.

use super::clock::{date, days_in, is_leap, Time};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Lpm,
    TZ,
    Iso8601TZ,
    Iso8601SecondsTZ,
    Iso8601ShortTZ,
    Iso8601ColonTZ,
    Iso8601ColonSecondsTZ,
    NumTZ,
    NumSecondsTZ,
    NumShortTZ,
    NumColonTZ,
    NumColonSecondsTZ,
    /// Fixed digits (`.000`): how many, and the separator.
    FracSecond0(usize, u8),
    /// Trimmed digits (`.999`).
    FracSecond9(usize, u8),
}

const LONG_MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

fn short(name: &str) -> &str {
    name.get(..3).unwrap_or(name)
}

pub(super) fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn has_at(s: &[u8], i: usize, pat: &str) -> bool {
    s.get(i..).is_some_and(|r| r.starts_with(pat.as_bytes()))
}

pub(super) fn is_digit_at(s: &[u8], i: usize) -> bool {
    byte_at(s, i).is_ascii_digit()
}

pub(super) fn tail(s: &[u8], i: usize) -> &[u8] {
    s.get(i..).unwrap_or(&[])
}

pub(super) fn head(s: &[u8], i: usize) -> &[u8] {
    s.get(..i).unwrap_or(s)
}

/// Go's `nextStdChunk`: the literal before the first element, the
/// element, and what follows.
fn next_std_chunk(layout: &[u8]) -> (&[u8], Option<Std>, &[u8]) {
    let lower_at = |i: usize| byte_at(layout, i).is_ascii_lowercase();
    for i in 0..layout.len() {
        let found =
            |std: Std, len: usize| Some((head(layout, i), Some(std), tail(layout, i + len)));
        let chunk = match byte_at(layout, i) {
            b'J' if has_at(layout, i, "Jan") => {
                if has_at(layout, i, "January") {
                    found(Std::LongMonth, 7)
                } else if !lower_at(i + 3) {
                    found(Std::Month, 3)
                } else {
                    None
                }
            }
            b'M' if has_at(layout, i, "Mon") => {
                if has_at(layout, i, "Monday") {
                    found(Std::LongWeekDay, 6)
                } else if !lower_at(i + 3) {
                    found(Std::WeekDay, 3)
                } else {
                    None
                }
            }
            b'M' if has_at(layout, i, "MST") => found(Std::TZ, 3),
            b'0' => match byte_at(layout, i + 1) {
                b'1' => found(Std::ZeroMonth, 2),
                b'2' => found(Std::ZeroDay, 2),
                b'3' => found(Std::ZeroHour12, 2),
                b'4' => found(Std::ZeroMinute, 2),
                b'5' => found(Std::ZeroSecond, 2),
                b'6' => found(Std::Year, 2),
                b'0' if byte_at(layout, i + 2) == b'2' => found(Std::ZeroYearDay, 3),
                _ => None,
            },
            b'1' if byte_at(layout, i + 1) == b'5' => found(Std::Hour, 2),
            b'1' => found(Std::NumMonth, 1),
            b'2' if has_at(layout, i, "2006") => found(Std::LongYear, 4),
            b'2' => found(Std::Day, 1),
            b'_' if byte_at(layout, i + 1) == b'2' => {
                if has_at(layout, i + 1, "2006") {
                    // `_2006` is a literal `_` and the year.
                    Some((
                        head(layout, i + 1),
                        Some(Std::LongYear),
                        tail(layout, i + 5),
                    ))
                } else {
                    found(Std::UnderDay, 2)
                }
            }
            b'_' if has_at(layout, i, "__2") => found(Std::UnderYearDay, 3),
            b'3' => found(Std::Hour12, 1),
            b'4' => found(Std::Minute, 1),
            b'5' => found(Std::Second, 1),
            b'P' if byte_at(layout, i + 1) == b'M' => found(Std::PM, 2),
            b'p' if byte_at(layout, i + 1) == b'm' => found(Std::Lpm, 2),
            b'-' if has_at(layout, i, "-070000") => found(Std::NumSecondsTZ, 7),
            b'-' if has_at(layout, i, "-07:00:00") => found(Std::NumColonSecondsTZ, 9),
            b'-' if has_at(layout, i, "-0700") => found(Std::NumTZ, 5),
            b'-' if has_at(layout, i, "-07:00") => found(Std::NumColonTZ, 6),
            b'-' if has_at(layout, i, "-07") => found(Std::NumShortTZ, 3),
            b'Z' if has_at(layout, i, "Z070000") => found(Std::Iso8601SecondsTZ, 7),
            b'Z' if has_at(layout, i, "Z07:00:00") => found(Std::Iso8601ColonSecondsTZ, 9),
            b'Z' if has_at(layout, i, "Z0700") => found(Std::Iso8601TZ, 5),
            b'Z' if has_at(layout, i, "Z07:00") => found(Std::Iso8601ColonTZ, 6),
            b'Z' if has_at(layout, i, "Z07") => found(Std::Iso8601ShortTZ, 3),
            sep @ (b'.' | b',') if matches!(byte_at(layout, i + 1), b'0' | b'9') => {
                let ch = byte_at(layout, i + 1);
                let mut j = i + 1;
                while byte_at(layout, j) == ch {
                    j += 1;
                }
                // Only a run of digits that ends here is a fraction.
                if is_digit_at(layout, j) {
                    None
                } else {
                    let n = j - (i + 1);
                    let std = if ch == b'0' {
                        Std::FracSecond0(n, sep)
                    } else {
                        Std::FracSecond9(n, sep)
                    };
                    Some((head(layout, i), Some(std), tail(layout, j)))
                }
            }
            _ => None,
        };
        if let Some(chunk) = chunk {
            return chunk;
        }
    }
    (layout, None, &[])
}

/// Go's `appendInt(b, x, width)`: zero-padded to `width`.
fn push_int(out: &mut String, x: i64, width: usize) {
    if x < 0 {
        out.push('-');
    }
    let digits = x.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

fn push_nanos(out: &mut String, nsec: u32, digits: usize, sep: u8, trim: bool) {
    if trim && (digits == 0 || nsec == 0) {
        return;
    }
    let all = format!("{nsec:09}");
    let mut frac = all.get(..digits.min(9)).unwrap_or(&all).to_owned();
    if trim {
        while frac.ends_with('0') {
            frac.pop();
        }
        if frac.is_empty() {
            return;
        }
    }
    out.push(char::from(sep));
    out.push_str(&frac);
}

/// Go's `Time.Format`.
pub(super) fn format_time(t: &Time, layout: &str) -> String {
    let c = t.civil();
    let mut out = String::with_capacity(layout.len() + 10);
    let mut rest = layout.as_bytes();
    loop {
        let (prefix, std, suffix) = next_std_chunk(rest);
        out.push_str(&String::from_utf8_lossy(prefix));
        let Some(std) = std else { break };
        rest = suffix;
        let month_name = LONG_MONTHS
            .get(usize::try_from(c.month).unwrap_or(1).saturating_sub(1))
            .copied()
            .unwrap_or("");
        let day_name = LONG_DAYS
            .get(usize::try_from(c.weekday).unwrap_or(0))
            .copied()
            .unwrap_or("");
        let hour12 = if c.hour.is_multiple_of(12) {
            12
        } else {
            c.hour % 12
        };
        match std {
            Std::Year => push_int(&mut out, (c.year % 100).abs(), 2),
            Std::LongYear => push_int(&mut out, c.year, 4),
            Std::Month => out.push_str(short(month_name)),
            Std::LongMonth => out.push_str(month_name),
            Std::NumMonth => push_int(&mut out, c.month.into(), 0),
            Std::ZeroMonth => push_int(&mut out, c.month.into(), 2),
            Std::WeekDay => out.push_str(short(day_name)),
            Std::LongWeekDay => out.push_str(day_name),
            Std::Day => push_int(&mut out, c.day.into(), 0),
            Std::UnderDay => {
                if c.day < 10 {
                    out.push(' ');
                }
                push_int(&mut out, c.day.into(), 0);
            }
            Std::ZeroDay => push_int(&mut out, c.day.into(), 2),
            Std::UnderYearDay => {
                if c.yday < 100 {
                    out.push(' ');
                    if c.yday < 10 {
                        out.push(' ');
                    }
                }
                push_int(&mut out, c.yday.into(), 0);
            }
            Std::ZeroYearDay => push_int(&mut out, c.yday.into(), 3),
            Std::Hour => push_int(&mut out, c.hour.into(), 2),
            Std::Hour12 => push_int(&mut out, hour12.into(), 0),
            Std::ZeroHour12 => push_int(&mut out, hour12.into(), 2),
            Std::Minute => push_int(&mut out, c.minute.into(), 0),
            Std::ZeroMinute => push_int(&mut out, c.minute.into(), 2),
            Std::Second => push_int(&mut out, c.second.into(), 0),
            Std::ZeroSecond => push_int(&mut out, c.second.into(), 2),
            Std::PM => out.push_str(if c.hour >= 12 { "PM" } else { "AM" }),
            Std::Lpm => out.push_str(if c.hour >= 12 { "pm" } else { "am" }),
            Std::Iso8601TZ
            | Std::Iso8601ColonTZ
            | Std::Iso8601SecondsTZ
            | Std::Iso8601ShortTZ
            | Std::Iso8601ColonSecondsTZ
            | Std::NumTZ
            | Std::NumColonTZ
            | Std::NumSecondsTZ
            | Std::NumShortTZ
            | Std::NumColonSecondsTZ => push_offset(&mut out, t.offset, std),
            Std::TZ => {
                if t.zone.is_empty() {
                    let minutes = t.offset / 60;
                    out.push(if minutes < 0 { '-' } else { '+' });
                    push_int(&mut out, (minutes.abs() / 60).into(), 2);
                    push_int(&mut out, (minutes.abs() % 60).into(), 2);
                } else {
                    out.push_str(&t.zone);
                }
            }
            Std::FracSecond0(n, sep) => push_nanos(&mut out, t.nsec, n, sep, false),
            Std::FracSecond9(n, sep) => push_nanos(&mut out, t.nsec, n, sep, true),
        }
    }
    out
}

fn push_offset(out: &mut String, offset: i32, std: Std) {
    let iso = matches!(
        std,
        Std::Iso8601TZ
            | Std::Iso8601ColonTZ
            | Std::Iso8601SecondsTZ
            | Std::Iso8601ShortTZ
            | Std::Iso8601ColonSecondsTZ
    );
    if offset == 0 && iso {
        out.push('Z');
        return;
    }
    let minutes = offset / 60;
    out.push(if minutes < 0 { '-' } else { '+' });
    let (minutes, abs) = (minutes.abs(), offset.abs());
    push_int(out, (minutes / 60).into(), 2);
    let colon = matches!(
        std,
        Std::Iso8601ColonTZ | Std::NumColonTZ | Std::Iso8601ColonSecondsTZ | Std::NumColonSecondsTZ
    );
    if colon {
        out.push(':');
    }
    if !matches!(std, Std::NumShortTZ | Std::Iso8601ShortTZ) {
        push_int(out, (minutes % 60).into(), 2);
    }
    if matches!(
        std,
        Std::Iso8601SecondsTZ
            | Std::NumSecondsTZ
            | Std::NumColonSecondsTZ
            | Std::Iso8601ColonSecondsTZ
    ) {
        if colon {
            out.push(':');
        }
        push_int(out, (abs % 60).into(), 2);
    }
}

/// Go's `quote` in the time package's messages.
pub(super) fn quote(s: &[u8]) -> String {
    let text = String::from_utf8_lossy(s);
    let mut out = String::from("\"");
    for c in text.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `getnum`: one or two digits (two when `fixed`).
fn getnum(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    if !is_digit_at(s, 0) {
        return None;
    }
    let first = i64::from(byte_at(s, 0) - b'0');
    if !is_digit_at(s, 1) {
        return if fixed {
            None
        } else {
            Some((first, tail(s, 1)))
        };
    }
    Some((first * 10 + i64::from(byte_at(s, 1) - b'0'), tail(s, 2)))
}

/// Go's `getnum3`: one to three digits (three when `fixed`).
fn getnum3(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    let mut n = 0;
    let mut i = 0;
    while i < 3 && is_digit_at(s, i) {
        n = n * 10 + i64::from(byte_at(s, i) - b'0');
        i += 1;
    }
    if i == 0 || (fixed && i != 3) {
        return None;
    }
    Some((n, tail(s, i)))
}

/// Go's `atoi` of all of `s` (digits, with an optional sign).
fn atoi(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty()
        || !text
            .trim_start_matches(['-', '+'])
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    text.parse().ok()
}

/// Go's `lookup`: the first name that starts `s`, ASCII case ignored.
fn lookup<'a>(names: &[&str], s: &'a [u8]) -> Option<(usize, &'a [u8])> {
    names.iter().enumerate().find_map(|(i, name)| {
        let n = name.len();
        s.get(..n)
            .filter(|p| p.eq_ignore_ascii_case(name.as_bytes()))
            .map(|_| (i, tail(s, n)))
    })
}

fn comma_or_period(b: u8) -> bool {
    b == b'.' || b == b','
}

/// Go's `parseNanoseconds`: `s[..n]` is a separator and digits.
fn parse_nanos(s: &[u8], n: usize) -> Result<i64, ()> {
    if !comma_or_period(byte_at(s, 0)) {
        return Err(());
    }
    let n = n.min(10);
    let digits = s.get(1..n).ok_or(())?;
    let mut ns = atoi(digits).ok_or(())?;
    for _ in 0..10usize.saturating_sub(n) {
        ns *= 10;
    }
    Ok(ns)
}

/// Go's `leadingInt` then its `parseSignedOffset`: the length of a
/// `+h`/`-hh` offset starting `s`, 0 if none.
fn signed_offset_len(s: &[u8]) -> usize {
    if !matches!(byte_at(s, 0), b'+' | b'-') {
        return 0;
    }
    let digits = tail(s, 1).iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return 0;
    }
    match atoi(s.get(1..1 + digits).unwrap_or(&[])) {
        Some(x) if x <= 12 => 1 + digits,
        _ => 0,
    }
}

/// Go's `parseTimeZone`: the length of a zone abbreviation starting `s`.
fn time_zone_len(s: &[u8]) -> Option<usize> {
    if s.len() < 3 {
        return None;
    }
    if has_at(s, 0, "ChST") || has_at(s, 0, "MeST") {
        return Some(4);
    }
    if has_at(s, 0, "GMT") {
        return Some(3 + signed_offset_len(tail(s, 3)));
    }
    if matches!(byte_at(s, 0), b'+' | b'-') {
        let n = signed_offset_len(s);
        return (n > 0).then_some(n);
    }
    let upper = s
        .iter()
        .take(6)
        .take_while(|b| b.is_ascii_uppercase())
        .count();
    match upper {
        5 if byte_at(s, 4) == b'T' => Some(5),
        4 if byte_at(s, 3) == b'T' || has_at(s, 0, "WITA") => Some(4),
        3 => Some(3),
        _ => None,
    }
}

/// Go's `skip`: `prefix` off the front of `value` (a space in it matches
/// any run of spaces).
fn skip<'a>(mut value: &'a [u8], mut prefix: &[u8]) -> Result<&'a [u8], &'a [u8]> {
    while let Some(&p) = prefix.first() {
        if p == b' ' {
            if value.first().is_some_and(|&v| v != b' ') {
                return Err(value);
            }
            prefix = tail(prefix, prefix.iter().take_while(|&&b| b == b' ').count());
            value = tail(value, value.iter().take_while(|&&b| b == b' ').count());
            continue;
        }
        if value.first() != Some(&p) {
            return Err(value);
        }
        prefix = tail(prefix, 1);
        value = tail(value, 1);
    }
    Ok(value)
}

/// Go's `time.ParseInLocation` with UTC as the location.
pub(super) fn parse_time_text(layout: &str, text: &str) -> Result<Time, String> {
    let (alayout, avalue) = (layout.as_bytes(), text.as_bytes());
    let cannot = |value: &[u8], elem: &[u8]| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(avalue),
            quote(alayout),
            quote(value),
            quote(elem)
        )
    };
    let message = |msg: &str| format!("parsing time {}{msg}", quote(avalue));
    let mut layout = alayout;
    let mut value = avalue;
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let (mut pm_set, mut am_set) = (false, false);
    let mut utc = false;
    let mut zone_offset: Option<i64> = None;
    let mut zone_name: Option<String> = None;
    loop {
        let (prefix, std, suffix) = next_std_chunk(layout);
        let stdstr = layout
            .get(prefix.len()..layout.len() - suffix.len())
            .unwrap_or(&[]);
        value = skip(value, prefix).map_err(|v| cannot(v, prefix))?;
        let Some(std) = std else {
            if !value.is_empty() {
                return Err(message(&format!(": extra text: {}", quote(value))));
            }
            break;
        };
        layout = suffix;
        let hold = value;
        let mut range_err: Option<&str> = None;
        let ok: Option<()> = (|| {
            match std {
                Std::Year => {
                    year = atoi(value.get(..2)?)?;
                    year += if year >= 69 { 1900 } else { 2000 };
                    value = tail(value, 2);
                }
                Std::LongYear => {
                    if value.len() < 4 || !is_digit_at(value, 0) {
                        return None;
                    }
                    year = atoi(value.get(..4)?)?;
                    value = tail(value, 4);
                }
                Std::Month | Std::LongMonth => {
                    let names: Vec<&str> = if std == Std::Month {
                        LONG_MONTHS.iter().map(|m| short(m)).collect()
                    } else {
                        LONG_MONTHS.to_vec()
                    };
                    let (i, rest) = lookup(&names, value)?;
                    month = i64::try_from(i).ok()? + 1;
                    value = rest;
                }
                Std::NumMonth | Std::ZeroMonth => {
                    let (m, rest) = getnum(value, std == Std::ZeroMonth)?;
                    month = m;
                    value = rest;
                    if !(1..=12).contains(&month) {
                        range_err = Some("month");
                    }
                }
                Std::WeekDay | Std::LongWeekDay => {
                    let names: Vec<&str> = if std == Std::WeekDay {
                        LONG_DAYS.iter().map(|d| short(d)).collect()
                    } else {
                        LONG_DAYS.to_vec()
                    };
                    value = lookup(&names, value)?.1;
                }
                Std::Day | Std::UnderDay | Std::ZeroDay => {
                    if std == Std::UnderDay && value.first() == Some(&b' ') {
                        value = tail(value, 1);
                    }
                    let (d, rest) = getnum(value, std == Std::ZeroDay)?;
                    day = d;
                    value = rest;
                }
                Std::UnderYearDay | Std::ZeroYearDay => {
                    for _ in 0..2 {
                        if std == Std::UnderYearDay && value.first() == Some(&b' ') {
                            value = tail(value, 1);
                        }
                    }
                    let (d, rest) = getnum3(value, std == Std::ZeroYearDay)?;
                    yday = d;
                    value = rest;
                }
                Std::Hour => {
                    let (h, rest) = getnum(value, false)?;
                    hour = h;
                    value = rest;
                    if !(0..24).contains(&hour) {
                        range_err = Some("hour");
                    }
                }
                Std::Hour12 | Std::ZeroHour12 => {
                    let (h, rest) = getnum(value, std == Std::ZeroHour12)?;
                    hour = h;
                    value = rest;
                    if !(0..=12).contains(&hour) {
                        range_err = Some("hour");
                    }
                }
                Std::Minute | Std::ZeroMinute => {
                    let (m, rest) = getnum(value, std == Std::ZeroMinute)?;
                    min = m;
                    value = rest;
                    if !(0..60).contains(&min) {
                        range_err = Some("minute");
                    }
                }
                Std::Second | Std::ZeroSecond => {
                    let (s, rest) = getnum(value, std == Std::ZeroSecond)?;
                    sec = s;
                    value = rest;
                    if !(0..60).contains(&sec) {
                        range_err = Some("second");
                        return Some(());
                    }
                    // A fraction the layout does not name is read too.
                    if value.len() >= 2
                        && comma_or_period(byte_at(value, 0))
                        && is_digit_at(value, 1)
                    {
                        let (_, next, _) = next_std_chunk(layout);
                        if matches!(next, Some(Std::FracSecond0(..) | Std::FracSecond9(..))) {
                            return Some(());
                        }
                        let mut n = 2;
                        while is_digit_at(value, n) {
                            n += 1;
                        }
                        nsec = parse_nanos(value, n).ok()?;
                        value = tail(value, n);
                    }
                }
                Std::PM | Std::Lpm => {
                    let p = value.get(..2)?;
                    let (pm, am) = if std == Std::PM {
                        ("PM", "AM")
                    } else {
                        ("pm", "am")
                    };
                    if p == pm.as_bytes() {
                        pm_set = true;
                    } else if p == am.as_bytes() {
                        am_set = true;
                    } else {
                        return None;
                    }
                    value = tail(value, 2);
                }
                Std::Iso8601TZ
                | Std::Iso8601ShortTZ
                | Std::Iso8601ColonTZ
                | Std::Iso8601SecondsTZ
                | Std::Iso8601ColonSecondsTZ
                    if value.first() == Some(&b'Z') =>
                {
                    value = tail(value, 1);
                    utc = true;
                }
                Std::Iso8601TZ
                | Std::Iso8601ShortTZ
                | Std::Iso8601ColonTZ
                | Std::Iso8601SecondsTZ
                | Std::Iso8601ColonSecondsTZ
                | Std::NumTZ
                | Std::NumShortTZ
                | Std::NumColonTZ
                | Std::NumSecondsTZ
                | Std::NumColonSecondsTZ => {
                    let v = value;
                    let (sign, h, m, s, rest): (u8, &[u8], &[u8], &[u8], &[u8]) = match std {
                        Std::Iso8601ColonTZ | Std::NumColonTZ => {
                            if v.len() < 6 || byte_at(v, 3) != b':' {
                                return None;
                            }
                            (byte_at(v, 0), v.get(1..3)?, v.get(4..6)?, b"00", tail(v, 6))
                        }
                        Std::NumShortTZ | Std::Iso8601ShortTZ => {
                            if v.len() < 3 {
                                return None;
                            }
                            (byte_at(v, 0), v.get(1..3)?, b"00", b"00", tail(v, 3))
                        }
                        Std::Iso8601ColonSecondsTZ | Std::NumColonSecondsTZ => {
                            if v.len() < 9 || byte_at(v, 3) != b':' || byte_at(v, 6) != b':' {
                                return None;
                            }
                            (
                                byte_at(v, 0),
                                v.get(1..3)?,
                                v.get(4..6)?,
                                v.get(7..9)?,
                                tail(v, 9),
                            )
                        }
                        Std::Iso8601SecondsTZ | Std::NumSecondsTZ => {
                            if v.len() < 7 {
                                return None;
                            }
                            (
                                byte_at(v, 0),
                                v.get(1..3)?,
                                v.get(3..5)?,
                                v.get(5..7)?,
                                tail(v, 7),
                            )
                        }
                        _ => {
                            if v.len() < 5 {
                                return None;
                            }
                            (byte_at(v, 0), v.get(1..3)?, v.get(3..5)?, b"00", tail(v, 5))
                        }
                    };
                    value = rest;
                    let (hr, _) = getnum(h, true)?;
                    let (mm, _) = getnum(m, true)?;
                    let (ss, _) = getnum(s, true)?;
                    if hr > 24 {
                        range_err = Some("time zone offset hour");
                    }
                    if mm > 60 {
                        range_err = Some("time zone offset minute");
                    }
                    if ss > 60 {
                        range_err = Some("time zone offset second");
                    }
                    let off = (hr * 60 + mm) * 60 + ss;
                    zone_offset = Some(match sign {
                        b'+' => off,
                        b'-' => -off,
                        _ => return None,
                    });
                }
                Std::TZ => {
                    if has_at(value, 0, "UTC") {
                        utc = true;
                        value = tail(value, 3);
                        return Some(());
                    }
                    let n = time_zone_len(value)?;
                    zone_name = Some(String::from_utf8_lossy(value.get(..n)?).into_owned());
                    value = tail(value, n);
                }
                Std::FracSecond0(digits, _) => {
                    let n = 1 + digits;
                    if value.len() < n {
                        return None;
                    }
                    nsec = parse_nanos(value, n).ok()?;
                    value = tail(value, n);
                }
                Std::FracSecond9(..) => {
                    if value.len() < 2
                        || !comma_or_period(byte_at(value, 0))
                        || !is_digit_at(value, 1)
                    {
                        // No fraction: none is needed.
                        return Some(());
                    }
                    let mut i = 0;
                    while is_digit_at(value, i + 1) {
                        i += 1;
                    }
                    nsec = parse_nanos(value, 1 + i).ok()?;
                    value = tail(value, 1 + i);
                }
            }
            Some(())
        })();
        if let Some(what) = range_err {
            return Err(message(&format!(": {what} out of range")));
        }
        if ok.is_none() {
            return Err(cannot(hold, stdstr));
        }
    }
    if pm_set && hour < 12 {
        hour += 12;
    } else if am_set && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let (mut m, mut d) = (0i64, 0i64);
        if is_leap(year) {
            if yday == 31 + 29 {
                m = 2;
                d = 29;
            } else if yday > 31 + 29 {
                yday -= 1;
            }
        }
        if !(1..=365).contains(&yday) {
            return Err(message(": day-of-year out of range"));
        }
        if m == 0 {
            // Days before each month in a common year.
            const BEFORE: [i64; 13] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
            let before = |k: i64| {
                BEFORE
                    .get(usize::try_from(k).unwrap_or(0))
                    .copied()
                    .unwrap_or(365)
            };
            m = (yday - 1) / 31 + 1;
            if before(m) < yday {
                m += 1;
            }
            d = yday - before(m - 1);
        }
        if month >= 0 && month != m {
            return Err(message(": day-of-year does not match month"));
        }
        month = m;
        if day >= 0 && day != d {
            return Err(message(": day-of-year does not match day"));
        }
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    let month_days = i64::from(days_in(u32::try_from(month).unwrap_or(1), year));
    if day < 1 || day > month_days {
        return Err(message(": day out of range"));
    }
    let out_of_range = || message(": the time is out of range");
    let at = |offset: i64| {
        date(year, month, day, hour, min, sec, nsec, 0).and_then(|t| {
            let s = t.sec.checked_sub(offset)?;
            Some(Time { sec: s, ..t })
        })
    };
    if utc {
        return at(0).ok_or_else(out_of_range);
    }
    if let Some(offset) = zone_offset {
        let mut t = at(offset).ok_or_else(out_of_range)?;
        // UTC when the offset is UTC's, else a zone of its own.
        let name = zone_name.unwrap_or_default();
        if offset != 0 || !(name.is_empty() || name == "UTC") {
            t.offset = i32::try_from(offset).map_err(|_| out_of_range())?;
            t.zone = name;
        }
        return Ok(t);
    }
    if let Some(name) = zone_name {
        // An abbreviation with no offset: Go shows the same clock under
        // that name, at 0 (or GMT's hours).
        let hours = name
            .strip_prefix("GMT")
            .filter(|h| !h.is_empty())
            .and_then(|h| atoi(h.as_bytes()))
            .unwrap_or(0);
        let mut t = at(0).ok_or_else(out_of_range)?;
        t.offset = i32::try_from(hours * 3600).unwrap_or(0);
        t.zone = name;
        return Ok(t);
    }
    at(0).ok_or_else(out_of_range)
}
