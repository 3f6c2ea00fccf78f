//! The backend's state, shared by its clones and its tasks: the engine, the
//! settings, this runner's instance and its locked directory, the pods it
//! knows, and what it made.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};

use bollard::Docker;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use runner_core::backend::{PodEvent, PodId};

use crate::names::{MANAGED_LABEL, RUNNER_LABEL, SOCKET_ROOT_LABEL};
use crate::settings::{DockerSettings, Tools};

/// One pod the backend knows of.
pub(crate) struct PodEntry {
    pub(crate) container: String,
    pub(crate) socket_dir: PathBuf,
    pub(crate) ready: bool,
    /// Kept warm: outlives this runner unless broken.
    pub(crate) kept: bool,
    /// Stopping on request: its exit is no failure.
    pub(crate) stopping: bool,
    /// It died while starting (seen in the events before the start ended).
    pub(crate) died: Option<String>,
    /// Tells the start of its death.
    pub(crate) died_tx: Option<tokio::sync::oneshot::Sender<String>>,
}

/// What the backend's clones share.
pub(crate) struct Inner {
    pub(crate) docker: Docker,
    pub(crate) settings: DockerSettings,
    /// This runner's id on its labels and its directory's name.
    pub(crate) instance: String,
    /// `<socket_dir>/<instance>`, holding `lock` and a directory per pod.
    pub(crate) dir: PathBuf,
    /// `dir`, opened and held locked (flock) while this runner lives.
    pub(crate) _lock: std::fs::File,
    /// Closed: starts still running remove what they made.
    pub(crate) closed: std::sync::atomic::AtomicBool,
    pub(crate) events: std::sync::OnceLock<mpsc::UnboundedSender<PodEvent>>,
    pub(crate) pods: Mutex<HashMap<PodId, PodEntry>>,
    /// Containers of ours the kernel OOM-killed in (from the `oom` event,
    /// which comes before `die`; an auto-removed container cannot be
    /// inspected after).
    pub(crate) oomed: Mutex<std::collections::HashSet<String>>,
    /// Where the containers' tools come from; chosen again at each start
    /// while there are none (an image built after the runner started is
    /// then found).
    pub(crate) tools_from: Mutex<Tools>,
    /// The sweep of what gone runners left ([`Inner::sweep`]), run
    /// in the background: a start that reuses a kept-warm container does not
    /// wait for it; one that creates a container, and the close, do.
    pub(crate) swept: std::sync::OnceLock<futures::future::Shared<BoxFuture<'static, ()>>>,
    /// A start went past reusing a kept-warm container: it may have made a
    /// container, a volume or a socket directory.
    pub(crate) made: std::sync::atomic::AtomicBool,
    /// The tools volume, once installed (from an image).
    pub(crate) tools: AsyncMutex<Option<String>>,
    pub(crate) next: AtomicU64,
}

impl Inner {
    pub(crate) fn lock_pods(&self) -> std::sync::MutexGuard<'_, HashMap<PodId, PodEntry>> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn labels(&self, extra: &[(&str, &str)]) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (MANAGED_LABEL.to_string(), "true".to_string()),
            (RUNNER_LABEL.to_string(), self.instance.clone()),
            (
                SOCKET_ROOT_LABEL.to_string(),
                self.settings.socket_dir.display().to_string(),
            ),
        ]);
        for (k, v) in extra {
            labels.insert((*k).to_string(), (*v).to_string());
        }
        labels
    }
}
