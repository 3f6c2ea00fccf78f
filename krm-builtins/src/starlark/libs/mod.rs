//! What `load()` finds: the modules the catalog's loader knows
//! (`third_party/.../starlark/loadlib.go`: starlib's, Go Starlark's
//! `json`, `math` and `time`, and `krmfn.star`), under the same names
//! and symbols. A module that would reach outside the sandbox (`http`)
//! loads, and its calls fail saying functions have no network. Any other
//! name loads as an empty module, as the catalog's loader returns none
//! (so naming a symbol from it fails).

use starlark::environment::{FrozenModule, GlobalsBuilder};
use starlark::eval::FileLoader;
use starlark::starlark_module;
use starlark::values::Value;

mod json;
mod krmfn;

/// The catalog's module names and the function that fills each.
const MODULES: &[(&str, fn(&mut GlobalsBuilder))] = &[
    ("krmfn.star", krmfn::module),
    ("encoding/json.star", json::module),
];

pub(super) struct Loader;

impl FileLoader for Loader {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        let globals = match MODULES.iter().find(|(name, _)| *name == path) {
            Some((_, fill)) => GlobalsBuilder::new().with(fill).build(),
            None => GlobalsBuilder::new().build(),
        };
        FrozenModule::from_globals(&globals)
            .map_err(|e| starlark::Error::new_other(anyhow_msg(format!("{e:?}"))))
    }
}

fn anyhow_msg(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// `_krm_while` of [`super::source`]: a rewritten `while` loop's
/// condition, and its end past the loop's range.
#[starlark_module]
pub(super) fn while_guard(builder: &mut GlobalsBuilder) {
    fn _krm_while<'v>(
        #[starlark(require = pos)] n: i32,
        #[starlark(require = pos)] cond: Value<'v>,
    ) -> anyhow::Result<bool> {
        if n >= i32::MAX - 1 {
            return Err(anyhow::anyhow!(
                "a while loop went round {n} times, the most one may"
            ));
        }
        Ok(cond.to_bool())
    }
}
