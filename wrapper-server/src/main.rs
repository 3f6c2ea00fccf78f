//! `wrapper-server`: the function container's entrypoint (PID 1).
//!
//! `wrapper-server [--port 9446] [--max-request-body-size 6291456] -- ENTRYPOINT [ARGS...]`
//! serves EvaluateFunction and gRPC health, running ENTRYPOINT once per call.
//! `wrapper-server install DIR` is the init container's job.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand, ValueEnum};
use krm_fn::exec::{self, ExecSpec};
use tokio::signal::unix::{signal, SignalKind};
use wrapper_server::metrics::{self, Metrics};
use wrapper_server::server::{ServerConfig, Wrapper};

#[derive(Debug, Parser)]
#[command(
    name = "wrapper-server",
    version,
    about = "Serves evaluator.FunctionEvaluator on a port and runs a KRM function per call",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Copy wrapper-server and the health probe (also as grpc-health-probe)
    /// into DIR, atomically, mode 0755. For shell-less init images.
    Install {
        /// Target directory, e.g. /wrapper-server-tools.
        dir: PathBuf,
        /// The health probe binary (default: health-probe or
        /// grpc-health-probe next to this binary).
        #[arg(long)]
        probe: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Port for EvaluateFunction and health.
    #[arg(long, default_value_t = 9446)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    host: IpAddr,
    /// Maximum gRPC message size in bytes, both directions (Porch's flag).
    #[arg(long, default_value_t = proto::DEFAULT_MAX_MESSAGE_BYTES)]
    max_request_body_size: usize,
    /// Maximum bytes the function may write on stdout (default: the message
    /// size limit).
    #[arg(long)]
    max_output_bytes: Option<usize>,
    /// Calls allowed at once, from their ResourceList's arrival until their
    /// answer is sent; more get RESOURCE_EXHAUSTED. 0: no limit (calls on
    /// one connection are still limited, see docs/wrapper-server.md).
    #[arg(long, default_value_t = 0)]
    max_concurrent_evaluations: usize,
    /// After SIGTERM: how long calls in flight may still finish (health
    /// answers NOT_SERVING meanwhile); then every connection is closed and
    /// the server exits (Go duration).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// How long a call's request may take to arrive in full, whatever its
    /// deadline, and its answer to be read: a stalled upload then gives back
    /// its slot, and a client that does not read its answer is disconnected
    /// (Go duration).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    request_read_timeout: Duration,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log verbosity as klog's levels (Porch's flag): up to 2 `info`, 3
    /// and 4 `debug`, 5 `trace`. RUST_LOG, when set, wins.
    #[arg(long, default_value_t = 2, value_name = "N")]
    verbosity: u8,
    /// Serve Prometheus metrics on this address (`:9464`, `0.0.0.0:9464`).
    /// Off by default.
    #[arg(long, value_parser = parse_listen_addr)]
    metrics_addr: Option<SocketAddr>,
    /// Listen on this Unix socket instead of a TCP port (`--host`/`--port`
    /// are then unused): for a container with no network, reached through
    /// a directory mounted into it. A stale socket file is replaced; the
    /// socket is made connectable by any user (mode 0666), so who may call
    /// is decided by who can reach its directory.
    #[arg(long, value_name = "PATH")]
    unix_socket: Option<PathBuf>,
    /// Keep this many processes of the function started and waiting for a
    /// call (blocked on stdin), so that a call does not wait for its
    /// start-up: each call still gets a fresh process, and a replacement
    /// starts after it. 0: spawn per call. See docs/wrapper-server.md for what differs.
    #[arg(long, default_value_t = DEFAULT_PRESPAWN, value_name = "N", value_parser = krm_fn::prespawn::parse_size)]
    prespawn: usize,
    /// Drain and exit once no call has run for this long (Go duration): for
    /// a wrapper kept warm between runs that nobody stops (`function-runner
    /// eval --keep-warm`). Off by default.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    exit_after_idle: Option<Duration>,
    /// After listening, print the bound address (`IP:PORT`) on stdout. For
    /// parents that start the wrapper with `--port 0` (the runner's process
    /// backend).
    #[arg(long)]
    print_address: bool,
    /// Exit (killing running functions) when stdin reaches end of file: the
    /// parent holds the other end, so the wrapper never outlives it, however
    /// the parent ends.
    #[arg(long)]
    exit_with_stdin: bool,
    /// Adopt orphaned descendants (as a child subreaper, or PID 1), reap
    /// them, and kill those that outlive their call (default: true).
    #[arg(long)]
    reap_orphans: Option<bool>,
    /// The function's entrypoint and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "ENTRYPOINT")]
    entrypoint: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// `--prespawn`'s default: off, spawning per call as Porch's wrapper and
/// kpt do. Pre-spawning changes when a function starts (before its call: a
/// function that reads the clock or its environment's state at start sees
/// them earlier) and keeps an idle process per pod; so it is asked for per
/// function (FunctionConfig `prespawn`, or the flag), where its start-up is
/// worth taking off the call path (interpreted functions: tens of ms).
const DEFAULT_PRESPAWN: usize = 0;

fn parse_duration(s: &str) -> Result<Duration, String> {
    krm_fn::duration::parse_go_duration(s).map_err(|e| e.to_string())
}

fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let full = if let Some(port) = s.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else if s.parse::<u16>().is_ok() {
        format!("0.0.0.0:{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e| format!("{s:?} is not HOST:PORT, :PORT or PORT ({e})"))
}

fn main() -> std::process::ExitCode {
    // Multi-call: linked as /bin/cp in the init image (Porch's template).
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    if std::path::Path::new(&argv0)
        .file_name()
        .is_some_and(|n| n == "cp")
    {
        let code = wrapper_server::cp::main(argv.collect());
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::try_parse().unwrap_or_else(|err| {
        krm_fn::cli::tip_for_word_before_dashes(err, |arg| {
            format!(
                "the function's entrypoint goes after `--`: `wrapper-server [OPTIONS] -- {arg}`"
            )
        })
        .exit()
    });
    match cli.command {
        Some(Command::Install { dir, probe }) => {
            match wrapper_server::install::install(&dir, None, probe.as_deref()) {
                Ok(written) => {
                    for path in written {
                        eprintln!("installed {}", path.display());
                    }
                    std::process::ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("wrapper-server install: {err}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        None => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    eprintln!("wrapper-server: starting the async runtime: {err}");
                    return std::process::ExitCode::FAILURE;
                }
            };
            // Exports run on the runtime: set up within it.
            let telemetry = {
                let _entered = runtime.enter();
                telemetry::Telemetry::from_env("wrapper-server")
            };
            // Telemetry is not worth a function that cannot run: a setting
            // the wrapper cannot honour (a pod template shared by many
            // functions, say) is said, and the wrapper serves without it.
            let (telemetry, refused) = match telemetry {
                Ok(telemetry) => (telemetry, None),
                Err(err) => (telemetry::Telemetry::off(), Some(err)),
            };
            init_logging(&telemetry, cli.serve.log_format, cli.serve.verbosity);
            if let Some(err) = refused {
                tracing::warn!(error = %err, "OpenTelemetry is off");
            }
            match serve(cli.serve, runtime, telemetry) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(err) => {
                    let said = krm_fn::error_chain(err.as_ref());
                    tracing::error!("{said}");
                    eprintln!("wrapper-server: {said}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}

fn init_logging(telemetry: &telemetry::Telemetry, format: LogFormat, verbosity: u8) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(krm_fn::cli::klog_filter(verbosity))
    });
    telemetry.init_subscriber(
        filter,
        format == LogFormat::Json,
        std::io::stderr().is_terminal(),
    );
}

/// How long pre-spawned processes wait for the socket's directory to be
/// taken back (a runner that does not take it back: they start then).
const SOCKET_DIR_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Resolves once this process may no longer write in `dir`, or after
/// [`SOCKET_DIR_WAIT`] (said in the log).
async fn until_not_writable(dir: std::path::PathBuf) {
    let deadline = tokio::time::Instant::now() + SOCKET_DIR_WAIT;
    while rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok() {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                dir = %dir.display(),
                "the socket's directory is still writable: pre-spawned function processes start anyway"
            );
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Listens on the Unix socket `path`: a socket file left by an earlier run
/// (a container restarted on the same directory) is replaced, anything else
/// there is an error; the socket is made connectable by every user.
fn bind_unix(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?,
        Ok(_) => bail!(
            "--unix-socket {}: something that is not a socket is there",
            path.display()
        ),
        Err(_) => {}
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("listening on the Unix socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .with_context(|| format!("making {} connectable", path.display()))?;
    Ok(listener)
}

/// How long the spans still queued at exit may take to be exported.
/// Shorter than the process backend's stop grace (5 s) and Kubernetes'
/// termination grace, so that a slow collector cannot get the wrapper
/// killed mid-flush.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

fn serve(
    args: ServeArgs,
    runtime: tokio::runtime::Runtime,
    telemetry: telemetry::Telemetry,
) -> anyhow::Result<()> {
    let entrypoint = ExecSpec::from_argv(args.entrypoint.iter().cloned())
        .context("no ENTRYPOINT given after `--`")?;
    // Checked before serving: a pod whose function cannot run must fail its
    // start (and its readiness), not report SERVING and fail every call.
    entrypoint.resolve()?;
    if args.max_request_body_size == 0 {
        bail!("--max-request-body-size must be greater than 0");
    }
    let config = ServerConfig {
        entrypoint,
        max_message_bytes: args.max_request_body_size,
        max_output_bytes: args.max_output_bytes.unwrap_or(args.max_request_body_size),
        max_concurrent: (args.max_concurrent_evaluations > 0)
            .then_some(args.max_concurrent_evaluations),
        shutdown_grace: args.shutdown_grace,
        request_read_timeout: args.request_read_timeout,
    };
    let reap_orphans = args.reap_orphans.unwrap_or(true);
    runtime.block_on(async move {
        let (listener, addr): (krm_fn::server::Listener, String) = match &args.unix_socket {
            Some(path) => {
                let listener = bind_unix(path)?;
                (listener.into(), format!("unix:{}", path.display()))
            }
            None => {
                let addr = SocketAddr::new(args.host, args.port);
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr}"))?;
                // With --port 0 the kernel picks the port: log the real one.
                let addr = listener.local_addr().context("reading the bound address")?;
                (listener.into(), addr.to_string())
            }
        };
        if args.print_address {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{addr}")
                .and_then(|()| out.flush())
                .context("printing the address")?;
        }
        if args.exit_with_stdin {
            // A plain thread: a blocking read costs nothing while it waits.
            std::thread::spawn(|| {
                use std::io::Read;
                let mut stdin = std::io::stdin();
                let mut buf = [0u8; 64];
                while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
                // Act first: with the parent gone, stderr may be gone too.
                exec::kill_all_groups();
                exec::kill_all_orphans();
                tracing::warn!("stdin closed: the parent is gone; exiting");
                std::process::exit(0);
            });
        }
        let metrics = Arc::new(Metrics::with_telemetry(&telemetry));
        if let Some(maddr) = args.metrics_addr {
            let mlistener = tokio::net::TcpListener::bind(maddr)
                .await
                .with_context(|| format!("listening for metrics on {maddr}"))?;
            tokio::spawn(krm_fn::metrics::serve_http(
                mlistener,
                metrics::render_with(metrics.clone()),
                std::future::pending(),
            ));
            tracing::info!(%maddr, "serving metrics");
        } else if let Some((host, port)) = telemetry.settings().prometheus() {
            // Porch's function pods set OTEL_METRICS_EXPORTER=prometheus
            // (and _HOST=0.0.0.0): serve there. Metrics are not worth a
            // function that cannot run: a port taken is said, not fatal.
            match tokio::net::TcpListener::bind((host, port)).await {
                Ok(mlistener) => {
                    tokio::spawn(krm_fn::metrics::serve_http(
                        mlistener,
                        metrics::render_with(metrics.clone()),
                        std::future::pending(),
                    ));
                    tracing::info!(
                        host,
                        port,
                        "serving metrics (OTEL_METRICS_EXPORTER=prometheus)"
                    );
                }
                Err(err) => tracing::warn!(
                    host,
                    port,
                    error = %err,
                    "OTEL_METRICS_EXPORTER=prometheus: cannot listen; no metrics are served"
                ),
            }
        }
        // OTEL_METRICS_EXPORTER=otlp: the same metrics, pushed (besides
        // any endpoint above).
        let push = match telemetry.settings().metrics_otlp() {
            Some(protocol) => match telemetry::metrics::MetricsPush::start(
                protocol,
                "wrapper-server",
                metrics::render_with(metrics.clone()),
            )
            .await
            {
                Ok(push) => Some(push),
                // As above: said, not fatal to the function.
                Err(err) => {
                    tracing::warn!(error = %err, "metrics are not pushed");
                    None
                }
            },
            None => None,
        };
        if reap_orphans {
            // Orphans come to us, and those that outlive their call are
            // killed (see `exec::become_subreaper`); PID 1 is a subreaper
            // by nature.
            if std::process::id() != 1 {
                exec::become_subreaper().context("becoming a child subreaper")?;
            }
            let mut sigchld = signal(SignalKind::child()).context("watching SIGCHLD")?;
            tokio::spawn(async move {
                while sigchld.recv().await.is_some() {
                    exec::request_sweep_soon();
                }
            });
        }
        let mut sigterm = signal(SignalKind::terminate()).context("watching SIGTERM")?;
        let mut sigint = signal(SignalKind::interrupt()).context("watching SIGINT")?;
        let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
        // First SIGTERM/SIGINT: drain. Second: stop at once, killing every
        // function process still running.
        tokio::spawn(async move {
            tokio::select! { _ = sigterm.recv() => {}, _ = sigint.recv() => {} }
            let _ = first_tx.send(());
            tokio::select! { _ = sigterm.recv() => {}, _ = sigint.recv() => {} }
            tracing::warn!("second termination signal: exiting at once");
            exec::kill_all_groups();
            exec::kill_all_orphans();
            std::process::exit(143);
        });
        tracing::info!(
            %addr,
            entrypoint = ?args.entrypoint,
            prespawn = args.prespawn,
            max_message_bytes = config.max_message_bytes,
            "wrapper-server serving"
        );
        let prespawn = (args.prespawn > 0).then(|| {
            // Behind a Unix socket (the runner's docker backend), the
            // socket's directory is on the host, writable until the runner
            // takes it back: no function runs before then.
            let gate: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
                match args.unix_socket.as_ref().and_then(|p| p.parent()) {
                    Some(dir) => Box::pin(until_not_writable(dir.to_path_buf())),
                    None => Box::pin(std::future::ready(())),
                };
            let pool = Arc::new(krm_fn::prespawn::Pool::new_after(
                config.entrypoint.clone(),
                args.prespawn,
                gate,
            ));
            metrics.watch_prespawn(pool.clone());
            pool
        });
        let wrapper = Wrapper::with_prespawn(config, metrics, prespawn.clone());
        let draining_pool = prespawn.clone();
        let drain = wrapper.drain();
        let exit_after_idle = args.exit_after_idle;
        let served = wrapper
            .serve(listener, async move {
                let idle = async {
                    match exit_after_idle {
                        Some(idle) => {
                            drain.idle_for(idle).await;
                            tracing::info!(idle = ?idle, "no call for --exit-after-idle: exiting");
                        }
                        None => std::future::pending().await,
                    }
                };
                tokio::select! { _ = first_rx => {}, () = idle => {} }
                // Draining: the processes waiting for calls go now.
                if let Some(pool) = &draining_pool {
                    pool.close();
                }
            })
            .await;
        // However serving ended: the processes waiting for calls go.
        if let Some(pool) = &prespawn {
            pool.close();
        }
        // Nothing runs any more: whatever a function left behind goes too.
        exec::kill_all_orphans();
        // Spans still queued and the metrics' last values go out before
        // the exit, bounded.
        let pushed = async {
            if let Some(push) = &push {
                push.shutdown(FLUSH_TIMEOUT).await;
            }
        };
        tokio::join!(telemetry.shutdown(FLUSH_TIMEOUT), pushed);
        served.context("serving gRPC")?;
        tracing::info!("drained; exiting");
        anyhow::Ok(())
    })
}
