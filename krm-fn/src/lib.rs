//! What both binaries share for running a KRM function call.

#![forbid(unsafe_code)]

pub mod duration;
