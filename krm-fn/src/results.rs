//! A KRM function's stdout, checked as a ResourceList, and its structured
//! `results` turned into text.
//!
//! Used on every successful call (exit 0: is stdout one ResourceList?), when a
//! function failed (exit ≠ 0: its `results` become the gRPC error message),
//! and by `function-runner eval` (kpt-style result lines).
//!
//! # Accepted input
//!
//! YAML or JSON (JSON is YAML too): a mapping with `kind: ResourceList`
//! (`apiVersion` is not checked: `config.kubernetes.io/v1` and `v1alpha1` are
//! both in use), `items`, optional `functionConfig`, optional `results`.
//! `results` may use the spec's shape or the variants real functions emit;
//! see [`FnResult`]. Only the first document of a stream counts.
//!
//! # Cost, and the fast path
//!
//! Measured in release mode (opt-level 3, no LTO, x86_64) on the shared
//! 2-core build box, which was busy (load average 4-6), so these are the best
//! of several runs and worst cases ran 2-3x higher. Input: a ResourceList of
//! 5,421 Deployments (6.0 MiB of block YAML, 4.8 MiB as compact JSON) with
//! one result; see the `bench_6mib` test.
//!
//! | what                                                              | time     |
//! |-------------------------------------------------------------------|----------|
//! | `serde_yaml` into `serde_yaml::Value` (the whole tree)            | ~370 ms  |
//! | `serde_yaml` into a struct skipping `items` (`IgnoredAny`)        | ~180 ms  |
//! | `serde_json`, JSON form, into a struct skipping `items`           | ~3.8 ms  |
//! | [`parse_output`], block YAML (line scan below)                    | ~0.6 ms  |
//! | [`parse_output`], block YAML with CRLF line ends                  | ~0.7 ms  |
//! | [`parse_output`], JSON (that is `serde_json` + `IgnoredAny`)      | ~4 ms    |
//! | [`parse_output`], block YAML plus 1,000 results (130 KiB of them) | ~6 ms    |
//!
//! libyaml has to scan every character of `items` to find where it ends, so
//! even a parse that skips `items` costs ~30 ms per MiB; the results that are
//! read cost ~40 µs per KiB. [`parse_output`] therefore avoids parsing
//! `items` at all:
//!
//! - **JSON** (first non-blank byte `{` or `[`): `serde_json` with
//!   `IgnoredAny` for everything not needed; this still checks the whole JSON
//!   syntax. Any `serde_json` failure (trailing documents, flow-style YAML such
//!   as `{kind: ResourceList}`…) falls back to the full YAML parse.
//! - **Block YAML**: a line scan. In block YAML, every line that starts at
//!   column 0 and is not blank, a comment, a document marker or a `- ` entry
//!   of a compact sequence is a key of the root mapping. The scan cuts the
//!   document into one section per top-level key (its key line through the
//!   line before the next key). All sections but `items` are concatenated, in
//!   order, into a small document parsed by the same `serde_yaml` code as the
//!   full parse; so `kind` (whatever its quoting), `results`,
//!   `functionConfig` and unknown keys are read, and syntax-checked, by
//!   libyaml itself. Only a block-style `items` section (`items:` with nothing
//!   but a comment after it) is skipped unread. Once inside the root mapping
//!   the scan only looks at lines that do not start with a space, found by a
//!   chunked, vectorised search for `\n` followed by a non-space byte.
//! - **Fall-back rules**: the full `serde_yaml` parse ([`parse_output_strict`])
//!   runs instead whenever the scan meets anything it does not fully
//!   understand: input that is not UTF-8 (or starts with a BOM); line breaks
//!   other than LF/CRLF (a lone CR, NEL, LS, PS: libyaml breaks lines there);
//!   a tab at column 0; indented content before the first key (indented root);
//!   directives (`%`), `...` before the first key or a second `---` there
//!   (empty first document), content after the opening `---`; a column-0 line
//!   that is not a plain `key:` (quoted or complex `? ` keys, `key :`, odd
//!   characters); a duplicate top-level key; a top-level value that opens a
//!   quoted scalar or flow collection it does not close on the same line (such
//!   values may continue at column 0); no top-level key at all. The small
//!   document failing to parse also falls back, so every error message (with
//!   its line and column) comes from the full parse of the real input, and an
//!   alias in `results` to an anchor inside `items` still resolves.
//! - **What the fast path does not check**: the syntax *inside* a block-style
//!   `items` section. Output whose items are broken YAML but whose top level
//!   is a ResourceList passes [`parse_output`] and fails
//!   [`parse_output_strict`]; the server returns those bytes unchanged and the
//!   caller parses the items anyway. A related, spec-invalid corner that
//!   libyaml nevertheless accepts: a multi-line quoted scalar or flow
//!   collection *nested inside* `items` whose continuation lines start at
//!   column 0 (no serializer writes this); such a line is taken as a
//!   top-level key. Tests run both parsers on every input and compare.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The `kind` a function's stdout must have.
pub const RESOURCE_LIST_KIND: &str = "ResourceList";

/// What [`OutputError::NotResourceList`] says when the mapping has no `kind`.
pub const NO_KIND: &str = "no kind";

/// Severity of one result, as functions write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// `error`, and also a missing, empty or unknown severity (as kpt).
    #[default]
    Error,
    /// `warning` or `warn`.
    Warning,
    /// `info`.
    Info,
}

impl Severity {
    /// `"error"`, `"warning"` or `"info"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// Reads a severity as functions write it: case-insensitive, `warn` is a
    /// warning, anything else that is not `warning`/`info` is an error.
    pub fn from_name(name: &str) -> Severity {
        let name = name.trim();
        if name.eq_ignore_ascii_case("warning") || name.eq_ignore_ascii_case("warn") {
            Severity::Warning
        } else if name.eq_ignore_ascii_case("info") {
            Severity::Info
        } else {
            Severity::Error
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One structured result (the spec's shape, normalised from the variants
/// functions emit).
///
/// Accepted on input: `message`; `severity` (`error`/`warning`/`warn`/`info`,
/// any case; missing → error); `resourceRef` with `apiVersion`, `kind`,
/// `name`, `namespace`, or `metadata.name`/`metadata.namespace`; `field` as a
/// mapping (`path`, `currentValue`, `proposedValue` or `suggestedValue`) or a
/// plain path string; `file` (`path`, `index`); `tags`. Legacy wrapped
/// results `{name, items: [...]}` are flattened. Unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FnResult {
    pub message: String,
    pub severity: Severity,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_ref: Option<ResourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<Field>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<File>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

impl FnResult {
    /// Whether this result has error severity.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The resource a result is about. Missing parts are empty strings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ResourceRef {
    /// `apiVersion/kind/namespace/name`, empty parts left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [&self.api_version, &self.kind, &self.namespace, &self.name];
        let mut first = true;
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            if !first {
                f.write_str("/")?;
            }
            f.write_str(part)?;
            first = false;
        }
        Ok(())
    }
}

/// The field a result is about.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Field {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_value: Option<serde_json::Value>,
    /// `proposedValue`, or the legacy `suggestedValue`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_value: Option<serde_json::Value>,
}

/// The file a result is about.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
}

/// stdout parsed as a ResourceList: only what the server needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceListOutput {
    /// The `results`, flattened and normalised, in order.
    pub results: Vec<FnResult>,
}

impl ResourceListOutput {
    /// Whether any result has error severity.
    pub fn has_errors(&self) -> bool {
        self.results.iter().any(FnResult::is_error)
    }
}

/// Why stdout is not a usable ResourceList.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// Nothing but blanks and comments (or an empty/`null` first document).
    #[error("stdout is empty, expected a ResourceList")]
    Empty,
    /// A mapping whose `kind` is not `ResourceList`; `kind` is the kind found
    /// or [`NO_KIND`].
    #[error("stdout is not a ResourceList: {}", describe_kind(kind))]
    NotResourceList { kind: String },
    /// The top level is not a mapping: `found` is "a sequence", "a string"…
    #[error("stdout is not a ResourceList: its top level is {found}, not a mapping")]
    NotAMapping { found: &'static str },
    /// Not YAML, or a ResourceList whose `results` have the wrong shape. The
    /// message names the line and column where the parser gives them.
    #[error("cannot parse stdout as a ResourceList: {0}")]
    Parse(String),
}

fn describe_kind(kind: &str) -> String {
    if kind == NO_KIND {
        "it has no kind".to_owned()
    } else {
        format!("its kind is {kind:?}")
    }
}

impl fmt::Display for FnResult {
    /// `[severity] apiVersion/kind/ns/name field: message`; absent parts are
    /// left out (`[error] message` when there is no resource and no field).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.severity)?;
        let resource = self
            .resource_ref
            .as_ref()
            .map(ToString::to_string)
            .filter(|r| !r.is_empty());
        let field = self
            .field
            .as_ref()
            .map(|fl| fl.path.as_str())
            .filter(|p| !p.is_empty());
        match (resource, field) {
            (Some(r), Some(p)) => write!(f, "{r} {p}: ")?,
            (Some(r), None) => write!(f, "{r}: ")?,
            (None, Some(p)) => write!(f, "{p}: ")?,
            (None, None) => {}
        }
        f.write_str(self.message.trim_end())
    }
}

/// One line per result (see [`FnResult`]'s `Display`), joined with `"\n"`.
pub fn format_results(results: &[FnResult]) -> String {
    let mut out = String::new();
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&result.to_string());
    }
    out
}

/// Checks a function's stdout is a ResourceList and reads its `results`.
///
/// Fast on large outputs (see the module documentation): `items` is not
/// parsed unless it has to be.
pub fn parse_output(stdout: &[u8]) -> Result<ResourceListOutput, OutputError> {
    if is_blank(stdout) {
        return Err(OutputError::Empty);
    }
    match parse_fast(stdout) {
        Some(result) => result,
        None => parse_output_strict(stdout),
    }
}

/// Like [`parse_output`], but always parses the whole first document with
/// `serde_yaml`, `items` included (~30 ms per MiB): the reference the fast
/// path is tested against, and a stricter check where cost does not matter.
pub fn parse_output_strict(stdout: &[u8]) -> Result<ResourceListOutput, OutputError> {
    if is_blank(stdout) {
        return Err(OutputError::Empty);
    }
    match parse_first_yaml_document(stdout) {
        Ok(top) => finish(top),
        // A shape error can be met before a syntax error further on (libyaml
        // stops at the syntax error, serde reads what came before it): name
        // the syntax error then, it is the one to fix.
        Err(e) => Err(OutputError::Parse(match syntax_error(stdout) {
            Some(syntax) => syntax.to_string(),
            None => e.to_string(),
        })),
    }
}

/// The YAML syntax error in the first document, if any.
fn syntax_error(bytes: &[u8]) -> Option<serde_yaml::Error> {
    let document = serde_yaml::Deserializer::from_slice(bytes).next()?;
    IgnoredAny::deserialize(document).err()
}

/// The fast path: `None` means "not understood, use the full parse".
fn parse_fast(stdout: &[u8]) -> Option<Result<ResourceListOutput, OutputError>> {
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

fn parse_first_yaml_document(bytes: &[u8]) -> Result<Top, serde_yaml::Error> {
    match serde_yaml::Deserializer::from_slice(bytes).next() {
        Some(document) => Top::deserialize(document),
        None => Ok(Top::Null),
    }
}

fn finish(top: Top) -> Result<ResourceListOutput, OutputError> {
    match top {
        Top::Null => Err(OutputError::Empty),
        Top::NotMapping(found) => Err(OutputError::NotAMapping { found }),
        Top::Mapping { kind, results } => match kind {
            Some(kind) if kind == RESOURCE_LIST_KIND => {
                let mut out = Vec::with_capacity(results.len());
                flatten(results, &mut out);
                Ok(ResourceListOutput { results: out })
            }
            Some(kind) => Err(OutputError::NotResourceList { kind }),
            None => Err(OutputError::NotResourceList {
                kind: NO_KIND.to_owned(),
            }),
        },
    }
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

fn is_blank(bytes: &[u8]) -> bool {
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

// ---------------------------------------------------------------------------
// Deserialization (shared by the JSON, small-document and full parses)

/// The top level of the first document.
enum Top {
    /// Empty document or `null`.
    Null,
    NotMapping(&'static str),
    Mapping {
        kind: Option<String>,
        results: Vec<RawResult>,
    },
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ResourceList")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut seen: Vec<String> = Vec::new();
        let mut kind: Option<String> = None;
        let mut results: Option<Vec<RawResult>> = None;
        while let Some(key) = map.next_key_seed(KeySeed { seen: &seen })? {
            let Key::Str(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            match name.as_str() {
                "kind" => kind = map.next_value::<KindText>()?.0,
                // Not read once the kind shows this is not a ResourceList.
                "results" if kind.as_deref().is_none_or(|k| k == RESOURCE_LIST_KIND) => {
                    results = map.next_value()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            seen.push(name);
        }
        Ok(Top::Mapping {
            kind,
            results: results.unwrap_or_default(),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Top::NotMapping("a sequence"))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Top, A::Error> {
        IgnoredAny.visit_enum(data)?;
        Ok(Top::NotMapping("a tagged value"))
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        Top::deserialize(deserializer)
    }

    fn visit_none<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
        Ok(Top::NotMapping("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
        Ok(Top::NotMapping("a string"))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Top, E> {
        Ok(Top::NotMapping("a string"))
    }
}

/// A top-level key: a string, or anything else (ignored).
enum Key {
    Str(String),
    Other,
}

/// Reads a top-level key, failing on a string key already `seen` (as kyaml
/// does). Failing here rather than in the map visitor lets serde_yaml give the
/// error the key's line and column.
struct KeySeed<'a> {
    seen: &'a [String],
}

impl<'de> de::DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        if self.seen.iter().any(|s| s == v) {
            return Err(E::custom(format_args!("duplicate top-level key `{v}`")));
        }
        Ok(Key::Str(v.to_owned()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| Key::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Key::Other)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_enum(data).map(|_| Key::Other)
    }
}

/// A scalar read as text (`null` → `None`); sequences and mappings are errors.
#[derive(Default)]
struct Text(Option<String>);

struct TextVisitor {
    /// For `kind`: describe a sequence or mapping instead of failing.
    describe_collections: bool,
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        if !self.describe_collections {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        IgnoredAny.visit_seq(seq)?;
        Ok(Some("(a sequence)".to_owned()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        if !self.describe_collections {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        IgnoredAny.visit_map(map)?;
        Ok(Some("(a mapping)".to_owned()))
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TextVisitor {
                describe_collections: false,
            })
            .map(Text)
    }
}

/// The top-level `kind`: any scalar as text; a collection is described.
struct KindText(Option<String>);

impl<'de> Deserialize<'de> for KindText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TextVisitor {
                describe_collections: true,
            })
            .map(KindText)
    }
}

impl Text {
    fn into_string(self) -> String {
        self.0.unwrap_or_default()
    }
}

/// One entry of `results`: a result, or a legacy `{name, items}` wrapper.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawResult {
    message: Text,
    severity: Text,
    #[serde(rename = "resourceRef")]
    resource_ref: Option<RawResourceRef>,
    field: Option<RawField>,
    file: Option<RawFile>,
    tags: Option<Tags>,
    /// Legacy wrapper: the results it holds.
    items: Option<Vec<RawResult>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawResourceRef {
    #[serde(rename = "apiVersion")]
    api_version: Text,
    kind: Text,
    name: Text,
    namespace: Text,
    metadata: Option<RawMetadata>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawMetadata {
    name: Text,
    namespace: Text,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawFieldMap {
    path: Text,
    #[serde(rename = "currentValue")]
    current_value: Option<serde_yaml::Value>,
    #[serde(rename = "proposedValue")]
    proposed_value: Option<serde_yaml::Value>,
    #[serde(rename = "suggestedValue")]
    suggested_value: Option<serde_yaml::Value>,
}

/// `field`: a mapping, or just the path as a string.
struct RawField(RawFieldMap);

impl<'de> Deserialize<'de> for RawField {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl<'de> Visitor<'de> for FieldVisitor {
            type Value = RawField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field mapping or a field path")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawField, A::Error> {
                RawFieldMap::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawField)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap {
                    path: Text(Some(v.to_owned())),
                    ..RawFieldMap::default()
                }))
            }
            fn visit_unit<E: de::Error>(self) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap::default()))
            }
            fn visit_none<E: de::Error>(self) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap::default()))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<RawField, D::Error> {
                d.deserialize_any(self)
            }
        }
        deserializer.deserialize_any(FieldVisitor)
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawFile {
    path: Text,
    index: Text,
}

/// `tags`: scalar keys and values, as text.
struct Tags(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TagsVisitor;
        impl<'de> Visitor<'de> for TagsVisitor {
            type Value = Tags;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of tags")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tags, A::Error> {
                let mut tags = BTreeMap::new();
                while let Some((k, v)) = map.next_entry::<Text, Text>()? {
                    tags.insert(k.into_string(), v.into_string());
                }
                Ok(Tags(tags))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(BTreeMap::new()))
            }
            fn visit_none<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(BTreeMap::new()))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Tags, D::Error> {
                d.deserialize_any(self)
            }
        }
        deserializer.deserialize_any(TagsVisitor)
    }
}

/// Normalises raw results into `out`, flattening legacy wrappers in place.
fn flatten(raw: Vec<RawResult>, out: &mut Vec<FnResult>) {
    for r in raw {
        match r.items {
            Some(items) => {
                // A legacy wrapper; keep a message it may carry itself.
                let message = r.message.into_string();
                if !message.is_empty() {
                    out.push(FnResult {
                        message,
                        severity: Severity::from_name(r.severity.0.as_deref().unwrap_or("")),
                        ..FnResult::default()
                    });
                }
                flatten(items, out);
            }
            None => out.push(normalise(RawResult { items: None, ..r })),
        }
    }
}

fn normalise(r: RawResult) -> FnResult {
    let resource_ref = r.resource_ref.map(|rr| {
        let metadata = rr.metadata.unwrap_or_default();
        ResourceRef {
            api_version: rr.api_version.into_string(),
            kind: rr.kind.into_string(),
            namespace: rr.namespace.0.or(metadata.namespace.0).unwrap_or_default(),
            name: rr.name.0.or(metadata.name.0).unwrap_or_default(),
        }
    });
    let field = r.field.map(|RawField(f)| Field {
        path: f.path.into_string(),
        current_value: f.current_value.map(yaml_to_json),
        proposed_value: f.proposed_value.or(f.suggested_value).map(yaml_to_json),
    });
    let file = r.file.map(|f| File {
        path: f.path.into_string(),
        index: f.index.0.and_then(|i| i.trim().parse().ok()),
    });
    FnResult {
        message: r.message.into_string(),
        severity: Severity::from_name(r.severity.0.as_deref().unwrap_or("")),
        resource_ref: resource_ref.filter(|rr| *rr != ResourceRef::default()),
        field: field.filter(|f| *f != Field::default()),
        file: file.filter(|f| *f != File::default()),
        tags: r.tags.map(|t| t.0).unwrap_or_default(),
    }
}

/// A YAML value as JSON: tags dropped, non-string keys written as text.
fn yaml_to_json(value: serde_yaml::Value) -> serde_json::Value {
    use serde_json::Value as J;
    use serde_yaml::Value as Y;
    match value {
        Y::Null => J::Null,
        Y::Bool(b) => J::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                J::from(i)
            } else if let Some(u) = n.as_u64() {
                J::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f).map_or_else(|| J::String(n.to_string()), J::Number)
            }
        }
        Y::String(s) => J::String(s),
        Y::Sequence(items) => J::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => J::Object(
            map.into_iter()
                .map(|(k, v)| (yaml_key_text(k), yaml_to_json(v)))
                .collect(),
        ),
        Y::Tagged(tagged) => yaml_to_json(tagged.value),
    }
}

fn yaml_key_text(key: serde_yaml::Value) -> String {
    match key {
        serde_yaml::Value::String(s) => s,
        serde_yaml::Value::Null => "null".to_owned(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => serde_json::to_string(&yaml_to_json(other)).unwrap_or_default(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(input: &str) -> Vec<FnResult> {
        match parse_output(input.as_bytes()) {
            Ok(out) => out.results,
            Err(e) => panic!("parse_output failed: {e}\ninput:\n{input}"),
        }
    }

    fn err(input: &str) -> OutputError {
        match parse_output(input.as_bytes()) {
            Ok(out) => panic!("parse_output accepted {input:?}: {out:?}"),
            Err(e) => e,
        }
    }

    /// Whether the fast path (JSON or line scan) answered by itself.
    fn fast(input: &str) -> bool {
        parse_fast(input.as_bytes()).is_some()
    }

    fn result(severity: Severity, message: &str) -> FnResult {
        FnResult {
            message: message.to_owned(),
            severity,
            ..FnResult::default()
        }
    }

    fn rref(api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<ResourceRef> {
        Some(ResourceRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    const DEPLOYMENT_ITEM: &str = "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app
    namespace: prod
    annotations:
      config.kubernetes.io/index: '0'
  spec:
    replicas: 3
    template:
      spec:
        containers:
        - name: main
          image: example.com/app:v1
          args: [\"--port\", \"8080\"]
";

    const SPEC_SHAPE: &str = "\
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app
    namespace: prod
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  data: {minReplicas: '2'}
results:
- message: replicas too low
  severity: error
  resourceRef:
    apiVersion: apps/v1
    kind: Deployment
    name: app
    namespace: prod
  field:
    path: spec.replicas
    currentValue: 1
    proposedValue: 2
  file:
    path: deploy/app.yaml
    index: 0
  tags:
    rule: min-replicas
    level: 3
- message: just so you know
  severity: info
";

    fn spec_shape_expected() -> Vec<FnResult> {
        vec![
            FnResult {
                message: "replicas too low".into(),
                severity: Severity::Error,
                resource_ref: rref("apps/v1", "Deployment", "prod", "app"),
                field: Some(Field {
                    path: "spec.replicas".into(),
                    current_value: Some(json!(1)),
                    proposed_value: Some(json!(2)),
                }),
                file: Some(File {
                    path: "deploy/app.yaml".into(),
                    index: Some(0),
                }),
                tags: BTreeMap::from([
                    ("level".to_owned(), "3".to_owned()),
                    ("rule".to_owned(), "min-replicas".to_owned()),
                ]),
            },
            result(Severity::Info, "just so you know"),
        ]
    }

    const SPEC_SHAPE_JSON: &str = r#"{
  "apiVersion": "config.kubernetes.io/v1",
  "kind": "ResourceList",
  "items": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app", "namespace": "prod"}}],
  "functionConfig": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"minReplicas": "2"}},
  "results": [
    {"message": "replicas too low", "severity": "error",
     "resourceRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app", "namespace": "prod"},
     "field": {"path": "spec.replicas", "currentValue": 1, "proposedValue": 2},
     "file": {"path": "deploy/app.yaml", "index": 0},
     "tags": {"rule": "min-replicas", "level": 3}},
    {"message": "just so you know", "severity": "info"}
  ]
}
"#;

    const VARIANTS: &str = "\
apiVersion: config.kubernetes.io/v1alpha1
kind: ResourceList
items: []
results:
- message: a warn
  severity: warn
- message: shouting
  severity: WARNING
- message: mixed case
  severity: Info
- message: no severity
- message: null severity
  severity: null
- message: odd severity
  severity: fatal
- name: legacy-validator
  items:
  - message: legacy one
    severity: warning
    resourceRef:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: cm
        namespace: default
    field:
      path: data.key
      currentValue: {a: [1, 2]}
      suggestedValue: fixed
    file:
      path: cm.yaml
  - message: legacy two
    extra: ignored
- message: field as string
  field: spec.template
  resourceRef:
    apiVersion: v1
    kind: Namespace
    name: team
    unknown: [1, 2, 3]
  somethingElse: {x: y}
";

    fn variants_expected() -> Vec<FnResult> {
        vec![
            result(Severity::Warning, "a warn"),
            result(Severity::Warning, "shouting"),
            result(Severity::Info, "mixed case"),
            result(Severity::Error, "no severity"),
            result(Severity::Error, "null severity"),
            result(Severity::Error, "odd severity"),
            FnResult {
                message: "legacy one".into(),
                severity: Severity::Warning,
                resource_ref: rref("v1", "ConfigMap", "default", "cm"),
                field: Some(Field {
                    path: "data.key".into(),
                    current_value: Some(json!({"a": [1, 2]})),
                    proposed_value: Some(json!("fixed")),
                }),
                file: Some(File {
                    path: "cm.yaml".into(),
                    index: None,
                }),
                tags: BTreeMap::new(),
            },
            result(Severity::Error, "legacy two"),
            FnResult {
                message: "field as string".into(),
                severity: Severity::Error,
                resource_ref: rref("v1", "Namespace", "", "team"),
                field: Some(Field {
                    path: "spec.template".into(),
                    ..Field::default()
                }),
                ..FnResult::default()
            },
        ]
    }

    /// Items full of traps for a line scanner: nested `results:` and `kind:`
    /// keys, block scalars, comments, column-0 sequence entries.
    const TRAPS: &str = "\
# leading comment
---
# another comment
apiVersion: config.kubernetes.io/v1
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: script
  data:
    run.sh: |
      #!/bin/sh
      kind: Foo
      results:
      - message: not me
    folded: >-
      results: nope
        kind: Bar

# a comment in the middle of items
- apiVersion: fn.example/v1
  kind: Report
  results:
  - message: nested results, not the top-level ones
    severity: error
  status:
    kind: Deployment
- kind: Namespace
  metadata: {name: x}
kind: ResourceList # the kind, after items
results:
# comment inside results
- message: the real one
  severity: warning
";

    const CRLF: &str = "apiVersion: config.kubernetes.io/v1\r\nkind: ResourceList\r\nitems:\r\n- kind: A\r\n  data: |\r\n    results: x\r\nresults:\r\n- message: crlf\r\n  severity: info\r\n";

    const NO_RESULTS: [&str; 4] = [
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults: null\n",
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\nresults: []\n",
        "{\"apiVersion\":\"config.kubernetes.io/v1\",\"kind\":\"ResourceList\",\"items\":[],\"results\":null}",
    ];

    fn big_list(n: usize, results: &str) -> String {
        let mut s =
            String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
        for i in 0..n {
            s.push_str(&DEPLOYMENT_ITEM.replace("name: app", &format!("name: app-{i}")));
        }
        s.push_str(results);
        s
    }

    /// Every input used below; the agreement test runs them all.
    fn all_inputs() -> Vec<String> {
        let mut inputs: Vec<String> = [
            SPEC_SHAPE,
            SPEC_SHAPE_JSON,
            VARIANTS,
            TRAPS,
            // kinds with odd quoting, comments
            "kind: \"ResourceList\"\nitems: []\n",
            "kind: 'ResourceList' # comment\nitems: []\n",
            "kind:\n  ResourceList\nitems: []\n",
            "kind: !!str ResourceList\nitems: []\n",
            // not a ResourceList
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
            "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\"}",
            "apiVersion: v1\nitems: []\n",
            "kind: null\nitems: []\n",
            "kind: [a, b]\n",
            "kind: Deployment\nresults: 5\n",
            "- a\n- b\n",
            "[1, 2]",
            "just a string\n",
            "42\n",
            "null\n",
            // empty
            "",
            " \n\t\r\n",
            "# nothing but a comment\n",
            "---\n",
            "---\n# c\n...\n",
            // streams
            "---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
            "--- # c\nkind: ResourceList\nitems: []\n...\n",
            "kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n---\n: : bad [\n",
            "kind: ResourceList\nresults: [{message: first doc}]\n...\nkind: Other\n",
            "---\n---\nkind: ResourceList\n",
            "%YAML 1.1\n---\nkind: ResourceList\nitems: []\n",
            // CRLF
            CRLF,
            // lone CR, NEL, LS line breaks
            "kind: ResourceList\ritems: []\rresults: [{message: cr}]\r",
            "kind: ResourceList\r\nitems: []\r\nresults: [{message: cr at the end}]\r",
            "kind: ResourceList\r\nitems: []\r\nresults: [{message: cr}]\r\nfoo: a\rb\r\n",
            "kind: ResourceList\nitems:\n- a: \"x\u{2028}y\"\nresults: [{message: ls}]\n",
            // flow-style root (YAML, not JSON)
            "{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: [], results: [{message: flow}]}",
            // JSON with trailing document
            "{\"kind\": \"ResourceList\", \"results\": [{\"message\": \"j\"}]}\n---\nkind: X\n",
            // top-level flow values on one line, quotes and brackets inside
            "kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n",
            // top-level flow value running over lines (may continue at column 0)
            "kind: ResourceList\nitems: [\n{a: 1},\n]\nresults:\n- message: after a multi-line flow\n",
            "kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n",
            // anchors and aliases across sections
            "kind: ResourceList\nitems:\n- &msg {message: from an anchor in items}\nresults:\n- *msg\n",
            "kind: &k ResourceList\nitems: []\nresults: [{message: *k}]\n",
            // only items
            "items:\n- a: 1\n",
            // duplicate keys
            "kind: ResourceList\nitems: []\nkind: ResourceList\n",
            "kind: ResourceList\nitems: []\nitems: []\n",
            // indented root, tabs, odd keys
            "  kind: ResourceList\n  items: []\n",
            "kind: ResourceList\n\titems: []\n",
            "\"kind\": ResourceList\nitems: []\n",
            "? kind\n: ResourceList\n",
            "kind : ResourceList\n",
            // invalid YAML
            "kind: ResourceList\nitems: []\nresults: [\n",
            "kind: ResourceList\nitems: []\nthis line has no colon\n",
            "kind: ResourceList\nresults:\n- message: x\n  severity: [\n",
            "kind: ResourceList\nresults:\n- message: a\n   severity: b\n",
            "kind: ResourceList\nitems: []\nresults: {message: not a list}\n",
            "kind: ResourceList\nresults:\n- just a string\n",
            "kind: ResourceList\nresults:\n- message: x\n  field: [1]\n",
            "kind: ResourceList\nitems: @bad\n",
            // non-string keys, tags
            "kind: ResourceList\n1: one\n[a]: seq key\nresults:\n- message: x\n  tags: {1: 2, true: null}\n  field: {path: p, currentValue: {1: !custom x}}\n",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        inputs.extend(NO_RESULTS.map(str::to_owned));
        inputs.push(big_list(40, "results:\n- message: big\n"));
        inputs.push(big_list(3, ""));
        inputs.push(
            String::from_utf8_lossy(
                b"kind: ResourceList\nitems: []\nresults: [{message: caf\xc3\xa9}]\n",
            )
            .into_owned(),
        );
        inputs
    }

    #[test]
    fn fast_path_and_full_parse_agree() {
        for input in all_inputs() {
            let full = parse_output_strict(input.as_bytes());
            let got = parse_output(input.as_bytes());
            assert_eq!(got, full, "input:\n{input}");
            if let Some(fast) = parse_fast(input.as_bytes()) {
                assert_eq!(fast, full, "fast path, input:\n{input}");
            }
        }
    }

    #[test]
    fn fast_path_handles_the_usual_shapes() {
        for input in [
            SPEC_SHAPE,
            SPEC_SHAPE_JSON,
            VARIANTS,
            TRAPS,
            "kind: 'ResourceList' # comment\nitems: []\n",
            "kind:\n  ResourceList\nitems: []\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
            "items:\n- a: 1\n",
            "kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n",
            "kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n",
        ] {
            assert!(fast(input), "fell back on:\n{input}");
        }
        assert!(fast(CRLF));
        assert!(fast(&big_list(40, "results:\n- message: big\n")));
    }

    #[test]
    fn fast_path_falls_back_when_unsure() {
        for input in [
            "  kind: ResourceList\n  items: []\n",
            "kind: ResourceList\n\titems: []\n",
            "\"kind\": ResourceList\nitems: []\n",
            "? kind\n: ResourceList\n",
            "kind : ResourceList\n",
            "kind: ResourceList\nitems: []\nkind: ResourceList\n",
            "kind: ResourceList\nitems: [\n{a: 1},\n]\n",
            "kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n",
            "kind: ResourceList\nitems: []\rresults: []\r",
            "kind: ResourceList\r\nitems: []\r\nresults: []\r",
            "kind: ResourceList\r\nitems: []\r\nfoo: a\rb\r\n",
            "kind: ResourceList\nitems: []\nresults: [\n",
            "kind: ResourceList\nitems:\n- &msg {message: m}\nresults:\n- *msg\n",
            "%YAML 1.1\n---\nkind: ResourceList\n",
            "---\n---\nkind: ResourceList\n",
            "- a\n",
            "{kind: ResourceList}",
        ] {
            assert!(!fast(input), "fast path answered:\n{input}");
        }
    }

    #[test]
    fn spec_shape_yaml_and_json() {
        assert_eq!(ok(SPEC_SHAPE), spec_shape_expected());
        assert_eq!(ok(SPEC_SHAPE_JSON), spec_shape_expected());
        // JSON written out by serde_json, compact.
        let value: serde_json::Value = serde_yaml::from_str(SPEC_SHAPE).unwrap();
        assert_eq!(ok(&value.to_string()), spec_shape_expected());
    }

    #[test]
    fn variants_real_functions_emit() {
        assert_eq!(ok(VARIANTS), variants_expected());
        let value: serde_json::Value = serde_yaml::from_str(VARIANTS).unwrap();
        assert_eq!(
            ok(&serde_json::to_string_pretty(&value).unwrap()),
            variants_expected()
        );
    }

    #[test]
    fn no_results() {
        for input in NO_RESULTS {
            assert_eq!(ok(input), vec![], "input:\n{input}");
        }
    }

    #[test]
    fn scanner_traps_are_not_taken_for_top_level_keys() {
        assert_eq!(ok(TRAPS), vec![result(Severity::Warning, "the real one")]);
        assert_eq!(ok(CRLF), vec![result(Severity::Info, "crlf")]);
    }

    #[test]
    fn kind_quoting_and_layout() {
        for input in [
            "kind: \"ResourceList\"\nitems: []\n",
            "kind: 'ResourceList' # comment\nitems: []\n",
            "kind:\n  ResourceList\nitems: []\n",
            "kind: !!str ResourceList\nitems: []\n",
            "{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: []}",
            "---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
            "--- # c\nkind: ResourceList\nitems: []\n...\n",
            "%YAML 1.1\n---\nkind: ResourceList\nitems: []\n",
        ] {
            assert_eq!(ok(input), vec![], "input:\n{input}");
        }
        assert_eq!(
            ok("kind: &k ResourceList\nitems: []\nresults: [{message: *k}]\n"),
            vec![result(Severity::Error, "ResourceList")]
        );
    }

    #[test]
    fn only_the_first_document_counts() {
        assert_eq!(
            ok("kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n---\n: : bad [\n"),
            vec![result(Severity::Error, "first doc")]
        );
        assert_eq!(
            ok("kind: ResourceList\nresults: [{message: first doc}]\n...\nkind: Other\n"),
            vec![result(Severity::Error, "first doc")]
        );
        assert_eq!(
            ok("{\"kind\": \"ResourceList\", \"results\": [{\"message\": \"j\"}]}\n---\nkind: X\n"),
            vec![result(Severity::Error, "j")]
        );
        assert_eq!(err("---\n---\nkind: ResourceList\n"), OutputError::Empty);
    }

    #[test]
    fn multi_line_and_aliased_values_fall_back_correctly() {
        assert_eq!(
            ok("kind: ResourceList\nitems: [\n{a: 1},\n]\nresults:\n- message: after a multi-line flow\n"),
            vec![result(Severity::Error, "after a multi-line flow")]
        );
        assert_eq!(
            ok("kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n"),
            vec![]
        );
        assert_eq!(
            ok("kind: ResourceList\nitems:\n- &msg {message: from an anchor in items}\nresults:\n- *msg\n"),
            vec![result(Severity::Error, "from an anchor in items")]
        );
        assert_eq!(
            ok("kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n"),
            vec![result(Severity::Warning, "x, y]")]
        );
        assert_eq!(
            ok("kind: ResourceList\ritems: []\rresults: [{message: cr}]\r"),
            vec![result(Severity::Error, "cr")]
        );
    }

    #[test]
    fn not_a_resource_list() {
        let kind = |k: &str| OutputError::NotResourceList { kind: k.to_owned() };
        assert_eq!(
            err("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"),
            kind("Deployment")
        );
        assert_eq!(
            err("{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\"}"),
            kind("Deployment")
        );
        assert_eq!(err("apiVersion: v1\nitems: []\n"), kind(NO_KIND));
        assert_eq!(err("items:\n- a: 1\n"), kind(NO_KIND));
        assert_eq!(err("kind: null\nitems: []\n"), kind(NO_KIND));
        assert_eq!(err("kind: [a, b]\n"), kind("(a sequence)"));
        // `results` of another kind is not read.
        assert_eq!(err("kind: Deployment\nresults: 5\n"), kind("Deployment"));
        assert_eq!(
            err("- a\n- b\n"),
            OutputError::NotAMapping {
                found: "a sequence"
            }
        );
        assert_eq!(
            err("[1, 2]"),
            OutputError::NotAMapping {
                found: "a sequence"
            }
        );
        assert_eq!(
            err("just a string\n"),
            OutputError::NotAMapping { found: "a string" }
        );
        assert_eq!(err("42\n"), OutputError::NotAMapping { found: "a number" });
        assert_eq!(
            err("apiVersion: apps/v1\nkind: Deployment\n").to_string(),
            "stdout is not a ResourceList: its kind is \"Deployment\""
        );
        assert_eq!(
            err("apiVersion: v1\n").to_string(),
            "stdout is not a ResourceList: it has no kind"
        );
        assert_eq!(
            err("- a\n").to_string(),
            "stdout is not a ResourceList: its top level is a sequence, not a mapping"
        );
    }

    #[test]
    fn empty() {
        for input in [
            "",
            " \n\t\r\n",
            "# nothing but a comment\n",
            "---\n",
            "---\n# c\n...\n",
            "null\n",
            "~",
        ] {
            assert_eq!(err(input), OutputError::Empty, "input: {input:?}");
        }
        assert_eq!(
            OutputError::Empty.to_string(),
            "stdout is empty, expected a ResourceList"
        );
    }

    #[test]
    fn invalid_yaml_says_where() {
        let cases = [
            ("kind: ResourceList\nitems: []\nresults: [\n", "line 4"),
            (
                "kind: ResourceList\nitems: []\nthis line has no colon\n",
                "line 4 column 1",
            ),
            (
                "kind: ResourceList\nresults:\n- message: x\n  severity: [\n",
                "line 5",
            ),
            (
                "kind: ResourceList\nresults:\n- message: a\n   severity: b\n",
                "line 4 column 12",
            ),
            ("kind: ResourceList\nitems: @bad\n", "line 2 column 8"),
            (
                "kind: ResourceList\nitems: []\nitems: []\n",
                "line 3 column 1",
            ),
        ];
        for (input, place) in cases {
            let e = err(input);
            let OutputError::Parse(message) = &e else {
                panic!("not a parse error: {e:?}, input:\n{input}");
            };
            assert!(
                message.contains(place),
                "{message:?} does not name {place}, input:\n{input}"
            );
        }
        assert_eq!(
            err("kind: ResourceList\nitems: []\nkind: ResourceList\n").to_string(),
            "cannot parse stdout as a ResourceList: duplicate top-level key `kind` at line 3 column 1"
        );
        // Not UTF-8.
        assert!(matches!(
            parse_output(b"kind: ResourceList\nitems: [\xff]\n"),
            Err(OutputError::Parse(_))
        ));
    }

    #[test]
    fn results_of_the_wrong_shape() {
        for (input, place) in [
            (
                "kind: ResourceList\nitems: []\nresults: {message: not a list}\n",
                "line 3",
            ),
            ("kind: ResourceList\nresults:\n- just a string\n", "line 3"),
            (
                "kind: ResourceList\nresults:\n- message: x\n  field: [1]\n",
                "line 4",
            ),
        ] {
            let e = err(input);
            assert!(
                matches!(&e, OutputError::Parse(m) if m.contains(place)),
                "{e}, input:\n{input}"
            );
        }
    }

    #[test]
    fn non_string_keys_and_tags() {
        let got = ok("kind: ResourceList\n1: one\n[a]: seq key\nresults:\n- message: x\n  tags: {1: 2, true: null}\n  field: {path: p, currentValue: {1: !custom x}}\n");
        assert_eq!(
            got,
            vec![FnResult {
                message: "x".into(),
                field: Some(Field {
                    path: "p".into(),
                    current_value: Some(json!({"1": "x"})),
                    proposed_value: None,
                }),
                tags: BTreeMap::from([
                    ("1".to_owned(), "2".to_owned()),
                    ("true".to_owned(), String::new())
                ]),
                ..FnResult::default()
            }]
        );
    }

    #[test]
    fn big_output() {
        let input = big_list(40, "results:\n- message: big\n  severity: info\n");
        assert_eq!(ok(&input), vec![result(Severity::Info, "big")]);
        let json =
            serde_json::to_string(&serde_yaml::from_str::<serde_json::Value>(&input).unwrap())
                .unwrap();
        assert_eq!(ok(&json), vec![result(Severity::Info, "big")]);
    }

    #[test]
    fn column0_search_matches_a_naive_one() {
        let naive = |b: &[u8], from: usize| {
            (from..b.len().saturating_sub(1))
                .find(|&i| {
                    let entry = b[i + 1] == b'-' && b.get(i + 2) == Some(&b' ');
                    b[i] == b'\n' && b[i + 1] != b' ' && !entry
                })
                .map(|i| i + 1)
        };
        let mut seed = 0x2545_f491_u64;
        for len in [0, 1, 2, 63, 64, 65, 66, 127, 128, 129, 200, 1000] {
            for _ in 0..20 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        match seed >> 60 {
                            0..=1 => b'\n',
                            2 => b'x',
                            3..=4 => b'-',
                            _ => b' ',
                        }
                    })
                    .collect();
                for from in 0..=len {
                    assert_eq!(
                        next_column0_line(&bytes, from),
                        naive(&bytes, from),
                        "{bytes:?} from {from}"
                    );
                }
            }
        }
    }

    /// The documented limit of the fast path: the syntax inside a block-style
    /// `items` section is not checked (the strict parse does check it).
    #[test]
    fn broken_items_pass_the_fast_path_only() {
        let input = "kind: ResourceList\nitems:\n- a: 1\n   b: 2\nresults: [{message: m}]\n";
        assert_eq!(ok(input), vec![result(Severity::Error, "m")]);
        assert!(matches!(
            parse_output_strict(input.as_bytes()),
            Err(OutputError::Parse(_))
        ));
    }

    #[test]
    fn format_results_lines() {
        let results = vec![
            FnResult {
                message: "replicas too low".into(),
                severity: Severity::Error,
                resource_ref: rref("apps/v1", "Deployment", "prod", "app"),
                field: Some(Field {
                    path: "spec.replicas".into(),
                    ..Field::default()
                }),
                ..FnResult::default()
            },
            FnResult {
                message: "cluster-scoped".into(),
                severity: Severity::Warning,
                resource_ref: rref("v1", "Namespace", "", "team"),
                ..FnResult::default()
            },
            FnResult {
                message: "only a field".into(),
                severity: Severity::Info,
                field: Some(Field {
                    path: "data.x".into(),
                    ..Field::default()
                }),
                ..FnResult::default()
            },
            result(Severity::Error, "plain message\n"),
            FnResult {
                message: "kind and name only".into(),
                resource_ref: rref("", "ConfigMap", "", "cm"),
                file: Some(File {
                    path: "cm.yaml".into(),
                    index: Some(1),
                }),
                ..FnResult::default()
            },
        ];
        assert_eq!(
            format_results(&results),
            "[error] apps/v1/Deployment/prod/app spec.replicas: replicas too low\n\
             [warning] v1/Namespace/team: cluster-scoped\n\
             [info] data.x: only a field\n\
             [error] plain message\n\
             [error] ConfigMap/cm: kind and name only"
        );
        assert_eq!(format_results(&[]), "");
        assert_eq!(
            format_results(&ok(SPEC_SHAPE)),
            "[error] apps/v1/Deployment/prod/app spec.replicas: replicas too low\n[info] just so you know"
        );
        assert_eq!(
            format_results(&ok(VARIANTS)),
            "[warning] a warn\n\
             [warning] shouting\n\
             [info] mixed case\n\
             [error] no severity\n\
             [error] null severity\n\
             [error] odd severity\n\
             [warning] v1/ConfigMap/default/cm data.key: legacy one\n\
             [error] legacy two\n\
             [error] v1/Namespace/team spec.template: field as string"
        );
        assert_eq!(Severity::Warning.to_string(), "warning");
        assert_eq!(
            results[1].to_string(),
            "[warning] v1/Namespace/team: cluster-scoped"
        );
    }

    #[test]
    fn results_serialize_in_the_spec_shape() {
        let json = serde_json::to_value(spec_shape_expected()).unwrap();
        assert_eq!(
            json,
            json!([
                {"message": "replicas too low", "severity": "error",
                 "resourceRef": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "prod", "name": "app"},
                 "field": {"path": "spec.replicas", "currentValue": 1, "proposedValue": 2},
                 "file": {"path": "deploy/app.yaml", "index": 0},
                 "tags": {"level": "3", "rule": "min-replicas"}},
                {"message": "just so you know", "severity": "info"}
            ])
        );
    }

    /// A realistic item for the benchmark: ~1.2 KiB of block YAML.
    fn bench_item(i: usize) -> String {
        format!(
            "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app-{i}
    namespace: ns-{i}
    labels:
      app: app-{i}
      tier: backend
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'deploy/app-{i}.yaml'
  spec:
    replicas: 3
    selector:
      matchLabels:
        app: app-{i}
    template:
      metadata:
        labels:
          app: app-{i}
      spec:
        containers:
        - name: main
          image: registry.example.com/team/app-{i}:v1.2.3
          args: [\"--port\", \"8080\", \"--verbose\"]
          ports:
          - containerPort: 8080
            name: http
          env:
          - name: FOO
            value: \"bar\"
          - name: DESCRIPTION
            value: |
              multi line
              text here
          resources:
            limits: {{cpu: 500m, memory: 128Mi}}
            requests: {{cpu: 100m, memory: 64Mi}}
          readinessProbe:
            httpGet: {{path: /healthz, port: 8080}}
            initialDelaySeconds: 5
        - name: sidecar
          image: registry.example.com/sidecar:v0.0.1
          command: [/bin/sidecar, --mode=proxy]
"
        )
    }

    /// Run in release mode, e.g. `cargo test --release -p wrapper-server --lib
    /// results::tests::bench_6mib -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark"]
    fn bench_6mib() {
        use std::time::{Duration, Instant};
        fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> Duration {
            let mut best = Duration::MAX;
            for _ in 0..n {
                let t = Instant::now();
                std::hint::black_box(f());
                best = best.min(t.elapsed());
            }
            best
        }
        const RESULTS: &str = "results:\n- message: big\n  severity: info\n";
        let mut yaml =
            String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
        let mut n = 0;
        while yaml.len() + RESULTS.len() < 6 << 20 {
            yaml.push_str(&bench_item(n));
            n += 1;
        }
        yaml.push_str(RESULTS);
        let json =
            serde_json::to_string(&serde_yaml::from_str::<serde_json::Value>(&yaml).unwrap())
                .unwrap();
        println!(
            "{n} Deployments: block YAML {} bytes, compact JSON {} bytes",
            yaml.len(),
            json.len()
        );
        for (name, input) in [("yaml", &yaml), ("json", &json)] {
            assert_eq!(parse_output(input.as_bytes()).unwrap().results.len(), 1);
            assert!(parse_fast(input.as_bytes()).is_some());
            let fast = best_of(20, || parse_output(input.as_bytes()));
            let strict = best_of(3, || parse_output_strict(input.as_bytes()));
            let value = best_of(2, || serde_yaml::from_str::<serde_yaml::Value>(input));
            println!(
                "{name}: parse_output {fast:?}; parse_output_strict (serde_yaml, IgnoredAny items) \
                 {strict:?}; serde_yaml::Value {value:?}"
            );
        }
        let crlf = yaml.replace('\n', "\r\n");
        assert!(parse_fast(crlf.as_bytes()).is_some());
        let t = best_of(20, || parse_output(crlf.as_bytes()));
        println!("yaml with CRLF ({} bytes): parse_output {t:?}", crlf.len());
        let with_results = format!("{yaml}{}", "- message: another\n  severity: warning\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: x, namespace: y}\n  field: {path: data.x}\n".repeat(1000));
        let t = best_of(10, || parse_output(with_results.as_bytes()));
        println!(
            "yaml + 1000 results ({} bytes): parse_output {t:?}",
            with_results.len()
        );
    }
}
