//! kyaml v0.11.0's RNode, as this function uses it: reading `kind`,
//! `apiVersion`, the annotations and a config's `data`, and writing the
//! annotations and `data` back as `SetAnnotations` and `SetDataMap` do.

use std::collections::BTreeMap;

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node, Style};

use super::{Failure, PATH};
use crate::catalog;

/// `RNode.getMapFieldValue(field).Value` (`GetKind`, `GetApiVersion`):
/// the content of any node read as key, value pairs; a key without its
/// value is Go's index panic.
pub(super) fn map_field_value(node: &Node, field: &str) -> Result<String, Failure> {
    let content = &node.content;
    let mut i = 0;
    while let Some(key) = content.get(i) {
        if key.value == field {
            return match content.get(i + 1) {
                Some(v) => Ok(v.value.to_string()),
                None => Err(Failure::Crash(format!(
                    "panic: runtime error: index out of range [{}] with length {}\n",
                    i + 1,
                    content.len()
                ))),
            };
        }
        i += 2;
    }
    Ok(String::new())
}

/// `RNode.GetAnnotations()`: `GetValue` of each key and value (a key's
/// first value, as `VisitFields` finds it), empty when `metadata` or
/// `annotations` is missing, null, empty or not a mapping.
pub(super) fn get_annotations(item: &Node) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if catalog::is_null(item) {
        return out;
    }
    let Some(md) = catalog::field(item, "metadata").filter(|m| !catalog::is_nil_or_empty(m)) else {
        return out;
    };
    let Some(a) = catalog::field(md, "annotations").filter(|a| !catalog::is_nil_or_empty(a)) else {
        return out;
    };
    for i in catalog::visit_fields(a) {
        if let (Some(k), Some(v)) = (a.content.get(i), a.content.get(i + 1)) {
            out.insert(
                catalog::get_value(k).to_owned(),
                catalog::get_value(v).to_owned(),
            );
        }
    }
    out
}

/// `GetAnnotations()[kioutil.PathAnnotation]`.
pub(super) fn path_of(item: &Node) -> String {
    get_annotations(item).remove(PATH).unwrap_or_default()
}

/// `RNode.GetDataMap()`: `data`'s entries (`GetValue` of each key and
/// value); empty without a mapping config or a mapping `data`.
pub(super) fn data_map(config: Option<&Node>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(data) = config
        .filter(|c| c.kind == Kind::Mapping)
        .and_then(|c| catalog::field(c, "data"))
        .filter(|d| d.kind == Kind::Mapping)
    else {
        return out;
    };
    for i in catalog::visit_fields(data) {
        if let (Some(k), Some(v)) = (data.content.get(i), data.content.get(i + 1)) {
            out.insert(
                catalog::get_value(k).to_owned(),
                catalog::get_value(v).to_owned(),
            );
        }
    }
    out
}

/// `ErrorIfInvalid(rn, MappingNode)`'s message: the field path and the
/// node as kyaml writes it.
fn wrong_kind(path: &str, node: &Node) -> String {
    let text = krm_yaml::emit::encode_node(node, true);
    format!(
        "wrong Node Kind for {path} expected: MappingNode was {}: value: {{{}}}",
        kyaml::kind_name(node.kind),
        text.trim()
    )
}

/// Why kyaml's writer refuses an item (`ClearEmptyAnnotations`'s
/// `Lookup` and `FieldClearer`), if it does.
pub(super) fn unwritable(item: &Node) -> Option<String> {
    if catalog::is_null(item) {
        return None;
    }
    if item.kind != Kind::Mapping {
        return Some(wrong_kind("", item));
    }
    match catalog::field(item, "metadata") {
        Some(md) if !catalog::is_null(md) && md.kind != Kind::Mapping => {
            Some(wrong_kind("metadata", md))
        }
        _ => None,
    }
}

/// A value `NewStringRNode` (and `makeConfigMapValueRNode`) makes: a
/// `!!str`, literal when it has a line break.
fn string_node(value: &str) -> Node {
    let mut n = Node::string(value);
    if value.contains('\n') {
        n.style = Style::LITERAL;
    }
    n
}

/// `PathGetter{Create: MappingNode}` for one field of a mapping: the
/// first field of that name (of any kind), else a new empty mapping
/// appended.
fn lookup_create<'a>(map: &'a mut Node, name: &str) -> Option<&'a mut Node> {
    let i = match kyaml::field_index(map, name) {
        Some(i) => i + 1,
        None => {
            map.content.push(Node {
                kind: Kind::Scalar,
                value: name.into(),
                ..Node::default()
            });
            map.content.push(Node {
                kind: Kind::Mapping,
                ..Node::default()
            });
            map.content.len() - 1
        }
    };
    map.content.get_mut(i)
}

/// `FieldClearer{Name}`: the first field of that name removed.
fn clear(map: &mut Node, name: &str) {
    if let Some(i) = kyaml::field_index(map, name) {
        map.content.drain(i..(i + 2).min(map.content.len()));
    }
}

/// Sets each entry into `target` (the node `LookupCreate` found) with
/// `FieldSetter`: into a mapping; a null one takes nothing; any other
/// kind is `ErrorIfInvalid`'s error (at `path`).
fn set_entries(
    target: &mut Node,
    path: &str,
    entries: &BTreeMap<String, String>,
) -> Result<(), String> {
    if catalog::is_null(target) {
        return Ok(());
    }
    if target.kind != Kind::Mapping {
        return Err(wrong_kind(path, target));
    }
    for (k, v) in entries {
        catalog::set_field(target, k, string_node(v));
    }
    Ok(())
}

/// `RNode.SetAnnotations(m)` (`setMapInMetadata`): `metadata` found or
/// created, its first `annotations` removed, then the entries, sorted by
/// key, set into the next `annotations` (a new one at the end of
/// `metadata`).
pub(super) fn set_annotations_map(
    item: &mut Node,
    m: &BTreeMap<String, String>,
) -> Result<(), String> {
    if catalog::is_null(item) {
        return Ok(());
    }
    if item.kind != Kind::Mapping {
        return Err(wrong_kind("", item));
    }
    let Some(md) = lookup_create(item, "metadata") else {
        return Ok(());
    };
    if catalog::is_null(md) {
        // kyaml's filters pass over a null node: nothing is set.
        return Ok(());
    }
    if md.kind != Kind::Mapping {
        return Err(wrong_kind("metadata", md));
    }
    clear(md, "annotations");
    if m.is_empty() {
        return Ok(());
    }
    match lookup_create(md, "annotations") {
        Some(a) => set_entries(a, "metadata.annotations", m),
        None => Ok(()),
    }
}

/// `RNode.SetDataMap(m)`: the first `data` removed, then the entries,
/// sorted by key, set into the next `data` (a new one at the end). An
/// error there is `log.Fatal`'s.
pub(super) fn set_data_map(node: &mut Node, m: &BTreeMap<String, String>) -> Result<(), Failure> {
    if node.kind != Kind::Mapping {
        return Err(Failure::Crash(format!("{}\n", wrong_kind("", node))));
    }
    clear(node, "data");
    if m.is_empty() {
        return Ok(());
    }
    match lookup_create(node, "data") {
        Some(d) => set_entries(d, "data", m).map_err(|e| Failure::Crash(format!("{e}\n"))),
        None => Ok(()),
    }
}
