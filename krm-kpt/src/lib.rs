//! kpt's package model and pipeline, for `function-runner eval` and
//! `render` (kpt's `fn eval` and `fn render`), byte for byte on files, lines
//! and exit codes.
//!
//! - [`eval`]: one function over a package or a ResourceList: the input read
//!   and annotated, the function run, kpt's lines, the output restored and
//!   written, the results file;
//! - [`render`]: a package's Kptfile pipelines, subpackages first;
//! - [`kptfile`]: the Kptfile checked as kpt checks it, and a function added
//!   to its pipeline (`eval --save`);
//! - [`select`]: kpt's `--match-*`/`--exclude-*` and a pipeline step's
//!   `selectors`/`exclude`;
//! - [`image`]: image names as kpt writes and runs them.
//!
//! An `image:` function runs through a [`krm_fn::evaluator::Evaluator`]
//! handed in by the caller (the runner's chain), or built in
//! ([`krm_builtins`]); this crate never sees the runner's cache or a backend.

#![forbid(unsafe_code)]

pub mod eval;
pub mod image;
pub mod kptfile;
pub mod render;
pub mod select;
pub mod tag;
