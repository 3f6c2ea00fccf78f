//! A function pod's lifecycle as seed 004 (PodOpsLifecycle) has it, in the
//! real cluster `KUBECONFIG` names: each runner's operation declared on the
//! pod in labels, traffic through the `fn.kpt.dev/serving` readiness gate,
//! the `prot.fn.kpt.dev/traffic` finalizer, and an Event per transition.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use e2e_tests::{docker, eventually_async, output_within};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use nix::sys::signal::Signal;
use runner_kube::lifecycle::{self, SERVING_GATE, TRAFFIC_FINALIZER};
use runner_kube::pods::is_ready;
use support::{pod_template, setup, wait_call_running, Setup, EXAMPLE_FN_DOCKERFILE};

/// A function that takes three seconds: long enough to act on its pod
/// while a call runs. Its output is its input.
const SLOW_FN: &str = "FROM localhost/krm-kube/busybox:1.35.0\nENTRYPOINT [\"/bin/sh\", \"-c\", \"sleep 3; exec cat\"]\n";

fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

/// The Events on pod `name`, oldest first.
async fn events(s: &Setup, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut events: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    events.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
    events
}

/// `(reason, reporting instance)` of each Event the runners reported on pod
/// `name` (the kubelet's and the scheduler's are there too).
async fn story(s: &Setup, name: &str) -> Vec<(String, String)> {
    events(s, name)
        .await
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("function-runner"))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.reporting_instance.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until the Events on pod `name` hold every `(reason, runner)`
/// wanted (they are published in the background); the story so far.
async fn wait_story(s: &Setup, name: &str, wanted: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    eventually_async(Duration::from_secs(30), async || {
        seen = story(s, name).await;
        wanted
            .iter()
            .all(|(r, i)| seen.iter().any(|(sr, si)| sr == r && si == i))
    })
    .await;
    for (reason, instance) in wanted {
        assert!(
            seen.iter().any(|(r, i)| r == reason && i == instance),
            "no {reason} event from {instance} on {name}: {seen:?}"
        );
    }
    seen
}

/// The position of the first `(reason, runner)` event in `story`.
fn at(story: &[(String, String)], reason: &str, instance: &str) -> usize {
    story
        .iter()
        .position(|(r, i)| r == reason && i == instance)
        .unwrap_or_else(|| panic!("no {reason} from {instance} in {story:?}"))
}

/// Prints what `kubectl describe pod` tells of the pod, when kubectl is
/// here (what an operator sees; the closing note of the lifecycle issue
/// shows one).
fn describe(s: &Setup, name: &str) {
    let out = output_within(
        Command::new("kubectl").args(["describe", "pod", "-n", &s.namespace, name]),
        None,
        Duration::from_secs(30),
    );
    if let Ok(out) = out {
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    }
}

/// The one live pod of the namespace.
async fn only_pod(s: &Setup) -> (String, Pod) {
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1, "{:?}", pods.keys());
    pods.into_iter().next().unwrap()
}

/// The only pod once the kubelet reports it Ready (see
/// [`Setup::wait_ready`]: the runner hands it out before that).
async fn only_pod_ready(s: &Setup) -> (String, Pod) {
    let (name, _) = only_pod(s).await;
    assert!(s.wait_ready(&name).await, "pod {name} never Ready");
    only_pod(s).await
}

#[tokio::test]
async fn a_pods_life_is_told_on_the_pod_in_operations_gate_finalizer_and_events() {
    let Some(s) = setup("ops", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let runner = s.runner("runner-ops", &[]);
    assert!(s.call(&runner).await.contains("owner: team-shop"));
    let (name, pod) = only_pod_ready(&s).await;
    let l = labels(&pod);
    assert_eq!(
        l.get("operation-type.fn.kpt.dev/runner-ops")
            .map(String::as_str),
        Some("serve"),
        "{l:?}\n{}",
        runner.logs()
    );
    let since: u128 = l["operating.fn.kpt.dev/runner-ops"].parse().unwrap();
    let age = lifecycle::now_ns().saturating_sub(since);
    assert!(age < Duration::from_secs(300).as_nanos(), "{since}");
    assert_eq!(lifecycle::gate(&pod), Some(true), "{:?}", pod.status);
    assert!(is_ready(&pod));
    assert_eq!(
        pod.metadata.finalizers.clone().unwrap_or_default(),
        [TRAFFIC_FINALIZER]
    );
    let gates = pod.spec.clone().unwrap().readiness_gates.unwrap();
    assert_eq!(gates[0].condition_type, SERVING_GATE);
    wait_story(
        &s,
        &name,
        &[
            ("Created", "runner-ops"),
            ("Ready", "runner-ops"),
            ("Serving", "runner-ops"),
        ],
    )
    .await;

    // Warm calls change nothing on the pod and add no event.
    let version = pod.metadata.resource_version.clone();
    let told = story(&s, &name).await.len();
    for _ in 0..5 {
        assert!(s.call(&runner).await.contains("owner: team-shop"));
    }
    let pod = s.pods.get(&name).await.unwrap();
    assert_eq!(
        pod.metadata.resource_version, version,
        "a warm call changed the pod"
    );
    assert_eq!(
        story(&s, &name).await.len(),
        told,
        "a warm call made an event"
    );
    describe(&s, &name);

    // Shutdown: nobody else uses it, so its owner drains it (traffic off),
    // deletes it, and takes the finalizer off: the pod leaves the API.
    s.stop(runner).await;
    let gone = s.wait_absent(&name, Duration::from_secs(60)).await;
    assert!(gone, "the pod stays in the API");
    let told = wait_story(
        &s,
        &name,
        &[
            ("Draining", "runner-ops"),
            ("Deleted", "runner-ops"),
            ("TrafficGone", "runner-ops"),
        ],
    )
    .await;
    assert!(at(&told, "Serving", "runner-ops") < at(&told, "Draining", "runner-ops"));
    assert!(at(&told, "Draining", "runner-ops") < at(&told, "Deleted", "runner-ops"));
    let draining = events(&s, &name)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("Draining"))
        .unwrap();
    assert!(
        draining
            .note
            .unwrap_or_default()
            .contains("the runner shuts down"),
        "the Draining event says why"
    );
}

/// Two runners use one pod; its owner must replace it (the template
/// changed) while the other has a call in flight on it: the owner switches
/// its traffic off and waits, the other's call finishes on the pod, the
/// other lets go, and only then is the pod deleted.
#[tokio::test]
async fn two_runners_one_deletes_while_the_others_call_finishes() {
    let Some(s) = setup("two", SLOW_FN, &[]).await else {
        return;
    };
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut map = ConfigMap::default();
    map.metadata.name = Some("fn-template".to_string());
    map.data = Some(BTreeMap::from([(
        "template".to_string(),
        pod_template(&s.wrapper_image, "one"),
    )]));
    maps.create(&PostParams::default(), &map).await.unwrap();
    let template = ["--function-pod-template", "fn-template"];
    let a = s.runner("runner-a", &template);
    let b = s.runner("runner-b", &template);
    assert!(s.call(&a).await.contains("owner: team-shop"));
    assert!(s.call(&b).await.contains("owner: team-shop"));
    let (name, pod) = only_pod(&s).await;
    let l = labels(&pod);
    assert_eq!(l["fn.kpt.dev/runner"], "runner-a");
    assert_eq!(l["operation-type.fn.kpt.dev/runner-a"], "serve");
    assert_eq!(l["operation-type.fn.kpt.dev/runner-b"], "serve");

    let call = s.call(&b);
    let change = async {
        assert!(
            wait_call_running(&name, " sleep 3").await,
            "no call of B ran in {name}"
        );
        map.data = Some(BTreeMap::from([(
            "template".to_string(),
            pod_template(&s.wrapper_image, "two"),
        )]));
        maps.replace("fn-template", &PostParams::default(), &map)
            .await
            .unwrap();
    };
    let (output, ()) = tokio::join!(call, change);
    assert!(output.contains("owner: team-shop"), "{output}");
    assert!(
        !b.logs().contains("evicting and retrying"),
        "B's call was cut off: {}",
        b.logs()
    );
    let gone = s.wait_absent(&name, Duration::from_secs(60)).await;
    assert!(gone, "the old pod stays\nA: {}\nB: {}", a.logs(), b.logs());
    let told = wait_story(
        &s,
        &name,
        &[
            ("Draining", "runner-a"),
            ("Released", "runner-b"),
            ("Deleted", "runner-a"),
        ],
    )
    .await;
    // A waited for B: B let go after A switched the traffic off, and A
    // deleted the pod only after that.
    assert!(at(&told, "Draining", "runner-a") < at(&told, "Released", "runner-b"));
    assert!(at(&told, "Released", "runner-b") < at(&told, "Deleted", "runner-a"));
    s.stop(a).await;
    s.stop(b).await;
}

/// A SIGKILLed runner leaves its operation and the finalizer on its pod. A
/// pod deleted then stays Terminating until the operation goes stale (no
/// refresh for a TTL): then another runner takes the finalizer off. A
/// runner that starts again under the same id does it at once.
#[tokio::test]
async fn a_killed_runners_finalizer_goes_a_ttl_after_it_vanished_or_when_it_restarts() {
    let Some(s) = setup("killed", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let ttl = Duration::from_secs(20);
    let short = ["--pod-ttl", "20s", "--scan-interval", "2s"];
    let mut a = s.runner("runner-a", &short);
    assert!(s.call(&a).await.contains("owner: team-shop"));
    let (name, pod) = only_pod_ready(&s).await;
    let since: u128 = labels(&pod)["operating.fn.kpt.dev/runner-a"]
        .parse()
        .unwrap();
    a.signal(Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(30)).await.unwrap();
    s.pods
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // The kubelet stops its containers; the finalizer holds the object.
    let stopped = eventually_async(Duration::from_secs(60), async || {
        docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=io.kubernetes.pod.name={name}"),
            "--filter",
            "label=io.kubernetes.container.name=function",
        ])
        .is_ok_and(|out| out.stdout.is_empty())
    })
    .await;
    assert!(stopped, "the deleted pod's container still runs");
    let held = s.pods.get_opt(&name).await.unwrap().unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(lifecycle::protected(&held), "{:?}", held.metadata);

    let b = s.runner("runner-b", &short);
    let gone = s.wait_absent(&name, ttl + Duration::from_secs(40)).await;
    let at = lifecycle::now_ns();
    assert!(gone, "the pod stays Terminating\nB: {}", b.logs());
    assert!(
        at >= since + ttl.as_nanos(),
        "B took the finalizer off while A's operation was live"
    );
    s.stop(b).await;

    // Again; this time A comes back under its own id, with a TTL far too
    // long for staleness to be what frees the pod.
    let long = ["--pod-ttl", "10m", "--scan-interval", "2s"];
    let mut a = s.runner("runner-a", &long);
    assert!(s.call(&a).await.contains("owner: team-shop"));
    let (name, _) = only_pod_ready(&s).await;
    a.signal(Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(30)).await.unwrap();
    s.pods
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let again = s.runner("runner-a", &long);
    let gone = s.wait_absent(&name, Duration::from_secs(60)).await;
    assert!(
        gone,
        "the restarted runner left its pod Terminating\n{}",
        again.logs()
    );
    s.stop(again).await;
}

/// #31 item 5: a runner run by a Deployment of its function pods' own
/// namespace makes them owned by that Deployment (found from the runner's
/// pod, `POD_NAME`, through its ReplicaSet, with the Roles of
/// `deploy/rbac.yaml`): deleting the Deployment, Kubernetes' garbage
/// collector deletes them and their Services, and the runner lets go of
/// them (their finalizer included).
#[tokio::test]
async fn function_pods_in_the_deployments_namespace_are_owned_by_it_and_go_with_it() {
    let Some(s) = setup("owned", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    // A Deployment whose pod stands for the runner's own: the runner runs
    // here, told that pod's name as the downward API would tell it.
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "function-runner"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "stand-in"}},
            "template": {
                "metadata": {"labels": {"app": "stand-in"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "sleep",
                        "image": "localhost/krm-kube/busybox:1.35.0",
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                    }],
                },
            },
        },
    }))
    .unwrap();
    let uid = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let mut stand_in = None;
    let found = eventually_async(Duration::from_secs(60), async || {
        stand_in = s
            .pods
            .list(&ListParams::default().labels("app=stand-in"))
            .await
            .unwrap()
            .items
            .into_iter()
            .find_map(|p| p.metadata.name);
        stand_in.is_some()
    })
    .await;
    assert!(found, "the Deployment made no pod");
    let stand_in = stand_in.unwrap();

    let runner = s.runner_env("runner-owned", &[], &[("POD_NAME", &stand_in)]);
    assert!(
        runner
            .logs()
            .contains("function pods belong to the runner's Deployment"),
        "{}",
        runner.logs()
    );
    let out = s.call(&runner).await;
    assert!(out.contains("owner: team-shop"), "{out}");
    let (name, _) = s
        .live_pods()
        .await
        .into_iter()
        .find(|(_, p)| labels(p).contains_key("fn.kpt.dev/runner"))
        .expect("the function pod");
    // Deleted below, and awaited until it leaves the API.
    assert!(s.wait_ready(&name).await, "pod {name} never Ready");
    let pod = s.pods.get(&name).await.unwrap();
    assert_eq!(labels(&pod)["fn.kpt.dev/runner-deployment"], uid);
    let owners = pod.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "Deployment" && o.uid == uid && o.name == "function-runner"),
        "{owners:?}"
    );

    deployments
        .delete("function-runner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(
        s.wait_absent(&name, Duration::from_secs(90)).await,
        "the function pod stays\n{}",
        runner.logs()
    );
    let service_gone = eventually_async(Duration::from_secs(60), async || {
        s.services.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(service_gone, "its Service stays");
    s.stop(runner).await;
}

/// #44: the function pods and Services that Porch's own runner left when
/// this one replaced it (labelled with Porch's pod id, no runner of ours;
/// the Service named after it, unlabelled) are deleted a while after the
/// start; a pod of another runner of ours is not.
#[tokio::test]
async fn the_function_pods_porchs_runner_left_are_collected() {
    let Some(s) = setup("leftovers", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    // Never scheduled (no node has the label): deleting one is at once.
    let pod = |name: &str, labels: serde_json::Value, annotations: serde_json::Value| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {
                "nodeSelector": {"krm-test/nowhere": "true"},
                "containers": [{"name": "function", "image": s.fn_image}],
            },
        }))
        .unwrap()
    };
    let porch_id = "swap-v1-1-abcdef12";
    s.pods
        .create(
            &PostParams::default(),
            &pod(
                &format!("{porch_id}-x7k2q"),
                serde_json::json!({"fn.kpt.dev/image": porch_id}),
                serde_json::json!({"fn.kpt.dev/template-version": "1"}),
            ),
        )
        .await
        .unwrap();
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": porch_id},
        "spec": {"selector": {"fn.kpt.dev/image": porch_id}, "ports": [{"port": 9446}]},
    }))
    .unwrap();
    s.services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let another = "elsewhere-v1-1";
    s.pods
        .create(
            &PostParams::default(),
            &pod(
                another,
                serde_json::json!({"fn.kpt.dev/image": "elsewhere", "fn.kpt.dev/runner": "another-runner"}),
                serde_json::json!({"fn.kpt.dev/reclaim-after": "4000000000"}),
            ),
        )
        .await
        .unwrap();

    // And an idle pool's pod (no runner yet, the pool's label): not
    // Porch's.
    let pooled = "pooled-v1-1";
    s.pods
        .create(
            &PostParams::default(),
            &pod(
                pooled,
                serde_json::json!({"fn.kpt.dev/image": "pooled", "fn.kpt.dev/pool": "p-1"}),
                serde_json::json!({}),
            ),
        )
        .await
        .unwrap();

    let runner = s.runner("collector", &["--collect-porch-pods-after", "1s"]);
    let collected = eventually_async(Duration::from_secs(60), async || {
        let pods_gone = s
            .pods
            .list(&ListParams::default().labels(&format!("fn.kpt.dev/image={porch_id}")))
            .await
            .is_ok_and(|l| l.items.is_empty());
        pods_gone && s.services.get_opt(porch_id).await.unwrap().is_none()
    })
    .await;
    assert!(collected, "Porch's pod or Service stays\n{}", runner.logs());
    assert!(s.pods.get_opt(another).await.unwrap().is_some());
    // One pod collected: Porch's, not the pool's (which the pools' own
    // sync may delete meanwhile, as a pool no runner wants).
    // Said once the deletes are done, which the test may see first.
    let wanted = "deleted the function pods (and their Services) that Porch's runner left";
    eventually_async(Duration::from_secs(30), async || {
        runner.logs().contains(wanted)
    })
    .await;
    let logs = runner.logs();
    let said = logs
        .lines()
        .find(|l| l.contains(wanted))
        .unwrap_or_else(|| panic!("not said:\n{logs}"));
    assert!(said.contains("pods=1"), "{said}");
    s.pods
        .delete(another, &DeleteParams::default())
        .await
        .unwrap();
}
