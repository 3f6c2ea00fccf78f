//! `function-runner`: Porch's function runner (`serve`) and a function
//! author's tool modelled on `kpt fn eval` (`eval`).

#![forbid(unsafe_code)]

mod backends;
mod eval;
#[cfg(feature = "kube")]
mod kube;
mod pods;
mod render;
mod serve;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use krm_fn::duration::parse_go_duration;

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
    Serve(Box<serve::ServeArgs>),
    /// Run one function on a package or ResourceList, like `kpt fn eval`.
    Eval(Box<eval::EvalCommand>),
    /// Run a package's Kptfile pipelines, like `kpt fn render`.
    Render(Box<render::RenderCommand>),
    /// Print the FunctionConfig CustomResourceDefinition (YAML), generated
    /// from the types the runner parses (deploy/functionconfig-crd.yaml).
    #[cfg(feature = "kube")]
    Crd,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| e.to_string())
}

/// The `starlark` built-in's limits (serve, eval, render).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StarlarkArgs {
    /// The memory a `starlark` function's program may use (its sandbox
    /// process's address space beyond the interpreter's own); past it the
    /// call fails naming this flag. Bytes, or with Ki, Mi, Gi.
    #[arg(long, value_name = "SIZE", default_value = "512Mi", value_parser = parse_size)]
    pub(crate) starlark_memory_limit: u64,
}

impl StarlarkArgs {
    /// Runs every `starlark` program of this process in a sandbox: this
    /// binary, started with the sandbox argument.
    pub(crate) fn configure(&self, max_output_bytes: Option<u64>) -> anyhow::Result<()> {
        let program = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("finding this binary for the starlark sandbox: {e}"))?;
        krm_builtins::starlark::configure(krm_builtins::starlark::Limits {
            program,
            memory_bytes: self.starlark_memory_limit,
            // serve: what a call may answer; eval and render: what the
            // program may hold.
            max_output_bytes: max_output_bytes.unwrap_or(self.starlark_memory_limit),
            max_depth: 0,
            memory_flag: format!(
                "--starlark-memory-limit {}",
                show_size(self.starlark_memory_limit)
            ),
            // Known to the orphan sweep of a runner that reaps orphans.
            spawn: |cmd| {
                let (child, registered) = krm_fn::exec::spawn_registered(cmd)?;
                Ok((child, Box::new(registered)))
            },
        });
        Ok(())
    }
}

/// `512Mi`, `1Gi`, `65536`: a size in bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with Ki, Mi or Gi)"))?;
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(format!("{s:?}: the unit is Ki, Mi or Gi")),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if bytes < 16 << 20 {
        return Err(format!("{s:?}: at least 16Mi"));
    }
    Ok(bytes)
}

fn show_size(bytes: u64) -> String {
    match bytes {
        b if b % (1 << 30) == 0 => format!("{}Gi", b >> 30),
        b if b % (1 << 20) == 0 => format!("{}Mi", b >> 20),
        b => b.to_string(),
    }
}

fn main() -> ExitCode {
    // The starlark sandbox is this binary (krm_builtins::starlark::sandbox).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == krm_builtins::starlark::SANDBOX_ARG)
    {
        return ExitCode::from(u8::try_from(krm_builtins::starlark::sandbox_main()).unwrap_or(2));
    }
    let cli = Cli::try_parse().unwrap_or_else(|err| {
        let err = krm_fn::cli::tip_for_word_before_dashes(err, |arg| {
            format!("function arguments go after `--`: `function-runner eval [DIR] --image IMAGE -- {arg}`")
        });
        // kpt exits 1 on a bad flag, where clap exits 2: scripts written
        // for `kpt fn eval`/`render` test for 1.
        let kpt_like = matches!(
            std::env::args().nth(1).as_deref(),
            Some("eval" | "render")
        );
        if err.use_stderr() && kpt_like {
            let _ = err.print();
            std::process::exit(1);
        }
        err.exit()
    });
    let json = matches!(&cli.command, Command::Serve(a) if a.log_format == "json");
    init_logging(
        json,
        matches!(cli.command, Command::Eval(_) | Command::Render(_)),
    );
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
            Command::Serve(args) => serve::run(*args).await.map(|()| ExitCode::SUCCESS),
            Command::Eval(cmd) => eval::run(*cmd).await,
            Command::Render(cmd) => render::run(*cmd).await,
            #[cfg(feature = "kube")]
            Command::Crd => {
                print!("{}", runner_kube::crd::crd_yaml()?);
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("function-runner: {}", krm_fn::error_chain(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn init_logging(json: bool, quiet: bool) {
    let default = if quiet { "warn" } else { "info" };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // kube-runtime's watcher warns of every failed list or watch with the
    // client's dump of the API's Status, on every retry; the runner says
    // each in one line itself (once per change for a refusal). Unless
    // RUST_LOG asks for kube_runtime by name.
    let asked = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("kube_runtime"));
    if !asked {
        if let Ok(quiet_watcher) = "kube_runtime::watcher=error".parse() {
            filter = filter.add_directive(quiet_watcher);
        }
    }
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
