//! `ensure-name-substring`: every resource's `metadata.name` (and the
//! fields of `additionalNameFields`) gets the substring prepended or
//! appended unless it already contains it; references to renamed
//! resources and `config.kubernetes.io/depends-on` follow.
//!
//! Follows kptdev/krm-functions-catalog at commit
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/ensure-name-substring/{main.go,ensure_name_substring.go,
//! nameref/nameref.go}` with kustomize api v0.10.1 / kyaml v0.13.0 (its
//! go.mod): `framework.LoadFunctionConfig` (`UnmarshalYAML`, `Default`,
//! `Validate`), the builtin `namePrefix` field specs (`metadata/name`),
//! `prefixsuffix.Filter`, and `command.Build` (the error written once on
//! stderr without a newline, no results, exit 1).
//!
//! - functionConfig: a `v1 ConfigMap` with exactly one `data` entry,
//!   `prepend: SUB` or `append: SUB`; or `fn.kpt.dev/v1alpha1
//!   EnsureNameSubstring` with `substring`, `editMode` (default
//!   `prepend`), `additionalNameFields` (or the deprecated `fieldSpecs`).
//!   The errors are the catalog's (`failed to load the `functionConfig`:
//!   ...`: `missing kind in object {...}`, `missing metadata.name in
//!   object {...}`, `only 1 entry is allowed in the ConfigMap, but got:
//!   N`, `unknown editMode: K, only prepend and append are allowed`,
//!   `function config must be either /v1, Kind=ConfigMap or ...`,
//!   `substring must not be empty`).
//! - Skipped kinds: CustomResourceDefinition, APIService
//!   (apiregistration.k8s.io), Namespace, Kptfile (kpt.dev).
//! - A `depends-on` annotation naming a resource of the package is
//!   updated on the resources whose fields changed.
//! - Annotations: the catalog's binary goes through kustomize's resmap
//!   and hands back `ResMap.RemoveBuildAnnotations` output
//!   (`resource.BuildAnnotations`). Dropped from every item (skipped kinds
//!   and the Kptfile too): the file annotations
//!   `internal.config.kubernetes.io/{path,index,seqindent}` and the legacy
//!   `config.kubernetes.io/{path,index}`, and kustomize's own
//!   `internal.config.kubernetes.io/{previousKinds,previousNames,prefixes,
//!   suffixes,previousNamespaces,allowNameChange,allowKindChange,refBy,
//!   generatorBehavior,needsHashSuffix}`. Kept: the id annotations
//!   (`internal.config.kubernetes.io/id`, `config.k8s.io/id`) and all
//!   others. What is kept is written back by `RNode.SetAnnotations`:
//!   `metadata.annotations` removed, then (when any are left) appended at
//!   the end of `metadata`, sorted by key, each value a new string (its
//!   quotes and comments gone; a value YAML 1.1 reads as another type is
//!   double-quoted); a key given twice keeps its last value. This happens
//!   to every item that has annotations, and to every renamed one (the
//!   rename wrote kustomize's bookkeeping annotations, so an empty
//!   `annotations: {}` goes). So kpt finds no path on any item and writes
//!   each to its default path (`[<namespace>/]<kind>_<name>.yaml`), with
//!   compact sequence indentation; the id lets kpt restore comments and
//!   field order.
//! - Name references: kustomize's builtin `namereference` table (api
//!   v0.10.1) with nameref's choice of referral: the renamed resources
//!   whose old name the field holds, of the line's kind (group, version
//!   when the line gives them), that the referrer could see
//!   (`SubsetThatCouldBeReferencedByResource`: same effective namespace,
//!   "" and `default` alike, or either one cluster-scoped, or a
//!   RoleBinding's ServiceAccount subject's namespace); a `roleRef/name`
//!   also by `roleRef`'s `apiGroup` and `kind`; a mapping (`subjects`,
//!   webhook `service`, Node `configSource.configMap`) by its own
//!   `namespace` field, and the referral's namespace (when it has one)
//!   is written into it.
//!   One candidate is taken; of several, none when the referrer was not
//!   renamed (kustomize compares recorded prefixes/suffixes), else the
//!   first when all got the same new name. Subjects are matched whatever
//!   their `kind` (kustomize's line names the whole entry). The
//!   IngressClass line names the group `networking.k8s.io/v1`, so it
//!   never matches (as in kustomize).
//!
//! Releases: answers as master (76fe3817: 15a13839 moved v0.2.0's code
//! to kustomize api v0.10.1 and kyaml v0.13.0; no tag up to 76fe3817),
//! and as v0.2.0
//! (`ensure-name-substring/v0.2.0`, 66662ce3, api 7e8ba62e9fd9, kyaml
//! v0.10.21) when [`Context::release`] names it. The function's code is
//! the same; what differs is api's `resource.BuildAnnotations`: v0.2.0
//! drops only kustomize's bookkeeping, then named
//! `config.kubernetes.io/{previousKinds,previousNames,prefixes,suffixes,
//! previousNamespaces,allowNameChange,allowKindChange}`, so every item
//! keeps its file annotations (legacy and `internal.` path, index,
//! seqindent: kpt writes each item back in place) and the `internal.`
//! annotations. The rewrite by `SetAnnotations` is the same. (api
//! 7e8ba62's factory also checks for a null list entry, `empty item at
//! ... in object ...`, but kyaml v0.10.21's `HasNilEntryInList` never
//! finds one: it type-switches on the `*yaml.Node`, which is neither a
//! map nor a slice; kyaml's own test expects `false` for a nil entry.)
//! Master's item validation (`missing kind`, `missing metadata.name`),
//! not modelled here, is not in v0.2.0 (`IncludeLocalConfigs` skips
//! it), so that departure is master's only. v0.1.x (the second error
//! print, v0.1.1's debug line, no depends-on rewrite, the Kptfile
//! renamed) is not reproduced.
//!
//! Departures (kustomize's machinery is large; what is not ported):
//! - Where kustomize fails on a reference (several candidates with
//!   different new names: `found multiple possible referrals`; a mapping
//!   without `name`), the reference is left alone and nothing fails.
//! - A renamed reference keeps its style and gets a `!!str` tag (kyaml
//!   replaces the node with an untagged one of the same style).
//! - Items kustomize's resmap would drop (null or empty) are kept.
//! - kustomize's bookkeeping annotations already on an input item (a
//!   `previousNames`, say) are dropped but not read as history.
//! - `additionalNameFields` paths are followed through mappings and every
//!   element of sequences; a missing field is not created (`create`).
//! - The renamed scalar keeps its comments (kyaml drops them and kpt
//!   copies them back afterwards: the same file).
//! - Duplicate resources (kustomize's resmap refuses them) are not
//!   refused.

use std::collections::BTreeMap;

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node, Style};

use crate::config::FieldSpec;
use crate::function::{Context, ResourceList, Stop};

mod config;
mod nameref;
mod reference_fields;
#[cfg(test)]
mod tests;

use config::{load, Config, Mode};
use nameref::fix_references;
use reference_fields::reference_fields;

const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";

/// kustomize's `resource.BuildAnnotations` (api v0.10.1): its own
/// bookkeeping (`internal.config.kubernetes.io/` + `previousKinds`,
/// `previousNames`, `prefixes`, `suffixes`, `previousNamespaces`,
/// `allowNameChange`, `allowKindChange`, `refBy`, `generatorBehavior`,
/// `needsHashSuffix`), and kyaml's file annotations (`path`, `index`,
/// `seqindent`, and the legacy `config.kubernetes.io/path` and `/index`).
/// The id annotations (`internal.config.kubernetes.io/id`,
/// `config.k8s.io/id`) are not in it.
const BUILD_ANNOTATIONS: &[&str] = &[
    "internal.config.kubernetes.io/previousKinds",
    "internal.config.kubernetes.io/previousNames",
    "internal.config.kubernetes.io/prefixes",
    "internal.config.kubernetes.io/suffixes",
    "internal.config.kubernetes.io/previousNamespaces",
    "internal.config.kubernetes.io/allowNameChange",
    "internal.config.kubernetes.io/allowKindChange",
    "internal.config.kubernetes.io/refBy",
    "internal.config.kubernetes.io/generatorBehavior",
    "internal.config.kubernetes.io/needsHashSuffix",
    "internal.config.kubernetes.io/path",
    "internal.config.kubernetes.io/index",
    "internal.config.kubernetes.io/seqindent",
    "config.kubernetes.io/path",
    "config.kubernetes.io/index",
];

/// `resource.BuildAnnotations` at kustomize api 7e8ba62e9fd9 (v0.2.0):
/// only its bookkeeping, under `konfig.ConfigAnnoDomain`, then
/// `config.kubernetes.io` (api `resource/resource.go@7e8ba62e9fd9:30-38`,
/// `konfig/general.go:35`); no file annotations.
const BUILD_ANNOTATIONS_V0_2_0: &[&str] = &[
    "config.kubernetes.io/previousKinds",
    "config.kubernetes.io/previousNames",
    "config.kubernetes.io/prefixes",
    "config.kubernetes.io/suffixes",
    "config.kubernetes.io/previousNamespaces",
    "config.kubernetes.io/allowNameChange",
    "config.kubernetes.io/allowKindChange",
];

/// The build annotations of the release the call answers as.
fn build_annotations(ctx: &Context) -> &'static [&'static str] {
    match ctx.release() {
        Some("v0.2.0") => BUILD_ANNOTATIONS_V0_2_0,
        _ => BUILD_ANNOTATIONS,
    }
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let config = load(rl.function_config.as_ref())
        .map_err(|e| Stop::Failed(format!("failed to load the `functionConfig`: {e}")))?;
    transform(rl, &config, ctx)
}

/// A resource's group, version, kind, name, namespace.
struct Id {
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
}

fn id_of(node: &Node) -> Id {
    let m = kyaml::meta(node);
    let (g, v) = m
        .api_version
        .split_once('/')
        .map(|(g, v)| (g.to_owned(), v.to_owned()))
        .unwrap_or_else(|| (String::new(), m.api_version.clone()));
    Id {
        group: g,
        version: v,
        kind: m.kind,
        name: m.name,
        namespace: m.namespace,
    }
}

/// `ResId.IsSelected(&gvk)`: each non-empty part of the spec matches.
fn selected(id: &Id, fs: &FieldSpec) -> bool {
    (fs.group.is_empty() || fs.group == id.group)
        && (fs.version.is_empty() || fs.version == id.version)
        && (fs.kind.is_empty() || fs.kind == id.kind)
}

fn should_skip(id: &Id) -> bool {
    id.kind == "CustomResourceDefinition"
        || (id.kind == "APIService" && id.group == "apiregistration.k8s.io")
        || id.kind == "Namespace"
        || (id.kind == "Kptfile" && id.group == "kpt.dev")
}

/// A renamed resource (kustomize's previous id and current name).
struct Rename {
    group: String,
    version: String,
    kind: String,
    namespace: String,
    /// Cluster-scoped (`ResId.IsClusterScoped`).
    cluster: bool,
    old: String,
    new: String,
}

/// `ResId.IsClusterScoped`: kyaml's table of kinds; a kind it does not
/// know is namespaced.
fn cluster_scoped(group: &str, version: &str, kind: &str) -> bool {
    let api_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    !crate::sdk::is_namespace_scoped(&Node::mapping(vec![
        Node::string("apiVersion"),
        Node::string(api_version.as_str()),
        Node::string("kind"),
        Node::string(kind),
        Node::string("metadata"),
        Node::mapping(vec![Node::string("namespace"), Node::string("x")]),
    ]))
}

/// `ResId.EffectiveNamespace`.
fn effective_namespace(cluster: bool, namespace: &str) -> &str {
    if cluster {
        "~X"
    } else if namespace.is_empty() || namespace == "default" {
        "default"
    } else {
        namespace
    }
}

fn edit(value: &str, config: &Config) -> String {
    match config.mode {
        Mode::Prepend => format!("{}{value}", config.substring),
        Mode::Append => format!("{value}{}", config.substring),
        Mode::Other => value.to_owned(),
    }
}

/// kyaml's `SetScalar` on a field: the new value keeps the style (a
/// plain string that YAML 1.1 reads as another type is double-quoted).
fn set_scalar(node: &mut Node, value: String) {
    let style = node.style;
    node.value = value.into();
    node.tag = "!!str".into();
    node.style = style;
    if style.is_empty() && kyaml::is_yaml11_non_string(&node.value) {
        node.style = Style::DOUBLE_QUOTED;
    }
}

/// The scalars at `path` (through mappings, and every element of
/// sequences).
fn visit_path(node: &mut Node, path: &[&str], f: &mut dyn FnMut(&mut Node)) {
    match node.kind {
        Kind::Sequence => {
            for e in &mut node.content {
                visit_path(e, path, f);
            }
        }
        Kind::Mapping => {
            let Some((first, rest)) = path.split_first() else {
                return;
            };
            let Some(i) = kyaml::field_index(node, first) else {
                return;
            };
            if let Some(v) = node.content.get_mut(i + 1) {
                if rest.is_empty() {
                    if v.kind == Kind::Sequence {
                        for e in &mut v.content {
                            f(e);
                        }
                    } else {
                        f(v);
                    }
                } else {
                    visit_path(v, rest, f);
                }
            }
        }
        Kind::Scalar if path.is_empty() => f(node),
        _ => {}
    }
}

fn transform(rl: &mut ResourceList, config: &Config, ctx: &Context) -> Result<(), Stop> {
    // `resourceLookup`: group, kind, name of every resource as read.
    let lookup: Vec<(String, String, String)> = rl
        .items
        .iter()
        .map(|i| {
            let id = id_of(i);
            (id.group, id.kind, id.name)
        })
        .collect();
    let mut renames: Vec<Rename> = Vec::new();
    // The resources whose name kustomize recorded (`StorePreviousId`).
    let mut recorded = vec![false; rl.items.len()];
    for (item, recorded) in rl.items.iter_mut().zip(recorded.iter_mut()) {
        ctx.check()?;
        if item.kind != Kind::Mapping {
            continue;
        }
        let id = id_of(item);
        if should_skip(&id) {
            continue;
        }
        for fs in &config.fields {
            if !selected(&id, fs) {
                continue;
            }
            let path: Vec<&str> = fs.path.split('/').collect();
            if fs.path == "metadata/name" {
                if id.name.contains(&config.substring) {
                    continue;
                }
            } else {
                let mut has = false;
                visit_path(item, &path, &mut |n| {
                    if n.kind == Kind::Scalar && n.value.contains(&config.substring) {
                        has = true;
                    }
                });
                if has {
                    continue;
                }
            }
            let mut changed = false;
            if fs.path == "metadata/name" {
                *recorded = true;
            }
            if fs.path == "metadata/name"
                && kyaml::field(item, "metadata")
                    .and_then(|m| kyaml::field(m, "name"))
                    .is_none_or(|n| n.kind != Kind::Scalar)
            {
                // kustomize's setter refuses a name that is no scalar.
                continue;
            }
            visit_path(item, &path, &mut |n| {
                if n.kind == Kind::Scalar && n.tag != kyaml::NULL_TAG {
                    let v = edit(&n.value, config);
                    set_scalar(n, v);
                    changed = true;
                }
            });
            if fs.path == "metadata/name" && changed && config.mode != Mode::Other {
                renames.push(Rename {
                    cluster: cluster_scoped(&id.group, &id.version, &id.kind),
                    group: id.group.clone(),
                    version: id.version.clone(),
                    kind: id.kind.clone(),
                    namespace: id.namespace.clone(),
                    old: id.name.clone(),
                    new: edit(&id.name, config),
                });
            }
            update_depends_on(item, config, &lookup);
        }
    }
    let fields = reference_fields();
    let build = build_annotations(ctx);
    for (item, recorded) in rl.items.iter_mut().zip(recorded) {
        ctx.check()?;
        fix_references(item, recorded, &renames, &fields);
        remove_build_annotations(item, recorded, build);
    }
    Ok(())
}

/// `ResMap.RemoveBuildAnnotations` on one resource, which kustomize runs
/// on every resource before handing the items back: a resource with
/// annotations (or whose name was recorded: recording it wrote
/// annotations) gets them back through `RNode.SetAnnotations` without
/// the `build` ones ([`build_annotations`]): `metadata.annotations` is
/// removed, then, when any are left, written again at the end of
/// `metadata`, sorted by key, each value a new string (its old style and
/// comments gone; one that a YAML 1.1 reader would take for another type
/// double-quoted). A key given twice keeps its last value (a Go map).
fn remove_build_annotations(item: &mut Node, recorded: bool, build: &[&str]) {
    let map = kyaml::content_mut(item);
    let Some(md) = kyaml::field_index(map, "metadata").and_then(|i| map.content.get_mut(i + 1))
    else {
        return;
    };
    if md.kind != Kind::Mapping {
        return;
    }
    let at = kyaml::field_index(md, "annotations");
    // `RNode.GetAnnotations`: `GetValue` of each key and value.
    let get_value = |n: &Node| {
        if n.tag == kyaml::NULL_TAG {
            String::new()
        } else {
            n.value.to_string()
        }
    };
    let mut annotations: BTreeMap<String, String> = BTreeMap::new();
    if let Some(a) = at.and_then(|i| md.content.get(i + 1)) {
        if a.kind == Kind::Mapping {
            for kv in a.content.chunks_exact(2) {
                if let [k, v] = kv {
                    annotations.insert(get_value(k), get_value(v));
                }
            }
        }
    }
    if annotations.is_empty() && !recorded {
        return;
    }
    annotations.retain(|k, _| !build.contains(&k.as_str()));
    if let Some(i) = at {
        md.content.drain(i..i + 2);
    }
    if annotations.is_empty() {
        return;
    }
    let Ok(anns) = kyaml::lookup_create(md, "annotations") else {
        return;
    };
    for (k, v) in annotations {
        // `anns` is a mapping: this cannot fail.
        let _ = kyaml::set_field(anns, &k, Node::string(v.as_str()));
    }
}

/// `updateDependsOnAnnotation`.
fn update_depends_on(item: &mut Node, config: &Config, lookup: &[(String, String, String)]) {
    let Some(value) = kyaml::annotation(item, DEPENDS_ON).map(str::to_owned) else {
        return;
    };
    let segments: Vec<&str> = value.split('/').collect();
    let word = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    };
    let (kind_i, name_i) = match segments.as_slice() {
        [_, "namespaces", _, _, _] if segments.iter().all(|s| word(s)) => (3, 4),
        [_, _, _] if segments.iter().all(|s| word(s)) => (1, 2),
        _ => return,
    };
    let get = |i: usize| segments.get(i).copied().unwrap_or("");
    let key = (get(0), get(kind_i), get(name_i));
    if !lookup
        .iter()
        .any(|(g, k, n)| (g.as_str(), k.as_str(), n.as_str()) == key)
    {
        return;
    }
    if config.mode == Mode::Other {
        return;
    }
    let mut out: Vec<String> = segments.iter().map(|s| (*s).to_owned()).collect();
    if let Some(n) = out.get_mut(name_i) {
        *n = edit(n, config);
    }
    let _ = kyaml::set_annotation(item, DEPENDS_ON, &out.join("/"));
}
