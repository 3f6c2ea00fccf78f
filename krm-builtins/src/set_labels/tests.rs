#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::run;
use crate::function::{Context, Stop};
use crate::test_support::{go, list, messages, nodes, out};

const FAILURE: &str = "failed to evaluate function: error: function failure";

const PACKAGE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: old # picked
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  annotations:
    config.kubernetes.io/local-config: "true"
---
# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: 'old'
spec:
  selector:
    matchLabels:
      app: old
  template:
    metadata:
      labels:
        app: old
    spec:
      containers:
      - name: c
        image: nginx
"#;

const EXPECTED: &str = r#"# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
    tier: "1"
spec:
  selector:
    matchLabels:
      app: web
      tier: "1"
  template:
    metadata:
      labels:
        app: web
        tier: "1"
    spec:
      containers:
        - name: c
          image: nginx
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  annotations:
    config.kubernetes.io/local-config: "true"
---
apiVersion: v1
kind: Service
metadata:
  name: web
  labels:
    app: web
    tier: "1"
spec:
  selector:
    app: web # picked
    tier: "1"
"#;

#[test]
fn every_config_form_sets_the_labels_and_their_selectors() {
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  tier: \"1\"\n  app: web\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  app: web\n  tier: 1\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: s\nlabels:\n  app: web\n  tier: \"1\"\n",
    ] {
        let mut rl = list(PACKAGE, Some(config));
        assert_eq!(go(run, &mut rl), Ok(()), "{config}");
        assert_eq!(out(&rl), EXPECTED, "{config}");
        assert_eq!(messages(&rl), ["info: set 10 labels in total"], "{config}");
    }
}

#[test]
fn missing_empty_and_bad_configs() {
    // No config: the SDK's info, then the catalog fails the run.
    for config in [
        None,
        Some("{}"),
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n"),
    ] {
        let mut rl = list(PACKAGE, config);
        assert_eq!(
            go(run, &mut rl),
            Err(Stop::Failed(FAILURE.into())),
            "{config:?}"
        );
        assert_eq!(messages(&rl), ["info: `FunctionConfig` is not given"]);
        assert!(out(&rl).contains("app: 'old'"));
    }
    // No resources (local ones do not count): nothing to do.
    let mut rl = list(
        "kind: A\nmetadata:\n  annotations:\n    config.kubernetes.io/local-config: yes-please\n",
        None,
    );
    assert_eq!(go(run, &mut rl), Ok(()));
    assert_eq!(
        messages(&rl),
        [
            "info: `FunctionConfig` is not given",
            "info: no input resources"
        ]
    );
    // A config without labels: a warning.
    let mut rl = list(
        PACKAGE,
        Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: s\n"),
    );
    assert_eq!(go(run, &mut rl), Ok(()));
    assert_eq!(
        messages(&rl),
        ["warning: no `labels` arguments are given in FunctionConfig"]
    );
    // Errors: a result and exit 1.
    for (config, msg) in [
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\n",
            "unknown FunctionConfig `SetAnnotations.fn.kpt.dev`, expect `SetLabels.fn.kpt.dev` or `ConfigMap.v1`",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\ndata: nope\n",
            "Resource(apiVersion=, kind=ConfigMap) has unmatched field type \"map[string]string\" in fieldpath .data",
        ),
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nlabels:\n  a: 1\n",
            "unable to convert object to *setlabels.SetLabels with error: json: cannot unmarshal number into Go struct field SetLabels.labels of type string",
        ),
        (
            // The first bad value in key order (Go decodes JSON made from
            // a map), not in the config's order.
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nlabels:\n  c: ok\n  b: 1\n  a: [x]\n  d: {e: f}\n",
            "unable to convert object to *setlabels.SetLabels with error: json: cannot unmarshal array into Go struct field SetLabels.labels of type string",
        ),
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nlabels:\n  z: {e: f}\n  y: ~\n  x: true\n",
            "unable to convert object to *setlabels.SetLabels with error: json: cannot unmarshal bool into Go struct field SetLabels.labels of type string",
        ),
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nlabels: [a]\n",
            "unable to convert object to *setlabels.SetLabels with error: json: cannot unmarshal array into Go struct field SetLabels.labels of type map[string]string",
        ),
    ] {
        let mut rl = list(PACKAGE, Some(config));
        assert_eq!(go(run, &mut rl), Err(Stop::Failed(FAILURE.into())), "{config}");
        assert_eq!(messages(&rl), [format!("error: {msg}")]);
    }
}

#[test]
fn the_other_workloads_and_odd_fields() {
    let config = Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  app: web\n");
    let items = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: np
spec:
  podSelector:
    matchLabels:
      app: old
  ingress:
  - from:
    - podSelector:
        matchLabels:
          app: old
    - podSelector: {}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  volumeClaimTemplates:
  - metadata:
      name: data
    spec: {}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: cj
spec:
  jobTemplate:
    spec:
      template:
        spec:
          affinity:
            podAffinity: {}
            requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  app: old
"#;
    let mut rl = list(items, config);
    assert_eq!(go(run, &mut rl), Ok(()));
    assert_eq!(
        out(&rl),
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  labels:
    app: web
spec:
  volumeClaimTemplates:
    - metadata:
        name: data
        labels:
          app: web
      spec: {}
  selector:
    matchLabels:
      app: web
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: cj
  labels:
    app: web
spec:
  jobTemplate:
    spec:
      template:
        spec:
          affinity:
            podAffinity: {}
            requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector:
                  matchLabels:
                    app: web
        metadata:
          labels:
            app: web
    metadata:
      labels:
        app: web
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: np
  labels:
    app: web
spec:
  podSelector:
    matchLabels:
      app: web
  ingress:
    - from:
        - podSelector:
            matchLabels:
              app: web
        - podSelector: {}
"#
    );
    // Counted: np 1+1+2 (two peers), db 1+1+1+1 (volume meta and
    // selector), cj 1+1+1(job selector)+1+1.
    assert_eq!(messages(&rl), ["info: set 13 labels in total"]);

    // A label of another type: an error result for that resource, the
    // others still done, exit 1.
    let mut rl = list(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    app: 1\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n",
        config,
    );
    assert_eq!(go(run, &mut rl), Err(Stop::Failed(FAILURE.into())));
    assert_eq!(
        messages(&rl),
        [
            "error: Resource(apiVersion=, kind=Pod) has unmatched field type \"string\" in fieldpath .metadata.labels.app",
            "info: set 1 labels in total",
        ]
    );
    assert!(out(&rl).ends_with("  name: b\n  labels:\n    app: web\n"));
    // A CronJob's jobTemplate without spec: the binary's nil dereference.
    let mut rl = list(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: c\nspec:\n  jobTemplate: {}\n",
        config,
    );
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed(
            "panic: runtime error: invalid memory address or nil pointer dereference".into()
        ))
    );
    // Scalars and nulls where maps are expected never panic.
    for item in [
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec: 5\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template: ~\n  selector: x\n",
        "apiVersion: v1\nkind: Service\nmetadata: []\n",
        "kind: X\nmetadata:\n  labels: ~\n",
    ] {
        let mut rl = list(item, config);
        let r = go(run, &mut rl);
        assert!(matches!(r, Ok(()) | Err(Stop::Failed(_))), "{item}");
    }
    let mut rl = list("- a\n", config);
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed(
            "failed to evaluate function: failed to extract objects from items: unhandled node kind 2".into()
        ))
    );
}

#[test]
fn a_cancelled_call_stops() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ctx = Context::new().with_cancel(flag);
    let config = Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  app: web\n");
    for f in [
        super::run,
        crate::set_namespace::run,
        crate::set_annotations::run,
        crate::remove_local_config_resources::run,
    ] {
        let mut rl = list(PACKAGE, config);
        // The namespace function reads `namespace`.
        rl.function_config = Some(
            nodes("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: n\n  app: web\n").remove(0),
        );
        assert_eq!(f(&mut rl, &ctx), Err(Stop::Cancelled));
    }
    for name in [
        "set-namespace",
        "set-labels",
        "set-annotations",
        "remove-local-config-resources",
    ] {
        assert!(crate::find(name).is_some(), "{name}");
    }
}
