//! The error of a module's function that the catalog's image has and this
//! built-in does not (`bsoup`, `geo`, `html`, `zipfile`): one wording for
//! all of them, which tells the user how to run the real one.

/// The error of a function the catalog's image has and this built-in
/// does not.
pub(super) fn not_built_in(function: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{function} is not available in the built-in starlark function; run the catalog's image with --no-default-builtins"
    )
}
