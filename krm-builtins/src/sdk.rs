//! The parts of kpt's function SDK (`kpt-functions-sdk/go/fn`: `KubeObject`
//! over `internal.MapVariant`) that `set-namespace` and `set-labels` use,
//! on our tree: how a field is read (a string is a scalar tagged `!!str`,
//! anything else is a type error), how it is written (a new plain `!!str`
//! node that keeps the old node's comments, missing maps created), how the
//! SDK reads a ResourceList (items must be mappings) and how it writes one
//! (items sorted by apiVersion, kind, namespace and name).
//!
//! Read at SDK commits 970f3e4cbc5a (set-namespace's go.mod) and
//! afe329cf801e (set-labels'); the helpers used here are the same in both.

use krm_yaml::{Kind, Node};

use crate::function::{ResourceList, Stop};

/// yaml.v3's `Kind` numbers, as `%v` prints them.
fn kind_number(k: Kind) -> u8 {
    k as u8
}

/// The Go type name of `toVariant(node)` (`%T`).
pub(crate) fn variant_name(n: &Node) -> &'static str {
    match n.kind {
        Kind::Mapping => "*internal.MapVariant",
        Kind::Sequence => "*internal.sliceVariant",
        _ => "*internal.scalarVariant",
    }
}

/// `asString`: a key the SDK can look up by name.
fn key_str(n: &Node) -> Option<&str> {
    (n.kind == Kind::Scalar && (n.tag == "!!str" || n.tag.is_empty())).then_some(n.value.as_str())
}

/// `getValueNode`: the first value whose key is the string `key`.
pub(crate) fn value_index(map: &Node, key: &str) -> Option<usize> {
    if map.kind != Kind::Mapping {
        return None;
    }
    map.content
        .chunks_exact(2)
        .position(|kv| kv.first().and_then(key_str) == Some(key))
        .map(|i| 2 * i + 1)
}

/// `GetMap(key)` (kpt-functions-sdk at afe329cf): the value, of any kind
/// (a scalar then reads as an empty mapping).
pub(crate) fn get_mut<'a>(node: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    value_index(node, key).and_then(move |i| node.content.get_mut(i))
}

/// What `GetNestedValue` finds.
pub(crate) enum Got<'a> {
    Missing,
    Found(&'a Node),
    /// Found, but a step on the way is not a mapping.
    Wrong,
}

/// `MapVariant.GetNestedValue(fields...)`.
pub(crate) fn get<'a>(obj: &'a Node, fields: &[&str]) -> Got<'a> {
    let mut cur = obj;
    for (i, f) in fields.iter().enumerate() {
        let Some(v) = value_index(cur, f).and_then(|i| cur.content.get(i)) else {
            return Got::Missing;
        };
        if i + 1 == fields.len() {
            return Got::Found(v);
        }
        if v.kind != Kind::Mapping {
            return Got::Wrong;
        }
        cur = v;
    }
    Got::Missing
}

/// `GetNestedString`: the value, whether it was found, whether it is not
/// a string (then the value is "").
pub(crate) fn get_string(obj: &Node, fields: &[&str]) -> (String, bool, bool) {
    match get(obj, fields) {
        Got::Missing => (String::new(), false, false),
        Got::Wrong => (String::new(), true, true),
        Got::Found(n) if n.kind == Kind::Scalar && n.tag == "!!str" => {
            (n.value.to_string(), true, false)
        }
        Got::Found(_) => (String::new(), true, true),
    }
}

/// `GetNestedStringMap`: a map's keys and values as they are written
/// (`.Value`, whatever their kind), the last of a repeated key winning.
pub(crate) fn get_string_map(obj: &Node, fields: &[&str]) -> Vec<(String, String)> {
    let Got::Found(m) = get(obj, fields) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for kv in m.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        match out
            .iter_mut()
            .find(|(key, _)| key.as_str() == k.value.as_str())
        {
            Some(e) => e.1 = v.value.to_string(),
            None => out.push((k.value.to_string(), v.value.to_string())),
        }
    }
    out
}

/// `SetNestedString(value, fields...)`: maps created on the way (a step
/// that is not a mapping is the SDK's error), the value replaced by a new
/// plain `!!str` node that keeps the old one's comments, or appended.
pub(crate) fn set_string(obj: &mut Node, value: &str, fields: &[&str]) -> Result<(), String> {
    let Some((last, path)) = fields.split_last() else {
        return Ok(());
    };
    let mut cur = obj;
    for f in path {
        let i = match value_index(cur, f) {
            Some(i) => i,
            // The SDK appends to a node that is not a mapping (one that
            // `GetMap` wrapped), where nothing ever reads or writes it.
            None if cur.kind != Kind::Mapping => return Ok(()),
            None => {
                cur.content.push(Node::string(*f));
                cur.content.push(Node {
                    kind: Kind::Mapping,
                    ..Node::default()
                });
                cur.content.len() - 1
            }
        };
        let Some(next) = cur.content.get_mut(i) else {
            return Err("unexpected code reached".into());
        };
        if next.kind != Kind::Mapping {
            return Err(format!("incorrect type, was {}", variant_name(next)));
        }
        cur = next;
    }
    let mut node = Node::string(value);
    match value_index(cur, last).and_then(|i| cur.content.get_mut(i)) {
        Some(old) => {
            node.head_comment = std::mem::take(&mut old.head_comment);
            node.line_comment = std::mem::take(&mut old.line_comment);
            node.foot_comment = std::mem::take(&mut old.foot_comment);
            *old = node;
        }
        None if cur.kind != Kind::Mapping => {}
        None => {
            cur.content.push(Node::string(*last));
            cur.content.push(node);
        }
    }
    Ok(())
}

pub(crate) fn api_version(o: &Node) -> String {
    get_string(o, &["apiVersion"]).0
}
pub(crate) fn kind(o: &Node) -> String {
    get_string(o, &["kind"]).0
}
pub(crate) fn name(o: &Node) -> String {
    get_string(o, &["metadata", "name"]).0
}
pub(crate) fn namespace(o: &Node) -> String {
    get_string(o, &["metadata", "namespace"]).0
}
pub(crate) fn has_namespace(o: &Node) -> bool {
    get_string(o, &["metadata", "namespace"]).1
}
pub(crate) fn annotation(o: &Node, key: &str) -> String {
    get_string(o, &["metadata", "annotations", key]).0
}

/// `IsLocalConfig`: `config.kubernetes.io/local-config` is a string other
/// than "" and "false".
pub(crate) fn is_local_config(o: &Node) -> bool {
    let v = annotation(o, "config.kubernetes.io/local-config");
    !(v.is_empty() || v == "false")
}

/// `ParseGroupVersion`.
pub(crate) fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// `KubeObject.IsGVK`: an empty part on either side matches.
pub(crate) fn is_gvk(o: &Node, group: &str, version: &str, kind_: &str) -> bool {
    let av = api_version(o);
    let (og, ov) = group_version(&av);
    let ok = kind(o);
    let differ = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
    !(differ(&ok, kind_) || differ(og, group) || differ(ov, version))
}

/// `ShortString`.
pub(crate) fn short_string(o: &Node) -> String {
    format!(
        "Resource(apiVersion={}, kind={}, namespace={}, name={})",
        api_version(o),
        kind(o),
        namespace(o),
        name(o)
    )
}

/// `internal.PrecomputedIsNamespaceScoped` (kyaml's openapi table).
const SCOPES: &[(&str, &str, bool)] = &[
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        false,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        false,
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
        false,
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
        false,
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", false),
    (
        "apiextensions.k8s.io/v1beta1",
        "CustomResourceDefinition",
        false,
    ),
    ("apiregistration.k8s.io/v1", "APIService", false),
    ("apiregistration.k8s.io/v1beta1", "APIService", false),
    ("apps/v1", "ControllerRevision", true),
    ("apps/v1", "DaemonSet", true),
    ("apps/v1", "Deployment", true),
    ("apps/v1", "ReplicaSet", true),
    ("apps/v1", "StatefulSet", true),
    ("autoscaling/v1", "HorizontalPodAutoscaler", true),
    ("autoscaling/v1", "Scale", true),
    ("autoscaling/v2beta1", "HorizontalPodAutoscaler", true),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler", true),
    ("batch/v1", "CronJob", true),
    ("batch/v1", "Job", true),
    ("batch/v1beta1", "CronJob", true),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", false),
    (
        "certificates.k8s.io/v1beta1",
        "CertificateSigningRequest",
        false,
    ),
    ("coordination.k8s.io/v1", "Lease", true),
    ("coordination.k8s.io/v1beta1", "Lease", true),
    ("discovery.k8s.io/v1", "EndpointSlice", true),
    ("discovery.k8s.io/v1beta1", "EndpointSlice", true),
    ("events.k8s.io/v1", "Event", true),
    ("events.k8s.io/v1beta1", "Event", true),
    ("extensions/v1beta1", "Ingress", true),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", false),
    (
        "flowcontrol.apiserver.k8s.io/v1beta1",
        "PriorityLevelConfiguration",
        false,
    ),
    ("networking.k8s.io/v1", "Ingress", true),
    ("networking.k8s.io/v1", "IngressClass", false),
    ("networking.k8s.io/v1", "NetworkPolicy", true),
    ("networking.k8s.io/v1beta1", "Ingress", true),
    ("networking.k8s.io/v1beta1", "IngressClass", false),
    ("node.k8s.io/v1", "RuntimeClass", false),
    ("node.k8s.io/v1beta1", "RuntimeClass", false),
    ("policy/v1", "PodDisruptionBudget", true),
    ("policy/v1beta1", "PodDisruptionBudget", true),
    ("policy/v1beta1", "PodSecurityPolicy", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
    ("rbac.authorization.k8s.io/v1", "Role", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole", false),
    (
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRoleBinding",
        false,
    ),
    ("rbac.authorization.k8s.io/v1beta1", "Role", true),
    ("rbac.authorization.k8s.io/v1beta1", "RoleBinding", true),
    ("scheduling.k8s.io/v1", "PriorityClass", false),
    ("scheduling.k8s.io/v1beta1", "PriorityClass", false),
    ("storage.k8s.io/v1", "CSIDriver", false),
    ("storage.k8s.io/v1", "CSINode", false),
    ("storage.k8s.io/v1", "StorageClass", false),
    ("storage.k8s.io/v1", "VolumeAttachment", false),
    ("storage.k8s.io/v1beta1", "CSIDriver", false),
    ("storage.k8s.io/v1beta1", "CSINode", false),
    ("storage.k8s.io/v1beta1", "CSIStorageCapacity", true),
    ("storage.k8s.io/v1beta1", "StorageClass", false),
    ("storage.k8s.io/v1beta1", "VolumeAttachment", false),
    ("v1", "ComponentStatus", false),
    ("v1", "ConfigMap", true),
    ("v1", "Endpoints", true),
    ("v1", "Event", true),
    ("v1", "LimitRange", true),
    ("v1", "Namespace", false),
    ("v1", "Node", false),
    ("v1", "NodeProxyOptions", false),
    ("v1", "PersistentVolume", false),
    ("v1", "PersistentVolumeClaim", true),
    ("v1", "Pod", true),
    ("v1", "PodAttachOptions", true),
    ("v1", "PodExecOptions", true),
    ("v1", "PodPortForwardOptions", true),
    ("v1", "PodProxyOptions", true),
    ("v1", "PodTemplate", true),
    ("v1", "ReplicationController", true),
    ("v1", "ResourceQuota", true),
    ("v1", "Secret", true),
    ("v1", "Service", true),
    ("v1", "ServiceAccount", true),
    ("v1", "ServiceProxyOptions", true),
];

/// `IsNamespaceScoped`: the table, else whether `metadata.namespace` is
/// there.
pub(crate) fn is_namespace_scoped(o: &Node) -> bool {
    let (av, k) = (api_version(o), kind(o));
    SCOPES
        .iter()
        .find(|(a, kk, _)| *a == av && *kk == k)
        .map_or_else(|| has_namespace(o), |s| s.2)
}

/// `AsMain`'s stderr for an error.
pub(crate) fn failed(err: &str) -> Stop {
    Stop::Failed(format!("failed to evaluate function: {err}"))
}

/// `ParseResourceList`'s checks: every item a mapping, the
/// functionConfig (when there) a mapping. Nothing is written when these
/// fail.
pub(crate) fn check_input(rl: &ResourceList) -> Result<(), Stop> {
    if let Some(fc) = &rl.function_config {
        if fc.kind != Kind::Mapping {
            return Err(failed(&format!(
                "failed when tried to get functionConfig: wrong type, got: {}",
                variant_name(fc)
            )));
        }
    }
    if let Some(bad) = rl.items.iter().find(|i| i.kind != Kind::Mapping) {
        return Err(failed(&format!(
            "failed to extract objects from items: unhandled node kind {}",
            kind_number(bad.kind)
        )));
    }
    Ok(())
}

/// `IsEmpty` of the functionConfig: none, or an empty mapping.
pub(crate) fn config_is_empty(fc: Option<&Node>) -> bool {
    fc.is_none_or(|n| n.kind == Kind::Mapping && n.content.is_empty())
}

/// `ResourceList.ToYAML`'s sort of the items (by "apiVersion kind
/// namespace name"). Go's `sort.Sort` is not stable; equal keys keep
/// their order here.
pub(crate) fn sort_items(rl: &mut ResourceList) {
    let key = |o: &Node| {
        format!(
            "{} {} {} {}",
            api_version(o),
            kind(o),
            namespace(o),
            name(o)
        )
    };
    let mut keyed: Vec<(String, Node)> = std::mem::take(&mut rl.items)
        .into_iter()
        .map(|n| (key(&n), n))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    rl.items = keyed.into_iter().map(|(_, n)| n).collect();
}

/// Go's `%q` of a string.
// Not krm_yaml's go_quote (full strconv.Quote): \a \b \f \v, U+0080.. differ; merging changes output.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a `[]string`.
pub(crate) fn go_list(v: &[String]) -> String {
    format!("[{}]", v.join(" "))
}
