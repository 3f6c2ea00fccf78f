//! #25: idle pools on the real cluster (see kube.rs): a ReplicaSet per
//! pooled function, its Ready pods claimed by runners with a
//! resourceVersion precondition, single-use pods deleted after their call.
//! The function says from inside its pod whether the pod served a call
//! before (a file it leaves in the pod's emptyDir).

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use e2e_tests::{eventually_async, stateful, Wrapper};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use runner_kube::pods::{is_ready, POOL_LABEL, POOL_STATE_LABEL};
use serde_json::json;
use support::{setup_with_files, Setup};

const BUSYBOX: &str = "/bin/busybox";

/// The test's cluster setup with the stateful function's image; `None`
/// (skipped) without a cluster, a registry or busybox-static.
async fn pool_setup(name: &str) -> Option<(Setup, tempfile::NamedTempFile)> {
    if !Path::new(BUSYBOX).is_file() {
        e2e_tests::prerequisite::<()>(Err(anyhow::anyhow!(
            "needs Debian's busybox-static ({BUSYBOX}) for the function's image"
        )))?;
    }
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), stateful::CONTAINER_SCRIPT).unwrap();
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let files = [("busybox", Path::new(BUSYBOX)), ("state.sh", script.path())];
    let s = setup_with_files(name, stateful::DOCKERFILE, &[], &files).await?;
    Some((s, script))
}

/// A `--functions` directory with a FunctionConfig for the setup's image.
fn functions(s: &Setup, pod_executor: serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (repository, tag) = s.fn_image.rsplit_once(':').unwrap();
    let mut executor = pod_executor;
    executor["tags"] = json!([tag]);
    let config = json!({
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "FunctionConfig",
        "metadata": {"name": "pooled"},
        "spec": {"image": repository, "podExecutor": executor},
    });
    // JSON is YAML; serde_yaml_ng would write serde_json's numbers as maps
    // (the `starlark` crate turns on serde_json's `arbitrary_precision`).
    std::fs::write(
        dir.path().join("pooled.yaml"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    dir
}

/// One call; its log line (`pod=NAME fresh|used`).
async fn call(s: &Setup, runner: &Wrapper) -> Result<String, tonic::Status> {
    let mut client = runner.client().await.unwrap();
    let resp = client
        .evaluate_function(e2e_tests::example_request(&s.fn_image))
        .await?
        .into_inner();
    Ok(String::from_utf8_lossy(&resp.log).trim().to_string())
}

fn label<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(name).map(String::as_str)
}

/// The pool's pods, not being deleted, in `state` (`idle`, `claimed`).
async fn pool_pods(s: &Setup, state: &str) -> Vec<Pod> {
    let params = ListParams::default().labels(&format!("{POOL_STATE_LABEL}={state}"));
    s.pods
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

async fn ready_idle(s: &Setup) -> usize {
    pool_pods(s, "idle")
        .await
        .iter()
        .filter(|p| is_ready(p))
        .count()
}

fn replicasets(s: &Setup) -> Api<ReplicaSet> {
    Api::namespaced(s.client.clone(), &s.namespace)
}

/// The sizes of the namespace's pools.
async fn pool_sizes(s: &Setup) -> Vec<i32> {
    replicasets(s)
        .list(&ListParams::default().labels(POOL_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .map(|rs| rs.spec.and_then(|s| s.replicas).unwrap_or(0))
        .collect()
}

fn pod_of(log: &str) -> String {
    assert!(log.ends_with(" fresh"), "a used pod served a call: {log}");
    let first = log.split_whitespace().next().unwrap();
    first.strip_prefix("pod=").unwrap_or(first).to_string()
}

/// Two runners keep one pool of two single-use pods: sequential calls are
/// served by pods that waited Ready, a burst of ten through both runners
/// racing for the same pods fails none and uses ten distinct pods, each
/// deleted after its call.
#[tokio::test]
async fn two_runners_claim_single_use_pods_from_one_pool() {
    let Some((s, _script)) = pool_setup("pool").await else {
        return;
    };
    let fns = functions(&s, json!({"idlePods": 2, "singleUse": true}));
    let fns = fns.path().to_str().unwrap();
    let a = s.runner("runner-a", &["--functions", fns]);
    let b = s.runner("runner-b", &["--functions", fns]);
    let filled =
        eventually_async(Duration::from_secs(90), async || ready_idle(&s).await == 2).await;
    assert!(filled, "the pool did not fill\n{}\n{}", a.logs(), b.logs());
    assert_eq!(pool_sizes(&s).await, vec![2], "one pool, for both runners");

    let mut pods = BTreeSet::new();
    let mut took = Vec::new();
    for _ in 0..3 {
        let began = Instant::now();
        let log = call(&s, &a).await.unwrap();
        took.push(began.elapsed());
        assert!(pods.insert(pod_of(&log)), "a pod served two calls: {log}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("single-use calls from a pool of 2, 1 s apart: {took:?}");

    let burst: Vec<_> = (0..10)
        .map(|i| {
            let runner = if i % 2 == 0 { &a } else { &b };
            call(&s, runner)
        })
        .collect();
    let logs = futures::future::join_all(burst).await;
    for log in logs {
        let log = log.unwrap_or_else(|e| panic!("{e}\n{}\n{}", a.logs(), b.logs()));
        assert!(pods.insert(pod_of(&log)), "a pod served two calls: {log}");
    }
    assert_eq!(pods.len(), 13);
    // Used pods go; the pool is two idle pods again.
    let settled = eventually_async(Duration::from_secs(90), async || {
        pool_pods(&s, "claimed").await.is_empty() && ready_idle(&s).await == 2
    })
    .await;
    assert!(settled, "{}\n{}", a.logs(), b.logs());
    let logs = a.logs() + &b.logs();
    assert!(logs.contains("claimed an idle pod"), "{logs}");
    // A runner that stops takes the pool with it (no Deployment runs it);
    // the other one, finding it empty, applies it again.
    s.stop(a).await;
    let log = call(&s, &b)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));
    assert!(pods.insert(pod_of(&log)), "a pod served two calls: {log}");
    s.stop(b).await;
    // Runners no Deployment runs take their pools with them.
    let gone = eventually_async(Duration::from_secs(30), async || {
        pool_sizes(&s).await.is_empty()
    })
    .await;
    assert!(gone, "the pool outlived its runners");
}

/// A pool follows its FunctionConfig (a cluster object): made when it is
/// applied, resized when it changes, deleted when it goes; an idle pod
/// deleted is replaced; a multi-use claimed pod serves every later call.
#[tokio::test]
async fn a_pool_follows_its_functionconfig_and_replaces_a_lost_pod() {
    let Some((s, _script)) = pool_setup("poolcfg").await else {
        return;
    };
    support::install_crd(&s.client).await;
    let runner = s.runner("runner-cfg", &[]);
    let api = support::functionconfigs(&s.client, &s.namespace);
    let (repository, tag) = s.fn_image.rsplit_once(':').unwrap();
    let spec = |n: u32| json!({"image": repository, "podExecutor": {"tags": [tag], "idlePods": n}});
    api.create(
        &PostParams::default(),
        &support::functionconfig("pooled", spec(1)),
    )
    .await
    .unwrap();
    let ready = eventually_async(Duration::from_secs(90), async || ready_idle(&s).await == 1).await;
    assert!(ready, "{}", runner.logs());
    // Lost while idle: the ReplicaSet replaces it.
    let idle = pool_pods(&s, "idle").await;
    let lost = idle[0].metadata.name.clone().unwrap();
    s.pods
        .delete(&lost, &DeleteParams::default())
        .await
        .unwrap();
    let replaced = eventually_async(Duration::from_secs(90), async || {
        pool_pods(&s, "idle")
            .await
            .iter()
            .any(|p| is_ready(p) && p.metadata.name.as_deref() != Some(&lost))
    })
    .await;
    assert!(replaced, "{}", runner.logs());
    // Its wrapper ends while idle: the kubelet restarts it in place (a
    // ReplicaSet's pods restart); a claim deletes that pod, never takes it.
    let idle = pool_pods(&s, "idle").await;
    let restarted = idle[0].metadata.name.clone().unwrap();
    e2e_tests::docker(&["kill", &support::function_container(&restarted)]).unwrap();
    let seen = eventually_async(Duration::from_secs(60), async || {
        s.pods
            .get(&restarted)
            .await
            .unwrap()
            .status
            .is_some_and(|st| {
                st.container_statuses
                    .iter()
                    .flatten()
                    .any(|c| c.restart_count > 0)
            })
    })
    .await;
    assert!(seen, "the kubelet did not restart it");
    // Multi-use: claimed once, then reused as any cached pod.
    let first = call(&s, &runner).await.unwrap();
    let second = call(&s, &runner).await.unwrap();
    let pod = pod_of(&first);
    assert_ne!(pod, restarted, "a restarted pod was claimed");
    assert!(s.gone(&restarted).await, "{}", runner.logs());
    assert_eq!(second, format!("pod={pod} used"));
    let claimed = pool_pods(&s, "claimed").await;
    assert_eq!(claimed.len(), 1);
    let labels = claimed[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(label(&claimed[0], "fn.kpt.dev/runner"), Some("runner-cfg"));
    assert!(
        labels
            .iter()
            .any(|(k, v)| k.starts_with("operation-type.fn.kpt.dev/")
                && (v == "claim" || v == "serve")),
        "{labels:?}"
    );
    // Resized, then gone with its FunctionConfig.
    api.patch(
        "pooled",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": spec(3)})),
    )
    .await
    .unwrap();
    let resized = eventually_async(Duration::from_secs(30), async || {
        pool_sizes(&s).await == vec![3]
    })
    .await;
    assert!(resized, "{:?}\n{}", pool_sizes(&s).await, runner.logs());
    api.delete("pooled", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = eventually_async(Duration::from_secs(30), async || {
        pool_sizes(&s).await.is_empty()
    })
    .await;
    assert!(deleted, "{}", runner.logs());
    // Its idle pods go with it (the garbage collector)...
    let collected = eventually_async(Duration::from_secs(60), async || {
        pool_pods(&s, "idle").await.is_empty()
    })
    .await;
    assert!(collected, "{:?}", pool_pods(&s, "idle").await.len());
    // ...but the claimed pod is the runner's, not the pool's: it stays cached.
    assert!(
        !s.gone(&pod).await,
        "a claimed pod went with its pool\n{}",
        runner.logs()
    );
    s.stop(runner).await;
}
