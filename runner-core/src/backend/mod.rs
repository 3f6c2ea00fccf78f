//! Backends create and delete the "pods" that serve one function image each.
//!
//! A pod is anything that serves `evaluator.FunctionEvaluator` and gRPC health
//! on an address the runner can reach: a `wrapper-server` child process on a
//! loopback port (`process`, the embedded default), a Docker container
//! (`docker`) or a Kubernetes Pod behind a ClusterIP Service (`kube`).
//!
//! The pod cache owns all bookkeeping; a backend only does the side effects
//! and reports a pod's death on the event channel it was given.

pub mod metrics;
pub mod pool;
pub mod serving;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use crate::config::TemplateOverrides;
use crate::image::ImageRef;

/// Identifies one pod across its whole life. Unique within a runner process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(pub String);

impl fmt::Display for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The directory of this program's binaries: where the release archive and
/// `cargo build` put `wrapper-server` and `health-probe` beside it (a test
/// binary runs from `deps/`, one level below).
pub fn binaries_dir() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let dir = exe.parent()?;
            Some(if dir.ends_with("deps") {
                dir.parent()?.to_path_buf()
            } else {
                dir.to_path_buf()
            })
        })
        .unwrap_or_default()
}

/// A DNS-1123 label (lowercase alphanumerics and `-`, at most 63 chars,
/// starting and ending alphanumeric) naming a pod for `image`, made unique by
/// `unique` (e.g. a counter or random suffix). Digest-pinned images
/// (`name@sha256:…`) and tags with `.`/`_` give valid names too: the Go
/// original produced invalid ones for digests.
pub fn pod_name(image: &str, unique: &str) -> String {
    // The last path segment and the tag name the function for a reader of `kubectl get
    // pods`; the digest would only fill the 63 characters with hex.
    let image = ImageRef::split(image);
    let tag = image.tag.map(|tag| std::iter::once(':').chain(tag.chars()));
    let mut name = String::with_capacity(63);
    for c in image
        .last_segment()
        .chars()
        .chain(tag.into_iter().flatten())
        .chain(std::iter::once('-'))
        .chain(unique.chars())
    {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (name.is_empty() || name.ends_with('-'))) {
            name.push(c);
        }
    }
    // Keep the unique suffix whole: cut the image part if too long.
    let suffix: String = unique
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if name.len() > 63 {
        let keep = 63usize.saturating_sub(suffix.len() + 1);
        let head: String = name.chars().take(keep).collect();
        name = format!("{}-{suffix}", head.trim_end_matches('-'));
        name.truncate(63);
    }
    let name = name.trim_matches('-').to_string();
    if name.is_empty() {
        "fn".to_string()
    } else {
        name
    }
}

/// What the cache asks a backend to start.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSpec {
    /// The fully qualified function image (registry/name:tag or @digest).
    pub image: String,
    /// How long `start` may take before the pod counts as failed.
    pub ready_timeout: Duration,
    /// How long the pod lives after its last use: a backend that records it
    /// on the pod (kube's `fn.kpt.dev/reclaim-after`) starts from this.
    pub ttl: Duration,
    /// The function's FunctionConfig `templateOverrides`, if any.
    pub overrides: Option<Arc<TemplateOverrides>>,
    /// podExecutor `prespawn`: the wrapper's `--prespawn` (unset: its
    /// default).
    pub prespawn: Option<u32>,
    /// podExecutor `pidsLimit`: most processes and threads in the pod's
    /// container (the docker backend; unset: its default).
    pub pids_limit: Option<u32>,
    /// podExecutor `idlePods`: the backend keeps this many pods of the
    /// image started and unclaimed, and a start claims one of them
    /// (0: a start makes a pod of its own).
    pub idle_pods: u32,
    /// podExecutor `singleUse`: the pod serves one call and is then
    /// stopped; no other runner, or later run, may be handed it.
    pub single_use: bool,
}

impl PodSpec {
    /// The wrapper's `--prespawn N` arguments, if set.
    pub fn prespawn_args(&self) -> Vec<String> {
        match self.prespawn {
            Some(n) => vec!["--prespawn".into(), n.to_string()],
            None => Vec::new(),
        }
    }
}

impl PodSpec {
    /// A spec with no overrides and the default TTL (tests, `eval`).
    pub fn new(image: impl Into<String>, ready_timeout: Duration) -> Self {
        PodSpec {
            image: image.into(),
            ready_timeout,
            ttl: Duration::from_secs(30 * 60),
            overrides: None,
            prespawn: None,
            pids_limit: None,
            idle_pods: 0,
            single_use: false,
        }
    }
}

/// Why the cache lets go of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// It is healthy but no longer wanted, for this reason. A backend whose
    /// pods other runners may share deletes it only if none uses it.
    Idle(Retire),
    /// It failed, or a caller could not reach it: delete it.
    Broken,
}

/// Why a healthy pod is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retire {
    /// It was idle past its TTL.
    Expired,
    /// It was made from a template that changed since: a pod of the new
    /// one replaces it.
    TemplateChanged,
    /// Another actor takes it away: another runner drains it, or it is
    /// being deleted.
    TakenAway,
    /// The start that made it was given up (its callers went).
    GivenUp,
    /// The runner shuts down.
    Shutdown,
    /// The runner's Deployment is deleted: every pod of it goes, whichever
    /// replica uses it.
    Uninstalled,
    /// It was the least recently used idle pod when another function
    /// needed room under `--max-pods`.
    MakingRoom,
    /// A single-use pod served its call.
    Used,
    /// An idle pool's pod no longer wanted: the pool shrank or went.
    PoolShrunk,
}

impl StopReason {
    /// For logs, metrics and events: `idle_ttl`, `template_changed`,
    /// `taken_away`, `start_given_up`, `shutdown`, `uninstalled`,
    /// `max_pods`, `single_use`, `pool_shrunk`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Idle(Retire::Expired) => "idle_ttl",
            StopReason::Idle(Retire::TemplateChanged) => "template_changed",
            StopReason::Idle(Retire::TakenAway) => "taken_away",
            StopReason::Idle(Retire::GivenUp) => "start_given_up",
            StopReason::Idle(Retire::Shutdown) => "shutdown",
            StopReason::Idle(Retire::Uninstalled) => "uninstalled",
            StopReason::Idle(Retire::MakingRoom) => "max_pods",
            StopReason::Idle(Retire::Used) => "single_use",
            StopReason::Idle(Retire::PoolShrunk) => "pool_shrunk",
            StopReason::Broken => "failed",
        }
    }

    /// Why, in words.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Idle(Retire::Expired) => "idle past its TTL",
            StopReason::Idle(Retire::TemplateChanged) => {
                "its template changed: replaced by a pod of the new one"
            }
            StopReason::Idle(Retire::TakenAway) => "another actor drains or deletes it",
            StopReason::Idle(Retire::GivenUp) => "its start was given up",
            StopReason::Idle(Retire::Shutdown) => "the runner shuts down",
            StopReason::Idle(Retire::Uninstalled) => "the runner's Deployment is deleted",
            StopReason::Idle(Retire::MakingRoom) => {
                "idle the longest when another function needed room (--max-pods)"
            }
            StopReason::Idle(Retire::Used) => "it served its one call (singleUse)",
            StopReason::Idle(Retire::PoolShrunk) => {
                "its idle pool shrank or went (idlePods changed)"
            }
            StopReason::Broken => "it failed or could not be reached",
        }
    }
}

/// A pod that answered SERVING on its health service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyPod {
    pub id: PodId,
    /// Where EvaluateFunction is served, as a URI (`http://127.0.0.1:40123`).
    pub endpoint: String,
}

/// A pod event the backend reports after `start` returned: the pod died or
/// was deleted by someone else. The cache evicts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    Failed {
        id: PodId,
        reason: String,
    },
    /// The pod is to go (its template changed since, or another actor
    /// takes it away): the cache hands it out no more, and stops it once
    /// its calls are done, for this reason.
    Stale {
        id: PodId,
        why: Retire,
    },
}

/// What made a start fail, kept whole rather than flattened into text so
/// that callers can walk its causes. Shared: every caller waiting for the
/// pod gets the same error.
pub type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A [`Cause`] from any error, or from a message.
pub fn cause(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Cause {
    Arc::from(err.into())
}

/// Why a backend could not start a pod.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    #[error("no function is known for image {image:?}: {reason}")]
    UnknownImage { image: String, reason: String },
    #[error("pod for {image:?} did not become ready within {timeout:?}: {detail}")]
    ReadyTimeout {
        image: String,
        timeout: Duration,
        detail: String,
    },
    #[error("pod for {image:?} failed to start: {source}")]
    StartFailed {
        image: String,
        #[source]
        source: Cause,
    },
    /// The backend may not start pods at all (the API server refuses the
    /// runner a right it needs): not this function's fault, and the
    /// runner's health says so meanwhile.
    #[error("pod for {image:?} cannot start: {detail}")]
    Refused { image: String, detail: String },
}

/// The side effects of pod management. Object safe so that `serve` can pick
/// a backend at run time.
pub trait Backend: Send + Sync + 'static {
    /// Short name for logs and metrics (`process`, `docker`, `kube`).
    fn name(&self) -> &'static str;

    /// Starts a pod for `spec.image` and resolves once its health service
    /// says SERVING (no fixed sleeps), or with an error once it failed or
    /// `spec.ready_timeout` passed. A pod that fails to become ready must be
    /// cleaned up by the backend before the error is returned.
    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>>;

    /// Lets go of a pod: deletes it (a backend whose pods may be shared
    /// deletes an [`StopReason::Idle`] one only if no other runner uses it).
    /// Deleting a pod that is already gone is success.
    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>>;

    /// A call was handed the pod, extending its life to `ttl` from now.
    /// Called on the cache's task for every hand-out: must not block (a
    /// backend that records it elsewhere does so in the background).
    fn reused(&self, _id: &PodId, _ttl: Duration) {}

    /// Hands the backend the channel on which it reports pods that died
    /// after `start` returned. Called once, before the first `start`.
    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>);

    /// The runner is done with the backend (every pod stopped): it removes
    /// what it made besides pods.
    fn close(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    /// The image whose pods serve `image`, where the backend runs several
    /// names alike (the process backend: what its function map runs for
    /// them); `None`: `image` itself. The cache keeps one set of pods per
    /// key, and starts them for the key.
    fn pod_key(&self, _image: &str) -> Option<String> {
        None
    }

    /// Whether a pod of `image` could start at all, where the backend can
    /// tell without starting one (the process backend: its function map
    /// knows the image): the cache asks before it makes room for the pod.
    fn check(&self, _image: &str) -> Result<(), BackendError> {
        Ok(())
    }

    /// Whether the backend can start pods at all (false: the runner's health
    /// says NOT_SERVING), for a backend that can tell; `None`: always.
    fn ready(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        None
    }

    /// The idle pools wanted now, one per spec (`idle_pods` pods of
    /// `image` each): the backend makes, resizes or replaces them, and
    /// removes the pools it keeps that are not listed. Called at start and
    /// whenever the FunctionConfigs change; must not block.
    fn set_pools(&self, _pools: Vec<PodSpec>) {}

    /// How long [`Backend::close`] may take at most (a backend that waits
    /// for its deletes there): the runner waits that long for it, or its
    /// own grace if longer.
    fn close_within(&self) -> Duration {
        Duration::ZERO
    }

    /// The idle pools' series the backend keeps, for the runner to serve
    /// with its own metrics; `None`: it keeps no pools.
    fn pool_metrics(&self) -> Option<metrics::PoolMetrics> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::pod_name;

    fn is_dns1123_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[test]
    fn pod_names_are_dns1123_labels_even_for_digests() {
        let cases = [
            ("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1", "set-namespace-v0-4-1-7"),
            (
                "ghcr.io/kptdev/krm-functions-catalog/apply-setters@sha256:5e0b2b2a1f3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6",
                "apply-setters-7",
            ),
            ("localhost:5000/My_Func:Latest", "my-func-latest-7"),
            ("---", "7"),
        ];
        for (image, want) in cases {
            let name = pod_name(image, "7");
            assert_eq!(name, want, "{image}");
            assert!(is_dns1123_label(&name), "{name}");
        }
        let long = format!("example.com/{}:v1", "a".repeat(100));
        let name = pod_name(&long, "12345");
        assert!(is_dns1123_label(&name), "{name}");
        assert!(name.ends_with("-12345"), "{name}");
    }
}
