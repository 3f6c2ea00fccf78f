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
        });
        let selector = format!("{OWNER_LABEL}={}", label_value(&inner.settings.owner));
        let stream = watcher(pods, watcher::Config::default().labels(&selector)).default_backoff();
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
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
                    Ok(_) => {}
                    // The watcher restarts itself (410 Gone included), with backoff.
                    Err(err) => tracing::warn!(%err, "pod watch"),
                }
                tick.send_modify(|n| *n += 1);
            }
        });
        Self { inner }
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
            let image = spec.image.clone();
            let failed = |err: StartError| BackendError::StartFailed {
                image: image.clone(),
                source: cause(err),
            };
            let entrypoint = inner.entrypoints.of(&spec.image).await.map_err(|err| {
                BackendError::StartFailed {
                    image: spec.image.clone(),
                    source: cause(err),
                }
            })?;
            let settings = &inner.settings;
            let n = inner.next.fetch_add(1, Ordering::Relaxed);
            // Unique across replicas too: the owner's label value and a count.
            let name = pod_name(&spec.image, &format!("{}-{n}", short(&settings.owner)));
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
            let started = tokio::time::Instant::now();
            let create = async {
                inner
                    .pods
                    .create(&PostParams::default(), &function_pod.pod())
                    .await
                    .map_err(|source| StartError::Create {
                        kind: "pod",
                        name: name.clone(),
                        source,
                    })?;
                inner
                    .services
                    .create(&PostParams::default(), &function_pod.service())
                    .await
                    .map_err(|source| StartError::Create {
                        kind: "service",
                        name: name.clone(),
                        source,
                    })?;
                let pod = inner.wait_ready(&name).await?;
                // The Service routes to the pod only once its Endpoints list
                // the pod's IP: before that, a call by the Service's name is
                // refused, and would count as a dead pod.
                let ip = pod_ip(&pod).unwrap_or_default().to_string();
                await_condition(
                    inner.endpoints.clone(),
                    &name,
                    move |e: Option<&Endpoints>| lists_address(e, &ip),
                )
                .await
                .map_err(|source| StartError::Endpoints {
                    name: name.clone(),
                    source,
                })?;
                Ok(pod)
            };
            let pod = match tokio::time::timeout(spec.ready_timeout, create).await {
                Ok(Ok(pod)) => pod,
                Ok(Err(err)) => {
                    inner.delete(&name).await;
                    return Err(failed(err));
                }
                Err(_) => {
                    inner.delete(&name).await;
                    return Err(BackendError::ReadyTimeout {
                        image: spec.image,
                        timeout: spec.ready_timeout,
                        detail: format!("pod {name} never became Ready"),
                    });
                }
            };
            let endpoint = match settings.dial {
                Dial::PodIp => {
                    format!("http://{}:{WRAPPER_PORT}", pod_ip(&pod).unwrap_or_default())
                }
                Dial::Service => format!(
                    "http://{name}.{}.svc.cluster.local:{WRAPPER_PORT}",
                    settings.namespace
                ),
            };
            inner
                .ready
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.clone());
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

fn is_ready(pod: &Pod) -> bool {
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
    status.container_statuses.as_ref()?.iter().find_map(|c| {
        let terminated = c.state.as_ref()?.terminated.as_ref()?;
        Some(format!(
            "container {} terminated ({}, exit code {})",
            c.name,
            terminated.reason.as_deref().unwrap_or("no reason"),
            terminated.exit_code
        ))
    })
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// The first 8 alphanumerics of the owner: pod names stay short.
fn short(owner: &str) -> String {
    owner
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase()
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
