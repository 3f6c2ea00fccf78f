#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use krm_yaml::emit;

use super::run;
use crate::function::Stop;
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
