//! A function pod's life as every actor on it can read it (seed 004,
//! PodOpsLifecycle), applied to function pods:
//!
//! - **Operations.** A runner that uses a pod declares it on the pod as a
//!   pair of labels, `operating.fn.kpt.dev/<runner>: <unix ns>` and
//!   `operation-type.fn.kpt.dev/<runner>: serve|drain|delete`, added, changed
//!   and removed together in one patch that carries the resourceVersion it
//!   was computed from ([`patch_meta`]): a 409 is read again and decided
//!   again, never overwritten. The time is refreshed in the background while
//!   the runner holds the pod, so an operation older than the TTL is one
//!   whose runner is gone ([`live_operations`]).
//! - **Traffic.** The readiness gate [`SERVING_GATE`]: the runner sets it
//!   True once the wrapper answers (the pod becomes Ready, its Service lists
//!   it) and False before it deletes the pod (it leaves the Endpoints, other
//!   runners take it out of rotation: they see it on their watch).
//! - **Protection.** The finalizer [`TRAFFIC_FINALIZER`] holds a deleted pod
//!   in the API until no live runner declares an operation on it.
//! - **Events.** Every transition is an Event on the pod ([`Events`]),
//!   reported by `function-runner` with the runner's id as the instance.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

/// The label prefix of an operation's start (its value: unix nanoseconds).
pub const OPERATING: &str = "operating.fn.kpt.dev/";
/// The label prefix of an operation's type.
pub const OPERATION_TYPE: &str = "operation-type.fn.kpt.dev/";
/// The readiness gate through which runners switch a pod's traffic.
pub const SERVING_GATE: &str = "fn.kpt.dev/serving";
/// Held on a pod while runners may still have it in rotation.
pub const TRAFFIC_FINALIZER: &str = "prot.fn.kpt.dev/traffic";
/// The events' reporting component.
pub const COMPONENT: &str = "function-runner";

/// What a runner does to a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpType {
    /// It hands the pod out for calls.
    Serve,
    /// It switched the pod's traffic off and waits for the other runners'
    /// calls on it to end, to delete it.
    Drain,
    /// It deletes the pod.
    Delete,
    /// It took the pod from an idle pool, to hand it out.
    Claim,
}

impl OpType {
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Serve => "serve",
            OpType::Drain => "drain",
            OpType::Delete => "delete",
            OpType::Claim => "claim",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [OpType::Serve, OpType::Drain, OpType::Delete, OpType::Claim]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// One runner's operation on a pod, as its labels declare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The runner's id, as a label name.
    pub runner: String,
    /// When it was declared or last refreshed (unix nanoseconds; 0 when
    /// unreadable, which makes it stale).
    pub since_ns: u128,
    /// `None`: a type this runner does not know (a newer version's).
    pub kind: Option<OpType>,
}

/// Unix nanoseconds now.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Every operation declared on `pod`.
pub fn operations(pod: &Pod) -> Vec<Operation> {
    let Some(labels) = pod.metadata.labels.as_ref() else {
        return Vec::new();
    };
    labels
        .iter()
        .filter_map(|(key, since)| {
            let runner = key.strip_prefix(OPERATING)?;
            let kind = labels
                .get(&format!("{OPERATION_TYPE}{runner}"))
                .and_then(|t| OpType::parse(t));
            Some(Operation {
                runner: runner.to_string(),
                since_ns: since.parse().unwrap_or(0),
                kind,
            })
        })
        .collect()
}

/// The operations on `pod` of runners other than `me` that are live: a
/// runner refreshes its operations while it holds the pod, so one not
/// refreshed within `stale` is a runner that is gone.
pub fn live_operations(pod: &Pod, me: &str, stale: Duration) -> Vec<Operation> {
    let now = now_ns();
    operations(pod)
        .into_iter()
        .filter(|op| op.runner != me && op.since_ns.saturating_add(stale.as_nanos()) > now)
        .collect()
}

/// This runner's own operation on `pod`.
pub fn own_operation(pod: &Pod, me: &str) -> Option<Operation> {
    operations(pod).into_iter().find(|op| op.runner == me)
}

/// The gate's condition: `None` when the pod has none yet.
pub fn gate(pod: &Pod) -> Option<bool> {
    condition(pod, SERVING_GATE)
}

/// Whether the pod's containers are ready: the wrapper answers its
/// readiness probe. (A pod without the gate is Ready on that alone.)
pub fn containers_ready(pod: &Pod) -> bool {
    condition(pod, "ContainersReady") == Some(true) || condition(pod, "Ready") == Some(true)
}

fn condition(pod: &Pod, type_: &str) -> Option<bool> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status == "True")
}

/// Whether the pod declares the gate (pods made by an older runner do not:
/// their traffic follows their containers alone).
pub fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == SERVING_GATE))
}

/// Whether the pod carries the finalizer.
pub fn protected(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRAFFIC_FINALIZER))
}

/// Why another runner's operation, or the pod's gate, forbids this runner
/// to take the pod into rotation: it is being drained or deleted.
pub fn draining(pod: &Pod, me: &str, stale: Duration) -> Option<String> {
    if gate(pod) == Some(false) {
        return Some(format!("its traffic is off ({SERVING_GATE} is False)"));
    }
    live_operations(pod, me, stale)
        .into_iter()
        .find(|op| matches!(op.kind, Some(OpType::Drain | OpType::Delete)))
        .map(|op| {
            format!(
                "runner {} declares {}",
                op.runner,
                op.kind.map_or("?", OpType::as_str)
            )
        })
}

/// The labels that declare (`Some`) or withdraw (`None`) `runner`'s
/// operation, for a merge patch: both together, always.
pub fn operation_labels(runner: &str, op: Option<OpType>) -> Map<String, Value> {
    let mut labels = Map::new();
    let (since, kind) = match op {
        Some(op) => (json!(now_ns().to_string()), json!(op.as_str())),
        None => (Value::Null, Value::Null),
    };
    labels.insert(format!("{OPERATING}{runner}"), since);
    labels.insert(format!("{OPERATION_TYPE}{runner}"), kind);
    labels
}

/// The metadata of a merge patch that declares `runner`'s operation `op`
/// (or withdraws it: `None`).
pub fn declaring(runner: &str, op: Option<OpType>) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("labels".into(), operation_labels(runner, op).into());
    meta
}

/// What [`patch_meta`] and [`set_gate`] did.
#[derive(Debug)]
pub enum Outcome {
    /// The pod as it is now (patched, or found needing nothing).
    Done(Box<Pod>),
    /// The pod is gone (or its name is another pod's now).
    Gone,
    /// The decision on the pod as read said no: why.
    Refused(String),
}

/// How often a patch is decided again after a 409 before giving up: each
/// 409 is another actor's change, which come one at a time per transition.
const ATTEMPTS: usize = 8;

/// Patches the pod `name` (of uid `uid`) with the metadata that `decide`
/// computes from it, carrying the resourceVersion it was computed from: a
/// 409 means the pod changed meanwhile, so it is read again and decided
/// again. `decide` answers the metadata to merge (`None`: nothing to do)
/// or why not. `seen` is the pod as last known (the watch's copy), to save
/// the first read.
pub async fn patch_meta(
    pods: &Api<Pod>,
    name: &str,
    uid: &str,
    seen: Option<Pod>,
    decide: impl Fn(&Pod) -> Result<Option<Map<String, Value>>, String>,
) -> Result<Outcome, kube::Error> {
    patch_with(pods, name, uid, seen, decide, |pods, name, patch| {
        Box::pin(async move {
            pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        })
    })
    .await
}

/// Sets the gate's condition on the pod's status (with the same
/// read-decide-patch loop as [`patch_meta`]); nothing when it already is.
pub async fn set_gate(
    pods: &Api<Pod>,
    name: &str,
    uid: &str,
    seen: Option<Pod>,
    on: bool,
    message: &str,
) -> Result<Outcome, kube::Error> {
    let status = if on { "True" } else { "False" };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let condition = json!({
        "type": SERVING_GATE,
        "status": status,
        "reason": if on { "WrapperAnswers" } else { "Draining" },
        "message": message,
        "lastTransitionTime": now,
    });
    patch_with(
        pods,
        name,
        uid,
        seen,
        |pod| Ok((gate(pod) != Some(on)).then(Map::new)),
        move |pods, name, mut patch| {
            // Conditions merge by their type (strategic merge): the
            // kubelet's own are left as they are.
            patch["status"] = json!({"conditions": [condition.clone()]});
            Box::pin(async move {
                pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
            })
        },
    )
    .await
}

type PatchFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Pod, kube::Error>> + Send + 'a>>;

async fn patch_with<'a>(
    pods: &'a Api<Pod>,
    name: &'a str,
    uid: &str,
    mut seen: Option<Pod>,
    decide: impl Fn(&Pod) -> Result<Option<Map<String, Value>>, String>,
    send: impl Fn(&'a Api<Pod>, &'a str, Value) -> PatchFuture<'a>,
) -> Result<Outcome, kube::Error> {
    for _ in 0..ATTEMPTS {
        let pod = match seen.take() {
            Some(pod) => pod,
            None => match pods.get_opt(name).await? {
                Some(pod) => pod,
                None => return Ok(Outcome::Gone),
            },
        };
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Ok(Outcome::Gone);
        }
        let mut meta = match decide(&pod) {
            Err(why) => return Ok(Outcome::Refused(why)),
            Ok(None) => return Ok(Outcome::Done(Box::new(pod))),
            Ok(Some(meta)) => meta,
        };
        // The precondition: the apiserver answers 409 unless the pod is
        // still at the version the decision was made on.
        meta.insert(
            "resourceVersion".into(),
            json!(pod.metadata.resource_version.clone().unwrap_or_default()),
        );
        match send(pods, name, json!({ "metadata": meta })).await {
            Ok(pod) => return Ok(Outcome::Done(Box::new(pod))),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Outcome::Gone),
            Err(err) => return Err(err),
        }
    }
    Ok(Outcome::Refused(format!(
        "the pod changed {ATTEMPTS} times while this runner tried to change it"
    )))
}

/// A transition, as an Event's reason and action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The runner created the pod.
    Created,
    /// The wrapper answers: the gate is True.
    Ready,
    /// The runner hands the pod out (its `serve` operation).
    Serving,
    /// The runner took the pod from an idle pool (its `claim` operation).
    Claimed,
    /// The runner no longer hands the pod out; the pod stays.
    Released,
    /// The runner switched the pod's traffic off, to delete it.
    Draining,
    /// The runner deleted the pod.
    Deleted,
    /// No runner has the pod in rotation any more: the finalizer is off.
    Unprotected,
    /// The pod cannot serve (a Warning).
    Failed,
}

impl Phase {
    fn reason(self) -> &'static str {
        match self {
            Phase::Created => "Created",
            Phase::Ready => "Ready",
            Phase::Serving => "Serving",
            Phase::Claimed => "Claimed",
            Phase::Released => "Released",
            Phase::Draining => "Draining",
            Phase::Deleted => "Deleted",
            Phase::Unprotected => "TrafficGone",
            Phase::Failed => "Failed",
        }
    }

    fn action(self) -> &'static str {
        match self {
            Phase::Created => "Create",
            Phase::Ready => "SwitchTrafficOn",
            Phase::Serving => "Serve",
            Phase::Claimed => "Claim",
            Phase::Released => "Release",
            Phase::Draining => "SwitchTrafficOff",
            Phase::Deleted => "Delete",
            Phase::Unprotected => "RemoveFinalizer",
            Phase::Failed => "Observe",
        }
    }
}

/// Events queued beyond this are dropped: a call never waits for one.
const QUEUE: usize = 256;
/// Per pod, as client-go's spam filter: a burst of 25, then one per 5
/// minutes.
const BURST: f64 = 25.0;
const REFILL_EVERY: Duration = Duration::from_secs(300);

/// Publishes Events on function pods in the background: an API error or a
/// slow API server never fails or delays the transition that made one.
/// Repeats of one (pod, reason) are aggregated into a series by kube's
/// recorder; past a burst per pod they are dropped.
#[derive(Clone)]
pub struct Events {
    tx: Option<mpsc::Sender<Queued>>,
}

enum Queued {
    Event(Box<(ObjectReference, Event)>),
    /// Answered once every event queued before it was published.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl Events {
    /// Starts the publishing task, reporting as `runner`.
    pub fn spawn(client: Client, runner: &str) -> Self {
        let (tx, mut rx) = mpsc::channel::<Queued>(QUEUE);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: COMPONENT.into(),
                instance: Some(runner.to_string()),
            },
        );
        tokio::spawn(async move {
            let mut buckets: HashMap<String, (f64, Instant)> = HashMap::new();
            while let Some(queued) = rx.recv().await {
                let (reference, event) = match queued {
                    Queued::Event(event) => *event,
                    Queued::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let key = reference.uid.clone().unwrap_or_default();
                if buckets.len() > 4096 {
                    buckets.clear();
                }
                let now = Instant::now();
                let (tokens, last) = buckets.entry(key).or_insert((BURST, now));
                let refill = now.duration_since(*last).as_secs_f64() / REFILL_EVERY.as_secs_f64();
                *tokens = (*tokens + refill).min(BURST);
                *last = now;
                if *tokens < 1.0 {
                    tracing::debug!(pod = ?reference.name, reason = %event.reason, "event dropped: too many for this pod");
                    continue;
                }
                *tokens -= 1.0;
                if let Err(err) = recorder.publish(&event, &reference).await {
                    tracing::debug!(pod = ?reference.name, reason = %event.reason, %err, "publishing an event");
                }
            }
        });
        Events { tx: Some(tx) }
    }

    /// Waits until the events queued so far are published, at most
    /// `within` (the runner's last ones, before it exits).
    pub async fn flush(&self, within: Duration) {
        let Some(tx) = &self.tx else { return };
        let (done, published) = tokio::sync::oneshot::channel();
        let flushed = async {
            if tx.send(Queued::Flush(done)).await.is_ok() {
                let _ = published.await;
            }
        };
        let _ = tokio::time::timeout(within, flushed).await;
    }

    /// Events that go nowhere.
    pub fn none() -> Self {
        Events { tx: None }
    }

    /// Records `phase` on `pod`, with `note` for `kubectl describe`.
    pub fn emit(&self, pod: &Pod, phase: Phase, note: String) {
        let Some(tx) = &self.tx else { return };
        let event = Event {
            type_: if phase == Phase::Failed {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: phase.reason().into(),
            // The API server refuses notes over 1 kB.
            note: Some(truncate(note, 1000)),
            action: phase.action().into(),
            secondary: None,
        };
        if tx
            .try_send(Queued::Event(Box::new((pod.object_ref(&()), event))))
            .is_err()
        {
            tracing::debug!(pod = ?pod.metadata.name, reason = phase.reason(), "event dropped: queue full");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use std::collections::BTreeMap;

    fn pod(labels: &[(&str, String)], gate: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        );
        if let Some(status) = gate {
            pod.status = Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: SERVING_GATE.into(),
                    status: status.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            });
        }
        pod
    }

    #[test]
    fn operations_are_read_in_pairs_and_stale_ones_do_not_count() {
        let now = now_ns();
        let old = now - Duration::from_secs(120).as_nanos();
        let p = pod(
            &[
                ("operating.fn.kpt.dev/a", now.to_string()),
                ("operation-type.fn.kpt.dev/a", "serve".into()),
                ("operating.fn.kpt.dev/b", old.to_string()),
                ("operation-type.fn.kpt.dev/b", "drain".into()),
                ("operating.fn.kpt.dev/c", now.to_string()),
                ("operation-type.fn.kpt.dev/c", "upgrade".into()),
                ("fn.kpt.dev/runner", "a".into()),
            ],
            None,
        );
        let mut ops = operations(&p);
        ops.sort_by(|x, y| x.runner.cmp(&y.runner));
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].kind, Some(OpType::Serve));
        assert_eq!(ops[2].kind, None, "an unknown type is kept, as unknown");
        let live: Vec<String> = live_operations(&p, "c", Duration::from_secs(60))
            .into_iter()
            .map(|o| o.runner)
            .collect();
        assert_eq!(live, ["a"], "b is stale, c is me");
        assert!(
            draining(&p, "a", Duration::from_secs(600)).is_some(),
            "b's drain counts within a longer TTL"
        );
        assert!(draining(&p, "a", Duration::from_secs(60)).is_none());
    }

    #[test]
    fn a_gate_set_false_is_draining_and_labels_go_in_pairs() {
        assert!(draining(&pod(&[], Some("False")), "a", Duration::from_secs(60)).is_some());
        assert!(draining(&pod(&[], Some("True")), "a", Duration::from_secs(60)).is_none());
        let set = operation_labels("r1", Some(OpType::Serve));
        assert_eq!(set["operation-type.fn.kpt.dev/r1"], "serve");
        assert!(set["operating.fn.kpt.dev/r1"]
            .as_str()
            .unwrap()
            .parse::<u128>()
            .is_ok());
        let unset = operation_labels("r1", None);
        assert!(unset.values().all(Value::is_null));
        assert_eq!(unset.len(), 2);
    }

    #[test]
    fn notes_are_cut_at_a_char_boundary() {
        assert_eq!(truncate("ééé".into(), 3), "é");
        assert_eq!(truncate("abc".into(), 10), "abc");
    }
}
