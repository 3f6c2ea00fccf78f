//! A pooled function's start: claiming a Ready idle pod of its pool
//! ([`super::pool`]) instead of creating one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::{json, Map, Value};

use super::delete::Exactly;
use super::failures::{is_conflict, is_not_found, StartError};
use super::inner::Inner;
use super::pool::{idle_in, label, CLAIMED, IDLE, POOL_LABEL, POOL_STATE_LABEL};
use super::readiness::{answers, ended, is_ready, pod_ip, terminated};
use super::reclaim::now_secs;
use super::start::Progress;
use crate::lifecycle::{self, OpType, Phase, TRAFFIC_FINALIZER};
use crate::names::{OWNER_LABEL, POD_LABEL, RECLAIM_AFTER_ANNOTATION, TEMPLATE_VERSION_ANNOTATION};
use crate::template::{label_value, Template};
use runner_core::backend::{cause, Cause, PodSpec};

/// Whether a container of the pod was restarted (only a ReplicaSet's pods
/// are: runners make theirs with `restartPolicy: Never`).
fn restarted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| statuses.iter().any(|c| c.restart_count > 0))
}

/// How often a claim asks a running, not yet Ready pod's wrapper again.
const ASK_AGAIN: Duration = Duration::from_millis(100);
/// How long a claim waits for a starting pod's wrapper to answer before it
/// looks again.
const ANSWER_WITHIN: Duration = Duration::from_millis(500);

impl Inner {
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
        let metrics = &self.pools.metrics;
        metrics.claimed(&spec.image);
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
                    .map(|pod| answers(pod_ip(pod).unwrap_or_default(), ANSWER_WITHIN)),
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
                metrics.missed(&spec.image);
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
                    self.spawn_delete(name, Exactly::Uid(uid));
                }
            }
            let ended: Vec<String> = pods.iter().filter_map(|pod| terminated(pod)).collect();
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
                    if let Some(reason) = ended(&pod) {
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
}
