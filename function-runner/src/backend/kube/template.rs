//! The built-in function pod template and the Service in front of each pod.
//!
//! A function pod is the function's own image with the wrapper put in front
//! of its entrypoint: an init container from the wrapper image installs
//! `wrapper-server` and `grpc-health-probe` into an emptyDir, and the
//! function container runs
//! `/wrapper-server-tools/wrapper-server --port 9446 --max-request-body-size N -- ENTRYPOINT...`
//! with the installed probe as its readiness check. The security context
//! passes the Pod Security "restricted" profile: functions read stdin and
//! write stdout, and need no privilege, no capability, no API token.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, ExecAction, Pod,
    PodSecurityContext, PodSpec, Probe, SeccompProfile, SecurityContext, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    IMAGE_LABEL, OWNER_LABEL, POD_LABEL, RECLAIM_AFTER_ANNOTATION, SAFE_TO_EVICT_ANNOTATION,
    TEMPLATE_VERSION_ANNOTATION, TOOLS_DIR, TOOLS_VOLUME, WRAPPER_PORT,
};

/// The template version of the built-in template.
pub const INLINE_TEMPLATE_VERSION: &str = "inline";
/// The user function containers run as when the template does not say:
/// distroless' `nonroot`, which owns nothing in the image, as restricted
/// pods must not run as root.
const NONROOT: i64 = 65532;

/// What one function pod is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionPod {
    /// Pod and Service name: a DNS-1123 label (see `backend::pod_name`).
    pub name: String,
    pub namespace: String,
    /// The function image, as the kubelet pulls it.
    pub image: String,
    /// The function's own entrypoint (the image's Entrypoint, or Cmd), run by
    /// the wrapper once per call.
    pub entrypoint: Vec<String>,
    /// The image with the wrapper and the probe (`WRAPPER_SERVER_IMAGE`).
    pub wrapper_image: String,
    /// `--max-request-body-size`, passed on to the wrapper.
    pub max_message_bytes: usize,
    /// The runner that owns the pod ([`OWNER_LABEL`]).
    pub owner: String,
    /// Unix seconds ([`RECLAIM_AFTER_ANNOTATION`]).
    pub reclaim_after: u64,
    /// [`TEMPLATE_VERSION_ANNOTATION`].
    pub template_version: String,
}

impl FunctionPod {
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (IMAGE_LABEL.to_string(), image_label_value(&self.image)),
            (POD_LABEL.to_string(), self.name.clone()),
            (OWNER_LABEL.to_string(), label_value(&self.owner)),
        ])
    }

    fn metadata(&self, annotations: Option<BTreeMap<String, String>>) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            annotations,
            ..ObjectMeta::default()
        }
    }

    /// The Pod, from the built-in template.
    pub fn pod(&self) -> Pod {
        let tools_mount = VolumeMount {
            name: TOOLS_VOLUME.to_string(),
            mount_path: TOOLS_DIR.to_string(),
            ..VolumeMount::default()
        };
        let locked_down = SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        };
        let mut command = vec![
            format!("{TOOLS_DIR}/wrapper-server"),
            "--port".to_string(),
            WRAPPER_PORT.to_string(),
            "--max-request-body-size".to_string(),
            self.max_message_bytes.to_string(),
            "--".to_string(),
        ];
        command.extend(self.entrypoint.iter().cloned());
        let annotations = BTreeMap::from([
            (
                RECLAIM_AFTER_ANNOTATION.to_string(),
                self.reclaim_after.to_string(),
            ),
            (
                TEMPLATE_VERSION_ANNOTATION.to_string(),
                self.template_version.clone(),
            ),
            (SAFE_TO_EVICT_ANNOTATION.to_string(), "true".to_string()),
        ]);
        Pod {
            metadata: self.metadata(Some(annotations)),
            spec: Some(PodSpec {
                automount_service_account_token: Some(false),
                // A function pod that exits is replaced, not restarted: the
                // runner sees the failure and starts another.
                restart_policy: Some("Never".to_string()),
                security_context: Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    run_as_user: Some(NONROOT),
                    run_as_group: Some(NONROOT),
                    seccomp_profile: Some(SeccompProfile {
                        type_: "RuntimeDefault".to_string(),
                        ..SeccompProfile::default()
                    }),
                    ..PodSecurityContext::default()
                }),
                init_containers: Some(vec![Container {
                    name: "copy-wrapper-server".to_string(),
                    image: Some(self.wrapper_image.clone()),
                    image_pull_policy: Some("IfNotPresent".to_string()),
                    command: Some(vec![
                        "/wrapper-server".to_string(),
                        "install".to_string(),
                        TOOLS_DIR.to_string(),
                    ]),
                    volume_mounts: Some(vec![tools_mount.clone()]),
                    security_context: Some(locked_down.clone()),
                    ..Container::default()
                }]),
                containers: vec![Container {
                    name: "function".to_string(),
                    image: Some(self.image.clone()),
                    image_pull_policy: Some("IfNotPresent".to_string()),
                    command: Some(command),
                    ports: Some(vec![ContainerPort {
                        container_port: WRAPPER_PORT,
                        name: Some("grpc".to_string()),
                        ..ContainerPort::default()
                    }]),
                    readiness_probe: Some(Probe {
                        exec: Some(ExecAction {
                            command: Some(vec![
                                format!("{TOOLS_DIR}/grpc-health-probe"),
                                "-addr".to_string(),
                                format!("localhost:{WRAPPER_PORT}"),
                            ]),
                        }),
                        // The wrapper serves within milliseconds: probe
                        // often, so a cold call waits for the pod, not the
                        // probe's period.
                        period_seconds: Some(1),
                        ..Probe::default()
                    }),
                    volume_mounts: Some(vec![tools_mount]),
                    security_context: Some(locked_down),
                    ..Container::default()
                }],
                volumes: Some(vec![Volume {
                    name: TOOLS_VOLUME.to_string(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    /// The ClusterIP Service in front of this pod alone, on the wrapper's
    /// port: `<name>.<namespace>.svc.cluster.local:9446`.
    pub fn service(&self) -> Service {
        Service {
            metadata: self.metadata(None),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_string()),
                selector: Some(BTreeMap::from([
                    (IMAGE_LABEL.to_string(), image_label_value(&self.image)),
                    (POD_LABEL.to_string(), self.name.clone()),
                ])),
                ports: Some(vec![ServicePort {
                    name: Some("grpc".to_string()),
                    port: WRAPPER_PORT,
                    target_port: Some(IntOrString::Int(WRAPPER_PORT)),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }
}

/// A label value for an image reference: labels allow at most 63 of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric, so registries with
/// ports, paths and digests must be folded. The last path segment with its
/// tag is kept readable (`set-namespace_v0.4.1`); a digest is shortened.
pub fn image_label_value(image: &str) -> String {
    let reference = crate::image::ImageRef::split(image);
    let mut value = reference.last_segment().to_string();
    if let Some(tag) = reference.tag {
        value.push('_');
        value.push_str(tag);
    }
    if let Some(digest) = reference.digest {
        let hex = digest.rsplit(':').next().unwrap_or(digest);
        value.push('_');
        value.extend(hex.chars().take(12));
    }
    label_value(&value)
}

/// `text` as a valid label value: other characters become `-`, at most 63,
/// alphanumeric at both ends (empty if nothing is left).
pub fn label_value(text: &str) -> String {
    let folded: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    folded
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
