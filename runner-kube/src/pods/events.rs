//! What this runner does with the pod watch's events (failures, deletes,
//! drains by others, relists, template changes), and the watcher that
//! yields them.

use std::sync::PoisonError;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::Api;

use super::delete::Exactly;
use super::inner::Inner;
use super::readiness::terminated;
use crate::lifecycle::Phase;
use crate::names::TEMPLATE_VERSION_ANNOTATION;
use crate::template::Template;
use runner_core::backend::{PodEvent, PodId, Retire};

impl Inner {
    pub(super) fn on_pod_event(&self, event: Result<watcher::Event<Pod>, watcher::Error>) {
        match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(reason) = terminated(&pod) {
                    let reported = self.report_failed(&name, pod.metadata.uid.as_deref(), &reason);
                    if reported {
                        self.lifecycle.emit(
                            &pod,
                            Phase::Failed,
                            format!("runner {} saw it fail: {reason}", self.runner),
                        );
                    }
                    if !reported
                        && self.mine(&pod)
                        && !self.held().claimed.contains(&name)
                        && pod.metadata.deletion_timestamp.is_none()
                    {
                        // A pod of this runner that nobody holds (left by
                        // an earlier run) ended: nobody else deletes it.
                        self.spawn_delete(
                            name,
                            Exactly::Uid(pod.metadata.uid.clone().unwrap_or_default()),
                        );
                    }
                } else if let Some(why) = self.taken_away(&pod) {
                    // Its calls here still run to their end on it (a pod
                    // being deleted answers what it has, then drains); no
                    // new one goes to it.
                    self.report_taken(&name, pod.metadata.uid.as_deref(), &why);
                }
                self.unprotect_if_due(&pod);
            }
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(uid) = &pod.metadata.uid {
                    self.held().deleting.remove(uid);
                }
                self.report_failed(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.uid.as_deref(),
                    "was deleted",
                );
            }
            // A relist after the watch broke (410 Gone included): a pod
            // deleted meanwhile produced no Delete event, it is just absent
            // from the new list.
            Ok(watcher::Event::InitDone) => {
                self.access.granted(|right| {
                    right.resource == "pods" && matches!(right.verb.as_str(), "list" | "watch")
                });
                *self
                    .watch_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                self.report_missing();
            }
            Ok(_) => {}
            // The watcher restarts itself, with backoff.
            Err(err) => {
                let api = match &err {
                    watcher::Error::InitialListFailed(api)
                    | watcher::Error::WatchStartFailed(api)
                    | watcher::Error::WatchFailed(api) => Some(api),
                    _ => None,
                };
                // A refusal is logged once, by the access state, not on
                // every retry.
                let said = crate::access::watch_one_line(&err);
                if !api.is_some_and(|api| self.access.note(api)) {
                    tracing::warn!(err = %said, "pod watch");
                }
                *self
                    .watch_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(said);
            }
        }
    }

    /// Reports a handed-out pod's end to the cache; whether it was one. A
    /// `uid` other than the handed-out pod's is an older pod of that name:
    /// its end says nothing of this one.
    pub(super) fn report_failed(&self, name: &str, uid: Option<&str>, reason: &str) -> bool {
        let was_ready = {
            let mut held = self.held();
            let same = match (uid, held.uids.get(name)) {
                (Some(seen), Some(held)) => seen == held,
                _ => true,
            };
            let was_ready = same && held.ready.remove(name);
            if was_ready {
                held.known.remove(name);
            }
            was_ready
        };
        if was_ready {
            tracing::warn!(pod = %name, %reason, "pod failed");
            if let Some(events) = self.events.get() {
                let _ = events.send(PodEvent::Failed {
                    id: PodId(name.to_string()),
                    reason: reason.to_string(),
                });
            }
        }
        was_ready
    }

    /// Reports every handed-out pod that the store no longer has.
    pub(super) fn report_missing(&self) {
        let held: Vec<(String, Option<String>)> = {
            let held = self.held();
            held.ready
                .iter()
                .map(|name| (name.clone(), held.uids.get(name).cloned()))
                .collect()
        };
        for (name, uid) in held {
            let present = self
                .store
                .get(&self.key(&name))
                .is_some_and(|p| uid.is_none() || p.metadata.uid == uid);
            if !present {
                self.report_failed(&name, None, "was deleted while the watch was down");
            }
        }
    }

    /// Tells the cache that the pod `name` is of an old template: it takes
    /// no new call and goes once idle (the cache decides when).
    pub(super) fn report_stale(&self, name: String, why: Retire) {
        if let Some(events) = self.events.get() {
            let _ = events.send(PodEvent::Stale {
                id: PodId(name),
                why,
            });
        }
    }

    /// The template changed: handed-out pods of another version take no
    /// new call and go once idle (the cache decides when).
    pub(super) fn retire_other_versions(&self, template: &Template) {
        let names: Vec<String> = self.held().ready.iter().cloned().collect();
        for name in names {
            let Some(pod) = self.store.get(&self.key(&name)) else {
                continue;
            };
            let version = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(TEMPLATE_VERSION_ANNOTATION));
            if version != Some(&template.version) {
                tracing::info!(pod = %name, "the pod template changed: replacing the pod once idle");
                self.report_stale(name, Retire::TemplateChanged);
            }
        }
    }
}

/// The pod watcher, started afresh (from a new list) when a watch request
/// is answered 410 Gone: kube-runtime relists after a 410 ERROR event, but
/// retries a watch request answered 410 at the same expired
/// resourceVersion for ever, so pods deleted meanwhile would never leave
/// the store.
pub(super) fn pod_watcher(
    pods: Api<Pod>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Send {
    let first = watcher(pods.clone(), config.clone()).boxed();
    futures::stream::unfold(
        (first, pods, config),
        |(mut stream, pods, config)| async move {
            let event = stream.next().await?;
            if let Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))) = &event {
                if status.code == 410 {
                    stream = watcher(pods.clone(), config.clone()).boxed();
                }
            }
            Some((event, (stream, pods, config)))
        },
    )
}
