//! `function-runner eval` against `kpt fn eval --exec`: same package, same
//! function, same files, exit codes, stderr lines, stdout and results.
//!
//! Needs kpt (`/usr/bin/kpt` or on PATH); without it each test prints
//! `SKIPPED: kpt not found` and passes, except in CI, where it fails (see
//! `e2e_tests::prerequisite`). Functions are small shell/awk scripts written
//! by the tests.

#![allow(clippy::unwrap_used)]

mod common;
// #28 items 2 and 3 (its own file: this one is long enough).
#[path = "eval_kpt/aliases.rs"]
mod aliases;

use common::kpt::{
    assert_same_run, assert_same_tree, both, both_render, functions, kpt_run, kptfile, ours, pair,
    run, selection_package, untimed,
};
use common::{copy_dir, fixture, script};

use std::fs;
use std::path::{Path, PathBuf};

use e2e_tests::{prerequisite, require_kpt};

/// A package for the messy fixture with a CRLF file (made here: git may
/// rewrite line ends in fixtures).
fn messy_package(dst: &Path) {
    copy_dir(&fixture("messy"), dst);
    fs::write(
        dst.join("crlf.yaml"),
        "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\ndata:\r\n  x: \"1\"\r\n",
    )
    .unwrap();
}

/// Builds a package at the given path.
type MakePackage = fn(&Path);

#[test]
fn same_files_as_kpt_for_cat_annotating_and_adding_functions() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    fn basic(d: &Path) {
        copy_dir(&fixture("basic"), d);
    }
    let packages: [(&str, MakePackage); 2] = [("basic", basic), ("messy", messy_package)];
    for (name, make) in packages {
        for function in ["cat", f.annotate.as_str(), f.add_delete.as_str()] {
            let p = pair(&make);
            let (k, o) = both(&kpt, &p, &["pkg", "--exec", function], None);
            let what = format!("{name} with {function}");
            assert_eq!(k.code, 0, "{what}: kpt failed:\n{}", k.stderr);
            assert_same_run(&k, &o, &what);
            assert_same_tree(&p.k, &p.o, &what);
        }
    }
}

#[test]
fn failing_function_same_lines_exit_code_and_results() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.fail, "--results-dir", "results"],
        None,
    );
    assert_eq!(k.code, 1);
    assert_same_run(&k, &o, "failing function");
    // beta.67's one line (`[Results]: a, b`), every result.
    assert!(o.stderr.contains(
        "[Results]: [error] apps/v1/Deployment/ns/app spec.replicas: bad replicas, [warning]: just a warning,"
    ));
    assert!(o.stderr.contains("  Exit code: 1\n"));
    assert_same_tree(&p.k, &p.o, "failing function");
    assert_same_tree(
        &p.k.join("pkg"),
        &fixture("basic"),
        "the package is not touched",
    );

    // Untruncated.
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.fail, "--truncate-output=false"],
        None,
    );
    assert_same_run(&k, &o, "failing function, --truncate-output=false");
}

#[test]
fn passing_function_with_results_and_stderr() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.results, "--results-dir", "results"],
        None,
    );
    assert_eq!(k.code, 0);
    assert_same_run(&k, &o, "results");
    assert_same_tree(&p.k, &p.o, "results");
}

#[test]
fn missing_function_and_bad_arguments() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    for args in [
        &["pkg", "--exec", "./no-such-function"][..],
        &["pkg", "--exec", "no-such-function-on-path"],
        &["pkg", "--exec", "cat", "--fn-config", "missing.yaml"],
        &["pkg", "--exec", "cat", "--", "a=b", "novalue"],
    ] {
        let (k, o) = both(&kpt, &p, args, None);
        assert_same_run(&k, &o, &format!("{args:?}"));
    }
    assert_same_tree(&p.k, &p.o, "errors");
}

#[test]
fn stdin_and_stdout_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    // A package to stdout, wrapped and unwrapped.
    for out in ["stdout", "unwrap"] {
        for function in ["cat", f.annotate.as_str(), f.add_delete.as_str()] {
            let (k, o) = both(&kpt, &p, &["pkg", "--exec", function, "-o", out], None);
            assert_eq!(k.code, 0, "{}", k.stderr);
            assert_same_run(&k, &o, &format!("-o {out} with {function}"));
        }
    }
    assert_same_tree(&p.k, &p.o, "-o stdout leaves the package alone");
    assert_same_tree(
        &p.k.join("pkg"),
        &fixture("basic"),
        "-o stdout leaves the package alone",
    );

    // A ResourceList on stdin (with kpt's annotations, as `-o stdout`
    // writes it) and plain documents, to stdout and unwrapped.
    let (k, _) = both(&kpt, &p, &["pkg", "--exec", "cat", "-o", "stdout"], None);
    let list = k.stdout;
    let docs = fs::read(fixture("basic/multi.yaml")).unwrap();
    let bare = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a # c\n    namespace: n\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n    annotations:\n      config.kubernetes.io/path: \"x/y.yaml\"\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: ignored\n";
    for (name, input) in [
        ("list", &list[..]),
        ("documents", &docs[..]),
        ("bare list", &bare[..]),
    ] {
        for extra in [&[][..], &["-o", "unwrap"][..], &["-o", "stdout"][..]] {
            for function in ["cat", f.annotate.as_str(), f.results.as_str()] {
                let mut args = vec!["-", "--exec", function];
                args.extend_from_slice(extra);
                let (k, o) = both(&kpt, &p, &args, Some(input));
                assert_eq!(k.code, 0, "{}", k.stderr);
                assert_same_run(&k, &o, &format!("stdin {name} {extra:?} with {function}"));
            }
        }
    }
}

#[test]
fn function_receives_the_same_resource_list() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let cfg = fixture("fn-config.yaml");
    let cfg = cfg.to_str().unwrap();
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    let cases: [&[&str]; 4] = [
        &[],
        &[
            "--",
            "replicas=3",
            "enabled=yes",
            "name=hello world",
            "empty=",
            "colon=a: b",
        ],
        &["--", "MyKind", "k=v"],
        &["--fn-config", cfg],
    ];
    for extra in cases {
        let kfile = p.k.join("sent.yaml");
        let ofile = p.o.join("sent.yaml");
        let kcmd = format!("{} {}", f.tee, kfile.display());
        let ocmd = format!("{} {}", f.tee, ofile.display());
        let mut kargs = vec!["fn", "eval", "pkg", "--exec", kcmd.as_str(), "-o", "stdout"];
        kargs.extend_from_slice(extra);
        let mut oargs = vec!["eval", "pkg", "--exec", ocmd.as_str(), "-o", "stdout"];
        oargs.extend_from_slice(extra);
        let k = kpt_run(&kpt, &p.k, &kargs, None);
        let o = run(Path::new(ours()), &p.o, &oargs, None);
        assert_eq!((k.code, o.code), (0, 0), "{}\n{}", k.stderr, o.stderr);
        assert_eq!(
            fs::read_to_string(&kfile).unwrap(),
            fs::read_to_string(&ofile).unwrap(),
            "ResourceList sent with {extra:?} (left kpt, right ours)"
        );
        assert_eq!(k.stdout, o.stdout);
    }
}

#[test]
fn output_directory_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.add_delete, "-o", "out"],
        None,
    );
    assert_same_run(&k, &o, "-o out");
    assert_same_tree(&p.k, &p.o, "-o out");
    // It must not exist: both fail (kpt after running the function).
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", "cat", "-o", "out"], None);
    assert_eq!((k.code, o.code), (1, 1));
    let last = |s: &str| s.lines().last().unwrap_or("").to_owned();
    assert_eq!(last(&k.stderr), last(&o.stderr));
}

// ---------------------------------------------------------------------------
// Selection (`--match-*`/`--exclude-*`, a pipeline step's `selectors` and
// `exclude`), `render --results-dir` and `--image-pull-policy`.

#[test]
fn eval_match_and_exclude_flags_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let cases: [&[&str]; 10] = [
        &["--match-kind", "ConfigMap"],
        &["--match-kind", "ConfigMap", "--exclude-labels", "skip=yes"],
        &["--match-namespace", "ns"],
        &["--match-name", "cm2", "--match-api-version", "v1"],
        &["--match-api-version", "apps/v1"],
        &["--match-api-version", "apps"],
        &["--match-annotations", "note=keep"],
        &["--match-labels", "app=web", "--match-labels", "skip=yes"],
        &["--exclude-kind", "Service", "--exclude-namespace", "ns"],
        &["--match-kind", "NoSuchKind"],
    ];
    for extra in cases {
        for function in [f.annotate.as_str(), f.add_delete.as_str()] {
            for out in [&[][..], &["-o", "stdout"][..]] {
                let p = pair(&selection_package);
                let mut args = vec!["pkg", "--exec", function];
                args.extend_from_slice(extra);
                args.extend_from_slice(out);
                let (k, o) = both(&kpt, &p, &args, None);
                let what = format!("{extra:?} {out:?} with {function}");
                assert_eq!(
                    k.code, o.code,
                    "{what}: exit codes\n{}\n{}",
                    k.stderr, o.stderr
                );
                // On nothing selected, add-delete's output (its additions
                // after `items: []`) is not YAML: both fail, in their own
                // words.
                if k.code == 0 {
                    assert_same_run(&k, &o, &what);
                }
                assert_same_tree(&p.k, &p.o, &what);
            }
        }
    }
    // The ResourceList the function gets, and the results file.
    let p = pair(&selection_package);
    // The copy goes to the work directory (the function's cwd).
    let kcmd = format!("{} sent.yaml", f.tee);
    let ocmd = kcmd.clone();
    let sel = [
        "--match-kind",
        "ConfigMap",
        "--exclude-name",
        "cm2",
        "--results-dir",
        "results",
    ];
    let mut kargs = vec!["fn", "eval", "pkg", "--exec", &kcmd];
    kargs.extend_from_slice(&sel);
    let mut oargs = vec!["eval", "pkg", "--exec", &ocmd];
    oargs.extend_from_slice(&sel);
    let k = kpt_run(&kpt, &p.k, &kargs, None);
    let o = run(Path::new(ours()), &p.o, &oargs, None);
    assert_eq!((k.code, o.code), (0, 0), "{}\n{}", k.stderr, o.stderr);
    assert_eq!(untimed(&k.stderr), untimed(&o.stderr));
    assert_same_tree(&p.k, &p.o, "sent list and results");

    // A ResourceList on stdin, with and without kpt's annotations.
    let p = pair(&selection_package);
    let (k, _) = both(&kpt, &p, &["pkg", "--exec", "cat", "-o", "stdout"], None);
    let bare = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    namespace: n\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: b\n";
    for input in [&k.stdout[..], &bare[..]] {
        for function in [f.annotate.as_str(), f.add_delete.as_str(), "cat"] {
            for extra in [&[][..], &["-o", "unwrap"][..]] {
                let mut args = vec!["-", "--exec", function, "--match-kind", "ConfigMap"];
                args.extend_from_slice(extra);
                let (k, o) = both(&kpt, &p, &args, Some(input));
                assert_eq!(k.code, 0, "{}", k.stderr);
                assert_same_run(&k, &o, &format!("stdin {extra:?} with {function}"));
            }
        }
    }
}

#[test]
fn image_pull_policy_checked_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| {
        selection_package(d);
        fs::write(
            d.join("Kptfile"),
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
        )
        .unwrap();
    });
    for policy in ["foo", "", "never", "Always", "IFNOTPRESENT"] {
        let flag = format!("--image-pull-policy={policy}");
        let (k, o) = both(&kpt, &p, &["pkg", "--exec", "cat", &flag], None);
        assert_same_run(&k, &o, &format!("eval {flag}"));
        let (k, o) = both_render(&kpt, &p, &["pkg", &flag]);
        assert_eq!(k.code, o.code, "render {flag}: {}\n{}", k.stderr, o.stderr);
        assert_eq!(k.stderr, o.stderr, "render {flag}");
    }
    assert_same_tree(&p.k, &p.o, "--image-pull-policy");
}

/// A file with the work directory's path (in the package-path
/// annotation) made the same for both.
fn read_normalized(path: &Path, dir: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_default()
        .replace(&dir.display().to_string(), "DIR")
}

#[test]
fn render_selectors_and_exclude_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    // A tee's copy goes to the work directory (the functions' cwd).
    let tee = |n: &str| format!("{} {n}", f.tee);
    let pipelines = [
        // Selectors, exclusions, new and deleted resources, a function
        // config (it carries the id annotation too), a validator.
        format!(
            r#"  mutators:
  - exec: {annotate}
    selectors:
    - kind: ConfigMap
    exclude:
    - labels:
        skip: "yes"
  - exec: {add_delete}
    selectors:
    - apiVersion: v1
      kind: ConfigMap
    - name: s
  - exec: {tee1}
    configPath: fc.yaml
    selectors:
    - namespace: ns
    - annotations:
        note: keep
      kind: Service
  - exec: {results}
    exclude:
    - kind: Kptfile
    - {{}}
  validators:
  - exec: {tee2}
    selectors:
    - annotations:
        note: keep
    exclude:
    - kind: Service
"#,
            annotate = f.annotate,
            add_delete = f.add_delete,
            results = f.results,
            tee1 = tee("sent1.yaml"),
            tee2 = tee("sent2.yaml"),
        ),
        // Selectors that pick nothing; labels as a subset.
        format!(
            "  mutators:\n  - exec: {}\n    selectors:\n    - kind: Nothing\n  - exec: {}\n    selectors:\n    - labels:\n        app: web\n",
            tee("sent1.yaml"),
            f.add_delete
        ),
        // A resource two selectors match is sent twice: kpt fails.
        "  mutators:\n  - exec: cat\n    selectors:\n    - kind: ConfigMap\n    - name: cm1\n"
            .to_string(),
        // A failing function after a selecting one, for the results file.
        format!(
            "  mutators:\n  - exec: {}\n    selectors:\n    - kind: Deployment\n  - exec: {}\n",
            f.results, f.fail
        ),
    ];
    for (n, pipeline) in pipelines.iter().enumerate() {
        for results in [false, true] {
            let make = |d: &Path| {
                selection_package(d);
                kptfile(d, pipeline);
                fs::write(
                    d.join("fc.yaml"),
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\ndata:\n  x: y\n",
                )
                .unwrap();
                // No subpackage: beta.67 sends a package's own resources
                // before its subpackages' (beta.56 the other way round),
                // so a pipeline's input differs from the installed kpt's
                // there; `render_beta67.rs` has that order, with a
                // selecting subpackage.
            };
            let p = pair(&make);
            let mut args = vec!["pkg", "--allow-exec"];
            if results {
                args.extend_from_slice(&["--results-dir", "results"]);
            }
            // Without --allow-exec: an error, after the results are saved.
            if n == 0 && results {
                let (k, o) = both_render(&kpt, &p, &["pkg", "--results-dir", "results"]);
                assert_eq!((k.code, o.code), (1, 1), "{}\n{}", k.stderr, o.stderr);
                let first = |s: &str| s.lines().take(2).map(str::to_owned).collect::<Vec<_>>();
                assert_eq!(first(&k.stderr), first(&o.stderr));
                assert_same_tree(&p.k, &p.o, "without --allow-exec");
            }
            let (k, o) = both_render(&kpt, &p, &args);
            let what = format!("pipeline {n}, results dir {results}");
            assert_eq!(
                k.code, o.code,
                "{what}: exit codes\n{}\n{}",
                k.stderr, o.stderr
            );
            // kpt's own error lines are worded its way; the rest must be
            // the same.
            let lines = |s: &str| {
                untimed(s)
                    .lines()
                    .filter(|l| !l.starts_with("Error:") && !l.starts_with("error:"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                lines(&k.stderr),
                lines(&o.stderr),
                "{what}: lines (left kpt)"
            );
            for sent in ["sent1.yaml", "sent2.yaml"] {
                assert_eq!(
                    read_normalized(&p.k.join(sent), &p.k),
                    read_normalized(&p.o.join(sent), &p.o),
                    "{what}: {sent} (left kpt, right ours)"
                );
            }
            for d in [&p.k, &p.o] {
                for sent in ["sent1.yaml", "sent2.yaml"] {
                    let _ = fs::remove_file(d.join(sent));
                }
            }
            assert_same_tree(&p.k, &p.o, &what);
        }
    }
}

/// A document that is not a resource, left out of the selection: kpt
/// checks only what the function gets and returns, so it passes.
#[test]
fn unselected_non_resources_pass_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let make = |d: &Path| {
        selection_package(d);
        fs::write(d.join("notkrm.yaml"), "foo: bar\n").unwrap();
    };
    let p = pair(&make);
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.add_delete, "--match-kind", "ConfigMap"],
        None,
    );
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_same_run(&k, &o, "eval");
    assert_same_tree(&p.k, &p.o, "eval");

    let p = pair(&|d: &Path| {
        make(d);
        kptfile(
            d,
            &format!(
                "  mutators:\n  - exec: {}\n    selectors:\n    - kind: ConfigMap\n",
                f.add_delete
            ),
        );
    });
    let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_eq!(untimed(&k.stderr), untimed(&o.stderr));
    assert_same_tree(&p.k, &p.o, "render");
}

/// #28 item 4: a `--results-dir` that is a file stops the run before
/// anything runs, with kpt's error, and changes nothing.
#[test]
fn a_results_dir_in_the_way_stops_the_run_first_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let make = |d: &Path| {
        selection_package(d);
        fs::write(
            d.join("Kptfile"),
            format!(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - exec: {}\n",
                f.annotate
            ),
        )
        .unwrap();
    };
    let p = pair(&make);
    for d in [&p.k, &p.o] {
        fs::write(d.join("taken"), "a file").unwrap();
    }
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f.annotate, "--results-dir", "taken"],
        None,
    );
    assert_same_run(&k, &o, "eval --results-dir FILE");
    assert_eq!(o.code, 1);
    let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec", "--results-dir", "taken"]);
    assert_eq!(k.code, o.code, "render: {}\n{}", k.stderr, o.stderr);
    assert_eq!(k.stderr, o.stderr, "render --results-dir FILE");
    assert_same_tree(&p.k, &p.o, "--results-dir FILE");
    let fresh = pair(&make);
    assert_same_tree(&fresh.o.join("pkg"), &p.o.join("pkg"), "nothing written");
}

/// #28 item 1: Kptfiles kpt refuses (unknown fields, values of the wrong
/// kind, old or unknown schema, functions with both or neither of image
/// and exec) are refused before anything runs, with kpt's messages and
/// exit code, nothing written; in the root or a subpackage.
#[test]
fn kptfiles_are_validated_like_kpt_before_anything_runs() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let head = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n";
    let bad = [
        format!("{head}pipline:\n  mutators:\n  - exec: cat\n"),
        format!("{head}pipeline:\n  mutators:\n  - exec: cat\n    configmap: {{a: b}}\n"),
        format!("{head}pipeline:\n  mutators:\n  - exce: cat\n"),
        format!("{head}pipeline:\n  validators:\n  - image: a\n    exec: cat\n"),
        format!("{head}pipeline:\n  mutators:\n  - configMap: {{a: b}}\n"),
        format!("{head}info: {{emails: a-long-address, bogus: 1}}\nstatus: [1]\n"),
        format!("{head}  uid: x\n  labels: [a]\nupstream: {{git: {{bogus: 1}}}}\n"),
        "apiVersion: kpt.dev/v1\nkind: KptFile\nmetadata:\n  name: pkg\n".to_owned(),
        "apiVersion: kpt.dev/v1alpha2\nkind: Kptfile\nmetadata:\n  name: pkg\n".to_owned(),
        "apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: pkg\n".to_owned(),
    ];
    let good_sub = format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\npipeline:\n  mutators:\n  - exec: {}\n",
        f.annotate
    );
    for (root, sub) in bad
        .iter()
        .map(|b| (b.clone(), good_sub.clone()))
        .chain(std::iter::once((
            head.to_owned(),
            bad[0].replace("pkg", "sub"),
        )))
    {
        let p = pair(&|d| {
            selection_package(d);
            fs::write(d.join("Kptfile"), &root).unwrap();
            fs::create_dir_all(d.join("sub")).unwrap();
            fs::write(d.join("sub/Kptfile"), &sub).unwrap();
            fs::write(
                d.join("sub/cm.yaml"),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
            )
            .unwrap();
        });
        let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
        let norm = |s: &str, d: &Path| s.replace(&d.display().to_string(), "DIR");
        assert_eq!(k.code, o.code, "{root}{sub}: {}\n{}", k.stderr, o.stderr);
        // beta.67's upgrade hint names the catalog's image on ghcr.io
        // (`pkg/lib/errors/resolver/pkg.go@v1.0.0-beta.67`).
        let k_err = k.stderr.replace(
            "gcr.io/kpt-fn/fix:v0.2",
            "ghcr.io/kptdev/krm-functions-catalog/fix:latest",
        );
        assert_eq!(
            norm(&k_err, &p.k),
            norm(&o.stderr, &p.o),
            "{root}{sub} (left kpt, right ours)"
        );
        assert_same_tree(&p.k, &p.o, &root);
    }
}

/// #28: a bad flag exits 1 in `eval` and `render`, as kpt does (clap's
/// own code is 2), with our message and hint; help still exits 0.
#[test]
fn bad_flags_exit_1_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    for args in [
        &["pkg", "--exec", "cat", "--no-such-flag"][..],
        &["pkg", "--exec", "cat", "--truncate-output=maybe"],
        &["pkg", "--exec", "cat", "--help"],
    ] {
        let (k, o) = both(&kpt, &p, args, None);
        assert_eq!(k.code, o.code, "eval {args:?}: {}\n{}", k.stderr, o.stderr);
        let (k, o) = both_render(&kpt, &p, args);
        assert_eq!(
            k.code, o.code,
            "render {args:?}: {}\n{}",
            k.stderr, o.stderr
        );
    }
    // Our hint for a function argument before `--` stays.
    let (_, o) = both(&kpt, &p, &["pkg", "--exec", "cat", "a=b"], None);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("function arguments go after `--`"),
        "{}",
        o.stderr
    );
}

/// #28: `--results_dir`, kpt's other spelling, in `eval` and `render`.
#[test]
fn results_dir_with_an_underscore_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| {
        copy_dir(&fixture("basic"), d);
        fs::write(
            d.join("Kptfile"),
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
        )
        .unwrap();
    });
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", "cat", "--results_dir", "r1"],
        None,
    );
    assert_same_run(&k, &o, "eval --results_dir");
    let (k, o) = both_render(&kpt, &p, &["pkg", "--results_dir", "r2"]);
    assert_eq!(
        (k.code, &k.stderr),
        (o.code, &o.stderr),
        "render --results_dir"
    );
    for d in [&p.k, &p.o] {
        assert!(d.join("r1/results.yaml").is_file() && d.join("r2/results.yaml").is_file());
    }
}

/// #28: `-e/--env` gives an `--exec` function its environment, read as
/// kpt's `docker run` reads the flags (`tests/tests/docker.rs` compares
/// them with kpt's on a container): pairs, the last value of a key
/// winning; a bare key from our environment, winning over a pair of the
/// same key, and unset when we have none. kpt itself refuses `--env` with
/// `--exec` (its message says so); the rest of the run is kpt's.
#[test]
fn env_reaches_an_exec_function() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let probe = script(
        fns.path(),
        "env.sh",
        "#!/bin/sh\necho \"A=${A-<unset>} GONE=${KRM_E2E_GONE-<unset>} EMPTY=${EMPTY-<unset>} EQ=${EQ-<unset>} HOME=${HOME-<unset>}\" >&2\nexec cat\n",
    );
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    let env = [
        "-e",
        "A=1",
        "-e",
        "A=2",
        "-e",
        "KRM_E2E_GONE=x",
        "-e",
        "KRM_E2E_GONE",
        "-e",
        "EMPTY=",
        "-e",
        "EQ=a=b",
        "-e",
        "HOME=/elsewhere",
        "-e",
        "HOME",
    ];
    let args = [&["pkg", "--exec", &probe][..], &env].concat();
    let (k, o) = both(&kpt, &p, &args, None);
    assert_eq!(k.code, 1, "{}", k.stderr);
    assert!(
        k.stderr
            .contains("--env can only be used with container functions"),
        "{}",
        k.stderr
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let home = std::env::var("HOME").unwrap_or_else(|_| "<unset>".into());
    assert!(
        o.stderr.contains(&format!(
            " Stderr: A=2 GONE=<unset> EMPTY= EQ=a=b HOME={home}, "
        )),
        "{}",
        o.stderr
    );
    // Without `-e` the function runs as kpt runs it.
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &probe], None);
    assert_same_run(&k, &o, "--exec without -e");
    assert_same_tree(&p.k, &p.o, "-e");
}

/// #28: `--mount`, `--network` and `--as-current-user` are for container
/// functions: with `--exec`, refused as kpt refuses them, before anything
/// runs (our message leaves out `--env`, which an exec function gets
/// here). `--network=false` is no network asked; `--network` and
/// `--as-current-user` take no value but `=BOOL`, so a directory after
/// them stays the directory.
#[test]
fn container_flags_with_exec_refused_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| copy_dir(&fixture("basic"), d));
    for flags in [
        &["pkg", "--exec", "cat", "--network"][..],
        &["pkg", "--exec", "cat", "--network=true"],
        &["--as-current-user", "pkg", "--exec", "cat"],
        &[
            "pkg",
            "--exec",
            "cat",
            "--mount",
            "type=bind,src=/tmp,dst=/m",
        ],
        &["pkg", "--exec", "cat", "--mount", "garbage", "-e", "A=1"],
    ] {
        let (k, o) = both(&kpt, &p, flags, None);
        assert_eq!(
            (k.code, o.code),
            (1, 1),
            "{flags:?}: {}\n{}",
            k.stderr,
            o.stderr
        );
        for stderr in [&k.stderr, &o.stderr] {
            assert!(
                stderr.starts_with("error: --mount, --as-current-user")
                    && stderr.ends_with(" can only be used with container functions\n"),
                "{flags:?}: {stderr}"
            );
        }
    }
    for flags in [
        &["pkg", "--exec", "cat", "--network=false"][..],
        &["--as-current-user=false", "pkg", "--exec", "cat"],
    ] {
        let (k, o) = both(&kpt, &p, flags, None);
        assert_same_run(&k, &o, &format!("{flags:?}"));
    }
    assert_same_tree(&p.k, &p.o, "container flags with --exec");
}

/// #28: `render --allow-network` is accepted as kpt accepts it (it gives
/// image functions the network; `exec:` functions have the host's
/// anyway), `=false` too.
#[test]
fn render_allow_network_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    for flag in [
        "--allow-network",
        "--allow-network=true",
        "--allow-network=false",
    ] {
        let p = pair(&|d| {
            copy_dir(&fixture("basic"), d);
            kptfile(d, &format!("  mutators:\n  - exec: {}\n", f.annotate));
        });
        let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec", flag]);
        assert_eq!(k.code, 0, "{flag}: {}", k.stderr);
        assert_eq!(
            (k.code, untimed(&k.stderr)),
            (o.code, untimed(&o.stderr)),
            "{flag} (left kpt, right ours)"
        );
        assert_same_tree(&p.k, &p.o, flag);
    }
}

/// What kpt 1.0.0-beta.56 and beta.67 refuse or accept alike (the same
/// code in both: `IsKRM` and `GetValidatedFnConfigFromPath`,
/// `api/kptfile/v1/validation.go@v1.0.0-beta.67:130-273`; `enforcePathInvariants`,
/// `pkg/fn/runtime/runner.go@v1.0.0-beta.67:477-506`), so checked against
/// the installed kpt: kustomization files pass the KRM check (by file
/// name whatever they hold, or by kustomize's apiVersion or kind) and go
/// through the functions like any resource; a `--fn-config` file without
/// a name, with two configs, or missing, fails before anything runs; a
/// function that puts two resources at one path and index fails.
#[test]
fn kustomizations_function_configs_and_duplicate_paths_like_kpt() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns_dir = tempfile::tempdir().unwrap();
    let f = functions(fns_dir.path());
    let kustomized = |pipeline: &str| {
        let pipeline = pipeline.to_owned();
        move |d: &Path| {
            fs::create_dir_all(d.join("overlay")).unwrap();
            kptfile(d, &pipeline);
            for (file, text) in [
                (
                    "cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
                ),
                (
                    "kustomization.yaml",
                    "# a kustomization\n\nresources:\n- cm.yaml\n",
                ),
                ("overlay/kustomization.yml", "resources:\n- ../cm.yaml\n"),
                ("Kustomization", "resources: [cm.yaml]\n"),
                ("kust2.yaml", "kind: Kustomization\nresources: []\n"),
                (
                    "component.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
                ),
            ] {
                fs::write(d.join(file), text).unwrap();
            }
        }
    };
    let annotate = format!("  mutators:\n  - exec: {}\n", f.annotate);
    let p = pair(&kustomized(&annotate));
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &f.annotate], None);
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_same_run(&k, &o, "eval over kustomizations");
    assert_same_tree(&p.k, &p.o, "eval over kustomizations");
    for (what, pipeline) in [
        ("render", annotate.as_str()),
        ("render, no functions", "  mutators: []\n"),
    ] {
        let p = pair(&kustomized(pipeline));
        let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
        assert_eq!(k.code, 0, "{what}: {}", k.stderr);
        assert_same_run(&k, &o, what);
        assert_same_tree(&p.k, &p.o, what);
    }

    let p = pair(&selection_package);
    for d in [&p.k, &p.o] {
        fs::write(
            d.join("noname.yaml"),
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n",
        )
        .unwrap();
        fs::write(
            d.join("two.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
        )
        .unwrap();
    }
    for config in ["noname.yaml", "two.yaml", "missing.yaml"] {
        let (k, o) = both(
            &kpt,
            &p,
            &["pkg", "--exec", "cat", "--fn-config", config],
            None,
        );
        assert_eq!(k.code, 1, "{config}: {}", k.stderr);
        // kpt names the file by its absolute path, each its own work
        // directory.
        let k_err = k.stderr.replace(&p.k.display().to_string(), "W");
        let o_err = o.stderr.replace(&p.o.display().to_string(), "W");
        assert_eq!((k.code, k_err), (o.code, o_err), "{config} (left kpt)");
    }
    assert_same_tree(&p.k, &p.o, "refused function configs");

    // Two resources at one path and index.
    let dup = common::script(
        fns_dir.path(),
        "dup.sh",
        "#!/bin/sh\ncat >/dev/null\nprintf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems:\\n';\nfor n in a b; do printf -- '- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: %s\\n    annotations:\\n      config.kubernetes.io/path: ./res.yaml\\n      config.kubernetes.io/index: \"0\"\\n' $n; done\n",
    );
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &dup], None);
    assert_eq!(k.code, 1, "{}", k.stderr);
    assert_same_run(&k, &o, "duplicate path and index, eval");
    let p = pair(&|d: &Path| {
        selection_package(d);
        kptfile(d, &format!("  mutators:\n  - exec: {dup}\n"));
    });
    let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
    assert_eq!(k.code, 1, "{}", k.stderr);
    assert_same_run(&k, &o, "duplicate path and index, render");
    assert_same_tree(&p.k, &p.o, "duplicate path and index, render");
}

/// Found by the YAML differential harness (tests/src/yamldiff): a render
/// step that adds a resource another step already added at the same
/// default path fails as kpt's does (`enforcePathInvariants` over the
/// step's output, a new resource counted in its package), where ours
/// wrote both into one file.
#[test]
fn render_refuses_a_resource_added_twice_at_one_path() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let add = script(
        fns.path(),
        "add.sh",
        r#"#!/bin/sh
exec awk '
function add() { print "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: added\n  data:\n    k: v"; done = 1 }
/^items:/ { print; inside = 1; next }
inside && !done && /^[A-Za-z]/ { add() }
{ print }
END { if (!done) add() }'
"#,
    );
    let p = pair(&|d| {
        copy_dir(&fixture("basic"), d);
        kptfile(
            d,
            &format!("  mutators:\n  - exec: {add}\n  - exec: {add}\n"),
        );
    });
    let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
    assert_eq!((k.code, o.code), (1, 1), "{}\n{}", k.stderr, o.stderr);
    assert_eq!(untimed(&k.stderr), untimed(&o.stderr));
    assert!(o
        .stderr
        .contains("resource at path \"configmap_added.yaml\" and index \"\" already exists"));
    assert_same_tree(&p.k, &p.o, "a resource added twice");
}

/// A documented departure (docs/eval-render.md, "Where we depart from
/// kpt"): a flow collection's line comment, when a function writes the
/// collection in block style, stays with it (on its key's line, or above
/// a sequence entry);
/// kpt writes it after the next scalar or at the next document's head.
/// Everything else is kpt's, byte for byte.
#[test]
fn a_flow_collections_line_comment_stays_on_its_line() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let sort = script(
        fns.path(),
        "sort.py",
        "#!/usr/bin/env python3\nimport sys, yaml\nyaml.safe_dump(yaml.safe_load(sys.stdin), sys.stdout, sort_keys=True)\n",
    );
    let input = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata: {v: x} # on data\nlist:\n- {k: 1} # on the entry\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n";
    let p = pair(&|d| {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join("f.yaml"), input).unwrap();
    });
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &sort], None);
    assert_eq!((k.code, o.code), (0, 0), "{}\n{}", k.stderr, o.stderr);
    let kpt_file = fs::read_to_string(p.k.join("pkg/f.yaml")).unwrap();
    let ours = fs::read_to_string(p.o.join("pkg/f.yaml")).unwrap();
    assert_eq!(
        kpt_file,
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata:\n  v: x\nlist: # on data\n- k: 1\n---\n# on the entry\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n"
    );
    assert_eq!(
        ours,
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata: # on data\n  v: x\nlist:\n# on the entry\n- k: 1\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n"
    );
}

/// Found by the YAML differential harness (soak seed 100666): kyaml writes
/// a file's documents through one yaml.v3 encoder, so the line comment of
/// an anchored block mapping, which the encoder holds back, comes out in
/// the next document too; ours wrote each document on its own and lost
/// that copy.
#[test]
fn a_comment_held_back_at_a_documents_end_goes_into_the_next() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let p = pair(&|d| {
        fs::create_dir_all(d).unwrap();
        fs::write(
            d.join("f.yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nstuff: &a1 #no space\n  'alpha': ~\n--- # doc 1\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
        )
        .unwrap();
    });
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", "cat"], None);
    assert_same_run(&k, &o, "cat");
    assert_same_tree(&p.k, &p.o, "one encoder");
    let written = fs::read_to_string(p.o.join("pkg/f.yaml")).unwrap();
    assert!(written.contains("apiVersion: v1 #no space\n"), "{written}");
}

/// Found by the YAML differential harness (soak seed 100089): yaml.v3 puts
/// the comment after a value-less anchor that ends a resource
/// (`spec: &a1 # c`) on the resource's mapping. kyaml's comment copier
/// copies a resource's `RNode.Document()` comments, which for one read from
/// a file are its document node's, never its mapping's: a function that
/// drops the comment loses it, and one that keeps it (`cat`, whose output
/// holds it at the next item's head) has it written once. Ours copied the
/// mapping's as well, and wrote it twice.
#[test]
fn a_resources_own_line_comment_is_not_copied_back() {
    let Some(kpt) = prerequisite(require_kpt()) else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let strip = script(fns.path(), "strip", "#!/bin/sh\nsed 's/^- # c1$/-/'\n");
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: &a1 # c1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b # c2\n";
    for (exec, kept) in [("cat", true), (strip.as_str(), false)] {
        let p = pair(&|d| {
            fs::create_dir_all(d).unwrap();
            fs::write(d.join("f.yaml"), input).unwrap();
        });
        let (k, o) = both(&kpt, &p, &["pkg", "--exec", exec], None);
        assert_same_run(&k, &o, exec);
        assert_same_tree(&p.k, &p.o, exec);
        let written = fs::read_to_string(p.o.join("pkg/f.yaml")).unwrap();
        assert_eq!(
            written.matches("# c1").count(),
            usize::from(kept),
            "{exec}: {written}"
        );
    }
}
