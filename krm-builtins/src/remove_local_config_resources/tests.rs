#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::run;
use crate::function::Context;
use crate::test_support::{list, out, results_yaml};

fn go(items: &str, config: Option<&str>) -> (String, String) {
    let mut rl = list(items, config);
    run(&mut rl, &Context::new()).unwrap();
    (out(&rl), results_yaml(&rl.results))
}

#[test]
fn local_config_resources_are_removed_and_named() {
    let items = r#"# kept
apiVersion: v1
kind: ConfigMap
metadata:
  name: app # the app's config
  annotations:
    config.kubernetes.io/local-config: "false"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: setters
  annotations:
    config.kubernetes.io/local-config: "TRUE"
    internal.config.kubernetes.io/path: setters.yaml
---
apiVersion: fn.kpt.dev/v1alpha1
kind: ApplyReplacements
metadata:
  name: r
  annotations:
    config.kubernetes.io/local-config: true
    config.kubernetes.io/path: legacy.yaml
---
apiVersion: v1
kind: Service
metadata:
  name: s
"#;
    for config in [
        None,
        Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  x: y\n"),
    ] {
        let (out, results) = go(items, config);
        assert_eq!(
            out,
            "# kept\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app # the app's config\n  annotations:\n    config.kubernetes.io/local-config: \"false\"\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n"
        );
        assert_eq!(
            results,
            "- message: 'Number of resources pruned: 2'\n  severity: info\n- message: 'Resource name: [setters]'\n  severity: info\n  file:\n    path: setters.yaml\n- message: 'Resource name: [r]'\n  severity: info\n  file:\n    path: legacy.yaml\n"
        );
    }
}

#[test]
fn nothing_to_prune_and_odd_items() {
    let (out, results) = go(
        "kind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/local-config: yes\n---\n{}\n---\n~\n---\n- x\n---\nplain\n---\nkind: B\nmetadata: 5\n---\nkind: C\nmetadata:\n  annotations: [1]\n",
        None,
    );
    // Empty and null items are dropped; the others stay.
    assert_eq!(
        out,
        "kind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/local-config: yes\n---\n- x\n---\nplain\n---\nkind: B\nmetadata: 5\n---\nkind: C\nmetadata:\n  annotations: [1]\n"
    );
    assert_eq!(
        results,
        "- message: Found no resources to prune with the local config annotation\n  severity: warning\n"
    );
    // A nameless local resource.
    let (out, results) = go(
        "kind: A\nmetadata:\n  annotations:\n    config.kubernetes.io/local-config: 'True'\n",
        None,
    );
    assert_eq!(out, "");
    assert_eq!(
        results,
        "- message: 'Number of resources pruned: 1'\n  severity: info\n- message: 'Resource name: []'\n  severity: info\n"
    );
}
