//! What the kube backend is told: its namespace, the wrapper, how pods
//! are dialled, its owner, TTL and sweep, the template, the pull Secret,
//! and the Deployment that owns the pods.

use std::time::Duration;

use crate::owner::OwnerDeployment;
use crate::registry::PullSecret;
use crate::source::TemplateChoice;

/// How the runner reaches a function pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dial {
    /// The pod's Service: `<name>.<namespace>.svc.cluster.local:9446`
    /// (service-mesh friendly; needs the cluster's DNS).
    Service,
    /// The pod's IP, straight (no DNS, no kube-proxy).
    PodIp,
}

/// What the kube backend needs to know.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    pub namespace: String,
    /// `WRAPPER_SERVER_IMAGE`: the init container's image.
    pub wrapper_image: String,
    /// Where `wrapper_image` was set (`--wrapper-server-image`, env
    /// `WRAPPER_SERVER_IMAGE`), named when pods cannot pull it.
    pub wrapper_image_source: String,
    pub max_message_bytes: usize,
    pub dial: Dial,
    /// This runner, as a label value: its pods carry it.
    pub owner: String,
    /// The default pod TTL: also how long past its reclaim-after a pod whose
    /// owner is gone is left before another runner deletes it.
    pub ttl: Duration,
    /// How often pods nobody here holds are swept.
    pub scan_interval: Duration,
    /// Where the pod template comes from.
    pub template: TemplateChoice,
    /// The runner's own namespace, where a `--function-pod-template`
    /// ConfigMap lives.
    pub runner_namespace: String,
    /// A pull Secret that pods of images outside the default registry
    /// reference (private registries), made from the registry auth file.
    pub pull_secret: Option<PullSecret>,
    /// The runner's own pod (`POD_NAME`), in `runner_namespace`: its
    /// Deployment owns the function pods ([`crate::owner`]).
    pub runner_pod: Option<String>,
    /// That Deployment, found at start.
    pub deployment: Option<OwnerDeployment>,
    /// The features whose rights the API server grants, found at start.
    pub features: Features,
    /// When, after the start, the function pods that Porch's own runner
    /// left are collected ([`super::leftovers`]); `None`: never.
    pub porch_leftovers_after: Option<Duration>,
    /// Variables every function container gets where its template (or
    /// FunctionConfig) does not set them: the runner's trace settings, so
    /// that the wrappers' spans join the runner's traces.
    pub function_env: Vec<(String, String)>,
}

/// What the runner does beyond what Porch's runner does, each with a right
/// that Porch's own Role (`porch-function-executor`) does not grant: found
/// at start ([`crate::connect`]), so that Porch's RBAC as shipped serves,
/// without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// The readiness gate `fn.kpt.dev/serving` on function pods (`patch
    /// pods/status`); without it a pod's traffic follows its containers.
    pub readiness_gate: bool,
    /// Events on function pods (`create events.events.k8s.io`).
    pub events: bool,
    /// Idle pools, FunctionConfig `idlePods` (`create
    /// replicasets.apps`).
    pub pools: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            readiness_gate: true,
            events: true,
            pools: true,
        }
    }
}
