//! Why a call did not answer OK, and the one place where that becomes a
//! gRPC status.
//!
//! Every way a call can fail is a [`CallError`] variant carrying its causes;
//! [`CallError::outcome`] names it for metrics and logs, and
//! `From<CallError> for Status` picks the code and writes the message that
//! Porch's clients see. Both binaries answer through this mapping, so a
//! binaryExecutor in the runner fails in the same words as a pod.

use tonic::{Code, Status};

use crate::exec::{ExecError, ExitStatus};
use krm_results::{format_results, FnResult, OutputError};

/// How one EvaluateFunction call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    FunctionFailed,
    InvalidOutput,
    StartFailed,
    DeadlineExceeded,
    Cancelled,
    OutputTooLarge,
    Busy,
    ShuttingDown,
    /// The request itself was refused: over the size limit, or not a
    /// well-formed EvaluateFunctionRequest.
    RequestRejected,
    Internal,
}

impl prometheus_client::encoding::EncodeLabelValue for Outcome {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> std::fmt::Result {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::FunctionFailed => "function_failed",
            Outcome::InvalidOutput => "invalid_output",
            Outcome::StartFailed => "start_failed",
            Outcome::DeadlineExceeded => "deadline_exceeded",
            Outcome::Cancelled => "cancelled",
            Outcome::OutputTooLarge => "output_too_large",
            Outcome::Busy => "busy",
            Outcome::ShuttingDown => "shutting_down",
            Outcome::RequestRejected => "request_rejected",
            Outcome::Internal => "internal",
        }
    }
}

/// Why a call failed. `image` is the function's name as the call gave it
/// (or the entrypoint's, if the call named none).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("wrapper-server is shutting down; retry on another pod")]
    ShuttingDown,
    #[error("wrapper-server is already running {max} evaluations (--max-concurrent-evaluations)")]
    Busy { max: usize },
    #[error("function {image:?} did not finish before the deadline; its processes were killed")]
    DeadlineExceeded { image: String },
    /// The request body broke off: the client reset the stream or the
    /// connection failed. The transport's own status is passed on.
    #[error("{}", .source.message())]
    Cancelled {
        #[source]
        source: Status,
    },
    #[error(transparent)]
    Rejected(#[from] RequestError),
    #[error("cannot start function {image:?}: {source}")]
    StartFailed {
        image: String,
        #[source]
        source: ExecError,
    },
    #[error("function {image:?} wrote more than {limit} bytes on stdout ({flag}); it was stopped")]
    OutputTooLarge {
        image: String,
        limit: usize,
        /// The flag that sets the limit, so the message says what to raise.
        flag: &'static str,
    },
    #[error("function {image:?} output ({size} bytes) does not fit the {max}-byte message limit (--max-request-body-size)")]
    ResponseTooLarge {
        image: String,
        size: usize,
        max: usize,
    },
    #[error("running function {image:?}: {source}")]
    Io {
        image: String,
        #[source]
        source: ExecError,
    },
    #[error("function {image:?} exited 0 but its output is not a ResourceList: {source}{}", quote_stderr(.stderr))]
    InvalidOutput {
        image: String,
        #[source]
        source: OutputError,
        stderr: bytes::Bytes,
    },
    #[error("{}", failure_message(.image, .status, .failure, .stderr))]
    FunctionFailed {
        image: String,
        status: ExitStatus,
        failure: Failure,
        stderr: bytes::Bytes,
    },
}

/// What a failed function's stdout said.
#[derive(Debug)]
pub enum Failure {
    /// A ResourceList with these results (possibly none).
    Results(Vec<FnResult>),
    /// Not a ResourceList.
    Unparsable(OutputError),
}

/// A request that is not a well-formed EvaluateFunction call. The words are
/// those of tonic's generated server where it has its own.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("Missing request message.")]
    MissingMessage,
    #[error("request body ended inside the gRPC message prefix")]
    TruncatedPrefix,
    #[error(
        "protocol error: received message with compressed-flag but no grpc-encoding was specified"
    )]
    CompressedWithoutEncoding,
    #[error("protocol error: received message with invalid compression flag: {0} (valid flags are 0 and 1)")]
    InvalidCompressionFlag(u8),
    #[error(
        "request message of {len} bytes exceeds the limit of {max} bytes (--max-request-body-size)"
    )]
    TooLarge { len: usize, max: usize },
    #[error("request body ended {remaining} bytes before the end of its message")]
    TruncatedMessage { remaining: usize },
    #[error("failed to decode Protobuf message: {0}")]
    Malformed(&'static str),
    #[error("failed to decode Protobuf message: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The client stopped sending before the request was whole.
    #[error("the request did not arrive in full within {}s (--request-read-timeout)", .after.as_secs_f64())]
    ReadTimeout { after: std::time::Duration },
}

impl CallError {
    pub fn outcome(&self) -> Outcome {
        match self {
            CallError::ShuttingDown => Outcome::ShuttingDown,
            CallError::Busy { .. } => Outcome::Busy,
            CallError::DeadlineExceeded { .. } => Outcome::DeadlineExceeded,
            CallError::Cancelled { .. } => Outcome::Cancelled,
            CallError::Rejected(_) => Outcome::RequestRejected,
            CallError::StartFailed { .. } => Outcome::StartFailed,
            CallError::OutputTooLarge { .. } | CallError::ResponseTooLarge { .. } => {
                Outcome::OutputTooLarge
            }
            CallError::Io { .. } => Outcome::Internal,
            CallError::InvalidOutput { .. } => Outcome::InvalidOutput,
            CallError::FunctionFailed { .. } => Outcome::FunctionFailed,
        }
    }

    /// The gRPC code of this error; see the outcome table in docs/wrapper-server.md.
    pub fn code(&self) -> Code {
        match self {
            CallError::ShuttingDown => Code::Unavailable,
            CallError::Busy { .. }
            | CallError::OutputTooLarge { .. }
            | CallError::ResponseTooLarge { .. }
            | CallError::Rejected(RequestError::TooLarge { .. }) => Code::ResourceExhausted,
            CallError::DeadlineExceeded { .. }
            | CallError::Rejected(RequestError::ReadTimeout { .. }) => Code::DeadlineExceeded,
            CallError::Cancelled { source } => source.code(),
            CallError::Rejected(_)
            | CallError::StartFailed { .. }
            | CallError::Io { .. }
            | CallError::InvalidOutput { .. }
            | CallError::FunctionFailed { .. } => Code::Internal,
        }
    }
}

impl From<CallError> for Status {
    fn from(err: CallError) -> Status {
        Status::new(err.code(), err.to_string())
    }
}

/// Longest stderr quoted in an error message: statuses travel in HTTP/2
/// headers, and grpc-go clients refuse header lists over 16 KiB.
pub(crate) const MAX_QUOTED_STDERR: usize = 4 * 1024;
/// Longest list of results quoted in an error message.
const MAX_QUOTED_RESULTS: usize = 8 * 1024;

fn failure_message(image: &str, status: &ExitStatus, failure: &Failure, stderr: &[u8]) -> String {
    let stderr = quote_stderr(stderr);
    match failure {
        Failure::Results(results) if !results.is_empty() => format!(
            "failed to evaluate function {image:?} ({status}) with structured results:\n{}{stderr}",
            truncate_text(&format_results(results), MAX_QUOTED_RESULTS),
        ),
        Failure::Results(_) => format!("failed to evaluate function {image:?} ({status}){stderr}"),
        Failure::Unparsable(err) => format!(
            "failed to evaluate function {image:?} ({status}); its output is not a ResourceList: {err}{stderr}"
        ),
    }
}

fn quote_stderr(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim_end();
    if text.is_empty() {
        String::new()
    } else {
        format!("\nstderr:\n{}", truncate_tail(text, MAX_QUOTED_STDERR))
    }
}

/// The first `max` bytes of `text` (on a char boundary), marked if cut.
fn truncate_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} more bytes)", &text[..end], text.len() - end)
}

/// The last `max` bytes of `text` (on a char boundary), marked if cut.
fn truncate_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("... ({start} bytes before)\n{}", &text[start..])
}
