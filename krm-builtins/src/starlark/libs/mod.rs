//! What `load()` finds: the modules the catalog's loader knows
//! (`third_party/.../starlark/loadlib.go`: starlib's, Go Starlark's
//! `json`, `math` and `time`, and `krmfn.star`), under the same names
//! and symbols:
//!
//! | load name              | symbol    | here                                 |
//! |------------------------|-----------|--------------------------------------|
//! | `bsoup.star`           | `bsoup`   | loads; its function fails ([`bsoup`]) |
//! | `encoding/base64.star` | `base64`  | [`base64`]                           |
//! | `encoding/csv.star`    | `csv`     | [`csv`]                              |
//! | `encoding/json.star`   | `json`    | [`json`]                             |
//! | `encoding/yaml.star`   | `yaml`    | [`yaml`]                             |
//! | `geo.star`             | `geo`     | loads; its functions fail ([`geo`])  |
//! | `hash.star`            | `hash`    | [`hash`]                             |
//! | `html.star`            | `html`    | loads; the function fails ([`html`]) |
//! | `http.star`            | `http`    | loads; no network ([`http`])         |
//! | `math.star`            | `math`    | [`math`]                             |
//! | `re.star`              | `re`      | [`re`]                               |
//! | `time.star`            | `time`    | [`time`]                             |
//! | `xlsx.star`            | `xlsx`    | loads; its function fails ([`xlsx`]) |
//! | `zipfile.star`         | `ZipFile` | loads; the function fails ([`zipfile`]) |
//! | `krmfn.star`           | `krmfn`   | [`krmfn`]                            |
//!
//! A module that would reach outside the sandbox (`http`) loads, and its
//! calls fail saying functions have no network; the ones built on Go
//! libraries not written again here load, and their calls fail saying
//! so. Any other name loads as an empty module, as the catalog's loader
//! returns none (so naming a symbol from it fails).
//!
//! Values with methods (`re.compile`'s patterns, `time`'s times) are
//! structs whose methods are closures, made by a few lines of Starlark
//! run when the module loads (a module's `PRELUDE`): this crate forbids
//! `unsafe`, which a Rust type of Starlark value needs.

use starlark::environment::{FrozenModule, GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::{Evaluator, FileLoader};
use starlark::starlark_module;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::Value;

mod base64;
mod bsoup;
mod csv;
mod geo;
mod hash;
mod html;
mod http;
mod json;
mod krmfn;
mod math;
mod re;
mod time;
mod unbuilt;
mod xlsx;
mod yaml;
mod zipfile;

/// One module: its load name, the Rust functions it fills the globals
/// with, and the Starlark that defines its symbols from them ("": the
/// globals are the module).
struct Lib {
    name: &'static str,
    fill: fn(&mut GlobalsBuilder),
    prelude: &'static str,
}

const fn lib(name: &'static str, fill: fn(&mut GlobalsBuilder)) -> Lib {
    Lib {
        name,
        fill,
        prelude: "",
    }
}

/// The catalog's modules.
const MODULES: &[Lib] = &[
    lib("krmfn.star", krmfn::module),
    lib("encoding/json.star", json::module),
    lib("encoding/yaml.star", yaml::module),
    lib("encoding/base64.star", base64::module),
    lib("encoding/csv.star", csv::module),
    lib("hash.star", hash::module),
    Lib {
        name: "re.star",
        fill: re::module,
        prelude: re::PRELUDE,
    },
    lib("math.star", math::module),
    Lib {
        name: "time.star",
        fill: time::module,
        prelude: time::PRELUDE,
    },
    lib("http.star", http::module),
    lib("bsoup.star", bsoup::module),
    lib("geo.star", geo::module),
    lib("html.star", html::module),
    lib("xlsx.star", xlsx::module),
    lib("zipfile.star", zipfile::module),
];

pub(super) struct Loader;

impl FileLoader for Loader {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        let Some(lib) = MODULES.iter().find(|l| l.name == path) else {
            return freeze_globals(GlobalsBuilder::new());
        };
        if lib.prelude.is_empty() {
            return freeze_globals(GlobalsBuilder::new().with(lib.fill));
        }
        let globals = GlobalsBuilder::extended_by(&[LibraryExtension::StructType])
            .with(lib.fill)
            .build();
        let ast = AstModule::parse(lib.name, lib.prelude.to_owned(), &Dialect::Standard)?;
        Module::with_temp_heap(|module| {
            {
                let mut eval = Evaluator::new(&module);
                eval.eval_module(ast, &globals)?;
            }
            module
                .freeze()
                .map_err(|e| starlark::Error::new_other(anyhow_msg(format!("{e:?}"))))
        })
    }
}

fn freeze_globals(builder: GlobalsBuilder) -> starlark::Result<FrozenModule> {
    FrozenModule::from_globals(&builder.build())
        .map_err(|e| starlark::Error::new_other(anyhow_msg(format!("{e:?}"))))
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

#[cfg(test)]
mod tests;
