//! The runner side of the KRM function runtime: Porch's function runner.
//!
//! A request's path: [`server`] (gRPC `evaluator.FunctionEvaluator`) →
//! [`evaluator`] chain (exec, then [`builtin`] functions, then pods) → [`cache`] (one actor per
//! runner hands out pods per image) → [`backend`] (creates the pods:
//! [`backend::process`] children on loopback by default) → the pod's
//! `wrapper-server`.
//!
//! - [`config`]: FunctionConfig documents and image matching, their CRD and
//!   the cluster's FunctionConfigs applied live;
//! - [`image`]: image references, split one way for config, backends and pod names;
//! - [`metrics`]: the runner's Prometheus metrics;
//! - [`runner`]: assembles all of the above from options;
//! - [`eval`], [`render`]: `function-runner eval` and `render`, kpt-style
//!   local runs, on the `krm_yaml` crate's tree and package model.

#![forbid(unsafe_code)]

pub mod backend;
pub mod builtin;
pub mod cache;
pub mod evaluator;
pub mod metrics;
pub mod runner;
pub mod server;
