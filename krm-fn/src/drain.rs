//! Graceful drain, shared by the wrapper and the runner: counts calls in
//! progress; once draining, new calls are refused and the drain resolves
//! when the last admitted one ends.
//!
//! Built on tokio-util's [`TaskTracker`]: a call holds one of its tokens,
//! closing the tracker is the drain, and `wait` resolves once it is closed
//! and empty. A call takes its token *before* it checks for the drain, so
//! the drain either waits for that call or the call sees the drain: the
//! count and the closed flag live in one atomic inside the tracker.
//!
//! Calls that have not been admitted yet, or whose requests are still
//! arriving, can watch for the drain's start ([`Drain::draining`]): what
//! they wait for would be refused or is not work in flight, so they end
//! instead of keeping the shutdown waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::{TaskTracker, TaskTrackerToken};

/// The tracker of admitted calls, the count of calls ever admitted (for
/// [`Drain::idle_for`]), and a token cancelled when the drain starts (the
/// tracker's closed flag cannot be awaited).
#[derive(Clone, Default)]
pub struct Drain(TaskTracker, Arc<AtomicU64>, CancellationToken);

/// Counts one admitted call until dropped (finished, failed or cancelled).
pub struct DrainGuard(#[allow(dead_code)] TaskTrackerToken);

impl Drain {
    /// Admits a call, or `None` once draining.
    pub fn enter(&self) -> Option<DrainGuard> {
        let token = self.0.token();
        self.1.fetch_add(1, Ordering::Relaxed);
        (!self.0.is_closed()).then_some(DrainGuard(token))
    }

    /// Resolves once no call has run for `idle` (within an eighth of it):
    /// none in flight, and none admitted since. For a wrapper that goes
    /// away when unused (`wrapper-server --exit-after-idle`).
    pub async fn idle_for(&self, idle: Duration) {
        let tick = (idle / 8).max(Duration::from_millis(1));
        let mut seen = self.1.load(Ordering::Relaxed);
        let mut since = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(tick).await;
            let now = self.1.load(Ordering::Relaxed);
            if now != seen || self.in_flight() > 0 {
                seen = now;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= idle {
                return;
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        self.0.len()
    }

    pub fn is_draining(&self) -> bool {
        self.0.is_closed()
    }

    /// Resolves once the drain has started.
    pub async fn draining(&self) {
        self.2.cancelled().await;
    }

    /// Starts draining and resolves once no admitted call is running.
    pub async fn drain(&self) {
        // Closed first: a call woken by `draining` finds admissions refused.
        self.0.close();
        self.2.cancel();
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
        tokio::time::timeout(Duration::from_secs(5), drain.draining())
            .await
            .expect("draining() resolves once the drain started");
        assert!(drain.enter().is_none(), "no new calls while draining");
        assert!(!waiting.is_finished());
        drop(call);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(drain.in_flight(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_for_waits_out_calls_and_restarts_after_each() {
        let drain = Drain::default();
        let idle = Duration::from_secs(8);
        let start = tokio::time::Instant::now();
        let waiting = tokio::spawn({
            let drain = drain.clone();
            async move { drain.idle_for(idle).await }
        });
        // A call running for 20 s, then one more that comes and goes at 25 s.
        let call = drain.enter().unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!waiting.is_finished(), "a call in flight is not idle");
        drop(call);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished());
        drop(drain.enter().unwrap());
        waiting.await.unwrap();
        let took = start.elapsed();
        // Idle from 25 s: done 8 s later, within a tick.
        assert!(
            took >= Duration::from_secs(33) && took <= Duration::from_secs(35),
            "{took:?}"
        );
    }
}
