//! What the catalog's Go functions built on kyaml's old `framework`
//! (kyaml v0.10.21–v0.12.0: apply-setters, create-setters, list-setters,
//! search-replace) share: kyaml's `RNode.GetDataMap`, `GetMeta` and
//! `kioutil.GetFileAnnotations`, the framework's `ResultItem`, and how
//! `command.Build` + `main` print a failure.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::result::{Field, File, FnResult};
use crate::Stop;

pub(crate) const NULL_TAG: &str = "!!null";

/// kyaml's `IsMissingOrNull` on a present node.
pub(crate) fn is_null(node: &Node) -> bool {
    node.tag == NULL_TAG
}

/// kyaml's `RNode.IsNilOrEmpty` on a present node: null, an empty
/// mapping or sequence.
pub(crate) fn is_nil_or_empty(node: &Node) -> bool {
    is_null(node)
        || (matches!(node.kind, Kind::Mapping | Kind::Sequence) && node.content.is_empty())
}

/// kyaml's `GetValue`: a node's value, "" for null.
pub(crate) fn get_value(node: &Node) -> &str {
    if is_null(node) {
        ""
    } else {
        &node.value
    }
}

/// The first value under `name` in a mapping (`RNode.Field`); `None`
/// for other kinds.
pub(crate) fn field<'a>(map: &'a Node, name: &str) -> Option<&'a Node> {
    kyaml::field_index(map, name).and_then(|i| map.content.get(i + 1))
}

/// The field names of a mapping, in order, as `RNode.VisitFields` visits
/// them: each name once per occurrence, each resolving to the *first*
/// field of that name (`RNode.Field`). Returns the indexes of the key
/// nodes to visit.
pub(crate) fn visit_fields(map: &Node) -> Vec<usize> {
    if map.kind != Kind::Mapping {
        return Vec::new();
    }
    map.content
        .chunks_exact(2)
        .filter_map(|kv| kv.first())
        .filter_map(|k| kyaml::field_index(map, &k.value))
        .collect()
}

/// What the setters functions' walkers (`acceptImpl`) call at each node.
pub(crate) trait Visitor {
    type Error;
    /// `visitMapping`, before the mapping's fields are walked.
    fn visit_mapping(&mut self, map: &mut Node, path: &str) -> Result<(), Self::Error>;
    /// `visitScalar` (search-replace's `matchAndReplace`).
    fn visit_scalar(&mut self, node: &mut Node, path: &str) -> Result<(), Self::Error>;
}

/// `acceptImpl`: the node, then each field (`path.name`, as
/// [`visit_fields`] visits them) or element (`path[i]`), depth first; the
/// first error stops the walk.
pub(crate) fn accept<V: Visitor>(v: &mut V, node: &mut Node, path: &str) -> Result<(), V::Error> {
    match node.kind {
        Kind::Mapping => {
            v.visit_mapping(node, path)?;
            for i in visit_fields(node) {
                let key = node.content.get(i).map(|k| k.value.to_string());
                if let (Some(key), Some(value)) = (key, node.content.get_mut(i + 1)) {
                    accept(v, value, &format!("{path}.{key}"))?;
                }
            }
            Ok(())
        }
        Kind::Sequence => {
            for (i, el) in node.content.iter_mut().enumerate() {
                accept(v, el, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        Kind::Scalar => v.visit_scalar(node, path),
        Kind::Document | Kind::Alias => Ok(()),
    }
}

/// `RNode.GetDataMap()`: the `data` mapping's entries as strings
/// (`GetValue`: a collection's value is "", null is ""). No config, no
/// `data`, or a `data` that is not a mapping: empty. A repeated key is
/// listed once, at its first place, with its first value (Go fills a map
/// with `Field(name)` per name). Go's map has no order; here the order is
/// `data`'s.
pub(crate) fn data_map(config: Option<&Node>) -> Vec<(String, String)> {
    let Some(config) = config else {
        return Vec::new();
    };
    let Some(data) = field(kyaml::content(config), "data") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for i in visit_fields(data) {
        let (Some(k), Some(v)) = (data.content.get(i), data.content.get(i + 1)) else {
            continue;
        };
        let key = get_value(k);
        if out.iter().any(|(name, _)| name == key) {
            continue;
        }
        out.push((key.to_owned(), get_value(v).to_owned()));
    }
    out
}

/// `yaml.ErrMissingMetadata`.
pub(crate) const MISSING_METADATA: &str = "missing Resource metadata";

/// The annotations `RNode.GetMeta` reads, or its error: a resource with
/// neither `apiVersion`, `kind` nor any of `metadata`'s name, namespace,
/// labels or annotations (not a mapping at all, say) has no metadata.
pub(crate) fn meta_annotations(item: &Node) -> Result<Vec<(String, String)>, &'static str> {
    if is_null(item) {
        return Ok(Vec::new());
    }
    let present = |n: Option<&Node>| n.is_some_and(|n| !is_nil_or_empty(n));
    let mut missing = !(present(field(item, "apiVersion")) || present(field(item, "kind")));
    let md = field(item, "metadata").filter(|m| !is_nil_or_empty(m));
    let mut annotations = Vec::new();
    if let Some(md) = md {
        if present(field(md, "name"))
            || present(field(md, "namespace"))
            || present(field(md, "labels"))
        {
            missing = false;
        }
        if let Some(a) = field(md, "annotations").filter(|a| !is_nil_or_empty(a)) {
            missing = false;
            for i in visit_fields(a) {
                if let (Some(k), Some(v)) = (a.content.get(i), a.content.get(i + 1)) {
                    annotations.push((get_value(k).to_owned(), get_value(v).to_owned()));
                }
            }
        }
    }
    if missing {
        Err(MISSING_METADATA)
    } else {
        Ok(annotations)
    }
}

/// `kioutil.PathAnnotation` up to kyaml v0.11 (`config.kubernetes.io/path`).
pub(crate) const LEGACY_PATH: &str = "config.kubernetes.io/path";
/// kyaml v0.12's `kioutil.PathAnnotation`.
pub(crate) const INTERNAL_PATH: &str = "internal.config.kubernetes.io/path";

/// `kioutil.GetFileAnnotations(item)`'s path: kyaml v0.10/v0.11 read
/// `config.kubernetes.io/path`; with `internal`, kyaml v0.12 reads
/// `internal.config.kubernetes.io/path`, copied from the legacy one when
/// missing (kyaml writes that copy onto the item; here it is only read:
/// kpt sends both and removes the internal one it did not send).
pub(crate) fn file_path(item: &Node, internal: bool) -> Result<String, &'static str> {
    let annotations = meta_annotations(item)?;
    let get = |key: &str| {
        annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let path = if internal {
        get(INTERNAL_PATH).or_else(|| get(LEGACY_PATH))
    } else {
        get(LEGACY_PATH)
    };
    Ok(path.unwrap_or_default())
}

/// A framework `ResultItem` with a message, field path and file path
/// (empty ones left out, as `omitempty` leaves them), without severity.
pub(crate) fn item(message: String, field_path: &str, file_path: &str) -> FnResult {
    FnResult {
        message,
        severity: None,
        field: (!field_path.is_empty()).then(|| Field {
            path: field_path.to_owned(),
            ..Field::default()
        }),
        file: (!file_path.is_empty()).then(|| File {
            path: file_path.to_owned(),
            index: 0,
        }),
        ..FnResult::default()
    }
}

/// How these binaries fail: `command.Build` prints the processor's error
/// (`%v`, no newline), then `main` prints it again with `Fprintln`, and
/// exits 1. `results` holds the one error item the processor set.
pub(crate) fn fail(rl: &mut crate::ResourceList, result: FnResult, err: &str) -> Stop {
    rl.results.push(result);
    Stop::Failed(format!("{err}{err}\n"))
}

/// Go's `%q` of a string.
pub(crate) fn quote(s: &str) -> String {
    krm_yaml::package::go_quote(s)
}
