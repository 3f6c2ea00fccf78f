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
pub mod container;
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
mod set_project_id;
mod setters;
pub mod starlark;
#[cfg(test)]
mod test_support;
mod upsert_resource;
pub mod versions;

pub use function::{Builtin, Context, ResourceList, Run, Stop};
pub use result::{FnResult, Severity};

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
        name: "set-project-id",
        run: set_project_id::run,
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

/// The registries whose images of a built-in name run built-in by
/// default: kpt's (`gcr.io/kpt-fn`, where kpt expands bare names) and the
/// catalog's current one.
pub const CATALOG_PREFIXES: [&str; 2] = ["gcr.io/kpt-fn/", "ghcr.io/kptdev/krm-functions-catalog/"];

/// The function name of a catalog image (`gcr.io/kpt-fn/set-labels:v0.2`
/// → `set-labels`; bare `set-labels@sha256:…` → `set-labels`), or `None`
/// for an image of another registry or path.
pub fn catalog_name(image: &str) -> Option<&str> {
    let path = image.split_once('@').map_or(image, |(p, _)| p);
    // A tag follows the last `:` after the last `/` (a registry's port
    // comes before a `/`).
    let path = match path.rfind(':') {
        Some(i) if !path[i..].contains('/') => &path[..i],
        _ => path,
    };
    let name = CATALOG_PREFIXES
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .unwrap_or(path);
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The built-in function a catalog image names ([`catalog_name`]), if
/// there is one.
pub fn for_catalog_image(image: &str) -> Option<&'static Builtin> {
    catalog_name(image).and_then(find)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_images_are_named_by_their_last_segment() {
        for (image, name) in [
            ("set-labels", Some("set-labels")),
            ("set-labels:v0.2", Some("set-labels")),
            ("gcr.io/kpt-fn/set-labels:v0.2.0", Some("set-labels")),
            ("gcr.io/kpt-fn/set-labels@sha256:0123", Some("set-labels")),
            (
                "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest",
                Some("set-labels"),
            ),
            ("example.com/fns/set-labels:v1", None),
            ("gcr.io/kpt-fn/nested/set-labels:v1", None),
            ("localhost:5000/set-labels", None),
            ("gcr.io/kpt-fn/", None),
            ("", None),
        ] {
            assert_eq!(catalog_name(image), name, "{image}");
        }
    }
}
