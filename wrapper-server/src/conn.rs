//! Calls per connection: at most [`CALLS_PER_CONNECTION`] run (or hold an
//! answer not sent yet) on one client connection; further calls on it wait
//! for one of those to end, within the call's deadline (the request's read
//! timeout starts once the call has its slot).
//!
//! Each such call may hold a message-sized answer the client has not read,
//! so this bounds what one connection can make the server hold, without a
//! server-wide cap (which `--max-concurrent-evaluations` adds). Waiting
//! instead of refusing keeps a busy but honest client (the runner, whose
//! callers all share one connection per pod) from seeing errors: its
//! answers are read, so the waits are short. A waiting call has not read
//! its request, so HTTP/2 flow control stops the client from sending more
//! on it than the stream window (`server::STREAM_WINDOW`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Calls one connection may have running or answered-but-unsent at once.
pub const CALLS_PER_CONNECTION: usize = 16;

/// The slots of each live connection, by its peer address (unique among
/// the live connections of one listener).
#[derive(Default)]
pub(crate) struct Connections {
    slots: Mutex<HashMap<SocketAddr, Weak<Semaphore>>>,
}

impl Connections {
    /// Waits for a slot on the connection from `peer`; `None` if the peer
    /// is not known (the semaphores are never closed).
    pub(crate) async fn acquire(&self, peer: Option<SocketAddr>) -> Option<OwnedSemaphorePermit> {
        self.semaphore(peer?).acquire_owned().await.ok()
    }

    fn semaphore(&self, peer: SocketAddr) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = slots.get(&peer).and_then(Weak::upgrade) {
            return live;
        }
        // Connections whose calls all ended are forgotten: their semaphore is
        // only referenced by permits. Pruned when the map doubles, so the
        // cost per call stays constant.
        if slots.len() >= 64 && slots.len().is_power_of_two() {
            slots.retain(|_, s| s.strong_count() > 0);
        }
        let fresh = Arc::new(Semaphore::new(CALLS_PER_CONNECTION));
        slots.insert(peer, Arc::downgrade(&fresh));
        fresh
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_connection_runs_its_share_and_others_are_not_held_up() {
        let conns = Connections::default();
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..CALLS_PER_CONNECTION {
            held.push(conns.acquire(Some(a)).await);
        }
        let waiting = tokio::time::timeout(Duration::from_millis(50), conns.acquire(Some(a))).await;
        assert!(waiting.is_err(), "a call over the share did not wait");
        // Another connection is not affected.
        let _other = conns.acquire(Some(b)).await;
        // One ends: the next call on `a` goes on.
        held.pop();
        tokio::time::timeout(Duration::from_secs(5), conns.acquire(Some(a)))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn ended_connections_are_forgotten() {
        let conns = Connections::default();
        for port in 0..1000u16 {
            let peer = SocketAddr::from(([127, 0, 0, 1], 2000 + port));
            drop(conns.acquire(Some(peer)).await);
        }
        assert!(conns.tracked() <= 128, "{} tracked", conns.tracked());
    }
}
