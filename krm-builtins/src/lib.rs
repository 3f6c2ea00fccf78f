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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use krm_yaml::Node;

mod apply_replacements;
mod apply_setters;
mod catalog;
pub mod config;
mod create_setters;
mod ensure_name_substring;
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

pub use result::{FnResult, Severity};

/// What a function reads and what it leaves: the ResourceList's fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceList {
    /// `items`: each a resource's mapping node (not a document node).
    pub items: Vec<Node>,
    /// `functionConfig`, a mapping node, when the caller sent one.
    pub function_config: Option<Node>,
    /// `results` the function adds.
    pub results: Vec<FnResult>,
    /// What the catalog's binary writes on stderr (its log), also on
    /// success.
    pub log: String,
}

/// Why a function stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The function failed as the catalog's binary fails: exit code 1,
    /// this text on stderr (after [`ResourceList::log`]), the ResourceList
    /// as it stands (with its results) on stdout.
    #[error("{0}")]
    Failed(String),
    /// The call's deadline passed or its caller went away
    /// ([`Context::check`]); nothing it did counts.
    #[error("cancelled")]
    Cancelled,
}

/// A call's deadline and cancellation, checked by functions between
/// resources.
#[derive(Debug, Clone, Default)]
pub struct Context {
    deadline: Option<Instant>,
    cancelled: Option<Arc<AtomicBool>>,
}

impl Context {
    /// No deadline, never cancelled.
    pub fn new() -> Context {
        Context::default()
    }

    /// Stops the call once `deadline` has passed.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Context {
        self.deadline = deadline;
        self
    }

    /// Stops the call once `flag` is set (by the caller that gave up).
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Context {
        self.cancelled = Some(flag);
        self
    }

    /// `Err(Stop::Cancelled)` once the call should stop.
    pub fn check(&self) -> Result<(), Stop> {
        let late = self.deadline.is_some_and(|d| Instant::now() >= d);
        let gone = self
            .cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed));
        if late || gone {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A function's entry point.
pub type Run = fn(&mut ResourceList, &Context) -> Result<(), Stop>;

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
