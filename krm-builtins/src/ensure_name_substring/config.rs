//! The function's config as `framework.LoadFunctionConfig` reads it
//! (`UnmarshalYAML` through k8s' YAML→JSON decoding, `Default`,
//! `Validate`), with the catalog's errors.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::config::FieldSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mode {
    Prepend,
    Append,
    Other,
}

#[derive(Debug)]
pub(super) struct Config {
    pub(super) substring: String,
    pub(super) mode: Mode,
    pub(super) fields: Vec<FieldSpec>,
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
pub(super) fn load(fc: Option<&Node>) -> Result<Config, String> {
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
