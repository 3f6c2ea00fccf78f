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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::eval::{self, Error, FnRecord, Function, StepReport};
use crate::image::{kpt_image_name, with_prefix, CATALOG_IMAGE_PREFIX};
use crate::select::{self, Selector};
use krm_fn::evaluator::Evaluator;
use krm_yaml::package::{
    self, annotations as ann, go_quote, kyaml, PackageError, Placed, Progress,
};
use krm_yaml::{Kind, Node};

/// Everything `render` needs.
pub struct RenderOptions {
    /// The root package (it must have a Kptfile).
    pub dir: PathBuf,
    /// Whether `exec:` functions may run (kpt's `--allow-exec`).
    pub allow_exec: bool,
    /// Runs `image:` functions.
    pub evaluator: Option<Arc<dyn Evaluator>>,
    /// Which `image:` functions are built in (run on the package's tree,
    /// without the evaluator); `None`: none are.
    pub builtins: Option<BuiltinFor>,
    /// kpt's `--truncate-output`.
    pub truncate_output: bool,
    /// The most stdout a function may write.
    pub max_output_bytes: usize,
    /// Where kpt's `results.yaml` goes (`--results-dir`).
    pub results_dir: Option<PathBuf>,
    /// kpt's `-o`: the rendered resources to stdout (a ResourceList, or
    /// unwrapped) or to a new directory, the package left as it is;
    /// `None` writes the package.
    pub output: Option<eval::Output>,
}

/// The built-in function that runs an image, if one does (the runner's
/// FunctionConfigs and defaults decide); an error says why the image can
/// run neither built in nor otherwise.
pub type BuiltinFor =
    Arc<dyn Fn(&str) -> Result<Option<&'static krm_builtins::Builtin>, String> + Send + Sync>;

/// A package's pipeline step.
struct Step {
    function: Function,
    name: String,
    /// `exec` or `image`, as the results file names it.
    key: &'static str,
    fn_config: StepConfig,
    selectors: Vec<Selector>,
    exclusions: Vec<Selector>,
}

enum StepConfig {
    None,
    /// `configPath`, relative to the package.
    Path(String),
    /// `configMap`'s data.
    Map(Vec<(String, String)>),
}

/// Renders the package; kpt's lines go to `stderr`, `-o stdout|unwrap`'s
/// resources to `stdout`. Returns the exit code (1 when a function failed;
/// its `[FAIL]` block is printed); an error is to be printed as
/// `error: {err}`.
pub async fn run(
    opts: RenderOptions,
    stdout: &mut (dyn Write + Send),
    stderr: &mut (dyn Write + Send),
) -> Result<u8, Error> {
    // kpt refuses an `-o` directory that exists first of all, then makes
    // the results directory.
    if let Some(eval::Output::Dir(dir)) = &opts.output {
        if dir.exists() {
            return Err(Error::OutputExists(dir.display().to_string()));
        }
    }
    if let Some(dir) = &opts.results_dir {
        eval::prepare_results_dir(dir)?;
    }
    let root = std::path::absolute(&opts.dir).map_err(Error::Write)?;
    if !root.join("Kptfile").is_file() {
        return Err(Error::Input(format!(
            "{} is not a package: it has no Kptfile",
            go_quote(&opts.dir.display().to_string())
        )));
    }
    // kpt refuses a Kptfile it cannot decode strictly, or whose pipeline
    // its `Validate` refuses (a function with both or neither of image and
    // exec, a bad image name or configPath): every one is checked before
    // any function runs, so a bad one changes nothing.
    check_kptfiles(&root)?;
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".".into());
    let mut state = State {
        opts: &opts,
        files_read: Vec::new(),
        functions: 0,
        packages: 0,
        records: Vec::new(),
    };
    let resources = match state.hydrate(&root, &name, "", stderr).await {
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

/// The rendered resources as kpt writes them for `-o` (its
/// `adjustRelPath`, then kyaml's `ByteWriter` keeping the reader's
/// annotations): each path made relative to the root package (a new
/// resource's default path first), in both path annotations, and the
/// package-path annotation removed.
fn output_text(root: &Path, resources: Vec<Node>) -> Result<String, Error> {
    let mut items = Vec::with_capacity(resources.len());
    for mut item in resources {
        let pkg = kyaml::annotation(&item, ann::PACKAGE_PATH)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.to_path_buf());
        let rel_pkg = match pkg.strip_prefix(root) {
            Ok(r) if !r.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
            _ => ".".to_owned(),
        };
        let path = kyaml::annotation(&item, ann::PATH)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_PATH))
            .map(str::to_owned)
            .unwrap_or_else(|| package::default_path(&kyaml::meta(&item)));
        // Go's `filepath.Join(subpackage, filepath.Clean(path))`.
        let rel = package::clean_path(&format!("{rel_pkg}/{path}"));
        for key in [ann::PATH, ann::LEGACY_PATH] {
            kyaml::set_annotation(&mut item, key, &rel)
                .map_err(|e| Error::BadOutput(e.to_string()))?;
        }
        kyaml::clear_annotation(&mut item, ann::PACKAGE_PATH);
        items.push(item);
    }
    Ok(eval::resource_list_text(&mut items))
}

/// [`crate::kptfile::check`] on the Kptfile of `dir` and of every
/// directory below it, depth first in name order (the order render takes
/// them). A Kptfile that does not parse is left to the package reader,
/// which names the error as kpt does; one with a key twice is read, as
/// kpt's check names each repeated key.
pub fn check_kptfiles(dir: &Path) -> Result<(), Error> {
    let kptfile = dir.join("Kptfile");
    if let Ok(text) = std::fs::read_to_string(&kptfile) {
        if let Some(doc) = package::read_documents_keeping_duplicates(&text)
            .ok()
            .and_then(|d| d.into_iter().next())
        {
            crate::kptfile::check(dir, &doc.node).map_err(Error::Kptfile)?;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut subdirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        check_kptfiles(&sub)?;
    }
    Ok(())
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
        dir: &'a Path,
        name: &'a str,
        rel: &'a str,
        stderr: &'a mut (dyn Write + Send),
    ) -> futures::future::BoxFuture<'a, Result<Vec<Node>, Failed>> {
        Box::pin(async move {
            let (files, subpackages) = package::read_local(dir, &mut Progress::new(None))?;
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
            for sub in subpackages {
                let sub_dir = dir.join(&sub);
                let sub_name = format!("{name}/{sub}");
                let sub_rel = join(rel, &sub);
                let rendered = self.hydrate(&sub_dir, &sub_name, &sub_rel, stderr).await?;
                input.extend(rendered);
            }
            input.extend(local);
            self.packages += 1;
            writeln!(stderr, "Package {}: ", go_quote(name))?;
            let (mutators, validators) = pipeline(&kptfile, self.opts)?;
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
                input = self.step(step, input, dir, false, stderr).await?;
            }
            for step in &validators {
                self.step(step, input.clone(), dir, true, stderr).await?;
            }
            if any {
                writeln!(stderr)?;
            }
            Ok(input)
        })
    }

    /// One function on the resources.
    async fn step(
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
        let applied = eval::apply(
            &step.function,
            &step.name,
            sent,
            fn_config,
            self.opts.max_output_bytes,
            self.opts.truncate_output,
            &mut report,
            stderr,
        )
        .await;
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

fn join(rel: &str, path: &str) -> String {
    if rel.is_empty() {
        path.to_owned()
    } else {
        format!("{rel}/{path}")
    }
}

/// A pipeline step's `configMap`, as kpt's `NewConfigMap` builds it: a
/// parsed ConfigMap skeleton whose `data: {}` (flow style, kept) takes the
/// entries, keys sorted, values tagged as strings.
fn config_map(data: &[(String, String)]) -> Result<Node, Error> {
    let skeleton = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n";
    let mut doc = krm_yaml::parse::parse(skeleton)
        .ok()
        .and_then(|d| d.into_iter().next())
        .ok_or_else(|| Error::Input("the function-input skeleton".into()))?;
    let mut sorted: Vec<&(String, String)> = data.iter().collect();
    sorted.sort();
    let mut map = Node::mapping(
        sorted
            .iter()
            .flat_map(|(k, v)| {
                [
                    Node {
                        kind: Kind::Scalar,
                        value: k.as_str().into(),
                        ..Node::default()
                    },
                    Node::string(v.as_str()),
                ]
            })
            .collect(),
    );
    map.tag = Default::default();
    let root = kyaml::content_mut(&mut doc);
    kyaml::set_field(root, "data", map).map_err(|e| Error::Input(e.to_string()))?;
    Ok(doc)
}

/// The Kptfile's mutators and validators.
fn pipeline(kptfile: &Node, opts: &RenderOptions) -> Result<(Vec<Step>, Vec<Step>), Error> {
    let Some(p) = kyaml::field(kptfile, "pipeline") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let steps = |key: &str| -> Result<Vec<Step>, Error> {
        let Some(list) = kyaml::field(p, key) else {
            return Ok(Vec::new());
        };
        if list.kind != Kind::Sequence {
            return Ok(Vec::new());
        }
        list.content.iter().map(|f| step(f, opts)).collect()
    };
    Ok((steps("mutators")?, steps("validators")?))
}

fn step(f: &Node, opts: &RenderOptions) -> Result<Step, Error> {
    let text = |k: &str| kyaml::value_of(kyaml::field(f, k)).to_owned();
    let (image, exec) = (text("image"), text("exec"));
    let selectors = |key: &str| -> Result<Vec<Selector>, Error> {
        let Some(list) = kyaml::field(f, key) else {
            return Ok(Vec::new());
        };
        let bad = |why: String| {
            Error::Input(format!(
                "{}: `{key}`: {why}",
                go_quote(if image.is_empty() { &exec } else { &image })
            ))
        };
        match list.kind {
            Kind::Sequence => list
                .content
                .iter()
                .map(|s| Selector::from_node(s).map_err(bad))
                .collect(),
            _ if list.tag == kyaml::NULL_TAG => Ok(Vec::new()),
            k => Err(bad(format!(
                "a list of selectors, not a {}",
                kyaml::kind_name(k)
            ))),
        }
    };
    let (selectors, exclusions) = (selectors("selectors")?, selectors("exclude")?);
    let key = if image.is_empty() { "exec" } else { "image" };
    let builtin = if image.is_empty() {
        None
    } else {
        builtin_for(&image, opts)?
    };
    let (function, name) = match (image.is_empty(), exec.is_empty()) {
        (false, _) if builtin.is_some() => {
            let name = kpt_image_name(&image);
            let builtin = builtin.ok_or(Error::NoImageEvaluator)?;
            (
                Function::Builtin {
                    image: name.clone(),
                    builtin,
                },
                name,
            )
        }
        (false, _) => {
            let evaluator = opts.evaluator.clone().ok_or(Error::NoImageEvaluator)?;
            let image = with_prefix(&image, CATALOG_IMAGE_PREFIX);
            (
                Function::Image {
                    image: image.clone(),
                    evaluator,
                },
                image,
            )
        }
        (true, false) => {
            if !opts.allow_exec {
                return Err(Error::Input(
                    "must run with `--allow-exec` option to allow running function binaries".into(),
                ));
            }
            (Function::Exec(exec.clone()), exec)
        }
        (true, true) => {
            return Err(Error::Input(
                "a pipeline function needs `image` or `exec`".into(),
            ))
        }
    };
    let fn_config =
        if let Some(path) = kyaml::field(f, "configPath").filter(|v| !v.value.is_empty()) {
            StepConfig::Path(path.value.to_string())
        } else if let Some(map) = kyaml::field(f, "configMap").filter(|m| m.kind == Kind::Mapping) {
            StepConfig::Map(
                map.content
                    .chunks_exact(2)
                    .map(|kv| (kv[0].value.to_string(), kv[1].value.to_string()))
                    .collect(),
            )
        } else {
            StepConfig::None
        };
    Ok(Step {
        function,
        name,
        key,
        fn_config,
        selectors,
        exclusions,
    })
}

/// The built-in function that runs `image`, if one does.
fn builtin_for(
    image: &str,
    opts: &RenderOptions,
) -> Result<Option<&'static krm_builtins::Builtin>, Error> {
    match &opts.builtins {
        Some(builtin_for) => builtin_for(image).map_err(Error::Evaluator),
        None => Ok(None),
    }
}

/// Writes the rendered resources back, each to its package's directory,
/// and deletes the files that held resources and hold none now.
fn write_back(
    root: &Path,
    resources: Vec<Node>,
    files_read: &[String],
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let mut placed = Vec::with_capacity(resources.len());
    for mut item in resources {
        let pkg = kyaml::annotation(&item, ann::PACKAGE_PATH)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.to_path_buf());
        let rel_pkg = pkg
            .strip_prefix(root)
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let path = kyaml::annotation(&item, ann::PATH)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_PATH))
            .map(str::to_owned)
            .unwrap_or_else(|| package::default_path(&kyaml::meta(&item)));
        let index = kyaml::annotation(&item, ann::INDEX)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_INDEX))
            .and_then(|i| i.trim().parse::<i64>().ok());
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        let rel = package::clean_path(&join(
            &rel_pkg.to_string_lossy(),
            path.trim_start_matches('/'),
        ));
        if rel == ".." || rel.starts_with("../") {
            return Err(PackageError::OutsidePackage(rel).into());
        }
        eval::clear_annotations(&mut item, |k| ann::is_kpt(k) || k == ann::PACKAGE_PATH);
        placed.push(Placed {
            path: rel,
            index,
            node: item,
            wide,
        });
    }
    let mut progress = Progress::new(Some(stderr));
    let (_, kept) = package::write_package(root, placed, &mut progress)?;
    package::delete_gone(root, files_read, &kept)?;
    Ok(())
}
