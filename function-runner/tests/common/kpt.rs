//! The helpers of the tests that compare `function-runner eval`/`render`
//! with kpt (`eval_kpt.rs`, `eval_kpt_save.rs`): two work directories with
//! the same package, both programs run on them, their runs and files
//! compared.

use std::fs;
use std::path::{Path, PathBuf};

use super::{run_in, script, tree, Run};
use e2e_tests::beta67::{same_file, stderr_as_beta67, Command};

pub fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_function-runner")
}

/// The two trees hold the same files, each as [`same_file`] compares them.
pub fn assert_same_tree(kpt_dir: &Path, our_dir: &Path, what: &str) {
    let (k, o) = (tree(kpt_dir), tree(our_dir));
    assert_eq!(
        k.keys().collect::<Vec<_>>(),
        o.keys().collect::<Vec<_>>(),
        "{what}: different files"
    );
    for (path, kb) in &k {
        assert!(
            same_file(path, kb, &o[path]),
            "{what}: {path} differs (left kpt, right ours):\n{}\n{}",
            String::from_utf8_lossy(kb),
            String::from_utf8_lossy(&o[path])
        );
    }
}

/// The functions the tests run (paths to executables).
pub struct Functions {
    pub annotate: String,
    pub add_delete: String,
    pub fail: String,
    pub results: String,
    pub tee: String,
}

pub fn functions(dir: &Path) -> Functions {
    Functions {
        // Appends an annotation to each item's block annotations, unless it
        // is there (a later render step sees it), as kyaml's SetAnnotation
        // does: a second one would be a key twice, which ours refuses.
        annotate: script(
            dir,
            "annotate.sh",
            r#"#!/bin/sh
exec awk '
inann && /^      example\.com\/touched:/ { has = 1 }
inann && !/^      / { if (!has) print "      example.com/touched: \"yes\""; inann = 0 }
{ print }
/^    annotations:$/ { inann = 1; has = 0 }
END { if (inann && !has) print "      example.com/touched: \"yes\"" }'
"#,
        ),
        // Drops the item named cm2 and adds three: two without a path, one
        // with only the internal path annotation.
        add_delete: script(
            dir,
            "add-delete.sh",
            r#"#!/bin/sh
exec awk '
function flush() { if (buf != "" && index(buf, "  name: cm2\n") == 0) printf "%s", buf; buf = "" }
/^functionConfig:/ { fc = 1 }
fc { next }
/^- / { flush() }
{ buf = buf $0 "\n" }
END {
  flush()
  print "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: added\n    namespace: team-a\n  data:\n    k: v"
  print "- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: Added-Secret"
  print "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: placed\n    annotations:\n      internal.config.kubernetes.io/path: sub/placed.yaml"
}'
"#,
        ),
        // Fails with structured results and stderr.
        fail: script(
            dir,
            "fail.sh",
            r#"#!/bin/sh
cat >/dev/null
echo "some stderr line" >&2
printf 'a "quoted" line\twith a tab\n' >&2
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
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
    currentValue: 1
    proposedValue: 3
  file:
    path: sub/deploy.yaml
    index: 0
- message: just a warning
  severity: warning
- message: "two\nlines"
  severity: info
  resourceRef:
    apiVersion: v1
    kind: ConfigMap
    name: cm1
  file:
    path: multi.yaml
    index: 2
- message: no severity
- message: fifth
  severity: warning
  tags:
    b: "2"
    a: "1"
YAML
exit 1
"#,
        ),
        // Passes, with results and stderr.
        results: script(
            dir,
            "results.sh",
            r#"#!/bin/sh
cat
cat <<'YAML'
results:
- message: all good
  severity: info
- message: withfield
  field:
    path: a.b
YAML
echo "stderr on pass" >&2
"#,
        ),
        // Passes its input through and keeps a copy in the file named by its
        // first argument.
        tee: script(dir, "tee.sh", "#!/bin/sh\nexec tee \"$1\"\n"),
    }
}

pub fn run(program: &Path, cwd: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    run_in(program, cwd, args, stdin)
}

/// Runs the installed kpt (v1.0.0-beta.56; `args` from `fn eval` or `fn
/// render` on) and gives its stderr as v1.0.0-beta.67 prints it for the
/// same run ([`stderr_as_beta67`]): ours follows beta.67, whose lines
/// differ from beta.56's in fixed ways (one-line results and stderr, the
/// package header, ghcr.io names); the files and stdout are compared as
/// they are. kpt runs with `--truncate-output=false`, since beta.67 cuts
/// nothing.
pub fn kpt_run(kpt: &Path, cwd: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let command = match args.get(1) {
        Some(&"render") => Command::Render,
        _ => Command::Eval,
    };
    let mut args: Vec<&str> = args.to_vec();
    if !args.iter().any(|a| a.starts_with("--truncate-output")) {
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        args.insert(at, "--truncate-output=false");
    }
    let mut k = run_in(kpt, cwd, &args, stdin);
    k.stderr = stderr_as_beta67(&k.stderr, command);
    k
}

/// stderr without the durations of `[PASS]`/`[FAIL]` lines.
pub fn untimed(stderr: &str) -> String {
    stderr
        .lines()
        .map(|l| {
            if (l.starts_with("[PASS] ") || l.starts_with("[FAIL] ")) && l.contains(" in ") {
                format!("{} in <t>", &l[..l.rfind(" in ").unwrap()])
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two work directories, `k` (kpt) and `o` (ours), each with the package
/// at `pkg`.
pub struct Pair {
    _tmp: tempfile::TempDir,
    pub k: PathBuf,
    pub o: PathBuf,
}

pub fn pair(make: &dyn Fn(&Path)) -> Pair {
    let tmp = tempfile::tempdir().unwrap();
    let (k, o) = (tmp.path().join("k"), tmp.path().join("o"));
    for d in [&k, &o] {
        fs::create_dir_all(d).unwrap();
        make(&d.join("pkg"));
    }
    Pair { _tmp: tmp, k, o }
}

/// Runs both on the pair with the same arguments (after `fn eval` / `eval`).
pub fn both(kpt: &Path, p: &Pair, args: &[&str], stdin: Option<&[u8]>) -> (Run, Run) {
    let mut kargs = vec!["fn", "eval"];
    kargs.extend_from_slice(args);
    let mut oargs = vec!["eval"];
    oargs.extend_from_slice(args);
    let k = kpt_run(kpt, &p.k, &kargs, stdin);
    let o = run(Path::new(ours()), &p.o, &oargs, stdin);
    (k, o)
}

pub fn assert_same_run(k: &Run, o: &Run, what: &str) {
    assert_eq!(
        k.code, o.code,
        "{what}: exit codes (kpt stderr:\n{}\nours:\n{})",
        k.stderr, o.stderr
    );
    assert_eq!(
        untimed(&k.stderr),
        untimed(&o.stderr),
        "{what}: stderr (left kpt, right ours)"
    );
    assert_eq!(
        String::from_utf8_lossy(&k.stdout),
        String::from_utf8_lossy(&o.stdout),
        "{what}: stdout (left kpt, right ours)"
    );
}

/// A package for the selection tests: resources that differ by each field
/// a selector looks at.
pub fn selection_package(d: &Path) {
    fs::create_dir_all(d).unwrap();
    fs::write(
        d.join("res.yaml"),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: cm1 # the first
  namespace: ns
  labels:
    app: web
data:
  a: "1"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
  labels:
    app: web
    skip: "yes"
---
# a deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  annotations:
    note: keep
spec:
  replicas: 1
"#,
    )
    .unwrap();
    fs::write(
        d.join("svc.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: other\nspec:\n  ports:\n  - port: 80\n",
    )
    .unwrap();
}

/// [`selection_package`] with a Kptfile holding `pipeline` (YAML under
/// `pipeline:`).
pub fn kptfile(d: &Path, pipeline: &str) {
    fs::write(
        d.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n{pipeline}"
        ),
    )
    .unwrap();
}

/// Runs `fn render` / `render` on the pair (after the subcommand).
pub fn both_render(kpt: &Path, p: &Pair, args: &[&str]) -> (Run, Run) {
    let mut kargs = vec!["fn", "render"];
    kargs.extend_from_slice(args);
    let mut oargs = vec!["render"];
    oargs.extend_from_slice(args);
    (
        kpt_run(kpt, &p.k, &kargs, None),
        run(Path::new(ours()), &p.o, &oargs, None),
    )
}
