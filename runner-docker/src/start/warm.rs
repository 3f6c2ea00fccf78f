//! Kept-warm containers (`eval --keep-warm`): those of an image, and of
//! them one of the same shape that serves.

use std::path::PathBuf;
use std::time::Duration;

use bollard::query_parameters::ListContainersOptions;

use crate::engine::label_filter;
use crate::names::{
    IMAGE_LABEL, KEEP_WARM_LABEL, MANAGED_LABEL, SOCKET_DIR_LABEL, SOCKET_NAME, SOCKET_ROOT_LABEL,
};
use crate::state::Inner;

impl Inner {
    /// The running kept-warm containers of `image`, whatever their
    /// fingerprint (listed while the fingerprint is still being worked out).
    pub(super) async fn kept_of(&self, image: &str) -> Vec<bollard::models::ContainerSummary> {
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
        kept: Vec<bollard::models::ContainerSummary>,
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
}
