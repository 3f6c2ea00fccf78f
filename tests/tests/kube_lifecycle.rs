//! The life of function pods under `serve --backend kube`, in the real
//! cluster `KUBECONFIG` names: warming with shared fixed names across two
//! runners, template changes, TTL extension and garbage collection, failed
//! pods, and a pod deleted in the middle of a call.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{docker, eventually_async};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use support::{function_container, pod_template, setup, wait_call_running, EXAMPLE_FN_DOCKERFILE};

fn annotation(pod: &Pod, key: &str) -> String {
    pod.metadata.annotations.as_ref().unwrap()[key].clone()
}

fn label(pod: &Pod, key: &str) -> String {
    pod.metadata.labels.as_ref().unwrap()[key].clone()
}

/// Two replicas warm the same function from `--pod-cache-config`: the fixed
/// name gives one pod, which both use; the owner shutting down leaves it to
/// the other, which goes on calling it.
#[tokio::test]
async fn two_runners_warming_one_function_share_one_pod() {
    let Some(s) = setup("warm", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pod-cache-config.yaml");
    std::fs::write(
        &config,
        format!("- name: {}\n  timeToLive: 30m\n", s.fn_image),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let a = s.runner("runner-a", &["--pod-cache-config", config]);
    let b = s.runner("runner-b", &["--pod-cache-config", config]);
    // Warming alone makes the pod: no call yet.
    let warmed = eventually_async(Duration::from_secs(90), async || {
        let pods = s.live_pods().await;
        pods.len() == 1 && pods.values().all(runner_kube::pods::is_ready)
    })
    .await;
    let pods = s.live_pods().await;
    assert!(
        warmed,
        "one ready pod from warming: {:?}\nA: {}\nB: {}",
        pods.keys(),
        a.logs(),
        b.logs()
    );
    let (name, pod) = pods.into_iter().next().unwrap();

    for runner in [&a, &b] {
        assert!(s.call(runner).await.contains("owner: team-shop"));
    }
    assert_eq!(
        s.live_pods().await.keys().collect::<Vec<_>>(),
        vec![&name],
        "no second pod"
    );
    assert!(
        s.services.get_opt(&name).await.unwrap().is_some(),
        "its Service"
    );

    let owner = label(&pod, "fn.kpt.dev/runner");
    let (owner_runner, other) = if owner == "runner-a" { (a, b) } else { (b, a) };
    s.stop(owner_runner).await;
    assert!(
        !s.gone(&name).await,
        "the owner left the pod the other runner uses"
    );
    assert!(s.call(&other).await.contains("owner: team-shop"));
    assert_eq!(s.live_pods().await.keys().collect::<Vec<_>>(), vec![&name]);
    s.stop(other).await;
}

/// A ConfigMap template (`--function-pod-template`): its resourceVersion is
/// the template version; once it changes, the idle pod of the old one is
/// deleted and the next call gets a pod of the new one; so is a pod that was
/// starting when it changed, once its call is done.
#[tokio::test]
async fn a_changed_template_replaces_the_idle_pod() {
    let Some(s) = setup("template", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let template = |generation: &str| pod_template(&s.wrapper_image, generation);
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut map = ConfigMap::default();
    map.metadata.name = Some("fn-template".to_string());
    map.data = Some(BTreeMap::from([("template".to_string(), template("one"))]));
    let created = maps.create(&PostParams::default(), &map).await.unwrap();
    let runner = s.runner("runner", &["--function-pod-template", "fn-template"]);
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1);
    let (old, pod) = pods.into_iter().next().unwrap();
    assert_eq!(label(&pod, "generation"), "one");
    assert_eq!(
        annotation(&pod, "fn.kpt.dev/template-version"),
        created.metadata.resource_version.unwrap()
    );

    map.data = Some(BTreeMap::from([("template".to_string(), template("two"))]));
    let updated = maps
        .replace("fn-template", &PostParams::default(), &map)
        .await
        .unwrap();
    let replaced = eventually_async(Duration::from_secs(30), async || s.gone(&old).await).await;
    assert!(
        replaced,
        "the idle pod of the old template stays\n{}",
        runner.logs()
    );
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1, "{:?}", pods.keys());
    let (new, pod) = pods.into_iter().next().unwrap();
    assert_ne!(new, old);
    assert_eq!(label(&pod, "generation"), "two");
    assert_eq!(
        annotation(&pod, "fn.kpt.dev/template-version"),
        updated.metadata.resource_version.unwrap()
    );

    // The template changes while a pod starts (after the runner read it):
    // that pod serves the call waiting for it, then goes once idle, not at
    // its TTL (30 minutes). The delete waits for the kubelet to have `new`
    // Ready, or the pod may stay a minute or more (see `Setup::wait_ready`).
    assert!(s.wait_ready(&new).await, "pod {new} never Ready");
    s.pods.delete(&new, &DeleteParams::default()).await.unwrap();
    assert!(
        eventually_async(Duration::from_secs(60), async || s
            .pods
            .get_opt(&new)
            .await
            .unwrap()
            .is_none())
        .await,
        "the deleted pod stays"
    );
    let change_once_created = async {
        let mut made = BTreeMap::new();
        let created = eventually_async(Duration::from_secs(60), async || {
            made = s.live_pods().await;
            !made.is_empty()
        })
        .await;
        assert!(created, "no pod made for the call\n{}", runner.logs());
        map.data = Some(BTreeMap::from([(
            "template".to_string(),
            template("three"),
        )]));
        maps.replace("fn-template", &PostParams::default(), &map)
            .await
            .unwrap();
        made.into_iter().next().unwrap()
    };
    let (output, (started, pod)) = tokio::join!(s.call(&runner), change_once_created);
    assert!(output.contains("owner: team-shop"));
    assert_eq!(label(&pod, "generation"), "two");
    // Gone without another call (it may be going already).
    let replaced = eventually_async(Duration::from_secs(30), async || s.gone(&started).await).await;
    assert!(
        replaced,
        "the pod started from the old template stays\n{}",
        runner.logs()
    );
    s.stop(runner).await;
}

/// Dialled by its IP (`--kube-dial pod-ip`), a new pod takes calls as soon
/// as its wrapper answers there, not when the kubelet reports it Ready: a
/// template whose readiness probe never passes still serves, while the
/// pod's Service (which follows the kubelet's readiness) never lists it.
#[tokio::test]
async fn a_pod_dialled_by_its_ip_serves_before_the_kubelet_calls_it_ready() {
    let Some(s) = setup("unready", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let healthy = pod_template(&s.wrapper_image, "never-ready");
    let never_ready = healthy.replace("'localhost:9446'", "'localhost:1'");
    assert_ne!(never_ready, healthy, "the probe's address moved");
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut map = ConfigMap::default();
    map.metadata.name = Some("fn-template".to_string());
    map.data = Some(BTreeMap::from([("template".to_string(), never_ready)]));
    maps.create(&PostParams::default(), &map).await.unwrap();
    let runner = s.runner("runner", &["--function-pod-template", "fn-template"]);
    let output = s.call(&runner).await;
    assert!(output.contains("owner: team-shop"), "{output}");
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1, "{:?}", pods.keys());
    let (name, pod) = pods.into_iter().next().unwrap();
    // The setup holds (what the test is about is that the call above
    // was answered): the kubelet has not called the pod Ready, nor does
    // its Service route to it.
    assert!(
        !runner_kube::pods::is_ready(&pod),
        "the test's probe cannot pass, yet the pod is Ready: {:?}",
        pod.status
    );
    let endpoints: Api<Endpoints> = Api::namespaced(s.client.clone(), &s.namespace);
    let listed = endpoints
        .get_opt(&name)
        .await
        .unwrap()
        .and_then(|e| e.subsets)
        .into_iter()
        .flatten()
        .any(|subset| subset.addresses.is_some_and(|a| !a.is_empty()));
    assert!(!listed, "the Service routes to a pod that is not Ready");
    // Warm calls go on on the same pod.
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    assert_eq!(s.live_pods().await.keys().collect::<Vec<_>>(), vec![&name]);
    s.stop(runner).await;
}

/// Reuse moves `fn.kpt.dev/reclaim-after`; an idle pod is deleted once its
/// TTL passed; a pod whose container dies is deleted at once, and the next
/// call gets a new one; at shutdown nothing is left.
#[tokio::test]
async fn pods_live_while_used_and_go_when_expired_or_failed() {
    let Some(s) = setup("ttl", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let runner = s.runner("runner", &["--pod-ttl", "5s", "--scan-interval", "1s"]);
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    let pods = s.live_pods().await;
    let (first, pod) = pods.into_iter().next().unwrap();
    let created: u64 = annotation(&pod, "fn.kpt.dev/reclaim-after")
        .parse()
        .unwrap();
    // Calls a second apart: the recorded expiry moves (by more than the
    // tenth of the TTL it waits for), and the pod lives past its first one.
    let extended = eventually_async(Duration::from_secs(20), async || {
        s.call(&runner).await;
        let pod = s.pods.get(&first).await.unwrap();
        annotation(&pod, "fn.kpt.dev/reclaim-after")
            .parse::<u64>()
            .unwrap()
            > created
    })
    .await;
    assert!(extended, "reclaim-after never moved\n{}", runner.logs());
    assert!(!s.gone(&first).await);

    // Idle: deleted after the TTL (5 s), by the 1 s scans.
    let expired = eventually_async(Duration::from_secs(30), async || s.gone(&first).await).await;
    assert!(expired, "the expired pod stays\n{}", runner.logs());

    // A pod whose function container is killed (as by the OOM killer).
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    let second = s.live_pods().await.into_keys().next().unwrap();
    assert_ne!(second, first);
    docker(&["kill", &function_container(&second)]).unwrap();
    let deleted = eventually_async(Duration::from_secs(30), async || s.gone(&second).await).await;
    assert!(deleted, "the failed pod stays\n{}", runner.logs());
    assert!(s.call(&runner).await.contains("owner: team-shop"));

    s.stop(runner).await;
    let empty = eventually_async(Duration::from_secs(60), async || {
        s.live_pods().await.is_empty()
            && s.services
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
    })
    .await;
    assert!(
        empty,
        "pods or Services left: {:?}",
        s.live_pods().await.keys()
    );
}

/// A pod deleted (at once: as a node loss or an eviction would) while it
/// runs a call: the call is retried on a new pod and succeeds.
#[tokio::test]
async fn a_pod_deleted_mid_call_costs_no_call() {
    // A shell function that takes three seconds: long enough to delete its
    // pod under it. Its output is its input.
    let slow = "FROM localhost/krm-kube/busybox:1.35.0\nENTRYPOINT [\"/bin/sh\", \"-c\", \"sleep 3; exec cat\"]\n";
    let Some(s) = setup("midcall", slow, &[]).await else {
        return;
    };
    let runner = s.runner("runner", &[]);
    assert!(
        s.call(&runner).await.contains("owner: team-shop"),
        "cold call"
    );
    let (victim, pod) = s.live_pods().await.into_iter().next().unwrap();
    let victim_uid = pod.metadata.uid;

    let calls: Vec<_> = (0..3).map(|_| s.call(&runner)).collect();
    let delete = async {
        // Once a call runs in the pod (its `sleep` is there), delete it.
        assert!(
            wait_call_running(&victim, " sleep 3").await,
            "no call ran in {victim}"
        );
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        s.pods.delete(&victim, &now).await.unwrap();
    };
    let (outputs, ()) = tokio::join!(futures::future::join_all(calls), delete);
    for out in outputs {
        assert!(out.contains("owner: team-shop"), "{out}");
    }
    assert!(
        runner
            .logs()
            .contains("pod unavailable; evicting and retrying"),
        "no call was cut off: {}",
        runner.logs()
    );
    // The replacement has the victim's fixed name, not its uid.
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1, "{:?}", pods.keys());
    assert_ne!(pods.values().next().unwrap().metadata.uid, victim_uid);
    s.stop(runner).await;
}
