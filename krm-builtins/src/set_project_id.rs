//! `set-project-id`: puts the config's `project-id` into the package
//! where it is not set yet: as the `project-id` setter of the Kptfiles'
//! `apply-setters` mutators, and as the
//! `cnrm.cloud.google.com/project-id` annotation of Config Connector
//! resources.
//!
//! Follows release `set-project-id/v0.2.0` of kptdev/krm-functions-catalog
//! (6b597816, `functions/go/set-project-id/main.go`, and the examples
//! `examples/set-project-id-{simple,advanced}`), on what its go.mod pins:
//! kyaml v0.11.0 (`fn/framework.Execute`, `fn/framework/command.Build`,
//! `kio.ByteReadWriter`, `yaml.RNode`'s `GetKind`, `GetAnnotations`,
//! `SetAnnotations`, `GetDataMap`, `SetDataMap`, `FieldSetter`,
//! `ErrorIfInvalid`, `ClearEmptyAnnotations`, and its forked yaml.v3
//! encoder behind `yaml.Marshal`), and kpt-functions-sdk 632b30549de6
//! (`go/pkg/api/kptfile/v1` types, `util.DecodeKptfile`: gopkg.in/yaml.v3
//! 496545a6307b's decoder with `KnownFields`).
//!
//! - Config: the `data` of any config (`GetDataMap`: a `v1 ConfigMap`, the
//!   `function-input` ConfigMap of `eval -- project-id=foo`, any kind with
//!   `data`). Nothing is checked: no config, no `data` or no `project-id`
//!   sets the empty string everywhere below.
//! - Kptfiles: every item of kind `Kptfile` (any apiVersion), decoded
//!   strictly into the SDK's v1 types (unknown fields, type errors and
//!   repeated keys fail, with yaml.v3's lines, counted in the item as
//!   kyaml writes it out). For each, the first `pipeline.mutators` entry
//!   whose image contains `apply-setters`:
//!   - with a `configMap` (`{}` counts): its `project-id` is set when
//!     missing or empty, and the Kptfile item is replaced by the decoded
//!     Kptfile marshalled again, whether or not that changed anything:
//!     the types' field order, maps sorted, every value a string written
//!     plain or double-quoted as yaml.v3 writes Go strings, empty fields
//!     and the comments gone;
//!   - else with a `configPath`: the item whose
//!     `config.kubernetes.io/path` is exactly that path (not resolved
//!     against the Kptfile's directory) gets `data.project-id` when it is
//!     missing or empty, `data` then rewritten as `SetDataMap` writes it
//!     (removed, appended again at the end, keys sorted, each value a
//!     new string: old styles and comments gone); the Kptfile is left as
//!     it is;
//!   - else the function fails.
//!
//!   No such mutator (or no pipeline): one is appended,
//!   `{image: gcr.io/kpt-fn/apply-setters:v0.2, configMap: {project-id:
//!   <id>}}` (`:v0.1` for v0.1.0's tag, [`Context::release`]: the one
//!   difference between the two releases), and the Kptfile rewritten as above. A rewritten Kptfile
//!   replaces the first item whose `config.kubernetes.io/path` equals its
//!   own (or that has none, when it has none).
//! - Annotations: every item whose apiVersion matches
//!   `^(\w+)\.cnrm\.cloud\.google\.com/\w+$`, but not `core.cnrm...`,
//!   without a `cnrm.cloud.google.com/project-id` annotation (an empty one
//!   counts as set, whatever the README says) gets it; its annotations are
//!   then rewritten as `SetAnnotations` writes them: removed, appended
//!   again at the end of `metadata`, sorted by key, each value a new
//!   string (old styles and comments gone; `"false"` stays quoted as the
//!   encoder quotes it).
//! - Output: the items in their order; then, as kyaml's writer does,
//!   empty `metadata.annotations` and empty `metadata` removed from every
//!   item. No results, nothing on stderr on success.
//! - Failures (exit 1, no results, the error twice on stderr: once by
//!   `command.Build` without a newline, once by `main`), the items as far
//!   as they were changed:
//!   - `failed to set project-id setter: faild to find Kptfile: unable to
//!     find Kptfile, please include --include-meta-resources flag if a
//!     Kptfile is present` (the release's typo); no annotation is set then;
//!   - `failed to set project-id setter: faild to find Kptfile: failed to
//!     read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line
//!     N: ...`;
//!   - `failed to set project-id setter: error updating Kptfile: failed to
//!     find setter file: file X doesn't exist, please ensure the file
//!     specified in "configPath" exists and retry`;
//!   - ``failed to set project-id setter: error updating Kptfile: unable
//!     to find `ConfigMap` or `configPath` as the `functionConfig` for
//!     apply-setters``;
//!   - `failed to set project-id annotation: failed to set project-id
//!     annotation: wrong Node Kind for metadata expected: MappingNode was
//!     ScalarNode: value: {...}` (kyaml's setters on a `metadata` that is
//!     not a mapping);
//!   - kyaml's writer refuses an item that is not a mapping (or null), or
//!     whose `metadata` is not a mapping (or null), with the same `wrong
//!     Node Kind` text (`for  expected` for the item itself); that error
//!     replaces the function's own.
//!
//! v0.1.0 (58a9c317) is the same code on the same kyaml and SDK, but for
//! the mutator it appends: `gcr.io/kpt-fn/apply-setters:v0.1` instead of
//! `:v0.2`. Master after v0.2.0 (unreleased) spells "failed to find
//! Kptfile" and moves to kyaml v0.19.0; neither is followed here.
//!
//! Departures:
//! - Where the Go binary crashes, here it fails (exit 1, the items as they
//!   stand): an item that is a sequence whose last, even-placed element is
//!   the text `kind` or `apiVersion` (Go: `panic: runtime error: index out
//!   of range`, exit 2, a goroutine dump after the first line, which is
//!   what is written here); duplicate `data` keys in a setters ConfigMap
//!   whose second `data` is not a mapping (Go: `log.Fatal`, its message
//!   after a date and time left out here, and nothing on stdout). When
//!   kyaml's writer refuses an item, Go writes no ResourceList at all.
//! - The Kptfile's decode: values with explicit tags are read by their
//!   text (yaml.v3 decodes `!!binary` and refuses e.g. `!!int abc`); a
//!   scalar's text in a type error is cut at a character boundary at or
//!   before yaml.v3's 7 bytes; aliases are checked against yaml.v3's
//!   budget over the whole Kptfile rather than the parts the decode
//!   visits; past 10,000 errors the rest are not listed. Map keys are
//!   sorted as yaml.v3 sorts them, with Unicode's alphabetic property for
//!   its letters and ASCII digits for its numbers.
//! - The input's `results` (which kyaml's framework writes back) are not
//!   this function's to keep.

use std::collections::{BTreeMap, HashMap};

use krm_yaml::gov3::{go_key_order, go_string};
use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node, Style};

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};

#[cfg(test)]
mod tests;

/// `projectIDSetterName`, also the config's key.
const SETTER: &str = "project-id";
/// `projectIDAnnotation`.
const ANNOTATION: &str = "cnrm.cloud.google.com/project-id";
/// kyaml v0.11.0's `kioutil.PathAnnotation`.
const PATH: &str = catalog::LEGACY_PATH;
/// The mutator v0.2.0 appends.
const APPLY_SETTERS: &str = "gcr.io/kpt-fn/apply-setters:v0.2";
/// The one v0.1.0 appends: its only difference from v0.2.0 (same code,
/// same kyaml and SDK).
const APPLY_SETTERS_V01: &str = "gcr.io/kpt-fn/apply-setters:v0.1";

/// Why the function stopped.
enum Failure {
    /// `Process`'s error: the items are still written, and the error
    /// printed twice.
    Error(String),
    /// The binary dies where it is (a panic, `log.Fatal`): this stderr.
    Crash(String),
    Cancelled,
}

impl Failure {
    /// `fmt.Errorf("<prefix>%w", err)` on a `Process` error.
    fn wrap(self, prefix: &str) -> Failure {
        match self {
            Failure::Error(e) => Failure::Error(format!("{prefix}{e}")),
            other => other,
        }
    }
}

fn check(ctx: &Context) -> Result<(), Failure> {
    ctx.check().map_err(|_| Failure::Cancelled)
}

/// How `command.Build` and `main` print an error.
fn twice(err: &str) -> Stop {
    Stop::Failed(format!("{err}{err}\n"))
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let project_id = data_map(rl.function_config.as_ref())
        .remove(SETTER)
        .unwrap_or_default();
    let failed = match process(&mut rl.items, &project_id, ctx) {
        Ok(()) => None,
        Err(Failure::Error(e)) => Some(e),
        Err(Failure::Crash(text)) => return Err(Stop::Failed(text)),
        Err(Failure::Cancelled) => return Err(Stop::Cancelled),
    };
    // `ByteWriter.Write`: `ClearEmptyAnnotations` on every item, whose
    // error is the run's.
    ctx.check()?;
    if let Some(e) = rl.items.iter().find_map(unwritable) {
        return Err(twice(&e));
    }
    for item in &mut rl.items {
        kyaml::clear_empty_annotations(item);
    }
    match failed {
        Some(e) => Err(twice(&e)),
        None => Ok(()),
    }
}

/// `projectIDProcessor.Process`.
fn process(items: &mut [Node], project_id: &str, ctx: &Context) -> Result<(), Failure> {
    set_setters(items, project_id, ctx).map_err(|f| f.wrap("failed to set project-id setter: "))?;
    set_annotations(items, project_id, ctx)
        .map_err(|f| f.wrap("failed to set project-id annotation: "))
}

/// `setSetters`.
fn set_setters(items: &mut [Node], project_id: &str, ctx: &Context) -> Result<(), Failure> {
    let kptfiles = find_kptfiles(items, ctx).map_err(|f| f.wrap("faild to find Kptfile: "))?;
    let apply_setters = match ctx.release() {
        Some("v0.1.0") => APPLY_SETTERS_V01,
        _ => APPLY_SETTERS,
    };
    for kf in kptfiles {
        check(ctx)?;
        set_setters_on_kptfile(items, kf, project_id, apply_setters)
            .map_err(|f| f.wrap("error updating Kptfile: "))?;
    }
    Ok(())
}

/// `findKptfiles`: every item of kind `Kptfile`, decoded.
fn find_kptfiles(items: &[Node], ctx: &Context) -> Result<Vec<KptFile>, Failure> {
    let mut out = Vec::new();
    for item in items {
        check(ctx)?;
        if map_field_value(item, "kind")? != "Kptfile" {
            continue;
        }
        let kf = decode_kptfile(item).map_err(|e| {
            Failure::Error(format!("failed to read Kptfile: invalid 'v1' Kptfile: {e}"))
        })?;
        out.push(kf);
    }
    if out.is_empty() {
        return Err(Failure::Error(
            "unable to find Kptfile, please include --include-meta-resources flag if a Kptfile is present"
                .into(),
        ));
    }
    Ok(out)
}

/// `setSettersOnKptfile`.
fn set_setters_on_kptfile(
    items: &mut [Node],
    mut kf: KptFile,
    project_id: &str,
    apply_setters: &str,
) -> Result<(), Failure> {
    let pipeline = kf.pipeline.get_or_insert_with(Pipeline::default);
    if let Some(f) = pipeline
        .mutators
        .iter_mut()
        .find(|f| f.image.contains("apply-setters"))
    {
        if let Some(map) = &mut f.config_map {
            if map.get(SETTER).is_none_or(String::is_empty) {
                map.insert(SETTER.to_owned(), project_id.to_owned());
            }
            set_kptfile(items, &kf);
            return Ok(());
        }
        if !f.config_path.is_empty() {
            let path = f.config_path.clone();
            let Some(setters) = items.iter_mut().find(|i| path_of(i) == path) else {
                return Err(Failure::Error(format!(
                    "failed to find setter file: file {path} doesn't exist, please ensure the file specified in \"configPath\" exists and retry"
                )));
            };
            let mut data = data_map(Some(setters));
            if data.get(SETTER).is_none_or(String::is_empty) {
                data.insert(SETTER.to_owned(), project_id.to_owned());
                set_data_map(setters, &data)?;
            }
            return Ok(());
        }
        return Err(Failure::Error(
            "unable to find `ConfigMap` or `configPath` as the `functionConfig` for apply-setters"
                .into(),
        ));
    }
    pipeline.mutators.push(Function {
        image: apply_setters.to_owned(),
        config_path: String::new(),
        config_map: Some(BTreeMap::from([(SETTER.to_owned(), project_id.to_owned())])),
    });
    set_kptfile(items, &kf);
    Ok(())
}

/// `setKptfile`: the Kptfile marshalled and parsed again, in place of the
/// first item whose path annotation is the Kptfile's.
fn set_kptfile(items: &mut [Node], kf: &KptFile) {
    let path = kf
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PATH))
        .cloned()
        .unwrap_or_default();
    let Some(slot) = items.iter_mut().find(|i| path_of(i) == path) else {
        return;
    };
    let text = krm_yaml::emit::encode_node(&kf.marshal(), true);
    // What yaml.v3 wrote it reads back.
    if let Some(doc) = krm_yaml::parse::parse(&text)
        .ok()
        .and_then(|d| d.into_iter().next())
    {
        *slot = kyaml::content(&doc).clone();
    }
}

/// `setProjectIDAnnotation`.
fn set_annotations(items: &mut [Node], project_id: &str, ctx: &Context) -> Result<(), Failure> {
    for item in items.iter_mut() {
        check(ctx)?;
        let api_version = map_field_value(item, "apiVersion")?;
        if kcc_group(&api_version).is_none_or(|g| g == "core") {
            continue;
        }
        let mut annotations = get_annotations(item);
        if annotations.contains_key(ANNOTATION) {
            continue;
        }
        annotations.insert(ANNOTATION.to_owned(), project_id.to_owned());
        set_annotations_map(item, &annotations)
            .map_err(|e| Failure::Error(format!("failed to set project-id annotation: {e}")))?;
    }
    Ok(())
}

/// The group `kccAPIVersionRegex` captures: `^([\w]+)\.cnrm\.cloud\.google\.com\/[\w]+$`
/// (`\w`: ASCII letters, digits and `_`).
fn kcc_group(api_version: &str) -> Option<&str> {
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let (group, rest) = api_version.split_once('.')?;
    let version = rest.strip_prefix("cnrm.cloud.google.com/")?;
    (word(group) && word(version)).then_some(group)
}

// ---------------------------------------------------------------------------
// kyaml v0.11.0's RNode, as this function uses it.

/// `RNode.getMapFieldValue(field).Value` (`GetKind`, `GetApiVersion`):
/// the content of any node read as key, value pairs; a key without its
/// value is Go's index panic.
fn map_field_value(node: &Node, field: &str) -> Result<String, Failure> {
    let content = &node.content;
    let mut i = 0;
    while let Some(key) = content.get(i) {
        if key.value == field {
            return match content.get(i + 1) {
                Some(v) => Ok(v.value.to_string()),
                None => Err(Failure::Crash(format!(
                    "panic: runtime error: index out of range [{}] with length {}\n",
                    i + 1,
                    content.len()
                ))),
            };
        }
        i += 2;
    }
    Ok(String::new())
}

/// `RNode.GetAnnotations()`: `GetValue` of each key and value (a key's
/// first value, as `VisitFields` finds it), empty when `metadata` or
/// `annotations` is missing, null, empty or not a mapping.
fn get_annotations(item: &Node) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if catalog::is_null(item) {
        return out;
    }
    let Some(md) = catalog::field(item, "metadata").filter(|m| !catalog::is_nil_or_empty(m)) else {
        return out;
    };
    let Some(a) = catalog::field(md, "annotations").filter(|a| !catalog::is_nil_or_empty(a)) else {
        return out;
    };
    for i in catalog::visit_fields(a) {
        if let (Some(k), Some(v)) = (a.content.get(i), a.content.get(i + 1)) {
            out.insert(
                catalog::get_value(k).to_owned(),
                catalog::get_value(v).to_owned(),
            );
        }
    }
    out
}

/// `GetAnnotations()[kioutil.PathAnnotation]`.
fn path_of(item: &Node) -> String {
    get_annotations(item).remove(PATH).unwrap_or_default()
}

/// `RNode.GetDataMap()`: `data`'s entries (`GetValue` of each key and
/// value); empty without a mapping config or a mapping `data`.
fn data_map(config: Option<&Node>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(data) = config
        .filter(|c| c.kind == Kind::Mapping)
        .and_then(|c| catalog::field(c, "data"))
        .filter(|d| d.kind == Kind::Mapping)
    else {
        return out;
    };
    for i in catalog::visit_fields(data) {
        if let (Some(k), Some(v)) = (data.content.get(i), data.content.get(i + 1)) {
            out.insert(
                catalog::get_value(k).to_owned(),
                catalog::get_value(v).to_owned(),
            );
        }
    }
    out
}

/// `ErrorIfInvalid(rn, MappingNode)`'s message: the field path and the
/// node as kyaml writes it.
fn wrong_kind(path: &str, node: &Node) -> String {
    let text = krm_yaml::emit::encode_node(node, true);
    format!(
        "wrong Node Kind for {path} expected: MappingNode was {}: value: {{{}}}",
        kyaml::kind_name(node.kind),
        text.trim()
    )
}

/// Why kyaml's writer refuses an item (`ClearEmptyAnnotations`'s
/// `Lookup` and `FieldClearer`), if it does.
fn unwritable(item: &Node) -> Option<String> {
    if catalog::is_null(item) {
        return None;
    }
    if item.kind != Kind::Mapping {
        return Some(wrong_kind("", item));
    }
    match catalog::field(item, "metadata") {
        Some(md) if !catalog::is_null(md) && md.kind != Kind::Mapping => {
            Some(wrong_kind("metadata", md))
        }
        _ => None,
    }
}

/// A value `NewStringRNode` (and `makeConfigMapValueRNode`) makes: a
/// `!!str`, literal when it has a line break.
fn string_node(value: &str) -> Node {
    let mut n = Node::string(value);
    if value.contains('\n') {
        n.style = Style::LITERAL;
    }
    n
}

/// `PathGetter{Create: MappingNode}` for one field of a mapping: the
/// first field of that name (of any kind), else a new empty mapping
/// appended.
fn lookup_create<'a>(map: &'a mut Node, name: &str) -> Option<&'a mut Node> {
    let i = match kyaml::field_index(map, name) {
        Some(i) => i + 1,
        None => {
            map.content.push(Node {
                kind: Kind::Scalar,
                value: name.into(),
                ..Node::default()
            });
            map.content.push(Node {
                kind: Kind::Mapping,
                ..Node::default()
            });
            map.content.len() - 1
        }
    };
    map.content.get_mut(i)
}

/// `FieldClearer{Name}`: the first field of that name removed.
fn clear(map: &mut Node, name: &str) {
    if let Some(i) = kyaml::field_index(map, name) {
        map.content.drain(i..(i + 2).min(map.content.len()));
    }
}

/// Sets each entry into `target` (the node `LookupCreate` found) with
/// `FieldSetter`: into a mapping; a null one takes nothing; any other
/// kind is `ErrorIfInvalid`'s error (at `path`).
fn set_entries(
    target: &mut Node,
    path: &str,
    entries: &BTreeMap<String, String>,
) -> Result<(), String> {
    if catalog::is_null(target) {
        return Ok(());
    }
    if target.kind != Kind::Mapping {
        return Err(wrong_kind(path, target));
    }
    for (k, v) in entries {
        catalog::set_field(target, k, string_node(v));
    }
    Ok(())
}

/// `RNode.SetAnnotations(m)` (`setMapInMetadata`): `metadata` found or
/// created, its first `annotations` removed, then the entries, sorted by
/// key, set into the next `annotations` (a new one at the end of
/// `metadata`).
fn set_annotations_map(item: &mut Node, m: &BTreeMap<String, String>) -> Result<(), String> {
    if catalog::is_null(item) {
        return Ok(());
    }
    if item.kind != Kind::Mapping {
        return Err(wrong_kind("", item));
    }
    let Some(md) = lookup_create(item, "metadata") else {
        return Ok(());
    };
    if catalog::is_null(md) {
        // kyaml's filters pass over a null node: nothing is set.
        return Ok(());
    }
    if md.kind != Kind::Mapping {
        return Err(wrong_kind("metadata", md));
    }
    clear(md, "annotations");
    if m.is_empty() {
        return Ok(());
    }
    match lookup_create(md, "annotations") {
        Some(a) => set_entries(a, "metadata.annotations", m),
        None => Ok(()),
    }
}

/// `RNode.SetDataMap(m)`: the first `data` removed, then the entries,
/// sorted by key, set into the next `data` (a new one at the end). An
/// error there is `log.Fatal`'s.
fn set_data_map(node: &mut Node, m: &BTreeMap<String, String>) -> Result<(), Failure> {
    if node.kind != Kind::Mapping {
        return Err(Failure::Crash(format!("{}\n", wrong_kind("", node))));
    }
    clear(node, "data");
    if m.is_empty() {
        return Ok(());
    }
    match lookup_create(node, "data") {
        Some(d) => set_entries(d, "data", m).map_err(|e| Failure::Crash(format!("{e}\n"))),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------
// The SDK's Kptfile v1 types (kpt-functions-sdk 632b30549de6,
// go/pkg/api/kptfile/v1/types.go): decoded strictly by yaml.v3, marshalled
// by kyaml's `yaml.Marshal`.

type StrMap = BTreeMap<String, String>;

#[derive(Debug, Default)]
struct KptFile {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    upstream: Option<Upstream>,
    upstream_lock: Option<UpstreamLock>,
    info: Option<PackageInfo>,
    pipeline: Option<Pipeline>,
    inventory: Option<Inventory>,
}

#[derive(Debug, Default)]
struct ObjectMeta {
    name: String,
    namespace: String,
    labels: Option<StrMap>,
    annotations: Option<StrMap>,
}

#[derive(Debug, Default)]
struct Upstream {
    kind: String,
    git: Option<Git>,
    update_strategy: String,
}

#[derive(Debug, Default)]
struct Git {
    repo: String,
    directory: String,
    reference: String,
}

#[derive(Debug, Default)]
struct UpstreamLock {
    kind: String,
    git: Option<GitLock>,
}

#[derive(Debug, Default)]
struct GitLock {
    repo: String,
    directory: String,
    reference: String,
    commit: String,
}

#[derive(Debug, Default)]
struct PackageInfo {
    site: String,
    emails: Option<Vec<String>>,
    license: String,
    license_file: String,
    description: String,
    keywords: Option<Vec<String>>,
    man: String,
}

#[derive(Debug, Default)]
struct Pipeline {
    mutators: Vec<Function>,
    validators: Vec<Function>,
}

#[derive(Debug, Default)]
struct Function {
    image: String,
    config_path: String,
    /// `nil` (absent, null) is not `{}`.
    config_map: Option<StrMap>,
}

#[derive(Debug, Default)]
struct Inventory {
    namespace: String,
    name: String,
    inventory_id: String,
    labels: Option<StrMap>,
    annotations: Option<StrMap>,
}

/// An error that ends the decode at once (yaml.v3's `failf`).
type Fatal = String;

/// A Go struct yaml.v3 decodes a mapping into.
trait Decode: Default {
    /// The type's name in yaml.v3's messages.
    const NAME: &'static str;
    /// Decodes `value` into the field `name`; false when there is none.
    fn field<'a>(
        &mut self,
        d: &mut Decoder<'a>,
        name: &str,
        value: &'a Node,
    ) -> Result<bool, Fatal>;
}

const STRING: &str = "string";
const ORIGIN_TYPE: &str = "v1.OriginType";

impl Decode for KptFile {
    const NAME: &'static str = "v1.KptFile";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "apiVersion" => d.string(v, STRING, &mut self.api_version),
            "kind" => d.string(v, STRING, &mut self.kind),
            "metadata" => d.structure(v, &mut self.metadata)?,
            "upstream" => d.pointer(v, &mut self.upstream)?,
            "upstreamLock" => d.pointer(v, &mut self.upstream_lock)?,
            "info" => d.pointer(v, &mut self.info)?,
            "pipeline" => d.pointer(v, &mut self.pipeline)?,
            "inventory" => d.pointer(v, &mut self.inventory)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for ObjectMeta {
    const NAME: &'static str = "v1.ObjectMeta";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "name" => d.string(v, STRING, &mut self.name),
            "namespace" => d.string(v, STRING, &mut self.namespace),
            "labels" => d.string_map(v, &mut self.labels)?,
            "annotations" => d.string_map(v, &mut self.annotations)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Upstream {
    const NAME: &'static str = "v1.Upstream";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "type" => d.string(v, ORIGIN_TYPE, &mut self.kind),
            "git" => d.pointer(v, &mut self.git)?,
            "updateStrategy" => d.string(v, "v1.UpdateStrategyType", &mut self.update_strategy),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Git {
    const NAME: &'static str = "v1.Git";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "repo" => d.string(v, STRING, &mut self.repo),
            "directory" => d.string(v, STRING, &mut self.directory),
            "ref" => d.string(v, STRING, &mut self.reference),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for UpstreamLock {
    const NAME: &'static str = "v1.UpstreamLock";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "type" => d.string(v, ORIGIN_TYPE, &mut self.kind),
            "git" => d.pointer(v, &mut self.git)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for GitLock {
    const NAME: &'static str = "v1.GitLock";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "repo" => d.string(v, STRING, &mut self.repo),
            "directory" => d.string(v, STRING, &mut self.directory),
            "ref" => d.string(v, STRING, &mut self.reference),
            "commit" => d.string(v, STRING, &mut self.commit),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for PackageInfo {
    const NAME: &'static str = "v1.PackageInfo";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "site" => d.string(v, STRING, &mut self.site),
            "emails" => d.strings(v, &mut self.emails),
            "license" => d.string(v, STRING, &mut self.license),
            "licenseFile" => d.string(v, STRING, &mut self.license_file),
            "description" => d.string(v, STRING, &mut self.description),
            "keywords" => d.strings(v, &mut self.keywords),
            "man" => d.string(v, STRING, &mut self.man),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Pipeline {
    const NAME: &'static str = "v1.Pipeline";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "mutators" => d.list(v, &mut self.mutators)?,
            "validators" => d.list(v, &mut self.validators)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Function {
    const NAME: &'static str = "v1.Function";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "image" => d.string(v, STRING, &mut self.image),
            "configPath" => d.string(v, STRING, &mut self.config_path),
            "configMap" => d.string_map(v, &mut self.config_map)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Inventory {
    const NAME: &'static str = "v1.Inventory";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "namespace" => d.string(v, STRING, &mut self.namespace),
            "name" => d.string(v, STRING, &mut self.name),
            "inventoryID" => d.string(v, STRING, &mut self.inventory_id),
            "labels" => d.string_map(v, &mut self.labels)?,
            "annotations" => d.string_map(v, &mut self.annotations)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// `util.DecodeKptfile(node.String())`: the item written out as kyaml
/// writes it, read again, and decoded strictly. `Err`: yaml.v3's error.
fn decode_kptfile(item: &Node) -> Result<KptFile, String> {
    let text = krm_yaml::emit::encode_node(item, true);
    let docs = krm_yaml::parse::parse(&text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Err("EOF".into());
    };
    let root = kyaml::content(doc);
    if has_alias(root) {
        // yaml.v3's refusal of alias cycles and bombs, before any alias
        // is followed here.
        krm_yaml::value::to_value(root).map_err(|e| e.to_string())?;
    }
    let mut d = Decoder::new(root);
    let mut kf = KptFile::default();
    d.structure(root, &mut kf)?;
    if d.errors.is_empty() {
        Ok(kf)
    } else {
        Err(format!(
            "yaml: unmarshal errors:\n  {}",
            d.errors.join("\n  ")
        ))
    }
}

fn has_alias(root: &Node) -> bool {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind == Kind::Alias {
            return true;
        }
        stack.extend(n.content.iter());
    }
    false
}

/// The most errors listed.
const MAX_ERRORS: usize = 10_000;

/// yaml.v3's decoder (`decode.go`), over the Kptfile's types.
struct Decoder<'a> {
    /// Each alias's node: the last anchor of its name before it.
    targets: HashMap<*const Node, &'a Node>,
    /// `d.terrors`.
    errors: Vec<String>,
}

impl<'a> Decoder<'a> {
    fn new(root: &'a Node) -> Decoder<'a> {
        let mut defined: HashMap<&'a str, &'a Node> = HashMap::new();
        let mut targets = HashMap::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if !n.anchor.is_empty() {
                defined.insert(n.anchor.as_str(), n);
            }
            if n.kind == Kind::Alias {
                if let Some(t) = defined.get(alias_name(n)) {
                    targets.insert(std::ptr::from_ref(n), *t);
                }
            }
            stack.extend(n.content.iter().rev());
        }
        Decoder {
            targets,
            errors: Vec::new(),
        }
    }

    fn push(&mut self, e: String) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        }
    }

    /// The node an alias stands for (`d.alias`).
    fn follow(&self, mut n: &'a Node) -> &'a Node {
        // Cycles were refused before; the bound only guards the loop.
        for _ in 0..=self.targets.len() {
            if n.kind != Kind::Alias {
                break;
            }
            match self.targets.get(&std::ptr::from_ref(n)) {
                Some(t) => n = t,
                None => break,
            }
        }
        n
    }

    /// `terror`: `line N: cannot unmarshal !!str `x` into T`.
    fn terror(&mut self, n: &Node, into: &str) {
        let tag = if n.tag.as_str().is_empty() {
            match n.kind {
                Kind::Mapping => "!!map",
                Kind::Sequence => "!!seq",
                _ => "!!str",
            }
        } else {
            n.tag.as_str()
        };
        let value = if tag == "!!seq" || tag == "!!map" {
            String::new()
        } else if n.value.len() > 10 {
            let mut cut = 7;
            while !n.value.is_char_boundary(cut) {
                cut -= 1;
            }
            format!(" `{}...`", n.value.get(..cut).unwrap_or(""))
        } else {
            format!(" `{}`", n.value)
        };
        self.push(format!(
            "line {}: cannot unmarshal {tag}{value} into {into}",
            n.line
        ));
    }

    /// `mapping`'s check for keys of the same kind and value, each
    /// repetition against each earlier one; false when there are any.
    fn unique_keys(&mut self, n: &Node) -> bool {
        let keys: Vec<&Node> = n.content.iter().step_by(2).collect();
        let mut groups: HashMap<(u8, &str), Vec<usize>> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            groups
                .entry((k.kind as u8, key_text(k)))
                .or_default()
                .push(i);
        }
        // Go's order (each key against the later ones), for the first
        // MAX_ERRORS pairs: each group's first pairs are its smallest.
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for g in groups.values().filter(|g| g.len() > 1) {
            let mut taken = 0;
            'group: for (a, i) in g.iter().enumerate() {
                for j in g.iter().skip(a + 1) {
                    if taken >= MAX_ERRORS {
                        break 'group;
                    }
                    pairs.push((*i, *j));
                    taken += 1;
                }
            }
        }
        if pairs.is_empty() {
            return true;
        }
        pairs.sort_unstable();
        for (i, j) in pairs.into_iter().take(MAX_ERRORS) {
            if let (Some(a), Some(b)) = (keys.get(i), keys.get(j)) {
                self.push(format!(
                    "line {}: mapping key {} already defined at line {}",
                    b.line,
                    catalog::quote(key_text(b)),
                    a.line
                ));
            }
        }
        false
    }

    /// A value into a Go string (`ty` its type's name): null leaves it.
    fn string(&mut self, n: &'a Node, ty: &str, out: &mut String) {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => {}
            Kind::Scalar => *out = n.value.to_string(),
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, ty);
                }
            }
            _ => self.terror(n, ty),
        }
    }

    /// A value into `[]string`: null is nil, null elements are left out.
    fn strings(&mut self, n: &'a Node, out: &mut Option<Vec<String>>) {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => *out = None,
            Kind::Sequence => {
                let mut v = Vec::with_capacity(n.content.len());
                for e in &n.content {
                    if catalog::is_null(self.follow(e)) {
                        continue;
                    }
                    let mut s = String::new();
                    self.string(e, STRING, &mut s);
                    v.push(s);
                }
                *out = Some(v);
            }
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, "[]string");
                }
            }
            _ => self.terror(n, "[]string"),
        }
    }

    /// A value into `map[string]string`: null is nil; a null value is "".
    fn string_map(&mut self, n: &'a Node, out: &mut Option<StrMap>) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => {
                *out = None;
                Ok(())
            }
            Kind::Mapping => {
                if !self.unique_keys(n) {
                    return Ok(());
                }
                let is_new = out.is_none();
                let map = out.get_or_insert_with(BTreeMap::new);
                self.map_entries(n, map, is_new)
            }
            _ => {
                self.terror(n, "map[string]string");
                Ok(())
            }
        }
    }

    fn map_entries(&mut self, n: &'a Node, map: &mut StrMap, is_new: bool) -> Result<(), Fatal> {
        for kv in n.content.chunks_exact(2) {
            let [k, v] = kv else { continue };
            if is_merge(k) {
                for m in self.merged(v)? {
                    if self.unique_keys(m) {
                        self.map_entries(m, map, false)?;
                    }
                }
                continue;
            }
            let Some(key) = self.key(k) else { continue };
            let value = self.follow(v);
            if catalog::is_null(value) {
                if is_new || !map.contains_key(&key) {
                    map.insert(key, String::new());
                }
                continue;
            }
            let mut s = String::new();
            let before = self.errors.len();
            self.string(value, STRING, &mut s);
            if self.errors.len() == before {
                map.insert(key, s);
            }
        }
        Ok(())
    }

    /// A key decoded into a string: `None` for null (skipped) and for
    /// collections (an error).
    fn key(&mut self, k: &'a Node) -> Option<String> {
        let k = self.follow(k);
        match k.kind {
            Kind::Scalar if catalog::is_null(k) => None,
            Kind::Scalar => Some(k.value.to_string()),
            Kind::Mapping => {
                if self.unique_keys(k) {
                    self.terror(k, STRING);
                }
                None
            }
            _ => {
                self.terror(k, STRING);
                None
            }
        }
    }

    /// The mappings a `<<` value merges (`d.merge`), in the order they
    /// are decoded (a list's from its end).
    fn merged(&self, v: &'a Node) -> Result<Vec<&'a Node>, Fatal> {
        const WANT_MAP: &str = "yaml: map merge requires map or sequence of maps as the value";
        let target = self.follow(v);
        match v.kind {
            Kind::Mapping => Ok(vec![v]),
            Kind::Alias if target.kind == Kind::Mapping => Ok(vec![target]),
            Kind::Sequence => v
                .content
                .iter()
                .rev()
                .map(|e| {
                    let t = self.follow(e);
                    if t.kind == Kind::Mapping {
                        Ok(t)
                    } else {
                        Err(WANT_MAP.to_owned())
                    }
                })
                .collect(),
            _ => Err(WANT_MAP.to_owned()),
        }
    }

    /// A value into a struct (`mappingStruct`): null leaves it.
    fn structure<T: Decode>(&mut self, n: &'a Node, out: &mut T) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => Ok(()),
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.fields(n, out)?;
                }
                Ok(())
            }
            _ => {
                self.terror(n, T::NAME);
                Ok(())
            }
        }
    }

    fn fields<T: Decode>(&mut self, n: &'a Node, out: &mut T) -> Result<(), Fatal> {
        for kv in n.content.chunks_exact(2) {
            let [k, v] = kv else { continue };
            if is_merge(k) {
                for m in self.merged(v)? {
                    if self.unique_keys(m) {
                        self.fields(m, out)?;
                    }
                }
                continue;
            }
            let Some(name) = self.key(k) else { continue };
            if !out.field(self, &name, v)? {
                self.push(format!(
                    "line {}: field {name} not found in type {}",
                    k.line,
                    T::NAME
                ));
            }
        }
        Ok(())
    }

    /// A value into a pointer to a struct: null is nil; otherwise the
    /// struct (made when nil) takes it.
    fn pointer<T: Decode>(&mut self, n: &'a Node, out: &mut Option<T>) -> Result<(), Fatal> {
        if catalog::is_null(self.follow(n)) {
            *out = None;
            return Ok(());
        }
        let t = out.get_or_insert_with(T::default);
        self.structure(n, t)
    }

    /// A value into a slice of structs: null is nil, null elements are
    /// left out.
    fn list<T: Decode>(&mut self, n: &'a Node, out: &mut Vec<T>) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => out.clear(),
            Kind::Sequence => {
                let mut v = Vec::with_capacity(n.content.len());
                for e in &n.content {
                    if catalog::is_null(self.follow(e)) {
                        continue;
                    }
                    let mut t = T::default();
                    self.structure(e, &mut t)?;
                    v.push(t);
                }
                *out = v;
            }
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, &format!("[]{}", T::NAME));
                }
            }
            _ => self.terror(n, &format!("[]{}", T::NAME)),
        }
        Ok(())
    }
}

/// The name an alias node gives its anchor.
fn alias_name(n: &Node) -> &str {
    if n.alias.is_empty() {
        &n.value
    } else {
        n.alias.as_str()
    }
}

/// What yaml.v3 compares keys by: an alias's name, anything else's value.
fn key_text(n: &Node) -> &str {
    if n.kind == Kind::Alias {
        alias_name(n)
    } else {
        &n.value
    }
}

/// `isMerge`: a plain `<<` key.
fn is_merge(k: &Node) -> bool {
    let tag = k.tag.as_str();
    k.kind == Kind::Scalar && k.value == "<<" && (tag.is_empty() || tag == "!" || tag == "!!merge")
}

// ---------------------------------------------------------------------------
// yaml.v3's `Marshal` of the types (kyaml's forked encoder).

/// A struct's fields, in the struct's order, `omitempty` ones left out.
#[derive(Default)]
struct Fields(Vec<Node>);

impl Fields {
    fn put(&mut self, name: &str, value: Node) {
        self.0.push(go_string(name));
        self.0.push(value);
    }
    fn string(mut self, name: &str, v: &str) -> Fields {
        if !v.is_empty() {
            self.put(name, go_string(v));
        }
        self
    }
    fn strings(mut self, name: &str, v: Option<&Vec<String>>) -> Fields {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            self.put(
                name,
                Node::sequence(v.iter().map(|s| go_string(s)).collect()),
            );
        }
        self
    }
    fn map(mut self, name: &str, v: Option<&StrMap>) -> Fields {
        if let Some(m) = v.filter(|m| !m.is_empty()) {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| go_key_order(a, b));
            let content = keys
                .into_iter()
                .flat_map(|k| [go_string(k), go_string(m.get(k).map_or("", String::as_str))])
                .collect();
            self.put(name, Node::mapping(content));
        }
        self
    }
    /// A pointer: any struct is written, `{}` too.
    fn pointer<T: Marshal>(mut self, name: &str, v: Option<&T>) -> Fields {
        if let Some(t) = v {
            self.put(name, t.marshal());
        }
        self
    }
    /// A struct value: left out when all its fields are.
    fn structure<T: Marshal>(mut self, name: &str, v: &T) -> Fields {
        let node = v.marshal();
        if !node.content.is_empty() {
            self.put(name, node);
        }
        self
    }
    fn list<T: Marshal>(mut self, name: &str, v: &[T]) -> Fields {
        if !v.is_empty() {
            self.put(
                name,
                Node::sequence(v.iter().map(Marshal::marshal).collect()),
            );
        }
        self
    }
    fn done(self) -> Node {
        Node::mapping(self.0)
    }
}

trait Marshal {
    fn marshal(&self) -> Node;
}

impl Marshal for KptFile {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("apiVersion", &self.api_version)
            .string("kind", &self.kind)
            .structure("metadata", &self.metadata)
            .pointer("upstream", self.upstream.as_ref())
            .pointer("upstreamLock", self.upstream_lock.as_ref())
            .pointer("info", self.info.as_ref())
            .pointer("pipeline", self.pipeline.as_ref())
            .pointer("inventory", self.inventory.as_ref())
            .done()
    }
}

impl Marshal for ObjectMeta {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("name", &self.name)
            .string("namespace", &self.namespace)
            .map("labels", self.labels.as_ref())
            .map("annotations", self.annotations.as_ref())
            .done()
    }
}

impl Marshal for Upstream {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("type", &self.kind)
            .pointer("git", self.git.as_ref())
            .string("updateStrategy", &self.update_strategy)
            .done()
    }
}

impl Marshal for Git {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("repo", &self.repo)
            .string("directory", &self.directory)
            .string("ref", &self.reference)
            .done()
    }
}

impl Marshal for UpstreamLock {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("type", &self.kind)
            .pointer("git", self.git.as_ref())
            .done()
    }
}

impl Marshal for GitLock {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("repo", &self.repo)
            .string("directory", &self.directory)
            .string("ref", &self.reference)
            .string("commit", &self.commit)
            .done()
    }
}

impl Marshal for PackageInfo {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("site", &self.site)
            .strings("emails", self.emails.as_ref())
            .string("license", &self.license)
            .string("licenseFile", &self.license_file)
            .string("description", &self.description)
            .strings("keywords", self.keywords.as_ref())
            .string("man", &self.man)
            .done()
    }
}

impl Marshal for Pipeline {
    fn marshal(&self) -> Node {
        Fields::default()
            .list("mutators", &self.mutators)
            .list("validators", &self.validators)
            .done()
    }
}

impl Marshal for Function {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("image", &self.image)
            .string("configPath", &self.config_path)
            .map("configMap", self.config_map.as_ref())
            .done()
    }
}

impl Marshal for Inventory {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("namespace", &self.namespace)
            .string("name", &self.name)
            .string("inventoryID", &self.inventory_id)
            .map("labels", self.labels.as_ref())
            .map("annotations", self.annotations.as_ref())
            .done()
    }
}
