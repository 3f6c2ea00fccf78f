//! How `eval --image` and `render`'s `image:` functions run: built in
//! where the FunctionConfigs and defaults say so, else through the runner
//! `serve` composes (FunctionConfigs, then a pod), over the backend that can
//! run the image: a process pod when the function map covers it, else a
//! Docker container when an engine answers. The FunctionConfigs are read
//! once, and decide all three.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use function_runner::backend::process::{FunctionMap, FunctionMapError};
use function_runner::builtin::Builtins;
use function_runner::runner::{Functions, Runner, RunnerSettings};
use krm_builtins::Builtin;
use krm_fn::evaluator::{EvalError, Evaluator};
use krm_kpt::render::BuiltinFor;
use runner_core::config::FunctionConfigs;
use runner_docker::{choose_tools, ContainerOptions, Docker, DockerSettings, Tools};

use crate::backends;

/// How `eval --image` (and `render`'s `image:` functions) run the image:
/// through the same evaluator chain as `serve` (FunctionConfigs, then a
/// pod): a process pod when the function map covers the image, else a
/// Docker container when an engine answers.
#[derive(Debug, clap::Args)]
pub(crate) struct EvalPodArgs {
    /// Directory of FunctionConfig documents (binaryExecutor images run as
    /// local binaries).
    #[arg(long)]
    pub(crate) functions: Option<PathBuf>,
    /// process backend: image → entrypoint (directory or YAML map).
    #[arg(long)]
    process_functions: Option<PathBuf>,
    /// process backend: the wrapper-server binary (default: next to this one).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// The prefix used when converting from short path to the full URL
    /// (defaults to $KPT_IMAGE_PREFIX if set; also --default-image-prefix).
    #[arg(long = "image-prefix", alias = "default-image-prefix", default_value_t = krm_kpt::image::default_image_prefix(), value_name = "PREFIX")]
    pub(crate) image_prefix: String,
    /// docker: leave the container running after this run, for later runs
    /// to reuse; it exits once unused this long (Go duration). Off by
    /// default.
    #[arg(long, value_name = "DURATION", value_parser = parse_keep_warm)]
    keep_warm: Option<Duration>,
    /// docker: the init image that installs wrapper-server into function
    /// containers (default: wrapper-server:dev if the engine has it, else
    /// the static wrapper-server and health-probe beside this program,
    /// mounted read-only).
    #[arg(long, env = "WRAPPER_SERVER_IMAGE")]
    wrapper_server_image: Option<String>,
    /// docker: the host directory of the containers' sockets.
    #[arg(long, value_name = "DIR")]
    docker_socket_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) builtins: crate::flags::BuiltinsArgs,
    #[command(flatten)]
    pub(crate) starlark: crate::flags::StarlarkArgs,
    /// Not a flag: set by the command from its own.
    #[arg(skip)]
    pub(crate) function: FunctionPrivileges,
}

/// What a command asks for the functions it runs beyond their image:
/// eval's `-e`, `--mount`, `--network` and `--as-current-user`, render's
/// `--allow-network`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FunctionPrivileges {
    /// Added to the environment of functions run as local processes.
    pub(crate) env: Vec<(String, String)>,
    /// The docker backend's container options.
    pub(crate) container: ContainerOptions,
    /// The flags given that only a container applies, named in the note
    /// when the function runs otherwise.
    pub(crate) docker_only: Vec<&'static str>,
}

impl FunctionPrivileges {
    /// Said when the function runs other than in a container.
    pub(crate) fn not_applied(&self) -> Option<String> {
        let flags = match self.docker_only.as_slice() {
            [] => return None,
            [flag] => return Some(format!("{flag} is for Docker containers: not applied")),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        };
        Some(format!("{flags} are for Docker containers: not applied"))
    }
}

impl EvalPodArgs {
    /// The docker backend's settings these flags make.
    fn docker_settings(&self) -> DockerSettings {
        DockerSettings {
            wrapper_image: self.wrapper_server_image.clone().filter(|i| !i.is_empty()),
            socket_dir: self
                .docker_socket_dir
                .clone()
                .unwrap_or_else(DockerSettings::default_socket_dir),
            keep_warm: self.keep_warm,
            container: self.function.container.clone(),
            ..DockerSettings::default()
        }
    }
}

/// What the FunctionConfigs decide before anything is started: which
/// images run built in, and which backend runs the others.
pub(crate) struct ImageFunctions {
    pods: EvalPodArgs,
    configs: FunctionConfigs,
    builtins: Builtins,
}

impl ImageFunctions {
    /// Reads `--functions` once. Also sets up the `starlark` built-in's
    /// sandbox.
    pub(crate) fn load(pods: EvalPodArgs) -> anyhow::Result<Self> {
        if let Err(e) = pods.starlark.configure(None) {
            // Without the sandbox, a starlark program runs in this
            // process (limits but the depth off): say so.
            tracing::warn!("{e}");
        }
        let configs = FunctionConfigs::load(pods.functions.as_deref(), None, &pods.image_prefix)?;
        // `--functions`' goExecutor entries and the catalog's images that
        // `--builtins` names.
        let builtins = Builtins::new(configs.fixed(), pods.builtins.mode());
        Ok(ImageFunctions {
            pods,
            configs,
            builtins,
        })
    }

    /// The built-in function that runs `image`, if one does.
    pub(crate) fn builtin(&self, image: &str) -> Result<Option<&'static Builtin>, EvalError> {
        self.builtins.resolve(image, "")
    }

    /// [`ImageFunctions::builtin`], as `render` asks it.
    pub(crate) fn builtin_for(&self) -> BuiltinFor {
        let builtins = self.builtins.clone();
        Arc::new(move |image: &str| builtins.resolve(image, "").map_err(|e| e.to_string()))
    }

    /// Notes on what the command's flags do not apply to a function run
    /// built in.
    pub(crate) fn note_builtin(&self) {
        if let Some(note) = self.pods.function.not_applied() {
            eprintln!("[USING] {note}");
        }
    }

    /// The image as the runner is asked for it (short names under
    /// `--image-prefix`).
    pub(crate) fn full_name(&self, image: &str) -> String {
        krm_kpt::image::resolve_to_image(image, &self.pods.image_prefix)
    }

    /// Runs `f` with the evaluator chain `serve` uses (FunctionConfigs, then
    /// a pod of the backend [`pick_backend`] picks for `image`, if known:
    /// `None` for a whole pipeline), and shuts it down after.
    pub(crate) async fn with_runner<F, Fut, T>(
        self,
        image: Option<&str>,
        max_output_bytes: usize,
        f: F,
    ) -> anyhow::Result<T>
    where
        F: FnOnce(Arc<dyn Evaluator>) -> Fut,
        Fut: Future<Output = T>,
    {
        let ImageFunctions { pods, configs, .. } = self;
        let (picked, said) = pick_backend(&pods, &configs, image).await;
        if !said.is_empty() {
            eprintln!("[USING] {said}");
        }
        let in_containers = matches!(picked, Picked::Docker(..));
        if pods.keep_warm.is_some() && !in_containers {
            eprintln!("[USING] --keep-warm is for Docker containers: not kept");
        }
        if let (false, Some(note)) = (in_containers, pods.function.not_applied()) {
            eprintln!("[USING] {note}");
        }
        let max_message_bytes = max_output_bytes.max(proto::DEFAULT_MAX_MESSAGE_BYTES);
        let backend = match picked {
            Picked::Docker(tools, engine) => {
                let settings = DockerSettings {
                    tools: Some(tools),
                    max_message_bytes,
                    ..pods.docker_settings()
                };
                backends::docker(Some(engine), settings).await?
            }
            Picked::Process(map) => {
                let map = map.transpose().context("--process-functions")?;
                backends::process(
                    pods.wrapper_server.clone(),
                    map.unwrap_or(FunctionMap::Unset),
                    max_message_bytes,
                    pods.function.env.clone(),
                )
            }
        };
        let settings = RunnerSettings {
            max_message_bytes,
            // One call per function, about: a binaryExecutor's waiting
            // processes would only be started to be killed at the end.
            prespawn: None,
            function_env: pods.function.env.clone(),
            builtins: pods.builtins.mode(),
            ..RunnerSettings::default()
        };
        let runner = Runner::new(Functions::fixed(&configs), backend, settings).await;
        let out = f(runner.evaluator.clone()).await;
        runner.shutdown(Duration::from_secs(10)).await;
        Ok(out)
    }
}

/// `--keep-warm`: a Go duration of a second or more (less would have the
/// container exit before a later run could find it).
fn parse_keep_warm(s: &str) -> Result<Duration, String> {
    let d = crate::flags::parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!(
            "{s:?} is under a second: the container would be gone before the next run"
        ));
    }
    Ok(d)
}

/// How long `eval` waits for a Docker engine to answer before it does
/// without one.
/// How long `eval` waits for a Docker engine to answer before it does
/// without one.
const DOCKER_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The backend [`pick_backend`] picked, with what it learned on the way.
enum Picked {
    /// Process pods, with the function map if one was given (or why it
    /// does not load: the backend says it).
    Process(Option<Result<FunctionMap, FunctionMapError>>),
    /// Containers on this engine, with these tools.
    Docker(Tools, Docker),
}

/// Which backend runs `image` (`None`: images not known up front, as in
/// `render`): a process pod if a binaryExecutor FunctionConfig or the
/// function map has it, else a container if a Docker engine answers, else a
/// process pod (whose error then says what is missing). What it says goes
/// on stderr.
async fn pick_backend(
    pods: &EvalPodArgs,
    configs: &FunctionConfigs,
    image: Option<&str>,
) -> (Picked, String) {
    let map = pods.process_functions.as_deref().map(FunctionMap::load);
    // A binaryExecutor FunctionConfig runs it before any pod is asked for.
    if let Some(found) = image.and_then(|image| configs.index.binary_for(image, "")) {
        let said = format!(
            "exec: {} (FunctionConfig {})",
            found.path.display(),
            found.config_name
        );
        return (Picked::Process(map), said);
    }
    let covered = match (&map, image) {
        (Some(Ok(map)), Some(image)) => map.resolve(image).map(|argv| argv.join(" ")),
        // A whole pipeline with a map: the map serves it.
        (Some(Ok(_)), None) => Some("the function map".into()),
        // A map that does not load: the backend says why.
        (Some(Err(_)), _) => return (Picked::Process(map), String::new()),
        (None, _) => None,
    };
    if let Some(argv) = covered {
        return (Picked::Process(map), format!("process: {argv}"));
    }
    match runner_docker::connect(DOCKER_PROBE_TIMEOUT).await {
        Ok(docker) => {
            // The engine by its address: its version would cost a `/version`
            // request, the slowest dockerd answers (see `docker::connect`).
            let host = runner_docker::engine_host();
            let kept = match pods.keep_warm {
                Some(d) => format!(", kept warm for {d:?}"),
                None => String::new(),
            };
            let tools = match tokio::time::timeout(
                DOCKER_PROBE_TIMEOUT,
                choose_tools(&docker, &pods.docker_settings()),
            )
            .await
            {
                Ok(tools) => tools,
                Err(_) => Tools::Missing {
                    image: runner_docker::DEFAULT_WRAPPER_IMAGE.into(),
                    host: format!("the engine did not answer within {DOCKER_PROBE_TIMEOUT:?}"),
                },
            };
            let said =
                format!("docker: the image's container on the engine at {host}{kept}; {tools}");
            (Picked::Docker(tools, docker), said)
        }
        Err(err) => (
            Picked::Process(map),
            format!("process ({})", krm_fn::error_chain(&err)),
        ),
    }
}
