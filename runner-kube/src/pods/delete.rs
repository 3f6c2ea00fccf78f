//! Deleting a pod: only the one meant, by uid or by the version seen
//! (names are shared).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use kube::Api;

use super::failures::{is_conflict, is_not_found};
use super::inner::Inner;
use crate::access::one_line;

/// Which pod of a name a delete may remove: names are shared (a pod
/// deleted and created again keeps its name), so every delete names the uid
/// it means, or the resourceVersion it saw (which also fails the delete if a
/// reuse patch landed since).
pub(super) enum Exactly {
    Uid(String),
    Version(String),
}

/// Deletes a pod (its Service goes with it, by owner reference), only if it
/// is still `exactly` the one meant. False only when the pod surely stays:
/// its precondition failed (another error may hide a delete that landed).
pub(super) async fn delete_pod(pods: &Api<Pod>, name: &str, exactly: Exactly) -> bool {
    let preconditions = match exactly {
        Exactly::Uid(uid) => Preconditions {
            uid: Some(uid),
            resource_version: None,
        },
        Exactly::Version(version) => Preconditions {
            uid: None,
            resource_version: Some(version),
        },
    };
    let params = DeleteParams {
        preconditions: Some(preconditions),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => true,
        Err(err) if is_not_found(&err) => true,
        Err(err) if is_conflict(&err) => {
            tracing::info!(
                pod = name,
                "not deleted: the pod changed meanwhile (another runner uses it)"
            );
            false
        }
        Err(err) => {
            tracing::warn!(pod = name, err = %one_line(&err), "deleting pod");
            true
        }
    }
}

impl Inner {
    /// Deletes the pod in the background, if it is still `exactly` it.
    pub(super) fn spawn_delete(&self, name: String, exactly: Exactly) {
        if let Exactly::Uid(uid) = &exactly {
            self.deleting(uid);
        }
        let pods = self.pods.clone();
        self.deletes.spawn(async move {
            delete_pod(&pods, &name, exactly).await;
        });
    }

    /// Notes that the pod `uid` is being deleted (until its Delete event).
    pub(super) fn deleting(&self, uid: &str) {
        let mut held = self.held();
        // Bounded, should Delete events be missed (a watch gap).
        if held.deleting.len() > 4096 {
            held.deleting.clear();
        }
        held.deleting.insert(uid.to_string());
    }
}
