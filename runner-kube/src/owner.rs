//! The Deployment that runs this runner, so that its function pods go with
//! it when it is uninstalled.
//!
//! Found from the runner's own pod (`POD_NAME` from the downward API, in
//! `POD_NAMESPACE`): its controller, a ReplicaSet, and that one's
//! controller, a Deployment. Every function pod then carries the label
//! [`DEPLOYMENT_LABEL`] (the Deployment's uid), whichever replica made it,
//! and, when the pods live in the Deployment's own namespace, an
//! ownerReference to it: Kubernetes' garbage collector deletes them with it
//! (and their Services, which the pods own), even if no runner is left to.
//!
//! Kubernetes has no owner across namespaces (a namespaced owner of another
//! namespace counts as absent, and the collector deletes the dependent at
//! once), so with Porch's layout (runner in `porch-system`, pods in
//! `porch-fn-system`) the runners themselves clean up: a runner told to stop
//! (SIGTERM) whose Deployment is gone, or being deleted, deletes every
//! function pod of that Deployment once its own calls are done, not only its
//! own ([`Retire::Uninstalled`](runner_core::backend::Retire)).
//!
//! A runner not run by a Deployment (a bare pod, a process outside the
//! cluster) finds none and keeps what it did before: its pods go when it
//! stops, or one TTL after, by another runner.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Api, Client};

/// Label on function pods: the uid of the Deployment whose runners made them.
pub const DEPLOYMENT_LABEL: &str = "fn.kpt.dev/runner-deployment";

/// The runner's Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerDeployment {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl OwnerDeployment {
    /// The ownerReference a function pod in `namespace` gets, if Kubernetes
    /// allows one there (the Deployment's own namespace only). Not a
    /// controller, and blocking nothing: the Deployment's deletion does not
    /// wait for the pods (nor needs the right to set finalizers on it).
    pub fn reference_from(&self, namespace: &str) -> Option<OwnerReference> {
        (namespace == self.namespace).then(|| OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        })
    }

    /// Whether the Deployment is gone or going: absent, or being deleted.
    /// Another of its name counts as this one gone unless it now runs this
    /// runner (`runner_pod`): one applied again after a delete that
    /// orphaned the ReplicaSet adopts it, and its runners keep the pods. An
    /// error answers no (an API server that does not answer is no reason to
    /// delete everything).
    pub async fn gone(&self, client: &Client, runner_pod: Option<&str>) -> bool {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &self.namespace);
        let said = |err: &dyn std::fmt::Display| {
            tracing::warn!(deployment = %self.name, %err, "reading the runner's Deployment: its function pods are not deleted with it");
        };
        let found = match deployments.get_opt(&self.name).await {
            Ok(found) => found,
            Err(err) => {
                said(&super::access::one_line(&err));
                return false;
            }
        };
        let Some(found) = found else { return true };
        if found.metadata.deletion_timestamp.is_some() {
            return true;
        }
        if found.metadata.uid.as_deref() == Some(self.uid.as_str()) {
            return false;
        }
        let Some(pod) = runner_pod else { return true };
        match find(client, &self.namespace, pod).await {
            Ok(now) => now.is_none_or(|now| now.uid != found.metadata.uid.unwrap_or_default()),
            Err(err) => {
                said(&err);
                false
            }
        }
    }
}

/// Why the runner's Deployment could not be found.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("reading {what}: {}", super::access::one_line(source))]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// The controller among `meta`'s owners, if it is a `kind`.
fn controller<'a>(meta: &'a ObjectMeta, kind: &str) -> Option<&'a OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == kind)
}

/// The Deployment that runs the pod `pod` of `namespace`, if one does.
pub async fn find(
    client: &Client,
    namespace: &str,
    pod: &str,
) -> Result<Option<OwnerDeployment>, OwnerError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let me = pods.get_opt(pod).await.map_err(|source| OwnerError::Api {
        what: format!("the runner's own pod {namespace}/{pod}"),
        source,
    })?;
    let Some(me) = me else { return Ok(None) };
    let Some(set) = controller(&me.metadata, "ReplicaSet") else {
        return Ok(None);
    };
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let set = sets
        .get_opt(&set.name)
        .await
        .map_err(|source| OwnerError::Api {
            what: format!("the runner's ReplicaSet {namespace}/{}", set.name),
            source,
        })?;
    let Some(set) = set else { return Ok(None) };
    Ok(
        controller(&set.metadata, "Deployment").map(|d| OwnerDeployment {
            namespace: namespace.to_string(),
            name: d.name.clone(),
            uid: d.uid.clone(),
        }),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pod_of_the_deployments_namespace_gets_a_reference() {
        let owner = OwnerDeployment {
            namespace: "porch-system".into(),
            name: "function-runner".into(),
            uid: "1234".into(),
        };
        let reference = owner.reference_from("porch-system").unwrap();
        assert_eq!(
            (
                reference.kind.as_str(),
                reference.name.as_str(),
                reference.uid.as_str()
            ),
            ("Deployment", "function-runner", "1234")
        );
        assert_eq!(reference.block_owner_deletion, Some(false));
        assert_eq!(reference.controller, Some(false));
        // Across namespaces the garbage collector would delete the pod at once.
        assert!(owner.reference_from("porch-fn-system").is_none());
    }
}
