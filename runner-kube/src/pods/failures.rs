//! How a start fails: what went wrong ([`StartError`]), and what the
//! caller is told of it (a refused right, an image its registry lacks, the
//! wrapper image that cannot be pulled); and the API server's answers that
//! a start, a claim or a delete takes as no failure (a conflict, an
//! absence).

use k8s_openapi::api::core::v1::Pod;

use super::inner::Inner;
use super::naming::MAX_SLOTS;
use super::readiness::is_pull_failure;
use crate::access::one_line;
use crate::entrypoint::EntrypointError;
use runner_core::backend::{cause, BackendError, Cause};

/// 409: another actor made the object first, or changed it since it was
/// read.
pub(super) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409)
}

/// 404: the object is gone.
pub(super) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// Why a Kubernetes pod did not start.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    #[error("the function pod template: {0}")]
    Template(String),
    #[error("{0}")]
    Build(#[from] crate::template::TemplateError),
    #[error("{verb} {kind} {name}: {}", one_line(source))]
    Api {
        verb: &'static str,
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("pod {name} {reason}")]
    Ended { name: String, reason: String },
    #[error("watching the Endpoints of service {name}: {source}")]
    Endpoints {
        name: String,
        #[source]
        source: kube::runtime::wait::Error,
    },
    #[error("service {name} keeps belonging to another pod")]
    ServiceTaken { name: String },
    #[error("{verb} pod {name}: {}", one_line(source))]
    Lifecycle {
        verb: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("all {MAX_SLOTS} pod names of this function are taken by pods that cannot serve")]
    NoFreeName,
    #[error("the template watch ended")]
    TemplateGone,
    #[error("{0}")]
    Entrypoint(#[source] EntrypointError),
}

/// A slot's pod name could not be used: another is tried.
pub(super) struct Taken(pub(super) String);

pub(super) enum Attempt {
    Taken(Taken),
    Failed(Cause),
}

impl<E: Into<StartError>> From<E> for Attempt {
    fn from(err: E) -> Self {
        Attempt::Failed(cause(err.into()))
    }
}

impl Inner {
    /// What a failed start tells the caller: a right the API server refuses
    /// (noted: the backend's readiness goes), an image its registry does not
    /// have (NOT_FOUND, as any unknown function), or the failure itself.
    pub(super) fn start_error(&self, image: String, source: Cause) -> BackendError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&*source);
        while let Some(err) = cause {
            if let Some(api) = err.downcast_ref::<kube::Error>() {
                if self.access.note(api) {
                    return BackendError::Refused {
                        image,
                        detail: format!(
                            "the API server refuses the runner: {source}; the runner reports \
                             NOT_SERVING until it may (deploy/rbac.yaml)"
                        ),
                    };
                }
            }
            if let Some(EntrypointError::NotInRegistry { .. }) = err.downcast_ref() {
                return BackendError::UnknownImage {
                    image,
                    reason: err.to_string(),
                };
            }
            cause = err.source();
        }
        BackendError::StartFailed { image, source }
    }

    /// Why `pod` cannot start if its init container cannot pull its image:
    /// every function pod needs that image (the wrapper), so the message
    /// names it and where it was set rather than only the kubelet's words.
    pub(super) fn wrapper_unpullable(&self, pod: &Pod) -> Option<String> {
        let init = pod.spec.as_ref()?.init_containers.as_ref()?.first()?;
        let image = init.image.as_deref()?;
        let state = pod
            .status
            .as_ref()?
            .init_container_statuses
            .as_ref()?
            .iter()
            .find(|s| s.name == init.name)?
            .state
            .as_ref()?;
        let waiting = state.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        if !is_pull_failure(reason) {
            return None;
        }
        let origin = if image == self.settings.wrapper_image {
            format!(
                "the wrapper image, from {}",
                self.settings.wrapper_image_source
            )
        } else {
            "the function pod template's own init image".to_string()
        };
        Some(format!(
            "cannot pull the image {image:?} of its init container {} ({origin}): {reason}: {}",
            init.name,
            waiting.message.as_deref().unwrap_or("")
        ))
    }
}
