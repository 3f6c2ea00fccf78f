//! One EvaluateFunction call, from admission to answer: what the wrapper
//! does per request and the runner's exec evaluator does per binary call.
//!
//! A call goes: [`Gate::admit`] (draining? over the concurrency cap?) →
//! [`exec::run`] under the call's [`deadline`] → [`Function::answer`] maps
//! exit status and stdout to the answer of docs/wrapper-server.md's outcome table, or to
//! a [`CallError`], which becomes a gRPC status in [`error`].

pub mod deadline;
pub mod error;

use std::sync::Arc;

use prost::Message;
use proto::pb::EvaluateFunctionResponse;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::Instrument as _;

pub use error::{CallError, Failure, Outcome, RequestError};

use crate::drain::{Drain, DrainGuard};
use crate::exec::{self, ExecError, ExecSpec, Input, Limits, Output};
use krm_results as results;

/// A function's entrypoint and the limits its calls run under.
#[derive(Debug, Clone)]
pub struct Function {
    pub entrypoint: ExecSpec,
    pub limits: Limits,
    /// Limit on the response message (`--max-request-body-size`).
    pub max_message_bytes: usize,
    /// The flag that sets `limits.max_stdout_bytes`, named when it is hit.
    pub output_flag: &'static str,
    /// Processes started ahead of their calls (`--prespawn`), if any.
    pub prespawn: Option<std::sync::Arc<crate::prespawn::Pool>>,
}

impl Function {
    /// stdout is limited to `max_output_bytes` (set by `output_flag`);
    /// stderr goes back in the same message as stdout, so it is limited to
    /// the message size.
    pub fn new(
        entrypoint: ExecSpec,
        max_message_bytes: usize,
        max_output_bytes: usize,
        output_flag: &'static str,
    ) -> Self {
        let mut limits = Limits::new(max_output_bytes);
        limits.max_stderr_bytes = max_message_bytes;
        Self {
            entrypoint,
            limits,
            max_message_bytes,
            output_flag,
            prespawn: None,
        }
    }

    /// Runs one call's process on `input`: a pre-spawned one if one waits,
    /// else one spawned now. Cancel-safe (dropping kills its group).
    pub async fn exec(&self, input: impl Into<Input>) -> Result<Output, ExecError> {
        let input = input.into();
        // Exported when tracing is on (crate `telemetry`), else disabled at
        // its call site: a branch.
        let span = tracing::info_span!(
            target: "otel",
            "function",
            input_bytes = input.len(),
            prespawned = tracing::field::Empty,
            exit_code = tracing::field::Empty,
            signal = tracing::field::Empty,
            output_bytes = tracing::field::Empty,
            stderr_bytes = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let result = async {
            if let Some(pool) = &self.prespawn {
                if let Some((spawned, _refill)) = pool.take().await {
                    tracing::Span::current().record("prespawned", true);
                    return exec::run_spawned(spawned, input, &self.limits).await;
                }
            }
            exec::run(&self.entrypoint, input, &self.limits).await
        }
        .instrument(span.clone())
        .await;
        if !span.is_disabled() {
            match &result {
                Ok(output) => {
                    match output.status {
                        exec::ExitStatus::Code(code) => span.record("exit_code", code),
                        exec::ExitStatus::Signal(signal) => span.record("signal", signal),
                    };
                    span.record("output_bytes", output.stdout.len());
                    span.record("stderr_bytes", output.stderr.len());
                }
                Err(err) => {
                    span.record("error", tracing::field::display(err));
                }
            }
        }
        result
    }

    /// The image a call names, or the entrypoint if it names none; made
    /// safe to quote and log (see [`shown_name`]).
    pub fn name_or_entrypoint(&self, image: String) -> String {
        if image.is_empty() {
            self.entrypoint.display_program()
        } else {
            shown_name(&image).into_owned()
        }
    }

    /// Runs the function once on `input` and answers; past `deadline` the
    /// run is dropped, which kills its process group.
    pub async fn run(
        &self,
        image: &str,
        input: impl Into<Input>,
        deadline: Option<Instant>,
    ) -> Result<EvaluateFunctionResponse, CallError> {
        let run = self.exec(input.into());
        let Some(output) = deadline::before(deadline, run).await else {
            return Err(CallError::DeadlineExceeded {
                image: image.to_string(),
            });
        };
        self.answer(image, output)
    }

    /// The answer for a call whose function ran (or could not run).
    pub fn answer(
        &self,
        image: &str,
        output: Result<Output, ExecError>,
    ) -> Result<EvaluateFunctionResponse, CallError> {
        // The image is copied into the error only: an OK answer allocates nothing here.
        let name = || image.to_string();
        match output {
            Ok(output) => outcome(image, output, self.max_message_bytes),
            Err(source @ ExecError::Spawn { .. }) => Err(CallError::StartFailed {
                image: name(),
                source,
            }),
            Err(ExecError::OutputTooLarge { limit }) => Err(CallError::OutputTooLarge {
                image: name(),
                limit,
                flag: self.output_flag,
            }),
            Err(source @ ExecError::Io { .. }) => Err(CallError::Io {
                image: name(),
                source,
            }),
        }
    }
}

/// Maps a finished process to the answer of the outcome table.
pub fn outcome(
    image: &str,
    output: Output,
    max_message_bytes: usize,
) -> Result<EvaluateFunctionResponse, CallError> {
    let parsed = results::parse_output(&output.stdout);
    if output.status.success() {
        return match parsed {
            Ok(_) => fit_response(image, output, max_message_bytes),
            Err(source) => Err(CallError::InvalidOutput {
                image: image.to_string(),
                source,
                stderr: output.stderr,
            }),
        };
    }
    let failure = match parsed {
        Ok(rl) => Failure::Results(rl.results),
        Err(err) => Failure::Unparsable(err),
    };
    Err(CallError::FunctionFailed {
        image: image.to_string(),
        status: output.status,
        failure,
        stderr: output.stderr,
    })
}

/// Builds the OK answer, shortening the log (keeping its end, where errors
/// usually are) if stdout and stderr together exceed the message limit.
fn fit_response(
    image: &str,
    output: Output,
    max_message_bytes: usize,
) -> Result<EvaluateFunctionResponse, CallError> {
    let mut resp = EvaluateFunctionResponse {
        resource_list: output.stdout,
        log: output.stderr,
    };
    let over = resp.encoded_len().saturating_sub(max_message_bytes);
    if over > 0 {
        if over <= resp.log.len() {
            // Drop `over` bytes of log, plus a little for the shorter varint.
            let keep = resp.log.len().saturating_sub(over + 16);
            resp.log = resp.log.slice(resp.log.len() - keep..);
        } else {
            return Err(CallError::ResponseTooLarge {
                image: image.to_string(),
                size: resp.resource_list.len(),
                max: max_message_bytes,
            });
        }
    }
    Ok(resp)
}

/// Longest name quoted in a message or a log line. An image reference is far
/// shorter; a request may name anything, and statuses travel in headers
/// that grpc-go clients refuse over 16 KiB.
pub const MAX_SHOWN_NAME: usize = 256;

/// `name` as it may be quoted in a status or written to a log: control
/// characters escaped (`\n`, `\u{1b}`: a name cannot forge a log line or
/// colour a terminal) and cut at [`MAX_SHOWN_NAME`] bytes, marked. Borrowed
/// when there is nothing to change.
pub fn shown_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_SHOWN_NAME && !name.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::new();
    for c in name.chars() {
        if out.len() >= MAX_SHOWN_NAME {
            out.push_str(&format!("…({} bytes)", name.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Who may start a call: not while draining, and at most `max` at once.
#[derive(Clone, Default)]
pub struct Gate {
    drain: Drain,
    slots: Option<(Arc<Semaphore>, usize)>,
}

/// Held while an admitted call runs: counts it for the drain, and holds its
/// concurrency slot.
pub struct Admission {
    _drain: DrainGuard,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Gate {
    /// `max_concurrent`: at most this many calls at once, the rest get
    /// RESOURCE_EXHAUSTED; `None` for no cap.
    pub fn new(max_concurrent: Option<usize>) -> Self {
        Self {
            drain: Drain::default(),
            slots: max_concurrent.map(|n| (Arc::new(Semaphore::new(n)), n)),
        }
    }

    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// Admits a call, or refuses it: draining, or at the concurrency cap.
    pub fn admit(&self) -> Result<Admission, CallError> {
        let drain = self.drain.enter().ok_or(CallError::ShuttingDown)?;
        let slot = match &self.slots {
            None => None,
            Some((slots, max)) => Some(
                slots
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| CallError::Busy { max: *max })?,
            ),
        };
        Ok(Admission {
            _drain: drain,
            _slot: slot,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
