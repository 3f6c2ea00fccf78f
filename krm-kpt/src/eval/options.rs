//! What `eval` is asked to do: where the resources come from, the
//! function (a command, an image through an evaluator, or a built-in), its
//! config, where the output goes, and kpt's other flags as they reach the
//! run.

use std::path::PathBuf;
use std::sync::Arc;

use krm_fn::evaluator::Evaluator;
use krm_yaml::package::go_quote;

use super::error::Error;
use crate::select::Selector;

/// Where the resources come from.
pub enum Source {
    /// A package directory.
    Dir(PathBuf),
    /// A ResourceList or a stream of YAML documents (stdin: `-`).
    Stdin(Vec<u8>),
}

/// The function to run.
pub enum Function {
    /// A local command line (split like a shell would, without expansion).
    Exec(String),
    /// An image, run by an evaluator (exec or pod).
    Image {
        image: String,
        evaluator: Arc<dyn Evaluator>,
    },
    /// An image whose function is built in (the runner's FunctionConfigs
    /// and defaults decide which: [`crate::render::BuiltinFor`]), run
    /// in-process: its output is what the catalog's container would
    /// write, and kpt's lines name the image.
    Builtin {
        image: String,
        builtin: &'static krm_builtins::Builtin,
    },
}

impl Function {
    /// The name kpt's lines give the function, and its key in the results
    /// file.
    pub(super) fn name_and_key(&self) -> (String, &'static str) {
        match self {
            Function::Exec(cmd) => (cmd.clone(), "exec"),
            Function::Image { image, .. } | Function::Builtin { image, .. } => {
                (image.clone(), "image")
            }
        }
    }
}

/// Where the `functionConfig` comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FnConfig {
    /// `key=value` arguments (a ConfigMap named `function-input`; a first
    /// argument without `=` is its kind). Empty: a ConfigMap with no data.
    Args(Vec<String>),
    /// A file holding the `functionConfig`.
    File(PathBuf),
}

/// Where the output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Back into the package directory (the default for a directory).
    InPlace,
    /// A ResourceList on stdout (the default for stdin).
    Stdout,
    /// The resources as YAML documents on stdout.
    Unwrap,
    /// A new directory (it must not exist).
    Dir(PathBuf),
}

impl Output {
    /// `-o` as kpt reads it.
    pub fn parse(s: &str) -> Output {
        match s {
            "stdout" => Output::Stdout,
            "unwrap" => Output::Unwrap,
            dir => Output::Dir(PathBuf::from(dir)),
        }
    }
}

/// Everything `eval` needs.
pub struct EvalOptions {
    pub source: Source,
    pub function: Function,
    pub fn_config: FnConfig,
    /// `None`: in place for a directory, stdout for stdin.
    pub output: Option<Output>,
    pub results_dir: Option<PathBuf>,
    /// The most stdout a function may write.
    pub max_output_bytes: usize,
    /// kpt's `--match-*` flags: the resources the function sees (all when
    /// this and `exclusion` are empty; see [`crate::select`]).
    pub selector: Selector,
    /// kpt's `--exclude-*` flags.
    pub exclusion: Selector,
    /// `-e/--env`: added to an `--exec` function's environment (an image
    /// function's comes from its evaluator; a built-in has none).
    pub env: Vec<(String, String)>,
}

impl EvalOptions {
    pub fn new(source: Source, function: Function) -> Self {
        Self {
            source,
            function,
            fn_config: FnConfig::Args(Vec::new()),
            output: None,
            results_dir: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            selector: Selector::default(),
            exclusion: Selector::default(),
            env: Vec::new(),
        }
    }
}

/// kpt's `--image-pull-policy` values (default `IfNotPresent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImagePullPolicy {
    Always,
    #[default]
    IfNotPresent,
    Never,
}

impl ImagePullPolicy {
    const ALL: [(ImagePullPolicy, &'static str); 3] = [
        (ImagePullPolicy::Always, "Always"),
        (ImagePullPolicy::IfNotPresent, "IfNotPresent"),
        (ImagePullPolicy::Never, "Never"),
    ];

    /// As kpt reads the flag: any case; otherwise kpt's error.
    pub fn parse(s: &str) -> Result<Self, Error> {
        Self::ALL
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
            .ok_or_else(|| {
                Error::Input(format!(
                    "invalid argument {} for \"--image-pull-policy\" flag: must be one of: {}",
                    go_quote(s),
                    Self::ALL.map(|(_, n)| n).join(", ")
                ))
            })
    }
}

/// Default for [`EvalOptions::max_output_bytes`]: 1 GiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 30;
