//! The kube backend against API faults a real cluster does not produce on
//! demand (the real-cluster tests are in `tests/tests/kube*.rs`): a watch
//! whose resourceVersion expired, create races lost to another runner, 5xx
//! answers, answers that never come, and the reclaim-after patch's limits.
//! Each test answers the backend's requests one by one through
//! [`fake_api`](crate::fake_api), asserts what it sent, and
//! what it returned or reported.
//!
//! The tests run on tokio's paused clock: backoffs and timeouts take no
//! real time, and a bounded wait passes only once every task is idle.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::*;
use crate::fake_api::{failure, fake_api, status, Expiry, FakeApi, POD_IP};
use crate::lifecycle;
use crate::names::{RECLAIM_AFTER_ANNOTATION, WRAPPER_PORT};
use crate::source::TemplateChoice;

const NS: &str = "fns";
const OWNER: &str = "runner-a";
const IMAGE: &str = "example.com/fns/set-labels:v1";
const OTHER_IMAGE: &str = "example.com/fns/set-annotations:v1";
const PODS: &str = "/api/v1/namespaces/fns/pods";
const SERVICES: &str = "/api/v1/namespaces/fns/services";
const TTL: Duration = Duration::from_secs(30 * 60);
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Longer than any step of a start on the paused clock: a start that has
/// not finished by then is stuck.
const FINISH_WITHIN: Duration = Duration::from_secs(600);

struct Harness {
    backend: KubeBackend,
    api: FakeApi,
    events: mpsc::UnboundedReceiver<PodEvent>,
}

/// A backend on a fake API whose namespace holds `pods`, once its pod
/// watch has listed them.
async fn harness(pods: Vec<Value>) -> Harness {
    let (client, api) = fake_api();
    for pod in pods {
        api.apply_pod("ADDED", pod);
    }
    let settings = KubeSettings {
        namespace: NS.to_string(),
        wrapper_image: "wrapper-server:test".to_string(),
        wrapper_image_source: "--wrapper-server-image".into(),
        max_message_bytes: 6_291_456,
        dial: Dial::PodIp,
        owner: OWNER.to_string(),
        ttl: TTL,
        scan_interval: Duration::from_secs(60),
        template: TemplateChoice::Default,
        runner_namespace: "runner".to_string(),
        pull_secret: None,
        runner_pod: None,
        deployment: None,
        features: Default::default(),
        porch_leftovers_after: None,
        function_env: Vec::new(),
    };
    let entrypoints =
        Entrypoints::with_known([(IMAGE, &["/fn"][..]), (OTHER_IMAGE, &["/other-fn"][..])]);
    let backend = KubeBackend::new(client, settings, entrypoints);
    let (tx, events) = mpsc::unbounded_channel();
    backend.set_events(tx);
    let synced = backend.inner.store.wait_until_ready();
    tokio::time::timeout(FINISH_WITHIN, synced)
        .await
        .expect("the pod watch never listed")
        .expect("the pod watch ended");
    Harness {
        backend,
        api,
        events,
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A pod as another runner (or this one, earlier) made it.
fn existing_pod(name: &str, uid: &str, owner: &str, reclaim_after: u64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NS, "uid": uid,
            "labels": {OWNER_LABEL: owner},
            "annotations": {RECLAIM_AFTER_ANNOTATION: reclaim_after.to_string()},
        },
        "spec": {"containers": [{"name": "function", "image": IMAGE}]},
    })
}

/// The pod a create made: what was sent, with a uid.
fn created(sent: &Value, uid: &str) -> Value {
    let mut pod = sent.clone();
    pod["metadata"]["uid"] = json!(uid);
    pod
}

/// `pod`, Running and Ready on [`POD_IP`].
fn ready(pod: &Value) -> Value {
    let mut pod = pod.clone();
    pod["status"] = json!({
        "phase": "Running", "podIP": POD_IP,
        "conditions": [{"type": "Ready", "status": "True"}],
    });
    pod
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .expect("an object with a name")
        .to_string()
}

fn spec(image: &str) -> PodSpec {
    PodSpec::new(image, READY_TIMEOUT)
}

async fn finish<T>(task: tokio::task::JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(FINISH_WITHIN, task)
        .await
        .unwrap_or_else(|_| panic!("{what} never finished"))
        .expect("the task panicked")
}

/// Answers the patch of this runner's operation `op` on `pod` (both labels,
/// a merge patch carrying the resourceVersion seen); the pod as patched.
fn answer_operation(patch: crate::fake_api::Call, pod: &Value, op: Option<&str>) -> Value {
    assert_eq!(patch.content_type, "application/merge-patch+json");
    let labels = &patch.body["metadata"]["labels"];
    let kind = &labels[format!("operation-type.fn.kpt.dev/{OWNER}")];
    let since = &labels[format!("operating.fn.kpt.dev/{OWNER}")];
    match op {
        Some(op) => {
            assert_eq!(kind, op, "{:?}", patch.body);
            assert!(
                since.as_str().is_some_and(|t| t.parse::<u128>().is_ok()),
                "{:?}",
                patch.body
            );
        }
        None => assert!(kind.is_null() && since.is_null(), "{:?}", patch.body),
    }
    assert!(
        patch.body["metadata"]["resourceVersion"].is_string(),
        "no precondition: {:?}",
        patch.body
    );
    let mut pod = pod.clone();
    // A merge patch: null removes.
    for (key, value) in labels.as_object().expect("labels") {
        match value {
            Value::Null => {
                if let Some(labels) = pod["metadata"]["labels"].as_object_mut() {
                    labels.remove(key);
                }
            }
            value => pod["metadata"]["labels"][key] = value.clone(),
        }
    }
    if let Some(finalizers) = patch.body["metadata"].get("finalizers") {
        pod["metadata"]["finalizers"] = finalizers.clone();
    }
    patch.answer(200, pod.clone());
    pod
}

/// Expects the switch of the traffic gate of the pod just created, and
/// answers it.
async fn expect_gate_on(h: &mut Harness, pod: &Value) {
    let gate = h
        .api
        .expect("PATCH", &format!("{PODS}/{}/status", name_of(pod)))
        .await;
    assert_eq!(gate.content_type, "application/strategic-merge-patch+json");
    let condition = &gate.body["status"]["conditions"][0];
    assert_eq!(condition["type"], lifecycle::SERVING_GATE);
    assert_eq!(condition["status"], "True");
    assert!(gate.body["metadata"]["resourceVersion"].is_string());
    gate.answer(200, pod.clone());
}

/// Expects this runner's `serve` declaration on `pod` and answers it.
async fn expect_serve(h: &mut Harness, pod: &Value) -> Value {
    let patch = h
        .api
        .expect("PATCH", &format!("{PODS}/{}", name_of(pod)))
        .await;
    answer_operation(patch, pod, Some("serve"))
}

/// Starts a pod for `image` that the API creates as `uid`, answered up to
/// its Service's create, the pod in the watch as created (no status); the
/// start and the pod.
async fn start_created(
    h: &mut Harness,
    image: &str,
    uid: &str,
) -> (
    tokio::task::JoinHandle<Result<ReadyPod, BackendError>>,
    Value,
) {
    let start = tokio::spawn(h.backend.start(spec(image)));
    let create = h.api.expect("POST", PODS).await;
    let pod = created(&create.body, uid);
    create.answer(201, pod.clone());
    expect_gate_on(h, &pod).await;
    h.api.apply_pod("ADDED", pod.clone());
    let service = h.api.expect("POST", SERVICES).await;
    let body = service.body.clone();
    service.answer(201, body);
    (start, pod)
}

/// Starts a pod for `image` that the API creates as `uid` and that turns
/// Ready; its name.
async fn start_ready(h: &mut Harness, image: &str, uid: &str) -> String {
    let (start, pod) = start_created(h, image, uid).await;
    let name = name_of(&pod);
    h.api.apply_pod("MODIFIED", ready(&pod));
    expect_serve(h, &pod).await;
    let ready = finish(start, "the start").await.expect("a ready pod");
    assert_eq!(ready.id, PodId(name.clone()));
    name
}

/// Expects the delete of `pod` (named `name`) by its uid, and answers it;
/// then nothing more.
async fn expect_delete_by_uid(h: &mut Harness, name: &str, pod: Value) {
    let delete = h.api.expect("DELETE", &format!("{PODS}/{name}")).await;
    let uid = pod["metadata"]["uid"].clone();
    assert!(uid.is_string(), "{pod:?}");
    assert_eq!(
        delete.body.get("preconditions"),
        Some(&serde_json::json!({"uid": uid})),
        "{:?}",
        delete.body
    );
    delete.answer(200, pod);
    h.api.quiet().await;
}

/// A relist after the watch's resourceVersion expired: a handed-out pod
/// that is absent from it is reported failed, one still listed is not.
async fn relist_reports_only_the_pods_gone_meanwhile(how: Expiry) {
    let mut h = harness(Vec::new()).await;
    let gone = start_ready(&mut h, IMAGE, "uid-gone").await;
    let kept = start_ready(&mut h, OTHER_IMAGE, "uid-kept").await;
    assert_ne!(gone, kept);
    h.api.forget_pod(&gone);
    h.api.expire_pod_watch(how);
    h.api.pod_lists(2).await;
    let event = tokio::time::timeout(FINISH_WITHIN, h.events.recv())
        .await
        .expect("no pod reported failed after the relist");
    assert_eq!(
        event,
        Some(PodEvent::Failed {
            id: PodId(gone),
            reason: "was deleted while the watch was down".to_string(),
        })
    );
    h.api.quiet().await;
    assert!(
        h.events.try_recv().is_err(),
        "the pod still listed was reported too"
    );
    // Failing is the cache's to act on (it stops the pod): the watch
    // itself deletes nothing.
    assert!(
        !h.api.log().iter().any(|r| r.starts_with("DELETE")),
        "{:?}",
        h.api.log()
    );
}

#[tokio::test(start_paused = true)]
async fn a_410_error_event_relists_and_reports_the_pods_deleted_meanwhile() {
    relist_reports_only_the_pods_gone_meanwhile(Expiry::ErrorEvent).await;
}

#[tokio::test(start_paused = true)]
async fn a_410_answer_to_the_watch_request_relists_too() {
    relist_reports_only_the_pods_gone_meanwhile(Expiry::HttpGone).await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_another_runner_created_first_is_used_not_created_again() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let name = name_of(&create.body);
    create.fail(
        409,
        "AlreadyExists",
        &format!("pods \"{name}\" already exists"),
    );
    let theirs = existing_pod(&name, "uid-theirs", "runner-b", now() + 100);
    h.api
        .expect("GET", &format!("{PODS}/{name}"))
        .await
        .answer(200, theirs.clone());
    let theirs = h.api.apply_pod("ADDED", theirs);
    // Their pod's reclaim-after moves at once, so that its owner sees it in
    // use here; and its Service is made owned by it.
    let [patch, service] = <[_; 2]>::try_from(
        h.api
            .expect_each(&[("PATCH", &format!("{PODS}/{name}")), ("POST", SERVICES)])
            .await,
    )
    .expect("two calls");
    assert_eq!(patch.content_type, "application/merge-patch+json");
    let extended: u64 = patch.body["metadata"]["annotations"][RECLAIM_AFTER_ANNOTATION]
        .as_str()
        .expect("a reclaim-after")
        .parse()
        .expect("unix seconds");
    assert!(extended + 5 >= now() + TTL.as_secs(), "{extended}");
    patch.answer(200, theirs.clone());
    assert_eq!(
        service.body["metadata"]["ownerReferences"][0]["uid"],
        "uid-theirs"
    );
    let body = service.body.clone();
    service.answer(201, body);
    h.api.apply_pod("MODIFIED", ready(&theirs));
    expect_serve(&mut h, &theirs).await;
    let pod = finish(start, "the start").await.expect("their pod, ready");
    assert_eq!(pod.id, PodId(name));
    assert_eq!(pod.endpoint, format!("http://{POD_IP}:{WRAPPER_PORT}"));
    // No second create, and their pod is not deleted.
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_gone_after_its_409_leaves_its_name_for_the_next_slot() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let first = name_of(&create.body);
    create.fail(
        409,
        "AlreadyExists",
        &format!("pods \"{first}\" already exists"),
    );
    h.api.expect("GET", &format!("{PODS}/{first}")).await.fail(
        404,
        "NotFound",
        &format!("pods \"{first}\" not found"),
    );
    let create = h.api.expect("POST", PODS).await;
    let second = name_of(&create.body);
    assert!(first.ends_with("-0"), "{first}");
    assert_eq!(second, format!("{}1", first.trim_end_matches('0')));
    let pod = created(&create.body, "uid-1");
    create.answer(201, pod.clone());
    expect_gate_on(&mut h, &pod).await;
    let service = h.api.expect("POST", SERVICES).await;
    assert_eq!(name_of(&service.body), second);
    let body = service.body.clone();
    service.answer(201, body);
    h.api.apply_pod("ADDED", ready(&pod));
    expect_serve(&mut h, &pod).await;
    let ready = finish(start, "the start").await.expect("a ready pod");
    assert_eq!(ready.id, PodId(second));
    h.api.quiet().await;
}

/// Starts a pod whose Service create answers 409: the Service of that name
/// belongs to the pod `owner_uid`. Returns the start and the pod.
async fn service_conflict(
    h: &mut Harness,
    owner_uid: &str,
) -> (
    tokio::task::JoinHandle<Result<ReadyPod, BackendError>>,
    Value,
) {
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let pod = created(&create.body, "uid-ours");
    let name = name_of(&pod);
    create.answer(201, pod.clone());
    expect_gate_on(h, &pod).await;
    h.api.apply_pod("ADDED", ready(&pod));
    let service = h.api.expect("POST", SERVICES).await;
    let mut existing = service.body.clone();
    service.fail(
        409,
        "AlreadyExists",
        &format!("services \"{name}\" already exists"),
    );
    existing["metadata"]["uid"] = json!("uid-service");
    existing["metadata"]["ownerReferences"][0]["uid"] = json!(owner_uid);
    h.api
        .expect("GET", &format!("{SERVICES}/{name}"))
        .await
        .answer(200, existing);
    (start, pod)
}

#[tokio::test(start_paused = true)]
async fn a_service_left_by_an_older_pod_is_deleted_by_uid_and_made_again() {
    let mut h = harness(Vec::new()).await;
    let (start, pod) = service_conflict(&mut h, "uid-older-pod").await;
    let name = name_of(&pod);
    let delete = h.api.expect("DELETE", &format!("{SERVICES}/{name}")).await;
    // Only that Service: one made meanwhile for our pod must stay.
    assert_eq!(delete.body["preconditions"], json!({"uid": "uid-service"}));
    delete.answer(200, status(200, "", ""));
    let service = h.api.expect("POST", SERVICES).await;
    assert_eq!(
        service.body["metadata"]["ownerReferences"][0]["uid"],
        "uid-ours"
    );
    let body = service.body.clone();
    service.answer(201, body);
    expect_serve(&mut h, &pod).await;
    let ready = finish(start, "the start").await.expect("a ready pod");
    assert_eq!(ready.id, PodId(name));
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_service_already_owned_by_our_pod_is_used_as_is() {
    let mut h = harness(Vec::new()).await;
    let (start, pod) = service_conflict(&mut h, "uid-ours").await;
    expect_serve(&mut h, &pod).await;
    let ready = finish(start, "the start").await.expect("a ready pod");
    assert_eq!(ready.id, PodId(name_of(&pod)));
    // Neither deleted nor made again.
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_5xx_on_the_pod_create_fails_the_start_naming_the_pod_and_the_status() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let name = name_of(&create.body);
    create.fail(500, "InternalError", "etcdserver: request timed out");
    let err = finish(start, "the start")
        .await
        .expect_err("the start failed");
    let message = err.to_string();
    assert!(matches!(err, BackendError::StartFailed { .. }), "{message}");
    for part in [
        format!("creating pod {name}"),
        "etcdserver: request timed out".to_string(),
        "(InternalError 500)".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
    // Nothing was created, so nothing is deleted.
    h.api.quiet().await;
    assert!(h.backend.inner.held().claimed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_503_on_the_pod_create_is_retried_with_the_same_request() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let sent = create.body.clone();
    create.fail(503, "ServiceUnavailable", "the server is shutting down");
    let again = h.api.expect("POST", PODS).await;
    assert_eq!(again.body, sent);
    let pod = created(&sent, "uid-1");
    again.answer(201, pod.clone());
    expect_gate_on(&mut h, &pod).await;
    let service = h.api.expect("POST", SERVICES).await;
    let body = service.body.clone();
    service.answer(201, body);
    h.api.apply_pod("ADDED", ready(&pod));
    expect_serve(&mut h, &pod).await;
    finish(start, "the start").await.expect("a ready pod");
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_5xx_on_the_service_create_deletes_the_pod_it_created() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let pod = created(&create.body, "uid-1");
    let name = name_of(&pod);
    create.answer(201, pod.clone());
    expect_gate_on(&mut h, &pod).await;
    h.api
        .expect("POST", SERVICES)
        .await
        .fail(500, "InternalError", "admission webhook failed");
    let err = finish(start, "the start")
        .await
        .expect_err("the start failed");
    let message = err.to_string();
    for part in [
        format!("creating service {name}"),
        "admission webhook failed".to_string(),
        "(InternalError 500)".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
    // Its own pod: deleted whatever its version, but only that pod (names
    // are reused), by uid; the Service goes with it, by owner reference.
    expect_delete_by_uid(&mut h, &name, pod).await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_create_never_answered_times_out_at_the_ready_timeout() {
    let mut h = harness(Vec::new()).await;
    let began = tokio::time::Instant::now();
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let name = name_of(&create.body);
    let _unanswered = create.hold();
    let err = finish(start, "the start")
        .await
        .expect_err("the start timed out");
    let waited = began.elapsed();
    assert!(
        waited >= READY_TIMEOUT && waited < READY_TIMEOUT + Duration::from_secs(1),
        "{waited:?}"
    );
    let BackendError::ReadyTimeout {
        image,
        timeout,
        detail,
    } = err
    else {
        panic!("not a ready timeout: {err}");
    };
    assert_eq!((image.as_str(), timeout), (IMAGE, READY_TIMEOUT));
    assert_eq!(
        detail,
        format!("pod {name}: waiting for the API server to answer its create")
    );
    // The start does not know it created anything: no delete. (Had the
    // create landed, the sweep deletes the unclaimed pod once its
    // reclaim-after passed.)
    h.api.quiet().await;
    assert!(h.backend.inner.held().claimed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_reuse_patches_reclaim_after_once_at_a_time_and_a_404_is_ignored() {
    let name = "set-labels-v1-0";
    // Written ten minutes ago: older than the slack (a tenth of the TTL).
    let recorded = now() + TTL.as_secs() - 600;
    let pod = ready(&existing_pod(name, "uid-1", OWNER, recorded));
    let mut h = harness(vec![pod.clone()]).await;
    let id = PodId(name.to_string());
    h.backend.reused(&id, TTL);
    h.backend.reused(&id, TTL);
    let patch = h.api.expect("PATCH", &format!("{PODS}/{name}")).await;
    assert_eq!(patch.content_type, "application/merge-patch+json");
    let wanted: u64 = patch.body["metadata"]["annotations"][RECLAIM_AFTER_ANNOTATION]
        .as_str()
        .expect("a reclaim-after")
        .parse()
        .expect("unix seconds");
    assert!(
        wanted + 5 >= now() + TTL.as_secs() && wanted <= now() + TTL.as_secs(),
        "{wanted}"
    );
    // One in flight: no other.
    let in_flight = patch.hold();
    h.backend.reused(&id, TTL);
    h.api.quiet().await;
    // The pod was deleted meanwhile: nothing to extend, nothing to report.
    in_flight.send_response(failure(
        404,
        "NotFound",
        &format!("pods \"{name}\" not found"),
    ));
    h.api.quiet().await;
    assert!(h.events.try_recv().is_err());
    // Nothing was recorded: the next reuse tries again.
    h.backend.reused(&id, TTL);
    let patch = h.api.expect("PATCH", &format!("{PODS}/{name}")).await;
    let mut patched = pod;
    patched["metadata"]["annotations"][RECLAIM_AFTER_ANNOTATION] =
        patch.body["metadata"]["annotations"][RECLAIM_AFTER_ANNOTATION].clone();
    patch.answer(200, patched);
    h.api.quiet().await;
    // Written just now: within the slack, so no patch.
    h.backend.reused(&id, TTL);
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_reuse_within_the_slack_of_the_recorded_reclaim_after_patches_nothing() {
    let name = "set-labels-v1-0";
    let recorded = now() + TTL.as_secs() - 10;
    let pod = ready(&existing_pod(name, "uid-1", OWNER, recorded));
    let mut h = harness(vec![pod]).await;
    h.backend.reused(&PodId(name.to_string()), TTL);
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_create_answered_503_until_the_ready_timeout_times_out_naming_the_create() {
    let mut h = harness(Vec::new()).await;
    let began = tokio::time::Instant::now();
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let name = name_of(&create.body);
    create.fail(503, "ServiceUnavailable", "the server is shutting down");
    // The client retries (with backoff) until the start gives up.
    let mut tries = 1;
    while let Ok(Some(again)) = tokio::time::timeout(READY_TIMEOUT, h.api.next_opt()).await {
        assert_eq!((again.method.as_str(), again.path.as_str()), ("POST", PODS));
        tries += 1;
        again.fail(503, "ServiceUnavailable", "the server is shutting down");
    }
    assert!(tries > 2, "{tries}");
    let err = finish(start, "the start")
        .await
        .expect_err("the start timed out");
    let BackendError::ReadyTimeout { detail, .. } = err else {
        panic!("not a ready timeout: {err}");
    };
    assert_eq!(
        detail,
        format!("pod {name}: waiting for the API server to answer its create")
    );
    assert!(began.elapsed() >= READY_TIMEOUT);
    assert!(h.api.log().iter().all(|r| !r.starts_with("DELETE")));
}

/// A loopback address standing for a pod's IP, this test process's own
/// (127.1.0.1 to 127.254.255.254: never 127.0.0.1), so that runs at the same
/// time do not share port 9446.
fn loopback_pod_ip() -> String {
    let pid = std::process::id();
    format!(
        "127.{}.{}.{}",
        1 + (pid >> 16) % 254,
        (pid >> 8) % 256,
        1 + pid % 254
    )
}

/// Starts a pod for [`IMAGE`] (as `uid-1`), up to the pod watch showing it
/// Running on `ip`, not Ready; the start and the pod as running.
async fn start_running_on(
    h: &mut Harness,
    ip: &str,
) -> (
    tokio::task::JoinHandle<Result<ReadyPod, BackendError>>,
    Value,
) {
    let (start, mut running) = start_created(h, IMAGE, "uid-1").await;
    running["status"] = json!({"phase": "Running", "podIP": ip});
    let running = h.api.apply_pod("MODIFIED", running);
    (start, running)
}

/// Dialled by its IP, a new pod is handed out as soon as its wrapper
/// answers there: Running with an address, not yet Ready. (A real health
/// server on a loopback address standing for the pod's IP, and so the real
/// clock: the paused one would time out every connect at once.)
#[tokio::test]
async fn a_pod_whose_wrapper_answers_on_its_ip_is_handed_out_before_ready() {
    use proto::health::health_reporter;
    let ip = loopback_pod_ip();
    let port = u16::try_from(WRAPPER_PORT).expect("a port");
    let test = async {
        let mut h = harness(Vec::new()).await;
        let (start, running) = start_running_on(&mut h, &ip).await;
        let name = name_of(&running);
        // Not handed out while nothing listens there (refused, asked
        // again)...
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !start.is_finished(),
            "handed out before its wrapper answered"
        );
        // ... nor while something listens but does not answer.
        let listener = tokio::net::TcpListener::bind((ip.as_str(), port))
            .await
            .expect("a loopback address for the pod's wrapper");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !start.is_finished(),
            "handed out before its wrapper answered"
        );
        // The overall service ("") says SERVING from the start.
        let (_reporter, health) = health_reporter();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        expect_serve(&mut h, &running).await;
        let ready = finish(start, "the start").await.expect("a pod");
        assert_eq!(ready.id, PodId(name));
        assert_eq!(ready.endpoint, format!("http://{ip}:{WRAPPER_PORT}"));
        server.abort();
    };
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("the start ended within 30 s");
}

/// A pod that goes while its wrapper is asked (its watch says DELETED) ends
/// the start at once, not at the ready timeout; the pod is deleted.
#[tokio::test]
async fn a_pod_that_goes_while_its_wrapper_is_asked_ends_the_start() {
    let ip = loopback_pod_ip();
    let test = async {
        let mut h = harness(Vec::new()).await;
        let (start, running) = start_running_on(&mut h, &ip).await;
        let name = name_of(&running);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!start.is_finished(), "handed out with nothing listening");
        h.api.apply_pod("DELETED", running.clone());
        let err = finish(start, "the start")
            .await
            .expect_err("the start failed");
        assert!(
            err.to_string().contains(&format!("pod {name} was deleted")),
            "{err}"
        );
        // Deleted by its uid (not waiting for the quiet after it, which
        // the real clock would take whole).
        let delete = h.api.expect("DELETE", &format!("{PODS}/{name}")).await;
        assert_eq!(
            delete.body.get("preconditions"),
            Some(&json!({"uid": "uid-1"})),
            "{:?}",
            delete.body
        );
        delete.answer(200, running);
    };
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("the start ended within 30 s");
}

#[tokio::test(start_paused = true)]
async fn a_pod_never_ready_times_out_and_is_deleted() {
    let mut h = harness(Vec::new()).await;
    let began = tokio::time::Instant::now();
    let (start, pod) = start_created(&mut h, IMAGE, "uid-1").await;
    let name = name_of(&pod);
    let err = finish(start, "the start")
        .await
        .expect_err("the start timed out");
    let waited = began.elapsed();
    assert!(
        waited >= READY_TIMEOUT && waited < READY_TIMEOUT + Duration::from_secs(1),
        "{waited:?}"
    );
    let BackendError::ReadyTimeout { detail, .. } = err else {
        panic!("not a ready timeout: {err}");
    };
    assert_eq!(
        detail,
        format!("pod {name}: waiting for it to be scheduled and given an address")
    );
    expect_delete_by_uid(&mut h, &name, pod).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_start_on_another_runners_pod_leaves_that_pod() {
    // The name every runner computes for IMAGE on the built-in template
    // with these settings: pinned, as runners of different versions must
    // agree on it to share pods.
    let name = "set-labels-v1-570e0b36-0";
    let theirs = existing_pod(name, "uid-theirs", "runner-b", now() + TTL.as_secs());
    let mut h = harness(vec![theirs.clone()]).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    // In the store already: used without a create.
    let service = h.api.expect("POST", SERVICES).await;
    assert_eq!(name_of(&service.body), name, "the pod names changed");
    service.fail(500, "InternalError", "admission webhook failed");
    let err = finish(start, "the start")
        .await
        .expect_err("the start failed");
    assert!(
        err.to_string()
            .contains(&format!("creating service {name}")),
        "{err}"
    );
    // Its reclaim-after moves (it was used); it is not deleted.
    h.api
        .expect("PATCH", &format!("{PODS}/{name}"))
        .await
        .answer(200, theirs);
    h.api.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_pod_is_drained_then_deleted_then_unprotected() {
    let mut h = harness(Vec::new()).await;
    let name = start_ready(&mut h, IMAGE, "uid-1").await;
    let pod = h.api.pod(&name).expect("in the store");
    let path = format!("{PODS}/{name}");
    let stop = tokio::spawn(
        h.backend
            .stop(PodId(name.clone()), StopReason::Idle(Retire::Expired)),
    );
    // 1. The drain, declared with the version seen.
    let drain = h.api.expect("PATCH", &path).await;
    let pod = answer_operation(drain, &pod, Some("drain"));
    // 2. Traffic off: the gate's condition in the status, merged by type.
    let gate = h.api.expect("PATCH", &format!("{path}/status")).await;
    assert_eq!(gate.content_type, "application/strategic-merge-patch+json");
    assert_eq!(
        gate.body["status"]["conditions"][0]["type"],
        lifecycle::SERVING_GATE
    );
    assert_eq!(gate.body["status"]["conditions"][0]["status"], "False");
    gate.answer(200, pod.clone());
    // 3. No other runner uses it: the delete, declared, then done by uid.
    h.api.expect("GET", &path).await.answer(200, pod.clone());
    let declared = h.api.expect("PATCH", &path).await;
    let pod = answer_operation(declared, &pod, Some("delete"));
    let delete = h.api.expect("DELETE", &path).await;
    assert_eq!(delete.body["preconditions"], json!({"uid": "uid-1"}));
    let mut deleting = pod.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    delete.answer(200, deleting.clone());
    // 4. The finalizer off, with this runner's operation.
    h.api
        .expect("GET", &path)
        .await
        .answer(200, deleting.clone());
    let unprotect = h.api.expect("PATCH", &path).await;
    assert_eq!(unprotect.body["metadata"]["finalizers"], json!([]));
    answer_operation(unprotect, &deleting, None);
    finish(stop, "the stop").await.expect("an idle stop");
    h.api.quiet().await;
    let reasons = h.api.event_reasons();
    for reason in ["Created", "Serving", "Draining", "Deleted", "TrafficGone"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} not in {reasons:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_pod_another_live_runner_serves_is_released_not_deleted() {
    let mut h = harness(Vec::new()).await;
    let name = start_ready(&mut h, IMAGE, "uid-1").await;
    let mut pod = h.api.pod(&name).expect("in the store");
    pod["metadata"]["labels"]["operating.fn.kpt.dev/runner-b"] =
        json!(lifecycle::now_ns().to_string());
    pod["metadata"]["labels"]["operation-type.fn.kpt.dev/runner-b"] = json!("serve");
    pod["metadata"]["labels"][format!("operating.fn.kpt.dev/{OWNER}")] =
        json!(lifecycle::now_ns().to_string());
    pod["metadata"]["labels"][format!("operation-type.fn.kpt.dev/{OWNER}")] = json!("serve");
    let pod = h.api.apply_pod("MODIFIED", pod);
    let stop = tokio::spawn(
        h.backend
            .stop(PodId(name.clone()), StopReason::Idle(Retire::Expired)),
    );
    let release = h.api.expect("PATCH", &format!("{PODS}/{name}")).await;
    assert!(release.body["metadata"].get("finalizers").is_none());
    answer_operation(release, &pod, None);
    finish(stop, "the stop").await.expect("an idle stop");
    // Not drained, not deleted.
    h.api.quiet().await;
    assert!(
        h.api.event_reasons().iter().any(|r| r == "Released"),
        "{:?}",
        h.api.event_reasons()
    );
}

#[tokio::test(start_paused = true)]
async fn a_409_on_an_operation_is_read_again_and_decided_again() {
    let mut h = harness(Vec::new()).await;
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    let pod = created(&create.body, "uid-1");
    let name = name_of(&pod);
    create.answer(201, pod.clone());
    expect_gate_on(&mut h, &pod).await;
    h.api.apply_pod("ADDED", pod.clone());
    let service = h.api.expect("POST", SERVICES).await;
    let body = service.body.clone();
    service.answer(201, body);
    let pod = h.api.apply_pod("MODIFIED", ready(&pod));
    let path = format!("{PODS}/{name}");
    let first = h.api.expect("PATCH", &path).await;
    let seen = first.body["metadata"]["resourceVersion"].clone();
    first.fail(409, "Conflict", "the object has been modified");
    // Read again: another runner drains it now, so this one refuses it and
    // takes the next name.
    let mut drained = pod.clone();
    drained["metadata"]["resourceVersion"] = json!("999");
    drained["metadata"]["labels"]["operating.fn.kpt.dev/runner-b"] =
        json!(lifecycle::now_ns().to_string());
    drained["metadata"]["labels"]["operation-type.fn.kpt.dev/runner-b"] = json!("drain");
    h.api.expect("GET", &path).await.answer(200, drained);
    let next = h.api.expect("POST", PODS).await;
    assert_ne!(name_of(&next.body), name, "the drained pod is not used");
    assert_ne!(seen, json!("999"));
    next.fail(500, "InternalError", "enough");
    finish(start, "the start")
        .await
        .expect_err("the test ends it");
}

/// A backend without a reuse hook (as the process backend): its pods are
/// ready at once. The baseline of the hand-out benchmark below.
struct NoHook;

impl Backend for NoHook {
    fn name(&self) -> &'static str {
        "no-hook"
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        Box::pin(async move {
            Ok(ReadyPod {
                id: PodId(format!("pod-{}", spec.image)),
                endpoint: "http://127.0.0.1:1".to_string(),
            })
        })
    }

    fn stop(
        &self,
        _id: PodId,
        _reason: StopReason,
    ) -> BoxFuture<'static, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }

    fn set_events(&self, _events: mpsc::UnboundedSender<PodEvent>) {}
}

/// Warm leases per second that `cache` hands out for `image`: 8 tasks, one
/// `get` and drop after another.
async fn hand_outs_per_second(cache: &function_runner::cache::PodCache, image: &str) -> f64 {
    let per_task = 50_000_u32;
    let tasks = 8;
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let cache = cache.clone();
            let image = image.to_string();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    drop(cache.get(&image, Default::default()).await.expect("lease"));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    f64::from(per_task * tasks) / started.elapsed().as_secs_f64()
}

/// The cache's warm hand-out rate on the kube backend, whose reuse hook
/// runs on every hand-out (a store read, a lock; a patch at most once per
/// tenth of the TTL), beside a backend without one. Alternating rounds; run
/// with `cargo test --release -p runner-kube --lib warm_hand_out_rate
/// -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn warm_hand_out_rate_kube_beside_a_backend_without_reuse_hook() {
    use function_runner::cache::{CacheSettings, PodCache};
    // The pod every runner names for IMAGE (pinned above), recorded as
    // reclaimed a TTL from now: no patch within the run.
    let name = "set-labels-v1-570e0b36-0";
    let pod = ready(&existing_pod(name, "uid-1", OWNER, now() + TTL.as_secs()));
    let h = harness(vec![pod]).await;
    let mut api = h.api;
    let backend = Arc::new(h.backend);
    let kube = PodCache::spawn(backend.clone(), CacheSettings::default());
    let first = tokio::spawn({
        let kube = kube.clone();
        async move { kube.get(IMAGE, Default::default()).await.map(drop) }
    });
    // The start adopts the pod (no create); its Service is made.
    let service = api.expect("POST", SERVICES).await;
    let body = service.body.clone();
    service.answer(201, body);
    first.await.expect("task").expect("the pod");
    let plain = PodCache::spawn(Arc::new(NoHook), CacheSettings::default());
    drop(plain.get(IMAGE, Default::default()).await.expect("the pod"));
    let (mut kube_rates, mut plain_rates) = (Vec::new(), Vec::new());
    for round in 0..10 {
        let (k, p) = if round % 2 == 0 {
            let k = hand_outs_per_second(&kube, IMAGE).await;
            (k, hand_outs_per_second(&plain, IMAGE).await)
        } else {
            let p = hand_outs_per_second(&plain, IMAGE).await;
            (hand_outs_per_second(&kube, IMAGE).await, p)
        };
        println!(
            "round {round}: kube {k:.0}/s, without hook {p:.0}/s, ratio {:.2}",
            k / p
        );
        kube_rates.push(k);
        plain_rates.push(p);
    }
    let kube: f64 = kube_rates.iter().sum();
    let plain: f64 = plain_rates.iter().sum();
    println!("all rounds: ratio {:.2}", kube / plain);
    // The hook alone, as the cache calls it on each hand-out.
    let id = PodId(name.to_string());
    let calls = 1_000_000_u32;
    let started = std::time::Instant::now();
    for _ in 0..calls {
        backend.reused(&id, CacheSettings::default().default_ttl);
    }
    let hook = started.elapsed().as_secs_f64() * 1e9 / f64::from(calls);
    let lease = 1e9 / (plain / plain_rates.len() as f64);
    println!("per hand-out: {lease:.0} ns without hook; the kube hook alone {hook:.0} ns");
    // Nothing was patched: the reclaim-after was recent enough throughout.
    assert!(
        !api.log().iter().any(|r| r.starts_with("PATCH")),
        "{:?}",
        api.log()
    );
}

#[tokio::test(start_paused = true)]
async fn a_handed_out_pod_whose_container_dies_is_reported_and_told_in_a_warning() {
    let mut h = harness(Vec::new()).await;
    let name = start_ready(&mut h, IMAGE, "uid-1").await;
    let mut pod = ready(&h.api.pod(&name).expect("in the store"));
    pod["status"]["containerStatuses"] = json!([{
        "name": "function", "image": IMAGE, "imageID": "", "ready": false,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }]);
    h.api.apply_pod("MODIFIED", pod);
    let event = tokio::time::timeout(FINISH_WITHIN, h.events.recv())
        .await
        .expect("a pod event");
    assert!(
        matches!(&event, Some(PodEvent::Failed { reason, .. }) if reason.contains("OOMKilled")),
        "{event:?}"
    );
    h.api.quiet().await;
    assert!(
        h.api.event_reasons().iter().any(|r| r == "Failed"),
        "{:?}",
        h.api.event_reasons()
    );
}

/// #31 item 1: a create refused by RBAC fails the start as a refusal (the
/// caller gets UNAVAILABLE, not this function's failure), turns the
/// backend's readiness off, and a SelfSubjectAccessReview that says the
/// right is back turns it on again, with no call needed.
#[tokio::test(start_paused = true)]
async fn a_refused_create_turns_readiness_off_until_a_review_says_it_is_granted() {
    let mut h = harness(Vec::new()).await;
    let ready = h.backend.ready().expect("the kube backend tells");
    assert!(*ready.borrow());
    let start = tokio::spawn(h.backend.start(spec(IMAGE)));
    let create = h.api.expect("POST", PODS).await;
    create.fail(
        403,
        "Forbidden",
        &format!("pods is forbidden: User \"system:serviceaccount:porch-system:porch-fn-runner\" cannot create resource \"pods\" in API group \"\" in the namespace \"{NS}\""),
    );
    let err = finish(start, "the start").await.expect_err("refused");
    let message = err.to_string();
    assert!(matches!(err, BackendError::Refused { .. }), "{message}");
    assert!(
        message.contains("cannot create resource \"pods\"") && message.contains("(Forbidden 403)"),
        "{message}"
    );
    assert!(!message.contains("ErrorResponse"), "{message}");
    assert!(!*ready.borrow());

    const REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    // Still refused: the review says so, readiness stays off.
    let review = h.api.expect("POST", REVIEWS).await;
    let attributes = review.body["spec"]["resourceAttributes"].clone();
    assert_eq!(attributes["verb"], "create");
    assert_eq!(attributes["resource"], "pods");
    assert_eq!(attributes["namespace"], NS);
    let mut answer = review.body.clone();
    answer["status"] = serde_json::json!({"allowed": false});
    review.answer(201, answer);
    let review = h.api.expect("POST", REVIEWS).await;
    assert!(!*ready.borrow());
    let mut answer = review.body.clone();
    answer["status"] = serde_json::json!({"allowed": true});
    review.answer(201, answer);
    let mut changed = ready.clone();
    tokio::time::timeout(Duration::from_secs(1), changed.wait_for(|r| *r))
        .await
        .expect("ready again")
        .expect("the backend is there");
    // Nothing more is asked once granted.
    h.api.quiet().await;
}
