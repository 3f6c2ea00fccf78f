//! Graceful drain, shared by the wrapper and the runner: counts calls in
//! progress; once draining, new calls are refused and the drain resolves
//! when the last admitted one ends.
//!
//! Built on tokio-util's [`TaskTracker`]: a call holds one of its tokens,
//! closing the tracker is the drain, and `wait` resolves once it is closed
//! and empty. A call takes its token *before* it checks for the drain, so
//! the drain either waits for that call or the call sees the drain: the
//! count and the closed flag live in one atomic inside the tracker.

use tokio_util::task::task_tracker::{TaskTracker, TaskTrackerToken};

#[derive(Clone, Default)]
pub struct Drain(TaskTracker);

/// Counts one admitted call until dropped (finished, failed or cancelled).
pub struct DrainGuard(#[allow(dead_code)] TaskTrackerToken);

impl Drain {
    /// Admits a call, or `None` once draining.
    pub fn enter(&self) -> Option<DrainGuard> {
        let token = self.0.token();
        (!self.0.is_closed()).then_some(DrainGuard(token))
    }

    pub fn in_flight(&self) -> usize {
        self.0.len()
    }

    pub fn is_draining(&self) -> bool {
        self.0.is_closed()
    }

    /// Starts draining and resolves once no admitted call is running.
    pub async fn drain(&self) {
        self.0.close();
        self.0.wait().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn drain_waits_for_admitted_calls_and_refuses_new_ones() {
        let drain = Drain::default();
        let call = drain.enter().unwrap();
        assert_eq!(drain.in_flight(), 1);
        let waiting = tokio::spawn({
            let drain = drain.clone();
            async move { drain.drain().await }
        });
        tokio::task::yield_now().await;
        assert!(drain.is_draining());
        assert!(drain.enter().is_none(), "no new calls while draining");
        assert!(!waiting.is_finished());
        drop(call);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(drain.in_flight(), 0);
    }
}
