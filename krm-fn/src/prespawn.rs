//! Pre-spawned function processes: start-up off the call path, still one
//! fresh process per call (seed 003's idle pool, inside the pod).
//!
//! A [`Pool`] keeps up to N processes of the function started and blocked
//! on reading stdin. A call [`Pool::take`]s one, gives it its ResourceList
//! ([`exec::run_spawned`]) and reads its answer, and a replacement starts in
//! the background. Nothing is reused: a process serves exactly one call, and
//! one taken is never handed out again.
//!
//! - Each waiting process has a keeper task that owns it until it is taken:
//!   a process that exits (or is killed) while it waits is seen there at
//!   once (its pidfd), discarded, its status and the start of its stderr
//!   logged, and replaced.
//! - Deaths back off: after a death the next start waits 100 ms, doubling
//!   per death up to 30 s, until a process is taken again. A function that
//!   dies at start every time is thus not respawned in a loop; meanwhile
//!   calls find the pool empty and spawn their own process, as without a
//!   pool, so the call itself reports how the function died.
//! - [`Pool::close`] (the drain) kills every waiting process; so does
//!   dropping the pool.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

use crate::exec::{self, ExecSpec, Spawned};

/// The most processes one pool keeps: each is an idle process of the
/// function, and a typo should not fork thousands.
pub const MAX_SIZE: usize = 64;

/// `--prespawn N`: 0 to [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if n > MAX_SIZE {
        return Err(format!("{n} is more than {MAX_SIZE} waiting processes"));
    }
    Ok(n)
}

/// The first backoff after a death; doubled per death.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How much of a dead waiting process's stderr is logged.
const DEATH_STDERR_BYTES: usize = 2048;

/// A handle on one waiting process: send it a reply channel to take it.
type Claim = oneshot::Sender<oneshot::Sender<Spawned>>;

/// One waiting process: its keeper's id, its pid, its claim handle.
type Waiting = (u64, u32, Claim);

struct Inner {
    size: usize,
    /// The waiting processes, oldest first, by keeper id.
    waiting: Mutex<VecDeque<Waiting>>,
    /// Wakes the filler: a process was taken or died.
    refill: Notify,
    closed: CancellationToken,
    started: AtomicU64,
    next_id: AtomicU64,
    /// Waiting processes now (the metrics gauge): the queue's length, kept
    /// with it under its lock.
    count: AtomicUsize,
    /// Processes that exited before any call took them.
    deaths: AtomicU64,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the queue, keeping the count with it.
    fn with_queue<T>(&self, change: impl FnOnce(&mut VecDeque<Waiting>) -> T) -> T {
        let mut queue = self.lock();
        let out = change(&mut queue);
        self.count.store(queue.len(), Ordering::Relaxed);
        out
    }
}

/// What a keeper saw.
enum Ended {
    /// Its process was taken by a call.
    Taken,
    /// Its process exited before any call took it.
    Died,
}

/// A pool of pre-spawned processes of one function. See the module docs.
pub struct Pool {
    inner: Arc<Inner>,
}

impl Pool {
    /// Starts filling a pool of `size` processes of `spec` (at least one).
    /// Must be called inside a tokio runtime.
    pub fn new(spec: ExecSpec, size: usize) -> Pool {
        Self::new_after(spec, size, std::future::ready(()))
    }

    /// [`Pool::new`], but no process starts before `gate` resolves (the
    /// wrapper behind a Unix socket waits until the runner has made the
    /// socket's directory its own: a function started earlier could write
    /// into it). Takes find none waiting meanwhile and spawn their own.
    pub fn new_after(
        spec: ExecSpec,
        size: usize,
        gate: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Pool {
        let inner = Arc::new(Inner {
            size: size.max(1),
            waiting: Mutex::default(),
            refill: Notify::new(),
            closed: CancellationToken::new(),
            started: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            deaths: AtomicU64::new(0),
        });
        let filler = inner.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = gate => fill(filler, spec).await,
                () = filler.closed.cancelled() => {}
            }
        });
        Pool { inner }
    }

    /// A waiting process, taken for one call, with the guard that starts
    /// its replacement when dropped (hold it until the call is answered: a
    /// replacement starting meanwhile would take CPU from the call);
    /// `None` if none waits (the caller spawns its own).
    pub async fn take(&self) -> Option<(Spawned, Refill)> {
        loop {
            let (_, _, claim) = self.inner.with_queue(VecDeque::pop_front)?;
            let (reply, answer) = oneshot::channel();
            if claim.send(reply).is_err() {
                continue; // its keeper just saw it die (and asked for a refill)
            }
            if let Ok(spawned) = answer.await {
                return Some((spawned, Refill(self.inner.clone())));
            }
        }
    }

    /// Processes waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.count.load(Ordering::Relaxed)
    }

    /// Processes started so far (taken, waiting or dead).
    pub fn started(&self) -> u64 {
        self.inner.started.load(Ordering::Relaxed)
    }

    /// Processes that exited while waiting.
    pub fn deaths(&self) -> u64 {
        self.inner.deaths.load(Ordering::Relaxed)
    }

    /// The pool's size.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The pids of the processes waiting now.
    pub fn waiting_pids(&self) -> Vec<u32> {
        self.inner.lock().iter().map(|(_, pid, _)| *pid).collect()
    }

    /// Kills every waiting process and starts no more.
    pub fn close(&self) {
        self.inner.closed.cancel();
        self.inner.with_queue(VecDeque::clear);
    }
}

/// Starts the replacement of a taken process when dropped.
pub struct Refill(Arc<Inner>);

impl Drop for Refill {
    fn drop(&mut self) {
        self.0.refill.notify_one();
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("size", &self.size())
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps the pool full, backing off after deaths.
async fn fill(inner: Arc<Inner>, spec: ExecSpec) {
    let (ended_tx, mut ended_rx) = mpsc::unbounded_channel::<Ended>();
    let mut deaths = 0u32;
    loop {
        // Deaths since the last start push the next one back; a take resets.
        while let Ok(ended) = ended_rx.try_recv() {
            match ended {
                Ended::Taken => deaths = 0,
                Ended::Died => deaths = deaths.saturating_add(1),
            }
        }
        if let Some(backoff) = backoff(deaths) {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = inner.closed.cancelled() => return,
            }
        }
        if inner.closed.is_cancelled() {
            return;
        }
        if inner.count.load(Ordering::Relaxed) >= inner.size {
            tokio::select! {
                () = inner.refill.notified() => {}
                () = inner.closed.cancelled() => return,
            }
            continue;
        }
        match exec::spawn_waiting(&spec) {
            Ok(spawned) => {
                inner.started.fetch_add(1, Ordering::Relaxed);
                let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
                let (claim, claimed) = oneshot::channel();
                // Not after a close: the process is dropped (killed) instead.
                let queued = inner.with_queue(|q| {
                    let open = !inner.closed.is_cancelled();
                    if open {
                        q.push_back((id, spawned.id(), claim));
                    }
                    open
                });
                if !queued {
                    return;
                }
                tokio::spawn(keep(inner.clone(), id, spawned, claimed, ended_tx.clone()));
                // A spawn blocks this worker until the child exec'd: let the
                // calls run between spawns.
                tokio::task::yield_now().await;
            }
            Err(err) => {
                tracing::warn!(%err, "pre-spawning the function failed; calls spawn their own");
                deaths = deaths.saturating_add(1);
            }
        }
    }
}

/// How long the next start waits after `deaths` deaths in a row.
fn backoff(deaths: u32) -> Option<Duration> {
    let doublings = deaths.checked_sub(1)?.min(16);
    Some(
        FIRST_BACKOFF
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF),
    )
}

/// Owns one waiting process until a call takes it or it dies.
async fn keep(
    inner: Arc<Inner>,
    id: u64,
    mut spawned: Spawned,
    claimed: oneshot::Receiver<oneshot::Sender<Spawned>>,
    ended: mpsc::UnboundedSender<Ended>,
) {
    enum Seen {
        Exit(std::io::Result<exec::ExitStatus>),
        Claim(Option<oneshot::Sender<Spawned>>),
        Closed,
    }
    let seen = tokio::select! {
        // A dead process is never handed out, even if both are ready.
        biased;
        status = spawned.process.wait_exit() => Seen::Exit(status),
        claim = claimed => Seen::Claim(claim.ok()),
        () = inner.closed.cancelled() => Seen::Closed,
    };
    // Exited, though the reactor has not said so yet: never handed out
    // (the taker, its reply dropped, takes the next one).
    let seen = match seen {
        Seen::Claim(Some(_)) if spawned.process.has_exited() => {
            Seen::Exit(spawned.process.wait_exit().await)
        }
        seen => seen,
    };
    match seen {
        Seen::Claim(Some(reply)) => match reply.send(spawned) {
            Ok(()) => {
                let _ = ended.send(Ended::Taken);
            }
            // A caller that gave up meanwhile: its process is dropped
            // (killed, not reused) and replaced at once, as that caller
            // holds no refill guard.
            Err(_) => inner.refill.notify_one(),
        },
        Seen::Claim(None) | Seen::Closed => {
            // Dropped: its group is killed.
            inner.with_queue(|q| q.retain(|(other, _, _)| *other != id));
        }
        Seen::Exit(status) => {
            inner.with_queue(|q| q.retain(|(other, _, _)| *other != id));
            inner.deaths.fetch_add(1, Ordering::Relaxed);
            let stderr = spawned
                .stdio
                .stderr
                .as_ref()
                .map(|fd| read_available(fd, DEATH_STDERR_BYTES))
                .unwrap_or_default();
            let status = match status {
                Ok(status) => status.to_string(),
                Err(err) => format!("unknown ({err})"),
            };
            tracing::warn!(
                pid = spawned.id(),
                %status,
                stderr = %String::from_utf8_lossy(&stderr).trim_end(),
                "a pre-spawned function process exited before any call took it; replaced after a backoff"
            );
            let _ = ended.send(Ended::Died);
            inner.refill.notify_one();
        }
    }
}

/// What can be read from `fd` now, up to `max` bytes, without waiting.
fn read_available(fd: &std::os::fd::OwnedFd, max: usize) -> Vec<u8> {
    let mut out = vec![0u8; max];
    if rustix::io::ioctl_fionbio(fd, true).is_err() {
        return Vec::new();
    }
    let mut len = 0;
    while len < max {
        match rustix::io::read(fd, &mut out[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    out.truncate(len);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::exec::{run_spawned, Limits};

    fn sh(script: &str) -> ExecSpec {
        ExecSpec::from_argv(["/bin/sh", "-c", script]).unwrap()
    }

    async fn eventually(mut check: impl FnMut() -> bool) -> bool {
        for _ in 0..500 {
            if check() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        check()
    }

    #[tokio::test]
    async fn each_call_gets_a_fresh_process_and_the_pool_refills() {
        let pool = Pool::new(sh("echo pid=$$; cat"), 2);
        assert!(eventually(|| pool.waiting() == 2).await);
        let mut pids = std::collections::HashSet::new();
        for i in 0..5 {
            let (spawned, refill) = pool.take().await.expect("a waiting process");
            assert!(
                pids.insert(spawned.id()),
                "process {} handed out twice",
                spawned.id()
            );
            let out = run_spawned(
                spawned,
                bytes::Bytes::from(format!("call {i}\n")),
                &Limits::new(1 << 20),
            )
            .await
            .unwrap();
            let text = String::from_utf8(out.stdout.to_vec()).unwrap();
            assert!(text.ends_with(&format!("call {i}\n")), "{text}");
            // Answered: the replacement starts.
            drop(refill);
            assert!(eventually(|| pool.waiting() == 2).await, "refilled");
        }
        // Bounded by N: five taken, two waiting.
        assert_eq!(pool.started(), 7);
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    }

    fn kill(pid: u32) {
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }

    #[tokio::test]
    async fn a_waiting_process_that_dies_is_replaced_and_never_handed_out() {
        let pool = Pool::new(sh("cat"), 1);
        assert!(eventually(|| pool.waiting() == 1).await);
        let victim = pool.waiting_pids()[0];
        let before = pool.started();
        kill(victim);
        // Replaced (after the first backoff); the dead one is never given out.
        assert!(eventually(|| pool.started() > before && pool.waiting() == 1).await);
        let (spawned, _refill) = pool.take().await.unwrap();
        assert_ne!(spawned.id(), victim);
        let out = run_spawned(
            spawned,
            bytes::Bytes::from_static(b"ok\n"),
            &Limits::new(1024),
        )
        .await
        .unwrap();
        assert_eq!(&out.stdout[..], b"ok\n");
    }

    #[test]
    fn backoff_doubles_from_a_tenth_of_a_second_to_half_a_minute() {
        let ms = |d: u32| backoff(d).map(|b| b.as_millis());
        assert_eq!(ms(0), None, "no death, no wait");
        assert_eq!(ms(1), Some(100));
        assert_eq!(ms(2), Some(200));
        assert_eq!(ms(5), Some(1600));
        assert_eq!(ms(9), Some(25_600));
        assert_eq!(ms(10), Some(30_000));
        assert_eq!(ms(u32::MAX), Some(30_000));
    }

    // Real processes, real time: a function that exits at once would be
    // started hundreds of times a second in a loop; with the backoff it is
    // started a handful of times (0.1 + 0.2 + 0.4 + 0.8 s after the first
    // two). A slower machine only starts it fewer times.
    #[tokio::test]
    async fn a_function_that_dies_at_start_is_not_respawned_in_a_loop() {
        let pool = Pool::new(sh("echo no config >&2; exit 3"), 2);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let started = pool.started();
        assert!(
            (2..=8).contains(&started),
            "started {started} times in 1.5 s"
        );
        assert!(pool.deaths() >= 2);
    }

    #[tokio::test]
    async fn close_kills_the_waiting_processes() {
        let pool = Pool::new(sh("cat"), 3);
        assert!(eventually(|| pool.waiting() == 3).await);
        let pids = pool.waiting_pids();
        assert!(pids.iter().all(|p| alive(*p)));
        pool.close();
        assert!(
            eventually(|| pids.iter().all(|p| !alive(*p))).await,
            "{pids:?}"
        );
        assert!(pool.take().await.is_none());
    }
}
