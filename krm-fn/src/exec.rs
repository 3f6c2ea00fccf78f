//! The exec core: runs one function process with bytes on stdin and collects
//! stdout and stderr, killing everything it started when the call ends.
//!
//! Shared by `wrapper-server` (one process per EvaluateFunction call) and the
//! function runner's exec evaluator and process backend: one implementation.
//!
//! How a call runs:
//! - The entrypoint is spawned in a process group of its own, and a pidfd is
//!   opened on it, so its exit is awaited without SIGCHLD handlers and without
//!   `waitpid(-1)`, which would steal other children's exit statuses.
//! - stdin is written while stdout and stderr are drained concurrently, so no
//!   size of input or output can deadlock the pipes. A function that exits
//!   without reading stdin is fine (EPIPE is expected, not an error). The
//!   input may also arrive in chunks while the function already runs
//!   ([`Input::Chunks`]: the wrapper streams a request body straight in).
//! - When the entrypoint exits, the rest of its process group is killed while
//!   the leader is still a zombie (so the group id cannot have been reused),
//!   then the pipes are drained for a short grace period and the leader reaped.
//!   A grandchild holding stdout therefore cannot keep the call open.
//! - Dropping the future (deadline, cancellation) kills the whole group at
//!   once via [`Process`]'s `Drop`.
//! - A descendant that left the group (`setsid`, `setpgid`, a daemon's double
//!   fork) is killed too, once its call ended: see [`become_subreaper`].
//! - stdout beyond the limit fails the call and kills the group; memory stays
//!   bounded by the limit. stderr beyond its limit keeps its head and its
//!   tail, with a marker saying how much was cut between them (and flagged):
//!   a failing function's last words are what explains the failure.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
pub use rustix::process::Signal;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

pub use registry::MARKER_VAR;
use registry::{lock_registry, Entry, Kind, NEXT_SPAWN, SPAWN_GATE};
use sweep::{children, sweep};

mod registry;
mod session;
mod sweep;

/// Linux's default pipe capacity.
const DEFAULT_PIPE_BYTES: usize = 64 * 1024;
/// Pipe capacity asked for when the payload is large.
const LARGE_PIPE_BYTES: usize = 1024 * 1024;

/// What to run: a program with its arguments. The environment is inherited,
/// plus `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub current_dir: Option<PathBuf>,
}

impl ExecSpec {
    /// `argv[0]` is the program, the rest are its arguments.
    pub fn from_argv<I, S>(argv: I) -> Option<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut it = argv.into_iter().map(Into::into);
        let program = it.next()?;
        Some(Self {
            program,
            args: it.collect(),
            env: Vec::new(),
            current_dir: None,
        })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// The program as text, for messages.
    pub fn display_program(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    /// The file the program is, found as `execvp` finds it: a name with a
    /// `/` as it is (relative to `current_dir`), a bare name on `PATH`
    /// (`env`'s, else this process's, else glibc's default). Checked to be
    /// a file this process may execute, so that a server can refuse to
    /// start, naming what is wrong, rather than serve a function that fails
    /// every call.
    pub fn resolve(&self) -> Result<PathBuf, EntrypointError> {
        let program = Path::new(&self.program);
        let shown = || self.display_program();
        if program.as_os_str().is_empty() {
            return Err(EntrypointError::Empty);
        }
        if program.as_os_str().as_bytes().contains(&b'/') {
            let path = match &self.current_dir {
                Some(dir) if program.is_relative() => dir.join(program),
                _ => program.to_path_buf(),
            };
            return executable(&path)
                .map(|()| path)
                .map_err(|why| EntrypointError::Unusable {
                    program: shown(),
                    why,
                });
        }
        let path_var = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
        let mut first_problem = None;
        for dir in std::env::split_paths(&path_var) {
            let candidate = dir.join(program);
            match executable(&candidate) {
                Ok(()) => return Ok(candidate),
                // As execvp: a file that exists but cannot run is reported
                // if nothing later on PATH can.
                Err(why) if candidate.exists() && first_problem.is_none() => {
                    first_problem = Some((candidate, why));
                }
                Err(_) => {}
            }
        }
        Err(match first_problem {
            Some((path, why)) => EntrypointError::Unusable {
                program: path.display().to_string(),
                why,
            },
            None => EntrypointError::NotOnPath {
                program: shown(),
                path: path_var.to_string_lossy().into_owned(),
            },
        })
    }
}

/// Why an entrypoint cannot run.
#[derive(Debug, thiserror::Error)]
pub enum EntrypointError {
    #[error("the entrypoint is an empty name")]
    Empty,
    #[error("the entrypoint {program}: {why}")]
    Unusable { program: String, why: String },
    #[error("the entrypoint {program:?} is not found on PATH ({path})")]
    NotOnPath { program: String, path: String },
}

/// Ok if `path` is a file this process may execute; else why not.
fn executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a file".to_string());
    }
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK)
        .map_err(|e| format!("not executable by this user ({e})"))
}

/// Bounds on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// stdout beyond this fails the call with [`ExecError::OutputTooLarge`].
    pub max_stdout_bytes: usize,
    /// stderr beyond this keeps its first and last halves with a marker
    /// between them; [`Output::stderr_truncated`] says so.
    pub max_stderr_bytes: usize,
    /// After the entrypoint exited and its group was killed, how long the
    /// pipes are still drained (a process that escaped the group with
    /// `setsid` may hold them open; it is not waited for longer).
    pub drain_grace: Duration,
}

impl Limits {
    pub fn new(max_stdout_bytes: usize) -> Self {
        Self {
            max_stdout_bytes,
            max_stderr_bytes: max_stdout_bytes,
            drain_grace: Duration::from_millis(500),
        }
    }
}

/// How the entrypoint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    pub fn success(self) -> bool {
        self == ExitStatus::Code(0)
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Code(c) => write!(f, "exit code {c}"),
            ExitStatus::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// What a finished call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Bytes,
    pub stderr: Bytes,
    pub stderr_truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("function output exceeds the limit of {limit} bytes")]
    OutputTooLarge { limit: usize },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

/// What a call writes on the function's stdin.
#[derive(Debug)]
pub enum Input {
    /// All of it, known up front.
    Bytes(Bytes),
    /// Chunks written as they arrive; stdin is closed when the sender side
    /// is dropped. `len` is the total announced (it sizes the pipes and the
    /// stdout buffer; a different total is not an error).
    Chunks {
        rx: tokio::sync::mpsc::Receiver<Bytes>,
        len: usize,
    },
}

impl Input {
    /// The input's size, announced or actual.
    pub fn len(&self) -> usize {
        match self {
            Input::Bytes(b) => b.len(),
            Input::Chunks { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Input {
    fn from(bytes: Bytes) -> Self {
        Input::Bytes(bytes)
    }
}

/// Runs `spec` with `input` on stdin and returns its output once it exited.
///
/// Cancel-safe: dropping the future kills the whole process group.
pub async fn run(
    spec: &ExecSpec,
    input: impl Into<Input>,
    limits: &Limits,
) -> Result<Output, ExecError> {
    run_spawned(spawn(spec)?, input, limits).await
}

/// A function process started with its three streams piped, not yet given
/// its input: [`run_spawned`] gives it one call. Dropping it kills its
/// group.
#[derive(Debug)]
pub struct Spawned {
    pub(crate) process: Process,
    pub(crate) stdio: Stdio3,
}

impl Spawned {
    /// Its process id (also its group's).
    pub fn id(&self) -> u32 {
        self.process.id()
    }
}

/// Starts `spec` for one call (see [`run`]).
pub fn spawn(spec: &ExecSpec) -> Result<Spawned, ExecError> {
    spawn_kind(spec, Kind::Call)
}

/// Starts `spec` ahead of its call ([`crate::prespawn`]); it counts as a
/// call's once [`run_spawned`] gives it one.
pub(crate) fn spawn_waiting(spec: &ExecSpec) -> Result<Spawned, ExecError> {
    spawn_kind(spec, Kind::Waiting)
}

fn spawn_kind(spec: &ExecSpec, kind: Kind) -> Result<Spawned, ExecError> {
    let spawned = if kind == Kind::Waiting && session::posix_spawn_can(spec) {
        session::spawn(spec)
    } else {
        let mut cmd = spec.command();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Process::spawn_kind(&mut cmd, kind)
    };
    let (process, stdio) = spawned.map_err(|source| ExecError::Spawn {
        program: spec.display_program(),
        source,
    })?;
    Ok(Spawned { process, stdio })
}

/// Gives a spawned process its call: `input` on stdin, its output once it
/// exited (as [`run`]).
pub async fn run_spawned(
    spawned: Spawned,
    input: impl Into<Input>,
    limits: &Limits,
) -> Result<Output, ExecError> {
    let mut input = input.into();
    let Spawned { mut process, stdio } = spawned;
    process.now_a_call();
    let io_err = |what| move |source| ExecError::Io { what, source };
    let input_len = input.len();
    // Large payloads: bigger pipes mean fewer wake-ups per MiB. Best effort
    // (the kernel caps the size at /proc/sys/fs/pipe-max-size).
    if input_len > DEFAULT_PIPE_BYTES {
        for fd in [stdio.stdin.as_ref(), stdio.stdout.as_ref()]
            .into_iter()
            .flatten()
        {
            let _ = rustix::pipe::fcntl_setpipe_size(fd, LARGE_PIPE_BYTES);
        }
    }
    // Most inputs fit in the pipe: write them at once, before any event loop
    // turn, and close stdin (no registration with the reactor needed).
    let mut stdin_fd = stdio.stdin;
    if let (Some(fd), Input::Bytes(bytes)) = (&stdin_fd, &mut input) {
        rustix::io::ioctl_fionbio(fd, true).map_err(|e| io_err("stdin pipe")(e.into()))?;
        match rustix::io::write(fd, bytes) {
            Ok(n) => *bytes = bytes.slice(n..),
            // The function already closed stdin: as EPIPE below.
            Err(rustix::io::Errno::PIPE) => *bytes = Bytes::new(),
            Err(rustix::io::Errno::AGAIN) => {}
            Err(e) => return Err(io_err("writing stdin")(e.into())),
        }
        if bytes.is_empty() {
            stdin_fd = None; // closed: EOF for the function
        }
    }
    let stdin = stdin_fd
        .map(pipe::Sender::from_owned_fd)
        .transpose()
        .map_err(io_err("stdin pipe"))?;
    let stdout = stdio
        .stdout
        .map(pipe::Receiver::from_owned_fd)
        .transpose()
        .map_err(io_err("stdout pipe"))?;
    let stderr = stdio
        .stderr
        .map(pipe::Receiver::from_owned_fd)
        .transpose()
        .map_err(io_err("stderr pipe"))?;

    let write_stdin = async move {
        if let Some(mut stdin) = stdin {
            let written = match input {
                Input::Bytes(bytes) => stdin.write_all(&bytes).await,
                Input::Chunks { mut rx, .. } => {
                    async {
                        while let Some(chunk) = rx.recv().await {
                            stdin.write_all(&chunk).await?;
                        }
                        Ok(())
                    }
                    .await
                }
            };
            // EPIPE: the function exited or closed stdin without reading it all.
            match written {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e),
                _ => {}
            }
            // Dropping `stdin` closes the pipe: the function sees EOF (and
            // dropping the receiver tells a chunk sender to stop sending).
        }
        Ok(())
    };

    // The pipes hit EOF once every process holding them is gone. The leader's
    // exit kills the group, which ends the drain; a process that escaped the
    // group only gets `drain_grace` more.
    let exited = async {
        let status = process.wait_exit().await;
        process.kill_group(Signal::KILL);
        status
    };
    // Functions mostly answer with about what they were given: size the
    // buffer for that up front instead of growing it by copies. The slack is
    // kept small for small inputs, so that their buffer stays off the
    // allocator's mmap/trim path.
    let slack = (input_len / 4).clamp(4096, DEFAULT_PIPE_BYTES);
    let mut stdout_buf = BytesMut::with_capacity(
        input_len
            .saturating_add(slack)
            .min(limits.max_stdout_bytes.saturating_add(1)),
    );
    let mut stderr_buf = HeadTail::new(limits.max_stderr_bytes);
    let (stdin_res, status, drained) = {
        let read_stdout = read_bounded(stdout, &mut stdout_buf, limits.max_stdout_bytes);
        let read_stderr = stderr_buf.read(stderr);
        let drain = async { tokio::join!(read_stdout, read_stderr) };
        tokio::pin!(drain);
        let write_and_wait = async { tokio::join!(write_stdin, exited) };
        tokio::pin!(write_and_wait);
        // Drive writing, waiting and draining together; stop early if stdout
        // overflows (dropping `process` then kills the group).
        let mut drained = None;
        let (stdin_res, status) = loop {
            tokio::select! {
                biased;
                res = &mut drain, if drained.is_none() => {
                    if let (Err(ReadError::TooLarge), _) = res {
                        return Err(ExecError::OutputTooLarge { limit: limits.max_stdout_bytes });
                    }
                    drained = Some(res);
                }
                done = &mut write_and_wait => break done,
            }
        };
        let drained = match drained {
            Some(d) => Some(d),
            None => tokio::time::timeout(limits.drain_grace, &mut drain)
                .await
                .ok(),
        };
        (stdin_res, status, drained)
    };
    let status = status.map_err(io_err("waiting for the function"))?;
    process.reap();
    stdin_res.map_err(io_err("writing stdin"))?;
    // `None`: something outside the group still holds a pipe; what arrived
    // is kept.
    if let Some((out, err)) = drained {
        match out {
            Err(ReadError::TooLarge) => {
                return Err(ExecError::OutputTooLarge {
                    limit: limits.max_stdout_bytes,
                })
            }
            Err(ReadError::Io(e)) => return Err(io_err("reading stdout")(e)),
            Ok(()) => {}
        }
        err.map_err(io_err("reading stderr"))?;
    }
    let (stderr, stderr_truncated) = stderr_buf.finish();
    Ok(Output {
        status,
        stdout: stdout_buf.freeze(),
        stderr,
        stderr_truncated,
    })
}

enum ReadError {
    TooLarge,
    Io(io::Error),
}

/// Reads `pipe` to EOF into `buf`; more than `limit` bytes is
/// [`ReadError::TooLarge`] (stdout: the call fails, memory stays bounded).
async fn read_bounded(
    pipe: Option<pipe::Receiver>,
    buf: &mut BytesMut,
    limit: usize,
) -> Result<(), ReadError> {
    let Some(mut pipe) = pipe else {
        return Ok(());
    };
    loop {
        // Grow geometrically but never past the limit + 1, which tells an
        // overflow from an output of exactly `limit` bytes.
        let want = (buf.len().max(64 * 1024)).min(limit.saturating_add(1) - buf.len().min(limit));
        buf.reserve(want);
        let n = pipe.read_buf(buf).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Ok(());
        }
        if buf.len() > limit {
            return Err(ReadError::TooLarge);
        }
    }
}

/// stderr kept within a limit: its first half and its last half. A function
/// that floods stderr and then says why it failed keeps the why; memory stays
/// under the limit (plus one read's worth) however much is written.
struct HeadTail {
    head: BytesMut,
    head_max: usize,
    /// The most recent bytes past the head; trimmed to `tail_max` whenever
    /// it holds twice that, so trimming copies each byte at most once.
    tail: BytesMut,
    tail_max: usize,
    /// Bytes dropped between the head and the tail.
    omitted: u64,
}

impl HeadTail {
    fn new(limit: usize) -> Self {
        let head_max = limit / 2;
        Self {
            head: BytesMut::new(),
            head_max,
            tail: BytesMut::new(),
            tail_max: limit - head_max,
            omitted: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        let to_head = data.len().min(self.head_max - self.head.len());
        self.head.extend_from_slice(&data[..to_head]);
        data = &data[to_head..];
        if data.is_empty() {
            return;
        }
        if data.len() >= self.tail_max {
            self.omitted += (self.tail.len() + data.len() - self.tail_max) as u64;
            self.tail.clear();
            self.tail
                .extend_from_slice(&data[data.len() - self.tail_max..]);
            return;
        }
        self.tail.extend_from_slice(data);
        if self.tail.len() >= self.tail_max.saturating_mul(2) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        let excess = self.tail.len().saturating_sub(self.tail_max);
        if excess > 0 {
            self.omitted += excess as u64;
            let kept = self.tail.split_off(excess);
            self.tail = kept;
        }
    }

    async fn read(&mut self, pipe: Option<pipe::Receiver>) -> io::Result<()> {
        let Some(mut pipe) = pipe else {
            return Ok(());
        };
        let mut scratch = vec![0u8; 64 * 1024];
        loop {
            let n = pipe.read(&mut scratch).await?;
            if n == 0 {
                return Ok(());
            }
            self.push(&scratch[..n]);
        }
    }

    /// The kept bytes, and whether any were cut.
    fn finish(mut self) -> (Bytes, bool) {
        self.trim();
        if self.omitted == 0 {
            self.head.unsplit(self.tail);
            return (self.head.freeze(), false);
        }
        let marker = format!("\n... ({} bytes of stderr omitted) ...\n", self.omitted);
        self.head.extend_from_slice(marker.as_bytes());
        self.head.extend_from_slice(&self.tail);
        (self.head.freeze(), true)
    }
}

/// The standard streams of a spawned [`Process`], as configured on its
/// `Command` (`None` where not piped).
#[derive(Debug)]
pub struct Stdio3 {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

/// A child process leading its own process group, awaited through a pidfd.
///
/// Dropping it before it was reaped kills the whole group and reaps the
/// leader (in the background when inside a tokio runtime).
#[derive(Debug)]
pub struct Process {
    pid: Pid,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    group_killed: bool,
}

impl Process {
    /// Spawns `cmd` as the leader of a new process group, for one call: a
    /// process its descendants leave behind is killed after the call (see
    /// [`become_subreaper`]). Must be called inside a tokio runtime.
    pub fn spawn(cmd: &mut Command) -> io::Result<(Process, Stdio3)> {
        Self::spawn_kind(cmd, Kind::Call)
    }

    /// Like [`Process::spawn`], for a long-lived server (a process backend's
    /// pod): what it leaves behind when it exits is killed, but while it
    /// runs it does not shield the orphans of others (see
    /// [`become_subreaper`]).
    pub fn spawn_server(cmd: &mut Command) -> io::Result<(Process, Stdio3)> {
        Self::spawn_kind(cmd, Kind::Server)
    }

    fn spawn_kind(cmd: &mut Command, kind: Kind) -> io::Result<(Process, Stdio3)> {
        if kind == Kind::Waiting {
            // A session of its own (and a group, the same id): a waiting
            // process may wait for hours, and the sweep spares the orphans
            // that name it only inside its session, which no other process
            // can join (a process group can be joined from the session).
            // Calls keep the cheaper spawn: their markers count only while
            // the call runs. Most waiting processes do not come here but
            // through `session::spawn` (posix_spawn, no fork); this hook
            // (which makes std fork) is for a spec `posix_spawn_can` refuses.
            #[allow(unsafe_code)]
            // SAFETY: the closure runs in the child between fork and exec and
            // only makes the setsid system call, which is async-signal-safe
            // and touches no memory shared with the parent.
            unsafe {
                cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(io::Error::from));
            }
        } else {
            cmd.process_group(0);
        }
        // Every descendant inherits this (unless it clears its environment):
        // a sweep tells by it whose orphan a process is.
        let id = NEXT_SPAWN.fetch_add(1, Ordering::Relaxed);
        cmd.env(MARKER_VAR, format!("{}.{id}", std::process::id()));
        // Spawn and register inside the spawn gate, so that a sweep never
        // takes a child of ours for an orphan before it is known.
        // Spawns share the gate: a spawn blocks its thread until the child
        // has exec'd (vfork), and other spawns need not wait for that.
        let gate = SPAWN_GATE.read().unwrap_or_else(PoisonError::into_inner);
        let mut child = cmd.spawn()?;
        let raw = child.id();
        let pid = i32::try_from(raw)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::other(format!("invalid child pid {raw}")))?;
        lock_registry().insert(pid.as_raw_pid(), Entry { kind, id });
        drop(gate);
        let stdio = Stdio3 {
            stdin: child.stdin.take().map(OwnedFd::from),
            stdout: child.stdout.take().map(OwnedFd::from),
            stderr: child.stderr.take().map(OwnedFd::from),
        };
        // The std Child is dropped without waiting: we own the pid from here.
        drop(child);
        Self::adopt(pid, stdio)
    }

    /// A registered child, spawned as the leader of its own group: awaited
    /// through a pidfd from here.
    fn adopt(pid: Pid, stdio: Stdio3) -> io::Result<(Process, Stdio3)> {
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::NONBLOCK)
            .map_err(io::Error::from)
            // `AsyncFd::new` is deprecated for types that do not own their
            // fd; `OwnedFd` does, so the I/O-safety concern does not apply.
            .and_then(|fd| {
                #[allow(deprecated)]
                AsyncFd::new(fd)
            });
        let pidfd = match pidfd {
            Ok(fd) => fd,
            Err(err) => {
                // Without a pidfd the child cannot be awaited: kill its
                // group and reap it here (moments after SIGKILL), rather
                // than leave it registered for ever.
                let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
                lock_registry().remove(&pid.as_raw_pid());
                return Err(err);
            }
        };
        let process = Process {
            pid,
            pidfd: Some(pidfd),
            status: None,
            group_killed: false,
        };
        Ok((process, stdio))
    }

    /// A pre-spawned process taken by its call: from now on its start time
    /// holds back the sweep of unmarked orphans, as a call's does.
    fn now_a_call(&self) {
        if let Some(entry) = lock_registry().get_mut(&self.pid.as_raw_pid()) {
            if entry.kind == Kind::Waiting {
                entry.kind = Kind::Call;
            }
        }
    }

    /// The process id, which is also the process group id.
    pub fn id(&self) -> u32 {
        self.pid.as_raw_pid().unsigned_abs()
    }

    /// Sends `signal` to the whole process group. A group that is already
    /// gone counts as success.
    pub fn signal_group(&self, signal: Signal) {
        if self.status.is_some() && self.group_killed {
            return;
        }
        // ESRCH: nobody is left in the group. Anything else cannot happen for
        // a group we created; there is nothing better to do than go on.
        let _ = rustix::process::kill_process_group(self.pid, signal);
    }

    /// Sends `signal` to the leader only (e.g. SIGTERM to let a server
    /// drain). A leader that is already gone counts as success.
    pub fn signal(&self, signal: Signal) {
        if self.status.is_none() {
            let _ = rustix::process::kill_process(self.pid, signal);
        }
    }

    fn kill_group(&mut self, signal: Signal) {
        self.signal_group(signal);
        if signal == Signal::KILL {
            self.group_killed = true;
        }
    }

    /// Whether the leader has exited, asked of the kernel now (not of the
    /// reactor, whose readiness may lag).
    pub(crate) fn has_exited(&self) -> bool {
        self.status.is_some()
            || self
                .pidfd
                .as_ref()
                .is_none_or(|fd| !matches!(peek_exit(fd.get_ref()), Ok(None)))
    }

    /// Waits until the leader exited, without reaping it (so its pid, which
    /// is the group id, stays reserved until [`Process::wait`] reaps it).
    pub(crate) async fn wait_exit(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(fd) = &self.pidfd else {
            return Err(io::Error::other("process has no pidfd"));
        };
        loop {
            let mut guard = fd.readable().await?;
            match peek_exit(fd.get_ref())? {
                Some(status) => {
                    self.status = Some(status);
                    return Ok(status);
                }
                None => guard.clear_ready(),
            }
        }
    }

    /// Waits until the leader exited, kills what is left of its group, and
    /// reaps it. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.wait_exit().await?;
        self.kill_group(Signal::KILL);
        self.reap();
        Ok(status)
    }

    /// Reaps the leader if it exited; returns whether it is reaped.
    fn reap(&mut self) -> bool {
        let Some(fd) = &self.pidfd else {
            return true;
        };
        match rustix::process::waitid(
            WaitId::PidFd(fd.get_ref().as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        ) {
            Ok(Some(_)) | Err(_) => {
                // Err: ECHILD, already reaped; nothing more to wait for.
                self.pidfd = None;
                lock_registry().remove(&self.pid.as_raw_pid());
                request_sweep();
                true
            }
            Ok(None) => false,
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.pidfd.is_none() {
            return;
        }
        self.kill_group(Signal::KILL);
        if self.reap() {
            return;
        }
        // SIGKILL takes effect asynchronously: reap once it has.
        let dying = Dying {
            pid: self.pid,
            pidfd: self.pidfd.take(),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(dying.reap());
            }
            Err(_) => drop(dying),
        }
    }
}

/// A killed child not reaped yet. Reaped asynchronously when a runtime is
/// there to do it; if that task is dropped (runtime shutting down) or there
/// is no runtime, `Drop` waits for it, which after SIGKILL takes moments.
struct Dying {
    pid: Pid,
    pidfd: Option<AsyncFd<OwnedFd>>,
}

impl Dying {
    async fn reap(mut self) {
        if let Some(fd) = &self.pidfd {
            while let Ok(mut guard) = fd.readable().await {
                match peek_exit(fd.get_ref()) {
                    Ok(None) => guard.clear_ready(),
                    _ => break,
                }
            }
        }
        self.finish(WaitIdOptions::NOHANG);
    }

    fn finish(&mut self, extra: WaitIdOptions) {
        if let Some(fd) = self.pidfd.take() {
            let _ = rustix::process::waitid(
                WaitId::PidFd(fd.get_ref().as_fd()),
                WaitIdOptions::EXITED | extra,
            );
            lock_registry().remove(&self.pid.as_raw_pid());
            request_sweep();
        }
    }
}

impl Drop for Dying {
    fn drop(&mut self) {
        self.finish(WaitIdOptions::empty());
    }
}

/// The exit status of an exited child, leaving it a zombie; `None` while it
/// still runs.
fn peek_exit(fd: &OwnedFd) -> io::Result<Option<ExitStatus>> {
    let st = rustix::process::waitid(
        WaitId::PidFd(fd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    )?;
    Ok(st.and_then(|st| {
        if let Some(code) = st.exit_status() {
            Some(ExitStatus::Code(code))
        } else {
            st.terminating_signal().map(ExitStatus::Signal)
        }
    }))
}

/// A child started by [`spawn_registered`]: known to the sweep (never
/// taken for an orphan) until this is dropped, which must come after its
/// spawner reaped it (else a sweep could reap it first).
#[derive(Debug)]
pub struct Registered {
    pid: i32,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock_registry().remove(&self.pid);
    }
}

/// Spawns `cmd` as a std `Child` its caller waits for itself (no runtime
/// needed), in a process group of its own, registered (see
/// [`Registered`]) as a server is: it neither shields others' orphans nor
/// holds back the sweep, however long it runs. For helpers a runner
/// starts outside the function calls (the starlark sandbox): unregistered,
/// a subreaper's sweep would kill them as orphans.
pub fn spawn_registered(cmd: &mut Command) -> io::Result<(std::process::Child, Registered)> {
    cmd.process_group(0);
    let id = NEXT_SPAWN.fetch_add(1, Ordering::Relaxed);
    cmd.env(MARKER_VAR, format!("{}.{id}", std::process::id()));
    let gate = SPAWN_GATE.read().unwrap_or_else(PoisonError::into_inner);
    let child = cmd.spawn()?;
    let pid = i32::try_from(child.id())
        .map_err(|_| io::Error::other(format!("invalid child pid {}", child.id())))?;
    lock_registry().insert(
        pid,
        Entry {
            kind: Kind::Server,
            id,
        },
    );
    drop(gate);
    Ok((child, Registered { pid }))
}

/// Kills the process groups of every child still running (used when the
/// server exits at once on a second SIGTERM).
pub fn kill_all_groups() {
    for &pid in lock_registry().keys() {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }
}

/// Whether orphans are ours to kill: set by [`become_subreaper`], or true
/// for PID 1.
static SWEEPING: AtomicBool = AtomicBool::new(false);

/// Makes this process the reaper of its orphaned descendants, and kills
/// those that outlive their call.
///
/// A function's process group dies with the call, but a descendant that
/// moved to a group or session of its own (`setsid`, a daemon's double
/// fork) escapes that kill, and, if the wrapper itself is killed (the OOM
/// killer's SIGKILL), so do the function processes. As a child subreaper
/// (PID 1 is one already) every such orphan is re-parented to this process
/// instead of to init, where it can be found and killed: after each call
/// (and after a server child exits) a sweep kills the orphans no running
/// call owns. A cgroup would contain them too, but needs a delegated cgroup
/// tree, which neither an unprivileged pod nor a developer's machine has;
/// PR_SET_CHILD_SUBREAPER needs no privilege.
///
/// Whose orphan: every spawn sets [`MARKER_VAR`] to `OUR_PID.SPAWN_ID`, which
/// descendants inherit. An orphan carrying the id of a call still running is
/// spared (a function may start a helper daemon and use it); any other
/// marked orphan is killed (its call ended, or it comes from a server child
/// that died, e.g. a pod's wrapper). An orphan without the marker (it
/// cleared its environment) is killed if it started before every running
/// call did, so it cannot be theirs.
///
/// Only for processes whose every child is spawned through [`Process`]: a
/// sweep reaps unregistered zombies, and would steal the exit status of a
/// child spawned otherwise (the wrapper, the runner's process backend and
/// `eval` spawn nothing else).
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    SWEEPING.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether [`become_subreaper`] was called (or this is PID 1).
pub fn is_subreaper() -> bool {
    SWEEPING.load(Ordering::SeqCst) || std::process::id() == 1
}

/// At most one sweep runs at a time; `again` asks the running one for
/// another round.
static SWEEP: Mutex<SweepState> = Mutex::new(SweepState {
    running: false,
    again: false,
});

struct SweepState {
    running: bool,
    again: bool,
}

/// Sweeps run at most this often (a sweep reads /proc).
const SWEEP_INTERVAL: Duration = Duration::from_millis(50);

/// Asks for a sweep of orphans (see [`become_subreaper`]), in the
/// background: the call that ended does not wait for it.
pub fn request_sweep() {
    request(false);
}

/// Asks for a sweep within [`SWEEP_INTERVAL`]: what to do on SIGCHLD (an
/// orphan that exited is reaped by the sweep). A call's own process sends
/// SIGCHLD as it exits, moments before that call reaps it and asks for a
/// sweep: waiting lets one sweep after the reap serve both, where an
/// immediate one would run while the call still answers, find that process
/// still registered, and leave the work to a second.
pub fn request_sweep_soon() {
    request(true);
}

fn request(wait_first: bool) {
    if !is_subreaper() {
        return;
    }
    {
        let mut state = SWEEP.lock().unwrap_or_else(PoisonError::into_inner);
        if state.running {
            state.again = true;
            return;
        }
        state.running = true;
    }
    let rounds = move || {
        if wait_first {
            std::thread::sleep(SWEEP_INTERVAL);
        }
        loop {
            // What was asked for until now, this sweep serves.
            SWEEP.lock().unwrap_or_else(PoisonError::into_inner).again = false;
            sweep(false);
            std::thread::sleep(SWEEP_INTERVAL);
            let mut state = SWEEP.lock().unwrap_or_else(PoisonError::into_inner);
            if !std::mem::take(&mut state.again) {
                state.running = false;
                break;
            }
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(rounds);
        }
        Err(_) => {
            std::thread::spawn(rounds);
        }
    }
}

/// Kills the orphans no running call owns (see [`become_subreaper`]) and
/// reaps the dead ones. Returns the pids killed.
pub fn kill_orphans() -> Vec<i32> {
    sweep(false)
}

/// Kills every orphan, whoever it belonged to, and reaps them: for a
/// process about to exit, whose calls are over (their groups killed).
///
/// Processes just killed take moments to die, and only then are their
/// children re-parented to us: so this goes on, for up to a second, until
/// a round finds no child of ours but zombies of registered ones.
pub fn kill_all_orphans() -> Vec<i32> {
    let until = std::time::Instant::now() + Duration::from_secs(1);
    let mut killed = Vec::new();
    loop {
        killed.extend(sweep(true));
        let registry = lock_registry();
        let busy = children()
            .iter()
            .any(|c| !c.zombie || !registry.contains_key(&c.pid));
        drop(registry);
        if !busy || std::time::Instant::now() >= until {
            return killed;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

#[cfg(test)]
mod resolve_tests;
