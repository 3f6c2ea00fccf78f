//! The YAML layer against its oracles, on generated packages (issue 42):
//!
//! - [`Check::Yaml`]: each file through `krm_yaml::parse` + `emit::encode`
//!   against yaml.v3's decoder and encoder (`tests/yaml-oracle`, a Go
//!   program built here from Debian's golang-go and
//!   golang-gopkg-yaml.v3-dev): the node trees (every field, comments and
//!   positions included) or the error text, then the bytes written.
//! - [`Check::Eval`]: `function-runner eval --exec F` against
//!   `kpt fn eval --exec F`: exit code and every file's bytes.
//! - [`Check::Render`]: `render` of the package with a two-step pipeline
//!   against `kpt fn render`: exit code and every file's bytes.
//!
//! A failing case is shrunk ([`shrink`]) to the smallest package that still
//! fails the same check, and reported with its seed. Where kpt loses or
//! misplaces what the user wrote and we keep it, the difference is a
//! documented departure ([`departures`], docs/eval-render.md), accepted
//! exactly, and counted apart.

pub mod departures;
pub mod gen;
pub mod shrink;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::beta67::same_file;
use gen::Package;

/// How long one program run of a check may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The functions the eval and render checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// `cat`: the ResourceList back unchanged.
    Cat,
    /// PyYAML: load, dump with sorted keys (comments and styles gone).
    Sort,
    /// Drops the last item (not a Kptfile), text untouched otherwise.
    Delete,
    /// Adds two items, one with a path of its own.
    Add,
}

impl Func {
    pub const ALL: [Func; 4] = [Func::Cat, Func::Sort, Func::Delete, Func::Add];

    fn name(self) -> &'static str {
        match self {
            Func::Cat => "cat",
            Func::Sort => "sort",
            Func::Delete => "delete",
            Func::Add => "add",
        }
    }
}

/// One comparison of a package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Yaml,
    Eval(Func),
    Render(Func, Func),
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Yaml => write!(f, "yaml.v3 parse+emit"),
            Check::Eval(func) => write!(f, "eval --exec {}", func.name()),
            Check::Render(a, b) => write!(f, "render [{}, {}]", a.name(), b.name()),
        }
    }
}

/// What one check of one package came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Same,
    /// Differs only as the named documented departure allows.
    Departure(&'static str),
    /// Differs: what, first difference first.
    Differs(String),
}

/// The tools the checks run, found or built once per process.
pub struct Tools {
    pub kpt: PathBuf,
    pub ours: PathBuf,
    pub oracle: PathBuf,
    /// The functions' scripts.
    funcs: tempfile::TempDir,
}

impl Tools {
    /// kpt, our function-runner, the yaml.v3 oracle (built on first use),
    /// python3 with PyYAML; an error names what is missing.
    pub fn find() -> anyhow::Result<Tools> {
        let kpt = crate::require_kpt()?;
        let oracle = yaml_oracle()?;
        crate::require_command("python3", &["-c", "import yaml"])
            .context("python3 with PyYAML (the sort function)")?;
        let ours = crate::bin("function-runner");
        let funcs = tempfile::tempdir()?;
        write_functions(funcs.path())?;
        Ok(Tools {
            kpt,
            ours,
            oracle,
            funcs,
        })
    }

    fn func(&self, f: Func) -> String {
        match f {
            Func::Cat => "cat".to_owned(),
            f => self
                .funcs
                .path()
                .join(f.name())
                .to_string_lossy()
                .into_owned(),
        }
    }

    /// Runs `check` on `pkg`.
    pub fn check(&self, check: Check, pkg: &Package) -> anyhow::Result<Outcome> {
        match check {
            Check::Yaml => {
                let mut outcome = Outcome::Same;
                for (path, bytes) in &pkg.files {
                    let o = self.yaml_file(bytes).with_context(|| path.clone())?;
                    match o {
                        Outcome::Same => {}
                        Outcome::Departure(_) if outcome == Outcome::Same => outcome = o,
                        Outcome::Departure(_) => {}
                        Outcome::Differs(d) => return Ok(Outcome::Differs(format!("{path}: {d}"))),
                    }
                }
                Ok(outcome)
            }
            Check::Eval(f) => {
                self.against_kpt(check, pkg, &["eval", "pkg", "--exec", &self.func(f)])
            }
            Check::Render(..) => self.against_kpt(check, pkg, &["render", "pkg", "--allow-exec"]),
        }
    }

    /// Runs the yaml check on many packages at once (one oracle process):
    /// each package's outcome, in order.
    pub fn yaml_batch(&self, pkgs: &[Package]) -> anyhow::Result<Vec<Outcome>> {
        let dir = tempfile::tempdir()?;
        for (i, p) in pkgs.iter().enumerate() {
            for (j, (_, bytes)) in p.files.iter().enumerate() {
                fs::write(dir.path().join(format!("c{i}_{j}.yaml")), bytes)?;
            }
        }
        let answers = self.oracle_batch(dir.path())?;
        let mut out = Vec::with_capacity(pkgs.len());
        for (i, p) in pkgs.iter().enumerate() {
            let mut outcome = Outcome::Same;
            for (j, (path, bytes)) in p.files.iter().enumerate() {
                let (json, encoded) = answers
                    .get(&format!("c{i}_{j}"))
                    .with_context(|| format!("the oracle gave no answer for case {i} file {j}"))?;
                match compare_yaml(bytes, json, encoded.as_deref()) {
                    Outcome::Same => {}
                    Outcome::Departure(d) => {
                        if outcome == Outcome::Same {
                            outcome = Outcome::Departure(d)
                        }
                    }
                    Outcome::Differs(d) => {
                        outcome = Outcome::Differs(format!("{path}: {d}"));
                        break;
                    }
                }
            }
            out.push(outcome);
        }
        Ok(out)
    }

    fn yaml_file(&self, bytes: &[u8]) -> anyhow::Result<Outcome> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("c.yaml"), bytes)?;
        let answers = self.oracle_batch(dir.path())?;
        let (json, encoded) = answers.get("c").context("the oracle gave no answer")?;
        Ok(compare_yaml(bytes, json, encoded.as_deref()))
    }

    /// `yaml-oracle batch DIR`: per case name, the dump and the encoding.
    fn oracle_batch(&self, dir: &Path) -> anyhow::Result<BTreeMap<String, OracleAnswer>> {
        let out = crate::output_within(
            Command::new(&self.oracle).arg("batch").arg(dir),
            None,
            RUN_TIMEOUT,
        )?;
        if !out.status.success() {
            bail!(
                "yaml-oracle batch failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut answers = BTreeMap::new();
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let json = fs::read_to_string(&path)?;
            let encoded = fs::read(path.with_extension("out")).ok();
            answers.insert(name, (json, encoded));
        }
        Ok(answers)
    }

    /// Runs kpt and ours on two copies of `pkg` (with a Kptfile for
    /// render) and compares exit codes and files.
    fn against_kpt(&self, check: Check, pkg: &Package, args: &[&str]) -> anyhow::Result<Outcome> {
        let tmp = tempfile::tempdir()?;
        let (k, o) = (tmp.path().join("k"), tmp.path().join("o"));
        for d in [&k, &o] {
            write_package(&d.join("pkg"), pkg)?;
            if let Check::Render(a, b) = check {
                fs::write(
                    d.join("pkg/Kptfile"),
                    format!(
                        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - exec: {}\n  - exec: {}\n",
                        self.func(a),
                        self.func(b)
                    ),
                )?;
            }
        }
        let mut kargs = vec!["fn"];
        kargs.extend_from_slice(args);
        kargs.push("--truncate-output=false");
        let kr = run(&self.kpt, &k, &kargs)?;
        let or = run(&self.ours, &o, args)?;
        let (kt, ot) = (tree(&k)?, tree(&o)?);
        if kr.0 != or.0 {
            if let Some(name) = departures::refused_by_kpt(pkg, &kr, &or) {
                return Ok(Outcome::Departure(name));
            }
            return Ok(Outcome::Differs(format!(
                "exit codes: kpt {}, ours {}\n--- kpt's stderr:\n{}\n--- ours:\n{}",
                kr.0, or.0, kr.1, or.1
            )));
        }
        if kr.0 != 0 {
            // Both failed: for the same reason, said alike (kpt's beta.56
            // lines as beta.67 prints them, durations and the two work
            // directories aside).
            let command = match check {
                Check::Render(..) => crate::beta67::Command::Render,
                _ => crate::beta67::Command::Eval,
            };
            let theirs = comparable(&crate::beta67::stderr_as_beta67(&kr.1, command), &k);
            let ours = comparable(&or.1, &o);
            if theirs != ours {
                if let Some(name) = departures::refused_by_kpt(pkg, &kr, &or) {
                    return Ok(Outcome::Departure(name));
                }
                return Ok(Outcome::Differs(format!(
                    "both exit {}, stderr differs\n--- kpt's (as beta.67's):\n{theirs}--- ours:\n{ours}",
                    kr.0
                )));
            }
        }
        let mut differs = Vec::new();
        let paths: std::collections::BTreeSet<&String> = kt.keys().chain(ot.keys()).collect();
        for path in paths {
            match (kt.get(path), ot.get(path)) {
                (Some(kb), Some(ob)) if same_file(path, kb, ob) => {}
                (kb, ob) => differs.push((path.clone(), kb.cloned(), ob.cloned())),
            }
        }
        if differs.is_empty() {
            return Ok(Outcome::Same);
        }
        if let Some(name) = departures::accepts(pkg, &differs) {
            return Ok(Outcome::Departure(name));
        }
        let mut s = String::new();
        for (path, kb, ob) in differs {
            let show = |b: Option<Vec<u8>>| {
                b.map(|b| String::from_utf8_lossy(&b).replace('\r', "\\r"))
                    .unwrap_or_else(|| "(no such file)\n".to_owned())
            };
            s.push_str(&format!(
                "{path} differs\n--- kpt:\n{}--- ours:\n{}",
                show(kb),
                show(ob)
            ));
        }
        Ok(Outcome::Differs(s))
    }
}

/// The oracle's answer for one file: its dump (JSON), and what it encoded
/// (absent when the file did not parse).
type OracleAnswer = (String, Option<Vec<u8>>);

/// A difference between kpt's tree and ours: path, kpt's bytes, ours.
pub type FileDiff = (String, Option<Vec<u8>>, Option<Vec<u8>>);

fn write_package(dir: &Path, pkg: &Package) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    for (path, bytes) in &pkg.files {
        let p = dir.join(path);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(p, bytes)?;
    }
    Ok(())
}

/// stderr without what differs by run: the durations of `[PASS]`/`[FAIL]`
/// lines, and the work directory (`dir`).
fn comparable(stderr: &str, dir: &Path) -> String {
    let mut out = String::new();
    for line in stderr.replace(&*dir.to_string_lossy(), "<dir>").lines() {
        let timed =
            (line.starts_with("[PASS] ") || line.starts_with("[FAIL] ")) && line.contains(" in ");
        match line.rfind(" in ") {
            Some(at) if timed => out.push_str(&line[..at]),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The environment variable each run is tagged with, so that what it
/// started can be found and killed if it overruns.
const RUN_TAG: &str = "YAMLDIFF_RUN";

/// Exit code and stderr of `program args` run in `cwd`. A run past
/// [`RUN_TIMEOUT`] is an error, and everything it started goes with it:
/// `output_within` kills its process group, and the functions ours
/// started in groups of their own are found by their tag.
fn run(program: &Path, cwd: &Path, args: &[&str]) -> anyhow::Result<(i32, String)> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tag = format!(
        "{}.{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let out = crate::output_within(
        Command::new(program)
            .current_dir(cwd)
            .args(args)
            .env("NO_COLOR", "1")
            .env(RUN_TAG, &tag),
        None,
        RUN_TIMEOUT,
    );
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            kill_tagged(&tag);
            return Err(e);
        }
    };
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// SIGKILLs every process whose environment holds `RUN_TAG=tag`.
fn kill_tagged(tag: &str) {
    let needle = format!("{RUN_TAG}={tag}");
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Every file under `dir`, by path relative to it.
fn tree(dir: &Path) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> anyhow::Result<()> {
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let rel = path.strip_prefix(root)?.to_string_lossy().into_owned();
                out.insert(rel, fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// Our parse and emit of `bytes` against the oracle's dump (`json`) and
/// encoding (`encoded`, absent when it did not parse).
pub fn compare_yaml(bytes: &[u8], json: &str, encoded: Option<&[u8]>) -> Outcome {
    let want: serde_json::Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return Outcome::Differs(format!("the oracle's JSON does not read: {e}")),
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Outcome::Differs("not UTF-8 (the generator writes only UTF-8)".to_owned());
    };
    let got = krm_yaml::parse::parse(text);
    if let Some(err) = want.get("error").and_then(|e| e.as_str()) {
        return match got {
            Err(e) if e.to_string() == err => Outcome::Same,
            Err(e) => Outcome::Differs(format!("error {:?}, yaml.v3's {err:?}", e.to_string())),
            Ok(_) => Outcome::Differs(format!("parsed, yaml.v3 refused: {err:?}")),
        };
    }
    let docs = match got {
        Ok(d) => d,
        Err(e) => return Outcome::Differs(format!("error {:?}, yaml.v3 parsed it", e.to_string())),
    };
    let ours = match serde_json::to_value(&docs) {
        Ok(v) => v,
        Err(e) => return Outcome::Differs(format!("our tree does not serialize: {e}")),
    };
    if let Some(d) = json_diff("", &ours, &want) {
        return Outcome::Differs(format!("trees differ at {d}"));
    }
    let ours = krm_yaml::emit::encode(&docs, false);
    let Some(theirs) = encoded else {
        return Outcome::Differs("the oracle parsed but wrote no encoding".to_owned());
    };
    if ours.as_bytes() == theirs {
        return Outcome::Same;
    }
    if departures::block_scalar_leading_blank(&ours).as_bytes() == theirs {
        return Outcome::Departure(departures::ORACLE_LEADING_BLANK);
    }
    Outcome::Differs(format!(
        "emitted bytes differ\n--- yaml.v3:\n{}--- ours:\n{}",
        String::from_utf8_lossy(theirs),
        ours
    ))
}

/// The first place two JSON values differ, as a path and both values.
fn json_diff(path: &str, got: &serde_json::Value, want: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (got, want) {
        (Value::Array(g), Value::Array(w)) => {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                if let Some(d) = json_diff(&format!("{path}[{i}]"), a, b) {
                    return Some(d);
                }
            }
            (g.len() != w.len())
                .then(|| format!("{path}: {} entries, yaml.v3 {}", g.len(), w.len()))
        }
        (Value::Object(g), Value::Object(w)) => {
            let keys: std::collections::BTreeSet<&String> = g.keys().chain(w.keys()).collect();
            // Fields before content, so the difference named is the
            // outermost one.
            let (fields, content): (Vec<_>, Vec<_>) =
                keys.into_iter().partition(|k| *k != "content");
            for k in fields.into_iter().chain(content) {
                let (a, b) = (
                    g.get(k).unwrap_or(&Value::Null),
                    w.get(k).unwrap_or(&Value::Null),
                );
                if let Some(d) = json_diff(&format!("{path}.{k}"), a, b) {
                    let at = |o: &serde_json::Map<String, Value>| {
                        format!(
                            "{}:{}",
                            o.get("line_no").unwrap_or(&Value::Null),
                            o.get("column").unwrap_or(&Value::Null)
                        )
                    };
                    return Some(format!("{d} (node at {}, yaml.v3's at {})", at(g), at(w)));
                }
            }
            None
        }
        (Value::Null, Value::Array(w)) if w.is_empty() => None,
        (g, w) if g == w => None,
        (g, w) => Some(format!("{path}: ours {g}, yaml.v3's {w}")),
    }
}

/// The yaml.v3 oracle, built once per process into the target directory
/// (`go build` in GOPATH mode, offline, from Debian's golang-go and
/// golang-gopkg-yaml.v3-dev).
pub fn yaml_oracle() -> anyhow::Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_oracle().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// Where Debian's golang-gopkg-yaml.v3-dev puts yaml.v3's source.
const GOPATH: &str = "/usr/share/gocode";

fn build_oracle() -> anyhow::Result<PathBuf> {
    crate::require_command("go", &["version"])
        .context("the yaml.v3 oracle needs Go (Debian's golang-go and golang-gopkg-yaml.v3-dev)")?;
    if !Path::new(GOPATH)
        .join("src/gopkg.in/yaml.v3/yaml.go")
        .is_file()
    {
        bail!("yaml.v3's source is not at {GOPATH}/src/gopkg.in/yaml.v3 (Debian's golang-gopkg-yaml.v3-dev)");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("yaml-oracle");
    let out_dir = crate::bin_dir().join("yaml-oracle");
    fs::create_dir_all(&out_dir)?;
    let bin = out_dir.join("yaml-oracle");
    // A temporary name, then a rename: two test processes building at once
    // never run a half-written binary.
    let tmp = out_dir.join(format!("yaml-oracle.{}", std::process::id()));
    let out = crate::output_within(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&tmp)
            .arg(".")
            .current_dir(&src)
            .env("GOPATH", GOPATH)
            .env("GO111MODULE", "off")
            .env("GOFLAGS", "")
            .env("GOCACHE", out_dir.join("cache")),
        None,
        Duration::from_secs(300),
    )?;
    if !out.status.success() {
        bail!(
            "building the yaml.v3 oracle failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fs::rename(&tmp, &bin)?;
    Ok(bin)
}

/// The functions' scripts, into `dir`.
fn write_functions(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let scripts: [(&str, &str); 3] = [
        (
            "sort",
            "#!/usr/bin/env python3\n\
             # Comments and styles gone, keys sorted: how most Python functions write.\n\
             import sys, yaml\n\
             yaml.safe_dump(yaml.safe_load(sys.stdin), sys.stdout, sort_keys=True)\n",
        ),
        (
            "delete",
            r#"#!/bin/sh
# Drops the last item that is not a Kptfile; every other byte kept.
exec awk '
function flush(   i, last) {
  for (i = n; i >= 1; i--) if (index(item[i], "kind: Kptfile") == 0) { last = i; break }
  printf "%s", pre
  for (i = 1; i <= n; i++) if (i != last) printf "%s", item[i]
  n = 0; pre = ""; inside = 0
}
/^items:/ { print; inside = 1; next }
inside && /^[A-Za-z]/ { flush() }
inside { if (/^- /) n++; if (n == 0) pre = pre $0 "\n"; else item[n] = item[n] $0 "\n"; next }
{ print }
END { if (inside) flush() }'
"#,
        ),
        (
            "add",
            r#"#!/bin/sh
# Adds two items at the end of the list: one without a path, one with.
exec awk '
function add() {
  print "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: added-one # added\n  data:\n    k: v"
  print "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: added-two\n    annotations:\n      internal.config.kubernetes.io/path: added/two.yaml\n  data: {a: 1}"
  done = 1
}
/^items: \[\]/ { print "items:"; inside = 1; next }
/^items:/ { print; inside = 1; next }
inside && !done && /^[A-Za-z]/ { add() }
{ print }
END { if (!done) add() }'
"#,
        ),
    ];
    for (name, text) in scripts {
        let path = dir.join(name);
        fs::write(&path, text)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// What a run of the harness is asked to do.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The seeds of the yaml check (cheap: one oracle process per batch).
    pub yaml_seeds: std::ops::Range<u64>,
    /// The seeds of the eval and render checks (a few program runs each).
    pub kpt_seeds: std::ops::Range<u64>,
    /// Failures shrunk at most (the rest are reported by seed only).
    pub shrink_at_most: usize,
    /// Candidates tried per shrink at most.
    pub shrink_budget: usize,
}

/// One failing case.
#[derive(Clone, Debug)]
pub struct Failure {
    pub seed: u64,
    pub check: Check,
    pub detail: String,
    /// The smallest package found that still fails (None: not shrunk).
    pub shrunk: Option<Package>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} fails {}:", self.seed, self.check)?;
        match &self.shrunk {
            Some(p) => writeln!(f, "the smallest package that still fails:\n{}", p.show())?,
            None => writeln!(
                f,
                "(not shrunk; the package is gen::package({}))",
                self.seed
            )?,
        }
        write!(f, "{}", self.detail)
    }
}

/// What a run found: per check kind, cases run, identical, departures by
/// name, and the failures.
#[derive(Debug, Default)]
pub struct Report {
    pub cases: BTreeMap<String, usize>,
    pub same: BTreeMap<String, usize>,
    pub departures: BTreeMap<&'static str, usize>,
    pub failures: Vec<Failure>,
}

impl Report {
    fn count(&mut self, check: Check, outcome: &Outcome) {
        let kind = match check {
            Check::Yaml => "yaml.v3",
            Check::Eval(_) => "eval",
            Check::Render(..) => "render",
        }
        .to_owned();
        *self.cases.entry(kind.clone()).or_default() += 1;
        match outcome {
            Outcome::Same => *self.same.entry(kind).or_default() += 1,
            Outcome::Departure(d) => *self.departures.entry(d).or_default() += 1,
            Outcome::Differs(_) => {}
        }
    }

    /// A line per check kind and per departure.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (kind, n) in &self.cases {
            let same = self.same.get(kind).copied().unwrap_or(0);
            s.push_str(&format!("{kind}: {n} cases, {same} identical\n"));
        }
        for (d, n) in &self.departures {
            s.push_str(&format!("documented departure ({d}): {n}\n"));
        }
        s.push_str(&format!("other differences: {}\n", self.failures.len()));
        s
    }
}

/// The eval and render checks of a seed: every function once through
/// eval, and one two-step pipeline, chosen by the seed.
pub fn kpt_checks(seed: u64) -> Vec<Check> {
    let mut checks: Vec<Check> = Func::ALL.iter().map(|f| Check::Eval(*f)).collect();
    let a = Func::ALL[(seed % 4) as usize];
    let b = Func::ALL[((seed / 4) % 4) as usize];
    checks.push(Check::Render(a, b));
    checks
}

/// Runs the plan, calling `progress` after each batch of cases.
pub fn run_plan(
    tools: &Tools,
    plan: &Plan,
    progress: &mut dyn FnMut(&Report),
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let mut found: Vec<(u64, Check, String)> = Vec::new();
    let seeds: Vec<u64> = plan.yaml_seeds.clone().collect();
    for batch in seeds.chunks(500) {
        let pkgs: Vec<Package> = batch.iter().map(|s| gen::package(*s)).collect();
        for (seed, outcome) in batch.iter().zip(tools.yaml_batch(&pkgs)?) {
            report.count(Check::Yaml, &outcome);
            if let Outcome::Differs(d) = outcome {
                found.push((*seed, Check::Yaml, d));
            }
        }
        progress(&report);
    }
    for seed in plan.kpt_seeds.clone() {
        let pkg = gen::package(seed);
        for check in kpt_checks(seed) {
            let outcome = tools.check(check, &pkg)?;
            report.count(check, &outcome);
            if let Outcome::Differs(d) = outcome {
                found.push((seed, check, d));
            }
        }
        if seed % 20 == 0 {
            progress(&report);
        }
    }
    for (i, (seed, check, detail)) in found.into_iter().enumerate() {
        let mut failure = Failure {
            seed,
            check,
            detail,
            shrunk: None,
        };
        if i < plan.shrink_at_most {
            // The same failure, not another one the cut made (a cut can
            // leave a key twice, which ours refuses as kpt beta.67 does).
            let want = signature(&failure.detail);
            let mut fails = |p: &Package| matches!(tools.check(check, p), Ok(Outcome::Differs(d)) if signature(&d) == want);
            let small = shrink::shrink(&gen::package(seed), plan.shrink_budget, &mut fails);
            if let Ok(Outcome::Differs(d)) = tools.check(check, &small) {
                failure.detail = d;
            }
            failure.shrunk = Some(small);
        }
        report.failures.push(failure);
    }
    Ok(report)
}

/// What kind of difference a failure's text describes, without its
/// particulars: the first words of its first line (after a file name), and
/// for different exit codes the shape of our error line.
fn signature(detail: &str) -> String {
    let first = detail.lines().next().unwrap_or_default();
    let first = first.split_once(".yaml: ").map_or(first, |(_, rest)| rest);
    if first.starts_with("exit codes:") {
        let ours = detail.split("--- ours:\n").nth(1).unwrap_or_default();
        let error = ours
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or_default();
        let shape: String = error
            .split_whitespace()
            .filter(|w| !w.contains('/') && !w.chars().any(|c| c.is_ascii_digit()))
            .collect::<Vec<_>>()
            .join(" ");
        return format!("{first} | {shape}");
    }
    if first.ends_with(" differs") {
        // Which file: a cut must not trade this difference for another.
        return first.to_owned();
    }
    if first.starts_with("both exit") {
        return first.to_owned();
    }
    first
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}
