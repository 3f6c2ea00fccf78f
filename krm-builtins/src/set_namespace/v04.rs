//! `set-namespace` as its releases v0.4.0 and v0.4.1 answer: tags
//! `set-namespace/v0.4.0` (b221153a, kpt's function SDK at 7ad5b77727ee)
//! and `set-namespace/v0.4.1` (0efa332b, SDK f85503febd54),
//! `functions/go/set-namespace/transformer/{namespace,consts}.go`; kyaml
//! v0.13.6 and yaml.v3 496545a6307b beneath.
//!
//! - config (`Config`): first `IsEmpty` (v0.4.1 only: an absent or `{}`
//!   config), then `v1 ConfigMap` (`data.namespace`; for kpt's
//!   `kptfile.kpt.dev`, `data.name`), then `fn.kpt.dev/v1alpha1
//!   SetNamespace` (`namespace`), each matched exactly (the SDK's `IsGVK`
//!   then compared whole apiVersions). Values are read with
//!   `NestedStringOrDie`: a null or non-string dies. `namespaceMatcher` is
//!   not read. A config error is a bare error result and exit 1 (v0.4.1:
//!   `Process` returns false), or, in v0.4.0, an error result on the
//!   config (resourceRef, file) and exit 0; v0.4.0 without any config
//!   dereferences a nil object (a Go crash).
//! - `VisitNamespaces`, run three times (replace, collect depends-on
//!   keys, rewrite depends-on), item by item, local configs skipped: a
//!   `v1 Namespace`'s name, an `apiextensions.k8s.io/v1` CRD's conversion
//!   webhook service namespace, an `apiregistration.k8s.io/v1`
//!   APIService's service namespace, the subjects of any kind named
//!   `ClusterRoleBinding` or `RoleBinding` that have a `namespace`, and
//!   then `metadata.namespace` of every namespace-scoped resource. Every
//!   visited value that differs from the new namespace (also "", a missing
//!   field) is replaced and counted, and written back, so a CRD or
//!   APIService without the field gets it. A binding's `subjects` is
//!   written back through JSON as the SDK's `SetOrDie` does
//!   ([`through_json`]): keys sorted, comments and flow style gone, and
//!   `subjects: []` added where there was none.
//! - depends-on: an annotation `<g>/namespaces/<ns>/<kind>/<name>` is
//!   rewritten when `<g>/<kind>/<name>` names a visited resource (`<g>` the
//!   apiVersion up to its first `/`, so `v1` for the core group, which a
//!   core reference, `/namespaces/...`, never matches) and `<ns>` is one
//!   of the values replaced.
//! - one result: `CheckResourceDuplication`'s error (exit 0), else
//!   `all namespaces are already "<new>". no value changed`, else
//!   `namespace "<old>",... updated to "<new>", <N> value(s) changed`.
//!
//! Departures: the old namespaces in that message come in Go's map
//! order, random when there are several; here they are sorted. Where the
//! binary crashes (v0.4.0 without a config; a depends-on annotation its
//! setter cannot write), this is `Stop::Failed` with the panic's first
//! line, as in the master module. The JSON round trip of `subjects` keeps
//! a timestamp (`2001-12-14`) and a `!!binary` scalar as their text,
//! where this yaml.v3 decodes them into a `time.Time` (written back as
//! RFC 3339) and bytes; RBAC subjects have neither. v0.4.0's SDK also drops
//! input `results` and crashes on a ResourceList without `items`; neither
//! reaches a built-in.

use std::collections::{BTreeSet, HashSet};

use krm_yaml::gov3::{self, go_key_order};
use krm_yaml::resolve::resolve_plain;
use krm_yaml::{Kind, Node, Style};
use serde_yaml_ng::Value;

use super::{
    config_result, die_at, namespaced_ref, set_or_die, set_or_panic, slice_len, string_or_die,
    Abort, Release, API_SERVICE_NS, BUILTIN_CM, CRD_SERVICE_NS, DEPENDS_ON,
};
use crate::function::{Context, ResourceList};
use crate::result::FnResult;
use crate::sdk;
use crate::starlark::go_float;

/// A visitor of one namespace field: the resource it is in, and its
/// value (the visit writes it back afterwards).
type Visitor<'a> = dyn FnMut(&mut Node, &mut String) -> Result<(), Abort> + 'a;

/// `SetNamespace(rl)`.
pub(super) fn process(rl: &mut ResourceList, ctx: &Context, release: Release) -> Result<(), Abort> {
    let new_ns = match read_config(rl.function_config.as_ref(), release)? {
        Ok(ns) => ns,
        Err(msg) if release == Release::V040 => {
            // `ErrorConfigObjectResult`, and `return true, nil`.
            let empty = Node::mapping(vec![]);
            let fc = rl.function_config.as_ref().unwrap_or(&empty);
            rl.results.push(config_result(&msg, fc));
            return Ok(());
        }
        Err(msg) => {
            // `ErrorResult`, and `return false, nil`.
            rl.results.push(FnResult::error(msg));
            return Err(Abort::Unsuccessful);
        }
    };

    // ReplaceNamespace.
    let mut old: BTreeSet<String> = BTreeSet::new();
    let mut count = 0usize;
    visit_namespaces(
        &mut rl.items,
        ctx,
        &mut |_: &mut Node, value: &mut String| {
            if *value != new_ns {
                old.insert(std::mem::replace(value, new_ns.clone()));
                count += 1;
            }
            Ok(())
        },
    )?;
    // GetDependsOnMap: the visited resources, after the change.
    let mut keys: HashSet<String> = HashSet::new();
    visit_namespaces(&mut rl.items, ctx, &mut |o: &mut Node, _: &mut String| {
        keys.insert(depends_on_key(o));
        Ok(())
    })?;
    // UpdateAnnotation.
    let pattern = namespaced_ref()?;
    visit_namespaces(&mut rl.items, ctx, &mut |o: &mut Node, _: &mut String| {
        let value = sdk::get_string_map(o, &["metadata", "annotations"])
            .into_iter()
            .find(|(k, _)| k == DEPENDS_ON)
            .map(|(_, v)| v)
            .unwrap_or_default();
        if value.is_empty() || !pattern.is_match(&value) {
            return Ok(());
        }
        let mut segments: Vec<&str> = value.split('/').collect();
        let (Some(g), Some(ns), Some(kind), Some(name)) = (
            segments.first(),
            segments.get(2),
            segments.get(3),
            segments.get(4),
        ) else {
            return Ok(());
        };
        if !keys.contains(&format!("{g}/{kind}/{name}")) || !old.contains(*ns) {
            return Ok(());
        }
        if let Some(ns) = segments.get_mut(2) {
            *ns = new_ns.as_str();
        }
        let (value, fields) = (segments.join("/"), ["metadata", "annotations", DEPENDS_ON]);
        if release == Release::V040 {
            // SDK 7ad5b77's `SetAnnotation` calls `SetNestedString`: its
            // error is not wrapped.
            return sdk::set_string(o, &value, &fields).map_err(|e| {
                Abort::Panic(format!(
                    "cannot set metadata annotations '{DEPENDS_ON}': {e}"
                ))
            });
        }
        set_or_panic(o, &value, &fields, "metadata annotations", DEPENDS_ON)
    })?;

    rl.results.push(summary(&rl.items, count, &old, &new_ns));
    Ok(())
}

/// `NamespaceTransformer.Config`: the new namespace, or the config
/// error's message.
fn read_config(fc: Option<&Node>, release: Release) -> Result<Result<String, String>, Abort> {
    if release == Release::V041 && sdk::config_is_empty(fc) {
        return Ok(Err(
            "FunctionConfig is missing. Expect `ConfigMap` or `SetNamespace`".into(),
        ));
    }
    let Some(o) = fc else {
        // v0.4.0's SDK leaves `rl.FunctionConfig` nil, and `IsGVK` reads it.
        return Err(Abort::Panic(
            "runtime error: invalid memory address or nil pointer dereference".into(),
        ));
    };
    let is =
        |api_version: &str, kind: &str| sdk::api_version(o) == api_version && sdk::kind(o) == kind;
    if is("v1", "ConfigMap") {
        let ns = string_or_die(o, &["data", "namespace"])?;
        if !ns.is_empty() {
            return Ok(Ok(ns));
        }
        if sdk::name(o) != BUILTIN_CM {
            return Ok(Err("`data.namespace` should not be empty".into()));
        }
        let ns = string_or_die(o, &["data", "name"])?;
        if ns.is_empty() {
            return Ok(Err("`data.name` should not be empty".into()));
        }
        return Ok(Ok(ns));
    }
    if is("fn.kpt.dev/v1alpha1", "SetNamespace") {
        let ns = string_or_die(o, &["namespace"])?;
        if ns.is_empty() {
            return Ok(Err("`namespace` should not be empty".into()));
        }
        return Ok(Ok(ns));
    }
    Ok(Err(format!(
        "unknown functionConfig Kind={} ApiVersion={}, expect `SetNamespace` or `ConfigMap`",
        sdk::kind(o),
        sdk::api_version(o)
    )))
}

/// `VisitNamespaces`: `visitor` on each namespace field, in the items'
/// order, each field written back after.
fn visit_namespaces(
    items: &mut [Node],
    ctx: &Context,
    visitor: &mut Visitor<'_>,
) -> Result<(), Abort> {
    for o in items.iter_mut() {
        ctx.check().map_err(|_| Abort::Cancelled)?;
        if sdk::is_local_config(o) {
            continue;
        }
        let (api_version, kind) = (sdk::api_version(o), sdk::kind(o));
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "Namespace") => field(o, &["metadata", "name"], visitor)?,
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                field(o, CRD_SERVICE_NS, visitor)?;
            }
            ("apiregistration.k8s.io/v1", "APIService") => field(o, API_SERVICE_NS, visitor)?,
            (_, "ClusterRoleBinding" | "RoleBinding") => subjects(o, visitor)?,
            _ => {}
        }
        if sdk::is_namespace_scoped(o) {
            field(o, &["metadata", "namespace"], visitor)?;
        }
    }
    Ok(())
}

/// One field: `NestedStringOrDie`, the visitor, `SetOrDie`.
fn field(o: &mut Node, path: &[&str], visitor: &mut Visitor<'_>) -> Result<(), Abort> {
    let mut value = string_or_die(o, path)?;
    visitor(o, &mut value)?;
    set_or_die(o, &value, path)
}

/// A binding's subjects: `GetSlice("subjects")` (a list of mappings, or
/// the SDK dies), the visitor on each subject that has a `namespace` (of
/// any type: one that is no string reads as ""), then
/// `SetOrDie(&subjects, "subjects")`.
fn subjects(o: &mut Node, visitor: &mut Visitor<'_>) -> Result<(), Abort> {
    let count = slice_len(o, "subjects")?.unwrap_or(0);
    let index = sdk::value_index(o, "subjects");
    let subject = |o: &Node, j: usize| {
        index
            .and_then(|i| o.content.get(i))
            .and_then(|s| s.content.get(j))
            .map(|s| sdk::get_string(s, &["namespace"]))
    };
    for j in 0..count {
        let Some((mut ns, true, _)) = subject(o, j) else {
            continue;
        };
        visitor(o, &mut ns)?;
        if let Some(s) = index
            .and_then(|i| o.content.get_mut(i))
            .and_then(|s| s.content.get_mut(j))
        {
            // `_ = s.SetNestedField(&ns, "namespace")`.
            let _ = sdk::set_string(s, &ns, &["namespace"]);
        }
    }
    let mut list = match index.and_then(|i| o.content.get(i)) {
        Some(s) => through_json(s),
        None => through_json(&Node::sequence(vec![])),
    }
    .ok_or_else(|| die_at(&["subjects"]))?;
    match index.and_then(|i| o.content.get_mut(i)) {
        // `setYAMLNode`: the old node's comments kept.
        Some(old) => {
            list.head_comment = std::mem::take(&mut old.head_comment);
            list.line_comment = std::mem::take(&mut old.line_comment);
            list.foot_comment = std::mem::take(&mut old.foot_comment);
            *old = list;
        }
        None => {
            o.content.push(Node::string("subjects"));
            o.content.push(list);
        }
    }
    Ok(())
}

/// The key `GetDependsOnMap` gives a resource: `<g>/<kind>/<name>`, `<g>`
/// its apiVersion up to the first `/`.
fn depends_on_key(o: &Node) -> String {
    let api_version = sdk::api_version(o);
    let group = api_version
        .split_once('/')
        .map_or(api_version.as_str(), |(g, _)| g);
    format!("{group}/{}/{}", sdk::kind(o), sdk::name(o))
}

/// `LogResults`' one result.
fn summary(items: &[Node], count: usize, old: &BTreeSet<String>, new_ns: &str) -> FnResult {
    // `CheckResourceDuplication`: the first repeated identifier.
    let mut seen = HashSet::new();
    for o in items {
        let id = (
            sdk::api_version(o),
            sdk::kind(o),
            sdk::namespace(o),
            sdk::name(o),
        );
        if seen.contains(&id) {
            return FnResult::error(format!(
                "duplicate Resource(apiVersion={}, kind={}, Namespace={}, Name={})",
                id.0, id.1, id.2, id.3
            ));
        }
        seen.insert(id);
    }
    if count == 0 {
        return FnResult::info(format!(
            "all namespaces are already {}. no value changed",
            sdk::go_quote(new_ns)
        ));
    }
    // Each in plain quotes, unescaped; sorted here (Go's map order).
    let old: Vec<String> = old.iter().map(|ns| format!("\"{ns}\"")).collect();
    FnResult::info(format!(
        "namespace {} updated to {}, {count} value(s) changed",
        old.join(","),
        sdk::go_quote(new_ns)
    ))
}

/// A list as the SDK's `SetOrDie` writes a `SliceSubObjects`
/// (`TypedObjectToSliceVariant`): the nodes encoded as YAML, decoded into
/// Go values by yaml.v3, through JSON (numbers become float64), and
/// encoded again by yaml.v3 (maps by sorted keys, strings quoted where
/// they would read as another type). `None` where Go fails on the way: a
/// repeated key, a key that is no string (a merge key too: yaml.v3 then
/// makes a `map[interface{}]interface{}`, which JSON refuses), an
/// infinite or NaN number, an alias that cannot be followed.
fn through_json(list: &Node) -> Option<Node> {
    let mut list = list.clone();
    go_scalars(&mut list)?;
    let value = krm_yaml::value::to_value(&list).ok()?;
    go_node(&value)
}

/// The checks of [`through_json`] on the nodes, and each number's text
/// made the float64 Go reads from it (for [`krm_yaml::value::to_value`]).
fn go_scalars(n: &mut Node) -> Option<()> {
    match n.kind {
        Kind::Mapping => {
            let keys: Vec<&Node> = n.content.iter().step_by(2).collect();
            for (i, k) in keys.iter().enumerate() {
                if k.kind != Kind::Scalar || short_tag(k) != "!!str" {
                    return None;
                }
                let repeated = keys
                    .iter()
                    .skip(i + 1)
                    .any(|o| o.kind == k.kind && o.value == k.value);
                if repeated {
                    return None;
                }
            }
        }
        Kind::Scalar if matches!(n.tag.as_str(), "!!int" | "!!float") => {
            let f = go_number(&n.value)?;
            n.value = format!("{f:?}").into();
            n.tag = "!!float".into();
        }
        _ => {}
    }
    n.content.iter_mut().try_for_each(go_scalars)
}

/// yaml.v3's `ShortTag` of a scalar.
fn short_tag(n: &Node) -> &str {
    if !n.tag.is_empty() {
        n.tag.as_str()
    } else if n.style.has(Style::DOUBLE_QUOTED)
        || n.style.has(Style::SINGLE_QUOTED)
        || n.style.has(Style::LITERAL)
        || n.style.has(Style::FOLDED)
    {
        "!!str"
    } else {
        resolve_plain(&n.value)
    }
}

/// The number yaml.v3 decodes from an `!!int` or `!!float` scalar (Go's
/// `ParseInt(s, 0, 64)`, `ParseUint`, then `ParseFloat`, on the text
/// without `_`), as JSON holds it; `None` for what JSON cannot hold
/// (`.inf`, `.nan`) or what does not parse.
fn go_number(s: &str) -> Option<f64> {
    let plain = s.replace('_', "");
    let (negative, digits) = match plain.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(b) = lower.strip_prefix("0x") {
        (16, b)
    } else if let Some(b) = lower.strip_prefix("0o") {
        (8, b)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower.get(1..).unwrap_or(""))
    } else {
        (10, lower.as_str())
    };
    let integer = (!body.is_empty() && body.chars().all(|c| c.is_ascii_alphanumeric()))
        .then(|| u128::from_str_radix(body, radix).ok())
        .flatten();
    let f = match integer {
        // An integer has no negative zero.
        Some(0) => 0.0,
        Some(i) if negative => -(i as f64),
        Some(i) => i as f64,
        // A decimal float (`08` too: no octal, but a float).
        None if digits
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-')) =>
        {
            let magnitude = digits.parse::<f64>().ok()?;
            if negative {
                -magnitude
            } else {
                magnitude
            }
        }
        None => return None,
    };
    f.is_finite().then_some(f)
}

/// A Go value as yaml.v3 encodes it (and parses back what it wrote).
fn go_node(v: &Value) -> Option<Node> {
    Some(match v {
        Value::Null => Node::scalar("null"),
        Value::Bool(b) => Node::scalar(if *b { "true" } else { "false" }),
        // Always finite here ([`go_scalars`] refuses the rest, as Go's JSON does).
        Value::Number(n) => Node::scalar(go_float(n.as_f64()?)),
        Value::String(s) => go_string(s),
        Value::Sequence(items) => {
            let mut n = Node::sequence(items.iter().map(go_node).collect::<Option<_>>()?);
            if n.content.is_empty() {
                n.style = Style::FLOW;
            }
            n
        }
        Value::Mapping(m) => {
            let mut entries = Vec::with_capacity(m.len());
            for (k, v) in m {
                let Value::String(k) = k else { return None };
                entries.push((k.as_str(), v));
            }
            entries.sort_by(|a, b| go_key_order(a.0, b.0));
            let mut content = Vec::with_capacity(2 * entries.len());
            for (k, v) in entries {
                content.push(go_string(k));
                content.push(go_node(v)?);
            }
            let mut n = Node::mapping(content);
            if n.content.is_empty() {
                n.style = Style::FLOW;
            }
            n
        }
        Value::Tagged(t) => go_node(&t.value)?,
    })
}

/// A Go string as yaml.v3 writes it ([`gov3::go_string`]) and parses it
/// back: tagged `!!str`, as [`go_node`]'s other scalars carry their tags.
fn go_string(s: &str) -> Node {
    Node {
        tag: "!!str".into(),
        ..gov3::go_string(s)
    }
}
