//! A pod's reclaim-after (unix seconds): until when its runners want it,
//! moved on reuse; the sweep deletes a pod nobody holds past it.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};

use super::failures::is_not_found;
use super::inner::Inner;
use crate::access::one_line;
use crate::names::RECLAIM_AFTER_ANNOTATION;

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(super) fn reclaim_after(pod: &Pod) -> Option<u64> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(RECLAIM_AFTER_ANNOTATION)?
        .parse()
        .ok()
}

impl Inner {
    /// Records a reuse on the pod's reclaim-after, in the background, when
    /// it moves by more than a tenth of the TTL (a minute at most): other
    /// runners and later runs read it; this runner keeps its own clock.
    pub(super) fn reused(&self, name: &str, ttl: Duration) {
        self.extend(name, ttl, false);
    }

    /// [`Inner::reused`]; with `force`, past what is recorded even if by
    /// less than the slack.
    pub(super) fn extend(&self, name: &str, ttl: Duration, force: bool) {
        let mut wanted = now_secs().saturating_add(ttl.as_secs());
        let slack = (ttl.as_secs() / 10).clamp(1, 60);
        // The path of nearly every hand-out: one lock, one lookup.
        if !force
            && self
                .held()
                .known
                .get(name)
                .is_some_and(|known| wanted < known.saturating_add(slack))
        {
            return;
        }
        let recorded = self
            .store
            .get(&self.key(name))
            .and_then(|pod| reclaim_after(&pod));
        {
            let mut held = self.held();
            let recorded = recorded.max(held.written.get(name).copied()).unwrap_or(0);
            if force {
                wanted = wanted.max(recorded.saturating_add(1));
            } else if wanted < recorded.saturating_add(slack) {
                if held.ready.contains(name) {
                    held.known.insert(name.to_string(), recorded);
                }
                return;
            }
            if !held.patching.insert(name.to_string()) {
                return;
            }
        }
        let pods = self.pods.clone();
        let name = name.to_string();
        let patch = serde_json::json!({
            "metadata": {"annotations": {RECLAIM_AFTER_ANNOTATION: wanted.to_string()}}
        });
        let held = Arc::clone(&self.held);
        tokio::spawn(async move {
            let result = pods
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
            held.patching.remove(&name);
            match result {
                Ok(_) => {
                    let written = held.written.entry(name.clone()).or_insert(0);
                    *written = (*written).max(wanted);
                    if held.ready.contains(&name) {
                        let known = held.known.entry(name).or_insert(0);
                        *known = (*known).max(wanted);
                    }
                }
                Err(err) if is_not_found(&err) => {}
                Err(err) => {
                    tracing::warn!(pod = %name, err = %one_line(&err), "extending the pod's reclaim-after")
                }
            }
        });
    }
}
