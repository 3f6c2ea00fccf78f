#![allow(clippy::unwrap_used)]

use crate::function::Stop;
use crate::test_support::run;

const PACKAGE: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # kpt-set: ${app}-web
  annotations:
    config.kubernetes.io/path: deploy.yaml
# the spec
spec:
  replicas: 3 # kpt-set: ${replicas}
  template:
    spec:
      containers:
      - name: web
        image: "nginx:1.7.1" # kpt-set: ${image}:${tag}
        args: # kpt-set: ${args}
        - --a
        - --b
      envs: [dev, stage] # kpt-set: ${envs}
      zones: [a] # kpt-set: ${zones}
      other: x # a comment
"#;

#[test]
fn a_config_map_sets_scalars_and_arrays() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\ndata:\n  app: shop\n  replicas: \"5\"\n  tag: 1.8.0\n  args: '[--c, \"--d\"]'\n  envs: '[prod]'\n  zones: ''\n";
    let (items, results, outcome) = run("apply-setters", Some(config), PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        items,
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop-web # kpt-set: ${app}-web
  annotations:
    config.kubernetes.io/path: deploy.yaml
# the spec
spec:
  replicas: 5 # kpt-set: ${replicas}
  template:
    spec:
      containers:
        - name: web
          image: "nginx:1.8.0" # kpt-set: ${image}:${tag}
          args: # kpt-set: ${args}
            - --c
            - "--d"
      envs: # kpt-set: ${envs}
        - prod
      zones: [] # kpt-set: ${zones}
      other: x # a comment
"#
    );
    assert_eq!(
        results,
        r#"- message: set field value to "shop-web"
  field:
    path: metadata.name
  file:
    path: deploy.yaml
- message: set field value to "5"
  field:
    path: spec.replicas
  file:
    path: deploy.yaml
- message: set field value to "[prod]"
  field:
    path: spec.template.spec.envs
  file:
    path: deploy.yaml
- message: set field value to ""
  field:
    path: spec.template.spec.zones
  file:
    path: deploy.yaml
- message: set field value to "[--c, \"--d\"]"
  field:
    path: spec.template.spec.containers[0].args
  file:
    path: deploy.yaml
- message: set field value to "nginx:1.8.0"
  field:
    path: spec.template.spec.containers[0].image
  file:
    path: deploy.yaml
"#
    );
}

#[test]
fn every_config_form_with_data_is_read() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\n";
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  v: y\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: ApplySetters\nmetadata:\n  name: s\ndata:\n  v: y\n",
    ] {
        let (items, results, outcome) = run("apply-setters", Some(config), item);
        assert_eq!(outcome, Ok(()));
        assert_eq!(items, "kind: A\nmetadata:\n  name: a\nv: y # kpt-set: ${v}\n");
        assert_eq!(results, "- message: set field value to \"y\"\n  field:\n    path: v\n");
    }
}

#[test]
fn no_setters_is_no_matches() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\n";
    for config in [
        None,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        Some("apiVersion: v1\nkind: ConfigMap\ndata: [1, 2]\n"),
        Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  other: 1\n"),
        Some("- not a mapping\n"),
        Some("data: ~\n"),
    ] {
        let (items, results, outcome) = run("apply-setters", config, item);
        assert_eq!(outcome, Ok(()), "{config:?}");
        assert_eq!(items, item);
        assert_eq!(results, "- message: no matches for input setter(s)\n");
    }
}

#[test]
fn values_derived_from_the_field_fill_the_other_setters() {
    let item = "kind: A\nmetadata:\n  name: a\nhost: app.dev.example.com # kpt-set: app.${stage}.${domain}.${tld}\nb: 'x' # kpt-set: ${gone}\nn: 3 # kpt-set: ${num}\n";
    let config = "kind: ConfigMap\ndata:\n  stage: prod\n  gone: ''\n  num: on\n";
    let (items, results, outcome) = run("apply-setters", Some(config), item);
    assert_eq!(outcome, Ok(()));
    // An emptied value is double-quoted; the tag is dropped, so `on` is
    // written as given.
    assert_eq!(
        items,
        "kind: A\nmetadata:\n  name: a\nhost: app.prod.example.com # kpt-set: app.${stage}.${domain}.${tld}\nb: \"\" # kpt-set: ${gone}\nn: on # kpt-set: ${num}\n"
    );
    assert_eq!(
        results,
        "- message: set field value to \"app.prod.example.com\"\n  field:\n    path: host\n- message: set field value to \"\"\n  field:\n    path: b\n- message: set field value to \"on\"\n  field:\n    path: n\n"
    );
}

#[test]
fn failures_as_the_binary_reports_them() {
    let cases = [
        (
            "kind: A\nmetadata:\n  name: a\nv: xy # kpt-set: ${a}-${b}\nw: 1 # kpt-set: ${a}\n",
            "values for setters [${b}] must be provided",
            "kind: A\nmetadata:\n  name: a\nv: xy # kpt-set: ${a}-${b}\nw: 1 # kpt-set: ${a}\n",
        ),
        (
            "kind: A\nl: # kpt-set: ${a}-x\n- 1\n",
            "invalid setter pattern for array node: \"${a}-x\"",
            "kind: A\nl: # kpt-set: ${a}-x\n  - 1\n",
        ),
        (
            "kind: A\nl: # kpt-set: ${a}\n- 1\n",
            "input to array setter must be an array of values, but found \"v\"",
            "kind: A\nl: # kpt-set: ${a}\n  - 1\n",
        ),
        (
            "just a scalar\n",
            "missing Resource metadata",
            "just a scalar\n",
        ),
        ("- a\n- b\n", "missing Resource metadata", "- a\n- b\n"),
        ("spec: {}\n", "missing Resource metadata", "spec: {}\n"),
    ];
    for (item, err, after) in cases {
        let (items, results, outcome) = run(
            "apply-setters",
            Some("kind: ConfigMap\ndata:\n  a: v\n"),
            item,
        );
        assert_eq!(
            outcome,
            Err(Stop::Failed(format!("{err}{err}\n"))),
            "{item}"
        );
        assert_eq!(items, after);
        assert_eq!(
            results,
            format!(
                "- message: {}\n  severity: error\n",
                krm_yaml::emit::encode_node(
                    &krm_yaml::Node::string(format!("failed to apply setters: {err}")),
                    false
                )
                .trim_end()
            )
        );
    }
    // An array value that is not YAML.
    let (_, _, outcome) = run(
        "apply-setters",
        Some("kind: ConfigMap\ndata:\n  a: '[x'\n"),
        "kind: A\nl: # kpt-set: ${a}\n- 1\n",
    );
    let err = "input to array setter must be an array of values, but found \"[x\"";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
}

#[test]
fn odd_trees_never_panic() {
    let item = "kind: A\nmetadata:\n  name: a\n  annotations: 7\nx: &a [1] # kpt-set: ${a}\ny: *a\nz: ~ # kpt-set: ${a}\n? [k]\n: v\nn: !!null # kpt-set: ${a}\nk: v\nk: w # kpt-set: ${a}\n";
    for config in [
        "kind: ConfigMap\ndata:\n  a: '[q]'\n",
        "kind: ConfigMap\ndata:\n  a: ''\n",
        "kind: ConfigMap\ndata:\n  a: {x: 1}\n",
        "kind: ConfigMap\ndata:\n  ? [a]\n  : b\n",
    ] {
        let _ = run("apply-setters", Some(config), item);
    }
}

#[test]
fn setter_values_growing_without_bound_are_refused() {
    // s0 = ${s1}${s1}, s1 = ${s2}${s2}, ...: 2^40 copies of s40.
    let mut data = String::new();
    for i in 0..40 {
        data.push_str(&format!("  s{i}: '${{s{}}}${{s{}}}'\n", i + 1, i + 1));
    }
    data.push_str("  s40: xxxxxxxx\n");
    let config =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\ndata:\n{data}");
    let items =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\ndata:\n  a: b # kpt-set: ${s0}\n";
    let (_, results, outcome) = run("apply-setters", Some(&config), items);
    assert!(
        matches!(&outcome, Err(Stop::Failed(text))
            if text.contains("setter values would produce more than 67108864 bytes")),
        "{outcome:?}"
    );
    assert!(
        results.contains(
            "failed to apply setters: setter values would produce more than 67108864 bytes"
        ),
        "{results}"
    );
}

/// Runs apply-setters as the image of `release` names it: the items'
/// text, the results' text and the outcome.
fn run_as(
    release: Option<&'static str>,
    config: Option<&str>,
    items: &str,
) -> (String, String, Result<(), Stop>) {
    let mut rl = crate::test_support::list(items, config);
    let outcome = crate::find("apply-setters")
        .unwrap()
        .run(&mut rl, &crate::Context::new().with_release(release));
    assert_eq!(rl.log, "");
    (
        crate::test_support::out(&rl),
        crate::test_support::results(&rl.results),
        outcome,
    )
}

/// How v0.1.1 fails: the one error result, the error twice on stderr.
fn v0_1_1_failure(err: &str) -> (String, Result<(), Stop>) {
    (
        format!("- message: 'failed to apply setters: {err}'\n  severity: error\n"),
        Err(Stop::Failed(format!("{err}{err}\n"))),
    )
}

#[test]
fn v0_1_1_fails_without_setters_before_reading_any_item() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\n";
    for config in [
        None,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        Some("apiVersion: v1\nkind: ConfigMap\ndata: {}\n"),
        Some("apiVersion: v1\nkind: ConfigMap\ndata: [1, 2]\n"),
        Some("data: ~\n"),
    ] {
        let (items, results, outcome) = run_as(Some("v0.1.1"), config, item);
        assert_eq!(items, item, "{config:?}");
        assert_eq!(
            (results, outcome),
            v0_1_1_failure("input setters list cannot be empty"),
            "{config:?}"
        );
    }
    // Even an item without metadata is not read.
    let (_, results, outcome) = run_as(Some("v0.1.1"), None, "- a\n");
    assert_eq!(
        (results, outcome),
        v0_1_1_failure("input setters list cannot be empty")
    );
}

#[test]
fn v0_1_1_fails_when_nothing_matched() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\nw: 1 # kpt-set: ${other}-x\n";
    let config = "apiVersion: v1\nkind: ConfigMap\ndata:\n  other: 1\n";
    // A setter that one field takes is a match; `u` alone matches
    // nothing.
    let (items, results, outcome) = run_as(Some("v0.1.1"), Some(config), item);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        items,
        "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\nw: 1-x # kpt-set: ${other}-x\n"
    );
    assert_eq!(
        results,
        "- message: set field value to \"1-x\"\n  field:\n    path: w\n"
    );
    let config = "apiVersion: v1\nkind: ConfigMap\ndata:\n  u: 1\n";
    let (items, results, outcome) = run_as(Some("v0.1.1"), Some(config), item);
    assert_eq!(items, item);
    assert_eq!(
        (results, outcome),
        v0_1_1_failure("no matches for the input list of setters")
    );
    // No items at all: nothing matched either.
    let (_, results, outcome) = run_as(Some("v0.1.1"), Some(config), "");
    assert_eq!(
        (results, outcome),
        v0_1_1_failure("no matches for the input list of setters")
    );
    // Later releases: the result, exit 0.
    for release in [None, Some("v0.2.0"), Some("v0.2.1")] {
        let (items, results, outcome) = run_as(release, Some(config), item);
        assert_eq!(outcome, Ok(()), "{release:?}");
        assert_eq!(items, item);
        assert_eq!(results, "- message: no matches for input setter(s)\n");
    }
}

#[test]
fn v0_1_1_sets_and_fails_otherwise_as_later_releases() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\ndata:\n  app: shop\n  replicas: \"5\"\n  tag: 1.8.0\n  args: '[--c, \"--d\"]'\n  envs: '[prod]'\n  zones: ''\n";
    assert_eq!(
        run_as(Some("v0.1.1"), Some(config), PACKAGE),
        run_as(None, Some(config), PACKAGE)
    );
    let item = "kind: A\nmetadata:\n  name: a\nv: xy # kpt-set: ${a}-${b}\n";
    let err = "values for setters [${b}] must be provided";
    let (items, results, outcome) = run_as(
        Some("v0.1.1"),
        Some("kind: ConfigMap\ndata:\n  a: v\n"),
        item,
    );
    assert_eq!(items, item);
    assert_eq!(
        (results, outcome),
        (
            format!("- message: 'failed to apply setters: {err}'\n  severity: error\n"),
            Err(Stop::Failed(format!("{err}{err}\n")))
        )
    );
}
