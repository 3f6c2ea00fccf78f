//! `set-annotations`: sets annotations on every resource (local config
//! included) at `metadata.annotations` and at the pod and job templates'
//! annotations (kustomize's `commonAnnotations` field specs), and at any
//! further fields the config names (`additionalAnnotationFields`, or the
//! deprecated `fieldSpecs`).
//!
//! Follows kptdev/krm-functions-catalog at commit 76fe3817f949
//! (`functions/go/set-annotations/{main,annotations_transformer}.go`),
//! with the libraries it pins: kustomize `api` and `kyaml` at fe551be87b8d
//! (`api/filters/annotations`, `api/filters/fsslice`,
//! `api/filters/fieldspec`, `api/filters/filtersutil`, the
//! `commonannotations` field specs, `api/resource`'s factory, `api/resmap`,
//! `kyaml/fn/framework` and its `command`):
//!
//! - config: `v1 ConfigMap` (its `data`, values as written),
//!   `fn.kpt.dev/v1alpha1 SetAnnotations` or the legacy
//!   `SetAnnotationConfig` (`annotations`, `additionalAnnotationFields`,
//!   `fieldSpecs`; read as `sigs.k8s.io/yaml` reads them: YAML 1.1 scalars
//!   turned into strings, so `yes` is "true"), the `function-input`
//!   ConfigMap. Errors are one error result, the framework's stderr
//!   (`[error]: ...`) and exit 1.
//! - every item must name a kind and a name (kustomize's resource factory;
//!   empty items are dropped) and no two may have the same id (its resmap);
//!   otherwise the run fails, and the binary writes no items at all.
//! - each annotation, in key order, at each field spec (the additional ones
//!   first): the annotations mapping is created where the spec says so
//!   (appended, a null one turned into a mapping), and the value set by
//!   kyaml's `FieldSetter` (see [`kyaml::set_field`]).
//! - results: one per file path, file index and field path, "set
//!   annotations: {json}", without severity, sorted as the framework sorts
//!   them; "no annotations applied" when nothing was set.
//! - a config's decoding error is the first in key order (Go decodes the
//!   JSON `sigs.k8s.io/yaml` makes from a map), named as Go 1.24's
//!   `encoding/json` names it: `plugin.annotations` (no map key),
//!   `FieldSpec.fieldSpecs.path`, `FieldSpec.fieldSpecs.Gvk.group` (the
//!   embedded struct by its Go name), `plugin.Results`.
//!
//! Not modelled: the framework's reconciliation of the legacy and
//! internal path/index annotations (`kio.ReconcileInternalAnnotations`),
//! which only matters when the annotations set are those.
//!
//! Releases: answers as master (76fe3817; its code came with 106a8b0e
//! and aaa80916, after v0.1.4, and no tag up to 76fe3817 has it),
//! whatever [`Context::release`] names. v0.1.3 and v0.1.4 (no
//! success results, the results as one `{name, items}` mapping, stderr
//! `[error] : ...`, other item checks) are not reproduced.
//!
//! Departures: a scalar that `sigs.k8s.io/yaml` reads as a float is turned
//! into a string by Rust's formatting (Go's `%g`-like formatting differs
//! for exponents).

use krm_yaml::package::kyaml;
use krm_yaml::{emit, resolve, Kind, Node};

use crate::config::FieldSpec;
use crate::function::{Context, ResourceList, Stop};
use crate::result::{Field, File, FnResult, Severity};
use crate::sdk;

#[cfg(test)]
mod tests;

/// The `commonannotations` field specs.
fn default_specs() -> Vec<FieldSpec> {
    let spec = |group: &str, version: &str, kind: &str, path: &str| FieldSpec {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        path: path.into(),
        create: true,
    };
    let tmpl = "spec/template/metadata/annotations";
    vec![
        spec("", "", "", "metadata/annotations"),
        spec("", "v1", "ReplicationController", tmpl),
        spec("", "", "Deployment", tmpl),
        spec("", "", "ReplicaSet", tmpl),
        spec("", "", "DaemonSet", tmpl),
        spec("", "", "StatefulSet", tmpl),
        spec("batch", "", "Job", tmpl),
        spec(
            "batch",
            "",
            "CronJob",
            "spec/jobTemplate/metadata/annotations",
        ),
        spec(
            "batch",
            "",
            "CronJob",
            "spec/jobTemplate/spec/template/metadata/annotations",
        ),
    ]
}

struct Config {
    /// Sorted by key.
    annotations: Vec<(String, String)>,
    specs: Vec<FieldSpec>,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    match process(rl, ctx) {
        Ok(results) => {
            rl.results = results;
            Ok(())
        }
        Err(Failure::Cancelled) => Err(Stop::Cancelled),
        Err(Failure::Error(msg)) => {
            // `SetAnnotationsProcessor.Process`: the results are this one
            // error, returned to the framework, which prints it.
            let r = FnResult::error(msg);
            let text = format!("[error]: {}", r.message);
            rl.results = vec![r];
            Err(Stop::Failed(text))
        }
    }
}

enum Failure {
    Error(String),
    Cancelled,
}

fn process(rl: &mut ResourceList, ctx: &Context) -> Result<Vec<FnResult>, Failure> {
    let config = read_config(rl.function_config.as_ref())
        .map_err(|e| Failure::Error(format!("failed to configure function: {e}")))?;
    // `resourceList.Items, err = fn.Run(...)`: no items on failure.
    match transform(std::mem::take(&mut rl.items), &config, ctx) {
        Ok((items, results)) => {
            rl.items = items;
            Ok(results)
        }
        Err(Failure::Error(e)) => Err(Failure::Error(format!("failed to run function: {e}"))),
        Err(c) => Err(c),
    }
}

/// `validGVK`: apiVersion and kind exactly.
fn is_type(o: &Node, api_version: &str, kind: &str) -> bool {
    let m = kyaml::meta(o);
    m.api_version == api_version && m.kind == kind
}

fn read_config(fc: Option<&Node>) -> Result<Config, String> {
    let empty = Node::mapping(vec![]);
    let o = fc.unwrap_or(&empty);
    let mut specs;
    let mut annotations: Vec<(String, String)> = Vec::new();
    if o.kind == Kind::Mapping && is_type(o, "v1", "ConfigMap") {
        // `GetDataMap`: every entry's value as written ("" for null and
        // collections).
        specs = Vec::new();
        if let Some(d) = kyaml::field(o, "data").filter(|d| d.kind == Kind::Mapping) {
            for kv in d.content.chunks_exact(2) {
                let [k, v] = kv else { continue };
                upsert(
                    &mut annotations,
                    kyaml::value_of(Some(k)),
                    kyaml::value_of(Some(v)),
                );
            }
        }
    } else if o.kind == Kind::Mapping
        && (is_type(o, "fn.kpt.dev/v1alpha1", "SetAnnotations")
            || is_type(o, "fn.kpt.dev/v1alpha1", "SetAnnotationConfig"))
    {
        let text = emit::encode_node(o, false);
        let fail = |e: String| {
            format!(
                "failed to unmarshal config {}: error unmarshaling JSON: while decoding JSON: json: {e}",
                sdk::go_quote(&text)
            )
        };
        let plugin = decode_plugin(o).map_err(fail)?;
        annotations = plugin.annotations;
        let (additional, deprecated) = (plugin.additional, plugin.deprecated);
        specs = match (additional, deprecated) {
            (Some(_), Some(_)) => {
                return Err(
                    "`fieldSpecs` has been deprecated, please rename it to `additionalAnnotationFields`"
                        .into(),
                )
            }
            (None, Some(f)) => f,
            (Some(a), None) => a,
            (None, None) => Vec::new(),
        };
    } else {
        return Err("`functionConfig` must be a `ConfigMap` or `SetAnnotations`".into());
    }
    if annotations.is_empty() {
        return Err("input annotation list cannot be empty".into());
    }
    annotations.sort_by(|a, b| a.0.cmp(&b.0));
    specs.extend(default_specs());
    Ok(Config { annotations, specs })
}

fn upsert(map: &mut Vec<(String, String)>, k: &str, v: &str) {
    match map.iter_mut().find(|e| e.0 == k) {
        Some(e) => e.1 = v.to_owned(),
        None => map.push((k.to_owned(), v.to_owned())),
    }
}

/// The JSON type name of a node, as `encoding/json` names it.
fn json_kind(n: &Node) -> &'static str {
    match n.kind {
        Kind::Mapping => "object",
        Kind::Sequence => "array",
        _ => match yaml11_scalar(n) {
            Scalar::Null => "null",
            Scalar::Bool(_) => "bool",
            Scalar::Number(_) => "number",
            Scalar::Str(_) => "string",
        },
    }
}

enum Scalar {
    Null,
    Bool(bool),
    Number(String),
    Str(String),
}

/// A scalar as yaml.v2 (YAML 1.1) types it, for `sigs.k8s.io/yaml`.
fn yaml11_scalar(n: &Node) -> Scalar {
    let v = n.value.as_str();
    if !n.style.is_empty() {
        return Scalar::Str(v.to_owned());
    }
    match n.tag.as_str() {
        "!!null" => Scalar::Null,
        "!!bool" => Scalar::Bool(matches!(v, "true" | "True" | "TRUE")),
        "!!int" => Scalar::Number(int_text(v)),
        "!!float" => Scalar::Number(
            v.replace('_', "")
                .parse::<f64>()
                .map_or_else(|_| v.to_owned(), |f| f.to_string()),
        ),
        _ if resolve::is_old_bool(v) => Scalar::Bool(matches!(
            v,
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE"
        )),
        _ => Scalar::Str(v.to_owned()),
    }
}

/// An integer's decimal text.
fn int_text(v: &str) -> String {
    crate::config::yaml_int(v, false).map_or_else(|| v.to_owned(), |n| n.to_string())
}

/// A mapping as `sigs.k8s.io/yaml` hands it to `encoding/json`: keys
/// turned into strings (yaml.v2 scalars), a repeated key's last value
/// (yaml.v2 fills a map), sorted by key (`json.Marshal` of a map), so in
/// the order Go decodes them.
fn json_object(n: &Node) -> Vec<(String, &Node)> {
    let mut fields: std::collections::BTreeMap<String, &Node> = std::collections::BTreeMap::new();
    for kv in n.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        // Keys too become strings (`on` is "true").
        let key = match yaml11_scalar(k) {
            Scalar::Null => "null".to_owned(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Number(s) | Scalar::Str(s) => s,
        };
        fields.insert(key, v);
    }
    fields.into_iter().collect()
}

/// `encoding/json`'s error for a value of another type, at `field` (Go
/// 1.24: the struct decoded, then the path of JSON names from it, an
/// embedded struct by its Go name, no map keys).
fn type_error(n: &Node, field: &str, ty: &str) -> String {
    format!(
        "cannot unmarshal {} into Go struct field {field} of type {ty}",
        json_kind(n)
    )
}

/// The catalog's `plugin`, as `sigs.k8s.io/yaml` v1.4.0 decodes it.
#[derive(Default)]
struct Plugin {
    annotations: Vec<(String, String)>,
    /// `fieldSpecs` (`None`: nil).
    deprecated: Option<Vec<FieldSpec>>,
    /// `additionalAnnotationFields` (`None`: nil).
    additional: Option<Vec<FieldSpec>>,
}

/// `yaml.Unmarshal(config, &plugin)`: the fields in key order, each
/// name matched as `encoding/json` matches it (case-insensitively); the
/// first type error, as Go reports it (without `json: `), stops it.
/// Scalars become strings where the target is a string (the `Gvk`
/// fields are not: `sigs.k8s.io/yaml` sees their embedded struct).
fn decode_plugin(o: &Node) -> Result<Plugin, String> {
    let mut p = Plugin::default();
    for (key, v) in json_object(o) {
        match key.to_ascii_lowercase().as_str() {
            "annotations" => string_map(v, &mut p.annotations)?,
            "fieldspecs" => p.deprecated = field_specs(v, "fieldSpecs")?,
            "additionalannotationfields" => {
                p.additional = field_specs(v, "additionalAnnotationFields")?;
            }
            // `Results AnnotationResults`, a map keyed by a struct.
            "results" if !is_json_null(v) => {
                return Err(type_error(v, "plugin.Results", "main.AnnotationResults"))
            }
            _ => {}
        }
    }
    Ok(p)
}

/// A JSON null (what `encoding/json` skips for a string or struct and
/// makes nil for a map or slice).
fn is_json_null(n: &Node) -> bool {
    n.kind == Kind::Scalar && matches!(yaml11_scalar(n), Scalar::Null)
}

/// A scalar for a string target: its string (null: `None`).
fn coerced(n: &Node) -> Option<Option<String>> {
    match (n.kind, yaml11_scalar(n)) {
        (Kind::Scalar, Scalar::Null) => Some(None),
        (Kind::Scalar, Scalar::Bool(b)) => Some(Some(b.to_string())),
        (Kind::Scalar, Scalar::Number(s) | Scalar::Str(s)) => Some(Some(s)),
        _ => None,
    }
}

/// `plugin.annotations`, a `map[string]string`, into `map`: scalars
/// become strings, null is "", collections fail; null makes it nil.
fn string_map(n: &Node, map: &mut Vec<(String, String)>) -> Result<(), String> {
    match n.kind {
        Kind::Mapping => {}
        _ if is_json_null(n) => {
            map.clear();
            return Ok(());
        }
        _ => return Err(type_error(n, "plugin.annotations", "map[string]string")),
    }
    for (key, v) in json_object(n) {
        let value = coerced(v).ok_or_else(|| type_error(v, "plugin.annotations", "string"))?;
        upsert(map, &key, &value.unwrap_or_default());
    }
    Ok(())
}

/// A `[]types.FieldSpec` at `plugin.<list>` (`None` for null, as a nil
/// slice).
fn field_specs(n: &Node, list: &str) -> Result<Option<Vec<FieldSpec>>, String> {
    match n.kind {
        Kind::Sequence => {}
        _ if is_json_null(n) => return Ok(None),
        _ => {
            return Err(type_error(
                n,
                &format!("plugin.{list}"),
                "[]types.FieldSpec",
            ))
        }
    }
    let mut out = Vec::new();
    for e in &n.content {
        if is_json_null(e) {
            out.push(FieldSpec::default());
            continue;
        }
        if e.kind != Kind::Mapping {
            return Err(type_error(e, &format!("plugin.{list}"), "types.FieldSpec"));
        }
        let mut fs = FieldSpec::default();
        for (key, v) in json_object(e) {
            let name = key.to_ascii_lowercase();
            let slot = match name.as_str() {
                "group" => &mut fs.group,
                "version" => &mut fs.version,
                "kind" => &mut fs.kind,
                "path" => &mut fs.path,
                "create" => {
                    match (v.kind, yaml11_scalar(v)) {
                        (Kind::Scalar, Scalar::Bool(b)) => fs.create = b,
                        (Kind::Scalar, Scalar::Null) => {}
                        _ => {
                            return Err(type_error(v, &format!("FieldSpec.{list}.create"), "bool"))
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            let value = if name == "path" {
                coerced(v)
            } else {
                // The embedded `resid.Gvk`: only a string (or null) fits.
                match (v.kind, yaml11_scalar(v)) {
                    (Kind::Scalar, Scalar::Null) => Some(None),
                    (Kind::Scalar, Scalar::Str(s)) => Some(Some(s)),
                    _ => None,
                }
            };
            let field = if name == "path" {
                format!("FieldSpec.{list}.path")
            } else {
                format!("FieldSpec.{list}.Gvk.{name}")
            };
            if let Some(s) = value.ok_or_else(|| type_error(v, &field, "string"))? {
                *slot = s;
            }
        }
        out.push(fs);
    }
    Ok(Some(out))
}

/// `IsNilOrEmpty`.
fn nil_or_empty(n: &Node) -> bool {
    n.tag == "!!null"
        || (matches!(n.kind, Kind::Mapping | Kind::Sequence) && n.content.is_empty())
        || *n == Node::default()
}

/// Go's `%v` of a `map[string]string`.
fn go_map(m: &[(&str, &str)]) -> String {
    let mut m: Vec<(&str, &str)> = m.to_vec();
    m.sort();
    let mut dedup: Vec<(&str, &str)> = Vec::new();
    for (k, v) in m {
        match dedup.last_mut() {
            Some(last) if last.0 == k => last.1 = v,
            _ => dedup.push((k, v)),
        }
    }
    let body: Vec<String> = dedup.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", body.join(" "))
}

/// kyaml's `GetMeta` map of a `metadata` field (values as written).
fn meta_map<'a>(o: &'a Node, field: &str) -> Vec<(&'a str, &'a str)> {
    let Some(m) = kyaml::field(o, "metadata").and_then(|m| kyaml::field(m, field)) else {
        return Vec::new();
    };
    m.content
        .chunks_exact(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((k.value.as_str(), kyaml::value_of(Some(v)))),
            _ => None,
        })
        .collect()
}

/// `GetValidatedMetadata`.
fn validate(o: &Node) -> Result<(), String> {
    let m = kyaml::meta(o);
    let md = kyaml::field(o, "metadata");
    if md.is_none_or(nil_or_empty) && m.api_version.is_empty() && m.kind.is_empty() {
        return Err("missing Resource metadata".into());
    }
    let shown = || {
        format!(
            "{{{{{} {}}} {{{{{} {}}} {} {}}}}}",
            m.api_version,
            m.kind,
            m.name,
            m.namespace,
            go_map(&meta_map(o, "labels")),
            go_map(&meta_map(o, "annotations"))
        )
    };
    if m.kind.is_empty() {
        return Err(format!("missing kind in object {}", shown()));
    }
    if m.kind.ends_with("List") {
        return Ok(());
    }
    if m.name.is_empty() {
        return Err(format!("missing metadata.name in object {}", shown()));
    }
    Ok(())
}

/// The resmap's id: its string and what makes two ids equal.
fn res_id(o: &Node) -> (String, (String, String, String, String, String)) {
    let m = kyaml::meta(o);
    let (g, v) = sdk::group_version(&m.api_version);
    let (g, v) = (g.to_owned(), v.to_owned());
    let cluster = !sdk::is_namespace_scoped(&Node::mapping(vec![
        Node::string("apiVersion"),
        Node::string(m.api_version.as_str()),
        Node::string("kind"),
        Node::string(m.kind.as_str()),
        Node::string("metadata"),
        Node::mapping(vec![Node::string("namespace"), Node::string("x")]),
    ]));
    let effective = if cluster {
        "_non_namespaceable_".to_owned()
    } else if m.namespace.is_empty() || m.namespace == "default" {
        "default".to_owned()
    } else {
        m.namespace.clone()
    };
    let or = |s: &str, d: &str| {
        if s.is_empty() {
            d.to_owned()
        } else {
            s.to_owned()
        }
    };
    let text = format!(
        "{}_{}_{}|{}|{}",
        or(&g, "~G"),
        or(&v, "~V"),
        or(&m.kind, "~K"),
        or(&m.namespace, "~X"),
        or(&m.name, "~N")
    );
    (text, (g, v, m.kind.clone(), m.name.clone(), effective))
}

/// File path, file index, field path.
type ResultKey = (String, String, String);

/// What the results collect: annotations set per file and field path.
#[derive(Default)]
struct Applied {
    /// (file path, file index, field path) → annotations, in first-seen
    /// order.
    entries: Vec<(ResultKey, Vec<(String, String)>)>,
}

impl Applied {
    fn record(&mut self, key: ResultKey, k: &str, v: &str) {
        match self.entries.iter_mut().find(|e| e.0 == key) {
            Some(e) => upsert(&mut e.1, k, v),
            None => self.entries.push((key, vec![(k.to_owned(), v.to_owned())])),
        }
    }
}

fn transform(
    items: Vec<Node>,
    config: &Config,
    ctx: &Context,
) -> Result<(Vec<Node>, Vec<FnResult>), Failure> {
    // The resource factory: empty items dropped, the others validated.
    let mut items: Vec<Node> = items.into_iter().filter(|n| !nil_or_empty(n)).collect();
    for o in &items {
        validate(o).map_err(Failure::Error)?;
    }
    // The resmap: ids unique.
    let mut seen = Vec::new();
    for o in &items {
        let (text, id) = res_id(o);
        if seen.contains(&id) {
            return Err(Failure::Error(format!(
                "may not add resource with an already registered id: {text}"
            )));
        }
        seen.push(id);
    }
    let mut applied = Applied::default();
    for o in &mut items {
        ctx.check().map_err(|_| Failure::Cancelled)?;
        let anns = meta_map(o, "annotations");
        let get = |primary: &str, legacy: &str| {
            let find = |k: &str| anns.iter().rev().find(|(key, _)| *key == k).map(|e| e.1);
            find(primary)
                .or_else(|| find(legacy))
                .unwrap_or("")
                .to_owned()
        };
        let path = get(
            "internal.config.kubernetes.io/path",
            "config.kubernetes.io/path",
        );
        let index = get(
            "internal.config.kubernetes.io/index",
            "config.kubernetes.io/index",
        );
        for (k, v) in &config.annotations {
            for spec in &config.specs {
                if !spec_matches(spec, o) {
                    continue;
                }
                let parts: Vec<&str> = spec.path.split('/').collect();
                let mut set = Setter {
                    key: k,
                    value: v,
                    file: (&path, &index),
                    applied: &mut applied,
                    create: spec.create,
                };
                let mut field_path = Vec::new();
                if let Err(e) = set.filter(o, &parts, &mut field_path) {
                    let shown = emit::encode_node(o, false);
                    return Err(Failure::Error(format!(
                        "failed to run transformer: considering field '{}' of object\n{shown}: {e}",
                        spec.path
                    )));
                }
            }
        }
    }
    Ok((items, results(applied)))
}

/// `isMatchGVK`.
fn spec_matches(spec: &FieldSpec, o: &Node) -> bool {
    let m = kyaml::meta(o);
    let (g, v) = sdk::group_version(&m.api_version);
    (spec.kind.is_empty() || spec.kind == m.kind)
        && (spec.group.is_empty() || spec.group == g)
        && (spec.version.is_empty() || spec.version == v)
}

/// One annotation along one field spec (`fieldspec.Filter`).
struct Setter<'a> {
    key: &'a str,
    value: &'a str,
    file: (&'a str, &'a str),
    applied: &'a mut Applied,
    create: bool,
}

impl Setter<'_> {
    fn filter(
        &mut self,
        obj: &mut Node,
        path: &[&str],
        field_path: &mut Vec<String>,
    ) -> Result<(), String> {
        let Some((first, rest)) = path.split_first() else {
            // Found: the callback, then the value.
            self.applied.record(
                (
                    self.file.0.to_owned(),
                    self.file.1.to_owned(),
                    field_path.join("."),
                ),
                self.key,
                self.value,
            );
            return kyaml::set_field(obj, self.key, Node::string(self.value))
                .map_err(|e| e.to_string());
        };
        if obj.tag == "!!null" {
            return Ok(());
        }
        match obj.kind {
            Kind::Sequence => {
                for el in &mut obj.content {
                    // Elements start a field path of their own.
                    self.filter(el, path, &mut Vec::new())
                        .map_err(|e| format!("visit traversal on path: {}: {e}", go_path(path)))?;
                }
                Ok(())
            }
            Kind::Mapping => {
                let (name, is_seq) = match first.strip_suffix("[]") {
                    Some(n) => (n, true),
                    None => (*first, false),
                };
                if name.is_empty() {
                    return Err("cannot set or create an empty field name".into());
                }
                let create = self.create && !is_seq;
                let i = match kyaml::field_index(obj, name) {
                    Some(i) => i,
                    None if !create => return Ok(()),
                    None => {
                        obj.content.push(Node {
                            kind: Kind::Scalar,
                            value: name.into(),
                            ..Node::default()
                        });
                        obj.content.push(Node {
                            kind: Kind::Mapping,
                            ..Node::default()
                        });
                        obj.content.len() - 2
                    }
                };
                let Some(field) = obj.content.get_mut(i + 1) else {
                    return Ok(());
                };
                if field.tag == "!!null" && (create || is_seq) {
                    field.kind = if create {
                        Kind::Mapping
                    } else {
                        Kind::Sequence
                    };
                    field.tag = if create { "!!map" } else { "" }.into();
                    field.value = "".into();
                }
                field_path.push(name.to_owned());
                self.filter(field, rest, field_path)
            }
            Kind::Alias => Ok(()),
            _ => Err("expected sequence or mapping node".into()),
        }
    }
}

/// Go's `%v` of a `[]string`.
fn go_path(p: &[&str]) -> String {
    format!("[{}]", p.join(" "))
}

/// `resultsToItems`.
fn results(applied: Applied) -> Vec<FnResult> {
    if applied.entries.is_empty() {
        return vec![FnResult {
            message: "no annotations applied".into(),
            ..FnResult::default()
        }];
    }
    let mut out: Vec<(String, i64, String, FnResult)> = applied
        .entries
        .into_iter()
        .map(|((path, index, field), anns)| {
            let mut anns = anns;
            anns.sort();
            let json: Vec<String> = anns
                .iter()
                .map(|(k, v)| format!("{}:{}", go_json(k), go_json(v)))
                .collect();
            let message = format!("set annotations: {{{}}}", json.join(","));
            let index = go_atoi(&index);
            let sort_key = format!(
                "resource-ref:%!s(<nil>),field:&{{{field} %!s(<nil>) %!s(<nil>)}},message:{message}"
            );
            let r = FnResult {
                message,
                severity: Severity::Unset,
                field: Some(Field {
                    path: field,
                    ..Field::default()
                }),
                file: Some(File {
                    path: path.clone(),
                    index,
                }),
                ..FnResult::default()
            };
            (path, index, sort_key, r)
        })
        .collect();
    out.sort_by(|a, b| (&a.0, a.1, &a.2).cmp(&(&b.0, b.1, &b.2)));
    out.into_iter().map(|e| e.3).collect()
}

/// Go's `strconv.Atoi`, 0 on failure.
fn go_atoi(s: &str) -> i64 {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    s.parse().unwrap_or(0)
}

/// A string as Go's `encoding/json` writes it (HTML characters escaped).
fn go_json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
