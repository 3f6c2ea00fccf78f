//! A mapping with one key twice (`a: "1"` then `a: "2"`): kpt reads it and
//! loses the second value (`kpt fn eval --exec cat` exits 0, writing the
//! first value over the second). `eval` and `render` refuse it, in a
//! package file or in a function's output, as malformed YAML naming the
//! file (or the function), the lines and the key; exit 1, nothing written.

#![allow(clippy::unwrap_used)]

mod common;

use common::{run_in, script, tree, Run};

use std::fs;
use std::path::Path;

fn fr(cwd: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    run_in(
        Path::new(env!("CARGO_BIN_EXE_function-runner")),
        cwd,
        args,
        stdin,
    )
}

const DUPLICATE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: x
data:
  a: \"1\"
  a: \"2\"
";

/// A package `pkg` in `dir`: a good file, and `sub/cm.yaml` with a second
/// document holding a duplicate key in a nested mapping.
fn package(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    fs::create_dir_all(pkg.join("sub")).unwrap();
    fs::write(
        pkg.join("ok.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n",
    )
    .unwrap();
    fs::write(
        pkg.join("sub/cm.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n---\n{DUPLICATE}"),
    )
    .unwrap();
    pkg
}

/// Writes `marker` when it runs, then echoes its input: whether a function
/// was started at all.
fn cat_marking(dir: &Path) -> String {
    script(
        dir,
        "cat-marking.sh",
        &format!(
            "#!/bin/sh\ntouch '{}'\nexec cat\n",
            dir.join("ran").display()
        ),
    )
}

#[test]
fn eval_refuses_a_package_file_with_a_duplicate_key() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = package(tmp.path());
    let before = tree(&pkg);
    let cat = cat_marking(tmp.path());
    let r = fr(tmp.path(), &["eval", "pkg", "--exec", &cat], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // kpt's words for a file it cannot read, its absolute path, and the
    // lines in the file (the second document starts on line 6,
    // its first `a` on line 11).
    assert_eq!(
        r.stderr,
        format!(
            "error: {}: MalformedYAMLError: yaml: line 12: mapping key \"a\" already \
             defined at line 11\n",
            pkg.join("sub/cm.yaml").display()
        )
    );
    assert!(!tmp.path().join("ran").exists(), "the function ran");
    assert_eq!(tree(&pkg), before, "the package changed");
}

#[test]
fn eval_refuses_a_duplicate_key_on_stdin() {
    let tmp = tempfile::tempdir().unwrap();
    let r = fr(
        tmp.path(),
        &["eval", "-", "--exec", "cat"],
        Some(DUPLICATE.as_bytes()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "error: MalformedYAMLError: yaml: line 7: mapping key \"a\" already defined at line 6\n"
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn a_quoted_key_is_the_same_key() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, \"name\": y}\n",
    )
    .unwrap();
    let before = tree(&pkg);
    let r = fr(tmp.path(), &["eval", "pkg", "--exec", "cat"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .ends_with("cm.yaml: MalformedYAMLError: yaml: line 3: mapping key \"name\" already defined at line 3\n"),
        "{}",
        r.stderr
    );
    assert_eq!(tree(&pkg), before);
}

/// A function that prints its input back with `data.a` twice in the
/// ConfigMap (line 12 of its output, the first `a` on line 11).
fn duplicating(dir: &Path) -> String {
    script(
        dir,
        "dup.sh",
        "#!/bin/sh\ncat >/dev/null\nprintf 'apiVersion: config.kubernetes.io/v1\\nkind: \
         ResourceList\\nitems:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: \
         x\\n    annotations:\\n      config.kubernetes.io/path: cm.yaml\\n  data:\\n    a: \
         \"1\"\\n    a: \"2\"\\n'\n",
    )
}

fn clean_package(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    fs::create_dir(&pkg).unwrap();
    fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"1\"\n",
    )
    .unwrap();
    pkg
}

#[test]
fn eval_refuses_function_output_with_a_duplicate_key() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = clean_package(tmp.path());
    let before = tree(&pkg);
    let dup = duplicating(tmp.path());
    let r = fr(tmp.path(), &["eval", "pkg", "--exec", &dup], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let quoted = format!("\"{dup}\"");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stderr);
    assert_eq!(lines[0], format!("[RUNNING] {quoted}"));
    assert!(lines[1].starts_with(&format!("[FAIL] {quoted} in ")));
    assert_eq!(
        lines[2],
        format!(
            "error: function output: {quoted}: MalformedYAMLError: yaml: line 12: mapping key \
             \"a\" already defined at line 11"
        )
    );
    assert_eq!(tree(&pkg), before, "the package changed");
    // `-o stdout` prints nothing either.
    let r = fr(
        tmp.path(),
        &["eval", "pkg", "--exec", &dup, "-o", "stdout"],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

const KPTFILE: &str = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
";

#[test]
fn render_refuses_them_too() {
    // In a package file: before any function runs.
    let tmp = tempfile::tempdir().unwrap();
    let pkg = package(tmp.path());
    let cat = cat_marking(tmp.path());
    fs::write(
        pkg.join("Kptfile"),
        format!("{KPTFILE}pipeline:\n  mutators:\n  - exec: {cat}\n"),
    )
    .unwrap();
    let before = tree(&pkg);
    let r = fr(tmp.path(), &["render", "pkg", "--allow-exec"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.ends_with(&format!(
            // beta.67 prints a render's error as `Error: ... ` (kpt's
            // error printer), as beta.56 did.
            "Error: {}: MalformedYAMLError: yaml: line 12: mapping key \"a\" already \
             defined at line 11 \n",
            pkg.join("sub/cm.yaml").display()
        )),
        "{}",
        r.stderr
    );
    assert!(!tmp.path().join("ran").exists(), "the function ran");
    assert_eq!(
        without_kptfile(tree(&pkg)),
        without_kptfile(before),
        "the package changed"
    );

    // In a step's output: named by its function.
    let tmp = tempfile::tempdir().unwrap();
    let pkg = clean_package(tmp.path());
    let dup = duplicating(tmp.path());
    fs::write(
        pkg.join("Kptfile"),
        format!("{KPTFILE}pipeline:\n  mutators:\n  - exec: {dup}\n"),
    )
    .unwrap();
    let before = tree(&pkg);
    let r = fr(tmp.path(), &["render", "pkg", "--allow-exec"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.ends_with(&format!(
            "Error: function output: \"{dup}\": MalformedYAMLError: yaml: line 12: mapping key \
             \"a\" already defined at line 11 \n"
        )),
        "{}",
        r.stderr
    );
    assert_eq!(
        without_kptfile(tree(&pkg)),
        without_kptfile(before),
        "the package changed"
    );
}

#[test]
fn render_names_a_kptfile_key_twice_in_kpts_words() {
    // kpt decodes a Kptfile strictly, and refuses this one in its own
    // words (recorded from kpt 1.0.0-beta.56); the same here.
    let tmp = tempfile::tempdir().unwrap();
    let pkg = clean_package(tmp.path());
    fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n  name: pkg2\n",
    )
    .unwrap();
    let before = tree(&pkg);
    let r = fr(tmp.path(), &["render", "pkg"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "Error: Kptfile at \"{}\" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  \
             line 5: mapping key \"name\" already defined at line 4 \n",
            pkg.display()
        )
    );
    assert_eq!(tree(&pkg), before);
}

#[test]
fn the_same_key_in_different_mappings_is_fine() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels:\n    name: x\n\
                data:\n  name: x\n  a: \"1\"\n";
    fs::write(pkg.join("cm.yaml"), text).unwrap();
    let r = fr(tmp.path(), &["eval", "pkg", "--exec", "cat"], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fs::read_to_string(pkg.join("cm.yaml")).unwrap(), text);
}

/// A package's files but its root Kptfile, which a failed render (beta.67)
/// gives its render status.
fn without_kptfile(
    mut files: std::collections::BTreeMap<String, Vec<u8>>,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    files.remove("Kptfile");
    files
}
