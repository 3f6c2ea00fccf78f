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
            "failed to configure function: failed to unmarshal config \"apiVersion: fn.kpt.dev/v1alpha1\\nkind: SetAnnotations\\nannotations:\\n  a: [x]\\n\": error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field plugin.annotations.a of type string",
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
