//! `function-runner`: Porch's function runner (`serve`) and a function
//! author's tool modelled on `kpt fn eval` (`eval`).

#![forbid(unsafe_code)]

mod cli_eval;

use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use function_runner::cache::CacheSettings;
use function_runner::config::{parse_go_duration, DEFAULT_IMAGE_PREFIX};
use function_runner::runner::{BackendKind, Runner, RunnerOptions};
use function_runner::server::{serve, RunnerService};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, Parser)]
#[command(
    name = "function-runner",
    version,
    about = "Runs KRM functions: Porch's function runner, and kpt-style local evaluation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve evaluator.FunctionEvaluator (Porch's protocol) and health.
    Serve(Box<ServeArgs>),
    /// Run one function on a package or ResourceList, like `kpt fn eval`.
    Eval(Box<EvalCommand>),
}

#[derive(Debug, clap::Args)]
struct EvalCommand {
    #[command(flatten)]
    args: cli_eval::EvalArgs,
    #[command(flatten)]
    pods: EvalPodArgs,
}

/// How `eval --image` runs the image: through the same evaluator chain as
/// `serve` (FunctionConfigs, then a process pod).
#[derive(Debug, clap::Args)]
struct EvalPodArgs {
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
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| e.to_string())
}

/// Flags are named as Porch's function runner's.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Port for EvaluateFunction and health.
    #[arg(long, default_value_t = 9445)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    host: IpAddr,
    /// Prometheus metrics port (0: off).
    #[arg(long, default_value_t = 9464)]
    metrics_port: u16,
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
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    warm_up_pod_cache: bool,
    /// Most pods per function (FunctionConfig maxParallelExecutions overrides).
    #[arg(long, default_value_t = 1)]
    max_parallel_pods_per_function: usize,
    /// Waitlist length per pod before another pod starts
    /// (FunctionConfig preferredMaxQueueLength overrides).
    #[arg(long, default_value_t = 2)]
    max_waitlist_length: usize,
    /// Maximum gRPC message size in bytes, both directions.
    #[arg(long, default_value_t = proto::DEFAULT_MAX_MESSAGE_BYTES)]
    max_request_body_size: usize,
    /// Directory of FunctionConfig documents (config.porch.kpt.dev/v1alpha1).
    #[arg(long)]
    functions: Option<PathBuf>,
    /// Prefix for short image names.
    #[arg(long, default_value = DEFAULT_IMAGE_PREFIX)]
    default_image_prefix: String,
    /// Retries on UNAVAILABLE from a pod (the pod is evicted first).
    #[arg(long, default_value_t = 2)]
    max_grpc_retries: usize,
    /// What creates pods.
    #[arg(long, value_enum, default_value_t = BackendKind::Process)]
    backend: BackendKind,
    /// process backend: the wrapper-server binary (default: next to this one).
    #[arg(long)]
    wrapper_server: Option<PathBuf>,
    /// process backend: image → entrypoint (a directory of executables named
    /// after images, or a YAML map; see the README).
    #[arg(long)]
    process_functions: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = matches!(&cli.command, Command::Serve(a) if a.log_format == "json");
    init_logging(json, matches!(cli.command, Command::Eval(_)));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("function-runner: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => run_serve(*args).await.map(|()| ExitCode::SUCCESS),
            Command::Eval(cmd) => run_eval(cmd.args, cmd.pods).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("function-runner: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(json: bool, quiet: bool) {
    let default = if quiet { "warn" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        // If whoever reads our stderr is gone, logging must not panic.
        .log_internal_errors(false)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn run_eval(args: cli_eval::EvalArgs, pods: EvalPodArgs) -> anyhow::Result<ExitCode> {
    if args.image.is_none() {
        return cli_eval::run(args, None).await;
    }
    let runner = Runner::start(RunnerOptions {
        functions: pods.functions,
        default_image_prefix: pods.default_image_prefix,
        cache: CacheSettings::default(),
        warm_up: false,
        max_message_bytes: args.max_output_bytes.max(proto::DEFAULT_MAX_MESSAGE_BYTES),
        max_grpc_retries: 2,
        backend: BackendKind::Process,
        wrapper_server: pods.wrapper_server.unwrap_or_else(
            function_runner::backend::process::ProcessBackend::default_wrapper_path,
        ),
        process_functions: pods.process_functions,
    })
    .await?;
    let code = cli_eval::run(args, Some(runner.evaluator.clone())).await;
    runner.shutdown(Duration::from_secs(10)).await;
    code
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let opts = RunnerOptions {
        functions: args.functions.clone(),
        default_image_prefix: args.default_image_prefix.clone(),
        cache: CacheSettings {
            default_ttl: args.pod_ttl,
            scan_interval: args.scan_interval,
            ready_timeout: args.pod_ready_timeout,
            max_parallel_pods_per_function: args.max_parallel_pods_per_function,
            max_waitlist_length: args.max_waitlist_length,
        },
        warm_up: args.warm_up_pod_cache,
        max_message_bytes: args.max_request_body_size,
        max_grpc_retries: args.max_grpc_retries,
        backend: args.backend,
        wrapper_server: args.wrapper_server.clone().unwrap_or_else(
            function_runner::backend::process::ProcessBackend::default_wrapper_path,
        ),
        process_functions: args.process_functions.clone(),
    };
    // Signals first, so a SIGTERM during startup still stops what started.
    let mut sigterm = signal(SignalKind::terminate()).context("watching SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("watching SIGINT")?;
    let addr = SocketAddr::new(args.host, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let runner = Runner::start(opts).await?;
    if args.metrics_port != 0 {
        let maddr = SocketAddr::new(args.host, args.metrics_port);
        let mlistener = tokio::net::TcpListener::bind(maddr)
            .await
            .with_context(|| format!("listening for metrics on {maddr}"))?;
        let metrics = runner.metrics.clone();
        let cache = runner.cache.clone();
        let render: krm_fn::metrics::Render = Arc::new(move || {
            let metrics = metrics.clone();
            let cache = cache.clone();
            Box::pin(async move { metrics.render(Some(&cache)).await })
        });
        tokio::spawn(krm_fn::metrics::serve_http(
            mlistener,
            render,
            std::future::pending(),
        ));
        tracing::info!(addr = %maddr, "serving metrics");
    }
    tracing::info!(%addr, backend = ?args.backend, "function-runner serving");
    let service = RunnerService::new(runner.evaluator.clone(), runner.metrics.clone());
    let shutdown = async move {
        tokio::select! { _ = sigterm.recv() => {}, _ = sigint.recv() => {} }
        tracing::info!("termination signal: draining");
    };
    let served = serve(listener, service, args.max_request_body_size, shutdown).await;
    tracing::info!("stopping pods");
    runner.shutdown(Duration::from_secs(30)).await;
    served.context("serving gRPC")?;
    tracing::info!("stopped");
    Ok(())
}
