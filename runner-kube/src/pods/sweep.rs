//! The sweep, every scan interval: expired pods nobody holds, operation
//! refreshes, finalizers left behind.

use super::delete::Exactly;
use super::inner::{owner_of, Inner};
use super::readiness::ended;
use super::reclaim::{now_secs, reclaim_after};
use crate::lifecycle::{self, Phase};

impl Inner {
    /// Deletes, from the store's view, the pods nobody here holds that are
    /// due: this runner's own once expired or ended, another's once a TTL
    /// past its reclaim-after (its owner is gone).
    ///
    /// Also the lifecycle's clock: this runner's operations on the pods it
    /// holds are refreshed (every tenth of the TTL), and deleted pods whose
    /// runners' operations went stale lose their finalizer.
    pub(super) fn sweep(&self) {
        let now = now_secs();
        let grace = self.settings.ttl.as_secs();
        let (claimed, refresh) = {
            let held = self.held();
            let due = lifecycle::now_ns().saturating_sub(self.stale().as_nanos() / 10);
            let refresh: Vec<(String, String)> = held
                .ready
                .iter()
                .filter(|name| held.declared.get(*name).is_some_and(|at| *at <= due))
                .filter(|name| !held.operating.contains(*name))
                .filter_map(|name| Some((name.clone(), held.uids.get(name)?.clone())))
                .collect();
            (held.claimed.clone(), refresh)
        };
        for (name, uid) in refresh {
            self.held().operating.insert(name.clone());
            let this = self.detached();
            let seen = self.store.get(&self.key(&name)).map(|p| (*p).clone());
            tokio::spawn(async move {
                this.refresh(&name, &uid, seen).await;
                this.held().operating.remove(&name);
            });
        }
        for pod in self.store.state() {
            let Some(name) = pod.metadata.name.clone() else {
                continue;
            };
            self.unprotect_if_due(&pod);
            if claimed.contains(&name) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let expiry = reclaim_after(&pod).unwrap_or(0);
            let due = if self.mine(&pod) {
                expiry <= now || ended(&pod).is_some()
            } else {
                expiry.saturating_add(grace) <= now
            };
            // Never a pod another live runner has in rotation.
            if due && self.serving_elsewhere(&pod).is_none() {
                let why = if self.mine(&pod) {
                    "idle past its TTL, nobody holds it"
                } else {
                    "its owner is gone (no reuse for a TTL past its reclaim-after)"
                };
                tracing::info!(pod = %name, owner = owner_of(&pod).unwrap_or(""), why, "deleting a pod nobody holds");
                self.lifecycle.emit(
                    &pod,
                    Phase::Deleted,
                    format!("runner {} deletes it: {why}", self.runner),
                );
                let version = pod.metadata.resource_version.clone().unwrap_or_default();
                self.spawn_delete(name, Exactly::Version(version));
            }
        }
    }
}
