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

use std::collections::BTreeMap;

use krm_yaml::package::kyaml;
use krm_yaml::Node;

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};

mod decode;
mod kptfile;
mod marshal;
mod rnode;
#[cfg(test)]
mod tests;

use decode::decode_kptfile;
use kptfile::{Function, KptFile, Pipeline};
use marshal::Marshal;
use rnode::{
    data_map, get_annotations, map_field_value, path_of, set_annotations_map, set_data_map,
    unwritable,
};

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
