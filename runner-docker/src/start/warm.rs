//! Kept-warm containers (`eval --keep-warm`): the fingerprint of a
//! container's shape, the kept-warm containers of an image, and of them one
//! of the same shape that serves, reused.

use std::path::PathBuf;
use std::time::Duration;

use bollard::models::ContainerSummary;
use bollard::query_parameters::ListContainersOptions;

use runner_core::backend::{PodId, PodSpec, ReadyPod};

use crate::engine::label_filter;
use crate::host::{fingerprint, lock_socket_dir};
use crate::names::{
    IMAGE_LABEL, KEEP_WARM_LABEL, MANAGED_LABEL, SOCKET_DIR_LABEL, SOCKET_NAME, SOCKET_ROOT_LABEL,
};
use crate::resources::Resources;
use crate::settings::{DockerSettings, Tools};
use crate::state::{Inner, PodEntry};
use crate::tools;

/// The fingerprint of everything that shapes a container of `spec`, for a
/// kept-warm one (`None` without keep-warm).
pub(super) fn shape_fingerprint(
    settings: &DockerSettings,
    spec: &PodSpec,
    image_id: &str,
    tools_id: &str,
    wrapper_args: &[String],
    resources: &Resources,
) -> Option<String> {
    // Only kept-warm containers are looked up by their shape.
    settings.keep_warm?;
    // The image's id, not only its name: an author who rebuilds
    // the image under the same tag gets a container of the new one.
    Some(fingerprint(&[
        &spec.image,
        image_id,
        tools_id,
        &wrapper_args.join("\0"),
        &format!("{resources:?}"),
        // Another environment, mount, network or user makes
        // another container.
        &format!("{:?}", settings.container),
        // As do another PIDs limit, and a runner that locks
        // its socket directories (one kept before did not).
        &format!("pids={:?}; socket dir locked", spec.pids_limit),
        // A single-use function's kept containers never served
        // a call: no other function's may stand in for them.
        if spec.single_use { "single-use" } else { "" },
    ]))
}

impl Inner {
    /// The tools' part of a kept-warm container's fingerprint: the wrapper
    /// image's id, or the host binaries' identity; empty without keep-warm.
    /// Where the tools come from is asked in either case.
    pub(super) async fn tools_id(&self) -> String {
        let keep_warm = self.settings.keep_warm.is_some();
        match (&self.tools_from().await, keep_warm) {
            (_, false) | (Tools::Missing { .. }, _) => String::new(),
            (Tools::Image(image), true) => self
                .docker
                .inspect_image(image)
                .await
                .ok()
                .and_then(|i| i.id)
                .unwrap_or_default(),
            (Tools::Host { wrapper, probe }, true) => tools::host_fingerprint(wrapper, probe),
        }
    }

    /// The running kept-warm containers of `image`, whatever their
    /// fingerprint (listed while the fingerprint is still being worked out).
    pub(super) async fn kept_of(&self, image: &str) -> Vec<ContainerSummary> {
        let image_label = format!("{IMAGE_LABEL}={image}");
        let root_label = format!("{SOCKET_ROOT_LABEL}={}", self.settings.socket_dir.display());
        let mut filters =
            label_filter(&[MANAGED_LABEL, &image_label, KEEP_WARM_LABEL, &root_label]);
        filters.insert("status".into(), vec!["running".into()]);
        self.docker
            .list_containers(Some(ListContainersOptions {
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .unwrap_or_default()
    }

    /// Of `kept` (from [`Self::kept_of`]), one of `fingerprint` that serves.
    pub(super) async fn find_kept(
        &self,
        kept: Vec<ContainerSummary>,
        fingerprint: &str,
    ) -> Option<(String, PathBuf)> {
        for c in kept {
            let (Some(names), Some(labels)) = (c.names, c.labels) else {
                continue;
            };
            if labels.get(KEEP_WARM_LABEL).map(String::as_str) != Some(fingerprint) {
                continue;
            }
            let Some(dir) = labels.get(SOCKET_DIR_LABEL) else {
                continue;
            };
            let Some(name) = names.first() else { continue };
            let dir = PathBuf::from(dir);
            if !dir.starts_with(&self.settings.socket_dir) {
                continue;
            }
            let endpoint = format!("unix:{}", dir.join(SOCKET_NAME).display());
            // A broken one is passed over; one that starts draining (idle)
            // just after this answers UNAVAILABLE, and the call is retried
            // on a new container.
            if tokio::time::timeout(
                Duration::from_secs(2),
                runner_core::backend::serving::wait_serving(&endpoint),
            )
            .await
            .is_ok_and(|r| r.is_ok())
            {
                return Some((name.trim_start_matches('/').to_string(), dir));
            }
        }
        None
    }

    /// Of `kept`, one of `fingerprint` that serves and whose socket
    /// directory is taken back: the pod, ready.
    pub(super) async fn reuse_kept(
        &self,
        spec: &PodSpec,
        kept: Vec<ContainerSummary>,
        fingerprint: &str,
    ) -> Option<ReadyPod> {
        let kept = self.find_kept(kept, fingerprint).await;
        let (name, dir) = kept.filter(|(_, dir)| lock_socket_dir(dir, SOCKET_NAME).is_ok())?;
        let id = PodId(name.clone());
        let endpoint = format!("unix:{}", dir.join(SOCKET_NAME).display());
        tracing::info!(pod = %id, image = %spec.image, "docker: reusing a kept-warm container");
        self.lock_pods().insert(
            id.clone(),
            PodEntry {
                container: name,
                socket_dir: dir,
                ready: true,
                kept: true,
                stopping: false,
                died: None,
                died_tx: None,
            },
        );
        Some(ReadyPod { id, endpoint })
    }
}
