//! `additionalImageFields`: the catalog's `custom.SetAdditionalFieldSpec`,
//! which runs kustomize's `imagetag.Filter` (api v0.19.0, kyaml v0.19.0)
//! with the config's FieldSpecs over each item. The catalog runs it on a
//! JSON copy of each item and kpt puts the comments and the order of the
//! fields back; here the item is updated in place.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use super::image::split;
use super::object::{get_field, json_fields, json_string, object_result, unmatched, Die};
use crate::function::Context;
use crate::result::FnResult;

/// kustomize's `types.Image` (the catalog's own has no `tagSuffix`).
#[derive(Debug, Default)]
struct KImage {
    name: String,
    new_name: String,
    tag_suffix: String,
    new_tag: String,
    digest: String,
}

/// kustomize's `types.FieldSpec` (`create` is read but, as the image
/// filter gives no kind to create, never acted on).
#[derive(Debug, Default)]
pub(super) struct FieldSpec {
    group: String,
    version: String,
    kind: String,
    path: String,
}

/// A FieldSpec as `json.Unmarshal` fills one: field names match
/// case-insensitively; strings, `create` a bool; null leaves a field.
pub(super) fn decode_spec(n: &Node) -> Result<FieldSpec, Die> {
    let mut spec = FieldSpec::default();
    match n.kind {
        Kind::Scalar if n.tag == kyaml::NULL_TAG => return Ok(spec),
        Kind::Mapping => {}
        _ => return Err(unmatched("")),
    }
    for (k, v) in json_fields(n) {
        let slot = match k.to_lowercase().as_str() {
            "group" => &mut spec.group,
            "version" => &mut spec.version,
            "kind" => &mut spec.kind,
            "path" => &mut spec.path,
            "create" => {
                let ok = v.kind == Kind::Scalar && (v.tag == kyaml::NULL_TAG || v.tag == "!!bool");
                if !ok {
                    return Err(unmatched(""));
                }
                continue;
            }
            _ => continue,
        };
        if let Some(s) = json_string(v)? {
            *slot = s;
        }
    }
    Ok(spec)
}

/// `functionConfig.GetMap("image")` read into kustomize's `Image`.
fn decode_image(c: &Node) -> Result<KImage, Die> {
    let mut image = KImage::default();
    let Some(n) = get_field(c, "image") else {
        // `AsOrDie` on a nil SubObject.
        return Err(unmatched(""));
    };
    match n.kind {
        Kind::Scalar if n.tag == kyaml::NULL_TAG => return Ok(image),
        Kind::Mapping => {}
        _ => return Err(unmatched("")),
    }
    for (k, v) in json_fields(n) {
        let slot = match k.to_lowercase().as_str() {
            "name" => &mut image.name,
            "newname" => &mut image.new_name,
            "tagsuffix" => &mut image.tag_suffix,
            "newtag" => &mut image.new_tag,
            "digest" => &mut image.digest,
            _ => continue,
        };
        if let Some(s) = json_string(v)? {
            *slot = s;
        }
    }
    Ok(image)
}

/// `functionConfig.GetSlice("additionalImageFields")`, each element
/// `AsOrDie(&FieldSpec{})`.
fn decode_specs(c: &Node) -> Result<Vec<FieldSpec>, Die> {
    match get_field(c, "additionalImageFields") {
        None => Ok(Vec::new()),
        Some(n) if n.kind == Kind::Scalar && n.tag == kyaml::NULL_TAG => Ok(Vec::new()),
        Some(n) if n.kind == Kind::Sequence => n.content.iter().map(decode_spec).collect(),
        Some(_) => Err(unmatched("additionalImageFields")),
    }
}

/// What stops the walk of one item: a kustomize error (the item keeps
/// its old value, an error result names it) or the SDK's end.
enum Stop {
    Error(String),
    Die(Die),
}

impl From<String> for Stop {
    fn from(s: String) -> Stop {
        Stop::Error(s)
    }
}

/// Sets the image at the FieldSpecs of each item; `count` takes one per
/// value set (the filter's mutation tracker, also for a value that does
/// not change). An item whose walk fails is left as it was (the catalog
/// drops the JSON copy), with the error result `ResultErr` gives.
pub(super) fn run(
    config: &Node,
    items: &mut [Node],
    results: &mut Vec<FnResult>,
    count: &mut usize,
    ctx: &Context,
) -> Result<(), Die> {
    let image = decode_image(config)?;
    let specs = decode_specs(config)?;
    let pattern = regex::Regex::new(&format!(
        "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
        image.name
    ))
    .ok();
    let setter = Setter {
        image: &image,
        pattern,
    };
    for item in items.iter_mut() {
        ctx.check().map_err(|_| Die::Cancelled)?;
        // kustomize's deny list: CRDs are never changed.
        if get_field(item, "metadata").is_some()
            && scalar_text(item, "kind") == "CustomResourceDefinition"
        {
            continue;
        }
        if !specs.iter().any(|s| matches_gvk(s, item)) {
            continue;
        }
        let mut copy = item.clone();
        let mut set = 0;
        let mut outcome = Ok(());
        for spec in specs.iter().filter(|s| matches_gvk(s, item)) {
            let path = split_path(&spec.path);
            outcome = walk(&mut copy, &path, &setter, &mut set).map_err(|e| match e {
                Stop::Error(m) => Stop::Error(format!(
                    "considering field '{}' of object {}: {m}",
                    spec.path,
                    res_id(item)
                )),
                d => d,
            });
            if outcome.is_err() {
                break;
            }
        }
        *count += set;
        match outcome {
            Ok(()) => *item = copy,
            Err(Stop::Error(message)) => results.push(object_result(&message, item)),
            Err(Stop::Die(d)) => return Err(d),
        }
    }
    Ok(())
}

/// A scalar field's text, as kyaml's `GetKind` reads it.
fn scalar_text<'a>(o: &'a Node, key: &str) -> &'a str {
    match get_field(o, key) {
        Some(n) if n.kind == Kind::Scalar => &n.value,
        _ => "",
    }
}

/// `fieldspec.isMatchGVK`: an empty part of the FieldSpec matches all.
fn matches_gvk(spec: &FieldSpec, o: &Node) -> bool {
    let api = scalar_text(o, "apiVersion");
    let (group, version) = api.split_once('/').unwrap_or(("", api));
    (spec.kind.is_empty() || spec.kind == scalar_text(o, "kind"))
        && (spec.group.is_empty() || spec.group == group)
        && (spec.version.is_empty() || spec.version == version)
}

/// `resid.FromRNode(obj).String()`.
fn res_id(o: &Node) -> String {
    let or = |s: &str, none: &str| {
        if s.is_empty() {
            none.to_owned()
        } else {
            s.to_owned()
        }
    };
    let api = scalar_text(o, "apiVersion");
    let (group, version) = api.split_once('/').unwrap_or(("", api));
    let meta = |key: &str| -> String {
        match get_field(o, "metadata").and_then(|m| get_field(m, key)) {
            Some(n) if n.kind == Kind::Scalar && n.tag != kyaml::NULL_TAG => n.value.to_string(),
            _ => String::new(),
        }
    };
    format!(
        "{}.{}.{}/{}.{}",
        or(scalar_text(o, "kind"), "[noKind]"),
        or(version, "[noVer]"),
        or(group, "[noGrp]"),
        or(&meta("name"), "[noName]"),
        or(&meta("namespace"), "[noNs]"),
    )
}

/// kyaml's `utils.PathSplitter(path, "/")`: a leading `/` is dropped,
/// `\/` does not split.
fn split_path(path: &str) -> Vec<String> {
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 1 && parts.first() == Some(&"") {
        parts.remove(0);
    }
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        match out.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('/');
                last.push_str(p);
            }
            _ => out.push(p.to_owned()),
        }
    }
    out
}

/// `fieldspec.Filter.filter`.
fn walk(
    node: &mut Node,
    path: &[String],
    setter: &Setter<'_>,
    set: &mut usize,
) -> Result<(), Stop> {
    let Some((first, rest)) = path.split_first() else {
        return setter.set(node, set);
    };
    if node.kind == Kind::Scalar && node.tag == kyaml::NULL_TAG {
        return Ok(());
    }
    match node.kind {
        Kind::Sequence => {
            for element in node.content.iter_mut() {
                walk(element, path, setter, set).map_err(|e| match e {
                    Stop::Error(m) => Stop::Error(format!(
                        "visit traversal on path: [{}]: {m}",
                        path.join(" ")
                    )),
                    d => d,
                })?;
            }
            Ok(())
        }
        Kind::Mapping => walk_map(node, first, rest, setter, set),
        Kind::Document => match node.content.first_mut() {
            Some(n) => walk(n, path, setter, set),
            None => Ok(()),
        },
        // The catalog's JSON copy has no aliases; an alias is not
        // followed here.
        Kind::Alias => Ok(()),
        Kind::Scalar => Err("expected sequence or mapping node".to_owned().into()),
    }
}

/// `fieldspec.Filter.handleMap`, its field looked up with
/// `yaml.Lookup(name)` (a kyaml `PathGetter`).
fn walk_map(
    node: &mut Node,
    first: &str,
    rest: &[String],
    setter: &Setter<'_>,
    set: &mut usize,
) -> Result<(), Stop> {
    let (name, is_seq) = match first.strip_suffix("[]") {
        Some(n) => (n, true),
        None => (first, false),
    };
    if name.is_empty() {
        return Err("cannot set or create an empty field name".to_owned().into());
    }
    let part = name.trim();
    let lookup_error = |m: String| Stop::Error(format!("fieldName: {name}: {m}"));
    if part.is_empty() {
        // The PathGetter's path is empty once cleaned: the map itself.
        return walk(node, rest, setter, set);
    }
    if let Some(index) = go_atoi(part) {
        if index < 0 {
            return Err(lookup_error(format!(
                "array index {index} cannot be negative"
            )));
        }
        return Err(lookup_error(wrong_kind("SequenceNode", node)));
    }
    if part == "-" {
        return Err(lookup_error(wrong_kind("SequenceNode", node)));
    }
    if part == "*" {
        return Err(lookup_error(
            "wildcard is not supported in PathGetter".to_owned(),
        ));
    }
    if part.starts_with('[') && part.ends_with(']') {
        let inner = part.trim_end_matches(']');
        let inner = inner.strip_prefix('[').unwrap_or(inner);
        if !inner.contains('=') {
            return Err(lookup_error(
                "list path element must contain fieldName=fieldValue for element to match"
                    .to_owned(),
            ));
        }
        return Err(lookup_error(wrong_kind("SequenceNode", node)));
    }
    // `FieldMatcher`: the last field of that name.
    let Some(field) = node
        .content
        .chunks_exact_mut(2)
        .filter(|kv| kv.first().is_some_and(|k| k.value == part))
        .last()
        .and_then(|kv| kv.get_mut(1))
    else {
        return Ok(());
    };
    // A null field the path reads as a list becomes an empty list.
    if is_seq && field.kind == Kind::Scalar && field.tag == kyaml::NULL_TAG {
        field.kind = Kind::Sequence;
        field.tag = "!!seq".into();
        field.value = "".into();
    }
    walk(field, rest, setter, set)
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

fn kind_name(n: &Node) -> &'static str {
    match n.kind {
        Kind::Document => "DocumentNode",
        Kind::Sequence => "SequenceNode",
        Kind::Mapping => "MappingNode",
        Kind::Scalar => "ScalarNode",
        Kind::Alias => "AliasNode",
    }
}

/// kyaml's `InvalidNodeKindError`, the node written as the JSON copy
/// reads back (flow style, keys sorted).
fn wrong_kind(expected: &str, node: &Node) -> String {
    let mut contents = String::new();
    flow(node, &mut contents);
    format!(
        "wrong node kind: expected {expected} but got {}: node contents:\n{contents}\n",
        kind_name(node)
    )
}

fn flow(n: &Node, out: &mut String) {
    match n.kind {
        Kind::Mapping => {
            let mut fields: Vec<(&str, &Node)> = n
                .content
                .chunks_exact(2)
                .filter_map(|kv| match kv {
                    [k, v] => Some((k.value.as_str(), v)),
                    _ => None,
                })
                .collect();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            fields.dedup_by(|b, a| a.0 == b.0);
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote(k, out);
                out.push_str(": ");
                flow(v, out);
            }
            out.push('}');
        }
        Kind::Sequence => {
            out.push('[');
            for (i, v) in n.content.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                flow(v, out);
            }
            out.push(']');
        }
        Kind::Document => {
            if let Some(c) = n.content.first() {
                flow(c, out);
            }
        }
        Kind::Alias => out.push_str("null"),
        Kind::Scalar => match n.tag.as_str() {
            "!!null" => out.push_str("null"),
            "!!bool" | "!!int" | "!!float" => out.push_str(&n.value),
            _ => quote(&n.value, out),
        },
    }
}

fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `imagetag.imageTagUpdater.SetImageValue`.
struct Setter<'a> {
    image: &'a KImage,
    pattern: Option<regex::Regex>,
}

impl Setter<'_> {
    fn set(&self, node: &mut Node, set: &mut usize) -> Result<(), Stop> {
        let null = node.kind == Kind::Scalar && node.tag == kyaml::NULL_TAG;
        if node.kind != Kind::Scalar {
            return Err(wrong_kind("ScalarNode", node).into());
        }
        let old = if null {
            "null".to_owned()
        } else {
            node.value.to_string()
        };
        let Some(pattern) = &self.pattern else {
            return Err(Stop::Die(Die::Crash(
                "runtime error: invalid memory address or nil pointer dereference".to_owned(),
            )));
        };
        if !pattern.is_match(&old) {
            return Ok(());
        }
        let new = kustomize_image_name(&old, self.image);
        *set += 1;
        // `FieldSetter` on a scalar: the new value keeps the old style;
        // the comments stay where they were (kpt puts them back).
        node.value = new.into();
        node.tag = "!!str".into();
        Ok(())
    }
}

/// kustomize's new image name: a new tag or digest replaces both the old
/// tag and digest; a tag suffix is added to the old tag.
fn kustomize_image_name(old: &str, image: &KImage) -> String {
    let (name, tag, digest) = split(old);
    let mut name = name.to_owned();
    let (mut tag, mut digest) = (tag.to_owned(), digest.to_owned());
    if !image.new_name.is_empty() {
        name.clone_from(&image.new_name);
    }
    if !image.new_tag.is_empty() && !image.digest.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clone_from(&image.digest);
    } else if !image.new_tag.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clear();
    } else if !image.digest.is_empty() {
        tag.clear();
        digest.clone_from(&image.digest);
    } else if !image.tag_suffix.is_empty() {
        tag.push_str(&image.tag_suffix);
        digest.clear();
    }
    if !tag.is_empty() {
        name = name + ":" + &tag;
    }
    if !digest.is_empty() {
        name = name + "@" + &digest;
    }
    name
}

#[cfg(test)]
pub(super) fn new_name_for_tests(
    old: &str,
    new_name: &str,
    new_tag: &str,
    digest: &str,
    suffix: &str,
) -> String {
    kustomize_image_name(
        old,
        &KImage {
            name: String::new(),
            new_name: new_name.to_owned(),
            tag_suffix: suffix.to_owned(),
            new_tag: new_tag.to_owned(),
            digest: digest.to_owned(),
        },
    )
}
