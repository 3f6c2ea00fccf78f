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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::Api;
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Notify};

use super::super::lifecycle::{self, OpType, Phase, TRAFFIC_FINALIZER};
use super::super::owner::DEPLOYMENT_LABEL;
use super::super::template::{image_label_value, label_value, FunctionPod, Template};
use super::{
    is_conflict, is_not_found, is_ready, name_key, now_secs, one_line, pod_ip, pod_watcher,
    registry, service_name, with_backoff, Inner, Progress, StartError,
};
use crate::names::{
    IMAGE_LABEL, OWNER_LABEL, POD_LABEL, RECLAIM_AFTER_ANNOTATION, TEMPLATE_VERSION_ANNOTATION,
};
use runner_core::backend::metrics::PoolMetrics;
use runner_core::backend::{cause, pod_name, Cause, PodSpec};

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
const IDLE: &str = "idle";
const CLAIMED: &str = "claimed";
const STANDALONE: &str = "standalone";
/// Every runner applies its pools under this one field manager: the same
/// wish from two runners is one owner's, not a conflict.
const FIELD_MANAGER: &str = "function-runner";
/// How soon a sync that failed is tried again.
const RESYNC: Duration = Duration::from_secs(10);
/// How often the pools are applied again: a pool deleted by someone else
/// (another runner stopping, a hand) is back within this, or at once when
/// a claim finds it empty.
const RESYNC_EVERY: Duration = Duration::from_secs(60);
/// A pool no runner applied for this long is left by runners gone (an
/// older version's, after a rollout).
const STALE_AFTER: Duration = Duration::from_secs(5 * 60);

/// The pools' state, beside the backend's.
pub(super) struct Pools {
    replicasets: Api<ReplicaSet>,
    /// The pods of every pool of the namespace (idle ones, and claimed
    /// ones until the watch sees their label change).
    pub(super) store: Store<Pod>,
    pub(super) changed: watch::Receiver<u64>,
    tick: watch::Sender<u64>,
    writer: Mutex<Option<reflector::store::Writer<Pod>>>,
    /// The pools the FunctionConfigs want, as last set.
    wanted: Mutex<Vec<PodSpec>>,
    /// Wakes the sync task.
    resync: Arc<Notify>,
    /// Pools applied by this runner: name → (image, size).
    applied: Mutex<HashMap<String, (String, usize)>>,
    /// Uids of idle pods whose Ready was seen (replacement time observed).
    seen_ready: Mutex<HashSet<String>>,
    pub(super) metrics: std::sync::OnceLock<PoolMetrics>,
    random: AtomicU64,
    /// The backend closes: nothing is applied any more.
    closed: std::sync::atomic::AtomicBool,
    /// A sync went through once (the first one looks for stale pools even
    /// with none wanted).
    synced: std::sync::atomic::AtomicBool,
    /// The runner said which pools it wants (nothing is synced before).
    told: std::sync::atomic::AtomicBool,
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
            metrics: std::sync::OnceLock::from(PoolMetrics::default()),
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

    fn applied(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, usize)>> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long the pod took from its creation to Ready (second precision, as
/// the API gives both times).
fn ready_after(pod: &Pod) -> Option<Duration> {
    let created = pod.metadata.creation_timestamp.as_ref()?;
    let ready = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()?;
    let took = ready.0.duration_since(created.0).as_secs_f64();
    Some(Duration::from_secs_f64(took.max(0.0)))
}

fn label<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(name).map(String::as_str)
}

/// Whether the pod is one of `pool`'s that may be claimed now.
fn claimable(pod: &Pod, pool: &str) -> bool {
    idle_in(pod, pool) && is_ready(pod)
}

/// Whether the pod is one of `pool`'s idle pods, with an address, that
/// never ended (a ReplicaSet's pod restarts in place: one that did is left
/// to the ReplicaSet, not claimed).
fn idle_in(pod: &Pod, pool: &str) -> bool {
    label(pod, POOL_LABEL) == Some(pool)
        && label(pod, POOL_STATE_LABEL) == Some(IDLE)
        && pod.metadata.deletion_timestamp.is_none()
        && pod_ip(pod).is_some()
        && super::terminated(pod).is_none()
}

/// Whether a container of the pod was restarted (only a ReplicaSet's pods
/// are: runners make theirs with `restartPolicy: Never`).
fn restarted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| statuses.iter().any(|c| c.restart_count > 0))
}

/// How long a claim waits for a starting pod's wrapper to answer before it
/// looks again.
const ANSWER_WITHIN: Duration = Duration::from_millis(500);
/// How often a claim asks a running, not yet Ready pod's wrapper again.
const ASK_AGAIN: Duration = Duration::from_millis(100);

/// Whether the wrapper at `ip` says SERVING (the runner's own check: a pod
/// is claimed as soon as it answers, up to a probe period and a status
/// write before the kubelet reports it Ready).
async fn answers(ip: &str) -> bool {
    use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
    let endpoint = format!("http://{ip}:{}", crate::names::WRAPPER_PORT);
    let check = async {
        let channel = tonic::transport::Endpoint::from_shared(endpoint)
            .ok()?
            .connect_timeout(ANSWER_WITHIN)
            .connect()
            .await
            .ok()?;
        let answer = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .ok()?;
        Some(answer.get_ref().status == ServingStatus::Serving as i32)
    };
    matches!(
        tokio::time::timeout(ANSWER_WITHIN, check).await,
        Ok(Some(true))
    )
}

impl Inner {
    /// The pull Secret pods of `image` reference (private registries).
    pub(super) fn pull_secret_for(&self, image: &str) -> Option<String> {
        self.settings
            .pull_secret
            .as_ref()
            .map(|secret| secret.name.clone())
            .filter(|_| registry::is_private(image))
    }

    /// What of this runner's settings shapes its pools' pods.
    fn pool_runner(&self) -> String {
        let settings = &self.settings;
        name_key(&[
            &settings.wrapper_image,
            &settings.max_message_bytes.to_string(),
        ])
    }

    /// Which runners keep this runner's pools.
    fn pool_of(&self) -> String {
        match &self.settings.deployment {
            Some(deployment) => label_value(&deployment.uid),
            None => STANDALONE.to_string(),
        }
    }

    /// The name of the pool of `spec`'s pods from `template`: the same in
    /// every runner.
    fn pool_name(&self, spec: &PodSpec, template: &Template) -> String {
        let prespawn = format!("{:?}", spec.prespawn);
        let single_use = if spec.single_use { "single-use" } else { "" };
        let key = self.spec_key(spec, template, &[&prespawn, single_use]);
        service_name(pod_name(&spec.image, &format!("pool-{key}")))
    }

    /// The ReplicaSet of the pool `name`.
    async fn pool_replicaset(
        &self,
        name: &str,
        spec: &PodSpec,
        template: &Template,
    ) -> Result<ReplicaSet, StartError> {
        let settings = &self.settings;
        let entrypoint = self
            .entrypoints
            .of(&spec.image)
            .await
            .map_err(StartError::Entrypoint)?;
        let function_pod = FunctionPod {
            name: name.to_string(),
            namespace: settings.namespace.clone(),
            image: spec.image.clone(),
            entrypoint,
            wrapper_image: settings.wrapper_image.clone(),
            max_message_bytes: settings.max_message_bytes,
            prespawn: spec.prespawn,
            owner: settings.owner.clone(),
            reclaim_after: 0,
            pull_secret: self.pull_secret_for(&spec.image),
            deployment: settings.deployment.clone(),
        };
        let pod = function_pod.pod(template, spec.overrides.as_deref())?;
        // What makes a pod a runner's (its name, owner, reclaim-after,
        // finalizer, owner reference and traffic gate) is set by the
        // claim: an idle pod is the ReplicaSet's, Ready once its wrapper
        // answers.
        let mut meta = pod.metadata;
        meta.name = None;
        meta.namespace = None;
        meta.finalizers = None;
        meta.owner_references = None;
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.remove(OWNER_LABEL);
        labels.remove(POD_LABEL);
        labels.insert(POOL_LABEL.into(), name.into());
        labels.insert(POOL_STATE_LABEL.into(), IDLE.into());
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.remove(RECLAIM_AFTER_ANNOTATION);
        }
        let mut pod_spec = pod.spec;
        if let Some(spec) = pod_spec.as_mut() {
            if let Some(gates) = spec.readiness_gates.as_mut() {
                gates.retain(|g| g.condition_type != lifecycle::SERVING_GATE);
            }
            // The only policy a ReplicaSet takes. A claimed pod whose
            // wrapper dies is restarted in place instead of ending: the
            // wrapper holds nothing between calls, and a single-use pod
            // serves one call anyway.
            spec.restart_policy = Some("Always".into());
        }
        let mut rs_labels = BTreeMap::from([
            (POOL_LABEL.to_string(), name.to_string()),
            (POOL_OF_LABEL.to_string(), self.pool_of()),
            (POOL_RUNNER_LABEL.to_string(), self.pool_runner()),
            (IMAGE_LABEL.to_string(), image_label_value(&spec.image)),
        ]);
        if let Some(deployment) = &settings.deployment {
            rs_labels.insert(DEPLOYMENT_LABEL.into(), label_value(&deployment.uid));
        }
        Ok(ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(settings.namespace.clone()),
                labels: Some(rs_labels),
                annotations: Some(BTreeMap::from([
                    (POOL_IMAGE_ANNOTATION.to_string(), spec.image.clone()),
                    (
                        TEMPLATE_VERSION_ANNOTATION.to_string(),
                        template.version.clone(),
                    ),
                    (
                        POOL_APPLIED_AT_ANNOTATION.to_string(),
                        now_secs().to_string(),
                    ),
                ])),
                owner_references: settings
                    .deployment
                    .as_ref()
                    .and_then(|d| d.reference_from(&settings.namespace))
                    .map(|r| vec![r]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(i32::try_from(spec.idle_pods).unwrap_or(i32::MAX)),
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([
                        (POOL_LABEL.to_string(), name.to_string()),
                        (POOL_STATE_LABEL.to_string(), IDLE.to_string()),
                    ])),
                    ..LabelSelector::default()
                },
                template: Some(PodTemplateSpec {
                    metadata: Some(meta),
                    spec: pod_spec,
                }),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        })
    }

    /// Creates or updates the pool of `spec` (server-side apply): its name.
    async fn apply_pool(&self, spec: &PodSpec, template: &Template) -> Result<String, StartError> {
        let name = self.pool_name(spec, template);
        if self.pools.closed.load(Ordering::Relaxed) {
            return Err(StartError::Ended {
                name,
                reason: "is not applied: the runner stops".into(),
            });
        }
        let replicaset = self.pool_replicaset(&name, spec, template).await?;
        self.pools
            .replicasets
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&replicaset),
            )
            .await
            .map_err(|source| StartError::Api {
                verb: "applying",
                kind: "replicaset",
                name: name.clone(),
                source,
            })?;
        let size = spec.idle_pods as usize;
        let before = self
            .pools
            .applied()
            .insert(name.clone(), (spec.image.clone(), size));
        if before.as_ref().map(|(_, n)| *n) != Some(size) {
            tracing::info!(pool = %name, image = %spec.image, idle_pods = size, "idle pool applied");
        }
        Ok(name)
    }

    /// Makes the pools the FunctionConfigs want, and deletes this runner's
    /// Deployment's that they no longer want. False if something failed
    /// (tried again later).
    pub(super) async fn sync_pools(&self) -> bool {
        let wanted = self
            .pools
            .wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if self.pools.closed.load(Ordering::Relaxed) {
            return true;
        }
        // Nothing wanted, nothing made: no request after the first sync,
        // which looks once for pools left by a configuration since changed.
        let idle = wanted.is_empty() && self.pools.applied().is_empty();
        if idle && self.pools.synced.load(Ordering::Relaxed) {
            return true;
        }
        let template = match self.current_template().await {
            Ok(template) => template,
            Err(err) => {
                tracing::warn!(err = %err, "idle pools: no pod template");
                return false;
            }
        };
        let mut ok = true;
        let mut keep = HashSet::new();
        for spec in &wanted {
            // Kept even if the apply fails: the pool may exist already.
            keep.insert(self.pool_name(spec, &template));
            if let Err(err) = self.apply_pool(spec, &template).await {
                tracing::warn!(image = %spec.image, err = %err, "idle pool not applied");
                ok = false;
            }
        }
        if idle {
            // A runner with no pool may lack the rights (an older RBAC):
            // one look, no retries.
            self.delete_pools_but(&keep).await;
            self.pools.synced.store(true, Ordering::Relaxed);
            return true;
        }
        ok &= self.delete_pools_but(&keep).await;
        self.pools.synced.store(ok, Ordering::Relaxed);
        let metrics = self.pools.metrics.get();
        self.pools.applied().retain(|name, (image, _)| {
            let kept = keep.contains(name);
            if let (false, Some(metrics)) = (kept, metrics) {
                metrics.remove(image);
            }
            kept
        });
        self.publish_pools();
        ok
    }

    /// Deletes the pools of this runner's kind not in `keep` (their idle
    /// pods go with them; claimed pods are no longer theirs): those of its
    /// own settings, and others' no runner applied for [`STALE_AFTER`].
    async fn delete_pools_but(&self, keep: &HashSet<String>) -> bool {
        let runner = self.pool_runner();
        let selector = format!("{POOL_OF_LABEL}={}", self.pool_of());
        let listed = match self
            .pools
            .replicasets
            .list_metadata(&ListParams::default().labels(&selector))
            .await
        {
            Ok(listed) => listed,
            Err(err) => {
                tracing::warn!(err = %one_line(&err), "listing idle pools");
                return false;
            }
        };
        let mut ok = true;
        for rs in listed.items {
            let Some(name) = rs.metadata.name.clone() else {
                continue;
            };
            if keep.contains(&name) || rs.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let same_runner = rs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POOL_RUNNER_LABEL))
                == Some(&runner);
            let applied_at: u64 = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POOL_APPLIED_AT_ANNOTATION))
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let stale = now_secs().saturating_sub(applied_at) > STALE_AFTER.as_secs();
            if !same_runner && !stale {
                continue;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: rs.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            match self.pools.replicasets.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(pool = %name, "idle pool deleted: no FunctionConfig wants it")
                }
                Err(err) if is_not_found(&err) || is_conflict(&err) => {}
                Err(err) => {
                    tracing::warn!(pool = %name, err = %one_line(&err), "deleting an idle pool");
                    ok = false;
                }
            }
        }
        ok
    }

    /// The pools' gauges, from the store: wanted and Ready idle pods; and
    /// the replacement time of each idle pod seen Ready for the first time.
    pub(super) fn publish_pools(&self) {
        let Some(metrics) = self.pools.metrics.get() else {
            return;
        };
        let applied = self.pools.applied().clone();
        let mut idle: HashMap<&str, usize> = HashMap::new();
        let mut seen = self
            .pools
            .seen_ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for pod in self.pools.store.state() {
            let Some(pool) = label(&pod, POOL_LABEL) else {
                continue;
            };
            let Some((name, _)) = applied.get_key_value(pool) else {
                continue;
            };
            if !claimable(&pod, pool) {
                continue;
            }
            *idle.entry(name.as_str()).or_default() += 1;
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if seen.len() > 4096 {
                seen.clear();
            }
            if seen.insert(uid) {
                if let Some(took) = ready_after(&pod) {
                    metrics.replaced(took);
                }
            }
        }
        for (name, (image, size)) in &applied {
            metrics.set(image, *size, idle.get(name.as_str()).copied().unwrap_or(0));
        }
    }

    /// Claims a Ready idle pod of `spec`'s pool: its name, the pod as
    /// claimed, and its template version.
    pub(super) async fn claim(
        &self,
        spec: &PodSpec,
        progress: &mut Progress,
    ) -> Result<(String, Pod, String), Cause> {
        progress.step = "the function pod template";
        let template = self.current_template().await.map_err(cause)?;
        let pool = self.pool_name(spec, &template);
        if !self.pools.applied().contains_key(&pool) {
            progress.step = "the API server to answer the apply of its idle pool";
            self.apply_pool(spec, &template).await.map_err(cause)?;
        }
        progress.step = "a pod of its idle pool to be Ready";
        let metrics = self.pools.metrics.get();
        if let Some(metrics) = metrics {
            metrics.claimed(&spec.image);
        }
        let mut changed = self.pools.changed.clone();
        let mut missed = false;
        loop {
            // The pool's idle pods, whatever their state.
            let pods: Vec<Arc<Pod>> = self
                .pools
                .store
                .state()
                .into_iter()
                .filter(|pod| label(pod, POOL_LABEL) == Some(pool.as_str()))
                .filter(|pod| label(pod, POOL_STATE_LABEL) == Some(IDLE))
                .collect();
            let (mut idle, starting): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = pods
                .iter()
                .filter(|pod| idle_in(pod, &pool))
                .filter(|pod| {
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    !self.held().deleting.contains(uid)
                })
                .cloned()
                .partition(|pod| is_ready(pod));
            // Not Ready yet, but with an address: those whose wrapper answers
            // are claimed without waiting for the kubelet to notice its
            // container running (its relist, up to a second), probe it and
            // write its status.
            let asked = futures::future::join_all(
                starting
                    .iter()
                    .map(|pod| answers(pod_ip(pod).unwrap_or_default())),
            )
            .await;
            let waiting = starting.len() > asked.iter().filter(|a| **a).count();
            idle.extend(
                starting
                    .into_iter()
                    .zip(asked)
                    .filter_map(|(pod, answers)| answers.then_some(pod)),
            );
            // Shuffled: runners claiming at once mostly pick different pods.
            for i in (1..idle.len()).rev() {
                let j = (self.pools.random() % (i as u64 + 1)) as usize;
                idle.swap(i, j);
            }
            for pod in idle {
                if let Some(claimed) = self.claim_one(&pod, spec, &template, progress).await? {
                    let name = claimed.metadata.name.clone().unwrap_or_default();
                    return Ok((name, claimed, template.version.clone()));
                }
            }
            if !missed {
                missed = true;
                if let Some(metrics) = metrics {
                    metrics.missed(&spec.image);
                }
                // Empty: its ReplicaSet may be gone (deleted by a runner that
                // stopped, or by hand): the pools are applied again now.
                if self.pools.told.load(Ordering::Relaxed) {
                    self.pools.resync.notify_one();
                }
            }
            // Pods that will not become Ready by themselves (an image that
            // cannot be pulled, a wrapper that keeps ending): said now.
            // An idle pod whose wrapper ended and was restarted in place
            // never served a call, but counts as ended once claimed: it is
            // deleted, and its ReplicaSet makes another.
            let (restarted, pods): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
                pods.into_iter().partition(|pod| restarted(pod));
            for pod in restarted {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let deleting = self.held().deleting.contains(&uid);
                if pod.metadata.deletion_timestamp.is_none() && !deleting {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    tracing::info!(pod = %name, "deleting an idle pool pod that restarted");
                    self.spawn_delete(name, super::Exactly::Uid(uid));
                }
            }
            let ended: Vec<String> = pods
                .iter()
                .filter_map(|pod| super::terminated(pod))
                .collect();
            if !pods.is_empty() && ended.len() == pods.len() {
                return Err(cause(StartError::Ended {
                    name: pool,
                    reason: format!("(an idle pool) has no pod that can serve: {}", ended[0]),
                }));
            }
            tokio::select! {
                seen = changed.changed() => {
                    if seen.is_err() {
                        return Err(cause(StartError::Ended {
                            name: pool,
                            reason: "was not seen: the pool watch ended".into(),
                        }));
                    }
                }
                // A running pod's wrapper may answer before any event.
                () = tokio::time::sleep(ASK_AGAIN), if waiting => {}
            }
        }
    }

    /// Claims `pod` (resourceVersion precondition); `None` if another
    /// runner was first or it went meanwhile.
    async fn claim_one(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        template: &Template,
        progress: &mut Progress,
    ) -> Result<Option<Pod>, Cause> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let settings = &self.settings;
        let reclaim_after = now_secs().saturating_add(spec.ttl.as_secs());
        let mut labels: Map<String, Value> =
            lifecycle::operation_labels(&self.runner, Some(OpType::Claim));
        labels.insert(POOL_STATE_LABEL.into(), CLAIMED.into());
        labels.insert(OWNER_LABEL.into(), label_value(&settings.owner).into());
        labels.insert(POD_LABEL.into(), name.clone().into());
        let owners: Vec<Value> = settings
            .deployment
            .as_ref()
            .and_then(|d| d.reference_from(&settings.namespace))
            .into_iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect();
        let patch = json!({
            "metadata": {
                "resourceVersion": pod.metadata.resource_version,
                "labels": labels,
                "annotations": {
                    RECLAIM_AFTER_ANNOTATION: reclaim_after.to_string(),
                    TEMPLATE_VERSION_ANNOTATION: template.version,
                },
                "finalizers": [TRAFFIC_FINALIZER],
                "ownerReferences": owners,
            }
        });
        {
            let mut held = self.held();
            if !held.claimed.insert(name.clone()) {
                return Ok(None);
            }
        }
        progress.name = Some(name.clone());
        progress.step = "the API server to answer the claim of an idle pod";
        let claimed = match self
            .pods
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(claimed) => claimed,
            Err(err) if is_conflict(&err) || is_not_found(&err) => {
                tracing::debug!(pod = %name, "claimed by another runner first (or gone)");
                self.held().claimed.remove(&name);
                progress.name = None;
                return Ok(None);
            }
            Err(source) => {
                self.held().claimed.remove(&name);
                progress.name = None;
                return Err(cause(StartError::Api {
                    verb: "claiming",
                    kind: "pod",
                    name,
                    source,
                }));
            }
        };
        // From here on a failed start deletes the pod: it is this runner's.
        progress.created = Some(uid.clone());
        {
            let mut held = self.held();
            held.written.insert(name.clone(), reclaim_after);
            held.declared.insert(name.clone(), lifecycle::now_ns());
        }
        let pool = label(pod, POOL_LABEL).unwrap_or_default();
        self.lifecycle.emit(
            &claimed,
            Phase::Claimed,
            format!("runner {} claimed it from idle pool {pool}", self.runner),
        );
        tracing::info!(pod = %name, pool, "claimed an idle pod");
        // The backend's own watch (of runners' pods) is where the pod's end
        // is seen from now on: wait until it has it.
        progress.step = "the claimed pod to be seen by the pod watch";
        let pod = self.wait_seen(&name, &uid).await.map_err(cause)?;
        Ok(Some(pod))
    }

    /// Waits (on watch events) until the backend's pod watch has the pod
    /// `uid`; fails if it ended.
    async fn wait_seen(&self, name: &str, uid: &str) -> Result<Pod, StartError> {
        let key = self.key(name);
        let mut changed = self.changed.clone();
        loop {
            if let Some(pod) = self.store.get(&key) {
                if pod.metadata.uid.as_deref() == Some(uid) {
                    if let Some(reason) = super::ended(&pod) {
                        return Err(StartError::Ended {
                            name: name.to_string(),
                            reason,
                        });
                    }
                    return Ok((*pod).clone());
                }
            }
            if changed.changed().await.is_err() {
                return Err(StartError::Ended {
                    name: name.to_string(),
                    reason: "was not seen: the pod watch ended".into(),
                });
            }
        }
    }

    /// This runner's pools go with it when no Deployment keeps them.
    pub(super) async fn close_pools(&self) {
        self.pools.closed.store(true, Ordering::Relaxed);
        if self.settings.deployment.is_some() {
            return;
        }
        let names: Vec<String> = self.pools.applied().keys().cloned().collect();
        for name in names {
            match self
                .pools
                .replicasets
                .delete(&name, &DeleteParams::background())
                .await
            {
                Ok(_) => tracing::info!(pool = %name, "idle pool deleted: its runner stops"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => {
                    tracing::warn!(pool = %name, err = %one_line(&err), "deleting an idle pool")
                }
            }
        }
    }

    /// Deletes the pools of a deleted Deployment (uninstall).
    pub(super) async fn uninstall_pools(&self, uid: &str) {
        let selector = format!("{DEPLOYMENT_LABEL}={}", label_value(uid));
        let params = ListParams::default().labels(&selector);
        if let Err(err) = self
            .pools
            .replicasets
            .delete_collection(&DeleteParams::background(), &params)
            .await
        {
            tracing::warn!(err = %one_line(&err), "deleting the Deployment's idle pools");
        }
    }
}

/// Watches the pools' pods into their store, and applies the pools when
/// asked (or again after a failure).
pub(super) fn spawn(inner: &Arc<Inner>) -> (tokio::task::AbortHandle, tokio::task::AbortHandle) {
    let writer = inner
        .pools
        .writer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let stream = with_backoff(pod_watcher(
        inner.pods.clone(),
        watcher::Config::default().labels(POOL_LABEL),
    ));
    let weak = Arc::downgrade(inner);
    let watch = tokio::spawn(async move {
        let Some(writer) = writer else { return };
        let mut events = std::pin::pin!(reflector::reflector(writer, stream));
        while let Some(event) = events.next().await {
            let Some(inner) = weak.upgrade() else { return };
            if let Err(err) = &event {
                tracing::debug!(err = %err, "the idle pools' pod watch");
            }
            inner.pools.tick.send_modify(|n| *n += 1);
            inner.publish_pools();
        }
    });
    let weak = Arc::downgrade(inner);
    let resync = Arc::clone(&inner.pools.resync);
    let sync = tokio::spawn(async move {
        // Nothing is synced before the runner says which pools it wants.
        resync.notified().await;
        loop {
            let Some(inner) = weak.upgrade() else { return };
            let failed = !inner.sync_pools().await;
            drop(inner);
            let period = if failed { RESYNC } else { RESYNC_EVERY };
            let _ = tokio::time::timeout(period, resync.notified()).await;
        }
    });
    (watch.abort_handle(), sync.abort_handle())
}
