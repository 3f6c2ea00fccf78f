//! `function-runner render`: the command line of
//! [`krm_kpt::render`], modelled on `kpt fn render`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use krm_kpt::eval;
use krm_kpt::render::{self, RenderOptions};

use crate::eval::{with_image_evaluator, EvalPodArgs};

/// `function-runner render`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  function-runner render DIR --allow-exec\n  function-runner render DIR --process-functions functions.yaml"
)]
pub(crate) struct RenderCommand {
    /// The package to render (it must have a Kptfile).
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Allow the pipeline's `exec:` functions to run.
    #[arg(long)]
    allow_exec: bool,
    /// Print at most four lines of results and of stderr.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    truncate_output: bool,
    /// The most bytes a function may write to stdout.
    #[arg(long, default_value_t = eval::DEFAULT_MAX_OUTPUT_BYTES, value_name = "BYTES")]
    max_output_bytes: usize,
    /// Write kpt's FunctionResultList of every function run to
    /// DIR/results.yaml (made if missing), whether the render passes or
    /// fails (also `--results_dir`, kpt's spelling).
    #[arg(long, value_name = "DIR", alias = "results_dir")]
    results_dir: Option<PathBuf>,
    /// kpt's image pull policy: Always, IfNotPresent or Never (any case).
    /// Checked as kpt checks it, and otherwise not acted on: the docker
    /// backend pulls an image only when the engine lacks it (IfNotPresent),
    /// and the process backend pulls nothing.
    #[arg(long, default_value = "IfNotPresent", value_name = "POLICY")]
    image_pull_policy: String,
    /// docker: image functions get the host's network (else none).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    allow_network: bool,
    /// Where the rendered resources go instead of back into DIR: `stdout`
    /// (a ResourceList), `unwrap` (YAML documents) or a new directory;
    /// the package is left as it is.
    #[arg(short = 'o', long, value_name = "stdout|unwrap|DIR")]
    output: Option<String>,
    #[command(flatten)]
    pods: EvalPodArgs,
}

/// Runs `render`; errors are printed the way kpt prints them.
pub(crate) async fn run(cmd: RenderCommand) -> anyhow::Result<ExitCode> {
    if let Err(err) = krm_fn::exec::become_subreaper() {
        tracing::debug!(%err, "not a child subreaper");
    }
    let RenderCommand {
        dir,
        allow_exec,
        truncate_output,
        max_output_bytes,
        results_dir,
        image_pull_policy,
        allow_network,
        output,
        mut pods,
    } = cmd;
    if allow_network {
        pods.function.container.network = true;
        pods.function.docker_only.push("--allow-network");
    }
    if let Err(err) = eval::ImagePullPolicy::parse(&image_pull_policy) {
        eprintln!("error: {err}");
        return Ok(ExitCode::from(1));
    }
    // `-o DIR` must not exist, as kpt checks first of all.
    let output = output.as_deref().map(eval::Output::parse);
    if let Some(eval::Output::Dir(out)) = &output {
        if out.exists() {
            eprintln!(
                "error: {}",
                eval::Error::OutputExists(out.display().to_string())
            );
            return Ok(ExitCode::from(1));
        }
    }
    // A Kptfile kpt refuses stops the run before a runner is started (a
    // results directory in the way first, as kpt checks it first).
    if let Some(results) = &results_dir {
        if let Err(err) = eval::prepare_results_dir(results) {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(1));
        }
    }
    if let Ok(root) = std::path::absolute(&dir) {
        if let Err(err) = render::check_kptfiles(&root) {
            eprintln!("{err}");
            return Ok(ExitCode::from(1));
        }
    }
    // Image functions need the evaluator chain; a pipeline of exec and
    // built-in functions only does not start it.
    let builtins = pods.builtins();
    let needs_images = kptfile_images(&dir).iter().any(|image| match image {
        Some(image) => !matches!(builtins.resolve(image, ""), Ok(Some(_))),
        None => true,
    });
    let code = with_image_evaluator(
        needs_images.then_some((pods, None)),
        max_output_bytes,
        |evaluator| async move {
            let mut stderr = std::io::stderr();
            let opts = RenderOptions {
                dir,
                allow_exec,
                evaluator,
                builtins: Some(std::sync::Arc::new(move |image: &str| {
                    builtins.resolve(image, "").map_err(|e| e.to_string())
                })),
                truncate_output,
                max_output_bytes,
                results_dir,
                output,
            };
            let mut stdout = std::io::stdout();
            match render::run(opts, &mut stdout, &mut stderr).await {
                Ok(code) => ExitCode::from(code),
                Err(err) => {
                    let _ = match err {
                        // kpt's message, as kpt prints it.
                        eval::Error::Kptfile(text) => writeln!(stderr, "{text}"),
                        err => writeln!(stderr, "error: {err}"),
                    };
                    ExitCode::from(1)
                }
            }
        },
    )
    .await;
    krm_fn::exec::kill_all_orphans();
    code
}

/// The `image:` of every pipeline function in the Kptfiles under `dir`
/// (`None` for a Kptfile that does not read: render names its error, but
/// it may still need the runner).
fn kptfile_images(dir: &std::path::Path) -> Vec<Option<String>> {
    // A Kptfile with a key twice is read here as kpt reads it (render then
    // refuses it in kpt's words, see `check_kptfiles`).
    use krm_yaml::package::{kyaml, read_documents_keeping_duplicates as read_documents};
    fn walk(dir: &std::path::Path, out: &mut Vec<Option<String>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&p, out);
                continue;
            }
            if e.file_name() != "Kptfile" {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let Some(doc) = read_documents(&text)
                .ok()
                .and_then(|d| d.into_iter().next())
            else {
                if text.contains("image:") {
                    out.push(None);
                }
                continue;
            };
            let Some(pipeline) = kyaml::field(kyaml::content(&doc.node), "pipeline") else {
                continue;
            };
            for list in ["mutators", "validators"] {
                for f in kyaml::field(pipeline, list).map_or(&[][..], |l| &l.content) {
                    let image = kyaml::value_of(kyaml::field(f, "image"));
                    if !image.is_empty() {
                        out.push(Some(image.to_owned()));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}
