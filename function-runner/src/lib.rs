//! The runner side of the KRM function runtime.
pub mod backend;
pub mod cache;
pub mod config;
pub mod evaluator;
pub mod runner;
pub mod server;
