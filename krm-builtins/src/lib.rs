//! The KRM functions catalog's functions (kptdev/krm-functions-catalog,
//! `functions/go/<name>`), written again in Rust and run in-process: a
//! function is `ResourceList in → ResourceList out (+ results)` on the
//! [`krm_yaml`] tree, with no process and no serialisation in between.
//!
//! Each module is one function; [`find`] looks one up by the catalog's
//! name. A function reads [`ResourceList::function_config`] in every form
//! the catalog accepts (a ConfigMap, its own kind, the `function-input`
//! ConfigMap of `eval -- key=value`), changes [`ResourceList::items`] and
//! appends to [`ResourceList::results`], as the catalog's binary would
//! leave them in the ResourceList it writes; a failure ([`Stop::Failed`])
//! is the catalog's exit code 1 with its stderr.
//!
//! Input is untrusted (a gRPC caller's bytes): no function may panic on
//! any tree (release builds abort on panic), so this crate denies the
//! lints that find panic paths. A long call checks [`Context::check`] per
//! resource, so that a deadline or a cancelled caller stops it.

#![forbid(unsafe_code)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

mod apply_replacements;
mod apply_setters;
mod catalog;
pub mod config;
mod create_setters;
mod ensure_name_substring;
mod function;
mod list_setters;
mod remove_local_config_resources;
pub mod result;
mod sdk;
mod search_replace;
mod set_annotations;
mod set_image;
mod set_labels;
mod set_namespace;
mod setters;
pub mod starlark;
#[cfg(test)]
mod test_support;
mod upsert_resource;

pub use function::{Context, ResourceList, Run, Stop};
pub use result::{FnResult, Severity};

/// One built-in function.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The catalog's name (the image's last path segment).
    pub name: &'static str,
    run: Run,
}

impl Builtin {
    /// Runs the function over `rl`. On [`Stop::Failed`] the ResourceList
    /// holds what the catalog's binary would still write (its results).
    pub fn run(&self, rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
        ctx.check()?;
        (self.run)(rl, ctx)
    }
}

/// Every built-in function, by name.
pub const ALL: &[Builtin] = &[
    Builtin {
        name: "apply-replacements",
        run: apply_replacements::run,
    },
    Builtin {
        name: "apply-setters",
        run: apply_setters::run,
    },
    Builtin {
        name: "create-setters",
        run: create_setters::run,
    },
    Builtin {
        name: "ensure-name-substring",
        run: ensure_name_substring::run,
    },
    Builtin {
        name: "list-setters",
        run: list_setters::run,
    },
    Builtin {
        name: "remove-local-config-resources",
        run: remove_local_config_resources::run,
    },
    Builtin {
        name: "search-replace",
        run: search_replace::run,
    },
    Builtin {
        name: "set-annotations",
        run: set_annotations::run,
    },
    Builtin {
        name: "set-image",
        run: set_image::run,
    },
    Builtin {
        name: "set-labels",
        run: set_labels::run,
    },
    Builtin {
        name: "set-namespace",
        run: set_namespace::run,
    },
    Builtin {
        name: "starlark",
        run: starlark::run,
    },
    Builtin {
        name: "upsert-resource",
        run: upsert_resource::run,
    },
];

/// The built-in function of this name (`set-namespace`), if there is one.
pub fn find(name: &str) -> Option<&'static Builtin> {
    ALL.iter().find(|b| b.name == name)
}
