//! The `kube` backend: each pod is a Kubernetes Pod from the built-in
//! template, with a ClusterIP Service in front of it.
//!
//! One watch over this runner's pods (label [`OWNER_LABEL`]) feeds a
//! reflector store. A start creates the Pod and its Service and waits, on
//! that watch's events, for the Pod to be Ready; a pod that later fails,
//! ends or is deleted is reported as [`PodEvent::Failed`] from the same
//! events. Nothing polls, and a warm call makes no API request: the cache
//! hands out pods it already has.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::wait::await_condition;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};

use super::entrypoint::Entrypoints;
use super::template::{label_value, FunctionPod, INLINE_TEMPLATE_VERSION};
use super::{OWNER_LABEL, WRAPPER_PORT};
use crate::backend::{cause, pod_name, Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod};

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
    pub max_message_bytes: usize,
    pub dial: Dial,
    /// This runner, as a label value: its pods carry it, and it touches no
    /// other.
    pub owner: String,
    /// How long after its last use an idle pod may be reclaimed, for the
    /// `fn.kpt.dev/reclaim-after` annotation.
    pub ttl: Duration,
}

pub struct KubeBackend {
    inner: Arc<Inner>,
    watch: tokio::task::AbortHandle,
}

impl Drop for KubeBackend {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

struct Inner {
    settings: KubeSettings,
    pods: Api<Pod>,
    services: Api<Service>,
    endpoints: Api<Endpoints>,
    store: Store<Pod>,
    /// Ticks on every watch event: starts wait on it instead of polling.
    changed: watch::Receiver<u64>,
    entrypoints: Entrypoints,
    /// Pods handed out as ready: their end is reported as a failure.
    ready: Mutex<HashSet<String>>,
    events: OnceLock<mpsc::UnboundedSender<PodEvent>>,
    next: AtomicU64,
    /// Makes pod names unique per runner process: a hash of the owner and
    /// of this process' start, so neither two replicas nor a restarted
    /// runner ever try the same name.
    instance: String,
    /// The pod watch's last error, named when a start times out.
    watch_error: Mutex<Option<String>>,
}

/// Why a Kubernetes pod did not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("creating {kind} {name}: {source}")]
    Create {
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
}

impl KubeBackend {
    /// Connects with `client` and starts the watch over this runner's pods.
    pub fn new(client: Client, settings: KubeSettings, entrypoints: Entrypoints) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), &settings.namespace);
        let endpoints: Api<Endpoints> = Api::namespaced(client, &settings.namespace);
        let (store, writer) = reflector::store();
        let (tick, changed) = watch::channel(0u64);
        let instance = instance_tag(&settings.owner);
        let inner = Arc::new(Inner {
            settings,
            pods: pods.clone(),
            services,
            endpoints,
            store,
            changed,
            entrypoints,
            ready: Mutex::new(HashSet::new()),
            events: OnceLock::new(),
            next: AtomicU64::new(0),
            instance,
            watch_error: Mutex::new(None),
        });
        let selector = format!("{OWNER_LABEL}={}", label_value(&inner.settings.owner));
        let stream = watcher(pods, watcher::Config::default().labels(&selector)).default_backoff();
        let weak = Arc::downgrade(&inner);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(reflector::reflector(writer, stream));
            while let Some(event) = events.next().await {
                let Some(inner) = weak.upgrade() else { return };
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        if let Some(reason) = ended(&pod) {
                            inner.report_failed(&pod, reason);
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        inner.report_failed(&pod, "was deleted".into())
                    }
                    // A relist after the watch broke (410 Gone included): a
                    // pod deleted meanwhile produced no Delete event, it is
                    // just absent from the new list.
                    Ok(watcher::Event::InitDone) => {
                        *inner
                            .watch_error
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = None;
                        inner.report_missing();
                    }
                    Ok(_) => {}
                    // The watcher restarts itself, with backoff.
                    Err(err) => {
                        tracing::warn!(%err, "pod watch");
                        *inner
                            .watch_error
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(err.to_string());
                    }
                }
                tick.send_modify(|n| *n += 1);
            }
        });
        Self {
            inner,
            watch: task.abort_handle(),
        }
    }
}

impl Inner {
    fn report_failed(&self, pod: &Pod, reason: String) {
        let Some(name) = pod.metadata.name.clone() else {
            return;
        };
        let was_ready = self
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&name);
        if was_ready {
            tracing::warn!(pod = %name, %reason, "pod failed");
            if let Some(events) = self.events.get() {
                let _ = events.send(PodEvent::Failed {
                    id: PodId(name),
                    reason,
                });
            }
        }
    }

    /// Reports every handed-out pod that the store no longer has.
    fn report_missing(&self) {
        let names: Vec<String> = self
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        for name in names {
            let key = ObjectRef::new(&name).within(&self.settings.namespace);
            if self.store.get(&key).is_none() {
                let mut gone = Pod::default();
                gone.metadata.name = Some(name);
                self.report_failed(&gone, "was deleted while the watch was down".into());
            }
        }
    }

    /// Resolves once the pod has ended (or is gone).
    async fn wait_ended(&self, name: &str) -> StartError {
        let key = ObjectRef::new(name).within(&self.settings.namespace);
        let mut changed = self.changed.clone();
        loop {
            let reason = match self.store.get(&key) {
                None => Some("was deleted".to_string()),
                Some(pod) => ended(&pod),
            };
            if let Some(reason) = reason {
                return StartError::Ended {
                    name: name.to_string(),
                    reason,
                };
            }
            if changed.changed().await.is_err() {
                return StartError::Ended {
                    name: name.to_string(),
                    reason: "was not seen: the pod watch ended".into(),
                };
            }
        }
    }

    /// Waits (on watch events) until the pod is Ready, or fails if it ended.
    async fn wait_ready(&self, name: &str) -> Result<Pod, StartError> {
        let key = ObjectRef::new(name).within(&self.settings.namespace);
        let mut changed = self.changed.clone();
        loop {
            if let Some(pod) = self.store.get(&key) {
                if let Some(reason) = ended(&pod) {
                    return Err(StartError::Ended {
                        name: name.to_string(),
                        reason,
                    });
                }
                if is_ready(&pod) && pod_ip(&pod).is_some() {
                    return Ok((*pod).clone());
                }
            }
            if changed.changed().await.is_err() {
                return Err(StartError::Ended {
                    name: name.to_string(),
                    reason: "was not seen: the pod watch ended".into(),
                });
            }
        }
    }

    async fn delete(&self, name: &str) {
        let params = DeleteParams::default();
        if let Err(err) = self.pods.delete(name, &params).await {
            if !is_not_found(&err) {
                tracing::warn!(pod = name, %err, "deleting pod");
            }
        }
        if let Err(err) = self.services.delete(name, &params).await {
            if !is_not_found(&err) {
                tracing::warn!(service = name, %err, "deleting service");
            }
        }
    }
}

impl Backend for KubeBackend {
    fn name(&self) -> &'static str {
        "kube"
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.inner.events.set(events);
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let settings = &inner.settings;
            let n = inner.next.fetch_add(1, Ordering::Relaxed);
            let name = service_name(pod_name(&spec.image, &format!("{}-{n}", inner.instance)));
            let started = tokio::time::Instant::now();
            // Whether this start created the pod, and so must delete it if it
            // fails (the Service goes with its Pod).
            let mut created = false;
            let create = async {
                let entrypoint = inner.entrypoints.of(&spec.image).await.map_err(cause)?;
                let reclaim_after = SystemTime::now()
                    .checked_add(settings.ttl)
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                let function_pod = FunctionPod {
                    name: name.clone(),
                    namespace: settings.namespace.clone(),
                    image: spec.image.clone(),
                    entrypoint,
                    wrapper_image: settings.wrapper_image.clone(),
                    max_message_bytes: settings.max_message_bytes,
                    owner: settings.owner.clone(),
                    reclaim_after,
                    template_version: INLINE_TEMPLATE_VERSION.to_string(),
                };
                let created_pod = inner
                    .pods
                    .create(&PostParams::default(), &function_pod.pod())
                    .await
                    .map_err(|source| {
                        cause(StartError::Create {
                            kind: "pod",
                            name: name.clone(),
                            source,
                        })
                    })?;
                created = true;
                // Owned by its Pod: Kubernetes deletes the Service with the
                // Pod, whoever deletes the Pod, even if this runner dies
                // between the two creates.
                let mut service = function_pod.service();
                service.metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Pod".to_string(),
                    name: name.clone(),
                    uid: created_pod.metadata.uid.clone().unwrap_or_default(),
                    ..OwnerReference::default()
                }]);
                inner
                    .services
                    .create(&PostParams::default(), &service)
                    .await
                    .map_err(|source| {
                        cause(StartError::Create {
                            kind: "service",
                            name: name.clone(),
                            source,
                        })
                    })?;
                let pod = inner.wait_ready(&name).await.map_err(cause)?;
                // The Service routes to the pod only once its Endpoints list
                // the pod's IP: before that, a call by the Service's name is
                // refused, and would count as a dead pod. Checked in both
                // dial modes, so that every pod handed out is reachable
                // both ways.
                let ip = pod_ip(&pod).unwrap_or_default().to_string();
                let listed = await_condition(
                    inner.endpoints.clone(),
                    &name,
                    move |e: Option<&Endpoints>| lists_address(e, &ip),
                );
                tokio::select! {
                    listed = listed => {
                        listed.map_err(|source| cause(StartError::Endpoints { name: name.clone(), source }))?;
                    }
                    // The pod may end while its Endpoints are awaited.
                    ended = inner.wait_ended(&name) => return Err(cause(ended)),
                }
                Ok::<_, crate::backend::Cause>(pod)
            };
            let pod = match tokio::time::timeout(spec.ready_timeout, create).await {
                Ok(Ok(pod)) => pod,
                Ok(Err(source)) => {
                    if created {
                        inner.delete(&name).await;
                    }
                    return Err(BackendError::StartFailed {
                        image: spec.image,
                        source,
                    });
                }
                Err(_) => {
                    // Deleted even if the create's answer was lost: the name
                    // is this start's alone.
                    inner.delete(&name).await;
                    let watch = inner
                        .watch_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    return Err(BackendError::ReadyTimeout {
                        image: spec.image,
                        timeout: spec.ready_timeout,
                        detail: match watch {
                            Some(err) => format!(
                                "pod {name} was never seen Ready; the pod watch fails: {err}"
                            ),
                            None => format!("pod {name} never became Ready"),
                        },
                    });
                }
            };
            inner
                .ready
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.clone());
            // A failure seen after the last check and before the insert was
            // not reported (the pod was not handed out yet): look again now
            // that it would be.
            let key = ObjectRef::new(&name).within(&settings.namespace);
            let now = inner.store.get(&key);
            let gone = now.map_or(Some("was deleted".to_string()), |p| ended(&p));
            if let Some(reason) = gone {
                inner
                    .ready
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&name);
                inner.delete(&name).await;
                return Err(BackendError::StartFailed {
                    image: spec.image,
                    source: cause(StartError::Ended { name, reason }),
                });
            }
            let endpoint = match settings.dial {
                Dial::PodIp => {
                    format!("http://{}:{WRAPPER_PORT}", pod_ip(&pod).unwrap_or_default())
                }
                Dial::Service => format!(
                    "http://{name}.{}.svc.cluster.local:{WRAPPER_PORT}",
                    settings.namespace
                ),
            };
            tracing::info!(pod = %name, image = %spec.image, %endpoint, ms = started.elapsed().as_millis() as u64, "pod ready");
            Ok(ReadyPod {
                id: PodId(name),
                endpoint,
            })
        })
    }

    fn stop(&self, id: PodId) -> BoxFuture<'static, Result<(), BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            inner
                .ready
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id.0);
            inner.delete(&id.0).await;
            Ok(())
        })
    }
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Whether `endpoints` list `ip` as a ready address.
fn lists_address(endpoints: Option<&Endpoints>, ip: &str) -> bool {
    endpoints
        .and_then(|e| e.subsets.as_ref())
        .is_some_and(|subsets| {
            subsets.iter().any(|s| {
                s.addresses
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|a| a.ip == ip))
            })
        })
}

fn pod_ip(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.pod_ip.as_deref()
}

/// Why the pod can serve no more, if it cannot: it is being deleted, it
/// ended (Failed or Succeeded: function pods never restart), or its
/// function container terminated (OOM-killed included).
fn ended(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("is being deleted".into());
    }
    let status = pod.status.as_ref()?;
    if let Some(phase @ ("Failed" | "Succeeded")) = status.phase.as_deref() {
        let detail = status.reason.clone().unwrap_or_default();
        return Some(format!(
            "ended ({phase}{}{detail})",
            if detail.is_empty() { "" } else { ": " }
        ));
    }
    let init = status.init_container_statuses.iter().flatten();
    let containers = status.container_statuses.iter().flatten();
    let init_names: Vec<&str> = init.clone().map(|c| c.name.as_str()).collect();
    containers.chain(init).find_map(|c| {
        let state = c.state.as_ref()?;
        if let Some(terminated) = &state.terminated {
            // An init container that did its job is not an end.
            if terminated.exit_code == 0 && init_names.contains(&c.name.as_str()) {
                return None;
            }
            return Some(format!(
                "container {} terminated ({}, exit code {})",
                c.name,
                terminated.reason.as_deref().unwrap_or("no reason"),
                terminated.exit_code
            ));
        }
        // Waiting for what will not come by itself: fail now rather than at
        // the ready timeout.
        let waiting = state.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        matches!(
            reason,
            "ErrImagePull"
                | "ImagePullBackOff"
                | "InvalidImageName"
                | "CreateContainerConfigError"
                | "CreateContainerError"
        )
        .then(|| {
            format!(
                "container {} cannot start ({reason}: {})",
                c.name,
                waiting.message.as_deref().unwrap_or("")
            )
        })
    })
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// 8 hex digits from the owner and this process' start.
fn instance_tag(owner: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    owner.hash(&mut hasher);
    std::process::id().hash(&mut hasher);
    SystemTime::now().hash(&mut hasher);
    format!("{:08x}", hasher.finish() as u32)
}

/// A pod name that is also a valid Service name (DNS-1035: it starts with a
/// letter): `fn-` in front when it does not, keeping its unique end.
fn service_name(name: String) -> String {
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return name;
    }
    let tail = &name[name.len().saturating_sub(60)..];
    format!("fn-{tail}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_pod_has_ended_when_deleted_finished_or_its_container_terminated() {
        let running = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "function", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {}}}]}
        }));
        assert_eq!(ended(&running), None);
        let oom = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "function", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}
        }));
        assert_eq!(
            ended(&oom).unwrap(),
            "container function terminated (OOMKilled, exit code 137)"
        );
        let failed = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Failed", "reason": "Evicted"}
        }));
        assert_eq!(ended(&failed).unwrap(), "ended (Failed: Evicted)");
        let deleting = pod(serde_json::json!({
            "metadata": {"name": "p", "deletionTimestamp": "2026-11-23T00:00:00Z"}
        }));
        assert_eq!(ended(&deleting).unwrap(), "is being deleted");
    }

    #[test]
    fn a_pod_that_cannot_pull_has_ended_and_a_finished_init_container_has_not() {
        let pulling = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending",
              "initContainerStatuses": [
                {"name": "copy-wrapper-server", "image": "w", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
              "containerStatuses": [
                {"name": "function", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}
        }));
        assert_eq!(
            ended(&pulling).unwrap(),
            "container function cannot start (ImagePullBackOff: no such image)"
        );
        let initialised = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Running",
              "initContainerStatuses": [
                {"name": "copy-wrapper-server", "image": "w", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        }));
        assert_eq!(ended(&initialised), None);
    }

    #[test]
    fn names_are_service_names_too() {
        assert_eq!(
            service_name("set-namespace-v1-ab-0".into()),
            "set-namespace-v1-ab-0"
        );
        assert_eq!(service_name("2fa-fn-v1-ab-0".into()), "fn-2fa-fn-v1-ab-0");
        let long = format!("9{}", "a".repeat(62));
        let name = service_name(long);
        assert!(
            name.len() <= 63 && name.starts_with("fn-") && name.ends_with('a'),
            "{name}"
        );
        assert_ne!(instance_tag("runner"), "");
    }

    #[test]
    fn endpoints_list_the_pod_once_its_ip_is_a_ready_address() {
        let endpoints: Endpoints = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "subsets": [{"addresses": [{"ip": "172.17.0.2"}], "notReadyAddresses": [{"ip": "172.17.0.3"}]}]
        }))
        .unwrap();
        assert!(lists_address(Some(&endpoints), "172.17.0.2"));
        assert!(!lists_address(Some(&endpoints), "172.17.0.3"));
        assert!(!lists_address(None, "172.17.0.2"));
    }
}
