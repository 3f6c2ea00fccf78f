//! nameref's filter (`nameref/nameref.go`): the references to renamed
//! resources, by the [`reference_fields`](mod@super::reference_fields) table,
//! given the referral's new name (and namespace).

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use super::reference_fields::{Gvk, RefField};
use super::{cluster_scoped, effective_namespace, id_of, set_scalar, Rename};

/// `Gvk.IsSelected` of a resource's group, version, kind.
fn gvk_selected(group: &str, version: &str, kind: &str, sel: &Gvk) -> bool {
    (sel.group.is_empty() || sel.group == group)
        && (sel.version.is_empty() || sel.version == version)
        && (sel.kind.is_empty() || sel.kind == kind)
}

/// What the name-reference filter knows of the resource that refers.
struct Referrer {
    namespace: String,
    cluster: bool,
    /// Its name got the substring (kustomize compares the prefixes and
    /// suffixes it recorded).
    recorded: bool,
    /// A RoleBinding's ServiceAccount subjects' namespaces.
    binding_namespaces: Vec<String>,
}

impl Referrer {
    fn effective_namespace(&self) -> &str {
        effective_namespace(self.cluster, &self.namespace)
    }
}

/// `ResMap.SubsetThatCouldBeReferencedByResource`.
fn could_be_referenced(r: &Rename, referrer: &Referrer) -> bool {
    referrer.cluster
        || r.cluster
        || effective_namespace(r.cluster, &r.namespace) == referrer.effective_namespace()
        || referrer.binding_namespaces.contains(&r.namespace)
}

/// nameref's `selectReferral`: the renamed resource a name refers to.
/// More than one with different names (kustomize fails: "found multiple
/// possible referrals") is left alone here.
fn select_referral<'r>(
    name: &str,
    candidates: &[&'r Rename],
    target: &Gvk,
    role_ref: Option<(&str, &str)>,
    referrer: &Referrer,
) -> Option<&'r Rename> {
    let sieved: Vec<&Rename> = candidates
        .iter()
        .copied()
        .filter(|r| r.old == name)
        .filter(|r| gvk_selected(&r.group, &r.version, &r.kind, target))
        .filter(|r| {
            role_ref.is_none_or(|(g, k)| {
                (g.is_empty() || r.group == g) && (k.is_empty() || r.kind == k)
            })
        })
        .filter(|r| {
            referrer.cluster
                || r.cluster
                || r.kind == "ServiceAccount"
                || effective_namespace(r.cluster, &r.namespace) == referrer.effective_namespace()
        })
        .collect();
    if let [one] = sieved.as_slice() {
        return Some(one);
    }
    // `prefixSuffixEquals`: every renamed resource recorded the same
    // substring; a referrer that was not renamed recorded none.
    if !referrer.recorded {
        return None;
    }
    let first = sieved.first()?;
    sieved.iter().all(|r| r.new == first.new).then_some(*first)
}

/// The values at `path` (kustomize's `fieldspec.Filter` without
/// `create`): through mappings, and every element of a sequence met on
/// the way.
fn visit_field(node: &mut Node, path: &[String], f: &mut dyn FnMut(&mut Node)) {
    match node.kind {
        Kind::Sequence => {
            for e in &mut node.content {
                visit_field(e, path, f);
            }
        }
        Kind::Mapping => {
            let Some((first, rest)) = path.split_first() else {
                return;
            };
            let Some(v) = kyaml::field_index(node, first).and_then(|i| node.content.get_mut(i + 1))
            else {
                return;
            };
            if rest.is_empty() {
                f(v);
            } else {
                visit_field(v, rest, f);
            }
        }
        _ => {}
    }
}

/// nameref's `set` on one value: a name, a list of names, or a mapping
/// with `name` (and `namespace`).
fn set_reference(
    v: &mut Node,
    candidates: &[&Rename],
    target: &Gvk,
    role_ref: Option<(&str, &str)>,
    referrer: &Referrer,
    top: bool,
) {
    if v.tag == kyaml::NULL_TAG {
        return;
    }
    match v.kind {
        Kind::Scalar => {
            if let Some(r) = select_referral(&v.value, candidates, target, role_ref, referrer) {
                if r.new != v.value.as_str() {
                    set_scalar(v, r.new.clone());
                }
            }
        }
        Kind::Mapping => {
            let Some(name) = kyaml::field(v, "name").map(|n| n.value.to_string()) else {
                // kustomize fails: "path config error; no 'name' field".
                return;
            };
            let by_namespace: Vec<&Rename>;
            let candidates = match kyaml::field(v, "namespace") {
                Some(ns) => {
                    by_namespace = candidates
                        .iter()
                        .copied()
                        .filter(|r| {
                            // `GroupedByOriginalNamespace`: by effective
                            // namespace, cluster-scoped ones left out.
                            !r.cluster
                                && effective_namespace(false, &r.namespace) == ns.value.as_str()
                        })
                        .collect();
                    by_namespace.as_slice()
                }
                None => candidates,
            };
            let Some(r) = select_referral(&name, candidates, target, role_ref, referrer) else {
                return;
            };
            if let Some(i) = kyaml::field_index(v, "name") {
                if let Some(n) = v.content.get_mut(i + 1) {
                    let style = n.style;
                    let mut new = Node::string(r.new.as_str());
                    new.style = style;
                    *n = new;
                }
            }
            if !r.namespace.is_empty() {
                let _ = kyaml::set_field(v, "namespace", Node::string(r.namespace.as_str()));
            }
        }
        Kind::Sequence if top => {
            for e in &mut v.content {
                set_reference(e, candidates, target, role_ref, referrer, false);
            }
        }
        _ => {}
    }
}

/// `roleRef`'s `apiGroup` and `kind` (`getRoleRefGvk`), when both are
/// there.
fn role_ref_gvk(item: &Node) -> Option<(String, String)> {
    let rr = kyaml::field(item, "roleRef")?;
    let group = kyaml::field(rr, "apiGroup")?;
    let kind = kyaml::field(rr, "kind")?;
    Some((group.value.to_string(), kind.value.to_string()))
}

/// kustomize's `nameref` filters on one resource (the referrer): each
/// line of the table that selects it, in order.
pub(super) fn fix_references(
    item: &mut Node,
    recorded: bool,
    renames: &[Rename],
    fields: &[RefField],
) {
    if renames.is_empty() || item.kind != Kind::Mapping {
        return;
    }
    let id = id_of(item);
    let binding_namespaces = if id.kind == "RoleBinding" {
        kyaml::field(item, "subjects")
            .map(|s| {
                s.content
                    .iter()
                    .filter(|s| kyaml::value_of(kyaml::field(s, "kind")) == "ServiceAccount")
                    .filter_map(|s| kyaml::field(s, "namespace"))
                    .map(|ns| ns.value.to_string())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let referrer = Referrer {
        cluster: cluster_scoped(&id.group, &id.version, &id.kind),
        namespace: id.namespace.clone(),
        recorded,
        binding_namespaces,
    };
    let candidates: Vec<&Rename> = renames
        .iter()
        .filter(|r| could_be_referenced(r, &referrer))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let role_ref = role_ref_gvk(item);
    for field in fields {
        if !gvk_selected(&id.group, &id.version, &id.kind, &field.referrer) {
            continue;
        }
        // `roleRefFilter`: a `roleRef/name` names the kind beside it.
        let is_role_ref =
            matches!(field.path.as_slice(), [.., a, b] if a == "roleRef" && b == "name");
        let role = role_ref
            .as_ref()
            .filter(|_| is_role_ref)
            .map(|(g, k)| (g.as_str(), k.as_str()));
        visit_field(item, &field.path, &mut |v| {
            set_reference(v, &candidates, &field.target, role, &referrer, true);
        });
    }
}
