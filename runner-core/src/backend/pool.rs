//! Idle pools kept by the runner itself, for the backends whose pods only
//! this runner uses (`process`, `docker`): seed 003's idle pool pattern
//! without a Deployment controller.
//!
//! [`Pooled`] wraps such a backend. For every pooled function (podExecutor
//! `idlePods: N`) it keeps N pods started, Ready and unclaimed. A start of
//! a pooled function's pod *claims* one: an idle pod at once (the claim is
//! a hit), or the next one to become Ready (a miss; never longer than the
//! start's ready timeout). Each claim starts a replacement in the
//! background, so the pool is back to N while the claimed pod serves. A
//! claimed pod is the caller's alone from then on and never returns to the
//! pool: single-use pods are stopped after their call by the cache, others
//! join the cache with its TTL.
//!
//! Pool starts that fail are retried with a backoff (1 s doubling to a
//! minute), and the first claim waiting gets the error, so a function that
//! cannot start fails its calls at once instead of at the ready timeout.
//! An idle pod that dies is replaced. Pools not wanted any more
//! ([`Backend::set_pools`]) stop their idle pods; a pool whose pod settings
//! changed replaces them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::metrics::PoolMetrics;
use super::{cause, Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, Retire, StopReason};

/// The first retry of a pool whose start failed; it doubles up to
/// [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MOST_BACKOFF: Duration = Duration::from_secs(60);

/// A backend with idle pools in front of it.
pub struct Pooled {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Arc<dyn Backend>,
    state: Mutex<State>,
    metrics: PoolMetrics,
    /// Pool starts and stops under way: close waits for them.
    tasks: tokio_util::task::TaskTracker,
    /// Where events of pods the cache holds go.
    events: std::sync::OnceLock<mpsc::UnboundedSender<PodEvent>>,
    /// Cancelled by close: the retries waiting for their backoff end.
    closing: tokio_util::sync::CancellationToken,
}

#[derive(Default)]
struct State {
    pools: HashMap<String, Pool>,
    /// Idle pods, by id: the pool whose pod it is.
    idle_ids: HashMap<PodId, String>,
    /// Pods reported failed that are not idle, while pool starts are under
    /// way: the event of a pod that died at once can overtake its start's
    /// answer, and such a pod must not join its pool.
    lost_early: std::collections::HashSet<PodId>,
    closed: bool,
}

type Claim = oneshot::Sender<Result<ReadyPod, BackendError>>;

struct Pool {
    /// What its pods are started from (`idle_pods` is cleared: a pool's
    /// own starts make pods).
    spec: PodSpec,
    /// Idle pods wanted.
    want: usize,
    idle: VecDeque<ReadyPod>,
    starting: usize,
    /// Claims waiting for the next pod, oldest first.
    claims: VecDeque<Claim>,
    /// Starts that failed in a row, and when the pool may start again.
    failures: u32,
    retry_at: Option<Instant>,
    /// A retry is scheduled.
    timer: bool,
    /// Bumped when the pod settings change: pods of an older one that
    /// become ready are stopped, not pooled.
    generation: u64,
}

/// What makes two pools' pods alike: all but the timing of `PodSpec`.
fn same_pods(a: &PodSpec, b: &PodSpec) -> bool {
    a.image == b.image
        && a.overrides == b.overrides
        && a.prespawn == b.prespawn
        && a.pids_limit == b.pids_limit
        && a.single_use == b.single_use
}

impl Pool {
    fn new(spec: &PodSpec) -> Self {
        Pool {
            spec: PodSpec {
                idle_pods: 0,
                ..spec.clone()
            },
            want: spec.idle_pods as usize,
            idle: VecDeque::new(),
            starting: 0,
            claims: VecDeque::new(),
            failures: 0,
            retry_at: None,
            timer: false,
            generation: 0,
        }
    }

    fn live_claims(&mut self) -> usize {
        self.claims.retain(|claim| !claim.is_closed());
        self.claims.len()
    }

    /// Nothing in it, and nothing wanted of it.
    fn is_spent(&self) -> bool {
        self.want == 0 && self.idle.is_empty() && self.starting == 0 && self.claims.is_empty()
    }
}

impl Pooled {
    /// `inner` with idle pools in front of it; their figures go to
    /// `metrics` ([`Backend::pool_metrics`] hands them to the runner).
    pub fn new(inner: Arc<dyn Backend>, metrics: PoolMetrics) -> Self {
        Pooled {
            shared: Arc::new(Shared {
                inner,
                state: Mutex::new(State::default()),
                metrics,
                tasks: tokio_util::task::TaskTracker::new(),
                events: std::sync::OnceLock::new(),
                closing: tokio_util::sync::CancellationToken::new(),
            }),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pool's key: the image whose pods serve `image`.
    fn key(&self, image: &str) -> String {
        self.inner
            .pod_key(image)
            .unwrap_or_else(|| image.to_string())
    }

    fn publish(&self, key: &str, pool: &Pool) {
        self.metrics.set(key, pool.want, pool.idle.len());
    }

    /// Starts what the pool lacks: one pod per idle pod missing and per
    /// claim with no start under way for it; while backing off after a
    /// failure, only those the claims wait for.
    fn refill(self: &Arc<Self>, state: &mut State, key: &str) {
        if state.closed {
            return;
        }
        let Some(pool) = state.pools.get_mut(key) else {
            return;
        };
        let claims = pool.live_claims();
        let backing_off = pool.retry_at.is_some_and(|at| at > Instant::now());
        let wanted = if backing_off {
            claims
        } else {
            pool.want + claims
        };
        let need = wanted.saturating_sub(pool.idle.len() + pool.starting);
        for _ in 0..need {
            pool.starting += 1;
            self.spawn_start(key.to_string(), pool.spec.clone(), pool.generation);
        }
        if backing_off && !pool.timer && pool.want > pool.idle.len() + pool.starting {
            pool.timer = true;
            let at = pool.retry_at.unwrap_or_else(Instant::now);
            let shared = Arc::downgrade(self);
            let key = key.to_string();
            let closing = self.closing.clone();
            self.tasks.spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = closing.cancelled() => return,
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                let mut state = shared.lock();
                if let Some(pool) = state.pools.get_mut(&key) {
                    pool.timer = false;
                }
                shared.refill(&mut state, &key);
            });
        }
        if let Some(pool) = state.pools.get(key) {
            self.publish(key, pool);
        }
    }

    fn spawn_start(self: &Arc<Self>, key: String, spec: PodSpec, generation: u64) {
        let shared = Arc::downgrade(self);
        let start = self.inner.start(spec);
        self.tasks.spawn(async move {
            let began = Instant::now();
            let result = start.await;
            if let Some(shared) = shared.upgrade() {
                shared.started(&key, generation, result, began.elapsed());
            } else if let Ok(pod) = result {
                // The runner is gone without a close: nothing can stop it
                // later either.
                tracing::warn!(pod = %pod.id, "a pool pod started after its backend went");
            }
        });
    }

    fn spawn_stop(&self, id: PodId, reason: StopReason) {
        let stop = self.inner.stop(id.clone(), reason);
        self.tasks.spawn(async move {
            if let Err(error) = stop.await {
                tracing::warn!(pod = %id, %error, "stopping an idle pool pod failed");
            }
        });
    }

    /// A pool start answered.
    fn started(
        self: &Arc<Self>,
        key: &str,
        generation: u64,
        result: Result<ReadyPod, BackendError>,
        took: Duration,
    ) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let closed = state.closed;
        let Some(pool) = state.pools.get_mut(key) else {
            if let Ok(pod) = result {
                let why = if closed {
                    Retire::Shutdown
                } else {
                    Retire::PoolShrunk
                };
                self.spawn_stop(pod.id, StopReason::Idle(why));
            }
            return;
        };
        pool.starting = pool.starting.saturating_sub(1);
        let lost = matches!(&result, Ok(pod) if state.lost_early.remove(&pod.id));
        match result {
            Ok(pod) if closed => {
                self.spawn_stop(pod.id, StopReason::Idle(Retire::Shutdown));
            }
            Ok(pod) if lost => {
                tracing::warn!(image = key, pod = %pod.id, "an idle pool pod failed as it started; replacing it");
                self.spawn_stop(pod.id, StopReason::Broken);
            }
            Ok(pod) if pool.generation != generation => {
                self.spawn_stop(pod.id, StopReason::Idle(Retire::TemplateChanged));
            }
            Ok(pod) => {
                pool.failures = 0;
                pool.retry_at = None;
                self.metrics.replaced(took);
                tracing::info!(image = key, pod = %pod.id, ms = took.as_millis() as u64, "idle pool pod ready");
                let mut pod = Some(pod);
                while let Some(claim) = pool.claims.pop_front() {
                    let Some(ready) = pod.take() else { break };
                    match claim.send(Ok(ready)) {
                        Ok(()) => break,
                        // That claim gave up: the next one, or the pool.
                        Err(back) => pod = back.ok(),
                    }
                }
                if let Some(pod) = pod {
                    if pool.idle.len() < pool.want {
                        state.idle_ids.insert(pod.id.clone(), key.to_string());
                        pool.idle.push_back(pod);
                    } else {
                        self.spawn_stop(pod.id, StopReason::Idle(Retire::PoolShrunk));
                    }
                }
            }
            Err(error) => {
                pool.failures += 1;
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << pool.failures.min(7).saturating_sub(1))
                    .min(MOST_BACKOFF);
                pool.retry_at = Some(Instant::now() + backoff);
                tracing::warn!(image = key, %error, retry_in = ?backoff, "starting an idle pool pod failed");
                // The oldest claim waiting learns why at once.
                while let Some(claim) = pool.claims.pop_front() {
                    if claim.send(Err(error.clone())).is_ok() {
                        break;
                    }
                }
            }
        }
        self.refill(state, key);
        if state.pools.get(key).is_some_and(Pool::is_spent) {
            state.pools.remove(key);
            self.metrics.remove(key);
        }
        if state.pools.values().all(|pool| pool.starting == 0) {
            state.lost_early.clear();
        }
    }

    /// Claims a pod of the pool of `spec.image`, made with `spec`'s size if
    /// there is none yet.
    async fn claim(self: Arc<Self>, spec: PodSpec) -> Result<ReadyPod, BackendError> {
        let key = self.key(&spec.image);
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.lock();
            if state.closed {
                return Err(BackendError::StartFailed {
                    image: spec.image,
                    source: cause("the runner shuts down"),
                });
            }
            let pool = state
                .pools
                .entry(key.clone())
                .or_insert_with(|| Pool::new(&spec));
            let pod = pool.idle.pop_front();
            self.metrics.claimed(&key);
            if pod.is_none() {
                self.metrics.missed(&key);
            }
            match pod {
                Some(pod) => {
                    state.idle_ids.remove(&pod.id);
                    tracing::debug!(image = %key, pod = %pod.id, "claimed an idle pool pod");
                    self.refill(&mut state, &key);
                    return Ok(pod);
                }
                None => {
                    pool.claims.push_back(tx);
                    self.refill(&mut state, &key);
                }
            }
        }
        let mut rx = rx;
        tokio::select! {
            answer = &mut rx => match answer {
                Ok(answer) => answer,
                Err(_) => Err(BackendError::StartFailed {
                    image: spec.image,
                    source: cause("the idle pool went away"),
                }),
            },
            () = tokio::time::sleep(spec.ready_timeout) => {
                // A pod sent at the last moment is this claim's to stop.
                rx.close();
                if let Ok(Ok(pod)) = rx.try_recv() {
                    self.spawn_stop(pod.id, StopReason::Idle(Retire::GivenUp));
                }
                Err(BackendError::ReadyTimeout {
                    image: spec.image,
                    timeout: spec.ready_timeout,
                    detail: "its idle pool was empty and no pod of it became ready".into(),
                })
            }
        }
    }

    fn set_pools(self: &Arc<Self>, pools: Vec<PodSpec>) {
        let mut wanted: HashMap<String, PodSpec> = HashMap::new();
        for spec in pools.into_iter().filter(|spec| spec.idle_pods > 0) {
            wanted.insert(self.key(&spec.image), spec);
        }
        let mut state = self.lock();
        if state.closed {
            return;
        }
        let keys: Vec<String> = state.pools.keys().cloned().collect();
        for key in keys {
            if !wanted.contains_key(&key) {
                self.resize(&mut state, &key, 0, Retire::PoolShrunk);
            }
        }
        for (key, spec) in wanted {
            let pool = state
                .pools
                .entry(key.clone())
                .or_insert_with(|| Pool::new(&spec));
            if !same_pods(&pool.spec, &spec) {
                pool.generation += 1;
                pool.spec = PodSpec {
                    idle_pods: 0,
                    ..spec.clone()
                };
                pool.failures = 0;
                pool.retry_at = None;
                self.resize(&mut state, &key, 0, Retire::TemplateChanged);
            }
            self.resize(
                &mut state,
                &key,
                spec.idle_pods as usize,
                Retire::PoolShrunk,
            );
            self.refill(&mut state, &key);
        }
        let spent: Vec<String> = state
            .pools
            .iter()
            .filter(|(_, pool)| pool.is_spent())
            .map(|(key, _)| key.clone())
            .collect();
        for key in spent {
            state.pools.remove(&key);
            self.metrics.remove(&key);
        }
    }

    /// Sets the pool's size, stopping idle pods beyond it.
    fn resize(&self, state: &mut State, key: &str, want: usize, why: Retire) {
        let Some(pool) = state.pools.get_mut(key) else {
            return;
        };
        pool.want = want;
        let extra: Vec<ReadyPod> = pool.idle.drain(want.min(pool.idle.len())..).collect();
        self.publish(key, pool);
        for pod in extra {
            state.idle_ids.remove(&pod.id);
            tracing::info!(image = key, pod = %pod.id, why = StopReason::Idle(why).describe(), "stopping an idle pool pod");
            self.spawn_stop(pod.id, StopReason::Idle(why));
        }
    }

    /// An event of the inner backend: an idle pod's is the pool's (it is
    /// replaced); every other goes to the cache.
    fn on_event(self: &Arc<Self>, event: PodEvent) {
        let (id, reason, why) = match &event {
            PodEvent::Failed { id, reason } => (id, reason.as_str(), StopReason::Broken),
            PodEvent::Stale { id, why } => (
                id,
                StopReason::Idle(*why).describe(),
                StopReason::Idle(*why),
            ),
        };
        let mut state = self.lock();
        let Some(key) = state.idle_ids.remove(id) else {
            let starting = state.pools.values().any(|pool| pool.starting > 0);
            if starting && matches!(event, PodEvent::Failed { .. }) && state.lost_early.len() < 1024
            {
                state.lost_early.insert(id.clone());
            }
            drop(state);
            if let Some(events) = self.events.get() {
                let _ = events.send(event);
            }
            return;
        };
        if let Some(pool) = state.pools.get_mut(&key) {
            pool.idle.retain(|pod| &pod.id != id);
        }
        tracing::warn!(image = %key, pod = %id, reason, "an idle pool pod is lost; replacing it");
        self.spawn_stop(id.clone(), why);
        self.refill(&mut state, &key);
    }
}

/// Forwards the inner backend's events through the pools, while they last.
async fn forward(shared: Weak<Shared>, mut events: mpsc::UnboundedReceiver<PodEvent>) {
    while let Some(event) = events.recv().await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.on_event(event);
    }
}

impl Backend for Pooled {
    fn name(&self) -> &'static str {
        self.shared.inner.name()
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        if spec.idle_pods == 0 {
            return self.shared.inner.start(spec);
        }
        Box::pin(Arc::clone(&self.shared).claim(spec))
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        self.shared.inner.stop(id, reason)
    }

    fn reused(&self, id: &PodId, ttl: Duration) {
        self.shared.inner.reused(id, ttl)
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.shared.events.set(events);
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.inner.set_events(tx);
        tokio::spawn(forward(Arc::downgrade(&self.shared), rx));
    }

    /// Stops the idle pods, fails the claims waiting, waits for the pool
    /// starts under way (their pods are stopped), then closes the backend.
    fn close(&self) -> BoxFuture<'static, ()> {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            shared.closing.cancel();
            let claims = {
                let mut state = shared.lock();
                state.closed = true;
                state.idle_ids.clear();
                let mut claims = Vec::new();
                let pools: Vec<(String, Pool)> = state.pools.drain().collect();
                for (key, mut pool) in pools {
                    for pod in pool.idle.drain(..) {
                        shared.spawn_stop(pod.id, StopReason::Idle(Retire::Shutdown));
                    }
                    claims.extend(pool.claims.drain(..).map(|claim| (key.clone(), claim)));
                    shared.metrics.remove(&key);
                }
                claims
            };
            for (image, claim) in claims {
                let _ = claim.send(Err(BackendError::StartFailed {
                    image,
                    source: cause("the runner shuts down"),
                }));
            }
            shared.tasks.close();
            shared.tasks.wait().await;
            shared.inner.close().await;
        })
    }

    fn pod_key(&self, image: &str) -> Option<String> {
        self.shared.inner.pod_key(image)
    }

    fn check(&self, image: &str) -> Result<(), BackendError> {
        self.shared.inner.check(image)
    }

    fn ready(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.shared.inner.ready()
    }

    fn set_pools(&self, pools: Vec<PodSpec>) {
        self.shared.set_pools(pools);
    }

    fn close_within(&self) -> Duration {
        self.shared.inner.close_within()
    }

    fn pool_metrics(&self) -> Option<PoolMetrics> {
        Some(self.shared.metrics.clone())
    }
}

#[cfg(test)]
mod tests;
