//! The runner's nouns, shared by the runner and its backends, with no
//! backend in them.
//!
//! - [`config`]: FunctionConfig documents, their parsing and validation, and
//!   the [`config::ImageIndex`] that answers which executor serves a
//!   requested image and tag;
//! - [`image`]: image references, split one way for config, backends and pod
//!   names;
//! - [`backend`]: the [`backend::Backend`] trait that creates and deletes the
//!   "pods" serving one function image each, the pod's nouns
//!   ([`backend::PodSpec`], [`backend::StopReason`], ...), and the idle pools
//!   a backend can be wrapped in ([`backend::pool`]).
//!
//! The runner (`function-runner`) builds on these; each backend
//! (`function-runner`'s process backend, `runner-docker`, `runner-kube`)
//! implements [`backend::Backend`] against them, and so never depends on the
//! runner.

#![forbid(unsafe_code)]

pub mod backend;
pub mod config;
pub mod image;
