//! The sandbox a Starlark program runs in: a child process of the
//! embedding binary (`BINARY __starlark-sandbox`, [`sandbox_main`]), one
//! per call.
//!
//! Why a process: the interpreter cannot bound what one expression
//! allocates (`"x" * 2**30` asks the allocator at once, and a failed
//! allocation aborts the whole process), and its own heap limit is, in its
//! authors' words, best-effort ("use OS-level APIs in a subprocess if you
//! want that"). In a child, the kernel enforces the budget
//! (`RLIMIT_AS`), a deadline is a kill, a runaway leaves nothing behind in
//! the runner, and the runner goes on serving.
//!
//! What the child may do: read its request on stdin, write its answer on
//! stdout and `print` lines on stderr. Its environment is empty, it can
//! open no file or socket (`RLIMIT_NOFILE` at the three it has), write no
//! file (`RLIMIT_FSIZE` 0) and dump no core; the interpreter has no file,
//! network, process or clock primitive besides [`super::libs`]' `time.now()`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::interp::{self, Outcome, Request};
use crate::function::{Context, Stop};

/// The argument that makes the embedding binary a sandbox
/// ([`sandbox_main`]).
pub const SANDBOX_ARG: &str = "__starlark-sandbox";

/// The sandbox thread's stack: deep enough for
/// [`interp::DEFAULT_MAX_DEPTH`] nested calls of a large function.
pub const STACK_BYTES: usize = 256 << 20;

/// How much of the child's stderr (its `print` lines) is kept.
const MAX_STDERR: usize = 1 << 20;

/// What the sandbox may use.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The binary to run as the sandbox, with [`SANDBOX_ARG`] first.
    pub program: PathBuf,
    /// The program's memory, beyond what the child holds before it
    /// starts (the interpreter, its stack): its address space is capped
    /// at that plus this.
    pub memory_bytes: u64,
    /// How deep calls may nest (0: the default).
    pub max_depth: usize,
    /// The flag that sets `memory_bytes`, named in the error.
    pub memory_flag: String,
    /// The most the child may answer (the items it leaves), in bytes.
    pub max_output_bytes: u64,
    /// Starts the child: the embedding binary's way of spawning a helper
    /// (a runner that reaps orphans must know it), with a guard it keeps
    /// until the child was reaped.
    pub spawn: Spawn,
}

/// See [`Limits::spawn`].
pub type Spawn = fn(&mut Command) -> std::io::Result<(Child, Box<dyn std::any::Any + Send>)>;

static LIMITS: OnceLock<Limits> = OnceLock::new();

/// Runs every later program in a sandbox with these limits (once per
/// process; later calls are ignored).
pub fn configure(limits: Limits) {
    let _ = LIMITS.set(limits);
}

/// What a run left: its outcome and what it printed.
#[derive(Debug)]
pub(super) struct Ran {
    pub outcome: Outcome,
    pub stderr: String,
}

/// What the child is given on stdin (postcard): the request and its
/// limits.
#[derive(Deserialize)]
struct Job {
    request: Request,
    memory_bytes: u64,
    max_depth: usize,
    max_output_bytes: u64,
    parent: u32,
}

/// [`Job`] as the parent writes it, without a copy of the request.
#[derive(Serialize)]
struct JobRef<'a> {
    request: &'a Request,
    memory_bytes: u64,
    max_depth: usize,
    max_output_bytes: u64,
    parent: u32,
}

/// Runs the program: in the sandbox when one is configured, else here.
pub(super) fn execute(request: &Request, ctx: &Context) -> Result<Ran, Stop> {
    ctx.check()?;
    let Some(limits) = LIMITS.get() else {
        let printed = interp::Printed::default();
        let outcome = interp::execute(request, &|l| printed.line(l));
        return Ok(Ran {
            outcome,
            stderr: printed.0.into_inner(),
        });
    };
    let name = request.name.clone();
    let job = postcard::to_stdvec(&JobRef {
        request,
        memory_bytes: limits.memory_bytes,
        max_depth: limits.max_depth,
        max_output_bytes: limits.max_output_bytes,
        parent: std::process::id(),
    })
    .map_err(|e| Stop::Failed(format!("starlark: encoding the request: {e}")))?;
    let mut cmd = Command::new(&limits.program);
    cmd.arg(SANDBOX_ARG)
        .env_clear()
        // One malloc arena: the budget is the program's, not the arenas'
        // address space reserved per thread.
        .env("MALLOC_ARENA_MAX", "1")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, guard) = (limits.spawn)(&mut cmd).map_err(|e| {
        Stop::Failed(format!(
            "starlark: starting the sandbox {}: {e}",
            limits.program.display()
        ))
    })?;
    let (mut stdin, mut stdout, mut stderr) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => {
                Started { child, guard }.stop();
                return Err(Stop::Failed("starlark: the sandbox has no pipes".into()));
            }
        };
    // A thread that cannot start (a pod at its process limit) fails the
    // call, and the child goes.
    let mut started = Started { child, guard };
    let writer = started.thread(move || {
        // A child that died early closes its end: its status says why.
        let _ = stdin.write_all(&job);
    })?;
    let err_reader = started.thread(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        let mut dropped = 0usize;
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_STDERR.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(buf.get(..room).unwrap_or_default());
                    dropped += n - room;
                }
            }
        }
        (kept, dropped)
    })?;
    // The answer is read up to the cap: past it, the child goes (a program
    // must not make the runner hold what it could not send).
    let cap = limits.max_output_bytes;
    let (tx, rx) = mpsc::channel();
    // One allocation of the cap (64 MiB at most; pages not written cost
    // nothing), not a doubling one's blocks of every size.
    let room = usize::try_from(cap.saturating_add(1).min(64 << 20)).unwrap_or(64 << 20);
    let mut out = Vec::with_capacity(room);
    started.thread(move || {
        let read = (&mut stdout)
            .take(cap.saturating_add(1))
            .read_to_end(&mut out);
        let _ = tx.send(read.map(|_| out));
    })?;
    let out = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(read) => break read.unwrap_or_default(),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(stop) = ctx.check() {
                    started.stop();
                    let _ = writer.join();
                    return Err(stop);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Vec::new(),
        }
    };
    let too_large = out.len() as u64 > cap;
    if too_large {
        let _ = started.child.kill();
    }
    let Started { mut child, guard } = started;
    let status = child.wait();
    drop(guard);
    let _ = writer.join();
    let (kept, dropped) = err_reader.join().unwrap_or_default();
    let mut stderr = String::from_utf8_lossy(&kept).into_owned();
    let outcome = match status {
        _ if too_large => Err(self::too_large(&name, cap)),
        Ok(s) if s.success() => postcard::from_bytes::<Outcome>(&out)
            .unwrap_or_else(|e| Err(format!("starlark: the sandbox's answer: {e}"))),
        Ok(s) => Err(died(&name, s, &mut stderr, limits)),
        Err(e) => Err(format!("starlark: waiting for the sandbox: {e}")),
    };
    if dropped > 0 {
        stderr.push_str(&format!("\n({dropped} more bytes of output dropped)\n"));
    }
    Ok(Ran { outcome, stderr })
}

fn too_large(name: &str, cap: u64) -> String {
    format!("{name}: the program's output is over {cap} bytes, the most a call may answer")
}

/// A started child and the guard its spawner gave.
struct Started {
    child: Child,
    guard: Box<dyn std::any::Any + Send>,
}

impl Started {
    /// Kills and reaps the child (then the guard goes).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A thread for one of the child's pipes; if none can start, the
    /// child is stopped and the call fails.
    fn thread<T: Send + 'static>(
        &mut self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<std::thread::JoinHandle<T>, Stop> {
        std::thread::Builder::new()
            .name("starlark-pipe".into())
            .spawn(f)
            .map_err(|e| {
                self.stop();
                Stop::Failed(format!("starlark: starting a thread for the sandbox: {e}"))
            })
    }
}

/// Why the child ended without an answer, in the user's terms; the
/// runtime's own last words are taken off its stderr.
fn died(name: &str, status: ExitStatus, stderr: &mut String, limits: &Limits) -> String {
    let memory = ["memory allocation of", "capacity overflow", "out of memory"];
    let stack = ["has overflowed its stack", "stack overflow"];
    let said = |keys: &[&str]| keys.iter().any(|k| stderr.contains(k));
    let what = if said(&memory) {
        format!(
            "{name}: the program went over its memory budget of {} MiB ({})",
            limits.memory_bytes >> 20,
            limits.memory_flag
        )
    } else if said(&stack) {
        format!("{name}: the program's calls nest too deep for the sandbox's stack")
    } else {
        format!("{name}: the starlark sandbox ended without an answer ({status})")
    };
    let keep: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            !(memory.iter().chain(stack.iter()).any(|k| l.contains(k))
                || l.starts_with("fatal runtime error")
                || l.starts_with("note: run with `RUST_BACKTRACE")
                || (l.starts_with("thread '") && l.contains("panicked at")))
        })
        .collect();
    *stderr = if keep.is_empty() {
        String::new()
    } else {
        keep.join("\n") + "\n"
    };
    what
}

/// The sandbox's `main`: reads a [`Job`] on stdin, confines itself, runs
/// the program on a thread with a deep stack, writes the [`Outcome`] on
/// stdout. Returns the exit code.
pub fn sandbox_main() -> i32 {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("starlark sandbox: reading the request: {e}");
        return 2;
    }
    let job: Job = match postcard::from_bytes(&input) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("starlark sandbox: reading the request: {e}");
            return 2;
        }
    };
    drop(input);
    // The sandbox goes with the thread that started it (a runner or an
    // `eval` that ends, by Ctrl-C too: the sandbox has its own process
    // group, which a terminal's signal does not reach); if the parent
    // went before this was set, now.
    let orphaned =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .is_err()
            || rustix::process::getppid().map(|p| p.as_raw_pid() as u32) != Some(job.parent);
    if orphaned {
        eprintln!("starlark sandbox: its parent is gone");
        return 2;
    }
    let (name, max_output) = (job.request.name.clone(), job.max_output_bytes);
    let run = std::thread::Builder::new()
        .name("starlark".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let mut job = job;
            job.request.max_depth = job.max_depth;
            confine(job.memory_bytes)?;
            let stderr = std::io::stderr();
            Ok(interp::execute(&job.request, &|line| {
                let mut e = stderr.lock();
                let _ = writeln!(e, "{line}");
            }))
        });
    let outcome: Result<Outcome, String> = match run {
        Ok(h) => h
            .join()
            .unwrap_or_else(|_| Err("the interpreter stopped".into())),
        Err(e) => Err(format!("starting the interpreter's thread: {e}")),
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("starlark sandbox: {e}");
            return 2;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = postcard::to_stdvec(&outcome)
        .and_then(|bytes| {
            // Past the cap, the runner gets the error, not the bytes it
            // would refuse.
            if bytes.len() as u64 > max_output {
                postcard::to_stdvec(&Outcome::Err(too_large(&name, max_output)))
            } else {
                Ok(bytes)
            }
        })
        .map_err(std::io::Error::other)
        .and_then(|bytes| stdout.write_all(&bytes))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("starlark sandbox: writing the answer: {e}");
            2
        }
    }
}

/// The limits the kernel holds the child to, set once its thread (and
/// stack) exist: address space = what it holds now + `memory_bytes`; no
/// new file descriptors, no file writes, no core dump.
fn confine(memory_bytes: u64) -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let statm = std::fs::read_to_string("/proc/self/statm")
        .map_err(|e| format!("reading /proc/self/statm: {e}"))?;
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or("reading /proc/self/statm: no size")?;
    let held = pages * rustix::param::page_size() as u64;
    let set = |r: Resource, n: u64| {
        setrlimit(
            r,
            Rlimit {
                current: Some(n),
                maximum: Some(n),
            },
        )
        .map_err(|e| format!("setting {r:?}: {e}"))
    };
    set(Resource::Core, 0)?;
    set(Resource::Fsize, 0)?;
    set(Resource::Nofile, 3)?;
    set(Resource::As, held.saturating_add(memory_bytes))?;
    Ok(())
}
