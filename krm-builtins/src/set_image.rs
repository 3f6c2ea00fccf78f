//! `set-image`: the image of the containers of Pods and of the pod
//! templates of Deployments, StatefulSets, ReplicaSets, DaemonSets (and
//! PodTemplates, at `spec.template.spec`) that match `image.name` gets
//! `newName`, `newTag` or `digest`.
//!
//! Follows kptdev/krm-functions-catalog at commit
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/set-image/{main.go,transformer/images_transformer.go,
//! third_party/.../api/image/image.go}`, run by the function SDK
//! kptdev/krm-functions-sdk `go/fn` at 970f3e4cbc5a (the version its
//! go.mod pins: `AsMain`, `Run`, `runnerProcessor.config`, `KubeObject`,
//! `Context.Result*`), quirks included:
//!
//! - functionConfig: none or `{}` gives the info result
//!   "`FunctionConfig` is not given"; an object whose kind is `ConfigMap`
//!   or empty and whose version is `v1` or empty (the SDK's `IsGVK("",
//!   "v1", "ConfigMap")`, any group) gives its `data` (`name`, `newName`,
//!   `newTag`, `digest`; any other key fails with `ConfigMap has wrong
//!   field name KEY`); `fn.kpt.dev/v1alpha1 SetImage` (group and version
//!   may be left out) is decoded as the SDK decodes it (through JSON:
//!   field names match case-insensitively, `image` and `data`); any other
//!   kind fails with "unknown FunctionConfig `KIND`, expect SetImage".
//! - `name` is required, and one of `newName`, `newTag`, `digest`.
//! - The containers looked at are `containers` and `iniContainers` (the
//!   catalog's spelling: `initContainers` are not changed). An image
//!   matches when it is `name` (a Go regular expression, as the catalog
//!   builds it) with an optional `:tag` and `@sha256:digest`. The new
//!   value is a plain string with the old value's comments.
//! - `additionalImageFields` (kustomize FieldSpecs: `group`, `version`,
//!   `kind`, `path`, `create`; `custom/custom.go`) then runs kustomize's
//!   image filter (`api/filters/imagetag`, `fieldspec`, kyaml's
//!   `PathSplitter` and `PathGetter`, api and kyaml v0.19.0) over each
//!   item but CRDs whose group, version and kind match (an empty one
//!   matches all): the path is split at `/` (`\/` does not split, a
//!   leading `/` is dropped), each element of a list on the way is walked,
//!   `[]` only marks a list (a null field so marked becomes `[]`), and a
//!   matching image at the end gets kustomize's new name (a new tag or
//!   digest replaces both the tag and the digest, `newName` keeps the
//!   `:`, the config's `image.tagSuffix` is read here only), with the
//!   `image` map of the config (not `data`; no `image` field fails with
//!   the SDK's "unmatched field type"). Every value set is counted, also
//!   one set to what it was (so a container also listed by a FieldSpec is
//!   counted twice). `create` is never acted on. A path the filter cannot
//!   walk gives the error result `considering field 'PATH' of object
//!   KIND.VERSION.GROUP/NAME.NAMESPACE: ...` (kustomize's messages) on
//!   that item, which is left as it was (values set before the error
//!   still counted), and the function goes on (exit 0).
//! - Results: one info result `summary: updated a total of N image(s)`.
//! - A failure (`ResultErrAndDie`, or the SDK's "unmatched field type"
//!   when a field has the wrong kind) leaves an error result with the
//!   message and one with `function is terminated...`, and the stderr
//!   `failed to evaluate function: ...` (no newline), exit 1.
//! - As the SDK writes its output, the items are sorted by
//!   `apiVersion kind namespace name` (also after a failure).
//!
//! Departures (each where the Go binary crashes or does something no
//! caller can rely on):
//! - `additionalImageFields` (deprecated in the catalog) runs on a JSON
//!   copy of every item (keys sorted, comments dropped, aliases expanded,
//!   scalars as JSON writes them), which kpt then gives back the input's
//!   comments and field order. Here the items are updated in place: the
//!   new value keeps the old one's style and comments and nothing else of
//!   the item changes. So an alias on a path is not followed, a non-string
//!   image is matched by its YAML text (not its JSON one), and the node
//!   contents in a "wrong node kind" error are written as JSON flow YAML
//!   on one line (yaml.v3 would wrap past 80 columns).
//! - Where the Go binary panics (a pod template without `spec`, an image
//!   name that is not a valid regular expression) the failure is
//!   `panic: ...` on stderr with no results.
//! - A field the SDK would read as a mapping but that is a sequence is
//!   read as empty (the SDK looks into it pair by pair, or exits).
//! - The SDK's `sort.Sort` is not stable for items of equal identity;
//!   here the sort is stable.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;
use crate::sdk;
use image::split;
use object::{
    get_field, get_field_mut, get_string, json_fields, json_string, object_result, unmatched, Die,
};

/// The desired image.
#[derive(Debug, Default, Clone)]
struct Image {
    name: String,
    new_name: String,
    new_tag: String,
    digest: String,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let before = rl.results.len();
    let outcome = process(rl, ctx);
    match outcome {
        Ok(()) => {
            sdk::sort_items(rl);
            Ok(())
        }
        Err(Die::Cancelled) => Err(Stop::Cancelled),
        Err(Die::Recovered(message)) => {
            rl.results.push(FnResult::error(message.as_str()));
            sdk::sort_items(rl);
            Err(Stop::Failed(format!(
                "failed to evaluate function: {message}"
            )))
        }
        Err(Die::Early(message)) => {
            rl.results.truncate(before);
            Err(Stop::Failed(format!(
                "failed to evaluate function: {message}"
            )))
        }
        Err(Die::Crash(message)) => {
            rl.results.truncate(before);
            Err(Stop::Failed(format!("panic: {message}")))
        }
    }
}

/// `ctx.ResultErrAndDie(message, o)`: the error result; the SDK adds the
/// `function is terminated` one as it recovers.
fn result_err_and_die(results: &mut Vec<FnResult>, message: &str, o: Option<&Node>) -> Die {
    match o {
        None => {
            results.push(FnResult::error(message));
            Die::Recovered(format!("function is terminated: {message}"))
        }
        Some(o) => {
            results.push(object_result(message, o));
            Die::Recovered(format!(
                "function is terminated by Resource(apiVersion={}, kind={}, namespace={}, name={}): {message}",
                get_string(o, &["apiVersion"]),
                get_string(o, &["kind"]),
                get_string(o, &["metadata", "namespace"]),
                get_string(o, &["metadata", "name"]),
            ))
        }
    }
}

fn variant_name(n: &Node) -> &'static str {
    match n.kind {
        Kind::Mapping => "*internal.MapVariant",
        Kind::Sequence => "*internal.sliceVariant",
        _ => "*internal.scalarVariant",
    }
}

fn process(rl: &mut ResourceList, ctx: &Context) -> Result<(), Die> {
    // `ParseResourceList`.
    if let Some(fc) = &rl.function_config {
        let fc = kyaml::content(fc);
        if fc.kind != Kind::Mapping {
            return Err(Die::Early(format!(
                "failed when tried to get functionConfig: wrong type, got: {}",
                variant_name(fc)
            )));
        }
    }
    if let Some(bad) = rl.items.iter().find(|i| i.kind != Kind::Mapping) {
        return Err(Die::Early(format!(
            "failed to extract objects from items: unhandled node kind {}",
            bad.kind as u8
        )));
    }
    let config = rl.function_config.as_ref().map(kyaml::content);
    let mut image = Image::default();
    let mut data: Option<Vec<(String, String)>> = None;
    let mut additional = false;
    // `runnerProcessor.config`.
    match config {
        None => rl
            .results
            .push(FnResult::info("`FunctionConfig` is not given")),
        Some(c) if c.content.is_empty() => rl
            .results
            .push(FnResult::info("`FunctionConfig` is not given")),
        Some(c) if is_gvk(c, "", "v1", "ConfigMap") => {
            data = config_map_data(c)?;
        }
        Some(c) if is_gvk(c, "fn.kpt.dev", "v1alpha1", "SetImage") => {
            let decoded = decode_set_image(c)?;
            image = decoded.0;
            data = decoded.1;
            additional = decoded.2;
        }
        Some(c) => {
            let message = format!(
                "unknown FunctionConfig `{}`, expect SetImage",
                get_string(c, &["kind"])
            );
            return Err(result_err_and_die(&mut rl.results, &message, Some(c)));
        }
    }
    // `configDefaultData`, `validateInput`.
    for (k, v) in data.unwrap_or_default() {
        match k.as_str() {
            "name" => image.name = v,
            "newName" => image.new_name = v,
            "newTag" => image.new_tag = v,
            "digest" => image.digest = v,
            _ => {
                let message = format!("ConfigMap has wrong field name {k}");
                return Err(result_err_and_die(&mut rl.results, &message, None));
            }
        }
    }
    if image.name.is_empty() {
        return Err(result_err_and_die(
            &mut rl.results,
            "must specify `name`",
            None,
        ));
    }
    if image.new_name.is_empty() && image.new_tag.is_empty() && image.digest.is_empty() {
        return Err(result_err_and_die(
            &mut rl.results,
            "must specify one of `newName`, `newTag`, or `digest`",
            None,
        ));
    }
    let pattern = regex::Regex::new(&format!(
        "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
        image.name
    ))
    .ok();
    let mut updater = Updater {
        image: &image,
        pattern,
        count: 0,
    };
    for item in rl.items.iter_mut() {
        ctx.check().map_err(|_| Die::Cancelled)?;
        let kind = get_string(item, &["kind"]).to_owned();
        match kind.as_str() {
            "Pod" => {
                if let Some(spec) = get_field_mut(item, "spec") {
                    updater.update_pod(spec)?;
                }
            }
            "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "PodTemplate" => {
                let Some(template) =
                    get_field_mut(item, "spec").and_then(|s| get_field_mut(s, "template"))
                else {
                    continue;
                };
                match get_field_mut(template, "spec") {
                    Some(pod) => updater.update_pod(pod)?,
                    None => {
                        return Err(Die::Crash(
                            "runtime error: invalid memory address or nil pointer dereference"
                                .to_owned(),
                        ))
                    }
                }
            }
            _ => {}
        }
    }
    if additional {
        if let Some(c) = config {
            fields::run(c, &mut rl.items, &mut rl.results, &mut updater.count, ctx)?;
        }
    }
    rl.results.push(FnResult::info(format!(
        "summary: updated a total of {} image(s)",
        updater.count
    )));
    Ok(())
}

/// The SDK's `KubeObject.IsGVK`: an empty part on either side matches.
fn is_gvk(o: &Node, group: &str, version: &str, kind: &str) -> bool {
    let api = get_string(o, &["apiVersion"]);
    let (g, v) = api.split_once('/').unwrap_or(("", api));
    let k = get_string(o, &["kind"]);
    !((!k.is_empty() && !kind.is_empty() && k != kind)
        || (!g.is_empty() && !group.is_empty() && g != group)
        || (!v.is_empty() && !version.is_empty() && v != version))
}

/// `NestedStringMapOrDie("data")`: yaml.v3 decoding `data` into a
/// `map[string]string` (any scalar is its text, null is "").
fn config_map_data(c: &Node) -> Result<Option<Vec<(String, String)>>, Die> {
    let Some(data) = get_field(c, "data") else {
        return Ok(None);
    };
    if data.kind != Kind::Mapping {
        return Err(unmatched("data"));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for kv in data.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        if k.kind != Kind::Scalar || v.kind != Kind::Scalar {
            return Err(unmatched("data"));
        }
        let value = if v.tag == kyaml::NULL_TAG {
            String::new()
        } else {
            v.value.to_string()
        };
        let key = if k.tag == kyaml::NULL_TAG {
            String::new()
        } else {
            k.value.to_string()
        };
        match out.iter_mut().find(|(ok, _)| *ok == key) {
            Some(e) => e.1 = value,
            None => out.push((key, value)),
        }
    }
    Ok(Some(out))
}

/// `o.AsOrDie(&SetImage{})`: the image, the data, and whether
/// `additionalImageFields` is set (not null).
type Decoded = (Image, Option<Vec<(String, String)>>, bool);

fn decode_set_image(c: &Node) -> Result<Decoded, Die> {
    let mut image = Image::default();
    let mut data = None;
    let mut additional = false;
    for (k, v) in json_fields(c) {
        match k.to_lowercase().as_str() {
            "image" => match v.kind {
                Kind::Scalar if v.tag == kyaml::NULL_TAG => {}
                Kind::Mapping => {
                    for (ik, iv) in json_fields(v) {
                        let slot = match ik.to_lowercase().as_str() {
                            "name" => &mut image.name,
                            "newname" => &mut image.new_name,
                            "newtag" => &mut image.new_tag,
                            "digest" => &mut image.digest,
                            _ => continue,
                        };
                        if let Some(s) = json_string(iv)? {
                            *slot = s;
                        }
                    }
                }
                _ => return Err(unmatched("")),
            },
            "data" => match v.kind {
                Kind::Scalar if v.tag == kyaml::NULL_TAG => {}
                Kind::Mapping => {
                    let mut out: Vec<(String, String)> = data.take().unwrap_or_default();
                    for (dk, dv) in json_fields(v) {
                        let value = json_string(dv)?.unwrap_or_default();
                        match out.iter_mut().find(|(ok, _)| *ok == dk) {
                            Some(e) => e.1 = value,
                            None => out.push((dk, value)),
                        }
                    }
                    data = Some(out);
                }
                _ => return Err(unmatched("")),
            },
            "additionalimagefields" => match v.kind {
                Kind::Scalar if v.tag == kyaml::NULL_TAG => additional = false,
                Kind::Sequence => {
                    for spec in &v.content {
                        fields::decode_spec(spec)?;
                    }
                    additional = true;
                }
                _ => return Err(unmatched("")),
            },
            _ => {}
        }
    }
    Ok((image, data, additional))
}

struct Updater<'a> {
    image: &'a Image,
    pattern: Option<regex::Regex>,
    count: usize,
}

impl Updater<'_> {
    /// `updateContainerImages`.
    fn update_pod(&mut self, pod: &mut Node) -> Result<(), Die> {
        for field in ["iniContainers", "containers"] {
            let Some(list) = get_field_mut(pod, field) else {
                continue;
            };
            if list.kind != Kind::Sequence || list.content.iter().any(|c| c.kind != Kind::Mapping) {
                return Err(unmatched(field));
            }
            for container in list.content.iter_mut() {
                self.update_container(container)?;
            }
        }
        Ok(())
    }

    fn update_container(&mut self, container: &mut Node) -> Result<(), Die> {
        let old = match get_field(container, "image") {
            None => String::new(),
            Some(n) if n.kind == Kind::Scalar && n.tag == "!!str" => n.value.to_string(),
            Some(_) => return Err(unmatched("image")),
        };
        let Some(pattern) = &self.pattern else {
            return Err(Die::Crash(
                "runtime error: invalid memory address or nil pointer dereference".to_owned(),
            ));
        };
        if !pattern.is_match(&old) {
            return Ok(());
        }
        let new = new_image_name(&old, self.image);
        if new == old {
            return Ok(());
        }
        // `SetNestedString`: a new string node with the old comments.
        let mut value = Node::string(new.as_str());
        match get_field_mut(container, "image") {
            Some(slot) => {
                value.head_comment = std::mem::take(&mut slot.head_comment);
                value.line_comment = std::mem::take(&mut slot.line_comment);
                value.foot_comment = std::mem::take(&mut slot.foot_comment);
                *slot = value;
            }
            None => {
                container.content.push(Node::string("image"));
                container.content.push(value);
            }
        }
        self.count += 1;
        Ok(())
    }
}

/// `getNewImageName`, as the catalog writes it: `image.Split` returns
/// the tag and digest without their `:` and `@`, and only a new tag or
/// digest gets one back, so `newName` alone on `nginx:1.0` gives
/// `NEWNAME1.0` and on `nginx@sha256:x` gives `NEWNAMEsha256:x` (the
/// catalog's results; kept).
fn new_image_name(old: &str, image: &Image) -> String {
    let (name, tag, digest) = split(old);
    let mut name = name.to_owned();
    let mut tag = tag.to_owned();
    if !image.new_name.is_empty() {
        name.clone_from(&image.new_name);
    }
    if !image.new_tag.is_empty() {
        tag = format!(":{}", image.new_tag);
    }
    if !image.digest.is_empty() {
        tag = format!("@{}", image.digest);
    }
    if tag.is_empty() {
        name + digest
    } else {
        name + &tag
    }
}

mod fields;
mod image;
mod object;

#[cfg(test)]
mod tests;
