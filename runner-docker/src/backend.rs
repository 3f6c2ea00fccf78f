//! The backend: set up on an engine (this runner's directory and lock, the
//! sweep, the events followed), pods stopped, this runner's leftovers
//! removed at its close; and the runner's [`Backend`] trait over it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use futures::future::{BoxFuture, FutureExt};
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use runner_core::backend::{
    Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, Retire, StopReason,
};

use crate::engine::{list_containers, remove_container, remove_volume};
use crate::errors::DockerSetupError;
use crate::events::follow_events;
use crate::host::{instance_id, lock_file, private_dir, unix_now};
use crate::names::{KEEP_WARM_LABEL, MANAGED_LABEL, RUNNER_LABEL, SOCKET_NAME};
use crate::settings::DockerSettings;
use crate::state::Inner;
use crate::sweep::SWEEP_WAIT;

/// How long the close may take: the wait for the sweep of gone runners'
/// leftovers, then the removal of this runner's containers, tools volume and
/// directories (a few engine requests, each answered in well under a second
/// by a live engine; a slow one leaves the rest to the next runner's sweep).
const CLOSE_WITHIN: Duration = SWEEP_WAIT.saturating_add(Duration::from_secs(20));
use crate::tools::choose_tools;

/// Unix socket paths hold at most 107 bytes; under the socket directory
/// come `/<instance>/<pod number>/wrapper.sock` (pod numbers up to 20 digits).
const MAX_SOCKET_PATH: usize = 107;
const SOCKET_PATH_TAIL: usize = 1 + 8 + 1 + 20 + 1 + SOCKET_NAME.len();

/// How long a stopping container may drain before the engine kills it.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The docker backend. See the [crate docs](crate).
#[derive(Clone)]
pub struct DockerBackend(Arc<Inner>);

impl DockerBackend {
    /// Sets the backend up on `docker`: takes this runner's directory and
    /// lock, removes what crashed runners left, and follows the engine's
    /// events.
    pub async fn new(
        docker: Docker,
        mut settings: DockerSettings,
    ) -> Result<Self, DockerSetupError> {
        let given = settings.socket_dir.clone();
        let root = &given;
        let setup = |reason: String| DockerSetupError::SocketDir {
            path: given.clone(),
            reason,
        };
        private_dir(root).map_err(setup)?;
        // One spelling of it on the labels, whoever names it how.
        settings.socket_dir = std::fs::canonicalize(root).map_err(|e| setup(e.to_string()))?;
        let root = &settings.socket_dir;
        let limit = root.as_os_str().len() + SOCKET_PATH_TAIL;
        if limit > MAX_SOCKET_PATH {
            return Err(setup(format!(
                "too long for Unix socket paths under it ({limit} of at most {MAX_SOCKET_PATH} bytes): choose a shorter directory"
            )));
        }
        let instance = instance_id();
        let dir = root.join(&instance);
        // Locked before it has its name, so no sweep ever sees it unlocked.
        let fresh = root.join(format!(".new-{instance}"));
        let lock = std::fs::create_dir(&fresh)
            .and_then(|()| lock_file(&fresh))
            .and_then(|lock| std::fs::rename(&fresh, &dir).map(|()| lock))
            .map_err(|err| DockerSetupError::SocketDir {
                path: dir.clone(),
                reason: err.to_string(),
            })?;
        let since = unix_now().saturating_sub(1);
        let tools_from = match settings.tools.clone() {
            Some(tools) => tools,
            None => choose_tools(&docker, &settings).await,
        };
        tracing::info!(tools = %tools_from, "docker: function containers' tools");
        let backend = DockerBackend(Arc::new(Inner {
            docker,
            settings,
            instance,
            dir,
            _lock: lock,
            closed: Default::default(),
            events: Default::default(),
            pods: Default::default(),
            oomed: Default::default(),
            tools_from: Mutex::new(tools_from),
            swept: Default::default(),
            made: Default::default(),
            tools: AsyncMutex::new(None),
            next: AtomicU64::new(1),
        }));
        let sweeper = backend.0.clone();
        let sweep = tokio::spawn(async move { sweeper.sweep().await });
        let sweep: BoxFuture<'static, ()> = Box::pin(async move {
            let _ = sweep.await;
        });
        let _ = backend.0.swept.set(sweep.shared());
        tokio::spawn(follow_events(Arc::downgrade(&backend.0), since));
        Ok(backend)
    }

    async fn stop_pod(&self, id: PodId, reason: StopReason) {
        let inner = &self.0;
        let entry = {
            let mut pods = inner.lock_pods();
            match pods.get_mut(&id) {
                // Kept warm: stays for the next run, unless broken or a
                // single-use pod that served its call.
                Some(entry)
                    if entry.kept
                        && matches!(reason, StopReason::Idle(why) if why != Retire::Used) =>
                {
                    pods.remove(&id);
                    return;
                }
                Some(entry) => {
                    entry.stopping = true;
                    (entry.container.clone(), entry.socket_dir.clone())
                }
                None => return,
            }
        };
        let (container, dir) = entry;
        // SIGTERM drains the wrapper; the engine kills it after the grace.
        let _ = inner
            .docker
            .stop_container(
                &container,
                Some(bollard::query_parameters::StopContainerOptions {
                    t: Some(STOP_GRACE.as_secs() as i32),
                    ..Default::default()
                }),
            )
            .await;
        remove_container(&inner.docker, &container).await;
        let _ = std::fs::remove_dir_all(&dir);
        inner.lock_pods().remove(&id);
    }

    /// Removes this runner's tools volume (once no container uses it: a
    /// kept-warm one keeps it until a later sweep) and its directory, but
    /// the directories of kept-warm containers.
    async fn close_backend(&self) {
        let inner = &self.0;
        inner.closed.store(true, Ordering::SeqCst);
        if tokio::time::timeout(SWEEP_WAIT, inner.swept())
            .await
            .is_err()
        {
            tracing::warn!("docker: the sweep of gone runners' leftovers did not finish");
        }
        if !inner.made.load(Ordering::SeqCst) {
            // Only kept-warm containers were reused (an `eval --keep-warm`
            // that found its container): nothing of this runner's to list.
            let _ = std::fs::remove_dir_all(&inner.dir);
            return;
        }
        // Starts still running (given up by the cache, or cut short by the
        // runner's exit): their containers go now, kept-warm ones excepted.
        let own = format!("{RUNNER_LABEL}={}", inner.instance);
        if let Ok(list) = list_containers(&inner.docker, &[MANAGED_LABEL, &own]).await {
            for c in list {
                let kept = c
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(KEEP_WARM_LABEL));
                if let (false, Some(id)) = (kept, c.id) {
                    remove_container(&inner.docker, &id).await;
                }
            }
        }
        if let Some(volume) = inner.tools.lock().await.take() {
            remove_volume(&inner.docker, &volume).await;
        }
        let kept: Vec<PathBuf> = inner
            .lock_pods()
            .values()
            .map(|p| p.socket_dir.clone())
            .collect();
        let mut left = false;
        for entry in std::fs::read_dir(&inner.dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            if kept.contains(&path) || inner.kept_dir(&path).await {
                left = true;
            } else {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
        if !left {
            let _ = std::fs::remove_dir_all(&inner.dir);
        }
    }
}

impl Backend for DockerBackend {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let this = self.clone();
        Box::pin(async move { this.0.start_pod(spec).await })
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        let this = self.clone();
        Box::pin(async move {
            this.stop_pod(id, reason).await;
            Ok(())
        })
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.0.events.set(events);
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let this = self.clone();
        Box::pin(async move { this.close_backend().await })
    }

    fn close_within(&self) -> Duration {
        CLOSE_WITHIN
    }
}
