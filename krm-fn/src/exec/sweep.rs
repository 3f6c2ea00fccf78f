//! One sweep of orphans (see [`become_subreaper`](super::become_subreaper)):
//! this process's children as /proc lists them, which of them are ours (by
//! [`MARKER_VAR`]), and killing and reaping those no running call owns.

use std::sync::PoisonError;
use std::time::Duration;

use rustix::process::Signal;
use rustix::process::{Pid, PidfdFlags};

use super::registry::{lock_registry, Kind, MARKER_VAR, SPAWN_GATE};

/// Reaps `pid` if it is a zombie.
fn reap(pid: i32) {
    if let Some(p) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
    }
}

/// One sweep: repeats while killing an orphan re-parents its own children to
/// us (bounded rounds; the next sweep goes on).
pub(super) fn sweep(all: bool) -> Vec<i32> {
    let me = std::process::id();
    let mut killed = Vec::new();
    for _ in 0..16 {
        // /proc is read without locks; the decisions are made under the
        // gate (no spawn is half registered) and the registry lock, and
        // each kill goes through a pidfd opened after re-checking that the
        // pid is still that child, so a reused pid is never signalled.
        let children = children();
        let _gate = SPAWN_GATE.write().unwrap_or_else(PoisonError::into_inner);
        let registry = lock_registry();
        // Spawn id → what it is now, and (a waiting one) its pid, which is
        // also its session's id.
        let live: std::collections::HashMap<u64, (Kind, i32)> = registry
            .iter()
            .filter(|(_, e)| matches!(e.kind, Kind::Call | Kind::Waiting))
            .map(|(&pid, e)| (e.id, (e.kind, pid)))
            .collect();
        let oldest_call = children
            .iter()
            .filter(|c| registry.get(&c.pid).is_some_and(|e| e.kind == Kind::Call))
            .map(|c| c.start)
            .min()
            .unwrap_or(u64::MAX);
        let mut round = 0;
        for child in children.iter().filter(|c| !registry.contains_key(&c.pid)) {
            if child.zombie {
                reap(child.pid);
                continue;
            }
            // The marker is the process's to rewrite, so it is only a hint:
            // naming a running call, it spares the orphan for as long as
            // that call runs (which kills its group and sweeps when done);
            // naming a waiting process, which may wait for hours, it counts
            // only from within that process's own session, which no other
            // process can join.
            let orphaned = all
                || match marker(child.pid) {
                    Some((owner, id)) if owner == me => match live.get(&id) {
                        Some((Kind::Call, _)) => false,
                        Some((_, waiting)) => child.session != *waiting,
                        None => true,
                    },
                    Some(_) => true,
                    None => child.start < oldest_call,
                };
            if orphaned && kill_if_same(child) {
                killed.push(child.pid);
                round += 1;
            }
        }
        drop(registry);
        drop(_gate);
        if round == 0 {
            break;
        }
        // Let the SIGKILLs land: the next round reaps them and finds the
        // children they leave.
        std::thread::sleep(Duration::from_millis(5));
    }
    killed
}

/// SIGKILLs `child` through a pidfd, if the pid is still that process (our
/// child, same start time).
fn kill_if_same(child: &Child) -> bool {
    let Some(pid) = Pid::from_raw(child.pid) else {
        return false;
    };
    let Ok(fd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
        return false;
    };
    let same =
        read_child(child.pid, std::process::id()).is_some_and(|now| now.start == child.start);
    same && rustix::process::pidfd_send_signal(&fd, Signal::KILL).is_ok()
}

/// The owner and spawn id in a live process's [`MARKER_VAR`], if it has one.
fn marker(pid: i32) -> Option<(u32, u64)> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER_VAR}=");
    let value = environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))?;
    let (owner, id) = std::str::from_utf8(value).ok()?.split_once('.')?;
    Some((owner.parse().ok()?, id.parse().ok()?))
}

/// A child of this process, from /proc.
pub(super) struct Child {
    pub(super) pid: i32,
    pub(super) zombie: bool,
    /// Its session: one it cannot leave for another's (`setsid` makes a new
    /// one, never joins one).
    session: i32,
    /// Start time, in clock ticks after boot.
    start: u64,
}

/// This process's children (original or re-parented), from /proc.
///
/// The kernel lists each thread's children in
/// `/proc/self/task/TID/children`: reading those costs a few reads, where
/// scanning every process's stat costs five syscalls per process on the
/// machine (see BENCHMARKS.md, issue 13). A list read while a child listed
/// in it is reaped may skip another child: the kernel goes on from the pid
/// it gave last and, that one gone, counts from the head again. Such a
/// child is no longer ours when its stat is read, so the lists are read
/// again (the reaping is over by then); failing that, and without the files
/// (`CONFIG_PROC_CHILDREN` off), every process is looked at, as a missed
/// orphan would outlive its call.
pub(super) fn children() -> Vec<Child> {
    let me = std::process::id();
    for _ in 0..3 {
        let Some(pids) = thread_children() else {
            break;
        };
        let found: Vec<Child> = pids.iter().filter_map(|&pid| read_child(pid, me)).collect();
        if found.len() == pids.len() {
            return found;
        }
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| read_child(pid, me))
        .collect()
}

/// The pids in every `/proc/self/task/TID/children`, or `None` where the
/// kernel has no such file.
///
/// Children belong to the thread that spawned them. A thread that ends
/// hands its children to the first live thread, the main one (which lives
/// as long as the process), and orphans re-parented to us go to it too: so
/// the main thread's list is read last, and a child that moved while the
/// lists were read is in it (or in its old thread's, read before the move).
fn thread_children() -> Option<Vec<i32>> {
    static HAS_FILE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let has_file =
        *HAS_FILE.get_or_init(|| std::path::Path::new("/proc/thread-self/children").exists());
    if !has_file {
        return None;
    }
    let main = std::process::id().to_string();
    let mut pids = Vec::new();
    let mut add = |list: &str| {
        pids.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    };
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if task.file_name() == main.as_str() {
            continue;
        }
        // A thread that ended meanwhile: its children are the main one's.
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            add(&list);
        }
    }
    add(&std::fs::read_to_string(format!("/proc/self/task/{main}/children")).ok()?);
    pids.sort_unstable();
    pids.dedup();
    Some(pids)
}

/// `pid` from its /proc stat, if it is a child of `parent`.
fn read_child(pid: i32, parent: u32) -> Option<Child> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice threads
    // itrealvalue starttime ...": comm may hold spaces and parens.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.get(1)?.parse::<u32>().ok()? != parent {
        return None;
    }
    Some(Child {
        pid,
        zombie: fields.first() == Some(&"Z"),
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}
