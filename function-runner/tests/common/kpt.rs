//! The helpers of the tests that compare `function-runner eval`/`render`
//! with kpt (`eval_kpt.rs`, `eval_kpt_save.rs`): two work directories with
//! the same package, both programs run on them, their runs and files
//! compared.

use std::fs;
use std::path::{Path, PathBuf};

use super::beta67::{stderr_as_beta67, Command};
use super::{run_in, script, tree, Run};

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

/// Whether kpt's (beta.56's) file at `path` is ours, as beta.67 would
/// write it: byte for byte; but a Kptfile that our render gave a render
/// status and kpt did not, compared as YAML data without its `status`
/// (beta.67 writes that status into the root Kptfile after an in-place
/// render and marshals the file from its Go types: comments gone, fields
/// reordered; the status itself is checked against beta.67's layouts
/// elsewhere: krm-kpt's `kptfile::status` tests, `render_beta67.rs`), and
/// a results file whose field values beta.67 holds as strings.
pub fn same_file(path: &str, kpt: &[u8], ours: &[u8]) -> bool {
    if kpt == ours {
        return true;
    }
    if path.ends_with("Kptfile") && has_render_status(ours) && !has_render_status(kpt) {
        return without_status(kpt) == without_status(ours);
    }
    if path.ends_with("results.yaml") {
        return results_as_beta67(kpt)
            == serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(ours).unwrap();
    }
    false
}

/// Whether a Kptfile holds a `Rendered` condition.
fn has_render_status(kptfile: &[u8]) -> bool {
    serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(kptfile)
        .ok()
        .and_then(|v| v.get("status")?.get("conditions")?.as_sequence().cloned())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.get("type").and_then(|t| t.as_str()) == Some("Rendered"))
        })
}

/// beta.56's `results.yaml` as beta.67 writes it: a result's
/// `field.currentValue`/`proposedValue` are strings there (a number's
/// text, a mapping's YAML; `api/fnresult/v1/types.go@v1.0.0-beta.67:175-215`).
fn results_as_beta67(text: &[u8]) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    let mut list: Value = serde_yaml_ng::from_slice(text).expect("a results file");
    let items = list.get_mut("items").and_then(Value::as_sequence_mut);
    for item in items.into_iter().flatten() {
        let results = item.get_mut("results").and_then(Value::as_sequence_mut);
        for result in results.into_iter().flatten() {
            let Some(field) = result.get_mut("field").and_then(Value::as_mapping_mut) else {
                continue;
            };
            for key in ["currentValue", "proposedValue"] {
                if let Some(v) = field.get_mut(key) {
                    let text = match &*v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        other => serde_yaml_ng::to_string(other).unwrap().trim().to_owned(),
                    };
                    *v = Value::String(text);
                }
            }
        }
    }
    list
}

/// A Kptfile's data without its `status`.
fn without_status(kptfile: &[u8]) -> serde_yaml_ng::Value {
    let mut v: serde_yaml_ng::Value = serde_yaml_ng::from_slice(kptfile).expect("a Kptfile");
    if let Some(m) = v.as_mapping_mut() {
        m.remove("status");
    }
    v
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
