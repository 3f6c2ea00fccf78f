//! The result model: one structured result ([`FnResult`]) with its
//! severity, resource, field and file, and its text form
//! ([`format_results`]).

use std::collections::BTreeMap;
use std::fmt;

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
/// function's ([`parse_output`](super::parse_output)), `eval` and `render` read and record
/// them as kpt does ([`kpt`](super::kpt)), and the built-in functions make them.
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
