//! Which resources a replacement reads and writes: kustomize's resource
//! ids (`utils.MakeResIds`, `resid.ResId.IsSelectedBy`) and the label and
//! annotation selectors (apimachinery's `labels.Parse`, the common forms).

use std::collections::HashMap;

use krm_yaml::package::kyaml::NULL_TAG;
use krm_yaml::{Kind, Node};

use super::config::ResId;
use super::path::field;

const PREVIOUS_NAMES: &str = "internal.config.kubernetes.io/previousNames";
const PREVIOUS_NAMESPACES: &str = "internal.config.kubernetes.io/previousNamespaces";
const PREVIOUS_KINDS: &str = "internal.config.kubernetes.io/previousKinds";

fn is_null(n: &Node) -> bool {
    n.tag == NULL_TAG
}

/// `IsYNodeNilOrEmpty` for a node that is there.
fn nil_or_empty(n: &Node) -> bool {
    is_null(n) || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
}

/// `RNode.getMetaData`: the first `metadata` field, unless null or empty.
fn metadata(node: &Node) -> Option<&Node> {
    field(node, "metadata").filter(|m| !nil_or_empty(m))
}

/// `getMetaStringField`: the raw value of the first field of the name in
/// `metadata`, "" when null or empty.
fn meta_string(node: &Node, name: &str) -> String {
    metadata(node)
        .and_then(|m| field(m, name))
        .filter(|v| !nil_or_empty(v))
        .map(|v| v.value.to_string())
        .unwrap_or_default()
}

/// `getMapFromMeta(fName)`: the first such map in `metadata`, its keys'
/// raw values (a later key of the same name wins).
pub(crate) fn meta_map(node: &Node, name: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    if let Some(m) = metadata(node).and_then(|m| field(m, name)) {
        for kv in m.content.chunks_exact(2) {
            if let [k, v] = kv {
                out.insert(k.value.to_string(), v.value.to_string());
            }
        }
    }
    out
}

/// `resid.ParseGroupVersion`.
fn group_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), api_version.to_owned()),
    }
}

/// `utils.MakeResIds`: the resource's id, then its previous ids from the
/// `internal.config.kubernetes.io/previous*` annotations.
pub(crate) fn res_ids(node: &Node) -> Result<Vec<ResId>, String> {
    let api_version = field(node, "apiVersion")
        .filter(|v| !is_null(v))
        .map(|v| v.value.to_string())
        .unwrap_or_default();
    let (group, version) = group_version(&api_version);
    // GetKind: the first `kind` field's raw value.
    let kind = field(node, "kind")
        .map(|v| v.value.to_string())
        .unwrap_or_default();
    let mut ids = vec![ResId {
        group: group.clone(),
        version: version.clone(),
        kind,
        name: meta_string(node, "name"),
        namespace: meta_string(node, "namespace"),
    }];
    // PrevIds: the annotations' first occurrences.
    let first = |key: &str| -> Option<String> {
        let anns = metadata(node).and_then(|m| field(m, "annotations"))?;
        field(anns, key).map(|v| v.value.to_string())
    };
    let Some(names) = first(PREVIOUS_NAMES) else {
        return Ok(ids);
    };
    let namespaces = first(PREVIOUS_NAMESPACES).unwrap_or_default();
    let kinds = first(PREVIOUS_KINDS).unwrap_or_default();
    let names: Vec<&str> = names.split(',').collect();
    let namespaces: Vec<&str> = namespaces.split(',').collect();
    let kinds: Vec<&str> = kinds.split(',').collect();
    if names.len() != namespaces.len() || names.len() != kinds.len() {
        return Err("number of previous names, number of previous namespaces, \
                    number of previous kinds not equal"
            .to_owned());
    }
    for ((name, namespace), kind) in names.iter().zip(&namespaces).zip(&kinds) {
        ids.push(ResId {
            group: group.clone(),
            version: version.clone(),
            kind: (*kind).to_owned(),
            name: (*name).to_owned(),
            namespace: (*namespace).to_owned(),
        });
    }
    Ok(ids)
}

/// `ResId.EffectiveNamespace` for ids that are never cluster-scoped (ids
/// from `MakeResIds` and selectors are built without the schema lookup).
fn effective_namespace(ns: &str) -> &str {
    if ns.is_empty() {
        "default"
    } else {
        ns
    }
}

/// `ResId.IsSelectedBy(selector)`.
pub(crate) fn is_selected_by(id: &ResId, sel: &ResId) -> bool {
    (sel.name.is_empty() || sel.name == id.name)
        && (sel.namespace.is_empty()
            || effective_namespace(&sel.namespace) == effective_namespace(&id.namespace))
        && (sel.group.is_empty() || sel.group == id.group)
        && (sel.version.is_empty() || sel.version == id.version)
        && (sel.kind.is_empty() || sel.kind == id.kind)
}

/// One requirement of a label selector.
#[derive(Debug, PartialEq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Requirement {
    fn matches(&self, labels: &HashMap<String, String>) -> bool {
        match self {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        }
    }
}

/// A parsed selector: every requirement must hold (none: everything).
#[derive(Debug, PartialEq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub(crate) fn matches(&self, labels: &HashMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

/// `labels.Parse`: requirements separated by commas, each `key`, `!key`,
/// `key=value`, `key==value`, `key!=value`, `key in (a,b)` or
/// `key notin (a,b)`. Keys and values are checked as Kubernetes checks
/// label keys and values (the messages are shorter than apimachinery's).
pub(crate) fn parse_label_selector(s: &str) -> Result<LabelSelector, String> {
    let mut reqs = Vec::new();
    for part in split_top_level(s) {
        let p = part.trim();
        if p.is_empty() {
            if s.trim().is_empty() {
                continue;
            }
            return Err(format!("found '', expected: identifier in selector {s:?}"));
        }
        reqs.push(parse_requirement(p, s)?);
    }
    Ok(LabelSelector(reqs))
}

/// The selector's requirements: split at commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(s.get(start..i).unwrap_or(""));
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(s.get(start..).unwrap_or(""));
    parts
}

fn parse_requirement(p: &str, whole: &str) -> Result<Requirement, String> {
    if let Some(key) = p.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok(Requirement::NotExists(key.to_owned()));
    }
    for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = p.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            check_key(k)?;
            check_value(v)?;
            let vs = vec![v.to_owned()];
            return Ok(if negate {
                Requirement::NotIn(k.to_owned(), vs)
            } else {
                Requirement::In(k.to_owned(), vs)
            });
        }
    }
    let mut words = p.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or("").trim();
    let rest = words.next().unwrap_or("").trim();
    check_key(key)?;
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.to_owned()));
    }
    let (negate, set) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (false, set)
    } else {
        return Err(format!(
            "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt in selector {whole:?}"
        ));
    };
    let set = set.trim();
    let Some(inner) = set.strip_prefix('(').and_then(|s| s.strip_suffix(')')) else {
        return Err(format!(
            "unable to parse requirement: found '{set}', expected: '(' in selector {whole:?}"
        ));
    };
    if inner.trim().is_empty() {
        return Err(format!(
            "for 'in', 'notin' operators, values set can't be empty in selector {whole:?}"
        ));
    }
    let mut values = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        check_value(v)?;
        values.push(v.to_owned());
    }
    Ok(if negate {
        Requirement::NotIn(key.to_owned(), values)
    } else {
        Requirement::In(key.to_owned(), values)
    })
}

/// A qualified name (`[prefix/]name`), as `validation.IsQualifiedName`.
fn check_key(key: &str) -> Result<(), String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > 253 || !is_dns_subdomain(prefix) {
                return Err(format!(
                    "invalid label key {key:?}: prefix part must be a DNS-1123 subdomain"
                ));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !is_label_value(name) {
        return Err(format!(
            "invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

/// A label value, as `validation.IsValidLabelValue` (empty allowed).
fn check_value(v: &str) -> Result<(), String> {
    if v.is_empty() || (v.len() <= 63 && is_label_value(v)) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|l| {
        let b = l.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && b.first().is_some_and(alnum)
            && b.last().is_some_and(alnum)
            && b.iter().all(|c| alnum(c) || *c == b'-')
    })
}
