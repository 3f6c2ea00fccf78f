//! What the backend's tasks share ([`Inner`]), and what this runner holds
//! of the pods ([`Held`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio::sync::{mpsc, watch};

use super::pool::Pools;
use super::settings::KubeSettings;
use crate::access::Access;
use crate::entrypoint::Entrypoints;
use crate::lifecycle::Events;
use crate::names::OWNER_LABEL;
use crate::registry;
use crate::source;
use crate::template::label_value;
use runner_core::backend::PodEvent;

/// The backend's state, shared by its starts and stops, its watch task
/// and the background work they spawn.
pub(super) struct Inner {
    pub(super) settings: KubeSettings,
    pub(super) pods: Api<Pod>,
    pub(super) services: Api<Service>,
    pub(super) endpoints: Api<Endpoints>,
    pub(super) store: Store<Pod>,
    /// Ticks on every watch event: starts wait on it instead of polling.
    pub(super) changed: watch::Receiver<u64>,
    pub(super) template: watch::Receiver<source::Current>,
    pub(super) entrypoints: Entrypoints,
    /// Shared with the reuse patches running in the background.
    pub(super) held: Arc<Mutex<Held>>,
    pub(super) events: OnceLock<mpsc::UnboundedSender<PodEvent>>,
    /// The pod watch's last error, named when a start times out.
    pub(super) watch_error: Mutex<Option<String>>,
    /// This runner's id as a label name: its operations on pods.
    pub(super) runner: String,
    /// Events on the pods, published in the background.
    pub(super) lifecycle: Events,
    /// The rights the API server refuses now: the backend's readiness.
    pub(super) access: Access,
    /// Deletes running in the background (a failed start's pod): the
    /// backend's close waits for them, so a runner told to stop right after
    /// leaves no such pod behind.
    pub(super) deletes: tokio_util::task::TaskTracker,
    /// The idle pools (podExecutor `idlePods`).
    pub(super) pools: Pools,
}

/// What this runner holds, by pod name.
#[derive(Default)]
pub(super) struct Held {
    /// Pods being started or handed out by this runner: their names are not
    /// tried again by its other starts, and the sweep leaves them alone.
    pub(super) claimed: HashSet<String>,
    /// Pods handed out as ready: their end is reported as a failure.
    pub(super) ready: HashSet<String>,
    /// The reclaim-after this runner last wrote on each pod.
    pub(super) written: HashMap<String, u64>,
    /// The latest reclaim-after known on each handed-out pod (written here,
    /// or seen in the store): a hand-out that would move it by less than
    /// the slack is decided from this alone, without reading the store.
    pub(super) known: HashMap<String, u64>,
    /// The uid of each pod handed out: the one pod a stop may delete.
    pub(super) uids: HashMap<String, String>,
    /// Uids of pods this runner is deleting: the store may show them alive
    /// for a moment still, and a start must not take one (names are reused).
    pub(super) deleting: HashSet<String>,
    /// Reclaim-after patches under way.
    pub(super) patching: HashSet<String>,
    /// When this runner last declared (or refreshed) its `serve` operation
    /// on each handed-out pod, unix nanoseconds.
    pub(super) declared: HashMap<String, u128>,
    /// Operation refreshes and releases under way, by pod name.
    pub(super) operating: HashSet<String>,
    /// Finalizer removals under way, by uid.
    pub(super) unprotecting: HashSet<String>,
    /// Handed-out pods reported to the cache as taken away (drained or
    /// deleted by another actor): reported once.
    pub(super) taken: HashSet<String>,
}

/// The runner that made the pod (its owner label).
pub(super) fn owner_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(OWNER_LABEL)
        .map(String::as_str)
}

impl Inner {
    pub(super) fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pod `name` in the pod watch's store.
    pub(super) fn key(&self, name: &str) -> ObjectRef<Pod> {
        ObjectRef::new(name).within(&self.settings.namespace)
    }

    /// Whether this runner made the pod.
    pub(super) fn mine(&self, pod: &Pod) -> bool {
        owner_of(pod) == Some(label_value(&self.settings.owner).as_str())
    }

    /// The pull Secret pods of `image` reference (private registries).
    pub(super) fn pull_secret_for(&self, image: &str) -> Option<String> {
        self.settings
            .pull_secret
            .as_ref()
            .map(|secret| secret.name.clone())
            .filter(|_| registry::is_private(image))
    }
}
