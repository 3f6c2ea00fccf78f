//! The backends that create pods ([`runner_core::backend::Backend`]).

pub mod metered;
pub mod process;
