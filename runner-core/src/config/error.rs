//! What goes wrong with FunctionConfigs, and where: the document
//! ([`DocLocation`]), the position in its text ([`Position`]) and the error
//! ([`ConfigError`]) that loading, validating and matching report.

use std::fmt;
use std::path::PathBuf;

/// Where a document came from: a file path (or another source name) and, for documents of a
/// multi-document stream, the 1-based document number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocLocation {
    /// File path as it was opened (directory argument joined with the file name), or the
    /// source name given to [`parse_str`].
    pub source: String,
    /// 1-based index of the YAML document within the source (every `---` separated document
    /// counts, including empty and non-FunctionConfig ones). `None` for objects that did not
    /// come from a parsed text.
    pub document: Option<usize>,
}

impl fmt::Display for DocLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.document {
            Some(n) => write!(f, "{} (document {n})", self.source),
            None => write!(f, "{}", self.source),
        }
    }
}

/// Errors from loading, validating and matching FunctionConfigs.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration directory could not be listed.
    #[error("{}: cannot read directory: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A configuration file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A document could not be parsed at all (YAML syntax) or failed at its root.
    /// A syntax error ends the parsing of that file: later documents are not reached.
    #[error("{at}: {message}{}", fmt_position(position))]
    Parse {
        at: DocLocation,
        message: String,
        /// Where in the source text, when known.
        position: Option<Position>,
    },
    /// A field has the wrong type or an invalid value.
    #[error("{at}: {field}: {message}{}", fmt_position(position))]
    Invalid {
        at: DocLocation,
        /// Dotted path of the field, e.g. `spec.podExecutor.maxParallelExecutions`.
        field: String,
        message: String,
        /// Where in the source text, when known.
        position: Option<Position>,
    },
    /// An (image, tag) pair is already mapped by an earlier FunctionConfig. The later
    /// FunctionConfig (the one at `at`) is dropped as a whole; the first one is kept.
    #[error(
        "{at}: {field}: image \"{image}\" is already configured by {first}; this FunctionConfig is ignored"
    )]
    Duplicate {
        at: DocLocation,
        field: String,
        /// Full image reference `NAME:TAG` that is mapped twice.
        image: String,
        /// Description of the FunctionConfig that keeps the mapping.
        first: String,
    },
    /// A tag constraint could not be parsed.
    #[error("invalid tag constraint \"{constraint}\": {reason}")]
    InvalidConstraint { constraint: String, reason: String },
}

fn fmt_position(position: &Option<Position>) -> String {
    match position {
        Some(p) => format!(" (at line {}, column {})", p.line, p.column),
        None => String::new(),
    }
}

/// A 1-based line and column in a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl ConfigError {
    /// The location of the offending document, if the error concerns one.
    pub fn location(&self) -> Option<&DocLocation> {
        match self {
            ConfigError::Parse { at, .. }
            | ConfigError::Invalid { at, .. }
            | ConfigError::Duplicate { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The dotted field path the error concerns, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } | ConfigError::Duplicate { field, .. } => {
                Some(field)
            }
            _ => None,
        }
    }
}
