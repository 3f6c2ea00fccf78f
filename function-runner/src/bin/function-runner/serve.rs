//! `function-runner serve`: Porch's function runner.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use function_runner::cache::CacheSettings;
use function_runner::runner::{Functions, Runner, RunnerSettings, Runtimes};
use function_runner::server::{serve, RunnerService};
#[cfg(not(feature = "kube"))]
use function_runner::tag_resolution::RegistryTags;
use function_runner::tag_resolution::{TagResolver, TagSource};
use runner_core::backend::Backend;
use runner_core::config::{FunctionConfigs, DEFAULT_IMAGE_PREFIX};
use runner_docker::DockerSettings;
use tokio::signal::unix::{signal, SignalKind};

use crate::backends::{self, BackendKind};
use crate::flags::parse_duration;

/// After the drain, how long stopping the pods may take: with the default
/// `--shutdown-grace` within Kubernetes' default 30 s termination grace.
const POD_STOP_TIMEOUT: Duration = Duration::from_secs(8);

/// Flags are named as Porch's function runner's.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Port for EvaluateFunction and health.
    #[arg(long, default_value_t = 9445)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    host: IpAddr,
    /// Prometheus metrics port (0: off). Default: 9464 on --host, or where
    /// OTEL_METRICS_EXPORTER=prometheus and OTEL_EXPORTER_PROMETHEUS_HOST
    /// and _PORT say; off with OTEL_METRICS_EXPORTER=none.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Pod time to live after its last use (Go duration).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pod_ttl: Duration,
    /// Garbage collection interval (Go duration).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    scan_interval: Duration,
    /// How long a pod may take to become ready (Go duration).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pod_ready_timeout: Duration,
    /// Start a pod per FunctionConfig podExecutor at startup.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = crate::flags::parse_go_bool)]
    warm_up_pod_cache: bool,
    /// Most pods per function (FunctionConfig maxParallelExecutions overrides).
    #[arg(long, default_value_t = 1)]
    max_parallel_pods_per_function: usize,
    /// Waitlist length per pod before another pod starts
    /// (FunctionConfig preferredMaxQueueLength overrides).
    #[arg(long, default_value_t = 2)]
    max_waitlist_length: usize,
    /// Most pods of all functions together, starting ones included: past
    /// it, idle pods are stopped least recently used first; with none idle,
    /// a call that needs another pod gets RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = function_runner::cache::DEFAULT_MAX_PODS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_pods: usize,
    /// Maximum gRPC message size in bytes, both directions.
    #[arg(long, default_value_t = proto::DEFAULT_MAX_MESSAGE_BYTES)]
    max_request_body_size: usize,
    /// After SIGTERM: how long calls in flight may still finish (health
    /// answers NOT_SERVING meanwhile); then every connection is closed and
    /// the pods are stopped (Go duration).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// Directory of FunctionConfig documents (config.porch.kpt.dev/v1alpha1).
    #[arg(long)]
    functions: Option<PathBuf>,
    /// Porch's pod cache config: a YAML list of {name, timeToLive,
    /// maxWaitlistLength, maxParallelPodsPerFunction, resources}, one per
    /// function to keep (and warm) pods for.
    #[arg(long)]
    pod_cache_config: Option<PathBuf>,
    /// Prefix for short image names.
    #[arg(long, default_value = DEFAULT_IMAGE_PREFIX)]
    default_image_prefix: String,
    /// binaryExecutor functions: keep this many processes of each binary
    /// started and waiting for a call (FunctionConfig `prespawn`
    /// overrides; 0: spawn per call). Each call still gets a fresh process.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = krm_fn::prespawn::parse_size)]
    prespawn: usize,
    /// Retries of a call to a pod that broke off at the transport
    /// (UNAVAILABLE, CANCELLED; the pod is evicted only if its health check
    /// fails).
    #[arg(long, default_value_t = 2)]
    max_grpc_retries: usize,
    /// What creates pods (default: process; kube when started with
    /// Porch's command line where a cluster is configured).
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Porch's: the runtimes not to use, comma-separated: `exec`
    /// (binaryExecutor binaries), `pod` (pods of any backend). Built-in
    /// functions run either way.
    #[arg(long, value_delimiter = ',')]
    disable_runtimes: Vec<String>,
    /// Porch's: log verbosity as klog's levels (0–5): up to 2 `info`, 3
    /// and 4 `debug`, 5 `trace`. RUST_LOG, when set, wins.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub(crate) log_level: u8,
    /// Set when the command line is Porch's (the program named `server`, or
    /// flags with no command): the kube backend is then the default where a
    /// cluster is configured, and a missing --functions directory is only
    /// the absence of binaries, as to Porch's runner.
    #[arg(long, hide = true)]
    porch_command_line: bool,
    /// process backend: the wrapper-server binary (default: next to this one).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// process backend: image → entrypoint (a directory of executables named
    /// after images, or a YAML map; see docs/backends.md).
    #[arg(long)]
    process_functions: Option<PathBuf>,
    /// kube and docker backends: the image whose init container installs
    /// wrapper-server and grpc-health-probe into function pods (docker
    /// default: wrapper-server:dev, as ./build-images.sh tags it, if the
    /// engine has it, else the static binaries beside this one, mounted
    /// read-only).
    #[arg(long, env = "WRAPPER_SERVER_IMAGE")]
    wrapper_server_image: Option<String>,
    /// docker backend: the host directory of the function containers'
    /// sockets (private to this user; default: in the temporary directory).
    #[arg(long, value_name = "DIR")]
    docker_socket_dir: Option<PathBuf>,
    /// A request whose `tag` is a semver constraint (`~0.4`) runs the
    /// image's highest matching tag in its registry: how long a
    /// repository's listed tags are kept (Go duration; 0: list at every
    /// such call).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    tag_cache_ttl: Duration,
    /// Log format on stderr.
    #[arg(long, value_parser = ["text", "json"], default_value = "text")]
    pub(crate) log_format: String,
    #[command(flatten)]
    builtins: crate::flags::BuiltinsArgs,
    #[command(flatten)]
    starlark: crate::flags::StarlarkArgs,
    #[cfg(feature = "kube")]
    #[command(flatten)]
    kube: crate::kube::KubeArgs,
}

impl ServeArgs {
    /// `--backend`, else the kube backend for Porch's command line where a
    /// cluster is configured (in a pod, or with KUBECONFIG: Porch's server
    /// always runs its functions in pods), else the process backend.
    fn backend_kind(&self) -> BackendKind {
        if let Some(kind) = self.backend {
            return kind;
        }
        let in_cluster = ["KUBERNETES_SERVICE_HOST", "KUBECONFIG"]
            .iter()
            .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
        if cfg!(feature = "kube") && self.porch_command_line && in_cluster {
            BackendKind::Kube
        } else {
            BackendKind::Process
        }
    }

    /// `--disable-runtimes`; other names are ignored, as Porch's runner
    /// ignores them, and said.
    fn runtimes(&self) -> Runtimes {
        for other in self
            .disable_runtimes
            .iter()
            .filter(|r| !["exec", "pod", ""].contains(&r.as_str()))
        {
            tracing::warn!(runtime = %other, "--disable-runtimes: no such runtime (exec, pod): ignored");
        }
        let off = |name: &str| self.disable_runtimes.iter().any(|r| r == name);
        Runtimes {
            exec: !off("exec"),
            pod: !off("pod"),
        }
    }

    /// Where metrics are served: `--metrics-port`, else what the OTEL_*
    /// variables ask (Porch's Deployment sets OTEL_METRICS_EXPORTER=
    /// prometheus and OTEL_EXPORTER_PROMETHEUS_HOST/_PORT), else port 9464.
    async fn metrics_addr(&self, otel: &telemetry::Settings) -> anyhow::Result<Option<SocketAddr>> {
        if let Some(port) = self.metrics_port {
            return Ok((port != 0).then_some(SocketAddr::new(self.host, port)));
        }
        if let Some((host, port)) = otel.prometheus() {
            if let Ok(ip) = host.parse::<IpAddr>() {
                return Ok(Some(SocketAddr::new(ip, port)));
            }
            // A name (`localhost`, the pod's hostname): its first address.
            let found = tokio::net::lookup_host((host, port))
                .await
                .ok()
                .and_then(|mut addrs| addrs.next());
            return found.map(Some).with_context(|| {
                format!("OTEL_EXPORTER_PROMETHEUS_HOST={host:?}: no address for that name")
            });
        }
        if otel.metrics.is_some() {
            // OTEL_METRICS_EXPORTER is set and names no Prometheus endpoint.
            return Ok(None);
        }
        Ok(Some(SocketAddr::new(
            self.host,
            telemetry::env::PROMETHEUS_PORT,
        )))
    }

    /// The runner's own settings.
    fn runner_settings(&self) -> RunnerSettings {
        RunnerSettings {
            cache: CacheSettings {
                default_ttl: self.pod_ttl,
                scan_interval: self.scan_interval,
                ready_timeout: self.pod_ready_timeout,
                max_parallel_pods_per_function: self.max_parallel_pods_per_function,
                // Porch's runner reads 0 (or less) as its default, 2.
                max_waitlist_length: match self.max_waitlist_length {
                    0 if self.porch_command_line => 2,
                    n => n,
                },
                max_pods: self.max_pods,
            },
            warm_up: self.warm_up_pod_cache,
            max_message_bytes: self.max_request_body_size,
            max_grpc_retries: self.max_grpc_retries,
            prespawn: Some(self.prespawn),
            function_env: Vec::new(),
            builtins: self.builtins.mode(),
            runtimes: self.runtimes(),
            tag_resolver: Some(Arc::new(TagResolver::new(
                self.tag_source(),
                self.tag_cache_ttl,
                &self.default_image_prefix,
            ))),
            export_stats: None,
        }
    }

    /// Where request tag constraints are listed: the registries, with the
    /// credentials, CA and plain-HTTP registries of the registry flags
    /// (`--enable-private-registries`, `--registry-auth-secret-path`,
    /// `--enable-private-registries-tls`, `--insecure-registries`).
    fn tag_source(&self) -> Arc<dyn TagSource> {
        #[cfg(feature = "kube")]
        return Arc::new(self.kube.tag_source());
        #[cfg(not(feature = "kube"))]
        Arc::new(RegistryTags::anonymous())
    }

    /// The docker backend's settings.
    fn docker_settings(&self) -> DockerSettings {
        DockerSettings {
            wrapper_image: self
                .wrapper_server_image
                .clone()
                .filter(|image| !image.is_empty()),
            socket_dir: self
                .docker_socket_dir
                .clone()
                .unwrap_or_else(DockerSettings::default_socket_dir),
            max_message_bytes: self.max_request_body_size,
            // Porch's functions get no more than their FunctionConfig says.
            ..DockerSettings::default()
        }
    }

    /// The backend `--backend` names, and the FunctionConfigs it serves:
    /// with the kube backend, the cluster's join those read at start (the
    /// watch lives as long as the returned handle).
    async fn backend(
        &self,
        configs: &FunctionConfigs,
        function_env: &[(String, String)],
    ) -> anyhow::Result<(Arc<dyn Backend>, Functions, Option<ConfigWatch>)> {
        // Only the kube backend's pods are given it (the process backend's
        // wrappers inherit the runner's environment).
        #[cfg(not(feature = "kube"))]
        let _ = function_env;
        let fixed = || Functions::fixed(configs);
        Ok(match self.backend_kind() {
            BackendKind::Process => {
                let backend = backends::process(
                    self.wrapper_server.clone(),
                    backends::function_map(self.process_functions.as_deref())?,
                    self.max_request_body_size,
                    Vec::new(),
                );
                (backend, fixed(), None)
            }
            BackendKind::Docker => {
                let backend = backends::docker(None, self.docker_settings()).await?;
                (backend, fixed(), None)
            }
            #[cfg(feature = "kube")]
            BackendKind::Kube => {
                let shared = crate::kube::Shared {
                    pod_ttl: self.pod_ttl,
                    scan_interval: self.scan_interval,
                    max_message_bytes: self.max_request_body_size,
                    wrapper_image: self.wrapper_server_image.clone(),
                    functions_dir: self.functions.clone(),
                    default_prefix: self.default_image_prefix.clone(),
                    porch: self.porch_command_line,
                    function_env: function_env.to_vec(),
                };
                self.kube.backend(&shared, configs).await?
            }
            #[cfg(not(feature = "kube"))]
            BackendKind::Kube => anyhow::bail!(NO_KUBE),
        })
    }
}

/// The cluster's FunctionConfig watch, kept as long as the runner serves.
#[cfg(feature = "kube")]
type ConfigWatch = runner_kube::config_watch::ConfigWatch;
#[cfg(not(feature = "kube"))]
type ConfigWatch = std::convert::Infallible;

#[cfg(not(feature = "kube"))]
const NO_KUBE: &str =
    "--backend kube: this function-runner is built without the kube backend (cargo feature `kube`)";

/// How long the last metrics push at exit may take (see main's
/// `FLUSH_TIMEOUT`).
const METRICS_PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Serves until SIGTERM or SIGINT, then drains and stops every pod.
pub(crate) async fn run(args: ServeArgs, telemetry: &telemetry::Telemetry) -> anyhow::Result<()> {
    #[cfg(not(feature = "kube"))]
    if args.backend_kind() == BackendKind::Kube {
        anyhow::bail!(NO_KUBE);
    }
    args.starlark
        .configure(Some(args.max_request_body_size as u64))?;
    // To Porch's runner, --functions is only where relative binaryExecutor
    // paths point (its default, ./functions, need not exist).
    let functions_docs = match &args.functions {
        Some(dir) if args.porch_command_line && !dir.exists() => {
            tracing::info!(
                dir = %dir.display(),
                "--functions: no such directory, so no function binaries"
            );
            None
        }
        dir => dir.as_deref(),
    };
    let configs = FunctionConfigs::load(
        functions_docs,
        args.pod_cache_config.as_deref(),
        &args.default_image_prefix,
    )?;
    // Signals first, so a SIGTERM during startup still stops what started.
    let mut sigterm = signal(SignalKind::terminate()).context("watching SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("watching SIGINT")?;
    // What a process pod or a binaryExecutor function leaves behind comes to
    // the runner, which kills it (see `krm_fn::exec::become_subreaper`): a
    // pod's wrapper killed by SIGKILL does not leave its functions running.
    // Not with the kube backend: its client may run credential plugins as
    // children of its own, which a sweep must not reap.
    if args.backend_kind() == BackendKind::Process {
        krm_fn::exec::become_subreaper().context("becoming a child subreaper")?;
        let mut sigchld = signal(SignalKind::child()).context("watching SIGCHLD")?;
        tokio::spawn(async move {
            while sigchld.recv().await.is_some() {
                krm_fn::exec::request_sweep_soon();
            }
        });
    }
    let addr = SocketAddr::new(args.host, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let (backend, functions, _config_watch) =
        args.backend(&configs, &telemetry.forwarded_env()).await?;
    let mut settings = args.runner_settings();
    if telemetry.tracing() {
        settings.export_stats = Some(telemetry.stats().clone());
    }
    let runner = Runner::new(functions, backend, settings).await;
    let render: krm_fn::metrics::Render = {
        let metrics = runner.metrics.clone();
        let cache = runner.cache.clone();
        Arc::new(move || {
            let metrics = metrics.clone();
            let cache = cache.clone();
            Box::pin(async move { metrics.render(Some(cache.figures().await)) })
        })
    };
    if let Some(maddr) = args.metrics_addr(telemetry.settings()).await? {
        let mlistener = tokio::net::TcpListener::bind(maddr)
            .await
            .with_context(|| format!("listening for metrics on {maddr}"))?;
        tokio::spawn(krm_fn::metrics::serve_http(
            mlistener,
            render.clone(),
            std::future::pending(),
        ));
        tracing::info!(addr = %maddr, "serving metrics");
    }
    // OTEL_METRICS_EXPORTER=otlp: the same metrics, pushed (besides any
    // endpoint above). Dropped on an early return, it stops on a thread of
    // its own.
    let push = match telemetry.settings().metrics_otlp() {
        Some(protocol) => {
            Some(telemetry::metrics::MetricsPush::start(protocol, "function-runner", render).await?)
        }
        None => None,
    };
    tracing::info!(%addr, backend = ?args.backend_kind(), "function-runner serving");
    let service = RunnerService::new(runner.evaluator.clone(), runner.metrics.clone())
        .with_index(runner.index.clone());
    let shutdown = async move {
        tokio::select! { _ = sigterm.recv() => {}, _ = sigint.recv() => {} }
        tracing::info!("termination signal: draining");
    };
    let options = krm_fn::server::ServeOptions {
        max_message_bytes: args.max_request_body_size,
        max_streams_per_connection: function_runner::server::MAX_STREAMS_PER_CONNECTION,
        stream_window: None,
        shutdown_grace: args.shutdown_grace,
        readiness: runner.ready(),
    };
    let served = serve(listener, service, options, shutdown).await;
    tracing::info!("stopping pods");
    runner.shutdown(POD_STOP_TIMEOUT).await;
    // Nothing runs any more: whatever a pod or a function left behind goes
    // too.
    krm_fn::exec::kill_all_orphans();
    // The metrics' last values, once the pods are stopped.
    if let Some(push) = &push {
        push.shutdown(METRICS_PUSH_TIMEOUT).await;
    }
    served.context("serving gRPC")?;
    tracing::info!("stopped");
    Ok(())
}
