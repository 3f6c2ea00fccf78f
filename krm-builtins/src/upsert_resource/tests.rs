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
