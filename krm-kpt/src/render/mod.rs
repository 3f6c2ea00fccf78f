//! `function-runner render`: a package's Kptfile pipelines, the way
//! `kpt fn render` runs them: each package's subpackages first (depth
//! first, in directory order), then its own mutators on its resources and
//! its subpackages' rendered ones, then its validators (on a copy: what a
//! validator prints is not kept). The package is read once, every function
//! is applied in order to the one set of resources (the package model
//! `eval` uses: comments and field order restored after each function, as
//! kpt restores them), and it is written once, at the end, only if every
//! function passed.
//!
//! Functions: `exec:` (with `--allow-exec`, as kpt asks) runs the command;
//! `image:` goes to the evaluator `eval --image` uses (FunctionConfigs, or
//! `--process-functions` mappings). `configPath` and `configMap` give the
//! function config. `selectors` and `exclude` narrow the resources a step
//! sees, as kpt's do ([`crate::select`]: the step runs on the selection and
//! its output is merged back; `[RUNNING]` then says `on N resource(s)`).
//! `results_dir` gets kpt's `results.yaml`: every function run, in order,
//! written whether the render passed or failed. With `output` (kpt's `-o`)
//! the rendered resources go to stdout (a ResourceList with kpt's path
//! annotations, or unwrapped) or to a new directory, and the package is
//! left as it is.

//! The module's parts: [`Plan`] (the checks and the package tree, before
//! anything runs; `plan`), the steps of a Kptfile's pipeline (`step`), and
//! where the rendered resources go (`output`).

mod options;
mod output;
mod plan;
mod step;

pub use options::{BuiltinFor, Images, RenderOptions};
pub use plan::Plan;

use std::io::Write;
use std::path::Path;

use crate::eval::{self, Error, FnRecord, StepFunction, StepReport};
use crate::select;
use krm_yaml::package::{self, annotations as ann, go_quote, kyaml, Progress};
use krm_yaml::Node;

use output::{join, output_text, write_back};
use plan::Package;
use step::{config_map, pipeline, Step, StepConfig};

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
        let name = self.name();
        let Plan {
            opts,
            root,
            package,
        } = self;
        let mut state = State {
            opts: &opts,
            images: &images,
            files_read: Vec::new(),
            functions: 0,
            packages: 0,
            records: Vec::new(),
        };
        let resources = match state.hydrate(&package, &name, "", stderr).await {
            Ok(r) => r,
            Err(failed) => {
                // kpt saves the results before it reports the failure.
                state.save_results(stderr)?;
                return match failed {
                    Failed::Function => Ok(1),
                    Failed::Error(e) => Err(e),
                };
            }
        };
        match &opts.output {
            None | Some(eval::Output::InPlace) => {
                write_back(&root, resources, &state.files_read, stderr)?;
                writeln!(
                    stderr,
                    "Successfully executed {} function(s) in {} package(s).",
                    state.functions, state.packages
                )?;
                state.save_results(stderr)?;
            }
            // kpt saves the results before it writes the output.
            Some(output) => {
                let text = output_text(&root, resources)?;
                state.save_results(stderr)?;
                eval::write_output_text(&text, output, stdout, stderr)?;
            }
        }
        Ok(0)
    }
}

enum Failed {
    /// A function failed; its block is printed.
    Function,
    Error(Error),
}

impl<E: Into<Error>> From<E> for Failed {
    fn from(e: E) -> Failed {
        Failed::Error(e.into())
    }
}

struct State<'o> {
    opts: &'o RenderOptions,
    images: &'o Images,
    /// Files read, relative to the root.
    files_read: Vec<String>,
    functions: usize,
    packages: usize,
    /// What the results file records, in the order the functions ran.
    records: Vec<FnRecord>,
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

    /// kpt's `hydrate`: the package's rendered resources.
    fn hydrate<'a>(
        &'a mut self,
        package: &'a Package,
        name: &'a str,
        rel: &'a str,
        stderr: &'a mut (dyn Write + Send),
    ) -> futures::future::BoxFuture<'a, Result<Vec<Node>, Failed>> {
        Box::pin(async move {
            let dir = &package.dir;
            let files = package::read_local_files(dir, &mut Progress::new(None))?;
            let pkg_path = dir.display().to_string();
            let mut local = Vec::new();
            let mut kptfile = None;
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
                    local.push(node);
                }
                self.files_read.push(join(rel, &file.path));
            }
            let Some(kptfile) = kptfile else {
                return Err(Error::Input(format!("{name}: the Kptfile holds no resource")).into());
            };
            let mut input = Vec::new();
            for (sub, sub_package) in &package.subpackages {
                let sub_name = format!("{name}/{sub}");
                let sub_rel = join(rel, sub);
                let rendered = self
                    .hydrate(sub_package, &sub_name, &sub_rel, stderr)
                    .await?;
                input.extend(rendered);
            }
            input.extend(local);
            self.packages += 1;
            writeln!(stderr, "Package {}: ", go_quote(name))?;
            let (mutators, validators) = pipeline(&kptfile, self.opts.allow_exec, self.images)?;
            let any = !mutators.is_empty() || !validators.is_empty();
            // kpt checks that a package without functions holds resources
            // only; a function checks what it is given (a step that
            // selects, only the selection).
            for item in input.iter().filter(|_| !any) {
                if let Some(problem) = eval::krm_problem(&kyaml::meta(item)) {
                    let path = kyaml::annotation(item, ann::PATH).unwrap_or_default();
                    return Err(Error::InputNotKrm(format!("{path}: {problem}")).into());
                }
            }
            for step in &mutators {
                input = self.run_step(step, input, dir, false, stderr).await?;
            }
            for step in &validators {
                self.run_step(step, input.clone(), dir, true, stderr)
                    .await?;
            }
            if any {
                writeln!(stderr)?;
            }
            Ok(input)
        })
    }

    /// One function on the resources.
    async fn run_step(
        &mut self,
        step: &Step,
        input: Vec<Node>,
        dir: &Path,
        validator: bool,
        stderr: &mut (dyn Write + Send),
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
        self.functions += 1;
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
            ..StepReport::default()
        };
        let function = StepFunction {
            function: &step.function,
            name: &step.name,
            fn_config,
            max_output_bytes: self.opts.max_output_bytes,
            truncate: self.opts.truncate_output,
        };
        let applied = eval::apply(function, sent, &mut report, stderr).await;
        if let Some(o) = report.outcome {
            self.records.push(FnRecord {
                key: step.key,
                name: step.name.clone(),
                stderr: o.stderr,
                exit_code: o.exit_code,
                results: o.results,
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
