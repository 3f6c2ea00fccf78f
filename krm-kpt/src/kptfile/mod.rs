//! A Kptfile as kpt v1.0.0-beta.67 reads, checks and writes it.
//!
//! Read (kpt's `ReadKptfile`): the schema version (`checkKptfileVersion`),
//! then a strict decode into its `v1.KptFile` type (yaml.v3 with
//! `KnownFields`: every unknown field, repeated key and value of the wrong
//! kind is an error, each with its line). Checked before render (its
//! `Validate`, [`validate`]): each pipeline function names exactly one of
//! `image` and `exec`, a well-formed image, not both `configMap` and
//! `configPath`, and a `configPath` that is a KRM resource of the package.
//! The messages are kpt's, whole (kpt prints them as they are, not after
//! `error: `). Written back by `eval --save` ([`save`]) as kpt writes it:
//! through its Go types, so the file comes out as yaml.v3 marshals them.

mod read;
mod save;
mod schema;
mod status;
mod validate;

pub use save::{save, FnType, NewFunction};
pub use status::{write_render_status, RenderReport, StepStatus};
pub use validate::check_image_reference;
pub(crate) use validate::config_file as check_config_file;

use std::path::Path;

use krm_yaml::package::kyaml;
use krm_yaml::Node;

pub use read::read;

/// Checks the Kptfile of the package at `dir` (absolute, as kpt names it)
/// as render does, `node` being its first document: [`read`], then
/// [`validate`]. `Err`: kpt's message, whole.
pub fn check(dir: &Path, node: &Node) -> Result<(), String> {
    read(dir, node)?;
    validate(dir, node)
}

/// kpt's `KptFile.Validate` on a Kptfile that [`read`] accepted: each
/// pipeline function, mutators first, as [`validate::function`] checks
/// it. `Err`: kpt's message, whole.
pub fn validate(dir: &Path, node: &Node) -> Result<(), String> {
    let pipeline = kyaml::field(node, "pipeline");
    for list in ["mutators", "validators"] {
        let functions = pipeline.and_then(|p| kyaml::field(p, list));
        for (i, f) in functions.map_or(&[][..], |l| &l.content).iter().enumerate() {
            validate::function(dir, f, list, i)?;
        }
    }
    Ok(())
}
