//! The lifecycle's side of the kube backend (seed 004; the labels, gate,
//! finalizer and events themselves are in [`crate::lifecycle`]):
//! how this runner reads other runners' operations, lets go of a pod,
//! drains and deletes one it owns, and frees deleted pods of their
//! finalizer.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::delete::{delete_pod, Exactly};
use super::failures::{Attempt, StartError, Taken};
use super::inner::{owner_of, Held, Inner};
use crate::access::one_line;
use crate::lifecycle::{self, Events, OpType, Outcome, Phase};
use crate::owner::{OwnerDeployment, DEPLOYMENT_LABEL};
use crate::template::label_value;
use runner_core::backend::{Retire, StopReason};

/// What the lifecycle's requests need of the runner, cloned into the
/// background tasks that send them.
#[derive(Clone)]
pub(super) struct Detached {
    pods: Api<Pod>,
    held: Arc<Mutex<Held>>,
    runner: String,
    stale: Duration,
    lifecycle: Events,
}

/// A live runner other than `runner` that has the pod in rotation (a
/// `serve` operation, or one this version does not know).
pub(super) fn serving_elsewhere(pod: &Pod, runner: &str, stale: Duration) -> Option<String> {
    lifecycle::live_operations(pod, runner, stale)
        .into_iter()
        .find(|op| !matches!(op.kind, Some(OpType::Drain | OpType::Delete)))
        .map(|op| op.runner)
}

impl Detached {
    /// The same, counting every other runner's operation as stale: for an
    /// uninstall, where they are all going.
    pub(super) fn forced(mut self) -> Self {
        self.stale = Duration::ZERO;
        self
    }

    pub(super) fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Withdraws this runner's operation from the pod and, when the pod is
    /// being deleted and no other live runner has it in rotation, the
    /// finalizer too, in one patch. `released`: why this runner lets go of
    /// the pod (an event says so).
    pub(super) async fn withdraw(
        &self,
        name: &str,
        uid: &str,
        seen: Option<Pod>,
        released: Option<&str>,
    ) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (own, finalizer) = (AtomicBool::new(false), AtomicBool::new(false));
        let decide = |pod: &Pod| {
            let mine = lifecycle::own_operation(pod, &self.runner).is_some();
            let unprotect = pod.metadata.deletion_timestamp.is_some()
                && lifecycle::protected(pod)
                && serving_elsewhere(pod, &self.runner, self.stale).is_none();
            own.store(mine, Ordering::Relaxed);
            finalizer.store(unprotect, Ordering::Relaxed);
            if !mine && !unprotect {
                return Ok(None);
            }
            let mut meta = serde_json::Map::new();
            if mine {
                meta.insert(
                    "labels".into(),
                    lifecycle::operation_labels(&self.runner, None).into(),
                );
            }
            if unprotect {
                let rest: Vec<&String> = pod
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .filter(|f| *f != lifecycle::TRAFFIC_FINALIZER)
                    .collect();
                meta.insert("finalizers".into(), serde_json::json!(rest));
            }
            Ok(Some(meta))
        };
        match lifecycle::patch_meta(&self.pods, name, uid, seen, decide).await {
            Ok(Outcome::Done(pod)) => {
                if let (true, Some(why)) = (own.load(Ordering::Relaxed), released) {
                    self.lifecycle.emit(
                        &pod,
                        Phase::Released,
                        format!("runner {} no longer hands it out: {why}", self.runner),
                    );
                }
                if finalizer.load(Ordering::Relaxed) {
                    tracing::info!(pod = %name, "no runner has the pod in rotation: finalizer removed");
                    self.lifecycle.emit(
                        &pod,
                        Phase::Unprotected,
                        format!(
                            "no runner has it in rotation: runner {} removed the finalizer {}",
                            self.runner,
                            lifecycle::TRAFFIC_FINALIZER
                        ),
                    );
                }
            }
            Ok(Outcome::Gone) => {}
            Ok(Outcome::Refused(why)) => {
                tracing::warn!(pod = %name, %why, "withdrawing this runner's operation")
            }
            Err(err) => {
                tracing::warn!(pod = %name, err = %one_line(&err), "withdrawing this runner's operation")
            }
        }
    }

    /// Takes the finalizer off a deleted pod that no live runner has in
    /// rotation (and this runner's own operation, left from an earlier run).
    pub(super) async fn unprotect(&self, name: &str, uid: &str, seen: Option<Pod>) {
        self.withdraw(name, uid, seen, None).await;
    }

    /// Refreshes this runner's `serve` operation on a pod it holds, so that
    /// other runners see it live.
    pub(super) async fn refresh(&self, name: &str, uid: &str, seen: Option<Pod>) {
        let decide = |_: &Pod| {
            Ok(Some(lifecycle::declaring(
                &self.runner,
                Some(OpType::Serve),
            )))
        };
        let now = lifecycle::now_ns();
        match lifecycle::patch_meta(&self.pods, name, uid, seen, decide).await {
            Ok(Outcome::Done(_)) => {
                self.held().declared.insert(name.to_string(), now);
            }
            Ok(Outcome::Gone | Outcome::Refused(_)) => {}
            Err(err) => {
                tracing::warn!(pod = %name, err = %one_line(&err), "refreshing this runner's operation")
            }
        }
    }
}

/// How long an uninstall waits for the calls other runners still run on a
/// pod before it deletes the pod (their wrapper drains them then).
const UNINSTALL_DRAIN: Duration = Duration::from_secs(10);

impl Inner {
    /// The runner's Deployment is gone: every function pod of it goes, not
    /// only this runner's (the others' runners are stopping too, and no
    /// runner of it is left to delete them later). Each is drained first, so
    /// the calls other replicas still run on it end; one already being
    /// deleted (by the garbage collector, when it owns the pod) only loses
    /// its finalizer once out of rotation.
    pub(super) async fn uninstall(&self, deployment: &OwnerDeployment) {
        // Its idle pools first: no pod of theirs is made meanwhile.
        self.uninstall_pools(&deployment.uid).await;
        let uid = label_value(&deployment.uid);
        let ours: Vec<Arc<Pod>> = self
            .store
            .state()
            .into_iter()
            .filter(|pod| {
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(DEPLOYMENT_LABEL))
                    == Some(&uid)
            })
            .collect();
        if ours.is_empty() {
            return;
        }
        tracing::info!(
            deployment = %deployment.name,
            pods = ours.len(),
            "the runner's Deployment is deleted: deleting its function pods"
        );
        let reason = StopReason::Idle(Retire::Uninstalled);
        futures::future::join_all(ours.into_iter().map(|pod| async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                self.detached()
                    .forced()
                    .unprotect(&name, &uid, Some((*pod).clone()))
                    .await;
            } else {
                self.drain_and_delete(&name, &uid, (*pod).clone(), reason)
                    .await;
            }
        }))
        .await;
    }

    /// How long an operation of a runner that stopped refreshing it still
    /// counts: a runner refreshes its operations every tenth of this.
    pub(super) fn stale(&self) -> Duration {
        self.settings.ttl.max(Duration::from_secs(1))
    }

    /// Why the pod is being taken away from its runners, if it is: it is
    /// being deleted, or another runner drains it.
    pub(super) fn taken_away(&self, pod: &Pod) -> Option<String> {
        if pod.metadata.deletion_timestamp.is_some() {
            return Some("is being deleted".into());
        }
        lifecycle::draining(pod, &self.runner, self.stale())
    }

    /// Whether a live runner other than this one has the pod in rotation
    /// (a `serve` operation, or one this version does not know).
    pub(super) fn serving_elsewhere(&self, pod: &Pod) -> Option<String> {
        serving_elsewhere(pod, &self.runner, self.stale())
    }

    /// Tells the cache, once, that a handed-out pod is being taken away:
    /// no new call goes to it, and it is let go once its calls are done.
    pub(super) fn report_taken(&self, name: &str, uid: Option<&str>, why: &str) {
        {
            let mut held = self.held();
            let same = match (uid, held.uids.get(name)) {
                (Some(seen), Some(held)) => seen == held,
                _ => false,
            };
            if !same || !held.ready.contains(name) || !held.taken.insert(name.to_string()) {
                return;
            }
        }
        tracing::info!(pod = %name, %why, "the pod is being taken away: no new call goes to it");
        self.report_stale(name.to_string(), Retire::TakenAway);
    }

    /// Removes the finalizer of a deleted pod that no live runner has in
    /// rotation, in the background: its owner does, or any runner once the
    /// owner declares nothing live (it is gone). A pod this runner still
    /// holds is released first (its release takes the finalizer off).
    pub(super) fn unprotect_if_due(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_none() || !lifecycle::protected(pod) {
            return;
        }
        let (Some(name), Some(uid)) = (pod.metadata.name.clone(), pod.metadata.uid.clone()) else {
            return;
        };
        if self.held().uids.get(&name) == Some(&uid) {
            return;
        }
        if !self.mine(pod) {
            let owner = owner_of(pod).unwrap_or_default();
            let owner_live = lifecycle::live_operations(pod, &self.runner, self.stale())
                .iter()
                .any(|op| op.runner == owner);
            if owner_live {
                return;
            }
        }
        if self.serving_elsewhere(pod).is_some() || !self.held().unprotecting.insert(uid.clone()) {
            return;
        }
        let this = self.detached();
        let pod = pod.clone();
        // With the deletes: the backend's close waits for them before it
        // flushes the last events, so this one's TrafficGone is told too.
        self.deletes.spawn(async move {
            this.unprotect(&name, &uid, Some(pod)).await;
            this.held().unprotecting.remove(&uid);
        });
    }

    /// What a background task needs of this runner.
    pub(super) fn detached(&self) -> Detached {
        Detached {
            pods: self.pods.clone(),
            held: Arc::clone(&self.held),
            runner: self.runner.clone(),
            stale: self.stale(),
            lifecycle: self.lifecycle.clone(),
        }
    }

    /// Deletes an idle pod of this runner as seed 004 has it: declares the
    /// drain, switches its traffic off (other runners see the gate and take
    /// it out of rotation), waits until no other live runner declares a
    /// `serve` operation on it, declares the delete, deletes it at the
    /// version seen, and takes the finalizer off. Another runner taking the
    /// pod into rotation before the drain is declared makes this a release.
    pub(super) async fn drain_and_delete(
        &self,
        name: &str,
        uid: &str,
        pod: Pod,
        reason: StopReason,
    ) {
        let why = reason.describe();
        let must_go = matches!(
            reason,
            StopReason::Idle(Retire::TemplateChanged | Retire::Uninstalled)
        );
        // Uninstalled: every runner of the Deployment is going (one killed
        // earlier may still look live for a TTL), and none is left to
        // delete the pod later: it goes after a short wait for the calls
        // still on it, whoever declares them.
        let force = reason == StopReason::Idle(Retire::Uninstalled);
        let this = self.detached();
        let declare = |op: OpType| {
            move |pod: &Pod| {
                if let Some(other) = serving_elsewhere(pod, &self.runner, self.stale()) {
                    if !force && (!must_go || op == OpType::Delete) {
                        return Err(format!("runner {other} uses it"));
                    }
                }
                Ok(Some(lifecycle::declaring(&self.runner, Some(op))))
            }
        };
        let pod = match lifecycle::patch_meta(
            &self.pods,
            name,
            uid,
            Some(pod),
            declare(OpType::Drain),
        )
        .await
        {
            Ok(Outcome::Done(pod)) => pod,
            Ok(Outcome::Gone) => return,
            Ok(Outcome::Refused(used)) => {
                tracing::info!(pod = %name, %used, "not deleted: left to the runner that uses it");
                this.withdraw(name, uid, None, Some(why)).await;
                return;
            }
            Err(err) => {
                tracing::warn!(pod = %name, err = %one_line(&err), "declaring the drain of the pod; it stays");
                return;
            }
        };
        self.lifecycle.emit(
            &pod,
            Phase::Draining,
            format!(
                "runner {} switches its traffic off to delete it: {why}",
                self.runner
            ),
        );
        if lifecycle::has_gate(&pod) {
            let off = lifecycle::set_gate(&self.pods, name, uid, Some(*pod), false, why).await;
            match off {
                Ok(Outcome::Done(_)) => {}
                Ok(Outcome::Gone) => return,
                // Deleted all the same: other runners' calls on it are
                // answered as the wrapper drains (they see the delete).
                Ok(Outcome::Refused(err)) => {
                    tracing::warn!(pod = %name, %err, "switching the pod's traffic off")
                }
                Err(err) => {
                    tracing::warn!(pod = %name, err = %one_line(&err), "switching the pod's traffic off")
                }
            }
        }
        // Other runners take it out of rotation once their calls on it are
        // done; one that died stops counting a TTL after its last refresh.
        let wait = if force {
            UNINSTALL_DRAIN
        } else {
            self.stale() + Duration::from_secs(1)
        };
        let drained = tokio::time::timeout(wait, self.wait_unserved(name, uid)).await;
        if drained.is_err() && !force {
            tracing::warn!(pod = %name, "other runners still declare calls on the pod a TTL on; deleting it");
        }
        let pod = match lifecycle::patch_meta(&self.pods, name, uid, None, declare(OpType::Delete))
            .await
        {
            Ok(Outcome::Done(pod)) => pod,
            Ok(Outcome::Gone) => return,
            Ok(Outcome::Refused(used)) => {
                tracing::info!(pod = %name, %used, "not deleted: another runner took it into rotation");
                this.withdraw(name, uid, None, Some(why)).await;
                return;
            }
            Err(err) => {
                tracing::warn!(pod = %name, err = %one_line(&err), "declaring the delete of the pod; it stays");
                return;
            }
        };
        // By uid, not by version: the kubelet turns the pod not Ready now
        // that its traffic is off, which moves its version; and no runner
        // takes a pod into rotation while a live delete is declared on it.
        self.deleting(uid);
        if !delete_pod(&self.pods, name, Exactly::Uid(uid.to_string())).await {
            self.held().deleting.remove(uid);
            return;
        }
        self.lifecycle.emit(
            &pod,
            Phase::Deleted,
            format!("runner {} deleted it: {why}", self.runner),
        );
        // Uninstalled: the finalizer goes whoever still declares the pod
        // (no runner of the Deployment is left to take it off later).
        let this = if force { this.forced() } else { this };
        this.unprotect(name, uid, None).await;
    }

    /// Sets the pod's traffic gate True.
    pub(super) async fn switch_on(&self, name: &str, uid: &str, seen: Pod) -> Result<(), Attempt> {
        let set = lifecycle::set_gate(
            &self.pods,
            name,
            uid,
            Some(seen),
            true,
            &format!("runner {} switched its traffic on", self.runner),
        )
        .await
        .map_err(|source| StartError::Lifecycle {
            verb: "switching on the traffic of",
            name: name.to_string(),
            source,
        })?;
        match set {
            Outcome::Done(_) => Ok(()),
            Outcome::Gone => Err(Attempt::Taken(Taken("deleted meanwhile".into()))),
            Outcome::Refused(why) => Err(Attempt::Taken(Taken(why))),
        }
    }

    /// Resolves once no live runner but this one declares a `serve`
    /// operation on the pod (or the pod is gone).
    pub(super) async fn wait_unserved(&self, name: &str, uid: &str) {
        let key = self.key(name);
        let mut changed = self.changed.clone();
        // Operations go stale with time, not with an event: look again
        // every tenth of the TTL too.
        let tick = (self.stale() / 10).max(Duration::from_millis(100));
        loop {
            let Some(pod) = self.store.get(&key) else {
                return;
            };
            if pod.metadata.uid.as_deref() != Some(uid) || self.serving_elsewhere(&pod).is_none() {
                return;
            }
            tokio::select! {
                changed = changed.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(tick) => {}
            }
        }
    }
}
