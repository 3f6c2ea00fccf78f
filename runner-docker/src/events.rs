//! The engine's events for containers of ours: a container's death is a
//! pod's failure, or the end of its start.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use bollard::query_parameters::EventsOptions;
use futures::StreamExt;

use runner_core::backend::{PodEvent, PodId};

use crate::engine::{label_filter, oom_killed, remove_container};
use crate::names::MANAGED_LABEL;
use crate::state::Inner;

impl Inner {
    /// A container of ours died (an engine event, with the exit code it
    /// names): a ready pod is reported failed and removed; a starting one's
    /// start is told.
    async fn container_died(self: &Arc<Self>, container: &str, code: Option<String>) {
        let id = PodId(container.to_string());
        let known = {
            let pods = self.lock_pods();
            pods.get(&id).map(|e| (e.stopping, e.socket_dir.clone()))
        };
        let Some((stopping, dir)) = known else {
            return;
        };
        if stopping {
            return;
        }
        let oomed = self
            .oomed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(container);
        let oomed = if oomed {
            Some(true)
        } else {
            oom_killed(&self.docker, container).await
        };
        let reason = match oomed {
            Some(true) => "the container was OOM-killed (its memory limit)".to_string(),
            _ => match code {
                Some(code) => format!("the container exited (code {code})"),
                None => "the container exited".to_string(),
            },
        };
        {
            let mut pods = self.lock_pods();
            let Some(entry) = pods.get_mut(&id) else {
                return;
            };
            if entry.stopping {
                return;
            }
            if !entry.ready {
                if let Some(tx) = entry.died_tx.take() {
                    let _ = tx.send(reason.clone());
                }
                entry.died = Some(reason);
                return;
            }
            pods.remove(&id);
        }
        tracing::warn!(pod = %id, %reason, "pod failed");
        if let Some(events) = self.events.get() {
            let _ = events.send(PodEvent::Failed { id, reason });
        }
        remove_container(&self.docker, container).await;
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Follows the engine's events for containers of ours, while the backend
/// lives: `die` events become pod failures. Reconnects after an error,
/// asking again from the last event seen, so none is lost in between.
pub(crate) async fn follow_events(inner: std::sync::Weak<Inner>, mut since: u64) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let docker = strong.docker.clone();
        drop(strong);
        let mut filters = label_filter(&[MANAGED_LABEL]);
        filters.insert("type".into(), vec!["container".into()]);
        filters.insert("event".into(), vec!["oom".into(), "die".into()]);
        let mut stream = docker.events(Some(EventsOptions {
            since: Some(since.to_string()),
            filters: Some(filters),
            ..Default::default()
        }));
        while let Some(event) = stream.next().await {
            let Some(inner) = inner.upgrade() else { return };
            match event {
                Ok(event) => {
                    backoff = Duration::from_millis(100);
                    if let Some(time) = event.time {
                        since = since.max(u64::try_from(time).unwrap_or(0));
                    }
                    let mut attributes = event.actor.and_then(|a| a.attributes).unwrap_or_default();
                    let Some(name) = attributes.remove("name") else {
                        continue;
                    };
                    if event.action.as_deref() == Some("oom") {
                        inner
                            .oomed
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(name);
                    } else {
                        let code = attributes.remove("exitCode");
                        let inner = inner.clone();
                        tokio::spawn(async move { inner.container_died(&name, code).await });
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "docker: the events stream failed; following again");
                    break;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
