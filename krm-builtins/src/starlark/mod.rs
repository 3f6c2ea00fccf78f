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
//!   comments, field order, styles and id annotations); changed ones are
//!   written as the catalog's container writes them, every mapping's keys
//!   in yaml.v3's sorted order ([`container_node`]), then get the
//!   comments and field order of the input with their id, as kpt
//!   restores them on a container's output: what the program added (a
//!   new mapping, a new key) stays sorted.
//! - `range`, `len` and `enumerate` take Go's 64-bit ints ([`builtins`]);
//!   an int past 64 bits left in a resource fails as the catalog's
//!   conversion does.
//!
//! The program runs in a sandbox process ([`sandbox`]) when the embedding
//! binary set one up ([`configure`]): an address-space budget, no files,
//! no environment, killed at the call's deadline. Without one (this
//! crate's tests), it runs in this process with the same depth limit.

mod builtins;
mod convert;
mod data;
mod interp;
mod libs;
mod openapi;
pub mod sandbox;
mod source;

use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;
use crate::sdk;
use data::Data;

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`, which set-namespace v0.4
/// writes its through-JSON numbers with too.
pub(crate) use data::go_float;

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
    let data = |n: &Node| Data::from_node(n);
    let items: Result<Vec<Data>, String> = rl.items.iter().map(data).collect();
    let function_config = rl.function_config.as_ref().map(data).transpose();
    let (items, function_config) = match (items, function_config) {
        (Ok(i), Ok(f)) => (i, f),
        (Err(e), _) | (_, Err(e)) => {
            rl.results.push(FnResult::error(e));
            return Ok(false);
        }
    };
    let request = interp::Request {
        name: config.name,
        source: config.source,
        items,
        function_config,
        max_depth: 0,
    };
    let ran = sandbox::execute(&request, ctx)?;
    rl.log.push_str(&ran.stderr);
    match ran.outcome {
        Ok(output) => {
            rl.items = restore(output, request.items, std::mem::take(&mut rl.items));
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
        // `params` decodes into a map (Go's `map[string]interface{}`).
        if let Some(p) = sdk::value_index(fc, "params").and_then(|i| fc.content.get(i)) {
            if p.kind != Kind::Mapping && p.tag != "!!null" {
                return Err(format!(
                    "yaml: unmarshal errors:\n  line {}: cannot unmarshal {} into map[string]interface {{}}",
                    p.line,
                    if p.kind == Kind::Sequence { "!!seq".to_owned() } else { p.tag.to_string() }
                ));
            }
        }
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

/// What names a resource: apiVersion, kind, namespace, name.
fn who(d: &Data) -> [Option<&str>; 4] {
    [
        d.get_str(&["apiVersion"]),
        d.get_str(&["kind"]),
        d.get_str(&["metadata", "namespace"]),
        d.get_str(&["metadata", "name"]),
    ]
}

/// The id of an item.
fn id_of(d: &Data) -> Option<&str> {
    IDS.iter()
        .find_map(|k| d.get_str(&["metadata", "annotations", k]))
}

/// The output items: each one the program left equal (as data) to the
/// input it came from is that input's node, as it came; the others are
/// new nodes with that input's comments and field order (kyaml's
/// `copyCommentsAndSyncOrder`). An output item comes from the input with
/// its id, else, with no ids at all, from the input at its position when
/// the count did not change and that input names the same resource
/// (apiVersion, kind, namespace, name: a program may reorder them).
fn restore(output: Vec<Data>, input: Vec<Data>, nodes: Vec<Node>) -> Vec<Node> {
    use krm_yaml::package::kyaml;
    let by_position = output.len() == input.len() && input.iter().all(|d| id_of(d).is_none());
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    let mut by_id: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (n, d) in input.iter().enumerate() {
        if let Some(id) = id_of(d) {
            by_id.entry(id).or_insert(n);
        }
    }
    output
        .into_iter()
        .enumerate()
        .map(|(pos, item)| {
            let from = if by_position {
                input.get(pos).filter(|d| who(d) == who(&item)).map(|_| pos)
            } else {
                id_of(&item).and_then(|id| by_id.get(id).copied())
            };
            let Some(from) = from else {
                return container_node(item);
            };
            let same = input.get(from) == Some(&item);
            let Some(slot) = nodes.get_mut(from) else {
                return container_node(item);
            };
            // The first item equal to its input takes that input's node; a
            // copy the program made gets the comments below.
            if same {
                if let Some(node) = slot.take() {
                    return node;
                }
            }
            let mut new = container_node(item);
            if let Some(original) = slot.as_ref() {
                kyaml::copy_comments(original, &mut new);
                kyaml::sync_order(original, &mut new);
            }
            new
        })
        .collect()
}

/// An item as the catalog's container writes it: every mapping's keys
/// sorted as yaml.v3 sorts a Go map's ([`Data::sort_go_keys`]), those of
/// the input's mappings too. kpt then puts the fields of a resource it
/// knows (by its id) back in the input's order ([`restore`]'s
/// `sync_order`, kyaml's `SyncOrder`): a mapping or field the program
/// added (a new container in `containers`, a `labels` under `metadata`)
/// keeps the sorted order, so `{"name": ..., "image": ...}` is written
/// `image` first.
fn container_node(mut item: Data) -> Node {
    item.sort_go_keys();
    item.to_node()
}

#[cfg(test)]
mod tests;
