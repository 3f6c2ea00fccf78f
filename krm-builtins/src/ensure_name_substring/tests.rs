#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::run;
use crate::function::{Context, Stop};
use crate::test_support::{list_each, text};

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

const PREPEND_PROD: Option<&str> =
    Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  prepend: prod-\n");

/// Items as kpt hands them over, with file annotations in both forms,
/// ids, kustomize's own and other annotations.
const ANNOTATED: [&str; 6] = [
    "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  annotations:
    config.kubernetes.io/local-config: \"true\"
    internal.config.kubernetes.io/path: Kptfile
    internal.config.kubernetes.io/index: '0'
    config.kubernetes.io/path: Kptfile
    config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/id: '1'
  name: pkg # the package
info:
  description: x
",
    "\
apiVersion: v1
kind: ConfigMap
metadata:
  annotations:
    # who owns it
    team: 'blue'
    internal.config.kubernetes.io/seqindent: wide
    internal.config.kubernetes.io/path: app/cm.yaml
    config.kubernetes.io/path: app/cm.yaml
    internal.config.kubernetes.io/previousNames: old
    internal.config.kubernetes.io/id: '2'
    config.k8s.io/id: '2'
    team: red
  name: cm
  namespace: app
data:
  k: v
",
    "\
apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    config.kubernetes.io/index: '1'
    internal.config.kubernetes.io/index: '1'
  name: web
spec:
  replicas: 1
",
    "apiVersion: v1\nkind: Secret\nmetadata:\n  annotations: {}\n  name: s\n",
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  annotations: {}\n  name: app\n",
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: prod-s\n  annotations: {}\n",
];

/// Items as kpt hands them over: kustomize's resmap drops the file
/// annotations (path, index, seqindent, legacy or not) and its own, keeps
/// the id and the rest, and writes what is left again: at the end of
/// `metadata`, sorted, as new strings (the comment and quotes go).
#[test]
fn file_annotations_are_dropped_the_rest_rewritten() {
    let items = ANNOTATED;
    let mut rl = list_each(&items, PREPEND_PROD);
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg # the package
  annotations:
    config.kubernetes.io/local-config: \"true\"
    internal.config.kubernetes.io/id: \"1\"
info:
  description: x
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: prod-cm
  namespace: app
  annotations:
    config.k8s.io/id: \"2\"
    internal.config.kubernetes.io/id: \"2\"
    team: red
data:
  k: v
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: prod-web
spec:
  replicas: 1
---
apiVersion: v1
kind: Secret
metadata:
  name: prod-s
---
apiVersion: v1
kind: Namespace
metadata:
  annotations: {}
  name: app
---
apiVersion: v1
kind: Secret
metadata:
  name: prod-s
  annotations: {}
"
    );
    assert!(rl.results.is_empty());
}

/// Lines of kustomize's name-reference table beyond the pod spec, and
/// its rules: a reference names a renamed resource of the kind the line
/// says, in the referrer's namespace unless one of them is
/// cluster-scoped; `roleRef` names the kind beside it; `subjects` are
/// matched by their own namespace, which the referral writes in.
#[test]
fn references_follow_the_name_reference_table() {
    let items = [
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: bot\n  namespace: a\n",
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: read
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: reader
subjects:
- kind: ServiceAccount
  name: bot
- kind: ServiceAccount
  name: bot
  namespace: elsewhere
",
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: read
  namespace: a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: reader
",
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: high\n",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\n",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: a\nspec:\n  storageClassName: fast\n",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: a\n",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  namespace: b\n",
        "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: a
spec:
  template:
    spec:
      priorityClassName: high
      serviceAccountName: bot
      volumes:
      - name: d
        persistentVolumeClaim:
          claimName: data
",
        "\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
  namespace: a
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
",
        "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: a
spec:
  tls:
  - secretName: tls
  rules:
  - http:
      paths:
      - backend:
          service:
            name: web
",
    ];
    let mut rl = list_each(&items, PREPEND_PROD);
    run(&mut rl, &Context::new()).unwrap();
    // The RoleBinding's roleRef names a Role: the ClusterRole is not it.
    // The second subject is in a namespace with no `bot`; the Secret is
    // in another namespace than the Ingress.
    assert_eq!(
        text(&rl.items),
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: prod-reader
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prod-bot
  namespace: a
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prod-read
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: prod-reader
subjects:
- kind: ServiceAccount
  name: prod-bot
  namespace: a
- kind: ServiceAccount
  name: bot
  namespace: elsewhere
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: prod-read
  namespace: a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: reader
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: prod-high
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: prod-fast
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: prod-data
  namespace: a
spec:
  storageClassName: prod-fast
---
apiVersion: v1
kind: Service
metadata:
  name: prod-web
  namespace: a
---
apiVersion: v1
kind: Secret
metadata:
  name: prod-tls
  namespace: b
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: prod-web
  namespace: a
spec:
  template:
    spec:
      priorityClassName: prod-high
      serviceAccountName: prod-bot
      volumes:
      - name: d
        persistentVolumeClaim:
          claimName: prod-data
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: prod-web
  namespace: a
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: prod-web
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: prod-web
  namespace: a
spec:
  tls:
  - secretName: tls
  rules:
  - http:
      paths:
      - backend:
          service:
            name: prod-web
"
    );
}

/// Two renamed resources a name could refer to: a referrer that was
/// renamed too takes the first when they got the same new name; one that
/// was not (a Namespace, say, or a name that had the substring) takes
/// none. A subject's kind is not looked at (kustomize's table names the
/// whole `subjects` entry); its `namespace: default` is no namespace.
#[test]
fn ambiguous_and_odd_references() {
    let items = [
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: bot\n  namespace: a\n",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: bot\n  namespace: b\n",
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prod-read
subjects:
- kind: ServiceAccount
  name: bot
",
        "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: write
subjects:
- kind: ServiceAccount
  name: bot
- kind: Group
  name: bot
  namespace: b
- kind: ServiceAccount
  name: ops
  namespace: default
",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ops\n",
    ];
    let mut rl = list_each(&items, PREPEND_PROD);
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prod-bot
  namespace: a
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prod-bot
  namespace: b
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prod-read
subjects:
- kind: ServiceAccount
  name: bot
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prod-write
subjects:
- kind: ServiceAccount
  name: prod-bot
  namespace: a
- kind: Group
  name: prod-bot
  namespace: b
- kind: ServiceAccount
  name: prod-ops
  namespace: default
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prod-ops
"
    );
}

/// v0.2.0's kustomize (api 7e8ba62) drops only its own bookkeeping, then
/// under `config.kubernetes.io/`: the file annotations, legacy and
/// internal, stay on every item (rewritten as master rewrites them).
#[test]
fn v0_2_0_keeps_the_file_annotations() {
    let mut items = ANNOTATED.to_vec();
    items.push(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n  annotations:\n    config.kubernetes.io/previousNames: x\n    config.kubernetes.io/prefixes: p\n    internal.config.kubernetes.io/prefixes: q\n",
    );
    let mut rl = list_each(&items, PREPEND_PROD);
    run(&mut rl, &Context::new().with_release(Some("v0.2.0"))).unwrap();
    assert_eq!(
        text(&rl.items),
        "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg # the package
  annotations:
    config.kubernetes.io/index: \"0\"
    config.kubernetes.io/local-config: \"true\"
    config.kubernetes.io/path: Kptfile
    internal.config.kubernetes.io/id: \"1\"
    internal.config.kubernetes.io/index: \"0\"
    internal.config.kubernetes.io/path: Kptfile
info:
  description: x
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: prod-cm
  namespace: app
  annotations:
    config.k8s.io/id: \"2\"
    config.kubernetes.io/path: app/cm.yaml
    internal.config.kubernetes.io/id: \"2\"
    internal.config.kubernetes.io/path: app/cm.yaml
    internal.config.kubernetes.io/previousNames: old
    internal.config.kubernetes.io/seqindent: wide
    team: red
data:
  k: v
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: prod-web
  annotations:
    config.kubernetes.io/index: \"1\"
    internal.config.kubernetes.io/index: \"1\"
spec:
  replicas: 1
---
apiVersion: v1
kind: Secret
metadata:
  name: prod-s
---
apiVersion: v1
kind: Namespace
metadata:
  annotations: {}
  name: app
---
apiVersion: v1
kind: Secret
metadata:
  name: prod-s
  annotations: {}
---
apiVersion: v1
kind: Service
metadata:
  name: prod-svc
  annotations:
    internal.config.kubernetes.io/prefixes: q
"
    );
    assert!(rl.results.is_empty());
    assert_eq!(rl.log, "");
    // Master drops the other set.
    let mut rl = list_each(&items[6..], PREPEND_PROD);
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: prod-svc\n  annotations:\n    config.kubernetes.io/prefixes: p\n    config.kubernetes.io/previousNames: x\n"
    );
}

/// v0.2.0 fails as master does (the error once on stderr, no results);
/// a null list entry is no error (kyaml v0.10.21's `HasNilEntryInList`
/// never finds one).
#[test]
fn v0_2_0_fails_as_master_and_takes_null_entries() {
    let ctx = Context::new().with_release(Some("v0.2.0"));
    let mut rl = list_each(
        &[CM],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  other: x\n"),
    );
    assert_eq!(
        run(&mut rl, &ctx),
        Err(Stop::Failed(
            "failed to load the `functionConfig`: unknown editMode: other, only prepend and append are allowed".into()
        ))
    );
    assert!(rl.results.is_empty());
    let item = "apiVersion: v1\nkind: List\nmetadata:\n  name: l\nitems:\n- ~\n- a\n";
    let mut rl = list_each(&[item], PREPEND_PROD);
    run(&mut rl, &ctx).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: v1\nkind: List\nmetadata:\n  name: prod-l\nitems:\n- ~\n- a\n"
    );
}
