#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use krm_yaml::emit;

use super::run;
use crate::function::{Context, Stop};
use crate::test_support::{list_each, text};

const DEPLOY: &str = "\
# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app # its name
  namespace: prod
  annotations:
    internal.config.kubernetes.io/path: deploy.yaml
    internal.config.kubernetes.io/index: '0'
spec:
  replicas: 1
";

const SVC: &str = "\
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: prod
spec:
  ports: [80] # flow
";

#[test]
fn a_matching_resource_is_replaced_keeping_path_and_index() {
    // Another version of the same group matches; the resource's own
    // comments come with it.
    let mut rl = list_each(
        &[DEPLOY, SVC],
        Some(
            "apiVersion: apps/v1beta1 # older\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    zeta: 'on'\n    config.kubernetes.io/function: x\n  labels: {a: b}\nspec:\n  replicas: 3 # more\n",
        ),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: apps/v1beta1 # older\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  labels: {a: b}\n  annotations:\n    internal.config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/path: deploy.yaml\n    zeta: \"on\"\nspec:\n  replicas: 3 # more\n---\n".to_owned()
            + SVC
    );
    assert!(rl.results.is_empty());
    assert_eq!(rl.log, "");
}

#[test]
fn no_match_appends_with_target_path_as_path() {
    let mut rl = list_each(
        &[SVC],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    config.kubernetes.io/target-path: cm.yaml\n    internal.config.kubernetes.io/index: '3'\ndata:\n  k: v\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        SVC.to_owned()
            + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    internal.config.kubernetes.io/path: cm.yaml\ndata:\n  k: v\n"
    );
    // A target path that differs from the item's path: no match, added.
    let mut rl = list_each(
        &[DEPLOY],
        Some("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/target-path: other.yaml\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(rl.items.len(), 2);
    assert_eq!(
        emit::encode_node(&rl.items[1], true),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    internal.config.kubernetes.io/path: other.yaml\n"
    );
    // The same target path replaces.
    let mut rl = list_each(
        &[DEPLOY],
        Some("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/target-path: deploy.yaml\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    internal.config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/path: deploy.yaml\n"
    );
}

#[test]
fn a_list_upserts_each_item_and_function_configs_are_skipped() {
    let fn_config = "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.k8s.io/function: |\n      container: x\n";
    let mut rl = list_each(
        &[fn_config, SVC],
        Some("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: app\n    namespace: prod\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: prod\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        fn_config.to_owned()
            + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    internal.config.kubernetes.io/index: \"\"\n    internal.config.kubernetes.io/path: \"\"\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n"
    );
    // A List without items changes nothing.
    let mut rl = list_each(&[SVC], Some("apiVersion: v1\nkind: List\n"));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(text(&rl.items), SVC);
}

#[test]
fn bad_configs_and_items_fail_as_the_catalog_does() {
    let fail = |e: &str| Err(Stop::Failed(format!("{e}{e}\n")));
    for config in ["{}", "spec: {}\n", "metadata: {}\n"] {
        let mut rl = list_each(&[SVC], Some(config));
        assert_eq!(
            run(&mut rl, &Context::new()),
            fail("failed to upsert resource: missing Resource metadata"),
            "{config}"
        );
        assert_eq!(text(&rl.items), SVC);
        assert!(rl.results.is_empty());
    }
    // An item without metadata (or not a mapping at all).
    for item in ["- a\n", "just text\n", "spec: {}\n"] {
        let mut rl = list_each(&[item], Some(SVC));
        assert_eq!(
            run(&mut rl, &Context::new()),
            fail("failed to upsert resource: missing Resource metadata")
        );
    }
    let mut rl = list_each(&[SVC], None);
    assert_eq!(
        run(&mut rl, &Context::new()),
        fail("failed to upsert resource: missing functionConfig")
    );
    // A scalar metadata cannot take annotations.
    let mut rl = list_each(&[], Some("kind: A\nmetadata: x\n"));
    assert_eq!(
        run(&mut rl, &Context::new()),
        fail("failed to upsert resource: wrong node kind: expected MappingNode but got ScalarNode")
    );
    // A List whose items are odd: a scalar item has no metadata.
    let mut rl = list_each(&[SVC], Some("kind: List\nitems: [1]\n"));
    assert_eq!(
        run(&mut rl, &Context::new()),
        fail("failed to upsert resource: missing Resource metadata")
    );
    // A resource with only a kind gets `metadata: {}`, as kyaml leaves it.
    let mut rl = list_each(&[], Some("kind: A\n"));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(text(&rl.items), "kind: A\nmetadata: {}\n");
}

#[test]
fn a_cancelled_call_stops() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rl = list_each(&[SVC], Some(SVC));
    assert_eq!(
        run(&mut rl, &Context::new().with_cancel(flag)),
        Err(Stop::Cancelled)
    );
}

/// [`DEPLOY`] as kpt sends it: the file annotations in both forms.
const DEPLOY_BOTH: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: prod
  annotations:
    config.kubernetes.io/path: deploy.yaml
    config.kubernetes.io/index: '1'
    internal.config.kubernetes.io/path: deploy.yaml
    internal.config.kubernetes.io/index: '1'
spec:
  replicas: 1
";

/// Runs upsert-resource over `items` with `config`, as `release`.
fn run_as(
    release: Option<&'static str>,
    items: &[&str],
    config: &str,
) -> (String, Result<(), Stop>) {
    let mut rl = list_each(items, Some(config));
    let outcome = run(&mut rl, &Context::new().with_release(release));
    assert!(rl.results.is_empty());
    assert_eq!(rl.log, "");
    (text(&rl.items), outcome)
}

#[test]
fn v0_2_0_keeps_and_sets_the_legacy_file_annotations() {
    let config = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    zeta: 'on'\nspec:\n  replicas: 3\n";
    let replaced = |anns: &str| {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n{anns}    zeta: \"on\"\nspec:\n  replicas: 3\n")
    };
    // Replaced: the matched item's path and index, of the release's
    // kyaml, are kept; the others go with the item.
    assert_eq!(
        run_as(Some("v0.2.0"), &[DEPLOY_BOTH], config),
        (
            replaced("    config.kubernetes.io/index: \"1\"\n    config.kubernetes.io/path: deploy.yaml\n"),
            Ok(())
        )
    );
    assert_eq!(
        run_as(None, &[DEPLOY_BOTH], config),
        (
            replaced("    internal.config.kubernetes.io/index: \"1\"\n    internal.config.kubernetes.io/path: deploy.yaml\n"),
            Ok(())
        )
    );
    // An item with only the internal ones: v0.2.0 writes the legacy
    // ones empty.
    assert_eq!(
        run_as(Some("v0.2.0"), &[DEPLOY], config),
        (
            replaced("    config.kubernetes.io/index: \"\"\n    config.kubernetes.io/path: \"\"\n"),
            Ok(())
        )
    );
}

#[test]
fn v0_2_0_matches_the_target_path_against_the_legacy_path() {
    let config = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/target-path: deploy.yaml\n    internal.config.kubernetes.io/path: x.yaml\n    internal.config.kubernetes.io/index: '4'\n    config.kubernetes.io/index: '5'\n";
    // DEPLOY has only `internal.config.kubernetes.io/path: deploy.yaml`:
    // no match for v0.2.0, so the resource is appended, without its
    // legacy index, its path the target path; the internal ones stay.
    let (out, outcome) = run_as(Some("v0.2.0"), &[DEPLOY], config);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out,
        DEPLOY.to_owned()
            + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/path: deploy.yaml\n    internal.config.kubernetes.io/index: \"4\"\n    internal.config.kubernetes.io/path: x.yaml\n"
    );
    // Master matches it and replaces it.
    let (out, outcome) = run_as(None, &[DEPLOY], config);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/index: \"5\"\n    internal.config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/path: deploy.yaml\n"
    );
    // v0.2.0 matches an item with the legacy path.
    let (out, outcome) = run_as(Some("v0.2.0"), &[DEPLOY_BOTH], config);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: prod\n  annotations:\n    config.kubernetes.io/index: \"1\"\n    config.kubernetes.io/path: deploy.yaml\n    internal.config.kubernetes.io/index: \"4\"\n    internal.config.kubernetes.io/path: x.yaml\n"
    );
}

#[test]
fn v0_2_0_fails_as_master() {
    let e = "failed to upsert resource: missing Resource metadata";
    assert_eq!(
        run_as(Some("v0.2.0"), &[SVC], "{}"),
        (SVC.to_owned(), Err(Stop::Failed(format!("{e}{e}\n"))))
    );
}
