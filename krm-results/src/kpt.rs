//! `results` as kpt reads them (kyaml's `framework.Result` decoded from
//! the function's output, then kpt's migrations): a list, or the legacy
//! `{items: [...]}`; `resourceRef.metadata.name|namespace` and
//! `field.suggestedValue` migrated; entries that are not mappings skipped.
//! kpt reads them differently from the wrapper ([`super::parse_output`]):
//! `metadata.name` wins over `name`, `suggestedValue` over
//! `proposedValue`, and nothing is refused. `eval` and `render` print and
//! record what this gives, as kpt does.

use serde_yaml_ng::Value;

use super::model::{Field, File, FnResult, ResourceRef, Severity};

/// A scalar's text (`""` for null; `None` for collections).
fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        Value::Tagged(t) => scalar_string(&t.value),
        _ => None,
    }
}

fn str_of(v: Option<&Value>) -> String {
    v.and_then(scalar_string).unwrap_or_default()
}

/// Reads `results` as kpt does: a list, or the legacy `{items: [...]}`;
/// `resourceRef.metadata.name|namespace` and `field.suggestedValue` are
/// migrated. Entries that are not mappings are skipped.
pub fn read(v: &Value) -> Vec<FnResult> {
    let list = match v {
        Value::Mapping(m) => match m.get("items") {
            Some(Value::Sequence(s)) => s.as_slice(),
            _ => &[],
        },
        Value::Sequence(s) => s.as_slice(),
        _ => &[],
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let Value::Mapping(m) = item else {
            continue;
        };
        let mut r = FnResult {
            message: str_of(m.get("message")),
            severity: Severity::from_written(&str_of(m.get("severity"))),
            ..FnResult::default()
        };
        if let Some(Value::Mapping(rr)) = m.get("resourceRef") {
            let mut name = str_of(rr.get("name"));
            let mut namespace = str_of(rr.get("namespace"));
            if let Some(Value::Mapping(md)) = rr.get("metadata") {
                if md.get("name").is_some() {
                    name = str_of(md.get("name")).trim().to_owned();
                }
                let ns = str_of(md.get("namespace"));
                let ns = ns.trim();
                if !ns.is_empty() && ns != "''" {
                    namespace = ns.to_owned();
                }
            }
            r.resource_ref = Some(ResourceRef {
                api_version: str_of(rr.get("apiVersion")),
                kind: str_of(rr.get("kind")),
                name,
                namespace,
            });
        }
        match m.get("field") {
            Some(Value::Mapping(f)) => {
                let proposed = f.get("suggestedValue").or(f.get("proposedValue")).cloned();
                r.field = Some(Field {
                    path: str_of(f.get("path")),
                    current_value: f.get("currentValue").cloned(),
                    proposed_value: proposed,
                });
            }
            Some(Value::String(s)) => {
                r.field = Some(Field {
                    path: s.clone(),
                    ..Field::default()
                })
            }
            _ => {}
        }
        if let Some(Value::Mapping(f)) = m.get("file") {
            let index = f.get("index").and_then(Value::as_i64).unwrap_or(0);
            r.file = Some(File {
                path: str_of(f.get("path")),
                index,
            });
        }
        if let Some(Value::Mapping(t)) = m.get("tags") {
            r.tags = t
                .iter()
                .map(|(k, v)| {
                    (
                        scalar_string(k).unwrap_or_default(),
                        scalar_string(v).unwrap_or_default(),
                    )
                })
                .collect();
        }
        out.push(r);
    }
    out
}
