//! `set-labels`: sets labels on every resource that is not local config
//! (`metadata.labels`), and on the label fields that must follow them:
//! Service/ReplicationController `spec.selector`, the workload kinds'
//! `spec.selector.matchLabels`, pod templates (`spec.template.metadata`),
//! a CronJob's job template, a StatefulSet's volume claim templates, a
//! NetworkPolicy's pod selectors, and a pod spec's
//! topologySpreadConstraints and pod (anti-)affinity label selectors.
//!
//! Follows kptdev/krm-functions-catalog at commit 76fe3817f949
//! (`functions/go/set-labels/setlabels/transformer.go`, `run.go`), run by
//! kpt's function SDK at afe329cf801e (`go/fn`: `runnerProcessor`,
//! `AsMain`, `KubeObject`/`SubObject`), quirks included:
//!
//! - config: a ConfigMap (its `data` are the labels; values as yaml.v3
//!   reads a scalar into a string, others dropped), `fn.kpt.dev SetLabels`
//!   (`labels`), the `function-input` ConfigMap. No config, or an empty
//!   `function-input`: "`FunctionConfig` is not given" and then, when there
//!   are resources, exit 1 ("error: function failure"); a config with no
//!   labels: a warning.
//! - a label is set where it differs, or is missing and the field is one
//!   the function creates; the count in "set N labels in total" counts
//!   every label at every field visited, changed or not.
//! - a value is written as a new plain string (kept comments, not kept
//!   quotes); new fields are appended.
//! - the affinity selectors are read from `affinity.*DuringScheduling...`
//!   (as the catalog reads them, not from `podAffinity`), only when
//!   `podAffinity` or `podAntiAffinity` is there, once for each.
//! - a field of another type is an error result (the SDK's "unmatched
//!   field type") and exit 1; a CronJob's `jobTemplate` without `spec` is
//!   a nil dereference in the binary (a Go panic, exit 2): here
//!   `Stop::Failed` with the panic's first line.
//! - the items are written sorted by apiVersion, kind, namespace and name
//!   (the SDK's `ToYAML`).
//!
//! Releases: answers as v0.2.0, v0.2.1 and master, whatever
//! [`Context::release`] names (v0.2.0 → v0.2.1 only rebuilt it with newer
//! libraries and Go; master is v0.2.1). The v0.1.x releases (kustomize's
//! label transformer) are not reproduced.
//!
//! Departures: `SetLabels` is decoded from the JSON of yaml.v3's reading
//! of the config; where that reading is not the label's text, this is
//! not modelled: a value yaml.v3 reads as a timestamp (`2001-12-14`) or
//! `!!binary` becomes a string there (the timestamp in RFC 3339), an
//! error here; a key given twice fails there (`mapping key "a" already
//! defined`), takes the last value here.

use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;
use crate::sdk::{self, Got};

#[cfg(test)]
mod tests;

/// Why an item's walk stopped.
enum Stopped {
    /// An error result for this item (the walk goes on with the next).
    Result(String),
    /// The Go binary panics.
    Panic(String),
    Cancelled,
}

/// Where a sub-object is, for the SDK's error message.
#[derive(Clone)]
struct At {
    group_version: String,
    kind: String,
    path: String,
}

impl At {
    fn child(&self, key: &str) -> At {
        At {
            path: format!("{}.{key}", self.path),
            ..self.clone()
        }
    }
    /// A slice element: the SDK forgets where it is.
    fn element() -> At {
        At {
            group_version: String::new(),
            kind: String::new(),
            path: String::new(),
        }
    }
    fn unmatched(&self, fields: &[&str], data_type: &str) -> String {
        format!(
            "Resource(apiVersion={}, kind={}) has unmatched field type \"{data_type}\" in fieldpath {}.{}",
            self.group_version,
            self.kind,
            self.path,
            fields.join(".")
        )
    }
}

struct Labels {
    /// Sorted by key.
    labels: Vec<(String, String)>,
    count: usize,
}

const NIL_DEREF: &str = "runtime error: invalid memory address or nil pointer dereference";

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    sdk::check_input(rl)?;
    let outcome = process(rl, ctx);
    match outcome {
        Ok(true) => {
            sdk::sort_items(rl);
            Ok(())
        }
        Ok(false) => {
            sdk::sort_items(rl);
            Err(sdk::failed("error: function failure"))
        }
        Err(Stopped::Panic(msg)) => Err(Stop::Failed(format!("panic: {msg}"))),
        Err(Stopped::Result(msg)) => Err(Stop::Failed(msg)),
        Err(Stopped::Cancelled) => Err(Stop::Cancelled),
    }
}

/// `runnerProcessor.Process` and `SetLabels.Run`: whether it passed.
fn process(rl: &mut ResourceList, ctx: &Context) -> Result<bool, Stopped> {
    let fc = rl.function_config.clone();
    let fc_ref = fc.as_ref();
    let mut labels: Vec<(String, String)> = Vec::new();
    if sdk::config_is_empty(fc_ref) || fc_ref.is_some_and(empty_function_input) {
        rl.results
            .push(FnResult::info("`FunctionConfig` is not given"));
    } else if let Some(fc) = fc_ref {
        match read_config(fc) {
            Ok(l) => labels = l,
            Err(msg) => {
                rl.results.push(FnResult::error(msg));
                return Ok(false);
            }
        }
    }
    let objects: Vec<usize> = (0..rl.items.len())
        .filter(|&i| rl.items.get(i).is_some_and(|o| !sdk::is_local_config(o)))
        .collect();
    if objects.is_empty() {
        rl.results.push(FnResult::info("no input resources"));
        return Ok(true);
    }
    if fc_ref.is_none_or(empty_fn_config) {
        return Ok(false);
    }
    if labels.is_empty() {
        rl.results.push(FnResult::warning(
            "no `labels` arguments are given in FunctionConfig",
        ));
        return Ok(true);
    }
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    let mut p = Labels { labels, count: 0 };
    let mut failed = false;
    for i in objects {
        ctx.check().map_err(|_| Stopped::Cancelled)?;
        let Some(o) = rl.items.get_mut(i) else {
            continue;
        };
        match p.object(o) {
            Ok(()) => {}
            Err(Stopped::Result(msg)) => {
                rl.results.push(FnResult::error(msg));
                failed = true;
            }
            Err(panic) => return Err(panic),
        }
    }
    rl.results
        .push(FnResult::info(format!("set {} labels in total", p.count)));
    Ok(!failed)
}

/// The SDK's `EmptyFunctionConfig`: the `function-input` ConfigMap with
/// an empty `data` mapping.
fn empty_function_input(o: &Node) -> bool {
    let Got::Found(data) = sdk::get(o, &["data"]) else {
        return false;
    };
    data.kind == Kind::Mapping
        && data.content.is_empty()
        && sdk::kind(o) == "ConfigMap"
        && sdk::name(o) == "function-input"
}

/// The catalog's `EmptyfnConfig`.
fn empty_fn_config(o: &Node) -> bool {
    let (kind, name) = (sdk::kind(o), sdk::name(o));
    if kind == "ConfigMap" && name == "function-input" {
        return match sdk::get(o, &["data"]) {
            Got::Found(d) if d.kind == Kind::Mapping => d.content.is_empty(),
            _ => true,
        };
    }
    kind.is_empty() && name.is_empty()
}

/// `schema.ParseGroupVersion`: `None` for more than one `/`.
fn parse_gv(api_version: &str) -> Option<(&str, &str)> {
    match api_version.matches('/').count() {
        0 => Some(("", api_version)),
        1 => api_version.split_once('/'),
        _ => None,
    }
}

/// `KubeObject.GroupVersionKind` (all empty when apiVersion does not
/// parse).
fn gvk(o: &Node) -> (String, String, String) {
    let av = sdk::api_version(o);
    match parse_gv(&av) {
        Some((g, v)) => (g.to_owned(), v.to_owned(), sdk::kind(o)),
        None => Default::default(),
    }
}

/// `KubeObject.IsGVK` of this SDK version.
fn is_gvk(o: &Node, group: &str, version: &str, kind: &str) -> bool {
    let (g, v, k) = gvk(o);
    let differ = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
    !(differ(&k, kind) || differ(&g, group) || differ(&v, version))
}

/// The error text of a config the SDK cannot decode into `SetLabels`
/// (through JSON), for a value of this node.
fn json_kind(n: &Node) -> &'static str {
    match n.kind {
        Kind::Mapping => "object",
        Kind::Sequence => "array",
        _ => match n.tag.as_str() {
            "!!int" | "!!float" => "number",
            "!!bool" => "bool",
            _ => "string",
        },
    }
}

/// `runnerProcessor.config`: the labels, or the error result's message.
fn read_config(o: &Node) -> Result<Vec<(String, String)>, String> {
    let av = sdk::api_version(o);
    let group = parse_gv(&av).map_or("", |gv| gv.0);
    let kind = if parse_gv(&av).is_some() {
        sdk::kind(o)
    } else {
        String::new()
    };
    if group.is_empty() && kind == "ConfigMap" {
        return match sdk::get(o, &["data"]) {
            Got::Missing => Ok(Vec::new()),
            Got::Found(d) if d.kind == Kind::Mapping => {
                // yaml.v3 into map[string]string: scalars by their text
                // (null as ""); other values are dropped.
                let mut out: Vec<(String, String)> = Vec::new();
                for kv in d.content.chunks_exact(2) {
                    let [k, v] = kv else { continue };
                    if k.kind != Kind::Scalar || v.kind != Kind::Scalar {
                        continue;
                    }
                    let value = if v.tag == "!!null" {
                        String::new()
                    } else {
                        v.value.to_string()
                    };
                    match out.iter_mut().find(|e| e.0 == k.value.as_str()) {
                        Some(e) => e.1 = value,
                        None => out.push((k.value.to_string(), value)),
                    }
                }
                Ok(out)
            }
            _ => Err(config_at(o).unmatched(&["data"], "map[string]string")),
        };
    }
    if group == "fn.kpt.dev" && kind == "SetLabels" {
        let prefix =
            "unable to convert object to *setlabels.SetLabels with error: json: cannot unmarshal";
        return match sdk::get(o, &["labels"]) {
            Got::Missing => Ok(Vec::new()),
            Got::Found(l) if l.kind == Kind::Scalar && l.tag == "!!null" => Ok(Vec::new()),
            Got::Found(l) if l.kind == Kind::Mapping => {
                let mut out: Vec<(String, String)> = Vec::new();
                // The JSON Go decodes is `json.Marshal` of a map: its keys
                // sorted. So the error is the first bad value's in key
                // order, and names the map field, not the key
                // (`encoding/json` keeps no path inside a map).
                let mut first_bad: Option<(&str, &Node)> = None;
                for kv in l.content.chunks_exact(2) {
                    let [k, v] = kv else { continue };
                    let value = match (v.kind, v.tag.as_str()) {
                        (Kind::Scalar, "!!null") => String::new(),
                        (Kind::Scalar, "!!str") => v.value.to_string(),
                        _ => {
                            if first_bad.is_none_or(|(f, _)| k.value.as_str() < f) {
                                first_bad = Some((k.value.as_str(), v));
                            }
                            continue;
                        }
                    };
                    match out.iter_mut().find(|e| e.0 == k.value.as_str()) {
                        Some(e) => e.1 = value,
                        None => out.push((k.value.to_string(), value)),
                    }
                }
                match first_bad {
                    Some((_, v)) => Err(format!(
                        "{prefix} {} into Go struct field SetLabels.labels of type string",
                        json_kind(v)
                    )),
                    None => Ok(out),
                }
            }
            Got::Found(l) => Err(format!(
                "{prefix} {} into Go struct field SetLabels.labels of type map[string]string",
                json_kind(l)
            )),
            Got::Wrong => Ok(Vec::new()),
        };
    }
    let group_kind = if group.is_empty() {
        kind.clone()
    } else {
        format!("{kind}.{group}")
    };
    Err(format!(
        "unknown FunctionConfig `{group_kind}`, expect `SetLabels.fn.kpt.dev` or `ConfigMap.v1`"
    ))
}

/// The SDK's `parentGVK` of a KubeObject: its top-level `group`,
/// `version` and `kind` fields (not `apiVersion`).
fn config_at(o: &Node) -> At {
    let (g, v, k) = (
        sdk::get_string(o, &["group"]).0,
        sdk::get_string(o, &["version"]).0,
        sdk::get_string(o, &["kind"]).0,
    );
    At {
        group_version: if g.is_empty() { v } else { format!("{g}/{v}") },
        kind: k,
        path: String::new(),
    }
}

impl Labels {
    fn object(&mut self, o: &mut Node) -> Result<(), Stopped> {
        let at = config_at(o);
        self.update(Some(o), &at, &["metadata", "labels"], true)?;
        // setLabelsInSelector.
        if is_gvk(o, "", "v1", "Service") || is_gvk(o, "", "v1", "ReplicationController") {
            self.update(Some(o), &at, &["spec", "selector"], true)?;
        }
        let create = if ["Deployment", "ReplicaSet", "DaemonSet"]
            .iter()
            .any(|k| is_gvk(o, "", "", k))
            || is_gvk(o, "apps", "", "StatefulSet")
        {
            Some(true)
        } else if is_gvk(o, "batch", "", "Job") || is_gvk(o, "policy", "", "PodDisruptionBudget") {
            Some(false)
        } else {
            None
        };
        if let Some(create) = create {
            self.update(Some(o), &at, &["spec", "selector", "matchLabels"], create)?;
        }
        let network_policy = is_gvk(o, "networking.k8s.io", "", "NetworkPolicy");
        if network_policy {
            self.update(Some(o), &at, &["spec", "podSelector", "matchLabels"], false)?;
        }
        let pod_spec = is_gvk(o, "", "v1", "ReplicationController")
            || ["Deployment", "ReplicaSet", "DaemonSet"]
                .iter()
                .any(|k| is_gvk(o, "", "", k))
            || is_gvk(o, "apps", "", "StatefulSet")
            || is_gvk(o, "batch", "", "Job");
        let cron_job = is_gvk(o, "batch", "", "CronJob");
        let stateful_set = is_gvk(o, "apps", "", "StatefulSet");
        let Some(spec) = sdk::get_mut(o, "spec") else {
            return Ok(());
        };
        let spec_at = at.child("spec");
        if pod_spec {
            let template = sdk::get_mut(spec, "template");
            if let Err(e) = self.pod(template, &spec_at.child("template")) {
                return match e {
                    // The catalog returns nil here: the rest is skipped.
                    Stopped::Result(_) => Ok(()),
                    panic => Err(panic),
                };
            }
        }
        let Some(spec) = sdk::get_mut(o, "spec") else {
            return Ok(());
        };
        if cron_job {
            let job_at = spec_at.child("jobTemplate");
            if let Some(job) = sdk::get_mut(spec, "jobTemplate") {
                self.update(Some(job), &job_at, &["metadata", "labels"], true)?;
                let job_spec = sdk::get_mut(job, "spec");
                let Some(job_spec) = job_spec else {
                    // `spec.GetMap("template")` on a nil SubObject.
                    return Err(Stopped::Panic(NIL_DEREF.into()));
                };
                let job_spec_at = job_at.child("spec");
                self.update(
                    Some(job_spec),
                    &job_spec_at,
                    &["selector", "matchLabels"],
                    false,
                )?;
                let pod = sdk::get_mut(job_spec, "template");
                self.pod(pod, &job_spec_at.child("template"))?;
            }
        }
        let Some(spec) = sdk::get_mut(o, "spec") else {
            return Ok(());
        };
        if stateful_set {
            // NestedSlice: a sequence of mappings, or an error.
            match sdk::get(spec, &["volumeClaimTemplates"]) {
                Got::Found(v) if v.kind != Kind::Sequence => {
                    return Err(Stopped::Result(
                        spec_at.unmatched(&["volumeClaimTemplates"], "struct {}"),
                    ));
                }
                Got::Found(v) => {
                    if let Some(bad) = v.content.iter().find(|e| e.kind != Kind::Mapping) {
                        return Err(Stopped::Result(format!(
                            "unhandled node kind {}",
                            bad.kind as u8
                        )));
                    }
                }
                _ => {}
            }
            if let Some(v) = sdk::get_mut(spec, "volumeClaimTemplates") {
                for volume in &mut v.content {
                    let el = At::element();
                    self.update(Some(volume), &el, &["metadata", "labels"], true)?;
                    self.update(Some(volume), &el, &["selector", "matchLabels"], false)?;
                }
            }
        }
        if network_policy {
            for (rules, peers) in [("ingress", "from"), ("egress", "to")] {
                for rule in slice(sdk::get_mut(spec, rules)) {
                    for peer in slice(sdk::get_mut(rule, peers)) {
                        self.update(
                            Some(peer),
                            &At::element(),
                            &["podSelector", "matchLabels"],
                            false,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// `setLabelsInPod`.
    fn pod(&mut self, pod: Option<&mut Node>, at: &At) -> Result<(), Stopped> {
        let Some(pod) = pod else {
            return Ok(());
        };
        self.update(Some(pod), at, &["metadata", "labels"], true)?;
        let Some(spec) = sdk::get_mut(pod, "spec") else {
            return Ok(());
        };
        let el = At::element();
        for c in slice(sdk::get_mut(spec, "topologySpreadConstraints")) {
            self.update(Some(c), &el, &["labelSelector", "matchLabels"], false)?;
        }
        let Some(affinity) = sdk::get_mut(spec, "affinity") else {
            return Ok(());
        };
        for aff in ["podAffinity", "podAntiAffinity"] {
            if sdk::value_index(affinity, aff).is_none() {
                continue;
            }
            for term in slice(sdk::get_mut(
                affinity,
                "preferredDuringSchedulingIgnoredDuringExecution",
            )) {
                if let Some(t) = sdk::get_mut(term, "podAffinityTerm") {
                    self.update(
                        Some(t),
                        &At::element().child("podAffinityTerm"),
                        &["labelSelector", "matchLabels"],
                        false,
                    )?;
                }
            }
            for term in slice(sdk::get_mut(
                affinity,
                "requiredDuringSchedulingIgnoredDuringExecution",
            )) {
                self.update(Some(term), &el, &["labelSelector", "matchLabels"], false)?;
            }
        }
        Ok(())
    }

    /// `updateLabels`.
    fn update(
        &mut self,
        o: Option<&mut Node>,
        at: &At,
        path: &[&str],
        create: bool,
    ) -> Result<(), Stopped> {
        let Some(o) = o else {
            return Ok(());
        };
        for (key, value) in &self.labels {
            let mut fields: Vec<&str> = path.to_vec();
            fields.push(key);
            let (old, exist, err) = sdk::get_string(o, &fields);
            if err {
                return Err(Stopped::Result(at.unmatched(&fields, "string")));
            }
            if (exist && old != *value) || (!exist && create) {
                sdk::set_string(o, value, &fields).map_err(|e| {
                    Stopped::Result(format!(
                        "unable to set {value} at fields {} with error: {e}",
                        sdk::go_list(&fields.iter().map(|f| f.to_string()).collect::<Vec<_>>())
                    ))
                })?;
            }
            self.count += 1;
        }
        Ok(())
    }
}

/// `GetSlice`: the elements when the value is a sequence of mappings,
/// else none.
fn slice(n: Option<&mut Node>) -> impl Iterator<Item = &mut Node> {
    let ok = n.as_ref().is_some_and(|n| {
        n.kind == Kind::Sequence && n.content.iter().all(|e| e.kind == Kind::Mapping)
    });
    n.filter(|_| ok)
        .into_iter()
        .flat_map(|n| n.content.iter_mut())
}
