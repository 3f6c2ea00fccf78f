//! The `kube` backend: each pod is a Kubernetes Pod made from the function
//! pod template, with a ClusterIP Service in front of it.
//!
//! One watch over the function pods of the namespace (every pod with the
//! [`OWNER_LABEL`], whichever runner made it) feeds a reflector store. A
//! start creates the Pod and its Service and waits, on that watch's events,
//! for the Pod to be Ready and listed in the Service's Endpoints (dialled by
//! its Service), or until its wrapper answers on the pod's IP (dialled by
//! its IP: asked every 25 ms once the watch shows an address); a pod that
//! later fails, ends or is deleted is reported as [`PodEvent::Failed`] from
//! the same events. A warm call makes no API request: the
//! cache hands out pods it already has (the `fn.kpt.dev/reclaim-after`
//! patch on reuse runs in the background, at most once per tenth of the TTL
//! per pod).
//!
//! # Names and sharing
//!
//! Pod names are fixed: the function, a hash of everything the pod is made
//! from (image, template and its version, wrapper image, message size,
//! overrides, pull Secret), and a slot number. Runners that start together,
//! or a runner that restarts, therefore ask for the same names: the first
//! create wins, the others get AlreadyExists and use that pod (after the
//! same waits), so a function has one pod however
//! many replicas warm it. A runner skips the slots it holds itself, so its
//! own pods of one function are distinct.
//!
//! # Deleting
//!
//! The owner label names the runner that created the pod. A broken pod is
//! deleted by whoever sees it break. An idle one is deleted by its owner
//! only, and only if no other runner extended its reclaim-after past the
//! owner's own last write; the delete carries the resourceVersion seen, so
//! a reuse patch that lands first wins. Every scan interval, pods nobody
//! here holds are swept from the store (no listing): the owner deletes its
//! own once their reclaim-after passed; a pod whose owner is gone (a
//! crashed or scaled-down replica) is deleted by any runner one more TTL
//! later, when a live owner would have deleted it long since.
//!
//! # Where
//!
//! A start is `start`'s (a name, the pod created or adopted, its Service
//! from `service`, the waits), or `claim`'s for a pooled function (the
//! idle pools are `pool`, their ReplicaSets kept by `replicasets`). The
//! watch's events are `events`', the periodic sweep `sweep`'s, and the
//! lifecycle's side (drains, releases, finalizers) `operations`'. Below
//! them: the shared state (`inner`), pod names (`naming`), deletes
//! (`delete`), the reclaim-after (`reclaim`), how a start fails
//! (`failures`), what a pod's status says (`readiness`) and the settings
//! (`settings`).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::runtime::reflector;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};

use crate::access::{Access, RECHECK};
use crate::backoff::with_backoff;
use crate::entrypoint::Entrypoints;
use crate::lifecycle::{Events, Phase};
use crate::names::OWNER_LABEL;
use crate::source;
use crate::template::label_value;
use runner_core::backend::{
    Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, Retire, StopReason,
};

use delete::{delete_pod, Exactly};
use events::pod_watcher;
use inner::{Held, Inner};
use reclaim::reclaim_after;

mod claim;
mod delete;
mod events;
mod failures;
mod inner;
mod leftovers;
mod naming;
mod operations;
mod pool;
mod readiness;
mod reclaim;
mod replicasets;
mod service;
mod settings;
mod start;
mod sweep;

pub use pool::{POOL_LABEL, POOL_STATE_LABEL};
pub use readiness::is_ready;
pub use settings::{Dial, Features, KubeSettings};

/// How long the runner takes at most, when it stops with its Deployment
/// gone, to delete that Deployment's function pods.
pub const UNINSTALL_WITHIN: Duration = Duration::from_secs(20);

/// How long the backend's close waits for the deletes under way.
const DELETES_WITHIN: Duration = Duration::from_secs(5);

/// How long the backend's close takes at most: the deletes under way, an
/// uninstall, the last events (5 s).
pub const CLOSE_WITHIN: Duration = Duration::from_secs(5 + 20 + 5 + 1);

pub struct KubeBackend {
    inner: Arc<Inner>,
    watch: tokio::task::AbortHandle,
    recheck: tokio::task::AbortHandle,
    /// The idle pools' pod watch and their sync.
    pool_tasks: (tokio::task::AbortHandle, tokio::task::AbortHandle),
    /// The collection of Porch's runner's pods, once.
    leftovers: Option<tokio::task::AbortHandle>,
}

impl Drop for KubeBackend {
    fn drop(&mut self) {
        self.watch.abort();
        self.recheck.abort();
        self.pool_tasks.0.abort();
        self.pool_tasks.1.abort();
        if let Some(leftovers) = &self.leftovers {
            leftovers.abort();
        }
    }
}

impl KubeBackend {
    /// Connects with `client` and starts the watches: the function pods of
    /// the namespace, and the template.
    pub fn new(client: Client, settings: KubeSettings, entrypoints: Entrypoints) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), &settings.namespace);
        let leftovers = settings
            .porch_leftovers_after
            .map(|after| leftovers::spawn(pods.clone(), services.clone(), after));
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &settings.namespace);
        let lifecycle = if settings.features.events {
            Events::spawn(client.clone(), &label_value(&settings.owner))
        } else {
            Events::none()
        };
        let template = source::spawn(
            client.clone(),
            settings.template.clone(),
            &settings.runner_namespace,
            &settings.namespace,
        );
        let (store, writer) = reflector::store();
        let (tick, changed) = watch::channel(0u64);
        // The sweep also refreshes this runner's operations, which others
        // count stale after a TTL: it runs at least every tenth of it.
        let scan_interval = settings
            .scan_interval
            .min(settings.ttl / 10)
            .max(Duration::from_secs(1));
        let runner = label_value(&settings.owner);
        let settings_namespace = settings.namespace.clone();
        let inner = Arc::new(Inner {
            runner,
            lifecycle,
            settings,
            pods: pods.clone(),
            services,
            endpoints,
            store,
            changed,
            template: template.clone(),
            entrypoints,
            held: Arc::new(Mutex::new(Held::default())),
            events: OnceLock::new(),
            watch_error: Mutex::new(None),
            access: Access::default(),
            deletes: tokio_util::task::TaskTracker::new(),
            pools: pool::Pools::new(Api::namespaced(client.clone(), &settings_namespace)),
        });
        // Every function pod of the namespace, whichever runner made it: a
        // start may use another runner's pod of the same name.
        let stream = with_backoff(pod_watcher(
            pods,
            watcher::Config::default().labels(OWNER_LABEL),
        ));
        let weak = Arc::downgrade(&inner);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(reflector::reflector(writer, stream));
            let mut template = template;
            let mut sweep = tokio::time::interval(scan_interval);
            sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut synced = false;
            loop {
                tokio::select! {
                    event = events.next() => {
                        let Some(event) = event else { return };
                        let Some(inner) = weak.upgrade() else { return };
                        synced |= matches!(event, Ok(watcher::Event::InitDone));
                        inner.on_pod_event(event);
                        tick.send_modify(|n| *n += 1);
                    }
                    changed = template.changed() => {
                        if changed.is_err() { return }
                        let Some(inner) = weak.upgrade() else { return };
                        let current = template.borrow_and_update().clone();
                        if let Some(Ok(current)) = current {
                            inner.retire_other_versions(&current);
                            inner.pools.template_changed();
                        }
                    }
                    _ = sweep.tick(), if synced => {
                        let Some(inner) = weak.upgrade() else { return };
                        inner.sweep();
                    }
                }
            }
        });
        // Refused rights are asked about again until granted.
        let weak = Arc::downgrade(&inner);
        let recheck = tokio::spawn(async move {
            loop {
                tokio::time::sleep(RECHECK).await;
                let Some(inner) = weak.upgrade() else { return };
                inner.access.recheck(&client).await;
            }
        });
        let pool_tasks = replicasets::spawn(&inner);
        Self {
            inner,
            watch: task.abort_handle(),
            recheck: recheck.abort_handle(),
            pool_tasks,
            leftovers,
        }
    }
}

impl Backend for KubeBackend {
    fn name(&self) -> &'static str {
        "kube"
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.inner.events.set(events);
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.ready_pod(spec).await })
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let name = id.0;
            let (written, uid) = {
                let mut held = inner.held();
                held.ready.remove(&name);
                held.claimed.remove(&name);
                held.known.remove(&name);
                held.declared.remove(&name);
                held.taken.remove(&name);
                (held.written.remove(&name), held.uids.remove(&name))
            };
            // The pod this runner held: not another of the same name made
            // since (by another runner, after this one was deleted).
            let Some(uid) = uid else { return Ok(()) };
            let pod = inner
                .store
                .get(&inner.key(&name))
                .filter(|p| p.metadata.uid.as_deref() == Some(uid.as_str()));
            let Some(pod) = pod else {
                // Gone already, or not seen yet: delete it by uid to be sure.
                inner.deleting(&uid);
                delete_pod(&inner.pods, &name, Exactly::Uid(uid)).await;
                return Ok(());
            };
            match reason {
                StopReason::Broken => {
                    inner.deleting(&uid);
                    if delete_pod(&inner.pods, &name, Exactly::Uid(uid.clone())).await {
                        inner.lifecycle.emit(
                            &pod,
                            Phase::Deleted,
                            format!("runner {} deleted it: {}", inner.runner, reason.describe()),
                        );
                    }
                    // Its operation here must not hold the finalizer for a
                    // TTL: the pod is out of this runner's rotation.
                    inner.detached().withdraw(&name, &uid, None, None).await;
                }
                StopReason::Idle(why) => {
                    let recorded = reclaim_after(&pod);
                    // A runner of an older version marks its use on the
                    // reclaim-after alone.
                    let extended = recorded.is_some() && written.is_some() && recorded > written;
                    let others = inner.serving_elsewhere(&pod);
                    // Only the owner deletes an idle pod; not one another
                    // actor is taking away; not one others use, unless it
                    // must go whoever uses it (its template changed).
                    let keep = !inner.mine(&pod)
                        || why == Retire::TakenAway
                        || ((others.is_some() || extended)
                            && !matches!(why, Retire::TemplateChanged | Retire::Used));
                    if keep {
                        if let Some(other) = &others {
                            tracing::info!(pod = %name, runner = %other, "idle here but another runner uses it: left");
                        }
                        inner
                            .detached()
                            .withdraw(&name, &uid, Some((*pod).clone()), Some(reason.describe()))
                            .await;
                        return Ok(());
                    }
                    inner
                        .drain_and_delete(&name, &uid, (*pod).clone(), reason)
                        .await;
                }
            }
            Ok(())
        })
    }

    fn reused(&self, id: &PodId, ttl: Duration) {
        self.inner.reused(&id.0, ttl);
    }

    /// Every pod stopped: if the runner's Deployment is gone, every pod of
    /// it goes too; the last events go out before the runner exits.
    fn close(&self) -> BoxFuture<'static, ()> {
        let inner = self.inner.clone();
        Box::pin(async move {
            inner.close_pools().await;
            inner.deletes.close();
            if tokio::time::timeout(DELETES_WITHIN, inner.deletes.wait())
                .await
                .is_err()
            {
                tracing::warn!("pod deletes still under way after {DELETES_WITHIN:?}: left");
            }
            if let Some(deployment) = &inner.settings.deployment {
                let gone = deployment
                    .gone(
                        &inner.pods.clone().into_client(),
                        inner.settings.runner_pod.as_deref(),
                    )
                    .await;
                if gone
                    && tokio::time::timeout(UNINSTALL_WITHIN, inner.uninstall(deployment))
                        .await
                        .is_err()
                {
                    tracing::warn!(
                        "the Deployment's function pods were not all deleted within {UNINSTALL_WITHIN:?}"
                    );
                }
            }
            inner.lifecycle.flush(Duration::from_secs(5)).await
        })
    }

    /// False while the API server refuses a right that starting pods needs.
    fn ready(&self) -> Option<watch::Receiver<bool>> {
        Some(self.inner.access.ready())
    }

    fn set_pools(&self, pools: Vec<PodSpec>) {
        if !self.inner.settings.features.pools && !pools.is_empty() {
            // Said once at start (connect): the pools' functions start pods
            // on demand instead.
            tracing::debug!(
                pools = pools.len(),
                "idle pools asked for, but off (no right to create ReplicaSets)"
            );
            self.inner.pools.set(Vec::new());
            return;
        }
        self.inner.pools.set(pools);
    }

    fn close_within(&self) -> Duration {
        CLOSE_WITHIN
    }

    fn pool_metrics(&self) -> Option<runner_core::backend::metrics::PoolMetrics> {
        Some(self.inner.pools.metrics.clone())
    }
}

#[cfg(test)]
mod fault_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
