use serde_json::{json, Value};

use crate::crd::*;
use runner_core::config::parse_str;
use runner_core::config::test_support::*;

const COMMITTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/functionconfig-crd.yaml"
);

#[test]
fn the_committed_crd_is_the_generated_one() {
    let generated = crd_yaml().unwrap();
    // Never under CI: there the test must judge the committed file.
    if std::env::var_os("UPDATE_CRD").is_some() && std::env::var_os("CI").is_none() {
        std::fs::write(COMMITTED, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == generated,
        "deploy/functionconfig-crd.yaml is not what the types generate; regenerate it with\n  \
         {REGENERATE}\n(or UPDATE_CRD=1 cargo test -p runner-kube the_committed_crd)"
    );
}

/// Every node says what it holds, as a structural schema must, and nothing
/// apiextensions.k8s.io/v1 rejects or would act on unasked is left.
#[test]
fn the_schema_is_structural() {
    fn walk(node: &Value, path: &str) {
        let map = node
            .as_object()
            .unwrap_or_else(|| panic!("{path}: not an object"));
        assert!(map.contains_key("type"), "{path}: no type: {node}");
        for key in [
            "$ref",
            "anyOf",
            "oneOf",
            "allOf",
            "additionalProperties",
            "nullable",
            "default",
            "title",
            "$schema",
        ] {
            assert!(!map.contains_key(key), "{path}: has {key}: {node}");
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, property) in properties {
                walk(property, &format!("{path}.{name}"));
            }
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{path}[]"));
        }
    }
    walk(&schema(), "");
}

/// The paths (`a.b[].c`) and types of every value in a document.
fn value_paths(value: &Value, path: &str, out: &mut Vec<(String, &'static str)>) {
    let kind = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    };
    out.push((path.to_string(), kind));
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                value_paths(value, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for item in items {
                value_paths(item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// The paths and types a schema declares, down to its free-form objects.
fn schema_paths(schema: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let kind = schema["type"].as_str().unwrap_or_default().to_string();
    out.push((path.to_string(), kind));
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            schema_paths(property, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_paths(items, &format!("{path}[]"), out);
    }
}

/// A spec with every field set, serialised by the type itself.
fn every_field() -> Value {
    let config = config(
        "everything",
        r#"image: set-namespace
prefixes: ["", example.com/mirror]
binaryExecutor:
  tags: [v1]
  path: /opt/fns/set-namespace
  prespawn: 1
podExecutor:
  tags: [v2]
  timeToLive: 45m
  maxParallelExecutions: 3
  preferredMaxQueueLength: 5
  prespawn: 2
  pidsLimit: 256
  idlePods: 2
  singleUse: true
  templateOverrides:
    serviceAccountName: fn-sa
    securityContext: {runAsNonRoot: true}
    container:
      resources: {limits: {memory: 64Mi}}
      env: [{name: A, value: b}]
      envFrom: [{configMapRef: {name: c}}]
    initContainer:
      resources: {limits: {memory: 64Mi}}
      env: [{name: A, value: b}]
      envFrom: [{configMapRef: {name: c}}]
goExecutor:
  tags: [v3]
  id: set-namespace
"#,
    );
    serde_json::to_value(&config.spec).unwrap()
}

/// One source of truth: the schema declares exactly the fields the types
/// serialise, with the same JSON types, down to the free-form objects.
#[test]
fn the_schema_has_exactly_the_fields_of_the_types() {
    let spec_schema = &schema()["properties"]["spec"];
    let mut declared = Vec::new();
    schema_paths(spec_schema, "spec", &mut declared);
    let mut written = Vec::new();
    value_paths(&every_field(), "spec", &mut written);
    let free_form = |path: &str| {
        declared.iter().any(|(p, _)| {
            path.starts_with(p.as_str())
                && path.len() > p.len()
                && schema_at(spec_schema, p)["x-kubernetes-preserve-unknown-fields"] == true
        })
    };
    for (path, kind) in &written {
        if free_form(path) {
            continue;
        }
        let found = declared.iter().find(|(p, _)| p == path);
        assert_eq!(
            found.map(|(_, k)| k.as_str()),
            Some(*kind),
            "{path}: the types write a {kind}; the schema says {found:?}"
        );
    }
    for (path, _) in &declared {
        assert!(
            written.iter().any(|(p, _)| p == path),
            "{path}: in the schema but not in the types"
        );
    }
}

/// The schema node at a `spec.a.b[]` path.
fn schema_at<'a>(root: &'a Value, path: &str) -> &'a Value {
    let mut node = root;
    for part in path.split('.').skip(1) {
        let (name, items) = match part.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (part, false),
        };
        node = &node["properties"][name];
        if items {
            node = &node["items"];
        }
    }
    node
}

/// What the API server checks of a value against a structural schema: JSON
/// types, integer bounds; `null` is dropped (the schema is not nullable) and
/// unknown fields are pruned, not rejected.
fn admit(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    if value.is_null() {
        return Ok(());
    }
    let want = schema["type"].as_str().unwrap_or_default();
    let ok = match want {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !ok {
        return Err(format!("{path}: must be of type {want}"));
    }
    if let Some(n) = value.as_f64() {
        if schema["minimum"].as_f64().is_some_and(|min| n < min)
            || schema["maximum"].as_f64().is_some_and(|max| n > max)
        {
            return Err(format!("{path}: out of range"));
        }
    }
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return Ok(());
    }
    if let (Value::Object(map), Some(Value::Object(properties))) = (value, schema.get("properties"))
    {
        for (key, value) in map {
            if let Some(property) = properties.get(key) {
                admit(value, property, &format!("{path}.{key}"))?;
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for item in items {
            admit(item, item_schema, &format!("{path}[]"))?;
        }
    }
    Ok(())
}

/// The API server (by the schema) and the runner's parser agree on shapes:
/// what one rejects for its type, the other does too. (Semantics, such as
/// a tag's characters, are the parser's alone; and the parser, reading
/// files, also takes an unquoted scalar for a string field, while JSON from
/// the API server is typed strictly.)
#[test]
fn the_schema_and_the_parser_agree_on_shapes() {
    let root = schema();
    let fixture = include_str!("../../../runner-core/tests/fixtures/config/set-namespace.yaml");
    let mut accepted: Vec<String> = fixture
        .split("\n---\n")
        .filter(|d| d.contains("FunctionConfig"))
        .map(String::from)
        .collect();
    accepted.push(doc(
        "nulls",
        "image: fn\nprefixes: null\nbinaryExecutor:\n  tags: [v1]\n  path: /f\npodExecutor: null\n",
    ));
    let rejected = [
        "image: [fn]\n",
        "image: fn\nprefixes: example.com\n",
        "image: fn\nbinaryExecutor:\n  tags: v1\n  path: /f\n",
        "image: fn\nbinaryExecutor: [v1]\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: -1\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: 1.5\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: 4294967296\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  preferredMaxQueueLength: \"2\"\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: [30m]\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    securityContext: restricted\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    container:\n      resources: [64Mi]\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    container:\n      env: [A=b]\n",
        "image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    initContainer:\n      envFrom: {configMapRef: {name: c}}\n",
        "image: fn\ngoExecutor:\n  tags: [v1]\n  id: {name: x}\n",
    ]
    .map(|spec| doc("bad", spec));
    for (text, want_ok) in accepted
        .iter()
        .map(|t| (t, true))
        .chain(rejected.iter().map(|t| (t, false)))
    {
        let value: Value = serde_yaml_ng::from_str(text).unwrap();
        let by_schema = admit(&value, &root, "");
        let report = parse_str(text, "case.yaml");
        assert_eq!(
            by_schema.is_ok(),
            want_ok,
            "schema on\n{text}\n{by_schema:?}"
        );
        assert_eq!(
            report.is_clean(),
            want_ok,
            "parser on\n{text}\n{:?}",
            error_strings(&report)
        );
    }
}

#[test]
fn the_crd_names_porchs_resource() {
    let crd = serde_json::to_value(crd().unwrap()).unwrap();
    assert_eq!(crd["metadata"]["name"], CRD_NAME);
    let spec = &crd["spec"];
    assert_eq!(spec["group"], "config.porch.kpt.dev");
    assert_eq!(spec["scope"], "Namespaced");
    assert_eq!(
        spec["names"],
        json!({"kind": "FunctionConfig", "listKind": "FunctionConfigList", "plural": "functionconfigs", "singular": "functionconfig"})
    );
    let version = &spec["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"], json!({"status": {}}));
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"], true);
    // The status fields of Porch's own CRD, so that either CRD serves both.
    let status = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
    for field in [
        "apiServerObservedGeneration",
        "functionRunnerObservedGeneration",
        "controllerObservedGeneration",
        "error",
    ] {
        assert!(status.get(field).is_some(), "status.{field}");
    }
}

#[test]
fn descriptions_read_as_text() {
    assert_eq!(
        plain_description("Resolved ([`load_dir`](super::load_dir)) or\n[`x`](y).\n\nNext."),
        "Resolved (`load_dir`) or `x`.\n\nNext."
    );
    assert_eq!(plain_description("a [`b` c"), "a [`b` c");
}
