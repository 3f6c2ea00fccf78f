//! One function over resources that stay in memory (`render`'s steps):
//! [`apply`], a built-in run on the items themselves, and the
//! [`StepReport`] a step gets back.

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Instant;

use bytes::Bytes;

use super::error::Error;
use super::exec::{container_stderr, run_builtin, run_exec, run_image};
use super::input::{assemble, krm_problem, set_all};
use super::options::Function;
use super::output::{clear_annotations, parse_output, PathAnns, INTERNAL_KEYS, LEGACY_KEYS};
use super::results::{fail_line, kpt_duration, print_results, print_stderr};
use krm_results::FnResult;
use krm_yaml::alias::expand_misplaced;
use krm_yaml::package::{self, annotations as ann, go_quote, kyaml, PackageError};
use krm_yaml::{self as yaml, Kind, Node};

/// What a pipeline step runs, and how kpt prints it.
pub(crate) struct StepFunction<'a> {
    pub function: &'a Function,
    /// The name kpt's lines give the function.
    pub name: &'a str,
    /// Its `functionConfig`, if any.
    pub fn_config: Option<Node>,
    /// The most stdout the function may write.
    pub max_output_bytes: usize,
}

/// Runs the step's function over `input` as kpt's function runner does
/// for one pipeline step: ids and migration ids on the way in; on the way
/// out the input's comments and field order restored, ids cleared, the
/// path and index annotations reconciled. Prints kpt's `[RUNNING]` and
/// `[PASS]` or `[FAIL]` lines. `Ok(None)`: the function failed (its block
/// printed). `report` says whether to print the resource count and takes
/// what kpt's results file records of the run.
pub(crate) async fn apply(
    step: StepFunction<'_>,
    mut input: Vec<Node>,
    report: &mut StepReport,
    stderr: &mut (dyn Write + Send),
) -> Result<Option<Vec<Node>>, Error> {
    let StepFunction {
        function,
        name,
        fn_config,
        max_output_bytes,
    } = step;
    for item in &input {
        let path = kyaml::annotation(item, ann::PATH).unwrap_or_default();
        if let Some(problem) = krm_problem(&kyaml::meta(item), path) {
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
        Function::Builtin { builtin, image } => {
            let run =
                run_builtin_tree(builtin, image, name, &mut input, fn_config, report, stderr)?;
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
                // `render` has no `-e`.
                Function::Exec(cmd) => run_exec(cmd, list, max_output_bytes, &[]).await,
                Function::Image { image, evaluator } => {
                    run_image(image, list, evaluator.as_ref()).await
                }
                Function::Builtin { builtin, image } => {
                    run_builtin(builtin, image, &list, max_output_bytes)
                }
            };
            let ran = match ran {
                Ok(r) => r,
                Err(e) => {
                    report.outcome = Some(Outcome::failed(String::new()));
                    fail_line(stderr, name, started)?;
                    return Err(e);
                }
            };
            let parsed = parse_output(&ran.stdout, name);
            if ran.exit_code != 0 {
                report.outcome = Some(Outcome {
                    exit_code: ran.exit_code,
                    stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
                    results: parsed.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
                });
                fail_line(stderr, name, started)?;
                if let Ok((_, results)) = &parsed {
                    print_results(stderr, results)?;
                }
                print_stderr(stderr, &ran.stderr)?;
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
                    print_stderr(stderr, &ran.stderr)?;
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
        if let Some(problem) = krm_problem(&meta, &path) {
            let shown = if path.is_empty() {
                package::default_path(&meta)
            } else {
                path
            };
            fail_line(stderr, name, started)?;
            return Err(Error::OutputNotKrm(format!("{shown}: {problem}")));
        }
        let pkg = kyaml::annotation(item, ann::PACKAGE_PATH).unwrap_or(&report.package);
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
            kyaml::copy_comments_in_place(from, &mut item);
            kyaml::sync_order(from, &mut item);
            // The sync may put an alias before its anchor (PyYAML writes
            // fields sorted): its document would not parse.
            if let Err(e) = expand_misplaced(&mut item) {
                fail_line(stderr, name, started)?;
                return Err(Error::BadOutput(e.to_string()));
            }
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
    print_results(stderr, &results)?;
    print_stderr(stderr, &fn_stderr)?;
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
    /// render: the package whose pipeline runs the step, which a new
    /// resource (no package annotation yet) belongs to for kpt's check of
    /// paths (`enforcePathInvariants`). Empty for eval.
    pub package: String,
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
    pub results: Vec<FnResult>,
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
type Passed = (Vec<Node>, Vec<FnResult>, Bytes, Instant);

/// [`apply`] for a built-in function: on the items themselves, no text in
/// between (the items are moved into the function; it keeps their comments
/// and order, so nothing needs restoring from a copy). `Ok(None)`: it
/// failed (its block printed).
fn run_builtin_tree(
    builtin: &krm_builtins::Builtin,
    image: &str,
    name: &str,
    input: &mut Vec<Node>,
    fn_config: Option<Node>,
    report: &mut StepReport,
    stderr: &mut (dyn Write + Send),
) -> Result<Option<Passed>, Error> {
    running_line(stderr, name, input.len(), report)?;
    let started = Instant::now();
    // The items go as a container gets them: each document's content.
    // A document's own comments (a licence header before a blank line)
    // go onto it, where the text path's comment copy puts them back.
    let content = |n: Node| match n.kind {
        Kind::Document => {
            let mut c = n.content.into_iter().next().unwrap_or_default();
            if c.head_comment.is_empty() {
                c.head_comment = n.head_comment;
            }
            if c.foot_comment.is_empty() {
                c.foot_comment = n.foot_comment;
            }
            c
        }
        _ => n,
    };
    let mut rl = krm_builtins::ResourceList {
        items: input.drain(..).map(content).collect(),
        function_config: fn_config.map(content),
        ..Default::default()
    };
    let ctx = krm_builtins::Context::new().with_release(builtin.release_of(image));
    let outcome = krm_builtins::container::run_with_stack(builtin, &mut rl, &ctx);
    krm_builtins::container::retag(&mut rl.items);
    let results = builtin_results(&rl.results)?;
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
            print_results(stderr, &results)?;
            print_stderr(stderr, &container_stderr(log.as_bytes()))?;
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
fn builtin_results(results: &[FnResult]) -> Result<Vec<FnResult>, Error> {
    if results.is_empty() {
        return Ok(Vec::new());
    }
    let node = Node::sequence(results.iter().map(krm_builtins::result::to_node).collect());
    yaml::value::to_value(&node)
        .map(|v| krm_results::kpt::read(&v))
        .map_err(|e| Error::BadOutput(format!("results: {e}")))
}
