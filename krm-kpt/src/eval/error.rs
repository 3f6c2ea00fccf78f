//! Why `eval` (or a `render` step) failed, in kpt's words.

use std::io;

use krm_yaml::package::{go_quote, PackageError};

/// Why `eval` failed (printed as kpt prints errors: `error: ...`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kptfile kpt refuses: kpt's message, printed as it is (not after
    /// `error: `).
    #[error("{0}")]
    Kptfile(String),
    #[error("missing function config file: {0}")]
    MissingFnConfig(String),
    #[error("invalid function config file {0}: {1}")]
    BadFnConfig(String, String),
    #[error("function arguments can only be specified without function config file")]
    ArgsWithFnConfig,
    #[error("args must have keys and values separated by =")]
    BadArg,
    #[error("exec command {} must be valid: {reason}", go_quote(.command))]
    BadExec {
        command: String,
        reason: &'static str,
    },
    #[error("directory {} already exists, please delete the directory and retry", go_quote(.0))]
    OutputExists(String),
    #[error(
        "--image needs an image evaluator, which this command was started without; use --exec"
    )]
    NoImageEvaluator,
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error("{0}")]
    Input(String),
    #[error("input resource list must contain only KRM resources: {0}")]
    InputNotKrm(String),
    #[error("output resource list must contain only KRM resources: {0}")]
    OutputNotKrm(String),
    #[error("function output: {0}")]
    BadOutput(String),
    /// A function's output with a key twice in one mapping
    /// ([`DocError::DuplicateKey`](krm_yaml::package::DocError::DuplicateKey)),
    /// naming the function as `[RUNNING]` does.
    #[error("function output: {}: {source}", go_quote(.function))]
    OutputDuplicateKey {
        function: String,
        source: krm_yaml::package::DocError,
    },
    #[error("unexpected function error: {0}")]
    Exec(String),
    #[error("{0}")]
    Evaluator(String),
    #[error("writing results: {0}")]
    Results(io::Error),
    #[error("writing output: {0}")]
    Write(#[from] io::Error),
    /// A render's failure that kpt prints through its error printer: the
    /// error's text after `Error: `, a space before the line break
    /// (`main.go@v1.0.0-beta.67:76-86`).
    #[error("{0}")]
    Rendering(Box<Error>),
}

impl Error {
    /// The error as kpt prints it: a Kptfile's message as it is, any other
    /// after `error: `.
    pub fn kpt_text(&self) -> String {
        match self {
            Error::Kptfile(text) => text.clone(),
            Error::Rendering(inner) => match inner.as_ref() {
                Error::Kptfile(text) => text.clone(),
                err => format!("Error: {err} "),
            },
            err => format!("error: {err}"),
        }
    }
}
