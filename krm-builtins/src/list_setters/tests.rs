#![allow(clippy::unwrap_used)]

use crate::function::Stop;
use crate::test_support::run;

const KPTFILE: &str = r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
  annotations:
    config.kubernetes.io/path: Kptfile
pipeline:
  mutators:
  - image: gcr.io/kpt-fn/apply-setters:v0.1
    configMap:
      app: shop
      tiers: '[web, "db"]'
      unused: '1'
  - image: gcr.io/kpt-fn/set-labels:v0.1
  - image: gcr.io/kpt-fn/apply-setters:v0.1
    configPath: setters.yaml
"#;

const SETTERS: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: setters
  annotations:
    config.kubernetes.io/path: setters.yaml
data:
  replicas: "3"
  app: shop2
"#;

const DEPLOY: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop-web # kpt-set: ${app}-web
  annotations:
    config.kubernetes.io/path: deploy.yaml
spec:
  replicas: 3 # kpt-set: ${replicas}
  tiers: # kpt-set: ${tiers}
  - web
  - db
  zones: [b, a] # kpt-set: ${zones}
  host: shop.example.com # kpt-set: ${app}.${domain}
  image: nginx # kpt-set: ${image}:${tag}
"#;

#[test]
fn setters_from_the_comments_and_the_kptfile() {
    let items = format!("{KPTFILE}---\n{SETTERS}---\n{DEPLOY}");
    let (out, results, outcome) = run("list-setters", None, &items);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out,
        crate::test_support::stream(&crate::test_support::nodes(&items))
    );
    assert_eq!(
        results,
        r#"- message: 'Name: app, Value: shop2, Type: str, Count: 2'
- message: 'Name: domain, Value: com, Type: str, Count: 1'
- message: 'Name: replicas, Value: 3, Type: int, Count: 1'
- message: 'Name: tiers, Value: [web, "db"], Type: array, Count: 1'
- message: 'Name: unused, Value: 1, Type: str, Count: 0'
- message: 'Name: zones, Value: [a, b], Type: array, Count: 1'
"#
    );
}

#[test]
fn without_a_kptfile_only_the_comments_count() {
    // `app.${domain}` reads greedily: `app` takes `shop.example`, but
    // a setter found first keeps its value. A config is not read; a
    // missing file, pipeline or apply-setters is
    // no result.
    for extra in [
        "",
        "---\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\n",
        "---\nkind: Kptfile\nmetadata:\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configPath: gone.yaml\n",
        "---\nkind: Kptfile\nmetadata:\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n",
    ] {
        let items = format!("{DEPLOY}{extra}");
        let (_, results, outcome) = run(
            "list-setters",
            Some("kind: ConfigMap\ndata:\n  x: y\n"),
            &items,
        );
        assert_eq!(outcome, Ok(()), "{extra}");
        assert_eq!(
            results,
            r#"- message: 'Name: app, Value: shop, Type: str, Count: 2'
- message: 'Name: domain, Value: com, Type: str, Count: 1'
- message: 'Name: replicas, Value: 3, Type: int, Count: 1'
- message: 'Name: tiers, Value: [db, web], Type: array, Count: 1'
- message: 'Name: zones, Value: [a, b], Type: array, Count: 1'
"#,
            "{extra}"
        );
    }
}

#[test]
fn no_setters_is_a_warning() {
    let (_, results, outcome) = run(
        "list-setters",
        None,
        "kind: A\nmetadata:\n  name: a\nx: 1 # other\n",
    );
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        results,
        "- message: no setters found\n  severity: warning\n"
    );
    let (_, results, outcome) = run("list-setters", None, "");
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        results,
        "- message: no setters found\n  severity: warning\n"
    );
}

#[test]
fn a_kptfile_that_does_not_decode_fails() {
    let kptfile = "kind: Kptfile\nmetadata:\n  annotations:\n    config.kubernetes.io/path: Kptfile\nextra: 1\npipeline:\n  mutators:\n  - image: apply-setters\n    name: x\n    configMap: [a]\n  - just-a-string\n  validators: {}\n";
    let (_, results, outcome) = run("list-setters", None, kptfile);
    let err = "unable to read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line 5: field extra not found in type v1.KptFile\n  line 9: field name not found in type v1.Function\n  line 10: cannot unmarshal !!seq into map[string]string\n  line 11: cannot unmarshal !!str `just-a-string` into v1.Function\n  line 12: cannot unmarshal !!map into []v1.Function";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
    let msg = krm_yaml::emit::encode_node(
        &krm_yaml::Node::string(format!("failed to list setters: {err}")),
        false,
    );
    assert_eq!(
        results,
        format!(
            "- message: {}  severity: error\n",
            msg.replace('\n', "\n  ").trim_end_matches(' ')
        )
    );
}

#[test]
fn items_without_metadata_fail_and_odd_trees_never_panic() {
    let (_, results, outcome) = run("list-setters", None, "- a # kpt-set: ${a}\n");
    let err = "missing Resource metadata";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
    assert_eq!(
        results,
        "- message: 'failed to list setters: missing Resource metadata'\n  severity: error\n"
    );
    let odd = "kind: Kptfile\nmetadata:\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline: [1]\nx: &a [1] # kpt-set: ${a}\ny: *a\nz: ~ # kpt-set: ${z}\n";
    let _ = run("list-setters", None, odd);
    let odd = "kind: Kptfile\nmetadata:\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline: ~\n";
    let (_, results, outcome) = run("list-setters", None, odd);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        results,
        "- message: no setters found\n  severity: warning\n"
    );
}

/// Runs list-setters as the image of `release` names it.
fn run_as(
    release: Option<&'static str>,
    items: &str,
) -> (crate::function::ResourceList, Result<(), Stop>) {
    let mut rl = crate::test_support::list(items, None);
    let outcome = crate::find("list-setters")
        .unwrap()
        .run(&mut rl, &crate::Context::new().with_release(release));
    (rl, outcome)
}

#[test]
fn v0_1_0_fails_when_no_setters_are_found() {
    let items = "kind: A\nmetadata:\n  name: a\nx: 1 # other\n";
    let (rl, outcome) = run_as(Some("v0.1.0"), items);
    assert_eq!(
        outcome,
        Err(Stop::Failed(
            "no setters foundno setters found\n".to_owned()
        ))
    );
    assert_eq!(
        crate::test_support::results(&rl.results),
        "- message: 'failed to list setters: no setters found'\n  severity: error\n"
    );
    assert_eq!(crate::test_support::out(&rl), items);
    assert_eq!(rl.log, "");
    // No items at all: the same.
    let (rl, outcome) = run_as(Some("v0.1.0"), "");
    assert_eq!(
        outcome,
        Err(Stop::Failed(
            "no setters foundno setters found\n".to_owned()
        ))
    );
    assert_eq!(rl.results.len(), 1);
    // Another release, or none: master's warning.
    for release in [None, Some("v0.2.0")] {
        let (rl, outcome) = run_as(release, items);
        assert_eq!(outcome, Ok(()), "{release:?}");
        assert_eq!(
            crate::test_support::results(&rl.results),
            "- message: no setters found\n  severity: warning\n"
        );
    }
}

#[test]
fn v0_1_0_lists_and_fails_otherwise_as_master() {
    let items = format!("{KPTFILE}---\n{SETTERS}---\n{DEPLOY}");
    let (master, outcome) = run_as(None, &items);
    assert_eq!(outcome, Ok(()));
    let (old, outcome) = run_as(Some("v0.1.0"), &items);
    assert_eq!(outcome, Ok(()));
    assert_eq!(old, master);
    assert_eq!(old.results.len(), 6);
    let (old, outcome) = run_as(Some("v0.1.0"), "- a # kpt-set: ${a}\n");
    let err = "missing Resource metadata";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
    assert_eq!(
        crate::test_support::results(&old.results),
        "- message: 'failed to list setters: missing Resource metadata'\n  severity: error\n"
    );
}
