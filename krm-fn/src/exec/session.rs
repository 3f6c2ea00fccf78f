//! A pre-spawned process in a session of its own, started by
//! `posix_spawn` with glibc's `POSIX_SPAWN_SETSID` (2.26 and later).
//!
//! A waiting process needs its own session (see `Kind::Waiting`). std's
//! `Command` can only get one through a `pre_exec` hook, and with a hook it
//! forks (copying the page tables of the whole server) where otherwise it
//! uses `posix_spawn`, a `clone(CLONE_VM|CLONE_VFORK)` that copies nothing.
//! Pre-spawned `cat` through the wrapper was slower than spawning per call
//! (issue 43). Here the spawn is what std's `posix_spawn` path does (the
//! environment, the standard streams as pipes, an empty signal mask,
//! SIGPIPE back to its default), plus the session flag.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::{SigSet, Signal as NixSignal};
use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::Pid;

use super::registry::{lock_registry, Entry, Kind, MARKER_VAR, NEXT_SPAWN, SPAWN_GATE};
use super::{ExecSpec, Process, Stdio3};

/// glibc's `POSIX_SPAWN_SETSID` (spawn.h; the libc crate lacks it for
/// Linux).
const POSIX_SPAWN_SETSID: i32 = 0x80;

/// Whether [`spawn`] does for `spec` what std's `Command` would: it has no
/// working directory to change to (glibc's `addchdir_np` is 2.29's, and
/// rare here), and a bare program name is looked up on this process's
/// `PATH`, as `posix_spawnp` does, which is the child's unless the spec
/// sets its own.
pub(super) fn posix_spawn_can(spec: &ExecSpec) -> bool {
    spec.current_dir.is_none() && !spec.env.iter().any(|(k, _)| k == "PATH")
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} holds a NUL byte", s.to_string_lossy()),
        )
    })
}

/// `KEY=VALUE` of this process's environment with `spec`'s on top (the
/// later wins, as `Command::env` does) and the spawn marker.
fn environment(spec: &ExecSpec, marker: &str) -> io::Result<Vec<CString>> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let extra = spec
        .env
        .iter()
        .cloned()
        .chain([(OsString::from(MARKER_VAR), OsString::from(marker))]);
    for (k, v) in extra {
        match vars.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => vars.push((k, v)),
        }
    }
    vars.into_iter()
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect()
}

/// Spawns made here, for the tests to tell this path from std's.
#[cfg(test)]
pub(super) static SPAWNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Spawns `spec` (see [`posix_spawn_can`]) with its three streams piped,
/// as the leader of a new session and group, registered as waiting.
pub(super) fn spawn(spec: &ExecSpec) -> io::Result<(Process, Stdio3)> {
    let program = cstring(&spec.program)?;
    let mut argv = vec![program.clone()];
    for a in &spec.args {
        argv.push(cstring(a)?);
    }
    let id = NEXT_SPAWN.fetch_add(1, Ordering::Relaxed);
    let envp = environment(spec, &format!("{}.{id}", std::process::id()))?;

    // The child's ends go to 0, 1 and 2 (dup2 clears close-on-exec there);
    // every end is close-on-exec, so the child keeps only those.
    let (stdin_r, stdin_w) = pipe_with(PipeFlags::CLOEXEC)?;
    let (stdout_r, stdout_w) = pipe_with(PipeFlags::CLOEXEC)?;
    let (stderr_r, stderr_w) = pipe_with(PipeFlags::CLOEXEC)?;
    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_dup2(stdin_r.as_raw_fd(), 0)?;
    actions.add_dup2(stdout_w.as_raw_fd(), 1)?;
    actions.add_dup2(stderr_w.as_raw_fd(), 2)?;

    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
            | PosixSpawnFlags::from_bits_retain(POSIX_SPAWN_SETSID),
    )?;
    attr.set_sigmask(&SigSet::empty())?;
    // Rust's runtime ignores SIGPIPE; an ignored signal stays ignored
    // across exec, and std gives the child the default back.
    let mut default = SigSet::empty();
    default.add(NixSignal::SIGPIPE);
    attr.set_sigdefault(&default)?;

    // As `Process::spawn_kind`: spawned and registered inside the gate.
    let gate = SPAWN_GATE.read().unwrap_or_else(PoisonError::into_inner);
    let spawned = if spec.program.as_bytes().contains(&b'/') {
        nix::spawn::posix_spawn(program.as_c_str(), &actions, &attr, &argv, &envp)
    } else {
        nix::spawn::posix_spawnp(&program, &actions, &attr, &argv, &envp)
    };
    let raw = spawned.map_err(io::Error::from)?.as_raw();
    #[cfg(test)]
    SPAWNS.fetch_add(1, Ordering::Relaxed);
    let pid =
        Pid::from_raw(raw).ok_or_else(|| io::Error::other(format!("invalid child pid {raw}")))?;
    lock_registry().insert(
        raw,
        Entry {
            kind: Kind::Waiting,
            id,
        },
    );
    drop(gate);
    drop((stdin_r, stdout_w, stderr_w));
    let stdio = Stdio3 {
        stdin: Some(stdin_w),
        stdout: Some(stdout_r),
        stderr: Some(stderr_r),
    };
    Process::adopt(pid, stdio)
}
