use crate::function::Stop;
use crate::test_support::run;

const PACKAGE: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment # the name
  annotations:
    config.kubernetes.io/path: deploy.yaml
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1.7.1
        script: |
          nginx
          run
      envs:
      - stage
      - dev
      zones: [b, a]
      tags: [nginx-x, y]
"#;

#[test]
fn comments_for_scalars_and_arrays() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\ndata:\n  app: nginx\n  app-deploy: nginx-deployment\n  tag: 1.7.1\n  envs: |\n    - dev\n    - stage\n  zones: '[a, b]'\n  ignored: 'a: b'\n";
    let (items, results, outcome) = run("create-setters", Some(config), PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        items,
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment # kpt-set: ${app-deploy}
  annotations:
    config.kubernetes.io/path: deploy.yaml
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: nginx # kpt-set: ${app}
          image: nginx:1.7.1 # kpt-set: ${app}:${tag}
          script: |
            nginx
            run
      envs: # kpt-set: ${envs}
        - stage
        - dev
      zones: # kpt-set: ${zones}
        - b
        - a
      tags:
        - nginx-x # kpt-set: ${app}-x
        - y
"#
    );
    assert_eq!(
        results,
        r#"- message: 'Added line comment "kpt-set: ${app-deploy}" for field with value "nginx-deployment"'
  field:
    path: metadata.name
  file:
    path: deploy.yaml
- message: 'Added line comment "kpt-set: ${envs}" for field with value "[dev stage]"'
  field:
    path: spec.template.spec.envs
  file:
    path: deploy.yaml
- message: 'Added line comment "kpt-set: ${zones}" for field with value "[a b]"'
  field:
    path: spec.template.spec.zones
  file:
    path: deploy.yaml
- message: 'Added line comment "kpt-set: ${app}" for field with value "nginx"'
  field:
    path: spec.template.spec.containers[0].name
  file:
    path: deploy.yaml
- message: 'Added line comment "kpt-set: ${app}:${tag}" for field with value "nginx:1.7.1"'
  field:
    path: spec.template.spec.containers[0].image
  file:
    path: deploy.yaml
- message: 'Added line comment "kpt-set: ${app}-x" for field with value "nginx-x"'
  field:
    path: spec.template.spec.tags[0]
  file:
    path: deploy.yaml
"#
    );
}

#[test]
fn every_config_form_with_data_is_read() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x\n";
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  v: x\n",
        "apiVersion: fn.kpt.dev/v1alpha1\nkind: CreateSetters\nmetadata:\n  name: s\ndata:\n  v: x\n",
    ] {
        let (items, results, outcome) = run("create-setters", Some(config), item);
        assert_eq!(outcome, Ok(()));
        assert_eq!(items, "kind: A\nmetadata:\n  name: a\nv: x # kpt-set: ${v}\n");
        assert_eq!(
            results,
            "- message: 'Added line comment \"kpt-set: ${v}\" for field with value \"x\"'\n  field:\n    path: v\n"
        );
    }
}

#[test]
fn bad_configs_and_no_matches_fail() {
    let item = "kind: A\nmetadata:\n  name: a\nv: x\n";
    let cases = [
        (None, "config map cannot be empty"),
        (
            Some("kind: ConfigMap\nmetadata:\n  name: c\n"),
            "config map cannot be empty",
        ),
        (
            Some("kind: ConfigMap\ndata: 3\n"),
            "config map cannot be empty",
        ),
        (Some("- a\n"), "config map cannot be empty"),
        (Some("kind: ConfigMap\ndata:\n  v: ''\n"), "parsing error"),
        (Some("kind: ConfigMap\ndata:\n  v: '[x'\n"), "parsing error"),
        (
            Some("kind: ConfigMap\ndata:\n  v: nope\n"),
            "no matches for the input list of setters",
        ),
    ];
    for (config, err) in cases {
        let (items, results, outcome) = run("create-setters", config, item);
        assert_eq!(
            outcome,
            Err(Stop::Failed(format!("{err}{err}\n"))),
            "{config:?}"
        );
        assert_eq!(items, item);
        assert_eq!(
            results,
            format!("- message: 'failed to create setters: {err}'\n  severity: error\n")
        );
    }
    let (_, _, outcome) = run(
        "create-setters",
        Some("kind: ConfigMap\ndata:\n  v: x\n"),
        "just text\n",
    );
    let err = "missing Resource metadata";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
}

#[test]
fn longest_value_first_and_odd_trees() {
    let item = "kind: A\nmetadata:\n  name: a\nv: nginx-abc-dev\nl: []\nm: &x {k: nginx}\nn: *x\n";
    let config = "kind: ConfigMap\ndata:\n  short: nginx\n  long: nginx-abc\n  empty: '[]'\n";
    let (items, _, outcome) = run("create-setters", Some(config), item);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        items,
        "kind: A\nmetadata:\n  name: a\nv: nginx-abc-dev # kpt-set: ${long}-dev\nl: [] # kpt-set: ${empty}\nm: &x {k: nginx, # kpt-set: ${short}\n}\nn: *x\n"
    );
}
