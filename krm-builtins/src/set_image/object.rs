//! An object as the function SDK reads it, and how the SDK stops a
//! function ([`Die`]): what both halves of set-image (its own config and
//! containers, and `additionalImageFields` in [`super::fields`]) read
//! fields, decode JSON and fail with; below both, so the filter need not
//! reach back into the function's own file.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::result::{File, FnResult, ResourceRef};

const PATH: &str = "internal.config.kubernetes.io/path";
const INDEX: &str = "internal.config.kubernetes.io/index";

/// How the SDK stops a function.
pub(super) enum Die {
    /// A panic the SDK recovers: the error result, then stderr
    /// `failed to evaluate function: {0}`.
    Recovered(String),
    /// A panic it does not recover (the Go runtime's): no output.
    Crash(String),
    /// The SDK fails before the function runs.
    Early(String),
    Cancelled,
}

/// `errSubObjectFields`'s message.
pub(super) fn unmatched(fields: &str) -> Die {
    Die::Recovered(format!("SubObject has unmatched field type: `{fields}"))
}

/// `ConfigObjectResult(message, o, Error)`.
pub(super) fn object_result(message: &str, o: &Node) -> FnResult {
    let index = get_string(o, &["metadata", "annotations", INDEX]);
    FnResult {
        resource_ref: Some(ResourceRef {
            api_version: get_string(o, &["apiVersion"]).to_owned(),
            kind: get_string(o, &["kind"]).to_owned(),
            name: get_string(o, &["metadata", "name"]).to_owned(),
            namespace: get_string(o, &["metadata", "namespace"]).to_owned(),
        }),
        file: Some(File {
            path: get_string(o, &["metadata", "annotations", PATH]).to_owned(),
            index: if index.is_empty() { -1 } else { go_atoi(index) },
        }),
        ..FnResult::error(message)
    }
}

/// `strconv.Atoi`, 0 on error as the SDK ignores it.
fn go_atoi(s: &str) -> i64 {
    s.parse::<i64>().unwrap_or(0)
}

/// The SDK's `getValueNode`: the first field whose key is a string.
pub(super) fn get_field<'a>(map: &'a Node, key: &str) -> Option<&'a Node> {
    if map.kind != Kind::Mapping {
        return None;
    }
    map.content
        .chunks_exact(2)
        .find(|kv| kv.first().is_some_and(|k| is_string(k) && k.value == key))
        .and_then(|kv| kv.get(1))
}

pub(super) fn get_field_mut<'a>(map: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    if map.kind != Kind::Mapping {
        return None;
    }
    map.content
        .chunks_exact_mut(2)
        .find(|kv| kv.first().is_some_and(|k| is_string(k) && k.value == key))
        .and_then(|kv| kv.get_mut(1))
}

/// The SDK's `asString` on a key.
fn is_string(n: &Node) -> bool {
    n.kind == Kind::Scalar && (n.tag == "!!str" || n.tag.is_empty())
}

/// `GetNestedString`, errors read as "" (as `GetKind` and friends do).
pub(super) fn get_string<'a>(o: &'a Node, fields: &[&str]) -> &'a str {
    let mut cur = o;
    for f in fields {
        match get_field(cur, f) {
            Some(n) => cur = n,
            None => return "",
        }
    }
    if cur.kind == Kind::Scalar && cur.tag == "!!str" {
        &cur.value
    } else {
        ""
    }
}

/// A JSON string field, as `json.Unmarshal` fills a Go string from the
/// YAML value turned to JSON: a string, or null (left as it was).
pub(super) fn json_string(v: &Node) -> Result<Option<String>, Die> {
    match v.kind {
        Kind::Scalar if v.tag == kyaml::NULL_TAG => Ok(None),
        Kind::Scalar if v.tag == "!!str" || v.tag == "!!timestamp" => Ok(Some(v.value.to_string())),
        _ => Err(unmatched("")),
    }
}

/// The fields of a JSON object in the order `json.Marshal` writes a Go
/// map (sorted), each matched to a struct field case-insensitively.
pub(super) fn json_fields(m: &Node) -> Vec<(String, &Node)> {
    let mut fields: Vec<(String, &Node)> = m
        .content
        .chunks_exact(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((k.value.to_string(), v)),
            _ => None,
        })
        .collect();
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    fields
}
