use std::path::PathBuf;

use kube::api::DynamicObject;
use serde_json::{json, Value};

use super::*;
use runner_core::config::test_support::*;
use runner_core::config::DEFAULT_IMAGE_PREFIX;

const NS: &str = "fns";

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        namespace: NS.into(),
        name: name.into(),
    }
}

/// A FunctionConfig object as the API server returns it.
fn object(name: &str, generation: i64, created: u32, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "FunctionConfig",
        "metadata": {
            "name": name,
            "namespace": NS,
            "generation": generation,
            "resourceVersion": format!("{name}-{generation}"),
            "creationTimestamp": format!("2024-01-01T00:00:{created:02}Z"),
        },
        "spec": spec,
    }))
    .unwrap()
}

fn binary_spec(image: &str, path: &str) -> Value {
    json!({"image": image, "binaryExecutor": {"tags": ["v1"], "path": path}})
}

fn with_status(mut object: DynamicObject, version: &str, status: Value) -> DynamicObject {
    object.metadata.resource_version = Some(version.into());
    object.data["status"] = status;
    object
}

/// The directory's configs: `dir-fn:v1` → `/dir/fn`.
fn combiner() -> Combiner {
    let local = config(
        "dir-fn",
        "image: dir-fn\nbinaryExecutor:\n  tags: [v1]\n  path: /dir/fn\n",
    );
    let mut local = local;
    local.source = Some(runner_core::config::DocLocation {
        source: "/dir/fns.yaml".into(),
        document: Some(1),
    });
    Combiner::new(vec![local], None, DEFAULT_IMAGE_PREFIX.into())
}

fn binary(index: &ImageIndex, image: &str) -> Option<PathBuf> {
    index.binary_for(image, "").map(|m| m.path)
}

fn rejected(combiner: &Combiner, name: &str) -> (&'static str, String) {
    match combiner.outcome(&key(name)) {
        Some(Outcome::Rejected { reason, message }) => (reason, message.clone()),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn cluster_objects_join_the_directorys_and_the_index_follows_their_changes() {
    let mut c = combiner();
    assert!(c.observe(&object("cat", 1, 1, binary_spec("cat-fn", "/a"))));
    let index = c.rebuild();
    assert_eq!(binary(&index, "cat-fn:v1"), Some(PathBuf::from("/a")));
    assert_eq!(binary(&index, "dir-fn:v1"), Some(PathBuf::from("/dir/fn")));
    assert_eq!(c.outcome(&key("cat")), Some(&Outcome::Applied));
    assert_eq!(c.applied(), 1);

    assert!(c.observe(&object("cat", 2, 1, binary_spec("cat-fn", "/b"))));
    assert_eq!(binary(&c.rebuild(), "cat-fn:v1"), Some(PathBuf::from("/b")));
    // A status write or a label is no change of configuration.
    let status_only = with_status(
        object("cat", 2, 1, binary_spec("cat-fn", "/b")),
        "cat-2b",
        json!({"functionRunnerObservedGeneration": 2}),
    );
    assert!(!c.observe(&status_only));

    assert!(c.forget(&key("cat")));
    assert!(!c.forget(&key("cat")));
    let index = c.rebuild();
    assert_eq!(binary(&index, "cat-fn:v1"), None);
    assert_eq!(binary(&index, "dir-fn:v1"), Some(PathBuf::from("/dir/fn")));
    assert_eq!(c.outcome(&key("cat")), None);
}

#[test]
fn the_directory_and_then_the_oldest_object_keep_a_mapping() {
    let mut c = combiner();
    // "new" sorts before "old" by name; age decides.
    c.observe(&object("new", 1, 9, binary_spec("cat-fn", "/new")));
    c.observe(&object("old", 1, 1, binary_spec("cat-fn", "/old")));
    c.observe(&object("shadow", 1, 0, binary_spec("dir-fn", "/shadow")));
    let index = c.rebuild();
    assert_eq!(binary(&index, "cat-fn:v1"), Some(PathBuf::from("/old")));
    assert_eq!(binary(&index, "dir-fn:v1"), Some(PathBuf::from("/dir/fn")));
    assert_eq!(c.outcome(&key("old")), Some(&Outcome::Applied));
    let (reason, message) = rejected(&c, "new");
    assert_eq!(reason, crd::REASON_CONFLICT);
    assert_eq!(
        message,
        "spec.binaryExecutor.tags[0]: image \"ghcr.io/kptdev/krm-functions-catalog/cat-fn:v1\" \
         is already configured by FunctionConfig fns/old (in the cluster)"
    );
    let (reason, message) = rejected(&c, "shadow");
    assert_eq!(reason, crd::REASON_CONFLICT);
    assert!(
        message.ends_with("FunctionConfig porch-fn-system/dir-fn (/dir/fns.yaml (document 1))"),
        "{message}"
    );

    // The older one goes: the newer one takes over.
    c.forget(&key("old"));
    assert_eq!(
        binary(&c.rebuild(), "cat-fn:v1"),
        Some(PathBuf::from("/new"))
    );
    assert_eq!(c.outcome(&key("new")), Some(&Outcome::Applied));
}

#[test]
fn invalid_objects_are_rejected_naming_their_fields() {
    let mut c = combiner();
    c.observe(&object(
        "tag",
        1,
        1,
        json!({"image": "a", "binaryExecutor": {"tags": ["bad tag"], "path": "/a"}}),
    ));
    c.observe(&object(
        "type",
        1,
        1,
        json!({"image": "b", "podExecutor": {"tags": ["v1"], "maxParallelExecutions": "two"}}),
    ));
    c.observe(&object("relative", 1, 1, binary_spec("c", "bin/c")));
    c.observe(&object("empty", 1, 1, json!(null)));
    let index = c.rebuild();
    assert!(index.is_empty() || binary(&index, "c:v1").is_none());
    let (reason, message) = rejected(&c, "tag");
    assert_eq!(reason, crd::REASON_INVALID);
    assert!(
        message.starts_with("spec.binaryExecutor.tags[0]: invalid tag \"bad tag\""),
        "{message}"
    );
    let (_, message) = rejected(&c, "type");
    assert!(
        message.starts_with("spec.podExecutor.maxParallelExecutions: "),
        "{message}"
    );
    let (_, message) = rejected(&c, "relative");
    assert!(message.starts_with("spec.binaryExecutor.path: the relative path \"bin/c\" needs the runner's --functions directory"), "{message}");
    let (_, message) = rejected(&c, "empty");
    assert_eq!(
        message,
        "spec.image: must be set; spec: no executor set: one of binaryExecutor, podExecutor or goExecutor is needed"
    );

    // With a --functions directory, a relative path is resolved against it.
    let mut c = Combiner::new(
        Vec::new(),
        Some("/srv/functions".into()),
        DEFAULT_IMAGE_PREFIX.into(),
    );
    c.observe(&object("relative", 1, 1, binary_spec("c", "bin/c")));
    assert_eq!(
        binary(&c.rebuild(), "c:v1"),
        Some(PathBuf::from("/srv/functions/bin/c"))
    );
}

#[test]
fn a_relist_drops_what_was_deleted_meanwhile_and_deleting_objects_count_as_gone() {
    let mut c = combiner();
    let a = object("a", 1, 1, binary_spec("a", "/a"));
    let b = object("b", 1, 2, binary_spec("b", "/b"));
    assert!(c.replace(&[a.clone(), b.clone()]));
    assert!(!c.replace(&[a.clone(), b.clone()]), "the same list again");
    assert!(c.replace(std::slice::from_ref(&a)));
    let index = c.rebuild();
    assert!(binary(&index, "b:v1").is_none());
    assert!(binary(&index, "a:v1").is_some());

    let mut deleting = a.clone();
    deleting.metadata.deletion_timestamp = a.metadata.creation_timestamp.clone();
    assert!(c.observe(&deleting));
    assert!(binary(&c.rebuild(), "a:v1").is_none());
    assert!(!c.replace(&[deleting]));
}

#[test]
fn statuses_are_written_until_they_say_the_outcome_and_then_never() {
    let mut c = combiner();
    let cat = object("cat", 1, 1, binary_spec("cat-fn", "/a"));
    c.observe(&cat);
    c.rebuild();
    let patches = c.status_patches("2024-02-02T00:00:00Z");
    assert_eq!(
        patches,
        vec![(
            key("cat"),
            json!({"status": {
                "functionRunnerObservedGeneration": 1,
                "error": null,
                "conditions": [{
                    "type": "FunctionRunnerApplied",
                    "status": "True",
                    "observedGeneration": 1,
                    "lastTransitionTime": "2024-02-02T00:00:00Z",
                    "reason": "Applied",
                    "message": "the function runner serves this FunctionConfig",
                }],
            }})
        )]
    );
    // The API server's answer: the status as written (error: null removed).
    let mut written = patches[0].1["status"].clone();
    written.as_object_mut().unwrap().remove("error");
    c.wrote(
        &key("cat"),
        &with_status(cat.clone(), "w1", written.clone()),
    );
    assert!(c.status_patches("later").is_empty());
    // Its watch event, and any later event that changes nothing: no write.
    assert!(!c.observe(&with_status(cat.clone(), "w1", written.clone())));
    assert!(c.status_patches("later").is_empty());

    // Another runner starting on the same objects writes nothing either.
    let mut restarted = combiner();
    restarted.observe(&with_status(cat.clone(), "w1", written.clone()));
    restarted.rebuild();
    assert!(restarted.status_patches("later").is_empty());

    // Where the CRD (Porch's) has no schema for the condition, the API server
    // drops it: one write per change, not a loop.
    let pruned = json!({"functionRunnerObservedGeneration": 1});
    let mut porch = combiner();
    porch.observe(&with_status(cat.clone(), "p1", json!({})));
    porch.rebuild();
    assert_eq!(porch.status_patches("t").len(), 1);
    porch.wrote(&key("cat"), &with_status(cat.clone(), "p2", pruned.clone()));
    assert!(porch.status_patches("t").is_empty());
    porch.observe(&with_status(cat.clone(), "p2", pruned.clone()));
    assert!(porch.status_patches("t").is_empty());
    // Someone else's write (a new resourceVersion) is answered once.
    porch.observe(&with_status(cat, "p3", json!({})));
    assert_eq!(porch.status_patches("t").len(), 1);
}

#[test]
fn a_new_outcome_is_written_even_over_this_runners_own_last_write() {
    let mut c = combiner();
    let old = object("old", 1, 1, binary_spec("cat-fn", "/old"));
    let new = object("new", 1, 2, binary_spec("cat-fn", "/new"));
    c.observe(&old);
    c.observe(&new);
    c.rebuild();
    for (key, patch) in c.status_patches("t1") {
        let object = if key.name == "old" { &old } else { &new };
        let written = with_status(
            object.clone(),
            &format!("{}-w", key.name),
            patch["status"].clone(),
        );
        c.wrote(&key, &written);
        c.observe(&written);
    }
    assert!(c.status_patches("t1").is_empty());
    // The conflict ends: "new" is applied now, and its status must say so,
    // though the last write to it was this runner's.
    c.forget(&key("old"));
    c.rebuild();
    let patches = c.status_patches("t2");
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].0, key("new"));
    assert_eq!(
        patches[0].1["status"]["functionRunnerObservedGeneration"],
        1
    );
    assert_eq!(patches[0].1["status"]["conditions"][0]["reason"], "Applied");
}

#[test]
fn a_rejected_generation_keeps_the_last_applied_one_and_times_move_with_the_status() {
    let mut c = combiner();
    let applied = json!({
        "functionRunnerObservedGeneration": 1,
        "conditions": [
            {"type": "Other", "status": "True", "lastTransitionTime": "t0", "reason": "X", "message": ""},
            {"type": "FunctionRunnerApplied", "status": "True", "observedGeneration": 1,
             "lastTransitionTime": "t1", "reason": "Applied",
             "message": "the function runner serves this FunctionConfig"},
        ],
    });
    let bad = json!({"image": "cat-fn", "binaryExecutor": {"tags": ["bad tag"], "path": "/a"}});
    c.observe(&with_status(
        object("cat", 2, 1, bad),
        "v2",
        applied.clone(),
    ));
    c.rebuild();
    let patches = c.status_patches("t2");
    let status = &patches[0].1["status"];
    // Not a generation the runner applied: the field keeps the last one.
    assert!(status.get("functionRunnerObservedGeneration").is_none());
    assert!(status["error"]
        .as_str()
        .unwrap()
        .starts_with("spec.binaryExecutor.tags[0]"));
    let conditions = status["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["type"], "Other", "other conditions are kept");
    assert_eq!(conditions[1]["status"], "False");
    assert_eq!(conditions[1]["reason"], "Invalid");
    assert_eq!(conditions[1]["observedGeneration"], 2);
    assert_eq!(conditions[1]["lastTransitionTime"], "t2");

    // Applied again at generation 3: a status that was True keeps its time.
    c.observe(&with_status(
        object("cat", 3, 1, binary_spec("cat-fn", "/a")),
        "v3",
        applied,
    ));
    c.rebuild();
    let patches = c.status_patches("t3");
    let status = &patches[0].1["status"];
    assert_eq!(status["functionRunnerObservedGeneration"], 3);
    assert_eq!(status["conditions"][1]["lastTransitionTime"], "t1");
}
