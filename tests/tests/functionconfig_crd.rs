//! The FunctionConfig CRD (`deploy/functionconfig-crd.yaml`) and a kube-mode
//! runner that applies FunctionConfig objects live, against the real cluster
//! `KUBECONFIG` names (see kube.rs). The functions are binaryExecutor ones,
//! run by the runner itself: no pod is started.
//!
//! The CRD is installed (or brought to this tree's) and left installed:
//! deleting a CRD deletes every FunctionConfig in every namespace, from
//! under the tests running beside these and anyone else on the cluster.
//! Each test's objects live in its own namespace, deleted at the end.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{eventually_async, prerequisite, require_kubeconfig, Wrapper};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use proto::pb::EvaluateFunctionRequest;
use serde_json::{json, Value};
use support::{
    cluster, functionconfig, functionconfigs, grant_runner_roles, install_crd, runner_kubeconfig,
    setup, start_runner_as, Cleanup, EXAMPLE_FN_DOCKERFILE,
};

/// Porch's function runner's finalizer on FunctionConfigs.
const PORCH_FINALIZER: &str = "config.porch.kpt.dev/functionconfig-function-runner";

/// Creates the test's namespace; deleted when the returned guard drops.
async fn namespace(client: &Client, suffix: &str) -> (String, Cleanup) {
    let name = format!("krm-test-{}-{suffix}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.clone());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (
        name.clone(),
        Cleanup {
            namespace: name,
            images: Vec::new(),
        },
    )
}

#[tokio::test]
async fn the_crd_admits_a_functionconfig_and_rejects_a_wrong_type() {
    let Some(_) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let client = cluster().await;
    install_crd(&client).await;
    let (ns, _cleanup) = namespace(&client, "crd").await;
    let api = functionconfigs(&client, &ns);

    // The examples the parser's tests use, as they are.
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../runner-core/tests/fixtures/config/set-namespace.yaml"
    ))
    .unwrap();
    for text in fixture.split("\n---\n") {
        let mut object: Value = serde_yaml_ng::from_str(text).unwrap();
        if object["kind"] != "FunctionConfig" {
            continue;
        }
        object["metadata"]["namespace"] = json!(ns);
        // The dev cluster's apiserver (v1.20 built with a newer Go) reads
        // an empty string in a custom resource as null and refuses it
        // ("must be of type string: \"null\""), though v1.20 takes it:
        // the default prefix is spelled out here, which means the same.
        if let Some(prefixes) = object["spec"]["prefixes"].as_array_mut() {
            for prefix in prefixes.iter_mut().filter(|p| *p == "") {
                *prefix = json!(runner_core::config::DEFAULT_IMAGE_PREFIX);
            }
        }
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{:?} rejected: {e}", object.metadata.name));
    }
    // Free-form Kubernetes shapes are kept whole; unknown fields are pruned.
    let stored = api.get("apply-setters").await.unwrap();
    assert_eq!(
        stored.data["spec"]["podExecutor"]["templateOverrides"]["container"]["resources"],
        json!({"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}})
    );
    let mut extra = functionconfig(
        "extra",
        json!({"image": "fn", "unknownField": 1, "binaryExecutor": {"tags": ["v1"], "path": "/f"}}),
    );
    extra.metadata.namespace = Some(ns.clone());
    let stored = api.create(&PostParams::default(), &extra).await.unwrap();
    assert!(
        stored.data["spec"].get("unknownField").is_none(),
        "{stored:?}"
    );

    // A wrong type is refused, naming the field.
    for (spec, field) in [
        (
            json!({"image": "fn", "podExecutor": {"tags": ["v1"], "maxParallelExecutions": "three"}}),
            "spec.podExecutor.maxParallelExecutions",
        ),
        (
            json!({"image": "fn", "binaryExecutor": {"tags": "v1", "path": "/f"}}),
            "spec.binaryExecutor.tags",
        ),
        (
            json!({"image": "fn", "podExecutor": {"tags": ["v1"], "templateOverrides": {"securityContext": "restricted"}}}),
            "spec.podExecutor.templateOverrides.securityContext",
        ),
    ] {
        let wrong = functionconfig("wrong", spec);
        match api.create(&PostParams::default(), &wrong).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                assert!(
                    status.message.contains(field),
                    "{field}: {}",
                    status.message
                );
            }
            other => panic!("{field}: admitted: {other:?}"),
        }
    }
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Calls `image` through the runner: the function's log (stderr), or the
/// status it failed with.
async fn call(runner: &Wrapper, image: &str) -> Result<String, tonic::Status> {
    let mut client = runner.client().await.unwrap();
    let mut request = tonic::Request::new(EvaluateFunctionRequest {
        resource_list: "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"
            .into(),
        image: image.to_string(),
        tag: String::new(),
    });
    request.set_timeout(Duration::from_secs(20));
    client
        .evaluate_function(request)
        .await
        .map(|r| String::from_utf8_lossy(&r.into_inner().log).into_owned())
}

/// Waits until `name`'s status satisfies `check` (60 s at most), and
/// returns the object.
async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value, i64) -> bool,
) -> DynamicObject {
    let mut last = None;
    let ok = eventually_async(Duration::from_secs(60), async || {
        last = api.get_opt(name).await.ok().flatten();
        last.as_ref().is_some_and(|o| {
            check(
                o.data.get("status").unwrap_or(&Value::Null),
                o.metadata.generation.unwrap_or(0),
            )
        })
    })
    .await;
    assert!(ok, "{name}: status never showed {what}: {last:?}");
    last.unwrap()
}

fn applied(status: &Value, generation: i64) -> bool {
    status["functionRunnerObservedGeneration"] == generation
        && status.get("error").is_none()
        && status["conditions"][0]["status"] == "True"
        && status["conditions"][0]["observedGeneration"] == generation
}

fn rejected(status: &Value, reason: &str, field: &str) -> bool {
    let condition = &status["conditions"][0];
    condition["status"] == "False"
        && condition["reason"] == reason
        && status["error"]
            .as_str()
            .is_some_and(|e| e.contains(field) && condition["message"] == e)
}

#[tokio::test]
async fn a_kube_runner_applies_functionconfigs_live_and_reports_them_in_their_status() {
    let Some(_) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let client = cluster().await;
    install_crd(&client).await;
    let (ns, _cleanup) = namespace(&client, "fnconfig").await;
    let kubeconfig = runner_kubeconfig();
    if kubeconfig.is_some() {
        grant_runner_roles(&client, &ns).await;
    }
    let api = functionconfigs(&client, &ns);
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.sh");
    let b = dir.path().join("b.sh");
    write_script(&a, "cat; echo from-a >&2");
    write_script(&b, "cat; echo from-b >&2");

    // No pod is started: the image points at a registry that refuses
    // connections, so a call the exec evaluator does not take fails fast.
    let image = "127.0.0.1:9/fns/cat-fn";
    let tagged = format!("{image}:v1");
    let args = [
        "--metrics-port",
        "0",
        "--backend",
        "kube",
        "--pod-namespace",
        &ns,
        "--wrapper-server-image",
        "localhost/krm-test/unused:never",
        "--runner-id",
        "e2e-fnconfig",
        "--insecure-registries",
        "127.0.0.1:9",
        // As Porch's command line makes it (what adds Porch's finalizer).
        "--porch-command-line",
    ];
    let runner = start_runner_as(&args, kubeconfig.as_deref());
    let binary = |path: &Path| json!({"image": image, "binaryExecutor": {"tags": ["v1"], "path": path.to_str().unwrap()}});

    // Created: applied, status says so; the status is written after the
    // index is swapped, so the call works from then on.
    api.create(&PostParams::default(), &functionconfig("cat", binary(&a)))
        .await
        .unwrap();
    wait_status(&api, "cat", "generation 1 applied", |s, g| {
        g == 1 && applied(s, g)
    })
    .await;
    // #44: Porch's finalizer, as Porch's runner keeps it.
    let finalized = eventually_async(Duration::from_secs(30), async || {
        api.get("cat").await.unwrap().metadata.finalizers == Some(vec![PORCH_FINALIZER.to_string()])
    })
    .await;
    assert!(finalized, "no finalizer on cat\n{}", runner.logs());
    let log = call(&runner, &tagged).await;
    assert_eq!(
        log.as_deref().ok(),
        Some("from-a\n"),
        "{log:?}\n{}",
        runner.logs()
    );

    // Updated: generation 2, the other binary.
    api.patch(
        "cat",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"binaryExecutor": {"path": b.to_str().unwrap()}}})),
    )
    .await
    .unwrap();
    wait_status(&api, "cat", "generation 2 applied", |s, g| {
        g == 2 && applied(s, g)
    })
    .await;
    assert_eq!(
        call(&runner, &tagged).await.ok().as_deref(),
        Some("from-b\n")
    );

    // Invalid (past the schema, caught by the runner's validation), and a
    // conflict with "cat": reported in their status, logged with the field.
    api.create(
        &PostParams::default(),
        &functionconfig(
            "bad",
            json!({"image": "other-fn", "binaryExecutor": {"tags": ["bad tag"], "path": "/f"}}),
        ),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &functionconfig("dup", binary(&a)))
        .await
        .unwrap();
    let bad = wait_status(&api, "bad", "Invalid", |s, _| {
        rejected(
            s,
            "Invalid",
            "spec.binaryExecutor.tags[0]: invalid tag \"bad tag\"",
        )
    })
    .await;
    assert!(bad.data["status"]
        .get("functionRunnerObservedGeneration")
        .is_none());
    // #31 item 4: a misspelt executor (the schema prunes it) leaves one
    // that configures nothing: Invalid, not Applied.
    api.create(
        &PostParams::default(),
        &functionconfig(
            "misspelt",
            json!({"image": "third-fn", "podExecuter": {"tags": ["v1"]}}),
        ),
    )
    .await
    .unwrap();
    wait_status(&api, "misspelt", "Invalid", |s, _| {
        rejected(s, "Invalid", "spec: no executor set")
    })
    .await;
    wait_status(&api, "dup", "Conflict", |s, _| {
        rejected(
            s,
            "Conflict",
            &format!("already configured by FunctionConfig {ns}/cat"),
        )
    })
    .await;
    let logs = runner.logs();
    assert!(
        logs.contains(&format!(
            "FunctionConfig {ns}/bad (generation 1) ignored (Invalid): spec.binaryExecutor.tags[0]"
        )),
        "{logs}"
    );
    assert_eq!(
        call(&runner, &tagged).await.ok().as_deref(),
        Some("from-b\n")
    );

    // A steady state makes no writes: a second runner reading the same
    // objects (its startup waits until it has written what it had to)
    // leaves every resourceVersion as it was, and serves them at once.
    let versions = |list: Vec<DynamicObject>| -> Vec<(Option<String>, Option<String>)> {
        list.into_iter()
            .map(|o| (o.metadata.name, o.metadata.resource_version))
            .collect()
    };
    let all_finalized = eventually_async(Duration::from_secs(30), async || {
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|o| o.metadata.finalizers.as_deref() == Some(&[PORCH_FINALIZER.to_string()][..]))
    })
    .await;
    assert!(all_finalized, "{}", runner.logs());
    let before = versions(api.list(&Default::default()).await.unwrap().items);
    let second = start_runner_as(&args, kubeconfig.as_deref());
    assert!(
        second
            .logs()
            .contains("FunctionConfigs read from the cluster count=4"),
        "{}",
        second.logs()
    );
    assert_eq!(
        call(&second, &tagged).await.ok().as_deref(),
        Some("from-b\n")
    );
    let after = versions(api.list(&Default::default()).await.unwrap().items);
    assert_eq!(before, after, "a runner with nothing to change wrote");
    drop(second);

    // Deleted: the runner lets it go (the deletion completes: the finalizer
    // is off), and "dup", next in line, takes over; then nothing serves it.
    // A FunctionConfig that Porch's runner finalized, created with the
    // finalizer and another controller's, is let go the same way, the other
    // finalizer kept.
    api.delete("cat", &DeleteParams::default()).await.unwrap();
    let gone = eventually_async(Duration::from_secs(30), async || {
        api.get_opt("cat").await.unwrap().is_none()
    })
    .await;
    assert!(gone, "cat stays Terminating\n{}", runner.logs());
    let other = "example.com/keep";
    let mut porchs = functionconfig("porchs", binary(&b));
    porchs.metadata.finalizers = Some(vec![PORCH_FINALIZER.into(), other.into()]);
    api.create(&PostParams::default(), &porchs).await.unwrap();
    api.delete("porchs", &DeleteParams::default())
        .await
        .unwrap();
    let let_go = eventually_async(Duration::from_secs(30), async || {
        api.get("porchs").await.unwrap().metadata.finalizers == Some(vec![other.to_string()])
    })
    .await;
    assert!(let_go, "porchs kept the finalizer\n{}", runner.logs());
    api.patch(
        "porchs",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_status(&api, "dup", "applied", applied).await;
    assert_eq!(
        call(&runner, &tagged).await.ok().as_deref(),
        Some("from-a\n")
    );
    api.delete("dup", &DeleteParams::default()).await.unwrap();
    let gone = eventually_async(Duration::from_secs(60), async || {
        call(&runner, &tagged).await.is_err()
    })
    .await;
    assert!(
        gone,
        "still served after its FunctionConfig was deleted\n{}",
        runner.logs()
    );
    assert!(runner
        .logs()
        .contains(&format!("FunctionConfig {ns}/dup deleted")));
}

/// #31 item 3: with `--warm-up-pod-cache`, a FunctionConfig applied while
/// the runner runs gets its pod warmed as one read at start does: Ready
/// before any call.
#[tokio::test]
async fn a_functionconfig_applied_live_warms_its_pod() {
    let Some(s) = setup("livewarm", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    install_crd(&s.client).await;
    let runner = s.runner("runner-livewarm", &["--warm-up-pod-cache=true"]);
    assert!(s.live_pods().await.is_empty());
    let api = functionconfigs(&s.client, &s.namespace);
    let (repository, tag) = s.fn_image.rsplit_once(':').unwrap();
    api.create(
        &PostParams::default(),
        &functionconfig(
            "live",
            json!({"image": repository, "podExecutor": {"tags": [tag]}}),
        ),
    )
    .await
    .unwrap();
    let warm = eventually_async(Duration::from_secs(90), async || {
        s.live_pods()
            .await
            .values()
            .any(runner_kube::pods::is_ready)
    })
    .await;
    assert!(warm, "no warm pod\n{}", runner.logs());
    assert!(
        runner
            .logs()
            .contains("warming the pods of changed FunctionConfigs"),
        "{}",
        runner.logs()
    );
    // The call takes the warm pod: no second one.
    let out = s.call(&runner).await;
    assert!(out.contains("owner: team-shop"), "{out}");
    assert_eq!(s.live_pods().await.len(), 1);
    s.stop(runner).await;
}
