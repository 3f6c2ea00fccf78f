//! `doublestar.Match` (bmatcuk/doublestar v4, as search-replace's
//! `by-file-path` uses it): `/`-separated paths; `*` and `?` within a
//! path segment, `**` as a whole segment for any number of segments,
//! `[...]` classes (`^` or `!` negates, `a-z` ranges), `{a,b}`
//! alternatives, `\` escapes. A malformed pattern (an unclosed `[` or
//! `{`, a trailing `\`) is `Err` (doublestar's `ErrBadPattern`, "syntax
//! error in pattern"); doublestar finds it only where matching reaches
//! it, here it is found first.

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
