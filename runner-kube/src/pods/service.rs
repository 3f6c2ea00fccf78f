//! Each pod's ClusterIP Service.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams, Preconditions};

use super::failures::{is_conflict, is_not_found, Attempt, StartError};
use super::inner::Inner;
use crate::template::{FunctionPod, Template};

impl Inner {
    /// Creates the pod's Service, owned by the pod: Kubernetes deletes it
    /// with the pod, whoever deletes the pod, even if this runner dies
    /// between the two creates. A Service of that name owned by an older
    /// pod of the same name (not yet collected) is replaced.
    pub(super) async fn ensure_service(
        &self,
        fp: &FunctionPod,
        template: &Template,
        pod_uid: &str,
    ) -> Result<(), Attempt> {
        let name = &fp.name;
        let mut service = fp.service(template);
        service.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".to_string(),
            kind: "Pod".to_string(),
            name: name.clone(),
            uid: pod_uid.to_string(),
            ..OwnerReference::default()
        }]);
        let api_error = |verb, source| StartError::Api {
            verb,
            kind: "service",
            name: name.clone(),
            source,
        };
        for _ in 0..3 {
            match self.services.create(&PostParams::default(), &service).await {
                Ok(_) => return Ok(()),
                Err(err) if is_conflict(&err) => {
                    let existing = self
                        .services
                        .get_opt(name)
                        .await
                        .map_err(|source| api_error("reading", source))?;
                    let Some(existing) = existing else { continue };
                    let owned = existing
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == pod_uid);
                    if owned {
                        return Ok(());
                    }
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: existing.metadata.uid.clone(),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    match self.services.delete(name, &params).await {
                        Ok(_) => {}
                        Err(err) if is_not_found(&err) || is_conflict(&err) => {}
                        Err(source) => return Err(api_error("deleting", source).into()),
                    }
                }
                Err(source) => return Err(api_error("creating", source).into()),
            }
        }
        Err(StartError::ServiceTaken { name: name.clone() }.into())
    }
}
