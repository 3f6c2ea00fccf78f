//! `apply-replacements`: copies a value from one resource's field into
//! fields of other resources, as kustomize's `replacements` do.
//!
//! Follows the catalog's `functions/go/apply-replacements` at
//! kptdev/krm-functions-catalog `76fe3817f9496724ca04414d136917a9926e5e40`
//! (`replacements/replacements.go`, run through the functions SDK
//! `kpt-functions-sdk/go/fn` at `afe329cf801e0cd2085fb3c4904ca0c67882f857`,
//! the version its `go.mod` pins), which hands the items to kustomize's
//! replacement filter, `sigs.k8s.io/kustomize/api` and `kyaml` v0.19.0
//! (kubernetes-sigs/kustomize tag `api/v0.19.0`,
//! `b69e76509fae4351d20a71157fff90bffbb311ae`):
//! `api/filters/replacement/replacement.go`, `api/types/replacement.go`,
//! `api/types/selector.go`, `api/internal/utils/makeResIds.go`,
//! `kyaml/resid`, `kyaml/utils/pathsplitter.go`, `kyaml/yaml/fns.go`,
//! `kyaml/yaml/match.go`, `kyaml/yaml/rnode.go`.
//!
//! What it does:
//! - The config must be `fn.kpt.dev/v1alpha1` `ApplyReplacements` (no
//!   other form is accepted by the catalog); its `replacements` are
//!   decoded as Go's JSON decoder decodes them ([`config`]).
//! - Each replacement in order: the one resource its `source` selects
//!   (by group, version, kind, name, namespace, also the resource's
//!   previous ids from the `internal.config.kubernetes.io/previous*`
//!   annotations) gives the node at `source.fieldPath` (default
//!   `metadata.name`), a part of it with `options.delimiter`/`index`.
//!   Then for each target, each resource its `select` selects (ids, label
//!   and annotation selectors) and no `reject` entry rejects gets the
//!   value at each of its `fieldPaths` (default `metadata.name`): a scalar
//!   target takes only the value (its tag and style stay); any other
//!   target is replaced by a copy of the value node. Field paths know
//!   `[field=regex]` (an unanchored RE2 match), `[=regex]`, `*` and
//!   indexes; `options.create` adds what is missing; `options.delimiter`
//!   with `index` replaces a part (index past the end: appended, below
//!   zero: prepended).
//! - Any error stops the function with nothing changed: the error's text
//!   as an `error` result, and the SDK's `failed to evaluate function:
//!   error: function failure` on stderr (exit code 1).
//! - The SDK writes the items sorted by `apiVersion kind namespace name`
//!   (only string values count), also when the function fails.
//!
//! Departures (each where kustomize would crash, or where reproducing
//! Go's exact text would mean porting a large library):
//! - The SDK's `sort.Sort` is not stable (pdqsort); items with equal keys
//!   keep their order here, which is what Go does for up to 12 items.
//! - Where kyaml recurses for ever (`[x=re]` with create, when the
//!   appended element does not match `re` itself) or panics (`-` on an
//!   empty list, `null` entries in `targets` or `reject`), this returns
//!   no match or an error instead.
//! - Regular expressions are Rust's `regex` (RE2 syntax); a pattern Go
//!   rejects fails with `error parsing regexp: ...` but the detail after
//!   it is `regex`'s, not Go's.
//! - Label and annotation selectors support `k`, `!k`, `k=v`, `k==v`,
//!   `k!=v`, `k in (..)` and `k notin (..)` with Kubernetes' key and value
//!   checks; `gt`/`lt` and apimachinery's exact error texts are not
//!   reproduced (a selector it cannot read is an error).
//! - Config values that Go's JSON encoder cannot write (`.inf`, `.nan`,
//!   non-string keys) are read as their text here instead of failing.
//! - The catalog writes each item to text and parses it back around the
//!   filter; this works on the tree in place (the same tree for everything
//!   but comment placement corner cases of that round trip).

mod config;
mod path;
mod selector;
#[cfg(test)]
mod tests;

use krm_yaml::package::kyaml::{self, NULL_TAG};
use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;
use config::{FieldOptions, Replacement, Selector, SourceSelector, TargetSelector};
use path::Place;

const KIND: &str = "ApplyReplacements";
const API_VERSION: &str = "fn.kpt.dev/v1alpha1";
/// `types.DefaultReplacementFieldPath`.
const DEFAULT_FIELD_PATH: &str = "metadata.name";
/// The most bytes one run may copy from sources into targets: each node
/// copied counts its size in memory and its text.
const MAX_COPIED_BYTES: usize = 256 << 20;
/// The most parts a target's field path may have with `create` (the
/// fields it may create one inside another).
const MAX_CREATE_PARTS: usize = 1000;
/// What the SDK's `AsMain` logs when `Process` reports a failure.
const FAILURE: &str = "failed to evaluate function: error: function failure";

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let outcome = process(rl, ctx);
    sort_items(&mut rl.items);
    match outcome {
        Ok(()) => Ok(()),
        Err(Failure::Cancelled) => Err(Stop::Cancelled),
        Err(Failure::Error(message)) => {
            rl.results.push(FnResult::error(message));
            Err(Stop::Failed(FAILURE.to_owned()))
        }
    }
}

enum Failure {
    Error(String),
    Cancelled,
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Error(s)
    }
}

/// `Replacements.Process`: the config, then the filter over copies of the
/// items, which replace the items only when every replacement succeeded.
fn process(rl: &mut ResourceList, ctx: &Context) -> Result<(), Failure> {
    let replacements = read_config(rl.function_config.as_ref())?;
    let mut nodes = rl.items.clone();
    let mut left = MAX_COPIED_BYTES;
    for r in &replacements {
        apply(&mut nodes, r, ctx, &mut left)?;
    }
    rl.items = nodes;
    Ok(())
}

/// `Replacements.Config`.
fn read_config(config: Option<&Node>) -> Result<Vec<Replacement>, String> {
    let config = config.map(kyaml::content);
    let Some(config) = config.filter(|c| !(c.kind == Kind::Mapping && c.content.is_empty())) else {
        return Err("FunctionConfig is missing. Expect `ApplyReplacements`".to_owned());
    };
    // The SDK's GetKind/GetAPIVersion: string values only.
    let string_field = |name: &str| -> String {
        path::field(config, name)
            .filter(|v| v.kind == Kind::Scalar && v.tag == "!!str")
            .map(|v| v.value.to_string())
            .unwrap_or_default()
    };
    let (kind, api_version) = (string_field("kind"), string_field("apiVersion"));
    if kind != KIND || api_version != API_VERSION {
        return Err(format!(
            "received functionConfig of kind {kind} and apiVersion {api_version}, \
             only functionConfig of kind {KIND} and apiVersion {API_VERSION} is supported"
        ));
    }
    config::decode(config).map_err(|e| {
        format!(
            "unable to convert functionConfig to replacements:\n\
             unable to convert object to *replacements.Replacements with error: {e}"
        )
    })
}

/// `Filter.Filter` for one replacement.
/// `left`: what the run may still copy ([`MAX_COPIED_BYTES`]).
fn apply(
    nodes: &mut [Node],
    r: &Replacement,
    ctx: &Context,
    left: &mut usize,
) -> Result<(), Failure> {
    let (Some(source), Some(targets)) = (&r.source, &r.targets) else {
        return Err("replacements must specify a source and at least one target"
            .to_owned()
            .into());
    };
    let mut value = replacement_value(nodes, source, ctx)?;
    for target in targets {
        let Some(target) = target else {
            return Err("target must not be null".to_owned().into());
        };
        let Some(select) = &target.select else {
            return Err("target must specify resources to select".to_owned().into());
        };
        let field_paths: Vec<String> = if target.field_paths.is_empty() {
            vec![DEFAULT_FIELD_PATH.to_owned()]
        } else {
            target.field_paths.clone()
        };
        for n in 0..nodes.len() {
            ctx.check().map_err(|_| Failure::Cancelled)?;
            let Some(node) = nodes.get(n) else { break };
            let ids = selector::res_ids(node)?;
            if !select_by_anno_and_label(node, select, &target.reject)? {
                continue;
            }
            if !ids
                .iter()
                .any(|id| selector::is_selected_by(id, &select.id))
                || contains_reject_id(&target.reject, &ids)?
            {
                continue;
            }
            copy_value_to_target(nodes, n, &mut value, target, &field_paths, left)?;
        }
    }
    Ok(())
}

/// The replacement's value: where it is (kyaml holds a pointer into the
/// source resource, so a target written at that place or inside it changes
/// what later targets get), or a copy (a part of it, by delimiter; or a
/// node a target replaced an ancestor of).
enum Value {
    At(usize, Place),
    Copy(Node),
}

impl Value {
    fn node<'a>(&'a self, nodes: &'a [Node]) -> Option<&'a Node> {
        match self {
            Value::At(n, place) => nodes.get(*n).and_then(|r| path::at(r, place)),
            Value::Copy(node) => Some(node),
        }
    }
}

/// `getReplacement`.
fn replacement_value(
    nodes: &[Node],
    source: &SourceSelector,
    ctx: &Context,
) -> Result<Value, Failure> {
    let n = select_source_node(nodes, source, ctx)?;
    let field_path = if source.field_path.is_empty() {
        DEFAULT_FIELD_PATH
    } else {
        source.field_path.as_str()
    };
    let parts = path::smarter_path_splitter(field_path);
    let root = nodes.get(n).ok_or_else(|| "no source".to_owned())?;
    let place = path::lookup(root, &parts)
        .map_err(|e| format!("error looking up replacement source: {e}"))?;
    let found = place.as_ref().and_then(|p| path::at(root, p));
    let (Some(place), Some(node)) = (place.clone(), found) else {
        return Err(missing_source(field_path, source).into());
    };
    if is_nil_or_empty(node) {
        return Err(missing_source(field_path, source).into());
    }
    match &source.options {
        Some(FieldOptions {
            delimiter, index, ..
        }) if !delimiter.is_empty() => {
            if node.kind != Kind::Scalar {
                return Err("delimiter option can only be used with scalar nodes"
                    .to_owned()
                    .into());
            }
            let value = get_value(node);
            let parts: Vec<&str> = value.split(delimiter.as_str()).collect();
            let Some(part) = usize::try_from(*index).ok().and_then(|i| parts.get(i)) else {
                return Err(
                    format!("options.index {index} is out of bounds for value {value}").into(),
                );
            };
            let mut copy = node.clone();
            copy.value = (*part).into();
            Ok(Value::Copy(copy))
        }
        _ => Ok(Value::At(n, place)),
    }
}

fn missing_source(field_path: &str, source: &SourceSelector) -> String {
    format!(
        "fieldPath `{field_path}` is missing for replacement source {}",
        source.id.display()
    )
}

/// `selectSourceNode`: exactly one resource.
fn select_source_node(
    nodes: &[Node],
    source: &SourceSelector,
    ctx: &Context,
) -> Result<usize, Failure> {
    let mut found = None;
    for (n, node) in nodes.iter().enumerate() {
        ctx.check().map_err(|_| Failure::Cancelled)?;
        let ids = selector::res_ids(node).map_err(|e| format!("error getting node IDs: {e}"))?;
        if ids
            .iter()
            .any(|id| selector::is_selected_by(id, &source.id))
        {
            if found.is_some() {
                return Err(format!("multiple matches for selector {}", source.display()).into());
            }
            found = Some(n);
        }
    }
    found.ok_or_else(|| format!("nothing selected by {}", source.display()).into())
}

/// `selectByAnnoAndLabel`.
fn select_by_anno_and_label(
    node: &Node,
    select: &Selector,
    reject: &[Option<Selector>],
) -> Result<bool, String> {
    if !matches_anno_and_label(node, select)? {
        return Ok(false);
    }
    for r in reject {
        let Some(r) = r else {
            return Err("reject entries must not be null".to_owned());
        };
        if r.annotation_selector.is_empty() && r.label_selector.is_empty() {
            continue;
        }
        if matches_anno_and_label(node, r)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `matchesAnnoAndLabelSelector`.
fn matches_anno_and_label(node: &Node, s: &Selector) -> Result<bool, String> {
    let anno = selector::parse_label_selector(&s.annotation_selector)?
        .matches(&selector::meta_map(node, "annotations"));
    let label = selector::parse_label_selector(&s.label_selector)?
        .matches(&selector::meta_map(node, "labels"));
    Ok(anno && label)
}

/// `containsRejectId`.
fn contains_reject_id(reject: &[Option<Selector>], ids: &[config::ResId]) -> Result<bool, String> {
    for r in reject {
        let Some(r) = r else {
            return Err("reject entries must not be null".to_owned());
        };
        if r.id.is_empty() {
            continue;
        }
        if ids.iter().any(|id| selector::is_selected_by(id, &r.id)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `fieldRetrievalError`.
fn retrieval_error(field_path: &str, create: bool) -> String {
    if create {
        format!("unable to find or create field {field_path:?} in replacement target")
    } else {
        format!("unable to find field {field_path:?} in replacement target")
    }
}

/// `copyValueToTarget` on resource `n`.
fn copy_value_to_target(
    nodes: &mut [Node],
    n: usize,
    value: &mut Value,
    target: &TargetSelector,
    field_paths: &[String],
    left: &mut usize,
) -> Result<(), String> {
    let options = target.options.as_ref();
    for fp in field_paths {
        let value_kind = value.node(nodes).map(|v| v.kind).unwrap_or(Kind::Scalar);
        let create = options.filter(|o| o.create).map(|_| value_kind);
        let parts = path::smarter_path_splitter(fp);
        if create.is_some() && parts.len() > MAX_CREATE_PARTS {
            return Err(format!(
                "fieldPath {fp:?} has {} parts, more than the limit of {MAX_CREATE_PARTS} with create",
                parts.len()
            ));
        }
        let root = nodes.get_mut(n).ok_or_else(|| "no target".to_owned())?;
        let places = path::path_match(root, &parts, create)
            .map_err(|e| format!("{}: {e}", retrieval_error(fp, create.is_some())))?;
        if places.is_empty() {
            return Err(retrieval_error(fp, create.is_some()));
        }
        for place in places {
            set_field_value(nodes, n, &place, value, options, left)?;
        }
    }
    Ok(())
}

/// `GetValue`: "" for null.
fn get_value(n: &Node) -> String {
    if n.tag == NULL_TAG {
        String::new()
    } else {
        n.value.to_string()
    }
}

/// `IsYNodeNilOrEmpty` for a node that is there.
fn is_nil_or_empty(n: &Node) -> bool {
    n.tag == NULL_TAG
        || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
        || *n == Node::default()
}

/// `setFieldValue` at `place` in resource `n`.
fn set_field_value(
    nodes: &mut [Node],
    n: usize,
    place: &[usize],
    value: &mut Value,
    options: Option<&FieldOptions>,
    left: &mut usize,
) -> Result<(), String> {
    let Some(source) = value.node(nodes) else {
        return Ok(());
    };
    *left = left.checked_sub(copy_size(source)).ok_or_else(|| {
        format!(
            "the values copied to targets exceed {MAX_COPIED_BYTES} bytes, the limit for one run"
        )
    })?;
    let mut v = source.clone();
    // A target that replaces an ancestor of the source's place detaches
    // the node kyaml points at: later targets get it as it is now.
    if let Value::At(sn, sp) = &*value {
        if *sn == n && sp.len() > place.len() && sp.starts_with(place) {
            *value = Value::Copy(v.clone());
        }
    }
    let Some(t) = nodes.get_mut(n).and_then(|r| path::at_mut(r, place)) else {
        return Ok(());
    };
    if let Some(o) = options.filter(|o| !o.delimiter.is_empty()) {
        if t.kind != Kind::Scalar {
            return Err("delimiter option can only be used with scalar nodes".to_owned());
        }
        let mut parts: Vec<String> = t
            .value
            .split(o.delimiter.as_str())
            .map(str::to_owned)
            .collect();
        let part = get_value(&v);
        match usize::try_from(o.index) {
            Err(_) => parts.insert(0, part),
            Ok(i) => match parts.get_mut(i) {
                Some(slot) => *slot = part,
                None => parts.push(part),
            },
        }
        v.value = parts.join(o.delimiter.as_str()).into();
    }
    if t.kind == Kind::Scalar {
        // Only the value: the target's tag and style stay.
        t.value = v.value;
    } else {
        *t = v;
    }
    Ok(())
}

/// What copying `node` costs against [`MAX_COPIED_BYTES`].
fn copy_size(node: &Node) -> usize {
    let mut size = 0usize;
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        size = size
            .saturating_add(std::mem::size_of::<Node>())
            .saturating_add(n.value.len())
            .saturating_add(n.line_comment.as_str().len())
            .saturating_add(n.head_comment.as_str().len())
            .saturating_add(n.foot_comment.as_str().len());
        stack.extend(n.content.iter());
    }
    size
}

/// The SDK's `ResourceList.Sort` by `apiVersion kind namespace name`
/// (string values only; the catalog sorts items it has written to text
/// and parsed again, so a field created without a tag counts by the tag
/// its text reads back with), stable.
// Not sdk::sort_items: that reads untagged scalars as "" (items never re-parsed there).
fn sort_items(items: &mut [Node]) {
    fn s(v: Option<&Node>) -> &str {
        match v {
            // A node created untagged reads back as its plain value's tag.
            Some(v)
                if v.kind == Kind::Scalar
                    && (v.tag == "!!str"
                        || (v.tag.is_empty()
                            && krm_yaml::resolve::resolve_plain(&v.value) == "!!str")) =>
            {
                &v.value
            }
            _ => "",
        }
    }
    let key = |n: &Node| -> String {
        let md = path::field(n, "metadata");
        format!(
            "{} {} {} {}",
            s(path::field(n, "apiVersion")),
            s(path::field(n, "kind")),
            s(md.and_then(|m| path::field(m, "namespace"))),
            s(md.and_then(|m| path::field(m, "name"))),
        )
    };
    items.sort_by_cached_key(key);
}
