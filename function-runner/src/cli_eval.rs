//! `function-runner eval` (being written).

/// Arguments of `function-runner eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {}

pub async fn run(
    _args: EvalArgs,
    _image_evaluator: Option<std::sync::Arc<dyn function_runner::evaluator::Evaluator>>,
) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("eval is not implemented yet")
}
