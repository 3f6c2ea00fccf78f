//! A KRM function's stdout, checked as a ResourceList, and its structured
//! `results` turned into text.
//!
//! Used on every successful call (exit 0: is stdout one ResourceList?), when a
//! function failed (exit ≠ 0: its `results` become the gRPC error message),
//! and by `function-runner eval` (kpt-style result lines).
//!
//! - this module: the result model ([`FnResult`], [`Severity`],
//!   [`ResourceRef`], [`Field`], [`File`]) and its text form
//!   ([`format_results`]); what a parse gives ([`ResourceListOutput`]) or why
//!   it fails ([`OutputError`]); the entry points [`parse_output`] (the fast
//!   path first) and [`parse_output_strict`] (always the full parse);
//! - `scan`: the fast path: JSON read with `items` skipped, and the
//!   block-YAML line scan that leaves `items` unread;
//! - `de`: the serde deserialisers every parse goes through: the top level of
//!   the first document, and `results` in the spec's shape or the variants
//!   real functions emit, normalised into [`FnResult`]s;
//! - [`kpt`]: `results` as kpt reads them (its own migrations of the legacy
//!   shapes), for `eval` and `render`.
//!
//! # Accepted input
//!
//! YAML or JSON (JSON is YAML too): a mapping with `kind: ResourceList`
//! (`apiVersion` is not checked: `config.kubernetes.io/v1` and `v1alpha1` are
//! both in use), `items`, optional `functionConfig`, optional `results`.
//! `results` may use the spec's shape or the variants real functions emit;
//! see [`FnResult`]. Only the first document of a stream counts.
//!
//! # The fast path
//!
//! libyaml has to scan every character of `items` to find where it ends, so
//! even a parse that skips `items` costs time in proportion to the whole
//! output, of which `items` is nearly all; only `kind` and `results` are
//! needed here. [`parse_output`] therefore avoids parsing `items` at all:
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
//!   order, into a small document parsed by the same `serde_yaml_ng` code as the
//!   full parse; so `kind` (whatever its quoting), `results`,
//!   `functionConfig` and unknown keys are read, and syntax-checked, by
//!   libyaml itself. Only a block-style `items` section (`items:` with nothing
//!   but a comment after it) is skipped unread. Once inside the root mapping
//!   the scan only looks at lines that do not start with a space, found by a
//!   chunked, vectorised search for `\n` followed by a non-space byte.
//! - **Fall-back rules**: the full `serde_yaml_ng` parse ([`parse_output_strict`])
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
//!   top-level key.
//!
//! Tests run both parsers on every input and compare; the ignored
//! `bench_6mib` test times each parse on a 6 MiB ResourceList.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::IgnoredAny;
use serde::Deserialize;

mod de;
pub mod kpt;
mod scan;

use de::{flatten, Top};
use scan::{is_blank, parse_fast};

/// The `kind` a function's stdout must have.
pub const RESOURCE_LIST_KIND: &str = "ResourceList";

/// What [`OutputError::NotResourceList`] says when the mapping has no `kind`.
pub const NO_KIND: &str = "no kind";

/// Severity of one result, as the function wrote it.
///
/// Kept as written, since kpt prints and records it so (`warn`, `ERROR` and
/// a missing one stay as they are); read two ways: the SDK's rule
/// ([`Severity::is_error`]: `error` alone fails a function) and the
/// wrapper's reading for its messages ([`Severity::level`]: case-insensitive,
/// `warn` a warning, anything else an error).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Severity {
    /// None written.
    #[default]
    Unset,
    /// `error`.
    Error,
    /// `warning`.
    Warning,
    /// `info`.
    Info,
    /// Any other text, as written.
    Other(String),
}

/// What a severity means to the wrapper's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
    Info,
}

impl Level {
    /// `"error"`, `"warning"` or `"info"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Severity {
    /// A severity as written (`""`: none).
    pub fn from_written(text: &str) -> Severity {
        match text {
            "" => Severity::Unset,
            "error" => Severity::Error,
            "warning" => Severity::Warning,
            "info" => Severity::Info,
            other => Severity::Other(other.to_owned()),
        }
    }

    /// As written (`""` for none).
    pub fn as_written(&self) -> &str {
        match self {
            Severity::Unset => "",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Other(text) => text,
        }
    }

    /// The SDK's rule (`fn.Results.ExitCode`): a result of severity `error`
    /// makes the function fail.
    pub fn is_error(&self) -> bool {
        *self == Severity::Error
    }

    /// The wrapper's reading, for its messages: case-insensitive, `warn` is
    /// a warning, a missing, empty or unknown severity an error.
    pub fn level(&self) -> Level {
        let name = self.as_written().trim();
        if name.eq_ignore_ascii_case("warning") || name.eq_ignore_ascii_case("warn") {
            Level::Warning
        } else if name.eq_ignore_ascii_case("info") {
            Level::Info
        } else {
            Level::Error
        }
    }
}

/// One structured result: kpt's `FunctionResult`, the fields kyaml's
/// `framework.Result` and the SDK's `fn.Result` write in a ResourceList's
/// `results`. The one model of the workspace: the wrapper reads a
/// function's ([`parse_output`]), `eval` and `render` read and record
/// them as kpt does ([`kpt`]), and the built-in functions make them.
///
/// Accepted on input (the wrapper's reading): `message`; `severity`;
/// `resourceRef` with `apiVersion`, `kind`, `name`, `namespace`, or
/// `metadata.name`/`metadata.namespace`; `field` as a mapping (`path`,
/// `currentValue`, `proposedValue` or `suggestedValue`) or a plain path
/// string; `file` (`path`, `index`); `tags`. Legacy wrapped results `{name,
/// items: [...]}` are flattened. Unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FnResult {
    pub message: String,
    pub severity: Severity,
    pub resource_ref: Option<ResourceRef>,
    pub field: Option<Field>,
    pub file: Option<File>,
    pub tags: BTreeMap<String, String>,
}

impl FnResult {
    /// A result with this severity and message.
    pub fn new(severity: Severity, message: impl Into<String>) -> FnResult {
        FnResult {
            message: message.into(),
            severity,
            ..FnResult::default()
        }
    }

    pub fn error(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Error, message)
    }

    pub fn warning(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Warning, message)
    }

    pub fn info(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Info, message)
    }

    /// Whether this result fails its function (the SDK's rule).
    pub fn is_error(&self) -> bool {
        self.severity.is_error()
    }
}

/// The resource a result is about (kyaml's `ResourceIdentifier`). Missing
/// parts are empty strings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
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

/// The field a result is about: its path, its value and the one proposed
/// (YAML values, as written).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Field {
    pub path: String,
    pub current_value: Option<serde_yaml_ng::Value>,
    /// `proposedValue`, or the legacy `suggestedValue`.
    pub proposed_value: Option<serde_yaml_ng::Value>,
}

/// The file a result is about: where the resource was read from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct File {
    pub path: String,
    /// The document's index in the file; 0 is not written (Go's
    /// `omitempty`).
    pub index: i64,
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
    /// `[level] apiVersion/kind/ns/name field: message` (the wrapper's
    /// reading of the severity, [`Severity::level`]); absent parts are left
    /// out (`[error] message` when there is no resource and no field).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.severity.level())?;
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
/// `serde_yaml_ng`, `items` included (a cost in proportion to the whole output):
/// the reference the fast path is tested against, and a stricter check where
/// cost does not matter.
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
fn syntax_error(bytes: &[u8]) -> Option<serde_yaml_ng::Error> {
    let document = serde_yaml_ng::Deserializer::from_slice(bytes).next()?;
    IgnoredAny::deserialize(document).err()
}

fn parse_first_yaml_document(bytes: &[u8]) -> Result<Top, serde_yaml_ng::Error> {
    match serde_yaml_ng::Deserializer::from_slice(bytes).next() {
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

#[cfg(test)]
mod fixtures;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
