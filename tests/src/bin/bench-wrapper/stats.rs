//! Statistics and reporting: samples and their percentiles, table cells,
//! the machine's notes, and CPU and memory read from /proc and getrusage.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeValLike;

use super::probe::children_cpu_ms;

/// Durations in milliseconds.
#[derive(Debug, Default, Clone)]
pub(super) struct Samples(pub(super) Vec<f64>);

impl Samples {
    pub(super) fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1000.0);
    }

    pub(super) fn push_ms(&mut self, ms: f64) {
        self.0.push(ms);
    }

    /// Nearest-rank percentile, `q` in 0..=100.
    pub(super) fn pct(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((q / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    pub(super) fn p50(&self) -> f64 {
        self.pct(50.0)
    }

    pub(super) fn p90(&self) -> f64 {
        self.pct(90.0)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

pub(super) fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

pub(super) fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!(
            "{:.2} MiB ({bytes} B)",
            bytes as f64 / f64::from(1u32 << 20)
        )
    } else if bytes >= 1024 {
        format!("{:.1} KiB ({bytes} B)", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The ResourceList with every line after `items:` indented two more
/// columns: the same document, items as an indented sequence.
pub(super) fn indent_items(doc: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.len() + doc.len() / 4);
    let mut in_items = false;
    for line in doc.split_inclusive(|b| *b == b'\n') {
        if in_items {
            out.extend_from_slice(b"  ");
        }
        out.extend_from_slice(line);
        in_items |= line == b"items:\n";
    }
    out
}

pub(super) fn join_ratios(v: &[f64]) -> String {
    v.iter()
        .map(|r| format!("{r:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub(super) fn machine_notes() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let mem = proc_kib("/proc/meminfo", "MemTotal:").map_or_else(
        |_| "?".into(),
        |k| format!("{:.1} GiB", k as f64 / f64::from(1u32 << 20)),
    );
    format!(
        "machine: nproc {nproc}, {cpu}, {mem} RAM, Linux {kernel}; load average at the start: {}; binaries from {}\n",
        load_average(),
        e2e_tests::bin_dir().display()
    )
}

/// A `Key: N kB` line of a /proc status-like file, in KiB.
fn proc_kib(path: &str, key: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(key))
        .with_context(|| format!("no {key} in {path}"))?;
    line[key.len()..]
        .split_whitespace()
        .next()
        .context("empty value")?
        .parse()
        .with_context(|| format!("bad {key} line {line:?}"))
}

/// CPU time (user+sys) of every thread of `pid`, from
/// /proc/PID/task/*/schedstat (nanoseconds on CPU), in ms.
pub(super) fn process_cpu_ms(pid: u32) -> anyhow::Result<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(&path) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(ns as f64 / 1e6)
}

/// CPU used so far (ms): this process, its reaped children, the server's
/// threads and the server's reaped children.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct CpuSnap {
    pub(super) this: f64,
    pub(super) children: f64,
    pub(super) server: f64,
    pub(super) server_children: f64,
}

impl CpuSnap {
    pub(super) fn take(server: Option<u32>) -> anyhow::Result<Self> {
        let (cu, cs) = children_cpu_ms()?;
        let mut snap = CpuSnap {
            this: self_cpu_ms()?,
            children: cu + cs,
            ..Default::default()
        };
        if let Some(pid) = server {
            snap.server = process_cpu_ms(pid)?;
            snap.server_children = reaped_children_cpu_ms(pid)?;
        }
        Ok(snap)
    }

    pub(super) fn minus(&self, o: &Self) -> Self {
        CpuSnap {
            this: self.this - o.this,
            children: self.children - o.children,
            server: self.server - o.server,
            server_children: self.server_children - o.server_children,
        }
    }

    pub(super) fn plus(&self, o: &Self) -> Self {
        CpuSnap {
            this: self.this + o.this,
            children: self.children + o.children,
            server: self.server + o.server,
            server_children: self.server_children + o.server_children,
        }
    }
}

/// cutime + cstime of `pid` (its reaped children), from /proc/PID/stat, in
/// ms (clock ticks of 10 ms: coarse, fine over hundreds of calls).
fn reaped_children_cpu_ms(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').context("bad /proc stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [13, 14]
        .iter()
        .map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum();
    Ok(ticks as f64 * 10.0)
}

/// CPU time (user+sys) of this process so far, in ms.
fn self_cpu_ms() -> anyhow::Result<f64> {
    let u = getrusage(UsageWho::RUSAGE_SELF)?;
    Ok((u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 / 1000.0)
}

pub(super) fn vm_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    proc_kib(&format!("/proc/{pid}/status"), key)
}

/// Finds `program` in PATH (unless it has a slash), so the wrapper and the
/// direct baseline run exactly the same file.
pub(super) fn which(program: &str) -> anyhow::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program} not found in PATH"))
}

pub(super) fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

pub(super) fn path_str(p: &Path) -> anyhow::Result<&str> {
    p.to_str()
        .with_context(|| format!("non-UTF-8 path {}", p.display()))
}
