//! What `render` and `eval` do as kpt v1.0.0-beta.67 does and the
//! installed kpt (beta.56) does not, so these are checked against facts
//! from beta.67's source (cited; `pkg/lib/kptops/render_executor.go` is
//! "the executor" below) rather than against a run of kpt: the render
//! status in the root Kptfile, a package's own resources before its
//! subpackages', `kpt.dev/save-on-render-failure`,
//! `kpt.dev/bfs-rendering`, semver `tag:`s, the image prefix, and
//! `configPath`'s beta.67 messages. The functions are local commands
//! (`exec:`), so no image or runner is needed but for the tags' test,
//! whose images are built here `FROM scratch` for the local engine to list.

#![allow(clippy::unwrap_used)]

mod common;

use common::kpt::functions;
use common::{run_in, text_tree, tree, Run};

use std::fs;
use std::path::Path;

use e2e_tests::{build_image_with_files, prerequisite, remove_images, require_docker, require_kpt};

fn ours() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_function-runner"))
}

fn fr(cwd: &Path, args: &[&str]) -> Run {
    run_in(ours(), cwd, args, None)
}

fn kptfile(dir: &Path, name: &str, annotations: &[&str], pipeline: &str) {
    fs::create_dir_all(dir).unwrap();
    let mut text = format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n");
    if !annotations.is_empty() {
        text.push_str("  annotations:\n");
        for a in annotations {
            text.push_str(&format!("    {a}: \"true\"\n"));
        }
    }
    text.push_str(pipeline);
    fs::write(dir.join("Kptfile"), text).unwrap();
}

fn config_map(dir: &Path, file: &str, name: &str) {
    fs::write(
        dir.join(file),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name} # kept\ndata:\n  k: v\n"
        ),
    )
    .unwrap();
}

fn mutators(execs: &[&str]) -> String {
    let mut s = "pipeline:\n  mutators:\n".to_string();
    for e in execs {
        s.push_str(&format!("  - exec: {e}\n"));
    }
    s
}

/// The root Kptfile's `status`, as data.
fn status(dir: &Path) -> serde_yaml_ng::Value {
    let text = fs::read_to_string(dir.join("Kptfile")).unwrap();
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    v["status"].clone()
}

/// The names of the items of a ResourceList file, in order.
fn item_names(path: &Path) -> Vec<String> {
    let v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    v["items"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// A package `pkg` with a ConfigMap, and a subpackage `sub` with one.
fn two_packages(root: &Path, root_fns: &[&str], sub_fns: &[&str], flags: &[&str]) {
    let pkg = root.join("pkg");
    kptfile(&pkg, "pkg", flags, &mutators(root_fns));
    config_map(&pkg, "cm.yaml", "cm-root");
    kptfile(&pkg.join("sub"), "sub", &[], &mutators(sub_fns));
    config_map(&pkg.join("sub"), "cm.yaml", "cm-sub");
}

/// A working directory outside the package (kpt then writes its paths
/// absolute, and the root's as `.`).
fn elsewhere(w: &Path) -> std::path::PathBuf {
    let d = w.join("elsewhere");
    fs::create_dir_all(&d).unwrap();
    d
}

/// The executor's `updateRenderStatus` after an in-place render that
/// passed (the Kptfile marshalled from kpt's types, the `Rendered`
/// condition, every step in order across the packages, `exitCode` always
/// written), the same bytes again on a second render, none with `-o`,
/// and the failure's message (kpt's error with the root written as `.`,
/// or relative to the working directory) and steps.
#[test]
fn the_render_status_as_beta_67_writes_it() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    two_packages(w, &[&f.annotate], &[&f.annotate], &[]);
    // A comment and a compact list: kpt's marshalling drops the one and
    // indents the other.
    let root_kptfile = w.join("pkg/Kptfile");
    let text = fs::read_to_string(&root_kptfile).unwrap();
    fs::write(
        &root_kptfile,
        text.replace("name: pkg\n", "name: pkg # the root\n"),
    )
    .unwrap();
    let fresh = text_tree(w);

    // `-o stdout` and `-o DIR` leave the package (and its Kptfile) alone.
    let r = fr(w, &["render", "pkg", "--allow-exec", "-o", "stdout"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!String::from_utf8_lossy(&r.stdout).contains("Rendered"));
    let r = fr(w, &["render", "pkg", "--allow-exec", "-o", "out"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!fs::read_to_string(w.join("out/Kptfile"))
        .unwrap()
        .contains("status:"));
    fs::remove_dir_all(w.join("out")).unwrap();
    assert_eq!(text_tree(w), fresh, "-o wrote into the package");

    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let a = &f.annotate;
    assert_eq!(
        fs::read_to_string(&root_kptfile).unwrap(),
        format!(
            "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
  annotations:
    example.com/touched: \"yes\"
pipeline:
  mutators:
    - exec: {a}
status:
  conditions:
    - type: Rendered
      status: \"True\"
      reason: RenderSuccess
  renderStatus:
    mutationSteps:
      - exec: {a}
        exitCode: 0
      - exec: {a}
        exitCode: 0
"
        )
    );
    // The subpackage's Kptfile is a resource like any other: written as
    // read, with what the function did, and no status.
    let sub = fs::read_to_string(w.join("pkg/sub/Kptfile")).unwrap();
    assert!(!sub.contains("status:") && sub.contains("touched"), "{sub}");
    // A second render changes nothing: no time is recorded.
    let once = tree(w);
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(tree(w), once, "a second render changed the package");

    // A failure in the subpackage: kpt's error, relative to the working
    // directory (`pkg pkg/sub` from the package's parent; a path below
    // none of it is absolute, and the root's path is then written `.`).
    fs::write(
        w.join("pkg/sub/Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n{}",
            mutators(&[&f.annotate, &f.fail])
        ),
    )
    .unwrap();
    let before = tree(w);
    for (cwd, message) in [
        (
            w.to_path_buf(),
            "pkg.render: pkg pkg/sub:\n\tpipeline.run: already handled error",
        ),
        (
            elsewhere(w),
            "pkg.render: pkg ./sub:\n\tpipeline.run: already handled error",
        ),
    ] {
        let pkg = w.join("pkg");
        let r = fr(&cwd, &["render", pkg.to_str().unwrap(), "--allow-exec"]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        let s = status(&pkg);
        let condition = &s["conditions"][0];
        assert_eq!(condition["type"], "Rendered");
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["reason"], "RenderFailed");
        assert_eq!(condition["message"], message);
        let steps = s["renderStatus"]["mutationSteps"].as_sequence().unwrap();
        assert_eq!(steps.len(), 2, "{s:?}");
        assert_eq!(steps[0]["exitCode"], 0);
        assert_eq!(steps[1]["exec"], f.fail.as_str());
        assert_eq!(steps[1]["exitCode"], 1);
        assert_eq!(steps[1]["results"].as_sequence().unwrap().len(), 5);
        // The results of severity `error`, again.
        assert_eq!(steps[1]["errorResults"].as_sequence().unwrap().len(), 1);
        assert_eq!(
            s["renderStatus"]["errorSummary"],
            format!("{}: exit code 1", f.fail).as_str()
        );
        // Nothing else written.
        let mut after = tree(w);
        let mut expected = before.clone();
        after.remove("pkg/Kptfile");
        expected.remove("pkg/Kptfile");
        assert_eq!(after, expected);
    }
}

/// beta.67's `hydrate` (`render_executor.go@v1.0.0-beta.67:417-505`,
/// since beta.61.1) puts a package's own resources before its
/// subpackages' in its pipeline's input and in `-o stdout`; beta.56 put
/// them after.
#[test]
fn a_packages_own_resources_come_before_its_subpackages() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let tee = format!("{} {}", f.tee, w.join("sent.yaml").display());
    two_packages(w, &[&tee], &["cat"], &[]);
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        item_names(&w.join("sent.yaml")),
        ["pkg", "cm-root", "sub", "cm-sub"]
    );
    // The subpackage's pipeline runs first, as before.
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("Package"))
        .collect();
    assert_eq!(lines, ["Package: \"pkg/sub\"", "Package: \"pkg\""]);
}

fn summary(stderr: &str) -> Option<&str> {
    stderr.lines().find(|l| {
        l.starts_with("Partially") || l.starts_with("Failed to") || l.starts_with("Successfully")
    })
}

/// `kpt.dev/save-on-render-failure: "true"` on the root Kptfile
/// (`render_executor.go@v1.0.0-beta.67:96-217`): after a failure the
/// package is written as far as the render got (a failing mutator's
/// output dropped, the earlier mutators' kept; a failing validator's
/// package fully mutated), nothing deleted, and how far it got said;
/// what `hydrate` passes up stops one level below the root, so a failure
/// deeper than the root's children writes nothing but the status.
#[test]
fn save_on_render_failure_writes_what_the_render_got_to() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let save = ["kpt.dev/save-on-render-failure"];
    struct Case<'a> {
        what: &'a str,
        root: Vec<&'a str>,
        sub: Vec<&'a str>,
        flags: &'a [&'a str],
        summary: Option<&'a str>,
        touched: &'a [&'a str],
    }
    let cases = [
        Case {
            what: "the root's third mutator",
            root: vec![&f.annotate, &f.add_delete, &f.fail],
            sub: vec!["cat"],
            flags: &save,
            summary: Some("Partially executed 3 function(s) in 2 package(s)."),
            touched: &[
                "pkg/Kptfile",
                "pkg/cm.yaml",
                "pkg/sub/Kptfile",
                "pkg/sub/cm.yaml",
            ],
        },
        Case {
            what: "the root's first mutator",
            root: vec![&f.fail, &f.annotate],
            sub: vec![],
            flags: &save,
            summary: Some("Failed to execute any functions in 2 package(s)."),
            touched: &[],
        },
        Case {
            what: "a child's second mutator",
            root: vec![&f.annotate],
            sub: vec![&f.annotate, &f.fail],
            flags: &save,
            summary: Some("Partially executed 1 function(s) in 2 package(s)."),
            touched: &["pkg/sub/Kptfile", "pkg/sub/cm.yaml"],
        },
        Case {
            what: "without the annotation",
            root: vec![&f.annotate, &f.fail],
            sub: vec![],
            flags: &[],
            summary: None,
            touched: &[],
        },
    ];
    for case in &cases {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        two_packages(w, &case.root, &case.sub, case.flags);
        // A second resource in the root, for add-delete to drop.
        fs::write(
            w.join("pkg/cm2.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm2\n",
        )
        .unwrap();
        let before = text_tree(w);
        let r = fr(w, &["render", "pkg", "--allow-exec"]);
        assert_eq!(r.code, 1, "{}: {}", case.what, r.stderr);
        assert_eq!(
            summary(&r.stderr),
            case.summary,
            "{}: {}",
            case.what,
            r.stderr
        );
        let after = text_tree(w);
        let touched: Vec<&str> = after
            .iter()
            .filter(|(path, text)| {
                path.as_str() != "pkg/Kptfile"
                    && before.get(*path) != Some(*text)
                    && text.contains("example.com/touched")
            })
            .map(|(path, _)| path.as_str())
            .collect();
        let expected: Vec<&str> = case
            .touched
            .iter()
            .copied()
            .filter(|p| *p != "pkg/Kptfile")
            .collect();
        assert_eq!(
            touched, expected,
            "{}: files the failed render wrote",
            case.what
        );
        // Nothing is deleted: cm2 (dropped by add-delete) stays.
        assert!(after.contains_key("pkg/cm2.yaml"), "{}", case.what);
        if case.what == "the root's third mutator" {
            // What add-delete added went where its paths say.
            assert!(after.contains_key("pkg/sub/placed.yaml"), "{after:?}");
            assert!(!r.stderr.contains("Successfully"), "{}", r.stderr);
        }
        // Whatever was saved, the status says how it ended.
        assert_eq!(
            status(&w.join("pkg"))["conditions"][0]["reason"],
            "RenderFailed"
        );
    }

    // A failure two levels down: nothing is written but the status
    // (the executor's `hydrate` hands no output past one parent).
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    kptfile(&pkg, "pkg", &save, &mutators(&[&f.annotate]));
    config_map(&pkg, "cm.yaml", "cm-root");
    kptfile(&pkg.join("a"), "a", &[], &mutators(&[&f.annotate]));
    kptfile(
        &pkg.join("a/b"),
        "b",
        &[],
        &mutators(&[&f.annotate, &f.fail]),
    );
    config_map(&pkg.join("a/b"), "cm.yaml", "cm-b");
    let before = tree(w);
    let r = fr(
        &elsewhere(w),
        &["render", pkg.to_str().unwrap(), "--allow-exec"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        summary(&r.stderr),
        Some("Partially executed 1 function(s) in 3 package(s).")
    );
    let mut after = tree(w);
    let mut expected = before;
    after.remove("pkg/Kptfile");
    expected.remove("pkg/Kptfile");
    assert_eq!(after, expected, "a failure two levels down wrote resources");
    assert_eq!(
        status(&pkg)["conditions"][0]["message"],
        "pkg.render: pkg ./a:\n\tpkg ./a/b:\n\tpipeline.run: already handled error"
    );

    // A failing validator: the package is saved fully mutated.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    kptfile(
        &pkg,
        "pkg",
        &save,
        &format!(
            "{}  validators:\n  - exec: {}\n",
            mutators(&[&f.annotate]),
            f.fail
        ),
    );
    config_map(&pkg, "cm.yaml", "cm-root");
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        summary(&r.stderr),
        Some("Partially executed 1 function(s) in 1 package(s).")
    );
    assert!(fs::read_to_string(pkg.join("cm.yaml"))
        .unwrap()
        .contains("touched"));
    let s = status(&pkg);
    assert_eq!(s["renderStatus"]["validationSteps"][0]["exitCode"], 1);
}

/// `kpt.dev/bfs-rendering: "true"` (`hydrateBfsOrder`,
/// `render_executor.go@v1.0.0-beta.67:511-707`): the packages top down,
/// each on itself and every package below it (not its parent), what its
/// pipeline gives back going to the package each resource belongs to;
/// with save-on-failure, every package as far as the render got.
#[test]
fn bfs_rendering_runs_the_packages_top_down() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let root_tee = format!("{} {}", f.tee, w.join("root-sent.yaml").display());
    let sub_tee = format!("{} {}", f.tee, w.join("sub-sent.yaml").display());
    two_packages(
        w,
        &[&root_tee, &f.annotate],
        &[&sub_tee],
        &["kpt.dev/bfs-rendering"],
    );
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("Package"))
        .collect();
    assert_eq!(lines, ["Package: \"pkg\"", "Package: \"pkg/sub\""]);
    assert_eq!(
        item_names(&w.join("root-sent.yaml")),
        ["pkg", "cm-root", "sub", "cm-sub"]
    );
    // The subpackage sees itself only, as its parent left it.
    assert_eq!(item_names(&w.join("sub-sent.yaml")), ["sub", "cm-sub"]);
    assert!(fs::read_to_string(w.join("sub-sent.yaml"))
        .unwrap()
        .contains("example.com/touched"));
    assert!(fs::read_to_string(w.join("pkg/sub/cm.yaml"))
        .unwrap()
        .contains("touched"));

    // The subpackage fails, saving: the root's changes to every package
    // are written; kpt's message names the failing package inside the
    // pipeline.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    two_packages(
        w,
        &[&f.annotate],
        &[&f.fail],
        &["kpt.dev/bfs-rendering", "kpt.dev/save-on-render-failure"],
    );
    let pkg = w.join("pkg");
    let r = fr(
        &elsewhere(w),
        &["render", pkg.to_str().unwrap(), "--allow-exec"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        summary(&r.stderr),
        Some("Partially executed 1 function(s) in 2 package(s).")
    );
    for file in ["cm.yaml", "sub/cm.yaml", "sub/Kptfile"] {
        assert!(
            fs::read_to_string(pkg.join(file))
                .unwrap()
                .contains("touched"),
            "{file}"
        );
    }
    assert_eq!(
        status(&pkg)["conditions"][0]["message"],
        "pkg.render: pkg .:\n\tpipeline.run: pkg ./sub: already handled error"
    );
}

/// A Kptfile that today's kpt rendered (`status.renderStatus`, a
/// function's `tag`, the generic upstream lock: beta.67's types) renders
/// again, its old status replaced; the installed beta.56 refuses it,
/// the message this issue opened with.
#[test]
fn a_package_todays_kpt_rendered_renders() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    fs::create_dir_all(&pkg).unwrap();
    let kptfile = format!(
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
upstreamLock:
  type: generic
  generic:
    storeID: s
    resourceID: r
    resourceVersion: \"3\"
pipeline:
  mutators:
    - exec: {a}
      tag: ~0.4
status:
  conditions:
    - type: Ready
      status: \"True\"
    - type: Rendered
      status: \"False\"
      reason: RenderFailed
      message: old
  renderStatus:
    mutationSteps:
      - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.5
        exitCode: 1
        results:
          - message: old
            severity: error
            field:
              path: a
              currentValue:
                b: c
            file:
              path: x.yaml
              index: 2
    errorSummary: old
",
        a = f.annotate
    );
    fs::write(pkg.join("Kptfile"), &kptfile).unwrap();
    config_map(&pkg, "cm.yaml", "cm");
    if let Some(kpt) = prerequisite(require_kpt()) {
        let k = run_in(&kpt, w, &["fn", "render", "pkg", "--allow-exec"], None);
        assert_eq!(k.code, 1);
        assert!(
            k.stderr
                .contains("field renderStatus not found in type v1.Status"),
            "{}",
            k.stderr
        );
    }
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = status(&pkg);
    assert_eq!(s["conditions"][0]["type"], "Ready");
    assert_eq!(s["conditions"][1]["reason"], "RenderSuccess");
    assert_eq!(s["conditions"].as_sequence().unwrap().len(), 2);
    assert_eq!(
        s["renderStatus"]["mutationSteps"][0]["exec"],
        f.annotate.as_str()
    );
    assert!(s["renderStatus"].get("errorSummary").is_none(), "{s:?}");
    // A field of a wrong type is still refused, with its line.
    fs::write(
        pkg.join("Kptfile"),
        kptfile.replace("index: 2", "index: two"),
    )
    .unwrap();
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("line 36: cannot unmarshal !!str `two` into int"),
        "{}",
        r.stderr
    );
}

/// `configPath`'s beta.67 messages: a missing file (`failed to open
/// functionConfig from path ...`, `api/kptfile/v1/validation.go`) and a
/// file of a subpackage (`Pkg.ValidatePipeline`,
/// `pkg/lib/pkg/pkg.go@v1.0.0-beta.67:416-494`: every one is collected,
/// the command prints the first, the status holds all).
#[test]
fn config_paths_refused_in_beta_67s_words() {
    let fns = tempfile::tempdir().unwrap();
    let f = functions(fns.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    kptfile(
        &pkg,
        "pkg",
        &[],
        &format!(
            "pipeline:\n  mutators:\n  - image: set-labels:v0.2\n    configPath: sub/cfg.yaml\n  - exec: {}\n    name: mine\n    configPath: ./sub/cfg.yaml\n",
            f.annotate
        ),
    );
    kptfile(&pkg.join("sub"), "sub", &[], "");
    config_map(&pkg.join("sub"), "cfg.yaml", "cfg");
    let r = fr(
        &elsewhere(w),
        &["render", pkg.to_str().unwrap(), "--allow-exec"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let first = "Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: \"sub/cfg.yaml\"\nReason: functionConfig resource for mutator \"set-labels\" is missing from path \"sub/cfg.yaml\", this also occurs if \"sub/cfg.yaml\" is part of a subpackage\n";
    assert!(r.stderr.ends_with(&format!("{first} \n")), "{}", r.stderr);
    let second = "Kptfile is invalid:\nField: `pipeline.mutators[1].configPath`\nValue: \"./sub/cfg.yaml\"\nReason: functionConfig resource for mutator \"mine\" is missing from path \"./sub/cfg.yaml\", this also occurs if \"./sub/cfg.yaml\" is part of a subpackage\n";
    assert_eq!(
        status(&pkg)["conditions"][0]["message"],
        format!("pkg.render: pkg .: {first}\n{second}").as_str()
    );

    fs::remove_file(pkg.join("sub/cfg.yaml")).unwrap();
    let r = fr(w, &["render", "pkg", "--allow-exec"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "Reason: failed to open functionConfig from path \"sub/cfg.yaml\": open {}: no such file or directory\n",
            pkg.join("sub/cfg.yaml").display()
        )),
        "{}",
        r.stderr
    );
}

/// The image prefix (`pkg/lib/runneroptions/runneroptions.go@v1.0.0-beta.67:25-110`):
/// `ghcr.io/kptdev/krm-functions-catalog/` by default, `KPT_IMAGE_PREFIX`
/// over it, `--image-prefix` (or our `--default-image-prefix`) over both;
/// render adds `:latest` to a name without tag or digest, eval does not;
/// a prefix that is not a registry path is refused in beta.67's words.
#[test]
fn short_names_under_the_image_prefix() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    kptfile(
        &pkg,
        "pkg",
        &[],
        "pipeline:\n  mutators:\n  - image: set-labels\n    configMap:\n      a: b\n",
    );
    config_map(&pkg, "cm.yaml", "cm");
    let running = |r: &Run| {
        r.stderr
            .lines()
            .find(|l| l.starts_with("[RUNNING]"))
            .unwrap_or_default()
            .to_string()
    };
    // `:latest` moves: built in only when asked (docs/builtins.md).
    let r = fr(w, &["render", "pkg", "-o", "stdout", "--builtins=any-tag"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        running(&r),
        "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\""
    );
    let env = |prefix: &str, args: &[&str]| {
        let out = e2e_tests::output_within(
            std::process::Command::new(ours())
                .current_dir(w)
                .args(args)
                .env("KPT_IMAGE_PREFIX", prefix),
            None,
            std::time::Duration::from_secs(60),
        )
        .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    // The catalog's other registry: still the built-in.
    let r = env(
        "gcr.io/kpt-fn",
        &["render", "pkg", "-o", "stdout", "--builtins=any-tag"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(running(&r), "[RUNNING] \"gcr.io/kpt-fn/set-labels:latest\"");
    for flag in ["--image-prefix", "--default-image-prefix"] {
        let r = env(
            "example.com/elsewhere",
            &[
                "eval",
                "pkg",
                "-i",
                "set-labels",
                flag,
                "gcr.io/kpt-fn/",
                "-o",
                "stdout",
                "--builtins=any-tag",
                "--",
                "a=b",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            running(&r),
            "[RUNNING] \"gcr.io/kpt-fn/set-labels\"",
            "{flag}"
        );
    }
    for (command, prefix, why) in [
        (
            "eval",
            "https://r.io/x",
            "must not include a scheme (e.g. https://)",
        ),
        ("render", "r.io/x?y", "must not contain '?' or '#'"),
        ("render", "/just/a/path/", "must be a valid registry path"),
    ] {
        let mut args = vec![command, "pkg", "--image-prefix", prefix];
        if command == "eval" {
            args.extend(["-i", "set-labels"]);
        }
        let r = fr(w, &args);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert_eq!(
            r.stderr,
            format!("error: invalid image prefix {prefix:?}: {why}\n")
        );
    }
}

/// `eval --tag` (`thirdparty/cmdconfig/commands/cmdeval/cmdeval.go@v1.0.0-beta.67:56,191-198`):
/// not used to run the function (beta.67 runs `--image` as given), saved
/// with `--save` as the function's `tag:`, after `configMap` (its place
/// in kpt's `Function`), for render to resolve.
#[test]
fn eval_tag_is_saved_for_render() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    kptfile(&pkg, "pkg", &[], "");
    config_map(&pkg, "cm.yaml", "cm");
    let r = fr(
        w,
        &[
            "eval",
            "pkg",
            "-i",
            "set-namespace:v0.4.1",
            "--tag",
            "~0.4",
            "-s",
            "-t",
            "mutator",
            "--",
            "namespace=shop",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.starts_with(
            "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1\"\n"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stderr.ends_with(
        "Added \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1\" as mutator in the Kptfile.\n"
    ));
    assert_eq!(
        fs::read_to_string(pkg.join("Kptfile")).unwrap(),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1\n      configMap:\n        namespace: shop\n      tag: ~0.4\n"
    );
}

/// A Kptfile function's `tag:` (`pkg/fn/runtime/tag_resolution.go@v1.0.0-beta.67`):
/// a constraint takes the highest tag that meets it among the local
/// engine's images (the registry's too; ghcr.io is out of reach here), and
/// the function runs as that image (built in, as the catalog's image of
/// any version is here), named so on its lines and in the status; a
/// version is used as written without listing; no match is kpt's error,
/// the step recorded without an image, before any function of the
/// package runs.
#[test]
fn semver_tags_resolved_from_the_local_engine() {
    let Some(()) = prerequisite(require_docker()) else {
        return;
    };
    // Tags no real catalog image has, so nothing else here uses them.
    let repo = "ghcr.io/kptdev/krm-functions-catalog/set-namespace";
    let tags = ["v0.4.97", "v0.4.98", "v0.4.99-rc.1", "v0.5.97"];
    let images: Vec<String> = tags.iter().map(|t| format!("{repo}:{t}")).collect();
    struct Cleanup(Vec<String>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            remove_images(&self.0);
        }
    }
    let _cleanup = Cleanup(images.clone());
    let ctx = tempfile::tempdir().unwrap();
    fs::write(ctx.path().join("marker"), "krm-runtime tag test").unwrap();
    build_image_with_files(
        &images[0],
        "FROM scratch\nCOPY marker /marker\n",
        &[],
        &[("marker", &ctx.path().join("marker"))],
    )
    .unwrap();
    for image in &images[1..] {
        e2e_tests::docker(&["tag", &images[0], image]).unwrap();
    }

    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pkg = w.join("pkg");
    let render_with = |tag: &str, builtins: &str| {
        kptfile(
            &pkg,
            "pkg",
            &[],
            &format!("pipeline:\n  mutators:\n  - image: set-namespace\n    tag: \"{tag}\"\n    configMap:\n      namespace: shop\n"),
        );
        config_map(&pkg, "cm.yaml", "cm");
        let r = fr(w, &["render", "pkg", builtins]);
        (r, status(&pkg))
    };
    // These tags are no releases: the resolved image runs built in only
    // when asked to (docs/builtins.md); the default is tested below.
    let render = |tag: &str| render_with(tag, "--builtins=any-tag");
    for (tag, image) in [
        ("~0.4.97", "v0.4.98"),
        // Masterminds: `<= 0.5` (a version without its patch) is any 0.5.x.
        ("0.4.97 - 0.5", "v0.5.97"),
        ("0.4.97 - 0.5.0", "v0.4.98"),
        (">=0.4.97", "v0.5.97"),
        ("v0.4.1", "v0.4.1"),
    ] {
        let (r, s) = render(tag);
        assert_eq!(r.code, 0, "{tag}: {}", r.stderr);
        let resolved = format!("{repo}:{image}");
        assert!(
            r.stderr.contains(&format!("[RUNNING] \"{resolved}\"\n")),
            "{tag}: {}",
            r.stderr
        );
        assert_eq!(
            s["renderStatus"]["mutationSteps"][0]["image"],
            resolved.as_str(),
            "{tag}"
        );
        assert!(fs::read_to_string(pkg.join("cm.yaml"))
            .unwrap()
            .contains("namespace: shop"));
        // The pipeline keeps its own words.
        let kf = fs::read_to_string(pkg.join("Kptfile")).unwrap();
        assert!(kf.contains("    - image: set-namespace\n"), "{kf}");
    }
    let (r, s) = render("~9.9");
    assert_eq!(r.code, 1, "{}", r.stderr);
    let why = "no tag could be found matching the version constraint \"~9.9\"";
    assert!(
        r.stderr.ends_with(&format!("Error: {why} \n")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("[RUNNING]"), "{}", r.stderr);
    let step = &s["renderStatus"]["mutationSteps"][0];
    assert!(step.get("image").is_none(), "{s:?}");
    assert_eq!(step["executionError"], why);
    assert_eq!(
        s["renderStatus"]["errorSummary"],
        format!(": {why}").as_str()
    );
    // By default, a constraint resolved to a tag the built-in does not
    // reproduce runs that image (this one, FROM scratch, has no
    // entrypoint); one resolved to a release it reproduces runs built in.
    let (r, _) = render_with("~0.4.97", "--builtins=versions");
    assert_eq!(r.code, 1, "{}", r.stderr);
    for says in [
        &format!("[RUNNING] \"{repo}:v0.4.98\"\n"),
        "the image has no Entrypoint and no Cmd",
        "tag v0.4.98, a release this build has not read",
    ] {
        assert!(r.stderr.contains(says), "{says:?}: {}", r.stderr);
    }
    // (A runner is made ready, as a constraint may resolve to any tag;
    // the function then runs built in: the image has no entrypoint.)
    let (r, _) = render_with("v0.4.2", "--builtins=versions");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(fs::read_to_string(pkg.join("cm.yaml"))
        .unwrap()
        .contains("namespace: shop"));
    // A tag that is neither: kpt's warning, then used as written.
    let (r, s) = render("latest");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "tag_resolution.go:91] Tag \"latest\" could not be parsed as a semantic version"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        s["renderStatus"]["mutationSteps"][0]["image"],
        format!("{repo}:latest").as_str()
    );
}
