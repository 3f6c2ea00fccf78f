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
//! function reorders such a list); `--exec` runs the command with
//! `krm_fn::exec` directly rather than through
//! [`crate::evaluator::ExecEvaluator`], whose gRPC-status mapping would lose
//! the exit code, results and stderr that kpt's `[FAIL]` block shows.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krm_fn::exec::{self, ExecError, ExecSpec, ExitStatus, Limits};
use proto::pb::EvaluateFunctionRequest;
use serde_yaml_ng::{Mapping, Value};

use crate::evaluator::{EvalRequest, Evaluator};
use crate::select::{self, Selector};
use krm_yaml::package::{
    self, annotations as ann, go_quote, go_quote_bytes, kyaml, Meta, PackageError, Placed, Progress,
};
use krm_yaml::{self as yaml, Kind, Node, Style};

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
    /// An image whose function is built in ([`crate::builtin::Builtins`]),
    /// run in-process: its output is what the catalog's container would
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
    #[error("unexpected function error: {0}")]
    Exec(String),
    #[error("{0}")]
    Evaluator(String),
    #[error("writing results: {0}")]
    Results(io::Error),
    #[error("writing output: {0}")]
    Write(#[from] io::Error),
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
        Function::Exec(cmd) => run_exec(cmd, list, opts.max_output_bytes).await,
        Function::Image { image, evaluator } => run_image(image, list, evaluator.as_ref()).await,
        Function::Builtin { builtin, .. } => run_builtin(builtin, &list),
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
    let parsed = parse_output(&std::mem::take(&mut ran.stdout));
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

/// What was read, ready to send.
struct Input {
    /// Items as sent (with kpt's annotations): documents, or the bare
    /// items of a ResourceList read from stdin.
    items: Vec<Node>,
    /// Paths of the items as sent, for messages (`""` when none).
    paths: Vec<String>,
    /// The path and index sent, by migration id (kyaml's `nodeAnnosMap`,
    /// to tell which of the two forms a function changed).
    originals: HashMap<String, [String; 2]>,
    /// Whether the input used the internal / legacy path annotations.
    use_internal: bool,
    use_legacy: bool,
    /// Files read (package directory).
    files_read: Vec<String>,
    dir: Option<PathBuf>,
    /// `apiVersion`, `kind` of the list written to stdout.
    wrapper: (String, String),
    /// Whether the function's output was checked to hold resources only
    /// before it was merged back among the resources it did not see (kpt
    /// checks only what the function returned).
    krm_checked: bool,
}

const RESOURCE_LIST_HEADER: (&str, &str) = ("config.kubernetes.io/v1", "ResourceList");

fn read_dir_input(dir: &Path, stderr: &mut (dyn Write + Send)) -> Result<Input, Error> {
    let files = {
        let mut progress = Progress::new(Some(&mut *stderr));
        package::read_package(dir, &mut progress)?
    };
    let mut input = Input {
        items: Vec::new(),
        paths: Vec::new(),
        originals: HashMap::new(),
        use_internal: true,
        use_legacy: true,
        files_read: Vec::new(),
        dir: Some(dir.to_path_buf()),
        wrapper: (RESOURCE_LIST_HEADER.0.into(), RESOURCE_LIST_HEADER.1.into()),
        krm_checked: false,
    };
    let mut n = 0usize;
    for file in files {
        for (i, doc) in file.documents.into_iter().enumerate() {
            let index = i.to_string();
            let mid = n.to_string();
            let id = (n + 1).to_string();
            // kyaml's reader annotations (sorted), kpt's migration id, the
            // function filter's ids.
            let set = [
                (ann::LEGACY_INDEX, index.as_str()),
                (ann::LEGACY_PATH, file.path.as_str()),
                (ann::INDEX, index.as_str()),
                (ann::PATH, file.path.as_str()),
                (ann::SEQ_INDENT, doc.seq_indent),
                (ann::MIGRATION_ID, mid.as_str()),
                (ann::ID, id.as_str()),
                (ann::LEGACY_ID, id.as_str()),
            ];
            let mut node = doc.node;
            set_all(&mut node, &set).map_err(|e| doc_error(&file.path, e))?;
            input.items.push(node);
            input.paths.push(file.path.clone());
            input.originals.insert(mid, [file.path.clone(), index]);
            n += 1;
        }
        input.files_read.push(file.path);
    }
    input.files_read.sort();
    Ok(input)
}

pub(crate) fn set_all(node: &mut Node, set: &[(&str, &str)]) -> Result<(), kyaml::NotAMapping> {
    for (k, v) in set {
        kyaml::set_annotation(node, k, v)?;
    }
    Ok(())
}

pub(crate) fn doc_error(path: &str, e: impl std::fmt::Display) -> Error {
    Error::Package(PackageError::File {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Narrows `input` to the resources the function is to see, as kpt's
/// `runfn` does: every resource gets its [`select::RESOURCE_ID`], then the
/// selected ones (copies) get the function's ids, numbered among
/// themselves. Returns every resource (without the function's ids) and the
/// positions of the selected ones, for [`select::merge`].
fn select_input(
    input: &mut Input,
    selectors: &[Selector],
    exclusions: &[Selector],
) -> Result<(Vec<Node>, Vec<usize>), Error> {
    let mut all = std::mem::take(&mut input.items);
    for item in &mut all {
        for k in ann::IDS {
            kyaml::clear_annotation(item, k);
        }
    }
    select::set_ids(&mut all).map_err(|e| Error::Input(e.to_string()))?;
    let picked = select::select(&all, selectors, exclusions);
    let paths = std::mem::take(&mut input.paths);
    let originals = std::mem::take(&mut input.originals);
    // The path and index each was sent with, by its old migration id (its
    // position).
    for (n, &i) in picked.iter().enumerate() {
        let mut item = all[i].clone();
        let (mid, id) = (n.to_string(), (n + 1).to_string());
        set_all(
            &mut item,
            &[
                (ann::MIGRATION_ID, mid.as_str()),
                (ann::ID, id.as_str()),
                (ann::LEGACY_ID, id.as_str()),
            ],
        )
        .map_err(|e| Error::Input(e.to_string()))?;
        if let Some(o) = originals.get(&i.to_string()) {
            input.originals.insert(mid, o.clone());
        }
        input.paths.push(paths.get(i).cloned().unwrap_or_default());
        input.items.push(item);
    }
    Ok((all, picked))
}

fn read_stream_input(bytes: &[u8]) -> Result<Input, Error> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| Error::Input("input is not UTF-8 text".into()))?;
    let mut input = Input {
        items: Vec::new(),
        paths: Vec::new(),
        originals: HashMap::new(),
        use_internal: true,
        use_legacy: true,
        files_read: Vec::new(),
        dir: None,
        wrapper: (RESOURCE_LIST_HEADER.0.into(), RESOURCE_LIST_HEADER.1.into()),
        krm_checked: false,
    };
    let mut docs = read_stream(text).map_err(|e| Error::Input(e.to_string()))?;
    if wrapped_list(text, &docs).is_some() {
        // A ResourceList (or List): its items as they are, plus kpt's ids.
        let mut list = docs.pop().map(|d| d.node).unwrap_or_default();
        let meta = kyaml::meta(&list);
        input.wrapper = (meta.api_version, meta.kind);
        input.use_internal = false;
        input.use_legacy = false;
        let root = kyaml::content_mut(&mut list);
        let items: Vec<Node> = match kyaml::field_index(root, "items") {
            Some(i) => std::mem::take(&mut root.content[i + 1].content),
            None => Vec::new(),
        };
        drop(list);
        let mut parsed = Vec::with_capacity(items.len());
        for item in items {
            let get = |k: &str| kyaml::annotation(&item, k).map(str::to_owned);
            let found = [
                get(ann::LEGACY_PATH),
                get(ann::LEGACY_INDEX),
                get(ann::PATH),
                get(ann::INDEX),
            ];
            input.use_legacy |= found[0].is_some() || found[1].is_some();
            input.use_internal |= found[2].is_some() || found[3].is_some();
            parsed.push((item, found));
        }
        for (n, (mut item, [lp, li, ip, ii])) in parsed.into_iter().enumerate() {
            let mid = n.to_string();
            let id = (n + 1).to_string();
            let mut set: Vec<(&str, &str)> = vec![(ann::MIGRATION_ID, mid.as_str())];
            match (&ip, &lp) {
                (None, Some(p)) => set.push((ann::PATH, p)),
                (Some(p), None) => set.push((ann::LEGACY_PATH, p)),
                _ => {}
            }
            match (&ii, &li) {
                (None, Some(i)) => set.push((ann::INDEX, i)),
                (Some(i), None) => set.push((ann::LEGACY_INDEX, i)),
                _ => {}
            }
            set.push((ann::ID, id.as_str()));
            set.push((ann::LEGACY_ID, id.as_str()));
            set_all(&mut item, &set).map_err(|e| Error::Input(e.to_string()))?;
            let path = ip.clone().or(lp.clone()).unwrap_or_default();
            input.paths.push(path.clone());
            input
                .originals
                .insert(mid.clone(), [path, ii.or(li).unwrap_or_default()]);
            input.items.push(item);
        }
        return Ok(input);
    }
    for (n, doc) in docs.into_iter().enumerate() {
        let index = n.to_string();
        let id = (n + 1).to_string();
        let set = [
            (ann::LEGACY_INDEX, index.as_str()),
            (ann::INDEX, index.as_str()),
            (ann::SEQ_INDENT, doc.seq_indent),
            (ann::MIGRATION_ID, index.as_str()),
            (ann::ID, id.as_str()),
            (ann::LEGACY_ID, id.as_str()),
        ];
        let mut node = doc.node;
        set_all(&mut node, &set).map_err(|e| Error::Input(e.to_string()))?;
        input.items.push(node);
        input.paths.push(String::new());
        input
            .originals
            .insert(index.clone(), [String::new(), index]);
    }
    Ok(input)
}

/// A stream's documents as kyaml's `ByteReader` reads them.
fn read_stream(text: &str) -> Result<Vec<package::Document>, package::DocError> {
    package::read_documents(text)
}

/// The one document of a stream that is one ResourceList or List (with
/// `items` or `functionConfig`), as kyaml unwraps it.
fn wrapped_list<'a>(text: &str, docs: &'a [package::Document]) -> Option<&'a Node> {
    // kyaml unwraps only when the stream is one piece.
    let single =
        package::split_pieces(&package::normalize_newlines(text)).is_ok_and(|p| p.len() == 1);
    let [doc] = docs else {
        return None;
    };
    if !single {
        return None;
    }
    let meta = kyaml::meta(&doc.node);
    if meta.kind != "ResourceList" && meta.kind != "List" {
        return None;
    }
    if kyaml::field(&doc.node, "items").is_none()
        && kyaml::field(&doc.node, "functionConfig").is_none()
    {
        return None;
    }
    Some(&doc.node)
}

/// The `functionConfig` node.
pub(crate) fn function_config(cfg: &FnConfig) -> Result<Node, Error> {
    match cfg {
        FnConfig::File(path) => {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|_| Error::MissingFnConfig(shown.clone()))?;
            let docs =
                read_stream(&text).map_err(|e| Error::BadFnConfig(shown.clone(), e.to_string()))?;
            let Some(doc) = docs.into_iter().next() else {
                return Err(Error::BadFnConfig(shown, "it is empty".into()));
            };
            let set = [
                (ann::LEGACY_INDEX, "0"),
                (ann::INDEX, "0"),
                (ann::SEQ_INDENT, doc.seq_indent),
            ];
            let mut node = doc.node;
            set_all(&mut node, &set).map_err(|e| Error::BadFnConfig(shown, e.to_string()))?;
            Ok(node)
        }
        FnConfig::Args(args) => {
            let mut kind = "ConfigMap";
            let mut data: Vec<(&str, &str)> = Vec::new();
            for (i, arg) in args.iter().enumerate() {
                match arg.split_once('=') {
                    Some(("", _)) => return Err(Error::BadArg),
                    Some((k, v)) => match data.iter_mut().find(|d| d.0 == k) {
                        Some(d) => d.1 = v,
                        None => data.push((k, v)),
                    },
                    None if i == 0 => kind = arg,
                    None => return Err(Error::BadArg),
                }
            }
            // kpt's `getCLIFunctionConfig`: a parsed skeleton, fields set
            // with kyaml's `SetField` (string values; kind and apiVersion
            // untagged).
            let skeleton = "metadata:\n  name: function-input\ndata: {}\n";
            let mut doc = yaml::parse::parse(skeleton)
                .ok()
                .and_then(|d| d.into_iter().next())
                .ok_or_else(|| Error::Input("the function-input skeleton".into()))?;
            let root = kyaml::content_mut(&mut doc);
            let set = |map: &mut Node, k: &str, v: Node| {
                kyaml::set_field(map, k, v).map_err(|e| Error::Input(e.to_string()))
            };
            if let Some(i) = kyaml::field_index(root, "data") {
                for (k, v) in &data {
                    // kyaml's `NewStringRNode`: multi-line values literal.
                    let mut value = Node::string(*v);
                    if v.contains('\n') {
                        value.style = Style::LITERAL;
                    }
                    set(&mut root.content[i + 1], k, value)?;
                }
            }
            set(root, "kind", bare(kind))?;
            set(root, "apiVersion", bare("v1"))?;
            Ok(doc)
        }
    }
}

/// An untagged scalar, as kyaml builds keys.
fn bare(s: &str) -> Node {
    Node {
        kind: Kind::Scalar,
        value: s.into(),
        ..Node::default()
    }
}

/// kyaml's `ByteWriter` with a wrapper: `apiVersion`, `kind`, `items` (each
/// a document's content), then the extra fields, by the yaml.v3 encoder
/// with compact sequences. The items are moved in and back out, not copied.
fn wrap_and_encode(header: (&str, &str), items: &mut [Node], extra: Vec<(&str, Node)>) -> String {
    let mut seq = Node {
        kind: Kind::Sequence,
        ..Node::default()
    };
    seq.content = items
        .iter_mut()
        .map(|d| std::mem::take(kyaml::content_mut(d)))
        .collect();
    let mut content = vec![
        bare("apiVersion"),
        bare(header.0),
        bare("kind"),
        bare(header.1),
        bare("items"),
        seq,
    ];
    for (k, v) in extra {
        content.push(bare(k));
        content.push(v);
    }
    let mut list = Node {
        kind: Kind::Mapping,
        content,
        ..Node::default()
    };
    let text = yaml::emit::encode_node(&list, true);
    let Some(seq) = list.content.get_mut(5) else {
        return text;
    };
    for (d, n) in items.iter_mut().zip(seq.content.drain(..)) {
        *kyaml::content_mut(d) = n;
    }
    text
}

/// The ResourceList sent to the function.
fn assemble(items: &mut [Node], fn_config: Option<Node>) -> Bytes {
    let extra = fn_config
        .map(|fc| match fc.kind {
            Kind::Document => fc.content.into_iter().next().unwrap_or_default(),
            _ => fc,
        })
        .map(|fc| ("functionConfig", fc));
    Bytes::from(wrap_and_encode(
        RESOURCE_LIST_HEADER,
        items,
        extra.into_iter().collect(),
    ))
}

/// kpt's `AreKRM`: `apiVersion`, `kind` and `metadata.name` are required.
pub(crate) fn krm_problem(meta: &Meta) -> Option<&'static str> {
    if !meta.has_metadata && meta.api_version.is_empty() && meta.kind.is_empty() {
        Some("resource must have `apiVersion`, `kind`, and `name`")
    } else if meta.api_version.is_empty() {
        Some("resource must have `apiVersion`")
    } else if meta.kind.is_empty() {
        Some("resource must have `kind`")
    } else if meta.name.is_empty() {
        Some("resource must have `metadata.name`")
    } else {
        None
    }
}

fn check_krm(input: &Input) -> Result<(), Error> {
    for (item, path) in input.items.iter().zip(&input.paths) {
        if let Some(problem) = krm_problem(&kyaml::meta(item)) {
            return Err(Error::InputNotKrm(format!("{path}: {problem}")));
        }
    }
    Ok(())
}
/// What the function did.
struct Ran {
    exit_code: i32,
    stdout: Bytes,
    stderr: Bytes,
}

/// Splits a command line as Go's `shlex.Split` does (quotes and
/// backslashes, no expansion).
pub fn shlex_split(s: &str) -> Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return Err("EOF found after escape character"),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => cur.push(n),
                        None => return Err("EOF found when expecting closing quote"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => cur.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                cur.push('\\');
                                cur.push(n);
                            }
                            None => return Err("EOF found after escape character"),
                        },
                        Some(n) => cur.push(n),
                        None => return Err("EOF found when expecting closing quote"),
                    }
                }
            }
            '#' if !in_word => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

async fn run_exec(cmd: &str, input: Bytes, max_output_bytes: usize) -> Result<Ran, Error> {
    let argv = shlex_split(cmd).map_err(|e| Error::BadExec {
        command: cmd.to_owned(),
        reason: e,
    })?;
    let spec = ExecSpec::from_argv(argv).ok_or_else(|| Error::BadExec {
        command: cmd.to_owned(),
        reason: "it is empty",
    })?;
    let limits = Limits {
        max_stdout_bytes: max_output_bytes,
        max_stderr_bytes: 16 << 20,
        drain_grace: Duration::from_millis(500),
    };
    match exec::run(&spec, input, &limits).await {
        Ok(out) => Ok(Ran {
            exit_code: match out.status {
                ExitStatus::Code(c) => c,
                // Go's ExitCode() for a process killed by a signal.
                ExitStatus::Signal(_) => -1,
            },
            stdout: out.stdout,
            stderr: out.stderr,
        }),
        Err(ExecError::Spawn { program, source }) => Err(Error::Exec(
            if !program.contains('/') && source.kind() == io::ErrorKind::NotFound {
                format!(
                    "exec: {}: executable file not found in $PATH",
                    go_quote(&program)
                )
            } else {
                format!("fork/exec {program}: {}", go_os_error(&source))
            },
        )),
        Err(e) => Err(Error::Exec(e.to_string())),
    }
}

/// An OS error in Go's words: `no such file or directory`.
fn go_os_error(e: &io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

async fn run_image(image: &str, input: Bytes, evaluator: &dyn Evaluator) -> Result<Ran, Error> {
    let req = EvalRequest::new(EvaluateFunctionRequest {
        resource_list: input,
        image: image.to_owned(),
        tag: String::new(),
    });
    match evaluator.evaluate(req).await {
        Ok(resp) => Ok(Ran {
            exit_code: 0,
            stdout: resp.resource_list,
            stderr: container_stderr(&resp.log).into(),
        }),
        Err(e) => Err(Error::Evaluator(e.to_string())),
    }
}

/// A built-in function on the ResourceList's text, answered as its
/// container would (stderr as kpt reads a container's).
fn run_builtin(builtin: &krm_builtins::Builtin, input: &[u8]) -> Result<Ran, Error> {
    let ctx = krm_builtins::Context::new();
    let out = crate::builtin::run_on_bytes(builtin, input, &ctx)
        .ok_or_else(|| Error::Evaluator(format!("built-in {} was cancelled", builtin.name)))?;
    Ok(Ran {
        exit_code: match out.status {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(_) => -1,
        },
        stdout: out.stdout,
        stderr: container_stderr(&out.stderr).into(),
    })
}

/// An image function's stderr as kpt shows it: kpt reads a container's
/// stderr line by line (Go's `bufio.Scanner`: a final newline ends the last
/// line rather than starting an empty one, and a `\r` before a newline
/// goes) and joins the lines with `\n`.
fn container_stderr(log: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = log.split(|b| *b == b'\n').collect();
    if log.ends_with(b"\n") {
        lines.pop();
    }
    let lines: Vec<&[u8]> = lines
        .into_iter()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .collect();
    lines.join(&b'\n')
}

// ---------------------------------------------------------------------------
// Output

/// The function's output, checked, as items and results.
fn parse_output(stdout: &[u8]) -> Result<(Vec<Node>, Vec<KptResult>), Error> {
    // kpt reads an empty answer as a list of no resources and deletes
    // every file of the package; a function that printed nothing more
    // likely failed without saying so.
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadOutput(
            "the function printed nothing; nothing was written (kpt would read this as no \
             resources and delete every file of the package; a function that means to \
             delete them all prints a ResourceList with `items: []`)"
                .into(),
        ));
    }
    if let Err(e) = krm_fn::results::parse_output(stdout) {
        return Err(Error::BadOutput(e.to_string()));
    }
    let text =
        std::str::from_utf8(stdout).map_err(|_| Error::BadOutput("not UTF-8 text".into()))?;
    let mut docs = read_stream(text).map_err(|e| Error::BadOutput(e.to_string()))?;
    if wrapped_list(text, &docs).is_none() {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    }
    let Some(mut list) = docs.pop().map(|d| d.node) else {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    };
    let results = kyaml::field(&list, "results")
        .map(|r| parse_results(&yaml::value::to_value(r)))
        .unwrap_or_default();
    let root = kyaml::content_mut(&mut list);
    let Some(i) = kyaml::field_index(root, "items") else {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    };
    let items = std::mem::take(&mut root.content[i + 1]);
    let items = match items.kind {
        Kind::Sequence => items.content,
        _ if items.tag == kyaml::NULL_TAG => Vec::new(),
        k => {
            return Err(Error::BadOutput(format!(
                "items must be a sequence, found a {}",
                kyaml::kind_name(k)
            )))
        }
    };
    Ok((items, results))
}

enum Processed {
    Files(Vec<Placed>),
    Text(String),
    /// An error kpt reports after `[PASS]`, when writing.
    Mismatch(Error),
}

fn index_value(path: &str, v: &Option<String>) -> Result<Option<i64>, Error> {
    match v {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s.trim().parse::<i64>().map(Some).map_err(|_| {
            Error::Package(PackageError::BadIndex {
                path: path.to_owned(),
                value: s.clone(),
            })
        }),
    }
}

/// The path and index annotations of an item, both forms (`""` when
/// missing), and its migration id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PathAnns {
    internal: [String; 2],
    legacy: [String; 2],
    migration_id: String,
}

const INTERNAL_KEYS: [&str; 2] = [ann::PATH, ann::INDEX];
const LEGACY_KEYS: [&str; 2] = [ann::LEGACY_PATH, ann::LEGACY_INDEX];
const FORMS: [&str; 2] = ["path", "index"];

impl PathAnns {
    /// The path (`0`) or index (`1`): the internal form, else the legacy.
    fn pick(&self, k: usize) -> &str {
        if self.internal[k].is_empty() {
            &self.legacy[k]
        } else {
            &self.internal[k]
        }
    }

    fn read(anns: &[(&str, &str)]) -> Self {
        let get = |k: &str| {
            anns.iter()
                .rev()
                .find(|a| a.0 == k)
                .map(|a| a.1.to_owned())
                .unwrap_or_default()
        };
        PathAnns {
            internal: INTERNAL_KEYS.map(get),
            legacy: LEGACY_KEYS.map(get),
            migration_id: get(ann::MIGRATION_ID),
        }
    }

    /// kyaml's `ReconcileInternalAnnotations`: a missing form is copied
    /// from the other; if one form still has the value that was sent, it
    /// takes the other's; if both changed differently, it is an error.
    fn reconcile(
        &self,
        originals: &HashMap<String, [String; 2]>,
    ) -> Result<PathAnns, &'static str> {
        let mut cur = self.clone();
        for k in 0..2 {
            if cur.internal[k].is_empty() && !cur.legacy[k].is_empty() {
                cur.internal[k] = cur.legacy[k].clone();
            } else if cur.legacy[k].is_empty() && !cur.internal[k].is_empty() {
                cur.legacy[k] = cur.internal[k].clone();
            }
        }
        if let Some(original) = originals.get(&cur.migration_id) {
            for k in 0..2 {
                let o = &original[k];
                if o.is_empty() {
                    continue;
                }
                if *o != cur.internal[k] && *o != cur.legacy[k] && cur.internal[k] != cur.legacy[k]
                {
                    return Err(FORMS[k]);
                } else if *o != cur.internal[k] {
                    cur.legacy[k] = cur.internal[k].clone();
                } else if *o != cur.legacy[k] {
                    cur.internal[k] = cur.legacy[k].clone();
                }
            }
        }
        for (k, form) in FORMS.iter().enumerate() {
            let (i, l) = (&cur.internal[k], &cur.legacy[k]);
            if !i.is_empty() && !l.is_empty() && i != l {
                return Err(form);
            }
        }
        Ok(cur)
    }
}

/// kpt's `AreKRM` on an output resource.
fn output_krm_check(item: &Node) -> Result<(), Error> {
    let meta = kyaml::meta(item);
    let Some(problem) = krm_problem(&meta) else {
        return Ok(());
    };
    let found = PathAnns::read(&kyaml::annotations(item));
    let shown = match found.pick(0) {
        "" => package::default_path(&meta),
        path => path.to_owned(),
    };
    Err(Error::OutputNotKrm(format!("{shown}: {problem}")))
}

/// Reconciles, places and cleans the items for `output`. Each item that
/// answers to an input's id first gets that input's comments where it has
/// none, and its field order (kyaml's `copyCommentsAndSyncOrder`).
fn process_items(
    items: Vec<Node>,
    input: &Input,
    output: &Output,
    progress: &mut Progress<'_>,
) -> Result<Processed, Error> {
    let total = items.len();
    let mut placed = Vec::with_capacity(items.len());
    // kpt's checks on what the function returned (before reconciling).
    let mut read = Vec::with_capacity(items.len());
    let mut explicit: Vec<(String, String)> = Vec::new();
    for (n, mut item) in items.into_iter().enumerate() {
        progress.tick(|| format!("processing the function's output: {n} of {total} resources"));
        let id = kyaml::annotation(&item, ann::ID)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_ID))
            .and_then(|id| id.parse::<usize>().ok());
        if let Some(from) = id
            .and_then(|id| id.checked_sub(1))
            .and_then(|i| input.items.get(i))
        {
            kyaml::copy_comments(from, &mut item);
            kyaml::sync_order(from, &mut item);
            kyaml::clear_annotation(&mut item, ann::ID);
            kyaml::clear_annotation(&mut item, ann::LEGACY_ID);
        }
        let meta = kyaml::meta(&item);
        let found = PathAnns::read(&kyaml::annotations(&item));
        let (path, index) = (found.pick(0), found.pick(1));
        if !input.krm_checked {
            output_krm_check(&item)?;
        }
        // kpt's `enforcePathInvariants`, after kyaml gave new resources
        // their default path.
        if path.is_empty() {
            explicit.push((package::default_path(&meta), String::new()));
        } else {
            explicit.push((package::clean_path(path), index.to_owned()));
        }
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        read.push((item, meta, found, wide));
    }
    package::check_paths(&explicit)?;
    let mut listed = Vec::new();
    let mut unwrapped: Vec<(Node, bool)> = Vec::new();
    for (mut item, meta, found, wide) in read {
        let cur = match found.reconcile(&input.originals) {
            Ok(c) => c,
            Err(what) => {
                return Ok(Processed::Mismatch(Error::Package(
                    PackageError::Mismatched(what),
                )))
            }
        };
        let path = cur.internal[0].clone();
        // kyaml's `LocalPackageWriter` refuses these when writing, after
        // kpt printed `[PASS]`.
        if matches!(output, Output::InPlace | Output::Dir(_)) && path.starts_with('/') {
            return Ok(Processed::Mismatch(PackageError::Absolute(path).into()));
        }
        match output {
            Output::InPlace | Output::Dir(_) => {
                clear_annotations(&mut item, ann::is_kpt);
                let rel = if path.is_empty() {
                    package::default_path(&meta)
                } else {
                    path
                };
                let rel = package::clean_path(rel.trim_start_matches('/'));
                if rel == ".." || rel.starts_with("../") {
                    return Err(PackageError::OutsidePackage(rel).into());
                }
                placed.push(Placed {
                    index: index_value(&rel, &Some(cur.internal[1].clone()))?,
                    path: rel,
                    node: item,
                    wide,
                });
            }
            Output::Stdout => {
                let mut set: Vec<(&str, String)> = Vec::new();
                for k in 0..2 {
                    if cur.internal[k] != found.internal[k] {
                        set.push((INTERNAL_KEYS[k], cur.internal[k].clone()));
                    }
                    if cur.legacy[k] != found.legacy[k] {
                        set.push((LEGACY_KEYS[k], cur.legacy[k].clone()));
                    }
                }
                if path.is_empty() {
                    let default = package::default_path(&meta);
                    if input.use_internal {
                        set.push((ann::PATH, default.clone()));
                    }
                    if input.use_legacy {
                        set.push((ann::LEGACY_PATH, default));
                    }
                }
                let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (*k, v.as_str())).collect();
                set_all(&mut item, &set).map_err(|e| Error::BadOutput(e.to_string()))?;
                let (ui, ul) = (input.use_internal, input.use_legacy);
                clear_annotations(&mut item, |k: &str| {
                    ann::is_id(k)
                        || (!ui && matches!(k, ann::PATH | ann::INDEX | ann::SEQ_INDENT))
                        || (!ul && matches!(k, ann::LEGACY_PATH | ann::LEGACY_INDEX))
                });
                listed.push(item);
            }
            Output::Unwrap => {
                clear_annotations(&mut item, ann::is_kpt);
                unwrapped.push((item, wide));
            }
        }
    }
    Ok(match output {
        Output::InPlace | Output::Dir(_) => Processed::Files(placed),
        Output::Stdout => Processed::Text(wrap_and_encode(
            (&input.wrapper.0, &input.wrapper.1),
            &mut listed,
            Vec::new(),
        )),
        Output::Unwrap => {
            let docs: Vec<(&Node, bool)> = unwrapped.iter().map(|(n, w)| (n, *w)).collect();
            Processed::Text(package::documents_text(&docs))
        }
    })
}

/// The items of a ResourceList text as kyaml's `ByteReader` reads them back.
fn reread_items(text: &str) -> Result<Vec<Node>, Error> {
    let mut docs = read_stream(text).map_err(|e| Error::BadOutput(e.to_string()))?;
    if wrapped_list(text, &docs).is_none() {
        return Ok(docs.into_iter().map(|d| d.node).collect());
    }
    let Some(mut list) = docs.pop().map(|d| d.node) else {
        return Ok(Vec::new());
    };
    let root = kyaml::content_mut(&mut list);
    Ok(match kyaml::field_index(root, "items") {
        Some(i) if root.content[i + 1].kind == Kind::Sequence => {
            std::mem::take(&mut root.content[i + 1].content)
        }
        _ => Vec::new(),
    })
}

/// `-o unwrap` from the text of `-o stdout`: kyaml's `ByteWriter` without
/// a wrapper, clearing the path, index and seqindent annotations; one
/// resource from a `.json` file is written as JSON.
fn unwrap_text(text: &str) -> Result<String, Error> {
    let mut items = reread_items(text)?;
    if let [item] = items.as_slice() {
        let path = kyaml::annotation(item, ann::PATH)
            .or_else(|| kyaml::annotation(item, ann::LEGACY_PATH))
            .unwrap_or_default();
        if path.ends_with(".json") {
            let mut item = item.clone();
            clear_annotations(&mut item, ann::is_kpt);
            return Ok(package::file_content("x.json", &[(&item, false)]));
        }
    }
    let mut docs = Vec::with_capacity(items.len());
    for mut item in items.drain(..) {
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        clear_annotations(&mut item, |k| {
            matches!(
                k,
                ann::PATH | ann::INDEX | ann::LEGACY_PATH | ann::LEGACY_INDEX | ann::SEQ_INDENT
            )
        });
        docs.push((item, wide));
    }
    let refs: Vec<(&Node, bool)> = docs.iter().map(|(n, w)| (n, *w)).collect();
    Ok(package::documents_text(&refs))
}

/// `-o DIR` from the text of `-o stdout`: kyaml's `LocalPackageWriter`.
fn placed_from_text(text: &str) -> Result<Vec<Placed>, Error> {
    let mut placed = Vec::new();
    for mut item in reread_items(text)? {
        let found = PathAnns::read(&kyaml::annotations(&item));
        let pick = |k: usize| found.pick(k).to_owned();
        let (path, index) = (pick(0), pick(1));
        if path.starts_with('/') {
            return Err(PackageError::Absolute(path).into());
        }
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        let rel = if path.is_empty() {
            package::default_path(&kyaml::meta(&item))
        } else {
            path
        };
        let rel = package::clean_path(rel.trim_start_matches('/'));
        if rel == ".." || rel.starts_with("../") {
            return Err(PackageError::OutsidePackage(rel).into());
        }
        clear_annotations(&mut item, ann::is_kpt);
        placed.push(Placed {
            index: index_value(&rel, &Some(index))?,
            path: rel,
            node: item,
            wide,
        });
    }
    Ok(placed)
}

/// kyaml's `ClearAnnotation` for each annotation `remove` names, then
/// `ClearEmptyAnnotations`.
pub(crate) fn clear_annotations(item: &mut Node, remove: impl Fn(&str) -> bool) {
    let keys: Vec<String> = kyaml::annotations(item)
        .into_iter()
        .filter(|(k, _)| remove(k))
        .map(|(k, _)| k.to_owned())
        .collect();
    for k in keys {
        kyaml::clear_annotation(item, &k);
    }
    kyaml::clear_empty_annotations(item);
}
fn write_files(
    input: &Input,
    placed: Vec<Placed>,
    output: &Output,
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let (root, delete) = match (output, &input.dir) {
        (Output::Dir(d), _) => {
            std::fs::create_dir_all(d).map_err(|source| PackageError::Io {
                path: d.clone(),
                source,
            })?;
            (d.clone(), false)
        }
        (_, Some(d)) => (d.clone(), true),
        (_, None) => (PathBuf::from("."), false),
    };
    let mut progress = Progress::new(Some(stderr));
    let (_, kept) = package::write_package(&root, placed, &mut progress)?;
    if delete {
        package::delete_gone(&root, &input.files_read, &kept)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Results, as kpt reads and prints them

/// A structured result, as kpt (kyaml's `framework.Result`) reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KptResult {
    pub message: String,
    /// As written (empty when missing; printed as `info`).
    pub severity: String,
    pub resource_ref: Option<[String; 4]>,
    pub field: Option<(String, Option<Value>, Option<Value>)>,
    pub file: Option<(String, i64)>,
    pub tags: Vec<(String, String)>,
}

/// A scalar's text (`""` for null; `None` for collections).
fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        Value::Tagged(t) => scalar_string(&t.value),
        _ => None,
    }
}

fn str_of(v: Option<&Value>) -> String {
    v.and_then(scalar_string).unwrap_or_default()
}

/// Reads `results` as kpt does: a list, or the legacy `{items: [...]}`;
/// `resourceRef.metadata.name|namespace` and `field.suggestedValue` are
/// migrated. Entries that are not mappings are skipped.
pub fn parse_results(v: &Value) -> Vec<KptResult> {
    let list = match v {
        Value::Mapping(m) => match m.get("items") {
            Some(Value::Sequence(s)) => s.as_slice(),
            _ => &[],
        },
        Value::Sequence(s) => s.as_slice(),
        _ => &[],
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let Value::Mapping(m) = item else {
            continue;
        };
        let mut r = KptResult {
            message: str_of(m.get("message")),
            severity: str_of(m.get("severity")),
            ..KptResult::default()
        };
        if let Some(Value::Mapping(rr)) = m.get("resourceRef") {
            let mut name = str_of(rr.get("name"));
            let mut namespace = str_of(rr.get("namespace"));
            if let Some(Value::Mapping(md)) = rr.get("metadata") {
                if md.get("name").is_some() {
                    name = str_of(md.get("name")).trim().to_owned();
                }
                let ns = str_of(md.get("namespace"));
                let ns = ns.trim();
                if !ns.is_empty() && ns != "''" {
                    namespace = ns.to_owned();
                }
            }
            r.resource_ref = Some([
                str_of(rr.get("apiVersion")),
                str_of(rr.get("kind")),
                name,
                namespace,
            ]);
        }
        match m.get("field") {
            Some(Value::Mapping(f)) => {
                let proposed = f.get("suggestedValue").or(f.get("proposedValue")).cloned();
                r.field = Some((
                    str_of(f.get("path")),
                    f.get("currentValue").cloned(),
                    proposed,
                ));
            }
            Some(Value::String(s)) => r.field = Some((s.clone(), None, None)),
            _ => {}
        }
        if let Some(Value::Mapping(f)) = m.get("file") {
            let index = f.get("index").and_then(Value::as_i64).unwrap_or(0);
            r.file = Some((str_of(f.get("path")), index));
        }
        if let Some(Value::Mapping(t)) = m.get("tags") {
            let mut tags: Vec<(String, String)> = t
                .iter()
                .map(|(k, v)| {
                    (
                        scalar_string(k).unwrap_or_default(),
                        scalar_string(v).unwrap_or_default(),
                    )
                })
                .collect();
            tags.sort();
            r.tags = tags;
        }
        out.push(r);
    }
    out
}

impl KptResult {
    /// kpt's line: `[severity] apiVersion/kind/namespace/name field.path: message`.
    pub fn line(&self) -> String {
        let severity = if self.severity.is_empty() {
            "info"
        } else {
            &self.severity
        };
        let mut s = format!("[{severity}]");
        if let Some([api_version, kind, name, namespace]) = &self.resource_ref {
            let ids: Vec<&str> = [api_version, kind, namespace, name]
                .into_iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty())
                .collect();
            if !ids.is_empty() {
                s.push(' ');
                s.push_str(&ids.join("/"));
            }
        }
        if let Some((path, _, _)) = &self.field {
            s.push(' ');
            s.push_str(path);
        }
        s.push_str(": ");
        s.push_str(&self.message);
        s
    }

    /// As kpt writes it in `results.yaml`.
    fn to_value(&self) -> Value {
        let mut m = Mapping::new();
        let put = |m: &mut Mapping, k: &str, v: &str| {
            if !v.is_empty() {
                m.insert(k.into(), v.into());
            }
        };
        put(&mut m, "message", &self.message);
        put(&mut m, "severity", &self.severity);
        if let Some([api_version, kind, name, namespace]) = &self.resource_ref {
            let mut r = Mapping::new();
            put(&mut r, "apiVersion", api_version);
            put(&mut r, "kind", kind);
            put(&mut r, "name", name);
            put(&mut r, "namespace", namespace);
            m.insert("resourceRef".into(), Value::Mapping(r));
        }
        if let Some((path, current, proposed)) = &self.field {
            let mut f = Mapping::new();
            put(&mut f, "path", path);
            if let Some(c) = current {
                f.insert("currentValue".into(), c.clone());
            }
            if let Some(p) = proposed {
                f.insert("proposedValue".into(), p.clone());
            }
            m.insert("field".into(), Value::Mapping(f));
        }
        if let Some((path, index)) = &self.file {
            let mut f = Mapping::new();
            put(&mut f, "path", path);
            if *index != 0 {
                f.insert("index".into(), (*index).into());
            }
            m.insert("file".into(), Value::Mapping(f));
        }
        if !self.tags.is_empty() {
            let t: Mapping = self
                .tags
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
                .collect();
            m.insert("tags".into(), Value::Mapping(t));
        }
        Value::Mapping(m)
    }
}

/// One function's entry in `results.yaml`.
#[derive(Debug, Clone)]
pub(crate) struct FnRecord {
    /// `exec` or `image`.
    pub key: &'static str,
    pub name: String,
    pub stderr: String,
    pub exit_code: i32,
    pub results: Vec<KptResult>,
}

/// kpt's `FunctionResultList` of one function.
fn results_yaml(record: &FnRecord) -> String {
    results_list_yaml(
        std::slice::from_ref(record),
        i32::from(record.exit_code != 0),
    )
}

/// kpt's `FunctionResultList` (`items` left out when there are none).
pub(crate) fn results_list_yaml(records: &[FnRecord], exit_code: i32) -> String {
    let items: Vec<Value> = records.iter().map(record_value).collect();
    let mut list = Mapping::new();
    list.insert("apiVersion".into(), "kpt.dev/v1".into());
    list.insert("kind".into(), "FunctionResultList".into());
    let mut md = Mapping::new();
    md.insert("name".into(), "fnresults".into());
    list.insert("metadata".into(), Value::Mapping(md));
    list.insert("exitCode".into(), exit_code.into());
    if !items.is_empty() {
        list.insert("items".into(), Value::Sequence(items));
    }
    yaml::emit::encode_node(&yaml::value::from_value(&Value::Mapping(list)), false)
}

fn record_value(record: &FnRecord) -> Value {
    let mut item = Mapping::new();
    item.insert(record.key.into(), record.name.as_str().into());
    if !record.stderr.is_empty() {
        item.insert("stderr".into(), record.stderr.as_str().into());
    }
    item.insert("exitCode".into(), record.exit_code.into());
    if !record.results.is_empty() {
        item.insert(
            "results".into(),
            Value::Sequence(record.results.iter().map(KptResult::to_value).collect()),
        );
    }
    Value::Mapping(item)
}

/// Writes `results.yaml` (if asked) and says where it is.
fn finish_results(
    opts: &EvalOptions,
    record: &FnRecord,
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let Some(dir) = &opts.results_dir else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(Error::Results)?;
    let path = dir.join("results.yaml");
    std::fs::write(&path, results_yaml(record)).map_err(Error::Results)?;
    write!(stderr, "\nFor complete results, see {}\n", path.display())?;
    Ok(())
}

fn fail_line(stderr: &mut (dyn Write + Send), name: &str, started: Instant) -> io::Result<()> {
    writeln!(
        stderr,
        "[FAIL] {} in {}",
        go_quote(name),
        kpt_duration(started.elapsed())
    )
}

/// kpt's multi-line block: a title, the lines (newlines as spaces), at
/// most four of them when truncating.
fn block(title: &str, lines: &[String], truncate: bool) -> String {
    let mut s = format!("  {title}:\n");
    let max = if truncate { 4 } else { usize::MAX };
    for l in lines.iter().take(max) {
        s.push_str("    ");
        s.push_str(&l.replace('\n', " "));
        s.push('\n');
    }
    if lines.len() > max {
        s.push_str(&format!(
            "    ...({} line(s) truncated, use '--truncate-output=false' to disable)\n",
            lines.len() - max
        ));
    }
    s
}

fn print_results(
    stderr: &mut (dyn Write + Send),
    results: &[KptResult],
    truncate: bool,
) -> io::Result<()> {
    if results.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = results.iter().map(KptResult::line).collect();
    stderr.write_all(block("Results", &lines, truncate).as_bytes())
}

fn print_stderr(stderr: &mut (dyn Write + Send), text: &[u8], truncate: bool) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = text.split(|b| *b == b'\n').map(go_quote_bytes).collect();
    stderr.write_all(block("Stderr", &lines, truncate).as_bytes())
}

/// Go's `Duration.String()` of the time truncated to 100 ms, as kpt
/// prints it (`0s`, `200ms`, `1.5s`, `1m2.3s`).
pub fn kpt_duration(d: Duration) -> String {
    let ms = (d.as_millis() / 100 * 100) as u64;
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    let tenths = (ms % 1000) / 100;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let sec = if tenths == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{tenths}s")
    };
    if h > 0 {
        format!("{h}h{m}m{sec}")
    } else if m > 0 {
        format!("{m}m{sec}")
    } else {
        sec
    }
}

// ---------------------------------------------------------------------------
// One function over resources that stay in memory (`render`'s steps)

/// Runs `function` over `input` as kpt's function runner does for one
/// pipeline step: ids and migration ids on the way in; on the way out the
/// input's comments and field order restored, ids cleared, the path and
/// index annotations reconciled. Prints kpt's `[RUNNING]` and `[PASS]` or
/// `[FAIL]` lines. `Ok(None)`: the function failed (its block printed).
/// `report` says whether to print the resource count and takes what kpt's
/// results file records of the run.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply(
    function: &Function,
    name: &str,
    mut input: Vec<Node>,
    fn_config: Option<Node>,
    max_output_bytes: usize,
    truncate: bool,
    report: &mut StepReport,
    stderr: &mut (dyn Write + Send),
) -> Result<Option<Vec<Node>>, Error> {
    for item in &input {
        if let Some(problem) = krm_problem(&kyaml::meta(item)) {
            let path = kyaml::annotation(item, ann::PATH).unwrap_or_default();
            return Err(Error::InputNotKrm(format!("{path}: {problem}")));
        }
    }
    let mut originals = HashMap::new();
    for (n, item) in input.iter_mut().enumerate() {
        let (mid, id) = (n.to_string(), (n + 1).to_string());
        let found = PathAnns::read(&kyaml::annotations(item));
        let pick = |k: usize| found.pick(k).to_owned();
        originals.insert(mid.clone(), [pick(0), pick(1)]);
        let ids = [
            (ann::MIGRATION_ID, mid.as_str()),
            (ann::ID, id.as_str()),
            (ann::LEGACY_ID, id.as_str()),
        ];
        // kpt runs a validator outside kyaml's pipeline, which sets the
        // migration id: the validator sees none.
        let ids = if report.validator {
            &ids[1..]
        } else {
            &ids[..]
        };
        set_all(item, ids).map_err(|e| Error::Input(e.to_string()))?;
    }
    let (items, results, fn_stderr, started) = match function {
        Function::Builtin { builtin, .. } => {
            let run = run_builtin_tree(
                builtin, name, &mut input, fn_config, truncate, report, stderr,
            )?;
            match run {
                Some(done) => done,
                None => return Ok(None),
            }
        }
        _ => {
            let list = assemble(&mut input, fn_config);
            running_line(stderr, name, input.len(), report)?;
            let started = Instant::now();
            let ran = match function {
                Function::Exec(cmd) => run_exec(cmd, list, max_output_bytes).await,
                Function::Image { image, evaluator } => {
                    run_image(image, list, evaluator.as_ref()).await
                }
                Function::Builtin { builtin, .. } => run_builtin(builtin, &list),
            };
            let ran = match ran {
                Ok(r) => r,
                Err(e) => {
                    report.outcome = Some(Outcome::failed(String::new()));
                    fail_line(stderr, name, started)?;
                    return Err(e);
                }
            };
            let parsed = parse_output(&ran.stdout);
            if ran.exit_code != 0 {
                report.outcome = Some(Outcome {
                    exit_code: ran.exit_code,
                    stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
                    results: parsed.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
                });
                fail_line(stderr, name, started)?;
                if let Ok((_, results)) = &parsed {
                    print_results(stderr, results, truncate)?;
                }
                print_stderr(stderr, &ran.stderr, truncate)?;
                write!(stderr, "  Exit code: {}\n\n", ran.exit_code)?;
                return Ok(None);
            }
            match parsed {
                Ok((items, results)) => (items, results, ran.stderr, started),
                Err(e) => {
                    report.outcome = Some(Outcome::failed(
                        String::from_utf8_lossy(&ran.stderr).into_owned(),
                    ));
                    fail_line(stderr, name, started)?;
                    print_stderr(stderr, &ran.stderr, truncate)?;
                    return Err(e);
                }
            }
        }
    };
    // kpt's checks on a step's output: resources only, and no two at one
    // path and index, nor any outside its package (by package; new
    // resources at their default path).
    let mut by_pkg: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for item in &items {
        let meta = kyaml::meta(item);
        let found = PathAnns::read(&kyaml::annotations(item));
        let pick = |k: usize| found.pick(k).to_owned();
        let path = pick(0);
        if let Some(problem) = krm_problem(&meta) {
            let shown = if path.is_empty() {
                package::default_path(&meta)
            } else {
                path
            };
            fail_line(stderr, name, started)?;
            return Err(Error::OutputNotKrm(format!("{shown}: {problem}")));
        }
        let pkg = kyaml::annotation(item, ann::PACKAGE_PATH).unwrap_or_default();
        let placed = if path.is_empty() {
            (package::default_path(&meta), String::new())
        } else {
            (package::clean_path(&path), pick(1))
        };
        by_pkg.entry(pkg.to_owned()).or_default().push(placed);
    }
    for placed in by_pkg.values() {
        if let Err(e) = package::check_paths(placed) {
            fail_line(stderr, name, started)?;
            return Err(e.into());
        }
    }
    let mut out = Vec::with_capacity(items.len());
    for mut item in items {
        let id = kyaml::annotation(&item, ann::ID)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_ID))
            .and_then(|id| id.parse::<usize>().ok());
        if let Some(from) = id
            .and_then(|id| id.checked_sub(1))
            .and_then(|i| input.get(i))
        {
            kyaml::copy_comments(from, &mut item);
            kyaml::sync_order(from, &mut item);
        }
        let found = PathAnns::read(&kyaml::annotations(&item));
        let cur = match found.reconcile(&originals) {
            Ok(c) => c,
            Err(what) => {
                fail_line(stderr, name, started)?;
                return Err(PackageError::Mismatched(what).into());
            }
        };
        let mut set: Vec<(&str, &str)> = Vec::new();
        for k in 0..2 {
            if cur.internal[k] != found.internal[k] {
                set.push((INTERNAL_KEYS[k], &cur.internal[k]));
            }
            if cur.legacy[k] != found.legacy[k] {
                set.push((LEGACY_KEYS[k], &cur.legacy[k]));
            }
        }
        set_all(&mut item, &set).map_err(|e| Error::BadOutput(e.to_string()))?;
        clear_annotations(&mut item, ann::is_id);
        out.push(item);
    }
    writeln!(
        stderr,
        "[PASS] {} in {}",
        go_quote(name),
        kpt_duration(started.elapsed())
    )?;
    print_results(stderr, &results, truncate)?;
    print_stderr(stderr, &fn_stderr, truncate)?;
    report.outcome = Some(Outcome {
        exit_code: 0,
        stderr: String::from_utf8_lossy(&fn_stderr).into_owned(),
        results,
    });
    Ok(Some(out))
}

/// kpt's `[RUNNING]` line (with the count of resources a selecting step
/// sends).
fn running_line(
    stderr: &mut (dyn Write + Send),
    name: &str,
    count: usize,
    report: &StepReport,
) -> io::Result<()> {
    write!(stderr, "[RUNNING] {}", go_quote(name))?;
    if report.show_count {
        write!(stderr, " on {count} resource(s)")?;
    }
    writeln!(stderr)
}

/// What [`apply`] is asked beyond its arguments, and tells back.
#[derive(Debug, Default)]
pub(crate) struct StepReport {
    /// Print ` on N resource(s)` after `[RUNNING]` (kpt does for a step
    /// with selectors or exclusions).
    pub show_count: bool,
    /// A validator: kpt sends it no migration id.
    pub validator: bool,
    /// What kpt's results file records of the run: set when the function
    /// ran (passed, exited non-zero, could not be started, or printed what
    /// is not a ResourceList); not when kpt leaves it out (its input or
    /// output was refused).
    pub outcome: Option<Outcome>,
}

/// A run's exit code, stderr and results, as kpt records them.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub exit_code: i32,
    pub stderr: String,
    pub results: Vec<KptResult>,
}

impl Outcome {
    /// kpt's record of a function that failed without an exit code of its
    /// own: 1.
    fn failed(stderr: String) -> Self {
        Outcome {
            exit_code: 1,
            stderr,
            results: Vec::new(),
        }
    }
}

/// What a function left that passed: its items and results, its stderr,
/// and when it started.
type Passed = (Vec<Node>, Vec<KptResult>, Bytes, Instant);

/// [`apply`] for a built-in function: on the items themselves, no text in
/// between (the items are moved into the function; it keeps their comments
/// and order, so nothing needs restoring from a copy). `Ok(None)`: it
/// failed (its block printed).
fn run_builtin_tree(
    builtin: &krm_builtins::Builtin,
    name: &str,
    input: &mut Vec<Node>,
    fn_config: Option<Node>,
    truncate: bool,
    report: &mut StepReport,
    stderr: &mut (dyn Write + Send),
) -> Result<Option<Passed>, Error> {
    running_line(stderr, name, input.len(), report)?;
    let started = Instant::now();
    // The items go as a container gets them: each document's content.
    let content = |n: Node| match n.kind {
        Kind::Document => n.content.into_iter().next().unwrap_or_default(),
        _ => n,
    };
    let mut rl = krm_builtins::ResourceList {
        items: input.drain(..).map(content).collect(),
        function_config: fn_config.map(content),
        ..Default::default()
    };
    let outcome = builtin.run(&mut rl, &krm_builtins::Context::new());
    let results = builtin_results(&rl.results);
    let mut log = std::mem::take(&mut rl.log);
    match outcome {
        Ok(()) => Ok(Some((
            rl.items,
            results,
            container_stderr(log.as_bytes()).into(),
            started,
        ))),
        Err(krm_builtins::Stop::Failed(text)) => {
            log.push_str(&text);
            report.outcome = Some(Outcome {
                exit_code: 1,
                stderr: String::from_utf8_lossy(&container_stderr(log.as_bytes())).into_owned(),
                results: results.clone(),
            });
            fail_line(stderr, name, started)?;
            print_results(stderr, &results, truncate)?;
            print_stderr(stderr, &container_stderr(log.as_bytes()), truncate)?;
            write!(stderr, "  Exit code: 1\n\n")?;
            Ok(None)
        }
        Err(krm_builtins::Stop::Cancelled) => {
            report.outcome = Some(Outcome::failed(log));
            fail_line(stderr, name, started)?;
            Err(Error::Evaluator(format!(
                "built-in {} was cancelled",
                builtin.name
            )))
        }
    }
}

/// A built-in's results as kpt reads them from a container's output.
fn builtin_results(results: &[krm_builtins::FnResult]) -> Vec<KptResult> {
    if results.is_empty() {
        return Vec::new();
    }
    let node = Node::sequence(
        results
            .iter()
            .map(krm_builtins::FnResult::to_node)
            .collect(),
    );
    parse_results(&yaml::value::to_value(&node))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_as_kpt_reads_it() {
        assert_eq!(
            ImagePullPolicy::parse("never").unwrap(),
            ImagePullPolicy::Never
        );
        assert_eq!(
            ImagePullPolicy::parse("ALWAYS").unwrap(),
            ImagePullPolicy::Always
        );
        assert_eq!(
            ImagePullPolicy::parse("IfNotPresent").unwrap(),
            ImagePullPolicy::default()
        );
        assert_eq!(
            ImagePullPolicy::parse("foo").unwrap_err().to_string(),
            "invalid argument \"foo\" for \"--image-pull-policy\" flag: must be one of: Always, IfNotPresent, Never"
        );
        assert!(ImagePullPolicy::parse("").is_err());
    }

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(kpt_duration(Duration::from_millis(0)), "0s");
        assert_eq!(kpt_duration(Duration::from_millis(99)), "0s");
        assert_eq!(kpt_duration(Duration::from_millis(250)), "200ms");
        assert_eq!(kpt_duration(Duration::from_millis(1000)), "1s");
        assert_eq!(kpt_duration(Duration::from_millis(1570)), "1.5s");
        assert_eq!(kpt_duration(Duration::from_millis(62_300)), "1m2.3s");
        assert_eq!(kpt_duration(Duration::from_secs(3600)), "1h0m0s");
    }

    #[test]
    fn shlex() {
        assert_eq!(
            shlex_split("./fn a 'b c' \"d \\\"e\\\"\" f\\ g").unwrap(),
            vec!["./fn", "a", "b c", "d \"e\"", "f g"]
        );
        assert_eq!(shlex_split("  cat  ").unwrap(), vec!["cat"]);
        assert!(shlex_split("'open").is_err());
    }

    #[test]
    fn function_input_config_map_as_kpt_writes_it() {
        let args = |a: &[&str]| FnConfig::Args(a.iter().map(|s| s.to_string()).collect());
        // As the ResourceList sends it: under `functionConfig:`.
        let function_config = |cfg: &FnConfig| {
            function_config(cfg).map(|n| {
                let list = Node::mapping(vec![bare("functionConfig"), kyaml::content(&n).clone()]);
                yaml::emit::encode_node(&list, true)["functionConfig:\n".len()..].to_owned()
            })
        };
        assert_eq!(
            function_config(&args(&[])).unwrap(),
            "  metadata:\n    name: function-input\n  data: {}\n  kind: ConfigMap\n  apiVersion: v1\n"
        );
        // Observed with kpt 1.0.0-beta.56.
        let got = function_config(&args(&[
            "z=1",
            "a=2",
            "b=true",
            "c=yes",
            "d=hello world",
            "e=",
            "f=1.5",
            "g=null",
            "h=~",
            "i=0x1",
            "j=:x",
            "k=-x",
            "l=a,b",
            "m=#x",
            "n=a: b",
            "o=Yes",
            "p=y",
            "q=off",
            "r=it's",
            "s=\"q\"",
            "t=1e3",
            "u=.inf",
            "v=2001-01-01",
            "w=a\nb",
            "x= lead",
        ]))
        .unwrap();
        assert!(got.contains(r##"  data: {z: "1", a: "2", b: "true", c: "yes", d: hello world, e: "", f: "1.5", g: "null", h: "~", i: "0x1", j: ':x', k: -x, l: 'a,b', m: "#x", n: "a: b", o: "Yes", p: "y", q: "off", r: it's, s: '"q"', t: "1e3", u: ".inf", v: "2001-01-01", w: "a\nb", x: ' lead'}"##), "{got}");
        let got = function_config(&args(&["novalue", "a=b=c", "a=x"])).unwrap();
        assert!(got.contains("  data: {a: x}\n  kind: novalue\n"), "{got}");
        assert!(matches!(
            function_config(&args(&["a=b", "novalue"])),
            Err(Error::BadArg)
        ));
        assert!(matches!(
            function_config(&args(&["=x"])),
            Err(Error::BadArg)
        ));
    }

    #[test]
    fn result_lines_as_kpt_prints_them() {
        let v: Value = serde_yaml_ng::from_str(
            r#"
- message: bad replicas
  severity: error
  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}
  field: {path: spec.replicas, currentValue: 1, proposedValue: 3}
  file: {path: sub/deploy.yaml, index: 0}
- message: just a warning
  severity: warning
- message: nosev
- message: withfield
  field: {path: a.b}
- message: legacy
  severity: warn
  resourceRef: {kind: ConfigMap, metadata: {name: cm, namespace: "''"}}
"#,
        )
        .unwrap();
        let lines: Vec<String> = parse_results(&v).iter().map(KptResult::line).collect();
        assert_eq!(
            lines,
            vec![
                "[error] apps/v1/Deployment/ns/app spec.replicas: bad replicas",
                "[warning]: just a warning",
                "[info]: nosev",
                "[info] a.b: withfield",
                "[warn] ConfigMap/cm: legacy",
            ]
        );
        let wrapped: Value =
            serde_yaml_ng::from_str("{name: x, items: [{message: m, severity: info}]}").unwrap();
        assert_eq!(parse_results(&wrapped).len(), 1);
    }

    #[test]
    fn results_file_as_kpt_writes_it() {
        let v: Value = serde_yaml_ng::from_str(
            "- {message: bad replicas, severity: error, resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}, field: {path: spec.replicas, currentValue: 1, proposedValue: 3}, file: {path: sub/deploy.yaml, index: 0}}\n- {message: \"multi\\nline\", severity: warning}\n",
        )
        .unwrap();
        let record = FnRecord {
            key: "exec",
            name: "./fail.sh".into(),
            stderr: "some stderr line\nsecond stderr line\n".into(),
            exit_code: 1,
            results: parse_results(&v),
        };
        assert_eq!(
            results_yaml(&record),
            "apiVersion: kpt.dev/v1
kind: FunctionResultList
metadata:
  name: fnresults
exitCode: 1
items:
  - exec: ./fail.sh
    stderr: |
      some stderr line
      second stderr line
    exitCode: 1
    results:
      - message: bad replicas
        severity: error
        resourceRef:
          apiVersion: apps/v1
          kind: Deployment
          name: app
          namespace: ns
        field:
          path: spec.replicas
          currentValue: 1
          proposedValue: 3
        file:
          path: sub/deploy.yaml
      - message: |-
          multi
          line
        severity: warning
"
        );
    }

    #[test]
    fn container_stderr_is_read_by_lines_as_kpt_reads_it() {
        assert_eq!(container_stderr(b"one\ntwo\n"), b"one\ntwo");
        assert_eq!(container_stderr(b"one\r\ntwo"), b"one\ntwo");
        assert_eq!(container_stderr(b"a\n\nb\n\n"), b"a\n\nb\n");
        assert_eq!(container_stderr(b""), b"");
    }

    #[test]
    fn blocks_truncate_like_kpt() {
        let lines: Vec<String> = (1..=6).map(|i| format!("\"line {i}\"")).collect();
        assert_eq!(
            block("Stderr", &lines, true),
            "  Stderr:\n    \"line 1\"\n    \"line 2\"\n    \"line 3\"\n    \"line 4\"\n    ...(2 line(s) truncated, use '--truncate-output=false' to disable)\n"
        );
        assert_eq!(block("Stderr", &lines, false).lines().count(), 7);
    }
}
