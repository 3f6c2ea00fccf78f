//! The runner side of the KRM function runtime: Porch's function runner.
//!
//! A request's path: [`server`] (gRPC `evaluator.FunctionEvaluator`) →
//! [`evaluator`] chain (exec, then [`builtin`] functions, then pods) →
//! [`cache`] (one actor per runner hands out pods per image) → a backend
//! (creates the pods: [`backend::process`] children on loopback by default,
//! or the `runner-docker` and `runner-kube` crates' backends) → the pod's
//! `wrapper-server`.
//!
//! - [`runner`]: the runner, from parts built by its caller (the
//!   FunctionConfigs in use, a backend, the runner's own settings);
//! - [`metrics`]: the runner's Prometheus metrics; [`backend::metered`]
//!   records every backend's pod starts and stops in them;
//! - [`tag_resolution`]: `serve`'s request tag constraints, resolved to
//!   the highest matching tag in the image's registry.
//!
//! FunctionConfigs, image references and the `Backend` trait are
//! `runner-core`'s; `eval` and `render` are `krm-kpt`'s. The binary
//! (`bin/function-runner`) composes them for `serve`, `eval` and `render`
//! (docs/architecture.md).

#![forbid(unsafe_code)]

pub mod backend;
pub mod builtin;
pub mod cache;
pub mod evaluator;
pub mod metrics;
pub mod runner;
pub mod server;
pub mod tag_resolution;
