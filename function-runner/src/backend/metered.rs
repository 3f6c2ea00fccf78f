//! The backend decorator that records every pod start (outcome and time to
//! Ready) and stop (why) in the runner's metrics, whichever backend it
//! wraps.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use runner_core::backend::metrics::PoolMetrics;
use runner_core::backend::{Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, StopReason};
use tokio::sync::mpsc;

use crate::metrics::RunnerMetrics;

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
            metrics.observe_pod_start(res.is_ok(), started.elapsed());
            res
        })
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        // Every backend's pods: the process and docker backends have no
        // place for events but the log and this counter.
        tracing::info!(pod = %id, backend = self.inner.name(), why = reason.describe(), "letting go of a pod");
        self.metrics.observe_pod_stop(reason.as_str());
        self.inner.stop(id, reason)
    }

    fn reused(&self, id: &PodId, ttl: std::time::Duration) {
        self.inner.reused(id, ttl)
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        self.inner.set_events(events)
    }

    fn close(&self) -> futures::future::BoxFuture<'static, ()> {
        self.inner.close()
    }

    fn ready(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.inner.ready()
    }

    fn pod_key(&self, image: &str) -> Option<String> {
        self.inner.pod_key(image)
    }

    fn check(&self, image: &str) -> Result<(), BackendError> {
        self.inner.check(image)
    }

    fn set_pools(&self, pools: Vec<PodSpec>) {
        self.inner.set_pools(pools)
    }

    fn close_within(&self) -> std::time::Duration {
        self.inner.close_within()
    }

    fn pool_metrics(&self) -> Option<PoolMetrics> {
        self.inner.pool_metrics()
    }
}
