//! The in-pod function server: the library behind the `wrapper-server`
//! binary, also used by the function runner.
//!
//! - [`exec`]: runs one function process per call (shared with the runner's
//!   exec evaluator and process backend);
//! - [`results`]: checks stdout as a ResourceList and formats its results;
//! - [`server`]: `evaluator.FunctionEvaluator` + health on one port, drain;
//!   `stream` serves EvaluateFunction with the request streamed into the
//!   function;
//! - [`metrics`]: Prometheus metrics and their HTTP endpoint;
//! - [`install`]: the init container's self-install;
//! - [`cp`]: a minimal `cp`, so Porch's `cp -a` init template works with no shell.

pub mod cp;
pub mod exec;
pub mod install;
pub mod metrics;
pub mod results;
pub mod server;
mod stream;
