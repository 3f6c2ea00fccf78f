//! kyaml's operations on resources, on our [`Node`] tree: what kpt does
//! to a resource between reading it and writing it back. Each function
//! ports one kyaml function (named in its comment) closely, quirks
//! included, because the files kpt writes are the product of exactly these
//! steps: annotations set and cleared (`yaml/kfns.go`, `yaml/fns.go`),
//! comments copied from the input to the function's output
//! (`comments/comments.go` over `yaml/walk`), field order synced
//! (`order/syncorder.go`).

use std::collections::HashMap;

use compact_str::CompactString;

use crate::{Kind, Node, Style};

pub const NULL_TAG: &str = "!!null";

/// kyaml's `RNode.YNode()`: a document's content, any other node itself.
pub fn content(node: &Node) -> &Node {
    match node.kind {
        Kind::Document if !node.content.is_empty() => &node.content[0],
        _ => node,
    }
}

pub fn content_mut(node: &mut Node) -> &mut Node {
    match node.kind {
        Kind::Document if !node.content.is_empty() => &mut node.content[0],
        _ => node,
    }
}

/// `IsMissingOrNull`.
fn is_null(node: &Node) -> bool {
    node.tag == NULL_TAG
}

/// The index of `name`'s key in a mapping's content: the first match, as
/// kyaml's `RNode.Field` finds it.
pub fn field_index(map: &Node, name: &str) -> Option<usize> {
    if map.kind != Kind::Mapping {
        return None;
    }
    map.content
        .chunks_exact(2)
        .position(|kv| kv[0].value == name)
        .map(|i| 2 * i)
}

/// [`field_index`] for many lookups in one mapping: a scan for small
/// mappings, an index for large ones (a ConfigMap with thousands of keys
/// would make every walk over it quadratic).
struct Fields<'a> {
    map: &'a Node,
    index: Option<HashMap<&'a str, usize>>,
}

impl<'a> Fields<'a> {
    fn new(map: &'a Node) -> Fields<'a> {
        let index = (map.kind == Kind::Mapping && map.content.len() > 64).then(|| {
            map.content
                .chunks_exact(2)
                .enumerate()
                .fold(HashMap::new(), |mut index, (i, kv)| {
                    index.entry(kv[0].value.as_str()).or_insert(2 * i);
                    index
                })
        });
        Fields { map, index }
    }

    fn get(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => field_index(self.map, name),
        }
    }
}

/// `RNode.Field(name).Value` (on the document's content).
pub fn field<'a>(node: &'a Node, name: &str) -> Option<&'a Node> {
    let map = content(node);
    field_index(map, name).map(|i| &map.content[i + 1])
}

fn field_mut<'a>(node: &'a mut Node, name: &str) -> Option<&'a mut Node> {
    let map = content_mut(node);
    field_index(map, name).map(move |i| &mut map.content[i + 1])
}

/// A scalar's value as kyaml's `GetValue` reads it ("" for null and
/// non-scalars).
pub fn value_of(node: Option<&Node>) -> &str {
    match node {
        Some(n) if n.kind == Kind::Scalar && !is_null(n) => &n.value,
        _ => "",
    }
}

/// What kpt checks and names resources by (`yaml.ResourceMeta`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// Whether `metadata` is there at all.
    pub has_metadata: bool,
}

/// `RNode.GetMeta` (the fields kpt uses).
pub fn meta(node: &Node) -> Meta {
    let md = field(node, "metadata");
    Meta {
        api_version: value_of(field(node, "apiVersion")).to_owned(),
        kind: value_of(field(node, "kind")).to_owned(),
        name: value_of(md.and_then(|m| field(m, "name"))).to_owned(),
        namespace: value_of(md.and_then(|m| field(m, "namespace"))).to_owned(),
        has_metadata: md.is_some_and(|m| !is_null(m)),
    }
}

/// `metadata.annotations[key]`, when it is a scalar.
pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    let a = field(node, "metadata").and_then(|m| field(m, "annotations"))?;
    let v = field(a, key)?;
    (v.kind == Kind::Scalar && !is_null(v)).then_some(v.value.as_str())
}

/// Every `metadata.annotations` entry with a scalar value, in order.
pub fn annotations(node: &Node) -> Vec<(&str, &str)> {
    let Some(a) = field(node, "metadata").and_then(|m| field(m, "annotations")) else {
        return Vec::new();
    };
    if a.kind != Kind::Mapping {
        return Vec::new();
    }
    a.content
        .chunks_exact(2)
        .filter(|kv| kv[1].kind == Kind::Scalar)
        .map(|kv| (kv[0].value.as_str(), kv[1].value.as_str()))
        .collect()
}

/// Why a resource cannot take an annotation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("wrong node kind: expected MappingNode but got {0}")]
pub struct NotAMapping(pub &'static str);

pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Document => "DocumentNode",
        Kind::Sequence => "SequenceNode",
        Kind::Mapping => "MappingNode",
        Kind::Scalar => "ScalarNode",
        Kind::Alias => "AliasNode",
    }
}

/// `FieldClearer{Name, IfEmpty}` on a mapping.
fn clear_field(map: &mut Node, name: &str, if_empty: bool) {
    if map.kind != Kind::Mapping {
        return;
    }
    // The first match, as `visitFieldsWhileTrue` stops there.
    let Some(i) = map
        .content
        .chunks_exact(2)
        .position(|kv| kv[0].value == name && (!if_empty || kv[1].content.is_empty()))
    else {
        return;
    };
    map.content.drain(2 * i..2 * i + 2);
}

/// `ClearEmptyAnnotations`: `metadata.annotations`, then `metadata`, are
/// removed when they have no content (empty, null or a scalar).
pub fn clear_empty_annotations(node: &mut Node) {
    let map = content_mut(node);
    if map.kind != Kind::Mapping {
        return;
    }
    if let Some(md) = field_mut(map, "metadata") {
        if !is_null(md) {
            clear_field(md, "annotations", true);
        }
    }
    clear_field(map, "metadata", true);
}

/// `PathGetter{Create: MappingNode}` for one field: the value under
/// `name`, appended as a new mapping when missing.
pub fn lookup_create<'a>(map: &'a mut Node, name: &str) -> Result<&'a mut Node, NotAMapping> {
    if map.kind != Kind::Mapping {
        return Err(NotAMapping(kind_name(map.kind)));
    }
    let i = match field_index(map, name) {
        Some(i) => i,
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
            map.content.len() - 2
        }
    };
    Ok(&mut map.content[i + 1])
}

/// `SetAnnotation(key, value)`: a single-quoted string (the style of an
/// existing value is kept, as `FieldSetter` keeps it), after
/// `ClearEmptyAnnotations`.
pub fn set_annotation(node: &mut Node, key: &str, value: &str) -> Result<(), NotAMapping> {
    clear_empty_annotations(node);
    let map = content_mut(node);
    let md = lookup_create(map, "metadata")?;
    let anns = lookup_create(md, "annotations")?;
    let mut v = Node::string(value);
    v.style = Style::SINGLE_QUOTED;
    set_field(anns, key, v)
}

/// `ClearAnnotation(key)` (leaves an empty mapping; see
/// [`clear_empty_annotations`]).
pub fn clear_annotation(node: &mut Node, key: &str) {
    let map = content_mut(node);
    let Some(md) = field_mut(map, "metadata") else {
        return;
    };
    if is_null(md) {
        return;
    }
    let Some(anns) = field_mut(md, "annotations") else {
        return;
    };
    if is_null(anns) {
        return;
    }
    clear_field(anns, key, false);
}

// ---------------------------------------------------------------------------
// comments.CopyComments

/// `copyFieldComments`: each comment `to` lacks, from `from`.
fn copy_field_comments(from: &Node, to: &mut Node) {
    if to.line_comment.is_empty() {
        to.line_comment.clone_from(&from.line_comment);
    }
    if to.head_comment.is_empty() {
        to.head_comment.clone_from(&from.head_comment);
    }
    if to.foot_comment.is_empty() {
        to.foot_comment.clone_from(&from.foot_comment);
    }
}

/// `comments.CopyComments(from, to)`: the comments of `from` (the resource
/// as sent, a document) onto `to` (the function's resource) where `to` has
/// none, field by field. Lists are matched by position (kyaml matches
/// lists a Kubernetes schema marks as merge-by-key, such as `containers`,
/// by key; here they are matched by position, which differs only where a
/// function reorders such a list).
pub fn copy_comments(from: &Node, to: &mut Node) {
    copy_field_comments(from, to);
    walk(Some(content(from)), content_mut(to), false, true);
}

/// [`copy_comments`], but a line comment of a flow collection that the
/// function wrote in block style stays on the line the user wrote it on:
/// on the key (`data: # c`), or for a sequence entry that is a mapping on
/// the line above its dash (its head comment). kyaml
/// copies it onto the block collection, where yaml.v3's encoder writes it
/// after the next scalar, at the head of the next document, or nowhere
/// (docs/eval-render.md, "Where we depart from kpt"). `eval` and `render`
/// use this; a built-in function reproducing its container keeps kyaml's.
pub fn copy_comments_in_place(from: &Node, to: &mut Node) {
    copy_field_comments(from, to);
    walk(Some(content(from)), content_mut(to), true, true);
}

/// A block collection with content that got a line comment from the copy
/// of a flow collection's (`from`; `had` says whether it held one before).
fn copied_block_line(from: Option<&Node>, node: &Node, had: bool) -> bool {
    from.is_some_and(|f| f.style.has(Style::FLOW))
        && !had
        && !node.line_comment.is_empty()
        && matches!(node.kind, Kind::Mapping | Kind::Sequence)
        && !node.style.has(Style::FLOW)
        && !node.content.is_empty()
}

/// The copier's visit of `walk.Walker{VisitKeysAsScalars: true}` over
/// `[from, to]`, where only `to` changes. `in_place`: see
/// [`copy_comments_in_place`].
///
/// `root`: the resource itself, whose visit copies nothing more. kyaml's
/// visitors copy `RNode.Document()`'s comments, which for a resource read
/// from a file is its document node, not its mapping: `CopyComments`'
/// first copy did that already, and the mapping's own comments (a line
/// comment yaml.v3 puts on it, `spec: &a # c` ending the document) are
/// never copied. For a function's output item (a bare mapping, render's
/// next step) the first copy was the mapping's.
fn walk(from: Option<&Node>, to: &mut Node, in_place: bool, root: bool) {
    // `Walker.Kind()`: the first source that is not null.
    let kind = match from {
        Some(f) if !is_null(f) => Some(f.kind),
        _ if !is_null(to) => Some(to.kind),
        _ => None,
    };
    // `ErrorIfAnyInvalidAndNonNull`: kyaml fails the whole copy when the
    // function changed a field's kind; here that field is left as it is.
    let same =
        |k: Kind| from.is_none_or(|f| is_null(f) || f.kind == k) && (is_null(to) || to.kind == k);
    match kind {
        Some(Kind::Mapping) if same(Kind::Mapping) => {
            if let Some(f) = from.filter(|_| !root) {
                copy_field_comments(f, to);
            }
            if to.kind != Kind::Mapping {
                return;
            }
            // `fieldNames`: the sorted union; only `to`'s fields change.
            let fields = from.map(Fields::new);
            for kv in to.content.chunks_exact_mut(2) {
                let (k, v) = kv.split_at_mut(1);
                let (key, value) = (&mut k[0], &mut v[0]);
                let from_kv = fields
                    .as_ref()
                    .and_then(|f| f.get(&key.value))
                    .and_then(|i| from.map(|f| (&f.content[i], &f.content[i + 1])));
                // VisitScalar on the keys.
                visit_scalar(from_kv.map(|p| p.0), key);
                let had = !value.line_comment.is_empty();
                walk(from_kv.map(|p| p.1), value, in_place, false);
                let from_value = from_kv.map(|p| p.1);
                if in_place
                    && copied_block_line(from_value, value, had)
                    && key.line_comment.is_empty()
                {
                    key.line_comment = std::mem::take(&mut value.line_comment);
                }
            }
        }
        Some(Kind::Sequence) if same(Kind::Sequence) => {
            // copier.VisitList: elements by position, where their values
            // (empty for collections) are equal.
            let Some(f) = from else {
                return;
            };
            if !root {
                copy_field_comments(f, to);
            }
            if f.kind != Kind::Sequence || to.kind != Kind::Sequence {
                return;
            }
            for (d, o) in f.content.iter().zip(to.content.iter_mut()) {
                if d.value == o.value {
                    let had = !o.line_comment.is_empty();
                    copy_field_comments(d, o);
                    walk(Some(d), o, in_place, false);
                    // The entry's own head comment, written on the line
                    // above its dash: on the dash line (the first key's
                    // head comment) kyaml's `rearrangeHeadCommentOfSeqNode`
                    // would copy it above as well. Only a mapping entry: a
                    // nested sequence keeps kyaml's place.
                    if in_place
                        && o.kind == Kind::Mapping
                        && copied_block_line(Some(d), o, had)
                        && o.head_comment.is_empty()
                    {
                        o.head_comment = std::mem::take(&mut o.line_comment);
                    }
                }
            }
        }
        Some(Kind::Scalar) if same(Kind::Scalar) => visit_scalar(from, to),
        Some(_) => {}
        // `walkMap` on nulls: VisitMap copies the comments.
        None => {
            if let Some(f) = from.filter(|_| !root) {
                copy_field_comments(f, to);
            }
        }
    }
}

/// copier.VisitScalar: kyaml turns a folded scalar of the output into a
/// double-quoted one (its line comments were written without a space,
/// kpt#766), then copies the comments.
fn visit_scalar(from: Option<&Node>, to: &mut Node) {
    if to.style == Style::FOLDED {
        to.style = Style::DOUBLE_QUOTED;
    }
    if let Some(f) = from {
        copy_field_comments(f, to);
    }
}

// ---------------------------------------------------------------------------
// order.SyncOrder

/// `IsNilOrEmpty`.
fn nil_or_empty(n: &Node) -> bool {
    is_null(n)
        || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
        || *n == Node::default()
}

/// `order.SyncOrder(from, to)`: `to`'s mapping keys in `from`'s order at
/// every depth (keys `from` lacks after, in their order), then kyaml's
/// `rearrangeHeadCommentOfSeqNode`.
pub fn sync_order(from: &Node, to: &mut Node) {
    sync(content(from), content_mut(to));
    rearrange_head_comment_of_seq_node(to);
}

fn sync(from: &Node, to: &mut Node) {
    if nil_or_empty(from) || nil_or_empty(to) {
        return;
    }
    match from.kind {
        Kind::Mapping => {
            if to.kind != Kind::Mapping {
                return;
            }
            sync_map_nodes_order(from, to);
            let pairs: Vec<(usize, usize)> = {
                let (from_fields, to_fields) = (Fields::new(from), Fields::new(to));
                from.content
                    .chunks_exact(2)
                    .filter_map(|kv| {
                        Some((from_fields.get(&kv[0].value)?, to_fields.get(&kv[0].value)?))
                    })
                    .collect()
            };
            for (fi, ti) in pairs {
                sync(&from.content[fi + 1], &mut to.content[ti + 1]);
            }
        }
        Kind::Sequence => {
            // kyaml errors when `to` is not a sequence; such a field is
            // left as it is.
            if to.kind != Kind::Sequence {
                return;
            }
            for (f, t) in from.content.iter().zip(to.content.iter_mut()) {
                sync(f, t);
            }
        }
        _ => {}
    }
}

/// `yaml.SyncMapNodesOrder`: the fields `from` has first, in its order,
/// then the others in theirs. With repeated names it does what kyaml does:
/// each name takes `to.Field(name)` (the first field of that name) and
/// strikes out one occurrence, so a repeated key can be written twice with
/// its first value.
fn sync_map_nodes_order(from: &Node, to: &mut Node) {
    let mut pairs: Vec<Option<(Node, Node)>> = Vec::with_capacity(to.content.len() / 2);
    let mut it = std::mem::take(&mut to.content).into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        pairs.push(Some((k, v)));
    }
    let names: Vec<CompactString> = pairs
        .iter()
        .flatten()
        .map(|(k, _)| k.value.clone())
        .collect();
    // Each name's occurrences, in order; the first is `to.Field(name)`.
    let mut occurrences: HashMap<&str, std::collections::VecDeque<usize>> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        occurrences.entry(name).or_default().push_back(i);
    }
    let first: HashMap<&str, usize> = occurrences.iter().map(|(n, o)| (*n, o[0])).collect();
    let mut struck = vec![false; names.len()];
    let mut order = Vec::with_capacity(names.len());
    for kv in from.content.chunks_exact(2) {
        let name = kv[0].value.as_str();
        if let Some(i) = occurrences.get_mut(name).and_then(|o| o.pop_front()) {
            struck[i] = true;
            order.push(first[name]);
        }
    }
    for (i, name) in names.iter().enumerate() {
        if !struck[i] {
            order.push(first[name.as_str()]);
        }
    }
    let mut uses = vec![0usize; names.len()];
    for &i in &order {
        uses[i] += 1;
    }
    let mut content = Vec::with_capacity(order.len() * 2);
    for i in order {
        uses[i] -= 1;
        let pair = if uses[i] == 0 {
            pairs[i].take()
        } else {
            pairs[i].clone()
        };
        if let Some((k, v)) = pair {
            content.push(k);
            content.push(v);
        }
    }
    to.content = content;
}

/// `rearrangeHeadCommentOfSeqNode`: an element of a sequence whose first
/// child is a scalar takes that child's head comment.
fn rearrange_head_comment_of_seq_node(node: &mut Node) {
    match node.kind {
        Kind::Document | Kind::Mapping => {
            for c in &mut node.content {
                rearrange_head_comment_of_seq_node(c);
            }
        }
        Kind::Sequence => {
            for el in &mut node.content {
                if el.content.first().is_some_and(|c| c.kind == Kind::Scalar) {
                    if el.head_comment.is_empty() {
                        el.head_comment.clone_from(&el.content[0].head_comment);
                        continue;
                    }
                    if !el.content[0].head_comment.is_empty() {
                        let h = std::mem::take(&mut el.content[0].head_comment);
                        el.head_comment.push('\n');
                        el.head_comment.push_str(&h);
                    }
                }
            }
        }
        _ => {}
    }
}

/// kyaml's `IsYaml1_1NonString` (`IsValueNonString`): whether the value,
/// read as a YAML document by a YAML 1.1 parser (yaml.v2), is something
/// other than a string (`a: b` is a mapping, `yes` a bool, `~` null).
/// yaml.v2 hands timestamps to untyped values as strings; a value that
/// does not parse is a string.
pub fn is_yaml11_non_string(value: &str) -> bool {
    use crate::resolve;
    if value.is_empty() || value.contains('\n') {
        return false;
    }
    let Ok(docs) = crate::parse::parse(value) else {
        return false;
    };
    let Some(node) = docs.first().map(content) else {
        return true;
    };
    match node.kind {
        Kind::Scalar => {
            let quoted = Style::DOUBLE_QUOTED.0
                | Style::SINGLE_QUOTED.0
                | Style::LITERAL.0
                | Style::FOLDED.0;
            if node.style.0 & quoted != 0 {
                return false;
            }
            !matches!(node.tag.as_str(), "!!str" | "!!timestamp")
                || resolve::is_old_bool(&node.value)
                || resolve::is_base60_float(&node.value)
        }
        Kind::Document => false,
        _ => true,
    }
}

/// kyaml's `FieldSetter{Name, Value}` on a mapping: an existing field's
/// value is replaced and keeps the old value's style; a new field is
/// appended with an untagged key. A string value without a style that a
/// YAML 1.1 reader would take for another type is double-quoted first.
pub fn set_field(map: &mut Node, name: &str, mut value: Node) -> Result<(), NotAMapping> {
    if map.kind != Kind::Mapping {
        return Err(NotAMapping(kind_name(map.kind)));
    }
    if value.kind == Kind::Scalar
        && (value.tag == "!!str" || value.tag.is_empty())
        && value.style.is_empty()
        && is_yaml11_non_string(&value.value)
    {
        value.style = Style::DOUBLE_QUOTED;
    }
    match field_index(map, name) {
        Some(i) => {
            value.style = map.content[i + 1].style;
            map.content[i + 1] = value;
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
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{emit, parse};

    fn doc(text: &str) -> Node {
        parse::parse(text).unwrap().remove(0)
    }

    fn text(node: &Node) -> String {
        emit::encode_node(node, true)
    }

    #[test]
    fn annotations_are_set_and_cleared_as_kyaml_does() {
        // Created at the end of metadata, single-quoted; an empty flow
        // mapping is cleared first and comes back as a block one.
        let mut d = doc("kind: A\nmetadata:\n  name: a\n  annotations: {}\nspec: {}\n");
        set_annotation(&mut d, "k", "0").unwrap();
        set_annotation(&mut d, "j", "v").unwrap();
        assert_eq!(
            text(&d),
            "kind: A\nmetadata:\n  name: a\n  annotations:\n    k: '0'\n    j: 'v'\nspec: {}\n"
        );
        assert_eq!(annotation(&d, "k"), Some("0"));
        // An existing value keeps its style.
        set_annotation(&mut d, "k", "1").unwrap();
        assert!(text(&d).contains("    k: '1'\n"));
        clear_annotation(&mut d, "k");
        clear_annotation(&mut d, "j");
        clear_empty_annotations(&mut d);
        assert_eq!(text(&d), "kind: A\nmetadata:\n  name: a\nspec: {}\n");
        // No metadata: created, then removed again with the annotations.
        let mut d = doc("kind: A\n");
        set_annotation(&mut d, "k", "v").unwrap();
        assert_eq!(text(&d), "kind: A\nmetadata:\n  annotations:\n    k: 'v'\n");
        clear_annotation(&mut d, "k");
        clear_empty_annotations(&mut d);
        assert_eq!(text(&d), "kind: A\n");
        assert_eq!(
            set_annotation(&mut doc("- a\n"), "k", "v"),
            Err(NotAMapping("SequenceNode"))
        );
    }

    #[test]
    fn comments_come_back_where_the_function_dropped_them() {
        let from = doc("# head\na: 1 # line a\nb:\n  # head c\n  c: x\nl:\n- one # first\n- two\n");
        // What a PyYAML function returns: no comments, keys sorted, a new
        // key, a folded scalar.
        let mut to = doc("b:\n  c: x\n  n: new\na: 1\nf: >\n  folded\nl:\n- one\n- three\n");
        copy_comments(&from, &mut to);
        sync_order(&from, &mut to);
        assert_eq!(
            text(&to),
            "# head\na: 1 # line a\nb:\n  # head c\n  c: x\n  n: new\nl:\n- one # first\n- three\nf: \"folded\\n\"\n"
        );
        // Comments the function kept, or changed, are left alone.
        let mut kept = doc("a: 1 # changed\n");
        copy_comments(&doc("a: 1 # original\n"), &mut kept);
        assert_eq!(text(&kept), "a: 1 # changed\n");
        // A field whose kind the function changed keeps the function's.
        let mut changed = doc("a:\n  x: 1\n");
        copy_comments(&doc("a: 1 # scalar\n"), &mut changed);
        sync_order(&doc("a: 1 # scalar\n"), &mut changed);
        assert_eq!(text(&changed), "a:\n  x: 1\n");
    }

    #[test]
    fn a_flow_collections_line_comment_stays_on_its_line_in_block_style() {
        let from = doc("data: {v: x} # app\ns:\n- {a: 1} #\n- [q] # list\nk: [1] # kept\n");
        // PyYAML writes every collection in block style.
        let to = || doc("data:\n  v: x\ns:\n- a: 1\n- - q\nk: [1]\n");
        let mut kpt = to();
        copy_comments(&from, &mut kpt);
        // kyaml's copy: on the block collections, which yaml.v3 writes
        // after the next scalar (one at a time: `# list` is lost).
        assert_eq!(
            text(&kpt),
            "data:\n  v: x\ns: # app\n- a: 1\n- #\n  - q\nk: [1] # kept\n"
        );
        let mut ours = to();
        copy_comments_in_place(&from, &mut ours);
        assert_eq!(
            text(&ours),
            // A nested sequence's stays where kyaml puts it (here the
            // next scalar has a comment of its own, and yaml.v3 drops it).
            "data: # app\n  v: x\ns:\n#\n- a: 1\n- - q\nk: [1] # kept\n"
        );
        // A key with a comment of its own keeps it; the value's goes where
        // kyaml puts it.
        let mut both = doc("data: # mine\n  v: x\n");
        copy_comments_in_place(&doc("data: {v: x} # app\n"), &mut both);
        assert_eq!(text(&both), "data: # mine\n  v: x\n");
    }

    #[test]
    fn repeated_keys_are_ordered_as_kyaml_orders_them() {
        // kyaml's `Field` takes the first field of a name, and
        // `SyncMapNodesOrder` writes it once per occurrence in `from`
        // (kpt writes `x: one` twice here).
        let from = doc("x: one\nx: two\n");
        let mut to = doc("x: one\nx: two\n");
        sync_order(&from, &mut to);
        assert_eq!(text(&to), "x: one\nx: one\n");
        assert_eq!(
            field(&doc("a: 1\na: 2\n"), "a").map(|n| n.value.as_str()),
            Some("1")
        );
        // Keys `from` lacks keep their order after the others.
        let mut to = doc("c: 3\nb: 2\na: 1\nd: 4\n");
        sync_order(&doc("a: 1\nb: 2\n"), &mut to);
        assert_eq!(text(&to), "a: 1\nb: 2\nc: 3\nd: 4\n");
    }

    #[test]
    fn yaml_1_1_non_strings_as_kyaml_tells_them() {
        for v in [
            "yes", "on", "1", "1.5", "~", "null", "a: b", "- x", "0x1", "1:20", "#x",
        ] {
            assert!(is_yaml11_non_string(v), "{v}");
        }
        for v in ["", "hello", "2001-01-01", "a\nb", "[x", "'q'", "it's"] {
            assert!(!is_yaml11_non_string(v), "{v}");
        }
    }
}
