//! Porch's names on function pods and their Services: namespace, labels,
//! annotations, port and the tools' volume.

/// Namespace of function pods (`--pod-namespace`).
pub const DEFAULT_NAMESPACE: &str = "porch-fn-system";
/// Label on function pods, and the Services' selector: the function image,
/// as a label value.
pub const IMAGE_LABEL: &str = "fn.kpt.dev/image";
/// Label naming one pod, so that its Service selects it alone when a
/// function has several pods.
pub const POD_LABEL: &str = "fn.kpt.dev/pod";
/// Label naming the runner that owns the pod: garbage collection lists only
/// its own, so replicas sharing a namespace never delete each other's pods.
pub const OWNER_LABEL: &str = "fn.kpt.dev/runner";
/// Unix seconds after which an idle pod may be deleted.
pub const RECLAIM_AFTER_ANNOTATION: &str = "fn.kpt.dev/reclaim-after";
/// The template's version (its ConfigMap's or PodTemplate's resourceVersion,
/// `inline` for the built-in one): a pod of another version is replaced
/// once idle.
pub const TEMPLATE_VERSION_ANNOTATION: &str = "fn.kpt.dev/template-version";
/// Function pods hold no state: the cluster autoscaler may evict them.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// The port the wrapper serves on in every function pod.
pub const WRAPPER_PORT: i32 = 9446;
/// The shared volume, and where both containers mount it.
pub const TOOLS_VOLUME: &str = "wrapper-server-tools";
pub const TOOLS_DIR: &str = "/wrapper-server-tools";
