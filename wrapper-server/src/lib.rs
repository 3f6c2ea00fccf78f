//! The in-pod function server behind the `wrapper-server` binary.
//!
//! A call's path: [`server`] (the gRPC server) → `stream` (EvaluateFunction
//! read as it arrives) or `service` (the buffered path) →
//! [`krm_fn::call`] (admission, deadline, answer) → [`krm_fn::exec`] (the
//! function's process).
//!
//! - [`metrics`]: the wrapper's Prometheus metrics;
//! - [`install`]: the init container's self-install;
//! - [`cp`]: a minimal `cp`, so Porch's `cp -a` init template works with no shell.

pub mod conn;
pub mod cp;
mod gzip;
pub mod install;
pub mod metrics;
pub mod server;
mod service;
mod stream;
