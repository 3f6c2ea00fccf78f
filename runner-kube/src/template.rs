//! Function pod templates, and the Pod and Service made from one for each
//! function pod.
//!
//! A function pod is the function's own image with the wrapper put in front
//! of its entrypoint (Porch's contract for templates): the container named
//! `function` gets the function image, and `--port 9446
//! --max-request-body-size N -- ENTRYPOINT...` appended to its args; the
//! template's command starts the wrapper, which an init container installs
//! into a shared emptyDir.
//!
//! Templates come from three places ([`Template`]): the built-in one
//! ([`Template::inline`]); a ConfigMap with keys `template` (a Pod) and
//! `serviceTemplate` (a Service, optional), as Porch's
//! `--function-pod-template`; or a PodTemplate, as newer Porch's
//! `base-pod-template`. The built-in one passes the Pod Security
//! "restricted" profile: functions read stdin and write stdout, and need no
//! privilege, no capability, no API token. FunctionConfig
//! `templateOverrides` are applied on top, as Porch does: each given field
//! replaces the template's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, ExecAction,
    LocalObjectReference, Pod, PodReadinessGate, PodSecurityContext, PodSpec, PodTemplate, Probe,
    SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::lifecycle::{SERVING_GATE, TRAFFIC_FINALIZER};
use crate::names::{
    IMAGE_LABEL, OWNER_LABEL, POD_LABEL, RECLAIM_AFTER_ANNOTATION, SAFE_TO_EVICT_ANNOTATION,
    TEMPLATE_VERSION_ANNOTATION, TOOLS_DIR, TOOLS_VOLUME, WRAPPER_PORT,
};
use runner_core::config::{ContainerOverrides, TemplateOverrides};

/// The template version of the built-in template.
pub const INLINE_TEMPLATE_VERSION: &str = "inline";
/// The container a template must have: it runs the function.
pub const FUNCTION_CONTAINER: &str = "function";
/// The user function containers run as when the template does not say:
/// distroless' `nonroot`, which owns nothing in the image, as restricted
/// pods must not run as root.
const NONROOT: i64 = 65532;

/// Why no pod could be made from a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("{source_name}: {problem}")]
    Invalid {
        source_name: String,
        problem: String,
    },
    #[error("FunctionConfig templateOverrides.{field}: {problem}")]
    Override { field: String, problem: String },
}

/// A pod template (and the Service template that goes with it).
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Where it came from, for messages: `the built-in template`,
    /// `ConfigMap porch-system/NAME`, `PodTemplate porch-fn-system/NAME`.
    pub source: String,
    /// `fn.kpt.dev/template-version`: the source's resourceVersion, or
    /// [`INLINE_TEMPLATE_VERSION`].
    pub version: String,
    pod: Pod,
    service: Service,
    /// Whether the first init container's image becomes the wrapper image
    /// (`WRAPPER_SERVER_IMAGE`): so for the built-in template and for
    /// PodTemplates (newer Porch); a ConfigMap template names its own (older
    /// Porch), and keeps it unless it leaves it empty.
    set_init_image: bool,
}

impl Template {
    /// The built-in template.
    pub fn inline() -> Template {
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
        let pod = Pod {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(
                    SAFE_TO_EVICT_ANNOTATION.to_string(),
                    "true".to_string(),
                )])),
                ..ObjectMeta::default()
            },
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
                    name: FUNCTION_CONTAINER.to_string(),
                    image_pull_policy: Some("IfNotPresent".to_string()),
                    command: Some(vec![format!("{TOOLS_DIR}/wrapper-server")]),
                    ports: Some(vec![ContainerPort {
                        container_port: WRAPPER_PORT,
                        name: Some("grpc".to_string()),
                        ..ContainerPort::default()
                    }]),
                    // As Porch's template: the wrapper's metrics on the
                    // pod's IP, its traces off unless the runner passes its
                    // own settings on (`KubeSettings::function_env`).
                    env: Some(
                        [
                            ("OTEL_METRICS_EXPORTER", "prometheus"),
                            ("OTEL_EXPORTER_PROMETHEUS_HOST", "0.0.0.0"),
                        ]
                        .into_iter()
                        .map(|(name, value)| EnvVar {
                            name: name.to_string(),
                            value: Some(value.to_string()),
                            ..EnvVar::default()
                        })
                        .collect(),
                    ),
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
        };
        Template {
            source: "the built-in template".to_string(),
            version: INLINE_TEMPLATE_VERSION.to_string(),
            pod,
            service: inline_service(),
            set_init_image: true,
        }
    }

    /// A ConfigMap's `template` (a Pod, YAML or JSON) and `serviceTemplate`
    /// (a Service; the built-in one if absent).
    pub fn from_config_map(map: &ConfigMap) -> Result<Template, TemplateError> {
        let source_name = format!(
            "ConfigMap {}/{}",
            map.metadata.namespace.as_deref().unwrap_or_default(),
            map.metadata.name.as_deref().unwrap_or_default()
        );
        let invalid = |problem: String| TemplateError::Invalid {
            source_name: source_name.clone(),
            problem,
        };
        let data = map.data.clone().unwrap_or_default();
        let text = data
            .get("template")
            .ok_or_else(|| invalid("has no key `template` (the function pod template)".into()))?;
        let pod: Pod = serde_yaml_ng::from_str(text)
            .map_err(|err| invalid(format!("key `template` is not a Pod: {err}")))?;
        let service = match data.get("serviceTemplate") {
            None => inline_service(),
            Some(text) => serde_yaml_ng::from_str(text)
                .map_err(|err| invalid(format!("key `serviceTemplate` is not a Service: {err}")))?,
        };
        let template = Template {
            version: map.metadata.resource_version.clone().unwrap_or_default(),
            source: source_name,
            pod,
            service,
            set_init_image: false,
        };
        template.check()?;
        Ok(template)
    }

    /// A PodTemplate's `template`; the Service is the built-in one.
    pub fn from_pod_template(template: &PodTemplate) -> Result<Template, TemplateError> {
        let source_name = format!(
            "PodTemplate {}/{}",
            template.metadata.namespace.as_deref().unwrap_or_default(),
            template.metadata.name.as_deref().unwrap_or_default()
        );
        let spec = template.template.clone().unwrap_or_default();
        let template = Template {
            version: template
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
            source: source_name,
            pod: Pod {
                metadata: spec.metadata.unwrap_or_default(),
                spec: spec.spec,
                ..Pod::default()
            },
            service: inline_service(),
            set_init_image: true,
        };
        template.check()?;
        Ok(template)
    }

    /// This template with the Service of Porch's ServiceTemplate `object`
    /// (`config.porch.kpt.dev/v1alpha1`, its top-level `template`): as
    /// Porch's runner takes it, its spec only (the runner labels the
    /// Service and sets its selector).
    pub fn with_service_template(
        mut self,
        object: &kube::api::DynamicObject,
    ) -> Result<Template, TemplateError> {
        let source_name = format!(
            "ServiceTemplate {}/{}",
            object.metadata.namespace.as_deref().unwrap_or_default(),
            object.metadata.name.as_deref().unwrap_or_default()
        );
        let Some(spec) = object
            .data
            .get("template")
            .and_then(|t| t.get("spec"))
            .cloned()
        else {
            return Err(TemplateError::Invalid {
                source_name,
                problem: "has no template.spec".into(),
            });
        };
        let spec: ServiceSpec =
            serde_json::from_value(spec).map_err(|err| TemplateError::Invalid {
                source_name: source_name.clone(),
                problem: format!("template.spec is not a ServiceSpec: {err}"),
            })?;
        self.service = Service {
            spec: Some(spec),
            ..Service::default()
        };
        self.source = format!("{}, {source_name}", self.source);
        Ok(self)
    }

    /// Whether `other` would make the same pods and Services.
    pub fn same_as(&self, other: &Template) -> bool {
        self.source == other.source
            && self.version == other.version
            && self.service == other.service
    }

    /// Porch's contract: a container named `function`; and, for the
    /// wrapper image to go somewhere, an init container.
    fn check(&self) -> Result<(), TemplateError> {
        let invalid = |problem: &str| TemplateError::Invalid {
            source_name: self.source.clone(),
            problem: problem.to_string(),
        };
        let spec = self
            .pod
            .spec
            .as_ref()
            .ok_or_else(|| invalid("has no spec"))?;
        if !spec.containers.iter().any(|c| c.name == FUNCTION_CONTAINER) {
            return Err(invalid("has no container named `function`"));
        }
        if self.set_init_image && spec.init_containers.as_ref().is_none_or(Vec::is_empty) {
            return Err(invalid(
                "has no init container to run the wrapper image (WRAPPER_SERVER_IMAGE)",
            ));
        }
        Ok(())
    }
}

fn inline_service() -> Service {
    Service {
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
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

/// What one function pod is made of, besides its template.
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
    /// `--prespawn`, passed on to the wrapper when set (FunctionConfig).
    pub prespawn: Option<u32>,
    /// The runner that owns the pod ([`OWNER_LABEL`]).
    pub owner: String,
    /// Unix seconds ([`RECLAIM_AFTER_ANNOTATION`]).
    pub reclaim_after: u64,
    /// A pull Secret the pod references (private registries).
    pub pull_secret: Option<String>,
    /// The Deployment that runs the runner, if one does: labelled, and the
    /// owner where Kubernetes allows ([`super::owner`]).
    pub deployment: Option<super::owner::OwnerDeployment>,
    /// The readiness gate [`SERVING_GATE`] on the pod (where the runner may
    /// set it: `Features::readiness_gate`).
    pub readiness_gate: bool,
}

impl FunctionPod {
    fn labels(&self, base: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
        let mut labels = base.cloned().unwrap_or_default();
        labels.extend([
            (IMAGE_LABEL.to_string(), image_label_value(&self.image)),
            (POD_LABEL.to_string(), self.name.clone()),
            (OWNER_LABEL.to_string(), label_value(&self.owner)),
        ]);
        if let Some(deployment) = &self.deployment {
            labels.insert(
                super::owner::DEPLOYMENT_LABEL.to_string(),
                label_value(&deployment.uid),
            );
        }
        labels
    }

    /// The Pod: `template` with this pod's names, labels, annotations,
    /// images and arguments, then `overrides`.
    pub fn pod(
        &self,
        template: &Template,
        overrides: Option<&TemplateOverrides>,
    ) -> Result<Pod, TemplateError> {
        let mut pod = template.pod.clone();
        let meta = &mut pod.metadata;
        meta.name = Some(self.name.clone());
        meta.generate_name = None;
        meta.namespace = Some(self.namespace.clone());
        meta.labels = Some(self.labels(meta.labels.as_ref()));
        if let Some(reference) = self
            .deployment
            .as_ref()
            .and_then(|d| d.reference_from(&self.namespace))
        {
            meta.owner_references
                .get_or_insert_with(Vec::new)
                .push(reference);
        }
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(
            RECLAIM_AFTER_ANNOTATION.to_string(),
            self.reclaim_after.to_string(),
        );
        annotations.insert(
            TEMPLATE_VERSION_ANNOTATION.to_string(),
            template.version.clone(),
        );
        annotations
            .entry(SAFE_TO_EVICT_ANNOTATION.to_string())
            .or_insert_with(|| "true".to_string());
        // Every function pod, from whichever template: runners hold a
        // deleted pod until its traffic is gone (the finalizer), and switch
        // its traffic through the gate (lifecycle).
        let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == TRAFFIC_FINALIZER) {
            finalizers.push(TRAFFIC_FINALIZER.to_string());
        }
        let invalid = |problem: &str| TemplateError::Invalid {
            source_name: template.source.clone(),
            problem: problem.to_string(),
        };
        let spec = pod.spec.as_mut().ok_or_else(|| invalid("has no spec"))?;
        if let Some(init) = spec.init_containers.as_mut().and_then(|c| c.first_mut()) {
            if template.set_init_image || init.image.as_deref().is_none_or(str::is_empty) {
                init.image = Some(self.wrapper_image.clone());
            }
        }
        let function = spec
            .containers
            .iter_mut()
            .find(|c| c.name == FUNCTION_CONTAINER)
            .ok_or_else(|| invalid("has no container named `function`"))?;
        function.image = Some(self.image.clone());
        let args = function.args.get_or_insert_with(Vec::new);
        args.extend([
            "--port".to_string(),
            WRAPPER_PORT.to_string(),
            "--max-request-body-size".to_string(),
            self.max_message_bytes.to_string(),
        ]);
        if let Some(n) = self.prespawn {
            args.extend(["--prespawn".to_string(), n.to_string()]);
        }
        args.push("--".to_string());
        args.extend(self.entrypoint.iter().cloned());
        if let Some(secret) = &self.pull_secret {
            let secrets = spec.image_pull_secrets.get_or_insert_with(Vec::new);
            if !secrets.iter().any(|s| s.name == *secret) {
                secrets.push(LocalObjectReference {
                    name: secret.clone(),
                });
            }
        }
        if self.readiness_gate {
            let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
            if !gates.iter().any(|g| g.condition_type == SERVING_GATE) {
                gates.push(PodReadinessGate {
                    condition_type: SERVING_GATE.to_string(),
                });
            }
        }
        if let Some(overrides) = overrides {
            apply_overrides(spec, overrides)?;
        }
        Ok(pod)
    }

    /// [`FunctionPod::pod`], with `env` in the function container where it
    /// does not set those variables itself (its template's or its
    /// FunctionConfig's win).
    pub fn pod_with_env(
        &self,
        template: &Template,
        overrides: Option<&TemplateOverrides>,
        env: &[(String, String)],
    ) -> Result<Pod, TemplateError> {
        let mut pod = self.pod(template, overrides)?;
        if env.is_empty() {
            return Ok(pod);
        }
        let function = pod.spec.as_mut().and_then(|spec| {
            spec.containers
                .iter_mut()
                .find(|c| c.name == FUNCTION_CONTAINER)
        });
        if let Some(function) = function {
            let vars = function.env.get_or_insert_with(Vec::new);
            for (name, value) in env {
                if !vars.iter().any(|v| v.name == *name) {
                    vars.push(EnvVar {
                        name: name.clone(),
                        value: Some(value.clone()),
                        ..EnvVar::default()
                    });
                }
            }
        }
        Ok(pod)
    }

    /// The ClusterIP Service in front of this pod alone, on the wrapper's
    /// port: `<name>.<namespace>.svc.cluster.local:9446`.
    pub fn service(&self, template: &Template) -> Service {
        let mut service = template.service.clone();
        service.metadata.name = Some(self.name.clone());
        service.metadata.generate_name = None;
        service.metadata.namespace = Some(self.namespace.clone());
        service.metadata.labels = Some(self.labels(service.metadata.labels.as_ref()));
        let spec = service.spec.get_or_insert_with(ServiceSpec::default);
        spec.selector.get_or_insert_with(BTreeMap::new).extend([
            (IMAGE_LABEL.to_string(), image_label_value(&self.image)),
            (POD_LABEL.to_string(), self.name.clone()),
        ]);
        if spec.ports.as_ref().is_none_or(Vec::is_empty) {
            spec.ports = inline_service().spec.and_then(|s| s.ports);
        }
        service
    }
}

/// Porch's merge: each override given replaces the template's value.
fn apply_overrides(spec: &mut PodSpec, overrides: &TemplateOverrides) -> Result<(), TemplateError> {
    if let Some(account) = &overrides.service_account_name {
        spec.service_account_name = Some(account.clone());
    }
    if let Some(context) = &overrides.security_context {
        spec.security_context = Some(convert("securityContext", context)?);
    }
    if let Some(init) = &overrides.init_container {
        if let Some(container) = spec.init_containers.as_mut().and_then(|c| c.first_mut()) {
            apply_container_overrides(container, init, "initContainer")?;
        }
    }
    if let Some(function) = &overrides.container {
        if let Some(container) = spec
            .containers
            .iter_mut()
            .find(|c| c.name == FUNCTION_CONTAINER)
        {
            apply_container_overrides(container, function, "container")?;
        }
    }
    Ok(())
}

fn apply_container_overrides(
    container: &mut Container,
    overrides: &ContainerOverrides,
    name: &str,
) -> Result<(), TemplateError> {
    if let Some(resources) = &overrides.resources {
        let wanted: k8s_openapi::api::core::v1::ResourceRequirements =
            convert(&format!("{name}.resources"), resources)?;
        let current = container.resources.get_or_insert_with(Default::default);
        if wanted.requests.is_some() {
            current.requests = wanted.requests;
        }
        if wanted.limits.is_some() {
            current.limits = wanted.limits;
        }
    }
    if !overrides.env.is_empty() {
        container.env = Some(convert(&format!("{name}.env"), &overrides.env)?);
    }
    if !overrides.env_from.is_empty() {
        container.env_from = Some(convert(&format!("{name}.envFrom"), &overrides.env_from)?);
    }
    Ok(())
}

/// A FunctionConfig's free-form value as the Kubernetes type it stands for.
fn convert<T: serde::de::DeserializeOwned>(
    field: &str,
    value: &impl serde::Serialize,
) -> Result<T, TemplateError> {
    let problem = |err: serde_json::Error| TemplateError::Override {
        field: field.to_string(),
        problem: err.to_string(),
    };
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(problem)
}

/// A label value for an image reference: labels allow at most 63 of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric, so registries with
/// ports, paths and digests must be folded. The last path segment with its
/// tag is kept readable (`set-namespace_v0.4.1`); a digest is shortened.
pub fn image_label_value(image: &str) -> String {
    let reference = runner_core::image::ImageRef::split(image);
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
