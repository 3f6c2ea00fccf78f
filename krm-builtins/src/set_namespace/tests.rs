#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use krm_yaml::emit;

use super::run;
use crate::function::{Context, ResourceList, Stop};
use crate::test_support::{go, list, messages, out};

const PACKAGE: &str = r#"# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: 'old' # was here
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: svc
---
apiVersion: v1
kind: Namespace
metadata:
  name: old
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  conversion:
    webhook:
      clientConfig:
        service:
          name: hook
          namespace: old
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: crb
subjects:
- kind: ServiceAccount
  name: sa
  namespace: old
- kind: User
  name: jane
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: old
  annotations:
    config.kubernetes.io/local-config: "true"
"#;

#[test]
fn a_config_map_sets_every_namespace_and_keeps_comments() {
    let mut rl = list(
        PACKAGE,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  namespace: new\n"),
    );
    go(run, &mut rl).unwrap();
    assert_eq!(
        out(&rl),
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  conversion:
    webhook:
      clientConfig:
        service:
          name: hook
          namespace: new
---
# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: new # was here
spec:
  replicas: 1
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: crb
subjects:
  - kind: ServiceAccount
    name: sa
    namespace: new
  - kind: User
    name: jane
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: old
  annotations:
    config.kubernetes.io/local-config: "true"
---
apiVersion: v1
kind: Namespace
metadata:
  name: new
---
apiVersion: v1
kind: Service
metadata:
  name: svc
  namespace: new
"#
    );
    assert_eq!(
        messages(&rl),
        [
            "warning: Resource(apiVersion=apps/v1, kind=Deployment, namespace=old, name=app) does not have upstream origin.",
            "warning: Resource(apiVersion=v1, kind=Service, namespace=, name=svc) does not have upstream origin.",
            "warning: Resource(apiVersion=v1, kind=Namespace, namespace=, name=old) does not have upstream origin.",
            "warning: Resource(apiVersion=apiextensions.k8s.io/v1, kind=CustomResourceDefinition, namespace=, name=widgets.example.com) does not have upstream origin.",
            "warning: Resource(apiVersion=rbac.authorization.k8s.io/v1, kind=ClusterRoleBinding, namespace=, name=crb) does not have upstream origin.",
            "info: namespace [default old] updated to \"new\", 5 value(s) changed",
            "info: all `depends-on` annotations are up-to-date. no `namespace` changed",
        ]
    );
}

#[test]
fn a_matcher_changes_only_its_namespace_and_the_depends_on_that_follow() {
    let items = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: one
  annotations:
    config.kubernetes.io/depends-on: /namespaces/one/ConfigMap/b
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  namespace: one
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: two
  annotations:
    config.kubernetes.io/depends-on: /namespaces/two/ConfigMap/x # not in the package
"#;
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nmetadata:\n  name: s\nnamespace: three\nnamespaceMatcher: one\n";
    let mut rl = list(items, Some(config));
    go(run, &mut rl).unwrap();
    assert_eq!(
        out(&rl),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: three
  annotations:
    config.kubernetes.io/depends-on: /namespaces/three/ConfigMap/b
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  namespace: three
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: two
  annotations:
    config.kubernetes.io/depends-on: /namespaces/two/ConfigMap/x # not in the package
"#
    );
    assert_eq!(
        messages(&rl)[3..],
        [
            "info: [Resource(apiVersion=v1, kind=ConfigMap, namespace=one, name=a)] has matching origin one",
            "info: [Resource(apiVersion=v1, kind=ConfigMap, namespace=one, name=b)] has matching origin one",
            "info: namespace [one] updated to \"three\", 2 value(s) changed",
            "info: `depends-on` annotation namespace [one] updated to \"three\", 1 value(s) changed",
        ]
    );
}

#[test]
fn upstream_origins_are_matched_and_reported() {
    let items = r#"apiVersion: v1
kind: Service
metadata:
  name: s
  namespace: edited
  annotations:
    internal.kpt.dev/upstream-identifier: '|Service|base|s'
"#;
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nnamespace: n\nnamespaceMatcher: base\n";
    let mut rl = list(items, Some(config));
    go(run, &mut rl).unwrap();
    assert!(out(&rl).contains("  namespace: n\n"), "{}", out(&rl));
    assert_eq!(
        messages(&rl),
        [
            "info: [Resource(apiVersion=v1, kind=Service, namespace=edited, name=s)] has matching origin base",
            "info: namespace [edited] updated to \"n\", 1 value(s) changed",
            "info: all `depends-on` annotations are up-to-date. no `namespace` changed",
        ]
    );
    // Two origins and no matcher: one error, nothing changed.
    let two = format!(
        "{items}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: t\n  annotations:\n    internal.kpt.dev/upstream-identifier: '|Service|other|t'\n"
    );
    let mut rl = list(
        &two,
        Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: n\n"),
    );
    go(run, &mut rl).unwrap();
    assert!(out(&rl).contains("namespace: edited"));
    assert_eq!(
        messages(&rl),
        ["error: unable to use origin `namespace` to match. expect a single upstream namespace, found [base other]. please switch to use `namespaceMatcher`to specify the namespace value you want to change"]
    );
    // A bad upstream identifier: the SDK's recovered panic, exit 1.
    let bad = items.replace("'|Service|base|s'", "nope");
    let mut rl = list(
        &bad,
        Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: n\n"),
    );
    let msg = "annotation internal.kpt.dev/upstream-identifier: nope is in bad format. expect \"<GROUP>|<KIND>|<NAMESPACE>|<NAME>\"";
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed(format!("failed to evaluate function: {msg}")))
    );
    assert_eq!(messages(&rl), [format!("error: {msg}")]);
}

#[test]
fn package_context_and_function_input_config_maps() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: example\n";
    // kpt's package context: data.name under the name kptfile.kpt.dev.
    let ctx = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kptfile.kpt.dev\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  name: my-pkg\n";
    let mut rl = list(items, Some(ctx));
    go(run, &mut rl).unwrap();
    assert_eq!(
        out(&rl),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: my-pkg\n"
    );
    // The same data under another name is not a namespace.
    let mut rl = list(items, Some(&ctx.replace("kptfile.kpt.dev", "other")));
    go(run, &mut rl).unwrap();
    assert_eq!(
        messages(&rl),
        ["error: `data.namespace` should not be empty"]
    );
    // kptfile.kpt.dev without data.name: the catalog's message is the
    // `data.namespace` one too.
    let mut rl = list(
        items,
        Some(&ctx.replace("  name: my-pkg\n", "  other: x\n")),
    );
    go(run, &mut rl).unwrap();
    assert_eq!(
        messages(&rl),
        ["error: `data.namespace` should not be empty"]
    );
    // `kpt fn eval -- namespace=x`.
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  namespace: x\n";
    let mut rl = list(items, Some(input));
    go(run, &mut rl).unwrap();
    assert!(out(&rl).ends_with("  namespace: x\n"));
    assert_eq!(
        messages(&rl)[1..],
        [
            "info: namespace [example] updated to \"x\", 1 value(s) changed",
            "info: all `depends-on` annotations are up-to-date. no `namespace` changed",
        ]
    );
}

#[test]
fn bad_configs_are_error_results_on_the_config() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: a\n";
    let cases: &[(Option<&str>, &str)] = &[
        (None, "FunctionConfig is missing. Expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`"),
        (Some("{}"), "FunctionConfig is missing. Expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`"),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: x\n"),
            "unknown functionConfig Kind=SetLabels ApiVersion=fn.kpt.dev/v1alpha1, expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`",
        ),
        (Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\n"), "`namespace` should not be empty"),
        (Some("apiVersion: v1\nkind: ConfigMap\ndata: ~\n"), "`data.namespace` should not be empty"),
    ];
    for (config, msg) in cases {
        let mut rl = list(items, *config);
        assert_eq!(go(run, &mut rl), Ok(()), "{config:?}");
        assert_eq!(out(&rl), items, "{config:?}");
        assert_eq!(messages(&rl), [format!("error: {msg}")], "{config:?}");
    }
    // The result names the config and where it came from.
    let mut rl = list(
        items,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    internal.config.kubernetes.io/path: fn.yaml\n"),
    );
    go(run, &mut rl).unwrap();
    assert_eq!(
        emit::encode_node(&crate::result::to_node(&rl.results[0]), false),
        "message: '`data.namespace` should not be empty'\nseverity: error\nresourceRef:\n  apiVersion: v1\n  kind: ConfigMap\n  name: c\nfile:\n  path: fn.yaml\n  index: -1\n"
    );
    // Values the SDK cannot decode into its struct: exit 1.
    for config in [
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: {a: b}\n",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: 1\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nnamespace: [x]\n",
    ] {
        let mut rl = list(items, Some(config));
        assert_eq!(
            go(run, &mut rl),
            Err(Stop::Failed(
                "failed to evaluate function: SubObject has unmatched field type: `".into()
            )),
            "{config}"
        );
        assert_eq!(
            messages(&rl),
            ["error: SubObject has unmatched field type: `"]
        );
    }
}

#[test]
fn odd_items_never_panic() {
    let config = Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: n\n");
    let mut rl = list("- a\n---\nkind: X\n", config);
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed(
            "failed to evaluate function: failed to extract objects from items: unhandled node kind 2".into()
        ))
    );
    let mut rl = list("kind: X\n", Some("just a scalar"));
    assert!(matches!(go(run, &mut rl), Err(Stop::Failed(m)) if m.contains("functionConfig")));
    // metadata that is not a mapping: the SDK's setter fails, a Go panic.
    let mut rl = list("apiVersion: v1\nkind: ConfigMap\nmetadata: x\n", config);
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed("panic: cannot set namespace 'n': unable to set n at fields [metadata namespace] with error: incorrect type, was *internal.scalarVariant".into()))
    );
    // Fields of other types: a CRD's service namespace that is a map.
    let mut rl = list(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: c\nspec:\n  conversion: 5\n",
        config,
    );
    assert_eq!(
        go(run, &mut rl),
        Err(Stop::Failed("failed to evaluate function: SubObject has unmatched field type: `spec/conversion/webhook/clientConfig/service/namespace".into()))
    );
    // Nulls and numbers where strings are expected read as "".
    let mut rl = list(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: ~\n  namespace: 7\n  annotations: ~\n",
        config,
    );
    go(run, &mut rl).unwrap();
    assert_eq!(
        out(&rl),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: ~\n  namespace: n\n  annotations: ~\n"
    );
}

// Releases v0.4.0 and v0.4.1 (`set_namespace/v04.rs`).

/// Runs the function as the release `release` answers.
fn go_as(release: &'static str, rl: &mut ResourceList) -> Result<(), Stop> {
    run(rl, &Context::new().with_release(Some(release)))
}

const NS_CONFIG: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  namespace: store\n";

/// After the catalog's `examples/set-namespace-simple` at v0.4.x, with a
/// CRD without a webhook and a Deployment without a namespace.
const SIMPLE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop # the shop
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: carts.example.com
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: cart-hook
          namespace: shop
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: plain.example.com
spec:
  group: example.com
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.metrics.example.com
spec:
  service:
    name: metrics
    namespace: shop
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: readers
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: shop
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: shop
  annotations:
    config.kubernetes.io/local-config: "true"
"#;

#[test]
fn v04_replaces_every_namespace_field_that_differs_also_missing_ones() {
    for release in ["v0.4.0", "v0.4.1"] {
        let mut rl = list(SIMPLE, Some(NS_CONFIG));
        assert_eq!(go_as(release, &mut rl), Ok(()), "{release}");
        assert_eq!(out(&rl), SIMPLE_OUT, "{release}");
        assert_eq!(
            messages(&rl),
            ["info: namespace \"\",\"shop\" updated to \"store\", 7 value(s) changed"],
            "{release}"
        );
    }
    // Master counts differently: origins, `default` for "", two results.
    let mut rl = list(SIMPLE, Some(NS_CONFIG));
    go(run, &mut rl).unwrap();
    assert!(messages(&rl)
        .iter()
        .any(|m| m.contains("does not have upstream origin")));
}

/// Every field visited, the CRD without a webhook given one; the local
/// ConfigMap left alone; sorted as the SDK writes items.
const SIMPLE_OUT: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: carts.example.com
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: cart-hook
          namespace: store
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: plain.example.com
spec:
  group: example.com
  conversion:
    webhook:
      clientConfig:
        service:
          namespace: store
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.metrics.example.com
spec:
  service:
    name: metrics
    namespace: store
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: store
spec:
  replicas: 1
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: readers
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: store
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: shop
  annotations:
    config.kubernetes.io/local-config: "true"
---
apiVersion: v1
kind: Namespace
metadata:
  name: store
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: store # the shop
"#;

#[test]
fn v04_depends_on_keys_by_group_kind_name() {
    let items = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: wordpress
  namespace: default
  annotations:
    config.kubernetes.io/depends-on: apps/namespaces/default/StatefulSet/mysql
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: mysql
  namespace: default
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: bar
  namespace: default
  annotations:
    config.kubernetes.io/depends-on: apps/namespaces/default/StatefulSet/elsewhere
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
---
apiVersion: v1
kind: Secret
metadata:
  name: core-ref
  namespace: default
  annotations:
    config.kubernetes.io/depends-on: /namespaces/default/ConfigMap/settings
---
apiVersion: v1
kind: Secret
metadata:
  name: v1-ref
  namespace: default
  annotations:
    config.kubernetes.io/depends-on: v1/namespaces/default/ConfigMap/settings
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: read-secrets
  annotations:
    config.kubernetes.io/depends-on: rbac.authorization.k8s.io/ClusterRole/secret-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: secret-reader
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: admin
"#;
    let config =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  namespace: example-ns\n";
    let mut rl = list(items, Some(config));
    go_as("v0.4.1", &mut rl).unwrap();
    // A reference into the package follows; one outside it does not, nor
    // does the core group's (its key is `v1/ConfigMap/settings`).
    assert_eq!(
        out(&rl),
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: bar
  namespace: example-ns
  annotations:
    config.kubernetes.io/depends-on: apps/namespaces/default/StatefulSet/elsewhere
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: wordpress
  namespace: example-ns
  annotations:
    config.kubernetes.io/depends-on: apps/namespaces/example-ns/StatefulSet/mysql
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: mysql
  namespace: example-ns
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: read-secrets
  annotations:
    config.kubernetes.io/depends-on: rbac.authorization.k8s.io/ClusterRole/secret-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: secret-reader
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: Group
    name: admin
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: example-ns
---
apiVersion: v1
kind: Secret
metadata:
  name: core-ref
  namespace: example-ns
  annotations:
    config.kubernetes.io/depends-on: /namespaces/default/ConfigMap/settings
---
apiVersion: v1
kind: Secret
metadata:
  name: v1-ref
  namespace: example-ns
  annotations:
    config.kubernetes.io/depends-on: v1/namespaces/example-ns/ConfigMap/settings
"#
    );
    assert_eq!(
        messages(&rl),
        ["info: namespace \"default\" updated to \"example-ns\", 6 value(s) changed"]
    );
    // Master keys by the exact reference: the core group's form.
    let mut rl = list(items, Some(config));
    go(run, &mut rl).unwrap();
    let text = out(&rl);
    assert!(text.contains("depends-on: /namespaces/example-ns/ConfigMap/settings"));
    assert!(text.contains("depends-on: v1/namespaces/default/ConfigMap/settings"));
}

#[test]
fn v04_writes_subjects_back_through_json() {
    let items = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: rb
  namespace: old
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: r
subjects: # who
  # the app
  - name: app # its account
    namespace: old
    kind: ServiceAccount
  - {kind: User, name: "yes", apiGroup: rbac.authorization.k8s.io}
  - kind: Group
    name: '007'
    namespace: ~
    extra: {big: 1000000, half: 0.5, hex: 0x10, on: true, none: null, list: [], map: {}, text: "a\nb", neg: -0}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: nobody
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
"#;
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nmetadata:\n  name: s\nnamespace: new\n";
    let mut rl = list(items, Some(config));
    go_as("v0.4.1", &mut rl).unwrap();
    // A namespaced RoleBinding's subjects change too (master: only a
    // cluster-scoped binding's); every subject is decoded and encoded
    // again by Go: keys sorted, the subjects' comments and flow style
    // gone, numbers as float64, strings quoted where they would read as
    // something else; a binding without subjects gets an empty list.
    assert_eq!(
        out(&rl),
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: nobody
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: rb
  namespace: new
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: r
subjects: # who
  - kind: ServiceAccount
    name: app
    namespace: new
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: "yes"
  - extra:
      big: 1e+06
      half: 0.5
      hex: 16
      list: []
      map: {}
      neg: 0
      none: null
      "on": true
      text: |-
        a
        b
    kind: Group
    name: "007"
    namespace: new
"#
    );
    assert_eq!(
        messages(&rl),
        ["info: namespace \"\",\"old\" updated to \"new\", 3 value(s) changed"]
    );
    // What Go's decoding refuses dies: a repeated key, a merge key.
    for subjects in [
        "subjects:\n- kind: User\n  name: a\n  name: b\n",
        "subjects:\n- &s {kind: User}\n- <<: *s\n  name: b\n",
        "subjects:\n- kind: User\n  extra: .inf\n",
        "subjects:\n- kind: User\n  1: x\n",
        "subjects: x\n",
        "subjects:\n- x\n",
    ] {
        let items = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: c\n{subjects}"
        );
        let mut rl = list(&items, Some(config));
        assert_eq!(
            go_as("v0.4.1", &mut rl),
            Err(Stop::Failed(
                "failed to evaluate function: SubObject has unmatched field type: `subjects".into()
            )),
            "{subjects}"
        );
        assert_eq!(
            messages(&rl),
            ["error: SubObject has unmatched field type: `subjects"]
        );
    }
}

#[test]
fn v041_config_errors_fail_without_naming_the_config() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: a\n";
    let cases: &[(Option<&str>, &str)] = &[
        (None, "FunctionConfig is missing. Expect `ConfigMap` or `SetNamespace`"),
        (Some("{}"), "FunctionConfig is missing. Expect `ConfigMap` or `SetNamespace`"),
        (
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: x\n"),
            "unknown functionConfig Kind=SetLabels ApiVersion=fn.kpt.dev/v1alpha1, expect `SetNamespace` or `ConfigMap`",
        ),
        // apiVersions are compared whole (master: any group matches).
        (
            Some("apiVersion: example.com/v1\nkind: ConfigMap\ndata:\n  namespace: n\n"),
            "unknown functionConfig Kind=ConfigMap ApiVersion=example.com/v1, expect `SetNamespace` or `ConfigMap`",
        ),
        (Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\n"), "`namespace` should not be empty"),
        (Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: ''\n"), "`data.namespace` should not be empty"),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kptfile.kpt.dev\ndata:\n  other: x\n"),
            "`data.name` should not be empty",
        ),
    ];
    for (config, msg) in cases {
        let mut rl = list(items, *config);
        assert_eq!(
            go_as("v0.4.1", &mut rl),
            Err(Stop::Failed(
                "failed to evaluate function: error: function failure".into()
            )),
            "{config:?}"
        );
        assert_eq!(out(&rl), items, "{config:?}");
        assert_eq!(messages(&rl), [format!("error: {msg}")], "{config:?}");
        assert_eq!(rl.results[0].resource_ref, None, "{config:?}");
        assert_eq!(rl.results[0].file, None, "{config:?}");
    }
}

#[test]
fn v040_config_errors_are_results_on_the_config() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: a\n";
    // No config at all: a nil pointer in the binary.
    let mut rl = list(items, None);
    assert_eq!(
        go_as("v0.4.0", &mut rl),
        Err(Stop::Failed(
            "panic: runtime error: invalid memory address or nil pointer dereference".into()
        ))
    );
    // `{}` is no kind; exit 0.
    let mut rl = list(items, Some("{}"));
    assert_eq!(go_as("v0.4.0", &mut rl), Ok(()));
    assert_eq!(
        messages(&rl),
        ["error: unknown functionConfig Kind= ApiVersion=, expect `SetNamespace` or `ConfigMap`"]
    );
    let mut rl = list(
        items,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    internal.config.kubernetes.io/path: fn.yaml\ndata:\n  namespace: \"\"\n"),
    );
    assert_eq!(go_as("v0.4.0", &mut rl), Ok(()));
    assert_eq!(out(&rl), items);
    assert_eq!(
        emit::encode_node(&crate::result::to_node(&rl.results[0]), false),
        "message: '`data.namespace` should not be empty'\nseverity: error\nresourceRef:\n  apiVersion: v1\n  kind: ConfigMap\n  name: c\nfile:\n  path: fn.yaml\n  index: -1\n"
    );
}

#[test]
fn v04_fields_of_other_types_die() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: a\n";
    let cases: &[(&str, Option<&str>, &str)] = &[
        // Null is no string here (master reads it as "").
        (
            items,
            Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  namespace: ~\n"),
            "data/namespace",
        ),
        (
            items,
            Some("apiVersion: v1\nkind: ConfigMap\ndata: ~\n"),
            "data/namespace",
        ),
        (
            items,
            Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nnamespace: 1\n"),
            "namespace",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: 7\n",
            Some(NS_CONFIG),
            "metadata/namespace",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: x\n",
            Some(NS_CONFIG),
            "metadata/namespace",
        ),
        (
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: [a]\n",
            Some(NS_CONFIG),
            "metadata/name",
        ),
    ];
    for (items, config, path) in cases {
        let msg = format!("SubObject has unmatched field type: `{path}");
        let mut rl = list(items, *config);
        assert_eq!(
            go_as("v0.4.1", &mut rl),
            Err(Stop::Failed(format!("failed to evaluate function: {msg}"))),
            "{items} {config:?}"
        );
        assert_eq!(messages(&rl), [format!("error: {msg}")]);
        // v0.4.0's SDK prints nothing.
        let mut rl = list(items, *config);
        assert_eq!(go_as("v0.4.0", &mut rl), Err(Stop::Failed(String::new())));
        assert_eq!(messages(&rl), [format!("error: {msg}")]);
    }
    // A depends-on annotation the setter cannot write: a Go panic.
    let items = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: a\n  annotations: [config.kubernetes.io/depends-on, apps/namespaces/a/Deployment/d]\n";
    let mut rl = list(items, Some(NS_CONFIG));
    assert_eq!(
        go_as("v0.4.1", &mut rl),
        Err(Stop::Failed("panic: cannot set metadata annotations 'config.kubernetes.io/depends-on': unable to set apps/namespaces/store/Deployment/d at fields [metadata annotations config.kubernetes.io/depends-on] with error: incorrect type, was *internal.sliceVariant".into()))
    );
    let mut rl = list(items, Some(NS_CONFIG));
    assert_eq!(
        go_as("v0.4.0", &mut rl),
        Err(Stop::Failed("panic: cannot set metadata annotations 'config.kubernetes.io/depends-on': incorrect type, was *internal.sliceVariant".into()))
    );
    // The SDK's own checks, before the function.
    let mut rl = list("- a\n", Some(NS_CONFIG));
    assert_eq!(go_as("v0.4.0", &mut rl), Err(Stop::Failed(String::new())));
    let mut rl = list("- a\n", Some(NS_CONFIG));
    assert!(
        matches!(go_as("v0.4.1", &mut rl), Err(Stop::Failed(m)) if m.starts_with("failed to evaluate function: failed to extract objects"))
    );
}

#[test]
fn v04_reports_duplicates_and_nothing_to_change() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: store\n";
    let mut rl = list(items, Some(NS_CONFIG));
    assert_eq!(go_as("v0.4.1", &mut rl), Ok(()));
    assert_eq!(
        messages(&rl),
        ["info: all namespaces are already \"store\". no value changed"]
    );
    // Two Services that the change makes one: an error result, exit 0.
    let two = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: b\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: a\n";
    let mut rl = list(two, Some(NS_CONFIG));
    assert_eq!(go_as("v0.4.1", &mut rl), Ok(()));
    assert_eq!(out(&rl).matches("namespace: store").count(), 2);
    assert_eq!(
        messages(&rl),
        ["error: duplicate Resource(apiVersion=v1, kind=Service, Namespace=store, Name=s)"]
    );
}

#[test]
fn v04_lists_old_namespaces_sorted_and_ignores_the_matcher() {
    let items = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s1\n  namespace: b\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s2\n  namespace: a\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s3\n---\nkind: Custom\nmetadata:\n  name: c\n";
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  namespace: n\n  namespaceMatcher: a\n";
    let mut rl = list(items, Some(config));
    go_as("v0.4.1", &mut rl).unwrap();
    // Go lists them in its map's random order; sorted here.
    assert_eq!(
        messages(&rl),
        ["info: namespace \"\",\"a\",\"b\" updated to \"n\", 3 value(s) changed"]
    );
    // A kind of no known scope without a namespace is left alone.
    assert!(
        out(&rl).starts_with("kind: Custom\nmetadata:\n  name: c\n---"),
        "{}",
        out(&rl)
    );
    // kpt's package context gives `data.name`.
    let ctx =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kptfile.kpt.dev\ndata:\n  name: pkg\n";
    let mut rl = list(items, Some(ctx));
    go_as("v0.4.1", &mut rl).unwrap();
    assert_eq!(
        messages(&rl),
        ["info: namespace \"\",\"a\",\"b\" updated to \"pkg\", 3 value(s) changed"]
    );
}

#[test]
fn other_releases_answer_as_master() {
    for release in [None, Some("v0.3.4"), Some("v0.4.2")] {
        let mut rl = list(SIMPLE, Some(NS_CONFIG));
        run(&mut rl, &Context::new().with_release(release)).unwrap();
        let mut master = list(SIMPLE, Some(NS_CONFIG));
        go(run, &mut master).unwrap();
        assert_eq!(rl, master, "{release:?}");
    }
}
