//! `deploy/` is a kpt package (docs/deploy.md, "Customising"): its
//! Kptfile's apply-setters sets the two images, the two namespaces and the
//! runner's replicas, and `function-runner render` runs it built in (no
//! Docker engine reachable). Rendered with the default setters it is the
//! checked-in manifests byte for byte; rendered with others, every
//! occurrence of each value changes and nothing else does.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use e2e_tests::deploy_pkg::{deploy_dir, package_files, render, render_deploy_package};
use serde_yaml_ng::Value;

/// The setters and their defaults, as docs/deploy.md lists them.
const DEFAULTS: &[(&str, &str)] = &[
    ("function-namespace", "porch-fn-system"),
    ("replicas", "1"),
    (
        "runner-image",
        "docker.io/nephio/porch-function-runner:latest",
    ),
    ("runner-namespace", "porch-system"),
    (
        "wrapper-server-image",
        "docker.io/nephio/porch-wrapper-server:latest",
    ),
];

/// Values no checked-in file holds, so each occurrence is told apart.
const CUSTOM: &[(&str, &str)] = &[
    ("function-namespace", "ops-fns"),
    ("replicas", "3"),
    (
        "runner-image",
        "registry.example.com/ops/function-runner:v1",
    ),
    ("runner-namespace", "ops-runner"),
    (
        "wrapper-server-image",
        "registry.example.com/ops/wrapper-server:v1",
    ),
];

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The manifests: every file but the Kptfile (which is local config).
fn manifests() -> Vec<String> {
    package_files(&deploy_dir())
        .unwrap()
        .into_iter()
        .filter(|name| name != "Kptfile")
        .collect()
}

#[test]
fn the_kptfile_sets_the_defaults_docs_list_with_a_built_in_apply_setters() {
    let kptfile: Value = serde_yaml_ng::from_str(&read(&deploy_dir().join("Kptfile"))).unwrap();
    assert_eq!(kptfile["apiVersion"].as_str(), Some("kpt.dev/v1"));
    assert_eq!(kptfile["kind"].as_str(), Some("Kptfile"));
    assert_eq!(
        kptfile["metadata"]["annotations"]["config.kubernetes.io/local-config"].as_str(),
        Some("true"),
        "kubectl-style appliers skip local config"
    );
    let mutators = kptfile["pipeline"]["mutators"].as_sequence().unwrap();
    assert_eq!(mutators.len(), 1, "{mutators:?}");
    assert_eq!(
        mutators[0]["image"].as_str(),
        Some("ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.2"),
        "a release the built-in reproduces (krm-builtins/src/versions.rs)"
    );
    let config: Vec<(String, String)> = mutators[0]["configMap"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v.as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(config, expected);
    // docs/deploy.md names every setter with its default.
    let docs = read(&deploy_dir().join("../docs/deploy.md"));
    for (name, default) in DEFAULTS {
        assert!(
            docs.contains(&format!("`{name}`")) && docs.contains(&format!("`{default}`")),
            "docs/deploy.md does not list the setter {name} (default {default})"
        );
    }
}

#[test]
fn rendering_with_the_default_setters_changes_nothing_but_the_kptfile_status() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deploy");
    let out = render_deploy_package(&dir, &[]).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Successfully executed 1 function(s) in 1 package(s)."),
        "{stderr}"
    );
    assert_eq!(
        package_files(&dir).unwrap(),
        package_files(&deploy_dir()).unwrap(),
        "the render wrote or removed files"
    );
    for name in manifests() {
        assert!(
            read(&dir.join(&name)) == read(&deploy_dir().join(&name)),
            "rendering with the defaults changed {name}"
        );
    }
    // The Kptfile gets kpt beta.67's render status, appended: the file is
    // checked in as render writes it (no comments, the types' field order),
    // so nothing before the status changes.
    let before = read(&deploy_dir().join("Kptfile"));
    let after = read(&dir.join("Kptfile"));
    let status = after
        .strip_prefix(before.as_str())
        .unwrap_or_else(|| panic!("the Kptfile changed before its status:\n{after}"));
    assert!(status.starts_with("status:\n"), "{status}");
    let status: Value = serde_yaml_ng::from_str(status).unwrap();
    let condition = &status["status"]["conditions"][0];
    assert_eq!(condition["type"].as_str(), Some("Rendered"));
    assert_eq!(condition["reason"].as_str(), Some("RenderSuccess"));
    let step = &status["status"]["renderStatus"]["mutationSteps"][0];
    assert_eq!(
        step["image"].as_str(),
        Some("ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.2")
    );
    assert_eq!(step["exitCode"].as_i64(), Some(0));

    // A second render (the operator's next change) leaves it all as it is.
    let again = tmp.path().join("again");
    std::fs::create_dir(&again).unwrap();
    for name in package_files(&dir).unwrap() {
        std::fs::copy(dir.join(&name), again.join(&name)).unwrap();
    }
    render(&again).unwrap();
    for name in package_files(&dir).unwrap() {
        assert!(
            read(&again.join(&name)) == read(&dir.join(&name)),
            "a second render changed {name}"
        );
    }
}

/// Every string scalar (mapping values and sequence items, keys left out)
/// of `value`.
fn scalars<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => found.push(s),
        Value::Sequence(items) => items.iter().for_each(|v| scalars(v, found)),
        Value::Mapping(map) => map.values().for_each(|v| scalars(v, found)),
        Value::Tagged(tagged) => scalars(&tagged.value, found),
        _ => {}
    }
}

fn documents(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

#[test]
fn rendering_with_other_setters_changes_every_occurrence_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deploy");
    render_deploy_package(&dir, CUSTOM).unwrap();
    let value =
        |set: &[(&str, &'static str)], name: &str| set.iter().find(|(n, _)| *n == name).unwrap().1;

    let mut marked = 0;
    for name in manifests() {
        let before = read(&deploy_dir().join(&name));
        let after = read(&dir.join(&name));
        assert_eq!(
            before.lines().count(),
            after.lines().count(),
            "{name}: lines added or removed"
        );
        for (i, (old, new)) in before.lines().zip(after.lines()).enumerate() {
            let at = format!("{name}:{}", i + 1);
            if !old.contains("# kpt-set: ") {
                assert_eq!(old, new, "{at}: a line without a setter changed");
                continue;
            }
            marked += 1;
            assert_ne!(old, new, "{at}: a setter's field kept its default");
            // The new line is the old one with each custom value where its
            // default was: nothing else on it changed.
            let mut undone = new.to_string();
            for (setter, custom) in CUSTOM {
                let default = value(DEFAULTS, setter);
                undone = if *setter == "replicas" {
                    undone.replace(
                        &format!("replicas: {custom} "),
                        &format!("replicas: {default} "),
                    )
                } else {
                    undone.replace(custom, default)
                };
            }
            assert_eq!(undone, old, "{at}: more than the setter's value changed");
        }
    }
    assert_eq!(marked, 20, "fields marked with a setter");

    // No field of any manifest keeps a default value: an occurrence
    // without its setter comment would (comments are not fields).
    let mut by_kind: Vec<Value> = Vec::new();
    for name in manifests() {
        for doc in documents(&read(&dir.join(&name))) {
            let mut found = Vec::new();
            scalars(&doc, &mut found);
            for s in found {
                for (setter, default) in DEFAULTS {
                    if *setter != "replicas" {
                        assert!(
                            !s.contains(default),
                            "{name}: {s:?} still holds the default of {setter}"
                        );
                    }
                }
            }
            by_kind.push(doc);
        }
    }

    // And each value is where a cluster reads it.
    let runner_ns = value(CUSTOM, "runner-namespace");
    let fn_ns = value(CUSTOM, "function-namespace");
    let kind = |k: &str| -> Vec<&Value> {
        by_kind
            .iter()
            .filter(|d| d["kind"].as_str() == Some(k))
            .collect()
    };
    let names: BTreeSet<&str> = kind("Namespace")
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from([runner_ns, fn_ns]));
    for doc in &by_kind {
        let ns = doc["metadata"]["namespace"].as_str();
        match doc["kind"].as_str().unwrap() {
            "Namespace" | "CustomResourceDefinition" => assert_eq!(ns, None),
            "FunctionConfig" => assert_eq!(ns, Some(fn_ns)),
            _ => assert!(ns == Some(runner_ns) || ns == Some(fn_ns), "{doc:?}"),
        }
        for subject in doc["subjects"].as_sequence().into_iter().flatten() {
            assert_eq!(subject["namespace"].as_str(), Some(runner_ns));
        }
    }
    let deployment = kind("Deployment")[0];
    assert_eq!(
        deployment["spec"]["replicas"].as_i64(),
        Some(3),
        "an integer"
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"].as_str(),
        Some(value(CUSTOM, "runner-image"))
    );
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.contains(&format!("--pod-namespace={fn_ns}").as_str()),
        "{args:?}"
    );
    let wrapper = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("WRAPPER_SERVER_IMAGE"))
        .unwrap();
    assert_eq!(
        wrapper["value"].as_str(),
        Some(value(CUSTOM, "wrapper-server-image"))
    );
}
