//! `eval --save`: the function just run added to the package's Kptfile
//! pipeline, as kpt's `SaveFnToKptfile` adds it.
//!
//! kpt decodes the Kptfile into its Go types, replaces the functions of
//! the same image (or exec command) in the chosen list by the new one, or
//! appends it, and marshals the types back: every value comes out as
//! yaml.v3 writes a Go string (`'x'` becomes `x`, `1` becomes `"1"`), flow
//! collections as blocks, maps with sorted keys, empty fields gone. That
//! text is read again, the old file's comments copied onto it and its
//! field order restored (kyaml's `CopyComments` and `SyncOrder`), and the
//! document's content written with wide sequences. The same steps are
//! taken here on the node tree ([`marshal`] stands for the decode and the
//! marshal), so the file is kpt's byte for byte.

use std::collections::HashMap;
use std::path::Path;

use super::schema::{Schema, Ty, KPTFILE};
use crate::select::Selector;
use krm_yaml::gov3::{go_key_order, go_string};
use krm_yaml::package::{self, go_quote, kyaml};
use krm_yaml::{Kind, Node};

/// kpt's `--type`: the pipeline list `--save` adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnType {
    Mutator,
    Validator,
}

impl FnType {
    /// `mutator` or `validator`, as kpt takes them (that case only).
    pub fn parse(s: &str) -> Option<FnType> {
        match s {
            "mutator" => Some(FnType::Mutator),
            "validator" => Some(FnType::Validator),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FnType::Mutator => "mutator",
            FnType::Validator => "validator",
        }
    }

    fn list(self) -> &'static str {
        match self {
            FnType::Mutator => "mutators",
            FnType::Validator => "validators",
        }
    }
}

/// The function `eval` ran, as kpt's `NewFunction` records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewFunction {
    /// The image as kpt names it (a short name under the image prefix);
    /// empty for an exec function.
    pub image: String,
    /// `--tag` (beta.67 saves it with an image, for render to resolve).
    pub tag: String,
    /// The command line of an exec function.
    pub exec: String,
    /// `--fn-config`, relative to the package.
    pub config_path: String,
    /// The `key=value` arguments, without a first one that has no `=`
    /// (the kind of the function config).
    pub config_map: Vec<(String, String)>,
    /// `--match-*` (saved as the one selector when not empty).
    pub selector: Selector,
    /// `--exclude-*` (saved as the one exclusion when not empty).
    pub exclusion: Selector,
}

impl NewFunction {
    /// `configMap` from eval's function arguments, as kpt builds it: a
    /// first argument without `=` is skipped, a later key replaces an
    /// earlier one.
    pub fn config_map_from_args(args: &[String]) -> Vec<(String, String)> {
        let mut data: Vec<(String, String)> = Vec::new();
        for arg in args {
            // A first one without `=` is the kind; a later one fails the
            // run, and nothing is saved.
            let Some((k, v)) = arg.split_once('=') else {
                continue;
            };
            match data.iter_mut().find(|d| d.0 == k) {
                Some(d) => d.1 = v.to_owned(),
                None => data.push((k.to_owned(), v.to_owned())),
            }
        }
        data
    }

    /// The name kpt's message gives the function.
    fn shown(&self) -> &str {
        if self.image.is_empty() {
            &self.exec
        } else {
            &self.image
        }
    }

    /// The function as a decoded Kptfile holds it (every value a string).
    fn node(&self) -> Node {
        let mut fields = Vec::new();
        let mut put = |k: &str, v: Node| {
            fields.push(Node::scalar(k));
            fields.push(v);
        };
        put("image", Node::string(self.image.as_str()));
        put("exec", Node::string(self.exec.as_str()));
        put("configPath", Node::string(self.config_path.as_str()));
        put("configMap", string_map(&self.config_map));
        put("tag", Node::string(self.tag.as_str()));
        for (key, s) in [("selectors", &self.selector), ("exclude", &self.exclusion)] {
            if !s.is_empty() {
                put(key, Node::sequence(vec![selector_node(s)]));
            }
        }
        Node::mapping(fields)
    }
}

fn string_map(pairs: &[(String, String)]) -> Node {
    Node::mapping(
        pairs
            .iter()
            .flat_map(|(k, v)| [Node::string(k.as_str()), Node::string(v.as_str())])
            .collect(),
    )
}

fn selector_node(s: &Selector) -> Node {
    let mut fields = Vec::new();
    for (k, v) in [
        ("apiVersion", &s.api_version),
        ("kind", &s.kind),
        ("name", &s.name),
        ("namespace", &s.namespace),
    ] {
        fields.push(Node::scalar(k));
        fields.push(Node::string(v.as_str()));
    }
    for (k, pairs) in [("labels", &s.labels), ("annotations", &s.annotations)] {
        fields.push(Node::scalar(k));
        fields.push(string_map(pairs));
    }
    Node::mapping(fields)
}

/// Adds `f` to the `ty` list of the pipeline in `dir`'s Kptfile, as kpt's
/// `eval --save` does after a run that passed. Returns kpt's line for
/// stderr (what was done, or why nothing was: kpt's run still passes).
pub fn save(dir: &Path, f: &NewFunction, ty: FnType) -> String {
    let path = dir.join("Kptfile");
    // kpt's `ReadKptfile`: a Kptfile it cannot read is "not there".
    let not_added = || "function not added: Kptfile not exists\n".to_owned();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return not_added();
    };
    let Some(original) = krm_yaml::parse::parse(&text)
        .ok()
        .and_then(|d| d.into_iter().next())
    else {
        return not_added();
    };
    if super::read::read(dir, &original).is_err() {
        return not_added();
    }
    let mut decoded = kyaml::content(&original).clone();
    resolve_aliases(&mut decoded, &mut HashMap::new());
    let message = add(&mut decoded, f, ty);
    let content = match rewrite(&original, &decoded) {
        Ok(c) => c,
        Err(e) => return format!("function is not added to Kptfile: {e}\n"),
    };
    // In the package: a Kptfile that is a symlink out of it is not written.
    match package::write_in_package(dir, "Kptfile", content.as_bytes()) {
        Ok(()) => message,
        Err(e) => format!("function is not added to Kptfile: {e}\n"),
    }
}

/// kpt's `updateFnList` on the decoded Kptfile: each function of the list
/// with the new one's image (or exec command) is replaced by it; if none
/// is, it is appended. Returns kpt's message.
fn add(root: &mut Node, f: &NewFunction, ty: FnType) -> String {
    let pipeline = field_or(root, "pipeline", Node::mapping(Vec::new()));
    let list = field_or(pipeline, ty.list(), Node::sequence(Vec::new()));
    let mut verb = "Added";
    for m in &mut list.content {
        let same = |k: &str, v: &str| !v.is_empty() && kyaml::value_of(kyaml::field(m, k)) == v;
        if same("image", &f.image) || same("exec", &f.exec) {
            *m = f.node();
            verb = "Updated";
        }
    }
    if verb == "Added" {
        list.content.push(f.node());
    }
    format!(
        "{verb} {} as {} in the Kptfile.\n",
        go_quote(f.shown()),
        ty.name()
    )
}

/// The value of `key` in `map`, set to `empty` first when it is missing or
/// null (the nil pointer or slice kpt fills).
pub(super) fn field_or<'a>(map: &'a mut Node, key: &str, empty: Node) -> &'a mut Node {
    let i = match kyaml::field_index(map, key) {
        Some(i) => {
            if map.content[i + 1].tag == kyaml::NULL_TAG {
                map.content[i + 1] = empty;
            }
            i
        }
        None => {
            map.content.push(Node::scalar(key));
            map.content.push(empty);
            map.content.len() - 2
        }
    };
    &mut map.content[i + 1]
}

/// Aliases replaced by what they name, as decoding them into Go values
/// does.
pub(super) fn resolve_aliases(node: &mut Node, anchors: &mut HashMap<String, Node>) {
    if node.kind == Kind::Alias {
        if let Some(target) = anchors.get(node.alias.as_str()) {
            *node = target.clone();
        }
        return;
    }
    for c in &mut node.content {
        resolve_aliases(c, anchors);
    }
    if !node.anchor.is_empty() {
        anchors.insert(node.anchor.to_string(), node.clone());
    }
}

/// The file kpt writes: the decoded Kptfile marshalled (kyaml's
/// `yaml.Marshal`: compact sequences), that text read again, the
/// original's comments and field order put back, and the content written
/// with wide sequences (kpt's `kptfileutil.WriteFile`; the document's own
/// comments are not in what it writes).
fn rewrite(original: &Node, decoded: &Node) -> Result<String, String> {
    let marshalled = marshal(Some(decoded), Ty::Obj(&KPTFILE)).unwrap_or_default();
    let text = krm_yaml::emit::encode_node(&marshalled, true);
    let mut again = krm_yaml::parse::parse(&text)
        .map_err(|e| format!("could not parse Kptfile: {e}"))?
        .into_iter()
        .next()
        .ok_or("could not parse Kptfile: no document")?;
    kyaml::copy_comments(original, &mut again);
    kyaml::sync_order(original, &mut again);
    Ok(krm_yaml::emit::encode_node(kyaml::content(&again), false))
}

/// yaml.v3's marshalling of the Go value kpt decodes `node` into as `ty`
/// (`None`: absent or null): `None` when the field is omitted
/// (`omitempty` and empty). Values are strings by then, whatever they were
/// written as.
pub(super) fn marshal(node: Option<&Node>, ty: Ty) -> Option<Node> {
    let node = node.filter(|n| n.tag != kyaml::NULL_TAG);
    let text = |n: Option<&Node>| kyaml::value_of(n).to_owned();
    // yaml.v3 leaves a null element out of a list (its decode of null
    // into a string or struct "fails"); an empty list is omitted.
    let elements = node.map(|n| {
        n.content
            .iter()
            .filter(|i| i.tag != kyaml::NULL_TAG)
            .collect::<Vec<_>>()
    });
    let elements = elements.filter(|e| !e.is_empty());
    match ty {
        Ty::Str => Some(text(node))
            .filter(|v| !v.is_empty())
            .map(|v| go_string(&v)),
        Ty::StrAlways => Some(go_string(&text(node))),
        Ty::StrList => elements
            .map(|e| Node::sequence(e.into_iter().map(|i| go_string(&text(Some(i)))).collect())),
        // A null value stays, as "".
        Ty::StrMap => node.filter(|n| !n.content.is_empty()).map(|n| {
            let mut pairs: Vec<(&str, String)> = n
                .content
                .chunks_exact(2)
                .map(|kv| (kyaml::value_of(Some(&kv[0])), text(Some(&kv[1]))))
                .collect();
            pairs.sort_by(|a, b| go_key_order(a.0, b.0));
            Node::mapping(
                pairs
                    .into_iter()
                    .flat_map(|(k, v)| [go_string(k), go_string(&v)])
                    .collect(),
            )
        }),
        Ty::Int => Some(text(node))
            .filter(|v| !v.is_empty() && go_int(v) != Some(0))
            .map(|v| int_node(&v)),
        Ty::IntAlways => Some(int_node(&text(node))),
        Ty::Text => node
            .map(|n| match n.kind {
                Kind::Mapping | Kind::Sequence => {
                    krm_yaml::emit::encode_node(n, true).trim().to_owned()
                }
                _ => n.value.to_string(),
            })
            .filter(|v| !v.is_empty())
            .map(|v| go_string(&v)),
        // A pointer: any mapping is a value, `{}` included.
        Ty::Obj(schema) | Ty::Lenient(schema) => node.map(|n| structure(Some(n), schema)),
        Ty::Struct(schema) => Some(structure(node, schema)).filter(|m| !m.content.is_empty()),
        Ty::List(schema) => elements
            .map(|e| Node::sequence(e.into_iter().map(|i| structure(Some(i), schema)).collect())),
    }
}

/// An integer as Go's `int` holds it (`0x1f`, `1_000`, `1e3` and the
/// like decoded), `None` for what is not one.
fn go_int(v: &str) -> Option<i64> {
    let clean = v.replace('_', "");
    let (neg, digits) = match clean.strip_prefix('-') {
        Some(d) => (true, d.to_owned()),
        None => (false, clean.trim_start_matches('+').to_owned()),
    };
    let n = if let Some(h) = digits.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = digits.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = digits.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else {
        digits
            .parse::<i64>()
            .ok()
            .or_else(|| digits.parse::<f64>().ok().map(|f| f as i64))
    }?;
    Some(if neg { -n } else { n })
}

/// An `int` as yaml.v3 writes it: decimal, plain.
fn int_node(v: &str) -> Node {
    Node::scalar(go_int(v).unwrap_or(0).to_string().as_str())
}

/// A struct's fields in the struct's order, those omitted left out.
fn structure(node: Option<&Node>, schema: &Schema) -> Node {
    let mut content = Vec::new();
    for (name, ty) in schema.fields {
        if let Some(value) = marshal(node.and_then(|n| kyaml::field(n, name)), *ty) {
            content.push(go_string(name));
            content.push(value);
        }
    }
    Node {
        kind: Kind::Mapping,
        content,
        ..Node::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use krm_yaml::Style;

    #[test]
    fn map_keys_in_yaml_v3_order() {
        let mut keys = vec!["b", "a10", "a2", "A", "_x", "a", "1", "10", "2", "a02", "z"];
        keys.sort_by(|a, b| go_key_order(a, b));
        assert_eq!(
            keys,
            ["_x", "1", "2", "10", "A", "a", "a2", "a02", "a10", "b", "z"]
        );
    }

    #[test]
    fn strings_as_yaml_v3_marshals_them() {
        let style = |s: &str| go_string(s).style;
        assert_eq!(style("plain"), Style::default());
        assert_eq!(style("1"), Style::DOUBLE_QUOTED);
        assert_eq!(style("yes"), Style::DOUBLE_QUOTED);
        assert_eq!(style("1:20"), Style::DOUBLE_QUOTED);
        assert_eq!(style(""), Style::DOUBLE_QUOTED);
        assert_eq!(style("a\nb"), Style::LITERAL);
    }
}
