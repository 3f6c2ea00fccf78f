//! kpt's `ReadKptfile`: the schema version, then a strict decode into its
//! Go types (yaml.v3 with `KnownFields`), each error with its line, in
//! kpt's words.

use std::path::Path;

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use super::schema::{Ty, KPTFILE};

/// kpt's `ReadKptfile` on the Kptfile of `dir` whose first document is
/// `node`: its schema version, then the strict decode. `Err`: kpt's
/// message, whole.
pub fn read(dir: &Path, node: &Node) -> Result<(), String> {
    let root = kyaml::content(node);
    let at = format!("Kptfile at {}", go_quoted(&dir.display().to_string()));
    let api_version = kyaml::value_of(kyaml::field(root, "apiVersion"));
    let kind = kyaml::value_of(kyaml::field(root, "kind"));
    match (api_version, kind) {
        ("kpt.dev/v1", "Kptfile") => {}
        ("kpt.dev/v1alpha1", "Kptfile") => {
            return Err(format!(
                "Error: {at} has an old version (\"v1alpha1\") of the Kptfile schema.\nPlease update the package to the latest format by following https://kpt.dev/installation/migration. "
            ))
        }
        ("kpt.dev/v1alpha2", "Kptfile") => {
            return Err(format!(
                "Error: {at} has an old version (\"v1alpha2\") of the Kptfile schema.\nPlease run \"kpt fn eval <PKG_PATH> -i ghcr.io/kptdev/krm-functions-catalog/fix:latest --include-meta-resources\" to upgrade the package and retry. "
            ))
        }
        _ => {
            // Go's GroupVersionKind.String(): "group/version, Kind=kind".
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "Error: {at} has an unknown resource type (\"{group}/{version}, Kind={kind}\"). "
            ));
        }
    }
    let mut errors = Vec::new();
    decode(root, Ty::Obj(&KPTFILE), &mut errors);
    if !errors.is_empty() {
        return Err(format!(
            "Error: {at} can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  {} ",
            errors.join("\n  ")
        ));
    }
    Ok(())
}

/// `s` as Go's `%q` quotes a path.
fn go_quoted(s: &str) -> String {
    krm_yaml::package::go_quote(s)
}

/// yaml.v3's strict decode of `node` into `ty`: its errors, in document
/// order. Null and aliases decode into anything.
fn decode(node: &Node, ty: Ty, errors: &mut Vec<String>) {
    if node.kind == Kind::Alias || (node.kind == Kind::Scalar && node.tag == kyaml::NULL_TAG) {
        return;
    }
    // yaml.v3 refuses a mapping with a repeated key before it looks at
    // what the mapping goes into, and then decodes nothing in it.
    if node.kind == Kind::Mapping && repeated_keys(node, errors) {
        return;
    }
    match ty {
        Ty::Str | Ty::StrAlways => {
            if node.kind != Kind::Scalar {
                errors.push(cannot(node, "string"));
            }
        }
        Ty::StrList => match node.kind {
            Kind::Sequence => node.content.iter().for_each(|n| decode(n, Ty::Str, errors)),
            _ => errors.push(cannot(node, "[]string")),
        },
        Ty::Int | Ty::IntAlways => {
            if !is_go_int(node) {
                errors.push(cannot(node, "int"));
            }
        }
        // Their own unmarshallers take any node.
        Ty::Text | Ty::Lenient(_) => {}
        Ty::StrMap => match node.kind {
            Kind::Mapping => {
                for kv in node.content.chunks_exact(2) {
                    decode(&kv[0], Ty::Str, errors);
                    decode(&kv[1], Ty::Str, errors);
                }
            }
            _ => errors.push(cannot(node, "map[string]string")),
        },
        Ty::Obj(schema) | Ty::Struct(schema) => match node.kind {
            Kind::Mapping => {
                for kv in node.content.chunks_exact(2) {
                    let (key, value) = (&kv[0], &kv[1]);
                    match schema.fields.iter().find(|(name, _)| *name == key.value) {
                        Some((_, ty)) => decode(value, *ty, errors),
                        None => errors.push(format!(
                            "line {}: field {} not found in type {}",
                            key.line, key.value, schema.name
                        )),
                    }
                }
            }
            _ => errors.push(cannot(node, schema.name)),
        },
        Ty::List(schema) => match node.kind {
            Kind::Sequence => node
                .content
                .iter()
                .for_each(|n| decode(n, Ty::Obj(schema), errors)),
            _ => errors.push(cannot(node, &format!("[]{}", schema.name))),
        },
    }
}

/// Whether yaml.v3 decodes `node` into a Go `int`: a plain scalar that
/// resolves to an integer, or to a float without a fraction.
fn is_go_int(node: &Node) -> bool {
    if node.kind != Kind::Scalar {
        return false;
    }
    let tag = if node.tag.is_empty() {
        krm_yaml::resolve::resolve_plain(&node.value)
    } else {
        node.tag.as_str()
    };
    match tag {
        "!!int" => true,
        "!!float" => node
            .value
            .parse::<f64>()
            .is_ok_and(|f| f.fract() == 0.0 && f.abs() < 9.2e18),
        _ => false,
    }
}

/// yaml.v3's check for repeated keys in a mapping (a key node of the same
/// kind and value as an earlier one): whether there are any, each
/// repetition of each key reported.
fn repeated_keys(node: &Node, errors: &mut Vec<String>) -> bool {
    let before = errors.len();
    let keys: Vec<&Node> = node.content.iter().step_by(2).collect();
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            if a.kind == b.kind && a.value == b.value {
                errors.push(format!(
                    "line {}: mapping key {} already defined at line {}",
                    b.line,
                    go_quoted(&b.value),
                    a.line
                ));
            }
        }
    }
    errors.len() > before
}

/// yaml.v3's `terror`: `line N: cannot unmarshal !!str `value` into T`
/// (a scalar's value shown, cut to 7 bytes and `...` past 10).
fn cannot(node: &Node, into: &str) -> String {
    let tag = match node.kind {
        Kind::Sequence => "!!seq",
        Kind::Mapping => "!!map",
        _ if node.tag.is_empty() => "!!str",
        _ => node.tag.as_str(),
    };
    let value = match node.kind {
        Kind::Sequence | Kind::Mapping => String::new(),
        _ if node.value.len() > 10 => {
            let mut cut = 7;
            while !node.value.is_char_boundary(cut) {
                cut -= 1;
            }
            format!(" `{}...`", &node.value[..cut])
        }
        _ => format!(" `{}`", node.value),
    };
    format!(
        "line {}: cannot unmarshal {tag}{value} into {into}",
        node.line
    )
}
