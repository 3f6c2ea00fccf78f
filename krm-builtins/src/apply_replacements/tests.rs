#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use krm_yaml::package::kyaml;
use krm_yaml::Node;

use crate::find;
use crate::function::{Context, ResourceList, Stop};
use crate::result::Severity;
use crate::test_support::{nodes, text};

fn config(replacements: &str) -> Node {
    let text = format!(
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: ApplyReplacements\nmetadata:\n  name: r\nreplacements:\n{replacements}"
    );
    nodes(&text).remove(0)
}

fn run_with(items: &str, config: Option<Node>) -> (ResourceList, Result<(), Stop>) {
    let mut rl = ResourceList {
        items: nodes(items),
        function_config: config,
        ..ResourceList::default()
    };
    let r = find("apply-replacements")
        .unwrap()
        .run(&mut rl, &Context::new());
    (rl, r)
}

/// Runs and expects success: the items' text.
fn ok(items: &str, replacements: &str) -> String {
    let (rl, r) = run_with(items, Some(config(replacements)));
    assert_eq!(r, Ok(()), "{:?}", rl.results);
    assert!(rl.results.is_empty());
    text(&rl.items)
}

/// Runs and expects the catalog's failure: the result's message.
fn fails(items: &str, replacements: &str) -> String {
    fails_with(items, Some(config(replacements)))
}

fn fails_with(items: &str, config: Option<Node>) -> String {
    let (rl, r) = run_with(items, config);
    assert_eq!(
        r,
        Err(Stop::Failed(
            "failed to evaluate function: error: function failure".into()
        ))
    );
    assert_eq!(rl.results.len(), 1);
    assert_eq!(rl.results[0].severity, Severity::Error);
    // Nothing changed (the items only sorted).
    let mut sorted = nodes(items);
    sorted.sort_by_cached_key(|n| {
        let m = kyaml::meta(n);
        format!("{} {} {} {}", m.api_version, m.kind, m.namespace, m.name)
    });
    assert_eq!(text(&rl.items), text(&sorted));
    rl.results[0].message.clone()
}

const PACKAGE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings # the source
data:
  image: registry.example/web:1.2.3
  replicas: \"3\"
  host: web.example.org
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    tier: front
spec:
  # how many
  replicas: 1 # overwritten
  template:
    spec:
      containers:
      - name: web
        image: placeholder # set from the ConfigMap
        env:
        - name: HOST
          value: \"\"
      - name: sidecar
        image: 'busybox:1.0'
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: prod
spec:
  replicas: 2
";

#[test]
fn a_configmap_value_goes_into_deployment_fields_keeping_comments_and_tags() {
    let out = ok(
        PACKAGE,
        "- source:
    kind: ConfigMap
    name: settings
    fieldPath: data.image
  targets:
  - select:
      kind: Deployment
      name: web
    fieldPaths:
    - spec.template.spec.containers.[name=web].image
- source:
    kind: ConfigMap
    fieldPath: data.replicas
  targets:
  - select:
      kind: Deployment
    fieldPaths:
    - spec.replicas
",
    );
    // Items come back sorted (apiVersion kind namespace name); the int
    // fields keep their tag (written plain); comments stay.
    assert_eq!(
        out,
        "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    tier: front
spec:
  # how many
  replicas: 3 # overwritten
  template:
    spec:
      containers:
      - name: web
        image: registry.example/web:1.2.3 # set from the ConfigMap
        env:
        - name: HOST
          value: \"\"
      - name: sidecar
        image: 'busybox:1.0'
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: prod
spec:
  replicas: 3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings # the source
data:
  image: registry.example/web:1.2.3
  replicas: \"3\"
  host: web.example.org
"
    );
}

#[test]
fn the_default_source_field_is_the_name_and_list_matching_is_a_regex() {
    let out = ok(
        PACKAGE,
        "- source:
    kind: ConfigMap
  targets:
  - select:
      name: web
    fieldPaths:
    - spec.template.spec.containers.[name=web].env.[name=HOST].value
    - spec.template.spec.containers.[name=^side].name
",
    );
    assert!(
        out.contains("        - name: HOST\n          value: \"settings\"\n"),
        "{out}"
    );
    assert!(
        out.contains("      - name: settings\n        image: 'busybox:1.0'\n"),
        "{out}"
    );
    // A scalar target keeps its style (the empty double-quoted value stays
    // double-quoted) and its tag: a null one is written with its tag, as
    // yaml.v3 writes a `!!null` node whose value is not null.
    let out = ok(
        "kind: A\nmetadata:\n  name: a\nspec:\n  x: null\n  y: ~\n  z: 0x1\n",
        "- source: {kind: A}\n  targets:\n  - select: {kind: A}\n    fieldPaths: [spec.x, spec.y, spec.z]\n",
    );
    assert_eq!(
        out,
        "kind: A\nmetadata:\n  name: a\nspec:\n  x: !!null a\n  y: !!null a\n  z: !!int a\n"
    );
}

#[test]
fn delimiter_and_index_take_and_put_a_part() {
    let out = ok(
        PACKAGE,
        "- source:
    kind: ConfigMap
    fieldPath: data.image
    options:
      delimiter: ':'
      index: 1
  targets:
  - select:
      kind: Deployment
      name: web
    fieldPaths:
    - spec.template.spec.containers.1.image
    options:
      delimiter: ':'
      index: 1
  - select:
      kind: ConfigMap
    fieldPaths:
    - data.host
    options:
      delimiter: .
      index: -1
  - select:
      kind: ConfigMap
    fieldPaths:
    - data.image
    options:
      delimiter: /
      index: 5
",
    );
    assert!(out.contains("        image: 'busybox:1.2.3'\n"), "{out}");
    assert!(out.contains("  host: 1.2.3.web.example.org\n"), "{out}");
    assert!(
        out.contains("  image: registry.example/web:1.2.3/1.2.3\n"),
        "{out}"
    );

    let msg = fails(
        PACKAGE,
        "- source:
    kind: ConfigMap
    fieldPath: data.image
    options:
      delimiter: ':'
      index: 2
  targets:
  - select:
      kind: Deployment
",
    );
    assert_eq!(
        msg,
        "options.index 2 is out of bounds for value registry.example/web:1.2.3"
    );
    let msg = fails(
        PACKAGE,
        "- source:
    kind: ConfigMap
    fieldPath: data
    options:
      delimiter: ':'
  targets:
  - select:
      kind: Deployment
",
    );
    assert_eq!(msg, "delimiter option can only be used with scalar nodes");
}

#[test]
fn create_adds_missing_fields_and_list_elements() {
    let out = ok(
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: src
data:
  port: \"8080\"
  labels:
    a: b
---
apiVersion: v1
kind: Service
metadata:
  name: svc
",
        "- source:
    kind: ConfigMap
    fieldPath: data.port
  targets:
  - select:
      kind: Service
    fieldPaths:
    - spec.ports.[name=http].targetPort
    - metadata.annotations.port
    - spec.list.0
    options:
      create: true
- source:
    kind: ConfigMap
    fieldPath: data.labels
  targets:
  - select:
      kind: Service
    fieldPaths:
    - metadata.labels
    options:
      create: true
",
    );
    assert_eq!(
        out,
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: src
data:
  port: \"8080\"
  labels:
    a: b
---
apiVersion: v1
kind: Service
metadata:
  name: svc
  annotations:
    port: 8080
  labels:
    a: b
spec:
  ports:
  - name: http
    targetPort: 8080
  list:
  - 8080
"
    );
    // Without create, a missing target field is an error.
    let msg = fails(
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: src
---
apiVersion: v1
kind: Service
metadata:
  name: svc
",
        "- source:
    kind: ConfigMap
  targets:
  - select:
      kind: Service
    fieldPaths:
    - spec.selector.app
",
    );
    assert_eq!(
        msg,
        "unable to find field \"spec.selector.app\" in replacement target"
    );
}

#[test]
fn targets_are_selected_and_rejected_by_kind_name_namespace_and_labels() {
    let replacements = |select: &str, reject: &str| {
        format!(
            "- source:
    kind: ConfigMap
    fieldPath: data.host
  targets:
  - select: {select}
    reject: {reject}
    fieldPaths:
    - metadata.annotations.host
    options:
      create: true
"
        )
    };
    let annotated = |out: &str| -> Vec<String> {
        nodes(out)
            .iter()
            .filter(|n| kyaml::annotation(n, "host").is_some())
            .map(|n| kyaml::meta(n).name)
            .collect()
    };
    let cases = [
        ("{kind: Deployment}", "[]", vec!["web", "api"]),
        ("{kind: Deployment}", "[{name: web}]", vec!["api"]),
        ("{namespace: default}", "[{kind: ConfigMap}]", vec!["web"]),
        ("{namespace: prod}", "[]", vec!["api"]),
        (
            "{group: apps}",
            "[{labelSelector: tier=front}]",
            vec!["api"],
        ),
        (
            "{labelSelector: 'tier in (front, back)'}",
            "[]",
            vec!["web"],
        ),
        ("{version: v1}", "[]", vec!["web", "api", "settings"]),
        ("{}", "[{version: v1, group: apps}]", vec!["settings"]),
        (
            "{annotationSelector: '!x'}",
            "[{namespace: prod}]",
            vec!["web", "settings"],
        ),
        (
            "{labelSelector: 'tier notin (front)'}",
            "[]",
            vec!["api", "settings"],
        ),
        (
            "{labelSelector: '!tier'}",
            "[{kind: ConfigMap}]",
            vec!["api"],
        ),
        ("{labelSelector: 'tier,tier!=back'}", "[]", vec!["web"]),
        ("{name: nothing}", "[]", vec![]),
    ];
    for (select, reject, want) in cases {
        let out = ok(PACKAGE, &replacements(select, reject));
        assert_eq!(annotated(&out), want, "{select} {reject}");
    }
}

#[test]
fn the_source_must_select_exactly_one_resource() {
    let msg = fails(
        PACKAGE,
        "- source:
    kind: Deployment
  targets:
  - select:
      kind: ConfigMap
",
    );
    assert_eq!(
        msg,
        "multiple matches for selector Deployment.[noVer].[noGrp]/[noName].[noNs]"
    );
    let msg = fails(
        PACKAGE,
        "- source:
    kind: Secret
    name: nope
    fieldPath: data.x
    options: {delimiter: '-', create: true}
  targets:
  - select:
      kind: ConfigMap
",
    );
    assert_eq!(
        msg,
        "nothing selected by Secret.[noVer].[noGrp]/nope.[noNs]:data.x:-(0), create=true"
    );
    let msg = fails(
        PACKAGE,
        "- source:
    kind: ConfigMap
    version: v1
    fieldPath: data.missing
  targets:
  - select:
      kind: ConfigMap
",
    );
    assert_eq!(
        msg,
        "fieldPath `data.missing` is missing for replacement source ConfigMap.v1.[noGrp]/[noName].[noNs]"
    );
}

#[test]
fn bad_paths_and_configs_fail_with_the_catalogs_texts() {
    let cases = [
        (
            "- source: {kind: ConfigMap, fieldPath: 'data.*'}\n  targets: []\n",
            "error looking up replacement source: wildcard is not supported in PathGetter",
        ),
        (
            "- source: {kind: ConfigMap, fieldPath: 'data.-1'}\n  targets: []\n",
            "error looking up replacement source: array index -1 cannot be negative",
        ),
        (
            "- source: {kind: ConfigMap, fieldPath: 'data.[x]'}\n  targets: []\n",
            "error looking up replacement source: list path element must contain fieldName=fieldValue for element to match",
        ),
        (
            "- source: {kind: ConfigMap}\n  targets:\n  - select: {name: web}\n    fieldPaths: [spec.template.spec.containers.5.image]\n",
            "unable to find field \"spec.template.spec.containers.5.image\" in replacement target: index 5 specified but only 2 elements found",
        ),
        (
            "- source: {kind: ConfigMap}\n  targets:\n  - select: {name: web}\n    fieldPaths: ['spec.template.spec.containers.[name=(].image']\n",
            "unable to find field \"spec.template.spec.containers.[name=(].image\" in replacement target: error parsing regexp: missing closing ): `(`",
        ),
        (
            "- source: {kind: ConfigMap}\n  targets:\n  - select: {name: web}\n    fieldPaths: [spec.replicas.x]\n",
            "unable to find field \"spec.replicas.x\" in replacement target: wrong node kind: expected MappingNode but got ScalarNode: node contents:\n1 # overwritten\n",
        ),
        (
            "- source: {kind: ConfigMap}\n",
            "replacements must specify a source and at least one target",
        ),
        (
            "- targets: []\n",
            "replacements must specify a source and at least one target",
        ),
        (
            "- source: {kind: ConfigMap}\n  targets: [{fieldPaths: [x]}]\n",
            "target must specify resources to select",
        ),
        (
            "- source: {kind: ConfigMap, fieldPath: 7}\n  targets: []\n",
            "unable to convert functionConfig to replacements:\nunable to convert object to *replacements.Replacements with error: json: cannot unmarshal number into Go struct field SourceSelector.replacements.source.fieldPath of type string",
        ),
        (
            "- source: {kind: ConfigMap, options: {index: x}}\n  targets: []\n",
            "unable to convert functionConfig to replacements:\nunable to convert object to *replacements.Replacements with error: json: cannot unmarshal string into Go struct field FieldOptions.replacements.source.options.index of type int",
        ),
        (
            "- source: {kind: ConfigMap}\n  targets: [{select: {labelSelector: 'a in ()'}}]\n",
            "for 'in', 'notin' operators, values set can't be empty in selector \"a in ()\"",
        ),
        (
            "- source: {kind: ConfigMap, options: {delimiter: '-', index: 010}}\n  targets: []\n",
            "options.index 8 is out of bounds for value settings",
        ),
        (
            "- x\n",
            "unable to convert functionConfig to replacements:\nunable to convert object to *replacements.Replacements with error: json: cannot unmarshal string into Go struct field Replacements.replacements of type types.Replacement",
        ),
    ];
    for (replacements, want) in cases {
        assert_eq!(fails(PACKAGE, replacements), want, "{replacements}");
    }
    // The config itself.
    assert_eq!(
        fails_with(PACKAGE, None),
        "FunctionConfig is missing. Expect `ApplyReplacements`"
    );
    assert_eq!(
        fails_with(PACKAGE, Some(nodes("{}").remove(0))),
        "FunctionConfig is missing. Expect `ApplyReplacements`"
    );
    assert_eq!(
        fails_with(
            PACKAGE,
            Some(nodes("apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n").remove(0))
        ),
        "received functionConfig of kind ConfigMap and apiVersion v1, only functionConfig of kind ApplyReplacements and apiVersion fn.kpt.dev/v1alpha1 is supported"
    );
    // No replacements: nothing to do (items sorted).
    let (rl, r) = run_with(
        PACKAGE,
        Some(nodes("apiVersion: fn.kpt.dev/v1alpha1\nkind: ApplyReplacements\n").remove(0)),
    );
    assert_eq!(r, Ok(()));
    assert_eq!(kyaml::meta(&rl.items[0]).name, "web");
}

#[test]
fn a_mapping_value_replaces_the_target_node_and_wildcards_reach_every_element() {
    let out = ok(
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: src
data:
  res: # source head
    cpu: 100m
---
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: a
    resources: {}
  - name: b
    resources:
      limits: {cpu: 1} # old
",
        "- source:
    kind: ConfigMap
    fieldPath: data.res
  targets:
  - select:
      kind: Pod
    fieldPaths:
    - spec.containers.*.resources
",
    );
    assert_eq!(
        out,
        "\
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: a
    resources:
      cpu: 100m
  - name: b
    resources:
      cpu: 100m
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: src
data:
  res: # source head
    cpu: 100m
"
    );
}

#[test]
fn odd_inputs_never_panic() {
    let items = "\
- a list item
---
scalar
---
kind: ConfigMap
metadata: {name: c}
data: {k: 'a:b', n: null, s: [x, y]}
---
kind: X
metadata: null
spec: ~
";
    let paths = [
        "",
        ".",
        "..",
        "[",
        "]",
        "[=]",
        "[=x",
        "data.[k=a].x",
        "data.s.[=x]",
        "data.s.[=(]",
        "data.s.-",
        "data.s.99999999999999999999",
        "data.s.9223372036854775807",
        "data.s.-0",
        "spec.a.b",
        "data.n.x",
        "data\\.k",
        "*.*.*",
        "data.s.*.x",
        "metadata.name.x.y",
        "\\",
    ];
    for fp in paths {
        for opts in [
            "{}",
            "{create: true}",
            "{delimiter: ':', index: 9223372036854775807, create: true}",
            "{delimiter: ':', index: -9223372036854775808}",
        ] {
            let r = format!(
                "- source:
    kind: ConfigMap
    fieldPath: '{fp}'
  targets:
  - select: {{}}
    fieldPaths: ['{fp}', data.k]
    options: {opts}
- source: {{kind: ConfigMap, fieldPath: data.k, options: {opts}}}
  targets:
  - select: {{}}
    reject: [{{kind: X}}, null]
    fieldPaths: ['{fp}']
    options: {opts}
"
            );
            let (_, res) = run_with(items, Some(config(&r)));
            let _ = res;
        }
    }
    // Hostile configs.
    for c in [
        "replacements: 1",
        "replacements: {a: b}",
        "replacements: [null, {source: null, targets: null}]",
        "replacements: [{source: {kind: [x]}, targets: [null]}]",
        "replacements: [{source: {kind: ConfigMap, options: {index: 1.5}}, targets: []}]",
        "replacements: [{source: {kind: ConfigMap, options: {index: 0x7fffffffffffffffff}}, targets: []}]",
        "replacements: [{source: {kind: ConfigMap}, targets: [{select: {labelSelector: '!!!'}}]}]",
        "replacements: [{source: {kind: ConfigMap}, targets: [{select: {annotationSelector: 'a in (b'}}]}]",
    ] {
        let cfg = nodes(&format!(
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: ApplyReplacements\n{c}\n"
        ))
        .remove(0);
        let (rl, res) = run_with(items, Some(cfg));
        assert!(res.is_ok() || !rl.results.is_empty(), "{c}");
    }
    assert_eq!(
        fails_with(
            items,
            Some(config(
                "- source: {kind: ConfigMap, options: {index: 1.5}}\n  targets: []\n"
            ))
        ),
        "unable to convert functionConfig to replacements:\nunable to convert object to *replacements.Replacements with error: json: cannot unmarshal number 1.5 into Go struct field FieldOptions.replacements.source.options.index of type int"
    );
}

#[test]
fn the_source_moves_with_targets_written_into_it() {
    // kyaml reads the value through a pointer into the source resource: a
    // target that writes the source's own field changes what later
    // targets get.
    let out = ok(
        "\
kind: ConfigMap
metadata:
  name: c
data:
  v: one
---
kind: Other
metadata:
  name: o
spec:
  v: x
",
        "- source: {kind: ConfigMap, fieldPath: data.v}
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.v]
    options: {delimiter: '-', index: 9}
  - select: {kind: Other}
    fieldPaths: [spec.v]
",
    );
    assert!(out.contains("  v: one-one\n---\n"), "{out}");
    assert!(out.ends_with("spec:\n  v: one-one\n"), "{out}");
}

#[test]
fn items_are_sorted_as_the_sdk_writes_them_after_the_change() {
    // A namespace created untagged counts as the string it reads back as;
    // values that are not strings count as empty.
    let out = ok(
        "\
apiVersion: v1
kind: B
metadata:
  name: b
---
apiVersion: v1
kind: B
metadata:
  name: a
  namespace: 5
---
apiVersion: v1
kind: A
metadata:
  name: src
data:
  ns: zz
",
        "- source: {kind: A, fieldPath: data.ns}
  targets:
  - select: {name: b}
    fieldPaths: [metadata.namespace]
    options: {create: true}
",
    );
    assert_eq!(
        out,
        "\
apiVersion: v1
kind: A
metadata:
  name: src
data:
  ns: zz
---
apiVersion: v1
kind: B
metadata:
  name: a
  namespace: 5
---
apiVersion: v1
kind: B
metadata:
  name: b
  namespace: zz
"
    );
}

#[test]
fn copies_growing_without_bound_are_refused() {
    // Each replacement copies spec into two of its own fields: 2^60 nodes.
    let one = "- source: {kind: Deployment, name: web, fieldPath: spec}\n  targets:\n  - select: {kind: Deployment}\n    fieldPaths: [spec.a, spec.b]\n    options: {create: true}\n";
    let items = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  x: y\n";
    let message = fails(items, &one.repeat(60));
    assert!(
        message
            .contains("the values copied to targets exceed 268435456 bytes, the limit for one run"),
        "{message}"
    );
}

#[test]
fn created_paths_are_capped() {
    let fp = format!("spec.{}b", "a.".repeat(2000));
    let r = format!("- source: {{kind: Deployment, name: web}}\n  targets:\n  - select: {{kind: Deployment}}\n    fieldPaths: ['{fp}']\n    options: {{create: true}}\n");
    let items = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  x: y\n";
    let message = fails(items, &r);
    assert!(
        message.contains("has 2002 parts, more than the limit of 1000 with create"),
        "{message}"
    );
}
