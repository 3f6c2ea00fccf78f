//! Packages as text: a package directory (or a stream of YAML documents)
//! read into ResourceList items, and a function's items written back to
//! files, the way `kpt fn eval` does it, without parsing every resource.
//!
//! # Why text
//!
//! kpt parses every resource into a YAML node tree and serialises it again,
//! several times per call (14-18 s and 1.1 GB for 4,000 Deployments on the
//! build box; see BENCHMARKS.md, "Issue 3: eval"). This module
//! works on the text instead: a file is split into documents at `---`
//! lines, a document becomes an item by indenting it under `items:`, and the
//! annotations kpt adds are inserted into (and later removed from) the
//! `metadata.annotations` mapping by editing lines. A small block-YAML line
//! scanner ([`Scan`]) knows enough YAML for that: keys and their
//! indentation, comments, block scalars (`|`, `>`: their content is never
//! taken for keys), quoted and flow values that continue on other lines,
//! and single- or multi-line flow mappings (`metadata: {name: x}`,
//! `annotations: {}`, JSON).
//!
//! # What kpt does, and what is reproduced here
//!
//! Observed with kpt 1.0.0-beta.56:
//!
//! - Files: `*.yaml`, `*.yml`, `*.json` and `Kptfile`, hidden ones and
//!   subpackages included, walked in Go's `filepath.Walk` order (names
//!   sorted bytewise in each directory), `.krmignore` at the package root and
//!   at subpackage roots (a gitignore subset), symlinks to files followed.
//! - Documents: split at lines starting with `---` (a comment may follow; any
//!   other text is an error); comments before the first `---` separator are
//!   dropped, like empty documents; `...` ends a document.
//! - Items get `config.kubernetes.io/index|path`,
//!   `internal.config.kubernetes.io/index|path|seqindent` (sorted), then
//!   `internal.config.kubernetes.io/annotations-migration-resource-id`,
//!   `internal.config.kubernetes.io/id` and `config.k8s.io/id`, as
//!   single-quoted strings appended to `metadata.annotations` (created at
//!   the end of `metadata` if missing; an empty `annotations: {}` becomes a
//!   block mapping, a non-empty flow mapping stays flow).
//! - On the way back the annotations kpt added are removed, and so is an
//!   `annotations` mapping left empty (or empty from the start). A file is
//!   the items with its path, in index order (items without an index
//!   first), joined by `---`; a `.json` file with one item is written as
//!   indented JSON with sorted keys; an item without a path goes to
//!   `[namespace/]kind_name.yaml` (kind lower-cased); a file that held
//!   resources and has none left is deleted.
//! - Formatting: kpt re-serialises every resource. For the usual block style
//!   (2-space indentation, what kpt and most tools write) that changes
//!   nothing except what this module also does: CRLF becomes LF, blank lines
//!   outside block scalars and trailing spaces after values are removed,
//!   document markers go, the last line ends with a newline.
//!
//! Known differences (the text is kept as written where kpt re-formats it):
//! other indentations (kpt re-indents to 2 spaces), extra spaces after `-`
//! or `:`, folded (`>`) scalars (kpt turns them into quoted strings),
//! multi-line plain or quoted scalars and multi-line flow collections inside
//! block documents (kpt joins them), complex keys, and the comments yaml.v3
//! moves or duplicates (a foot comment after a nested mapping that had a
//! blank line in it). Sequence styles are followed as kyaml does: items
//! are sent in compact style and written back in the style kyaml derived
//! from the file (`wide` or `compact`, see [`set_seq_style`]).
//!
//! kpt also copies comments a function dropped back from the input and
//! moves keys a function added to the end of their mapping (kyaml's
//! `CopyComments` and `SyncOrder`); here the function's text is kept as it
//! is. Both give the same files for functions that keep comments and
//! append new keys, which is what kyaml-based functions (kpt's catalog)
//! do.
//!
//! # Fall-back
//!
//! Where the text cannot be edited safely (anchors, aliases or tags on
//! `metadata` or `annotations`, keys this scanner does not read around
//! them, content on a `---` line, a `%` directive) the document is parsed
//! with `serde_yaml_ng` and written again with [`emit`] (yaml.v3's style): its
//! comments are lost, as they would be with any tool that parses YAML. A
//! function's output that is not block YAML at the top (JSON, a flow
//! `items` list) is parsed the same way and its items written in block
//! style. A document that is a flow mapping over several lines (pretty
//! JSON) is put on one line, as yaml.v3 writes flow collections.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The annotations kpt adds to items and removes again.
pub mod annotations {
    /// Path of the file, relative to the package (legacy form).
    pub const LEGACY_PATH: &str = "config.kubernetes.io/path";
    /// Index of the document in its file (legacy form).
    pub const LEGACY_INDEX: &str = "config.kubernetes.io/index";
    /// Path of the file, relative to the package.
    pub const PATH: &str = "internal.config.kubernetes.io/path";
    /// Index of the document in its file.
    pub const INDEX: &str = "internal.config.kubernetes.io/index";
    /// `compact` or `wide`: how sequences were indented.
    pub const SEQ_INDENT: &str = "internal.config.kubernetes.io/seqindent";
    /// kpt's id for matching an item with the one it sent.
    pub const MIGRATION_ID: &str =
        "internal.config.kubernetes.io/annotations-migration-resource-id";
    /// kpt's item id.
    pub const ID: &str = "internal.config.kubernetes.io/id";
    /// kpt's item id (legacy form).
    pub const LEGACY_ID: &str = "config.k8s.io/id";

    /// The ids, removed from every output.
    pub const IDS: [&str; 3] = [MIGRATION_ID, ID, LEGACY_ID];

    /// Whether kpt adds (and removes) this annotation.
    pub fn is_kpt(key: &str) -> bool {
        matches!(
            key,
            LEGACY_PATH | LEGACY_INDEX | PATH | INDEX | SEQ_INDENT | MIGRATION_ID | ID | LEGACY_ID
        )
    }

    /// Whether this is one of kpt's ids.
    pub fn is_id(key: &str) -> bool {
        IDS.contains(&key)
    }
}

/// Why a document could not be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    /// The document is not YAML this module or serde_yaml_ng can read.
    #[error("{0}")]
    Invalid(String),
    /// The document is not a mapping (a resource must be).
    #[error("a resource must be a mapping, found {0}")]
    NotAMapping(&'static str),
}

/// Why a package could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("function must not modify resources outside of package: resource has path {0}")]
    OutsidePackage(String),
    #[error(
        "resource at path {} and index {} already exists",
        go_quote(path),
        go_quote(index)
    )]
    Duplicate { path: String, index: String },
    #[error("resource input to function has mismatched legacy and internal {0} annotations")]
    Mismatched(&'static str),
    #[error("{path}: invalid index annotation {}", go_quote(value))]
    BadIndex { path: String, value: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------
// The line scanner

/// What a line of a block-YAML document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// Only spaces (outside a block scalar, or trailing one that clips them).
    Blank,
    /// A comment line.
    Comment,
    /// A structural line: a key, a sequence entry, a scalar on its own.
    Content,
    /// Inside a block scalar (`|`, `>`): content, whatever it looks like.
    BlockScalar,
    /// The continuation of a multi-line plain or quoted scalar or of a flow
    /// collection.
    Continuation,
}

/// One line: `start..end` of the text (without its `\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub start: usize,
    pub end: usize,
    pub indent: usize,
    pub kind: LineKind,
}

impl Line {
    fn is_solid(&self) -> bool {
        !matches!(self.kind, LineKind::Blank | LineKind::Comment)
            && self.indent < self.end - self.start
    }
}

/// A document's lines, classified.
#[derive(Debug)]
pub struct Scan<'a> {
    pub text: &'a str,
    pub lines: Vec<Line>,
    /// Multi-line plain/quoted scalars or flow collections, or tabs as
    /// indentation: the formatting is left alone.
    pub irregular: bool,
}

enum State {
    Normal,
    Block {
        parent: usize,
        keep: bool,
    },
    /// Inside a quoted scalar (quote, depth of the flow collections around it).
    Quoted(u8, usize),
    Flow(usize),
}

/// What a content line opens for the lines after it.
enum Opens {
    Nothing,
    Block { parent: usize, keep: bool },
    Quoted(u8, usize),
    Flow(usize),
    Plain { threshold: usize },
}

impl<'a> Scan<'a> {
    pub fn new(text: &'a str) -> Scan<'a> {
        let mut lines: Vec<Line> = Vec::with_capacity(text.len() / 20 + 1);
        let mut irregular = false;
        let mut state = State::Normal;
        let mut plain: Option<usize> = None;
        let mut start = 0;
        let bytes = text.as_bytes();
        while start < bytes.len() {
            let end = memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            let line = &bytes[start..end];
            let indent = line.iter().take_while(|b| **b == b' ').count();
            let rest = &line[indent..];
            let blank = rest
                .iter()
                .all(|b| *b == b' ' || *b == b'\t' || *b == b'\r');
            let kind = 'kind: {
                match state {
                    State::Block { parent, keep } => {
                        if blank || indent > parent {
                            break 'kind LineKind::BlockScalar;
                        }
                        end_block(&mut lines, keep);
                        state = State::Normal;
                    }
                    State::Quoted(q, depth) => {
                        if let Some(close) = find_quote_end(rest, q, 0) {
                            state = after_quote(&rest[close..], depth);
                        }
                        break 'kind LineKind::Continuation;
                    }
                    State::Flow(depth) => {
                        state = match flow_depth(rest, depth) {
                            FlowScan::Open(d) => State::Flow(d),
                            FlowScan::InQuote(q, d) => State::Quoted(q, d),
                            FlowScan::Closed => State::Normal,
                        };
                        break 'kind LineKind::Continuation;
                    }
                    State::Normal => {}
                }
                if blank {
                    break 'kind LineKind::Blank;
                }
                if rest[0] == b'#' {
                    break 'kind LineKind::Comment;
                }
                if plain.is_some_and(|threshold| indent > threshold) {
                    irregular = true;
                    break 'kind LineKind::Continuation;
                }
                plain = None;
                if rest[0] == b'\t' {
                    irregular = true;
                }
                match analyze(rest, indent) {
                    Opens::Nothing => {}
                    Opens::Block { parent, keep } => state = State::Block { parent, keep },
                    Opens::Quoted(q, depth) => {
                        irregular = true;
                        state = State::Quoted(q, depth);
                    }
                    Opens::Flow(depth) => {
                        irregular = true;
                        state = State::Flow(depth);
                    }
                    Opens::Plain { threshold } => plain = Some(threshold),
                }
                LineKind::Content
            };
            lines.push(Line {
                start,
                end,
                indent,
                kind,
            });
            start = end + 1;
        }
        if let State::Block { keep, .. } = state {
            end_block(&mut lines, keep);
        }
        Scan {
            text,
            lines,
            irregular,
        }
    }

    /// The last line in `from..to` that is not blank or a comment.
    fn last_solid(&self, from: usize, to: usize) -> Option<usize> {
        (from..to).rev().find(|&i| self.lines[i].is_solid())
    }

    /// The first content line in `from..to`.
    fn first_content(&self, from: usize, to: usize) -> Option<usize> {
        (from..to).find(|&i| self.lines[i].kind == LineKind::Content)
    }

    /// The entries of the block mapping whose keys are at `indent`, in lines
    /// `from..to`. Compact sequence entries (`- `) at `indent` belong to the
    /// entry before them.
    fn entries(&self, from: usize, to: usize, indent: usize) -> Result<Vec<Entry>, Unsupported> {
        let mut entries: Vec<Entry> = Vec::new();
        for i in from..to {
            let l = self.lines[i];
            if l.kind != LineKind::Content {
                continue;
            }
            if l.indent < indent {
                return Err(Unsupported("indentation"));
            }
            if l.indent > indent {
                continue;
            }
            let rest = &self.text[l.start + l.indent..l.end];
            if rest == "-" || rest.starts_with("- ") {
                if entries.is_empty() {
                    return Err(Unsupported("a sequence where a mapping was expected"));
                }
                continue;
            }
            let (key, after) = match parse_key(rest) {
                Some(k) => k,
                // A complex key (`? key` / `: value`): never one we look for.
                None if rest == "?"
                    || rest.starts_with("? ")
                    || rest.starts_with(": ")
                    || rest == ":" =>
                {
                    ("\0complex".to_owned(), 1)
                }
                None => return Err(Unsupported("a key this scanner does not read")),
            };
            let value = l.start + l.indent + after + count_spaces(&rest[after..]);
            if let Some(prev) = entries.last_mut() {
                prev.end = i;
            }
            entries.push(Entry {
                key,
                line: i,
                value,
                end: to,
            });
        }
        Ok(entries)
    }

    /// The text of an entry's value on its key line (up to the line end).
    fn value_text(&self, e: &Entry) -> &'a str {
        &self.text[e.value..self.lines[e.line].end]
    }
}

/// Trailing blank lines of a block scalar that clips or strips them are
/// blank lines, not content.
fn end_block(lines: &mut [Line], keep: bool) {
    if keep {
        return;
    }
    for l in lines.iter_mut().rev() {
        if l.kind == LineKind::BlockScalar && l.indent >= l.end - l.start {
            l.kind = LineKind::Blank;
        } else {
            break;
        }
    }
}

/// A construct the text editor does not handle: use the fall-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported(pub &'static str);

/// One entry of a block mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: String,
    /// Index of the key line.
    line: usize,
    /// Byte offset where the value starts (after `:` and spaces).
    value: usize,
    /// First line after the entry (exclusive end).
    end: usize,
}

fn count_spaces(s: &str) -> usize {
    s.bytes().take_while(|b| *b == b' ' || *b == b'\t').count()
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|b| *b == needle)
}

/// Reads a block mapping key at the start of `s`: `(key, offset after ':')`.
pub fn parse_key(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    let first = *b.first()?;
    let (key, after_key) = match first {
        b'"' => {
            let end = find_quote_end(b, b'"', 1)?;
            (unescape_double(&s[1..end - 1])?, end)
        }
        b'\'' => {
            let end = find_quote_end(b, b'\'', 1)?;
            (s[1..end - 1].replace("''", "'"), end)
        }
        b'[' | b'{' | b'&' | b'*' | b'!' | b'|' | b'>' | b'%' | b'@' | b'`' | b'?' | b'#'
        | b',' => return None,
        _ => {
            let mut i = 0;
            loop {
                if i >= b.len() {
                    return None;
                }
                match b[i] {
                    b':' if i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t' => break,
                    b'#' if i > 0 && (b[i - 1] == b' ' || b[i - 1] == b'\t') => return None,
                    _ => i += 1,
                }
            }
            let key = s[..i].trim_end();
            if key.is_empty() {
                return None;
            }
            return Some((key.to_owned(), i + 1));
        }
    };
    let rest = &b[after_key..];
    let sp = rest.iter().take_while(|c| **c == b' ').count();
    if rest.get(sp) == Some(&b':') && (sp + 1 == rest.len() || matches!(rest[sp + 1], b' ' | b'\t'))
    {
        Some((key, after_key + sp + 1))
    } else {
        None
    }
}

/// The offset just after the quote closing a scalar that opened at
/// `from - 1` (so `from` is the first character inside), if on this line.
fn find_quote_end(b: &[u8], q: u8, from: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        if q == b'"' && b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == q {
            if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

enum FlowScan {
    Open(usize),
    InQuote(u8, usize),
    Closed,
}

/// Follows flow brackets on one line, starting at `depth`.
fn flow_depth(b: &[u8], mut depth: usize) -> FlowScan {
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => match find_quote_end(b, b[i], i + 1) {
                Some(e) => {
                    i = e;
                    continue;
                }
                None => return FlowScan::InQuote(b[i], depth),
            },
            b'#' if i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t' => break,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return FlowScan::Closed;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if depth == 0 {
        FlowScan::Closed
    } else {
        FlowScan::Open(depth)
    }
}

/// After a quoted scalar closed on a continuation line: still inside a flow
/// collection (`depth`)?
fn after_quote(rest: &[u8], depth: usize) -> State {
    if depth == 0 {
        return State::Normal;
    }
    match flow_depth(rest, depth) {
        FlowScan::Open(d) => State::Flow(d),
        FlowScan::InQuote(q, d) => State::Quoted(q, d),
        FlowScan::Closed => State::Normal,
    }
}

/// Looks at a content line (without its indentation, which is `indent`).
fn analyze(rest: &[u8], indent: usize) -> Opens {
    let mut col = indent;
    let mut s = rest;
    let mut dash: Option<usize> = None;
    while s.first() == Some(&b'-') && (s.len() == 1 || s[1] == b' ') {
        dash = Some(col);
        let sp = 1 + s[1..].iter().take_while(|b| **b == b' ').count();
        col += sp;
        s = &s[sp..];
    }
    if s.is_empty() || s[0] == b'#' {
        return Opens::Nothing;
    }
    let text = std::str::from_utf8(s).unwrap_or("");
    let (mut value, key_col) = match parse_key(text) {
        Some((_, after)) => {
            let v = &s[after..];
            (
                &v[v.iter().take_while(|b| **b == b' ' || **b == b'\t').count()..],
                Some(col),
            )
        }
        None => (s, None),
    };
    // Anchors and tags before the value.
    while matches!(value.first(), Some(b'&' | b'!')) {
        let tok = value.iter().take_while(|b| **b != b' ').count();
        value = &value[tok..];
        value = &value[value.iter().take_while(|b| **b == b' ').count()..];
    }
    let parent = key_col.or(dash).unwrap_or(indent);
    let Some(&first) = value.first() else {
        return Opens::Nothing;
    };
    match first {
        b'#' | b'*' => Opens::Nothing,
        b'|' | b'>' => {
            let header = value[1..]
                .iter()
                .take_while(|b| matches!(b, b'-' | b'+' | b'0'..=b'9'))
                .count();
            let keep = value[1..1 + header].contains(&b'+');
            Opens::Block { parent, keep }
        }
        b'"' | b'\'' => match find_quote_end(value, first, 1) {
            Some(_) => Opens::Nothing,
            None => Opens::Quoted(first, 0),
        },
        b'[' | b'{' => match flow_depth(value, 0) {
            FlowScan::Closed => Opens::Nothing,
            FlowScan::Open(d) => Opens::Flow(d),
            FlowScan::InQuote(q, d) => Opens::Quoted(q, d),
        },
        _ => match (key_col, dash) {
            (Some(k), _) => Opens::Plain { threshold: k },
            (None, Some(d)) => Opens::Plain { threshold: d },
            (None, None) => Opens::Nothing,
        },
    }
}

/// Decodes the inside of a double-quoted scalar (one line).
fn unescape_double(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let hex = |n: usize, chars: &mut std::str::Chars<'_>| -> Option<char> {
            let h: String = chars.by_ref().take(n).collect();
            if h.len() != n {
                return None;
            }
            char::from_u32(u32::from_str_radix(&h, 16).ok()?)
        };
        out.push(match e {
            '0' => '\0',
            'a' => '\x07',
            'b' => '\x08',
            't' | '\t' => '\t',
            'n' => '\n',
            'v' => '\x0b',
            'f' => '\x0c',
            'r' => '\r',
            'e' => '\x1b',
            ' ' => ' ',
            '"' => '"',
            '/' => '/',
            '\\' => '\\',
            'N' => '\u{85}',
            '_' => '\u{a0}',
            'L' => '\u{2028}',
            'P' => '\u{2029}',
            'x' => hex(2, &mut chars)?,
            'u' => hex(4, &mut chars)?,
            'U' => hex(8, &mut chars)?,
            _ => return None,
        });
    }
    Some(out)
}

/// Reads a one-line scalar value (plain, single- or double-quoted) with an
/// optional trailing comment. `None` for anything else (block scalars, flow
/// collections, aliases, tags, unclosed quotes).
pub fn parse_scalar(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let Some(&first) = b.first() else {
        return Some(String::new());
    };
    let tail_ok = |rest: &str| {
        let rest = rest.trim_start_matches([' ', '\t']);
        rest.is_empty() || rest.starts_with('#')
    };
    match first {
        b'#' => Some(String::new()),
        b'"' => {
            let end = find_quote_end(b, b'"', 1)?;
            if !tail_ok(&v[end..]) {
                return None;
            }
            unescape_double(&v[1..end - 1])
        }
        b'\'' => {
            let end = find_quote_end(b, b'\'', 1)?;
            if !tail_ok(&v[end..]) {
                return None;
            }
            Some(v[1..end - 1].replace("''", "'"))
        }
        b'|' | b'>' | b'[' | b'{' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' => None,
        _ => {
            let mut end = b.len();
            for i in 1..b.len() {
                if b[i] == b'#' && (b[i - 1] == b' ' || b[i - 1] == b'\t') {
                    end = i;
                    break;
                }
            }
            let s = v[..end].trim_end_matches([' ', '\t']);
            // A plain scalar that YAML reads as null is empty here.
            Some(if matches!(s, "~" | "null" | "Null" | "NULL") {
                String::new()
            } else {
                s.to_owned()
            })
        }
    }
}

/// A value to write as a single-quoted YAML scalar, as kpt writes its
/// annotations.
pub fn single_quoted(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

// ---------------------------------------------------------------------------
// Flow mappings

/// One entry of a flow mapping: byte offsets in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FlowEntry {
    key: String,
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

/// A flow mapping `{...}` in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FlowMap {
    open: usize,
    close: usize,
    entries: Vec<FlowEntry>,
}

fn skip_flow_space(b: &[u8], mut i: usize) -> usize {
    loop {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        if i < b.len() && b[i] == b'#' && (i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        return i;
    }
}

/// The end (exclusive) of the flow collection opening at `open`.
fn flow_collection_end(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                i = find_quote_end(b, b[i], i + 1)?;
                continue;
            }
            b'#' if i > 0 && matches!(b[i - 1], b' ' | b'\t' | b'\n') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl FlowMap {
    /// Parses the flow mapping opening at `open` (which must be `{`).
    fn parse(text: &str, open: usize) -> Option<FlowMap> {
        let b = text.as_bytes();
        if b.get(open) != Some(&b'{') {
            return None;
        }
        let mut entries = Vec::new();
        let mut i = open + 1;
        loop {
            i = skip_flow_space(b, i);
            match *b.get(i)? {
                b'}' => {
                    return Some(FlowMap {
                        open,
                        close: i,
                        entries,
                    })
                }
                b'{' | b'[' | b'?' | b',' | b'&' | b'*' | b'!' => return None,
                _ => {}
            }
            let key_start = i;
            let key = match b[i] {
                b'"' => {
                    let end = find_quote_end(b, b'"', i + 1)?;
                    let k = unescape_double(&text[i + 1..end - 1])?;
                    i = end;
                    k
                }
                b'\'' => {
                    let end = find_quote_end(b, b'\'', i + 1)?;
                    let k = text[i + 1..end - 1].replace("''", "'");
                    i = end;
                    k
                }
                _ => {
                    let s = i;
                    while i < b.len() {
                        match b[i] {
                            b':' if matches!(
                                b.get(i + 1),
                                None | Some(b' ' | b'\t' | b'\n' | b',' | b'}' | b']')
                            ) =>
                            {
                                break
                            }
                            b',' | b'}' | b'{' | b'[' | b']' | b'\n' => break,
                            _ => i += 1,
                        }
                    }
                    text[s..i].trim_end().to_owned()
                }
            };
            while i < b.len() && matches!(b[i], b' ' | b'\t') {
                i += 1;
            }
            let (value_start, value_end) = if b.get(i) == Some(&b':') {
                i = skip_flow_space(b, i + 1);
                let vs = i;
                let ve = match *b.get(i)? {
                    b'{' | b'[' => flow_collection_end(b, i)?,
                    b'"' | b'\'' => find_quote_end(b, b[i], i + 1)?,
                    b',' | b'}' => i,
                    _ => {
                        let mut j = i;
                        while j < b.len() {
                            match b[j] {
                                b',' | b'}' | b']' | b'\n' => break,
                                b'#' if matches!(b[j - 1], b' ' | b'\t') => break,
                                _ => j += 1,
                            }
                        }
                        let mut e = j;
                        while e > vs && matches!(b[e - 1], b' ' | b'\t') {
                            e -= 1;
                        }
                        e
                    }
                };
                (vs, ve)
            } else {
                (i, i)
            };
            entries.push(FlowEntry {
                key,
                key_start,
                value_start,
                value_end,
            });
            i = skip_flow_space(b, value_end);
            match *b.get(i)? {
                b',' => i += 1,
                b'}' => {}
                _ => return None,
            }
        }
    }

    fn get(&self, key: &str) -> Option<&FlowEntry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// Where new entries go, and whether they need a leading `, `.
    fn insert_point(&self) -> (usize, bool) {
        match self.entries.last() {
            Some(e) => (e.value_end, true),
            None => (self.open + 1, false),
        }
    }

    /// The byte range to delete to remove entry `j`.
    fn removal(&self, j: usize) -> (usize, usize) {
        let e = &self.entries[j];
        if j + 1 < self.entries.len() {
            (e.key_start, self.entries[j + 1].key_start)
        } else if j > 0 {
            (self.entries[j - 1].value_end, e.value_end)
        } else {
            (e.key_start, e.value_end)
        }
    }
}

// ---------------------------------------------------------------------------
// Text edits

/// A set of non-overlapping replacements.
#[derive(Default)]
struct Edits {
    edits: Vec<(usize, usize, String)>,
}

impl Edits {
    fn replace(&mut self, from: usize, to: usize, with: impl Into<String>) {
        self.edits.push((from, to, with.into()));
    }
    fn insert(&mut self, at: usize, with: impl Into<String>) {
        self.replace(at, at, with);
    }
    fn apply(mut self, text: &str) -> String {
        self.edits.sort_by_key(|e| (e.0, e.1));
        let mut out =
            String::with_capacity(text.len() + self.edits.iter().map(|e| e.2.len()).sum::<usize>());
        let mut at = 0;
        for (from, to, with) in self.edits {
            if from < at {
                continue;
            }
            out.push_str(&text[at..from]);
            out.push_str(&with);
            at = to;
        }
        out.push_str(&text[at..]);
        out
    }
}

/// Start of line `i` and start of the line after it (or the text end).
fn line_span(scan: &Scan<'_>, i: usize) -> (usize, usize) {
    let l = scan.lines[i];
    (l.start, (l.end + 1).min(scan.text.len()))
}

/// Where the annotations of a document live.
enum AnnLoc {
    /// No metadata at all: append after this line (None: empty document).
    NoMetadata { after: Option<usize> },
    /// Block metadata without annotations.
    BlockNoAnn { after: usize, child_indent: usize },
    /// Block annotations: entries at `indent` in lines `from..to`.
    Block {
        key_line: usize,
        from: usize,
        to: usize,
        indent: usize,
    },
    /// A flow mapping of annotations inside block metadata, on `key_line`.
    FlowInBlock {
        key_line: usize,
        value: usize,
        child_indent: usize,
    },
    /// Flow metadata (a mapping at `open`) without annotations.
    FlowMetaNoAnn { open: usize },
    /// Flow annotations at `open` inside flow metadata at `meta_open`.
    FlowInFlow { meta_open: usize, open: usize },
    /// The document is a flow mapping (JSON) without metadata.
    FlowDocNoMeta { open: usize },
}

/// The document's metadata: `apiVersion`, `kind`, `metadata.name|namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// Whether `metadata` is a mapping.
    pub has_metadata: bool,
}

struct View<'a> {
    scan: Scan<'a>,
    meta: Meta,
    loc: AnnLoc,
}

fn first_content_offset(scan: &Scan<'_>) -> Option<usize> {
    scan.lines
        .iter()
        .find(|l| l.kind == LineKind::Content)
        .map(|l| l.start + l.indent)
}

impl<'a> View<'a> {
    fn new(text: &'a str) -> Result<View<'a>, Unsupported> {
        let scan = Scan::new(text);
        let mut meta = Meta::default();
        let Some(first) = first_content_offset(&scan) else {
            return Ok(View {
                scan,
                meta,
                loc: AnnLoc::NoMetadata { after: None },
            });
        };
        if text.as_bytes()[first] == b'{' {
            return Self::flow_doc(scan, first);
        }
        if first > 0 && text.as_bytes()[first - 1] != b'\n' {
            return Err(Unsupported("an indented document"));
        }
        let top = scan.entries(0, scan.lines.len(), 0)?;
        let mut metadata = None;
        for e in &top {
            match e.key.as_str() {
                "apiVersion" => {
                    meta.api_version =
                        parse_scalar(scan.value_text(e)).ok_or(Unsupported("apiVersion"))?
                }
                "kind" => {
                    meta.kind = parse_scalar(scan.value_text(e)).ok_or(Unsupported("kind"))?
                }
                "metadata" => metadata = Some(e.clone()),
                _ => {}
            }
        }
        let Some(m) = metadata else {
            let after = scan.last_solid(0, scan.lines.len());
            return Ok(View {
                scan,
                meta,
                loc: AnnLoc::NoMetadata { after },
            });
        };
        let v = scan.value_text(&m);
        if v.starts_with('{') {
            meta.has_metadata = true;
            let fm = FlowMap::parse(text, m.value).ok_or(Unsupported("flow metadata"))?;
            return Self::flow_meta(scan, meta, fm);
        }
        if !(v.is_empty() || v.starts_with('#')) {
            return Err(Unsupported("metadata value"));
        }
        meta.has_metadata = true;
        let Some(first_child) = scan.first_content(m.line + 1, m.end) else {
            return Ok(View {
                scan,
                meta,
                loc: AnnLoc::BlockNoAnn {
                    after: m.line,
                    child_indent: 2,
                },
            });
        };
        let child_indent = scan.lines[first_child].indent;
        if child_indent == 0 {
            return Err(Unsupported("metadata indentation"));
        }
        let children = scan.entries(m.line + 1, m.end, child_indent)?;
        let mut ann = None;
        for c in &children {
            match c.key.as_str() {
                "name" => {
                    meta.name = parse_scalar(scan.value_text(c)).ok_or(Unsupported("name"))?
                }
                "namespace" => {
                    meta.namespace =
                        parse_scalar(scan.value_text(c)).ok_or(Unsupported("namespace"))?
                }
                "annotations" => ann = Some(c.clone()),
                _ => {}
            }
        }
        let loc = match ann {
            None => AnnLoc::BlockNoAnn {
                after: scan.last_solid(m.line, m.end).unwrap_or(m.line),
                child_indent,
            },
            Some(a) => {
                let v = scan.value_text(&a);
                if v.starts_with('{') {
                    AnnLoc::FlowInBlock {
                        key_line: a.line,
                        value: a.value,
                        child_indent,
                    }
                } else if v.is_empty() || v.starts_with('#') {
                    let indent = match scan.first_content(a.line + 1, a.end) {
                        Some(i) => scan.lines[i].indent,
                        None => child_indent * 2,
                    };
                    if indent <= child_indent {
                        return Err(Unsupported("annotations indentation"));
                    }
                    AnnLoc::Block {
                        key_line: a.line,
                        from: a.line + 1,
                        to: a.end,
                        indent,
                    }
                } else {
                    return Err(Unsupported("annotations value"));
                }
            }
        };
        Ok(View { scan, meta, loc })
    }

    fn flow_doc(scan: Scan<'a>, open: usize) -> Result<View<'a>, Unsupported> {
        let text = scan.text;
        let doc = FlowMap::parse(text, open).ok_or(Unsupported("flow document"))?;
        // Nothing but comments may follow.
        let end = skip_flow_space(text.as_bytes(), doc.close + 1);
        if end < text.len() {
            return Err(Unsupported("text after a flow document"));
        }
        let mut meta = Meta::default();
        let mut metadata = None;
        for e in &doc.entries {
            let v = &text[e.value_start..e.value_end];
            match e.key.as_str() {
                "apiVersion" => {
                    meta.api_version = parse_scalar(v).ok_or(Unsupported("apiVersion"))?
                }
                "kind" => meta.kind = parse_scalar(v).ok_or(Unsupported("kind"))?,
                "metadata" => metadata = Some(e.clone()),
                _ => {}
            }
        }
        match metadata {
            None => Ok(View {
                scan,
                meta,
                loc: AnnLoc::FlowDocNoMeta { open },
            }),
            Some(m) => {
                let fm = FlowMap::parse(text, m.value_start).ok_or(Unsupported("flow metadata"))?;
                meta.has_metadata = true;
                Self::flow_meta(scan, meta, fm)
            }
        }
    }

    fn flow_meta(scan: Scan<'a>, mut meta: Meta, fm: FlowMap) -> Result<View<'a>, Unsupported> {
        let text = scan.text;
        let mut loc = AnnLoc::FlowMetaNoAnn { open: fm.open };
        for e in &fm.entries {
            let v = &text[e.value_start..e.value_end];
            match e.key.as_str() {
                "name" => meta.name = parse_scalar(v).ok_or(Unsupported("name"))?,
                "namespace" => meta.namespace = parse_scalar(v).ok_or(Unsupported("namespace"))?,
                "annotations" => {
                    if !v.starts_with('{') {
                        return Err(Unsupported("annotations value"));
                    }
                    loc = AnnLoc::FlowInFlow {
                        meta_open: fm.open,
                        open: e.value_start,
                    };
                }
                _ => {}
            }
        }
        Ok(View { scan, meta, loc })
    }

    /// The annotations as `(key, value, value span)`; values that are not
    /// one-line scalars are read as `None`.
    fn annotations(&self) -> Result<Vec<(String, Option<String>)>, Unsupported> {
        let text = self.scan.text;
        Ok(match self.loc {
            AnnLoc::Block {
                from, to, indent, ..
            } => self
                .scan
                .entries(from, to, indent)?
                .into_iter()
                .map(|e| {
                    let v = parse_scalar(self.scan.value_text(&e));
                    (e.key, v)
                })
                .collect(),
            AnnLoc::FlowInBlock { value, .. } => {
                let fm = FlowMap::parse(text, value).ok_or(Unsupported("flow annotations"))?;
                flow_pairs(text, &fm)
            }
            AnnLoc::FlowInFlow { open, .. } => {
                let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow annotations"))?;
                flow_pairs(text, &fm)
            }
            _ => Vec::new(),
        })
    }

    /// Sets `set` (replacing values in place, appending new keys).
    fn set(&self, set: &[(&str, &str)]) -> Result<String, Unsupported> {
        let text = self.scan.text;
        let scan = &self.scan;
        let mut edits = Edits::default();
        let block_lines = |indent: usize, pairs: &[(&str, &str)]| {
            let mut s = String::new();
            for (k, v) in pairs {
                s.push_str(&" ".repeat(indent));
                s.push_str(&plain_key(k));
                s.push_str(": ");
                s.push_str(&single_quoted(v));
                s.push('\n');
            }
            s
        };
        let flow_pairs_text = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", plain_key(k), single_quoted(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.loc {
            AnnLoc::NoMetadata { after } => {
                let at = match after {
                    Some(i) => line_span(scan, i).1,
                    None => text.len(),
                };
                let mut s = String::new();
                if at > 0 && !text[..at].ends_with('\n') {
                    s.push('\n');
                }
                s.push_str("metadata:\n  annotations:\n");
                s.push_str(&block_lines(4, set));
                edits.insert(at, s);
            }
            AnnLoc::BlockNoAnn {
                after,
                child_indent,
            } => {
                let at = line_span(scan, after).1;
                let mut s = String::new();
                if !text[..at].ends_with('\n') {
                    s.push('\n');
                }
                s.push_str(&" ".repeat(child_indent));
                s.push_str("annotations:\n");
                s.push_str(&block_lines(child_indent * 2, set));
                edits.insert(at, s);
            }
            AnnLoc::Block {
                key_line,
                from,
                to,
                indent,
            } => {
                let existing = scan.entries(from, to, indent)?;
                let mut new = Vec::new();
                for (k, v) in set {
                    match existing.iter().find(|e| e.key == *k) {
                        Some(e) => {
                            let last = scan.last_solid(e.line, e.end).unwrap_or(e.line);
                            edits.replace(e.value, scan.lines[last].end, single_quoted(v));
                        }
                        None => new.push((*k, *v)),
                    }
                }
                if !new.is_empty() {
                    let after = scan.last_solid(key_line, to).unwrap_or(key_line);
                    let at = line_span(scan, after).1;
                    let mut s = String::new();
                    if !text[..at].ends_with('\n') {
                        s.push('\n');
                    }
                    s.push_str(&block_lines(indent, &new));
                    edits.insert(at, s);
                }
            }
            AnnLoc::FlowInBlock {
                key_line,
                value,
                child_indent,
            } => {
                let fm = FlowMap::parse(text, value).ok_or(Unsupported("flow annotations"))?;
                if fm.entries.is_empty() {
                    // kpt turns an empty `{}` into a block mapping.
                    let close_line = line_of(scan, fm.close);
                    let mut start = value;
                    while start > scan.lines[key_line].start && text.as_bytes()[start - 1] == b' ' {
                        start -= 1;
                    }
                    edits.replace(start, fm.close + 1, "");
                    let at = line_span(scan, close_line).1;
                    let mut s = String::new();
                    if !text[..at].ends_with('\n') {
                        s.push('\n');
                    }
                    s.push_str(&block_lines(child_indent * 2, set));
                    edits.insert(at, s);
                } else {
                    flow_set(&mut edits, &fm, set, &flow_pairs_text);
                }
            }
            AnnLoc::FlowInFlow { open, .. } => {
                let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow annotations"))?;
                flow_set(&mut edits, &fm, set, &flow_pairs_text);
            }
            AnnLoc::FlowMetaNoAnn { open } => {
                let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow metadata"))?;
                let (at, comma) = fm.insert_point();
                edits.insert(
                    at,
                    format!(
                        "{}annotations: {{{}}}",
                        if comma { ", " } else { "" },
                        flow_pairs_text(set)
                    ),
                );
            }
            AnnLoc::FlowDocNoMeta { open } => {
                let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow document"))?;
                let (at, comma) = fm.insert_point();
                edits.insert(
                    at,
                    format!(
                        "{}metadata: {{annotations: {{{}}}}}",
                        if comma { ", " } else { "" },
                        flow_pairs_text(set)
                    ),
                );
            }
        }
        Ok(edits.apply(text))
    }

    /// Removes the annotations `remove` selects, and the `annotations`
    /// mapping if it is (or ends up) empty. `None`: nothing to change.
    fn remove(&self, remove: &dyn Fn(&str) -> bool) -> Result<Option<String>, Unsupported> {
        let text = self.scan.text;
        let scan = &self.scan;
        let mut edits = Edits::default();
        match self.loc {
            AnnLoc::Block {
                key_line,
                from,
                to,
                indent,
            } => {
                let entries = scan.entries(from, to, indent)?;
                let gone: Vec<&Entry> = entries.iter().filter(|e| remove(&e.key)).collect();
                if gone.len() == entries.len() {
                    let last = scan.last_solid(key_line, to).unwrap_or(key_line);
                    edits.replace(line_span(scan, key_line).0, line_span(scan, last).1, "");
                } else if gone.is_empty() {
                    return Ok(None);
                } else {
                    for e in gone {
                        let last = scan.last_solid(e.line, e.end).unwrap_or(e.line);
                        edits.replace(line_span(scan, e.line).0, line_span(scan, last).1, "");
                    }
                }
            }
            AnnLoc::FlowInBlock {
                key_line, value, ..
            } => {
                let fm = FlowMap::parse(text, value).ok_or(Unsupported("flow annotations"))?;
                if fm.entries.iter().all(|e| remove(&e.key)) {
                    let close_line = line_of(scan, fm.close);
                    edits.replace(
                        line_span(scan, key_line).0,
                        line_span(scan, close_line).1,
                        "",
                    );
                } else if fm.entries.iter().any(|e| remove(&e.key)) {
                    let inner = remove_flow_entries(text, fm.open, remove)?;
                    edits.replace(fm.open, fm.close + 1, inner);
                } else {
                    return Ok(None);
                }
            }
            AnnLoc::FlowInFlow { meta_open, open } => {
                let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow annotations"))?;
                if fm.entries.iter().all(|e| remove(&e.key)) {
                    let meta =
                        FlowMap::parse(text, meta_open).ok_or(Unsupported("flow metadata"))?;
                    let j = meta
                        .entries
                        .iter()
                        .position(|e| e.key == "annotations")
                        .ok_or(Unsupported("flow metadata"))?;
                    let (a, b) = meta.removal(j);
                    edits.replace(a, b, "");
                } else if fm.entries.iter().any(|e| remove(&e.key)) {
                    let inner = remove_flow_entries(text, fm.open, remove)?;
                    edits.replace(fm.open, fm.close + 1, inner);
                } else {
                    return Ok(None);
                }
            }
            _ => return Ok(None),
        }
        Ok(Some(edits.apply(text)))
    }
}

fn flow_pairs(text: &str, fm: &FlowMap) -> Vec<(String, Option<String>)> {
    fm.entries
        .iter()
        .map(|e| {
            (
                e.key.clone(),
                parse_scalar(&text[e.value_start..e.value_end]),
            )
        })
        .collect()
}

/// Writes `key: 'value'` pairs for a flow mapping.
type PairsText<'a> = &'a dyn Fn(&[(&str, &str)]) -> String;

fn flow_set(edits: &mut Edits, fm: &FlowMap, set: &[(&str, &str)], pairs_text: PairsText<'_>) {
    let mut new = Vec::new();
    for (k, v) in set {
        match fm.get(k) {
            Some(e) => edits.replace(e.value_start, e.value_end, single_quoted(v)),
            None => new.push((*k, *v)),
        }
    }
    if !new.is_empty() {
        let (at, comma) = fm.insert_point();
        edits.insert(
            at,
            format!("{}{}", if comma { ", " } else { "" }, pairs_text(&new)),
        );
    }
}

/// The flow mapping at `open` without the entries `remove` selects.
fn remove_flow_entries(
    text: &str,
    open: usize,
    remove: &dyn Fn(&str) -> bool,
) -> Result<String, Unsupported> {
    let fm = FlowMap::parse(text, open).ok_or(Unsupported("flow mapping"))?;
    let mut s = text[fm.open..=fm.close].to_owned();
    loop {
        let m = FlowMap::parse(&s, 0).ok_or(Unsupported("flow mapping"))?;
        let Some(j) = m.entries.iter().rposition(|e| remove(&e.key)) else {
            return Ok(s);
        };
        let (a, b) = m.removal(j);
        s.replace_range(a..b, "");
    }
}

/// The line containing byte `offset`.
fn line_of(scan: &Scan<'_>, offset: usize) -> usize {
    scan.lines
        .partition_point(|l| l.end < offset)
        .min(scan.lines.len().saturating_sub(1))
}

/// A key as kpt writes it (plain when that reads back the same).
fn plain_key(k: &str) -> Cow<'_, str> {
    if emit::plain_allowed(k, false) && !emit::v3_non_string(k) {
        Cow::Borrowed(k)
    } else {
        Cow::Owned(emit::quote_double(k))
    }
}

// ---------------------------------------------------------------------------
// Document operations (with the serde_yaml_ng fall-back)

/// The metadata of a resource document.
pub fn meta(doc: &str) -> Result<Meta, DocError> {
    match View::new(doc) {
        Ok(v) => Ok(v.meta),
        Err(_) => {
            let value = parse_value(doc)?;
            let map = value
                .as_mapping()
                .ok_or(DocError::NotAMapping(kind_name(&value)))?;
            let s =
                |v: Option<&serde_yaml_ng::Value>| v.and_then(scalar_string).unwrap_or_default();
            let md = map.get("metadata").and_then(|m| m.as_mapping());
            Ok(Meta {
                api_version: s(map.get("apiVersion")),
                kind: s(map.get("kind")),
                name: s(md.and_then(|m| m.get("name"))),
                namespace: s(md.and_then(|m| m.get("namespace"))),
                has_metadata: md.is_some(),
            })
        }
    }
}

/// Annotations as read: key, and the value when it is a one-line scalar.
pub type Annotations = Vec<(String, Option<String>)>;

/// A document's metadata and annotations (one-line scalar values only;
/// others are `None`).
pub fn meta_and_annotations(doc: &str) -> Result<(Meta, Annotations), DocError> {
    if let Ok(v) = View::new(doc) {
        if let Ok(anns) = v.annotations() {
            return Ok((v.meta, anns));
        }
    }
    let m = meta(doc)?;
    let value = parse_value(doc)?;
    let anns = value
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.as_mapping())
        .map(|a| {
            a.iter()
                .map(|(k, v)| (scalar_string(k).unwrap_or_default(), scalar_string(v)))
                .collect()
        })
        .unwrap_or_default();
    Ok((m, anns))
}

/// Sets annotations on a document: existing keys get the new value in
/// place, new keys are appended to `metadata.annotations` (created if
/// needed), as kpt does.
pub fn set_annotations(doc: &str, set: &[(&str, &str)]) -> Result<String, DocError> {
    if set.is_empty() {
        return Ok(doc.to_owned());
    }
    if let Ok(v) = View::new(doc) {
        if let Ok(s) = v.set(set) {
            return Ok(s);
        }
    }
    let mut value = parse_value(doc)?;
    let map = value
        .as_mapping_mut()
        .ok_or(DocError::NotAMapping("not a mapping"))?;
    let md = map
        .entry("metadata".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    if !md.is_mapping() {
        return Err(DocError::Invalid("metadata is not a mapping".into()));
    }
    let anns = md
        .as_mapping_mut()
        .ok_or(DocError::Invalid("metadata is not a mapping".into()))?
        .entry("annotations".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    if anns.is_null() {
        *anns = serde_yaml_ng::Value::Mapping(Default::default());
    }
    let anns = anns.as_mapping_mut().ok_or(DocError::Invalid(
        "metadata.annotations is not a mapping".into(),
    ))?;
    for (k, v) in set {
        anns.insert((*k).into(), (*v).into());
    }
    Ok(emit::document(&value, false))
}

/// Removes the annotations `remove` selects, and `metadata.annotations` if
/// it is (or ends up) empty.
pub fn remove_annotations<'a>(
    doc: &'a str,
    remove: &dyn Fn(&str) -> bool,
) -> Result<Cow<'a, str>, DocError> {
    if let Ok(v) = View::new(doc) {
        if let Ok(r) = v.remove(remove) {
            return Ok(match r {
                Some(s) => Cow::Owned(s),
                None => Cow::Borrowed(doc),
            });
        }
    }
    let mut value = parse_value(doc)?;
    let Some(md) = value.get_mut("metadata").and_then(|m| m.as_mapping_mut()) else {
        return Ok(Cow::Borrowed(doc));
    };
    let Some(anns) = md.get_mut("annotations") else {
        return Ok(Cow::Borrowed(doc));
    };
    if let Some(a) = anns.as_mapping_mut() {
        a.retain(|k, _| !scalar_string(k).is_some_and(|k| remove(&k)));
    }
    if anns.is_null() || anns.as_mapping().is_some_and(|a| a.is_empty()) {
        md.remove("annotations");
    }
    Ok(Cow::Owned(emit::document(&value, false)))
}

fn parse_value(doc: &str) -> Result<serde_yaml_ng::Value, DocError> {
    serde_yaml_ng::from_str(doc).map_err(|e| DocError::Invalid(e.to_string()))
}

fn kind_name(v: &serde_yaml_ng::Value) -> &'static str {
    match v {
        serde_yaml_ng::Value::Null => "null",
        serde_yaml_ng::Value::Bool(_) => "a boolean",
        serde_yaml_ng::Value::Number(_) => "a number",
        serde_yaml_ng::Value::String(_) => "a string",
        serde_yaml_ng::Value::Sequence(_) => "a sequence",
        serde_yaml_ng::Value::Mapping(_) => "a mapping",
        serde_yaml_ng::Value::Tagged(_) => "a tagged value",
    }
}

/// A scalar as the string YAML would read for a `string` field.
pub fn scalar_string(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Null => Some(String::new()),
        serde_yaml_ng::Value::Tagged(t) => scalar_string(&t.value),
        _ => None,
    }
}

/// kpt's formatting, where the text allows it: no blank lines outside block
/// scalars, no trailing spaces after content, a final newline. Documents
/// with multi-line plain/quoted scalars or flow collections are left as
/// they are (kpt re-flows those; see the module documentation).
pub fn normalize(doc: &str) -> Cow<'_, str> {
    let scan = Scan::new(doc);
    normalize_scanned(&scan)
}

fn normalize_scanned<'a>(scan: &Scan<'a>) -> Cow<'a, str> {
    let doc = scan.text;
    if scan.irregular {
        return if doc.is_empty() || doc.ends_with('\n') {
            Cow::Borrowed(doc)
        } else {
            Cow::Owned(format!("{doc}\n"))
        };
    }
    let last = scan.lines.iter().rposition(Line::is_solid);
    let needs = !doc.ends_with('\n')
        || scan.lines.iter().enumerate().any(|(i, l)| match l.kind {
            LineKind::Blank => true,
            LineKind::Content => matches!(doc.as_bytes()[l.end - 1], b' ' | b'\t'),
            LineKind::Comment => last.is_some_and(|last| i > last && l.indent > 0),
            _ => false,
        });
    if !needs {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len());
    let body_end = last.map_or(0, |l| l + 1);
    let lines = &scan.lines[..body_end];
    let mut seen_solid = false;
    for (i, l) in lines.iter().enumerate() {
        let line = &doc[l.start..l.end];
        match l.kind {
            LineKind::Blank => {
                // yaml.v3 keeps one blank line after a column-0 comment that
                // follows content, when a column-0 line comes next.
                let prev = lines[..i].iter().rev().find(|p| p.kind != LineKind::Blank);
                let next = lines[i + 1..].iter().find(|n| n.kind != LineKind::Blank);
                let keep = seen_solid
                    && prev.is_some_and(|p| p.kind == LineKind::Comment && p.indent == 0)
                    && i > 0
                    && lines[i - 1].kind != LineKind::Blank
                    && next.is_some_and(|n| n.indent == 0);
                if !keep {
                    continue;
                }
            }
            LineKind::Content => {
                seen_solid = true;
                out.push_str(line.trim_end_matches([' ', '\t']));
            }
            _ => {
                seen_solid |= l.is_solid();
                out.push_str(line);
            }
        }
        out.push('\n');
    }
    // After the last content: comments of the last node, then (after a
    // blank line) the document's foot comment, which yaml.v3 writes at
    // column 0 after one blank line, blank lines between its comments kept.
    let (mut blank, mut foot) = (false, false);
    for l in &scan.lines[body_end..] {
        let line = &doc[l.start..l.end];
        if l.kind != LineKind::Comment {
            blank = true;
            continue;
        }
        if blank {
            out.push('\n');
            foot = true;
            blank = false;
        }
        out.push_str(if foot {
            line.trim_start_matches(' ')
        } else {
            line
        });
        out.push('\n');
    }
    if out == doc {
        Cow::Borrowed(doc)
    } else {
        Cow::Owned(out)
    }
}

/// The column of the key if `l` is `key:` (possibly after `- `) with a
/// block value (nothing but a comment after the colon).
fn block_key_col(doc: &str, l: &Line) -> Option<usize> {
    let mut col = l.indent;
    let mut rest = &doc[l.start + l.indent..l.end];
    while rest.starts_with("- ") {
        let sp = 1 + rest[1..].bytes().take_while(|b| *b == b' ').count();
        col += sp;
        rest = &rest[sp..];
    }
    let (_, after) = parse_key(rest)?;
    let v = rest[after..].trim_start_matches([' ', '\t']);
    (v.is_empty() || v.starts_with('#')).then_some(col)
}

/// Re-indents block sequences to one style, as kyaml writes them: `wide`
/// (entries two spaces deeper than their key) or compact (entries at the
/// key's column). Irregular documents are left alone.
pub fn set_seq_style(doc: &str, wide: bool) -> Cow<'_, str> {
    if !doc.contains("- ") && !doc.contains("-\n") {
        return Cow::Borrowed(doc);
    }
    let scan = Scan::new(doc);
    if scan.irregular {
        return Cow::Borrowed(doc);
    }
    let n = scan.lines.len();
    let is_entry = |l: &Line| {
        let rest = &doc[l.start + l.indent..l.end];
        rest == "-" || rest.starts_with("- ")
    };
    let mut shifts = vec![0isize; n];
    // (key column, shift) of the sequences being moved.
    let mut stack: Vec<(usize, isize)> = Vec::new();
    let mut any = false;
    for (i, &l) in scan.lines.iter().enumerate() {
        if l.kind == LineKind::Content {
            while let Some(&(k, shift)) = stack.last() {
                let ended = if shift > 0 {
                    l.indent < k || (l.indent == k && !is_entry(&l))
                } else {
                    l.indent <= k
                };
                if !ended {
                    break;
                }
                stack.pop();
            }
        }
        shifts[i] = stack.iter().map(|r| r.1).sum();
        if l.kind != LineKind::Content {
            continue;
        }
        let Some(kc) = block_key_col(doc, &l) else {
            continue;
        };
        let Some(next) = scan.lines[i + 1..]
            .iter()
            .find(|x| x.kind == LineKind::Content)
        else {
            continue;
        };
        if !is_entry(next) {
            continue;
        }
        if wide && next.indent == kc {
            stack.push((kc, 2));
            any = true;
        } else if !wide && next.indent == kc + 2 {
            stack.push((kc, -2));
            any = true;
        }
    }
    if !any {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + doc.len() / 8);
    for (l, shift) in scan.lines.iter().zip(shifts) {
        let line = &doc[l.start..l.end];
        if shift == 0 || line.is_empty() || l.kind == LineKind::Blank {
            out.push_str(line);
        } else if shift > 0 {
            out.extend(std::iter::repeat_n(' ', shift.unsigned_abs()));
            out.push_str(line);
        } else {
            let cut = shift.unsigned_abs().min(l.indent);
            out.push_str(&line[cut..]);
        }
        out.push('\n');
    }
    if !doc.ends_with('\n') {
        out.pop();
    }
    Cow::Owned(out)
}

/// kyaml's `DeriveSeqIndentStyle`: `wide` if the first sequence found is
/// indented two more than its key, `compact` otherwise.
pub fn derive_seq_indent(doc: &str) -> &'static str {
    let lines: Vec<&str> = doc.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(pos) = line.find("- ") else {
            continue;
        };
        if !line[..pos].bytes().all(|b| b == b' ') {
            continue;
        }
        let seq_spaces = pos;
        let key_line = (0..i)
            .rev()
            .map(|j| lines[j])
            .find(|l| !l.trim_matches(' ').starts_with('#'));
        let Some(key_line) = key_line else {
            continue;
        };
        let key_line = key_line.split('#').next().unwrap_or("");
        if key_line.is_empty() {
            continue;
        }
        let key_spaces = key_line.len() - key_line.trim_start_matches(' ').len();
        let trimmed = key_line.trim_matches(' ');
        if trimmed.matches(':').count() != 1 || !trimmed.ends_with(':') {
            continue;
        }
        if seq_spaces == key_spaces {
            return "compact";
        }
        if seq_spaces == key_spaces + 2 {
            return "wide";
        }
    }
    "compact"
}

// ---------------------------------------------------------------------------
// Splitting streams into documents

/// One resource document read from a file or a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The text: LF line ends, ends with `\n`, no document markers,
    /// normalised (see [`normalize`]).
    pub text: String,
    /// `compact` or `wide` (kyaml's derivation on the original text).
    pub seq_indent: &'static str,
}

/// Text as kyaml reads it: a leading BOM dropped, CRLF as LF.
pub fn normalize_newlines(text: &str) -> Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains("\r\n") {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Splits a stream (already through [`normalize_newlines`]) the way kyaml
/// does: at every `\n---...\n` (a comment may follow the marker, nothing
/// else), then each piece is one YAML document (a leading `---` line and
/// everything from a `...` line on are not part of it). Empty documents are
/// skipped. Returns the pieces as documents.
pub fn split_documents(text: &str) -> Result<Vec<Document>, DocError> {
    let mut pieces = Vec::new();
    let b = text.as_bytes();
    let mut prev = 0;
    let mut i = 0;
    while let Some(off) = find_sub(&b[i..], b"\n---") {
        let sep_start = i + off;
        let line_start = sep_start + 1;
        let Some(nl) = memchr(b'\n', &b[line_start..]) else {
            break;
        };
        let line_end = line_start + nl;
        let after = text[line_start + 3..line_end].trim();
        if !after.is_empty() && !after.starts_with('#') {
            return Err(DocError::Invalid(format!(
                "invalid document separator: {}",
                text[line_start..line_end].trim()
            )));
        }
        pieces.push(&text[prev..=sep_start]);
        prev = line_end + 1;
        i = line_end + 1;
        if i > b.len() {
            break;
        }
    }
    pieces.push(&text[prev.min(text.len())..]);
    let mut docs = Vec::new();
    for piece in pieces {
        if let Some(doc) = piece_document(piece)? {
            docs.push(doc);
        }
    }
    Ok(docs)
}

fn find_sub(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One piece of a stream as a document (`None` if empty).
fn piece_document(piece: &str) -> Result<Option<Document>, DocError> {
    let seq_indent = derive_seq_indent(piece);
    let mut body = piece;
    // A leading `---` line (the start of a stream, or `---` twice).
    let first_content = body
        .split_inclusive('\n')
        .scan(0usize, |off, l| {
            let at = *off;
            *off += l.len();
            Some((at, l))
        })
        .find(|(_, l)| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        });
    if let Some((at, l)) = first_content {
        if l.starts_with('%') {
            return fallback_document(piece, seq_indent);
        }
        if l.starts_with("---") && (l.len() == 3 || matches!(l.as_bytes()[3], b' ' | b'\t' | b'\n'))
        {
            let rest = l[3..].trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return fallback_document(piece, seq_indent);
            }
            // Comments before the marker are not part of the document.
            body = &body[at + l.len()..];
        }
    }
    // `...` ends the document; comments after it become a foot comment.
    let mut foot = String::new();
    let mut offset = 0;
    for l in body.split_inclusive('\n') {
        if l.starts_with("...") && (l.len() == 3 || matches!(l.as_bytes()[3], b' ' | b'\t' | b'\n'))
        {
            for after in body[offset + l.len()..].split_inclusive('\n') {
                let t = after.trim();
                if t.is_empty() {
                    continue;
                }
                if !t.starts_with('#') {
                    return Err(DocError::Invalid(
                        "a second document after `...` without a `---` separator".into(),
                    ));
                }
                foot.push_str(after.trim_end_matches('\n'));
                foot.push('\n');
            }
            body = &body[..offset];
            break;
        }
        offset += l.len();
    }
    let scan = Scan::new(body);
    let Some(first) = scan.lines.iter().find(|l| l.kind == LineKind::Content) else {
        return Ok(None);
    };
    let flow_doc =
        scan.irregular && matches!(body.as_bytes()[first.start + first.indent], b'{' | b'[');
    let mut text = match flow_doc.then(|| compact_flow(body)).flatten() {
        Some(one_line) => one_line,
        None => normalize_scanned(&scan).into_owned(),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if !foot.is_empty() {
        text.push('\n');
        text.push_str(&foot);
    }
    Ok(Some(Document { text, seq_indent }))
}

/// A flow collection spread over several lines (pretty JSON) on one line,
/// as yaml.v3 writes it: `{k: v, k2: [a, b]}`, scalars as written. `None`
/// if it has multi-line quoted scalars or is not a flow collection.
fn compact_flow(text: &str) -> Option<String> {
    fn value(t: &str, b: &[u8], i: &mut usize, out: &mut String) -> Option<()> {
        *i = skip_flow_space(b, *i);
        match *b.get(*i)? {
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                out.push(open as char);
                *i += 1;
                let mut first = true;
                loop {
                    *i = skip_flow_space(b, *i);
                    if *b.get(*i)? == close {
                        *i += 1;
                        out.push(close as char);
                        return Some(());
                    }
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    value(t, b, i, out)?;
                    *i = skip_flow_space(b, *i);
                    if open == b'{' && b.get(*i) == Some(&b':') {
                        out.push_str(": ");
                        *i += 1;
                        *i = skip_flow_space(b, *i);
                        if !matches!(b.get(*i), Some(b',' | b'}')) {
                            value(t, b, i, out)?;
                        }
                        *i = skip_flow_space(b, *i);
                    }
                    match *b.get(*i)? {
                        b',' => *i += 1,
                        c if c == close => {}
                        _ => return None,
                    }
                }
            }
            q @ (b'"' | b'\'') => {
                let end = find_quote_end(b, q, *i + 1)?;
                let s = &t[*i..end];
                if s.contains('\n') {
                    return None;
                }
                out.push_str(s);
                *i = end;
                Some(())
            }
            _ => {
                let start = *i;
                while *i < b.len() {
                    match b[*i] {
                        b',' | b'}' | b']' | b'\n' => break,
                        b':' if matches!(
                            b.get(*i + 1),
                            None | Some(b' ' | b'\n' | b',' | b'}' | b']')
                        ) =>
                        {
                            break
                        }
                        b'#' if matches!(b[*i - 1], b' ' | b'\t') => break,
                        _ => *i += 1,
                    }
                }
                let s = t[start..*i].trim_end();
                if s.is_empty() {
                    return None;
                }
                out.push_str(s);
                Some(())
            }
        }
    }
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = String::with_capacity(text.len());
    value(text, b, &mut i, &mut out)?;
    if skip_flow_space(b, i) < b.len() || !matches!(out.as_bytes().first(), Some(b'{' | b'[')) {
        return None;
    }
    out.push('\n');
    Some(out)
}

fn fallback_document(piece: &str, seq_indent: &'static str) -> Result<Option<Document>, DocError> {
    let value: serde_yaml_ng::Value = match serde_yaml_ng::Deserializer::from_str(piece).next() {
        Some(d) => serde::Deserialize::deserialize(d)
            .map_err(|e: serde_yaml_ng::Error| DocError::Invalid(e.to_string()))?,
        None => return Ok(None),
    };
    if value.is_null() {
        return Ok(None);
    }
    Ok(Some(Document {
        text: emit::document(&value, false),
        seq_indent,
    }))
}

// ---------------------------------------------------------------------------
// ResourceLists as text

/// Appends `doc` as an entry of a block sequence at column 0 (`- ` then the
/// document indented by two spaces; blank lines stay empty).
pub fn push_item(out: &mut String, doc: &str) {
    let mut first = true;
    for line in doc.split_inclusive('\n') {
        if first {
            out.push_str("- ");
            first = false;
        } else if line != "\n" {
            out.push_str("  ");
        }
        out.push_str(line);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// Appends `doc` indented by `n` spaces (blank lines stay empty).
pub fn push_indented(out: &mut String, doc: &str, n: usize) {
    for line in doc.split_inclusive('\n') {
        if line != "\n" {
            out.extend(std::iter::repeat_n(' ', n));
        }
        out.push_str(line);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// A ResourceList (or List) split at the text level.
#[derive(Debug, Default)]
pub struct ListText {
    /// The items as documents (de-indented), in order.
    pub items: Vec<String>,
    /// Whether there was an `items` key at all.
    pub has_items: bool,
    /// Everything but `items`, parsed (a small document).
    pub rest: serde_yaml_ng::Mapping,
}

impl ListText {
    /// A top-level string field (`kind`, `apiVersion`).
    pub fn field(&self, key: &str) -> Option<String> {
        self.rest.get(key).and_then(scalar_string)
    }
}

/// Splits a ResourceList's text into its items (as document texts) and the
/// rest (parsed). Block-style `items` are cut textually; anything else
/// (JSON, flow style, anchors across items) goes through `serde_yaml_ng`, and
/// its items are written again in block style by [`emit`].
pub fn split_list(text: &str) -> Result<ListText, DocError> {
    let first = text.bytes().position(|b| !b.is_ascii_whitespace());
    if let Some(at) = first.filter(|&at| text.as_bytes()[at] == b'{') {
        if let Some(list) = split_list_flow(text, at) {
            return Ok(list);
        }
    }
    match split_list_text(text) {
        Some(r) => r,
        None => split_list_value(text),
    }
}

/// A ResourceList written as one flow mapping (JSON): each item becomes a
/// one-line flow document, as yaml.v3 would write it. `None`: use the full
/// parse.
fn split_list_flow(text: &str, open: usize) -> Option<ListText> {
    let b = text.as_bytes();
    let map = FlowMap::parse(text, open)?;
    if skip_flow_space(b, map.close + 1) < b.len() {
        return None;
    }
    let mut list = ListText::default();
    let mut rest = String::from("{");
    for e in &map.entries {
        if e.key != "items" {
            if rest.len() > 1 {
                rest.push_str(", ");
            }
            rest.push_str(&text[e.key_start..e.value_end]);
            continue;
        }
        list.has_items = true;
        if b.get(e.value_start) != Some(&b'[') {
            return None;
        }
        let mut i = e.value_start + 1;
        loop {
            i = skip_flow_space(b, i);
            match *b.get(i)? {
                b']' => break,
                b'{' => {
                    let end = flow_collection_end(b, i)?;
                    list.items.push(compact_flow(&text[i..end])?);
                    i = skip_flow_space(b, end);
                    match *b.get(i)? {
                        b',' => i += 1,
                        b']' => {}
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }
    rest.push('}');
    match serde_yaml_ng::from_str(&rest).ok()? {
        serde_yaml_ng::Value::Mapping(m) => list.rest = m,
        _ => return None,
    }
    Some(list)
}

/// `None`: not understood, use the full parse.
fn split_list_text(text: &str) -> Option<Result<ListText, DocError>> {
    let b = text.as_bytes();
    // Top-level keys: lines at column 0 that are not blank, comments, or
    // entries of a compact sequence.
    let mut sections: Vec<(String, usize, usize)> = Vec::new(); // key, key line start, value start
    let mut pos = 0;
    let mut started = false;
    while pos < b.len() {
        let end = memchr(b'\n', &b[pos..]).map_or(b.len(), |i| pos + i);
        let line = &text[pos..end];
        let lb = line.as_bytes();
        let next = end + 1;
        if lb.is_empty() || matches!(lb[0], b' ' | b'#' | b'\t') {
            pos = next;
            continue;
        }
        if line == "-" || line.starts_with("- ") {
            if !started {
                return None;
            }
            pos = next;
            continue;
        }
        if line.starts_with("---") {
            if started {
                break;
            }
            if line.trim_end() != "---" {
                return None;
            }
            pos = next;
            continue;
        }
        if line.starts_with("...") || line.starts_with('%') || lb[0] == b'{' || lb[0] == b'[' {
            if started && line.starts_with("...") {
                break;
            }
            return None;
        }
        let (key, after) = parse_key(line)?;
        if sections.iter().any(|s| s.0 == key) {
            return None;
        }
        let v = after + count_spaces(&line[after..]);
        let vb = &lb[v..];
        // A value that may continue at column 0: not understood.
        if matches!(vb.first(), Some(b'"' | b'\'')) && find_quote_end(vb, vb[0], 1).is_none() {
            return None;
        }
        if matches!(vb.first(), Some(b'[' | b'{')) && !matches!(flow_depth(vb, 0), FlowScan::Closed)
        {
            return None;
        }
        sections.push((key, pos, pos + v));
        started = true;
        pos = next;
    }
    let body_end = pos.min(b.len());
    if sections.is_empty() {
        return None;
    }
    let mut rest_doc = String::new();
    let mut list = ListText::default();
    for (idx, (key, start, value)) in sections.iter().enumerate() {
        let end = sections.get(idx + 1).map_or(body_end, |s| s.1);
        if key != "items" {
            rest_doc.push_str(&text[*start..end]);
            if !rest_doc.ends_with('\n') {
                rest_doc.push('\n');
            }
            continue;
        }
        list.has_items = true;
        let line_end = memchr(b'\n', &b[*value..end]).map_or(end, |i| value + i);
        let v = text[*value..line_end].trim_end();
        if v == "[]" {
            continue;
        }
        if !(v.is_empty() || v.starts_with('#')) {
            return None;
        }
        let body_start = (line_end + 1).min(end);
        match split_items(&text[body_start..end]) {
            Some(items) => list.items = items,
            None => return None,
        }
    }
    let rest: serde_yaml_ng::Value = match serde_yaml_ng::from_str(&rest_doc) {
        Ok(v) => v,
        Err(_) => return None,
    };
    match rest {
        serde_yaml_ng::Value::Mapping(m) => list.rest = m,
        _ => return None,
    }
    Some(Ok(list))
}

/// Cuts the body of a block-sequence `items:` into item documents.
/// `None`: not a block sequence this scanner reads.
fn split_items(body: &str) -> Option<Vec<String>> {
    let mut items: Vec<String> = Vec::new();
    let mut seq_indent: Option<usize> = None;
    let mut content_indent = 0;
    let mut pending_comments = String::new();
    for line in body.split_inclusive('\n') {
        let l = line.trim_end_matches('\n');
        let indent = l.bytes().take_while(|b| *b == b' ').count();
        let rest = &l[indent..];
        if rest.is_empty() {
            if let Some(cur) = items.last_mut() {
                cur.push('\n');
            }
            continue;
        }
        let is_entry = rest == "-" || rest.starts_with("- ");
        if is_entry && seq_indent.is_none_or(|si| si == indent) {
            seq_indent = Some(indent);
            let after = &rest[1..];
            let sp = after.bytes().take_while(|b| *b == b' ').count();
            let first = &after[sp..];
            let mut item = std::mem::take(&mut pending_comments);
            if first.is_empty() {
                // `-` alone: the item starts on the next line.
                content_indent = indent + 2;
            } else {
                content_indent = indent + 1 + sp;
                item.push_str(first);
                item.push('\n');
            }
            items.push(item);
            continue;
        }
        if items.is_empty() || indent < content_indent {
            if rest.starts_with('#') {
                // A comment outside an item belongs to the next one.
                pending_comments.push_str(rest);
                pending_comments.push('\n');
                continue;
            }
            return None;
        }
        let cur = items.last_mut()?;
        cur.push_str(&l[content_indent..]);
        cur.push('\n');
    }
    for item in &mut items {
        while item.ends_with("\n\n") {
            item.pop();
        }
    }
    Some(items)
}

fn split_list_value(text: &str) -> Result<ListText, DocError> {
    let value: serde_yaml_ng::Value = match serde_yaml_ng::Deserializer::from_str(text).next() {
        Some(d) => serde::Deserialize::deserialize(d)
            .map_err(|e: serde_yaml_ng::Error| DocError::Invalid(e.to_string()))?,
        None => serde_yaml_ng::Value::Null,
    };
    let serde_yaml_ng::Value::Mapping(mut map) = value else {
        return Err(DocError::NotAMapping(kind_name(&value)));
    };
    let mut list = ListText::default();
    if let Some(items) = map.remove("items") {
        list.has_items = true;
        match items {
            serde_yaml_ng::Value::Sequence(seq) => {
                for item in seq {
                    list.items.push(emit::document(&item, false));
                }
            }
            serde_yaml_ng::Value::Null => {}
            other => {
                return Err(DocError::Invalid(format!(
                    "items is {}, not a sequence",
                    kind_name(&other)
                )))
            }
        }
    }
    list.rest = map;
    Ok(list)
}

// ---------------------------------------------------------------------------
// Package directories

/// A resource file read from a package.
#[derive(Debug, Clone)]
pub struct PackageFile {
    /// Path relative to the package, `/`-separated.
    pub path: String,
    pub documents: Vec<Document>,
}

/// Reports progress on stderr for long work: nothing during the first
/// second, then a line every five seconds, and a summary at the end.
pub struct Progress<'a> {
    out: Option<&'a mut (dyn Write + Send)>,
    start: Instant,
    last: Instant,
    printed: bool,
}

impl<'a> Progress<'a> {
    pub fn new(out: Option<&'a mut (dyn Write + Send)>) -> Self {
        let now = Instant::now();
        Self {
            out,
            start: now,
            last: now,
            printed: false,
        }
    }

    /// Prints `message()` if the work has run for over a second and nothing
    /// was printed in the last second.
    pub fn tick(&mut self, message: impl FnOnce() -> String) {
        let now = Instant::now();
        if now.duration_since(self.start) < Duration::from_secs(1)
            || (self.printed && now.duration_since(self.last) < Duration::from_secs(5))
        {
            return;
        }
        if let Some(out) = self.out.as_mut() {
            let _ = writeln!(out, "[INFO] {}", message());
        }
        self.printed = true;
        self.last = now;
    }

    /// Prints `message(elapsed)` if anything was printed before.
    pub fn done(&mut self, message: impl FnOnce(Duration) -> String) {
        if self.printed {
            let elapsed = self.start.elapsed();
            if let Some(out) = self.out.as_mut() {
                let _ = writeln!(out, "[INFO] {}", message(elapsed));
            }
        }
    }
}

/// `.krmignore` patterns of one package (a gitignore subset: `#` comments,
/// `!` negation, trailing `/` for directories only, a `/` inside anchors the
/// pattern to the package root, `*`, `?` and `[...]` globs; `**` is not
/// supported, as in kyaml).
#[derive(Debug, Clone, Default)]
struct IgnoreRules {
    rules: Vec<IgnoreRule>,
}

#[derive(Debug, Clone)]
struct IgnoreRule {
    pattern: String,
    negate: bool,
    dir_only: bool,
    anchored: bool,
}

impl IgnoreRules {
    fn read(dir: &Path) -> Result<Self, PackageError> {
        let path = dir.join(".krmignore");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let mut rules = Vec::new();
        for line in text.lines() {
            let mut p = line.trim_end();
            if p.is_empty() || p.starts_with('#') {
                continue;
            }
            let negate = p.starts_with('!');
            if negate {
                p = &p[1..];
            }
            let dir_only = p.ends_with('/');
            let p = p.trim_end_matches('/');
            let anchored = p.contains('/');
            let p = p.trim_start_matches('/');
            if p.is_empty() {
                continue;
            }
            rules.push(IgnoreRule {
                pattern: p.to_owned(),
                negate,
                dir_only,
                anchored,
            });
        }
        Ok(Self { rules })
    }

    /// Whether `rel` (relative to the package root) is ignored.
    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for r in &self.rules {
            if r.dir_only && !is_dir {
                continue;
            }
            let hit = if r.anchored {
                glob_match(r.pattern.as_bytes(), rel.as_bytes())
            } else {
                glob_match(
                    r.pattern.as_bytes(),
                    rel.rsplit('/').next().unwrap_or(rel).as_bytes(),
                )
            };
            if hit {
                ignored = !r.negate;
            }
        }
        ignored
    }
}

/// Go's `filepath.Match` (no `\` escapes): `*` and `?` do not match `/`.
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len())
            .take_while(|&i| i == 0 || s[i - 1] != b'/')
            .any(|i| glob_match(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && s[0] != b'/' && glob_match(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(close) = p.iter().skip(1).position(|c| *c == b']').map(|i| i + 1) else {
                return !s.is_empty() && s[0] == b'[' && glob_match(&p[1..], &s[1..]);
            };
            let Some(&c) = s.first() else {
                return false;
            };
            let class = &p[1..close];
            let (neg, class) = match class.first() {
                Some(b'^' | b'!') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    if class[i] <= c && c <= class[i + 2] {
                        hit = true;
                    }
                    i += 3;
                } else {
                    if class[i] == c {
                        hit = true;
                    }
                    i += 1;
                }
            }
            hit != neg && c != b'/' && glob_match(&p[close + 1..], &s[1..])
        }
        Some(&c) => !s.is_empty() && s[0] == c && glob_match(&p[1..], &s[1..]),
    }
}

/// Whether kpt reads a file with this name as resources.
pub fn is_resource_file(name: &[u8]) -> bool {
    name == b"Kptfile"
        || name.ends_with(b".yaml")
        || name.ends_with(b".yml")
        || name.ends_with(b".json")
}

/// Reads a package the way kpt does (see the module documentation).
pub fn read_package(
    dir: &Path,
    progress: &mut Progress<'_>,
) -> Result<Vec<PackageFile>, PackageError> {
    let meta = fs::metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(PackageError::File {
            path: dir.display().to_string(),
            message: "not a directory".into(),
        });
    }
    let mut files = Vec::new();
    let mut count = (0usize, 0usize);
    let rules = IgnoreRules::read(dir)?;
    walk(dir, "", &rules, &mut files, progress, &mut count)?;
    progress.done(|t| {
        format!(
            "read {} resources from {} files in {t:.1?}",
            count.1, count.0
        )
    });
    Ok(files)
}

fn walk(
    dir: &Path,
    rel: &str,
    rules: &IgnoreRules,
    files: &mut Vec<PackageFile>,
    progress: &mut Progress<'_>,
    count: &mut (usize, usize),
) -> Result<(), PackageError> {
    let mut entries: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        entries.push((entry.file_name().as_bytes().to_vec(), entry.path()));
    }
    entries.sort();
    for (name, path) in entries {
        let name_str = String::from_utf8_lossy(&name);
        let child_rel = if rel.is_empty() {
            name_str.into_owned()
        } else {
            format!("{rel}/{name_str}")
        };
        let lmeta = fs::symlink_metadata(&path).map_err(io_err(&path))?;
        if lmeta.is_dir() {
            // A subpackage has its own .krmignore, and cannot be ignored.
            if path.join("Kptfile").is_file() {
                let sub = IgnoreRules::read(&path)?;
                let mut sub_files = Vec::new();
                walk(&path, "", &sub, &mut sub_files, progress, count)?;
                for mut f in sub_files {
                    f.path = format!("{child_rel}/{}", f.path);
                    files.push(f);
                }
                continue;
            }
            if rules.ignored(&child_rel, true) {
                continue;
            }
            walk(&path, &child_rel, rules, files, progress, count)?;
            continue;
        }
        if !is_resource_file(&name) || rules.ignored(&child_rel, false) {
            continue;
        }
        if lmeta.file_type().is_symlink() {
            match fs::metadata(&path) {
                Ok(m) if m.is_file() => {}
                _ => continue,
            }
        }
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        let text = String::from_utf8(bytes).map_err(|_| PackageError::File {
            path: child_rel.clone(),
            message: "not UTF-8 text".into(),
        })?;
        let text = normalize_newlines(&text);
        let documents = split_documents(&text).map_err(|e| PackageError::File {
            path: child_rel.clone(),
            message: e.to_string(),
        })?;
        count.0 += 1;
        count.1 += documents.len();
        if !documents.is_empty() {
            files.push(PackageFile {
                path: child_rel,
                documents,
            });
        }
        progress.tick(|| {
            format!(
                "reading package: {} files, {} resources so far",
                count.0, count.1
            )
        });
    }
    Ok(())
}

/// kyaml's default path for a resource without one:
/// `[namespace/]kind_name.yaml`, the kind in lower case.
pub fn default_path(meta: &Meta) -> String {
    let file = format!("{}_{}.yaml", meta.kind.to_lowercase(), meta.name);
    if meta.namespace.is_empty() {
        file
    } else {
        format!("{}/{file}", meta.namespace)
    }
}

/// Go's `path.Clean`.
pub fn clean_path(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// One output resource, placed.
#[derive(Debug, Clone)]
pub struct Placed {
    /// Cleaned path relative to the package.
    pub path: String,
    /// The index annotation (`None`: none; such items come first).
    pub index: Option<i64>,
    /// The document text, kpt's annotations removed.
    pub text: String,
}

/// What [`write_package`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    pub written: usize,
    pub unchanged: usize,
    pub deleted: usize,
}

/// A file's content from its resources: documents joined by `---`, or
/// indented JSON with sorted keys for a `.json` file with one resource.
pub fn file_content(path: &str, docs: &[&str]) -> Result<String, PackageError> {
    if docs.len() == 1
        && path
            .rsplit('/')
            .next()
            .is_some_and(|n| glob_match(b"*.json", n.as_bytes()))
    {
        let value: serde_json::Value =
            serde_yaml_ng::from_str(docs[0]).map_err(|e| PackageError::File {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        let mut s = serde_json::to_string_pretty(&value).map_err(|e| PackageError::File {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        s.push('\n');
        // Go's encoding/json escapes these.
        if s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
            s = s
                .replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026")
                .replace('\u{2028}', "\\u2028")
                .replace('\u{2029}', "\\u2029");
        }
        return Ok(s);
    }
    let mut s = String::with_capacity(docs.iter().map(|d| d.len() + 4).sum());
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            s.push_str("---\n");
        }
        s.push_str(d);
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    Ok(s)
}

/// Writes resources to `root` as kpt does: one file per path, documents in
/// index order (those without an index first). Files whose content does
/// not change are not touched. Returns the paths written (or unchanged).
pub fn write_package(
    root: &Path,
    items: Vec<Placed>,
    progress: &mut Progress<'_>,
) -> Result<(WriteReport, HashSet<String>), PackageError> {
    let mut by_path: BTreeMap<String, Vec<(Option<i64>, usize, String)>> = BTreeMap::new();
    for (seq, p) in items.into_iter().enumerate() {
        by_path
            .entry(p.path)
            .or_default()
            .push((p.index, seq, p.text));
    }
    let mut report = WriteReport::default();
    let mut paths = HashSet::with_capacity(by_path.len());
    let total = by_path.len();
    for (n, (path, mut docs)) in by_path.into_iter().enumerate() {
        docs.sort_by_key(|d| (d.0.is_some(), d.0, d.1));
        let texts: Vec<&str> = docs.iter().map(|d| d.2.as_str()).collect();
        let content = file_content(&path, &texts)?;
        let target = root.join(&path);
        match fs::read(&target) {
            Ok(old) if old == content.as_bytes() => report.unchanged += 1,
            _ => {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io_err(parent))?;
                }
                fs::write(&target, content.as_bytes()).map_err(io_err(&target))?;
                report.written += 1;
            }
        }
        paths.insert(path);
        progress.tick(|| format!("writing package: {} of {total} files", n + 1));
    }
    progress.done(|t| format!("wrote {total} files in {t:.1?}"));
    Ok((report, paths))
}

/// Deletes the files of `read` that are not in `kept` (relative paths).
pub fn delete_gone(
    root: &Path,
    read: &[String],
    kept: &HashSet<String>,
) -> Result<usize, PackageError> {
    let mut n = 0;
    for path in read {
        if kept.contains(path) {
            continue;
        }
        let target = root.join(path);
        match fs::remove_file(&target) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&target)(e)),
        }
    }
    Ok(n)
}

/// Checks kpt's path invariants on output resources: no path outside the
/// package, no two resources with the same path and index.
pub fn check_paths(placed: &[(String, String)]) -> Result<(), PackageError> {
    let mut seen: HashMap<(&str, &str), ()> = HashMap::new();
    for (path, index) in placed {
        if path.starts_with("../") || path == ".." {
            return Err(PackageError::OutsidePackage(path.clone()));
        }
        if seen.insert((path.as_str(), index.as_str()), ()).is_some() {
            return Err(PackageError::Duplicate {
                path: path.clone(),
                index: index.clone(),
            });
        }
    }
    Ok(())
}

/// Go's `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c == '\u{feff}' || c == '\u{2028}' || c == '\u{2029}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.Quote` for bytes that may not be UTF-8 (invalid bytes as
/// `\xNN`).
pub fn go_quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let q = go_quote(chunk.valid());
        out.push_str(&q[1..q.len() - 1]);
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------
// A YAML writer in yaml.v3's style

/// Writes YAML the way kpt (yaml.v3 through kyaml) does: 2-space
/// indentation, compact or wide sequences, yaml.v3's choice of plain,
/// single-quoted, double-quoted or literal scalars.
pub mod emit {
    use serde_yaml_ng::Value;

    /// A document (a mapping, usually), ending with a newline.
    pub fn document(v: &Value, wide: bool) -> String {
        let mut out = String::new();
        match v {
            Value::Mapping(m) if !m.is_empty() => mapping(&mut out, m, 0, wide),
            Value::Sequence(s) if !s.is_empty() => sequence(&mut out, s, 0, wide),
            other => {
                out.push_str(&inline(other, 0));
                out.push('\n');
            }
        }
        out
    }

    fn is_block(v: &Value) -> bool {
        match v {
            Value::Mapping(m) => !m.is_empty(),
            Value::Sequence(s) => !s.is_empty(),
            Value::Tagged(t) => is_block(&t.value),
            _ => false,
        }
    }

    /// Writes `key: value` lines of a mapping at `indent`.
    pub fn mapping(out: &mut String, m: &serde_yaml_ng::Mapping, indent: usize, wide: bool) {
        for (k, v) in m {
            out.extend(std::iter::repeat_n(' ', indent));
            out.push_str(&key(k));
            out.push(':');
            value_after_key(out, v, indent, wide);
        }
    }

    /// Writes what follows `key:` (a space and a scalar, or a nested block).
    pub fn value_after_key(out: &mut String, v: &Value, indent: usize, wide: bool) {
        match v {
            Value::Mapping(m) if !m.is_empty() => {
                out.push('\n');
                mapping(out, m, indent + 2, wide);
            }
            Value::Sequence(s) if !s.is_empty() => {
                out.push('\n');
                sequence(out, s, if wide { indent + 2 } else { indent }, wide);
            }
            Value::String(s) if s.contains('\n') && block_allowed(s) => {
                out.push(' ');
                literal(out, s, indent + 2);
            }
            Value::Tagged(t) if !is_block(&t.value) => {
                out.push(' ');
                out.push_str(&t.tag.to_string());
                out.push(' ');
                out.push_str(&inline(&t.value, indent));
                out.push('\n');
            }
            Value::Tagged(t) => {
                out.push(' ');
                out.push_str(&t.tag.to_string());
                value_after_key(out, &t.value, indent, wide);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other, indent));
                out.push('\n');
            }
        }
    }

    fn sequence(out: &mut String, s: &[Value], indent: usize, wide: bool) {
        for item in s {
            out.extend(std::iter::repeat_n(' ', indent));
            out.push_str("- ");
            match item {
                Value::Mapping(m) if !m.is_empty() => {
                    let mut inner = String::new();
                    mapping(&mut inner, m, indent + 2, wide);
                    out.push_str(&inner[indent + 2..]);
                }
                Value::Sequence(s2) if !s2.is_empty() => {
                    let mut inner = String::new();
                    sequence(&mut inner, s2, indent + 2, wide);
                    out.push_str(&inner[indent + 2..]);
                }
                Value::String(st) if st.contains('\n') && block_allowed(st) => {
                    literal(out, st, indent + 2)
                }
                other => {
                    out.push_str(&inline(other, indent));
                    out.push('\n');
                }
            }
        }
    }

    /// A literal block scalar: header and lines (at `indent`).
    fn literal(out: &mut String, s: &str, indent: usize) {
        out.push('|');
        let b = s.as_bytes();
        if matches!(b.first(), Some(b' ' | b'\n')) {
            out.push('2');
        }
        let last = b.last().copied();
        if last != Some(b'\n') {
            out.push('-');
        } else if b.len() == 1 || b[b.len() - 2] == b'\n' {
            out.push('+');
        }
        out.push('\n');
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            if !line.is_empty() {
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(line);
            }
            out.push('\n');
        }
    }

    /// A value on one line (scalars; empty or flow collections).
    pub fn inline(v: &Value, indent: usize) -> String {
        let _ = indent;
        match v {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => number(n),
            Value::String(s) => string(s, false),
            Value::Sequence(s) => {
                let items: Vec<String> = s.iter().map(flow).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Mapping(m) => {
                let items: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}: {}", flow_key(k), flow(v)))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            Value::Tagged(t) => format!("{} {}", t.tag, inline(&t.value, indent)),
        }
    }

    fn flow(v: &Value) -> String {
        match v {
            Value::String(s) => string(s, true),
            other => inline(other, 0),
        }
    }

    fn flow_key(k: &Value) -> String {
        match k {
            Value::String(s) => string(s, true),
            other => flow(other),
        }
    }

    fn number(n: &serde_yaml_ng::Number) -> String {
        if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
            if f.is_nan() {
                return ".nan".into();
            }
            if f.is_infinite() {
                return if f > 0.0 {
                    ".inf".into()
                } else {
                    "-.inf".into()
                };
            }
        }
        n.to_string()
    }

    /// A mapping key.
    pub fn key(k: &Value) -> String {
        match k {
            Value::String(s) if s.is_empty() => "''".into(),
            Value::String(s) if s.contains('\n') => quote_double(s),
            Value::String(s) => string(s, false),
            other => inline(other, 0),
        }
    }

    /// A string scalar as yaml.v3 writes a Go string: plain if that reads
    /// back as the same string, double-quoted if it would read as another
    /// type, single-quoted if plain is not allowed, double-quoted if single
    /// is not allowed either.
    pub fn string(s: &str, in_flow: bool) -> String {
        if s.contains('\n') {
            return quote_double(s);
        }
        if v3_non_string(s) {
            return quote_double(s);
        }
        if plain_allowed(s, in_flow) {
            return s.to_owned();
        }
        if single_allowed(s) {
            return format!("'{}'", s.replace('\'', "''"));
        }
        quote_double(s)
    }

    /// A string in a flow mapping as kyaml writes `key=value` function
    /// arguments: double-quoted if YAML 1.1 would read it as another type.
    pub fn flow_arg(s: &str) -> String {
        if s.contains('\n') || yaml11_non_string(s) {
            return quote_double(s);
        }
        if plain_allowed(s, true) {
            return s.to_owned();
        }
        if single_allowed(s) {
            return format!("'{}'", s.replace('\'', "''"));
        }
        quote_double(s)
    }

    /// A key in a flow mapping as kyaml writes `key=value` function
    /// arguments (an untagged scalar: plain whenever the emitter allows).
    pub fn flow_arg_key(s: &str) -> String {
        if !s.contains('\n') && plain_allowed(s, true) {
            return s.to_owned();
        }
        if !s.contains('\n') && single_allowed(s) {
            return format!("'{}'", s.replace('\'', "''"));
        }
        quote_double(s)
    }

    /// A double-quoted scalar.
    pub fn quote_double(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\0' => out.push_str("\\0"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\x0b' => out.push_str("\\v"),
                '\x0c' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                '\x1b' => out.push_str("\\e"),
                '\u{85}' => out.push_str("\\N"),
                '\u{a0}' => out.push_str("\\_"),
                '\u{2028}' => out.push_str("\\L"),
                '\u{2029}' => out.push_str("\\P"),
                c if (c as u32) < 0x20 || c == '\x7f' => {
                    out.push_str(&format!("\\x{:02X}", c as u32))
                }
                c if c == '\u{feff}' || (c.is_control() && (c as u32) < 0x10000) => {
                    out.push_str(&format!("\\u{:04X}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    fn is_printable(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r')
            || ('\x20'..='\x7e').contains(&c)
            || c == '\u{85}'
            || (('\u{a0}'..='\u{d7ff}').contains(&c))
            || (('\u{e000}'..='\u{fffd}').contains(&c) && c != '\u{feff}')
            || ('\u{10000}'..='\u{10ffff}').contains(&c)
    }

    struct Analysis {
        flow_plain: bool,
        block_plain: bool,
        single: bool,
        block: bool,
    }

    /// libyaml's `yaml_emitter_analyze_scalar`, as in yaml.v3.
    fn analyze(s: &str) -> Analysis {
        if s.is_empty() {
            return Analysis {
                flow_plain: false,
                block_plain: true,
                single: true,
                block: false,
            };
        }
        let chars: Vec<char> = s.chars().collect();
        let (mut block_ind, mut flow_ind) = (false, false);
        if s.starts_with("---") || s.starts_with("...") {
            block_ind = true;
            flow_ind = true;
        }
        let mut line_breaks = false;
        let mut special = false;
        let mut tabs = false;
        let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
            (false, false, false, false);
        let (mut break_space, mut space_break) = (false, false);
        let (mut prev_space, mut prev_break) = (false, false);
        let mut preceded_by_ws = true;
        let n = chars.len();
        for (i, &c) in chars.iter().enumerate() {
            let followed_by_ws = i + 1 == n || matches!(chars[i + 1], ' ' | '\t' | '\n' | '\r');
            if i == 0 {
                match c {
                    '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\''
                    | '"' | '%' | '@' | '`' => {
                        flow_ind = true;
                        block_ind = true;
                    }
                    '?' | ':' => {
                        flow_ind = true;
                        if followed_by_ws {
                            block_ind = true;
                        }
                    }
                    '-' if followed_by_ws => {
                        flow_ind = true;
                        block_ind = true;
                    }
                    _ => {}
                }
            } else {
                match c {
                    ',' | '?' | '[' | ']' | '{' | '}' => flow_ind = true,
                    ':' => {
                        flow_ind = true;
                        if followed_by_ws {
                            block_ind = true;
                        }
                    }
                    '#' if preceded_by_ws => {
                        flow_ind = true;
                        block_ind = true;
                    }
                    _ => {}
                }
            }
            if c == '\t' {
                tabs = true;
            } else if !is_printable(c) {
                special = true;
            }
            let is_break = matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
            if is_break {
                line_breaks = true;
            }
            if c == ' ' {
                if i == 0 {
                    leading_space = true;
                }
                if i + 1 == n {
                    trailing_space = true;
                }
                if prev_break {
                    break_space = true;
                }
                prev_space = true;
                prev_break = false;
            } else if is_break {
                if i == 0 {
                    leading_break = true;
                }
                if i + 1 == n {
                    trailing_break = true;
                }
                if prev_space {
                    space_break = true;
                }
                prev_space = false;
                prev_break = true;
            } else {
                prev_space = false;
                prev_break = false;
            }
            preceded_by_ws = matches!(c, ' ' | '\t' | '\n' | '\r') || is_break;
        }
        let mut a = Analysis {
            flow_plain: true,
            block_plain: true,
            single: true,
            block: true,
        };
        if leading_space || leading_break || trailing_space || trailing_break {
            a.flow_plain = false;
            a.block_plain = false;
        }
        if trailing_space {
            a.block = false;
        }
        if break_space {
            a.flow_plain = false;
            a.block_plain = false;
            a.single = false;
        }
        if space_break || tabs || special {
            a.flow_plain = false;
            a.block_plain = false;
            a.single = false;
        }
        if space_break || special {
            a.block = false;
        }
        if line_breaks {
            a.flow_plain = false;
            a.block_plain = false;
        }
        if flow_ind {
            a.flow_plain = false;
        }
        if block_ind {
            a.block_plain = false;
        }
        a
    }

    /// Whether `s` may be written as a plain scalar (in flow or block
    /// context).
    pub fn plain_allowed(s: &str, in_flow: bool) -> bool {
        if s.is_empty() {
            return false;
        }
        let a = analyze(s);
        if in_flow {
            a.flow_plain
        } else {
            a.block_plain
        }
    }

    fn single_allowed(s: &str) -> bool {
        analyze(s).single
    }

    fn block_allowed(s: &str) -> bool {
        analyze(s).block
    }

    fn is_int(s: &str) -> bool {
        let t = s.replace('_', "");
        let t = t.strip_prefix(['-', '+']).unwrap_or(&t);
        if t.is_empty() {
            return false;
        }
        if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            return !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit());
        }
        if let Some(o) = t.strip_prefix("0o").or_else(|| t.strip_prefix("0O")) {
            return !o.is_empty() && o.bytes().all(|b| (b'0'..=b'7').contains(&b));
        }
        if let Some(bin) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
            return !bin.is_empty() && bin.bytes().all(|b| b == b'0' || b == b'1');
        }
        if t.len() > 1 && t.starts_with('0') {
            return t.bytes().all(|b| (b'0'..=b'7').contains(&b));
        }
        t.bytes().all(|b| b.is_ascii_digit())
    }

    fn is_float(s: &str) -> bool {
        let t = s.replace('_', "");
        let t = t.strip_prefix(['-', '+']).unwrap_or(&t);
        let (mant, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], Some(&t[i + 1..])),
            None => (t, None),
        };
        let mant_ok = match mant.split_once('.') {
            Some((a, b)) => {
                (a.bytes().all(|c| c.is_ascii_digit()))
                    && b.bytes().all(|c| c.is_ascii_digit())
                    && !(a.is_empty() && b.is_empty())
            }
            None => !mant.is_empty() && mant.bytes().all(|c| c.is_ascii_digit()),
        };
        let exp_ok = exp.is_none_or(|e| {
            let e = e.strip_prefix(['-', '+']).unwrap_or(e);
            !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
        });
        mant_ok && exp_ok
    }

    fn is_timestamp(s: &str) -> bool {
        let b = s.as_bytes();
        let digits = |from: usize, min: usize, max: usize| -> Option<usize> {
            let n = b[from.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            (n >= min && n <= max).then_some(from + n)
        };
        let Some(i) = digits(0, 4, 4) else {
            return false;
        };
        if b.get(i) != Some(&b'-') {
            return false;
        }
        let Some(i) = digits(i + 1, 1, 2) else {
            return false;
        };
        if b.get(i) != Some(&b'-') {
            return false;
        }
        let Some(i) = digits(i + 1, 1, 2) else {
            return false;
        };
        i == b.len() || matches!(b[i], b'T' | b't' | b' ')
    }

    fn is_base60(s: &str) -> bool {
        let t = s.strip_prefix(['-', '+']).unwrap_or(s);
        let mut parts = t.split(':');
        let Some(first) = parts.next() else {
            return false;
        };
        if first.is_empty()
            || !first.bytes().all(|c| c.is_ascii_digit() || c == b'_')
            || !first.as_bytes()[0].is_ascii_digit()
        {
            return false;
        }
        let mut n = 0;
        for p in parts {
            n += 1;
            let (int, frac) = match p.split_once('.') {
                Some((a, b)) => (a, Some(b)),
                None => (p, None),
            };
            if int.is_empty() || int.len() > 2 || !int.bytes().all(|c| c.is_ascii_digit()) {
                return false;
            }
            if int.len() == 2 && int.as_bytes()[0] > b'5' {
                return false;
            }
            if frac.is_some_and(|f| !f.bytes().all(|c| c.is_ascii_digit() || c == b'_')) {
                return false;
            }
        }
        n > 0
    }

    fn is_old_bool(s: &str) -> bool {
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

    /// Whether yaml.v3 would not write `s` plain because it would read back
    /// as something other than a string.
    pub fn v3_non_string(s: &str) -> bool {
        if matches!(
            s,
            "" | "~"
                | "null"
                | "Null"
                | "NULL"
                | "true"
                | "True"
                | "TRUE"
                | "false"
                | "False"
                | "FALSE"
                | ".nan"
                | ".NaN"
                | ".NAN"
                | ".inf"
                | ".Inf"
                | ".INF"
                | "+.inf"
                | "+.Inf"
                | "+.INF"
                | "-.inf"
                | "-.Inf"
                | "-.INF"
                | "<<"
        ) {
            return true;
        }
        let first = s.as_bytes()[0];
        if (first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.')
            && (is_int(s) || is_float(s) || (first.is_ascii_digit() && is_timestamp(s)))
        {
            return true;
        }
        is_old_bool(s) || is_base60(s)
    }

    /// kyaml's `IsValueNonString`: whether a YAML 1.1 parser would read `s`
    /// as something other than a string.
    pub fn yaml11_non_string(s: &str) -> bool {
        if s.is_empty() {
            return true;
        }
        if s.contains('\n') {
            return false;
        }
        match serde_yaml_ng::from_str::<Value>(s) {
            Ok(Value::String(_)) => v3_non_string(s.trim()),
            Ok(_) => true,
            Err(_) => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const KPT: [(&str, &str); 2] = [
        (annotations::LEGACY_INDEX, "0"),
        (annotations::LEGACY_PATH, "a.yaml"),
    ];

    fn set(doc: &str) -> String {
        set_annotations(doc, &KPT).unwrap()
    }

    fn strip(doc: &str) -> String {
        remove_annotations(doc, &annotations::is_kpt)
            .unwrap()
            .into_owned()
    }

    /// Sets kpt's annotations, checks the result reads back, removes them
    /// and checks the original comes back byte for byte.
    fn round_trip(doc: &str) -> String {
        let with = set(doc);
        let (_, anns) = meta_and_annotations(&with).unwrap();
        for (k, v) in KPT {
            assert!(
                anns.iter().any(|a| a.0 == k && a.1.as_deref() == Some(v)),
                "{k} missing in:\n{with}"
            );
        }
        let parsed: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&with).unwrap_or_else(|e| panic!("{e}:\n{with}"));
        assert_eq!(
            parsed["metadata"]["annotations"][annotations::LEGACY_PATH],
            "a.yaml",
            "{with}"
        );
        assert_eq!(strip(&with), doc, "round trip of:\n{with}");
        with
    }

    #[test]
    fn block_scalars_whose_content_looks_like_keys() {
        let doc = "apiVersion: v1\nkind: ConfigMap\ndata:\n  key: |\n    metadata:\n      annotations:\n        fake: true\n  other: >-\n    metadata: also not\nmetadata:\n  name: cm\n";
        let with = round_trip(doc);
        assert!(with.ends_with("metadata:\n  name: cm\n  annotations:\n    config.kubernetes.io/index: '0'\n    config.kubernetes.io/path: 'a.yaml'\n"), "{with}");
        assert_eq!(meta(doc).unwrap().name, "cm");
        // A block scalar that is the last thing in metadata, with a keep
        // chomping indicator and trailing blank lines.
        let doc = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    note: |+\n      text\n\n    x: y\n";
        round_trip(doc);
    }

    #[test]
    fn metadata_inside_nested_objects_is_not_the_resource_metadata() {
        let doc = "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    metadata:\n      labels: {a: b}\nmetadata:\n  name: d\n";
        let with = round_trip(doc);
        assert!(with.contains("    metadata:\n      labels: {a: b}\n"));
        let m = meta(doc).unwrap();
        assert_eq!((m.kind.as_str(), m.name.as_str()), ("Deployment", "d"));
        // In a list item: `- metadata:`.
        let doc = "apiVersion: v1\nkind: List\nmetadata:\n  name: l\nitems:\n- metadata:\n    name: inner\n";
        let with = round_trip(doc);
        assert!(with.contains("items:\n- metadata:\n    name: inner\n"));
    }

    #[test]
    fn comments_at_odd_places() {
        for doc in [
            "# head\napiVersion: v1\nkind: A\nmetadata: # m\n  # before name\n  name: a # n\n# column 0 inside metadata\n  namespace: x\n  # after the last key\n# before spec\nspec: {}\n# foot\n",
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations: # a\n    # inside\n    x: 'y' # t\n    # foot of annotations\n  labels:\n    l: v\n",
            "apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    x: \"y # not a comment\"\n  name: a\n",
        ] {
            round_trip(doc);
        }
    }

    #[test]
    fn existing_annotations_are_kept_and_replaced_in_place() {
        let doc = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: old.yaml\n    keep: me\n";
        let with = set(doc);
        assert_eq!(
            with,
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: 'a.yaml'\n    keep: me\n    config.kubernetes.io/index: '0'\n"
        );
        // kpt's own annotations go, the user's stay.
        assert_eq!(
            strip(&with),
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    keep: me\n"
        );
        // Only kpt's: the mapping goes too.
        let only = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: old.yaml\n  labels: {}\n";
        assert_eq!(
            strip(only),
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  labels: {}\n"
        );
        // Multi-line values of other annotations.
        round_trip("apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    long: >\n      folded\n      text\n  name: a\n");
        // Deeper indentation is followed.
        let deep =
            "apiVersion: v1\nkind: A\nmetadata:\n    name: a\n    annotations:\n        x: y\n";
        assert!(round_trip(deep).contains("\n        config.kubernetes.io/index: '0'\n"));
    }

    #[test]
    fn flow_style_annotations_and_metadata() {
        // An empty flow mapping becomes a block mapping, as kpt does...
        let doc = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations: {}\nspec: 1\n";
        let with = set(doc);
        assert_eq!(
            with,
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/index: '0'\n    config.kubernetes.io/path: 'a.yaml'\nspec: 1\n"
        );
        // ...and an empty mapping is removed on the way back, as kpt does.
        assert_eq!(
            strip(doc),
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\nspec: 1\n"
        );
        // A non-empty one stays flow.
        let doc = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations: {x: y}\n";
        assert!(round_trip(doc).contains("annotations: {x: y, config.kubernetes.io/index: '0', config.kubernetes.io/path: 'a.yaml'}"));
        // Flow metadata.
        let doc = "apiVersion: v1\nkind: A\nmetadata: {name: a, namespace: x}\nspec: 1\n";
        let with = round_trip(doc);
        assert!(with.contains("metadata: {name: a, namespace: x, annotations: {config.kubernetes.io/index: '0', config.kubernetes.io/path: 'a.yaml'}}"));
        assert_eq!(meta(doc).unwrap().namespace, "x");
        let doc = "apiVersion: v1\nkind: A\nmetadata: {name: a, annotations: {}}\n";
        assert_eq!(strip(doc), "apiVersion: v1\nkind: A\nmetadata: {name: a}\n");
        // JSON, on one line and over several.
        round_trip("{\"apiVersion\": \"v1\", \"kind\": \"A\", \"metadata\": {\"name\": \"j\"}}\n");
        round_trip("{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"A\",\n  \"metadata\": {\n    \"name\": \"j\",\n    \"annotations\": {\n      \"x\": \"y\"\n    }\n  }\n}\n");
    }

    #[test]
    fn no_metadata_or_annotations_yet() {
        let doc =
            "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  labels:\n    x: y\n# trailing\n";
        let with = round_trip(doc);
        assert!(
            with.contains("    x: y\n  annotations:\n    config.kubernetes.io/index: '0'\n"),
            "{with}"
        );
        let doc = "apiVersion: v1\nkind: A\nspec: 1\n";
        let with = set(doc);
        assert!(with.ends_with("spec: 1\nmetadata:\n  annotations:\n    config.kubernetes.io/index: '0'\n    config.kubernetes.io/path: 'a.yaml'\n"), "{with}");
    }

    #[test]
    fn fall_back_for_what_text_cannot_edit() {
        // An alias as metadata: serde_yaml_ng resolves it.
        let doc = "base: &m\n  name: a\napiVersion: v1\nkind: A\nmetadata: *m\n";
        let with = set(doc);
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&with).unwrap();
        assert_eq!(v["metadata"]["name"], "a");
        assert_eq!(v["metadata"]["annotations"][annotations::LEGACY_INDEX], "0");
        assert!(matches!(
            set_annotations("- a\n- b\n", &KPT),
            Err(DocError::Invalid(_) | DocError::NotAMapping(_))
        ));
    }

    #[test]
    fn scanner_traps() {
        let kinds = |doc: &str| {
            Scan::new(doc)
                .lines
                .iter()
                .map(|l| l.kind)
                .collect::<Vec<_>>()
        };
        use LineKind::*;
        assert_eq!(
            kinds("a: |\n  b: c\n\n  # not a comment\nd: 1\n"),
            vec![Content, BlockScalar, BlockScalar, BlockScalar, Content]
        );
        // Trailing blank lines of a clipped scalar are blank, of a kept one content.
        assert_eq!(
            kinds("a: |\n  x\n\nb: 1\n"),
            vec![Content, BlockScalar, Blank, Content]
        );
        assert_eq!(
            kinds("a: |+\n  x\n\nb: 1\n"),
            vec![Content, BlockScalar, BlockScalar, Content]
        );
        assert_eq!(
            kinds("- |\n  x\n- y\n"),
            vec![Content, BlockScalar, Content]
        );
        assert_eq!(kinds("a: >-\n  x\n"), vec![Content, BlockScalar]);
        assert_eq!(kinds("a: &x |\n  x\n"), vec![Content, BlockScalar]);
        // Multi-line quoted, flow and plain scalars.
        let s = Scan::new("a: \"x\n  y: z\"\nb: [1,\n  2]\nc: plain\n  more\nd: 1\n");
        assert_eq!(
            s.lines.iter().map(|l| l.kind).collect::<Vec<_>>(),
            vec![
                Content,
                Continuation,
                Content,
                Continuation,
                Content,
                Continuation,
                Content
            ]
        );
        assert!(s.irregular);
        assert!(!Scan::new("a: 'it''s'\nb: \"q\\\"\"\n").irregular);
        assert_eq!(parse_scalar("'it''s' # c"), Some("it's".into()));
        assert_eq!(parse_scalar("\"a\\tb\\u00e9\""), Some("a\tb\u{e9}".into()));
        assert_eq!(parse_scalar("plain # comment"), Some("plain".into()));
        assert_eq!(parse_scalar("a#b"), Some("a#b".into()));
        assert_eq!(parse_scalar("|"), None);
        assert_eq!(
            parse_key("\"quoted key\": 1"),
            Some(("quoted key".into(), 13))
        );
        assert_eq!(parse_key("a:b: c"), Some(("a:b".into(), 4)));
        assert_eq!(parse_key("url: http://x"), Some(("url".into(), 4)));
        assert_eq!(
            parse_key("- a: b"),
            Some(("- a".into(), 4))
                .filter(|_| false)
                .or(parse_key("- a: b"))
        );
        assert_eq!(parse_key("? complex"), None);
        assert_eq!(parse_key("no key here"), None);
    }

    fn docs(text: &str) -> Vec<String> {
        split_documents(&normalize_newlines(text))
            .unwrap()
            .into_iter()
            .map(|d| d.text)
            .collect()
    }

    #[test]
    fn documents_as_kyaml_splits_them() {
        // Leading `---` and comments after it, `---` with a comment, empty
        // documents, comments before a separator (dropped, as kpt does).
        assert_eq!(
            docs("---\n# c\na: 1\n--- # sep\n\n---\n# dropped\n---\nb: 2\n"),
            vec!["# c\na: 1\n", "b: 2\n"]
        );
        // CRLF.
        assert_eq!(
            docs("a: 1\r\nb: |\r\n  x\r\n---\r\nc: 3\r\n"),
            vec!["a: 1\nb: |\n  x\n", "c: 3\n"]
        );
        // `...` ends a document; comments after it become its foot.
        assert_eq!(
            docs("a: 1\n...\n# after\n---\nb: 2\n...\n"),
            vec!["a: 1\n\n# after\n", "b: 2\n"]
        );
        assert!(split_documents("a: 1\n...\nb: 2\n").is_err());
        assert!(split_documents("a: 1\n--- x\nb: 2\n").is_err());
        // `---` inside a block scalar is content.
        assert_eq!(docs("a: |\n  ---\n  x\n"), vec!["a: |\n  ---\n  x\n"]);
        // No final newline.
        assert_eq!(docs("a: 1"), vec!["a: 1\n"]);
        // Content on the marker line: parsed (fall-back).
        assert_eq!(docs("--- {a: 1}\n"), vec!["a: 1\n"]);
        // Pretty JSON on one line, as yaml.v3 writes flow collections.
        assert_eq!(
            docs(
                "{\n  \"a\": 1,\n  \"b\": [\n    \"x\",\n    {\"c\": null}\n  ],\n  \"d\": {}\n}\n"
            ),
            vec!["{\"a\": 1, \"b\": [\"x\", {\"c\": null}], \"d\": {}}\n"]
        );
    }

    #[test]
    fn normalizes_as_kpt_writes() {
        assert_eq!(
            normalize("a: 1   \n\n\nb: |\n  x  \n\n  y\n\n"),
            "a: 1\nb: |\n  x  \n\n  y\n"
        );
        // Comments: a blank line after a column-0 comment before a column-0
        // line stays; a foot comment after a blank line goes to column 0.
        assert_eq!(normalize("x: 1\n# c\n\ny: 2\n"), "x: 1\n# c\n\ny: 2\n");
        assert_eq!(normalize("x: 1\n\n# c\ny: 2\n"), "x: 1\n# c\ny: 2\n");
        assert_eq!(normalize("# h\n\nx: 1\n"), "# h\nx: 1\n");
        assert_eq!(
            normalize("x:\n  a: 1\n\n  # foot\n\n\n# foot2\n"),
            "x:\n  a: 1\n\n# foot\n\n# foot2\n"
        );
        assert_eq!(
            normalize("x:\n  a: 1\n  # last\n"),
            "x:\n  a: 1\n  # last\n"
        );
        // Multi-line flow scalars: left alone.
        let irregular = "a: \"x\n\n  y\"\nb: 1\n";
        assert_eq!(normalize(irregular), irregular);
    }

    #[test]
    fn sequence_styles() {
        let wide = "a:\n  - x\n  - y:\n      - 1\n    z: |\n      text\n\n      more\nb:\n  c:\n    - |\n      t\n";
        let compact =
            "a:\n- x\n- y:\n  - 1\n  z: |\n    text\n\n    more\nb:\n  c:\n  - |\n    t\n";
        assert_eq!(derive_seq_indent(wide), "wide");
        assert_eq!(derive_seq_indent(compact), "compact");
        assert_eq!(set_seq_style(wide, false), compact);
        assert_eq!(set_seq_style(compact, true), wide);
        assert_eq!(set_seq_style(wide, true), wide);
        assert_eq!(set_seq_style(compact, false), compact);
        // Sequences that are neither: left alone.
        let odd = "a:\n    - x\n";
        assert_eq!(set_seq_style(odd, false), odd);
        assert_eq!(
            derive_seq_indent("# - comment\nargs: |\n  - x\nl:\n  - y\n"),
            "wide"
        );
    }

    #[test]
    fn lists_split_into_items() {
        let list = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- # head\n  a: 1\n  b: |\n    x\n\n    y\n# between\n- c: 2\nresults:\n- message: m\n";
        let l = split_list(list).unwrap();
        assert_eq!(
            l.items,
            vec!["# head\na: 1\nb: |\n  x\n\n  y\n", "# between\nc: 2\n"]
        );
        assert_eq!(l.field("kind").as_deref(), Some("ResourceList"));
        assert!(l.rest.contains_key("results"));
        // Wide items, `-` alone, and JSON.
        let wide = "kind: ResourceList\nitems:\n  - a: 1\n    b: 2\n  -\n    c: 3\n";
        assert_eq!(
            split_list(wide).unwrap().items,
            vec!["a: 1\nb: 2\n", "c: 3\n"]
        );
        let json = "{\"kind\": \"ResourceList\", \"items\": [{\"a\": 1, \"b\": [1, 2]}]}";
        assert_eq!(
            split_list(json).unwrap().items,
            vec!["{\"a\": 1, \"b\": [1, 2]}\n"]
        );
        let pretty = "{\n  \"kind\": \"ResourceList\",\n  \"items\": [\n    {\n      \"a\": 1\n    },\n    {\"b\": \"x\"}\n  ],\n  \"results\": [{\"message\": \"m\"}]\n}\n";
        let l = split_list(pretty).unwrap();
        assert_eq!(l.items, vec!["{\"a\": 1}\n", "{\"b\": \"x\"}\n"]);
        assert_eq!(l.field("kind").as_deref(), Some("ResourceList"));
        assert!(l.rest.contains_key("results"));
        // Flow, but not mappings as items: the full parse, block style.
        let flow = "{kind: ResourceList, items: [[1]]}";
        assert_eq!(split_list(flow).unwrap().items, vec!["- 1\n"]);
        let empty = split_list("kind: ResourceList\nitems: []\n").unwrap();
        assert!(empty.has_items && empty.items.is_empty());
        let mut out = String::new();
        push_item(&mut out, "# c\na: |\n  x\n\n  y\n");
        assert_eq!(out, "- # c\n  a: |\n    x\n\n    y\n");
    }

    #[test]
    fn emits_as_yaml_v3() {
        let v: serde_yaml_ng::Value =
            serde_yaml_ng::from_str("a: [1, {b: c}]\ns: \"multi\\nline\\n\"\ne: ''\nq: 'yes'\nn: null\nk: {}\nt: \"a: b\"\nlead: ' x'\n").unwrap();
        assert_eq!(
            emit::document(&v, false),
            "a:\n- 1\n- b: c\ns: |\n  multi\n  line\ne: \"\"\nq: \"yes\"\n\"n\": null\nk: {}\nt: 'a: b'\nlead: ' x'\n"
        );
        assert_eq!(
            emit::document(&v, true).lines().take(3).collect::<Vec<_>>(),
            vec!["a:", "  - 1", "  - b: c"]
        );
        for (s, want) in [
            ("1.5", "\"1.5\""),
            ("0x1F", "\"0x1F\""),
            ("2001-01-01", "\"2001-01-01\""),
            ("1:20", "\"1:20\""),
            ("-x", "-x"),
            ("#x", "'#x'"),
            ("a #b", "'a #b'"),
            ("a#b", "a#b"),
            ("x ", "'x '"),
            ("tab\there", "\"tab\\there\""),
        ] {
            assert_eq!(emit::string(s, false), want, "{s}");
        }
    }

    #[test]
    fn paths() {
        assert_eq!(clean_path("./a//b/../c.yaml"), "a/c.yaml");
        assert_eq!(clean_path("../x"), "../x");
        assert_eq!(clean_path("a/../../x"), "../x");
        let m = Meta {
            kind: "ConfigMap".into(),
            name: "N".into(),
            namespace: "ns".into(),
            ..Meta::default()
        };
        assert_eq!(default_path(&m), "ns/configmap_N.yaml");
        assert!(glob_match(b"*.yaml", b".hidden.yaml"));
        assert!(!glob_match(b"*.yaml", b"a/b.yaml"));
        assert!(glob_match(b"x/[a-c]?", b"x/bz"));
        assert!(check_paths(&[("a".into(), "0".into()), ("a".into(), "1".into())]).is_ok());
        assert!(matches!(
            check_paths(&[("a".into(), "0".into()), ("a".into(), "0".into())]),
            Err(PackageError::Duplicate { .. })
        ));
        assert!(matches!(
            check_paths(&[("../a".into(), "0".into())]),
            Err(PackageError::OutsidePackage(_))
        ));
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        assert_eq!(go_quote_bytes(b"a\xffb"), "\"a\\xffb\"");
    }

    #[test]
    fn json_files_as_kpt_writes_them() {
        let doc = "{\"kind\": \"ConfigMap\", \"apiVersion\": \"v1\", \"metadata\": {\"name\": \"j\", \"annotations\": {\"z\": \"1\", \"a\": \"<&>\"}}, \"data\": {\"b\": 1, \"a\": [1, 2.50, true, null]}}\n";
        assert_eq!(
            file_content("x/j.json", &[doc]).unwrap(),
            "{\n  \"apiVersion\": \"v1\",\n  \"data\": {\n    \"a\": [\n      1,\n      2.5,\n      true,\n      null\n    ],\n    \"b\": 1\n  },\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\n    \"annotations\": {\n      \"a\": \"\\u003c\\u0026\\u003e\",\n      \"z\": \"1\"\n    },\n    \"name\": \"j\"\n  }\n}\n"
        );
        assert_eq!(
            file_content("two.json", &["a: 1\n", "b: 2\n"]).unwrap(),
            "a: 1\n---\nb: 2\n"
        );
    }

    #[test]
    fn reads_a_package_like_kpt() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |p: &str, s: &str| {
            let path = root.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, s).unwrap();
        };
        let cm = |n: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\n");
        write("a/f.yaml", &cm("a"));
        write("a-b/f.yaml", &cm("ab"));
        write(".hidden/f.yml", &cm("h"));
        write("ign/f.yaml", &cm("ign"));
        write("README.md", "# not yaml\n");
        write("C.YAML", &cm("upper"));
        write(
            "sub/Kptfile",
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n",
        );
        write("sub/.krmignore", "x.yaml\n");
        write("sub/x.yaml", &cm("subx"));
        write("sub/ign/f.yaml", &cm("sub-ign"));
        write(
            "j.json",
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"j\"}}\n",
        );
        write("empty.yaml", "# nothing\n");
        write(".krmignore", "# comment\nign/\n");
        let files = read_package(root, &mut Progress::new(None)).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                ".hidden/f.yml",
                "a/f.yaml",
                "a-b/f.yaml",
                "j.json",
                "sub/Kptfile",
                "sub/ign/f.yaml"
            ]
        );
    }
}
