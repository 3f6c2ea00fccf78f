//! `doublestar.Match` (bmatcuk/doublestar v4, as search-replace's
//! `by-file-path` uses it): `/`-separated paths; `*` and `?` within a
//! path segment, `**` as a whole segment for any number of segments,
//! `[...]` classes (`^` or `!` negates, `a-z` ranges), `{a,b}`
//! alternatives, `\` escapes. A malformed pattern (an unclosed `[` or
//! `{`, a trailing `\`) is `Err` (doublestar's `ErrBadPattern`, "syntax
//! error in pattern"); doublestar finds it only where matching reaches
//! it, here it is found first.
//!
//! [`matches()`] models v4.8.1 (master's). Compared with that Go code on
//! random patterns (over `a`, `b`, `/`, `*`, `**`, `?`, classes and
//! alternatives) it answers otherwise for about 1% of them: a trailing
//! `**/` or `/**/` matching zero segments (`a/**/` matches `a` in Go),
//! `[!a]` against `/` (Go: a match), other mixes of `*`, `**` and
//! alternatives, and malformed patterns Go refuses (`a}`, `[]a]`,
//! `[!]`).
//! [`matches_v4_0_2`] is v4.0.2's algorithm (v0.2.0's), ported as it is
//! and checked against that Go code on 800,000 random cases.

pub(crate) const BAD_PATTERN: &str = "syntax error in pattern";

/// The most alternatives `{a,b}` groups may expand a pattern to.
const MAX_ALTERNATIVES: usize = 10_000;
/// The most characters expanding may build (the partial patterns too).
const MAX_EXPANDED_CHARS: usize = 16 << 20;
pub(crate) const TOO_MANY_ALTERNATIVES: &str =
    "pattern expands to more than 10000 {a,b} alternatives (the limit)";
pub(crate) const TOO_LONG_EXPANSION: &str =
    "pattern's {a,b} alternatives are more than 16777216 characters (the limit)";

/// What expanding may still build.
struct Budget {
    alternatives: usize,
    chars: usize,
}

pub(crate) fn matches(pattern: &str, name: &str) -> Result<bool, &'static str> {
    let mut budget = Budget {
        alternatives: MAX_ALTERNATIVES,
        chars: MAX_EXPANDED_CHARS,
    };
    let alternatives = expand(pattern, &mut budget)?;
    let name: Vec<char> = name.chars().collect();
    for alt in alternatives {
        let alt: Vec<char> = alt.chars().collect();
        validate(&alt)?;
        if match_at(&alt, &name) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The pattern with each `{a,b}` expanded (escapes kept), within `budget`.
fn expand(pattern: &str, budget: &mut Budget) -> Result<Vec<String>, &'static str> {
    let chars: Vec<char> = pattern.chars().collect();
    budget.chars = budget
        .chars
        .checked_sub(chars.len())
        .ok_or(TOO_LONG_EXPANSION)?;
    // The first `{` not escaped nor inside a class.
    let mut i = 0;
    let mut open = None;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 1,
            '[' => {
                while let Some(&d) = chars.get(i) {
                    if d == ']' {
                        break;
                    }
                    i += 1;
                }
            }
            '{' => {
                open = Some(i);
                break;
            }
            _ => {}
        }
        i += 1;
    }
    let Some(open) = open else {
        budget.alternatives = budget
            .alternatives
            .checked_sub(1)
            .ok_or(TOO_MANY_ALTERNATIVES)?;
        return Ok(vec![pattern.to_owned()]);
    };
    // Its closing `}` and the commas at its level.
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut close = None;
    let mut j = open + 1;
    while let Some(&c) = chars.get(j) {
        match c {
            '\\' => j += 1,
            '{' => depth += 1,
            '}' if depth == 0 => {
                close = Some(j);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => commas.push(j),
            _ => {}
        }
        j += 1;
    }
    let close = close.ok_or(BAD_PATTERN)?;
    let collect =
        |a: usize, b: usize| -> String { chars.get(a..b).unwrap_or_default().iter().collect() };
    let prefix = collect(0, open);
    let suffix = collect(close + 1, chars.len());
    let mut bounds = vec![open];
    bounds.extend(commas);
    bounds.push(close);
    let mut out = Vec::new();
    for w in bounds.windows(2) {
        let [a, b] = w else { continue };
        let alt = format!("{prefix}{}{suffix}", collect(a + 1, *b));
        out.extend(expand(&alt, budget)?);
    }
    Ok(out)
}

/// Classes closed, no trailing escape.
fn validate(p: &[char]) -> Result<(), &'static str> {
    let mut i = 0;
    while let Some(&c) = p.get(i) {
        match c {
            '\\' if i + 1 >= p.len() => return Err(BAD_PATTERN),
            '\\' => i += 1,
            '[' => {
                class_end(p, i).ok_or(BAD_PATTERN)?;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The index of the `]` closing the class opened at `open`.
fn class_end(p: &[char], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(p.get(i), Some('^' | '!')) {
        i += 1;
    }
    while let Some(&c) = p.get(i) {
        match c {
            '\\' => i += 1,
            ']' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn class_matches(class: &[char], c: char) -> bool {
    let (negated, body) = match class.first() {
        Some('^' | '!') => (true, class.get(1..).unwrap_or_default()),
        _ => (false, class),
    };
    let mut items = Vec::new();
    let mut i = 0;
    while let Some(&x) = body.get(i) {
        let x = if x == '\\' {
            i += 1;
            body.get(i).copied().unwrap_or('\\')
        } else {
            x
        };
        items.push(x);
        i += 1;
    }
    let mut found = false;
    let mut k = 0;
    while let Some(&lo) = items.get(k) {
        if items.get(k + 1) == Some(&'-') {
            if let Some(&hi) = items.get(k + 2) {
                found |= lo <= c && c <= hi;
                k += 3;
                continue;
            }
        }
        found |= lo == c;
        k += 1;
    }
    found != negated
}

/// Whether `p` matches all of `s`; `start`: `p` begins a path segment.
fn match_at(p: &[char], s: &[char]) -> bool {
    match_seg(p, s, true)
}

fn match_seg(p: &[char], s: &[char], start: bool) -> bool {
    let Some(&c) = p.first() else {
        return s.is_empty();
    };
    let rest = p.get(1..).unwrap_or_default();
    match c {
        '*' if start && rest.first() == Some(&'*') && matches!(rest.get(1), None | Some('/')) => {
            // `**` as a whole segment: any number of segments.
            let after = rest.get(1..).unwrap_or_default();
            if after.is_empty() {
                return true;
            }
            let after = after.get(1..).unwrap_or_default(); // past the `/`
            if match_seg(after, s, true) {
                return true;
            }
            s.iter().enumerate().any(|(i, &ch)| {
                ch == '/' && match_seg(after, s.get(i + 1..).unwrap_or_default(), true)
            })
        }
        '*' => {
            let p = if rest.first() == Some(&'*') { rest } else { p };
            let rest = p.get(1..).unwrap_or_default();
            for i in 0..=s.len() {
                if match_seg(rest, s.get(i..).unwrap_or_default(), false) {
                    return true;
                }
                if s.get(i) == Some(&'/') {
                    break;
                }
            }
            false
        }
        '?' => match s.first() {
            Some(&ch) if ch != '/' => match_seg(rest, s.get(1..).unwrap_or_default(), false),
            _ => false,
        },
        '[' => {
            let Some(end) = class_end(p, 0) else {
                return false;
            };
            match s.first() {
                Some(&ch) if ch != '/' && class_matches(p.get(1..end).unwrap_or_default(), ch) => {
                    match_seg(
                        p.get(end + 1..).unwrap_or_default(),
                        s.get(1..).unwrap_or_default(),
                        false,
                    )
                }
                _ => false,
            }
        }
        '\\' => match (rest.first(), s.first()) {
            (Some(a), Some(b)) if a == b => match_seg(
                rest.get(1..).unwrap_or_default(),
                s.get(1..).unwrap_or_default(),
                false,
            ),
            _ => false,
        },
        _ => match s.first() {
            Some(&ch) if ch == c => match_seg(rest, s.get(1..).unwrap_or_default(), c == '/'),
            _ => false,
        },
    }
}

/// doublestar v4.0.2's `Match` (search-replace v0.1.1 and v0.2.0): its
/// `matchWithSeparator` with `/` and validation, ported as it is. It
/// differs from v4.8.1's ([`matches()`]) at `{a,b}`: the first time the
/// matcher reaches a `{` it commits, matching each alternative with the
/// rest of the pattern against the rest of the name, with fresh state (a
/// new segment starts there), and never goes back to an earlier `*` or
/// `**`; and a trailing `**/` or `/**/` matches nothing, not zero
/// segments. A malformed pattern is found where matching reaches it (or
/// when a match fails, the pattern's rest), as in Go. Departure: the
/// alternatives tried are bounded as [`matches()`] bounds them.
pub(crate) fn matches_v4_0_2(pattern: &str, name: &str) -> Result<bool, &'static str> {
    let mut budget = Budget {
        alternatives: MAX_ALTERNATIVES,
        chars: MAX_EXPANDED_CHARS,
    };
    v4_0_2::match_with_separator(pattern.as_bytes(), name.as_bytes(), &mut budget)
}

/// The port of doublestar v4.0.2's `match.go`, `utils.go` and
/// `validate.go` (separator `/`, escaping on), on bytes as Go's strings.
mod v4_0_2 {
    use super::{Budget, BAD_PATTERN, TOO_LONG_EXPANSION, TOO_MANY_ALTERNATIVES};

    const SEPARATOR: char = '/';
    /// `utf8.MaxRune`.
    const MAX_RUNE: u32 = 0x10FFFF;

    /// `s[i]`, 0 past the end (never compared there).
    fn at(s: &[u8], i: usize) -> u8 {
        s.get(i).copied().unwrap_or(0)
    }

    /// `s[i:]`.
    fn tail(s: &[u8], i: usize) -> &[u8] {
        s.get(i..).unwrap_or_default()
    }

    /// `s[a:b]`.
    fn slice(s: &[u8], a: usize, b: usize) -> &[u8] {
        s.get(a..b).unwrap_or_default()
    }

    /// `utf8.DecodeRuneInString`: the rune and its length; U+FFFD and 0
    /// for nothing, and 1 for a byte that starts no rune.
    fn decode_rune(s: &[u8]) -> (u32, usize) {
        let Some(&b0) = s.first() else {
            return (0xFFFD, 0);
        };
        if b0 < 0x80 {
            return (u32::from(b0), 1);
        }
        let len = match b0 {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return (0xFFFD, 1),
        };
        s.get(..len)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.chars().next())
            .map_or((0xFFFD, 1), |c| (u32::from(c), len))
    }

    /// `a + b`, counted against the budget as one more alternative.
    fn joined(a: &[u8], b: &[u8], budget: &mut Budget) -> Result<Vec<u8>, &'static str> {
        budget.alternatives = budget
            .alternatives
            .checked_sub(1)
            .ok_or(TOO_MANY_ALTERNATIVES)?;
        budget.chars = budget
            .chars
            .checked_sub(a.len() + b.len())
            .ok_or(TOO_LONG_EXPANSION)?;
        Ok([a, b].concat())
    }

    const SEP: u32 = SEPARATOR as u32;

    pub(super) fn match_with_separator(
        pattern: &[u8],
        name: &[u8],
        budget: &mut Budget,
    ) -> Result<bool, &'static str> {
        let mut doublestar_pattern_backtrack: Option<usize> = None;
        let mut doublestar_name_backtrack = 0;
        let mut star_pattern_backtrack: Option<usize> = None;
        let mut star_name_backtrack = 0;
        let mut pat_idx = 0;
        let mut name_idx = 0;
        let pat_len = pattern.len();
        let name_len = name.len();
        let mut start_of_segment = true;
        'matching: while name_idx < name_len {
            // Each case either goes on matching (`continue`) or leaves
            // the `switch` (Go's `break`) to backtrack.
            if pat_idx < pat_len {
                match at(pattern, pat_idx) {
                    b'*' => {
                        pat_idx += 1;
                        if pat_idx < pat_len && at(pattern, pat_idx) == b'*' {
                            // doublestar: only as a whole segment.
                            pat_idx += 1;
                            if start_of_segment {
                                if pat_idx >= pat_len {
                                    // The pattern ends in `/**`.
                                    return Ok(true);
                                }
                                let (pat_rune, pat_rune_len) = decode_rune(tail(pattern, pat_idx));
                                if pat_rune == SEP {
                                    pat_idx += pat_rune_len;
                                    doublestar_pattern_backtrack = Some(pat_idx);
                                    doublestar_name_backtrack = name_idx;
                                    star_pattern_backtrack = None;
                                    continue;
                                }
                            }
                        }
                        start_of_segment = false;
                        star_pattern_backtrack = Some(pat_idx);
                        star_name_backtrack = name_idx;
                        continue;
                    }
                    b'?' => {
                        start_of_segment = false;
                        let (name_rune, name_rune_len) = decode_rune(tail(name, name_idx));
                        if name_rune != SEP {
                            pat_idx += 1;
                            name_idx += name_rune_len;
                            continue;
                        }
                    }
                    b'[' => {
                        start_of_segment = false;
                        pat_idx += 1;
                        if pat_idx >= pat_len {
                            return Err(BAD_PATTERN);
                        }
                        let (name_rune, name_rune_len) = decode_rune(tail(name, name_idx));
                        let mut matched = false;
                        let negate = matches!(at(pattern, pat_idx), b'!' | b'^');
                        if negate {
                            pat_idx += 1;
                        }
                        if pat_idx >= pat_len || at(pattern, pat_idx) == b']' {
                            return Err(BAD_PATTERN);
                        }
                        let mut last = MAX_RUNE;
                        while pat_idx < pat_len && at(pattern, pat_idx) != b']' {
                            let (mut pat_rune, mut pat_rune_len) =
                                decode_rune(tail(pattern, pat_idx));
                            pat_idx += pat_rune_len;
                            // A range.
                            if last < MAX_RUNE
                                && pat_rune == u32::from(b'-')
                                && pat_idx < pat_len
                                && at(pattern, pat_idx) != b']'
                            {
                                if at(pattern, pat_idx) == b'\\' {
                                    pat_idx += 1;
                                }
                                (pat_rune, pat_rune_len) = decode_rune(tail(pattern, pat_idx));
                                pat_idx += pat_rune_len;
                                if last <= name_rune && name_rune <= pat_rune {
                                    matched = true;
                                    break;
                                }
                                last = MAX_RUNE;
                                continue;
                            }
                            if pat_rune == u32::from(b'\\') {
                                (pat_rune, pat_rune_len) = decode_rune(tail(pattern, pat_idx));
                                pat_idx += pat_rune_len;
                            }
                            if pat_rune == name_rune {
                                matched = true;
                                break;
                            }
                            last = pat_rune;
                        }
                        if matched == negate {
                            if pat_idx >= pat_len {
                                return Err(BAD_PATTERN);
                            }
                        } else {
                            let closing = index_unescaped_byte(tail(pattern, pat_idx), b']')
                                .ok_or(BAD_PATTERN)?;
                            pat_idx += closing + 1;
                            name_idx += name_rune_len;
                            continue;
                        }
                    }
                    b'{' => {
                        pat_idx += 1;
                        let closing = index_matched_closing_alt(tail(pattern, pat_idx))
                            .ok_or(BAD_PATTERN)?
                            + pat_idx;
                        let rest = tail(pattern, closing + 1);
                        let name_rest = tail(name, name_idx);
                        while let Some(comma) = index_next_alt(slice(pattern, pat_idx, closing)) {
                            let comma = comma + pat_idx;
                            let alt = joined(slice(pattern, pat_idx, comma), rest, budget)?;
                            if match_with_separator(&alt, name_rest, budget)? {
                                return Ok(true);
                            }
                            pat_idx = comma + 1;
                        }
                        let alt = joined(slice(pattern, pat_idx, closing), rest, budget)?;
                        return match_with_separator(&alt, name_rest, budget);
                    }
                    c => {
                        if c == b'\\' {
                            // The next rune is matched as it is.
                            pat_idx += 1;
                            if pat_idx >= pat_len {
                                return Err(BAD_PATTERN);
                            }
                        }
                        let (pat_rune, pat_rune_len) = decode_rune(tail(pattern, pat_idx));
                        let (name_rune, name_rune_len) = decode_rune(tail(name, name_idx));
                        if pat_rune == name_rune {
                            pat_idx += pat_rune_len;
                            name_idx += name_rune_len;
                            start_of_segment = pat_rune == SEP;
                            continue;
                        }
                        if pat_idx > 0 && at(pattern, pat_idx - 1) == b'\\' {
                            // Back to the backslash before backtracking.
                            pat_idx -= 1;
                        }
                    }
                }
            }
            if let Some(star) = star_pattern_backtrack {
                // `*` takes one more rune, but not the separator.
                let (name_rune, name_rune_len) = decode_rune(tail(name, star_name_backtrack));
                if name_rune != SEP {
                    star_name_backtrack += name_rune_len;
                    pat_idx = star;
                    name_idx = star_name_backtrack;
                    start_of_segment = false;
                    continue;
                }
            }
            if let Some(doublestar) = doublestar_pattern_backtrack {
                // `**` takes one more segment.
                name_idx = doublestar_name_backtrack;
                while name_idx < name_len {
                    let (name_rune, name_rune_len) = decode_rune(tail(name, name_idx));
                    name_idx += name_rune_len;
                    if name_rune == SEP {
                        doublestar_name_backtrack = name_idx;
                        pat_idx = doublestar;
                        start_of_segment = true;
                        continue 'matching;
                    }
                }
            }
            if pat_idx < pat_len && !validate(tail(pattern, pat_idx)) {
                return Err(BAD_PATTERN);
            }
            return Ok(false);
        }
        if name_idx < name_len {
            return Ok(false);
        }
        is_zero_length_pattern(tail(pattern, pat_idx), budget)
    }

    /// Whether what is left of the pattern matches the empty rest of the
    /// name.
    fn is_zero_length_pattern(pattern: &[u8], budget: &mut Budget) -> Result<bool, &'static str> {
        if matches!(pattern, b"" | b"*" | b"**" | b"/**") {
            return Ok(true);
        }
        if pattern.first() == Some(&b'{') {
            let closing = index_matched_closing_alt(tail(pattern, 1)).ok_or(BAD_PATTERN)? + 1;
            let rest = tail(pattern, closing + 1);
            let mut pat_idx = 1;
            while let Some(comma) = index_next_alt(slice(pattern, pat_idx, closing)) {
                let comma = comma + pat_idx;
                let alt = joined(slice(pattern, pat_idx, comma), rest, budget)?;
                if is_zero_length_pattern(&alt, budget)? {
                    return Ok(true);
                }
                pat_idx = comma + 1;
            }
            let alt = joined(slice(pattern, pat_idx, closing), rest, budget)?;
            return is_zero_length_pattern(&alt, budget);
        }
        if !validate(pattern) {
            return Err(BAD_PATTERN);
        }
        Ok(false)
    }

    /// `indexUnescapedByte`: the first `c` not escaped.
    fn index_unescaped_byte(s: &[u8], c: u8) -> Option<usize> {
        let mut i = 0;
        while let Some(&b) = s.get(i) {
            if b == b'\\' {
                i += 1;
            } else if b == c {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// `indexMatchedClosingAlt`: the `}` closing an open `{` (nested ones
    /// skipped).
    fn index_matched_closing_alt(s: &[u8]) -> Option<usize> {
        let mut alts = 1;
        let mut i = 0;
        while let Some(&b) = s.get(i) {
            match b {
                b'\\' => i += 1,
                b'{' => alts += 1,
                b'}' => {
                    alts -= 1;
                    if alts == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// `indexNextAlt`: the next `,` outside nested `{}`.
    fn index_next_alt(s: &[u8]) -> Option<usize> {
        let mut alts = 1;
        let mut i = 0;
        while let Some(&b) = s.get(i) {
            match b {
                b'\\' => i += 1,
                b'{' => alts += 1,
                b'}' => alts -= 1,
                b',' if alts == 1 => return Some(i),
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// `doValidatePattern`.
    fn validate(s: &[u8]) -> bool {
        let mut alt_depth: usize = 0;
        let l = s.len();
        let mut i = 0;
        'validate: while i < l {
            match at(s, i) {
                b'\\' => {
                    i += 1;
                    if i >= l {
                        return false;
                    }
                }
                b'[' => {
                    i += 1;
                    if i >= l {
                        return false;
                    }
                    if matches!(at(s, i), b'^' | b'!') {
                        i += 1;
                    }
                    if i >= l || at(s, i) == b']' {
                        return false;
                    }
                    while i < l {
                        if at(s, i) == b'\\' {
                            i += 1;
                        } else if at(s, i) == b']' {
                            i += 1;
                            continue 'validate;
                        }
                        i += 1;
                    }
                    return false;
                }
                b'{' => alt_depth += 1,
                b'}' => {
                    let Some(d) = alt_depth.checked_sub(1) else {
                        return false;
                    };
                    alt_depth = d;
                }
                _ => {}
            }
            i += 1;
        }
        alt_depth == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doublestar_patterns() {
        let yes = [
            ("a.yaml", "a.yaml"),
            ("*.yaml", "deploy.yaml"),
            ("**/*.yaml", "deploy.yaml"),
            ("**/*.yaml", "a/b/deploy.yaml"),
            ("a/**", "a/b/c"),
            ("a/**/c.yaml", "a/c.yaml"),
            ("a/**/c.yaml", "a/x/y/c.yaml"),
            ("{a,b}/*.yaml", "b/x.yaml"),
            ("[a-c]?.yaml", "bx.yaml"),
            ("[!a]x", "bx"),
            ("\\*", "*"),
        ];
        for (p, n) in yes {
            assert_eq!(matches(p, n), Ok(true), "{p} {n}");
        }
        let no = [
            ("*.yaml", "a/deploy.yaml"),
            ("a/*", "a/b/c"),
            ("[a-c]x", "dx"),
            ("[^a]x", "ax"),
            ("?", ""),
            ("{a,b}", "c"),
        ];
        for (p, n) in no {
            assert_eq!(matches(p, n), Ok(false), "{p} {n}");
        }
        for p in ["[a", "{a,b", "a\\"] {
            assert_eq!(matches(p, "a"), Err(BAD_PATTERN), "{p}");
        }
    }

    /// doublestar v4.0.2's answers (its `Match`, run with Go 1.19).
    #[test]
    fn doublestar_v4_0_2_patterns() {
        let cases = [
            // `{` commits where it is reached: no going back to `*`/`**`
            // (v4.8.1 and `matches` say true).
            ("**/{a,b}", "a/b", Ok(false)),
            ("a/a*{b,c}", "a/abc", Ok(false)),
            ("a*{b,c}", "abxb", Ok(false)),
            // A trailing `**/` takes no zero-length match (v4.8.1's does).
            ("a/**/", "a", Ok(false)),
            ("a/**/", "a/", Ok(false)),
            ("a/**/b/**/", "a/b", Ok(false)),
            ("**/*.yaml", "x/y.yaml", Ok(true)),
            ("{a,b}/**", "a", Ok(true)),
            ("*/{x,y}.yaml", "d/x.yaml", Ok(true)),
            ("{a,{b,c}}d", "cd", Ok(true)),
            ("{a*,b}c", "axxc", Ok(true)),
            ("{,a}", "", Ok(true)),
            ("**", "", Ok(true)),
            ("", "", Ok(true)),
            ("a/**/b", "a/x/y/b", Ok(true)),
            ("a**b", "axxb", Ok(true)),
            ("a/**b", "a/xb", Ok(true)),
            ("[a-]", "-", Ok(true)),
            ("[\\]]", "]", Ok(true)),
            ("\\*", "*", Ok(true)),
            ("[a", "a", Err(BAD_PATTERN)),
            ("a\\", "a", Err(BAD_PATTERN)),
            ("{a,b", "a", Err(BAD_PATTERN)),
            ("a}", "a", Err(BAD_PATTERN)),
            ("a[", "b", Err(BAD_PATTERN)),
            ("[]a]", "a", Err(BAD_PATTERN)),
            ("[!]", "a", Err(BAD_PATTERN)),
        ];
        for (p, n, want) in cases {
            assert_eq!(matches_v4_0_2(p, n), want, "{p} {n}");
        }
        for (p, n, _) in cases.iter().take(3) {
            assert_eq!(matches(p, n), Ok(true), "{p} {n}");
        }
        // Alternatives are bounded here too.
        let pattern = format!("{}c", "{a*,a}".repeat(20));
        assert_eq!(
            matches_v4_0_2(&pattern, &"a".repeat(40)),
            Err(TOO_MANY_ALTERNATIVES)
        );
    }

    #[test]
    fn alternatives_capped() {
        // 2^40 alternatives: refused after the first 10,000.
        let pattern = "{a,b}".repeat(40);
        assert_eq!(matches(&pattern, "x"), Err(TOO_MANY_ALTERNATIVES));
        assert!(TOO_MANY_ALTERNATIVES.contains(&MAX_ALTERNATIVES.to_string()));
        // 13 groups: 8,192 alternatives, within the limit.
        let pattern = "{a,b}".repeat(13);
        assert_eq!(matches(&pattern, &"b".repeat(13)), Ok(true));
        // A long pattern re-built per group: the characters run out.
        let pattern = format!("{}{}", "{a}".repeat(20), "x".repeat(1 << 20));
        assert_eq!(matches(&pattern, "x"), Err(TOO_LONG_EXPANSION));
        assert!(TOO_LONG_EXPANSION.contains(&MAX_EXPANDED_CHARS.to_string()));
    }
}
