//! The pod cache: one task that decides which pod serves a call for a
//! function image, and when pods are started and deleted.
//!
//! [`PodCache`] is a cloneable handle on an actor. The actor is a single tokio
//! task that owns every piece of state (per image: its pods, their load, the
//! callers waiting for a pod to start) and reacts, in one biased `select!`, to
//! the GC tick, start/stop completions of the backend tasks it spawned, pod
//! events from the backend, lease releases and requests. There is no mutex:
//! every decision is made by that one task, in arrival order. Backend calls
//! run in spawned tasks, so the actor never waits on I/O.
//!
//! # Scheduling (per image)
//!
//! The *load* of a pod is the number of leases handed out on it and not yet
//! dropped (ready pod), or the number of live callers waiting for it (starting
//! pod). With `queue` = the per-pod waitlist length and `max` = the most pods
//! the function may have (pods still starting count), a `get` is served by
//! the first rule that applies:
//!
//! 1. the least-loaded *ready* pod whose load is below `queue` (ties: round
//!    robin) hands out a lease at once (a *hit*);
//! 2. else the least-loaded *starting* pod whose load is below `queue`: the
//!    caller waits for it (a *miss*);
//! 3. else, with fewer than `max` pods, waiters that went away are dropped
//!    first (that may free a starting pod, see 2); otherwise a new pod is
//!    started and the caller waits for that very pod (a *miss*);
//! 4. else (at the limit, the length is only "preferred", as in Porch) the
//!    least-loaded pod of all takes the caller anyway; ties prefer a ready
//!    pod, then round robin.
//!
//! When a start finishes, every waiter still listening gets a lease on the
//! pod, or every one of them gets the same error; a failed pod is forgotten,
//! so the next `get` starts again. A waiter whose caller gave up holds no
//! load: it is skipped at hand-out and pruned before another pod is started.
//!
//! # Lifetime of a pod
//!
//! Each hand-out extends the pod's expiry to `now + ttl` (never shortens it).
//! Every `scan_interval` the GC deletes ready pods that expired and have no
//! lease out; a pod with a call in flight is never deleted. Failed pods never
//! wait for the GC: a [`PodEvent::Failed`] or an [`PodCache::evict`] removes
//! the pod at once and stops it; leases still held on it release harmlessly.
//! The cache only ever knows and deletes the pods it started itself.
//!
//! A start the backend does not answer within `ready_timeout` plus a grace
//! period fails its waiters; if the backend answers later after all, that
//! pod is stopped. On [`PodCache::shutdown`] (or once every handle is
//! dropped) ready pods are stopped at once and pods still starting are
//! stopped as soon as their start completes; `shutdown` resolves when all
//! those stops are done.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};
use tonic::transport::Endpoint;

use runner_core::backend::{
    Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, Retire, StopReason,
};

use image::{Choice, ImageEntry, Pod, Slot};

mod error;
mod image;
mod lease;
mod room;
mod settings;
mod snapshot;

pub use error::CacheError;
use image::deadline;
pub use lease::PodLease;
use lease::{PodShared, Reply};
pub use settings::{CacheSettings, PodRequestSettings, DEFAULT_MAX_PODS};
pub use snapshot::{CacheCounters, CacheSnapshot, ImageSnapshot, PodSnapshot, PodState};

#[cfg(test)]
mod tests;

/// A start task that ended without reporting (it panicked or was aborted).
#[derive(Debug, thiserror::Error)]
#[error("the start task ended without an answer")]
struct StartLost;

/// A backend named a pod endpoint that is not a URI.
#[derive(Debug, thiserror::Error)]
#[error("pod {pod} has an invalid endpoint {endpoint:?}: {source}")]
struct InvalidEndpoint {
    pod: PodId,
    endpoint: String,
    #[source]
    source: tonic::transport::Error,
}

/// Requests buffered between handles and the actor before `get` waits.
const REQUEST_QUEUE: usize = 1024;
/// How much longer than `ready_timeout` the cache waits for a backend's own
/// answer before it gives up on a start (the backend's typed error is better).
const START_GRACE: Duration = Duration::from_secs(5);
/// TCP connect timeout of the per-pod channel; a dead pod then answers
/// UNAVAILABLE quickly and the caller evicts it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

enum Command {
    Get {
        image: Box<str>,
        overrides: PodRequestSettings,
        reply: Reply,
        /// The caller's span: a pod started for this call is its child.
        span: tracing::Span,
    },
    Evict {
        id: PodId,
        done: oneshot::Sender<()>,
    },
    Warm {
        images: Vec<(String, PodRequestSettings)>,
        done: oneshot::Sender<()>,
    },
    Snapshot {
        reply: oneshot::Sender<CacheSnapshot>,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

/// Reports of the tasks the actor spawned.
enum Internal {
    /// The backend did not answer a start in time; its task keeps waiting
    /// for the answer and sends `StartDone` after this.
    StartTimedOut {
        image: Arc<str>,
        serial: u64,
        timeout: Duration,
    },
    /// Exactly one per start task, whatever happens to the task.
    StartDone {
        image: Arc<str>,
        serial: u64,
        result: Result<ReadyPod, BackendError>,
    },
    /// Exactly one per stop task.
    StopDone,
}

/// Handle on the pod cache task. Cheap to clone; the task ends once every
/// handle is dropped, after stopping the pods it owns.
#[derive(Clone)]
pub struct PodCache {
    requests: mpsc::Sender<Command>,
}

impl fmt::Debug for PodCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodCache").finish_non_exhaustive()
    }
}

impl PodCache {
    /// Starts the cache task on the current tokio runtime and hands the
    /// backend its event channel.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (like `tokio::spawn`).
    pub fn spawn(backend: Arc<dyn Backend>, settings: CacheSettings) -> PodCache {
        let (requests_tx, requests_rx) = mpsc::channel(REQUEST_QUEUE);
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (releases_tx, releases_rx) = mpsc::unbounded_channel();
        backend.set_events(events_tx);
        let actor = Actor {
            images: HashMap::new(),
            stale_starting: HashMap::new(),
            failed_starting: HashMap::new(),
            ctx: Ctx {
                backend,
                settings,
                internal_tx,
                releases_tx,
                counters: CacheCounters::default(),
                next_serial: 0,
                pending_starts: 0,
                pending_stops: 0,
                shutting_down: false,
            },
            shutdown_waiters: Vec::new(),
        };
        tokio::spawn(actor.run(requests_rx, internal_rx, events_rx, releases_rx));
        PodCache {
            requests: requests_tx,
        }
    }

    /// Resolves once a pod for `image` is ready and chosen for this caller.
    /// Cancel-safe: a caller that stops waiting holds no load.
    pub async fn get(
        &self,
        image: &str,
        overrides: PodRequestSettings,
    ) -> Result<PodLease, CacheError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Get {
            image: image.into(),
            overrides,
            reply,
            span: tracing::Span::current(),
        };
        self.requests
            .send(command)
            .await
            .map_err(|_| CacheError::ActorGone)?;
        answer.await.map_err(|_| CacheError::ActorGone)?
    }

    /// Removes a pod that answered UNAVAILABLE and stops it, so that the next
    /// `get` starts a fresh one. Unknown ids (evicted already, or not this
    /// cache's) are ignored. Resolves once the cache forgot the pod.
    pub async fn evict(&self, pod: &PodId) {
        let (done, finished) = oneshot::channel();
        let command = Command::Evict {
            id: pod.clone(),
            done,
        };
        if self.requests.send(command).await.is_ok() {
            let _ = finished.await;
        }
    }

    /// Starts one pod per image that has none, with no caller waiting.
    /// Resolves once the starts are issued; failures are logged.
    pub async fn warm(&self, images: Vec<(String, PodRequestSettings)>) {
        let (done, finished) = oneshot::channel();
        if self
            .requests
            .send(Command::Warm { images, done })
            .await
            .is_ok()
        {
            let _ = finished.await;
        }
    }

    /// The figures the metrics show, from [`PodCache::snapshot`].
    pub async fn figures(&self) -> crate::metrics::CacheFigures {
        let snap = self.snapshot().await;
        let mut figures = crate::metrics::CacheFigures {
            hits: snap.counters.hits,
            misses: snap.counters.misses,
            ..Default::default()
        };
        for pod in snap.images.iter().flat_map(|image| &image.pods) {
            match pod.state {
                PodState::Starting => figures.starting += 1,
                PodState::Ready => figures.ready += 1,
            }
        }
        figures
    }

    /// The cache's state (empty if the cache task is gone).
    pub async fn snapshot(&self) -> CacheSnapshot {
        let (reply, answer) = oneshot::channel();
        if self
            .requests
            .send(Command::Snapshot { reply })
            .await
            .is_err()
        {
            return CacheSnapshot::default();
        }
        answer.await.unwrap_or_default()
    }

    /// Stops every pod the cache owns (pods still starting once their start
    /// completes) and resolves when all stops are done. Waiters and later
    /// `get` calls get [`CacheError::ShuttingDown`].
    pub async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.requests.send(Command::Shutdown { done }).await.is_ok() {
            let _ = finished.await;
        }
    }
}
/// The actor's state besides the per-image table, so that both can be
/// borrowed at once.
struct Ctx {
    backend: Arc<dyn Backend>,
    settings: CacheSettings,
    internal_tx: mpsc::UnboundedSender<Internal>,
    releases_tx: mpsc::UnboundedSender<Arc<PodShared>>,
    counters: CacheCounters,
    next_serial: u64,
    /// Start tasks that have not sent `StartDone` yet.
    pending_starts: usize,
    /// Stop tasks that have not finished yet.
    pending_stops: usize,
    shutting_down: bool,
}

impl Ctx {
    /// Starts a pod in a task; returns the serial the new pod gets.
    fn spawn_start(
        &mut self,
        image: &Arc<str>,
        ttl: Duration,
        overrides: &PodRequestSettings,
        caller: &tracing::Span,
    ) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        self.pending_starts += 1;
        self.counters.pod_starts += 1;
        tracing::info!(image = %image, "starting a pod");
        let backend = Arc::clone(&self.backend);
        let spec = PodSpec {
            image: image.to_string(),
            ready_timeout: self.settings.ready_timeout,
            ttl,
            overrides: overrides.template_overrides.clone(),
            prespawn: overrides.prespawn,
            pids_limit: overrides.pids_limit,
            idle_pods: overrides.idle_pods,
            single_use: overrides.single_use,
        };
        let backstop = self.settings.ready_timeout.saturating_add(START_GRACE);
        let report = StartReport {
            tx: self.internal_tx.clone(),
            image: Arc::clone(image),
            serial,
            finished: false,
        };
        // The start, a child of the call that asked for it (the calls that
        // join its waitlist share it); a warm-up's is a trace of its own.
        let span = tracing::info_span!(
            target: "otel",
            parent: caller,
            "pod.start",
            image = %image,
            backend = backend.name(),
            pod = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        tokio::spawn(
            async move {
                let mut start = backend.start(spec);
                let result = tokio::select! {
                    result = &mut start => result,
                    () = tokio::time::sleep(backstop) => {
                        report.timed_out(backstop);
                        // Keep driving the start so that a late pod is stopped.
                        start.await
                    }
                };
                let span = tracing::Span::current();
                if !span.is_disabled() {
                    match &result {
                        Ok(ready) => span.record("pod", tracing::field::display(&ready.id)),
                        Err(err) => {
                            span.record("otel.status_code", "ERROR");
                            span.record("error", tracing::field::display(err))
                        }
                    };
                }
                report.finish(result);
            }
            .instrument(span),
        );
        serial
    }

    fn spawn_stop(&mut self, id: PodId, reason: StopReason) {
        self.pending_stops += 1;
        let backend = Arc::clone(&self.backend);
        let report = StopReport(self.internal_tx.clone());
        tokio::spawn(async move {
            let _report = report;
            match backend.stop(id.clone(), reason).await {
                Ok(()) => tracing::debug!(pod = %id, "pod stopped"),
                Err(error) => tracing::warn!(pod = %id, %error, "stopping a pod failed"),
            }
        });
    }

    fn ttl(&self, overrides: &PodRequestSettings) -> Duration {
        overrides.ttl.unwrap_or(self.settings.default_ttl)
    }
}

/// Sends `StartDone` exactly once, even if the start task panics or is
/// cancelled, so that no waiter is ever left behind.
struct StartReport {
    tx: mpsc::UnboundedSender<Internal>,
    image: Arc<str>,
    serial: u64,
    finished: bool,
}

impl StartReport {
    fn timed_out(&self, timeout: Duration) {
        let _ = self.tx.send(Internal::StartTimedOut {
            image: Arc::clone(&self.image),
            serial: self.serial,
            timeout,
        });
    }

    fn finish(mut self, result: Result<ReadyPod, BackendError>) {
        self.finished = true;
        let _ = self.tx.send(Internal::StartDone {
            image: Arc::clone(&self.image),
            serial: self.serial,
            result,
        });
    }
}

impl Drop for StartReport {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.tx.send(Internal::StartDone {
                image: Arc::clone(&self.image),
                serial: self.serial,
                result: Err(BackendError::StartFailed {
                    image: self.image.to_string(),
                    source: runner_core::backend::cause(StartLost),
                }),
            });
        }
    }
}

/// Sends `StopDone` when the stop task ends, however it ends.
struct StopReport(mpsc::UnboundedSender<Internal>);

impl Drop for StopReport {
    fn drop(&mut self) {
        let _ = self.0.send(Internal::StopDone);
    }
}

struct Actor {
    images: HashMap<Arc<str>, ImageEntry>,
    /// Pods reported stale before their start was done (the backend's
    /// event can overtake the start's answer): retired once they are.
    /// Only kept while starts are pending.
    stale_starting: HashMap<PodId, Retire>,
    /// Pods reported failed before their start was done, the same way:
    /// evicted once they are.
    failed_starting: HashMap<PodId, String>,
    ctx: Ctx,
    shutdown_waiters: Vec<oneshot::Sender<()>>,
}

impl Actor {
    async fn run(
        mut self,
        mut requests: mpsc::Receiver<Command>,
        mut internal: mpsc::UnboundedReceiver<Internal>,
        mut events: mpsc::UnboundedReceiver<PodEvent>,
        mut releases: mpsc::UnboundedReceiver<Arc<PodShared>>,
    ) {
        let period = self
            .ctx
            .settings
            .scan_interval
            .max(Duration::from_millis(1));
        let mut gc = tokio::time::interval_at(Instant::now() + period, period);
        gc.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut requests_open = true;
        let mut events_open = true;
        loop {
            // Biased: the rare inputs first so a flood of requests cannot
            // starve the GC, and releases before requests so that load
            // given back is seen by the next choice.
            tokio::select! {
                biased;
                _ = gc.tick() => self.collect_garbage(),
                Some(report) = internal.recv() => self.on_internal(report),
                event = events.recv(), if events_open => match event {
                    Some(event) => self.on_event(event),
                    None => events_open = false,
                },
                Some(pod) = releases.recv() => self.on_release(&pod),
                command = requests.recv(), if requests_open => match command {
                    Some(command) => self.on_command(command),
                    None => {
                        requests_open = false;
                        self.begin_shutdown();
                    }
                },
            }
            if self.ctx.shutting_down && self.ctx.pending_starts == 0 && self.ctx.pending_stops == 0
            {
                for done in self.shutdown_waiters.drain(..) {
                    let _ = done.send(());
                }
                if !requests_open {
                    break;
                }
            }
        }
        tracing::debug!("pod cache stopped");
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Get {
                image,
                overrides,
                reply,
                span,
            } => self.on_get(image, overrides, reply, &span),
            Command::Evict { id, done } => {
                if self.remove_by_id(&id) {
                    tracing::info!(pod = %id, "evicting a pod that answered UNAVAILABLE");
                    self.ctx.counters.evictions += 1;
                }
                let _ = done.send(());
            }
            Command::Warm { images, done } => {
                for (image, overrides) in images {
                    self.warm(&image, &overrides);
                }
                let _ = done.send(());
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::Shutdown { done } => {
                self.begin_shutdown();
                self.shutdown_waiters.push(done);
            }
        }
    }

    fn on_get(
        &mut self,
        image: Box<str>,
        overrides: PodRequestSettings,
        reply: Reply,
        caller: &tracing::Span,
    ) {
        if self.ctx.shutting_down {
            let _ = reply.send(Err(CacheError::ShuttingDown));
            return;
        }
        let image = match self.ctx.backend.pod_key(&image) {
            Some(key) => key.into_boxed_str(),
            None => image,
        };
        let settings = &self.ctx.settings;
        let queue = overrides
            .max_queue_length
            .unwrap_or(settings.max_waitlist_length);
        let max_pods = overrides
            .max_parallel_pods
            .unwrap_or(settings.max_parallel_pods_per_function)
            .max(1);
        let ttl = self.ctx.ttl(&overrides);
        let key: Arc<str> = match self.images.get_key_value(&*image) {
            Some((key, _)) => Arc::clone(key),
            None => Arc::from(image),
        };
        let single_use = overrides.single_use;
        let entry = self
            .images
            .entry(Arc::clone(&key))
            .or_insert_with(|| ImageEntry::new(Arc::clone(&key)));
        // A single-use call gets a pod no other call had: it waits in no
        // other call's waitlist, and maxParallelExecutions does not bound
        // it (only --max-pods does).
        let choice = if single_use {
            entry.choose_fresh()
        } else {
            entry.choose(queue, max_pods)
        };
        let choice = match choice {
            Choice::Start => match self.room_for(&key) {
                Ok(()) => Choice::Start,
                // No room for another pod: one of the function's own takes
                // the call if it has any (a waitlist length is only
                // preferred); else the call is refused.
                Err(refused) => {
                    let joined = self
                        .images
                        .get_mut(&key)
                        .filter(|_| !single_use)
                        .map(|e| e.choose(queue, 0));
                    match joined {
                        Some(Choice::Join(idx)) => Choice::Join(idx),
                        _ => {
                            let _ = reply.send(Err(refused));
                            if self.images.get(&key).is_some_and(|e| e.pods.is_empty()) {
                                self.images.remove(&key);
                            }
                            return;
                        }
                    }
                }
            },
            join => join,
        };
        let entry = self
            .images
            .entry(Arc::clone(&key))
            .or_insert_with(|| ImageEntry::new(key));
        match choice {
            Choice::Join(idx) => {
                let pod = &mut entry.pods[idx];
                match &mut pod.slot {
                    Slot::Ready { shared, .. } => {
                        self.ctx.counters.hits += 1;
                        entry.next = idx + 1;
                        let id = shared.id.clone();
                        if pod.hand_out(reply, Instant::now(), ttl) && !pod.single_use {
                            self.ctx.backend.reused(&id, ttl);
                        }
                    }
                    Slot::Starting {
                        waiters,
                        ttl: wanted,
                    } => {
                        self.ctx.counters.misses += 1;
                        *wanted = (*wanted).max(ttl);
                        waiters.push(reply);
                    }
                }
            }
            Choice::Start => {
                self.ctx.counters.misses += 1;
                let serial = self.ctx.spawn_start(&entry.image, ttl, &overrides, caller);
                entry.pods.push(Pod {
                    serial,
                    slot: Slot::Starting {
                        waiters: vec![reply],
                        ttl,
                    },
                    retiring: None,
                    single_use,
                });
            }
        }
    }

    fn warm(&mut self, image: &str, overrides: &PodRequestSettings) {
        if self.ctx.shutting_down {
            return;
        }
        let key = self.ctx.backend.pod_key(image);
        let image = key.as_deref().unwrap_or(image);
        let has_pods = self.images.get(image).is_some_and(|e| !e.pods.is_empty());
        if !has_pods && !self.has_room() {
            tracing::warn!(
                image,
                max_pods = self.ctx.settings.max_pods,
                "not warmed: as many pods as --max-pods allows"
            );
            return;
        }
        let ttl = self.ctx.ttl(overrides);
        let entry = self
            .images
            .entry(Arc::from(image))
            .or_insert_with_key(|key| ImageEntry::new(Arc::clone(key)));
        if entry.pods.is_empty() {
            let serial = self
                .ctx
                .spawn_start(&entry.image, ttl, overrides, &tracing::Span::none());
            entry.pods.push(Pod {
                serial,
                slot: Slot::Starting {
                    waiters: Vec::new(),
                    ttl,
                },
                retiring: None,
                single_use: overrides.single_use,
            });
        }
    }

    fn on_release(&mut self, pod: &PodShared) {
        // Not found: the pod was evicted or deleted meanwhile. Harmless.
        let Some(entry) = self.images.get_mut(&*pod.image) else {
            return;
        };
        let Some(idx) = entry.position(pod.serial) else {
            return;
        };
        let found = &mut entry.pods[idx];
        if let Slot::Ready { in_flight, .. } = &mut found.slot {
            *in_flight = in_flight.saturating_sub(1);
            if let (0, Some(why)) = (*in_flight, found.retiring) {
                tracing::info!(image = %pod.image, pod = %pod.id, why = StopReason::Idle(why).describe(), "stopping a retired pod, its last call done");
                entry.pods.remove(idx);
                if entry.pods.is_empty() {
                    self.images.remove(&*pod.image);
                }
                self.ctx.spawn_stop(pod.id.clone(), StopReason::Idle(why));
            }
        }
    }

    fn on_internal(&mut self, report: Internal) {
        match report {
            Internal::StartTimedOut {
                image,
                serial,
                timeout,
            } => {
                let error = BackendError::ReadyTimeout {
                    image: image.to_string(),
                    timeout,
                    detail: "the backend did not answer".to_string(),
                };
                self.fail_start(&image, serial, error);
            }
            Internal::StartDone {
                image,
                serial,
                result,
            } => {
                self.ctx.pending_starts -= 1;
                match result {
                    Ok(ready) => {
                        let id = ready.id.clone();
                        self.start_succeeded(&image, serial, ready);
                        if let Some(why) = self.stale_starting.remove(&id) {
                            self.retire(&id, why);
                        }
                        if let Some(reason) = self.failed_starting.remove(&id) {
                            self.on_event(PodEvent::Failed { id, reason });
                        }
                    }
                    Err(error) => self.fail_start(&image, serial, error),
                }
                if self.ctx.pending_starts == 0 {
                    self.stale_starting.clear();
                    self.failed_starting.clear();
                }
            }
            Internal::StopDone => self.ctx.pending_stops -= 1,
        }
    }

    /// The starting pod `serial` of `image`, if the cache still waits for it.
    fn starting_position(&self, image: &str, serial: u64) -> Option<usize> {
        let entry = self.images.get(image)?;
        let idx = entry.position(serial)?;
        (!entry.pods[idx].is_ready()).then_some(idx)
    }

    fn start_succeeded(&mut self, image: &str, serial: u64, ready: ReadyPod) {
        let Some(idx) = self.starting_position(image, serial) else {
            tracing::info!(image, pod = %ready.id, "stopping a pod whose start was given up");
            self.ctx
                .spawn_stop(ready.id, StopReason::Idle(Retire::GivenUp));
            return;
        };
        if self.ctx.shutting_down {
            self.remove_at(image, idx);
            self.ctx
                .spawn_stop(ready.id, StopReason::Idle(Retire::Shutdown));
            return;
        }
        let endpoint = match Endpoint::from_shared(ready.endpoint.clone()) {
            // Big windows and frames: ResourceLists run to megabytes, and
            // HTTP/2's 64 KiB defaults would cost round trips per call.
            Ok(endpoint) => endpoint
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .initial_connection_window_size(16 << 20)
                .initial_stream_window_size(16 << 20)
                .max_frame_size(1 << 20),
            Err(error) => {
                let error = BackendError::StartFailed {
                    image: image.to_string(),
                    source: runner_core::backend::cause(InvalidEndpoint {
                        pod: ready.id.clone(),
                        endpoint: ready.endpoint.clone(),
                        source: error,
                    }),
                };
                self.ctx.spawn_stop(ready.id, StopReason::Broken);
                self.fail_start(image, serial, error);
                return;
            }
        };
        let Some(entry) = self.images.get_mut(image) else {
            return;
        };
        // "pod ready" is the backend's line (with its timing): not again here.
        let shared = Arc::new(PodShared {
            image: Arc::clone(&entry.image),
            serial,
            id: ready.id,
            endpoint: ready.endpoint,
            channel: endpoint.connect_lazy(),
            releases: self.ctx.releases_tx.clone(),
        });
        let now = Instant::now();
        let pod = &mut entry.pods[idx];
        let (waiters, ttl) = match &mut pod.slot {
            Slot::Starting { waiters, ttl } => (std::mem::take(waiters), *ttl),
            Slot::Ready { .. } => return,
        };
        pod.slot = Slot::Ready {
            shared,
            in_flight: 0,
            expiry: deadline(now, ttl),
            last_used: now,
        };
        for waiter in waiters {
            // A single-use pod has one waiter at most (a call joins only
            // one that has none): the first taker uses it up.
            if !waiter.is_closed() && pod.retiring.is_none() {
                pod.hand_out(waiter, now, ttl);
            }
        }
    }

    /// The start of pod `serial` failed: every waiter gets the error and the
    /// pod is forgotten, so the next `get` starts again.
    fn fail_start(&mut self, image: &str, serial: u64, error: BackendError) {
        let Some(idx) = self.starting_position(image, serial) else {
            tracing::debug!(image, %error, "a start that was given up failed too");
            return;
        };
        self.ctx.counters.pod_start_failures += 1;
        if matches!(error, BackendError::Refused { .. }) {
            // The backend logged the refusal once, when it began.
            tracing::debug!(image, %error, "starting a pod failed");
        } else {
            tracing::warn!(image, %error, "starting a pod failed");
        }
        if let Some(Pod {
            slot: Slot::Starting { waiters, .. },
            ..
        }) = self.remove_at(image, idx)
        {
            let error = CacheError::PodStart {
                image: image.to_string(),
                source: error,
            };
            for waiter in waiters {
                let _ = waiter.send(Err(error.clone()));
            }
        }
    }

    fn on_event(&mut self, event: PodEvent) {
        match event {
            PodEvent::Failed { id, reason } => {
                if self.remove_by_id(&id) {
                    tracing::warn!(pod = %id, reason, "pod failed; evicted");
                    self.ctx.counters.evictions += 1;
                } else if self.ctx.pending_starts > 0 {
                    // Its start's answer may still be on its way.
                    self.failed_starting.insert(id, reason);
                } else {
                    tracing::debug!(pod = %id, reason, "failure of a pod this cache does not hold");
                }
            }
            PodEvent::Stale { id, why } => self.retire(&id, why),
        }
    }

    /// A pod to go (an old template's, or taken away): stopped now if
    /// idle, else once its last lease is back; no new lease either way.
    fn retire(&mut self, id: &PodId, why: Retire) {
        for (image, entry) in self.images.iter_mut() {
            let Some(idx) = entry.pods.iter().position(|p| p.id() == Some(id)) else {
                continue;
            };
            if entry.pods[idx].load() == 0 {
                tracing::info!(image = %image, pod = %id, why = StopReason::Idle(why).describe(), "stopping a retired pod");
                entry.pods.remove(idx);
                self.ctx.spawn_stop(id.clone(), StopReason::Idle(why));
            } else {
                tracing::info!(image = %image, pod = %id, why = StopReason::Idle(why).describe(), "a retired pod: stopped once its calls are done");
                // The first reason stays: a template change and a drain
                // both end in the same stop.
                entry.pods[idx].retiring.get_or_insert(why);
            }
            return;
        }
        if self.ctx.pending_starts > 0 {
            self.stale_starting.entry(id.clone()).or_insert(why);
        }
    }

    fn remove_at(&mut self, image: &str, idx: usize) -> Option<Pod> {
        let entry = self.images.get_mut(image)?;
        (idx < entry.pods.len()).then(|| entry.pods.remove(idx))
    }

    /// Forgets the ready pod `id` and stops it. Only pods this cache started
    /// can be found, so nothing else is ever stopped.
    fn remove_by_id(&mut self, id: &PodId) -> bool {
        for entry in self.images.values_mut() {
            if let Some(idx) = entry.pods.iter().position(|p| p.id() == Some(id)) {
                entry.pods.remove(idx);
                self.ctx.spawn_stop(id.clone(), StopReason::Broken);
                return true;
            }
        }
        false
    }

    /// Deletes idle pods whose TTL passed; never one with a lease out.
    fn collect_garbage(&mut self) {
        let now = Instant::now();
        let ctx = &mut self.ctx;
        self.images.retain(|image, entry| {
            entry.pods.retain(|pod| match &pod.slot {
                Slot::Ready {
                    shared,
                    in_flight: 0,
                    expiry,
                    ..
                } if *expiry <= now => {
                    tracing::info!(image = %image, pod = %shared.id, "deleting an expired pod");
                    ctx.counters.gc_deletions += 1;
                    ctx.spawn_stop(shared.id.clone(), StopReason::Idle(Retire::Expired));
                    false
                }
                _ => true,
            });
            !entry.pods.is_empty()
        });
    }

    fn begin_shutdown(&mut self) {
        if self.ctx.shutting_down {
            return;
        }
        tracing::info!("pod cache shutting down");
        self.ctx.shutting_down = true;
        let ctx = &mut self.ctx;
        for entry in self.images.values_mut() {
            entry.pods.retain_mut(|pod| match &mut pod.slot {
                Slot::Ready { shared, .. } => {
                    // A used single-use pod goes as such (never kept warm).
                    let why = pod.retiring.unwrap_or(Retire::Shutdown);
                    ctx.spawn_stop(shared.id.clone(), StopReason::Idle(why));
                    false
                }
                // Stopped when the start completes: the id is unknown yet.
                Slot::Starting { waiters, .. } => {
                    for waiter in waiters.drain(..) {
                        let _ = waiter.send(Err(CacheError::ShuttingDown));
                    }
                    true
                }
            });
        }
    }

    fn snapshot(&mut self) -> CacheSnapshot {
        let mut images: Vec<ImageSnapshot> = self
            .images
            .values_mut()
            .map(|entry| {
                let pods: Vec<PodSnapshot> = entry
                    .pods
                    .iter_mut()
                    .map(|pod| {
                        pod.prune_waiters();
                        PodSnapshot {
                            id: pod.id().cloned(),
                            state: if pod.is_ready() {
                                PodState::Ready
                            } else {
                                PodState::Starting
                            },
                            load: pod.load(),
                            expiry: match &pod.slot {
                                Slot::Ready { expiry, .. } => Some(*expiry),
                                Slot::Starting { .. } => None,
                            },
                        }
                    })
                    .collect();
                ImageSnapshot {
                    image: entry.image.to_string(),
                    waiters: pods
                        .iter()
                        .filter(|p| p.state == PodState::Starting)
                        .map(|p| p.load)
                        .sum(),
                    pods,
                }
            })
            .collect();
        images.sort_by(|a, b| a.image.cmp(&b.image));
        CacheSnapshot {
            images,
            counters: self.ctx.counters,
            shutting_down: self.ctx.shutting_down,
        }
    }
}
