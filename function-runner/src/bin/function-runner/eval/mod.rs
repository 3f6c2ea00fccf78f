//! `function-runner eval`: the command line of [`krm_kpt::eval`],
//! modelled on `kpt fn eval`.

pub(crate) mod args;
mod save;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use krm_builtins::Builtin;
use krm_fn::evaluator::Evaluator;
use krm_kpt::eval::{self, EvalOptions, FnConfig, Function, ImagePullPolicy, Output, Source};

use crate::pods::{EvalPodArgs, ImageFunctions};
use args::EvalArgs;

/// `function-runner eval`: kpt's checks first, then the run, then the
/// function saved if the run passed and `--save` asks for it (what
/// happened is said on stderr; the exit code is the run's).
pub(crate) async fn run(cmd: EvalCommand) -> anyhow::Result<ExitCode> {
    let EvalCommand { args, mut pods } = cmd;
    // beta.67 checks `--image-prefix` before any other flag.
    if let Err(e) = krm_kpt::image::validate_prefix(&pods.image_prefix) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(1));
    }
    let saving = match save::prepare(&args, &pods.image_prefix) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    // What the function leaves behind (a daemon in a session of its own)
    // comes to us and is killed when eval ends, not left running.
    if let Err(err) = krm_fn::exec::become_subreaper() {
        tracing::debug!(%err, "not a child subreaper");
    }
    // Checked before anything runs (kpt: before it runs `docker run`).
    pods.function = match args.privileges() {
        Ok(privileges) => privileges,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(1));
        }
    };
    let code = run_function(args, pods).await;
    krm_fn::exec::kill_all_orphans();
    let code = code?;
    if let Some(saving) = saving.filter(|_| code == ExitCode::SUCCESS) {
        saving.save();
    }
    Ok(code)
}

/// The function run: a command, a built-in (no runner is started for it),
/// or an image through the runner.
async fn run_function(args: EvalArgs, pods: EvalPodArgs) -> anyhow::Result<ExitCode> {
    let Some(image) = args.image.clone().filter(|_| args.exec.is_none()) else {
        return run_args(args, String::new(), None, None).await;
    };
    let functions = match ImageFunctions::load(pods) {
        Ok(functions) => functions,
        Err(err) => {
            eprintln!("error: {}", krm_fn::error_chain(err.as_ref()));
            return Ok(ExitCode::from(1));
        }
    };
    // kpt names (and runs) a short name under the prefix; eval adds no
    // `:latest` (render does).
    let full = functions.full_name(&image);
    match functions.builtin(&full) {
        Ok(Some(builtin)) => {
            functions.note_builtin();
            run_args(args, full, None, Some(builtin)).await
        }
        Ok(None) => {
            let max = args.max_output_bytes;
            functions
                .with_runner(Some(&full.clone()), max, |evaluator| {
                    run_args(args, full, Some(evaluator), None)
                })
                .await?
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Runs `eval`; errors are printed the way kpt prints them (`error: ...`)
/// and give exit code 1, like a failing function.
async fn run_args(
    args: EvalArgs,
    image: String,
    image_evaluator: Option<Arc<dyn Evaluator>>,
    builtin: Option<&'static Builtin>,
) -> anyhow::Result<ExitCode> {
    let mut stderr = std::io::stderr();
    match run_inner(args, image, image_evaluator, builtin, &mut stderr).await {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(err) => {
            let _ = writeln!(stderr, "error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `image`: the image expanded under the prefix (empty for `--exec`).
async fn run_inner(
    args: EvalArgs,
    image: String,
    image_evaluator: Option<Arc<dyn Evaluator>>,
    builtin: Option<&'static Builtin>,
    stderr: &mut (dyn Write + Send),
) -> Result<u8, eval::Error> {
    // Flags first, as kpt reads them.
    ImagePullPolicy::parse(&args.image_pull_policy)?;
    let (selector, exclusion) = args.selection.selectors()?;
    let function = match (args.exec, args.image) {
        (Some(cmd), _) => Function::Exec(cmd),
        (None, Some(_)) if builtin.is_some() => Function::Builtin {
            image,
            builtin: builtin.ok_or(eval::Error::NoImageEvaluator)?,
        },
        (None, Some(_)) => {
            let evaluator = image_evaluator.ok_or(eval::Error::NoImageEvaluator)?;
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
