//! `starlark` (the catalog's `functions/go/starlark`): runs the user's
//! Starlark program over the ResourceList.
//!
//! - config: `StarlarkRun` of group `fn.kpt.dev` (any version, as the
//!   catalog's `IsGroupKind` reads it) with `source` and `params`, or a
//!   ConfigMap whose `data.source` is the program (every `data` key is also
//!   a param; `eval -- source=... k=v` gives that ConfigMap). The catalog's
//!   messages for a missing config, another kind and an empty source.
//! - the program sees `ctx.resource_list` (`apiVersion`, `kind`, `items`,
//!   `functionConfig`; what it leaves in `items` is the output),
//!   `ctx.open_api` (the Kubernetes OpenAPI v2 document, [`openapi`]) and
//!   `ctx.environment` (empty: a function has no environment here; the
//!   catalog's container shows its own). Go Starlark's dialect as the
//!   catalog sets it: `set`, recursion, `while`, top-level statements,
//!   global reassignment ([`source`] rewrites `while`, which the Rust
//!   interpreter does not parse). `print` goes to stderr. `load()` knows
//!   the catalog's modules ([`libs`]).
//! - a failure (`fail()`, a syntax or runtime error, a budget) is the
//!   catalog's: one error result with the message, stderr `failed to
//!   evaluate function: error: function failure`, exit code 1, the items
//!   as they came.
//! - resources the program did not change come back as they came (their
//!   comments, field order, styles and id annotations); changed ones get
//!   the comments and field order of the input with their id, as kpt
//!   restores them on a container's output.
//!
//! The program runs in a sandbox process ([`sandbox`]) when the embedding
//! binary set one up ([`configure`]): an address-space budget, no files,
//! no environment, killed at the call's deadline. Without one (this
//! crate's tests), it runs in this process with the same depth limit.

mod interp;
mod libs;
mod openapi;
pub mod sandbox;
mod source;

use krm_yaml::{Kind, Node};

use crate::result::FnResult;
use crate::{sdk, Context, ResourceList, Stop};

pub use sandbox::{configure, sandbox_main, Limits, SANDBOX_ARG};

const GROUP: &str = "fn.kpt.dev";
const KIND: &str = "StarlarkRun";
const DEFAULT_NAME: &str = "starlark-function-run";

/// The program and its name, read from the functionConfig.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    name: String,
    source: String,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    sdk::check_input(rl)?;
    let passed = process(rl, ctx)?;
    sdk::sort_items(rl);
    if passed {
        Ok(())
    } else {
        Err(sdk::failed("error: function failure"))
    }
}

/// `starlark.Process`: whether it passed (on failure, one error result).
fn process(rl: &mut ResourceList, ctx: &Context) -> Result<bool, Stop> {
    let config = match read_config(rl.function_config.as_ref()) {
        Ok(c) => c,
        Err(msg) => {
            rl.results.push(FnResult::error(msg));
            return Ok(false);
        }
    };
    let request = interp::Request {
        name: config.name,
        source: config.source,
        items: rl.items.clone(),
        function_config: rl.function_config.clone(),
        max_depth: 0,
    };
    let ran = sandbox::execute(request, ctx)?;
    rl.log.push_str(&ran.stderr);
    match ran.outcome {
        Ok(items) => {
            rl.items = restore(items, std::mem::take(&mut rl.items));
            Ok(true)
        }
        Err(msg) => {
            rl.results.push(FnResult::error(msg));
            Ok(false)
        }
    }
}

/// `StarlarkRun.Config`.
fn read_config(fc: Option<&Node>) -> Result<Config, String> {
    let Some(fc) = fc.filter(|n| !(n.kind == Kind::Mapping && n.content.is_empty())) else {
        return Err("FunctionConfig is missing. Expect `ConfigMap` or `StarlarkRun`".into());
    };
    let (api_version, kind) = (sdk::api_version(fc), sdk::kind(fc));
    let group = match api_version.rsplit_once('/') {
        Some((g, _)) => g,
        None => "",
    };
    let (name, source) = if group.is_empty() && kind == "ConfigMap" {
        let data = crate::config::config_map_data(fc)?;
        let source = data
            .iter()
            .find(|(k, _)| k == "source")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        (sdk::name(fc), source)
    } else if group == GROUP && kind == KIND {
        let source = match sdk::value_index(fc, "source").and_then(|i| fc.content.get(i)) {
            None => String::new(),
            Some(n) if n.kind == Kind::Scalar && n.tag != "!!null" => n.value.to_string(),
            Some(n) if n.kind == Kind::Scalar => String::new(),
            Some(n) => {
                return Err(format!(
                    "yaml: unmarshal errors:\n  line {}: cannot unmarshal !!{} into string",
                    n.line,
                    if n.kind == Kind::Mapping {
                        "map"
                    } else {
                        "seq"
                    }
                ))
            }
        };
        (sdk::name(fc), source)
    } else {
        return Err(format!(
            "`functionConfig` must be either /v1, Kind=ConfigMap or {GROUP}/v1alpha1, Kind={KIND}, but we got: {}",
            gvk_string(&api_version, &kind)
        ));
    };
    if source.is_empty() {
        return Err("`source` must not be empty".into());
    }
    let name = if name.is_empty() {
        DEFAULT_NAME.to_owned()
    } else {
        name
    };
    Ok(Config { name, source })
}

/// apimachinery's `GroupVersionKind.String()` of
/// `FromAPIVersionAndKind`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) if !v.contains('/') => (g, v),
        Some(_) => ("", api_version),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// kpt's ids, as it sets them before a function runs.
const IDS: [&str; 2] = ["internal.config.kubernetes.io/id", "config.k8s.io/id"];

/// The output items, each one the program left equal (as data) to the
/// input it came from given back as it came; the others get that input's
/// comments and field order (kyaml's `copyCommentsAndSyncOrder`).
/// An output item comes from the input with its id, else, with no ids at
/// all, from the input at its position when the count did not change.
fn restore(output: Vec<Node>, input: Vec<Node>) -> Vec<Node> {
    use krm_yaml::package::kyaml;
    let id_of = |n: &Node| {
        IDS.iter()
            .find_map(|k| kyaml::annotation(n, k))
            .map(str::to_owned)
    };
    let by_position = output.len() == input.len() && input.iter().all(|n| id_of(n).is_none());
    let ids: Vec<Option<String>> = input.iter().map(id_of).collect();
    let mut input: Vec<Option<Node>> = input.into_iter().map(Some).collect();
    output
        .into_iter()
        .enumerate()
        .map(|(pos, mut item)| {
            let from = if by_position {
                Some(pos)
            } else {
                id_of(&item).and_then(|id| ids.iter().position(|i| i.as_deref() == Some(&id)))
            };
            let Some(from) = from else { return item };
            let Some(slot) = input.get_mut(from) else {
                return item;
            };
            let same = slot.as_ref().is_some_and(|original| {
                matches!(
                    (krm_yaml::value::to_value(original), krm_yaml::value::to_value(&item)),
                    (Ok(a), Ok(b)) if a == b
                )
            });
            if same {
                // Taken: a second output item with this id is a copy the
                // program made, which keeps only what it holds.
                if let Some(orig) = slot.take() {
                    return orig;
                }
            }
            let Some(original) = slot.as_ref() else {
                return item;
            };
            kyaml::copy_comments(original, &mut item);
            kyaml::sync_order(original, &mut item);
            item
        })
        .collect()
}

#[cfg(test)]
mod tests;
