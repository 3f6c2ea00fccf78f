//! The runner side of the KRM function runtime.
pub mod backend;
pub mod cache;
