//! The fast path of [`super::parse_output`]: JSON read with `items` skipped,
//! and the block-YAML line scan that leaves `items` unread. Its rules are in
//! the [`super`] module documentation.

use serde::Deserialize;

use super::de::Top;
use super::document::{finish, parse_first_yaml_document};
use super::output::{OutputError, ResourceListOutput};

/// The fast path: `None` means "not understood, use the full parse".
pub(super) fn parse_fast(stdout: &[u8]) -> Option<Result<ResourceListOutput, OutputError>> {
    let first = stdout.iter().find(|b| !is_yaml_space(**b))?;
    if matches!(first, b'{' | b'[') {
        parse_json(stdout)
    } else {
        parse_block_yaml(stdout)
    }
}

fn parse_json(stdout: &[u8]) -> Option<Result<ResourceListOutput, OutputError>> {
    let mut de = serde_json::Deserializer::from_slice(stdout);
    let top = Top::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(finish(top))
}

// ---------------------------------------------------------------------------
// Block-YAML line scan

/// One top-level key of the root mapping: bytes `start..end` of the input.
struct Section {
    start: usize,
    end: usize,
    /// A block-style `items` value: left out of the small document.
    skip: bool,
}

fn parse_block_yaml(bytes: &[u8]) -> Option<Result<ResourceListOutput, OutputError>> {
    if !line_breaks_are_plain(bytes) {
        return None;
    }
    let mut sections: Vec<Section> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    let mut seen_document_start = false;
    let mut document_end = bytes.len();
    let mut line_start = 0;
    while line_start < bytes.len() {
        let newline = bytes[line_start..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| line_start + i);
        let whole_line = &bytes[line_start..newline];
        let line = whole_line.strip_suffix(b"\r").unwrap_or(whole_line);
        let this_line = line_start;
        // Once inside the root mapping, indented lines need not be looked at.
        line_start = if sections.is_empty() {
            newline + 1
        } else {
            match next_column0_line(bytes, newline) {
                Some(next) => next,
                None => bytes.len(),
            }
        };
        match line.first() {
            // Blank line, or an indented line: part of the current section.
            None | Some(b' ') => {
                if sections.is_empty() && !is_blank_or_comment(line) {
                    return None; // indented root mapping, or a root scalar
                }
                continue;
            }
            Some(b'#') => continue,
            Some(b'\t') => return None,
            _ => {}
        }
        if let Some(rest) = document_marker(line, b"---") {
            if sections.is_empty() {
                if seen_document_start || !is_blank_or_comment(rest) {
                    return None;
                }
                seen_document_start = true;
                continue;
            }
            document_end = this_line;
            break;
        }
        if document_marker(line, b"...").is_some() {
            if sections.is_empty() {
                return None;
            }
            document_end = this_line;
            break;
        }
        if line[0] == b'-' && matches!(line.get(1), None | Some(b' ')) {
            // An entry of a compact (column-0) block sequence.
            if sections.is_empty() {
                return None;
            }
            continue;
        }
        let (name, value) = split_key_line(line)?;
        if names.contains(&name) {
            return None;
        }
        let skip = name == "items" && is_blank_or_comment(value);
        if !skip && !value_ends_on_its_line(value) {
            return None;
        }
        if let Some(last) = sections.last_mut() {
            last.end = this_line;
        }
        sections.push(Section {
            start: this_line,
            end: bytes.len(),
            skip,
        });
        names.push(name);
    }
    let last = sections.last_mut()?;
    last.end = document_end;

    let kept = sections.iter().filter(|s| !s.skip);
    if kept.clone().next().is_none() {
        // Only `items`: a mapping without a kind.
        return Some(finish(Top::Mapping {
            kind: None,
            results: Vec::new(),
        }));
    }
    let mut small = Vec::with_capacity(kept.clone().map(|s| s.end - s.start).sum());
    for section in kept {
        small.extend_from_slice(&bytes[section.start..section.end]);
    }
    let top = parse_first_yaml_document(&small).ok()?;
    Some(finish(top))
}

/// The start of the first line after `from` that does not begin with a space
/// and is not an entry of a compact block sequence (`- ` at column 0, as kpt
/// writes `items`), if any. `from` is a line's `\n` or any earlier index.
///
/// Skipping `- ` lines here changes nothing for the caller, which treats them
/// as part of the current section; it keeps kpt-style `items` (every item at
/// column 0) on the fast scan instead of stopping once per item.
///
/// The scan is the only per-byte work of the block-YAML fast path, so it
/// goes by fixed-size chunks that the compiler vectorises: nearly every line
/// of `items` is indented or a sequence entry and need not be looked at.
fn next_column0_line(bytes: &[u8], from: usize) -> Option<usize> {
    const CHUNK: usize = 64;
    let is_hit = |b: u8, next: u8, after: u8| {
        (b == b'\n') & (next != b' ') & !((next == b'-') & (after == b' '))
    };
    let mut i = from;
    while i + CHUNK + 2 <= bytes.len() {
        let here = &bytes[i..i + CHUNK];
        let next = &bytes[i + 1..i + 1 + CHUNK];
        let after = &bytes[i + 2..i + 2 + CHUNK];
        let hits = here.iter().zip(next).zip(after);
        if hits
            .clone()
            .fold(false, |hit, ((b, n), a)| hit | is_hit(*b, *n, *a))
        {
            let k = hits.clone().position(|((b, n), a)| is_hit(*b, *n, *a))?;
            return Some(i + k + 1);
        }
        i += CHUNK;
    }
    // The last bytes, where a line may end the input (no byte after it).
    let last = bytes.len().checked_sub(1)?;
    (i..last)
        .find(|&k| {
            is_hit(
                bytes[k],
                bytes[k + 1],
                bytes.get(k + 2).copied().unwrap_or(b'\n'),
            )
        })
        .map(|k| k + 1)
}

fn is_yaml_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

pub(super) fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| is_yaml_space(*b))
}

/// Blank (spaces and tabs) or a comment after blanks.
fn is_blank_or_comment(s: &[u8]) -> bool {
    match s.iter().find(|b| !matches!(b, b' ' | b'\t')) {
        None => true,
        Some(b) => *b == b'#',
    }
}

/// Whether the input is UTF-8 whose only line breaks are LF and CRLF:
/// libyaml also breaks lines at a lone CR, NEL, LS and PS, the scan does not.
fn line_breaks_are_plain(bytes: &[u8]) -> bool {
    // One vectorised pass for the usual case: ASCII without CR.
    let (mut cr, mut non_ascii) = (false, false);
    for chunk in bytes.chunks(4096) {
        cr |= chunk.iter().fold(false, |acc, b| acc | (*b == b'\r'));
        non_ascii |= chunk.iter().fold(false, |acc, b| acc | (*b >= 0x80));
    }
    if cr {
        if bytes.last() == Some(&b'\r') {
            return false;
        }
        let lone_cr = |(b, next): (&u8, &u8)| (*b == b'\r') & (*next != b'\n');
        for (here, next) in bytes.chunks(4096).zip(bytes[1..].chunks(4096)) {
            if here
                .iter()
                .zip(next)
                .fold(false, |acc, pair| acc | lone_cr(pair))
            {
                return false;
            }
        }
    }
    if non_ascii {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return false;
        };
        if text.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
            return false;
        }
    }
    true
}

/// `---`/`...` at column 0 followed by a blank or the end: what follows it.
fn document_marker<'a>(line: &'a [u8], marker: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(marker)?;
    match rest.first() {
        None | Some(b' ' | b'\t') => Some(rest),
        Some(_) => None,
    }
}

/// A column-0 `key: value` line with a plain, simple key: (key, value text).
fn split_key_line(line: &[u8]) -> Option<(&str, &[u8])> {
    let colon = line.iter().position(|b| *b == b':')?;
    let (key, rest) = line.split_at(colon);
    let first = *key.first()?;
    if !(first.is_ascii_alphanumeric() || first == b'_') {
        return None;
    }
    if !key
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
    {
        return None;
    }
    let value = match &rest[1..] {
        [] => &[][..],
        [b' ', value @ ..] => value,
        _ => return None, // `a:b` is a plain scalar; `a:\t…` is rare
    };
    let key = std::str::from_utf8(key).ok()?;
    Some((key, value))
}

/// Whether a top-level value cannot run onto the next lines at column 0:
/// false for a quoted scalar or flow collection left open on its line (or one
/// this check is not sure about).
fn value_ends_on_its_line(value: &[u8]) -> bool {
    let mut v = trim_blanks(value);
    // Node properties: `&anchor`, `!tag`.
    while let Some(b'&' | b'!') = v.first() {
        let end = v.iter().position(|b| *b == b' ').unwrap_or(v.len());
        v = trim_blanks(&v[end..]);
    }
    let rest = match v.first() {
        Some(b'"' | b'\'') => match quoted_end(v) {
            Some(end) => &v[end..],
            None => return false,
        },
        Some(b'[' | b'{') => match flow_end(v) {
            Some(end) => &v[end..],
            None => return false,
        },
        _ => return true, // plain or block scalar, alias, block node below
    };
    matches!(rest.first(), None | Some(b' ' | b'\t')) && is_blank_or_comment(rest)
}

fn trim_blanks(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(s.len());
    &s[start..]
}

/// `v` starts with a quote: the index just past the closing quote.
fn quoted_end(v: &[u8]) -> Option<usize> {
    let quote = *v.first()?;
    let mut i = 1;
    loop {
        match *v.get(i)? {
            b'\\' if quote == b'"' => i += 2,
            b'\'' if quote == b'\'' && v.get(i + 1) == Some(&b'\'') => i += 2,
            b if b == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// `v` starts with `[` or `{`: the index just past the matching bracket, if
/// it closes on this line and the scan is sure of it. A quote counts only
/// where a flow node starts (after `[`, `{`, `,`, or a `:` that ends a
/// quoted key or is followed by a blank); any other quote, and any `#`, make
/// the answer "not sure".
fn flow_end(v: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut node_start = true;
    let mut after_quoted = false;
    let mut i = 0;
    while i < v.len() {
        let b = v[i];
        let was_after_quoted = after_quoted;
        after_quoted = false;
        match b {
            b'[' | b'{' => {
                depth += 1;
                node_start = true;
            }
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                node_start = false;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' => node_start = true,
            b':' => {
                node_start = was_after_quoted || matches!(v.get(i + 1), Some(b' ' | b'\t') | None);
            }
            b' ' | b'\t' => {}
            b'"' | b'\'' => {
                if !node_start {
                    return None;
                }
                i += quoted_end(&v[i..])?;
                node_start = false;
                after_quoted = true;
                continue;
            }
            b'#' => return None,
            _ => node_start = false,
        }
        i += 1;
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
