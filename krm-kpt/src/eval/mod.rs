//! `function-runner eval`: one function over a package directory or a
//! ResourceList, the way `kpt fn eval` runs it, for function authors.
//!
//! [`run`] reads the input ([`package`]: every file parsed into yaml.v3-style
//! trees first, so malformed YAML stops the run before anything executes),
//! adds kpt's annotations, builds the ResourceList (with `functionConfig`
//! from `--fn-config` or the `function-input` ConfigMap of `key=value`
//! arguments), runs the function (`--exec`: a local command through the
//! exec core shared with wrapper-server; `--image`: an [`Evaluator`]),
//! prints kpt's lines on stderr (`[RUNNING]`, `[PASS]`/`[FAIL]`,
//! `Results:`, `Stderr:`, `Exit code:`), restores what the function dropped
//! (each resource's comments and field order, from the input resource with
//! the same id, as kyaml's `copyCommentsAndSyncOrder` does) and writes the
//! output (back to the package, atomically per file; to a new directory;
//! to stdout as a ResourceList or as plain documents) and the
//! `--results-dir` file (`kpt.dev/v1 FunctionResultList`). Nothing is
//! written unless the function passed and its output was read whole.
//! With a selector or an exclusion ([`EvalOptions::selector`]) the
//! function gets only the selected resources and its output is merged back
//! among the others ([`crate::select`]).
//!
//! Where kpt's behaviour is odd it is kept, so both give the same files and
//! lines: a result without severity prints as `[info]`, multi-line results
//! are joined with spaces, output longer than four lines is truncated
//! (`--truncate-output`), the `function-input` ConfigMap's keys come in
//! kpt's order (`metadata`, `data`, `kind`, `apiVersion`) and its values are
//! quoted as kyaml quotes them, `-o unwrap` and `-o DIR` are written from
//! the `-o stdout` text read again (where comments can move), the path and
//! index annotations a function changes are reconciled as kyaml's
//! `ReconcileInternalAnnotations` does (one form changed: the other
//! follows; both changed differently: error).
//!
//! Departures from kpt: a function that prints nothing and exits 0 is an
//! error and nothing is written (kpt reads it as no resources and deletes
//! every file of the package); a function whose stdout is not a
//! ResourceList still has its stderr and exit code printed (kpt prints only
//! the parse error); `-o DIR` fails before running the function if DIR
//! exists (kpt runs it first); lists are matched by position when comments
//! are copied back (kyaml matches the lists a Kubernetes schema marks as
//! merge-by-key, such as `containers`, by key: the two differ only where a
//! function reorders such a list); YAML aliases in the output are
//! followed (`krm_yaml::alias`): results sharing a dict each keep it (kpt
//! fails on a shared `resourceRef`), and an alias whose anchor is in
//! another item, or that the field-order sync moves before its anchor, is
//! expanded so each written document parses (kpt writes it as it is);
//! `--exec` runs the command with `krm_fn::exec` directly rather than through
//! the runner's exec evaluator, whose gRPC-status mapping would lose the
//! exit code, results and stderr that kpt's `[FAIL]` block shows.
//!
//! [`package`]: krm_yaml::package

mod apply;
mod env;
mod exec;
mod input;
mod output;
mod results;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
mod text_output;

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::select::{self, Selector};
use krm_fn::evaluator::Evaluator;
use krm_yaml::package::{go_quote, PackageError, Progress};

pub(crate) use apply::{apply, StepFunction, StepReport};
// Named by nothing outside `eval` today (`render` reads it through
// `StepReport::outcome`), but reachable here as before the split.
#[allow(unused_imports)]
pub(crate) use apply::Outcome;
pub use env::FunctionEnv;
pub use exec::shlex_split;
pub(crate) use input::{doc_error, function_config, krm_problem, set_all};
pub(crate) use output::clear_annotations;
pub use results::{kpt_duration, kpt_line, prepare_results_dir};
pub(crate) use results::{results_list_yaml, FnRecord};
pub(crate) use text_output::{resource_list_text, write_output_text};

use exec::{run_builtin, run_exec, run_image};
use input::{assemble, check_krm, read_dir_input, read_stream_input, select_input};
use output::{
    output_krm_check, parse_output, placed_from_text, process_items, unwrap_text, write_files,
    Processed,
};
use results::{fail_line, finish_results, print_results, print_stderr};

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
    fn name_and_key(&self) -> (String, &'static str) {
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
    /// kpt's `--truncate-output` (default true): at most four lines of
    /// results and of stderr.
    pub truncate_output: bool,
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
            truncate_output: true,
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
}

impl Error {
    /// The error as kpt prints it: a Kptfile's message as it is, any other
    /// after `error: `.
    pub fn kpt_text(&self) -> String {
        match self {
            Error::Kptfile(text) => text.clone(),
            err => format!("error: {err}"),
        }
    }
}

/// Runs the function; kpt's lines go to `stderr`, output resources (for
/// `-o stdout|unwrap` and stdin) to `stdout`. Returns the exit code: 0, or
/// 1 when the function failed (its `[FAIL]` block already printed); an
/// error is to be printed as `error: {err}` with exit code 1.
pub async fn run(
    mut opts: EvalOptions,
    stdout: &mut (dyn Write + Send),
    stderr: &mut (dyn Write + Send),
) -> Result<u8, Error> {
    // kpt makes the results directory before anything else: a file in the
    // way stops the run with nothing changed.
    if let Some(dir) = &opts.results_dir {
        prepare_results_dir(dir)?;
    }
    let output = opts.output.clone().unwrap_or(match opts.source {
        Source::Dir(_) => Output::InPlace,
        Source::Stdin(_) => Output::Stdout,
    });
    let fn_config = function_config(&opts.fn_config)?;
    if let Output::Dir(dir) = &output {
        if dir.exists() {
            return Err(Error::OutputExists(dir.display().to_string()));
        }
    }
    let (name, result_key) = opts.function.name_and_key();
    // The bytes read from stdin go once they are parsed: with two trees
    // of the package to hold later, every copy counts.
    let source = std::mem::replace(&mut opts.source, Source::Stdin(Vec::new()));
    let mut input = match source {
        Source::Dir(dir) => read_dir_input(&dir, stderr)?,
        Source::Stdin(bytes) => read_stream_input(&bytes)?,
    };
    // With `--match-*` or `--exclude-*`, the function sees a selection;
    // `all` keeps every resource, to merge its output back into.
    let selection = if opts.selector.is_empty() && opts.exclusion.is_empty() {
        None
    } else {
        Some(select_input(
            &mut input,
            std::slice::from_ref(&opts.selector),
            std::slice::from_ref(&opts.exclusion),
        )?)
    };

    let list = assemble(&mut input.items, Some(fn_config));
    let mut record = FnRecord {
        key: result_key,
        name: name.clone(),
        stderr: String::new(),
        exit_code: 1,
        results: Vec::new(),
    };
    match &selection {
        Some(_) => writeln!(
            stderr,
            "[RUNNING] {} on {} resource(s)",
            go_quote(&name),
            input.items.len()
        )?,
        None => writeln!(stderr, "[RUNNING] {}", go_quote(&name))?,
    }
    let started = Instant::now();
    if let Err(e) = check_krm(&input) {
        fail_line(stderr, &name, started)?;
        finish_results(&opts, &record, stderr)?;
        return Err(e);
    }
    let ran = match &opts.function {
        Function::Exec(cmd) => run_exec(cmd, list, opts.max_output_bytes, &opts.env).await,
        Function::Image { image, evaluator } => run_image(image, list, evaluator.as_ref()).await,
        Function::Builtin { builtin, .. } => run_builtin(builtin, &list, opts.max_output_bytes),
    };
    let mut ran = match ran {
        Ok(r) => r,
        Err(e) => {
            fail_line(stderr, &name, started)?;
            finish_results(&opts, &record, stderr)?;
            return Err(e);
        }
    };
    record.stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
    let parsed = parse_output(&std::mem::take(&mut ran.stdout), &name);
    if let Ok((_, results)) = &parsed {
        record.results = results.clone();
    }

    if ran.exit_code != 0 {
        record.exit_code = ran.exit_code;
        fail_line(stderr, &name, started)?;
        print_results(stderr, &record.results, opts.truncate_output)?;
        print_stderr(stderr, &ran.stderr, opts.truncate_output)?;
        write!(stderr, "  Exit code: {}\n\n", ran.exit_code)?;
        finish_results(&opts, &record, stderr)?;
        return Ok(1);
    }
    let mut items = match parsed {
        Ok((items, _)) => items,
        Err(e) => {
            fail_line(stderr, &name, started)?;
            print_stderr(stderr, &ran.stderr, opts.truncate_output)?;
            finish_results(&opts, &record, stderr)?;
            return Err(e);
        }
    };
    if let Some((all, picked)) = selection {
        if let Err(e) = items.iter().try_for_each(output_krm_check) {
            fail_line(stderr, &name, started)?;
            print_results(stderr, &record.results, opts.truncate_output)?;
            finish_results(&opts, &record, stderr)?;
            return Err(e);
        }
        input.krm_checked = true;
        items = select::merge(all, &picked, items);
        select::delete_ids(&mut items);
    }
    // kpt writes `-o unwrap` and `-o DIR` from the text of `-o stdout`,
    // read again (cmdutil.WriteFnOutput); comments can land elsewhere on
    // that second reading, so the same is done here.
    let first = match output {
        Output::Unwrap | Output::Dir(_) => Output::Stdout,
        ref o => o.clone(),
    };
    let processed = match process_items(
        items,
        &input,
        &first,
        &mut Progress::new(Some(&mut *stderr)),
    ) {
        Ok(p) => p,
        Err(e) => {
            fail_line(stderr, &name, started)?;
            print_results(stderr, &record.results, opts.truncate_output)?;
            finish_results(&opts, &record, stderr)?;
            return Err(e);
        }
    };
    record.exit_code = 0;
    writeln!(
        stderr,
        "[PASS] {} in {}",
        go_quote(&name),
        kpt_duration(started.elapsed())
    )?;
    print_results(stderr, &record.results, opts.truncate_output)?;
    print_stderr(stderr, &ran.stderr, opts.truncate_output)?;
    let written = match processed {
        Processed::Mismatch(e) => Err(e),
        Processed::Files(placed) => write_files(&input, placed, &output, stderr),
        Processed::Text(text) => match &output {
            Output::Unwrap => unwrap_text(&text).and_then(|t| {
                stdout
                    .write_all(t.as_bytes())
                    .and_then(|()| stdout.flush())
                    .map_err(Error::from)
            }),
            Output::Dir(_) => placed_from_text(&text)
                .and_then(|placed| write_files(&input, placed, &output, stderr)),
            _ => stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(Error::from),
        },
    };
    let record_result = finish_results(&opts, &record, stderr);
    written?;
    record_result?;
    Ok(0)
}
