//! `--max-pods`: room for one more pod among all functions' (see
//! [`CacheSettings::max_pods`](super::CacheSettings::max_pods)).

use std::sync::Arc;

use super::image::Slot;
use super::{Actor, CacheError};
use runner_core::backend::{Retire, StopReason};

impl Actor {
    /// Whether one more pod fits under `max_pods`.
    pub(super) fn has_room(&self) -> bool {
        let pods: usize = self.images.values().map(|e| e.pods.len()).sum();
        pods < self.ctx.settings.max_pods
    }

    /// Whether a pod of `image` may start: the backend knows the image (a
    /// name it cannot run costs no other pod its place), and there is room
    /// under `max_pods`, made if need be.
    pub(super) fn room_for(&mut self, image: &Arc<str>) -> Result<(), CacheError> {
        if let Err(source) = self.ctx.backend.check(image) {
            return Err(CacheError::PodStart {
                image: image.to_string(),
                source,
            });
        }
        if self.make_room(image) {
            Ok(())
        } else {
            Err(CacheError::Full {
                image: image.to_string(),
                max: self.ctx.settings.max_pods,
            })
        }
    }

    /// Room for one more pod under `max_pods`: at the limit, the least
    /// recently used idle pod is stopped. False when every pod is busy (a
    /// call in flight, or starting).
    fn make_room(&mut self, for_image: &str) -> bool {
        if self.has_room() {
            return true;
        }
        let victim = self
            .images
            .iter()
            .flat_map(|(image, entry)| {
                entry.pods.iter().filter_map(move |pod| match &pod.slot {
                    Slot::Ready {
                        shared,
                        in_flight: 0,
                        last_used,
                        ..
                    } if pod.retiring.is_none() => {
                        Some((*last_used, Arc::clone(image), shared.id.clone()))
                    }
                    _ => None,
                })
            })
            .min_by_key(|(last_used, _, _)| *last_used);
        let Some((_, image, id)) = victim else {
            return false;
        };
        if let Some(entry) = self.images.get_mut(&image) {
            entry.pods.retain(|pod| pod.id() != Some(&id));
            if entry.pods.is_empty() {
                self.images.remove(&image);
            }
        }
        tracing::info!(image = %image, pod = %id, for_image, max_pods = self.ctx.settings.max_pods, "stopping the least recently used idle pod to make room (--max-pods)");
        self.ctx.counters.gc_deletions += 1;
        self.ctx
            .spawn_stop(id, StopReason::Idle(Retire::MakingRoom));
        true
    }
}
