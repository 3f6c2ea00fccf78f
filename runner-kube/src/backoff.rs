//! Backoff for the runner's watches.
//!
//! kube-runtime's `default_backoff()` resets its backoff on every `Ok` item,
//! and its watcher yields `Ok(Event::Init)` at the start of every relist,
//! before the list request. So a list that keeps failing (a CRD not
//! installed, a 403 from RBAC, an API server that answers 500) is retried
//! every 0.8–1.6 s for ever: seen on the test cluster's audit log as a
//! FunctionConfig list each second while that CRD was absent. Here the
//! backoff grows (0.8 s doubling, up to 30 s) until the watch gets past a
//! list: only an `InitDone` or a live event resets it.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, DefaultBackoff};

/// `events`, waiting after each error for a backoff that only a completed
/// list or a live event resets.
pub fn with_backoff<K, S>(
    events: S,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send + 'static,
{
    let state = (
        Box::pin(events),
        DefaultBackoff::default(),
        None::<Duration>,
    );
    futures::stream::unfold(state, |(mut events, mut backoff, wait)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let item = events.next().await?;
        let wait = match &item {
            // kube's backoff never runs out (no maximum of tries); were it
            // to, the cap is waited rather than retrying at once.
            Err(_) => Some(backoff.next().unwrap_or(Duration::from_secs(30))),
            // A relist starting, or under way: not yet a sign of health.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                backoff.reset();
                None
            }
        };
        Some((item, (events, backoff, wait)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn failed_list() -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(
            kube::core::Status::failure(
                "the server could not find the requested resource",
                "NotFound",
            )
            .with_code(404)
            .boxed(),
        ))
    }

    /// When each error came out, from the first.
    async fn error_times(items: Vec<Result<watcher::Event<()>, watcher::Error>>) -> Vec<Duration> {
        let start = Instant::now();
        let mut events = std::pin::pin!(with_backoff(futures::stream::iter(items)));
        let mut times = Vec::new();
        while let Some(item) = events.next().await {
            if item.is_err() {
                times.push(start.elapsed());
            }
        }
        times
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_that_keeps_failing_is_retried_ever_later_despite_the_init_events() {
        // What kube's watcher yields while a list keeps failing.
        let items = (0..5)
            .flat_map(|_| [Ok(watcher::Event::Init), Err(failed_list())])
            .collect();
        let times = error_times(items).await;
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        // 0.8 s doubling, each with up to as much again of jitter (and
        // the paused clock rounds a sleep up to the next millisecond).
        for (gap, at_least) in gaps.iter().zip([0.8, 1.6, 3.2, 6.4]) {
            assert!(
                *gap >= Duration::from_secs_f64(at_least)
                    && *gap < Duration::from_secs_f64(at_least * 2.0 + 0.002),
                "{gaps:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_completed_list_resets_the_backoff() {
        let mut items: Vec<_> = (0..3)
            .flat_map(|_| [Ok(watcher::Event::Init), Err(failed_list())])
            .collect();
        // The watch recovers, then fails again twice.
        items.extend([Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]);
        items.extend((0..2).flat_map(|_| [Ok(watcher::Event::Init), Err(failed_list())]));
        let times = error_times(items).await;
        assert_eq!(times.len(), 5);
        // Without the reset this would be the fourth wait: 6.4 s or more.
        let after_recovery = times[4] - times[3];
        assert!(
            after_recovery >= Duration::from_secs_f64(0.8)
                && after_recovery < Duration::from_secs_f64(1.602),
            "{times:?}"
        );
    }
}
