//! yaml.v3's decoder, reproduced: [`parse`] gives the node trees that
//! `yaml.NewDecoder(r).Decode(&node)` in a loop gives (go.yaml.in/yaml/v3
//! v3.0.4, kpt's YAML library), comments included, or the error text it
//! gives.
//!
//! How:
//!
//! 1. The grammar is libyaml's, from `libyaml-safer`'s [`Parser`](libyaml_safer::Parser): its
//!    events give the structure, values, tags, anchors, styles, marks and
//!    errors.
//! 2. libyaml reports no comments; yaml.v3's fork of libyaml attaches them in
//!    its scanner (`yaml_parser_scan_comments`, `yaml_parser_scan_line_comment`,
//!    `yaml_parser_unroll_indent` in scannerc.go) and parser (`peek_token`'s
//!    `yaml_parser_unfold_comments`, stem and head splitting in parserc.go),
//!    and where a comment lands depends on the token queue at the moment it
//!    is scanned (yaml.v3's scanner runs three tokens ahead of its parser).
//!    So the token stream is rebuilt from the events and the source text
//!    between their marks (`Recon`: the indicators `-`, `?`, `:`, `,`,
//!    `]`, `}`, `---`, `...`, directives, properties, and the zero-width
//!    tokens libyaml inserts), then yaml.v3's scanner is replayed over it
//!    for everything but token bodies (`Sim`: whitespace, comments,
//!    indentation, simple keys, lookahead) and yaml.v3's parser state
//!    machine pulls from it (`GoParser`), giving each event yaml.v3's
//!    head, line and foot comments.
//! 3. The node tree is composed as decode.go's `parser` does
//!    (`Composer`), with its comment moves (foot comments of keys and of
//!    the last entry, document foot) and its own error (an alias to an
//!    undefined anchor). Errors come from libyaml, timed as yaml.v3 meets
//!    them (its scanner errors can come first, see `scanner_error_first`).
//!
//! It streams: events are pulled in batches as the replay needs tokens, and
//! only a small window of tokens is kept. For large inputs libyaml-safer's
//! parser and the token rebuild run on a second thread, ahead of the replay
//! and the composer. Everything is linear in the input. Comments never
//! contain `\r`.
//!
//! Two inputs libyaml-safer 0.3 panics on are kept from it (see `prepare`
//! and `tag_comma`), and tabs that yaml.v3's comment scanning reads but
//! libyaml refuses are turned into spaces (see `comment_tabs`).
//!
//! Where this still differs from yaml.v3 (libyaml-safer follows libyaml
//! 0.2.5, yaml.v3 an older libyaml), all in input kpt packages hardly hold:
//! inside a flow collection, `:` right before `,`, `[`, `]`, `{` or `}`
//! (`[a:]`, `{a:, b}`) is an error ("found unexpected ':'") and `?` does not
//! end a plain scalar (`{a: x?y}`); tags may not hold `,`, `[` or `]`, and
//! one directly followed by `,` in a flow collection (`[!!str, a]`) is
//! refused; a byte order mark after the start of the stream is skipped,
//! where yaml.v3 reads it as text. Some invalid documents name another of
//! their errors than yaml.v3 does: yaml.v3 raises "could not find expected
//! ':'" later than libyaml, and drops a scanner error met while it splits
//! a comment before `- ` (`yaml_parser_split_stem_comment` ignores its
//! `peek_token` failing), going on to a later one.

use crate::node::Node;

use compose::Composer;
use feed::{Feed, Producer};
use goparse::GoParser;
use scan::Sim;
use source::Source;
use tokens::{at, end_mark, is_breakz};

mod compose;
mod error;
mod feed;
mod goparse;
mod recon;
mod scan;
mod scanner_error;
mod source;
mod tokens;
mod unique;

pub use error::ParseError;
pub use unique::{duplicate_key, DuplicateKey};

/// Every document of `src`, as yaml.v3's `Decoder.Decode(&node)` returns
/// them one by one (a stream of only comments or whitespace has none), or
/// the first error it returns.
pub fn parse(src: &str) -> Result<Vec<Node>, ParseError> {
    parse_traced(src).0
}

/// [`parse`], and whether the comment replay kept step with libyaml's
/// events (tests check that it always does).
fn parse_traced(src: &str) -> (Result<Vec<Node>, ParseError>, bool) {
    parse_with(src, src.len() >= THREAD_MIN)
}

/// From this size on, libyaml-safer's parser and the token rebuild run on
/// their own thread, ahead of the rest (about half the work each), when a
/// thread can be had.
const THREAD_MIN: usize = 128 * 1024;

/// [`parse_traced`], with libyaml-safer's parser on a second thread or not.
fn parse_with(src: &str, threaded: bool) -> (Result<Vec<Node>, ParseError>, bool) {
    let (mut text, eof_patched) = prepare(src);
    for retry in 0..TAB_RETRIES {
        let (result, in_step, tab) = parse_once(&text, eof_patched, threaded);
        let Some(at) = tab else {
            return (result, in_step);
        };
        // At the first such tab, every run of comment lines yaml.v3 reads
        // at once; then run by run.
        let all = if retry == 0 {
            comment_tabs_all(text.as_bytes())
        } else {
            None
        };
        match all.or_else(|| comment_tabs(text.as_bytes(), at)) {
            Some(fixed) => text = std::borrow::Cow::Owned(fixed),
            None => return (result, in_step),
        }
    }
    let (result, in_step, _) = parse_once(&text, eof_patched, threaded);
    (result, in_step)
}

/// How many runs of tab-indented comment lines [`comment_tabs`] fixes, one
/// parse each, before libyaml's error stands.
const TAB_RETRIES: usize = 16;

/// yaml.v3 reads comment lines (and the blank lines between them) after a
/// comment it scans with `yaml_parser_scan_comments` in one go, blanks and
/// tabs alike (it peeks ahead for more); libyaml's `scan_to_next_token`
/// refuses a tab at the start of a line in block context ("found character
/// that cannot start any token"). So when libyaml refuses a tab at `at`
/// that yaml.v3 would have read past, the run's leading tabs become spaces
/// — the same columns and offsets, the same comments — for another parse.
/// `None` when yaml.v3 refuses it too: the line above (past blank lines)
/// has no comment, or a line comment (one after a token other than `-`,
/// `---` or `...`, read by `yaml_parser_scan_line_comment`, which does not
/// read on), or no comment line follows within its peek. Tabs between an
/// explicit key's `?` or `:` and a comment are read by yaml.v3 as well.
fn comment_tabs(b: &[u8], at: usize) -> Option<String> {
    let line_start = |i: usize| {
        b[..i]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1)
    };
    let line_end = |i: usize| {
        b[i..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |p| i + p)
    };
    let blank = |c: u8| matches!(c, b' ' | b'\t' | b'\r');
    // The first non-blank byte of the line starting at `i`.
    let first = |i: usize| (i..line_end(i)).find(|&j| !blank(b[j]));
    if b.get(at) != Some(&b'\t') {
        return None;
    }
    let start = line_start(at);
    if let Some(ind) = b[start..at]
        .iter()
        .rposition(|&c| !blank(c))
        .map(|i| start + i)
    {
        // After `?` or `:` in block context libyaml does not skip tabs;
        // yaml.v3 reads the rest of the line as a comment
        // (`yaml_parser_scan_line_comment` skips blanks and tabs alike).
        let after = (at..line_end(at)).find(|&j| !blank(b[j]))?;
        if !matches!(b[ind], b'?' | b':') || b[after] != b'#' {
            return None;
        }
        let mut fixed = b.to_vec();
        for c in &mut fixed[at..after] {
            if *c == b'\t' {
                *c = b' ';
            }
        }
        return String::from_utf8(fixed).ok();
    }
    // Above, past blank lines: a line whose comment yaml.v3 scanned with
    // `yaml_parser_scan_comments`.
    let mut above = start;
    let comment_end = loop {
        if above == 0 {
            return None;
        }
        let prev = line_start(above - 1);
        if first(prev).is_none() {
            above = prev;
            continue;
        }
        let line = &b[prev..above - 1];
        let hash = (0..line.len()).find(|&k| line[k] == b'#' && (k == 0 || blank(line[k - 1])))?;
        let mut words = line[..hash]
            .split(|&c| blank(c))
            .filter(|w| !w.is_empty())
            .enumerate();
        let only_indicators = words.all(|(n, w)| {
            w == b"-" || (n == 0 && line.starts_with(w) && (w == b"---" || w == b"..."))
        });
        if !only_indicators {
            return None;
        }
        break above - 1;
    };
    // Here on: blank lines, then a comment line within the peek.
    let mut below = start;
    let last = loop {
        match first(below) {
            None if line_end(below) < b.len() => below = line_end(below) + 1,
            Some(hash) if b[hash] == b'#' && hash - comment_end < 512 => break line_end(below),
            _ => return None,
        }
    };
    let mut fixed = b.to_vec();
    let mut i = start;
    while i < last {
        let end = line_end(i);
        for c in &mut fixed[i..end] {
            match *c {
                b'\t' => *c = b' ',
                b' ' => {}
                _ => break,
            }
        }
        i = end + 1;
    }
    String::from_utf8(fixed).ok()
}

/// [`comment_tabs`] for all runs of comment lines at once: tabs leading a
/// comment line (or a blank line before one) that follows a line with a
/// comment yaml.v3 scans with `yaml_parser_scan_comments`. Lines that may
/// belong to a block scalar (indented under a line ending in `|` or `>`
/// and its indicators) are left alone: there such a tab is an error for
/// yaml.v3 too. Tabs between an explicit key's `?` or `:` and a comment go
/// too. `None` when nothing changes.
fn comment_tabs_all(b: &[u8]) -> Option<String> {
    let blank = |c: u8| matches!(c, b' ' | b'\t' | b'\r');
    let line_end = |i: usize| {
        b[i..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |p| i + p)
    };
    let mut out = b.to_vec();
    let mut changed = false;
    // Untabs the blanks leading the line at `i`.
    fn untab(out: &mut [u8], i: usize) -> bool {
        let mut changed = false;
        for c in &mut out[i..] {
            match *c {
                b'\t' => {
                    *c = b' ';
                    changed = true;
                }
                b' ' => {}
                _ => break,
            }
        }
        changed
    }
    // The end of the last line with a scanned comment, while only blank
    // and comment lines follow; blank lines with tabs since then.
    let mut comment_end: Option<usize> = None;
    let mut waiting: Vec<usize> = Vec::new();
    // The indentation of a line ending in a block scalar header.
    let mut block: Option<usize> = None;
    let mut i = 0;
    while i < b.len() {
        let end = line_end(i);
        let line = &b[i..end];
        let spaces = line.iter().take_while(|&&c| c == b' ').count();
        let first = line.iter().position(|&c| !blank(c));
        if let Some(h) = block {
            if first.is_none() || (spaces > h && line.get(spaces) != Some(&b'\t')) {
                // (Block scalar content.)
                comment_end = None;
                waiting.clear();
                i = end + 1;
                continue;
            }
            block = None;
        }
        let hash = (0..line.len()).find(|&k| line[k] == b'#' && (k == 0 || blank(line[k - 1])));
        match first {
            None => {
                if comment_end.is_some() && line.contains(&b'\t') {
                    waiting.push(i);
                }
            }
            Some(f) if Some(f) == hash => {
                // A comment line.
                if comment_end.is_some_and(|ce| i + f - ce < 512) {
                    for &w in &waiting {
                        changed |= untab(&mut out, w);
                    }
                    changed |= untab(&mut out, i);
                }
                waiting.clear();
                comment_end = Some(end);
            }
            Some(_) => {
                waiting.clear();
                let code = &line[..hash.unwrap_or(line.len())];
                // A comment after indicators only (`-`, `---`, `...`) is
                // scanned with `yaml_parser_scan_comments`.
                let mut words = code
                    .split(|&c| blank(c))
                    .filter(|w| !w.is_empty())
                    .enumerate();
                let indicators = words.all(|(n, w)| {
                    w == b"-" || (n == 0 && line.starts_with(w) && (w == b"---" || w == b"..."))
                });
                comment_end = (hash.is_some() && indicators).then_some(end);
                // Tabs between an explicit key's `?` or `:` and a comment
                // (not where quotes could hold them).
                if let Some(h) = hash {
                    let gap = code.iter().rposition(|&c| !blank(c)).map_or(0, |k| k + 1);
                    let word = code[..gap].rsplit(|&c| blank(c)).next().unwrap_or_default();
                    if (word == b"?" || word == b":")
                        && !code.iter().any(|&c| c == b'\'' || c == b'"')
                    {
                        for c in &mut out[i + gap..i + h] {
                            if *c == b'\t' {
                                *c = b' ';
                                changed = true;
                            }
                        }
                    }
                }
                // A block scalar header ends the code: `|` or `>` and
                // chomping and indentation indicators.
                let code: Vec<u8> = code.iter().copied().filter(|&c| !blank(c)).collect();
                let tail = code
                    .iter()
                    .rev()
                    .take_while(|&&c| matches!(c, b'+' | b'-' | b'0'..=b'9'))
                    .count();
                if code.len() > tail && matches!(code[code.len() - tail - 1], b'|' | b'>') {
                    block = Some(spaces);
                }
            }
        }
        i = end + 1;
    }
    if !changed {
        return None;
    }
    String::from_utf8(out).ok()
}

/// One parse of the prepared text: the result, whether the comment replay
/// kept step, and where libyaml refused a tab, if it did.
fn parse_once(
    text: &str,
    eof_patched: bool,
    threaded: bool,
) -> (Result<Vec<Node>, ParseError>, bool, Option<usize>) {
    if let Some(e) = tag_comma(text) {
        return (Err(e), true, None);
    }
    // The replay reads the text as yaml.v3 does, without the added break
    // (a comment on the last line is read differently when a break
    // follows).
    let src = if eof_patched {
        &text.as_bytes()[..text.len() - 1]
    } else {
        text.as_bytes()
    };
    let eof = eof_patched.then(|| end_mark(src));
    let run = |feed: Feed<'_>| {
        let go = GoParser::new(Sim::new(src, Source::new(feed, text, eof)));
        let mut composer = Composer::new(go, text, src, eof);
        let result = composer.run();
        let source = &composer.go.sim.source;
        let tab = composer.tab_at.or(source.tab_at);
        (result, composer.go_ok && source.recon_ok, tab)
    };
    if !threaded {
        return run(Feed::Inline(Box::new(Producer::new(text, eof))));
    }
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let producer = std::thread::Builder::new()
            .name("yaml-parse".into())
            .spawn_scoped(scope, move || {
                let mut p = Producer::new(text, eof);
                while let Some(b) = p.batch() {
                    if tx.send(b).is_err() {
                        return;
                    }
                }
            });
        match producer {
            // The receiver goes with `run`'s locals, so a producer blocked
            // on a full channel returns before the scope joins it.
            Ok(_) => run(Feed::Thread(rx)),
            Err(_) => run(Feed::Inline(Box::new(Producer::new(text, eof)))),
        }
    })
}

/// libyaml-safer 0.3 panics (`scan_tag`: "TODO: What is expected here?")
/// on a tag followed directly by `,` in a flow collection (`[!!str, a]`),
/// which yaml.v3 reads as a tag on an empty node. Such input is refused
/// with the error libyaml gives for the same tag in block context (the one
/// input yaml.v3 reads and this parser does not); everything else is left
/// to libyaml.
fn tag_comma(text: &str) -> Option<ParseError> {
    let b = text.as_bytes();
    if !b.contains(&b'!') {
        return None;
    }
    // Where a tag starting at any `!` would end at a `,`.
    let uri = |c: u8| c.is_ascii_alphanumeric() || b"-_;/?:@&=+$.%!~*'()".contains(&c);
    let mut commas = Vec::new();
    for (i, _) in b.iter().enumerate().filter(|&(_, &c)| c == b'!') {
        let mut j = i + 1;
        if at(b, j) == b'<' {
            while j < b.len() && b[j] != b'>' && !is_breakz(b, j) {
                j += 1;
            }
            j += 1;
        } else {
            while j < b.len() && uri(b[j]) {
                j += 1;
            }
        }
        if at(b, j) == b',' {
            commas.push(j);
        }
    }
    if commas.is_empty() {
        return None;
    }
    // Which of them end a tag in a flow collection: libyaml's scanner over
    // the text with those commas blanked (so it cannot stop on them). A
    // scanner error past one (the scanner reads ahead of the tokens it
    // gives) leaves it unknown: refused too.
    let mut copy = b.to_vec();
    for &j in &commas {
        copy[j] = b' ';
    }
    let refuse = |pos: usize| {
        let line = b[..pos].iter().filter(|&&c| c == b'\n').count();
        Some(ParseError {
            line: if line != 0 { line + 1 } else { 0 },
            message: "did not find expected whitespace or line break".to_owned(),
        })
    };
    let mut input = copy.as_slice();
    let mut scanner = libyaml_safer::Scanner::new();
    // UTF-8, no byte order mark: as the parser is told (see `Producer::new`).
    scanner.set_encoding(libyaml_safer::Encoding::Utf8);
    scanner.set_input_string(&mut input);
    let mut flow = 0usize;
    let mut next = 0;
    for tok in scanner {
        let tok = match tok {
            Ok(t) => t,
            Err(e) => {
                let at = e.problem_mark().map_or(0, |m| m.index as usize);
                return match commas.get(next) {
                    Some(&c) if c < at => refuse(c),
                    _ => None,
                };
            }
        };
        let end = tok.end_mark.index as usize;
        match tok.data {
            libyaml_safer::TokenData::FlowSequenceStart
            | libyaml_safer::TokenData::FlowMappingStart => flow += 1,
            libyaml_safer::TokenData::FlowSequenceEnd
            | libyaml_safer::TokenData::FlowMappingEnd => {
                flow = flow.saturating_sub(1);
            }
            libyaml_safer::TokenData::Tag { .. } if flow > 0 && commas.contains(&end) => {
                return refuse(end);
            }
            _ => {}
        }
        while commas
            .get(next)
            .is_some_and(|&c| c < tok.start_mark.index as usize)
        {
            next += 1;
        }
    }
    None
}

/// The text libyaml-safer reads: without a leading byte order mark (as
/// yaml.v3's reader drops it; marks count from after it), and with a final
/// line break if there is none — libyaml-safer 0.3 panics when a block
/// scalar's last line runs into the end of input (`read_line_break` on an
/// empty buffer). The added break changes only such a block scalar's value,
/// which [`Producer::eof_block_scalar`] corrects, and the comment replay
/// reads the text without it.
fn prepare(src: &str) -> (std::borrow::Cow<'_, str>, bool) {
    let text = src.strip_prefix('\u{feff}').unwrap_or(src);
    if needs_final_break(text) {
        (std::borrow::Cow::Owned(format!("{text}\n")), true)
    } else {
        (std::borrow::Cow::Borrowed(text), false)
    }
}

/// The text does not end in a line break (and is not empty): a block
/// scalar's last line, even of blanks, could run into the end.
fn needs_final_break(text: &str) -> bool {
    text.as_bytes()
        .last()
        .is_some_and(|&c| c != b'\n' && c != b'\r')
}

#[cfg(test)]
mod tests;
