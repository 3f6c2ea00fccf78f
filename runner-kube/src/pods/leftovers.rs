//! The function pods and Services that Porch's own runner left behind when
//! this one replaced it. Porch's runner keeps what it knows of its pods in
//! memory only, and labels them `fn.kpt.dev/image: <pod id>` with no runner
//! of ours (`fn.kpt.dev/runner`); its Service for each is named after that
//! pod id and carries no label. Once its replica is gone no one uses or
//! deletes them, so this runner collects them, once, a while after it
//! starts: long enough for a rolling update's old replica (Porch's) to have
//! finished its calls and ended, since its termination grace is 30 s.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, ListParams};
use kube::Api;

use super::pool::POOL_LABEL;
use crate::names::{IMAGE_LABEL, OWNER_LABEL};

/// Bound on the whole collection.
const COLLECT_WITHIN: Duration = Duration::from_secs(60);

/// The selector of Porch's function pods: the image label, and neither a
/// runner of ours nor an idle pool of ours.
pub fn selector() -> String {
    format!("{IMAGE_LABEL},!{OWNER_LABEL},!{POOL_LABEL}")
}

/// Deletes Porch's function pods in the namespace and their Services (a
/// Service of that name that carries labels is not Porch's, and stays);
/// how many pods went.
pub async fn collect(pods: &Api<Pod>, services: &Api<Service>) -> Result<usize, kube::Error> {
    let listed = pods
        .list_metadata(&ListParams::default().labels(&selector()))
        .await?;
    let mut collected = 0;
    let mut service_names = std::collections::BTreeSet::new();
    for pod in listed.items {
        let Some(name) = pod.metadata.name else {
            continue;
        };
        if let Some(id) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(IMAGE_LABEL))
        {
            service_names.insert(id.clone());
        }
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match pods.delete(&name, &DeleteParams::default()).await {
            Ok(_) => collected += 1,
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    for name in service_names {
        match services.get_opt(&name).await? {
            Some(service)
                if service
                    .metadata
                    .labels
                    .as_ref()
                    .is_none_or(|labels| labels.is_empty()) =>
            {
                match services.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(err) => return Err(err),
                }
            }
            _ => {}
        }
    }
    Ok(collected)
}

/// Runs [`collect`] once, `after` from now, and says what it did.
pub fn spawn(pods: Api<Pod>, services: Api<Service>, after: Duration) -> tokio::task::AbortHandle {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        match tokio::time::timeout(COLLECT_WITHIN, collect(&pods, &services)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(
                pods = n,
                "deleted the function pods (and their Services) that Porch's runner left"
            ),
            Ok(Err(err)) => tracing::warn!(
                err = %crate::access::one_line(&err),
                "collecting the function pods that Porch's runner left"
            ),
            Err(_) => tracing::warn!(
                "collecting the function pods that Porch's runner left: no end within {COLLECT_WITHIN:?}"
            ),
        }
    })
    .abort_handle()
}
