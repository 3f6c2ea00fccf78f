//! `list-setters`: lists the setters the package's `# kpt-set:` comments
//! name, with each one's value (read back from the fields, or declared by
//! the Kptfile's `apply-setters` mutators), type and number of fields.
//!
//! Follows kptdev/krm-functions-catalog at
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/list-setters/main.go` and
//! `listsetters/{list_setters,walk}.go`, on kyaml v0.11.0 and the
//! function SDK's `go/pkg/api/util.DecodeKptfile` and `kptfile/v1` types
//! (kpt-functions-sdk 632b30549de6).
//!
//! - No config is read. The Kptfile is the item whose
//!   `config.kubernetes.io/path` is `Kptfile`; its
//!   `pipeline.mutators` whose image holds `apply-setters` declare
//!   setters by `configMap`, or by `configPath` (the item at that path,
//!   its `data`). A value that parses as a YAML sequence is an array
//!   setter (its elements as YAML text), any other a `str` setter.
//!   What cannot be found (no Kptfile, no pipeline, no such file) is a
//!   warning the catalog keeps to itself: no result.
//! - Results, sorted by name (array setters before a scalar setter of the
//!   same name): `Name: <n>, Value: <v>, Type: <t>, Count: <c>`, no
//!   severity; none found: `no setters found` (warning). A Kptfile that
//!   does not decode fails: `failed to list setters: unable to read
//!   Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors: ...`
//!   (severity error, the error twice on stderr, exit 1).
//!
//! Releases: answers as master, and as v0.1.0 (its only release, tag
//! `list-setters/v0.1.0`, 0b946f68, the same libraries) when
//! [`Context::release`] names it. They differ only where no setter is
//! found: master's warning came with #555 (f9303cf4), after the tag;
//! v0.1.0's `resultsToItems` fails with `no setters found`, so the result
//! is `failed to list setters: no setters found` (error), stderr
//! `no setters foundno setters found\n`, exit 1, the items unchanged
//! (`main.go@list-setters/v0.1.0:57-80`).
//!
//! Departures: the Kptfile is decoded strictly (`KnownFields`) only
//! where list-setters reads it: the top level, `pipeline` and its
//! functions; unknown fields deeper in `metadata`, `upstream`, `info` or
//! `inventory`, and type errors there, are not reported. Go keeps setters
//! in maps; the order of two setters of the same name and kind cannot
//! differ, so the results are the same.

use krm_yaml::{Kind, Node, Style};

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};
use crate::result::{FnResult, Severity};
use crate::setters::{clean, current_setter_values, extract_setter_pattern};

#[cfg(test)]
mod tests;

struct ArraySetter {
    name: String,
    values: Vec<String>,
    count: usize,
}

struct ScalarSetter {
    name: String,
    value: String,
    kind: String,
    count: usize,
}

#[derive(Default)]
struct List {
    arrays: Vec<ArraySetter>,
    scalars: Vec<ScalarSetter>,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let mut list = List::default();
    let mut failure = None;
    match settings_from_kptfile(&rl.items) {
        Ok(setters) => list.add_kptfile_setters(setters),
        Err(e) => failure = Some(e),
    }
    if failure.is_none() {
        for item in rl.items.iter() {
            ctx.check()?;
            if let Err(e) = catalog::file_path(item, false) {
                failure = Some(e.to_owned());
                break;
            }
            list.accept(item);
        }
    }
    if let Some(err) = failure {
        return Err(failed(rl, &err));
    }
    let mut out: Vec<(String, String, String, usize)> = Vec::new();
    for a in &list.arrays {
        out.push((
            a.name.clone(),
            format!("[{}]", a.values.join(", ")),
            "array".to_owned(),
            a.count,
        ));
    }
    for s in &list.scalars {
        out.push((s.name.clone(), s.value.clone(), s.kind.clone(), s.count));
    }
    if out.is_empty() {
        // v0.1.0's `resultsToItems` returns this as an error; #555 (after
        // the tag) made it a warning.
        if ctx.release() == Some("v0.1.0") {
            return Err(failed(rl, "no setters found"));
        }
        rl.results
            .push(FnResult::new(Severity::Warning, "no setters found"));
        return Ok(());
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, value, kind, count) in out {
        rl.results.push(catalog::item(
            format!("Name: {name}, Value: {value}, Type: {kind}, Count: {count}"),
            "",
            "",
        ));
    }
    Ok(())
}

/// How `Process` fails: the one result `failed to list setters: <err>`
/// (error), the error twice on stderr ([`catalog::fail`]), exit 1.
fn failed(rl: &mut ResourceList, err: &str) -> Stop {
    let result = FnResult::error(format!("failed to list setters: {err}"));
    catalog::fail(rl, result, err)
}

/// An item's `config.kubernetes.io/path` (`GetAnnotations`, which
/// ignores `GetMeta`'s error).
fn path_of(item: &Node) -> String {
    catalog::meta_annotations(item)
        .ok()
        .and_then(|a| a.into_iter().find(|(k, _)| k == catalog::LEGACY_PATH))
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// `FindSettersFromKptfile`: the setters the Kptfile's apply-setters
/// mutators declare (later ones override), empty where the catalog has a
/// discovery warning; `Err` for a Kptfile that does not decode.
fn settings_from_kptfile(items: &[Node]) -> Result<Vec<(String, String)>, String> {
    let Some(kptfile) = items.iter().find(|i| path_of(i) == "Kptfile") else {
        return Ok(Vec::new());
    };
    let mutators = decode_kptfile(kptfile)
        .map_err(|e| format!("unable to read Kptfile: invalid 'v1' Kptfile: {e}"))?;
    let Some(mutators) = mutators else {
        return Ok(Vec::new());
    };
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut merge = |setters: Vec<(String, String)>| {
        for (k, v) in setters {
            match merged.iter_mut().find(|(n, _)| *n == k) {
                Some(slot) => slot.1 = v,
                None => merged.push((k, v)),
            }
        }
    };
    for f in mutators {
        if !f.image.contains("apply-setters") {
            continue;
        }
        if let Some(map) = f.config_map {
            merge(map);
        } else if !f.config_path.is_empty() {
            let Some(node) = items.iter().find(|i| path_of(i) == f.config_path) else {
                return Ok(Vec::new());
            };
            merge(catalog::data_map(Some(node)));
        } else {
            return Ok(Vec::new());
        }
    }
    Ok(merged)
}

/// A pipeline function as list-setters reads it.
#[derive(Default)]
struct Function {
    image: String,
    config_path: String,
    config_map: Option<Vec<(String, String)>>,
}

/// yaml.v3's name of a node's kind in its errors (`!!seq`, `!!str
/// \`x\``).
fn shown(node: &Node) -> String {
    let tag = if node.tag.is_empty() {
        match node.kind {
            Kind::Mapping => "!!map",
            Kind::Sequence => "!!seq",
            _ => "!!str",
        }
    } else {
        node.tag.as_str()
    };
    match node.kind {
        Kind::Scalar => format!("{tag} `{}`", node.value),
        _ => tag.to_owned(),
    }
}

/// `util.DecodeKptfile` as far as list-setters reads it: the pipeline's
/// mutators (`None`: no pipeline), or yaml.v3's unmarshal errors. The
/// Kptfile is written out and read back first, as kyaml's `String` does,
/// so the lines are those of that text.
fn decode_kptfile(kptfile: &Node) -> Result<Option<Vec<Function>>, String> {
    let text = krm_yaml::emit::encode_node(kptfile, false);
    let docs = krm_yaml::parse::parse(&text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Ok(None);
    };
    let top = krm_yaml::package::kyaml::content(doc);
    let mut errors: Vec<String> = Vec::new();
    let mut unknown = |errors: &mut Vec<String>, k: &Node, ty: &str| {
        errors.push(format!(
            "line {}: field {} not found in type {ty}",
            k.line, k.value
        ));
    };
    let mut type_error = |errors: &mut Vec<String>, n: &Node, ty: &str| {
        errors.push(format!(
            "line {}: cannot unmarshal {} into {ty}",
            n.line,
            shown(n)
        ));
    };
    let mut pipeline: Option<Vec<Function>> = None;
    if top.kind == Kind::Mapping {
        for kv in top.content.chunks_exact(2) {
            let [k, v] = kv else { continue };
            match k.value.as_str() {
                "apiVersion" | "kind" | "metadata" | "upstream" | "upstreamLock" | "info"
                | "inventory" => {}
                "pipeline" => {
                    if catalog::is_null(v) {
                        continue;
                    }
                    if v.kind != Kind::Mapping {
                        type_error(&mut errors, v, "v1.Pipeline");
                        pipeline.get_or_insert_with(Vec::new);
                        continue;
                    }
                    let fns = pipeline.get_or_insert_with(Vec::new);
                    for pkv in v.content.chunks_exact(2) {
                        let [pk, pv] = pkv else { continue };
                        let mutators = match pk.value.as_str() {
                            "mutators" => true,
                            "validators" => false,
                            _ => {
                                unknown(&mut errors, pk, "v1.Pipeline");
                                continue;
                            }
                        };
                        if catalog::is_null(pv) {
                            continue;
                        }
                        if pv.kind != Kind::Sequence {
                            type_error(&mut errors, pv, "[]v1.Function");
                            continue;
                        }
                        for el in &pv.content {
                            let f = decode_function(el, &mut errors, &mut unknown, &mut type_error);
                            if mutators {
                                fns.push(f);
                            }
                        }
                    }
                }
                _ => unknown(&mut errors, k, "v1.KptFile"),
            }
        }
    }
    if errors.is_empty() {
        Ok(pipeline)
    } else {
        Err(format!(
            "yaml: unmarshal errors:\n  {}",
            errors.join("\n  ")
        ))
    }
}

type Report<'a> = dyn FnMut(&mut Vec<String>, &Node, &str) + 'a;

fn decode_function(
    el: &Node,
    errors: &mut Vec<String>,
    unknown: &mut Report<'_>,
    type_error: &mut Report<'_>,
) -> Function {
    let mut f = Function::default();
    if catalog::is_null(el) {
        return f;
    }
    if el.kind != Kind::Mapping {
        type_error(errors, el, "v1.Function");
        return f;
    }
    let string = |errors: &mut Vec<String>, type_error: &mut Report<'_>, v: &Node| match v.kind {
        Kind::Scalar => catalog::get_value(v).to_owned(),
        _ => {
            type_error(errors, v, "string");
            String::new()
        }
    };
    for kv in el.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        match k.value.as_str() {
            "image" => f.image = string(errors, type_error, v),
            "configPath" => f.config_path = string(errors, type_error, v),
            "configMap" => {
                if catalog::is_null(v) {
                    continue;
                }
                if v.kind != Kind::Mapping {
                    type_error(errors, v, "map[string]string");
                    continue;
                }
                let map = f.config_map.get_or_insert_with(Vec::new);
                for mkv in v.content.chunks_exact(2) {
                    let [mk, mv] = mkv else { continue };
                    let value = string(errors, type_error, mv);
                    match map.iter_mut().find(|(n, _)| *n == mk.value) {
                        Some(slot) => slot.1 = value,
                        None => map.push((mk.value.to_string(), value)),
                    }
                }
            }
            _ => unknown(errors, k, "v1.Function"),
        }
    }
    f
}

impl List {
    /// `addKptfileSetters`.
    fn add_kptfile_setters(&mut self, setters: Vec<(String, String)>) {
        for (name, value) in setters {
            self.arrays.retain(|a| a.name != name);
            self.scalars.retain(|s| s.name != name);
            match array_values(&value) {
                Some(values) => self.arrays.push(ArraySetter {
                    name,
                    values,
                    count: 0,
                }),
                None => self.scalars.push(ScalarSetter {
                    name,
                    value,
                    kind: "str".to_owned(),
                    count: 0,
                }),
            }
        }
    }

    /// `acceptImpl` (read only).
    fn accept(&mut self, node: &Node) {
        self.walk(node, "");
    }

    fn walk(&mut self, node: &Node, path: &str) {
        match node.kind {
            Kind::Mapping => {
                self.visit_mapping(node);
                for i in catalog::visit_fields(node) {
                    if let (Some(k), Some(v)) = (node.content.get(i), node.content.get(i + 1)) {
                        self.walk(v, &format!("{path}.{}", k.value));
                    }
                }
            }
            Kind::Sequence => {
                for (i, el) in node.content.iter().enumerate() {
                    self.walk(el, &format!("{path}[{i}]"));
                }
            }
            Kind::Scalar => self.visit_scalar(node),
            Kind::Document | Kind::Alias => {}
        }
    }

    /// `visitMapping`: array setters.
    fn visit_mapping(&mut self, map: &Node) {
        for i in catalog::visit_fields(map) {
            let (Some(key), Some(value)) = (map.content.get(i), map.content.get(i + 1)) else {
                continue;
            };
            if value.kind != Kind::Sequence {
                continue;
            }
            let mut values: Vec<String> =
                value.content.iter().map(|e| e.value.to_string()).collect();
            values.sort();
            let comment = if value.style == Style::FLOW {
                &value.line_comment
            } else {
                &key.line_comment
            };
            let pattern = extract_setter_pattern(comment);
            if pattern.is_empty() {
                continue;
            }
            let name = clean(pattern);
            match self.arrays.iter_mut().find(|a| a.name == name) {
                Some(a) => a.count += 1,
                None => self.arrays.push(ArraySetter {
                    name: name.to_owned(),
                    values,
                    count: 1,
                }),
            }
        }
    }

    /// `visitScalar`: scalar setters.
    fn visit_scalar(&mut self, node: &Node) {
        let pattern = extract_setter_pattern(&node.line_comment);
        if pattern.is_empty() {
            return;
        }
        let kind = node.tag.strip_prefix("!!").unwrap_or(&node.tag);
        for (name, value) in current_setter_values(pattern, &node.value) {
            match self.scalars.iter_mut().find(|s| s.name == name) {
                Some(s) => {
                    if s.kind == "str" && kind != "str" {
                        s.kind = kind.to_owned();
                    }
                    s.count += 1;
                }
                None => self.scalars.push(ScalarSetter {
                    name,
                    value,
                    kind: kind.to_owned(),
                    count: 1,
                }),
            }
        }
    }
}

/// `getArraySetterValues`: a value that parses as a sequence, its
/// elements as YAML text without line breaks.
fn array_values(value: &str) -> Option<Vec<String>> {
    let docs = krm_yaml::parse::parse(value).ok()?;
    let node = krm_yaml::package::kyaml::content(docs.first()?);
    if node.kind != Kind::Sequence {
        return None;
    }
    Some(
        node.content
            .iter()
            .map(|e| krm_yaml::emit::encode_node(e, false).replace('\n', ""))
            .collect(),
    )
}
