//! `upsert-resource`: the `functionConfig` is a resource (or a `List` of
//! them, its `items`); each one replaces every item of the same group,
//! kind, name and namespace, or is appended when no item matches.
//!
//! Follows kptdev/krm-functions-catalog at commit
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/upsert-resource/{main.go,upsertresource/upsert_resource.go}`,
//! run by kyaml v0.19.0's `fn/framework` (`command.Build`,
//! `framework.Execute`), with kyaml's `RNode.GetMeta`, `SetAnnotations`
//! and `FieldSetter`:
//!
//! - The match (`IsSameResource`): the group of `apiVersion` (not its
//!   version), `kind`, `metadata.name` and `metadata.namespace` are equal,
//!   and, when the resource has a `config.kubernetes.io/target-path`
//!   annotation, it equals the item's `internal.config.kubernetes.io/path`.
//!   Items annotated `config.kubernetes.io/function` or
//!   `config.k8s.io/function` (function configs) are never replaced.
//! - A replaced item is a copy of the resource (its comments and styles)
//!   whose annotations are the resource's, plus the matched item's
//!   `internal.config.kubernetes.io/path` and `.../index` (written `""`
//!   when the item had none, as the catalog does), without the function
//!   and target-path annotations, rewritten as kyaml's `SetAnnotations`
//!   writes them: sorted by key, at the end of `metadata`.
//! - An appended resource loses the function, path and index annotations
//!   and takes its `target-path` as its path.
//! - Errors (`failed to upsert resource: ...`, e.g. `missing Resource
//!   metadata` for a resource or item without apiVersion, kind or
//!   metadata) stop the function: no results, the items as far as they
//!   were changed, and the message written twice on stderr (once by
//!   `command.Build`, without a newline, once by `main` with one), exit 1.
//!
//! Releases: answers as master, and as v0.2.0 (`upsert-resource/v0.2.0`,
//! 1420cc5e, kyaml v0.10.21) when [`Context::release`] names it. The
//! function's Go code is the same; kyaml v0.10.21's `kioutil` names the
//! file annotations `config.kubernetes.io/path` and
//! `config.kubernetes.io/index` (v0.19.0: the `internal.` ones), so for
//! v0.2.0 those are what `target-path` is matched against, what a
//! replaced item keeps (`""` when absent) and what an appended resource
//! loses and gets its path in; the `internal.` ones are annotations like
//! any other there. v0.1.0 (no `List` unwrapping, groups not compared,
//! `target-path` ignored) is not reproduced.
//!
//! Departures:
//! - kyaml v0.19.0's framework (not v0.10.21's) migrates the legacy
//!   `config.kubernetes.io/path` and `index` annotations to the internal
//!   ones before the function and back after it
//!   (`kio.ReconcileInternalAnnotations`); that belongs to the caller that
//!   sends and reads the ResourceList, not to this function.
//! - Without any `functionConfig` the catalog's binary crashes (a nil
//!   resource is appended and the YAML encoder panics on it); here that is
//!   the error `failed to upsert resource: missing functionConfig`.
//! - The rare errors of kyaml's setters on malformed metadata (a scalar
//!   `metadata`) carry the node kind but not kyaml's dump of the node.

use std::collections::BTreeMap;

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};

const DEST_PATH: &str = "config.kubernetes.io/target-path";
const FUNCTION: &str = "config.kubernetes.io/function";
const FUNCTION_LEGACY: &str = "config.k8s.io/function";

/// kyaml's `kioutil.PathAnnotation` and `IndexAnnotation`: the file
/// annotations the function matches, copies and sets.
struct FileKeys {
    path: &'static str,
    index: &'static str,
}

/// kyaml v0.19.0's (master).
const INTERNAL: FileKeys = FileKeys {
    path: "internal.config.kubernetes.io/path",
    index: "internal.config.kubernetes.io/index",
};

/// kyaml v0.10.21's (v0.2.0).
const LEGACY: FileKeys = FileKeys {
    path: "config.kubernetes.io/path",
    index: "config.kubernetes.io/index",
};

/// The file annotations of the release the call answers as.
fn file_keys(ctx: &Context) -> &'static FileKeys {
    match ctx.release() {
        Some("v0.2.0") => &LEGACY,
        _ => &INTERNAL,
    }
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let result = match rl.function_config.clone() {
        None => Err(Failure::Error("missing functionConfig".to_owned())),
        Some(config) => upsert_all(&mut rl.items, &config, ctx),
    };
    match result {
        Ok(()) => Ok(()),
        Err(Failure::Cancelled) => Err(Stop::Cancelled),
        Err(Failure::Error(e)) => {
            let e = format!("failed to upsert resource: {e}");
            Err(Stop::Failed(format!("{e}{e}\n")))
        }
    }
}

enum Failure {
    Error(String),
    Cancelled,
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Error(e)
    }
}

/// `UpsertResource.Filter`.
fn upsert_all(items: &mut Vec<Node>, config: &Node, ctx: &Context) -> Result<(), Failure> {
    let keys = file_keys(ctx);
    for resource in unwrap(config)? {
        if !replace(items, resource, keys, ctx)? {
            add(items, resource, keys)?;
        }
    }
    Ok(())
}

/// `unwrap`: a `List`'s items, or the config itself.
fn unwrap(config: &Node) -> Result<Vec<&Node>, String> {
    let config = kyaml::content(config);
    let meta = get_meta(config)?;
    if meta.kind != "List" {
        return Ok(vec![config]);
    }
    Ok(kyaml::field(config, "items")
        .map(|items| items.content.iter().collect())
        .unwrap_or_default())
}

/// kyaml's `ResourceMeta`, the fields this function reads.
#[derive(Debug, Default)]
struct GoMeta {
    api_version: String,
    kind: String,
    name: String,
    namespace: String,
    annotations: Option<BTreeMap<String, String>>,
}

impl GoMeta {
    fn annotation(&self, key: &str) -> &str {
        self.annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map_or("", String::as_str)
    }
}

/// `IsNilOrEmpty` on a field's value.
fn nil_or_empty(v: Option<&Node>) -> bool {
    match v {
        None => true,
        Some(n) => {
            n.tag == kyaml::NULL_TAG
                || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
                || *n == Node::default()
        }
    }
}

/// `RNode.GetMeta`: `Err("missing Resource metadata")` when there is
/// neither apiVersion, kind nor a non-empty metadata field.
fn get_meta(node: &Node) -> Result<GoMeta, String> {
    let node = kyaml::content(node);
    if node.tag == kyaml::NULL_TAG {
        return Ok(GoMeta::default());
    }
    let mut m = GoMeta::default();
    let mut missing = true;
    let api = kyaml::field(node, "apiVersion");
    if !nil_or_empty(api) {
        m.api_version = kyaml::value_of(api).to_owned();
        missing = false;
    }
    let kind = kyaml::field(node, "kind");
    if !nil_or_empty(kind) {
        m.kind = kyaml::value_of(kind).to_owned();
        missing = false;
    }
    let md = kyaml::field(node, "metadata");
    let Some(md) = md.filter(|md| !nil_or_empty(Some(md))) else {
        return if missing {
            Err("missing Resource metadata".to_owned())
        } else {
            Ok(m)
        };
    };
    let name = kyaml::field(md, "name");
    if let Some(n) = name.filter(|n| !nil_or_empty(Some(n))) {
        // `f.Value.YNode().Value`: the raw value, also of a non-scalar.
        m.name = n.value.to_string();
        missing = false;
    }
    let ns = kyaml::field(md, "namespace");
    if !nil_or_empty(ns) {
        m.namespace = kyaml::value_of(ns).to_owned();
        missing = false;
    }
    if !nil_or_empty(kyaml::field(md, "labels")) {
        missing = false;
    }
    let anns = kyaml::field(md, "annotations");
    if let Some(a) = anns.filter(|a| !nil_or_empty(Some(a))) {
        let mut map = BTreeMap::new();
        if a.kind == Kind::Mapping {
            for kv in a.content.chunks_exact(2) {
                if let [k, v] = kv {
                    map.insert(
                        kyaml::value_of(Some(k)).to_owned(),
                        kyaml::value_of(Some(v)).to_owned(),
                    );
                }
            }
        }
        m.annotations = Some(map);
        missing = false;
    }
    if missing {
        return Err("missing Resource metadata".to_owned());
    }
    Ok(m)
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// `IsSameResource`.
fn same_resource(input: &GoMeta, target: &GoMeta, keys: &FileKeys) -> bool {
    group_of(&input.api_version) == group_of(&target.api_version)
        && input.kind == target.kind
        && input.name == target.name
        && input.namespace == target.namespace
        && (input.annotation(DEST_PATH).is_empty()
            || input.annotation(DEST_PATH) == target.annotation(keys.path))
}

/// `IsFunctionConfig`.
fn is_function_config(meta: &GoMeta) -> bool {
    !meta.annotation(FUNCTION).is_empty() || !meta.annotation(FUNCTION_LEGACY).is_empty()
}

/// `ReplaceResource`: every matching item becomes a copy of `input`.
fn replace(
    items: &mut [Node],
    input: &Node,
    keys: &FileKeys,
    ctx: &Context,
) -> Result<bool, Failure> {
    let input_meta = get_meta(input)?;
    let mut found = false;
    for item in items.iter_mut() {
        ctx.check().map_err(|_| Failure::Cancelled)?;
        let meta = get_meta(item)?;
        if is_function_config(&meta) {
            continue;
        }
        if !same_resource(&input_meta, &meta, keys) {
            continue;
        }
        let mut annotations = input_meta.annotations.clone().unwrap_or_default();
        for key in [keys.path, keys.index] {
            annotations.insert(key.to_owned(), meta.annotation(key).to_owned());
        }
        annotations.remove(FUNCTION);
        annotations.remove(FUNCTION_LEGACY);
        annotations.remove(DEST_PATH);
        *item = kyaml::content(input).clone();
        set_annotations(item, &annotations)?;
        found = true;
    }
    Ok(found)
}

/// `AddResource`: a copy of `input` appended.
fn add(items: &mut Vec<Node>, input: &Node, keys: &FileKeys) -> Result<(), String> {
    let mut node = kyaml::content(input).clone();
    let meta = get_meta(&node)?;
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    for k in [FUNCTION, FUNCTION_LEGACY, keys.path, keys.index] {
        annotations.remove(k);
    }
    let path = meta.annotation(DEST_PATH);
    if !path.is_empty() {
        annotations.insert(keys.path.to_owned(), path.to_owned());
    }
    annotations.remove(DEST_PATH);
    set_annotations(&mut node, &annotations)?;
    items.push(node);
    Ok(())
}

/// kyaml's `InvalidNodeKindError` text (without the node's dump).
fn not_a_mapping(kind: Kind) -> String {
    kyaml::NotAMapping(kyaml::kind_name(kind)).to_string()
}

/// `PathGetter{Create: MappingNode}` for one field, its error as text.
fn lookup_create<'a>(map: &'a mut Node, name: &str) -> Result<&'a mut Node, String> {
    kyaml::lookup_create(map, name).map_err(|e| e.to_string())
}

/// `RNode.SetAnnotations`: `metadata.annotations` cleared, then, when
/// there are any, written again at the end of `metadata`, sorted by key,
/// each value a string set with `FieldSetter`.
fn set_annotations(node: &mut Node, annotations: &BTreeMap<String, String>) -> Result<(), String> {
    let map = kyaml::content_mut(node);
    let md = lookup_create(map, "metadata")?;
    if md.tag == kyaml::NULL_TAG {
        // A null metadata takes no fields; kyaml's setters skip it.
        return Ok(());
    }
    if md.kind != Kind::Mapping {
        return Err(not_a_mapping(md.kind));
    }
    if let Some(i) = kyaml::field_index(md, "annotations") {
        md.content.drain(i..i + 2);
    }
    if annotations.is_empty() {
        return Ok(());
    }
    let anns = lookup_create(md, "annotations")?;
    for (k, v) in annotations {
        kyaml::set_field(anns, k, Node::string(v.as_str())).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
