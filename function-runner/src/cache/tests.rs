//! Behaviour of the pod cache against a fake backend, in paused time.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::future::{self, BoxFuture, FutureExt};
use tokio::task::JoinHandle;

use super::*;

/// Records starts and stops; starts either answer at once (`auto`) or wait
/// until the test finishes them in order.
#[derive(Default)]
struct Fake {
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    manual: bool,
    fail_next: usize,
    next_id: usize,
    starts: Vec<String>,
    stops: Vec<PodId>,
    stop_reasons: Vec<StopReason>,
    specs: Vec<PodSpec>,
    reused: Vec<(PodId, Duration)>,
    pending: VecDeque<(String, oneshot::Sender<Result<ReadyPod, BackendError>>)>,
    events: Option<mpsc::UnboundedSender<PodEvent>>,
}

impl FakeState {
    fn new_pod(&mut self) -> ReadyPod {
        self.next_id += 1;
        ReadyPod {
            id: PodId(format!("pod-{}", self.next_id)),
            endpoint: "http://127.0.0.1:1".to_string(),
        }
    }
}

impl Fake {
    fn auto() -> Arc<Fake> {
        Arc::new(Fake::default())
    }

    fn manual() -> Arc<Fake> {
        let fake = Fake::default();
        fake.lock().manual = true;
        Arc::new(fake)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().expect("fake state poisoned")
    }

    fn starts(&self) -> Vec<String> {
        self.lock().starts.clone()
    }

    fn stops(&self) -> Vec<PodId> {
        self.lock().stops.clone()
    }

    fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Lets the oldest waiting start succeed; returns the new pod's id.
    fn finish_ok(&self) -> PodId {
        let mut state = self.lock();
        let pod = state.new_pod();
        let (_, tx) = state.pending.pop_front().expect("no start is waiting");
        let id = pod.id.clone();
        let _ = tx.send(Ok(pod));
        id
    }

    /// Lets the oldest waiting start answer with `endpoint`.
    fn finish_with_endpoint(&self, endpoint: &str) -> PodId {
        let mut state = self.lock();
        let mut pod = state.new_pod();
        pod.endpoint = endpoint.to_string();
        let (_, tx) = state.pending.pop_front().expect("no start is waiting");
        let id = pod.id.clone();
        let _ = tx.send(Ok(pod));
        id
    }

    /// Lets the oldest waiting start fail.
    fn finish_err(&self) {
        let (image, tx) = self
            .lock()
            .pending
            .pop_front()
            .expect("no start is waiting");
        let _ = tx.send(Err(BackendError::StartFailed {
            image,
            source: runner_core::backend::cause("image pull backoff"),
        }));
    }

    fn emit_stale(&self, id: &PodId) {
        let events = self.lock().events.clone().expect("set_events was called");
        events
            .send(PodEvent::Stale {
                id: id.clone(),
                why: Retire::TemplateChanged,
            })
            .expect("cache listens for events");
    }

    fn emit_failed(&self, id: &PodId) {
        let events = self.lock().events.clone().expect("set_events was called");
        events
            .send(PodEvent::Failed {
                id: id.clone(),
                reason: "OOMKilled".to_string(),
            })
            .expect("cache listens for events");
    }
}

impl Backend for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let mut state = self.lock();
        state.starts.push(spec.image.clone());
        state.specs.push(spec.clone());
        if state.manual {
            let (tx, rx) = oneshot::channel();
            state.pending.push_back((spec.image.clone(), tx));
            return async move {
                rx.await.unwrap_or_else(|_| {
                    Err(BackendError::StartFailed {
                        image: spec.image,
                        source: runner_core::backend::cause("test dropped the start"),
                    })
                })
            }
            .boxed();
        }
        if state.fail_next > 0 {
            state.fail_next -= 1;
            return future::ready(Err(BackendError::StartFailed {
                image: spec.image,
                source: runner_core::backend::cause("image pull backoff"),
            }))
            .boxed();
        }
        future::ready(Ok(state.new_pod())).boxed()
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        let mut state = self.lock();
        state.stop_reasons.push(reason);
        state.stops.push(id);
        future::ready(Ok(())).boxed()
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        self.lock().events = Some(events);
    }

    fn reused(&self, id: &PodId, ttl: Duration) {
        self.lock().reused.push((id.clone(), ttl));
    }

    /// Images under `unknown.example/` are known to fail: as the process
    /// backend's map says of an image it has no entry for.
    fn check(&self, image: &str) -> Result<(), BackendError> {
        if image.starts_with("unknown.example/") {
            return Err(BackendError::UnknownImage {
                image: image.to_string(),
                reason: "not in the map".into(),
            });
        }
        Ok(())
    }
}

const IMAGE: &str = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1";
const OTHER: &str = "ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.0";

fn cache(fake: &Arc<Fake>, settings: CacheSettings) -> PodCache {
    PodCache::spawn(Arc::clone(fake) as Arc<dyn Backend>, settings)
}

fn defaults() -> PodRequestSettings {
    PodRequestSettings::default()
}

fn pods(max_pods: usize, queue: usize) -> PodRequestSettings {
    PodRequestSettings {
        max_parallel_pods: Some(max_pods),
        max_queue_length: Some(queue),
        ..PodRequestSettings::default()
    }
}

/// Runs every task until all are idle. In paused time, the runtime only
/// advances the clock (here by 1ms) once nothing else can run.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

fn spawn_get(
    cache: &PodCache,
    image: &'static str,
    overrides: PodRequestSettings,
) -> JoinHandle<Result<PodLease, CacheError>> {
    let cache = cache.clone();
    tokio::spawn(async move { cache.get(image, overrides).await })
}

async fn get(cache: &PodCache, image: &str, overrides: PodRequestSettings) -> PodLease {
    cache.get(image, overrides).await.expect("a lease")
}

async fn image_snapshot(cache: &PodCache, image: &str) -> ImageSnapshot {
    cache
        .snapshot()
        .await
        .image(image)
        .cloned()
        .expect("image is cached")
}

async fn loads(cache: &PodCache, image: &str) -> Vec<usize> {
    image_snapshot(cache, image)
        .await
        .pods
        .iter()
        .map(|p| p.load)
        .collect()
}

fn id(name: &str) -> PodId {
    PodId(name.to_string())
}

#[test]
fn defaults_are_porchs() {
    let s = CacheSettings::default();
    assert_eq!(s.default_ttl, Duration::from_secs(1800));
    assert_eq!(s.scan_interval, Duration::from_secs(60));
    assert_eq!(s.ready_timeout, Duration::from_secs(60));
    assert_eq!(s.max_parallel_pods_per_function, 1);
    assert_eq!(s.max_waitlist_length, 2);
}

// Rule 1.
#[tokio::test(start_paused = true)]
async fn a_thousand_concurrent_first_calls_start_exactly_one_pod() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let calls: Vec<_> = (0..1000)
        .map(|_| spawn_get(&cache, IMAGE, defaults()))
        .collect();
    settle().await;
    assert_eq!(fake.starts(), vec![IMAGE.to_string()]);
    let snap = image_snapshot(&cache, IMAGE).await;
    assert_eq!(snap.waiters, 1000);
    assert_eq!(snap.pods.len(), 1);
    assert_eq!(snap.pods[0].state, PodState::Starting);

    let pod = fake.finish_ok();
    let mut leases = Vec::new();
    for call in calls {
        let lease = call.await.expect("task").expect("lease");
        assert_eq!(lease.pod_id(), &pod);
        leases.push(lease);
    }
    // One shared pod state, so one channel, for all callers.
    assert!(leases.iter().all(|l| Arc::ptr_eq(&l.pod, &leases[0].pod)));
    assert_eq!(loads(&cache, IMAGE).await, vec![1000]);
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.pod_starts, 1);
    assert_eq!(snap.counters.misses, 1000);
    assert_eq!(snap.counters.hits, 0);

    drop(leases);
    settle().await;
    assert_eq!(loads(&cache, IMAGE).await, vec![0]);
    assert_eq!(fake.starts().len(), 1);
}

// Rule 2, and the Go defect "waiters can be lost when a pod start fails".
#[tokio::test(start_paused = true)]
async fn failed_start_reaches_every_waiter_and_the_next_call_retries() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let calls: Vec<_> = (0..50)
        .map(|_| spawn_get(&cache, IMAGE, defaults()))
        .collect();
    settle().await;
    fake.finish_err();
    for call in calls {
        match call.await.expect("task") {
            Err(CacheError::PodStart { image, source }) => {
                assert_eq!(image, IMAGE);
                assert!(matches!(source, BackendError::StartFailed { .. }));
            }
            other => panic!("want the start error, got {other:?}"),
        }
    }
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.pod_start_failures, 1);
    assert!(snap.image(IMAGE).is_none_or(|i| i.pods.is_empty()));

    let retry = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    assert_eq!(fake.starts().len(), 2);
    let pod = fake.finish_ok();
    let lease = retry.await.expect("task").expect("lease");
    assert_eq!(lease.pod_id(), &pod);
}

// Rule 3, and the Go defect "a caller that times out while queued leaks its
// load count".
#[tokio::test(start_paused = true)]
async fn a_caller_that_gives_up_while_waiting_holds_no_load() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let aborted = spawn_get(&cache, IMAGE, defaults());
    let timed_out = {
        let cache = cache.clone();
        tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(5), cache.get(IMAGE, defaults())).await
        })
    };
    settle().await;
    assert_eq!(image_snapshot(&cache, IMAGE).await.waiters, 2);
    aborted.abort();
    tokio::time::advance(Duration::from_secs(5)).await;
    assert!(
        timed_out.await.expect("task").is_err(),
        "the call timed out"
    );
    assert!(aborted.await.expect_err("aborted").is_cancelled());

    let pod = fake.finish_ok();
    settle().await;
    let snap = image_snapshot(&cache, IMAGE).await;
    assert_eq!(snap.pods.len(), 1);
    assert_eq!(snap.pods[0].state, PodState::Ready);
    assert_eq!(snap.pods[0].id, Some(pod.clone()));
    assert_eq!(snap.pods[0].load, 0);
    assert_eq!(snap.waiters, 0);

    let lease = get(&cache, IMAGE, defaults()).await;
    assert_eq!(lease.pod_id(), &pod);
    assert_eq!(loads(&cache, IMAGE).await, vec![1]);
}

// Rule 3: a dead waiter must not make the pod look full and start another.
#[tokio::test(start_paused = true)]
async fn a_dead_waiter_does_not_trigger_another_pod() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let gone = spawn_get(&cache, IMAGE, pods(2, 1));
    settle().await;
    gone.abort();
    settle().await;
    let waiting = spawn_get(&cache, IMAGE, pods(2, 1));
    settle().await;
    assert_eq!(fake.starts().len(), 1, "joined the starting pod");
    let pod = fake.finish_ok();
    assert_eq!(waiting.await.expect("task").expect("lease").pod_id(), &pod);
}

// Rules 3 and 7: pods still starting count toward the limit; the caller
// that triggers a pod waits for it; at the limit the least loaded pod takes
// the caller anyway.
#[tokio::test(start_paused = true)]
async fn another_pod_starts_only_when_all_are_full_and_below_the_limit() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let s = pods(2, 2);
    let a = spawn_get(&cache, IMAGE, s.clone());
    let b = spawn_get(&cache, IMAGE, s.clone());
    settle().await;
    assert_eq!(fake.pending(), 1, "b joins the starting pod");
    let c = spawn_get(&cache, IMAGE, s.clone());
    settle().await;
    assert_eq!(fake.pending(), 2, "pod 1 is full: c starts pod 2");
    let d = spawn_get(&cache, IMAGE, s.clone());
    settle().await;
    assert_eq!(loads(&cache, IMAGE).await, vec![2, 2], "d joins pod 2");
    let e = spawn_get(&cache, IMAGE, s.clone());
    let f = spawn_get(&cache, IMAGE, s.clone());
    settle().await;
    assert_eq!(fake.starts().len(), 2, "at the limit: no third pod");
    assert_eq!(loads(&cache, IMAGE).await, vec![3, 3]);

    let first = fake.finish_ok();
    let second = fake.finish_ok();
    let mut on_first = 0;
    for call in [a, b, c, d, e, f] {
        let lease = call.await.expect("task").expect("lease");
        if *lease.pod_id() == first {
            on_first += 1;
        } else {
            assert_eq!(lease.pod_id(), &second);
        }
    }
    assert_eq!(on_first, 3);
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.misses, 6);
    assert_eq!(snap.counters.pod_starts, 2);
}

// Rule 3 with Porch's defaults: one pod, the queue length is only preferred.
#[tokio::test(start_paused = true)]
async fn at_the_limit_a_full_ready_pod_still_serves() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let mut leases = Vec::new();
    for _ in 0..5 {
        leases.push(get(&cache, IMAGE, defaults()).await);
    }
    assert_eq!(fake.starts().len(), 1);
    assert_eq!(loads(&cache, IMAGE).await, vec![5]);
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.misses, 1);
    assert_eq!(snap.counters.hits, 4);
}

// Rule 3: least loaded ready pod; ties broken round robin.
#[tokio::test(start_paused = true)]
async fn least_loaded_ready_pod_wins_and_ties_go_round_robin() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    // Two pods: the second call finds the first pod full (queue 1).
    let l1 = get(&cache, IMAGE, pods(2, 1)).await;
    let l2 = get(&cache, IMAGE, pods(2, 1)).await;
    let (p1, p2) = (l1.pod_id().clone(), l2.pod_id().clone());
    assert_ne!(p1, p2);
    drop((l1, l2));
    settle().await;
    assert_eq!(loads(&cache, IMAGE).await, vec![0, 0]);

    let wide = pods(2, 10);
    let mut picked = Vec::new();
    for _ in 0..4 {
        let lease = get(&cache, IMAGE, wide.clone()).await;
        picked.push(lease.pod_id().clone());
        drop(lease);
        settle().await;
    }
    assert_eq!(picked, vec![p1.clone(), p2.clone(), p1.clone(), p2.clone()]);

    let a = get(&cache, IMAGE, wide.clone()).await;
    let b = get(&cache, IMAGE, wide.clone()).await;
    let c = get(&cache, IMAGE, wide.clone()).await;
    assert_eq!(a.pod_id(), &p1);
    assert_eq!(b.pod_id(), &p2);
    assert_eq!(c.pod_id(), &p1, "tie 1/1: round robin goes back to pod 1");
    let d = get(&cache, IMAGE, wide.clone()).await;
    assert_eq!(d.pod_id(), &p2, "pod 2 is less loaded (1 < 2)");
    drop(a);
    drop(c);
    settle().await;
    assert_eq!(loads(&cache, IMAGE).await, vec![0, 2]);
    let e = get(&cache, IMAGE, wide.clone()).await;
    assert_eq!(e.pod_id(), &p1, "least loaded beats round robin");
    drop((b, d, e));
    assert_eq!(fake.starts().len(), 2);
}

// Rule 4: TTL extended on each hand-out; expired idle pods are deleted.
#[tokio::test(start_paused = true)]
async fn each_hand_out_extends_the_ttl() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let ttl = PodRequestSettings {
        ttl: Some(Duration::from_secs(600)),
        ..defaults()
    };
    let start = Instant::now();
    let pod = get(&cache, IMAGE, ttl.clone()).await.pod_id().clone();
    settle().await;
    let expiry = image_snapshot(&cache, IMAGE).await.pods[0].expiry;
    assert_eq!(expiry, Some(start + Duration::from_secs(600)));

    tokio::time::advance(Duration::from_secs(540)).await;
    drop(get(&cache, IMAGE, ttl.clone()).await);
    let extended = start + Duration::from_secs(540 + 600);
    assert_eq!(
        image_snapshot(&cache, IMAGE).await.pods[0]
            .expiry
            .map(|e| e >= extended),
        Some(true)
    );

    // Past the first expiry: the pod survives every scan until the second.
    tokio::time::advance(Duration::from_secs(300)).await;
    settle().await;
    assert!(fake.stops().is_empty());
    assert_eq!(image_snapshot(&cache, IMAGE).await.pods.len(), 1);

    tokio::time::advance(Duration::from_secs(360)).await;
    settle().await;
    assert_eq!(fake.stops(), vec![pod]);
    let snap = cache.snapshot().await;
    assert!(snap.image(IMAGE).is_none());
    assert_eq!(snap.counters.gc_deletions, 1);

    drop(get(&cache, IMAGE, ttl.clone()).await);
    assert_eq!(fake.starts().len(), 2, "the next call starts a fresh pod");
}

// The backend records a pod's life (kube: `fn.kpt.dev/reclaim-after`): it
// hears of every hand-out of a ready pod, with the TTL, and each start gets
// the TTL and the FunctionConfig's template overrides.
#[tokio::test(start_paused = true)]
async fn the_backend_hears_of_each_reuse_and_gets_ttl_and_overrides_at_start() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let overrides = Arc::new(runner_core::config::TemplateOverrides {
        service_account_name: Some("fn-sa".into()),
        ..Default::default()
    });
    let settings = PodRequestSettings {
        ttl: Some(Duration::from_secs(600)),
        template_overrides: Some(overrides.clone()),
        ..defaults()
    };
    let first = get(&cache, IMAGE, settings.clone()).await;
    let pod = first.pod_id().clone();
    drop(first);
    drop(get(&cache, IMAGE, settings.clone()).await);
    drop(get(&cache, IMAGE, settings).await);
    settle().await;
    let state = fake.lock();
    assert_eq!(state.specs.len(), 1);
    assert_eq!(state.specs[0].ttl, Duration::from_secs(600));
    assert_eq!(state.specs[0].overrides, Some(overrides));
    // The first caller waited for the start, which recorded the TTL itself.
    assert_eq!(
        state.reused,
        vec![
            (pod.clone(), Duration::from_secs(600)),
            (pod, Duration::from_secs(600))
        ]
    );
}

// A changed template: an idle pod of the old one is stopped at once; a busy
// one takes no new call, and goes once its last call is done, while its
// replacement starts (even at a limit of one pod).
#[tokio::test(start_paused = true)]
async fn a_stale_pod_is_replaced_once_idle() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let idle = get(&cache, OTHER, defaults()).await.pod_id().clone();
    fake.emit_stale(&idle);
    settle().await;
    assert_eq!(fake.stops(), vec![idle.clone()]);
    assert_eq!(
        fake.lock().stop_reasons,
        vec![StopReason::Idle(Retire::TemplateChanged)]
    );

    let busy = get(&cache, IMAGE, pods(1, 2)).await;
    fake.emit_stale(busy.pod_id());
    settle().await;
    assert_eq!(fake.stops().len(), 1, "in flight: not stopped yet");
    let fresh = get(&cache, IMAGE, pods(1, 2)).await;
    assert_ne!(
        fresh.pod_id(),
        busy.pod_id(),
        "no new call on the stale pod"
    );
    assert_eq!(loads(&cache, IMAGE).await, vec![1, 1]);

    let stale = busy.pod_id().clone();
    drop(busy);
    settle().await;
    assert_eq!(fake.stops(), vec![idle, stale]);
    assert_eq!(loads(&cache, IMAGE).await, vec![1]);
    assert_eq!(
        fake.lock().stop_reasons,
        vec![
            StopReason::Idle(Retire::TemplateChanged),
            StopReason::Idle(Retire::TemplateChanged)
        ]
    );
}

// The backend may report a pod stale (its template changed while it
// started) before the cache has its start's answer: the pod still serves
// the call that waited for it, takes no other, and goes once idle.
#[tokio::test(start_paused = true)]
async fn a_pod_reported_stale_before_its_start_answered_is_retired_after_its_call() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let call = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    // The fake names its pods pod-1, pod-2, ...
    let id = PodId("pod-1".to_string());
    fake.emit_stale(&id);
    settle().await;
    assert_eq!(fake.finish_ok(), id);
    let lease = call
        .await
        .expect("task")
        .expect("the waiting call gets the pod");
    assert_eq!(lease.pod_id(), &id);
    let next = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    assert_eq!(fake.pending(), 1, "no new call on the stale pod");
    let fresh = fake.finish_ok();
    let next = next.await.expect("task").expect("a fresh pod");
    assert_eq!(next.pod_id(), &fresh);
    assert!(fake.stops().is_empty(), "in flight: not stopped yet");
    drop(lease);
    settle().await;
    assert_eq!(fake.stops(), vec![id]);
    assert_eq!(
        fake.lock().stop_reasons,
        vec![StopReason::Idle(Retire::TemplateChanged)]
    );
}

// The backend may report a pod failed (its container died just as it
// became ready) before the cache has its start's answer: the pod is evicted
// once the answer comes, and the next call gets a new pod, not a dead one.
#[tokio::test(start_paused = true)]
async fn a_pod_reported_failed_before_its_start_answered_is_evicted() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let call = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    let id = PodId("pod-1".to_string());
    fake.emit_failed(&id);
    settle().await;
    assert_eq!(fake.finish_ok(), id);
    drop(call.await.expect("task"));
    settle().await;
    assert_eq!(cache.snapshot().await.counters.evictions, 1);
    let next = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    assert_eq!(fake.pending(), 1, "a new pod starts");
    let fresh = fake.finish_ok();
    assert_eq!(
        next.await.expect("task").expect("a fresh pod").pod_id(),
        &fresh
    );
}

// Rule 4, and the Go defect "GC deletes a pod with a call in flight".
#[tokio::test(start_paused = true)]
async fn gc_never_deletes_a_pod_with_a_call_in_flight() {
    let fake = Fake::auto();
    let settings = CacheSettings {
        default_ttl: Duration::from_secs(120),
        ..CacheSettings::default()
    };
    let cache = cache(&fake, settings);
    let lease = get(&cache, IMAGE, defaults()).await;
    for _ in 0..10 {
        tokio::time::advance(Duration::from_secs(60)).await;
        settle().await;
    }
    assert!(fake.stops().is_empty(), "in flight: never deleted");
    assert_eq!(loads(&cache, IMAGE).await, vec![1]);

    let pod = lease.pod_id().clone();
    drop(lease);
    settle().await;
    assert!(fake.stops().is_empty(), "deleted by the GC, not on release");
    tokio::time::advance(Duration::from_secs(60)).await;
    settle().await;
    assert_eq!(fake.stops(), vec![pod]);
    assert_eq!(cache.snapshot().await.counters.gc_deletions, 1);
}

// Rule 4, and the Go defect "GC can touch pods it does not own".
#[tokio::test(start_paused = true)]
async fn only_pods_this_cache_started_are_ever_stopped() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    tokio::time::advance(Duration::from_secs(3600)).await;
    settle().await;
    fake.emit_failed(&id("someone-elses-pod"));
    cache.evict(&id("another-runners-pod")).await;
    settle().await;
    assert!(fake.stops().is_empty());
    assert_eq!(cache.snapshot().await.counters.evictions, 0);

    let pod = get(&cache, IMAGE, defaults()).await.pod_id().clone();
    tokio::time::advance(Duration::from_secs(3600)).await;
    settle().await;
    assert_eq!(fake.stops(), vec![pod]);
}

// Rule 5: a failure event evicts at once; its leases release harmlessly.
#[tokio::test(start_paused = true)]
async fn a_failed_pod_is_evicted_at_once() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let old = get(&cache, IMAGE, defaults()).await;
    fake.emit_failed(old.pod_id());
    settle().await;
    assert_eq!(fake.stops(), vec![old.pod_id().clone()]);
    assert_eq!(fake.lock().stop_reasons, vec![StopReason::Broken]);
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.evictions, 1);
    assert!(snap.image(IMAGE).is_none_or(|i| i.pods.is_empty()));

    let new = get(&cache, IMAGE, defaults()).await;
    assert_ne!(new.pod_id(), old.pod_id());
    assert_eq!(fake.starts().len(), 2);
    drop(old);
    settle().await;
    assert_eq!(
        loads(&cache, IMAGE).await,
        vec![1],
        "old lease did not touch the new pod"
    );
}

// Rule 5: waiters of a pod that fails while starting get the error.
#[tokio::test(start_paused = true)]
async fn waiters_of_a_start_that_fails_get_the_error() {
    let fake = Fake::auto();
    fake.lock().fail_next = 1;
    let cache = cache(&fake, CacheSettings::default());
    let err = cache.get(IMAGE, defaults()).await.expect_err("start fails");
    assert!(matches!(err, CacheError::PodStart { .. }), "{err:?}");
    assert!(err.to_string().contains("image pull backoff"), "{err}");
    get(&cache, IMAGE, defaults()).await;
}

// Rule 5: a start the backend never answers fails its waiters; a pod that
// shows up after all is stopped.
#[tokio::test(start_paused = true)]
async fn a_start_that_never_answers_fails_and_a_late_pod_is_stopped() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let call = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    tokio::time::advance(Duration::from_secs(60) + START_GRACE).await;
    settle().await;
    match call.await.expect("task") {
        Err(CacheError::PodStart {
            source: BackendError::ReadyTimeout { .. },
            ..
        }) => {}
        other => panic!("want a ready timeout, got {other:?}"),
    }
    let late = fake.finish_ok();
    settle().await;
    assert_eq!(fake.stops(), vec![late]);
    let snap = cache.snapshot().await;
    assert_eq!(snap.counters.pod_start_failures, 1);
    assert!(snap.image(IMAGE).is_none_or(|i| i.pods.is_empty()));
}

#[tokio::test(start_paused = true)]
async fn an_invalid_endpoint_fails_the_start_and_stops_the_pod() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let call = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    let pod = fake.finish_with_endpoint("not a uri\n");
    settle().await;
    assert!(matches!(
        call.await.expect("task"),
        Err(CacheError::PodStart { .. })
    ));
    assert_eq!(fake.stops(), vec![pod]);
}

// Rule 6: evict on UNAVAILABLE.
#[tokio::test(start_paused = true)]
async fn evict_stops_the_pod_and_the_next_call_starts_a_fresh_one() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let old = get(&cache, IMAGE, defaults()).await;
    cache.evict(old.pod_id()).await;
    cache.evict(old.pod_id()).await;
    settle().await;
    assert_eq!(fake.stops(), vec![old.pod_id().clone()]);
    assert_eq!(cache.snapshot().await.counters.evictions, 1);

    let new = get(&cache, IMAGE, defaults()).await;
    assert_ne!(new.pod_id(), old.pod_id());
    drop(old);
    settle().await;
    assert_eq!(loads(&cache, IMAGE).await, vec![1]);
}

// Rule 6: shutdown stops ready pods at once, starting pods once started.
#[tokio::test(start_paused = true)]
async fn shutdown_stops_every_pod_including_starting_ones() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let ready = spawn_get(&cache, IMAGE, defaults());
    settle().await;
    let ready_pod = fake.finish_ok();
    let lease = ready.await.expect("task").expect("lease");
    let waiting = spawn_get(&cache, OTHER, defaults());
    settle().await;

    let shutdown = {
        let cache = cache.clone();
        tokio::spawn(async move { cache.shutdown().await })
    };
    settle().await;
    let err = waiting.await.expect("task").expect_err("shutting down");
    assert!(matches!(err, CacheError::ShuttingDown), "{err:?}");
    assert_eq!(fake.stops(), vec![ready_pod.clone()]);
    assert!(!shutdown.is_finished(), "waits for the starting pod");

    let starting_pod = fake.finish_ok();
    shutdown.await.expect("shutdown");
    assert_eq!(fake.stops(), vec![ready_pod, starting_pod]);
    let err = cache.get(IMAGE, defaults()).await.expect_err("shut down");
    assert!(matches!(err, CacheError::ShuttingDown), "{err:?}");
    cache.warm(vec![(IMAGE.to_string(), defaults())]).await;
    assert_eq!(fake.starts().len(), 2);
    drop(lease);
    let snap = cache.snapshot().await;
    assert!(snap.shutting_down);
    assert!(snap.images.iter().all(|i| i.pods.is_empty()));
}

// Dropping every handle ends the task after stopping the pods it owns.
#[tokio::test(start_paused = true)]
async fn dropping_every_handle_stops_owned_pods() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let lease = get(&cache, IMAGE, defaults()).await;
    let pod = lease.pod_id().clone();
    drop(cache);
    settle().await;
    assert_eq!(fake.stops(), vec![pod]);
    drop(lease);
}

#[tokio::test(start_paused = true)]
async fn warm_starts_one_pod_per_image_without_callers() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let failing = "example.com/broken:v1";
    cache
        .warm(vec![
            (IMAGE.to_string(), defaults()),
            (OTHER.to_string(), defaults()),
        ])
        .await;
    settle().await;
    fake.lock().fail_next = 1;
    cache.warm(vec![(failing.to_string(), defaults())]).await;
    settle().await;
    cache.warm(vec![(IMAGE.to_string(), defaults())]).await;
    settle().await;
    assert_eq!(fake.starts(), vec![IMAGE, OTHER, failing]);

    let snap = cache.snapshot().await;
    for image in [IMAGE, OTHER] {
        let entry = snap.image(image).expect("warmed");
        assert_eq!(entry.pods.len(), 1);
        assert_eq!(entry.pods[0].state, PodState::Ready);
        assert_eq!(entry.pods[0].load, 0);
        assert_eq!(entry.waiters, 0);
    }
    assert_eq!(snap.counters.pod_start_failures, 1);
    assert!(snap.image(failing).is_none_or(|i| i.pods.is_empty()));

    get(&cache, IMAGE, defaults()).await;
    let counters = cache.snapshot().await.counters;
    assert_eq!((counters.hits, counters.misses), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn leases_expose_the_pod() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let lease = get(&cache, IMAGE, defaults()).await;
    assert_eq!(lease.endpoint(), "http://127.0.0.1:1");
    assert_eq!(lease.pod_id(), &id("pod-1"));
    assert_eq!(lease.image(), IMAGE);
    let _channel = lease.channel();
    assert!(format!("{lease:?}").contains("pod-1"));
}

/// Rough throughput of warm hand-outs (run with `--ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn warm_lease_throughput() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    drop(get(&cache, IMAGE, defaults()).await);
    let per_task = 50_000;
    let tasks = 8;
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    drop(cache.get(IMAGE, defaults()).await.expect("lease"));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    let elapsed = started.elapsed();
    let total = per_task * tasks;
    println!(
        "{total} leases in {elapsed:?}: {:.0}/s",
        f64::from(total) / elapsed.as_secs_f64()
    );
}

/// #30 item 2: `max_pods` bounds the pods of all functions together: at
/// the limit the least recently used idle pod makes room; with none idle a
/// call is refused (RESOURCE_EXHAUSTED, naming `--max-pods`), and no pod
/// starts.
#[tokio::test(start_paused = true)]
async fn max_pods_stops_the_least_recently_used_idle_pod_and_refuses_when_all_are_busy() {
    let fake = Fake::auto();
    let settings = CacheSettings {
        max_pods: 2,
        ..CacheSettings::default()
    };
    let cache = cache(&fake, settings);
    let a = get(&cache, "example.com/a:v1", defaults()).await;
    let a_id = a.pod_id().clone();
    drop(a);
    settle().await;
    let b = get(&cache, "example.com/b:v1", defaults()).await;
    let b_id = b.pod_id().clone();
    drop(b);
    settle().await;
    // a was used first, and again after b: b is the least recently used.
    drop(get(&cache, "example.com/a:v1", defaults()).await);
    settle().await;
    let c = get(&cache, "example.com/c:v1", defaults()).await;
    settle().await;
    assert_eq!(fake.stops(), vec![b_id.clone()], "b made room");
    assert_ne!(c.pod_id(), &a_id);
    // Both pods busy: no room.
    let a = get(&cache, "example.com/a:v1", defaults()).await;
    let err = cache
        .get("example.com/d:v1", defaults())
        .await
        .expect_err("no room");
    assert!(matches!(err, CacheError::Full { max: 2, .. }), "{err}");
    assert!(err.to_string().contains("--max-pods"), "{err}");
    assert_eq!(fake.starts().len(), 3, "no pod started for d");
    assert!(cache.snapshot().await.image("example.com/d:v1").is_none());
    // Warming does not make room either.
    cache
        .warm(vec![("example.com/e:v1".to_string(), defaults())])
        .await;
    settle().await;
    assert_eq!(fake.starts().len(), 3);
    // A function with pods of its own queues on them at the limit, though
    // its waitlists are full and it may have more pods: the length is only
    // preferred.
    let more = PodRequestSettings {
        max_parallel_pods: Some(4),
        max_queue_length: Some(1),
        ..defaults()
    };
    let queued = get(&cache, "example.com/a:v1", more.clone()).await;
    assert_eq!(queued.pod_id(), a.pod_id());
    assert_eq!(fake.starts().len(), 3);
    drop((a, c, queued));
    settle().await;
    // A name the backend knows it cannot run costs no idle pod its place.
    let err = cache
        .get("unknown.example/f:v1", defaults())
        .await
        .expect_err("unknown");
    assert!(matches!(err, CacheError::PodStart { .. }), "{err}");
    assert_eq!(fake.stops().len(), 1, "nothing made room for it");
    cache.shutdown().await;
}

mod single_use;
