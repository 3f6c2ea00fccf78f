//! A Kptfile as kpt 1.0.0-beta.56 reads, checks and writes it.
//!
//! Read (kpt's `ReadKptfile`): the schema version (`checkKptfileVersion`),
//! then a strict decode into its `v1.KptFile` type (yaml.v3 with
//! `KnownFields`: every unknown field, repeated key and value of the wrong
//! kind is an error, each with its line). Checked before render (its
//! `Validate`, [`validate`]): each pipeline function names exactly one of
//! `image` and `exec`, a well-formed image, not both `configMap` and
//! `configPath`, and a `configPath` that is a KRM resource of the package.
//! The messages are kpt's, whole (kpt prints them as they are, not after
//! `error: `). Written back by `eval --save` ([`save`]) as kpt writes it:
//! through its Go types, so the file comes out as yaml.v3 marshals them.

mod save;
mod validate;

pub use save::{save, FnType, NewFunction};
pub use validate::valid_image_name;

use std::path::Path;

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

/// What a field holds, as the Go type kpt decodes it into. Every field is
/// `omitempty` but those marked otherwise.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    /// A string without `omitempty`: written even when empty.
    StrAlways,
    StrList,
    StrMap,
    /// A pointer to a struct: omitted when nil (absent or null), written
    /// (maybe as `{}`) otherwise.
    Obj(&'static Schema),
    /// A struct value: omitted when all its fields are empty.
    Struct(&'static Schema),
    List(&'static Schema),
}

/// A Go struct: its name in yaml.v3's messages and its fields, in the
/// struct's order (the order yaml.v3 writes them in).
struct Schema {
    name: &'static str,
    fields: &'static [(&'static str, Ty)],
}

const OBJECT_META: Schema = Schema {
    name: "yaml.ObjectMeta",
    fields: &[
        ("name", Ty::Str),
        ("namespace", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const GIT: Schema = Schema {
    name: "v1.Git",
    fields: &[("repo", Ty::Str), ("directory", Ty::Str), ("ref", Ty::Str)],
};
const UPSTREAM: Schema = Schema {
    name: "v1.Upstream",
    fields: &[
        ("type", Ty::Str),
        ("git", Ty::Obj(&GIT)),
        ("updateStrategy", Ty::Str),
    ],
};
const GIT_LOCK: Schema = Schema {
    name: "v1.GitLock",
    fields: &[
        ("repo", Ty::Str),
        ("directory", Ty::Str),
        ("ref", Ty::Str),
        ("commit", Ty::Str),
    ],
};
const UPSTREAM_LOCK: Schema = Schema {
    name: "v1.UpstreamLock",
    fields: &[("type", Ty::Str), ("git", Ty::Obj(&GIT_LOCK))],
};
const READINESS_GATE: Schema = Schema {
    name: "v1.ReadinessGate",
    fields: &[("conditionType", Ty::StrAlways)],
};
const PACKAGE_INFO: Schema = Schema {
    name: "v1.PackageInfo",
    fields: &[
        ("site", Ty::Str),
        ("emails", Ty::StrList),
        ("license", Ty::Str),
        ("licenseFile", Ty::Str),
        ("description", Ty::Str),
        ("keywords", Ty::StrList),
        ("man", Ty::Str),
        ("readinessGates", Ty::List(&READINESS_GATE)),
    ],
};
const SELECTOR: Schema = Schema {
    name: "v1.Selector",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("name", Ty::Str),
        ("namespace", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const FUNCTION: Schema = Schema {
    name: "v1.Function",
    fields: &[
        ("image", Ty::Str),
        ("exec", Ty::Str),
        ("configPath", Ty::Str),
        ("configMap", Ty::StrMap),
        ("name", Ty::Str),
        ("selectors", Ty::List(&SELECTOR)),
        ("exclude", Ty::List(&SELECTOR)),
    ],
};
const PIPELINE: Schema = Schema {
    name: "v1.Pipeline",
    fields: &[
        ("mutators", Ty::List(&FUNCTION)),
        ("validators", Ty::List(&FUNCTION)),
    ],
};
const INVENTORY: Schema = Schema {
    name: "v1.Inventory",
    fields: &[
        ("namespace", Ty::Str),
        ("name", Ty::Str),
        ("inventoryID", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const CONDITION: Schema = Schema {
    name: "v1.Condition",
    fields: &[
        ("type", Ty::StrAlways),
        ("status", Ty::StrAlways),
        ("reason", Ty::Str),
        ("message", Ty::Str),
    ],
};
const STATUS: Schema = Schema {
    name: "v1.Status",
    fields: &[("conditions", Ty::List(&CONDITION))],
};
const KPTFILE: Schema = Schema {
    name: "v1.KptFile",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("metadata", Ty::Struct(&OBJECT_META)),
        ("upstream", Ty::Obj(&UPSTREAM)),
        ("upstreamLock", Ty::Obj(&UPSTREAM_LOCK)),
        ("info", Ty::Obj(&PACKAGE_INFO)),
        ("pipeline", Ty::Obj(&PIPELINE)),
        ("inventory", Ty::Obj(&INVENTORY)),
        ("status", Ty::Obj(&STATUS)),
    ],
};

/// Checks the Kptfile of the package at `dir` (absolute, as kpt names it)
/// as render does, `node` being its first document: [`read`], then
/// [`validate`]. `Err`: kpt's message, whole.
pub fn check(dir: &Path, node: &Node) -> Result<(), String> {
    read(dir, node)?;
    validate(dir, node)
}

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
                "Error: {at} has an old version (\"v1alpha2\") of the Kptfile schema.\nPlease run \"kpt fn eval <PKG_PATH> -i gcr.io/kpt-fn/fix:v0.2 --include-meta-resources\" to upgrade the package and retry. "
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

/// kpt's `KptFile.Validate` on a Kptfile that [`read`] accepted: each
/// pipeline function, mutators first, as [`validate::function`] checks
/// it. `Err`: kpt's message, whole.
pub fn validate(dir: &Path, node: &Node) -> Result<(), String> {
    let pipeline = kyaml::field(node, "pipeline");
    for list in ["mutators", "validators"] {
        let functions = pipeline.and_then(|p| kyaml::field(p, list));
        for (i, f) in functions.map_or(&[][..], |l| &l.content).iter().enumerate() {
            validate::function(dir, f, list, i)?;
        }
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
