//! The runner's own idle pools against a fake backend, in paused time.

use std::sync::Mutex;

use futures::future::{self, FutureExt};

use super::*;

/// Starts answer when the test says so (`finish`), in order; stops are
/// recorded.
#[derive(Default)]
struct Fake {
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    next: usize,
    pending: VecDeque<oneshot::Sender<Result<ReadyPod, BackendError>>>,
    specs: Vec<PodSpec>,
    stops: Vec<(PodId, StopReason)>,
    events: Option<mpsc::UnboundedSender<PodEvent>>,
    closed: bool,
}

impl Fake {
    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().expect("fake poisoned")
    }

    /// Answers the oldest start with a new pod; its id.
    fn finish(&self) -> PodId {
        let mut state = self.lock();
        state.next += 1;
        let id = PodId(format!("pod-{}", state.next));
        let tx = state.pending.pop_front().expect("a start waits");
        let _ = tx.send(Ok(ReadyPod {
            id: id.clone(),
            endpoint: "http://127.0.0.1:1".into(),
        }));
        id
    }

    fn fail(&self) {
        let tx = self.lock().pending.pop_front().expect("a start waits");
        let _ = tx.send(Err(BackendError::StartFailed {
            image: IMAGE.into(),
            source: cause("no such image"),
        }));
    }

    fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    fn stops(&self) -> Vec<(PodId, StopReason)> {
        self.lock().stops.clone()
    }
}

impl Backend for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        state.specs.push(spec);
        state.pending.push_back(tx);
        async move {
            rx.await.unwrap_or_else(|_| {
                Err(BackendError::StartFailed {
                    image: IMAGE.into(),
                    source: cause("dropped"),
                })
            })
        }
        .boxed()
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        self.lock().stops.push((id, reason));
        future::ready(Ok(())).boxed()
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        self.lock().events = Some(events);
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        self.lock().closed = true;
        future::ready(()).boxed()
    }
}

const IMAGE: &str = "example.com/fns/secret-fn:v1";

fn pool_of(n: u32) -> PodSpec {
    PodSpec {
        idle_pods: n,
        single_use: true,
        ..PodSpec::new(IMAGE, Duration::from_secs(60))
    }
}

fn pooled() -> (
    Arc<Fake>,
    Pooled,
    mpsc::UnboundedReceiver<PodEvent>,
    PoolMetrics,
) {
    let fake = Arc::new(Fake::default());
    let metrics = PoolMetrics::default();
    let pooled = Pooled::new(Arc::clone(&fake) as Arc<dyn Backend>, metrics.clone());
    let (tx, rx) = mpsc::unbounded_channel();
    pooled.set_events(tx);
    (fake, pooled, rx, metrics)
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Closes the pools, answering the starts still under way (close waits for
/// them: a backend's start ends within its ready timeout); the ids of the
/// pods they made.
async fn close(fake: &Fake, pooled: &Pooled) -> Vec<PodId> {
    let closing = pooled.close();
    let mut late = Vec::new();
    while fake.pending() > 0 {
        late.push(fake.finish());
    }
    closing.await;
    late
}

#[tokio::test(start_paused = true)]
async fn claims_take_idle_pods_at_once_and_each_is_replaced() {
    let (fake, pooled, _events, metrics) = pooled();
    pooled.set_pools(vec![pool_of(2)]);
    settle().await;
    assert_eq!(fake.pending(), 2, "two idle pods start before any call");
    assert!(fake
        .lock()
        .specs
        .iter()
        .all(|s| s.idle_pods == 0 && s.single_use));
    let (a, b) = (fake.finish(), fake.finish());
    settle().await;
    let first = pooled.start(pool_of(2)).await.expect("a pod");
    assert_eq!(first.id, a, "the oldest idle pod");
    settle().await;
    assert_eq!(fake.pending(), 1, "its replacement starts at once");
    let second = pooled.start(pool_of(2)).await.expect("a pod");
    assert_eq!(second.id, b);
    settle().await;
    assert_eq!(fake.pending(), 2);
    assert_eq!(metrics.claims_of(IMAGE), (2, 0));
    // The pool empty: a claim waits for the next pod to become Ready.
    let waiting = tokio::spawn(pooled.start(pool_of(2)));
    settle().await;
    assert_eq!(fake.pending(), 3, "one more for the claim waiting");
    let c = fake.finish();
    assert_eq!(waiting.await.expect("task").expect("a pod").id, c);
    assert_eq!(metrics.claims_of(IMAGE), (3, 1));
    assert!(
        fake.stops().is_empty(),
        "claimed pods are the cache's to stop"
    );
    let late = close(&fake, &pooled).await;
    assert_eq!(late.len(), 2, "the two replacements under way");
    let stopped: Vec<PodId> = fake.stops().into_iter().map(|(id, _)| id).collect();
    assert_eq!(stopped, late, "pods that start after the close are stopped");
    assert!(fake.lock().closed);
}

#[tokio::test(start_paused = true)]
async fn a_claim_waits_no_longer_than_the_ready_timeout() {
    let (fake, pooled, _events, metrics) = pooled();
    let spec = PodSpec {
        ready_timeout: Duration::from_secs(5),
        ..pool_of(1)
    };
    let err = pooled.start(spec).await.expect_err("nothing became ready");
    assert!(err.to_string().contains("its idle pool was empty"), "{err}");
    assert_eq!(metrics.claims_of(IMAGE), (1, 1));
    // The pod that was starting for it joins the pool when ready.
    let late = fake.finish();
    settle().await;
    assert_eq!(pooled.start(pool_of(1)).await.expect("a pod").id, late);
    let _ = fake.finish();
    close(&fake, &pooled).await;
    assert_eq!(
        fake.stops()
            .into_iter()
            .map(|(_, why)| why)
            .collect::<Vec<_>>(),
        vec![StopReason::Idle(Retire::Shutdown)],
        "the idle pod goes with the runner"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_start_fails_the_claim_waiting_and_backs_off() {
    let (fake, pooled, _events, _metrics) = pooled();
    pooled.set_pools(vec![pool_of(1)]);
    settle().await;
    let waiting = tokio::spawn(pooled.start(pool_of(1)));
    settle().await;
    assert_eq!(fake.pending(), 2, "the pool's pod and the claim's");
    fake.fail();
    let err = waiting.await.expect("task").expect_err("the start failed");
    assert!(err.to_string().contains("no such image"), "{err}");
    settle().await;
    fake.fail();
    settle().await;
    assert_eq!(fake.pending(), 0, "no retry at once");
    tokio::time::sleep(FIRST_BACKOFF * 2).await;
    settle().await;
    assert_eq!(fake.pending(), 1, "the pool retries after its backoff");
    let id = fake.finish();
    settle().await;
    assert_eq!(pooled.start(pool_of(1)).await.expect("a pod").id, id);
    let _ = fake.finish();
    close(&fake, &pooled).await;
}

#[tokio::test(start_paused = true)]
async fn pools_resize_change_and_go_with_the_functionconfigs() {
    let (fake, pooled, _events, metrics) = pooled();
    pooled.set_pools(vec![pool_of(3)]);
    settle().await;
    let pods: Vec<PodId> = (0..3).map(|_| fake.finish()).collect();
    settle().await;
    pooled.set_pools(vec![pool_of(1)]);
    settle().await;
    let stopped: Vec<PodId> = fake.stops().into_iter().map(|(id, _)| id).collect();
    assert_eq!(stopped, pods[1..].to_vec(), "the pool shrank to one");
    assert!(fake
        .stops()
        .iter()
        .all(|(_, why)| *why == StopReason::Idle(Retire::PoolShrunk)));
    // Other pod settings: the idle pod is replaced by one of them.
    let changed = PodSpec {
        prespawn: Some(2),
        ..pool_of(1)
    };
    pooled.set_pools(vec![changed]);
    settle().await;
    assert_eq!(
        fake.stops().last(),
        Some(&(pods[0].clone(), StopReason::Idle(Retire::TemplateChanged)))
    );
    assert_eq!(fake.pending(), 1);
    assert_eq!(fake.lock().specs.last().and_then(|s| s.prespawn), Some(2));
    let _ = fake.finish();
    settle().await;
    // No FunctionConfig wants it any more: its idle pod stops, and the
    // pool is gone (a later claim would make one of its own size).
    pooled.set_pools(Vec::new());
    settle().await;
    assert_eq!(fake.stops().len(), 4);
    assert!(pooled.shared.lock().pools.is_empty());
    drop(metrics);
    close(&fake, &pooled).await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_pod_that_dies_is_replaced_and_other_events_reach_the_cache() {
    let (fake, pooled, mut events, _metrics) = pooled();
    pooled.set_pools(vec![pool_of(1)]);
    settle().await;
    let idle = fake.finish();
    settle().await;
    let inner = fake.lock().events.clone().expect("events set");
    inner
        .send(PodEvent::Failed {
            id: idle.clone(),
            reason: "killed".into(),
        })
        .expect("pool listens");
    settle().await;
    assert_eq!(fake.stops(), vec![(idle, StopReason::Broken)]);
    assert_eq!(fake.pending(), 1, "a replacement starts");
    let other = PodEvent::Failed {
        id: PodId("held-by-the-cache".into()),
        reason: "killed".into(),
    };
    inner.send(other.clone()).expect("pool listens");
    settle().await;
    assert_eq!(events.try_recv().ok(), Some(other));
    let _ = fake.finish();
    close(&fake, &pooled).await;
}

#[tokio::test(start_paused = true)]
async fn a_start_without_a_pool_goes_straight_to_the_backend() {
    let (fake, pooled, _events, metrics) = pooled();
    let start = tokio::spawn(pooled.start(PodSpec::new(IMAGE, Duration::from_secs(60))));
    settle().await;
    let id = fake.finish();
    assert_eq!(start.await.expect("task").expect("a pod").id, id);
    assert_eq!(metrics.claims_of(IMAGE), (0, 0));
    assert!(pooled.shared.lock().pools.is_empty());
    close(&fake, &pooled).await;
}

#[tokio::test(start_paused = true)]
async fn close_does_not_wait_out_a_backoff() {
    let (fake, pooled, _events, _metrics) = pooled();
    pooled.set_pools(vec![pool_of(1)]);
    settle().await;
    for _ in 0..5 {
        fake.fail();
        tokio::time::sleep(MOST_BACKOFF).await;
    }
    settle().await;
    fake.fail();
    settle().await;
    assert_eq!(fake.pending(), 0, "backing off");
    let began = Instant::now();
    close(&fake, &pooled).await;
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "close waited {:?} for a retry",
        began.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_reported_failed_before_its_start_answered_never_joins_the_pool() {
    let (fake, pooled, mut events, _metrics) = pooled();
    pooled.set_pools(vec![pool_of(1)]);
    settle().await;
    // The fake names its pods pod-1, pod-2, ...: pod-1 dies at once, its
    // event ahead of its start's answer.
    let inner = fake.lock().events.clone().expect("events set");
    let failed = PodEvent::Failed {
        id: PodId("pod-1".into()),
        reason: "exited".into(),
    };
    inner.send(failed.clone()).expect("pool listens");
    settle().await;
    assert_eq!(
        events.try_recv().ok(),
        Some(failed),
        "the cache hears of it too"
    );
    let dead = fake.finish();
    settle().await;
    assert_eq!(fake.stops(), vec![(dead, StopReason::Broken)]);
    assert_eq!(fake.pending(), 1, "replaced");
    let next = fake.finish();
    settle().await;
    assert_eq!(pooled.start(pool_of(1)).await.expect("a pod").id, next);
    close(&fake, &pooled).await;
}
