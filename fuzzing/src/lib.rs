//! The fuzz tests' harness: each target runs for a bounded time inside
//! `cargo test`, every input under a deadline, on the stable toolchain.
//!
//! Why `arbtest` (and not cargo-fuzz, proptest or bolero): cargo-fuzz needs
//! nightly; proptest counts cases rather than time and brings a dozen crates;
//! arbtest's loop is time-budgeted, its one dependency is `arbitrary`, and a
//! failure prints a seed that replays it. Its inputs are plain random bytes,
//! so the generators here ([`yaml`], [`bytes`]) give them structure: YAML
//! token soups, well-formed trees, and mutated seed files.
//!
//! Knobs (environment variables):
//! - `FUZZ_SECONDS`: seconds each target runs (default: the target's share of
//!   the one minute `cargo test --workspace` grants all targets);
//! - `FUZZ_INPUT_SECONDS`: the deadline of one input (default 10 s, for a
//!   debug build on a busy machine; a hang or a quadratic blow-up on inputs of
//!   these sizes takes far longer);
//! - `FUZZ_LAST_INPUT`: a file each input is written to (`{:?}`) before it
//!   runs, for a failure that aborts the process (a stack overflow);
//! - `FUZZ_STACK_MIB`: the fuzz thread's stack (default 256 MiB, see
//!   `stack_bytes`);
//! - `ARBTEST_SEED`: replays the one input a failure printed the seed of
//!   (arbtest's own knob; run the one test with it).
//!
//! An input that panics or runs past its deadline fails the test and is
//! printed whole (`{:?}`), ready to paste into a regression test.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use arbtest::arbitrary::{self, Unstructured};

pub mod bytes;
pub mod yaml;

/// What a target made of the inputs it was given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub cases: u64,
    /// Inputs the target accepted (parsed, decoded...): a generator that
    /// never gets past the first check fuzzes little.
    pub accepted: u64,
    pub input_bytes: u64,
    pub elapsed: Duration,
}

impl Stats {
    /// Asserts at least `share` of the inputs were accepted and at least
    /// `share` refused: both paths were fuzzed.
    pub fn assert_both_paths(&self, name: &str, share: f64) {
        let cases = self.cases.max(1) as f64;
        let accepted = self.accepted as f64 / cases;
        assert!(
            accepted >= share && 1.0 - accepted >= share,
            "{name}: {:.1}% of {} inputs accepted, expected between {:.1}% and {:.1}%",
            accepted * 100.0,
            self.cases,
            share * 100.0,
            (1.0 - share) * 100.0
        );
    }
}

/// The time a target runs: `FUZZ_SECONDS`, else `default`.
pub fn budget(default: Duration) -> Duration {
    seconds_var("FUZZ_SECONDS").unwrap_or(default)
}

fn seconds_var(name: &str) -> Option<Duration> {
    let v = std::env::var(name).ok()?;
    let s: f64 = v.trim().parse().ok()?;
    Duration::try_from_secs_f64(s).ok()
}

/// `f()`, which must return within `limit` (a regression test of a hang:
/// it fails rather than hanging the test run; the thread is left to the
/// end of the test process).
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("still running after {limit:?}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("it panicked"),
    }
}

/// Stack of the fuzz threads: `FUZZ_STACK_MIB`, else 256 MiB (reserved,
/// committed only as used), as the threads that run the workspace's
/// recursive tree walks on deep input have (`krm_builtins::container::
/// CALL_STACK_BYTES`): the parser accepts nesting 10,000 deep, and the
/// encoder, `Node::clone` and `drop` recurse on it.
fn stack_bytes() -> usize {
    std::env::var("FUZZ_STACK_MIB")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(256)
        << 20
}

/// The input being run, for the watchdog: when it started, and itself.
struct Current<T> {
    started: Option<Instant>,
    input: Option<Arc<T>>,
}

/// Runs `check` on inputs made by `generate` for [`budget`]`(default)`,
/// each under `FUZZ_INPUT_SECONDS`; `check` returns whether the target
/// accepted the input and panics on a property broken.
///
/// The loop runs on a thread of its own, watched from this one: an input
/// past its deadline fails the test (printed whole) while its thread is
/// left to the end of the test process, which cannot stop it otherwise.
pub fn run<T, G, C>(name: &str, default: Duration, mut generate: G, mut check: C) -> Stats
where
    T: Input,
    G: FnMut(&mut Unstructured<'_>) -> arbitrary::Result<T> + Send + 'static,
    C: FnMut(&T) -> bool + Send + 'static,
{
    let budget = budget(default);
    let deadline = seconds_var("FUZZ_INPUT_SECONDS").unwrap_or(Duration::from_secs(10));
    let current = Arc::new(Mutex::new(Current::<T> {
        started: None,
        input: None,
    }));
    let worker = {
        let current = current.clone();
        std::thread::Builder::new()
            .name(format!("fuzz {name}"))
            .stack_size(stack_bytes())
            .spawn(move || {
                let trace = std::env::var_os("FUZZ_LAST_INPUT");
                let mut stats = Stats::default();
                let started = Instant::now();
                arbtest::arbtest(|u| {
                    let input = Arc::new(generate(u)?);
                    {
                        let mut cur = current.lock().unwrap_or_else(PoisonError::into_inner);
                        cur.started = Some(Instant::now());
                        cur.input = Some(input.clone());
                    }
                    if let Some(path) = &trace {
                        // Written before the run: a stack overflow aborts the
                        // process, and leaves only this behind.
                        let _ = std::fs::write(path, format!("{input:?}"));
                    }
                    let accepted = check(&input);
                    // Not reached on a panic: the input stays for the report.
                    let mut cur = current.lock().unwrap_or_else(PoisonError::into_inner);
                    cur.started = None;
                    cur.input = None;
                    stats.cases += 1;
                    stats.accepted += u64::from(accepted);
                    stats.input_bytes += input.size() as u64;
                    Ok(())
                })
                .budget(budget)
                .run();
                stats.elapsed = started.elapsed();
                stats
            })
            .unwrap_or_else(|e| panic!("{name}: cannot start the fuzz thread: {e}"))
    };
    while !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        let cur = current.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Some(started), Some(input)) = (cur.started, &cur.input) {
            if started.elapsed() > deadline {
                eprintln!("{name}: input still running after {deadline:?}:\n{input:?}");
                panic!("{name}: an input ran past its deadline of {deadline:?} (printed above)");
            }
        }
    }
    match worker.join() {
        Ok(stats) => {
            let secs = stats.elapsed.as_secs_f64().max(1e-9);
            eprintln!(
                "fuzz {name}: {} inputs in {secs:.1} s ({:.0}/s), {} accepted, {:.1} MiB of input",
                stats.cases,
                stats.cases as f64 / secs,
                stats.accepted,
                stats.input_bytes as f64 / (1024.0 * 1024.0)
            );
            stats
        }
        Err(panic) => {
            let cur = current.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(input) = &cur.input {
                eprintln!("{name}: failing input:\n{input:?}");
            }
            std::panic::resume_unwind(panic)
        }
    }
}

/// An input of a target: printed whole on a failure, and sized for the
/// statistics.
pub trait Input: Debug + Send + Sync + 'static {
    /// Its size in bytes (of the text or bytes it stands for).
    fn size(&self) -> usize;
}

impl Input for String {
    fn size(&self) -> usize {
        self.len()
    }
}

impl Input for Vec<u8> {
    fn size(&self) -> usize {
        self.len()
    }
}
