//! A backend decorator that records pod starts and their duration.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::{Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod};
use crate::metrics::{OutcomeLabel, RunnerMetrics};

/// A backend that records pod starts and their duration.
pub struct MeteredBackend {
    inner: Arc<dyn Backend>,
    metrics: Arc<RunnerMetrics>,
}

impl MeteredBackend {
    pub fn new(inner: Arc<dyn Backend>, metrics: Arc<RunnerMetrics>) -> Self {
        Self { inner, metrics }
    }
}

impl Backend for MeteredBackend {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let fut = self.inner.start(spec);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let started = Instant::now();
            let res = fut.await;
            let outcome = if res.is_ok() { "ok" } else { "failed" };
            metrics
                .pod_starts
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.into(),
                })
                .inc();
            if res.is_ok() {
                metrics
                    .pod_start_seconds
                    .observe(started.elapsed().as_secs_f64());
            }
            res
        })
    }

    fn stop(&self, id: PodId) -> BoxFuture<'static, Result<(), BackendError>> {
        self.inner.stop(id)
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        self.inner.set_events(events)
    }
}
