//! `remove-local-config-resources`: drops every resource whose
//! `config.kubernetes.io/local-config` annotation is "true" (any case), and
//! reports what it dropped.
//!
//! Follows kptdev/krm-functions-catalog at commit 76fe3817f949
//! (`functions/go/remove-local-config-resources/main.go`), run by kyaml's
//! function framework at kyaml v0.12.0 (`fn/framework`, `yaml/rnode.go`):
//!
//! - items that are null or empty are dropped too (`IsNilOrEmpty`);
//! - the annotation and the name are read as kyaml reads them (a scalar's
//!   text, whatever its tag; nothing when `metadata` or `annotations` is
//!   not a mapping);
//! - results: "Number of resources pruned: N" (info) followed by one info
//!   per resource dropped ("Resource name: [name]", with the file it came
//!   from: `internal.config.kubernetes.io/path`, else
//!   `config.kubernetes.io/path`), or one warning when nothing was
//!   dropped. The function config is not read; it never fails.
//!
//! Departure: kyaml v0.12.0's framework writes its results as one mapping,
//! `results: {name: remove-local-config-resources, items: [...]}` (the
//! pre-v1 result format); here the items are the ResourceList's results,
//! each with the same message, severity and file.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::{File, FnResult};

#[cfg(test)]
mod tests;

const LOCAL_CONFIG: &str = "config.kubernetes.io/local-config";

/// `IsNilOrEmpty`.
fn nil_or_empty(n: &Node) -> bool {
    n.tag == kyaml::NULL_TAG
        || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
        || *n == Node::default()
}

/// `getMetaData`: `metadata`, unless it is null or empty.
fn metadata(o: &Node) -> Option<&Node> {
    if o.kind != Kind::Mapping {
        return None;
    }
    kyaml::field(o, "metadata").filter(|m| !nil_or_empty(m))
}

/// `GetAnnotations()[key]`: the last entry of that key, as its text.
fn annotation(o: &Node, key: &str) -> String {
    let Some(a) = metadata(o)
        .and_then(|m| (m.kind == Kind::Mapping).then(|| kyaml::field(m, "annotations")))
        .flatten()
        .filter(|a| !nil_or_empty(a) && a.kind == Kind::Mapping)
    else {
        return String::new();
    };
    a.content
        .chunks_exact(2)
        .filter_map(|kv| match kv {
            [k, v] if kyaml::value_of(Some(k)) == key => Some(kyaml::value_of(Some(v))),
            _ => None,
        })
        .next_back()
        .unwrap_or("")
        .to_owned()
}

/// `GetName`.
fn name(o: &Node) -> String {
    metadata(o)
        .filter(|m| m.kind == Kind::Mapping)
        .and_then(|m| kyaml::field(m, "name"))
        .filter(|n| !nil_or_empty(n))
        .map(|n| kyaml::value_of(Some(n)).to_owned())
        .unwrap_or_default()
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let mut kept = Vec::with_capacity(rl.items.len());
    let mut pruned = Vec::new();
    for node in std::mem::take(&mut rl.items) {
        ctx.check()?;
        if nil_or_empty(&node) {
            continue;
        }
        if annotation(&node, LOCAL_CONFIG).to_lowercase() != "true" {
            kept.push(node);
            continue;
        }
        let mut path = annotation(&node, "internal.config.kubernetes.io/path");
        if path.is_empty() {
            path = annotation(&node, "config.kubernetes.io/path");
        }
        let mut r = FnResult::info(format!("Resource name: [{}]", name(&node)));
        if !path.is_empty() {
            r.file = Some(File { path, index: 0 });
        }
        pruned.push(r);
    }
    rl.items = kept;
    if pruned.is_empty() {
        rl.results.push(FnResult::warning(
            "Found no resources to prune with the local config annotation",
        ));
    } else {
        rl.results.push(FnResult::info(format!(
            "Number of resources pruned: {}",
            pruned.len()
        )));
        rl.results.append(&mut pruned);
    }
    Ok(())
}
