//! `function-runner`: Porch's function runner (`serve`) and a function
//! author's tool modelled on `kpt fn eval` (`eval`).

#![forbid(unsafe_code)]

mod backends;
mod eval;
mod flags;
#[cfg(feature = "kube")]
mod kube;
mod pods;
mod render;
mod serve;
mod tags;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

/// Porch's function runner's command line, as Porch's manifests run it
/// (`/home/nonroot/server --pod-namespace=… --functions=…`), made ours:
/// the program named `server`, or flags with no command before them, mean
/// `serve` (marked as Porch's, see `ServeArgs::porch_command_line`), and
/// Go's one-dash long flags (`-disable-runtimes pod`) are read as ours.
fn porch_command_line(mut args: Vec<OsString>) -> Vec<OsString> {
    let named_server = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|name| name == "server");
    let flags_first = args.get(1).is_some_and(|a| {
        let a = a.as_encoded_bytes();
        a.starts_with(b"-") && !matches!(a, b"-h" | b"--help" | b"-V" | b"--version")
    });
    // `server --version` is this program's version.
    let version = args
        .get(1)
        .is_some_and(|a| a == "-V" || a == "--version" || a == "-version");
    if !(named_server || flags_first) || version {
        return args;
    }
    let rest = args.split_off(1);
    args.push("serve".into());
    args.push("--porch-command-line".into());
    let mut dashes = false;
    for arg in rest {
        dashes |= arg == "--";
        let bytes = arg.as_encoded_bytes();
        // Go's flag package reads `-name` as `--name`; one-letter flags
        // (`-h`) are clap's own, and `-10` is a value.
        if !dashes && bytes.len() > 2 && bytes[0] == b'-' && bytes[1].is_ascii_alphabetic() {
            let mut long = OsString::from("-");
            long.push(&arg);
            args.push(long);
        } else {
            args.push(arg);
        }
    }
    args
}

fn main() -> ExitCode {
    // The starlark sandbox is this binary (krm_builtins::starlark::sandbox),
    // which sets up its own stack and limits.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == krm_builtins::starlark::SANDBOX_ARG)
    {
        return ExitCode::from(u8::try_from(krm_builtins::starlark::sandbox_main()).unwrap_or(2));
    }
    // eval and render walk resources recursively on this thread (the
    // runtime's block_on), and a resource may be nested 10,000 deep (the
    // parser's limit, as yaml.v3's): the main thread's 8 MiB overflowed at
    // 9,000 (found by the YAML differential harness). The stack is
    // reserved, not committed, until used; where even the reservation is
    // refused (strict overcommit, `ulimit -v`), this thread does, as before.
    let big = std::thread::Builder::new()
        .name("main".to_owned())
        .stack_size(krm_builtins::container::CALL_STACK_BYTES)
        .spawn(run_main);
    match big {
        Ok(thread) => match thread.join() {
            Ok(code) => code,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(_) => run_main(),
    }
}

fn run_main() -> ExitCode {
    let cli = Cli::try_parse_from(porch_command_line(std::env::args_os().collect())).unwrap_or_else(|err| {
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
    let default_filter = match &cli.command {
        Command::Serve(a) => krm_fn::cli::klog_filter(a.log_level),
        Command::Eval(_) | Command::Render(_) => "warn",
        #[cfg(feature = "kube")]
        Command::Crd => "info",
    };
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
    // The OTEL_* variables: spans of serve's calls and of eval's and
    // render's function steps. Exports run on the runtime: set up within it.
    let service = match &cli.command {
        Command::Serve(_) => "function-runner",
        Command::Eval(_) => "function-runner-eval",
        Command::Render(_) => "function-runner-render",
        #[cfg(feature = "kube")]
        Command::Crd => "function-runner",
    };
    let telemetry = {
        let _entered = runtime.enter();
        #[cfg(feature = "kube")]
        let wanted = !matches!(cli.command, Command::Crd);
        #[cfg(not(feature = "kube"))]
        let wanted = true;
        if wanted {
            telemetry::Telemetry::from_env(service)
        } else {
            Ok(telemetry::Telemetry::off())
        }
    };
    let telemetry = match telemetry {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("function-runner: {err}");
            return ExitCode::FAILURE;
        }
    };
    init_logging(&telemetry, json, default_filter);
    let result = runtime.block_on(async {
        let result = match cli.command {
            Command::Serve(args) => serve::run(*args, &telemetry)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Eval(cmd) => eval::run(*cmd).await,
            Command::Render(cmd) => render::run(*cmd).await,
            #[cfg(feature = "kube")]
            Command::Crd => {
                print!("{}", runner_kube::crd::crd_yaml()?);
                Ok(ExitCode::SUCCESS)
            }
        };
        // Spans still queued go out before the exit, bounded.
        telemetry.shutdown(FLUSH_TIMEOUT).await;
        result
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("function-runner: {}", krm_fn::error_chain(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// How long the spans still queued at exit may take to be exported: with
/// the metrics' last push (as long again) after the drain (20 s) and the
/// pods' stop (8 s), about Kubernetes' 30 s termination grace.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

fn init_logging(telemetry: &telemetry::Telemetry, json: bool, default: &str) {
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
    telemetry.init_subscriber(filter, json, std::io::stderr().is_terminal());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::porch_command_line;
    use clap::Parser as _;

    /// Every flag of Porch's runner (func/server/server.go at
    /// nephio-project/porch 74d82d56), with a value, in Go's one-dash
    /// spelling and ours: the command line parses.
    #[test]
    fn every_flag_of_porchs_runner_is_accepted() {
        let flags = [
            ("port", "9445"),
            ("disable-runtimes", "exec,pod"),
            ("log-level", "4"),
            (
                "default-image-prefix",
                "ghcr.io/kptdev/krm-functions-catalog/",
            ),
            ("functions", "./functions"),
            ("warm-up-pod-cache", "false"),
            ("pod-namespace", "porch-fn-system"),
            ("pod-ttl", "30m"),
            ("scan-interval", "1m"),
            ("enable-private-registries", "false"),
            (
                "registry-auth-secret-path",
                "/var/tmp/config-secret/.dockerconfigjson",
            ),
            ("registry-auth-secret-name", "auth-secret"),
            ("enable-private-registries-tls", "false"),
            ("tls-secret-path", "/var/tmp/tls-secret/"),
            ("max-request-body-size", "6291456"),
            ("max-waitlist-length", "2"),
            ("max-parallel-pods-per-function", "1"),
        ];
        for dashes in ["-", "--"] {
            let mut args = vec!["/home/nonroot/server".to_string()];
            for (flag, value) in flags {
                args.push(format!("{dashes}{flag}={value}"));
            }
            let args = porch_command_line(args.into_iter().map(Into::into).collect());
            if let Err(err) = super::Cli::try_parse_from(args) {
                panic!("{dashes}: {err}");
            }
        }
    }

    fn rewritten(args: &[&str]) -> Vec<String> {
        porch_command_line(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn porchs_command_line_is_read_as_serve_and_ours_is_left_alone() {
        let serve = ["serve", "--porch-command-line"];
        assert_eq!(
            rewritten(&[
                "/home/nonroot/server",
                "--pod-namespace=x",
                "-disable-runtimes",
                "pod"
            ]),
            [
                "/home/nonroot/server",
                serve[0],
                serve[1],
                "--pod-namespace=x",
                "--disable-runtimes",
                "pod"
            ]
        );
        // Flags first, no command; a value that looks like a flag stays.
        assert_eq!(
            rewritten(&[
                "function-runner",
                "-port",
                "0",
                "--max-waitlist-length",
                "-1"
            ]),
            [
                "function-runner",
                serve[0],
                serve[1],
                "--port",
                "0",
                "--max-waitlist-length",
                "-1"
            ]
        );
        assert_eq!(
            rewritten(&["/home/nonroot/server"]),
            ["/home/nonroot/server", serve[0], serve[1]]
        );
        assert_eq!(
            rewritten(&["server", "--help"]),
            ["server", serve[0], serve[1], "--help"]
        );
        for ours in [
            &["function-runner", "eval", "-", "--exec", "cat"][..],
            &["function-runner", "render", "pkg"],
            &["function-runner", "--help"],
            &["function-runner", "-V"],
            &["server", "--version"],
            &["function-runner"],
        ] {
            assert_eq!(rewritten(ours), ours, "{ours:?}");
        }
    }
}
