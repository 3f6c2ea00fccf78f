#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::run;
use crate::function::Stop;
use crate::test_support::{go, list, out, results_yaml};

const PACKAGE: &str = r#"# the deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # its name
  annotations:
    team: 'old' # replaced: kyaml's FieldSetter drops the value's comment
    owner: me # kept
spec:
  template:
    spec:
      containers: []
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  annotations:
    config.kubernetes.io/local-config: "true"
    internal.config.kubernetes.io/path: cm.yaml
"#;

const EXPECTED: &str = r#"# the deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # its name
  annotations:
    team: 'a'
    owner: me # kept
    tier: "1"
spec:
  template:
    spec:
      containers: []
    metadata:
      annotations:
        team: a
        tier: "1"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  annotations:
    config.kubernetes.io/local-config: "true"
    internal.config.kubernetes.io/path: cm.yaml
    team: a
    tier: "1"
"#;

const RESULTS: &str = r#"- message: 'set annotations: {"team":"a","tier":"1"}'
  field:
    path: metadata.annotations
  file: {}
- message: 'set annotations: {"team":"a","tier":"1"}'
  field:
    path: spec.template.metadata.annotations
  file: {}
- message: 'set annotations: {"team":"a","tier":"1"}'
  field:
    path: metadata.annotations
  file:
    path: cm.yaml
"#;

#[test]
fn every_config_form_sets_the_annotations() {
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  tier: \"1\"\n  team: a\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  team: a\n  tier: 1\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\nmetadata:\n  name: s\nannotations:\n  team: a\n  tier: 1\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotationConfig\nannotations:\n  team: a\n  tier: '1'\n",
    ] {
        let mut rl = list(PACKAGE, Some(config));
        assert_eq!(go(run, &mut rl), Ok(()), "{config}");
        assert_eq!(out(&rl), EXPECTED, "{config}");
        assert_eq!(results_yaml(&rl.results), RESULTS, "{config}");
    }
}

#[test]
fn additional_fields_and_yaml_1_1_values() {
    let items = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  parts:\n  - name: a\n  - name: b\n    extra: ~\n";
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\nannotations:\n  on: yes\nadditionalAnnotationFields:\n- path: spec/parts/extra\n  kind: Widget\n  create: true\n";
    let mut rl = list(items, Some(config));
    assert_eq!(go(run, &mut rl), Ok(()));
    assert_eq!(
        out(&rl),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  annotations:\n    true: \"true\"\nspec:\n  parts:\n    - name: a\n      extra:\n        true: \"true\"\n    - name: b\n      extra:\n        true: \"true\"\n"
    );
    assert_eq!(
        results_yaml(&rl.results),
        "- message: 'set annotations: {\"true\":\"true\"}'\n  field:\n    path: extra\n  file: {}\n- message: 'set annotations: {\"true\":\"true\"}'\n  field:\n    path: metadata.annotations\n  file: {}\n"
    );
    // No items: nothing applied.
    let mut rl = list("", Some(config));
    rl.items.clear();
    assert_eq!(go(run, &mut rl), Ok(()));
    assert_eq!(
        results_yaml(&rl.results),
        "- message: no annotations applied\n"
    );
}

#[test]
fn bad_configs_and_items_fail_as_the_framework_does() {
    let cases: &[(Option<&str>, &str)] = &[
        (None, "failed to configure function: `functionConfig` must be a `ConfigMap` or `SetAnnotations`"),
        (
            Some("apiVersion: fn.kpt.dev/v1\nkind: SetAnnotations\n"),
            "failed to configure function: `functionConfig` must be a `ConfigMap` or `SetAnnotations`",
        ),
        (Some("apiVersion: v1\nkind: ConfigMap\n"), "failed to configure function: input annotation list cannot be empty"),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\nannotations: {a: b}\nfieldSpecs: []\nadditionalAnnotationFields: []\n"),
            "failed to configure function: `fieldSpecs` has been deprecated, please rename it to `additionalAnnotationFields`",
        ),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\nannotations:\n  a: [x]\n"),
            "failed to configure function: failed to unmarshal config \"apiVersion: fn.kpt.dev/v1alpha1\\nkind: SetAnnotations\\nannotations:\\n  a: [x]\\n\": error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field plugin.annotations of type string",
        ),
    ];
    for (config, msg) in cases {
        let mut rl = list(PACKAGE, *config);
        assert_eq!(
            go(run, &mut rl),
            Err(Stop::Failed(format!("[error]: {msg}"))),
            "{config:?}"
        );
        assert_eq!(
            results_yaml(&rl.results),
            format!(
                "- message: '{}'\n  severity: error\n",
                msg.replace('\'', "''")
            )
            .replace("\\n", "\\n"),
            "{config:?}"
        );
        // The items are written as they came.
        assert_eq!(out(&rl), PACKAGE);
    }
    let config = Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n");
    // Items kustomize refuses: the run fails and no items are written.
    for (items, msg) in [
        ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    x: y\n", "missing metadata.name in object {{v1 ConfigMap} {{ } map[x:y] map[]}}"),
        ("metadata:\n  name: x\n", "missing kind in object {{ } {{x } map[] map[]}}"),
        ("just: data\n", "missing Resource metadata"),
        ("- a\n", "missing Resource metadata"),
        (
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: default\n",
            "may not add resource with an already registered id: ~G_v1_Service|default|s",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec: 5\n",
            "failed to run transformer: considering field 'spec/template/metadata/annotations' of object\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n    a: b\nspec: 5\n: expected sequence or mapping node",
        ),
    ] {
        let mut rl = list(items, config);
        assert_eq!(
            go(run, &mut rl),
            Err(Stop::Failed(format!("[error]: failed to run function: {msg}"))),
            "{items}"
        );
        assert!(rl.items.is_empty());
        assert_eq!(rl.results.len(), 1);
    }
    // Empty items are dropped; an annotations field that is a scalar is
    // kyaml's error.
    let mut rl = list("{}\n---\nkind: A\nmetadata:\n  name: a\n", config);
    go(run, &mut rl).unwrap();
    assert_eq!(
        out(&rl),
        "kind: A\nmetadata:\n  name: a\n  annotations:\n    a: b\n"
    );
    let mut rl = list("kind: A\nmetadata:\n  name: a\n  annotations: x\n", config);
    assert!(
        matches!(go(run, &mut rl), Err(Stop::Failed(m)) if m.ends_with(": wrong node kind: expected MappingNode but got ScalarNode"))
    );
}

#[test]
fn config_decoding_errors_as_go_1_24_reports_them() {
    // The first error in key order (`json.Marshal` of a map sorts the
    // keys), named without map keys, an embedded struct by its Go name.
    let head = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\n";
    for (body, msg) in [
        (
            "annotations:\n  c: ok\n  b: [x]\n  a: {y: 1}\n",
            "cannot unmarshal object into Go struct field plugin.annotations of type string",
        ),
        (
            // `on` is the key "true", before "z".
            "annotations:\n  z: [x]\n  on: {y: 1}\n",
            "cannot unmarshal object into Go struct field plugin.annotations of type string",
        ),
        (
            "annotations:\n  a: [x]\nadditionalAnnotationFields: x\n",
            "cannot unmarshal string into Go struct field plugin.additionalAnnotationFields of type []types.FieldSpec",
        ),
        (
            "annotations:\n  a: [x]\nresults: {}\n",
            "cannot unmarshal array into Go struct field plugin.annotations of type string",
        ),
        (
            "annotations: {a: b}\nresults: 1\n",
            "cannot unmarshal number into Go struct field plugin.Results of type main.AnnotationResults",
        ),
        (
            "annotations: {a: b}\nfieldSpecs: [{path: 1, group: 2}]\n",
            "cannot unmarshal number into Go struct field FieldSpec.fieldSpecs.Gvk.group of type string",
        ),
        (
            "annotations: {a: b}\nfieldSpecs: [{path: 1, version: true}]\n",
            "cannot unmarshal bool into Go struct field FieldSpec.fieldSpecs.Gvk.version of type string",
        ),
        (
            "annotations: {a: b}\nfieldSpecs: [{Path: [1], path: a}]\n",
            "cannot unmarshal array into Go struct field FieldSpec.fieldSpecs.path of type string",
        ),
        (
            "annotations: {a: b}\nfieldSpecs: [{path: [1], group: 2, create: x}]\n",
            "cannot unmarshal string into Go struct field FieldSpec.fieldSpecs.create of type bool",
        ),
        (
            "annotations: {a: b}\nadditionalAnnotationFields: [{create: 1}]\n",
            "cannot unmarshal number into Go struct field FieldSpec.additionalAnnotationFields.create of type bool",
        ),
        (
            "annotations: {a: b}\nfieldSpecs: [1]\n",
            "cannot unmarshal number into Go struct field plugin.fieldSpecs of type types.FieldSpec",
        ),
        (
            "annotations: [a]\n",
            "cannot unmarshal array into Go struct field plugin.annotations of type map[string]string",
        ),
    ] {
        let config = format!("{head}{body}");
        let mut rl = list(PACKAGE, Some(&config));
        let msg = format!(
            "failed to configure function: failed to unmarshal config {}: error unmarshaling JSON: while decoding JSON: json: {msg}",
            crate::sdk::go_quote(&config)
        );
        assert_eq!(
            go(run, &mut rl),
            Err(Stop::Failed(format!("[error]: {msg}"))),
            "{body}"
        );
        assert_eq!(out(&rl), PACKAGE);
    }
    // What decodes: a repeated key's last value, names in any case (a
    // map merged, null making it nil), strings where Go takes them.
    for (body, annotations) in [
        ("annotations:\n  a: [x]\n  a: y\n", "a: \"true\""),
        ("Annotations: {a: b}\nannotations: {c: d}\n", "a: b\n    c: d"),
        (
            "annotations: {a: b}\nresults: ~\nfieldSpecs: [{kind: 2001-12-14, version: '1', path: 3, create: yes}]\n",
            "a: b",
        ),
    ] {
        let config = format!("{head}{body}");
        let mut rl = list("kind: A\nmetadata:\n  name: a\n", Some(&config));
        assert_eq!(go(run, &mut rl), Ok(()), "{body}");
        assert_eq!(
            out(&rl),
            format!("kind: A\nmetadata:\n  name: a\n  annotations:\n    {annotations}\n"),
            "{body}"
        );
    }
    let config = format!("{head}ANNOTATIONS: {{a: b}}\nannotations: ~\n");
    let mut rl = list(PACKAGE, Some(&config));
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed(
            "[error]: failed to configure function: input annotation list cannot be empty".into()
        ))
    );
}
