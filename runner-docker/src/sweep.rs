//! The sweep: what runners that are gone (crashed, or killed) left behind
//! is removed when a runner starts, told from what live runners hold by
//! their locks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::query_parameters::ListVolumesOptions;

use crate::engine::{label_filter, list_containers, remove_container, remove_volume};
use crate::host::is_instance_name;
use crate::names::{
    KEEP_WARM_LABEL, MANAGED_LABEL, RUNNER_LABEL, SOCKET_DIR_LABEL, SOCKET_ROOT_LABEL,
};
use crate::state::Inner;

/// How long a closing backend waits for its sweep of gone runners'
/// leftovers; what it does not finish, the next runner's does.
pub(crate) const SWEEP_WAIT: Duration = Duration::from_secs(10);

impl Inner {
    /// Waits for the sweep started with the backend.
    pub(crate) async fn swept(&self) {
        if let Some(sweep) = self.swept.get() {
            sweep.clone().await;
        }
    }

    /// Removes what runners that are gone left behind: their containers
    /// (but kept-warm ones still running), volumes no container uses, and
    /// directories without a container.
    pub(crate) async fn sweep(&self) {
        let root = &self.settings.socket_dir;
        let alive = |instance: &str| -> bool {
            if instance == self.instance {
                return true;
            }
            // A runner that lives holds a lock on its directory; taking it,
            // or finding no directory, means it is gone.
            if !is_instance_name(instance) {
                return false;
            }
            match std::fs::File::open(root.join(instance)) {
                Ok(dir) => {
                    rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                        == Err(rustix::io::Errno::WOULDBLOCK)
                }
                Err(_) => false,
            }
        };
        let root_label = format!("{SOCKET_ROOT_LABEL}={}", root.display());
        let containers = match list_containers(&self.docker, &[MANAGED_LABEL, &root_label]).await {
            Ok(list) => list,
            Err(err) => {
                tracing::warn!(%err, "docker: listing containers to sweep");
                return;
            }
        };
        let mut in_use = std::collections::HashSet::new();
        for c in containers {
            let labels = c.labels.clone().unwrap_or_default();
            let owner = labels.get(RUNNER_LABEL).map(String::as_str).unwrap_or("");
            let running = c.state.as_ref().map(|s| s.to_string()) == Some("running".into());
            let kept = labels.contains_key(KEEP_WARM_LABEL) && running;
            let Some(id) = c.id else { continue };
            if kept || alive(owner) {
                if let Some(dir) = labels.get(SOCKET_DIR_LABEL) {
                    in_use.insert(PathBuf::from(dir));
                }
                continue;
            }
            tracing::info!(container = %id, runner = owner, "docker: removing a container a runner left");
            remove_container(&self.docker, &id).await;
        }
        // Volumes: those of gone runners; one still mounted is refused by the
        // engine (kept-warm containers use theirs) and stays.
        if let Ok(list) = self
            .docker
            .list_volumes(Some(ListVolumesOptions {
                filters: Some(label_filter(&[MANAGED_LABEL, &root_label])),
            }))
            .await
        {
            for v in list.volumes.unwrap_or_default() {
                let owner = v.labels.get(RUNNER_LABEL).map(String::as_str).unwrap_or("");
                if !alive(owner) {
                    remove_volume(&self.docker, &v.name).await;
                }
            }
        }
        // Directories of gone runners, but those a kept container uses.
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            // Only runner directories (eight hex digits): whatever else is
            // in the directory is not ours to remove.
            if !is_instance_name(name)
                || !entry.file_type().is_ok_and(|t| t.is_dir())
                || alive(name)
            {
                continue;
            }
            let mut left = 0;
            for pod in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let p = pod.path();
                // Asked again, not only of the list above: a runner that was
                // alive then may have left a kept-warm container since, and
                // a start of this runner may be reusing it now.
                if in_use.contains(&p) || self.kept_dir(&p).await {
                    left += 1;
                } else if pod.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir_all(&p);
                }
            }
            if left == 0 {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// Whether a kept-warm container still uses `dir`.
    pub(crate) async fn kept_dir(&self, dir: &Path) -> bool {
        let label = format!("{SOCKET_DIR_LABEL}={}", dir.display());
        list_containers(&self.docker, &[MANAGED_LABEL, &label])
            .await
            .is_ok_and(|list| !list.is_empty())
    }
}
