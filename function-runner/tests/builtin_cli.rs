//! The catalog's functions, built in, through `function-runner eval` and
//! `render`: what kpt prints for an image function, the files written, no
//! runner or container started (no `[USING]` line), FunctionConfig
//! `goExecutor`, and `--no-default-builtins`.

#![allow(clippy::unwrap_used)]

mod common;

use common::{run_in, text_tree, Run};

use std::fs;
use std::path::Path;

fn fr(cwd: &Path, args: &[&str]) -> Run {
    run_in(
        Path::new(env!("CARGO_BIN_EXE_function-runner")),
        cwd,
        args,
        None,
    )
}

/// stderr with the durations of `[PASS]`/`[FAIL]` lines as `<t>`.
fn untimed(stderr: &str) -> String {
    let mut out = String::new();
    for l in stderr.lines() {
        match l.rfind(" in ") {
            Some(i) if l.starts_with("[PASS] ") || l.starts_with("[FAIL] ") => {
                out.push_str(&l[..i]);
                out.push_str(" in <t>");
            }
            _ => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

const DEPLOYMENT: &str = "# Copyright 2026 the shop's authors
# (a licence header: a comment of the document, before a blank line)

# the web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # keep this
  namespace: old
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.25 # pinned
";

const PACKAGE_CONTEXT: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: \"true\"
data:
  name: shop
";

/// [`DEPLOYMENT`] as kpt writes it back: the blank line between the
/// document's comment and the resource goes (kpt does the same with a
/// container).
fn written(deployment: &str) -> String {
    deployment.replace("line)\n\n# the web tier", "line)\n# the web tier")
}

#[test]
fn render_runs_a_pipeline_of_built_ins_on_the_package() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("shop");
    write(
        &pkg,
        &[
            (
                "Kptfile",
                "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    config.kubernetes.io/local-config: \"true\"
pipeline:
  mutators:
  - image: gcr.io/kpt-fn/set-namespace:v0.4.2
    configPath: package-context.yaml
  - image: set-image:v0.1.2
    configMap:
      name: nginx
      newTag: \"1.27\"
",
            ),
            ("package-context.yaml", PACKAGE_CONTEXT),
            ("deploy.yaml", DEPLOYMENT),
            (
                "db/Kptfile",
                "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: db
  annotations:
    config.kubernetes.io/local-config: \"true\"
pipeline:
  mutators:
  - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2
    configMap:
      tier: db
",
            ),
            (
                "db/svc.yaml",
                "apiVersion: v1
kind: Service
metadata:
  name: db
  namespace: old
spec:
  ports:
  - port: 5432 # postgres
",
            ),
        ],
    );
    let r = fr(tmp.path(), &["render", "shop", "--truncate-output=false"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("[USING]"),
        "a runner started: {}",
        r.stderr
    );
    let stderr = untimed(&r.stderr);
    assert!(
        stderr.starts_with(
            "Package: \"shop/db\"\n[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2\"\n[PASS] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2\" in <t>\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Package: \"shop\"\n[RUNNING] \"gcr.io/kpt-fn/set-namespace:v0.4.2\"\n[PASS] \"gcr.io/kpt-fn/set-namespace:v0.4.2\" in <t>\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-image:v0.1.2\"\n[PASS] \"ghcr.io/kptdev/krm-functions-catalog/set-image:v0.1.2\" in <t>\n"),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("Successfully executed 3 function(s) in 2 package(s).\n"),
        "{stderr}"
    );
    let files = text_tree(&pkg);
    // The namespace from the package context, the tag from set-image, the
    // comments and field order as they were.
    assert_eq!(
        files["deploy.yaml"],
        written(
            &DEPLOYMENT
                .replace("namespace: old", "namespace: shop")
                .replace("nginx:1.25", "nginx:1.27")
        )
    );
    // The subpackage's labels, then the root's namespace.
    let svc = &files["db/svc.yaml"];
    assert!(svc.contains("  namespace: shop\n"), "{svc}");
    assert!(svc.contains("  labels:\n    tier: db\n"), "{svc}");
    assert!(svc.contains("  - port: 5432 # postgres\n"), "{svc}");
    assert_eq!(files["package-context.yaml"], PACKAGE_CONTEXT);
}

#[test]
fn eval_runs_a_built_in_with_kpts_lines_and_results_file() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    write(&pkg, &[("deploy.yaml", DEPLOYMENT)]);
    let results = tmp.path().join("results");
    let r = fr(
        tmp.path(),
        &[
            "eval",
            "pkg",
            "--image",
            "set-annotations:v0.1.5",
            "--results-dir",
            results.to_str().unwrap(),
            "--",
            "owner=team-a",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        untimed(&r.stderr),
        "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-annotations:v0.1.5\"\n[PASS] \"ghcr.io/kptdev/krm-functions-catalog/set-annotations:v0.1.5\" in <t>\n[Results]: [info] metadata.annotations: set annotations: {\"owner\":\"team-a\"}, [info] spec.template.metadata.annotations: set annotations: {\"owner\":\"team-a\"}\n\nFor complete results, see {}/results.yaml\n".replace("{}", results.to_str().unwrap())
    );
    assert_eq!(
        fs::read_to_string(pkg.join("deploy.yaml")).unwrap(),
        format!(
            "{}    metadata:\n      annotations:\n        owner: team-a\n",
            written(DEPLOYMENT).replace(
                "  namespace: old\n",
                "  namespace: old\n  annotations:\n    owner: team-a\n"
            )
        )
    );
    let written = fs::read_to_string(results.join("results.yaml")).unwrap();
    assert!(
        written.contains("image: ghcr.io/kptdev/krm-functions-catalog/set-annotations:v0.1.5")
            && written.contains("exitCode: 0"),
        "{written}"
    );
}

#[test]
fn a_failing_built_in_is_reported_as_a_failing_container_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    write(&pkg, &[("deploy.yaml", DEPLOYMENT)]);
    let r = fr(
        tmp.path(),
        &["eval", "pkg", "--image", "gcr.io/kpt-fn/set-labels:v0.2.2"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let stderr = untimed(&r.stderr);
    assert!(
        stderr.starts_with("[RUNNING] \"gcr.io/kpt-fn/set-labels:v0.2.2\"\n[FAIL] \"gcr.io/kpt-fn/set-labels:v0.2.2\" in <t>\n[Results]: "),
        "{stderr}"
    );
    assert!(stderr.contains(" Stderr: "), "{stderr}");
    assert!(stderr.ends_with("  Exit code: 1\n\n"), "{stderr}");
    assert_eq!(
        fs::read_to_string(pkg.join("deploy.yaml")).unwrap(),
        DEPLOYMENT
    );
}

#[test]
fn function_configs_choose_what_runs_built_in() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    write(
        tmp.path(),
        &[
            ("pkg/deploy.yaml", DEPLOYMENT),
            (
                "functions/ns.yaml",
                "apiVersion: config.porch.kpt.dev/v1alpha1
kind: FunctionConfig
metadata:
  name: my-ns
spec:
  image: example.com/fns/my-namespace
  goExecutor:
    tags: [v1]
    id: set-namespace
",
            ),
        ],
    );
    // goExecutor: an image of our own runs the built-in function.
    let r = fr(
        tmp.path(),
        &[
            "eval",
            "pkg",
            "--functions",
            "functions",
            "--no-default-builtins",
            "--image",
            "example.com/fns/my-namespace:v1",
            "--",
            "namespace=team-b",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("[USING]"), "{}", r.stderr);
    assert!(
        fs::read_to_string(pkg.join("deploy.yaml"))
            .unwrap()
            .contains("  namespace: team-b\n"),
        "{}",
        r.stderr
    );
    // Without the default, a catalog image is an image like any other:
    // it needs a runner (and here no such image can run).
    let r = fr(
        tmp.path(),
        &[
            "eval",
            "pkg",
            "--no-default-builtins",
            "--image",
            "gcr.io/kpt-fn/set-namespace:v0.4.1",
            "--",
            "namespace=team-c",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("[USING]"), "{}", r.stderr);
    assert!(!r.stderr.contains("[PASS]"), "{}", r.stderr);
    assert!(fs::read_to_string(pkg.join("deploy.yaml"))
        .unwrap()
        .contains("  namespace: team-b\n"));
}

#[test]
fn a_built_ins_output_is_held_to_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    write(&pkg, &[("deploy.yaml", DEPLOYMENT)]);
    let r = fr(
        tmp.path(),
        &[
            "eval",
            "pkg",
            "--max-output-bytes",
            "100",
            "--image",
            "set-labels:v0.2.2",
            "--",
            "app=web",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("100"), "{}", r.stderr);
    assert!(!r.stderr.contains("[PASS]"), "{}", r.stderr);
    assert_eq!(
        fs::read_to_string(pkg.join("deploy.yaml")).unwrap(),
        DEPLOYMENT
    );
}

/// `eval` of `image` with `--process-functions map` (which runs any image
/// the built-ins leave as a process pod) and `extra` flags.
fn eval_with_map(dir: &Path, image: &str, map: &str, extra: &[&str]) -> Run {
    let mut args = vec!["eval", "pkg", "--image", image, "--process-functions", map];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "k=v"]);
    fr(dir, &args)
}

/// Every built-in, under `--builtins=versions` (the default): a release
/// its row reproduces runs built in (no `[USING]` line, the image's
/// program never started); a tag outside runs as the image (here a
/// `--process-functions` program that says so), unless `--builtins=any-tag`.
#[test]
fn each_function_runs_built_in_for_its_releases_and_as_an_image_for_other_tags() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        &[(
            "pkg/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: v\n",
        )],
    );
    let program = common::script(
        tmp.path(),
        "as-image",
        "#!/bin/sh\ncat >/dev/null\necho 'ran as the image' >&2\nexit 1\n",
    );
    let map = tmp.path().join("map.yaml");
    let mut entries = String::new();
    for b in krm_builtins::ALL {
        entries.push_str(&format!("{}: [{program}]\n", b.name));
    }
    fs::write(&map, entries).unwrap();
    let map = map.to_str().unwrap();
    for b in krm_builtins::ALL {
        let versions = b.versions().unwrap();
        for tag in versions.reproduced {
            let image = format!("ghcr.io/kptdev/krm-functions-catalog/{}:{tag}", b.name);
            let run = eval_with_map(tmp.path(), &image, map, &[]);
            assert!(
                !run.stderr.contains("[USING]") && !run.stderr.contains("ran as the image"),
                "{image} did not run built in:\n{}",
                run.stderr
            );
        }
        for image in [
            format!("{}:v9.9.9", b.name),
            format!("gcr.io/kpt-fn/{}:latest", b.name),
        ] {
            let run = eval_with_map(tmp.path(), &image, map, &[]);
            assert_eq!(run.code, 1, "{image}: {}", run.stderr);
            assert!(
                run.stderr.contains("[USING] process: ") && run.stderr.contains("ran as the image"),
                "{image} did not run as an image:\n{}",
                run.stderr
            );
            let any = eval_with_map(tmp.path(), &image, map, &["--builtins=any-tag"]);
            assert!(
                !any.stderr.contains("[USING]") && !any.stderr.contains("ran as the image"),
                "{image} with --builtins=any-tag did not run built in:\n{}",
                any.stderr
            );
        }
    }
}

/// A tag outside the table with nothing that can run it as an image: the
/// error says why it did not run built in, which releases do, and how to
/// opt in.
#[test]
fn with_nothing_to_run_the_image_the_error_says_which_releases_are_built_in() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        &[(
            "pkg/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
        )],
    );
    let span = krm_builtins::find("set-namespace")
        .and_then(|b| b.versions())
        .unwrap()
        .span();
    // An empty map: eval goes on to the engine when one runs (which cannot
    // pull here), else to the process backend, which runs nothing: either
    // way the image cannot run.
    let map = tmp.path().join("map.yaml");
    fs::write(&map, "{}\n").unwrap();
    let run = fr(
        tmp.path(),
        &[
            "eval",
            "pkg",
            "--image",
            "set-namespace:v0.4",
            "--process-functions",
            map.to_str().unwrap(),
            "--",
            "namespace=prod",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    for says in [
        "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4: tag v0.4, which moves or is not a release",
        &format!("answers as {span} only"),
        "--builtins=any-tag",
        "goExecutor",
    ] {
        assert!(run.stderr.contains(says), "{says:?} not in:\n{}", run.stderr);
    }
    assert!(!fs::read_to_string(tmp.path().join("pkg/cm.yaml"))
        .unwrap()
        .contains("prod"));
}
