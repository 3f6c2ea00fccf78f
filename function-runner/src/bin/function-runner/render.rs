//! `function-runner render`: the command line of
//! [`krm_kpt::render`], modelled on `kpt fn render`.

use std::io::Write;
use std::sync::Arc;

use futures::future::BoxFuture;
use krm_kpt::tag::TagLister;
use std::path::PathBuf;
use std::process::ExitCode;

use krm_kpt::eval;
use krm_kpt::render::{Images, Plan, RenderOptions};

use crate::pods::{EvalPodArgs, ImageFunctions};

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
    /// Accepted as kpt takes it, and without effect: kpt v1.0.0-beta.67
    /// prints every result and stderr line, on one line each.
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
        truncate_output: _,
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
    let opts = RenderOptions {
        dir,
        allow_exec,
        max_output_bytes,
        results_dir,
        output: output.as_deref().map(eval::Output::parse),
        image_prefix: pods.image_prefix.clone(),
    };
    // kpt's checks and every Kptfile, before a runner is started: a package
    // kpt refuses changes nothing.
    let plan = match Plan::new(opts) {
        Ok(plan) => plan,
        Err(err) => {
            eprintln!("{}", err.kpt_text());
            return Ok(ExitCode::from(1));
        }
    };
    // Image functions need the evaluator chain; a pipeline of exec and
    // built-in functions only does not start it.
    let functions = match ImageFunctions::load(pods) {
        Ok(functions) => functions,
        Err(err) => {
            eprintln!("error: {}", krm_fn::error_chain(err.as_ref()));
            return Ok(ExitCode::from(1));
        }
    };
    let needs_images = plan.images().iter().any(|image| match image {
        Some(image) => !matches!(functions.builtin(image), Ok(Some(_))),
        None => true,
    });
    let render = |images: Images| async move {
        let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
        match plan.run(images, &mut stdout, &mut stderr).await {
            Ok(code) => ExitCode::from(code),
            Err(err) => {
                let _ = writeln!(stderr, "{}", err.kpt_text());
                ExitCode::from(1)
            }
        }
    };
    let builtin_for = Some(functions.builtin_for());
    // kpt lists a `tag:` constraint's candidates from the local engine's
    // images, then the registry's.
    let tag_listers = tag_listers();
    let code = if needs_images {
        functions
            .with_runner(None, max_output_bytes, |evaluator| {
                render(Images {
                    evaluator: Some(evaluator),
                    builtin_for,
                    tag_listers,
                })
            })
            .await
    } else {
        Ok(render(Images {
            evaluator: None,
            builtin_for,
            tag_listers,
        })
        .await)
    };
    krm_fn::exec::kill_all_orphans();
    code
}

/// kpt's tag listers, in its order: the local engine's images (only when
/// `KRM_FN_RUNTIME` names a runtime kpt knows, as in kpt; this one asks
/// the engine's API, which Docker, and Podman's compatible socket, serve),
/// then the registry's tag list. Both are made when a constraint first
/// asks: a render without one pays nothing for them (the registry client
/// loads the system's CA roots).
fn tag_listers() -> Vec<Arc<dyn TagLister>> {
    let mut listers: Vec<Arc<dyn TagLister>> = Vec::new();
    let runtime = std::env::var("KRM_FN_RUNTIME").unwrap_or_default();
    if matches!(
        runtime.to_ascii_lowercase().as_str(),
        "" | "docker" | "podman" | "nerdctl"
    ) {
        listers.push(Arc::new(crate::tags::LocalLister::new()));
    }
    listers.push(Arc::new(LazyRegistry(std::sync::OnceLock::new())));
    listers
}

/// The registry lister, made at its first listing.
struct LazyRegistry(std::sync::OnceLock<Result<crate::tags::RegistryLister, String>>);

impl TagLister for LazyRegistry {
    fn name(&self) -> String {
        "regclient".into()
    }

    fn list<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Result<Vec<String>, String>> {
        match self.0.get_or_init(crate::tags::RegistryLister::new) {
            Ok(registry) => registry.list(image),
            Err(err) => Box::pin(std::future::ready(Err(err.clone()))),
        }
    }
}
