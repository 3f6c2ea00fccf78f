//! The `ApplyReplacements` config decoded as the catalog decodes it: the
//! SDK's `KubeObject.As` writes the node as JSON (yaml.v3's reading of
//! each scalar by its tag) and Go's `encoding/json` reads that into
//! kustomize's `types.Replacement` list: keys matched exactly or else
//! case-insensitively, unknown keys ignored, `null` leaving a field as it
//! is, the first type mismatch reported as `json: cannot unmarshal ...`.

use krm_yaml::{Kind, Node};

/// `resid.ResId` (with its inline `Gvk`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResId {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

impl ResId {
    /// `ResId.String()`: `Kind.version.group/name.namespace` with
    /// `[noKind]`, `[noVer]`, `[noGrp]`, `[noName]`, `[noNs]` for empties.
    pub(crate) fn display(&self) -> String {
        let or = |s: &str, d: &str| {
            if s.is_empty() {
                d.to_owned()
            } else {
                s.to_owned()
            }
        };
        format!(
            "{}.{}.{}/{}.{}",
            or(&self.kind, "[noKind]"),
            or(&self.version, "[noVer]"),
            or(&self.group, "[noGrp]"),
            or(&self.name, "[noName]"),
            or(&self.namespace, "[noNs]"),
        )
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == ResId::default()
    }
}

/// `types.FieldOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldOptions {
    pub delimiter: String,
    pub index: i64,
    pub encoding: String,
    pub create: bool,
}

impl FieldOptions {
    /// `FieldOptions.String()`.
    fn display(&self) -> String {
        if self.delimiter.is_empty() && !self.create {
            return String::new();
        }
        format!("{}({}), create={}", self.delimiter, self.index, self.create)
    }
}

/// `types.SourceSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SourceSelector {
    pub id: ResId,
    pub field_path: String,
    pub options: Option<FieldOptions>,
}

impl SourceSelector {
    /// `SourceSelector.String()`.
    pub(crate) fn display(&self) -> String {
        let mut parts = vec![self.id.display()];
        if !self.field_path.is_empty() {
            parts.push(self.field_path.clone());
        }
        let opts = self.options.as_ref().map(FieldOptions::display);
        if let Some(o) = opts.filter(|o| !o.is_empty()) {
            parts.push(o);
        }
        parts.join(":")
    }
}

/// `types.Selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selector {
    pub id: ResId,
    pub annotation_selector: String,
    pub label_selector: String,
}

/// `types.TargetSelector` (`None` entries: JSON `null`s in the lists).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TargetSelector {
    pub select: Option<Selector>,
    pub reject: Vec<Option<Selector>>,
    pub field_paths: Vec<String>,
    pub options: Option<FieldOptions>,
}

/// `types.Replacement`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Replacement {
    pub source: Option<SourceSelector>,
    /// `None`: absent or `null` (Go's nil slice); `Some(vec![])`: `[]`.
    pub targets: Option<Vec<Option<TargetSelector>>>,
}

/// What Go's decoder is filling: the struct's name for messages, and the
/// JSON field names from the top.
struct Ctx<'a> {
    strukt: &'static str,
    fields: &'a [&'a str],
}

fn type_error(value: &str, ctx: &Ctx<'_>, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {value} into Go struct field {}.{} of type {go_type}",
        ctx.strukt,
        ctx.fields.join(".")
    )
}

/// The JSON type a node becomes (kyaml's `MarshalJSON` over yaml.v3's
/// decoding): `object`, `array`, `string`, `number`, `bool`, `null`.
fn json_type(n: &Node) -> &'static str {
    match n.kind {
        Kind::Mapping => "object",
        Kind::Sequence => "array",
        Kind::Document | Kind::Alias => "null",
        Kind::Scalar => match n.tag.as_str() {
            "!!null" => "null",
            "!!int" | "!!float" => "number",
            "!!bool" => "bool",
            _ => "string",
        },
    }
}

/// The fields of a mapping as Go's decoder visits them: each key, then
/// the struct field it names (exact name first, else case-insensitive).
fn fields<'n>(map: &'n Node, names: &[&'static str]) -> Vec<(&'static str, &'n Node)> {
    let mut out = Vec::new();
    for kv in map.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        let key = k.value.as_str();
        let name = names
            .iter()
            .find(|n| **n == key)
            .or_else(|| names.iter().find(|n| n.eq_ignore_ascii_case(key)));
        if let Some(n) = name {
            out.push((*n, v));
        }
    }
    out
}

fn string(n: &Node, ctx: &Ctx<'_>, out: &mut String) -> Result<(), String> {
    match json_type(n) {
        "null" => Ok(()),
        "string" => {
            *out = n.value.to_string();
            Ok(())
        }
        t => Err(type_error(t, ctx, "string")),
    }
}

fn boolean(n: &Node, ctx: &Ctx<'_>, out: &mut bool) -> Result<(), String> {
    match json_type(n) {
        "null" => Ok(()),
        "bool" => {
            *out = matches!(n.value.as_str(), "true" | "True" | "TRUE");
            Ok(())
        }
        t => Err(type_error(t, ctx, "bool")),
    }
}

/// An `int` field: a YAML int (decimal, `0x`, `0o`, `0b`), or a float
/// with an integral value (JSON writes `2.0` as `2`).
fn int(n: &Node, ctx: &Ctx<'_>, out: &mut i64) -> Result<(), String> {
    match json_type(n) {
        "null" => Ok(()),
        "number" => {
            let parsed = crate::config::yaml_int(&n.value, true);
            match parsed {
                Some(i) => {
                    *out = i;
                    Ok(())
                }
                None => Err(type_error(&format!("number {}", n.value), ctx, "int")),
            }
        }
        t => Err(type_error(t, ctx, "int")),
    }
}

/// A struct field: `null` leaves it (a pointer: `None`); a mapping fills
/// it; anything else is an error naming the struct's type.
fn object<'n>(n: &'n Node, ctx: &Ctx<'_>, go_type: &str) -> Result<Option<&'n Node>, String> {
    match json_type(n) {
        "null" => Ok(None),
        "object" => Ok(Some(n)),
        t => Err(type_error(t, ctx, go_type)),
    }
}

fn array<'n>(n: &'n Node, ctx: &Ctx<'_>, go_type: &str) -> Result<Option<&'n [Node]>, String> {
    match json_type(n) {
        "null" => Ok(None),
        "array" => Ok(Some(&n.content)),
        t => Err(type_error(t, ctx, go_type)),
    }
}

const RES_ID: [&str; 5] = ["group", "version", "kind", "name", "namespace"];

fn res_id_field(name: &str, v: &Node, ctx: &Ctx<'_>, id: &mut ResId) -> Result<bool, String> {
    let slot = match name {
        "group" => &mut id.group,
        "version" => &mut id.version,
        "kind" => &mut id.kind,
        "name" => &mut id.name,
        "namespace" => &mut id.namespace,
        _ => return Ok(false),
    };
    string(v, ctx, slot)?;
    Ok(true)
}

fn options(n: &Node, path: &[&str], out: &mut Option<FieldOptions>) -> Result<(), String> {
    let ctx = Ctx {
        strukt: "FieldOptions",
        fields: path,
    };
    let Some(map) = object(n, &ctx, "types.FieldOptions")? else {
        *out = None;
        return Ok(());
    };
    let o = out.get_or_insert_with(FieldOptions::default);
    for (name, v) in fields(map, &["delimiter", "index", "encoding", "create"]) {
        let p = [path, &[name]].concat();
        let ctx = Ctx {
            strukt: "FieldOptions",
            fields: &p,
        };
        match name {
            "delimiter" => string(v, &ctx, &mut o.delimiter)?,
            "index" => int(v, &ctx, &mut o.index)?,
            "encoding" => string(v, &ctx, &mut o.encoding)?,
            _ => boolean(v, &ctx, &mut o.create)?,
        }
    }
    Ok(())
}

fn selector(map: &Node, path: &[&str], strukt: &'static str) -> Result<Selector, String> {
    let mut s = Selector::default();
    let names = [
        "group",
        "version",
        "kind",
        "name",
        "namespace",
        "annotationSelector",
        "labelSelector",
    ];
    for (name, v) in fields(map, &names) {
        let p = [path, &[name]].concat();
        let ctx = Ctx { strukt, fields: &p };
        if !res_id_field(name, v, &ctx, &mut s.id)? {
            match name {
                "annotationSelector" => string(v, &ctx, &mut s.annotation_selector)?,
                _ => string(v, &ctx, &mut s.label_selector)?,
            }
        }
    }
    Ok(s)
}

fn source(map: &Node, path: &[&str]) -> Result<SourceSelector, String> {
    let mut s = SourceSelector::default();
    let names = [RES_ID.as_slice(), &["fieldPath", "options"]].concat();
    for (name, v) in fields(map, &names) {
        let p = [path, &[name]].concat();
        let ctx = Ctx {
            strukt: "SourceSelector",
            fields: &p,
        };
        if res_id_field(name, v, &ctx, &mut s.id)? {
            continue;
        }
        match name {
            "fieldPath" => string(v, &ctx, &mut s.field_path)?,
            _ => options(v, &p, &mut s.options)?,
        }
    }
    Ok(s)
}

fn target(map: &Node, path: &[&str]) -> Result<TargetSelector, String> {
    let mut t = TargetSelector::default();
    for (name, v) in fields(map, &["select", "reject", "fieldPaths", "options"]) {
        let p = [path, &[name]].concat();
        let ctx = Ctx {
            strukt: "TargetSelector",
            fields: &p,
        };
        match name {
            "select" => {
                t.select = match object(v, &ctx, "types.Selector")? {
                    Some(m) => Some(selector(m, &p, "Selector")?),
                    None => None,
                }
            }
            "reject" => {
                let Some(items) = array(v, &ctx, "[]*types.Selector")? else {
                    t.reject = Vec::new();
                    continue;
                };
                t.reject = Vec::with_capacity(items.len());
                for item in items {
                    t.reject.push(match object(item, &ctx, "types.Selector")? {
                        Some(m) => Some(selector(m, &p, "Selector")?),
                        None => None,
                    });
                }
            }
            "fieldPaths" => {
                let Some(items) = array(v, &ctx, "[]string")? else {
                    t.field_paths = Vec::new();
                    continue;
                };
                t.field_paths = Vec::with_capacity(items.len());
                for item in items {
                    let mut s = String::new();
                    string(item, &ctx, &mut s)?;
                    t.field_paths.push(s);
                }
            }
            _ => options(v, &p, &mut t.options)?,
        }
    }
    Ok(t)
}

fn replacement(map: &Node, path: &[&str]) -> Result<Replacement, String> {
    let mut r = Replacement::default();
    for (name, v) in fields(map, &["source", "targets"]) {
        let p = [path, &[name]].concat();
        let ctx = Ctx {
            strukt: "Replacement",
            fields: &p,
        };
        if name == "source" {
            r.source = match object(v, &ctx, "types.SourceSelector")? {
                Some(m) => Some(source(m, &p)?),
                None => None,
            };
            continue;
        }
        let Some(items) = array(v, &ctx, "[]*types.TargetSelector")? else {
            r.targets = None;
            continue;
        };
        let mut targets = Vec::with_capacity(items.len());
        for item in items {
            targets.push(match object(item, &ctx, "types.TargetSelector")? {
                Some(m) => Some(target(m, &p)?),
                None => None,
            });
        }
        r.targets = Some(targets);
    }
    Ok(r)
}

/// The config's `replacements` (`Err`: Go's decoder's message).
pub(crate) fn decode(config: &Node) -> Result<Vec<Replacement>, String> {
    let mut out = Vec::new();
    for (_, v) in fields(config, &["replacements"]) {
        let path = ["replacements"];
        let ctx = Ctx {
            strukt: "Replacements",
            fields: &path,
        };
        let Some(items) = array(v, &ctx, "[]types.Replacement")? else {
            out = Vec::new();
            continue;
        };
        out = Vec::with_capacity(items.len());
        for item in items {
            out.push(match object(item, &ctx, "types.Replacement")? {
                Some(m) => replacement(m, &path)?,
                None => Replacement::default(),
            });
        }
    }
    Ok(out)
}
