//! The backends that create pods ([`runner_core::backend::Backend`]).

pub mod process;
