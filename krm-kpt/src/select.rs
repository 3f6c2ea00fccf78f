//! Which resources a function sees: kpt's selectors and exclusions (a
//! Kptfile pipeline step's `selectors` and `exclude`, `kpt fn eval`'s
//! `--match-*` and `--exclude-*` flags), and how its output goes back
//! among the resources it did not see.
//!
//! kpt's rules (`fnruntime.SelectInput`, `IsMatch`, `MergeWithInput`):
//!
//! - A selector matches a resource when every field it sets matches:
//!   `apiVersion`, `kind`, `name` and `namespace` compared as written
//!   (`metadata.namespace`: no default namespace; `apiVersion` whole, not
//!   by group); `labels` and `annotations` as subsets of the resource's
//!   (kpt's own annotations count: the path, the package path, the index).
//!   An empty selector matches everything.
//! - With selectors, a resource is selected once for each selector it
//!   matches (kpt appends it again for each: a resource that two selectors
//!   match is sent twice, which fails as a duplicate path); without, every
//!   resource is. Then a resource that matches any exclusion that is not
//!   empty is dropped.
//! - Every resource is looked at: the Kptfile, function configs,
//!   `local-config` resources alike.
//! - Before selecting, every resource gets an id annotation
//!   ([`RESOURCE_ID`], its position); the function sees it. Afterwards the
//!   resources are put back in their order: one not selected stays as it
//!   was; a selected one is replaced by the first output resource with its
//!   id, or dropped if there is none; output resources without an id
//!   (new ones) come last, in the function's order. The id annotations are
//!   then cleared.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

/// kpt's `ResourceIDAnnotation`.
pub const RESOURCE_ID: &str = "internal.config.k8s.io/kpt-resource-id";

/// kpt's `kptfile.Selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// Must all be among the resource's labels.
    pub labels: Vec<(String, String)>,
    /// Must all be among the resource's annotations.
    pub annotations: Vec<(String, String)>,
}

impl Selector {
    /// kpt's `IsEmpty`: no field set.
    pub fn is_empty(&self) -> bool {
        self.api_version.is_empty()
            && self.kind.is_empty()
            && self.name.is_empty()
            && self.namespace.is_empty()
            && self.labels.is_empty()
            && self.annotations.is_empty()
    }

    /// kpt's `IsMatch`.
    pub fn matches(&self, node: &Node) -> bool {
        let meta = kyaml::meta(node);
        let same = |want: &str, have: &str| want.is_empty() || want == have;
        same(&self.name, &meta.name)
            && same(&self.namespace, &meta.namespace)
            && same(&self.kind, &meta.kind)
            && same(&self.api_version, &meta.api_version)
            && subset(&self.labels, &meta_map(node, "labels"))
            && subset(&self.annotations, &meta_map(node, "annotations"))
    }

    /// A Kptfile's selector (a mapping of the fields kpt knows).
    pub fn from_node(node: &Node) -> Result<Selector, String> {
        let node = kyaml::content(node);
        let mut s = Selector::default();
        if node.kind != Kind::Mapping {
            if is_null(node) {
                return Ok(s);
            }
            return Err(format!(
                "a selector must be a mapping, found a {}",
                kyaml::kind_name(node.kind)
            ));
        }
        for kv in node.content.chunks_exact(2) {
            let (key, value) = (kv[0].value.as_str(), &kv[1]);
            let text = || scalar(value, key);
            match key {
                "apiVersion" => s.api_version = text()?,
                "kind" => s.kind = text()?,
                "name" => s.name = text()?,
                "namespace" => s.namespace = text()?,
                "labels" => s.labels = string_map(value, key)?,
                "annotations" => s.annotations = string_map(value, key)?,
                other => {
                    return Err(format!(
                        "a selector has apiVersion, kind, name, namespace, labels and \
                         annotations; not {other:?}"
                    ))
                }
            }
        }
        Ok(s)
    }

    /// `--match-labels` / `--match-annotations` values (`key=value`, each
    /// given once a flag). kpt splits at every `=` and keeps the first two
    /// parts (`a=b=c` is `a: b`); it crashes on one without `=`, refused
    /// here.
    pub fn parse_pairs(flag: &str, values: &[String]) -> Result<Vec<(String, String)>, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for v in values {
            let mut parts = v.split('=');
            let (Some(k), Some(val)) = (parts.next(), parts.next()) else {
                return Err(format!("{flag} takes key=value, not {v:?}"));
            };
            match out.iter_mut().find(|(ok, _)| ok == k) {
                Some(e) => e.1 = val.to_owned(),
                None => out.push((k.to_owned(), val.to_owned())),
            }
        }
        Ok(out)
    }
}

fn is_null(n: &Node) -> bool {
    n.tag == kyaml::NULL_TAG
}

fn scalar(value: &Node, key: &str) -> Result<String, String> {
    match value.kind {
        Kind::Scalar => Ok(kyaml::value_of(Some(value)).to_owned()),
        k => Err(format!(
            "a selector's {key} must be a string, found a {}",
            kyaml::kind_name(k)
        )),
    }
}

fn string_map(value: &Node, key: &str) -> Result<Vec<(String, String)>, String> {
    if is_null(value) {
        return Ok(Vec::new());
    }
    if value.kind != Kind::Mapping {
        return Err(format!(
            "a selector's {key} must be a mapping, found a {}",
            kyaml::kind_name(value.kind)
        ));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for kv in value.content.chunks_exact(2) {
        let v = scalar(&kv[1], key)?;
        match out.iter_mut().find(|(k, _)| *k == kv[0].value) {
            Some(e) => e.1 = v,
            None => out.push((kv[0].value.to_string(), v)),
        }
    }
    Ok(out)
}

/// kyaml's `getMapFromMeta`: `metadata.<field>` as a map (a value that is
/// not a scalar reads as `""`; a later duplicate key wins).
fn meta_map(node: &Node, field: &str) -> Vec<(String, String)> {
    let Some(m) = kyaml::field(node, "metadata").and_then(|m| kyaml::field(m, field)) else {
        return Vec::new();
    };
    if m.kind != Kind::Mapping {
        return Vec::new();
    }
    m.content
        .chunks_exact(2)
        .rev()
        .map(|kv| {
            let v = if kv[1].kind == Kind::Scalar {
                kv[1].value.to_string()
            } else {
                String::new()
            };
            (kv[0].value.to_string(), v)
        })
        .collect()
}

/// Whether every `want` entry is in `have` (the first of a key in `have`
/// counts: [`meta_map`] lists the last one first).
fn subset(want: &[(String, String)], have: &[(String, String)]) -> bool {
    want.iter().all(|(k, v)| {
        have.iter()
            .find(|(hk, _)| hk == k)
            .is_some_and(|(_, hv)| hv == v)
    })
}

/// Whether anything is to be selected or excluded (kpt's test for taking
/// this path at all: the ids and the `on N resource(s)` count come with it).
pub fn selecting(selectors: &[Selector], exclusions: &[Selector]) -> bool {
    !selectors.is_empty() || !exclusions.is_empty()
}

/// kpt's `SelectInput`: the positions of the selected resources, in
/// order, a resource once for each selector it matches.
pub fn select(input: &[Node], selectors: &[Selector], exclusions: &[Selector]) -> Vec<usize> {
    let mut picked = Vec::new();
    for (i, node) in input.iter().enumerate() {
        if selectors.is_empty() {
            picked.push(i);
        } else {
            for s in selectors {
                if s.matches(node) {
                    picked.push(i);
                }
            }
        }
    }
    picked.retain(|&i| {
        !exclusions
            .iter()
            .any(|e| !e.is_empty() && e.matches(&input[i]))
    });
    picked
}

/// kpt's `SetResourceIDs`: each resource's position as its id.
pub fn set_ids(items: &mut [Node]) -> Result<(), kyaml::NotAMapping> {
    for (i, item) in items.iter_mut().enumerate() {
        kyaml::set_annotation(item, RESOURCE_ID, &i.to_string())?;
    }
    Ok(())
}

/// kpt's `DeleteResourceIDs` (kyaml's `ClearAnnotation`: an emptied
/// `annotations` mapping stays).
pub fn delete_ids(items: &mut [Node]) {
    for item in items {
        kyaml::clear_annotation(item, RESOURCE_ID);
    }
}

fn id_of(node: &Node) -> &str {
    kyaml::annotation(node, RESOURCE_ID).unwrap_or_default()
}

/// kpt's `MergeWithInput`: `output` (of the function run on the resources
/// at `selected`) put back among `input`.
pub fn merge(input: Vec<Node>, selected: &[usize], output: Vec<Node>) -> Vec<Node> {
    let mut is_selected = vec![false; input.len()];
    for &i in selected {
        if let Some(s) = is_selected.get_mut(i) {
            *s = true;
        }
    }
    // The first output resource with each id.
    let mut by_id: std::collections::HashMap<String, usize> = Default::default();
    for (j, o) in output.iter().enumerate() {
        by_id.entry(id_of(o).to_owned()).or_insert(j);
    }
    let mut output: Vec<Option<Node>> = output.into_iter().map(Some).collect();
    let mut result = Vec::with_capacity(input.len().max(output.len()));
    for (i, node) in input.into_iter().enumerate() {
        if !is_selected[i] {
            result.push(node);
            continue;
        }
        // Each input has an id of its own, so each output resource is
        // taken at most once.
        if let Some(o) = by_id.get(id_of(&node)).and_then(|&j| output[j].take()) {
            result.push(o);
        }
    }
    result.extend(output.into_iter().flatten().filter(|o| id_of(o).is_empty()));
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Node {
        krm_yaml::parse::parse(text)
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
    }

    fn res(kind: &str, name: &str, extra: &str) -> Node {
        doc(&format!(
            "apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n{extra}"
        ))
    }

    fn names(items: &[Node]) -> Vec<String> {
        items.iter().map(|n| kyaml::meta(n).name).collect()
    }

    fn sel(text: &str) -> Selector {
        Selector::from_node(&doc(text)).unwrap()
    }

    #[test]
    fn every_field_of_a_selector_must_match() {
        let cm = doc("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n  labels: {app: x, tier: web}\n  annotations: {note: hi, empty: ''}\n");
        assert!(Selector::default().matches(&cm));
        assert!(sel("kind: ConfigMap").matches(&cm));
        assert!(sel("kind: ConfigMap\nname: a\nnamespace: ns\napiVersion: v1").matches(&cm));
        assert!(!sel("kind: ConfigMap\nname: b").matches(&cm));
        // apiVersion whole; namespace as written.
        assert!(!sel("apiVersion: v1beta1").matches(&cm));
        assert!(!sel("apiVersion: ''\nnamespace: default").matches(&cm));
        // labels and annotations as subsets.
        assert!(sel("labels: {app: x}").matches(&cm));
        assert!(sel("labels: {app: x, tier: web}").matches(&cm));
        assert!(!sel("labels: {app: x, tier: db}").matches(&cm));
        assert!(!sel("labels: {other: x}").matches(&cm));
        assert!(sel("annotations: {empty: ''}").matches(&cm));
        assert!(!sel("annotations: {missing: ''}").matches(&cm));
        // Case matters.
        assert!(!sel("kind: configmap").matches(&cm));
        // No namespace: only an empty selector namespace matches.
        let bare = res("ConfigMap", "b", "");
        assert!(!sel("namespace: default").matches(&bare));
    }

    #[test]
    fn selectors_read_from_a_kptfile() {
        let s = sel("apiVersion: apps/v1\nkind: Deployment\nname: n\nnamespace: ns\nlabels:\n  a: '1'\n  b: 2\nannotations:\n  c: d\n");
        assert_eq!(s.api_version, "apps/v1");
        assert_eq!(
            s.labels,
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(s.annotations, vec![("c".into(), "d".into())]);
        assert!(Selector::from_node(&doc("kinds: X")).is_err());
        assert!(Selector::from_node(&doc("labels: [a]")).is_err());
        assert!(Selector::from_node(&doc("{}")).unwrap().is_empty());
    }

    #[test]
    fn flag_pairs_as_kpt_splits_them() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Selector::parse_pairs("--match-labels", &v(&["a=b", "c=", "d=e=f", "a=z"])).unwrap(),
            vec![
                ("a".into(), "z".into()),
                ("c".into(), "".into()),
                ("d".into(), "e".into())
            ]
        );
        assert!(Selector::parse_pairs("--match-labels", &v(&["novalue"])).is_err());
    }

    #[test]
    fn selection_order_duplicates_and_exclusions() {
        let input = vec![
            res("ConfigMap", "a", ""),
            res("Secret", "b", ""),
            res("ConfigMap", "c", "  labels: {skip: 'yes'}\n"),
            res("Service", "d", ""),
        ];
        let all = select(&input, &[], &[]);
        assert_eq!(all, vec![0, 1, 2, 3]);
        let by_kind = select(&input, &[sel("kind: ConfigMap"), sel("name: d")], &[]);
        assert_eq!(by_kind, vec![0, 2, 3]);
        // Matched by two selectors: twice, as kpt does.
        let twice = select(&input, &[sel("kind: ConfigMap"), sel("name: a")], &[]);
        assert_eq!(twice, vec![0, 0, 2]);
        let excluded = select(
            &input,
            &[sel("kind: ConfigMap")],
            &[sel("labels: {skip: 'yes'}")],
        );
        assert_eq!(excluded, vec![0]);
        // Exclusions alone; an empty exclusion excludes nothing.
        assert_eq!(select(&input, &[], &[sel("kind: ConfigMap")]), vec![1, 3]);
        assert_eq!(
            select(&input, &[], &[Selector::default()]),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn output_merged_back_in_input_order_new_ones_last() {
        let mut input = vec![
            res("ConfigMap", "a", ""),
            res("ConfigMap", "b", ""),
            res("ConfigMap", "c", ""),
            res("ConfigMap", "d", ""),
        ];
        set_ids(&mut input).unwrap();
        assert_eq!(kyaml::annotation(&input[2], RESOURCE_ID), Some("2"));
        let selected = select(&input, &[sel("name: a"), sel("name: c")], &[]);
        assert_eq!(selected, vec![0, 2]);
        // The function drops c, changes a, adds e and returns a after it.
        let mut a = input[0].clone();
        kyaml::set_annotation(&mut a, "changed", "yes").unwrap();
        let e = res("ConfigMap", "e", "");
        let mut merged = merge(input, &selected, vec![e, a]);
        assert_eq!(names(&merged), vec!["a", "b", "d", "e"]);
        assert_eq!(kyaml::annotation(&merged[0], "changed"), Some("yes"));
        delete_ids(&mut merged);
        assert!(merged
            .iter()
            .all(|n| kyaml::annotation(n, RESOURCE_ID).is_none()));
    }
}
