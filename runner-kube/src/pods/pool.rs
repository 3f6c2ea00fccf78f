//! Idle pools on Kubernetes, as seed 003 builds them: a ReplicaSet per
//! pooled function (podExecutor `idlePods: N`) keeps N function pods
//! started and Ready; its selector includes the label
//! `fn.kpt.dev/pool-state: idle`.
//!
//! A start of a pooled function's pod *claims* one of them: a Ready idle
//! pod, picked at random, is patched with the resourceVersion it was read
//! at (a merge patch carrying `metadata.resourceVersion`), so that of two
//! runners claiming the same pod one gets a 409 and tries the next. The
//! patch sets `pool-state: claimed`, which takes the pod out of the
//! ReplicaSet's selector (its controller starts the replacement at once),
//! and makes the pod this runner's like any pod it created: its owner
//! label, its `claim` operation, its reclaim-after, the traffic finalizer,
//! and the Deployment's owner reference instead of the ReplicaSet's. From
//! then on it is served, released, drained and deleted as every function
//! pod (a single-use one after its call); it never returns to the pool.
//! Claimed pods are dialled by their IP: no Service, no kube-proxy.
//!
//! The ReplicaSets are named from everything their pods are made of (as
//! pod names are), applied with server-side apply under one field manager
//! by every runner that wants them, and deleted by whichever runner sees
//! that no FunctionConfig wants them any more (among the runners of one
//! Deployment: the label `fn.kpt.dev/pool-of` names it). A runner that no
//! Deployment runs deletes its pools when it stops.
//!
//! Here: the pools' labels, their state and which pods are a pool's idle
//! ones. The claim is the `claim` module's, the ReplicaSets' upkeep the
//! `replicasets` module's.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store};
use kube::Api;
use tokio::sync::{watch, Notify};

use super::readiness::{is_ready, pod_ip, terminated};
use runner_core::backend::metrics::PoolMetrics;
use runner_core::backend::PodSpec;

/// The pool a pod or ReplicaSet belongs to (the ReplicaSet's name).
pub const POOL_LABEL: &str = "fn.kpt.dev/pool";
/// `idle` while the pod is in its pool (the ReplicaSet's selector),
/// `claimed` once a runner took it.
pub const POOL_STATE_LABEL: &str = "fn.kpt.dev/pool-state";
/// Which runners keep the pool: their Deployment's uid, or `standalone`.
pub const POOL_OF_LABEL: &str = "fn.kpt.dev/pool-of";
/// The pool's function image, whole (labels cannot hold it).
pub const POOL_IMAGE_ANNOTATION: &str = "fn.kpt.dev/pool-image";
/// What of the runners' own settings shaped the pool's pods (the wrapper
/// image, the message size): runners of another version (a rollout) keep
/// pools of their own, and leave each other's alone.
pub const POOL_RUNNER_LABEL: &str = "fn.kpt.dev/pool-runner";
/// When a runner last applied the pool (unix seconds): one no runner has
/// applied for [`STALE_AFTER`] is deleted by any runner of its kind.
pub const POOL_APPLIED_AT_ANNOTATION: &str = "fn.kpt.dev/pool-applied-at";
pub(super) const IDLE: &str = "idle";
pub(super) const CLAIMED: &str = "claimed";
pub(super) const STANDALONE: &str = "standalone";
/// Every runner applies its pools under this one field manager: the same
/// wish from two runners is one owner's, not a conflict.
pub(super) const FIELD_MANAGER: &str = "function-runner";
/// A pool no runner applied for this long is left by runners gone (an
/// older version's, after a rollout).
pub(super) const STALE_AFTER: Duration = Duration::from_secs(5 * 60);

/// The pools' state, beside the backend's.
pub(super) struct Pools {
    pub(super) replicasets: Api<ReplicaSet>,
    /// The pods of every pool of the namespace (idle ones, and claimed
    /// ones until the watch sees their label change).
    pub(super) store: Store<Pod>,
    pub(super) changed: watch::Receiver<u64>,
    pub(super) tick: watch::Sender<u64>,
    pub(super) writer: Mutex<Option<reflector::store::Writer<Pod>>>,
    /// The pools the FunctionConfigs want, as last set.
    pub(super) wanted: Mutex<Vec<PodSpec>>,
    /// Wakes the sync task.
    pub(super) resync: Arc<Notify>,
    /// Pools applied by this runner: name → (image, size).
    applied: Mutex<HashMap<String, (String, usize)>>,
    /// Uids of idle pods whose Ready was seen (replacement time observed).
    pub(super) seen_ready: Mutex<HashSet<String>>,
    pub(super) metrics: PoolMetrics,
    random: AtomicU64,
    /// The backend closes: nothing is applied any more.
    pub(super) closed: std::sync::atomic::AtomicBool,
    /// A sync went through once (the first one looks for stale pools even
    /// with none wanted).
    pub(super) synced: std::sync::atomic::AtomicBool,
    /// The runner said which pools it wants (nothing is synced before).
    pub(super) told: std::sync::atomic::AtomicBool,
}

impl Pools {
    pub(super) fn new(replicasets: Api<ReplicaSet>) -> Self {
        let (store, writer) = reflector::store();
        let (tick, changed) = watch::channel(0);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        Pools {
            replicasets,
            store,
            changed,
            tick,
            writer: Mutex::new(Some(writer)),
            wanted: Mutex::default(),
            resync: Arc::new(Notify::new()),
            applied: Mutex::default(),
            seen_ready: Mutex::default(),
            metrics: PoolMetrics::default(),
            random: AtomicU64::new(seed),
            closed: Default::default(),
            synced: Default::default(),
            told: Default::default(),
        }
    }

    /// xorshift64*: enough to spread claims of many runners over a pool.
    pub(super) fn random(&self) -> u64 {
        let mut x = self.random.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn set(&self, pools: Vec<PodSpec>) {
        *self.wanted.lock().unwrap_or_else(PoisonError::into_inner) = pools;
        self.told.store(true, Ordering::Relaxed);
        self.resync.notify_one();
    }

    /// The template changed: pools of the new one replace the old (once
    /// the runner said which it wants).
    pub(super) fn template_changed(&self) {
        if self.told.load(Ordering::Relaxed) {
            self.resync.notify_one();
        }
    }

    pub(super) fn applied(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, usize)>> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn label<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(name).map(String::as_str)
}

/// Whether the pod is one of `pool`'s that may be claimed now.
pub(super) fn claimable(pod: &Pod, pool: &str) -> bool {
    idle_in(pod, pool) && is_ready(pod)
}

/// Whether the pod is one of `pool`'s idle pods, with an address, that
/// never ended (a ReplicaSet's pod restarts in place: one that did is left
/// to the ReplicaSet, not claimed).
pub(super) fn idle_in(pod: &Pod, pool: &str) -> bool {
    label(pod, POOL_LABEL) == Some(pool)
        && label(pod, POOL_STATE_LABEL) == Some(IDLE)
        && pod.metadata.deletion_timestamp.is_none()
        && pod_ip(pod).is_some()
        && terminated(pod).is_none()
}
