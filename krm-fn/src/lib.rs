//! What the binaries share for running a KRM function call.
//!
//! - [`exec`]: runs one function process per call: stdin in, stdout and
//!   stderr out, every process it started killed when the call ends;
//! - [`results`]: the function's stdout checked as a ResourceList, and its
//!   structured results;
//! - [`call`]: one EvaluateFunction call: admission, deadline, the answer
//!   and its errors, and the one mapping from errors to gRPC statuses;
//! - [`drain`]: the graceful drain of calls in progress;
//! - [`server`]: `evaluator.FunctionEvaluator` and gRPC health on one port;
//! - [`metrics`]: the Prometheus endpoint;
//! - [`duration`]: Go's `time.Duration` syntax, for flags and configs.
//!
//! All but `duration` need the default `runtime` feature.

#![forbid(unsafe_code)]

#[cfg(feature = "runtime")]
pub mod call;
#[cfg(feature = "runtime")]
pub mod drain;
pub mod duration;
#[cfg(feature = "runtime")]
pub mod exec;
#[cfg(feature = "runtime")]
pub mod metrics;
#[cfg(feature = "runtime")]
pub mod results;
#[cfg(feature = "runtime")]
pub mod server;
