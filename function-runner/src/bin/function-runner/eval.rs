//! `function-runner eval`: the command line of [`krm_kpt::eval`],
//! modelled on `kpt fn eval`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use function_runner::builtin::Builtins;
use function_runner::cache::CacheSettings;
use function_runner::evaluator::Evaluator;
use function_runner::runner::{BackendKind, Runner, RunnerOptions};
use krm_builtins::Builtin;
use krm_kpt::eval::{self, EvalOptions, FnConfig, Function, ImagePullPolicy, Output, Source};
use krm_kpt::image::kpt_image_name;
use krm_kpt::select::Selector;
use runner_core::config::DEFAULT_IMAGE_PREFIX;
use runner_docker::{choose_tools, ContainerOptions, Docker, DockerSettings, StorageMount, Tools};

/// Arguments of `function-runner eval`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  function-runner eval DIR --exec ./my-fn -- key=value\n  function-runner eval - --exec \"./my-fn arg\" < resourcelist.yaml\n  function-runner eval DIR --image set-labels:v0.2 --results-dir /tmp/results -o stdout"
)]
pub struct EvalArgs {
    /// Package directory, or `-` to read a ResourceList (or YAML documents)
    /// from stdin and write to stdout.
    #[arg(value_name = "DIR|-", default_value = ".")]
    pub dir: String,
    /// Run this local command as the function (quoted if it has arguments).
    #[arg(long, value_name = "CMD", conflicts_with = "image")]
    pub exec: Option<String>,
    /// Run this image as the function (short names get the default prefix).
    #[arg(short = 'i', long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// File holding the function's `functionConfig`.
    #[arg(long, value_name = "FILE")]
    pub fn_config: Option<PathBuf>,
    /// Where the output goes: `stdout` (a ResourceList), `unwrap` (YAML
    /// documents) or a new directory. Default: back into DIR (stdout for `-`).
    #[arg(short = 'o', long, value_name = "stdout|unwrap|DIR")]
    pub output: Option<String>,
    /// Write the function's structured results to DIR/results.yaml
    /// (also `--results_dir`, kpt's spelling).
    #[arg(long, value_name = "DIR", alias = "results_dir")]
    pub results_dir: Option<PathBuf>,
    /// Print at most four lines of results and of stderr.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub truncate_output: bool,
    /// The most bytes the function may write to stdout.
    #[arg(long, default_value_t = eval::DEFAULT_MAX_OUTPUT_BYTES, value_name = "BYTES")]
    pub max_output_bytes: usize,
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// kpt's image pull policy: Always, IfNotPresent or Never (any case).
    /// Checked as kpt checks it, and otherwise not acted on: the docker
    /// backend pulls an image only when the engine lacks it (IfNotPresent),
    /// and the process backend pulls nothing.
    #[arg(long, default_value = "IfNotPresent", value_name = "POLICY")]
    pub image_pull_policy: String,
    // kpt's flags for the function's environment and container (#28).
    /// Set KEY in the function's environment, to VALUE or to this
    /// process's value (repeatable); exec, process and container functions
    /// alike.
    #[arg(short = 'e', long = "env", value_name = "KEY[=VALUE]")]
    pub env: Vec<String>,
    /// docker: mount into the function's container (repeatable):
    /// `type=bind|volume|tmpfs,src=SRC,dst=DST`, read-only unless `rw=true`.
    #[arg(long = "mount", value_name = "type=TYPE,src=SRC,dst=DST[,rw=true]")]
    pub mounts: Vec<String>,
    /// docker: the function's container gets the host's network (else none).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub network: bool,
    /// docker: the function runs as this process's uid:gid (else nobody).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub as_current_user: bool,
    /// After a run that passes, add the function (its image or command,
    /// arguments or `--fn-config`, `--match-*`/`--exclude-*`) to the
    /// package's Kptfile pipeline, as kpt does; needs `--type`.
    #[arg(short = 's', long)]
    pub save: bool,
    /// `mutator` or `validator`: the pipeline list `--save` adds to.
    #[arg(short = 't', long = "type", value_name = "mutator|validator")]
    pub fn_type: Option<String>,
    /// Function arguments `key=value` (a ConfigMap named `function-input`).
    #[arg(last = true, value_name = "KEY=VALUE")]
    pub fn_args: Vec<String>,
}

/// kpt's `--match-*` and `--exclude-*`: the function sees the resources
/// that match every `--match-*` given and none of the `--exclude-*` ones
/// (all of them when none is given); its output is merged back among the
/// others.
#[derive(Debug, Default, clap::Args)]
pub struct SelectionArgs {
    /// Select resources of this apiVersion (whole: `apps/v1`).
    #[arg(long, value_name = "API_VERSION")]
    pub match_api_version: Option<String>,
    /// Select resources of this kind.
    #[arg(long, value_name = "KIND")]
    pub match_kind: Option<String>,
    /// Select resources of this name.
    #[arg(long, value_name = "NAME")]
    pub match_name: Option<String>,
    /// Select resources of this namespace (`metadata.namespace` as written).
    #[arg(long, value_name = "NAMESPACE")]
    pub match_namespace: Option<String>,
    /// Select resources with this annotation (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub match_annotations: Vec<String>,
    /// Select resources with this label (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub match_labels: Vec<String>,
    /// Leave out resources of this apiVersion.
    #[arg(long, value_name = "API_VERSION")]
    pub exclude_api_version: Option<String>,
    /// Leave out resources of this kind.
    #[arg(long, value_name = "KIND")]
    pub exclude_kind: Option<String>,
    /// Leave out resources of this name.
    #[arg(long, value_name = "NAME")]
    pub exclude_name: Option<String>,
    /// Leave out resources of this namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub exclude_namespace: Option<String>,
    /// Leave out resources with this annotation (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub exclude_annotations: Vec<String>,
    /// Leave out resources with this label (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub exclude_labels: Vec<String>,
}

impl SelectionArgs {
    /// The selector and the exclusion.
    fn selectors(self) -> Result<(Selector, Selector), eval::Error> {
        let pairs =
            |flag: &str, v: &[String]| Selector::parse_pairs(flag, v).map_err(eval::Error::Input);
        let selector = Selector {
            api_version: self.match_api_version.unwrap_or_default(),
            kind: self.match_kind.unwrap_or_default(),
            name: self.match_name.unwrap_or_default(),
            namespace: self.match_namespace.unwrap_or_default(),
            labels: pairs("--match-labels", &self.match_labels)?,
            annotations: pairs("--match-annotations", &self.match_annotations)?,
        };
        let exclusion = Selector {
            api_version: self.exclude_api_version.unwrap_or_default(),
            kind: self.exclude_kind.unwrap_or_default(),
            name: self.exclude_name.unwrap_or_default(),
            namespace: self.exclude_namespace.unwrap_or_default(),
            labels: pairs("--exclude-labels", &self.exclude_labels)?,
            annotations: pairs("--exclude-annotations", &self.exclude_annotations)?,
        };
        Ok((selector, exclusion))
    }
}

/// Runs `eval`; errors are printed the way kpt prints them (`error: ...`)
/// and give exit code 1, like a failing function.
pub async fn run_args(
    args: EvalArgs,
    image_evaluator: Option<Arc<dyn Evaluator>>,
    builtin: Option<&'static Builtin>,
) -> anyhow::Result<ExitCode> {
    let mut stderr = std::io::stderr();
    match run_inner(args, image_evaluator, builtin, &mut stderr).await {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(err) => {
            let _ = writeln!(stderr, "error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

async fn run_inner(
    args: EvalArgs,
    image_evaluator: Option<Arc<dyn Evaluator>>,
    builtin: Option<&'static Builtin>,
    stderr: &mut (dyn Write + Send),
) -> Result<u8, eval::Error> {
    // Flags first, as kpt reads them.
    ImagePullPolicy::parse(&args.image_pull_policy)?;
    let (selector, exclusion) = args.selection.selectors()?;
    let function = match (args.exec, args.image) {
        (Some(cmd), _) => Function::Exec(cmd),
        (None, Some(image)) if builtin.is_some() => Function::Builtin {
            image: kpt_image_name(&image),
            builtin: builtin.ok_or(eval::Error::NoImageEvaluator)?,
        },
        (None, Some(image)) => {
            let evaluator = image_evaluator.ok_or(eval::Error::NoImageEvaluator)?;
            let image = runner_core::config::normalize_image_name(
                &image,
                runner_core::config::DEFAULT_IMAGE_PREFIX,
            );
            Function::Image { image, evaluator }
        }
        (None, None) => return Err(eval::Error::Input("must specify --image or --exec".into())),
    };
    let fn_config = match args.fn_config {
        Some(_) if !args.fn_args.is_empty() => return Err(eval::Error::ArgsWithFnConfig),
        Some(path) => FnConfig::File(path),
        None => FnConfig::Args(args.fn_args),
    };
    let source = if args.dir == "-" {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf)?;
        Source::Stdin(buf)
    } else {
        Source::Dir(PathBuf::from(&args.dir))
    };
    let opts = EvalOptions {
        output: args.output.as_deref().map(Output::parse),
        fn_config,
        results_dir: args.results_dir,
        truncate_output: args.truncate_output,
        max_output_bytes: args.max_output_bytes,
        selector,
        exclusion,
        env: eval::FunctionEnv::parse(&args.env)?.process_env(),
        ..EvalOptions::new(source, function)
    };
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
    let code = eval::run(opts, &mut stdout, stderr).await?;
    stdout.flush()?;
    Ok(code)
}

#[derive(Debug, clap::Args)]
pub(crate) struct EvalCommand {
    #[command(flatten)]
    args: EvalArgs,
    #[command(flatten)]
    pods: EvalPodArgs,
}

impl EvalCommand {
    /// The run's arguments (`--save` reads them).
    pub(crate) fn args(&self) -> &EvalArgs {
        &self.args
    }
}

/// How `eval --image` (and `render`'s `image:` functions) run the image:
/// through the same evaluator chain as `serve` (FunctionConfigs, then a
/// pod): a process pod when the function map covers the image, else a
/// Docker container when an engine answers.
#[derive(Debug, clap::Args)]
pub(crate) struct EvalPodArgs {
    /// Directory of FunctionConfig documents (binaryExecutor images run as
    /// local binaries).
    #[arg(long)]
    functions: Option<PathBuf>,
    /// process backend: image → entrypoint (directory or YAML map).
    #[arg(long)]
    process_functions: Option<PathBuf>,
    /// process backend: the wrapper-server binary (default: next to this one).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// Prefix for short image names.
    #[arg(long, default_value = DEFAULT_IMAGE_PREFIX)]
    default_image_prefix: String,
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
    /// Run the catalog's images of built-in functions (gcr.io/kpt-fn/NAME,
    /// ghcr.io/kptdev/krm-functions-catalog/NAME, bare NAME) as any image
    /// (in a container or pod); only FunctionConfig goExecutor entries then
    /// run built-in.
    #[arg(long)]
    pub(crate) no_default_builtins: bool,
    #[command(flatten)]
    pub(crate) starlark: crate::StarlarkArgs,
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
    /// eval's flags, checked as kpt and its `docker run` check them, in
    /// their words.
    fn from_eval(args: &EvalArgs) -> Result<Self, eval::Error> {
        let docker_only: Vec<&'static str> = [
            ("--mount", !args.mounts.is_empty()),
            ("--network", args.network),
            ("--as-current-user", args.as_current_user),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        if args.exec.is_some() && !docker_only.is_empty() {
            // kpt refuses `--env` with `--exec` too (its message names it);
            // here an exec function gets its environment.
            return Err(eval::Error::Input(
                "--mount, --as-current-user and --network can only be used with container functions"
                    .into(),
            ));
        }
        let env = eval::FunctionEnv::parse(&args.env)?;
        let mounts = args
            .mounts
            .iter()
            .map(|m| {
                let mount = StorageMount::parse(m);
                mount.check().map(|()| mount)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(eval::Error::Input)?;
        // kpt's `user.Current()`: the real ids, not the effective ones.
        let user = args.as_current_user.then(|| {
            format!(
                "{}:{}",
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw()
            )
        });
        Ok(FunctionPrivileges {
            env: env.process_env(),
            container: ContainerOptions {
                env: env.container_env(),
                mounts,
                network: args.network,
                user,
            },
            docker_only,
        })
    }

    /// Said when the function runs other than in a container.
    fn not_applied(&self) -> Option<String> {
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
            tools_dir: runner_core::backend::binaries_dir(),
            tools: None,
            engine: None,
            socket_dir: self
                .docker_socket_dir
                .clone()
                .unwrap_or_else(DockerSettings::default_socket_dir),
            max_message_bytes: proto::DEFAULT_MAX_MESSAGE_BYTES,
            keep_warm: self.keep_warm,
            container: self.function.container.clone(),
        }
    }

    /// Which images run built-in: `--functions`' goExecutor entries and,
    /// unless `--no-default-builtins`, the catalog's.
    pub(crate) fn builtins(&self) -> Builtins {
        if let Err(e) = self.starlark.configure(None) {
            // Without the sandbox, a starlark program runs in this
            // process (limits but the depth off): say so.
            tracing::warn!("{e}");
        }
        Builtins::from_dir(
            self.functions.as_deref(),
            &self.default_image_prefix,
            !self.no_default_builtins,
        )
    }
}

/// `--keep-warm`: a Go duration of a second or more (less would have the
/// container exit before a later run could find it).
fn parse_keep_warm(s: &str) -> Result<Duration, String> {
    let d = crate::parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!(
            "{s:?} is under a second: the container would be gone before the next run"
        ));
    }
    Ok(d)
}

/// How long `eval` waits for a Docker engine to answer before it does
/// without one.
const DOCKER_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Which backend runs `image` (`None`: images not known up front, as in
/// `render`): a process pod if the function map has it, else a container
/// if a Docker engine answers, else a process pod (whose error then says
/// what is missing). Said on stderr.
async fn pick_backend(
    pods: &EvalPodArgs,
    image: Option<&str>,
) -> (BackendKind, String, Option<(Tools, Docker)>) {
    use function_runner::backend::process::FunctionMap;
    // A binaryExecutor FunctionConfig runs it before any pod is asked for.
    if let (Some(dir), Some(image)) = (&pods.functions, image) {
        let report = runner_core::config::load_dir_with_prefix(dir, &pods.default_image_prefix);
        let (index, _) =
            runner_core::config::ImageIndex::build(&report.configs, &pods.default_image_prefix);
        if let Some(found) = index.binary_for(image, "") {
            return (
                BackendKind::Process,
                format!(
                    "exec: {} (FunctionConfig {})",
                    found.path.display(),
                    found.config_name
                ),
                None,
            );
        }
    }
    let map = pods.process_functions.as_deref().map(FunctionMap::load);
    let covered = match (&map, image) {
        (Some(Ok(map)), Some(image)) => map.resolve(image).map(|argv| argv.join(" ")),
        // A whole pipeline with a map: the map serves it.
        (Some(Ok(_)), None) => Some("the function map".into()),
        // A map that does not load: its error comes from the runner.
        (Some(Err(_)), _) => return (BackendKind::Process, String::new(), None),
        (None, _) => None,
    };
    if let Some(argv) = covered {
        return (BackendKind::Process, format!("process: {argv}"), None);
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
            (
                BackendKind::Docker,
                format!("docker: the image's container on the engine at {host}{kept}; {tools}"),
                Some((tools, docker)),
            )
        }
        Err(err) => (
            BackendKind::Process,
            format!("process ({})", krm_fn::error_chain(&err)),
            None,
        ),
    }
}

/// `function-runner eval`.
pub(crate) async fn run(cmd: EvalCommand) -> anyhow::Result<ExitCode> {
    // What the function leaves behind (a daemon in a session of its own)
    // comes to us and is killed when eval ends, not left running.
    if let Err(err) = krm_fn::exec::become_subreaper() {
        tracing::debug!(%err, "not a child subreaper");
    }
    let EvalCommand { args, mut pods } = cmd;
    // Checked before anything runs (kpt: before it runs `docker run`).
    pods.function = match FunctionPrivileges::from_eval(&args) {
        Ok(privileges) => privileges,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(1));
        }
    };
    // A built-in function needs no runner: nothing is started for it.
    if let Some(image) = args
        .exec
        .is_none()
        .then_some(args.image.as_deref())
        .flatten()
    {
        match pods.builtins().resolve(image, "") {
            Ok(Some(builtin)) => {
                if let Some(note) = pods.function.not_applied() {
                    eprintln!("[USING] {note}");
                }
                return run_args(args, None, Some(builtin)).await;
            }
            Ok(None) => {}
            Err(err) => {
                eprintln!("error: {err}");
                return Ok(ExitCode::from(1));
            }
        }
    }
    let image = args
        .image
        .as_deref()
        .map(|image| runner_core::config::normalize_image_name(image, &pods.default_image_prefix));
    let pods = args.image.is_some().then_some((pods, image));
    let max = args.max_output_bytes;
    let code = with_image_evaluator(pods, max, |evaluator| async move {
        run_args(args, evaluator, None).await
    })
    .await
    .and_then(|code| code);
    krm_fn::exec::kill_all_orphans();
    code
}

/// Runs `f` with the evaluator chain `serve` uses (FunctionConfigs, then a
/// pod of the backend [`pick_backend`] picks for the image, if known) when
/// `pods` is given, and shuts it down after.
pub(crate) async fn with_image_evaluator<F, Fut, T>(
    pods: Option<(EvalPodArgs, Option<String>)>,
    max_output_bytes: usize,
    f: F,
) -> anyhow::Result<T>
where
    F: FnOnce(Option<Arc<dyn Evaluator>>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let Some((pods, image)) = pods else {
        return Ok(f(None).await);
    };
    let (backend, said, engine) = pick_backend(&pods, image.as_deref()).await;
    if !said.is_empty() {
        eprintln!("[USING] {said}");
    }
    if pods.keep_warm.is_some() && backend != BackendKind::Docker {
        eprintln!("[USING] --keep-warm is for Docker containers: not kept");
    }
    if let (true, Some(note)) = (backend != BackendKind::Docker, pods.function.not_applied()) {
        eprintln!("[USING] {note}");
    }
    let (tools, engine) = engine.unzip();
    let docker = DockerSettings {
        tools,
        engine,
        max_message_bytes: max_output_bytes.max(proto::DEFAULT_MAX_MESSAGE_BYTES),
        ..pods.docker_settings()
    };
    let runner = Runner::start(RunnerOptions {
        functions: pods.functions,
        pod_cache_config: None,
        default_image_prefix: pods.default_image_prefix,
        cache: CacheSettings::default(),
        warm_up: false,
        max_message_bytes: max_output_bytes.max(proto::DEFAULT_MAX_MESSAGE_BYTES),
        max_grpc_retries: 2,
        backend,
        // One call per function, about: a binaryExecutor's waiting
        // processes would only be started to be killed at the end.
        prespawn: None,
        docker: Some(docker),
        function_env: pods.function.env,
        wrapper_server: pods.wrapper_server.unwrap_or_else(
            function_runner::backend::process::ProcessBackend::default_wrapper_path,
        ),
        process_functions: pods.process_functions,
        kube: None,
        registries: Default::default(),
        cluster_configs: None,
        default_builtins: !pods.no_default_builtins,
    })
    .await?;
    let out = f(Some(runner.evaluator.clone())).await;
    runner.shutdown(Duration::from_secs(10)).await;
    Ok(out)
}
