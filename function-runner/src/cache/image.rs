//! One image's pods: each starting (with the callers waiting for it) or
//! ready (with its load and expiry), and the scheduling choice of which
//! serves the next call ([`ImageEntry::choose`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use runner_core::backend::PodId;

use super::lease::{PodLease, PodShared, Reply};

pub(super) struct Pod {
    pub(super) serial: u64,
    pub(super) slot: Slot,
    /// Made from a template that changed since: no new leases; stopped once
    /// its last lease is back. Not counted against the image's pod limit,
    /// so that its replacement can start meanwhile.
    pub(super) retiring: Option<runner_core::backend::Retire>,
    /// podExecutor `singleUse`: the pod serves one call; its first
    /// hand-out retires it.
    pub(super) single_use: bool,
}

pub(super) enum Slot {
    Starting {
        waiters: Vec<Reply>,
        /// The longest TTL asked for by the callers of this start.
        ttl: Duration,
    },
    Ready {
        shared: Arc<PodShared>,
        in_flight: usize,
        expiry: Instant,
        /// The last hand-out (or the start): which idle pod goes first
        /// when `--max-pods` wants room.
        last_used: Instant,
    },
}

impl Pod {
    pub(super) fn load(&self) -> usize {
        match &self.slot {
            Slot::Starting { waiters, .. } => waiters.len(),
            Slot::Ready { in_flight, .. } => *in_flight,
        }
    }

    pub(super) fn is_ready(&self) -> bool {
        matches!(self.slot, Slot::Ready { .. })
    }

    pub(super) fn id(&self) -> Option<&PodId> {
        match &self.slot {
            Slot::Ready { shared, .. } => Some(&shared.id),
            Slot::Starting { .. } => None,
        }
    }

    /// Forgets waiters whose caller is gone; returns how many.
    pub(super) fn prune_waiters(&mut self) -> usize {
        match &mut self.slot {
            Slot::Starting { waiters, .. } => {
                let before = waiters.len();
                waiters.retain(|w| !w.is_closed());
                before - waiters.len()
            }
            Slot::Ready { .. } => 0,
        }
    }

    /// Hands a lease on this ready pod to `reply`; whether it was taken. A
    /// caller that is gone already gets nothing and holds nothing.
    pub(super) fn hand_out(&mut self, reply: Reply, now: Instant, ttl: Duration) -> bool {
        let Slot::Ready {
            shared,
            in_flight,
            expiry,
            last_used,
        } = &mut self.slot
        else {
            return false;
        };
        *in_flight += 1;
        *expiry = (*expiry).max(deadline(now, ttl));
        *last_used = now;
        if let Err(undelivered) = reply.send(Ok(PodLease::new(Arc::clone(shared)))) {
            if let Ok(lease) = undelivered {
                lease.disarm();
            }
            *in_flight -= 1;
            return false;
        }
        if self.single_use {
            // Used: no other call is ever handed it; stopped once this
            // one is done.
            self.retiring
                .get_or_insert(runner_core::backend::Retire::Used);
        }
        true
    }

    /// A single-use pod no call was handed yet: ready and unused, or
    /// starting with no caller waiting for it (its caller went away).
    fn is_fresh(&mut self) -> bool {
        if !self.single_use || self.retiring.is_some() {
            return false;
        }
        self.prune_waiters();
        self.load() == 0
    }
}

pub(super) enum Choice {
    /// Join this pod: a lease now if ready, a place in its waitlist if not.
    Join(usize),
    /// Start another pod and wait for it.
    Start,
}

pub(super) struct ImageEntry {
    pub(super) image: Arc<str>,
    pub(super) pods: Vec<Pod>,
    /// Where the round-robin scan starts next.
    pub(super) next: usize,
}

impl ImageEntry {
    pub(super) fn new(image: Arc<str>) -> Self {
        ImageEntry {
            image,
            pods: Vec::new(),
            next: 0,
        }
    }

    /// The scheduling rules of the module doc, in O(pods of the image).
    pub(super) fn choose(&mut self, queue: usize, max_pods: usize) -> Choice {
        let n = self.pods.len();
        let live = self
            .pods
            .iter()
            .filter(|p| p.retiring.is_none() && !p.single_use)
            .count();
        // (load, index): the first minimum in round-robin order wins.
        let mut ready_under: Option<(usize, usize)> = None;
        let mut starting_under: Option<(usize, usize)> = None;
        // (load, starting, index): ready pods win ties.
        let mut overall: Option<(usize, bool, usize)> = None;
        for i in 0..n {
            let idx = (self.next + i) % n;
            let pod = &self.pods[idx];
            // A single-use pod is one call's (a FunctionConfig that became
            // multi-use meanwhile leaves some): never joined.
            if pod.retiring.is_some() || pod.single_use {
                continue;
            }
            let load = pod.load();
            let starting = !pod.is_ready();
            if load < queue {
                let best = if starting {
                    &mut starting_under
                } else {
                    &mut ready_under
                };
                if best.is_none_or(|(l, _)| load < l) {
                    *best = Some((load, idx));
                }
            }
            if overall.is_none_or(|(l, s, _)| (load, starting) < (l, s)) {
                overall = Some((load, starting, idx));
            }
        }
        if let Some((_, idx)) = ready_under.or(starting_under) {
            return Choice::Join(idx);
        }
        if live < max_pods {
            let pruned: usize = self.pods.iter_mut().map(Pod::prune_waiters).sum();
            if pruned > 0 {
                // A starting pod may have dropped below `queue`.
                return self.choose(queue, max_pods);
            }
            return Choice::Start;
        }
        match overall {
            Some((_, _, idx)) => Choice::Join(idx),
            None => Choice::Start,
        }
    }

    /// A single-use call's choice: a fresh pod (ready ones first), else a
    /// new one. Never a pod another call was handed, and no waitlist.
    pub(super) fn choose_fresh(&mut self) -> Choice {
        let mut starting = None;
        for idx in 0..self.pods.len() {
            if !self.pods[idx].is_fresh() {
                continue;
            }
            if self.pods[idx].is_ready() {
                return Choice::Join(idx);
            }
            starting.get_or_insert(idx);
        }
        starting.map_or(Choice::Start, Choice::Join)
    }

    pub(super) fn position(&self, serial: u64) -> Option<usize> {
        self.pods.iter().position(|p| p.serial == serial)
    }
}

/// Stand-in for "never" when `now + ttl` does not fit in an `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// When something `ttl` from `now` happens (far in the future for a TTL
/// past what an `Instant` holds).
pub(super) fn deadline(now: Instant, ttl: Duration) -> Instant {
    now.checked_add(ttl).unwrap_or(now + FAR_FUTURE)
}
