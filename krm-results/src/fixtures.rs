//! Inputs and expected results shared by the tests of `results`.

use std::collections::BTreeMap;

use super::model::{Field, File, FnResult, ResourceRef, Severity};
use super::output::OutputError;
use super::parse_output;

pub(super) fn ok(input: &str) -> Vec<FnResult> {
    match parse_output(input.as_bytes()) {
        Ok(out) => out.results,
        Err(e) => panic!("parse_output failed: {e}\ninput:\n{input}"),
    }
}

pub(super) fn err(input: &str) -> OutputError {
    match parse_output(input.as_bytes()) {
        Ok(out) => panic!("parse_output accepted {input:?}: {out:?}"),
        Err(e) => e,
    }
}

/// A YAML value, as written.
pub(super) fn yaml(text: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(text).expect("a YAML value")
}

pub(super) fn result(severity: Severity, message: &str) -> FnResult {
    FnResult {
        message: message.to_owned(),
        severity,
        ..FnResult::default()
    }
}

pub(super) fn rref(
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<ResourceRef> {
    Some(ResourceRef {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

const DEPLOYMENT_ITEM: &str = "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app
    namespace: prod
    annotations:
      config.kubernetes.io/index: '0'
  spec:
    replicas: 3
    template:
      spec:
        containers:
        - name: main
          image: example.com/app:v1
          args: [\"--port\", \"8080\"]
";

pub(super) const SPEC_SHAPE: &str = "\
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app
    namespace: prod
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  data: {minReplicas: '2'}
results:
- message: replicas too low
  severity: error
  resourceRef:
    apiVersion: apps/v1
    kind: Deployment
    name: app
    namespace: prod
  field:
    path: spec.replicas
    currentValue: 1
    proposedValue: 2
  file:
    path: deploy/app.yaml
    index: 0
  tags:
    rule: min-replicas
    level: 3
- message: just so you know
  severity: info
";

pub(super) fn spec_shape_expected() -> Vec<FnResult> {
    vec![
        FnResult {
            message: "replicas too low".into(),
            severity: Severity::Error,
            resource_ref: rref("apps/v1", "Deployment", "prod", "app"),
            field: Some(Field {
                path: "spec.replicas".into(),
                current_value: Some(yaml("1")),
                proposed_value: Some(yaml("2")),
            }),
            file: Some(File {
                path: "deploy/app.yaml".into(),
                index: 0,
            }),
            tags: BTreeMap::from([
                ("level".to_owned(), "3".to_owned()),
                ("rule".to_owned(), "min-replicas".to_owned()),
            ]),
        },
        result(Severity::Info, "just so you know"),
    ]
}

pub(super) const SPEC_SHAPE_JSON: &str = r#"{
  "apiVersion": "config.kubernetes.io/v1",
  "kind": "ResourceList",
  "items": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app", "namespace": "prod"}}],
  "functionConfig": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"minReplicas": "2"}},
  "results": [
    {"message": "replicas too low", "severity": "error",
     "resourceRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app", "namespace": "prod"},
     "field": {"path": "spec.replicas", "currentValue": 1, "proposedValue": 2},
     "file": {"path": "deploy/app.yaml", "index": 0},
     "tags": {"rule": "min-replicas", "level": 3}},
    {"message": "just so you know", "severity": "info"}
  ]
}
"#;

pub(super) const VARIANTS: &str = "\
apiVersion: config.kubernetes.io/v1alpha1
kind: ResourceList
items: []
results:
- message: a warn
  severity: warn
- message: shouting
  severity: WARNING
- message: mixed case
  severity: Info
- message: no severity
- message: null severity
  severity: null
- message: odd severity
  severity: fatal
- name: legacy-validator
  items:
  - message: legacy one
    severity: warning
    resourceRef:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: cm
        namespace: default
    field:
      path: data.key
      currentValue: {a: [1, 2]}
      suggestedValue: fixed
    file:
      path: cm.yaml
  - message: legacy two
    extra: ignored
- message: field as string
  field: spec.template
  resourceRef:
    apiVersion: v1
    kind: Namespace
    name: team
    unknown: [1, 2, 3]
  somethingElse: {x: y}
";

pub(super) fn variants_expected() -> Vec<FnResult> {
    vec![
        result(Severity::Other("warn".into()), "a warn"),
        result(Severity::Other("WARNING".into()), "shouting"),
        result(Severity::Other("Info".into()), "mixed case"),
        result(Severity::Unset, "no severity"),
        result(Severity::Unset, "null severity"),
        result(Severity::Other("fatal".into()), "odd severity"),
        FnResult {
            message: "legacy one".into(),
            severity: Severity::Warning,
            resource_ref: rref("v1", "ConfigMap", "default", "cm"),
            field: Some(Field {
                path: "data.key".into(),
                current_value: Some(yaml("{a: [1, 2]}")),
                proposed_value: Some(yaml("fixed")),
            }),
            file: Some(File {
                path: "cm.yaml".into(),
                index: 0,
            }),
            tags: BTreeMap::new(),
        },
        result(Severity::Unset, "legacy two"),
        FnResult {
            message: "field as string".into(),
            severity: Severity::Unset,
            resource_ref: rref("v1", "Namespace", "", "team"),
            field: Some(Field {
                path: "spec.template".into(),
                ..Field::default()
            }),
            ..FnResult::default()
        },
    ]
}

pub(super) const NO_RESULTS: [&str; 4] = [
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults: null\n",
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\nresults: []\n",
    "{\"apiVersion\":\"config.kubernetes.io/v1\",\"kind\":\"ResourceList\",\"items\":[],\"results\":null}",
];

pub(super) fn big_list(n: usize, results: &str) -> String {
    let mut s = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for i in 0..n {
        s.push_str(&DEPLOYMENT_ITEM.replace("name: app", &format!("name: app-{i}")));
    }
    s.push_str(results);
    s
}
