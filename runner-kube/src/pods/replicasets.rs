//! The idle pools' ReplicaSets ([`super::pool`]): applied as the
//! FunctionConfigs want them, deleted when none does (or when the runner
//! or its Deployment goes), and their pods watched into the pools' store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::{reflector, watcher};

use super::events::pod_watcher;
use super::failures::{is_conflict, is_not_found, StartError};
use super::inner::Inner;
use super::naming::{name_key, service_name};
use super::pool::{
    claimable, label, FIELD_MANAGER, IDLE, POOL_APPLIED_AT_ANNOTATION, POOL_IMAGE_ANNOTATION,
    POOL_LABEL, POOL_OF_LABEL, POOL_RUNNER_LABEL, POOL_STATE_LABEL, STALE_AFTER, STANDALONE,
};
use super::reclaim::now_secs;
use crate::access::one_line;
use crate::backoff::with_backoff;
use crate::lifecycle;
use crate::names::{
    IMAGE_LABEL, OWNER_LABEL, POD_LABEL, RECLAIM_AFTER_ANNOTATION, TEMPLATE_VERSION_ANNOTATION,
};
use crate::owner::DEPLOYMENT_LABEL;
use crate::template::{image_label_value, label_value, FunctionPod, Template};
use runner_core::backend::{pod_name, PodSpec};

/// How soon a sync that failed is tried again.
const RESYNC: Duration = Duration::from_secs(10);
/// How often the pools are applied again: a pool deleted by someone else
/// (another runner stopping, a hand) is back within this, or at once when
/// a claim finds it empty.
const RESYNC_EVERY: Duration = Duration::from_secs(60);

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

impl Inner {
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
    pub(super) fn pool_name(&self, spec: &PodSpec, template: &Template) -> String {
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
            readiness_gate: settings.features.readiness_gate,
        };
        let pod = function_pod.pod_with_env(
            template,
            spec.overrides.as_deref(),
            &settings.function_env,
        )?;
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
    pub(super) async fn apply_pool(
        &self,
        spec: &PodSpec,
        template: &Template,
    ) -> Result<String, StartError> {
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
        let metrics = &self.pools.metrics;
        self.pools.applied().retain(|name, (image, _)| {
            let kept = keep.contains(name);
            if !kept {
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
        let metrics = &self.pools.metrics;
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
    // No right to make ReplicaSets (Porch's Role): no pools, and none of
    // their requests either.
    if !inner.settings.features.pools {
        let none = || tokio::spawn(async {}).abort_handle();
        return (none(), none());
    }
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
