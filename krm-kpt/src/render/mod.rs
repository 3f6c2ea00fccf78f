//! `function-runner render`: a package's Kptfile pipelines, the way
//! kpt v1.0.0-beta.67's `fn render` runs them. By default depth first:
//! each package's own resources, then its subpackages' rendered ones (in
//! directory order; beta.56 put the subpackages' first), go through its
//! mutators, then its validators (on a copy: what a validator prints is
//! not kept). With the root Kptfile's `kpt.dev/bfs-rendering: "true"`,
//! top down instead: each package in breadth-first order sees itself and
//! every package below it, and what its pipeline gives back goes to the
//! package each resource belongs to. The package is read once, every
//! function is applied in order to the one set of resources (the package
//! model `eval` uses: comments and field order restored after each
//! function, as kpt restores them), and it is written once, at the end,
//! only if every function passed, or, with the root Kptfile's
//! `kpt.dev/save-on-render-failure: "true"`, as far as it got.
//!
//! After an in-place render, passed or failed, the root Kptfile gets the
//! render status (its `Rendered` condition and `renderStatus`: every step
//! run, with its image, exit code and results;
//! [`crate::kptfile::write_render_status`]). `-o` leaves the package and
//! its Kptfile as they are.
//!
//! Functions: `exec:` (with `--allow-exec`, as kpt asks) runs the command;
//! `image:` is expanded under the image prefix and its `tag:` resolved
//! ([`crate::tag`]; without one, `:latest` where it has no tag or digest),
//! then goes to the evaluator `eval --image` uses (FunctionConfigs, or
//! `--process-functions` mappings), or runs built in. `configPath` and
//! `configMap` give the function config. `selectors` and `exclude` narrow
//! the resources a step sees, as kpt's do ([`crate::select`]: the step runs
//! on the selection and its output is merged back; `[RUNNING]` then says
//! `on N resource(s)`). `results_dir` gets kpt's `results.yaml`: every
//! function run, in order, written whether the render passed or failed.
//! With `output` (kpt's `-o`) the rendered resources go to stdout (a
//! ResourceList with kpt's path annotations, or unwrapped) or to a new
//! directory, and the package is left as it is.

//! The module's parts: [`Plan`] (the checks and the package tree, before
//! anything runs; `plan`), the steps of a Kptfile's pipeline (`step`),
//! kpt's error values for the status's message (`kpt_error`), and where
//! the rendered resources go (`output`).

mod kpt_error;
mod options;
mod output;
mod plan;
mod step;

pub use options::{BuiltinFor, Images, RenderOptions};
pub use plan::Plan;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use tracing::Instrument as _;

use crate::eval::{self, Error, FnRecord, StepFunction, StepReport};
use crate::kptfile::{self, RenderReport, StepStatus};
use crate::select;
use krm_yaml::package::{self, annotations as ann, go_quote, kyaml, Progress};
use krm_yaml::Node;

use kpt_error::{KptError, ALREADY_HANDLED};
use output::{join, output_text, write_back};
use plan::Package;
use step::{config_map, pipeline, Maker, NotMade, Step, StepConfig};

/// The root Kptfile's annotations that change how beta.67 renders: on
/// when their value is `true` in any case (kpt's `ToCondition`); a
/// subpackage's are not read.
#[derive(Debug, Default, Clone, Copy)]
struct RootFlags {
    save_on_failure: bool,
    bfs: bool,
}

impl RootFlags {
    fn read(root: &Path) -> RootFlags {
        let Some(doc) = std::fs::read_to_string(root.join("Kptfile"))
            .ok()
            .and_then(|t| package::read_documents_keeping_duplicates(&t).ok())
            .and_then(|d| d.into_iter().next())
        else {
            return RootFlags::default();
        };
        let node = kyaml::content(&doc.node);
        let on = |key: &str| {
            kyaml::annotation(node, key).is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        RootFlags {
            save_on_failure: on("kpt.dev/save-on-render-failure"),
            bfs: on("kpt.dev/bfs-rendering"),
        }
    }
}

impl Plan {
    /// Renders the package; kpt's lines go to `stderr`, `-o
    /// stdout|unwrap`'s resources to `stdout`. Returns the exit code (1
    /// when a function failed; its `[FAIL]` block is printed); an error is
    /// to be printed as [`Error::kpt_text`] says.
    pub async fn run(
        self,
        images: Images,
        stdout: &mut (dyn Write + Send),
        stderr: &mut (dyn Write + Send),
    ) -> Result<u8, Error> {
        // The render, exported when tracing is on: its steps are children.
        let span = tracing::info_span!(target: "otel", "render", package = %self.name());
        self.run_traced(images, stdout, stderr)
            .instrument(span)
            .await
    }

    async fn run_traced(
        self,
        images: Images,
        stdout: &mut (dyn Write + Send),
        stderr: &mut (dyn Write + Send),
    ) -> Result<u8, Error> {
        let name = self.name();
        let Plan {
            opts,
            root,
            package,
        } = self;
        let flags = RootFlags::read(&root);
        let mut state = State {
            opts: &opts,
            images: &images,
            save_on_failure: flags.save_on_failure,
            files_read: Vec::new(),
            succeeded: 0,
            packages: 0,
            records: Vec::new(),
            report: RenderReport::default(),
        };
        let hydrated = if flags.bfs {
            state.hydrate_bfs(&package, &name, stderr).await
        } else {
            state.hydrate(&package, &name, "", stderr).await
        };
        let in_place = matches!(opts.output, None | Some(eval::Output::InPlace));
        let failure = match hydrated {
            Ok(resources) => {
                if in_place {
                    write_back(&root, resources, &state.files_read, true, stderr)?;
                    writeln!(
                        stderr,
                        "Successfully executed {} function(s) in {} package(s).",
                        state.succeeded, state.packages
                    )?;
                    // A results file that cannot be saved fails the
                    // render, and the status says so (the executor's
                    // `updateRenderStatus(hctx, saveErr)`).
                    let saved = state.save_results(stderr);
                    if let Err(e) = &saved {
                        state.report.failure =
                            Some(format!("failed to save function results: {e}"));
                    }
                    kptfile::write_render_status(&root, &state.report);
                    saved?;
                } else if let Some(output) = &opts.output {
                    // kpt saves the results before it writes the output.
                    let text = output_text(&root, resources)?;
                    state.save_results(stderr)?;
                    eval::write_output_text(&text, output, stdout, stderr)?;
                }
                return Ok(0);
            }
            Err(failure) => failure,
        };
        state.report.failure = Some(failure.error.condition_message(&root));
        if in_place && state.save_on_failure {
            // kpt writes what the failed render has (nothing when the
            // failure was deeper than the root's children: its
            // `hydrate` passes no output up past one level), deletes
            // nothing, and says how far it got.
            if let Some(resources) = failure.resources {
                write_back(&root, resources, &state.files_read, false, stderr)?;
            }
            match state.succeeded {
                0 => writeln!(
                    stderr,
                    "Failed to execute any functions in {} package(s).",
                    state.packages
                )?,
                n => writeln!(
                    stderr,
                    "Partially executed {n} function(s) in {} package(s).",
                    state.packages
                )?,
            }
        }
        if in_place {
            kptfile::write_render_status(&root, &state.report);
        }
        // kpt saves the results before it reports the failure, and reports
        // the failure whether or not they could be saved.
        if let Err(e) = state.save_results(stderr) {
            tracing::warn!(%e, "results not saved");
        }
        match failure.cause {
            Cause::Function => Ok(1),
            Cause::Error(e) => Err(Error::Rendering(Box::new(e))),
        }
    }
}

/// What the command reports of a failed render.
enum Cause {
    /// A function failed; its block is printed.
    Function,
    Error(Error),
}

/// A failed render, as `hydrate` hands it up.
struct Failure {
    /// kpt's error value (the status's message).
    error: KptError,
    cause: Cause,
    /// What kpt's `hydrate` returns with the error: the failing package's
    /// resources as far as its pipeline got (kept only with
    /// save-on-failure); its parent passes nothing up.
    output: Option<Vec<Node>>,
    /// The resources of the package that returned (kpt's
    /// `curr.resources`), what the root writes with save-on-failure.
    resources: Option<Vec<Node>>,
}

impl Failure {
    fn of(error: Error, dir: &Path) -> Failure {
        Failure {
            error: KptError::e("pkg.render", dir, KptError::Plain(error.to_string())),
            cause: Cause::Error(error),
            output: None,
            resources: None,
        }
    }
}

/// A pipeline that failed: kpt's error, what the command reports, and the
/// resources as far as it got (the input, if no mutator passed).
struct PipelineFailure {
    error: KptError,
    cause: Cause,
    resources: Vec<Node>,
}

impl PipelineFailure {
    /// A failure inside kpt's `pipeline.run` (a step).
    fn step(dir: &Path, text: String, cause: Cause, resources: Vec<Node>) -> PipelineFailure {
        PipelineFailure {
            error: KptError::Kpt {
                op: "pipeline.run",
                path: Some(dir.to_path_buf()),
                err: Some(Box::new(KptError::Plain(text))),
            },
            cause,
            resources,
        }
    }
}

/// A package's own resources, read.
struct Local {
    resources: Vec<Node>,
    /// Its Kptfile (the first document).
    kptfile: Node,
    /// The files they came from, as kpt's `ValidatePipeline` compares a
    /// `configPath` with them.
    paths: BTreeSet<String>,
}

struct State<'o> {
    opts: &'o RenderOptions,
    images: &'o Images,
    save_on_failure: bool,
    /// Files read, relative to the root.
    files_read: Vec<String>,
    /// Functions that passed.
    succeeded: usize,
    /// Packages entered.
    packages: usize,
    /// What the results file records, in the order the functions ran.
    records: Vec<FnRecord>,
    /// What the render status records.
    report: RenderReport,
}

impl State<'_> {
    /// kpt's `saveFnResults`: `results.yaml` in the results directory (its
    /// `exitCode` 1 if a function failed), and where it is.
    fn save_results(&self, stderr: &mut (dyn Write + Send)) -> Result<(), Error> {
        let Some(dir) = &self.opts.results_dir else {
            return Ok(());
        };
        let failed = self.records.iter().any(|r| r.exit_code != 0);
        let path = dir.join("results.yaml");
        std::fs::write(
            &path,
            eval::results_list_yaml(&self.records, i32::from(failed)),
        )
        .map_err(Error::Results)?;
        writeln!(stderr, "For complete results, see {}", path.display())?;
        Ok(())
    }

    /// The package's own files, each resource with kyaml's reader
    /// annotations and the package's path.
    fn read_local(&mut self, package: &Package, name: &str, rel: &str) -> Result<Local, Error> {
        let dir = &package.dir;
        let files = package::read_local_files(dir, &mut Progress::new(None))?;
        let pkg_path = dir.display().to_string();
        let mut resources = Vec::new();
        let mut kptfile = None;
        let mut paths = BTreeSet::new();
        for file in files {
            for (i, doc) in file.documents.into_iter().enumerate() {
                let index = i.to_string();
                // kyaml's reader annotations (sorted), with the package.
                let set = [
                    (ann::LEGACY_INDEX, index.as_str()),
                    (ann::LEGACY_PATH, file.path.as_str()),
                    (ann::INDEX, index.as_str()),
                    (ann::PACKAGE_PATH, pkg_path.as_str()),
                    (ann::PATH, file.path.as_str()),
                    (ann::SEQ_INDENT, doc.seq_indent),
                ];
                let mut node = doc.node;
                eval::set_all(&mut node, &set).map_err(|e| eval::doc_error(&file.path, e))?;
                if file.path == "Kptfile" && i == 0 {
                    kptfile = Some(node.clone());
                }
                resources.push(node);
            }
            paths.insert(package::clean_path(&file.path));
            self.files_read.push(join(rel, &file.path));
        }
        let Some(kptfile) = kptfile else {
            return Err(Error::Input(format!(
                "{name}: the Kptfile holds no resource"
            )));
        };
        Ok(Local {
            resources,
            kptfile,
            paths,
        })
    }

    /// kpt's `hydrate`: the package's rendered resources, its own first,
    /// then each subpackage's, rendered first.
    fn hydrate<'a>(
        &'a mut self,
        package: &'a Package,
        name: &'a str,
        rel: &'a str,
        stderr: &'a mut (dyn Write + Send),
    ) -> futures::future::BoxFuture<'a, Result<Vec<Node>, Failure>> {
        Box::pin(async move {
            self.packages += 1;
            let dir = &package.dir;
            let local = self
                .read_local(package, name, rel)
                .map_err(|e| Failure::of(e, dir))?;
            let mut input = local.resources;
            for (sub, sub_package) in &package.subpackages {
                let sub_name = format!("{name}/{sub}");
                let sub_rel = join(rel, sub);
                match self.hydrate(sub_package, &sub_name, &sub_rel, stderr).await {
                    Ok(rendered) => input.extend(rendered),
                    Err(mut failed) => {
                        failed.error = KptError::e("pkg.render", &sub_package.dir, failed.error);
                        failed.resources = failed.output.take().map(|o| {
                            input.extend(o);
                            input
                        });
                        return Err(failed);
                    }
                }
            }
            let ran = self
                .run_pipeline(package, name, &local.kptfile, &local.paths, input, stderr)
                .await;
            ran.map_err(|failed| {
                let saved = self.save_on_failure.then_some(failed.resources);
                Failure {
                    error: KptError::e("pkg.render", dir, failed.error),
                    cause: failed.cause,
                    output: saved.clone(),
                    resources: saved,
                }
            })
        })
    }

    /// kpt's `hydrateBfsOrder`: every package found and read first
    /// (breadth first, each package's subpackages in directory order),
    /// then each package's pipeline in that order, on its resources and
    /// those of every package below it (depth first); what it gives back
    /// goes to the package each resource belongs to.
    async fn hydrate_bfs(
        &mut self,
        root: &Package,
        name: &str,
        stderr: &mut (dyn Write + Send),
    ) -> Result<Vec<Node>, Failure> {
        struct Found<'p> {
            package: &'p Package,
            name: String,
            local: Local,
            children: Vec<usize>,
        }
        let mut found: Vec<Found<'_>> = Vec::new();
        let mut queue = vec![(root, name.to_owned(), String::new(), None::<usize>)];
        let mut next = 0;
        while next < queue.len() {
            let (package, name, rel, parent) = queue[next].clone();
            next += 1;
            let local = self
                .read_local(package, &name, &rel)
                .map_err(|e| Failure::of(e, &root.dir))?;
            let index = found.len();
            self.packages = index + 1;
            if let Some(p) = parent {
                found[p].children.push(index);
            }
            found.push(Found {
                package,
                name: name.clone(),
                local,
                children: Vec::new(),
            });
            for (sub, sub_package) in &package.subpackages {
                queue.push((
                    sub_package,
                    format!("{name}/{sub}"),
                    join(&rel, sub),
                    Some(index),
                ));
            }
        }
        fn below(found: &[Found<'_>], i: usize, out: &mut Vec<Node>) {
            for &c in &found[i].children {
                out.extend(found[c].local.resources.iter().cloned());
                below(found, c, out);
            }
        }
        // kpt's `propagateResourcesAcrossNodes`: each resource to its
        // package (by the package-path annotation); a package none come
        // back for keeps what it had.
        fn propagate(found: &mut [Found<'_>], i: usize) {
            let own = found[i].package.dir.display().to_string();
            let mut by_package: std::collections::HashMap<String, Vec<Node>> =
                std::collections::HashMap::new();
            for r in std::mem::take(&mut found[i].local.resources) {
                let pkg = kyaml::annotation(&r, ann::PACKAGE_PATH)
                    .map_or_else(|| own.clone(), str::to_owned);
                by_package.entry(pkg).or_default().push(r);
            }
            for (j, f) in found.iter_mut().enumerate() {
                let path = f.package.dir.display().to_string();
                if let Some(resources) = by_package.remove(&path) {
                    if j != i {
                        f.local.resources = resources;
                    } else {
                        by_package.insert(path, resources);
                    }
                }
            }
            found[i].local.resources = by_package.remove(&own).unwrap_or_default();
        }
        let all = |found: &[Found<'_>]| -> Vec<Node> {
            found
                .iter()
                .flat_map(|f| f.local.resources.iter().cloned())
                .collect()
        };
        for i in 0..found.len() {
            let mut input = found[i].local.resources.clone();
            below(&found, i, &mut input);
            let (package, name, kptfile, paths) = (
                found[i].package,
                found[i].name.clone(),
                found[i].local.kptfile.clone(),
                found[i].local.paths.clone(),
            );
            match self
                .run_pipeline(package, &name, &kptfile, &paths, input, stderr)
                .await
            {
                Ok(output) => {
                    found[i].local.resources = output;
                    propagate(&mut found, i);
                }
                Err(failed) => {
                    let resources = self.save_on_failure.then(|| {
                        found[i].local.resources = failed.resources;
                        propagate(&mut found, i);
                        all(&found)
                    });
                    return Err(Failure {
                        error: KptError::e("pkg.render", &root.dir, failed.error),
                        cause: failed.cause,
                        output: None,
                        resources,
                    });
                }
            }
        }
        Ok(all(&found))
    }

    /// kpt's `runPipeline` for one package: its header line, then (a
    /// package without functions holds resources only) the `configPath`s
    /// checked against its own files, its mutators (all made before the
    /// first runs), its validators.
    async fn run_pipeline(
        &mut self,
        package: &Package,
        name: &str,
        kptfile: &Node,
        local_paths: &BTreeSet<String>,
        input: Vec<Node>,
        stderr: &mut (dyn Write + Send),
    ) -> Result<Vec<Node>, PipelineFailure> {
        let dir = &package.dir;
        let plain = |e: Error, input: Vec<Node>| PipelineFailure {
            error: KptError::Plain(e.to_string()),
            cause: Cause::Error(e),
            resources: input,
        };
        if let Err(e) = writeln!(stderr, "Package: {}", go_quote(name)) {
            return Err(plain(e.into(), input));
        }
        let (mutators, validators) = pipeline(kptfile);
        if mutators.is_empty() && validators.is_empty() {
            for item in &input {
                let path = kyaml::annotation(item, ann::PATH).unwrap_or_default();
                if let Some(problem) = eval::krm_problem(&kyaml::meta(item), path) {
                    let e = Error::InputNotKrm(format!("{path}: {problem}"));
                    return Err(plain(e, input));
                }
            }
            return Ok(input);
        }
        if let Err((shown, all)) = missing_config_paths(kptfile, local_paths) {
            return Err(PipelineFailure {
                error: KptError::Plain(all),
                cause: Cause::Error(Error::Kptfile(shown)),
                resources: input,
            });
        }
        let mut maker = Maker {
            prefix: &self.opts.image_prefix,
            allow_exec: self.opts.allow_exec,
            images: self.images,
            stderr_warnings: Vec::new(),
        };
        let mut steps = Vec::with_capacity(mutators.len());
        for f in &mutators {
            let made = maker.prepare(f).await;
            print_warnings(&mut maker, stderr);
            match made {
                Ok(step) => steps.push(step),
                Err(not_made) => {
                    let text = not_made.error.to_string();
                    self.report.mutation_steps.push(not_made.status());
                    let cause = Cause::Error(not_made.error);
                    return Err(PipelineFailure::step(dir, text, cause, input));
                }
            }
        }
        let mut input = input;
        for step in &steps {
            let before = self.save_on_failure.then(|| input.clone());
            let (ran, status) = self.run_step(step, input, dir, false, stderr).await;
            self.report.mutation_steps.push(status);
            match ran {
                Ok(output) => {
                    self.succeeded += 1;
                    input = output;
                }
                Err((text, cause)) => {
                    return Err(PipelineFailure::step(
                        dir,
                        text,
                        cause,
                        before.unwrap_or_default(),
                    ))
                }
            }
        }
        for f in &validators {
            let made = maker.prepare(f).await;
            print_warnings(&mut maker, stderr);
            let step = match made {
                Ok(step) => step,
                Err(not_made) => {
                    let text = not_made.error.to_string();
                    self.report.validation_steps.push(not_made.status());
                    let cause = Cause::Error(not_made.error);
                    return Err(PipelineFailure::step(dir, text, cause, input));
                }
            };
            let (ran, status) = self.run_step(&step, input.clone(), dir, true, stderr).await;
            self.report.validation_steps.push(status);
            match ran {
                Ok(_) => self.succeeded += 1,
                Err((text, cause)) => return Err(PipelineFailure::step(dir, text, cause, input)),
            }
        }
        Ok(input)
    }

    /// One function on the resources, and what the status records of it.
    async fn run_step(
        &mut self,
        step: &Step,
        input: Vec<Node>,
        dir: &Path,
        validator: bool,
        stderr: &mut (dyn Write + Send),
    ) -> (Result<Vec<Node>, (String, Cause)>, StepStatus) {
        let mut status = StepStatus {
            name: step.fn_name.clone(),
            image: step.image.clone(),
            exec: step.exec.clone(),
            ..StepStatus::default()
        };
        // One span per step, exported when tracing is on (OTEL_* variables).
        let span = tracing::info_span!(
            target: "otel",
            "render.step",
            function = %step.name,
            package = %dir.display(),
            validator,
            exit_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let (ran, recorded) = self
            .apply_step(step, input, dir, validator, stderr)
            .instrument(span.clone())
            .await;
        match self.records.last().filter(|_| recorded) {
            // kpt's `captureStepResult`: the run's record, else (it failed
            // before the function answered) the error.
            Some(record) => {
                status.stderr = record.stderr.clone();
                status.exit_code = record.exit_code;
                status.results = record.results.clone();
            }
            None => {
                if let Err((text, _)) = &ran {
                    status.exit_code = 1;
                    status.execution_error = text.clone();
                }
            }
        }
        if !span.is_disabled() {
            span.record("exit_code", status.exit_code);
            if ran.is_err() {
                span.record("otel.status_code", "ERROR");
            }
        }
        (ran, status)
    }
}

/// Why a step failed.
enum Failed {
    /// The function failed; its block is printed.
    Function,
    Error(Error),
}

impl<E: Into<Error>> From<E> for Failed {
    fn from(e: E) -> Failed {
        Failed::Error(e.into())
    }
}

impl Failed {
    /// kpt's text of it (a function's failure is kpt's
    /// `ErrAlreadyHandled`).
    fn text(&self) -> String {
        match self {
            Failed::Function => ALREADY_HANDLED.into(),
            Failed::Error(e) => e.to_string(),
        }
    }

    fn into_cause(self) -> Cause {
        match self {
            Failed::Function => Cause::Function,
            Failed::Error(e) => Cause::Error(e),
        }
    }
}

impl State<'_> {
    /// One function on the resources: its output, or kpt's text of why it
    /// failed; and whether kpt's results file records the run.
    async fn apply_step(
        &mut self,
        step: &Step,
        input: Vec<Node>,
        dir: &Path,
        validator: bool,
        stderr: &mut (dyn Write + Send),
    ) -> (Result<Vec<Node>, (String, Cause)>, bool) {
        let mut recorded = false;
        let ran = self
            .apply_inner(step, input, dir, validator, stderr, &mut recorded)
            .await;
        (ran.map_err(|e| (e.text(), e.into_cause())), recorded)
    }

    async fn apply_inner(
        &mut self,
        step: &Step,
        input: Vec<Node>,
        dir: &Path,
        validator: bool,
        stderr: &mut (dyn Write + Send),
        recorded: &mut bool,
    ) -> Result<Vec<Node>, Failed> {
        let pkg_path = dir.display().to_string();
        // kpt's selection: for a mutator, every resource gets its id (the
        // function config read below too, as kpt's is the same node) and
        // the output is merged back; a validator runs on a copy of the
        // selection.
        let selecting = select::selecting(&step.selectors, &step.exclusions);
        let mut input = input;
        if selecting && !validator {
            select::set_ids(&mut input).map_err(|e| Error::Input(e.to_string()))?;
        }
        // kpt reads the config from its file, as written; a mutator's is
        // then the package's resource from that file as it is now (the
        // last one whose path is written the same way), if there is one.
        let from_file = |p: &str| -> Result<Node, Error> {
            // Go's `filepath.Join` cleans: `a/..` needs no `a`.
            let path = dir.join(package::clean_path(p));
            let text = std::fs::read_to_string(&path)
                .map_err(|_| Error::MissingFnConfig(path.display().to_string()))?;
            let doc = package::read_documents(&text)
                .map_err(|e| Error::BadFnConfig(path.display().to_string(), e.to_string()))?
                .into_iter()
                .next()
                .ok_or_else(|| {
                    Error::BadFnConfig(path.display().to_string(), "it is empty".into())
                })?;
            Ok(doc.node)
        };
        let fn_config = match &step.fn_config {
            StepConfig::None => None,
            StepConfig::Map(data) => Some(config_map(data)?),
            StepConfig::Path(p) if validator => Some(from_file(p)?),
            StepConfig::Path(p) => {
                let found = input.iter().rev().find(|r| {
                    kyaml::annotation(r, ann::PACKAGE_PATH) == Some(pkg_path.as_str())
                        && kyaml::annotation(r, ann::PATH) == Some(p.as_str())
                });
                match found {
                    Some(r) => Some(r.clone()),
                    None => Some(from_file(p)?),
                }
            }
        };
        let (everything, picked, sent) = if selecting {
            let picked = select::select(&input, &step.selectors, &step.exclusions);
            let sent: Vec<Node> = picked.iter().map(|&i| input[i].clone()).collect();
            (input, Some(picked), sent)
        } else {
            (Vec::new(), None, input)
        };
        let mut report = StepReport {
            show_count: selecting,
            validator,
            package: pkg_path.clone(),
            ..StepReport::default()
        };
        let function = StepFunction {
            function: &step.function,
            name: &step.name,
            fn_config,
            max_output_bytes: self.opts.max_output_bytes,
        };
        let applied = eval::apply(function, sent, &mut report, stderr).await;
        if let Some(o) = report.outcome {
            *recorded = true;
            self.records.push(FnRecord {
                key: step.key,
                name: step.name.clone(),
                stderr: o.stderr,
                exit_code: o.exit_code,
                results: o.results.into(),
            });
        }
        let Some(mut items) = applied? else {
            return Err(Failed::Function);
        };
        if let (Some(picked), false) = (&picked, validator) {
            items = select::merge(everything, picked, items);
            select::delete_ids(&mut items);
        }
        // kyaml's `DefaultPathAnnotation`: a new resource goes to the
        // package whose function made it.
        for item in &mut items {
            if kyaml::annotation(item, ann::PACKAGE_PATH).is_none() {
                kyaml::set_annotation(item, ann::PACKAGE_PATH, &pkg_path)
                    .map_err(|e| Error::BadOutput(e.to_string()))?;
            }
        }
        Ok(items)
    }
}

impl NotMade {
    /// kpt's `preExecFailureStep`.
    fn status(&self) -> StepStatus {
        StepStatus {
            name: self.name.clone(),
            image: self.image.clone(),
            exec: self.exec.clone(),
            execution_error: self.error.to_string(),
            exit_code: 1,
            ..StepStatus::default()
        }
    }
}

/// kpt's klog warnings from making a step (a `tag:` used as written), as
/// klog writes them on stderr.
fn print_warnings(maker: &mut Maker<'_>, stderr: &mut (dyn Write + Send)) {
    for warning in maker.stderr_warnings.drain(..) {
        let _ = writeln!(stderr, "{}", klog_warning("tag_resolution.go:91", &warning));
    }
}

/// klog's line: `W` and the date (`MMDD`), the time to microseconds, the
/// process id, the source line, then the text.
fn klog_warning(at: &str, text: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    format!(
        "W{month:02}{day:02} {:02}:{:02}:{:02}.{:06} {:>7} {at}] {text}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros(),
        std::process::id()
    )
}

/// kpt's `ValidatePipeline`: every `configPath` names a file of the
/// package itself (not one of a subpackage's, nor one `.krmignore`
/// hides). `Err`: the first as the command prints it, and all, joined, as
/// the status's message holds them.
fn missing_config_paths(kptfile: &Node, local: &BTreeSet<String>) -> Result<(), (String, String)> {
    let (mutators, validators) = pipeline(kptfile);
    let mut errors = Vec::new();
    for (kind, list) in [("mutator", &mutators), ("validator", &validators)] {
        for (i, f) in list.iter().enumerate() {
            let config = kyaml::value_of(kyaml::field(f, "configPath"));
            if config.is_empty() || local.contains(&package::clean_path(config)) {
                continue;
            }
            let name = kyaml::value_of(kyaml::field(f, "name"));
            let shown = if name.is_empty() {
                crate::tag::image_base_name(kyaml::value_of(kyaml::field(f, "image")))
            } else {
                name.to_owned()
            };
            let q = go_quote(config);
            errors.push((
                format!("pipeline.{kind}s[{i}].configPath"),
                q.clone(),
                format!(
                    "functionConfig resource for {kind} {} is missing from path {q}, this also occurs if {q} is part of a subpackage",
                    go_quote(&shown)
                ),
            ));
        }
    }
    let Some((field, value, reason)) = errors.first() else {
        return Ok(());
    };
    let text = |(f, v, r): &(String, String, String)| {
        format!("Kptfile is invalid:\nField: `{f}`\nValue: {v}\nReason: {r}\n")
    };
    Err((
        format!("Kptfile is invalid:\nField: `{field}`\nValue: {value}\nReason: {reason}\n "),
        errors.iter().map(text).collect::<Vec<_>>().join("\n"),
    ))
}
