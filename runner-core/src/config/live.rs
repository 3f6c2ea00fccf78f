//! The image index in use, replaced whole when the FunctionConfigs change.
//!
//! An [`ImageIndex`] is immutable: a change builds a new one off to the side and
//! [`IndexPublisher::publish`] swaps it in. A call takes the current one with
//! [`LiveIndex::current`]: a read lock held for one `Arc` clone (readers never wait for each
//! other, only for the swap itself, a pointer store) and never across an await, so a call
//! keeps the index it started with while later calls see the new one; the old index is
//! freed when its last call ends.

use std::sync::Arc;

use tokio::sync::watch;

use super::index::ImageIndex;

/// The readers' side: cheap to clone, one per evaluator.
#[derive(Debug, Clone)]
pub struct LiveIndex {
    current: watch::Receiver<Arc<ImageIndex>>,
}

/// The one writer's side.
#[derive(Debug)]
pub struct IndexPublisher {
    current: watch::Sender<Arc<ImageIndex>>,
}

impl LiveIndex {
    /// An index that `publisher` replaces.
    pub fn new(initial: Arc<ImageIndex>) -> (IndexPublisher, LiveIndex) {
        let (tx, rx) = watch::channel(initial);
        (IndexPublisher { current: tx }, LiveIndex { current: rx })
    }

    /// An index that never changes.
    pub fn fixed(index: Arc<ImageIndex>) -> LiveIndex {
        // A receiver keeps the last value after its sender is gone.
        Self::new(index).1
    }

    /// The index now in use.
    pub fn current(&self) -> Arc<ImageIndex> {
        self.current.borrow().clone()
    }

    /// Waits until a new index is published; `false` once none can be (the publisher is
    /// gone).
    pub async fn changed(&mut self) -> bool {
        self.current.changed().await.is_ok()
    }
}

impl From<Arc<ImageIndex>> for LiveIndex {
    fn from(index: Arc<ImageIndex>) -> Self {
        LiveIndex::fixed(index)
    }
}

impl IndexPublisher {
    /// Makes `index` the one every later [`LiveIndex::current`] returns.
    pub fn publish(&self, index: Arc<ImageIndex>) {
        // The previous index is returned and dropped here, outside the lock.
        drop(self.current.send_replace(index));
    }

    /// The index now in use.
    pub fn current(&self) -> Arc<ImageIndex> {
        self.current.borrow().clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
