#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::run;
use crate::test_support::{list_each, text};
use crate::{Context, Stop};

const CM: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  # the config
  name: cfg # short
  namespace: ns
data:
  k: v
";

const DEPLOY: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns
  annotations:
    config.kubernetes.io/depends-on: /namespaces/ns/ConfigMap/cfg
spec:
  template:
    spec:
      serviceAccountName: other
      volumes:
      - name: v
        configMap:
          name: cfg
      containers:
      - name: a
        envFrom:
        - configMapRef:
            name: cfg
";

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n";

#[test]
fn names_and_references_get_the_prefix() {
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  prepend: dev-\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: dev-\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: dev-\neditMode: prepend\n",
    ] {
        let mut rl = list_each(&[CM, DEPLOY, NS], Some(config));
        run(&mut rl, &Context::new()).unwrap();
        assert_eq!(
            text(&rl.items),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  # the config\n  name: dev-cfg # short\n  namespace: ns\ndata:\n  k: v\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dev-web\n  namespace: ns\n  annotations:\n    config.kubernetes.io/depends-on: /namespaces/ns/ConfigMap/dev-cfg\nspec:\n  template:\n    spec:\n      serviceAccountName: other\n      volumes:\n      - name: v\n        configMap:\n          name: dev-cfg\n      containers:\n      - name: a\n        envFrom:\n        - configMapRef:\n            name: dev-cfg\n---\n".to_owned() + NS,
            "{config}"
        );
        assert!(rl.results.is_empty());
    }
}

#[test]
fn append_and_names_that_already_have_it() {
    let mut rl = list_each(
        &[
            CM,
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s-prod\n",
        ],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  append: -prod\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  # the config\n  name: cfg-prod # short\n  namespace: ns\ndata:\n  k: v\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s-prod\n"
    );
    // additionalNameFields: a field of the kinds it names.
    let mut rl = list_each(
        &["apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-x\nspec:\n  selector:\n    app: web\n"],
        Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: -x\neditMode: append\nadditionalNameFields:\n- kind: Service\n  path: spec/selector/app\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-x\nspec:\n  selector:\n    app: web-x\n"
    );
}

#[test]
fn bad_configs_fail_with_the_catalog_s_messages() {
    let cases = [
        (None, "substring must not be empty"),
        (Some("{}"), "missing Resource metadata"),
        (
            Some("apiVersion: v1\nmetadata:\n  name: x\n"),
            "missing kind in object {{v1 } {{x } map[] map[]}}",
        ),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations: {b: '2', a: '1'}\n"),
            "missing metadata.name in object {{v1 ConfigMap} {{ } map[] map[a:1 b:2]}}",
        ),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  prepend: a\n  append: b\n"),
            "only 1 entry is allowed in the ConfigMap, but got: 2",
        ),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
            "only 1 entry is allowed in the ConfigMap, but got: 0",
        ),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  suffix: b\n"),
            "unknown editMode: suffix, only prepend and append are allowed",
        ),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  prepend: ''\n"),
            "substring must not be empty",
        ),
        (
            Some("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"),
            "function config must be either /v1, Kind=ConfigMap or fn.kpt.dev/v1alpha1, Kind=EnsureNameSubstring, but we got: apps/v1, Kind=Deployment",
        ),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: a\nfieldSpecs: []\nadditionalNameFields: []\n"),
            "`fieldSpecs` has been deprecated, please rename it to `additionalNameFields`",
        ),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: [a]\n"),
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field EnsureNameSubstring.substring of type string",
        ),
    ];
    for (config, message) in cases {
        let mut rl = list_each(&[CM], config);
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(format!(
                "failed to load the `functionConfig`: {message}"
            ))),
            "{config:?}"
        );
        assert_eq!(text(&rl.items), CM);
        assert!(rl.results.is_empty());
    }
}

#[test]
fn odd_items_never_panic() {
    let config =
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  prepend: p-\n");
    let items = [
        "- a\n",
        "x\n",
        "kind: Pod\nmetadata: 1\n",
        "kind: Pod\nmetadata:\n  name: [a]\n",
        "kind: Pod\nmetadata:\n  name: a\nspec:\n  volumes: 1\n  containers: [1, {envFrom: x}]\n",
        "kind: RoleBinding\nmetadata:\n  name: a\nroleRef: 1\nsubjects: x\n",
    ];
    let mut rl = list_each(&items, config);
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "- a\n---\nx\n---\nkind: Pod\nmetadata: 1\n---\nkind: Pod\nmetadata:\n  name: [a]\n---\nkind: Pod\nmetadata:\n  name: p-a\nspec:\n  volumes: 1\n  containers: [1, {envFrom: x}]\n---\nkind: RoleBinding\nmetadata:\n  name: p-a\nroleRef: 1\nsubjects: x\n"
    );
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rl = list_each(&[CM], config);
    assert_eq!(
        run(&mut rl, &Context::new().with_cancel(flag)),
        Err(Stop::Cancelled)
    );
}
