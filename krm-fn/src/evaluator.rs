//! The [`Evaluator`] trait: one strategy for running a function for an
//! EvaluateFunction request, and the errors every strategy answers with.
//!
//! The runner chains its evaluators (a local binary, a built-in, a pod);
//! `eval` and `render` hand one to the package pipeline for `image:`
//! functions. [`EvalError::NotFound`] means "not mine" and lets a chain
//! fall through; every other error stops it. [`EvalError::code`] and
//! `From<EvalError> for Status` are the one place these errors become gRPC
//! statuses.

use futures::future::BoxFuture;
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::time::Instant;
use tonic::{Code, Status};

use crate::call::CallError;

/// A cause kept whole for its message and its chain of sources.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One evaluation: the request and when the caller stops waiting.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub request: EvaluateFunctionRequest,
    pub deadline: Option<Instant>,
}

impl EvalRequest {
    pub fn new(request: EvaluateFunctionRequest) -> Self {
        Self {
            request,
            deadline: None,
        }
    }
}

/// Why an evaluator gave no response.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// No evaluator of this kind knows the image: try the next one.
    #[error("no function is configured for image {image:?}")]
    NotFound { image: String },
    #[error("EvaluateFunctionRequest.image is empty")]
    EmptyImage,
    /// Not an image reference: too long, or a character no reference has.
    #[error("EvaluateFunctionRequest.image {shown:?} is not an image reference: {reason}")]
    InvalidImage { shown: String, reason: String },
    /// The request's tag constraint does not parse.
    #[error(transparent)]
    InvalidTag(BoxError),
    /// The request's tag constraint could not be resolved to a tag of the
    /// image's registry (no tag meets it, or the registry could not be
    /// asked): `code` is the one the cause decides (NOT_FOUND, UNAVAILABLE,
    /// FAILED_PRECONDITION); the cause names the image, the constraint and
    /// the registry.
    #[error("{source}")]
    TagNotResolved {
        code: Code,
        #[source]
        source: BoxError,
    },
    /// A local binary ran, or could not.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The pod answered with an error: passed on as the pod said it.
    #[error("{}", .source.message())]
    PodAnswered {
        #[source]
        source: Status,
    },
    /// No pod could be had for the image. The cause names the image (once:
    /// a long name quoted at every level of a chain made statuses too big to
    /// send); `code` is the one the cause decides (the pod cache's: `None`
    /// for none, then the causes' own are looked at).
    #[error("{source}")]
    Pod {
        image: String,
        code: Option<Code>,
        #[source]
        source: BoxError,
    },
    #[error("function {image:?} did not finish before the deadline")]
    DeadlineExceeded { image: String },
    #[error("function-runner is shutting down")]
    ShuttingDown,
    /// A goExecutor names a function that is not built in (`known`: the
    /// built-in functions, named).
    #[error("FunctionConfig {config} names built-in function {id:?} (goExecutor), which does not exist; built-in: {known}")]
    UnknownBuiltin {
        id: String,
        config: String,
        known: String,
    },
    /// A built-in function's thread ended without an answer.
    #[error("built-in function for {image:?} failed: it stopped without an answer")]
    BuiltinPanicked { image: String },
    /// No function for the image, and FunctionConfigs were rejected at
    /// start: they are named, since one of them may have been meant for it.
    #[error("{source}; FunctionConfigs rejected at start (one may have been meant for this image): {rejected}")]
    NotFoundWithRejected {
        #[source]
        source: Box<EvalError>,
        rejected: String,
    },
    /// The catalog's image of a built-in did not run built-in because of
    /// its tag (`note` says why and how to opt in), and did not run as an
    /// image either.
    #[error("{source}; {note}")]
    NotBuiltIn {
        #[source]
        source: Box<EvalError>,
        note: String,
    },
}

impl EvalError {
    /// Whether the failed call reached a function that the runner knows:
    /// a configured binary ran, or a pod answered.
    pub fn image_is_known(&self) -> bool {
        matches!(
            self,
            EvalError::Call(_) | EvalError::PodAnswered { .. } | EvalError::BuiltinPanicked { .. }
        )
    }

    /// The gRPC code for this error, chosen by walking its causes: the first
    /// one that decides a code wins.
    pub fn code(&self) -> Code {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(err) = cause {
            if let Some(code) = decided_code(err) {
                return code;
            }
            cause = err.source();
        }
        Code::Internal
    }
}

/// The code that `err` itself decides, if it does.
fn decided_code(err: &(dyn std::error::Error + 'static)) -> Option<Code> {
    match err.downcast_ref::<EvalError>()? {
        EvalError::NotFound { .. } => Some(Code::NotFound),
        EvalError::EmptyImage | EvalError::InvalidImage { .. } | EvalError::InvalidTag(_) => {
            Some(Code::InvalidArgument)
        }
        EvalError::TagNotResolved { code, .. } => Some(*code),
        EvalError::Call(call) => Some(call.code()),
        EvalError::PodAnswered { source } => Some(source.code()),
        EvalError::Pod { code, .. } => *code,
        EvalError::DeadlineExceeded { .. } => Some(Code::DeadlineExceeded),
        EvalError::ShuttingDown => Some(Code::Unavailable),
        EvalError::UnknownBuiltin { .. } => Some(Code::FailedPrecondition),
        EvalError::BuiltinPanicked { .. } => Some(Code::Internal),
        EvalError::NotFoundWithRejected { source, .. } | EvalError::NotBuiltIn { source, .. } => {
            Some(source.code())
        }
    }
}

impl From<EvalError> for Status {
    fn from(err: EvalError) -> Status {
        match err {
            // The pod's own status, details and all.
            EvalError::PodAnswered { source } => source,
            err => Status::new(err.code(), err.to_string()),
        }
    }
}

/// A strategy for running functions.
pub trait Evaluator: Send + Sync {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>>;
}
