//! What the catalog's Go functions built on kyaml's old `framework`
//! (kyaml v0.10.21–v0.12.0: apply-setters, create-setters, list-setters,
//! search-replace) share: kyaml's `RNode.GetDataMap`, `GetMeta` and
//! `kioutil.GetFileAnnotations`, the framework's `ResultItem`, and how
//! `command.Build` + `main` print a failure; and the old `FieldSetter`,
//! which set-project-id (kyaml v0.11.0) uses too.

use std::collections::{HashMap, HashSet};

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::{Field, File, FnResult, Severity};

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

/// kyaml's `FieldSetter{Name, Value}` on a mapping, as v0.11.0
/// (set-project-id) and v0.12 (search-replace) have it: an existing
/// field's value is replaced by `value` (comments and all) with the old
/// value's style; a new one is appended with a plain, untagged key. No
/// YAML 1.1 quoting yet in these versions.
// Not `kyaml::set_field`: that is a later kyaml's (mapping check, YAML 1.1 quoting).
pub(crate) fn set_field(map: &mut Node, name: &str, mut value: Node) {
    match kyaml::field_index(map, name).and_then(|i| map.content.get_mut(i + 1)) {
        Some(old) => {
            value.style = old.style;
            *old = value;
        }
        None => {
            map.content.push(Node {
                kind: Kind::Scalar,
                value: name.into(),
                ..Node::default()
            });
            map.content.push(value);
        }
    }
}

/// The field names of a mapping, in order, as `RNode.VisitFields` visits
/// them: each name once per occurrence, each resolving to the *first*
/// field of that name (`RNode.Field`). Returns the indexes of the key
/// nodes to visit.
pub(crate) fn visit_fields(map: &Node) -> Vec<usize> {
    if map.kind != Kind::Mapping {
        return Vec::new();
    }
    // The first index of each name, found once (not a scan per field).
    let mut first: HashMap<&str, usize> = HashMap::new();
    map.content
        .chunks_exact(2)
        .enumerate()
        .filter_map(|(i, kv)| kv.first().map(|k| (i, k)))
        .map(|(i, k)| *first.entry(k.value.as_str()).or_insert(2 * i))
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

/// Why a walk stopped: the visitor's error, or the call's cancellation.
pub(crate) enum WalkStop<E> {
    Error(E),
    Cancelled,
}

/// How many nodes a walk visits between two [`Context::check`]s.
const CHECK_EVERY: usize = 1024;

/// `acceptImpl` from the root (path ""): the node, then each field
/// (`path.name`, as [`visit_fields`] visits them) or element (`path[i]`),
/// depth first; the first error stops the walk, and so does `ctx` (checked
/// every [`CHECK_EVERY`] nodes).
pub(crate) fn accept<V: Visitor>(
    v: &mut V,
    node: &mut Node,
    ctx: &Context,
) -> Result<(), WalkStop<V::Error>> {
    let mut path = String::new();
    let mut seen = 0;
    walk(v, node, &mut path, ctx, &mut seen)
}

/// [`accept`] at `path`, which it extends in place for the children and
/// gives back as it was.
fn walk<V: Visitor>(
    v: &mut V,
    node: &mut Node,
    path: &mut String,
    ctx: &Context,
    seen: &mut usize,
) -> Result<(), WalkStop<V::Error>> {
    *seen += 1;
    if seen.is_multiple_of(CHECK_EVERY) {
        ctx.check().map_err(|_| WalkStop::Cancelled)?;
    }
    let len = path.len();
    match node.kind {
        Kind::Mapping => {
            v.visit_mapping(node, path).map_err(WalkStop::Error)?;
            for i in visit_fields(node) {
                let Some([key, value]) = node.content.get_mut(i..i + 2) else {
                    continue;
                };
                path.push('.');
                path.push_str(&key.value);
                let r = walk(v, value, path, ctx, seen);
                path.truncate(len);
                r?;
            }
            Ok(())
        }
        Kind::Sequence => {
            for (i, el) in node.content.iter_mut().enumerate() {
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
                let r = walk(v, el, path, ctx, seen);
                path.truncate(len);
                r?;
            }
            Ok(())
        }
        Kind::Scalar => v.visit_scalar(node, path).map_err(WalkStop::Error),
        Kind::Document | Kind::Alias => Ok(()),
    }
}

/// The most bytes of text one run may produce by putting values into
/// patterns and fields (apply-setters' setter values, search-replace's
/// put-value and put-comment): 64 MiB, ten times the largest request.
pub(crate) const MAX_PRODUCED_BYTES: usize = 64 << 20;

/// What a run has left of [`MAX_PRODUCED_BYTES`]; `what` names the
/// values in the error.
pub(crate) struct Produced {
    left: usize,
    what: &'static str,
}

impl Default for Produced {
    fn default() -> Produced {
        Produced::new("the values put in")
    }
}

impl Produced {
    pub(crate) fn new(what: &'static str) -> Produced {
        Produced {
            left: MAX_PRODUCED_BYTES,
            what,
        }
    }

    /// Counts `n` more bytes produced; an error once past the limit.
    pub(crate) fn take(&mut self, n: usize) -> Result<(), String> {
        match self.left.checked_sub(n) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(format!(
                    "{} would produce more than {MAX_PRODUCED_BYTES} bytes, the limit for one run",
                    self.what
                ))
            }
        }
    }

    /// `s.replace(from, to)`, its result counted (when anything was
    /// replaced) before it is built.
    pub(crate) fn replace(&mut self, s: &str, from: &str, to: &str) -> Result<String, String> {
        if from.is_empty() {
            return Ok(s.to_owned());
        }
        let count = s.matches(from).count();
        if count == 0 {
            return Ok(s.to_owned());
        }
        let len = count
            .saturating_mul(to.len())
            .saturating_add(s.len() - count * from.len());
        self.take(len)?;
        Ok(s.replace(from, to))
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
    let mut listed: HashSet<&str> = HashSet::new();
    for i in visit_fields(data) {
        let (Some(k), Some(v)) = (data.content.get(i), data.content.get(i + 1)) else {
            continue;
        };
        let key = get_value(k);
        if !listed.insert(key) {
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
        severity: Severity::Unset,
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
pub(crate) fn fail(rl: &mut ResourceList, result: FnResult, err: &str) -> Stop {
    rl.results.push(result);
    Stop::Failed(format!("{err}{err}\n"))
}

/// Go's `%q` of a string.
pub(crate) fn quote(s: &str) -> String {
    krm_yaml::package::go_quote(s)
}
