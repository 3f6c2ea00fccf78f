//! The corpus: every package under `tests/fixtures/corpus/pkgs` (plus a
//! CRLF one made here, since git may rewrite line ends in fixtures) through
//! every function under `tests/fixtures/corpus/fns` (shell, and Python with
//! PyYAML: keep, drop, reorder, add, delete, move, fail with results, warn,
//! emit JSON, crash, print garbage), by `kpt fn eval --exec` and by ours on
//! copies of the same package: the same exit code and the same files, byte
//! for byte. Also `-o stdout`, `-o unwrap` and `-o DIR` with a few
//! functions, and malformed YAML (kpt's error, nothing written).
//!
//! The one expected difference: a function that prints nothing and exits 0.
//! kpt reads that as a list of no resources and deletes every file of the
//! package; ours refuses with an error and leaves the package as it was.
//!
//! Needs kpt (and Python with PyYAML for the Python functions); without
//! them the tests print `SKIPPED` and pass, except under `CI`.

#![allow(clippy::unwrap_used)]

mod common;

use common::{copy_dir, run_in, tree, Run};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use e2e_tests::{output_within, prerequisite, require_kpt};

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_function-runner")
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus")
}

/// The first difference between two trees, for a message.
fn tree_diff(kpt: &BTreeMap<String, Vec<u8>>, ours: &BTreeMap<String, Vec<u8>>) -> Option<String> {
    if kpt.keys().ne(ours.keys()) {
        return Some(format!(
            "different files: kpt {:?}, ours {:?}",
            kpt.keys().collect::<Vec<_>>(),
            ours.keys().collect::<Vec<_>>()
        ));
    }
    for (path, k) in kpt {
        if !e2e_tests::beta67::same_file(path, k, &ours[path]) {
            return Some(format!(
                "{path} differs:\n--- kpt\n{}--- ours\n{}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(&ours[path])
            ));
        }
    }
    None
}

fn run(program: &Path, args: &[&str]) -> Run {
    run_in(program, Path::new("."), args, None)
}

/// The packages, by name (the CRLF one written into `scratch`).
fn packages(scratch: &Path) -> Vec<(String, PathBuf)> {
    let mut pkgs: Vec<(String, PathBuf)> = fs::read_dir(corpus().join("pkgs"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.path())
        })
        .collect();
    let crlf = scratch.join("crlf-src");
    fs::create_dir_all(&crlf).unwrap();
    fs::write(
        crlf.join("crlf.yaml"),
        "# a CRLF file\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf # named\r\ndata:\r\n  x: \"1\"\r\n  script: |\r\n    echo one\r\n    echo two\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf2\r\n",
    )
    .unwrap();
    pkgs.push(("crlf".into(), crlf));
    pkgs.sort();
    pkgs
}

fn functions() -> Vec<(String, PathBuf)> {
    let mut fns: Vec<(String, PathBuf)> = fs::read_dir(corpus().join("fns"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.path())
        })
        .collect();
    fns.sort();
    fns
}

fn python_with_pyyaml() -> anyhow::Result<()> {
    let out = output_within(
        Command::new("python3").args(["-c", "import yaml"]),
        None,
        Duration::from_secs(30),
    )?;
    anyhow::ensure!(out.status.success(), "python3 with PyYAML not found");
    Ok(())
}

/// The exit codes' difference, for a message.
fn exit_diff(case: &str, k: &Run, o: &Run) -> Option<String> {
    (k.code != o.code).then(|| {
        format!(
            "{case}: exit codes differ: kpt {} ours {}\nkpt stderr: {}\nour stderr: {}",
            k.code, o.code, k.stderr, o.stderr
        )
    })
}

fn assert_none_differ(failures: &[String], total: usize) {
    assert!(
        failures.is_empty(),
        "{} of {total} cases differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// kpt, when it and Python with PyYAML are here (SKIPPED otherwise; a
/// failure under `CI`).
fn kpt_and_pyyaml() -> Option<PathBuf> {
    let kpt = prerequisite(require_kpt())?;
    prerequisite(python_with_pyyaml())?;
    Some(kpt)
}

/// Runs `jobs` on two threads; returns the failures.
fn in_parallel<T: Send>(jobs: Vec<T>, f: impl Fn(T) -> Option<String> + Sync) -> Vec<String> {
    let jobs = Mutex::new(jobs);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some(job) = jobs.lock().unwrap().pop() else {
                    break;
                };
                if let Some(fail) = f(job) {
                    failures.lock().unwrap().push(fail);
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

#[test]
fn every_package_through_every_function_is_byte_identical_with_kpt() {
    let Some(kpt) = kpt_and_pyyaml() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let pkgs = packages(scratch.path());
    let fns = functions();
    let mut jobs = Vec::new();
    for (p, pdir) in &pkgs {
        for (f, fpath) in &fns {
            jobs.push((p.clone(), pdir.clone(), f.clone(), fpath.clone()));
        }
    }
    let total = jobs.len();
    let identical = std::sync::atomic::AtomicUsize::new(0);
    let failures = in_parallel(jobs, |(p, pdir, f, fpath)| {
        let case = format!("{p} through {f}");
        let base = scratch.path().join(format!("{p}--{f}"));
        let (kdir, odir) = (base.join("kpt"), base.join("ours"));
        copy_dir(&pdir, &kdir);
        copy_dir(&pdir, &odir);
        let before = tree(&odir);
        let fpath = fpath.to_str().unwrap();
        let k = run(
            &kpt,
            &["fn", "eval", kdir.to_str().unwrap(), "--exec", fpath],
        );
        let o = run(
            Path::new(ours()),
            &["eval", odir.to_str().unwrap(), "--exec", fpath],
        );
        let after = tree(&odir);
        if f == "nothing.sh" && k.code == 0 {
            // kpt deletes the package's files; ours refuses, keeps them.
            // (kpt deleted every file that held resources.)
            let kpt_deleted = tree(&kdir).len() < before.len();
            if o.code != 1
                || !o.stderr.contains("printed nothing")
                || after != before
                || !kpt_deleted
            {
                return Some(format!(
                    "{case}: expected kpt to pass and delete files (exit {}, deleted {kpt_deleted}) and ours to refuse with the package kept (exit {}, stderr {:?}, kept {})",
                    k.code,
                    o.code,
                    o.stderr,
                    after == before
                ));
            }
            identical.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        if let Some(d) = exit_diff(&case, &k, &o) {
            return Some(d);
        }
        if o.code != 0 && after != before {
            return Some(format!(
                "{case}: failed (exit {}) but changed the package",
                o.code
            ));
        }
        if let Some(d) = tree_diff(&tree(&kdir), &after) {
            return Some(format!("{case}: {d}"));
        }
        identical.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        None
    });
    let identical = identical.into_inner();
    eprintln!("corpus: {identical} of {total} cases byte-identical with kpt (in place)");
    assert_none_differ(&failures, total);
}

#[test]
fn output_modes_are_byte_identical_with_kpt() {
    let Some(kpt) = kpt_and_pyyaml() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let pkgs = packages(scratch.path());
    let mut jobs = Vec::new();
    for (p, pdir) in &pkgs {
        for f in ["keep.sh", "drop.py", "add.py"] {
            for mode in ["stdout", "unwrap", "dir"] {
                jobs.push((p.clone(), pdir.clone(), f, mode));
            }
        }
    }
    let total = jobs.len();
    let failures = in_parallel(jobs, |(p, pdir, f, mode)| {
        let case = format!("{p} through {f}, -o {mode}");
        let base = scratch.path().join(format!("{p}--{f}--{mode}"));
        let (kdir, odir) = (base.join("kpt"), base.join("ours"));
        copy_dir(&pdir, &kdir);
        copy_dir(&pdir, &odir);
        let fpath = corpus().join("fns").join(f);
        let fpath = fpath.to_str().unwrap();
        let out = |dir: &Path| match mode {
            "dir" => dir.with_extension("out").to_string_lossy().into_owned(),
            m => m.to_owned(),
        };
        let (ko, oo) = (out(&kdir), out(&odir));
        let k = run(
            &kpt,
            &[
                "fn",
                "eval",
                kdir.to_str().unwrap(),
                "--exec",
                fpath,
                "-o",
                &ko,
            ],
        );
        let o = run(
            Path::new(ours()),
            &["eval", odir.to_str().unwrap(), "--exec", fpath, "-o", &oo],
        );
        if let Some(d) = exit_diff(&case, &k, &o) {
            return Some(d);
        }
        if k.stdout != o.stdout {
            return Some(format!(
                "{case}: stdout differs:\n--- kpt\n{}--- ours\n{}",
                String::from_utf8_lossy(&k.stdout),
                String::from_utf8_lossy(&o.stdout)
            ));
        }
        if mode == "dir" {
            if let Some(d) = tree_diff(&tree(Path::new(&ko)), &tree(Path::new(&oo))) {
                return Some(format!("{case}: {d}"));
            }
        }
        None
    });
    eprintln!(
        "corpus: {} of {total} output-mode cases byte-identical with kpt",
        total - failures.len()
    );
    assert_none_differ(&failures, total);
}

/// Malformed YAML, as the issue found it: kpt's error (naming the file and
/// the line), exit 1, and nothing written, by both.
#[test]
fn malformed_yaml_is_refused_as_kpt_refuses_it_and_nothing_is_written() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let cases = [
        ("unclosed-flow-sequence", "  labels: [unclosed\n"),
        ("unclosed-quote", "  labels: \"unclosed\n"),
        ("unclosed-flow-map", "  labels: {a: b\n"),
        ("tab-indentation", "  labels:\n\ta: b\n"),
        ("undefined-alias", "  labels: *nowhere\n"),
        ("extra-closing-bracket", "  labels: [a]]\n"),
        ("text-after-quoted", "  labels: \"a\" b\n"),
    ];
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (name, bad) in cases {
        let base = scratch.path().join(name);
        let (kdir, odir) = (base.join("kpt"), base.join("ours"));
        for dir in [&kdir, &odir] {
            fs::create_dir_all(dir).unwrap();
            fs::write(
                dir.join("bad.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n{bad}data:\n  a: b\n"
                ),
            )
            .unwrap();
            fs::write(
                dir.join("good.yaml"),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n",
            )
            .unwrap();
        }
        let before = tree(&odir);
        let k = run(
            &kpt,
            &["fn", "eval", kdir.to_str().unwrap(), "--exec", "cat"],
        );
        let o = run(
            Path::new(ours()),
            &["eval", odir.to_str().unwrap(), "--exec", "cat"],
        );
        let kerr = k.stderr.replace(kdir.to_str().unwrap(), "DIR");
        let oerr = o.stderr.replace(odir.to_str().unwrap(), "DIR");
        let kline = kerr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or("");
        let oline = oerr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or("");
        if k.code != 1 || o.code != 1 || kline != oline || kline.is_empty() {
            failures.push(format!(
                "{name}: kpt exit {} {kline:?}, ours exit {} {oline:?}",
                k.code, o.code
            ));
        }
        if !kline.contains("DIR/bad.yaml: MalformedYAMLError: yaml: ") {
            failures.push(format!(
                "{name}: kpt's error is not the expected kind: {kline:?}"
            ));
        }
        if tree(&odir) != before {
            failures.push(format!("{name}: ours changed the package"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// kpt's lines with the durations and the package's directory name made
/// comparable.
fn normalize_lines(stderr: &str, dir_name: &str) -> String {
    stderr
        .replace(dir_name, "PKG")
        .lines()
        .map(|l| match l.rfind(" in ") {
            Some(i) if l.starts_with("[PASS]") || l.starts_with("[FAIL]") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A package with a subpackage (its own pipeline) and a sub-subdirectory,
/// Kptfile pipelines of the corpus functions (absolute paths, so written
/// here), mutators then validators.
fn render_package(dir: &Path, validator: &str) {
    let f = |name: &str| corpus().join("fns").join(name).display().to_string();
    let pkgs = corpus().join("pkgs");
    fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    fs::write(
        dir.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: root # the root\npipeline:\n  mutators:\n  - exec: {}\n  - exec: {}\n    configPath: fc.yaml\n  validators:\n  - exec: {}\n",
            f("add.py"),
            f("keep.sh"),
            f(validator)
        ),
    )
    .unwrap();
    fs::write(
        dir.join("fc.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  x: y\n",
    )
    .unwrap();
    fs::write(
        dir.join("sub/Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\npipeline:\n  mutators:\n  - exec: {}\n    configMap:\n      a: b\n",
            f("drop.py")
        ),
    )
    .unwrap();
    fs::copy(pkgs.join("comments/cm.yaml"), dir.join("cm.yaml")).unwrap();
    fs::copy(pkgs.join("blocks/scripts.yaml"), dir.join("scripts.yaml")).unwrap();
    fs::copy(
        pkgs.join("deployment/deploy.yaml"),
        dir.join("sub/deeper/deploy.yaml"),
    )
    .unwrap();
    fs::copy(pkgs.join("seqindent/wide.yaml"), dir.join("sub/wide.yaml")).unwrap();
}

#[test]
fn render_runs_pipelines_as_kpt_does() {
    let Some(kpt) = kpt_and_pyyaml() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    // A passing pipeline, a failing validator, and no --allow-exec.
    for (case, validator, allow) in [
        ("pass", "warn.py", true),
        ("fail", "fail.sh", true),
        ("no-exec", "warn.py", false),
    ] {
        let (kdir, odir) = (
            scratch.path().join(format!("{case}-k")),
            scratch.path().join(format!("{case}-o")),
        );
        render_package(&kdir, validator);
        render_package(&odir, validator);
        let before = tree(&odir);
        let mut kargs = vec!["fn", "render", kdir.to_str().unwrap()];
        let mut oargs = vec!["render", odir.to_str().unwrap()];
        if allow {
            kargs.push("--allow-exec");
            oargs.push("--allow-exec");
        }
        let k = common::kpt::kpt_run(&kpt, Path::new("."), &kargs, None);
        let o = run(Path::new(ours()), &oargs);
        if let Some(d) = exit_diff(case, &k, &o) {
            failures.push(d);
            continue;
        }
        let name = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
        let (kl, ol) = (
            normalize_lines(&k.stderr, &name(&kdir)),
            normalize_lines(&o.stderr, &name(&odir)),
        );
        // kpt's own error lines ("Error: ...") differ in wording; the
        // function lines must not.
        let fn_lines = |s: &str| {
            s.lines()
                .filter(|l| !l.starts_with("Error:") && !l.starts_with("error:"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        if fn_lines(&kl) != fn_lines(&ol) {
            failures.push(format!(
                "{case}: lines differ:\n--- kpt\n{kl}\n--- ours\n{ol}"
            ));
        }
        if let Some(d) = tree_diff(&tree(&kdir), &tree(&odir)) {
            failures.push(format!("{case}: {d}"));
        }
        // A failed render changes nothing but (beta.67) the root
        // Kptfile's render status.
        if o.code != 0 && tree_diff(&before, &tree(&odir)).is_some() {
            failures.push(format!("{case}: failed but changed the package"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Functions that put resources where they cannot go: the same exit code
/// as kpt, and a package left as it was when it fails.
#[test]
fn bad_paths_are_refused_as_kpt_refuses_them() {
    let Some(kpt) = kpt_and_pyyaml() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    // Each: Python that edits the list `items` (`rl` is the whole list).
    let cases = [
        (
            "path-is-a-directory",
            "items[1]['metadata']['annotations']['internal.config.kubernetes.io/path'] = 'zdir'\nitems[1]['metadata']['annotations']['config.kubernetes.io/path'] = 'zdir'",
        ),
        (
            "absolute-path",
            "items[1]['metadata']['annotations']['internal.config.kubernetes.io/path'] = '/abs/x.yaml'\nitems[1]['metadata']['annotations']['config.kubernetes.io/path'] = '/abs/x.yaml'",
        ),
        (
            "outside-the-package",
            "items[1]['metadata']['annotations']['internal.config.kubernetes.io/path'] = '../x.yaml'\nitems[1]['metadata']['annotations']['config.kubernetes.io/path'] = '../x.yaml'",
        ),
        (
            "two-new-at-one-default-path",
            "items.append({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'n'}})\nitems.append({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'n'}})",
        ),
        ("not-a-resource", "items.append(42)"),
    ];
    let mut failures = Vec::new();
    for (name, edit) in cases {
        let f = scratch.path().join(format!("{name}.py"));
        fs::write(
            &f,
            format!(
                "#!/usr/bin/env python3\nimport sys, yaml\nrl = yaml.safe_load(sys.stdin)\nitems = rl['items']\n{edit}\nyaml.safe_dump(rl, sys.stdout)\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let base = scratch.path().join(name);
        let (kdir, odir) = (base.join("kpt"), base.join("ours"));
        for dir in [&kdir, &odir] {
            fs::create_dir_all(dir.join("zdir")).unwrap();
            for n in ["a", "b"] {
                fs::write(
                    dir.join(format!("{n}.yaml")),
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n} # {n}\n"),
                )
                .unwrap();
            }
        }
        let before = tree(&odir);
        let f = f.to_str().unwrap();
        let k = common::kpt::kpt_run(
            &kpt,
            Path::new("."),
            &["fn", "eval", kdir.to_str().unwrap(), "--exec", f],
            None,
        );
        let o = run(
            Path::new(ours()),
            &["eval", odir.to_str().unwrap(), "--exec", f],
        );
        if let Some(d) = exit_diff(name, &k, &o) {
            failures.push(d);
            continue;
        }
        if o.code == 0 {
            failures.push(format!("{name}: both passed; the case tests nothing"));
        }
        if tree(&odir) != before {
            failures.push(format!("{name}: failed but changed the package"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
