//! `set-namespace`: sets the namespace of every namespace-scoped resource
//! (and the namespace fields of a few cluster-scoped kinds: a
//! `Namespace`'s name, a CRD's conversion webhook service, an
//! `APIService`'s service, the subjects of a cluster-scoped
//! (Cluster)RoleBinding), then rewrites the `config.kubernetes.io/depends-on`
//! annotations that point at a resource whose namespace it changed.
//!
//! Follows kptdev/krm-functions-catalog at commit 76fe3817f949
//! (`functions/go/set-namespace/transformer/{namespace,consts}.go`), run by
//! kpt's function SDK at 970f3e4cbc5a (`go/fn`: `AsMain`, `Run`,
//! `KubeObject`), whose behaviour it keeps, quirks included:
//!
//! - config: a `v1 ConfigMap` (`data.namespace`, `data.namespaceMatcher`;
//!   kpt's package-context ConfigMap `kptfile.kpt.dev` gives `data.name`),
//!   `fn.kpt.dev/v1alpha1 SetNamespace` (`namespace`, `namespaceMatcher`),
//!   the SDK's loose kind/version match included (an empty kind or version
//!   matches). A missing or bad config is an error *result* on the config
//!   and the binary still exits 0, as the catalog's `Run` returns
//!   `(true, nil)`; so do the "more than one origin" and "bad origin"
//!   errors.
//! - every namespace-scoped resource has its `metadata.namespace` written
//!   back (a missing one becomes `default`, or the new namespace), as a
//!   new plain string that keeps the old node's comments but not its
//!   quotes; a `Namespace`'s name likewise.
//! - the binary writes its items sorted by apiVersion, kind, namespace and
//!   name (the SDK's `ToYAML`); so does this function.
//! - a field of the wrong type where the SDK "dies" (`NestedStringOrDie`,
//!   `AsOrDie`) is the SDK's error result and exit 1 with its stderr; a
//!   field the SDK's setters cannot write (`metadata: x`) is a Go panic in
//!   the binary (exit 2, a goroutine trace): here `Stop::Failed` with the
//!   panic's first line.
//!
//! Releases ([`Context::release`]): master's code is in no release tag
//! (its origin rewrite, #885, came after `set-namespace/v0.4.1`). When the
//! call's image names `set-namespace:v0.4.0` or `v0.4.1`, the function
//! answers as that release instead: another algorithm (a visit of every
//! namespace field, no origins or matcher, one result), so it is a module
//! of its own, [`v04`], which shares this module's run, its SDK failure
//! handling ([`Abort`]) and field helpers; the two releases differ at a
//! few switches there ([`Release`]). Any other tag, or none, answers as
//! master.

use krm_yaml::{Kind, Node};

use crate::function::{Context, ResourceList, Stop};
use crate::result::{File, FnResult, ResourceRef};
use crate::sdk::{self, Got};

const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";
const UPSTREAM: &str = "internal.kpt.dev/upstream-identifier";
const UNKNOWN_NS: &str = "~C";
const DEFAULT_NS: &str = "default";
const BUILTIN_CM: &str = "kptfile.kpt.dev";

/// The namespace fields `VisitNamespaces` knows, by path: a CRD's
/// conversion webhook service, an APIService's service.
const CRD_SERVICE_NS: &[&str] = &[
    "spec",
    "conversion",
    "webhook",
    "clientConfig",
    "service",
    "namespace",
];
const API_SERVICE_NS: &[&str] = &["spec", "service", "namespace"];

#[cfg(test)]
mod tests;
mod v04;

/// The code the call answers as: the release its image names
/// ([`Context::release`]), master's for any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// master at 76fe3817 (SDK 970f3e4cbc5a).
    Master,
    /// `set-namespace/v0.4.0` (b221153a, SDK 7ad5b77727ee).
    V040,
    /// `set-namespace/v0.4.1` (0efa332b, SDK f85503febd54).
    V041,
}

impl Release {
    fn of(ctx: &Context) -> Release {
        match ctx.release() {
            Some("v0.4.0") => Release::V040,
            Some("v0.4.1") => Release::V041,
            _ => Release::Master,
        }
    }

    /// The binary's failure for the error `err`: `AsMain` prints
    /// `failed to evaluate function: <err>` since SDK f85503; v0.4.0's SDK
    /// prints nothing (exit 1 all the same).
    fn failed(self, err: &str) -> Stop {
        match self {
            Release::V040 => Stop::Failed(String::new()),
            Release::Master | Release::V041 => sdk::failed(err),
        }
    }
}

/// The function's settings.
struct Config {
    namespace: String,
    matcher: String,
}

/// What stops the SDK's run part-way: a recovered panic (an error result,
/// the items written, exit 1), `Process` returning `(false, nil)` (the
/// items and results written, exit 1) or an unrecovered panic (the
/// process dies).
enum Abort {
    Recovered(String),
    Unsuccessful,
    Panic(String),
    Cancelled,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let release = Release::of(ctx);
    sdk::check_input(rl).map_err(|stop| match (release, stop) {
        // v0.4.0's `AsMain` prints no error.
        (Release::V040, Stop::Failed(_)) => Stop::Failed(String::new()),
        (_, stop) => stop,
    })?;
    let outcome = match release {
        Release::Master => process(rl, ctx),
        Release::V040 | Release::V041 => v04::process(rl, ctx, release),
    };
    match outcome {
        Ok(()) => {
            sdk::sort_items(rl);
            Ok(())
        }
        Err(Abort::Recovered(msg)) => {
            rl.results.push(FnResult::error(msg.as_str()));
            sdk::sort_items(rl);
            Err(release.failed(&msg))
        }
        Err(Abort::Unsuccessful) => {
            sdk::sort_items(rl);
            Err(release.failed("error: function failure"))
        }
        Err(Abort::Panic(msg)) => Err(Stop::Failed(format!("panic: {msg}"))),
        Err(Abort::Cancelled) => Err(Stop::Cancelled),
    }
}

fn process(rl: &mut ResourceList, ctx: &Context) -> Result<(), Abort> {
    let config = match read_config(rl.function_config.as_ref())? {
        Ok(c) => c,
        Err(msg) => {
            let fc = rl
                .function_config
                .clone()
                .unwrap_or_else(|| Node::mapping(vec![]));
            rl.results.push(config_result(&msg, &fc));
            return Ok(());
        }
    };
    let results = transform(&mut rl.items, &config, ctx)?;
    rl.results.extend(results);
    Ok(())
}

/// `ErrorConfigObjectResult(err, fnConfig)`.
fn config_result(msg: &str, fc: &Node) -> FnResult {
    let index = sdk::annotation(fc, "internal.config.kubernetes.io/index");
    FnResult {
        resource_ref: Some(ResourceRef {
            api_version: sdk::api_version(fc),
            kind: sdk::kind(fc),
            name: sdk::name(fc),
            namespace: sdk::namespace(fc),
        }),
        file: Some(File {
            path: sdk::annotation(fc, "internal.config.kubernetes.io/path"),
            index: if index.is_empty() {
                -1
            } else {
                go_atoi(&index)
            },
        }),
        ..FnResult::error(msg)
    }
}

/// Go's `strconv.Atoi`, 0 on failure.
fn go_atoi(s: &str) -> i64 {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    s.parse().unwrap_or(0)
}

/// A string field as Go's JSON decoder fills a `string` (what `AsOrDie`
/// does through JSON): missing or null is "", a non-string fails.
fn json_string(obj: &Node, fields: &[&str]) -> Result<String, Abort> {
    match sdk::get(obj, fields) {
        Got::Missing => Ok(String::new()),
        Got::Found(n) if n.kind == Kind::Scalar && n.tag == "!!null" => Ok(String::new()),
        Got::Found(n) if n.kind == Kind::Scalar && n.tag == "!!str" => Ok(n.value.to_string()),
        _ => Err(die()),
    }
}

/// `AsOrDie`'s panic, as `Run` recovers it.
fn die() -> Abort {
    Abort::Recovered("SubObject has unmatched field type: `".into())
}

/// `SetNamespace.Config`: `Ok(Err(msg))` is the config error result.
fn read_config(fc: Option<&Node>) -> Result<Result<Config, String>, Abort> {
    let empty = Node::mapping(vec![]);
    let o = fc.unwrap_or(&empty);
    if sdk::config_is_empty(fc) {
        return Ok(Err(
            "FunctionConfig is missing. Expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`"
                .into(),
        ));
    }
    if sdk::is_gvk(o, "", "v1", "ConfigMap") {
        // corev1.ConfigMap through JSON: `data` a map of strings.
        let mut data: Vec<(String, String)> = Vec::new();
        match sdk::get(o, &["data"]) {
            Got::Missing => {}
            Got::Found(d) if d.kind == Kind::Scalar && d.tag == "!!null" => {}
            Got::Found(d) if d.kind == Kind::Mapping => {
                for kv in d.content.chunks_exact(2) {
                    let [k, v] = kv else { continue };
                    let value = match (v.kind, v.tag.as_str()) {
                        (Kind::Scalar, "!!str") => v.value.to_string(),
                        (Kind::Scalar, "!!null") => String::new(),
                        _ => return Err(die()),
                    };
                    match data.iter_mut().find(|e| e.0 == k.value.as_str()) {
                        Some(e) => e.1 = value,
                        None => data.push((k.value.to_string(), value)),
                    }
                }
            }
            _ => return Err(die()),
        }
        let name = json_string(o, &["metadata", "name"])?;
        let get = |k: &str| {
            data.iter()
                .find(|e| e.0 == k)
                .map(|e| e.1.clone())
                .unwrap_or_default()
        };
        let matcher = get("namespaceMatcher");
        let ns = get("namespace");
        if !ns.is_empty() {
            return Ok(Ok(Config {
                namespace: ns,
                matcher,
            }));
        }
        let data_name = get("name");
        if !data_name.is_empty() && name == BUILTIN_CM {
            return Ok(Ok(Config {
                namespace: data_name,
                matcher,
            }));
        }
        // The catalog compares the SetNamespace's own (empty) name here,
        // so the `data.name` message is never given.
        return Ok(Err("`data.namespace` should not be empty".into()));
    }
    if sdk::is_gvk(o, "fn.kpt.dev", "v1alpha1", "SetNamespace") {
        let namespace = json_string(o, &["namespace"])?;
        let matcher = json_string(o, &["namespaceMatcher"])?;
        if namespace.is_empty() {
            return Ok(Err("`namespace` should not be empty".into()));
        }
        return Ok(Ok(Config { namespace, matcher }));
    }
    Ok(Err(format!(
        "unknown functionConfig Kind={} ApiVersion={}, expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`",
        sdk::kind(o),
        sdk::api_version(o)
    )))
}

/// `ResourceIdentifier` (group, kind, namespace, name).
struct Id {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

/// `GetId`: the namespace is `default` for a namespace-scoped resource
/// without one, `~C` for others.
fn id_of(o: &Node) -> Id {
    let av = sdk::api_version(o);
    let namespace = if sdk::has_namespace(o) {
        sdk::namespace(o)
    } else if sdk::is_namespace_scoped(o) {
        DEFAULT_NS.into()
    } else {
        UNKNOWN_NS.into()
    };
    Id {
        group: sdk::group_version(&av).0.to_owned(),
        kind: sdk::kind(o),
        namespace,
        name: sdk::name(o),
    }
}

/// `GetOriginId`: the upstream-identifier annotation, else `GetId`.
fn origin_of(o: &Node) -> Result<Id, Abort> {
    let up = sdk::annotation(o, UPSTREAM);
    if up.is_empty() {
        return Ok(id_of(o));
    }
    let up = up.trim();
    let re = regex::Regex::new(
        r"([a-z0-9-.]*)\|([A-Z][a-zA-Z0-9]*)\|([a-z0-9-]{1,63}|~C)\|([a-z0-9-]{1,63})",
    )
    .map_err(|e| Abort::Panic(e.to_string()))?;
    let Some(c) = re.captures(up) else {
        return Err(Abort::Recovered(format!(
            "annotation {UPSTREAM}: {up} is in bad format. expect \"<GROUP>|<KIND>|<NAMESPACE>|<NAME>\""
        )));
    };
    let g = |i: usize| c.get(i).map_or("", |m| m.as_str()).to_owned();
    Ok(Id {
        group: g(1),
        kind: g(2),
        namespace: g(3),
        name: g(4),
    })
}

/// consts.go's `namespacedResourcePattern`,
/// `<group>/namespaces/<namespace>/<kind>/<name>` (Go's `\w` is ASCII).
fn namespaced_ref() -> Result<regex::Regex, Abort> {
    regex::Regex::new(
        r"\A([-.0-9A-Za-z_]*)/namespaces/([-.0-9A-Za-z_]*)/([-.0-9A-Za-z_]*)/([-.0-9A-Za-z_]*)\z",
    )
    .map_err(|e| Abort::Panic(e.to_string()))
}

fn depends_on_key(id: &Id) -> String {
    format!(
        "{}/namespaces/{}/{}/{}",
        id.group, id.namespace, id.kind, id.name
    )
}

/// The visitor's state (`WalkAndReplace`).
struct Walk<'a> {
    new_ns: &'a str,
    matcher: Option<&'a str>,
    count: usize,
    old: Vec<String>,
    results: Vec<FnResult>,
}

impl Walk<'_> {
    /// The visitor: `current` is changed in place (a "" becomes
    /// `default` even when nothing else changes).
    fn visit(&mut self, origin: &str, current: &mut String, id: Option<&str>) {
        if origin == UNKNOWN_NS {
            return;
        }
        if current.is_empty() {
            *current = DEFAULT_NS.into();
        }
        if current == self.new_ns {
            return;
        }
        let change = match self.matcher {
            None => true,
            Some(m) => {
                if m == origin {
                    self.results.push(FnResult::info(format!(
                        "[{}] has matching origin {origin}",
                        id.unwrap_or("")
                    )));
                }
                m == current.as_str() || m == origin
            }
        };
        if change {
            insert_sorted(&mut self.old, current);
            *current = self.new_ns.to_owned();
            self.count += 1;
        }
    }
}

fn insert_sorted(set: &mut Vec<String>, v: &str) {
    if let Err(i) = set.binary_search_by(|x| x.as_str().cmp(v)) {
        set.insert(i, v.to_owned());
    }
}

/// The SDK's setters' failure: a Go panic with this message
/// (`cannot set <what> '<named>': ...`).
fn set_or_panic(
    o: &mut Node,
    value: &str,
    fields: &[&str],
    what: &str,
    named: &str,
) -> Result<(), Abort> {
    sdk::set_string(o, value, fields).map_err(|e| {
        Abort::Panic(format!(
            "cannot set {what} '{named}': unable to set {value} at fields {} with error: {e}",
            sdk::go_list(&fields.iter().map(|f| f.to_string()).collect::<Vec<_>>())
        ))
    })
}

/// The SDK's `ErrSubObjectFields` panic at `fields`, as `Run` recovers it.
fn die_at(fields: &[&str]) -> Abort {
    Abort::Recovered(format!(
        "SubObject has unmatched field type: `{}",
        fields.join("/")
    ))
}

/// `SetNestedStringOrDie`'s failure: recovered.
fn set_or_die(o: &mut Node, value: &str, fields: &[&str]) -> Result<(), Abort> {
    sdk::set_string(o, value, fields).map_err(|_| die_at(fields))
}

/// `NestedStringOrDie`.
fn string_or_die(o: &Node, fields: &[&str]) -> Result<String, Abort> {
    let (v, _, err) = sdk::get_string(o, fields);
    if err {
        return Err(die_at(fields));
    }
    Ok(v)
}

fn transform(items: &mut [Node], config: &Config, ctx: &Context) -> Result<Vec<FnResult>, Abort> {
    let mut results = Vec::new();
    // Local resources are skipped.
    let objects: Vec<usize> = (0..items.len())
        .filter(|&i| items.get(i).is_some_and(|o| !sdk::is_local_config(o)))
        .collect();
    let depends_on: std::collections::HashSet<String> = objects
        .iter()
        .filter_map(|&i| items.get(i))
        .map(id_of)
        .filter(|id| id.namespace != UNKNOWN_NS)
        .map(|id| depends_on_key(&id))
        .collect();

    // ListAllOrigins.
    let mut origins: Vec<String> = Vec::new();
    for o in objects.iter().filter_map(|&i| items.get(i)) {
        if sdk::annotation(o, UPSTREAM).is_empty() {
            results.push(FnResult::warning(format!(
                "{} does not have upstream origin.",
                sdk::short_string(o)
            )));
            continue;
        }
        let origin = origin_of(o)?;
        if !sdk::is_namespace_scoped(o) {
            continue;
        }
        if origin.namespace == UNKNOWN_NS {
            return Ok(vec![FnResult::error(format!(
                "{} is namespace-scoped, but has cluster-scoped or unknown scoepd origin {}|{}|{}|{}",
                sdk::short_string(o),
                origin.group,
                origin.kind,
                origin.namespace,
                origin.name
            ))]);
        }
        insert_sorted(&mut origins, &origin.namespace);
    }
    let matcher = (!config.matcher.is_empty()).then_some(config.matcher.as_str());
    if matcher.is_none() && origins.len() > 1 {
        return Ok(vec![FnResult::error(format!(
            "unable to use origin `namespace` to match. expect a single upstream namespace, found {}. please switch to use `namespaceMatcher`to specify the namespace value you want to change",
            sdk::go_list(&origins)
        ))]);
    }

    let new_ns = config.namespace.as_str();
    let mut walk = Walk {
        new_ns,
        matcher,
        count: 0,
        old: Vec::new(),
        results: Vec::new(),
    };
    // The special cluster-scoped kinds, then the namespace-scoped ones.
    for &i in &objects {
        ctx.check().map_err(|_| Abort::Cancelled)?;
        let Some(o) = items.get_mut(i) else { continue };
        if sdk::is_namespace_scoped(o) {
            continue;
        }
        visit_cluster_scoped(o, &mut walk)?;
    }
    for &i in &objects {
        ctx.check().map_err(|_| Abort::Cancelled)?;
        let Some(o) = items.get_mut(i) else { continue };
        if !sdk::is_namespace_scoped(o) {
            continue;
        }
        let origin = origin_of(o)?.namespace;
        let id = sdk::short_string(o);
        let mut ns = sdk::namespace(o);
        walk.visit(&origin, &mut ns, Some(&id));
        set_or_panic(o, &ns, &["metadata", "namespace"], "namespace", &ns)?;
    }
    results.append(&mut walk.results);
    results.push(if walk.count == 0 {
        FnResult::info(format!(
            "all matching namespaces are already {}. no value changed",
            sdk::go_quote(new_ns)
        ))
    } else {
        FnResult::info(format!(
            "namespace {} updated to {}, {} value(s) changed",
            sdk::go_list(&walk.old),
            sdk::go_quote(new_ns),
            walk.count
        ))
    });

    // UpdateAnnotation.
    let pattern = namespaced_ref()?;
    let mut count = 0;
    let mut old: Vec<String> = Vec::new();
    for &i in &objects {
        let Some(o) = items.get_mut(i) else { continue };
        let anns = sdk::get_string_map(o, &["metadata", "annotations"]);
        let Some(value) = anns
            .iter()
            .find(|(k, _)| k == DEPENDS_ON)
            .map(|(_, v)| v.clone())
        else {
            continue;
        };
        if value.is_empty() || !pattern.is_match(&value) || !depends_on.contains(&value) {
            continue;
        }
        let mut segments: Vec<&str> = value.split('/').collect();
        let Some(seg_ns) = segments.get(2).copied() else {
            continue;
        };
        if seg_ns == new_ns {
            continue;
        }
        if matcher.is_some_and(|m| m != seg_ns) {
            continue;
        }
        insert_sorted(&mut old, seg_ns);
        if let Some(s) = segments.get_mut(2) {
            *s = new_ns;
        }
        count += 1;
        let new_value = segments.join("/");
        set_or_panic(
            o,
            &new_value,
            &["metadata", "annotations", DEPENDS_ON],
            "metadata annotations",
            DEPENDS_ON,
        )?;
    }
    results.push(if count == 0 {
        FnResult::info("all `depends-on` annotations are up-to-date. no `namespace` changed")
    } else {
        FnResult::info(format!(
            "`depends-on` annotation namespace {} updated to {}, {} value(s) changed",
            sdk::go_list(&old),
            sdk::go_quote(new_ns),
            count
        ))
    });
    Ok(results)
}

/// `VisitSpecialClusterResource` for one cluster-scoped resource.
fn visit_cluster_scoped(o: &mut Node, walk: &mut Walk<'_>) -> Result<(), Abort> {
    if sdk::is_gvk(o, "", "v1", "Namespace") {
        let origin = origin_of(o)?.name;
        let id = sdk::short_string(o);
        let mut name = sdk::name(o);
        walk.visit(&origin, &mut name, Some(&id));
        return set_or_panic(o, &name, &["metadata", "name"], "metadata name", &name);
    }
    let path: &[&str] = if sdk::is_gvk(o, "apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    {
        CRD_SERVICE_NS
    } else if sdk::is_gvk(o, "apiregistration.k8s.io", "v1", "APIService") {
        API_SERVICE_NS
    } else {
        &[]
    };
    if !path.is_empty() {
        let mut ns = string_or_die(o, path)?;
        walk.visit("", &mut ns, None);
        return set_or_die(o, &ns, path);
    }
    let kind = sdk::kind(o);
    if kind == "ClusterRoleBinding" || kind == "RoleBinding" {
        let Some(subjects) = slice_len(o, "subjects")? else {
            return Ok(());
        };
        let Some(i) = kyaml_index(o, "subjects") else {
            return Ok(());
        };
        for j in 0..subjects {
            let Some(s) = o.content.get_mut(i).and_then(|s| s.content.get_mut(j)) else {
                continue;
            };
            let (mut ns, found, _) = sdk::get_string(s, &["namespace"]);
            if !found {
                continue;
            }
            walk.visit("", &mut ns, None);
            set_or_die(s, &ns, &["namespace"])?;
        }
    }
    Ok(())
}

/// `GetSlice(key)`: how many elements the list `key` has (`None` when
/// there is no such field); the SDK dies unless it is a list of mappings.
fn slice_len(o: &Node, key: &str) -> Result<Option<usize>, Abort> {
    match sdk::get(o, &[key]) {
        Got::Missing => Ok(None),
        Got::Found(s)
            if s.kind == Kind::Sequence && s.content.iter().all(|e| e.kind == Kind::Mapping) =>
        {
            Ok(Some(s.content.len()))
        }
        _ => Err(die_at(&[key])),
    }
}

/// The index of the value of the SDK's field `name` in a mapping.
fn kyaml_index(o: &Node, name: &str) -> Option<usize> {
    o.content
        .chunks_exact(2)
        .position(|kv| {
            kv.first().is_some_and(|k| {
                k.kind == Kind::Scalar && (k.tag == "!!str" || k.tag.is_empty()) && k.value == name
            })
        })
        .map(|p| 2 * p + 1)
}
