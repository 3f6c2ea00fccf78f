//! What the cache is told: its own settings (Porch's defaults), and a
//! FunctionConfig's overrides for one image.

use std::sync::Arc;
use std::time::Duration;

/// Cache-wide settings; each defaults to Porch's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// Pod time to live after its last hand-out (Porch: 30m).
    pub default_ttl: Duration,
    /// Period of the garbage collection scan (Porch: 1m).
    pub scan_interval: Duration,
    /// How long a pod may take to become ready (Porch: 60s).
    pub ready_timeout: Duration,
    /// Most pods per function image, pods still starting included (Porch: 1).
    pub max_parallel_pods_per_function: usize,
    /// Preferred most callers per pod before another pod is started (Porch: 2).
    pub max_waitlist_length: usize,
    /// Most pods of all functions together, starting ones included
    /// (`--max-pods`): past it, idle pods are stopped least recently used
    /// first to make room; with none idle, the call is refused.
    pub max_pods: usize,
}

/// `--max-pods`' default: far more functions than a pipeline calls, few
/// enough that callers naming new images cannot exhaust the machine.
pub const DEFAULT_MAX_PODS: usize = 100;

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            default_ttl: Duration::from_secs(30 * 60),
            scan_interval: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(60),
            max_parallel_pods_per_function: 1,
            max_waitlist_length: 2,
            max_pods: DEFAULT_MAX_PODS,
        }
    }
}

/// Per-image overrides, from a FunctionConfig's `podExecutor`. `None` falls
/// back to [`CacheSettings`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRequestSettings {
    /// `timeToLive`.
    pub ttl: Option<Duration>,
    /// `maxParallelExecutions`: most pods for this function.
    pub max_parallel_pods: Option<usize>,
    /// `preferredMaxQueueLength`: waitlist length per pod.
    pub max_queue_length: Option<usize>,
    /// `templateOverrides`, handed to the backend with each start.
    pub template_overrides: Option<Arc<runner_core::config::TemplateOverrides>>,
    /// podExecutor `prespawn`, handed to the backend with each start.
    pub prespawn: Option<u32>,
    /// podExecutor `pidsLimit`, handed to the backend with each start.
    pub pids_limit: Option<u32>,
    /// podExecutor `idlePods`, handed to the backend with each start: it
    /// claims a pod of the function's idle pool (0: no pool).
    pub idle_pods: u32,
    /// podExecutor `singleUse`: every call gets a pod no call had before,
    /// stopped once that call is done.
    pub single_use: bool,
}

impl From<&runner_core::config::PodMatch> for PodRequestSettings {
    /// A FunctionConfig podExecutor's overrides: `timeToLive`,
    /// `maxParallelExecutions` (pods), `preferredMaxQueueLength` (waitlist).
    fn from(m: &runner_core::config::PodMatch) -> Self {
        Self {
            ttl: m.ttl,
            max_parallel_pods: m.max_parallel_executions.map(|n| n as usize),
            max_queue_length: m.preferred_max_queue_length.map(|n| n as usize),
            template_overrides: m.template_overrides.clone(),
            prespawn: m.prespawn,
            pids_limit: m.pids_limit,
            idle_pods: m.idle_pods,
            single_use: m.single_use,
        }
    }
}
