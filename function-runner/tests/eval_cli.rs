//! `function-runner eval` on its own (no kpt needed): the lines, files and
//! outputs kpt gives, recorded from kpt 1.0.0-beta.56 (see eval_kpt.rs for
//! the live comparison).

#![allow(clippy::unwrap_used)]

mod common;

use common::{copy_dir, fixture, script, text_tree as tree};

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e_tests::output_within;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn eval(cwd: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_function-runner"))
            .current_dir(cwd)
            .arg("eval")
            .args(args),
        stdin,
        Duration::from_secs(120),
    )
    .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// stderr with the durations of `[PASS]`/`[FAIL]` lines as `<t>`.
fn untimed(stderr: &str) -> String {
    let mut out = String::new();
    for l in stderr.lines() {
        if (l.starts_with("[PASS] ") || l.starts_with("[FAIL] ")) && l.contains(" in ") {
            out.push_str(&l[..l.rfind(" in ").unwrap()]);
            out.push_str(" in <t>");
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

#[test]
fn cat_leaves_a_canonical_package_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    copy_dir(&fixture("basic"), &pkg);
    let before = fs::metadata(pkg.join("multi.yaml"))
        .unwrap()
        .modified()
        .unwrap();
    let r = eval(tmp.path(), &["pkg", "--exec", "cat"], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Quiet: no progress lines for a small package.
    assert_eq!(
        untimed(&r.stderr),
        "[RUNNING] \"cat\"\n[PASS] \"cat\" in <t>\n"
    );
    assert_eq!(r.stdout, "");
    assert_eq!(tree(&pkg), tree(&fixture("basic")));
    // Unchanged files are not rewritten.
    assert_eq!(
        fs::metadata(pkg.join("multi.yaml"))
            .unwrap()
            .modified()
            .unwrap(),
        before
    );
}

/// A resource nested as deep as the parser allows (yaml.v3's 10,000) is
/// read, sent, taken back and left as it was (found by the YAML
/// differential harness: the main thread's stack overflowed at 9,000, an
/// abort where kpt passes), and one level more is yaml.v3's error, for
/// eval and render alike.
#[test]
fn a_resource_nested_to_the_parsers_limit_is_no_crash() {
    for (depth, ok) in [(9_995, true), (10_001, false)] {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("pkg");
        fs::create_dir_all(&pkg).unwrap();
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        fs::write(pkg.join("a.yaml"), &text).unwrap();
        let r = eval(tmp.path(), &["pkg", "--exec", "cat"], None);
        let kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - exec: cat\n";
        fs::write(pkg.join("Kptfile"), kptfile).unwrap();
        let rendered = output_within(
            Command::new(env!("CARGO_BIN_EXE_function-runner"))
                .current_dir(tmp.path())
                .args(["render", "pkg", "--allow-exec"]),
            None,
            Duration::from_secs(120),
        )
        .unwrap();
        let render_err = String::from_utf8_lossy(&rendered.stderr);
        for (code, stderr) in [
            (r.code, r.stderr.as_str()),
            (rendered.status.code().unwrap_or(-1), &*render_err),
        ] {
            if ok {
                assert_eq!(code, 0, "{stderr}");
            } else {
                assert_eq!(code, 1, "{stderr}");
                assert!(stderr.contains("exceeded max depth of 10000"), "{stderr}");
            }
        }
        assert_eq!(fs::read_to_string(pkg.join("a.yaml")).unwrap(), text);
    }
}

#[test]
fn messy_package_is_formatted_as_kpt_writes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    copy_dir(&fixture("messy"), &pkg);
    fs::write(
        pkg.join("crlf.yaml"),
        "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\n",
    )
    .unwrap();
    let r = eval(tmp.path(), &["pkg", "--exec", "cat"], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = tree(&pkg);
    // Recorded from kpt 1.0.0-beta.56.
    assert_eq!(
        t["crlf.yaml"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crlf\n"
    );
    assert_eq!(
        t["markers.yaml"],
        "# head comment after the marker\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lead\ndata:\n  a: 1\n  b: 2\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\n\n# after the end marker\n"
    );
    assert_eq!(
        t["flow.yaml"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow-meta, namespace: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: empty-ann\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flow-ann\n  annotations: {a: b}\n"
    );
    assert_eq!(
        t["comments.yaml"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: foot\nx: 1\n# c\n\ny: 2\n\n# foot1\n\n# foot2\n"
    );
    assert_eq!(
        t["pretty.json"],
        "{\n  \"apiVersion\": \"v1\",\n  \"data\": {\n    \"a\": \"\\u003c\\u0026\\u003e\",\n    \"z\": \"1\"\n  },\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\n    \"name\": \"pretty-json\"\n  }\n}\n"
    );
    // Untouched: ignored, without resources, the wide subpackage file.
    for f in [
        "ignored/i.yaml",
        "nothing.yaml",
        "subpkg/wide.yaml",
        ".hidden/h.yaml",
    ] {
        assert_eq!(
            t[f],
            fs::read_to_string(fixture("messy").join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn failing_function_prints_kpt_lines_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    copy_dir(&fixture("basic"), &pkg);
    let fail = script(
        tmp.path(),
        "fail.sh",
        r#"#!/bin/sh
cat >/dev/null
echo "some stderr line" >&2
cat <<'YAML'
kind: ResourceList
items: []
results:
- message: bad replicas
  severity: error
  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}
  field: {path: spec.replicas, currentValue: 1, proposedValue: 3}
  file: {path: sub/deploy.yaml, index: 0}
- message: just a warning
  severity: warning
- message: no severity
YAML
exit 3
"#,
    );
    let r = eval(
        tmp.path(),
        &["pkg", "--exec", &fail, "--results-dir", "res"],
        None,
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        untimed(&r.stderr),
        format!(
            "[RUNNING] \"{fail}\"\n[FAIL] \"{fail}\" in <t>\n[Results]: [error] apps/v1/Deployment/ns/app spec.replicas: bad replicas, [warning]: just a warning, [info]: no severity\n Stderr: some stderr line,   Exit code: 3\n\n\nFor complete results, see res/results.yaml\n"
        )
    );
    assert_eq!(
        tree(&pkg),
        tree(&fixture("basic")),
        "a failing function changes nothing"
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("res/results.yaml")).unwrap(),
        format!(
            "apiVersion: kpt.dev/v1
kind: FunctionResultList
metadata:
  name: fnresults
exitCode: 1
items:
  - exec: {fail}
    stderr: |
      some stderr line
    exitCode: 3
    results:
      - message: bad replicas
        severity: error
        resourceRef:
          apiVersion: apps/v1
          kind: Deployment
          name: app
          namespace: ns
        field:
          path: spec.replicas
          currentValue: \"1\"
          proposedValue: \"3\"
        file:
          path: sub/deploy.yaml
      - message: just a warning
        severity: warning
      - message: no severity
"
        )
    );
}

#[test]
fn stdin_resource_list_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let input = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: A\n  metadata:\n    name: a # c\n- apiVersion: v1\n  kind: B\n  metadata:\n    name: b\n    namespace: ns\n    annotations:\n      config.kubernetes.io/path: \"x/y.yaml\"\n";
    let r = eval(tmp.path(), &["-", "--exec", "cat"], Some(input));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // As kpt: the path annotation in the form the input used, a default
    // path for the item without one, kpt's ids gone.
    assert_eq!(
        r.stdout,
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: A\n  metadata:\n    name: a # c\n    annotations:\n      config.kubernetes.io/path: 'a_a.yaml'\n- apiVersion: v1\n  kind: B\n  metadata:\n    name: b\n    namespace: ns\n    annotations:\n      config.kubernetes.io/path: \"x/y.yaml\"\n"
    );
    let r = eval(
        tmp.path(),
        &["-", "--exec", "cat", "-o", "unwrap"],
        Some(input),
    );
    assert_eq!(
        r.stdout,
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a # c\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n  namespace: ns\n"
    );
    // Documents in, a ResourceList out.
    let r = eval(
        tmp.path(),
        &["-", "--exec", "cat"],
        Some(b"apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  namespace: n\n"),
    );
    assert_eq!(
        r.stdout,
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    namespace: n\n    annotations:\n      config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/seqindent: 'compact'\n      internal.config.kubernetes.io/path: 'n/a_a.yaml'\n      config.kubernetes.io/path: 'n/a_a.yaml'\n"
    );
}

#[test]
fn function_config_from_arguments_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let sent = tmp.path().join("sent.yaml");
    let tee = script(tmp.path(), "tee.sh", "#!/bin/sh\nexec tee \"$1\"\n");
    let cmd = format!("{tee} {}", sent.display());
    let input = b"apiVersion: v1\nkind: A\nmetadata:\n  name: a\n";
    let fc = |r: &Run| {
        assert_eq!(r.code, 0, "{}", r.stderr);
        let s = fs::read_to_string(&sent).unwrap();
        s[s.find("functionConfig:").unwrap()..].to_owned()
    };
    let r = eval(
        tmp.path(),
        &["-", "--exec", &cmd, "--", "n=3", "on=yes", "s=a b", "e="],
        Some(input),
    );
    assert_eq!(
        fc(&r),
        "functionConfig:\n  metadata:\n    name: function-input\n  data: {n: \"3\", on: \"yes\", s: a b, e: \"\"}\n  kind: ConfigMap\n  apiVersion: v1\n"
    );
    let r = eval(tmp.path(), &["-", "--exec", &cmd], Some(input));
    assert_eq!(
        fc(&r),
        "functionConfig:\n  metadata:\n    name: function-input\n  data: {}\n  kind: ConfigMap\n  apiVersion: v1\n"
    );
    let cfg = fixture("fn-config.yaml");
    let r = eval(
        tmp.path(),
        &["-", "--exec", &cmd, "--fn-config", cfg.to_str().unwrap()],
        Some(input),
    );
    assert_eq!(
        fc(&r),
        "functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: my-config\n    annotations:\n      config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/seqindent: 'compact'\n  data:\n    # a comment\n    key: value\n    list: |\n      - a\n"
    );
    let r = eval(
        tmp.path(),
        &["-", "--exec", &cmd, "--fn-config", "x.yaml", "--", "a=b"],
        Some(input),
    );
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            1,
            "error: function arguments can only be specified without function config file\n"
        )
    );
}

#[test]
fn errors_like_kpt() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("basic"), &tmp.path().join("pkg"));
    fs::create_dir(tmp.path().join("out")).unwrap();
    let r = eval(tmp.path(), &["pkg", "--exec", "cat", "-o", "out"], None);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            1,
            "error: directory \"out\" already exists, please delete the directory and retry\n"
        )
    );
    let r = eval(tmp.path(), &["pkg", "--exec", "./nope"], None);
    assert_eq!(r.code, 1);
    assert_eq!(
        untimed(&r.stderr),
        "[RUNNING] \"./nope\"\n[FAIL] \"./nope\" in <t>\nerror: unexpected function error: fork/exec ./nope: no such file or directory\n"
    );
    // Output that is not a ResourceList.
    let bad = script(
        tmp.path(),
        "bad.sh",
        "#!/bin/sh\ncat >/dev/null\necho garbage\n",
    );
    let r = eval(tmp.path(), &["pkg", "--exec", &bad], None);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("[FAIL]") && r.stderr.contains("error: function output:"),
        "{}",
        r.stderr
    );
    assert_eq!(tree(&tmp.path().join("pkg")), tree(&fixture("basic")));
}

#[test]
fn many_files_report_progress_only_when_slow() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    for i in 0..300 {
        fs::write(
            pkg.join(format!("cm-{i}.yaml")),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  i: \"{i}\"\n"
            ),
        )
        .unwrap();
    }
    let before = tree(&pkg);
    let r = eval(tmp.path(), &["pkg", "--exec", "cat"], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        untimed(&r.stderr),
        "[RUNNING] \"cat\"\n[PASS] \"cat\" in <t>\n"
    );
    assert_eq!(tree(&pkg), before);
}

#[test]
fn a_resource_through_a_symlink_out_of_the_package_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&pkg).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: old\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../outside", pkg.join("sub")).unwrap();
    // The package's resource changed, and one at `sub/evil.yaml` (both
    // annotations, as a function that keeps kpt's would write them).
    let evil = script(
        tmp.path(),
        "evil.sh",
        r#"#!/bin/sh
cat >/dev/null
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm
    annotations:
      config.kubernetes.io/path: cm.yaml
      internal.config.kubernetes.io/path: cm.yaml
  data:
    a: new
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: evil
    annotations:
      config.kubernetes.io/path: sub/evil.yaml
      internal.config.kubernetes.io/path: sub/evil.yaml
YAML
"#,
    );
    let before = tree(&pkg);
    let r = eval(tmp.path(), &["pkg", "--exec", &evil], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "sub/evil.yaml: not written: it would leave the package through the symlink sub -> ../outside"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(tree(&pkg), before, "nothing written in the package either");
}

/// `--functions` is read once, before anything runs: a path that is not a
/// directory stops `eval` (even of a built-in, which needs no runner) and
/// `render` (even of a pipeline of built-ins), kpt-style, with nothing
/// written.
#[test]
fn a_functions_path_that_is_no_directory_stops_eval_and_render() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
    fs::write(pkg.join("cm.yaml"), cm).unwrap();
    fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - image: gcr.io/kpt-fn/set-namespace:v0.4.1\n    configMap:\n      namespace: prod\n",
    )
    .unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let pkg_arg = pkg.to_str().unwrap();
    let run = eval(
        dir.path(),
        &[
            pkg_arg,
            "--image",
            "set-namespace:v0.4.1",
            "--functions",
            missing,
            "--",
            "namespace=prod",
        ],
        None,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with(&format!("error: --functions {missing}: No such file")),
        "{}",
        run.stderr
    );
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_function-runner")).args([
            "render",
            pkg_arg,
            "--functions",
            missing,
        ]),
        None,
        Duration::from_secs(120),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: --functions {missing}: No such file")),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(pkg.join("cm.yaml")).unwrap(), cm);
}
