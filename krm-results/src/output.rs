//! What a parse of a function's stdout gives ([`ResourceListOutput`]), or
//! why stdout is not a usable ResourceList ([`OutputError`]).

use super::model::FnResult;

/// The `kind` a function's stdout must have.
pub const RESOURCE_LIST_KIND: &str = "ResourceList";

/// What [`OutputError::NotResourceList`] says when the mapping has no `kind`.
pub const NO_KIND: &str = "no kind";

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
