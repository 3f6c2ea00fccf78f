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

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Prepend,
    Append,
    Other,
}

#[derive(Debug)]
struct Config {
    substring: String,
    mode: Mode,
    fields: Vec<FieldSpec>,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let config = load(rl.function_config.as_ref())
        .map_err(|e| Stop::Failed(format!("failed to load the `functionConfig`: {e}")))?;
    transform(rl, &config, ctx)
}

/// kyaml's `ResourceMeta` as Go's `%v` prints it.
fn meta_v(node: &Node) -> String {
    let m = kyaml::meta(node);
    let md = kyaml::field(node, "metadata");
    let map_v = |name: &str| {
        let mut pairs: Vec<(String, String)> = md
            .and_then(|m| kyaml::field(m, name))
            .filter(|a| a.kind == Kind::Mapping)
            .map(|a| {
                a.content
                    .chunks_exact(2)
                    .filter_map(|kv| match kv {
                        [k, v] => Some((
                            kyaml::value_of(Some(k)).to_owned(),
                            kyaml::value_of(Some(v)).to_owned(),
                        )),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        format!("map[{}]", inner.join(" "))
    };
    format!(
        "{{{{{} {}}} {{{{{} {}}} {} {}}}}}",
        m.api_version,
        m.kind,
        m.name,
        m.namespace,
        map_v("labels"),
        map_v("annotations")
    )
}

/// `schema.FromAPIVersionAndKind(..).String()`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let parts: Vec<&str> = api_version.split('/').collect();
    let (g, v) = match parts.as_slice() {
        [""] => ("", ""),
        [v] => ("", *v),
        [g, v] => (*g, *v),
        _ => ("", ""),
    };
    format!("{g}/{v}, Kind={kind}")
}

/// A string for a JSON string field (k8s' YAML→JSON decoding): a string,
/// or null (nothing).
fn json_string(v: &Node, field: &str) -> Result<Option<String>, String> {
    match v.kind {
        Kind::Scalar if v.tag == kyaml::NULL_TAG => Ok(None),
        Kind::Scalar if v.tag == "!!str" => Ok(Some(v.value.to_string())),
        k => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field {field} of type string",
            match k {
                Kind::Mapping => "object",
                Kind::Sequence => "array",
                _ if v.tag == "!!bool" => "bool",
                _ => "number",
            }
        )),
    }
}

fn field_specs(v: &Node, field: &str) -> Result<Option<Vec<FieldSpec>>, String> {
    match v.kind {
        Kind::Scalar if v.tag == kyaml::NULL_TAG => Ok(None),
        Kind::Sequence => {
            let mut out = Vec::new();
            for e in &v.content {
                if e.kind != Kind::Mapping {
                    return Err(format!("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field {field} of type types.FieldSpec", if e.kind == Kind::Sequence { "array" } else { "string" }));
                }
                let mut fs = FieldSpec::default();
                for kv in e.content.chunks_exact(2) {
                    let [k, v] = kv else { continue };
                    let slot = match k.value.to_lowercase().as_str() {
                        "group" => &mut fs.group,
                        "version" => &mut fs.version,
                        "kind" => &mut fs.kind,
                        "path" => &mut fs.path,
                        _ => continue,
                    };
                    if let Some(s) = json_string(v, field)? {
                        *slot = s;
                    }
                }
                out.push(fs);
            }
            Ok(Some(out))
        }
        _ => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field {field} of type []types.FieldSpec",
            if v.kind == Kind::Mapping { "object" } else { "string" }
        )),
    }
}

/// `LoadFunctionConfig(fc, &EnsureNameSubstring{})`.
fn load(fc: Option<&Node>) -> Result<Config, String> {
    let mut substring = String::new();
    let mut mode = String::new();
    let mut field_specs_old: Option<Vec<FieldSpec>> = None;
    let mut additional: Option<Vec<FieldSpec>> = None;
    if let Some(fc) = fc.map(kyaml::content) {
        // `GetValidatedMetadata`.
        let m = kyaml::meta(fc);
        let has_meta = !m.api_version.is_empty()
            || !m.kind.is_empty()
            || kyaml::field(fc, "metadata").is_some_and(|md| {
                md.tag != kyaml::NULL_TAG
                    && !(matches!(md.kind, Kind::Mapping | Kind::Sequence) && md.content.is_empty())
            });
        if !has_meta {
            return Err("missing Resource metadata".to_owned());
        }
        if m.kind.is_empty() {
            return Err(format!("missing kind in object {}", meta_v(fc)));
        }
        if !m.kind.ends_with("List") && m.name.is_empty() {
            return Err(format!("missing metadata.name in object {}", meta_v(fc)));
        }
        if m.api_version == "v1" && m.kind == "ConfigMap" {
            let mut data: Vec<(String, String)> = Vec::new();
            if let Some(d) = kyaml::field(fc, "data").filter(|d| d.tag != kyaml::NULL_TAG) {
                if d.kind != Kind::Mapping {
                    return Err("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string".to_owned());
                }
                for kv in d.content.chunks_exact(2) {
                    let [k, v] = kv else { continue };
                    let v = json_string(v, "ConfigMap.data")?.unwrap_or_default();
                    match data.iter_mut().find(|(dk, _)| *dk == k.value.as_str()) {
                        Some(e) => e.1 = v,
                        None => data.push((k.value.to_string(), v)),
                    }
                }
            }
            let [(k, v)] = data.as_slice() else {
                return Err(format!(
                    "only 1 entry is allowed in the ConfigMap, but got: {}",
                    data.len()
                ));
            };
            match k.as_str() {
                "prepend" | "append" => mode.clone_from(k),
                _ => {
                    return Err(format!(
                        "unknown editMode: {k}, only prepend and append are allowed"
                    ))
                }
            }
            substring.clone_from(v);
        } else if m.api_version == "fn.kpt.dev/v1alpha1" && m.kind == "EnsureNameSubstring" {
            if fc.kind == Kind::Mapping {
                let mut fields: Vec<(&Node, &Node)> = fc
                    .content
                    .chunks_exact(2)
                    .filter_map(|kv| match kv {
                        [k, v] => Some((k, v)),
                        _ => None,
                    })
                    .collect();
                fields.sort_by(|a, b| a.0.value.cmp(&b.0.value));
                for (k, v) in fields {
                    match k.value.to_lowercase().as_str() {
                        "substring" => {
                            if let Some(s) = json_string(v, "EnsureNameSubstring.substring")? {
                                substring = s;
                            }
                        }
                        "editmode" => {
                            if let Some(s) = json_string(v, "EnsureNameSubstring.editMode")? {
                                mode = s;
                            }
                        }
                        "fieldspecs" => {
                            field_specs_old = field_specs(v, "EnsureNameSubstring.fieldSpecs")?;
                        }
                        "additionalnamefields" => {
                            additional =
                                field_specs(v, "EnsureNameSubstring.additionalNameFields")?;
                        }
                        _ => {}
                    }
                }
            }
        } else {
            return Err(format!(
                "function config must be either {} or {}, but we got: {}",
                gvk_string("v1", "ConfigMap"),
                gvk_string("fn.kpt.dev/v1alpha1", "EnsureNameSubstring"),
                gvk_string(&m.api_version, &m.kind)
            ));
        }
    }
    // `Default`.
    if mode.is_empty() {
        mode = "prepend".to_owned();
    }
    if additional.is_none() && field_specs_old.is_some() {
        additional = field_specs_old.take();
    }
    // `Validate`.
    if substring.is_empty() {
        return Err("substring must not be empty".to_owned());
    }
    if additional.is_some() && field_specs_old.is_some() {
        return Err(
            "`fieldSpecs` has been deprecated, please rename it to `additionalNameFields`"
                .to_owned(),
        );
    }
    let mut fields = vec![FieldSpec {
        path: "metadata/name".to_owned(),
        ..FieldSpec::default()
    }];
    fields.extend(additional.unwrap_or_default());
    Ok(Config {
        substring,
        mode: match mode.as_str() {
            "prepend" => Mode::Prepend,
            "append" => Mode::Append,
            _ => Mode::Other,
        },
        fields,
    })
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

/// A group, version and kind; an empty part matches anything
/// (`Gvk.IsSelected`).
#[derive(Debug, Clone, Copy)]
struct Gvk {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}

const fn gvk(group: &'static str, version: &'static str, kind: &'static str) -> Gvk {
    Gvk {
        group,
        version,
        kind,
    }
}

/// One line of kustomize's `namereference` table: a field of the
/// `referrer`'s kind that names a resource of the `target`'s kind.
struct RefField {
    target: Gvk,
    referrer: Gvk,
    /// The path, split at `/` (`\/` is a `/` inside a key).
    path: Vec<String>,
}

fn split_path(path: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'/') => {
                chars.next();
                if let Some(last) = out.last_mut() {
                    last.push('/');
                }
            }
            '/' => out.push(String::new()),
            c => {
                if let Some(last) = out.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    out
}

/// The pod spec's place in the kinds that hold one.
const POD: (Gvk, &str) = (gvk("", "v1", "Pod"), "spec");
const TEMPLATE: &str = "spec/template/spec";
const CRONJOB: (Gvk, &str) = (
    gvk("", "", "CronJob"),
    "spec/jobTemplate/spec/template/spec",
);

/// The holders of a pod spec that the ConfigMap and Secret lines name.
fn config_holders() -> [(Gvk, &'static str); 7] {
    [
        POD,
        (gvk("", "", "Deployment"), TEMPLATE),
        (gvk("", "", "ReplicaSet"), TEMPLATE),
        (gvk("", "", "DaemonSet"), TEMPLATE),
        (gvk("", "", "StatefulSet"), TEMPLATE),
        (gvk("", "", "Job"), TEMPLATE),
        CRONJOB,
    ]
}

/// The holders of a pod spec that the ServiceAccount, claim and
/// PriorityClass lines name (no ReplicaSet, a ReplicationController).
fn other_holders() -> [(Gvk, &'static str); 7] {
    [
        (gvk("", "", "Pod"), "spec"),
        (gvk("", "", "StatefulSet"), TEMPLATE),
        (gvk("", "", "Deployment"), TEMPLATE),
        (gvk("", "", "ReplicationController"), TEMPLATE),
        CRONJOB,
        (gvk("", "", "Job"), TEMPLATE),
        (gvk("", "", "DaemonSet"), TEMPLATE),
    ]
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// kustomize's builtin `namereference` table (api v0.10.1), in its order.
fn reference_fields() -> Vec<RefField> {
    let mut out: Vec<RefField> = Vec::new();
    let mut add = |target: Gvk, referrer: Gvk, path: &str| {
        out.push(RefField {
            target,
            referrer,
            path: split_path(path),
        });
    };
    for kind in [
        "Deployment",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
    ] {
        add(
            gvk("", "", kind),
            gvk("", "", "HorizontalPodAutoscaler"),
            "spec/scaleTargetRef/name",
        );
    }
    let cm = gvk("", "v1", "ConfigMap");
    for (holder, at) in config_holders() {
        for tail in [
            "volumes/configMap/name",
            "containers/env/valueFrom/configMapKeyRef/name",
            "initContainers/env/valueFrom/configMapKeyRef/name",
            "containers/envFrom/configMapRef/name",
            "initContainers/envFrom/configMapRef/name",
            "volumes/projected/sources/configMap/name",
        ] {
            add(cm, holder, &format!("{at}/{tail}"));
        }
    }
    add(
        cm,
        gvk("", "", "PodTemplate"),
        "template/spec/volumes/configMap/name",
    );
    add(cm, gvk("", "", "Node"), "spec/configSource/configMap");
    add(cm, gvk("", "", "Role"), "rules/resourceNames");
    add(cm, gvk("", "", "ClusterRole"), "rules/resourceNames");
    add(
        cm,
        gvk("", "", "Ingress"),
        "metadata/annotations/nginx.ingress.kubernetes.io\\/fastcgi-params-configmap",
    );
    let secret = gvk("", "v1", "Secret");
    for (holder, at) in config_holders() {
        for tail in [
            "volumes/secret/secretName",
            "containers/env/valueFrom/secretKeyRef/name",
            "initContainers/env/valueFrom/secretKeyRef/name",
            "containers/envFrom/secretRef/name",
            "initContainers/envFrom/secretRef/name",
            "imagePullSecrets/name",
            "volumes/projected/sources/secret/name",
        ] {
            add(secret, holder, &format!("{at}/{tail}"));
        }
    }
    let ingress = gvk("", "", "Ingress");
    for path in [
        "spec/tls/secretName",
        "metadata/annotations/ingress.kubernetes.io\\/auth-secret",
        "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret",
        "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-tls-secret",
    ] {
        add(secret, ingress, path);
    }
    add(
        secret,
        gvk("", "", "ServiceAccount"),
        "imagePullSecrets/name",
    );
    for key in [
        "secretName",
        "adminSecretName",
        "userSecretName",
        "secretRef",
    ] {
        add(
            secret,
            gvk("", "", "StorageClass"),
            &format!("parameters/{key}"),
        );
    }
    add(secret, gvk("", "", "Role"), "rules/resourceNames");
    add(secret, gvk("", "", "ClusterRole"), "rules/resourceNames");
    add(
        secret,
        gvk("serving.knative.dev", "v1", "Service"),
        "spec/template/spec/containers/env/valueFrom/secretKeyRef/name",
    );
    add(
        secret,
        gvk("", "", "PersistentVolume"),
        "spec/azureFile/secretName",
    );
    let service = gvk("", "v1", "Service");
    add(service, gvk("apps", "", "StatefulSet"), "spec/serviceName");
    for path in [
        "spec/rules/http/paths/backend/serviceName",
        "spec/backend/serviceName",
        "spec/rules/http/paths/backend/service/name",
        "spec/defaultBackend/service/name",
    ] {
        add(service, ingress, path);
    }
    add(
        service,
        gvk("apiregistration.k8s.io", "", "APIService"),
        "spec/service/name",
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        add(
            service,
            gvk("admissionregistration.k8s.io", "", kind),
            "webhooks/clientConfig/service",
        );
    }
    add(
        gvk(RBAC, "", "Role"),
        gvk(RBAC, "", "RoleBinding"),
        "roleRef/name",
    );
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        add(
            gvk(RBAC, "", "ClusterRole"),
            gvk(RBAC, "", kind),
            "roleRef/name",
        );
    }
    let sa = gvk("", "v1", "ServiceAccount");
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        add(sa, gvk(RBAC, "", kind), "subjects");
    }
    for (holder, at) in other_holders() {
        add(sa, holder, &format!("{at}/serviceAccountName"));
    }
    let pvc = gvk("", "v1", "PersistentVolumeClaim");
    for (holder, at) in other_holders() {
        add(
            pvc,
            holder,
            &format!("{at}/volumes/persistentVolumeClaim/claimName"),
        );
    }
    let pv = gvk("", "v1", "PersistentVolume");
    add(pv, gvk("", "", "PersistentVolumeClaim"), "spec/volumeName");
    add(pv, gvk("", "", "ClusterRole"), "rules/resourceNames");
    let sc = gvk("storage.k8s.io", "v1", "StorageClass");
    add(sc, gvk("", "", "PersistentVolume"), "spec/storageClassName");
    add(
        sc,
        gvk("", "", "PersistentVolumeClaim"),
        "spec/storageClassName",
    );
    add(
        sc,
        gvk("", "", "StatefulSet"),
        "spec/volumeClaimTemplates/spec/storageClassName",
    );
    let pc = gvk("scheduling.k8s.io", "v1", "PriorityClass");
    for (holder, at) in other_holders() {
        add(pc, holder, &format!("{at}/priorityClassName"));
    }
    // The table's group for IngressClass is `networking.k8s.io/v1`: no
    // resource's group is that, so the line never matches.
    add(
        gvk("networking.k8s.io/v1", "v1", "IngressClass"),
        ingress,
        "spec/ingressClassName",
    );
    out
}

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
fn fix_references(item: &mut Node, recorded: bool, renames: &[Rename], fields: &[RefField]) {
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

#[cfg(test)]
mod tests;
