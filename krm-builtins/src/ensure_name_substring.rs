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
//!
//! Departures (kustomize's machinery is large; what is not ported):
//! - Name references: kustomize's `nameref` filter with the whole builtin
//!   `namereference` table is not ported. The references updated here
//!   are the pod spec's (of Pods, the workloads' `spec.template.spec`,
//!   CronJobs' `spec.jobTemplate.spec.template.spec`): ConfigMaps
//!   (`volumes[].configMap.name`, projected sources, `env[].valueFrom.
//!   configMapKeyRef.name`, `envFrom[].configMapRef.name`), Secrets
//!   (`volumes[].secret.secretName`, projected sources, `secretKeyRef`,
//!   `secretRef`, `imagePullSecrets[].name`), `serviceAccountName` /
//!   `serviceAccount`, `persistentVolumeClaim.claimName`, and
//!   RoleBinding/ClusterRoleBinding `roleRef.name` and ServiceAccount
//!   `subjects[].name`, matched by kind, old name and namespace.
//! - `additionalNameFields` paths are followed through mappings and every
//!   element of sequences; a missing field is not created (`create`).
//! - The renamed scalar keeps its comments (kyaml drops them and kpt
//!   copies them back afterwards: the same file).
//! - Duplicate resources (kustomize's resmap refuses them) are not
//!   refused.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node, Style};

use crate::config::FieldSpec;
use crate::{Context, ResourceList, Stop};

const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";

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

/// A rename: kind, namespace, old name, new name.
struct Rename {
    kind: String,
    namespace: String,
    old: String,
    new: String,
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
    for item in rl.items.iter_mut() {
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
                    kind: id.kind.clone(),
                    namespace: id.namespace.clone(),
                    old: id.name.clone(),
                    new: edit(&id.name, config),
                });
            }
            update_depends_on(item, config, &lookup);
        }
    }
    for item in rl.items.iter_mut() {
        ctx.check()?;
        fix_references(item, &renames);
    }
    Ok(())
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

/// The pod spec of a resource, when it has one.
fn pod_spec(item: &mut Node) -> Option<&mut Node> {
    let kind = kyaml::value_of(kyaml::field(item, "kind")).to_owned();
    let path: &[&str] = match kind.as_str() {
        "Pod" => &["spec"],
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController" => &["spec", "template", "spec"],
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return None,
    };
    let mut cur = item;
    for p in path {
        let i = kyaml::field_index(cur, p)?;
        cur = cur.content.get_mut(i + 1)?;
    }
    Some(cur)
}

fn fix_references(item: &mut Node, renames: &[Rename]) {
    if renames.is_empty() || item.kind != Kind::Mapping {
        return;
    }
    let ns = kyaml::meta(item).namespace;
    let kind = kyaml::value_of(kyaml::field(item, "kind")).to_owned();
    let rename = |kind: &str, n: &mut Node| {
        if n.kind != Kind::Scalar {
            return;
        }
        if let Some(r) = renames
            .iter()
            .find(|r| r.kind == kind && r.namespace == ns && r.old == n.value.as_str())
        {
            set_scalar(n, r.new.clone());
        }
    };
    if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
        let role_kind =
            kyaml::value_of(kyaml::field(item, "roleRef").and_then(|r| kyaml::field(r, "kind")))
                .to_owned();
        visit_path(item, &["roleRef", "name"], &mut |n| rename(&role_kind, n));
        if let Some(subjects) =
            kyaml::field_index(item, "subjects").and_then(|i| item.content.get_mut(i + 1))
        {
            for s in &mut subjects.content {
                if kyaml::value_of(kyaml::field(s, "kind")) == "ServiceAccount" {
                    visit_path(s, &["name"], &mut |n| rename("ServiceAccount", n));
                }
            }
        }
        return;
    }
    let Some(spec) = pod_spec(item) else {
        return;
    };
    visit_path(spec, &["serviceAccountName"], &mut |n| {
        rename("ServiceAccount", n)
    });
    visit_path(spec, &["serviceAccount"], &mut |n| {
        rename("ServiceAccount", n)
    });
    visit_path(spec, &["imagePullSecrets", "name"], &mut |n| {
        rename("Secret", n)
    });
    visit_path(spec, &["volumes", "configMap", "name"], &mut |n| {
        rename("ConfigMap", n)
    });
    visit_path(spec, &["volumes", "secret", "secretName"], &mut |n| {
        rename("Secret", n)
    });
    visit_path(
        spec,
        &["volumes", "persistentVolumeClaim", "claimName"],
        &mut |n| rename("PersistentVolumeClaim", n),
    );
    visit_path(
        spec,
        &["volumes", "projected", "sources", "configMap", "name"],
        &mut |n| rename("ConfigMap", n),
    );
    visit_path(
        spec,
        &["volumes", "projected", "sources", "secret", "name"],
        &mut |n| rename("Secret", n),
    );
    for containers in ["containers", "initContainers"] {
        visit_path(
            spec,
            &[containers, "env", "valueFrom", "configMapKeyRef", "name"],
            &mut |n| rename("ConfigMap", n),
        );
        visit_path(
            spec,
            &[containers, "env", "valueFrom", "secretKeyRef", "name"],
            &mut |n| rename("Secret", n),
        );
        visit_path(
            spec,
            &[containers, "envFrom", "configMapRef", "name"],
            &mut |n| rename("ConfigMap", n),
        );
        visit_path(
            spec,
            &[containers, "envFrom", "secretRef", "name"],
            &mut |n| rename("Secret", n),
        );
    }
}

#[cfg(test)]
mod tests;
