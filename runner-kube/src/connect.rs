//! The backend's start: its own settings checked, the registries'
//! credentials and CA read, a client for the cluster made, and the runner's
//! Deployment found (its function pods then go with it), and the features
//! its RBAC allows found. A setting that cannot work fails here, before the
//! runner serves.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::entrypoint::Entrypoints;
use crate::owner;
use crate::pods::{Features, KubeBackend, KubeSettings};
use crate::registry::{RegistryError, RegistrySettings};
use crate::template::label_value;

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Settings(&'static str),
    #[error("private registries: {0}")]
    Registry(#[from] RegistryError),
    #[error("connecting to the cluster (KUBECONFIG, or the pod's service account): {0}")]
    Client(#[source] kube::Error),
}

/// The started backend, and its client for whatever else reads the
/// cluster (the FunctionConfig watch).
pub struct Connected {
    pub backend: KubeBackend,
    pub client: Client,
}

/// A client for the cluster (KUBECONFIG, or the pod's service account)
/// whose requests name the runner: kube-rs sends no User-Agent, and an API
/// server's audit log and metrics tell clients apart by it.
async fn client() -> Result<Client, kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("function-runner/", env!("CARGO_PKG_VERSION"))),
    ));
    Client::try_from(config)
}

/// Checks `settings`, reads the registries' credentials and CA, connects
/// to the cluster and starts the backend.
pub async fn connect(
    mut settings: KubeSettings,
    registries: &RegistrySettings,
) -> Result<Connected, ConnectError> {
    if settings.wrapper_image.is_empty() {
        return Err(ConnectError::Settings(
            "the wrapper image is not set (WRAPPER_SERVER_IMAGE or --wrapper-server-image)",
        ));
    }
    if label_value(&settings.owner).is_empty() {
        return Err(ConnectError::Settings(
            "the runner id (--runner-id, HOSTNAME) has no letter or digit: it must label this runner's pods",
        ));
    }
    settings.pull_secret = registries.pull_secret();
    let entrypoints = Entrypoints::with_settings(registries)?;
    let client = client().await.map_err(ConnectError::Client)?;
    if let Some(pod) = &settings.runner_pod {
        match owner::find(&client, &settings.runner_namespace, pod).await {
            Ok(Some(deployment)) => {
                tracing::info!(
                    deployment = %deployment.name,
                    owner_reference = deployment.reference_from(&settings.namespace).is_some(),
                    "function pods belong to the runner's Deployment: they go when it is deleted"
                );
                settings.deployment = Some(deployment);
            }
            Ok(None) => tracing::info!(
                pod = %pod,
                "the runner is not run by a Deployment: its function pods go when it stops"
            ),
            Err(err) => {
                tracing::warn!("{err}: function pods will not go with the runner's Deployment")
            }
        }
    }
    settings.features = features(&client, &settings.namespace).await;
    Ok(Connected {
        backend: KubeBackend::new(client.clone(), settings, entrypoints),
        client,
    })
}

/// A feature beyond Porch's runner: the rights it needs in the pod
/// namespace (verbs, group, resource, subresource), and what goes without
/// it.
struct Needs {
    verbs: &'static [&'static str],
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    without: &'static str,
}

const READINESS_GATE: Needs = Needs {
    verbs: &["patch"],
    group: "",
    resource: "pods",
    subresource: "status",
    without: "the readiness gate fn.kpt.dev/serving is off: a function pod's traffic follows its \
              containers' readiness, and a pod being deleted may still take a call",
};
const EVENTS: Needs = Needs {
    verbs: &["create", "patch"],
    group: "events.k8s.io",
    resource: "events",
    subresource: "",
    without: "Events on function pods are off",
};
const POOLS: Needs = Needs {
    verbs: &["create", "list", "patch", "delete", "deletecollection"],
    group: "apps",
    resource: "replicasets",
    subresource: "",
    without: "idle pools (FunctionConfig idlePods) are off: those functions start their pods on \
              demand",
};

/// The features whose rights the API server grants in `namespace`, asked
/// with SelfSubjectAccessReviews (which every authenticated user may
/// create). One that is refused is off, said once with the rights to
/// grant: Porch's own Role grants none of them, and serves without them.
/// One whose review cannot be made is off too, said: the runner serves
/// without it, where with it every pod start might be refused.
async fn features(client: &Client, namespace: &str) -> Features {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let allowed = |needs: &'static Needs, verb: &'static str| {
        let reviews = reviews.clone();
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(verb.into()),
                        group: Some(needs.group.into()),
                        resource: Some(needs.resource.into()),
                        subresource: (!needs.subresource.is_empty())
                            .then(|| needs.subresource.into()),
                        namespace: Some(namespace.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let params = PostParams::default();
            let create = reviews.create(&params, &review);
            match tokio::time::timeout(REVIEW_TIMEOUT, create).await {
                Ok(Ok(answer)) => Ok(answer.status.is_some_and(|s| s.allowed)),
                Ok(Err(err)) => Err(crate::access::one_line(&err)),
                Err(_) => Err(format!("no answer within {REVIEW_TIMEOUT:?}")),
            }
        }
    };
    let granted = |needs: &'static Needs| async move {
        let answers =
            futures::future::join_all(needs.verbs.iter().map(|verb| allowed(needs, verb))).await;
        let refused: Vec<&str> = needs
            .verbs
            .iter()
            .zip(&answers)
            .filter(|(_, answer)| matches!(answer, Ok(false)))
            .map(|(verb, _)| *verb)
            .collect();
        let resource = match (needs.group, needs.subresource) {
            ("", "") => needs.resource.to_string(),
            ("", sub) => format!("{}/{sub}", needs.resource),
            (group, _) => format!("{}.{group}", needs.resource),
        };
        if let Some(Err(why)) = answers.iter().find(|a| a.is_err()) {
            tracing::warn!(
                "{} (the runner could not ask the API server whether it may {} {resource} in \
                 namespace {namespace}: {why})",
                needs.without,
                needs.verbs.join(", ")
            );
            return false;
        }
        if refused.is_empty() {
            return true;
        }
        tracing::warn!(
            "{} (the runner may not {} {resource} in namespace {namespace}, which Porch's Role \
             porch-function-executor does not grant; deploy/rbac.yaml does)",
            needs.without,
            refused.join(", ")
        );
        false
    };
    let (readiness_gate, events, pools) =
        tokio::join!(granted(&READINESS_GATE), granted(&EVENTS), granted(&POOLS));
    Features {
        readiness_gate,
        events,
        pools,
    }
}

/// How long the API server may take to answer one review at start.
const REVIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pods::Dial;
    use crate::source::TemplateChoice;

    fn settings(wrapper_image: &str, owner: &str) -> KubeSettings {
        KubeSettings {
            namespace: "porch-fn-system".into(),
            wrapper_image: wrapper_image.into(),
            wrapper_image_source: "--wrapper-server-image".into(),
            max_message_bytes: 6_291_456,
            dial: Dial::Service,
            owner: owner.into(),
            ttl: Duration::from_secs(1800),
            scan_interval: Duration::from_secs(60),
            template: TemplateChoice::Default,
            runner_namespace: "porch-system".into(),
            pull_secret: None,
            runner_pod: None,
            deployment: None,
            features: Default::default(),
            porch_leftovers_after: None,
            function_env: Vec::new(),
        }
    }

    async fn refused(settings: KubeSettings, registries: &RegistrySettings) -> String {
        match connect(settings, registries).await {
            Ok(_) => panic!("connected"),
            Err(err) => err.to_string(),
        }
    }

    /// Settings that cannot work fail before any client is made, in this
    /// order: the wrapper image, the runner id, the registries.
    #[tokio::test]
    async fn settings_that_cannot_work_fail_before_the_cluster_is_asked() {
        let none = RegistrySettings::default();
        assert_eq!(
            refused(settings("", "runner-1"), &none).await,
            "the wrapper image is not set (WRAPPER_SERVER_IMAGE or --wrapper-server-image)"
        );
        assert!(refused(settings("w", "--"), &none)
            .await
            .starts_with("the runner id (--runner-id, HOSTNAME) has no letter or digit"));
        let dir = tempfile::tempdir().unwrap();
        let registries = RegistrySettings {
            auth_file: Some(dir.path().join("missing.json")),
            ..RegistrySettings::default()
        };
        let err = refused(settings("w", "runner-1"), &registries).await;
        assert!(err.starts_with("private registries: "), "{err}");
    }
}
