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
//! are joined with spaces (all of them and the stderr on one line each, as
//! kpt v1.0.0-beta.67 prints them), the `function-input` ConfigMap's keys come in
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
mod error;
mod exec;
mod input;
mod options;
mod output;
mod results;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
mod text_output;

use std::io::Write;
use std::time::Instant;
use tracing::Instrument as _;

use crate::select;
use krm_yaml::package::{go_quote, Progress};

pub use error::Error;
pub use options::{
    EvalOptions, FnConfig, Function, ImagePullPolicy, Output, Source, DEFAULT_MAX_OUTPUT_BYTES,
};

pub(crate) use apply::{apply, StepFunction, StepReport};
pub use env::FunctionEnv;
pub(crate) use exec::go_os_error;
pub use exec::shlex_split;
pub(crate) use input::{doc_error, function_config, krm_problem, set_all};
pub(crate) use output::clear_annotations;
pub use results::{kpt_duration, kpt_line, prepare_results_dir};
pub(crate) use results::{result_value, results_list_yaml, FnRecord};
pub(crate) use text_output::{resource_list_text, write_output_text};

use exec::{run_builtin, run_exec, run_image};
use input::{assemble, check_krm, read_dir_input, read_stream_input, select_input};
use output::{
    output_krm_check, parse_output, placed_from_text, process_items, unwrap_text, write_files,
    Processed,
};
use results::{fail_line, finish_results, print_results, print_stderr};

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
        results: Vec::new().into(),
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
    // The function's run, exported when tracing is on (OTEL_* variables):
    // a pod started for it, and the wrapper's spans, are its children.
    let span = tracing::info_span!(
        target: "otel",
        "eval.function",
        function = %name,
        exit_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let ran = async {
        match &opts.function {
            Function::Exec(cmd) => run_exec(cmd, list, opts.max_output_bytes, &opts.env).await,
            Function::Image { image, evaluator } => {
                run_image(image, list, evaluator.as_ref()).await
            }
            Function::Builtin { builtin, image } => {
                run_builtin(builtin, image, &list, opts.max_output_bytes)
            }
        }
    }
    .instrument(span.clone())
    .await;
    if !span.is_disabled() {
        match &ran {
            Ok(ran) => span.record("exit_code", ran.exit_code),
            Err(_) => span.record("otel.status_code", "ERROR"),
        };
        if ran.as_ref().is_ok_and(|r| r.exit_code != 0) {
            span.record("otel.status_code", "ERROR");
        }
    }
    drop(span);
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
        record.results = results.clone().into();
    }

    if ran.exit_code != 0 {
        record.exit_code = ran.exit_code;
        fail_line(stderr, &name, started)?;
        print_results(stderr, &record.results)?;
        print_stderr(stderr, &ran.stderr)?;
        write!(stderr, "  Exit code: {}\n\n", ran.exit_code)?;
        finish_results(&opts, &record, stderr)?;
        return Ok(1);
    }
    let mut items = match parsed {
        Ok((items, _)) => items,
        Err(e) => {
            fail_line(stderr, &name, started)?;
            print_stderr(stderr, &ran.stderr)?;
            finish_results(&opts, &record, stderr)?;
            return Err(e);
        }
    };
    if let Some((all, picked)) = selection {
        if let Err(e) = items.iter().try_for_each(output_krm_check) {
            fail_line(stderr, &name, started)?;
            print_results(stderr, &record.results)?;
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
            print_results(stderr, &record.results)?;
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
    print_results(stderr, &record.results)?;
    print_stderr(stderr, &ran.stderr)?;
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
