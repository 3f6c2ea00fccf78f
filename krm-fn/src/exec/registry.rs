//! Which children are ours: the registry of the children spawned through
//! [`Process`](super::Process) and not reaped yet, the gate a spawn holds
//! until its child is in it, and the marker (with its spawn ids) every
//! spawned process and its descendants carry.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

/// Pids of the children spawned through [`Process`](super::Process) and not reaped yet.
static REGISTRY: Mutex<BTreeMap<i32, Entry>> = Mutex::new(BTreeMap::new());

/// Held shared from a spawn until its pid is in [`REGISTRY`], and exclusively
/// by a sweep while it decides: a sweep never takes a child of ours for an
/// orphan before it is registered. (Lock order: gate, then registry.)
pub(super) static SPAWN_GATE: RwLock<()> = RwLock::new(());

pub(super) fn lock_registry() -> MutexGuard<'static, BTreeMap<i32, Entry>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a registered child is: a call's function, whose descendants may
/// still be at work, or a long-lived server; and the id its descendants
/// carry in [`MARKER_VAR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) kind: Kind,
    pub(super) id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Call,
    Server,
    /// Pre-spawned, waiting for its call ([`crate::prespawn`]): its marked
    /// descendants are spared as a call's are, but its start time, which
    /// may be long ago, does not hold back the sweep of unmarked orphans.
    Waiting,
}

/// The environment variable every spawned process (and so, unless it clears
/// its environment, every descendant) gets: `PID.ID`, the spawning process
/// and the spawn.
pub const MARKER_VAR: &str = "KRM_FN_SPAWN";

pub(super) static NEXT_SPAWN: AtomicU64 = AtomicU64::new(1);
