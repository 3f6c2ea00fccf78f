//! yaml.v3's decoder, reproduced: [`parse`] gives the node trees that
//! `yaml.NewDecoder(r).Decode(&node)` in a loop gives (go.yaml.in/yaml/v3
//! v3.0.4, kpt's YAML library), comments included, or the error text it
//! gives.
//!
//! How:
//!
//! 1. The grammar is libyaml's, from `libyaml-safer`'s [`Parser`]: its
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::BuildHasherDefault;

use compact_str::CompactString;
use libyaml_safer::{Event, EventData, MappingStyle, Parser, ScalarStyle, SequenceStyle};

use crate::node::{Kind, Node, Style, Tag};
use crate::resolve::resolve_plain;

/// A document stream yaml.v3 rejects. [`Display`](fmt::Display) is
/// yaml.v3's `err.Error()` (`yaml: line 4: did not find expected ',' or
/// ']'`), which is what kpt prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line yaml.v3 names (its `parser.fail()` arithmetic, so for parser
    /// errors often the line before the problem); 0 when it names none.
    line: usize,
    message: String,
}

impl ParseError {
    /// The line number in the message (`yaml: line N: ...`), if any.
    pub fn line(&self) -> Option<usize> {
        (self.line != 0).then_some(self.line)
    }

    /// The message without the `yaml: line N: ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn plain(message: String) -> ParseError {
        ParseError { line: 0, message }
    }

    /// decode.go `parser.fail()`: the context mark's line if set, else the
    /// problem mark's; both are 0-based and only scanner errors add 1.
    /// `eof`: the end of the text as yaml.v3 reads it, when [`prepare`]
    /// added a break after it: a scanner stopped past it is at it for
    /// yaml.v3 (while yaml.v3's STREAM-END token, where parser errors at the
    /// end point, is on the next line, as after the added break).
    fn from_libyaml(err: &libyaml_safer::Error, eof: Option<Mk>) -> ParseError {
        let scanner = err.kind() == libyaml_safer::ErrorKind::Scanner;
        let line = |m: libyaml_safer::Mark| match eof {
            Some(e) if scanner && m.index as i64 > e.index => e.line as u64,
            _ => m.line,
        };
        let ctx = err.context_mark().map_or(0, line);
        let prob = err.problem_mark().map_or(0, line);
        let base = if ctx != 0 { ctx } else { prob };
        let line = if base != 0 {
            base as usize + usize::from(scanner)
        } else {
            0
        };
        let problem = err.problem();
        let message = if problem.is_empty() {
            "unknown problem parsing YAML content".to_owned()
        } else {
            problem.to_owned()
        };
        ParseError { line, message }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line != 0 {
            write!(f, "yaml: line {}: {}", self.line, self.message)
        } else {
            write!(f, "yaml: {}", self.message)
        }
    }
}

impl std::error::Error for ParseError {}

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

/// Events per batch from the parser thread.
const BATCH: usize = 512;

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

/// An event, and a scalar's value as the node holds it (converted on the
/// thread that parsed it: freeing libyaml's string there is cheap, on
/// another thread it contends for the allocator).
type EventResult = Result<(Event, CompactString), Failure>;

/// Why the events stop before the stream end.
enum Failure {
    /// libyaml's error.
    Libyaml(libyaml_safer::Error),
    /// yaml.v3's own limit, which libyaml-safer does not have.
    Go(ParseError),
}

/// yaml.v3's scanner's `max_flow_level` and `max_indents`: deeper nesting
/// is refused ("exceeded max depth of 10000").
const MAX_DEPTH: usize = 10000;

/// Events from libyaml-safer's parser, and the tokens rebuilt from them
/// that are final (no simple key before them still waits for its `:`).
struct Batch {
    events: Vec<EventResult>,
    toks: Vec<VTok>,
    recon_ok: bool,
}

/// libyaml-safer's parser and the token rebuild ([`Recon`]), batch by
/// batch: on the calling thread, or ahead of it on another.
struct Producer<'a> {
    parser: Parser<std::io::BufReader<&'a [u8]>>,
    recon: Recon<'a>,
    recon_ok: bool,
    done: bool,
    /// [`prepare`] added a final break.
    eof_patched: bool,
    /// The open collections: whether each is a flow collection, a block
    /// collection (an indentation level for yaml.v3), or neither (an
    /// indentless sequence); and how many of the first two are open.
    open: Vec<Nest>,
    flows: usize,
    blocks: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nest {
    Flow,
    Block,
    Indentless,
}

impl<'a> Producer<'a> {
    fn new(text: &'a str, eof: Option<Mk>) -> Producer<'a> {
        let mut parser = Parser::new();
        // libyaml-safer decodes all the input it is given into its
        // character buffer: in small pieces that buffer stays in cache.
        parser.set_input(std::io::BufReader::with_capacity(
            16 * 1024,
            text.as_bytes(),
        ));
        Producer {
            parser,
            recon: Recon::new(text.as_bytes(), eof),
            recon_ok: true,
            done: false,
            eof_patched: eof.is_some(),
            open: Vec::new(),
            flows: 0,
            blocks: 0,
        }
    }

    /// Counts nesting as yaml.v3's scanner does, refusing what it refuses
    /// (`yaml_parser_increase_flow_level`, `yaml_parser_roll_indent`: the
    /// error's line is that of the opening token).
    fn nest(&mut self, e: &Event) -> Option<ParseError> {
        let nest = match &e.data {
            EventData::SequenceStart { style, .. } => {
                if *style == SequenceStyle::Flow {
                    Nest::Flow
                } else if at(self.recon.src, e.end_mark.index as usize) == b'-' {
                    Nest::Block
                } else {
                    Nest::Indentless
                }
            }
            EventData::MappingStart { style, .. } => {
                if *style == MappingStyle::Flow {
                    Nest::Flow
                } else {
                    Nest::Block
                }
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                match self.open.pop() {
                    Some(Nest::Flow) => self.flows -= 1,
                    Some(Nest::Block) => self.blocks -= 1,
                    _ => {}
                }
                return None;
            }
            _ => return None,
        };
        self.open.push(nest);
        match nest {
            Nest::Flow => self.flows += 1,
            Nest::Block => self.blocks += 1,
            Nest::Indentless => {}
        }
        (self.flows > MAX_DEPTH || self.blocks > MAX_DEPTH).then(|| {
            let line = e.end_mark.line as usize;
            ParseError {
                line: if line != 0 { line + 1 } else { 0 },
                message: format!("exceeded max depth of {MAX_DEPTH}"),
            }
        })
    }

    fn batch(&mut self) -> Option<Batch> {
        if self.done {
            return None;
        }
        let mut events = Vec::with_capacity(BATCH);
        while events.len() < BATCH {
            let ev = match self.parser.parse() {
                Ok(mut e) => match self.nest(&e) {
                    Some(too_deep) => Err(Failure::Go(too_deep)),
                    None => {
                        if self.recon_ok && self.recon.event(&e).is_err() {
                            self.recon_ok = false;
                        }
                        if self.eof_patched {
                            self.eof_block_scalar(&mut e);
                        }
                        let value = match &mut e.data {
                            EventData::Scalar { value, .. } => {
                                CompactString::from(std::mem::take(value).as_str())
                            }
                            _ => CompactString::default(),
                        };
                        Ok((e, value))
                    }
                },
                Err(e) => Err(Failure::Libyaml(e)),
            };
            self.done = !matches!(&ev, Ok((e, _)) if !matches!(e.data, EventData::StreamEnd));
            events.push(ev);
            if self.done {
                break;
            }
        }
        Some(Batch {
            events,
            toks: self.recon.take_stable(),
            recon_ok: self.recon_ok,
        })
    }
}

impl Producer<'_> {
    /// A block scalar that ran into the break [`prepare`] added got it as
    /// one more `\n` than yaml.v3 gives (its `read_line` at the end reads
    /// nothing): in the last line break a clipped or kept scalar adds if
    /// the last line is content, and in its trailing breaks, which only a
    /// kept one adds, if the last line is blanks within its indentation.
    fn eof_block_scalar(&self, e: &mut Event) {
        let src = self.recon.src;
        let EventData::Scalar { value, style, .. } = &mut e.data else {
            return;
        };
        if !matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            || e.end_mark.index as usize != src.len()
            || !value.ends_with('\n')
        {
            return;
        }
        // The header (`|`, `>`, chomping and indentation indicators).
        let Some(start) = self
            .recon
            .toks
            .last()
            .filter(|t| t.t == T::Scalar)
            .map(|t| t.start.index as usize)
        else {
            return;
        };
        let mut keep = false;
        let mut strip = false;
        let mut increment = 0i64;
        for &c in src.iter().skip(start + 1).take(2) {
            match c {
                b'+' => keep = true,
                b'-' => strip = true,
                b'1'..=b'9' => increment = i64::from(c - b'0'),
                _ => break,
            }
        }
        if strip {
            return;
        }
        // The last line, and the indentation as
        // `yaml_parser_scan_block_scalar_breaks` settles it.
        let text = &src[..src.len() - 1];
        let last_start = text.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
        let last = &text[last_start..];
        let parent = self.recon.indent();
        let indent = if increment > 0 {
            if parent >= 0 {
                parent + increment
            } else {
                increment
            }
        } else {
            let mut i = src[start..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(text.len(), |p| start + p + 1);
            let mut max_indent = 0;
            while i < text.len() {
                let spaces = text[i..].iter().take_while(|&&c| c == b' ').count();
                max_indent = max_indent.max(spaces as i64);
                match text.get(i + spaces) {
                    Some(b'\n') => i += spaces + 1,
                    Some(b'\r') if text.get(i + spaces + 1) == Some(&b'\n') => i += spaces + 2,
                    _ => break,
                }
            }
            max_indent.max(parent + 1).max(1)
        };
        let content = last.iter().any(|&c| c != b' ') || last.len() as i64 > indent;
        if keep || content {
            value.pop();
        }
    }
}

/// Where the batches come from.
enum Feed<'a> {
    Inline(Box<Producer<'a>>),
    Thread(std::sync::mpsc::Receiver<Batch>),
    Done,
}

impl Feed<'_> {
    fn next(&mut self) -> Option<Batch> {
        match self {
            Feed::Inline(p) => p.batch(),
            Feed::Thread(rx) => rx.recv().ok(),
            Feed::Done => None,
        }
    }
}

/// Tokens that ran into the break [`prepare`] added end at the end of
/// `src` instead.
fn clamp_to(src: &[u8], toks: &mut [VTok]) {
    if toks.last().is_some_and(|t| t.end.index <= src.len() as i64) {
        return;
    }
    let eof = end_mark(src);
    for t in toks {
        if t.end.index > eof.index {
            t.end = eof;
        }
        if t.start.index > eof.index {
            t.start = eof;
        }
    }
}

/// Whether yaml.v3 meets a scanner error before libyaml's parser fails
/// producing event `n`: replays yaml.v3's lookahead over libyaml's tokens
/// (its scanner is yaml.v3's) and gives how many events yaml.v3's parser
/// produces first, the error, and where it is if it is a tab that cannot
/// start a token (see [`comment_tabs`]).
fn scanner_error_first(
    text: &str,
    src: &[u8],
    eof: Option<Mk>,
    n: usize,
) -> Option<(usize, ParseError, Option<usize>)> {
    let (mut toks, error) = scanner_tokens(text);
    let error = error?;
    // The scanner gives no token it still holds when it fails (a possible
    // simple key waits for its `:`): the text up to the failing token, ended
    // there, gives them all.
    let problem = error.problem_mark().map_or(0, |m| m.index as usize);
    let cut = error
        .context_mark()
        .map_or(problem, |m| problem.min(m.index as usize));
    if let Some(head) = text.get(..cut) {
        let (mut before, none) = scanner_tokens(&format!("{head}\n"));
        if none.is_none() {
            // Less what the end of the text added.
            before.retain(|t| t.start.index < cut as i64 && t.t != T::StreamEnd);
            if before.len() > toks.len() {
                toks = before;
            }
        }
    }
    let tab = tab_error(&error, text.as_bytes());
    let error = ParseError::from_libyaml(&error, eof);
    clamp_to(src, &mut toks);
    let mut go = GoParser::new(Sim::new(src, Source::fixed(toks)));
    let mut produced = 0;
    while produced <= n && go.next_event().is_some() {
        produced += 1;
    }
    go.sim.hit_end.then_some((produced, error, tab))
}

/// Where libyaml's error is a tab that cannot start a token.
fn tab_error(e: &libyaml_safer::Error, text: &[u8]) -> Option<usize> {
    let at = e.problem_mark()?.index as usize;
    (e.problem() == "found character that cannot start any token" && text.get(at) == Some(&b'\t'))
        .then_some(at)
}

/// libyaml-safer's scanner tokens up to its error, marked as [`Recon`]
/// marks them (simple keys' KEY and mapping starts as inserted by their
/// VALUE).
fn scanner_tokens(text: &str) -> (Vec<VTok>, Option<libyaml_safer::Error>) {
    let mut input = text.as_bytes();
    let mut scanner = libyaml_safer::Scanner::new();
    scanner.set_input_string(&mut input);
    let mut toks: Vec<VTok> = Vec::new();
    // Per flow level, the simple key's KEY waiting for its VALUE.
    let mut pending = vec![NO];
    for tok in scanner {
        let tok = match tok {
            Ok(t) => t,
            Err(e) => return (toks, Some(e)),
        };
        let mut v = VTok::new(
            token_type(&tok.data),
            Mk::of(tok.start_mark),
            Mk::of(tok.end_mark),
        );
        let i = toks.len();
        match &tok.data {
            libyaml_safer::TokenData::Scalar { style, .. } => {
                v.sc = match style {
                    ScalarStyle::Plain => Sc::Plain,
                    ScalarStyle::Literal | ScalarStyle::Folded => Sc::Block,
                    _ => Sc::Quoted,
                };
            }
            libyaml_safer::TokenData::Key if v.start == v.end => {
                v.inserted = true;
                if let Some(p) = pending.last_mut() {
                    *p = i as u32;
                }
                if let Some(prev) = toks.last_mut() {
                    if prev.t == T::Bms && prev.start == v.start {
                        prev.inserted = true;
                    }
                }
            }
            libyaml_safer::TokenData::FlowSequenceStart
            | libyaml_safer::TokenData::FlowMappingStart => pending.push(NO),
            libyaml_safer::TokenData::FlowSequenceEnd
            | libyaml_safer::TokenData::FlowMappingEnd
                if pending.len() > 1 =>
            {
                pending.pop();
            }
            libyaml_safer::TokenData::Value => {
                if let Some(p) = pending.last_mut() {
                    v.link = std::mem::replace(p, NO);
                }
            }
            _ => {}
        }
        toks.push(v);
    }
    (toks, None)
}

/// yaml.v3's token type for a libyaml-safer token.
fn token_type(data: &libyaml_safer::TokenData) -> T {
    use libyaml_safer::TokenData as D;
    match data {
        D::StreamStart { .. } => T::StreamStart,
        D::StreamEnd => T::StreamEnd,
        D::VersionDirective { .. } | D::TagDirective { .. } => T::Directive,
        D::DocumentStart => T::DocStart,
        D::DocumentEnd => T::DocEnd,
        D::BlockSequenceStart => T::Bss,
        D::BlockMappingStart => T::Bms,
        D::BlockEnd => T::Be,
        D::FlowSequenceStart => T::Fss,
        D::FlowSequenceEnd => T::Fse,
        D::FlowMappingStart => T::Fms,
        D::FlowMappingEnd => T::Fme,
        D::BlockEntry => T::BlockEntry,
        D::FlowEntry => T::FlowEntry,
        D::Key => T::Key,
        D::Value => T::Value,
        D::Alias { .. } => T::Alias,
        D::Anchor { .. } => T::Anchor,
        D::Tag { .. } => T::Tag,
        D::Scalar { .. } => T::Scalar,
    }
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

/// The mark at the end of `src`.
fn end_mark(src: &[u8]) -> Mk {
    let mut m = Mk::default();
    let mut i = 0;
    while i < src.len() {
        if is_break(src, i) {
            i += if src[i] == b'\r' && at(src, i + 1) == b'\n' {
                2
            } else {
                width(src[i])
            };
            m.line += 1;
            m.column = 0;
        } else {
            i += width(src[i]);
            m.column += 1;
        }
    }
    m.index = src.len() as i64;
    m
}

/// The text does not end in a line break (and is not empty): a block
/// scalar's last line, even of blanks, could run into the end.
fn needs_final_break(text: &str) -> bool {
    text.as_bytes()
        .last()
        .is_some_and(|&c| c != b'\n' && c != b'\r')
}

/// The `%YAML` directive's line as yaml.v3 reports a parser error there
/// (0-based: parser errors don't add 1).
fn directive_line(text: &[u8], doc_start: usize) -> usize {
    let head = text.get(doc_start..).unwrap_or_default();
    let before = text[..doc_start.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    head.split(|&b| b == b'\n')
        .position(|l| l.starts_with(b"%YAML"))
        .map_or(0, |i| before + i)
}

/// libyaml-safer's events up to the stream end or the first error.
#[cfg(test)]
fn libyaml_events(text: &str) -> (Vec<Event>, Option<libyaml_safer::Error>) {
    let mut input = text.as_bytes();
    let mut parser = Parser::new();
    parser.set_input_string(&mut input);
    let mut events = Vec::with_capacity(text.len() / 8 + 4);
    loop {
        match parser.parse() {
            Ok(ev) => {
                let end = matches!(ev.data, EventData::StreamEnd);
                events.push(ev);
                if end {
                    return (events, None);
                }
            }
            Err(e) => return (events, Some(e)),
        }
    }
}

// ---------------------------------------------------------------------------
// Marks and tokens

/// A position: byte index, 0-based line, 0-based column (in characters),
/// signed because yaml.v3's comment arithmetic steps below 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mk {
    index: i64,
    line: i64,
    column: i64,
}

impl Mk {
    fn of(m: libyaml_safer::Mark) -> Mk {
        Mk {
            index: m.index as i64,
            line: m.line as i64,
            column: m.column as i64,
        }
    }
}

/// yaml.v3's token types (directives folded into one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T {
    StreamStart,
    StreamEnd,
    Directive,
    DocStart,
    DocEnd,
    Bss,
    Bms,
    Be,
    Fss,
    Fse,
    Fms,
    Fme,
    BlockEntry,
    FlowEntry,
    Key,
    Value,
    Alias,
    Anchor,
    Tag,
    Scalar,
}

/// How a scalar token ends, which decides where yaml.v3's scanner stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sc {
    None,
    Plain,
    Quoted,
    Block,
}

const NO: u32 = u32::MAX;

/// One token of the stream yaml.v3's scanner produces, in queue order.
#[derive(Clone, Copy, Debug)]
struct VTok {
    t: T,
    sc: Sc,
    /// Inserted into the queue by a later VALUE fetch (a simple key's KEY,
    /// and the BLOCK-MAPPING-START before it) rather than appended.
    inserted: bool,
    /// A possible simple key's KEY that libyaml never produced.
    dead: bool,
    produced: bool,
    /// For a VALUE: the simple key's KEY it inserts (or [`NO`]).
    link: u32,
    start: Mk,
    end: Mk,
}

impl VTok {
    fn new(t: T, start: Mk, end: Mk) -> VTok {
        VTok {
            t,
            sc: Sc::None,
            inserted: false,
            dead: false,
            produced: false,
            link: NO,
            start,
            end,
        }
    }
}

/// The rebuilt token stream did not fit the events (a bug, or a case where
/// libyaml-safer and yaml.v3 disagree); comments are then left off.
#[derive(Debug)]
struct Desync;

// Byte classes, as yaml.v3's `is_blank`, `is_break`, `is_breakz`
// (yamlprivateh.go); past the end reads as NUL, like its padded buffer.
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn is_blank(s: &[u8], i: usize) -> bool {
    matches!(at(s, i), b' ' | b'\t')
}

fn is_break(s: &[u8], i: usize) -> bool {
    match at(s, i) {
        b'\r' | b'\n' => true,
        0xC2 => at(s, i + 1) == 0x85,
        0xE2 => at(s, i + 1) == 0x80 && matches!(at(s, i + 2), 0xA8 | 0xA9),
        _ => false,
    }
}

fn is_z(s: &[u8], i: usize) -> bool {
    i >= s.len()
}

fn is_breakz(s: &[u8], i: usize) -> bool {
    is_break(s, i) || is_z(s, i)
}

fn is_blankz(s: &[u8], i: usize) -> bool {
    is_blank(s, i) || is_breakz(s, i)
}

/// The length of the run of blanks at `i`.
fn blanks(s: &[u8], i: usize) -> usize {
    s.get(i..).map_or(0, |r| {
        r.iter().take_while(|&&b| b == b' ' || b == b'\t').count()
    })
}

fn is_bom(s: &[u8], i: usize) -> bool {
    s.get(i..i + 3) == Some(b"\xEF\xBB\xBF".as_slice())
}

/// The byte width of the UTF-8 character starting with `b`.
fn width(b: u8) -> usize {
    match b {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

// ---------------------------------------------------------------------------
// Rebuilding the token stream from the events

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FrameKind {
    Doc,
    BlockMap,
    FlowMap,
    /// The single-pair mapping of `[a: b]`.
    FlowPair,
    BlockSeq,
    Indentless,
    FlowSeq,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    kind: FrameKind,
    /// A mapping's next node is a value.
    value_next: bool,
    /// The current key came after `?`.
    explicit: bool,
    /// The current key's simple-key KEY placeholder.
    key_ph: u32,
    /// A block collection's column (yaml.v3's indentation level in it).
    col: i64,
}

/// Rebuilds yaml.v3's token stream from libyaml's events: the events give
/// every scalar, alias and collection with its marks; the tokens between
/// them (indicators and properties) are read from the source text, and the
/// zero-width ones (BLOCK-*-START, BLOCK-END, simple keys' KEY) placed where
/// libyaml's scanner puts them.
///
/// It runs as the events arrive and keeps a window of tokens: token `i` is
/// `toks[i - base]`.
struct Recon<'a> {
    src: &'a [u8],
    pos: usize,
    line: i64,
    col: i64,
    flow: usize,
    toks: Vec<VTok>,
    base: usize,
    frames: Vec<Frame>,
    /// Marks past this (the break [`prepare`] added) are at it.
    clamp: Option<Mk>,
}

impl<'a> Recon<'a> {
    fn new(src: &'a [u8], clamp: Option<Mk>) -> Recon<'a> {
        Recon {
            src,
            pos: 0,
            line: 0,
            col: 0,
            flow: 0,
            toks: Vec::with_capacity(2048),
            base: 0,
            frames: Vec::new(),
            clamp,
        }
    }

    /// All tokens for `events` at once.
    #[cfg(test)]
    fn run(src: &'a [u8], events: &[Event]) -> Result<Vec<VTok>, Desync> {
        let mut r = Recon::new(src, None);
        for ev in events {
            r.event(ev)?;
        }
        Ok(r.toks)
    }

    /// Tokens rebuilt so far (dropped ones included).
    fn len(&self) -> usize {
        self.base + self.toks.len()
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.toks.get_mut(i.checked_sub(self.base)?)
    }

    /// Hands over the tokens that are final: those before the first
    /// simple key still waiting for its `:` (all once the stream ended).
    fn take_stable(&mut self) -> Vec<VTok> {
        let pending = self
            .frames
            .iter()
            .filter(|f| f.key_ph != NO)
            .map(|f| f.key_ph as usize)
            .min()
            .unwrap_or(usize::MAX);
        let n = pending.saturating_sub(self.base).min(self.toks.len());
        self.base += n;
        self.toks.drain(..n).collect()
    }

    fn mk(&self) -> Mk {
        Mk {
            index: self.pos as i64,
            line: self.line,
            column: self.col,
        }
    }

    fn jump(&mut self, m: Mk) -> Result<(), Desync> {
        if m.index < self.pos as i64 {
            return Err(Desync);
        }
        self.pos = m.index as usize;
        self.line = m.line;
        self.col = m.column;
        Ok(())
    }

    fn advance(&mut self) {
        self.pos += width(at(self.src, self.pos));
        self.col += 1;
    }

    fn advance_break(&mut self) {
        if at(self.src, self.pos) == b'\r' && at(self.src, self.pos + 1) == b'\n' {
            self.pos += 2;
        } else {
            self.pos += width(at(self.src, self.pos));
        }
        self.line += 1;
        self.col = 0;
    }

    fn push(&mut self, t: T, start: Mk, end: Mk) -> usize {
        self.push_tok(VTok::new(t, start, end))
    }

    fn push_tok(&mut self, mut t: VTok) -> usize {
        if let Some(eof) = self.clamp {
            if t.start.index > eof.index {
                t.start = eof;
            }
            if t.end.index > eof.index {
                t.end = eof;
            }
        }
        self.toks.push(t);
        self.len() - 1
    }

    /// A simple key's KEY, waiting for its `:` (libyaml makes it only if
    /// one follows).
    fn push_placeholder(&mut self, at_mark: Mk) -> usize {
        let mut t = VTok::new(T::Key, at_mark, at_mark);
        t.inserted = true;
        t.dead = true;
        self.push_tok(t)
    }

    /// The current key got no `:`: libyaml never made its KEY.
    fn key_dead(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            f.key_ph = NO;
        }
    }

    /// libyaml's `yaml_parser_scan_to_next_token`: blanks, breaks, comments.
    fn skip_gap(&mut self) {
        loop {
            if self.col == 0 && is_bom(self.src, self.pos) {
                self.pos += 3;
                self.col += 1;
            }
            match at(self.src, self.pos) {
                b' ' | b'\t' => {
                    let n = blanks(self.src, self.pos);
                    self.pos += n;
                    self.col += n as i64;
                }
                b'#' => {
                    // To the end of the line, counting characters.
                    let rest = &self.src[self.pos..];
                    let n = rest
                        .iter()
                        .position(|&b| b == b'\n' || b == b'\r')
                        .unwrap_or(rest.len());
                    let mut end = self.pos + n;
                    // NEL, LS and PS break lines too.
                    if let Some(i) = (self.pos..end).find(|&i| is_break(self.src, i)) {
                        end = i;
                    }
                    self.col += self.src[self.pos..end]
                        .iter()
                        .filter(|&&b| b & 0xC0 != 0x80)
                        .count() as i64;
                    self.pos = end;
                }
                _ if is_break(self.src, self.pos) => self.advance_break(),
                _ => return,
            }
        }
    }

    /// Reads the indicator tokens that start before byte `limit`.
    fn lex_until(&mut self, limit: i64) -> Result<(), Desync> {
        loop {
            if self.pos as i64 >= limit {
                return Ok(());
            }
            self.skip_gap();
            if self.pos as i64 >= limit || is_z(self.src, self.pos) {
                return Ok(());
            }
            self.lex_indicator()?;
        }
    }

    fn lex_indicator(&mut self) -> Result<(), Desync> {
        let s = self.src;
        let p = self.pos;
        let start = self.mk();
        let c = at(s, p);
        let one = |r: &mut Recon<'_>, t: T| {
            r.advance();
            let end = r.mk();
            r.push(t, start, end)
        };
        if self.col == 0
            && (s.get(p..p + 3) == Some(b"---".as_slice())
                || s.get(p..p + 3) == Some(b"...".as_slice()))
            && is_blankz(s, p + 3)
        {
            let t = if c == b'-' { T::DocStart } else { T::DocEnd };
            self.advance();
            self.advance();
            self.advance();
            let end = self.mk();
            self.push(t, start, end);
            return Ok(());
        }
        if self.col == 0 && c == b'%' {
            // The directive's line; its comment is discarded by yaml.v3
            // (`yaml_parser_scan_directive`).
            while !is_breakz(s, self.pos) {
                self.advance();
            }
            let end = self.mk();
            self.push(T::Directive, start, end);
            return Ok(());
        }
        match c {
            b']' => {
                one(self, T::Fse);
            }
            b'}' => {
                one(self, T::Fme);
            }
            b',' => {
                one(self, T::FlowEntry);
            }
            b'-' if is_blankz(s, p + 1) => {
                one(self, T::BlockEntry);
            }
            b'?' if self.flow > 0 || is_blankz(s, p + 1) => {
                one(self, T::Key);
                if let Some(f) = self.frames.last_mut() {
                    if matches!(
                        f.kind,
                        FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
                    ) {
                        f.explicit = true;
                    }
                }
            }
            b':' if self.flow > 0 || is_blankz(s, p + 1) => {
                let v = one(self, T::Value);
                // A VALUE after a simple key: libyaml's `fetch_value` inserts
                // the KEY (and the mapping start before a first key).
                let ph = self
                    .frames
                    .last_mut()
                    .map_or(NO, |f| std::mem::replace(&mut f.key_ph, NO));
                if let Some(t) = self.get_mut(ph as usize) {
                    t.dead = false;
                    if let Some(v) = self.get_mut(v) {
                        v.link = ph;
                    }
                }
            }
            _ => return Err(Desync),
        }
        Ok(())
    }

    /// Anchor and tag tokens in front of a node.
    fn lex_props(&mut self, anchor: Option<&str>, tag: bool) -> Result<(), Desync> {
        let mut anchor = anchor;
        let mut tag = tag;
        while anchor.is_some() || tag {
            self.skip_gap();
            let start = self.mk();
            match at(self.src, self.pos) {
                b'&' if anchor.is_some() => {
                    let n = anchor.map_or(0, str::len);
                    self.pos += 1 + n;
                    self.col += 1 + n as i64;
                    anchor = None;
                    let end = self.mk();
                    self.push(T::Anchor, start, end);
                }
                b'!' if tag => {
                    if at(self.src, self.pos + 1) == b'<' {
                        while !is_breakz(self.src, self.pos) && at(self.src, self.pos) != b'>' {
                            self.advance();
                        }
                        self.advance();
                    } else {
                        while !(is_blankz(self.src, self.pos)
                            || self.flow > 0 && at(self.src, self.pos) == b',')
                        {
                            self.advance();
                        }
                    }
                    tag = false;
                    let end = self.mk();
                    self.push(T::Tag, start, end);
                }
                _ => return Err(Desync),
            }
        }
        Ok(())
    }

    /// A node starts: its key placeholder if it is a simple key.
    fn node_start(&mut self, at_mark: Mk, has_tokens: bool) {
        let Some(f) = self.frames.last() else {
            return;
        };
        if !matches!(
            f.kind,
            FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
        ) {
            return;
        }
        if f.value_next {
            // A value: its key's wait for `:` is over.
            self.key_dead();
            return;
        }
        if f.kind == FrameKind::FlowPair || f.explicit || !has_tokens {
            return;
        }
        let idx = self.push_placeholder(at_mark);
        if let Some(f) = self.frames.last_mut() {
            f.key_ph = idx as u32;
        }
    }

    /// A node ended: its parent mapping expects the other half.
    fn node_done(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            if matches!(
                f.kind,
                FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
            ) {
                if f.value_next {
                    f.value_next = false;
                    f.explicit = false;
                    f.key_ph = NO;
                } else {
                    f.value_next = true;
                }
            }
        }
    }

    fn frame(&mut self, kind: FrameKind) {
        self.frames.push(Frame {
            kind,
            value_next: false,
            explicit: false,
            key_ph: NO,
            col: self.col,
        });
    }

    /// yaml.v3's indentation level here: the innermost block collection's
    /// column (`parser.indent`).
    fn indent(&self) -> i64 {
        self.frames
            .iter()
            .rev()
            .find(|f| matches!(f.kind, FrameKind::BlockMap | FrameKind::BlockSeq))
            .map_or(-1, |f| f.col)
    }

    fn event(&mut self, ev: &Event) -> Result<(), Desync> {
        let start = Mk::of(ev.start_mark);
        let end = Mk::of(ev.end_mark);
        match &ev.data {
            EventData::StreamStart { .. } => {
                self.push(T::StreamStart, start, start);
            }
            EventData::StreamEnd => {
                self.lex_until(self.src.len() as i64)?;
                self.push(T::StreamEnd, start, start);
            }
            EventData::DocumentStart { implicit, .. } => {
                if !implicit {
                    self.lex_until(end.index)?;
                }
                self.frame(FrameKind::Doc);
            }
            EventData::DocumentEnd { implicit } => {
                if !implicit {
                    self.lex_until(end.index)?;
                }
                self.frames.pop();
            }
            EventData::Alias { .. } => {
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.push(T::Alias, start, end);
                self.jump(end)?;
                self.node_done();
            }
            EventData::Scalar {
                anchor,
                tag,
                value,
                style,
                ..
            } => {
                let has_token = !(*style == ScalarStyle::Plain && value.is_empty());
                let has_props = anchor.is_some() || tag.is_some();
                if has_props || has_token {
                    self.lex_until(start.index)?;
                } else {
                    // An empty scalar: the indicators before its mark.
                    self.lex_until(start.index)?;
                }
                self.node_start(start, has_props || has_token);
                if has_props || has_token {
                    self.jump(start)?;
                }
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if has_token {
                    if has_props {
                        self.skip_gap();
                    }
                    let s = self.mk();
                    let mut t = VTok::new(T::Scalar, s, end);
                    t.sc = match style {
                        ScalarStyle::Plain => Sc::Plain,
                        ScalarStyle::Literal | ScalarStyle::Folded => Sc::Block,
                        _ => Sc::Quoted,
                    };
                    self.push_tok(t);
                    self.jump(end)?;
                }
                self.node_done();
            }
            EventData::SequenceStart {
                anchor, tag, style, ..
            } => {
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if *style == SequenceStyle::Flow {
                    self.skip_gap();
                    if at(self.src, self.pos) != b'[' {
                        return Err(Desync);
                    }
                    let s = self.mk();
                    self.advance();
                    let e = self.mk();
                    self.push(T::Fss, s, e);
                    self.flow += 1;
                    self.frame(FrameKind::FlowSeq);
                } else if at(self.src, end.index as usize) == b'-' {
                    self.jump(end)?;
                    self.push(T::Bss, end, end);
                    self.frame(FrameKind::BlockSeq);
                } else {
                    self.frame(FrameKind::Indentless);
                }
            }
            EventData::MappingStart {
                anchor, tag, style, ..
            } => {
                let parent_flow_seq = self
                    .frames
                    .last()
                    .is_some_and(|f| f.kind == FrameKind::FlowSeq);
                if *style == MappingStyle::Flow
                    && parent_flow_seq
                    && (end == start || at(self.src, start.index as usize) == b'?')
                {
                    // `yaml_parser_parse_flow_sequence_entry` on a KEY: a
                    // single-pair mapping.
                    self.lex_until(start.index)?;
                    self.frame(FrameKind::FlowPair);
                    if end == start {
                        let idx = self.push_placeholder(start);
                        if let Some(f) = self.frames.last_mut() {
                            f.key_ph = idx as u32;
                        }
                    } else {
                        self.lex_until(start.index + 1)?;
                        if let Some(f) = self.frames.last_mut() {
                            f.explicit = true;
                        }
                    }
                    return Ok(());
                }
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if *style == MappingStyle::Flow {
                    self.skip_gap();
                    if at(self.src, self.pos) != b'{' {
                        return Err(Desync);
                    }
                    let s = self.mk();
                    self.advance();
                    let e = self.mk();
                    self.push(T::Fms, s, e);
                    self.flow += 1;
                    self.frame(FrameKind::FlowMap);
                } else {
                    self.jump(end)?;
                    // Known now, before its first key's event: the mapping
                    // start comes with a simple key's KEY (inserted by the
                    // VALUE fetch) unless the key is explicit (`? `).
                    let explicit =
                        at(self.src, self.pos) == b'?' && is_blankz(self.src, self.pos + 1);
                    let mut t = VTok::new(T::Bms, end, end);
                    t.inserted = !explicit;
                    self.push_tok(t);
                    self.frame(FrameKind::BlockMap);
                }
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                self.key_dead();
                let f = self.frames.pop().ok_or(Desync)?;
                match f.kind {
                    FrameKind::BlockMap | FrameKind::BlockSeq => {
                        self.push(T::Be, start, start);
                    }
                    FrameKind::FlowSeq | FrameKind::FlowMap => {
                        self.lex_until(start.index + 1)?;
                        self.flow = self.flow.saturating_sub(1);
                    }
                    FrameKind::Indentless | FrameKind::FlowPair => {}
                    FrameKind::Doc => return Err(Desync),
                }
                self.node_done();
            }
        }
        Ok(())
    }
}

/// The replay's tokens: token `i` is `toks[i - base]` (those well behind
/// the parser are dropped).
#[derive(Default)]
struct Window {
    toks: Vec<VTok>,
    base: usize,
}

impl Window {
    fn len(&self) -> usize {
        self.base + self.toks.len()
    }

    fn get(&self, i: usize) -> Option<&VTok> {
        self.toks.get(i.checked_sub(self.base)?)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.toks.get_mut(i.checked_sub(self.base)?)
    }

    fn drop_before(&mut self, i: usize) {
        let n = i.saturating_sub(self.base).min(self.toks.len());
        self.toks.drain(..n);
        self.base += n;
    }
}

/// What the replay and the composer read: batches from the [`Feed`], their
/// events waiting in `events` for the [`Composer`], their tokens in the
/// window. (On the error path, a fixed token list instead.)
struct Source<'a> {
    feed: Feed<'a>,
    text: &'a [u8],
    eof: Option<Mk>,
    window: Window,
    recon_ok: bool,
    events: VecDeque<(Event, CompactString)>,
    /// Events received so far.
    pulled: usize,
    error: Option<ParseError>,
    /// Where libyaml's error is a tab that cannot start a token.
    tab_at: Option<usize>,
    /// The error is yaml.v3's own, not libyaml's.
    own_error: bool,
}

impl<'a> Source<'a> {
    fn new(feed: Feed<'a>, text: &'a str, eof: Option<Mk>) -> Source<'a> {
        Source {
            feed,
            text: text.as_bytes(),
            eof,
            window: Window::default(),
            recon_ok: true,
            events: VecDeque::with_capacity(2 * BATCH),
            pulled: 0,
            error: None,
            tab_at: None,
            own_error: false,
        }
    }

    fn fixed(toks: Vec<VTok>) -> Source<'static> {
        Source {
            feed: Feed::Done,
            text: &[],
            eof: None,
            window: Window { toks, base: 0 },
            recon_ok: true,
            events: VecDeque::new(),
            pulled: 0,
            error: None,
            tab_at: None,
            own_error: false,
        }
    }

    /// Takes the next batch; false when there is none.
    fn pull(&mut self) -> bool {
        let Some(batch) = self.feed.next() else {
            return false;
        };
        self.recon_ok &= batch.recon_ok;
        self.window.toks.extend(batch.toks);
        for ev in batch.events {
            let (mut ev, value) = match ev {
                Ok(ev) => ev,
                Err(Failure::Libyaml(e)) => {
                    self.tab_at = tab_error(&e, self.text);
                    self.error = Some(ParseError::from_libyaml(&e, self.eof));
                    self.feed = Feed::Done;
                    break;
                }
                Err(Failure::Go(e)) => {
                    self.error = Some(e);
                    self.own_error = true;
                    self.feed = Feed::Done;
                    break;
                }
            };
            match &mut ev.data {
                EventData::StreamEnd => self.feed = Feed::Done,
                EventData::DocumentStart {
                    version_directive: Some(v),
                    ..
                } if v.minor != 1 => {
                    // yaml.v3 accepts only `%YAML 1.1`
                    // (`yaml_parser_process_directives`); libyaml also 1.2.
                    self.error = Some(ParseError {
                        line: directive_line(self.text, ev.start_mark.index as usize),
                        message: "found incompatible YAML document".to_owned(),
                    });
                    self.feed = Feed::Done;
                    break;
                }
                _ => {}
            }
            self.events.push_back((ev, value));
            self.pulled += 1;
        }
        true
    }
}

// ---------------------------------------------------------------------------
// yaml.v3's scanner, replayed over the rebuilt tokens

/// Hashes a token number (the keys of `simple_keys_by_tok`) by one
/// multiplication.
#[derive(Default)]
struct TokHasher(u64);

impl std::hash::Hasher for TokHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// yaml.v3's `yaml_comment_t`.
#[derive(Clone, Debug, Default)]
struct Comment {
    scan_mark: Mk,
    token_mark: Mk,
    start_mark: Mk,
    end_mark: Mk,
    head: String,
    line: String,
    foot: String,
}

/// yaml.v3's `yaml_simple_key_t`.
#[derive(Clone, Copy, Debug, Default)]
struct SimpleKey {
    possible: bool,
    token_number: usize,
    mark: Mk,
}

/// yaml.v3's scanner state (scannerc.go), with token bodies taken from the
/// rebuilt tokens instead of scanned: what remains is what decides comment
/// placement — the cursor between tokens, `newlines`, the indentation
/// stack, flow level, simple keys (they decide how far the scanner runs
/// ahead of the parser) and the comments queue.
struct Sim<'a> {
    src: &'a [u8],
    source: Source<'a>,
    pos: usize,
    mark: Mk,
    newlines: usize,
    indent: i64,
    indents: Vec<i64>,
    flow_level: usize,
    simple_key_allowed: bool,
    simple_keys: Vec<SimpleKey>,
    /// `simple_keys_by_tok`: token number to flow level; stale entries are
    /// kept as yaml.v3 keeps them (but those behind the parser, never
    /// looked up again, are dropped now and then).
    by_tok: HashMap<usize, usize, BuildHasherDefault<TokHasher>>,
    stream_start_produced: bool,
    stream_end_produced: bool,
    /// Tokens in the queue so far (`tokens_parsed + len(tokens) - head`).
    produced: usize,
    /// `tokens_parsed`.
    consumed: usize,
    /// Next token a fetch appends.
    next_tok: usize,
    /// The queue's last token (`tokens[len(tokens)-1]`).
    last_prod: usize,
    comments: Vec<Comment>,
    comments_head: usize,
    desync: bool,
    /// A fetch found no token left before the stream end: where the tokens
    /// stop at a scanner error, yaml.v3's scanner fails here.
    hit_end: bool,
}

impl<'a> Sim<'a> {
    fn new(src: &'a [u8], source: Source<'a>) -> Sim<'a> {
        Sim {
            src,
            source,
            pos: 0,
            mark: Mk::default(),
            newlines: 0,
            indent: 0,
            indents: Vec::new(),
            flow_level: 0,
            simple_key_allowed: false,
            simple_keys: Vec::new(),
            by_tok: HashMap::default(),
            stream_start_produced: false,
            stream_end_produced: false,
            produced: 0,
            consumed: 0,
            next_tok: 0,
            last_prod: 0,
            comments: Vec::new(),
            comments_head: 0,
            desync: false,
            hit_end: false,
        }
    }

    fn at(&self, off: usize) -> u8 {
        at(self.src, self.pos + off)
    }

    /// `skip`.
    fn skip(&mut self) {
        if !is_blank(self.src, self.pos) {
            self.newlines = 0;
        }
        let w = width(self.at(0));
        self.pos += w;
        self.mark.index += w as i64;
        self.mark.column += 1;
    }

    /// `skip` over a run of blanks (which leave `newlines` alone).
    fn skip_blanks(&mut self) {
        let n = blanks(self.src, self.pos);
        self.pos += n;
        self.mark.index += n as i64;
        self.mark.column += n as i64;
    }

    /// `skip_line`.
    fn skip_line(&mut self) {
        if self.at(0) == b'\r' && self.at(1) == b'\n' {
            self.pos += 2;
            self.mark.index += 2;
            self.mark.column = 0;
            self.mark.line += 1;
            self.newlines += 1;
        } else if is_break(self.src, self.pos) {
            let w = width(self.at(0));
            self.pos += w;
            self.mark.index += w as i64;
            self.mark.column = 0;
            self.mark.line += 1;
            self.newlines += 1;
        }
    }

    /// `read`: one character into `text`.
    fn read(&mut self, text: &mut String) {
        let w = width(self.at(0));
        if let Some(s) = self.src.get(self.pos..self.pos + w) {
            text.push_str(&String::from_utf8_lossy(s));
        }
        self.skip();
    }

    fn jump(&mut self, m: Mk) {
        if m.index >= self.pos as i64 {
            self.pos = m.index as usize;
            self.mark = m;
        } else {
            self.desync = true;
        }
    }

    /// Token `i`, pulling events until it is rebuilt.
    fn tok(&mut self, i: usize) -> Option<VTok> {
        while i >= self.source.window.len() {
            if !self.source.pull() {
                return None;
            }
        }
        self.source.window.get(i).copied()
    }

    /// Token `i` to update (one already seen).
    fn tok_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.source.window.get_mut(i)
    }

    fn kind(&self, i: usize) -> Option<T> {
        self.source.window.get(i).map(|t| t.t)
    }

    /// The next token a fetch appends (inserted and dead ones are not
    /// appended).
    fn next_appended(&mut self) -> Option<usize> {
        loop {
            let t = self.tok(self.next_tok)?;
            if t.inserted || t.dead || t.produced {
                self.next_tok += 1;
            } else {
                return Some(self.next_tok);
            }
        }
    }

    fn produce(&mut self, i: usize) {
        if let Some(t) = self.tok_mut(i) {
            t.produced = true;
        }
        self.produced += 1;
        self.last_prod = self.last_prod.max(i);
    }

    /// The queue's token before `i` (`tokens[len(tokens)-2]` when `i` is
    /// the last).
    fn prev_produced(&self, i: usize) -> Option<usize> {
        let recon = &self.source.window;
        (recon.base..i)
            .rev()
            .find(|&j| recon.get(j).is_some_and(|t| t.produced))
    }

    /// Takes the next appended token, which must be of type `t`.
    fn take(&mut self, t: T) -> Option<usize> {
        match self.next_appended() {
            Some(i) if self.kind(i) == Some(t) => {
                self.produce(i);
                Some(i)
            }
            _ => {
                self.desync = true;
                None
            }
        }
    }

    /// `yaml_parser_fetch_more_tokens`: keeps the queue at least three
    /// tokens ahead of the parser, and further while the head is a simple
    /// key not yet resolved.
    fn fetch_more_tokens(&mut self) {
        loop {
            if self.produced >= self.consumed + 3 {
                match self.by_tok.get(&self.consumed).copied() {
                    None => break,
                    Some(l) => {
                        if !self.simple_key_is_valid(l) {
                            break;
                        }
                    }
                }
            }
            if !self.fetch_next_token() {
                break;
            }
        }
    }

    /// `yaml_simple_key_is_valid`.
    fn simple_key_is_valid(&mut self, level: usize) -> bool {
        let mark = self.mark;
        let Some(k) = self.simple_keys.get_mut(level) else {
            return false;
        };
        if !k.possible {
            return false;
        }
        if k.mark.line < mark.line || k.mark.index + 1024 < mark.index {
            k.possible = false;
            return false;
        }
        true
    }

    /// `yaml_parser_save_simple_key`.
    fn save_simple_key(&mut self) {
        if self.simple_key_allowed {
            let k = SimpleKey {
                possible: true,
                token_number: self.produced,
                mark: self.mark,
            };
            self.remove_simple_key();
            let level = self.simple_keys.len() - 1;
            self.simple_keys[level] = k;
            if self.by_tok.len() >= 64 + 2 * self.simple_keys.len() {
                let consumed = self.consumed;
                self.by_tok.retain(|&n, _| n >= consumed);
            }
            self.by_tok.insert(k.token_number, level);
        }
    }

    /// `yaml_parser_remove_simple_key`.
    fn remove_simple_key(&mut self) {
        if let Some(k) = self.simple_keys.last_mut() {
            if k.possible {
                k.possible = false;
                let n = k.token_number;
                self.by_tok.remove(&n);
            }
        }
    }

    /// `yaml_parser_increase_flow_level`.
    fn increase_flow_level(&mut self) {
        self.simple_keys.push(SimpleKey {
            token_number: self.produced,
            mark: self.mark,
            ..SimpleKey::default()
        });
        self.flow_level += 1;
    }

    /// `yaml_parser_decrease_flow_level`.
    fn decrease_flow_level(&mut self) {
        if self.flow_level > 0 {
            self.flow_level -= 1;
            if let Some(k) = self.simple_keys.pop() {
                self.by_tok.remove(&k.token_number);
            }
        }
    }

    /// `yaml_parser_roll_indent` for an appended BLOCK-*-START.
    fn roll_indent(&mut self, column: i64, t: T) {
        if self.flow_level > 0 {
            return;
        }
        if self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            self.take(t);
        }
    }

    /// `yaml_parser_unroll_indent`: one BLOCK-END per closed level, placed
    /// before the comments that belong to the parent (yaml.v3 moves the
    /// mark back to the first comment at the closed level's column).
    fn unroll_indent(&mut self, column: i64, scan_mark: Mk) {
        if self.flow_level > 0 {
            return;
        }
        let mut block_mark = scan_mark;
        block_mark.index -= 1;
        while self.indent > column {
            let mut stop_index = block_mark.index;
            for c in self.comments.iter().rev() {
                if c.end_mark.index < stop_index {
                    break;
                }
                if c.start_mark.column == self.indent + 1 {
                    block_mark = c.start_mark;
                }
                stop_index = c.scan_mark.index;
            }
            if let Some(t) = self.take(T::Be).and_then(|i| self.tok_mut(i)) {
                t.start = block_mark;
                t.end = block_mark;
            }
            self.indent = self.indents.pop().unwrap_or(-1);
        }
    }

    /// `yaml_parser_fetch_next_token`; false when there is nothing left.
    fn fetch_next_token(&mut self) -> bool {
        if self.stream_end_produced || self.desync {
            return false;
        }
        if !self.stream_start_produced {
            // `yaml_parser_fetch_stream_start`.
            self.indent = -1;
            self.simple_keys.push(SimpleKey::default());
            self.simple_key_allowed = true;
            self.stream_start_produced = true;
            return self.take(T::StreamStart).is_some();
        }
        if self.next_appended().is_none() {
            self.hit_end = true;
            return false;
        }
        let scan_mark = self.mark;
        self.scan_to_next_token();
        self.unroll_indent(self.mark.column, scan_mark);
        // The token this fetch is for (BLOCK-ENDs come from the unrolls).
        let Some(i) = self.next_appended() else {
            return false;
        };
        let mut i = i;
        let tok = loop {
            let Some(t) = self.tok(i) else {
                self.desync = true;
                return false;
            };
            if !(t.inserted || t.dead || t.produced || t.t == T::Be) {
                break t;
            }
            i += 1;
        };
        match tok.t {
            T::StreamEnd => {
                // `yaml_parser_fetch_stream_end`.
                if self.mark.column != 0 {
                    self.mark.column = 0;
                    self.mark.line += 1;
                }
                self.unroll_indent(-1, self.mark);
                self.remove_simple_key();
                self.simple_key_allowed = false;
                let mark = self.mark;
                if let Some(t) = self.take(T::StreamEnd).and_then(|i| self.tok_mut(i)) {
                    t.start = mark;
                    t.end = mark;
                }
                self.stream_end_produced = true;
                return true;
            }
            T::Directive | T::DocStart | T::DocEnd => {
                // `yaml_parser_fetch_directive`,
                // `yaml_parser_fetch_document_indicator`: no line comments.
                self.unroll_indent(-1, self.mark);
                self.remove_simple_key();
                self.simple_key_allowed = false;
                self.take(tok.t);
                if tok.t == T::Directive {
                    while !is_breakz(self.src, self.pos) {
                        self.skip();
                    }
                    self.skip_line();
                } else {
                    self.skip();
                    self.skip();
                    self.skip();
                }
                return !self.desync;
            }
            _ => {}
        }
        // Comments after `:` (block) or `,` (flow) belong to the token before.
        let c = self.at(0);
        let mut comment_mark = self.mark;
        if (self.flow_level == 0 && c == b':') || (self.flow_level > 0 && c == b',') {
            comment_mark = self.tok(self.last_prod).map_or(self.mark, |t| t.start);
        }
        match tok.t {
            T::Fss | T::Fms => {
                self.save_simple_key();
                self.increase_flow_level();
                self.simple_key_allowed = true;
                self.take(tok.t);
                self.skip();
            }
            T::Fse | T::Fme => {
                self.remove_simple_key();
                self.decrease_flow_level();
                self.simple_key_allowed = false;
                self.take(tok.t);
                self.skip();
            }
            T::FlowEntry => {
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.take(T::FlowEntry);
                self.skip();
            }
            T::Bss | T::BlockEntry => {
                if self.flow_level == 0 {
                    self.roll_indent(self.mark.column, T::Bss);
                }
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.take(T::BlockEntry);
                self.skip();
            }
            T::Bms | T::Key | T::Value => {
                let value = if tok.t == T::Bms {
                    // The mapping start goes with the indicator after it.
                    self.tok(i + 1).map_or(T::Key, |t| t.t) == T::Value
                } else {
                    tok.t == T::Value
                };
                if value {
                    self.fetch_value();
                } else {
                    if self.flow_level == 0 {
                        self.roll_indent(self.mark.column, T::Bms);
                    }
                    self.remove_simple_key();
                    self.simple_key_allowed = self.flow_level == 0;
                    self.take(T::Key);
                }
                self.skip();
            }
            T::Alias | T::Anchor | T::Tag => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.take(tok.t);
                self.jump(tok.end);
                self.newlines = 0;
            }
            T::Scalar => match tok.sc {
                Sc::Block => {
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.take(T::Scalar);
                    self.block_scalar(tok.end);
                }
                Sc::Plain => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.take(T::Scalar);
                    self.jump(tok.end);
                    self.newlines = 0;
                    // `yaml_parser_scan_plain_scalar` eats the blanks and
                    // breaks after the last word.
                    let mut leading_blanks = false;
                    while is_blank(self.src, self.pos) || is_break(self.src, self.pos) {
                        if is_blank(self.src, self.pos) {
                            self.skip_blanks();
                        } else {
                            self.skip_line();
                            leading_blanks = true;
                        }
                    }
                    if leading_blanks {
                        self.simple_key_allowed = true;
                    }
                }
                _ => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.take(T::Scalar);
                    self.jump(tok.end);
                    self.newlines = 0;
                }
            },
            _ => {
                self.desync = true;
                return false;
            }
        }
        // The deferred line comment: sequence indicators alone have none.
        if self.kind(self.last_prod) != Some(T::BlockEntry) {
            self.scan_line_comment(comment_mark);
        }
        !self.desync
    }

    /// `yaml_parser_fetch_value`.
    fn fetch_value(&mut self) {
        let Some(v) = self.next_appended() else {
            self.desync = true;
            return;
        };
        let level = self.simple_keys.len() - 1;
        let valid = self.simple_key_is_valid(level);
        // The VALUE (after a BLOCK-MAPPING-START appended for a complex
        // key) and the simple key's KEY it brings.
        let value = if self.kind(v) == Some(T::Value) {
            v
        } else {
            v + 1
        };
        let link = self.tok(value).map_or(NO, |t| t.link);
        if link != NO {
            if !valid {
                self.desync = true;
            }
            let key = link as usize;
            let k = self.simple_keys[level];
            // The KEY, and a BLOCK-MAPPING-START before it when the key opens
            // a new indentation level (`yaml_parser_roll_indent` with the
            // key's number).
            if self.flow_level == 0 && self.indent < k.mark.column {
                self.indents.push(self.indent);
                self.indent = k.mark.column;
                let bms = key.checked_sub(1).and_then(|b| self.tok(b));
                if bms.is_some_and(|t| t.t == T::Bms && t.inserted) {
                    self.produce(key - 1);
                } else {
                    self.desync = true;
                }
            }
            self.produce(key);
            self.simple_keys[level].possible = false;
            let n = k.token_number;
            self.by_tok.remove(&n);
            self.simple_key_allowed = false;
        } else {
            if self.flow_level == 0 {
                self.roll_indent(self.mark.column, T::Bms);
            }
            self.simple_key_allowed = self.flow_level == 0;
        }
        self.take(T::Value);
    }

    /// The rest of `yaml_parser_scan_block_scalar` after the indicator:
    /// the header's line comment, then the cursor where yaml.v3's scanner
    /// stops (the token's end plus the next line's indentation, up to the
    /// scalar's indentation).
    fn block_scalar(&mut self, end: Mk) {
        let start_mark = self.mark;
        self.skip();
        let mut increment = 0i64;
        for _ in 0..2 {
            let c = self.at(0);
            if c == b'+' || c == b'-' {
                self.skip();
            } else if c.is_ascii_digit() {
                increment = i64::from(c - b'0');
                self.skip();
            }
        }
        while is_blank(self.src, self.pos) {
            self.skip();
        }
        if self.at(0) == b'#' {
            self.scan_line_comment(start_mark);
            while !is_breakz(self.src, self.pos) {
                self.skip();
            }
        }
        if is_break(self.src, self.pos) {
            self.skip_line();
        }
        // `yaml_parser_scan_block_scalar_breaks` decides the indentation.
        let mut indent = if increment > 0 {
            if self.indent >= 0 {
                self.indent + increment
            } else {
                increment
            }
        } else {
            0
        };
        if indent == 0 {
            let mut p = self.pos;
            let mut max_indent = 0;
            loop {
                let mut col = 0;
                while at(self.src, p) == b' ' {
                    p += 1;
                    col += 1;
                }
                max_indent = max_indent.max(col);
                if !is_break(self.src, p) {
                    break;
                }
                p += if at(self.src, p) == b'\r' && at(self.src, p + 1) == b'\n' {
                    2
                } else {
                    width(at(self.src, p))
                };
            }
            indent = max_indent.max(self.indent + 1).max(1);
        }
        if end.index < self.pos as i64 {
            // Nothing after the header line.
            return;
        }
        // `newlines`: the breaks since the last non-blank character read.
        let mut newlines = 0;
        let mut p = end.index as usize;
        while p > self.pos {
            match at(self.src, p - 1) {
                b'\n' => {
                    newlines += 1;
                    if p >= 2 && at(self.src, p - 2) == b'\r' {
                        p -= 1;
                    }
                }
                b'\r' => newlines += 1,
                b' ' | b'\t' => {}
                _ => break,
            }
            p -= 1;
        }
        let since_header = p == self.pos;
        self.jump(end);
        self.newlines = if since_header {
            self.newlines + newlines
        } else {
            newlines
        };
        while self.mark.column < indent && self.at(0) == b' ' {
            self.skip();
        }
    }

    /// `yaml_parser_scan_to_next_token`.
    fn scan_to_next_token(&mut self) {
        let scan_mark = self.mark;
        loop {
            // (yaml.v3's byte order mark check, `is_bom`, looks at the start
            // of its buffer whatever the position: in effect never true
            // here.)
            //
            // yaml.v3 skips tabs only where it allows them; where it does
            // not, libyaml has already failed.
            self.skip_blanks();
            // A line comment right after `- ` that reads as the head of
            // the entry's content.
            let b = self.last_prod;
            if self.comments.last().is_some_and(|c| !c.line.is_empty())
                && self.kind(b) == Some(T::BlockEntry)
                && !is_break(self.src, self.pos)
                && self
                    .prev_produced(b)
                    .is_some_and(|a| self.kind(a) == Some(T::Bss))
            {
                let mark = self.mark;
                if let Some(c) = self.comments.last_mut() {
                    c.head = std::mem::take(&mut c.line);
                    if c.start_mark.line == mark.line - 1 {
                        c.token_mark = mark;
                    }
                }
            }
            if self.at(0) == b'#' {
                self.scan_comments(scan_mark);
            }
            if is_break(self.src, self.pos) {
                self.skip_line();
                if self.flow_level == 0 {
                    self.simple_key_allowed = true;
                }
            } else {
                break;
            }
        }
    }

    /// `yaml_parser_scan_line_comment`: a comment on the rest of the line,
    /// tied to `token_mark`.
    fn scan_line_comment(&mut self, token_mark: Mk) {
        if self.newlines > 0 {
            return;
        }
        let mut start_mark = Mk::default();
        let mut text = String::new();
        let mut peek = 0;
        while peek < 512 {
            if is_blank(self.src, self.pos + peek) {
                peek += 1;
                continue;
            }
            if self.at(peek) == b'#' {
                let seen = self.mark.index + peek as i64;
                loop {
                    if is_breakz(self.src, self.pos) {
                        if self.mark.index >= seen {
                            break;
                        }
                        self.skip_line();
                    } else if self.mark.index >= seen {
                        if text.is_empty() {
                            start_mark = self.mark;
                        }
                        self.read(&mut text);
                    } else {
                        self.skip();
                    }
                }
            }
            break;
        }
        if !text.is_empty() {
            self.comments.push(Comment {
                token_mark,
                start_mark,
                line: text,
                ..Comment::default()
            });
        }
    }

    /// `yaml_parser_scan_comments`: the comment lines starting here, split
    /// into foot comments of what came before (same or deeper indentation,
    /// no blank line) and the head comment of what follows.
    fn scan_comments(&mut self, scan_mark: Mk) {
        let mut scan_mark = scan_mark;
        let mut token_i = self.last_prod;
        if self.kind(token_i) == Some(T::FlowEntry) {
            if let Some(p) = self.prev_produced(token_i) {
                token_i = p;
            }
        }
        let Some(token) = self.tok(token_i) else {
            self.desync = true;
            return;
        };
        let mut token_mark = token.start;
        let mut start_mark = Mk::default();
        let mut next_indent = self.indent.max(0);
        let mut recent_empty = false;
        let mut first_empty = self.newlines <= 1;
        let mut line = self.mark.line;
        let mut column = self.mark.column;
        let mut text = String::new();

        let mut foot_line = -1;
        if scan_mark.line > 0 {
            foot_line = self.mark.line - self.newlines as i64 + 1;
            if self.newlines == 0 && self.mark.column > 1 {
                foot_line += 1;
            }
        }

        let mut peek = 0usize;
        while peek < 512 {
            column += 1;
            let p = self.pos + peek;
            if is_blank(self.src, p) {
                peek += 1;
                continue;
            }
            let c = at(self.src, p);
            let close_flow = self.flow_level > 0 && (c == b']' || c == b'}');
            if close_flow || is_breakz(self.src, p) {
                // A line break or the end.
                if close_flow || !recent_empty {
                    if close_flow
                        || (first_empty
                            && ((start_mark.line == foot_line && token.t != T::Value)
                                || start_mark.column - 1 < next_indent))
                    {
                        // The first part, before any blank line, is a foot of
                        // the token before (or the last comment in a flow).
                        if !text.is_empty() {
                            if start_mark.column - 1 < next_indent {
                                // Dedented: unrelated to the token before.
                                token_mark = start_mark;
                            }
                            let here = Mk {
                                index: self.mark.index + peek as i64,
                                line,
                                column,
                            };
                            self.comments.push(Comment {
                                scan_mark,
                                token_mark,
                                start_mark,
                                end_mark: here,
                                foot: std::mem::take(&mut text),
                                ..Comment::default()
                            });
                            scan_mark = here;
                            token_mark = scan_mark;
                        }
                    } else if !text.is_empty() && !is_z(self.src, p) {
                        text.push('\n');
                    }
                }
                if !is_break(self.src, p) {
                    break;
                }
                first_empty = false;
                recent_empty = true;
                column = 0;
                line += 1;
                peek += 1;
                continue;
            }

            if !text.is_empty()
                && (close_flow || (column - 1 < next_indent && column != start_mark.column))
            {
                // A comment at another indentation: a foot of what came
                // before rather than a head of what follows.
                let here = Mk {
                    index: self.mark.index + peek as i64,
                    line,
                    column,
                };
                self.comments.push(Comment {
                    scan_mark,
                    token_mark,
                    start_mark,
                    end_mark: here,
                    foot: std::mem::take(&mut text),
                    ..Comment::default()
                });
                scan_mark = here;
                token_mark = scan_mark;
            }

            if c != b'#' {
                break;
            }

            if text.is_empty() {
                start_mark = Mk {
                    index: self.mark.index + peek as i64,
                    line,
                    column,
                };
            } else {
                text.push('\n');
            }
            recent_empty = false;

            // Consume the comment line.
            let seen = self.mark.index + peek as i64;
            loop {
                if is_breakz(self.src, self.pos) {
                    if self.mark.index >= seen {
                        break;
                    }
                    self.skip_line();
                } else if self.mark.index >= seen {
                    self.read(&mut text);
                } else {
                    self.skip();
                }
            }

            // Go sets `peek = 0` and its for-loop then adds 1: the break
            // after the comment is stepped over, and `line` lags a line
            // behind until the next break (with CRLF the `\n` is seen).
            peek = 1;
            column = 0;
            line = self.mark.line;
            next_indent = self.indent.max(0);
        }

        if !text.is_empty() {
            let end = Mk {
                index: self.mark.index + peek as i64 - 1,
                line,
                column,
            };
            self.comments.push(Comment {
                scan_mark,
                token_mark: start_mark,
                start_mark,
                end_mark: end,
                head: text,
                ..Comment::default()
            });
        }
    }
}

// ---------------------------------------------------------------------------
// yaml.v3's parser (parserc.go), for its comments

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    StreamStart,
    ImplicitDocStart,
    DocStart,
    DocContent,
    DocEnd,
    BlockNode,
    BlockSeqFirst,
    BlockSeqEntry,
    IndentlessEntry,
    BlockMapFirstKey,
    BlockMapKey,
    BlockMapValue,
    FlowSeqFirst,
    FlowSeqEntry,
    FlowPairKey,
    FlowPairValue,
    FlowPairEnd,
    FlowMapFirstKey,
    FlowMapKey,
    FlowMapValue,
    FlowMapEmptyValue,
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    StreamStart,
    StreamEnd,
    DocStart,
    DocEnd,
    Alias,
    Scalar,
    SeqStart,
    SeqEnd,
    MapStart,
    MapEnd,
}

/// One of yaml.v3's events: its kind, start mark and comments.
#[derive(Debug)]
struct GoEv {
    kind: Ev,
    start: Mk,
    head: String,
    line: String,
    foot: String,
}

impl GoEv {
    fn new(kind: Ev, start: Mk) -> GoEv {
        GoEv {
            kind,
            start,
            head: String::new(),
            line: String::new(),
            foot: String::new(),
        }
    }
}

/// yaml.v3's parser state machine over the replayed scanner. It makes the
/// same events as libyaml's parser; what it adds is when each token is
/// peeked (which is when comments are taken from the scanner's queue) and
/// which event takes them.
struct GoParser<'a> {
    sim: Sim<'a>,
    state: St,
    states: Vec<St>,
    token_available: bool,
    /// The queue head's token.
    head: usize,
    head_comment: String,
    line_comment: String,
    foot_comment: String,
    stem_comment: String,
}

impl<'a> GoParser<'a> {
    fn new(sim: Sim<'a>) -> GoParser<'a> {
        GoParser {
            sim,
            state: St::StreamStart,
            states: Vec::new(),
            token_available: false,
            head: 0,
            head_comment: String::new(),
            line_comment: String::new(),
            foot_comment: String::new(),
            stem_comment: String::new(),
        }
    }

    /// `peek_token`: the head token's index and type.
    fn peek(&mut self) -> Option<(usize, T)> {
        if !self.token_available {
            self.sim.fetch_more_tokens();
            if self.sim.hit_end {
                return None;
            }
            self.token_available = true;
        }
        loop {
            // (Tokens reach the window only once final: no KEY here is
            // still waiting for its `:`.)
            let tok = self.sim.tok(self.head)?;
            if tok.dead {
                self.head += 1;
            } else if !tok.produced {
                // A simple key's KEY arrives with its VALUE.
                if !self.sim.fetch_next_token() {
                    return None;
                }
            } else {
                self.unfold_comments(&tok);
                return Some((self.head, tok.t));
            }
        }
    }

    /// `yaml_parser_unfold_comments`: comments tied to positions up to the
    /// token's go to the parser's pending head, line and foot comments.
    fn unfold_comments(&mut self, tok: &VTok) {
        let sim = &mut self.sim;
        while let Some(c) = sim.comments.get_mut(sim.comments_head) {
            if tok.start.index < c.token_mark.index {
                break;
            }
            if !c.head.is_empty() {
                if tok.t == T::Be {
                    // No heads on ends: kept for the token that follows.
                    break;
                }
                join(&mut self.head_comment, &c.head);
            }
            if !c.foot.is_empty() {
                join(&mut self.foot_comment, &c.foot);
            }
            if !c.line.is_empty() {
                join(&mut self.line_comment, &c.line);
            }
            *c = Comment::default();
            sim.comments_head += 1;
        }
    }

    /// `skip_token`.
    fn skip(&mut self) {
        self.token_available = false;
        self.sim.consumed += 1;
        self.head += 1;
        // Keep memory flat: tokens well behind the parser and comments
        // already taken are not looked at again (one taken comment stays:
        // it stops `unroll_indent`'s backward search, as in yaml.v3).
        let recon = &mut self.sim.source.window;
        if self.head > recon.base + 1024 {
            recon.drop_before(self.head - 64);
        }
        let sim = &mut self.sim;
        if sim.comments_head > 256 {
            sim.comments.drain(..sim.comments_head - 1);
            sim.comments_head = 1;
        }
    }

    fn tok(&self, i: usize) -> VTok {
        self.sim.source.window.get(i).copied().unwrap_or(VTok::new(
            T::StreamEnd,
            Mk::default(),
            Mk::default(),
        ))
    }

    fn pop_state(&mut self) -> St {
        self.states.pop().unwrap_or(St::End)
    }

    /// `yaml_parser_set_event_comments`.
    fn set_event_comments(&mut self, ev: &mut GoEv) {
        ev.head = std::mem::take(&mut self.head_comment);
        ev.line = std::mem::take(&mut self.line_comment);
        ev.foot = std::mem::take(&mut self.foot_comment);
        self.stem_comment.clear();
    }

    fn next_event(&mut self) -> Option<GoEv> {
        match self.state {
            St::StreamStart => {
                let (h, _) = self.peek()?;
                self.state = St::ImplicitDocStart;
                let ev = GoEv::new(Ev::StreamStart, self.tok(h).start);
                self.skip();
                Some(ev)
            }
            St::ImplicitDocStart => self.document_start(true),
            St::DocStart => self.document_start(false),
            St::DocContent => {
                let (h, t) = self.peek()?;
                if matches!(t, T::Directive | T::DocStart | T::DocEnd | T::StreamEnd) {
                    self.state = self.pop_state();
                    Some(GoEv::new(Ev::Scalar, self.tok(h).start))
                } else {
                    self.parse_node(true, false)
                }
            }
            St::DocEnd => {
                let (h, t) = self.peek()?;
                let start = self.tok(h).start;
                if t == T::DocEnd {
                    self.skip();
                }
                self.state = St::DocStart;
                let mut ev = GoEv::new(Ev::DocEnd, start);
                self.set_event_comments(&mut ev);
                if !ev.head.is_empty() && ev.foot.is_empty() {
                    ev.foot = std::mem::take(&mut ev.head);
                }
                Some(ev)
            }
            St::BlockNode => self.parse_node(true, false),
            St::BlockSeqFirst => self.block_sequence_entry(true),
            St::BlockSeqEntry => self.block_sequence_entry(false),
            St::IndentlessEntry => self.indentless_sequence_entry(),
            St::BlockMapFirstKey => self.block_mapping_key(true),
            St::BlockMapKey => self.block_mapping_key(false),
            St::BlockMapValue => self.block_mapping_value(),
            St::FlowSeqFirst => self.flow_sequence_entry(true),
            St::FlowSeqEntry => self.flow_sequence_entry(false),
            St::FlowPairKey => {
                let (h, t) = self.peek()?;
                if !matches!(t, T::Value | T::FlowEntry | T::Fse) {
                    self.states.push(St::FlowPairValue);
                    return self.parse_node(false, false);
                }
                let mark = self.tok(h).end;
                self.skip();
                self.state = St::FlowPairValue;
                Some(GoEv::new(Ev::Scalar, mark))
            }
            St::FlowPairValue => {
                let (mut h, mut t) = self.peek()?;
                if t == T::Value {
                    self.skip();
                    (h, t) = self.peek()?;
                    if !matches!(t, T::FlowEntry | T::Fse) {
                        self.states.push(St::FlowPairEnd);
                        return self.parse_node(false, false);
                    }
                }
                self.state = St::FlowPairEnd;
                Some(GoEv::new(Ev::Scalar, self.tok(h).start))
            }
            St::FlowPairEnd => {
                let (h, _) = self.peek()?;
                self.state = St::FlowSeqEntry;
                Some(GoEv::new(Ev::MapEnd, self.tok(h).start))
            }
            St::FlowMapFirstKey => self.flow_mapping_key(true),
            St::FlowMapKey => self.flow_mapping_key(false),
            St::FlowMapValue => self.flow_mapping_value(false),
            St::FlowMapEmptyValue => self.flow_mapping_value(true),
            St::End => None,
        }
    }

    /// `yaml_parser_parse_document_start`, with yaml.v3's split of the
    /// comment before the first token: up to its last blank line it is the
    /// document's head comment.
    fn document_start(&mut self, implicit: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if !implicit {
            while t == T::DocEnd {
                self.skip();
                (h, t) = self.peek()?;
            }
        }
        if implicit && !matches!(t, T::Directive | T::DocStart | T::StreamEnd) {
            self.states.push(St::DocEnd);
            self.state = St::BlockNode;
            let mut ev = GoEv::new(Ev::DocStart, self.tok(h).start);
            let hc = self.head_comment.as_bytes();
            for i in (1..hc.len()).rev() {
                if hc[i] == b'\n' {
                    if i == hc.len() - 1 {
                        ev.head = self.head_comment[..i].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    } else if hc[i - 1] == b'\n' {
                        ev.head = self.head_comment[..i - 1].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    }
                }
            }
            Some(ev)
        } else if t != T::StreamEnd {
            let start = self.tok(h).start;
            while t == T::Directive {
                self.skip();
                (_, t) = self.peek()?;
            }
            if t != T::DocStart {
                return None;
            }
            self.states.push(St::DocEnd);
            self.state = St::DocContent;
            self.skip();
            Some(GoEv::new(Ev::DocStart, start))
        } else {
            self.state = St::End;
            let ev = GoEv::new(Ev::StreamEnd, self.tok(h).start);
            self.skip();
            Some(ev)
        }
    }

    /// `yaml_parser_parse_node`.
    fn parse_node(&mut self, block: bool, indentless: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if t == T::Alias {
            self.state = self.pop_state();
            let mut ev = GoEv::new(Ev::Alias, self.tok(h).start);
            self.set_event_comments(&mut ev);
            self.skip();
            return Some(ev);
        }
        let start = self.tok(h).start;
        let mut props = false;
        if t == T::Anchor || t == T::Tag {
            let first = t;
            props = true;
            self.skip();
            (h, t) = self.peek()?;
            if (first == T::Anchor && t == T::Tag) || (first == T::Tag && t == T::Anchor) {
                self.skip();
                (h, t) = self.peek()?;
            }
        }
        let _ = h;
        if indentless && t == T::BlockEntry {
            self.state = St::IndentlessEntry;
            return Some(GoEv::new(Ev::SeqStart, start));
        }
        match t {
            T::Scalar => {
                self.state = self.pop_state();
                let mut ev = GoEv::new(Ev::Scalar, start);
                self.set_event_comments(&mut ev);
                self.skip();
                Some(ev)
            }
            T::Fss => {
                self.state = St::FlowSeqFirst;
                let mut ev = GoEv::new(Ev::SeqStart, start);
                self.set_event_comments(&mut ev);
                Some(ev)
            }
            T::Fms => {
                self.state = St::FlowMapFirstKey;
                let mut ev = GoEv::new(Ev::MapStart, start);
                self.set_event_comments(&mut ev);
                Some(ev)
            }
            T::Bss if block => {
                self.state = St::BlockSeqFirst;
                let mut ev = GoEv::new(Ev::SeqStart, start);
                ev.head = std::mem::take(&mut self.stem_comment);
                Some(ev)
            }
            T::Bms if block => {
                self.state = St::BlockMapFirstKey;
                let mut ev = GoEv::new(Ev::MapStart, start);
                ev.head = std::mem::take(&mut self.stem_comment);
                Some(ev)
            }
            _ if props => {
                self.state = self.pop_state();
                Some(GoEv::new(Ev::Scalar, start))
            }
            _ => None,
        }
    }

    /// `yaml_parser_split_stem_comment`: a head comment before `- ` whose
    /// entry is a collection belongs to the collection, not its first
    /// entry.
    fn split_stem_comment(&mut self, stem_len: usize) {
        if stem_len == 0 {
            return;
        }
        match self.peek() {
            Some((_, T::Bss | T::Bms)) => {}
            _ => return,
        }
        let hc = std::mem::take(&mut self.head_comment);
        self.stem_comment = hc.get(..stem_len).unwrap_or(&hc).to_owned();
        self.head_comment = hc.get(stem_len + 1..).unwrap_or_default().to_owned();
    }

    fn block_sequence_entry(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (h, t) = self.peek()?;
        if t == T::BlockEntry {
            let mark = self.tok(h).end;
            let prior = self.head_comment.len();
            self.skip();
            self.split_stem_comment(prior);
            let (_, t) = self.peek()?;
            if t != T::BlockEntry && t != T::Be {
                self.states.push(St::BlockSeqEntry);
                return self.parse_node(true, false);
            }
            self.state = St::BlockSeqEntry;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        if t == T::Be {
            self.state = self.pop_state();
            let ev = GoEv::new(Ev::SeqEnd, self.tok(h).start);
            self.skip();
            return Some(ev);
        }
        None
    }

    fn indentless_sequence_entry(&mut self) -> Option<GoEv> {
        let (h, t) = self.peek()?;
        if t == T::BlockEntry {
            let mark = self.tok(h).end;
            let prior = self.head_comment.len();
            self.skip();
            self.split_stem_comment(prior);
            let (_, t) = self.peek()?;
            if !matches!(t, T::BlockEntry | T::Key | T::Value | T::Be) {
                self.states.push(St::IndentlessEntry);
                return self.parse_node(true, false);
            }
            self.state = St::IndentlessEntry;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        self.state = self.pop_state();
        Some(GoEv::new(Ev::SeqEnd, self.tok(h).start))
    }

    fn block_mapping_key(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (h, t) = self.peek()?;
        if t == T::Key {
            let mark = self.tok(h).end;
            self.skip();
            let (_, t) = self.peek()?;
            if !matches!(t, T::Key | T::Value | T::Be) {
                self.states.push(St::BlockMapValue);
                return self.parse_node(true, true);
            }
            self.state = St::BlockMapValue;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        if t == T::Be {
            self.state = self.pop_state();
            let mut ev = GoEv::new(Ev::MapEnd, self.tok(h).start);
            self.set_event_comments(&mut ev);
            self.skip();
            return Some(ev);
        }
        None
    }

    fn block_mapping_value(&mut self) -> Option<GoEv> {
        let (h, t) = self.peek()?;
        if t == T::Value {
            let mark = self.tok(h).end;
            self.skip();
            let (_, t) = self.peek()?;
            if !matches!(t, T::Key | T::Value | T::Be) {
                self.states.push(St::BlockMapKey);
                return self.parse_node(true, true);
            }
            self.state = St::BlockMapKey;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        self.state = St::BlockMapKey;
        Some(GoEv::new(Ev::Scalar, self.tok(h).start))
    }

    fn flow_sequence_entry(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (mut h, mut t) = self.peek()?;
        if t != T::Fse {
            if !first {
                if t != T::FlowEntry {
                    return None;
                }
                self.skip();
                (h, t) = self.peek()?;
            }
            if t == T::Key {
                self.state = St::FlowPairKey;
                let ev = GoEv::new(Ev::MapStart, self.tok(h).start);
                self.skip();
                return Some(ev);
            }
            if t != T::Fse {
                self.states.push(St::FlowSeqEntry);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        let mut ev = GoEv::new(Ev::SeqEnd, self.tok(h).start);
        self.set_event_comments(&mut ev);
        self.skip();
        Some(ev)
    }

    fn flow_mapping_key(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (mut h, mut t) = self.peek()?;
        if t != T::Fme {
            if !first {
                if t != T::FlowEntry {
                    return None;
                }
                self.skip();
                (h, t) = self.peek()?;
            }
            if t == T::Key {
                self.skip();
                let (h, t) = self.peek()?;
                if !matches!(t, T::Value | T::FlowEntry | T::Fme) {
                    self.states.push(St::FlowMapValue);
                    return self.parse_node(false, false);
                }
                self.state = St::FlowMapValue;
                return Some(GoEv::new(Ev::Scalar, self.tok(h).start));
            }
            if t != T::Fme {
                self.states.push(St::FlowMapEmptyValue);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        let mut ev = GoEv::new(Ev::MapEnd, self.tok(h).start);
        self.set_event_comments(&mut ev);
        self.skip();
        Some(ev)
    }

    fn flow_mapping_value(&mut self, empty: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if empty {
            self.state = St::FlowMapKey;
            return Some(GoEv::new(Ev::Scalar, self.tok(h).start));
        }
        if t == T::Value {
            self.skip();
            (h, t) = self.peek()?;
            if !matches!(t, T::FlowEntry | T::Fme) {
                self.states.push(St::FlowMapKey);
                return self.parse_node(false, false);
            }
        }
        self.state = St::FlowMapKey;
        Some(GoEv::new(Ev::Scalar, self.tok(h).start))
    }
}

/// Appends a comment to pending text, newline-separated.
fn join(to: &mut String, s: &str) {
    if !to.is_empty() {
        to.push('\n');
    }
    to.push_str(s);
}

// ---------------------------------------------------------------------------
// decode.go's node building

fn kind_of(data: &EventData) -> Option<Ev> {
    Some(match data {
        EventData::StreamStart { .. } => Ev::StreamStart,
        EventData::StreamEnd => Ev::StreamEnd,
        EventData::DocumentStart { .. } => Ev::DocStart,
        EventData::DocumentEnd { .. } => Ev::DocEnd,
        EventData::Alias { .. } => Ev::Alias,
        EventData::Scalar { .. } => Ev::Scalar,
        EventData::SequenceStart { .. } => Ev::SeqStart,
        EventData::SequenceEnd => Ev::SeqEnd,
        EventData::MappingStart { .. } => Ev::MapStart,
        EventData::MappingEnd => Ev::MapEnd,
    })
}

/// yaml.v3's `shortTag`.
fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    }
}

/// One event with its yaml.v3 comments and mark.
struct Item {
    data: EventData,
    /// A scalar's value.
    value: CompactString,
    start: Mk,
    head: String,
    line: String,
    foot: String,
}

/// decode.go's `parser`: nodes from events (`node`, `document`, `mapping`,
/// `sequence`, `scalar`, `alias`), with their comment moves.
struct Composer<'a> {
    go: GoParser<'a>,
    go_ok: bool,
    peeked: Option<Item>,
    /// Events taken so far.
    taken: usize,
    anchors: HashSet<String>,
    /// Children of the collections being built.
    stack: Vec<Node>,
    /// The collections being built, outermost first.
    open: Vec<Open>,
    /// yaml.v3's scanner fails first, on a tab that cannot start a token.
    tab_at: Option<usize>,
    text: &'a str,
    src: &'a [u8],
    eof: Option<Mk>,
}

/// Composition stops: the events ran out (at libyaml's error) or yaml.v3
/// fails on its own (with the index of the event it fails at).
enum Stop {
    End,
    Fail(ParseError, usize),
}

impl<'a> Composer<'a> {
    fn new(go: GoParser<'a>, text: &'a str, src: &'a [u8], eof: Option<Mk>) -> Composer<'a> {
        Composer {
            go,
            go_ok: true,
            peeked: None,
            taken: 0,
            anchors: HashSet::new(),
            stack: Vec::with_capacity(64),
            open: Vec::with_capacity(16),
            tab_at: None,
            text,
            src,
            eof,
        }
    }

    fn run(&mut self) -> Result<Vec<Node>, ParseError> {
        let mut docs = Vec::new();
        let stop = 'compose: {
            // `parser.init`: STREAM-START.
            if self.next().is_none() {
                break 'compose None;
            }
            loop {
                match self.peek_kind() {
                    None => break 'compose None,
                    Some(Ev::StreamEnd) => return Ok(docs),
                    Some(_) => match self.document() {
                        Ok(n) => docs.push(n),
                        Err(Stop::Fail(e, at)) => break 'compose Some((e, at)),
                        Err(Stop::End) => break 'compose None,
                    },
                }
            }
        };
        // yaml.v3's scanner runs up to three tokens ahead of its parser, so
        // a scanner error there comes before libyaml's parser error, and
        // before an unknown anchor in the events in between.
        let source = &self.go.sim.source;
        let error = source.error.clone();
        let scanner_first = match &error {
            Some(_) if !source.own_error => {
                scanner_error_first(self.text, self.src, self.eof, source.pulled)
            }
            _ => None,
        };
        let scanner_first = scanner_first.map(|(limit, serr, tab)| {
            self.tab_at = tab;
            (limit, serr)
        });
        Err(match (stop, scanner_first) {
            (Some((e, at)), Some((limit, serr))) => {
                if at >= limit {
                    serr
                } else {
                    e
                }
            }
            (Some((e, _)), None) => e,
            (None, Some((_, serr))) => serr,
            (None, None) => error.unwrap_or_else(|| {
                ParseError::plain("unknown problem parsing YAML content".into())
            }),
        })
    }

    fn fill(&mut self) {
        if self.peeked.is_some() {
            return;
        }
        let (ev, value) = loop {
            if let Some(ev) = self.go.sim.source.events.pop_front() {
                break ev;
            }
            if !self.go.sim.source.pull() {
                return;
            }
        };
        self.taken += 1;
        let kind = kind_of(&ev.data);
        let mut item = Item {
            start: Mk::of(ev.start_mark),
            data: ev.data,
            value,
            head: String::new(),
            line: String::new(),
            foot: String::new(),
        };
        if self.go_ok {
            match self.go.next_event() {
                Some(g) if Some(g.kind) == kind => {
                    item.start = g.start;
                    item.head = g.head;
                    item.line = g.line;
                    item.foot = g.foot;
                }
                _ => {
                    // The replay lost step with libyaml (a bug, or a case
                    // where libyaml-safer and yaml.v3 disagree): the rest
                    // goes without comments.
                    self.go_ok = false;
                }
            }
        }
        self.peeked = Some(item);
    }

    fn peek_kind(&mut self) -> Option<Ev> {
        self.fill();
        self.peeked.as_ref().and_then(|i| kind_of(&i.data))
    }

    fn next(&mut self) -> Option<Item> {
        self.fill();
        self.peeked.take()
    }

    /// `parser.parse`: the next node, pushed on the stack. decode.go
    /// recurses into collections; here the open collections are a list
    /// (`open`), so nesting costs no call stack.
    fn parse(&mut self) -> Result<(), Stop> {
        let depth = self.open.len();
        loop {
            match self.peek_kind() {
                Some(Ev::Scalar) => self.scalar()?,
                Some(Ev::Alias) => self.alias()?,
                Some(Ev::MapStart | Ev::SeqStart) => {
                    self.collection_start()?;
                    continue;
                }
                Some(Ev::MapEnd | Ev::SeqEnd) if self.open.len() > depth => {
                    self.collection_end()?
                }
                _ => return Err(Stop::End),
            }
            // A node is complete.
            if self.open.len() == depth {
                return Ok(());
            }
            self.child_done();
        }
    }

    /// decode.go `parser.mapping`'s moves as its entries complete: a key's
    /// foot comment (a dedented comment after the prior value) goes to the
    /// prior key; a value's foot comment to its key, if that has none.
    fn child_done(&mut self) {
        let Some(Open { node, base }) = self.open.last() else {
            return;
        };
        if node.kind != Kind::Mapping {
            return;
        }
        let block = !node.style.has(Style::FLOW);
        let last = self.stack.len() - 1;
        let count = self.stack.len() - base;
        if count % 2 == 1 {
            if block && !self.stack[last].foot_comment.is_empty() && count > 2 {
                let foot = std::mem::take(&mut self.stack[last].foot_comment);
                self.stack[last - 2].foot_comment = foot;
            }
        } else if self.stack[last - 1].foot_comment.is_empty()
            && !self.stack[last].foot_comment.is_empty()
        {
            let foot = std::mem::take(&mut self.stack[last].foot_comment);
            self.stack[last - 1].foot_comment = foot;
        }
    }

    /// `parser.node`: the tag (explicit tags short and TAGGED), position
    /// and the event's comments.
    fn node(
        kind: Kind,
        default_tag: &'static str,
        tag: Option<String>,
        value: CompactString,
        item: &mut Item,
    ) -> Node {
        let mut style = Style::default();
        let tag = match tag {
            Some(t) if !t.is_empty() && t != "!" => {
                style = Style::TAGGED;
                Tag::from(short_tag(&t))
            }
            _ if !default_tag.is_empty() => Tag::from(default_tag),
            _ if kind == Kind::Scalar => Tag::from(resolve_plain(&value)),
            _ => Tag::default(),
        };
        Node {
            kind,
            style,
            tag,
            value,
            line: (item.start.line + 1) as u32,
            column: (item.start.column + 1) as u32,
            head_comment: std::mem::take(&mut item.head).into(),
            line_comment: std::mem::take(&mut item.line).into(),
            foot_comment: std::mem::take(&mut item.foot).into(),
            ..Node::default()
        }
    }

    fn anchor(&mut self, n: &mut Node, anchor: Option<String>) {
        if let Some(a) = anchor {
            self.anchors.insert(a.clone());
            n.anchor = a.into();
        }
    }

    /// `parser.document`.
    fn document(&mut self) -> Result<Node, Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let mut n = Composer::node(
            Kind::Document,
            "",
            None,
            CompactString::default(),
            &mut item,
        );
        let base = self.stack.len();
        self.parse()?;
        n.content = self.stack.split_off(base);
        if self.peek_kind() != Some(Ev::DocEnd) {
            return Err(Stop::End);
        }
        let end = self.next().ok_or(Stop::End)?;
        n.foot_comment = end.foot.into();
        Ok(n)
    }

    fn alias(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let name = match std::mem::replace(&mut item.data, EventData::StreamEnd) {
            EventData::Alias { anchor } => anchor,
            _ => return Err(Stop::End),
        };
        if !self.anchors.contains(&name) {
            return Err(Stop::Fail(
                ParseError::plain(format!("unknown anchor '{name}' referenced")),
                self.taken - 1,
            ));
        }
        let value = CompactString::from(name.as_str());
        let mut n = Composer::node(Kind::Alias, "", None, value, &mut item);
        n.alias = name.into();
        self.stack.push(n);
        Ok(())
    }

    fn scalar(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let EventData::Scalar {
            anchor, tag, style, ..
        } = std::mem::replace(&mut item.data, EventData::StreamEnd)
        else {
            return Err(Stop::End);
        };
        let value = std::mem::take(&mut item.value);
        let node_style = match style {
            ScalarStyle::DoubleQuoted => Style::DOUBLE_QUOTED,
            ScalarStyle::SingleQuoted => Style::SINGLE_QUOTED,
            ScalarStyle::Literal => Style::LITERAL,
            ScalarStyle::Folded => Style::FOLDED,
            _ => Style::default(),
        };
        let default_tag = if node_style.is_empty() {
            if value == "<<" {
                "!!merge"
            } else {
                ""
            }
        } else {
            "!!str"
        };
        let mut n = Composer::node(Kind::Scalar, default_tag, tag, value, &mut item);
        n.style = n.style | node_style;
        self.anchor(&mut n, anchor);
        self.stack.push(n);
        Ok(())
    }

    /// A sequence or mapping starts: its node waits in `open` while its
    /// entries gather on the shared stack (one exact allocation for the
    /// content at the end).
    fn collection_start(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let (kind, default_tag, anchor, tag, flow) =
            match std::mem::replace(&mut item.data, EventData::StreamEnd) {
                EventData::SequenceStart {
                    anchor, tag, style, ..
                } => (
                    Kind::Sequence,
                    "!!seq",
                    anchor,
                    tag,
                    style == SequenceStyle::Flow,
                ),
                EventData::MappingStart {
                    anchor, tag, style, ..
                } => (
                    Kind::Mapping,
                    "!!map",
                    anchor,
                    tag,
                    style == MappingStyle::Flow,
                ),
                _ => return Err(Stop::End),
            };
        let mut n = Composer::node(kind, default_tag, tag, CompactString::default(), &mut item);
        if flow {
            n.style = n.style | Style::FLOW;
        }
        self.anchor(&mut n, anchor);
        self.open.push(Open {
            node: n,
            base: self.stack.len(),
        });
        Ok(())
    }

    fn collection_end(&mut self) -> Result<(), Stop> {
        let Open { node: mut n, base } = self.open.pop().ok_or(Stop::End)?;
        n.content = self.stack.split_off(base);
        let end = self.next().ok_or(Stop::End)?;
        n.line_comment = end.line.into();
        n.foot_comment = end.foot.into();
        if n.kind == Kind::Mapping
            && !n.style.has(Style::FLOW)
            && !n.foot_comment.is_empty()
            && n.content.len() > 1
        {
            // A block mapping's foot comment goes to its last key.
            let i = n.content.len() - 2;
            n.content[i].foot_comment = std::mem::take(&mut n.foot_comment);
        }
        self.stack.push(n);
        Ok(())
    }
}

/// A collection being composed: its node, and where its entries start on
/// the stack.
struct Open {
    node: Node,
    base: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml/parse")
    }

    fn cases() -> Vec<(String, String)> {
        let mut out = Vec::new();
        let dir = std::fs::read_dir(fixtures()).expect("fixtures dir");
        for entry in dir {
            let path = entry.expect("dir entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let bytes = std::fs::read(&path).expect("read case");
            out.push((name, String::from_utf8(bytes).expect("utf-8 case")));
        }
        out.sort();
        out
    }

    /// The first difference between two trees, as a path and both values.
    fn diff(path: &str, got: &Node, want: &Node) -> Option<String> {
        macro_rules! field {
            ($f:ident) => {
                if got.$f != want.$f {
                    return Some(format!(
                        "{path}.{}: got {:?}, want {:?} (node {:?} at {}:{})",
                        stringify!($f),
                        got.$f,
                        want.$f,
                        want.value,
                        want.line,
                        want.column
                    ));
                }
            };
        }
        field!(kind);
        field!(style);
        field!(tag);
        field!(value);
        field!(anchor);
        field!(alias);
        field!(line);
        field!(column);
        field!(head_comment);
        field!(line_comment);
        field!(foot_comment);
        for (i, (g, w)) in got.content.iter().zip(&want.content).enumerate() {
            if let Some(d) = diff(&format!("{path}.content[{i}]"), g, w) {
                return Some(d);
            }
        }
        field!(content);
        None
    }

    fn check(name: &str, text: &str, golden: &str) -> Result<(), String> {
        let want: serde_json::Value =
            serde_json::from_str(golden).map_err(|e| format!("{name}: bad golden: {e}"))?;
        let (got, in_step) = parse_traced(text);
        if !in_step && got.is_ok() {
            return Err(format!("{name}: comment replay out of step"));
        }
        if let Some(err) = want.get("error").and_then(|e| e.as_str()) {
            return match got {
                Err(e) if e.to_string() == err => Ok(()),
                Err(e) => Err(format!("{name}: error {:?}, want {err:?}", e.to_string())),
                Ok(_) => Err(format!("{name}: parsed, want error {err:?}")),
            };
        }
        let want: Vec<Node> = if want.is_null() {
            Vec::new()
        } else {
            serde_json::from_value(want).map_err(|e| format!("{name}: bad golden: {e}"))?
        };
        let got = got.map_err(|e| format!("{name}: error {:?}, want a tree", e.to_string()))?;
        if got.len() != want.len() {
            return Err(format!(
                "{name}: {} documents, want {}",
                got.len(),
                want.len()
            ));
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if let Some(d) = diff(&format!("[{i}]"), g, w) {
                return Err(format!("{name}: {d}"));
            }
        }
        Ok(())
    }

    /// Every `NAME.yaml` in tests/fixtures/yaml/parse gives yaml.v3's tree
    /// or error as recorded in `NAME.json` (see regen.sh there).
    #[test]
    fn golden() {
        let cases = cases();
        assert!(cases.len() >= 100, "only {} golden cases", cases.len());
        let mut failures = Vec::new();
        for (name, text) in &cases {
            let golden = std::fs::read_to_string(fixtures().join(format!("{name}.json")))
                .expect("golden file");
            if let Err(e) = check(name, text, &golden) {
                failures.push(e);
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases differ:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }

    /// The token stream rebuilt from the events is libyaml's own.
    #[test]
    fn rebuilt_tokens_are_libyamls() {
        let mut failures = Vec::new();
        for (name, text) in cases() {
            let (text, _) = prepare(&text);
            let text = text.as_ref();
            let (events, err) = libyaml_events(text);
            if err.is_some() {
                continue;
            }
            let toks = match Recon::run(text.as_bytes(), &events) {
                Ok(t) => t,
                Err(Desync) => {
                    failures.push(format!("{name}: rebuild failed"));
                    continue;
                }
            };
            let mut input = text.as_bytes();
            let mut scanner = libyaml_safer::Scanner::new();
            scanner.set_input_string(&mut input);
            let want: Vec<(T, Mk)> = scanner
                .map(|t| t.map(|t| (token_type(&t.data), Mk::of(t.start_mark))))
                .collect::<Result<_, _>>()
                .expect("scanner accepts what the parser accepts");
            let got: Vec<(T, Mk)> = toks
                .iter()
                .filter(|t| !t.dead)
                .map(|t| (t.t, t.start))
                .collect();
            if got != want {
                let i = got
                    .iter()
                    .zip(&want)
                    .position(|(g, w)| g != w)
                    .unwrap_or(got.len().min(want.len()));
                failures.push(format!(
                    "{name}: token {i}: got {:?}, want {:?}",
                    got.get(i.saturating_sub(1)..(i + 2).min(got.len())),
                    want.get(i.saturating_sub(1)..(i + 2).min(want.len()))
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The parser thread gives what the single thread gives.
    #[test]
    fn threaded_matches_inline() {
        let mut text = String::new();
        for (name, case) in cases() {
            if name.starts_with("err_") || !matches!(parse(&case), Ok(d) if !d.is_empty()) {
                continue;
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            if !text.is_empty() {
                text.push_str("---\n");
            }
            text.push_str(case.strip_prefix('\u{feff}').unwrap_or(&case));
        }
        while text.len() < 2 * THREAD_MIN {
            text = format!("{text}\n---\n{text}");
        }
        let (inline, ok) = parse_with(&text, false);
        assert!(ok, "comment replay out of step");
        let (threaded, ok) = parse_with(&text, true);
        assert!(ok, "comment replay out of step");
        assert_eq!(inline, threaded);
        assert!(inline.is_ok_and(|d| d.len() > 100));
        // An error late in a large input.
        let bad = format!("{text}\n---\na: [1, 2\n");
        assert_eq!(parse_with(&bad, false).0, parse_with(&bad, true).0);
    }

    #[test]
    fn error_display_and_line() {
        let e = parse("a: [1, 2\nb: 3\n").expect_err("unclosed flow sequence");
        assert_eq!(
            e.to_string(),
            "yaml: line 1: did not find expected ',' or ']'"
        );
        assert_eq!(e.line(), Some(1));
        assert_eq!(e.message(), "did not find expected ',' or ']'");
        let e = parse("a: *x\n").expect_err("unknown anchor");
        assert_eq!(e.to_string(), "yaml: unknown anchor 'x' referenced");
        assert_eq!(e.line(), None);
    }

    /// Inputs libyaml-safer 0.3 panics on (a process abort in release) are
    /// kept from it: a block scalar running into the end of input, and a
    /// tag followed by `,` in a flow collection.
    #[test]
    fn libyaml_panics_are_avoided() {
        for (text, value) in [
            ("a: |\n  text", "text"),
            ("a: |+\n  text", "text"),
            ("a: |-\n  text", "text"),
            ("a: >\n  one\n  two", "one two"),
            ("a: |\n  text\n    ", "text\n  "),
        ] {
            let docs = parse(text).expect(text);
            assert_eq!(docs[0].content[0].content[1].value, value, "{text:?}");
        }
        for text in ["[!!str, a]\n", "x: {a: !t, b: c}\n", "x: [!<tag:x>, b]\n"] {
            let e = parse(text).expect_err(text);
            assert_eq!(
                e.message(),
                "did not find expected whitespace or line break"
            );
        }
        // A `!` and a `,` that are no tag: parsed as usual.
        let docs = parse("x: \"a !t, b\"\ny: [a!b, c]\n").expect("no tag");
        assert_eq!(docs[0].content[0].content[1].value, "a !t, b");
    }

    /// yaml.v3's nesting limit for flow collections (block ones: the
    /// `err_depth_block_seq` golden case). Ignored: libyaml-safer checks
    /// every open flow level at each token, slow in a debug build.
    #[test]
    #[ignore = "seconds in a debug build: libyaml-safer rechecks every open flow level per token"]
    fn flow_depth_limit() {
        let deep = format!("{}{}\n", "[".repeat(10001), "]".repeat(10001));
        let e = parse(&deep).expect_err("too deep");
        assert_eq!(e.to_string(), "yaml: exceeded max depth of 10000");
        let ok = format!("{}{}\n", "[".repeat(10000), "]".repeat(10000));
        assert!(parse(&ok).is_ok());
    }

    /// `cargo test --release -p function-runner --lib yaml::parse -- --ignored`:
    /// 4,000 Deployments (~5 MB).
    #[test]
    #[ignore = "a timing, for release builds by hand (see its doc comment)"]
    fn speed_4000_deployments() {
        let mut text = String::new();
        for i in 0..4000 {
            if i > 0 {
                text.push_str("---\n");
            }
            text.push_str(&format!(
                "# Deployment {i}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: default # ns\n  labels:\n    app: app-{i}\n    tier: backend\n  annotations:\n    config.kubernetes.io/index: '{i}'\n    description: \"A deployment for app {i}\"\nspec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n      # main container\n      - name: app\n        image: registry.example.com/app:{i}.0.1\n        args: [\"--port\", \"8080\", \"--verbose\"]\n        ports:\n        - containerPort: 8080\n          protocol: TCP\n        env:\n        - name: FOO\n          value: bar\n        - name: NUMBER\n          value: \"{i}\"\n        resources:\n          limits:\n            cpu: 500m\n            memory: 128Mi\n          requests:\n            cpu: 250m\n            memory: 64Mi\n        readinessProbe:\n          httpGet:\n            path: /healthz\n            port: 8080\n          initialDelaySeconds: 5\n        volumeMounts:\n        - name: config\n          mountPath: /etc/config\n      volumes:\n      - name: config\n        configMap:\n          name: app-config-{i}\n"
            ));
        }
        let mut best = std::time::Duration::MAX;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let docs = parse(&text).expect("deployments parse");
            best = best.min(t.elapsed());
            assert_eq!(docs.len(), 4000);
        }
        eprintln!("parsed {} bytes in {best:?}", text.len());
    }
}
