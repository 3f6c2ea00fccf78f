//! The workspace's one model of a KRM function's structured results (kpt's
//! `FunctionResult`), and the readers of a function's stdout: checked as a
//! ResourceList, its `results` read as the wrapper reads them, or as kpt
//! does. A crate of its own, with nothing but serde below it, so that the
//! built-in functions, which make results, need nothing of the call core.
//!
//! Used on every successful call (exit 0: is stdout one ResourceList?), when a
//! function failed (exit ≠ 0: its `results` become the gRPC error message),
//! by `eval` and `render` (kpt's result lines and results file), and by the
//! built-ins.
//!
//! - this crate's root: the entry points [`parse_output`] (the fast path first)
//!   and [`parse_output_strict`] (always the full parse);
//! - `model`: the result model ([`FnResult`], [`Severity`],
//!   [`ResourceRef`], [`Field`], [`File`]) and its text form
//!   ([`format_results`]);
//! - `output`: what a parse gives ([`ResourceListOutput`]) or why it fails
//!   ([`OutputError`]);
//! - `scan`: the fast path: JSON read with `items` skipped, and the
//!   block-YAML line scan that leaves `items` unread;
//! - `document`: the first document read whole, and what its top level
//!   makes (the full parse, and the fast path's last step);
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

#![forbid(unsafe_code)]

mod de;
mod document;
pub mod kpt;
mod model;
mod output;
mod scan;

use document::{finish, parse_first_yaml_document, syntax_error};
pub use model::{format_results, Field, File, FnResult, Level, ResourceRef, Severity};
pub use output::{OutputError, ResourceListOutput, NO_KIND, RESOURCE_LIST_KIND};
use scan::{is_blank, parse_fast};

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

#[cfg(test)]
mod fixtures;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
