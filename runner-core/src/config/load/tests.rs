use std::path::{Path, PathBuf};

use crate::config::test_support::*;
use crate::config::*;

#[test]
fn other_kinds_are_skipped_and_bad_documents_reported() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n---\n{}---\n# empty\n---\n- a list\n---\n{}",
        doc("good-1", "image: a\nbinaryExecutor:\n  tags: [v1]\n  path: /a\n"),
        doc("bad", "image: b\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: x\n"),
        doc("good-2", "image: c\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "functions/a.yaml");
    assert_eq!(
        report
            .configs
            .iter()
            .map(FunctionConfig::display_name)
            .collect::<Vec<_>>(),
        vec!["porch-fn-system/good-1", "porch-fn-system/good-2"]
    );
    assert_eq!(
        report.configs[1].source,
        Some(DocLocation {
            source: "functions/a.yaml".to_string(),
            document: Some(6)
        })
    );
    assert_eq!(
        error_strings(&report),
        vec![
            "functions/a.yaml (document 3): spec.podExecutor.maxParallelExecutions: invalid type: string \"x\", expected u32 (at line 26, column 28)"
        ]
    );
    match &report.errors[0] {
        ConfigError::Invalid {
            at,
            field,
            message,
            position,
        } => {
            assert_eq!(at.source, "functions/a.yaml");
            assert_eq!(at.document, Some(3));
            assert_eq!(field, "spec.podExecutor.maxParallelExecutions");
            assert_eq!(message, "invalid type: string \"x\", expected u32");
            assert_eq!(
                *position,
                Some(Position {
                    line: 26,
                    column: 28
                })
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn api_versions() {
    let other_version =
        "apiVersion: config.porch.kpt.dev/v1beta1\nkind: FunctionConfig\nspec: {image: fn}\n";
    let report = parse_str(other_version, "f.yaml");
    assert!(report.configs.is_empty());
    assert_eq!(
        error_strings(&report),
        vec!["f.yaml (document 1): apiVersion: unsupported apiVersion \"config.porch.kpt.dev/v1beta1\" for kind FunctionConfig (expected \"config.porch.kpt.dev/v1alpha1\")"]
    );
    // A FunctionConfig of another API group is somebody else's kind: skipped.
    let other_group = "apiVersion: example.com/v1\nkind: FunctionConfig\nspec: {image: [1]}\n";
    let report = parse_str(other_group, "f.yaml");
    assert!(report.configs.is_empty());
    assert!(report.errors.is_empty());
}

#[test]
fn syntax_errors_stop_the_file_but_keep_earlier_documents() {
    let text = format!(
        "{}---\nkind: [unclosed\n---\n{}",
        doc("before", "image: a\npodExecutor:\n  tags: [v1]\n"),
        doc("after", "image: b\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "s.yaml");
    assert_eq!(
        report
            .configs
            .iter()
            .map(FunctionConfig::display_name)
            .collect::<Vec<_>>(),
        vec!["porch-fn-system/before"]
    );
    assert_eq!(report.errors.len(), 1);
    let err = &report.errors[0];
    assert_eq!(
        err.location(),
        Some(&DocLocation {
            source: "s.yaml".to_string(),
            document: Some(2)
        })
    );
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("s.yaml (document 2): "),
        "{err}"
    );
}

#[test]
fn a_duplicate_key_spoils_only_its_document() {
    let text = format!(
        "{}---\n{}",
        doc("dup", "image: a\nimage: b\npodExecutor:\n  tags: [v1]\n"),
        doc("after", "image: c\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "d.yaml");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.configs[0].metadata.name, "after");
    assert_eq!(report.errors.len(), 1);
    assert_eq!(
        report.errors[0].location().and_then(|l| l.document),
        Some(1)
    );
}

#[test]
fn json_documents_parse() {
    let text = "{\n\t\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\",\n\t\"kind\": \"FunctionConfig\",\n\t\"metadata\": {\"name\": \"j\"},\n\t\"spec\": {\"image\": \"fn\", \"podExecutor\": {\"tags\": [\"v1\"], \"timeToLive\": \"1h\"}}\n}\n";
    let configs = parse_ok(text);
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].display_name(), "j");
    let bad = "{\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\", \"kind\": \"FunctionConfig\", \"spec\": {\"image\": {\"a\": 1}}}";
    let report = parse_str(bad, "b.json");
    assert_eq!(
        error_strings(&report),
        vec!["b.json (document 1): spec.image: invalid type: map, expected a string (at line 1, column 93)"]
    );
}

#[test]
fn relative_binary_paths() {
    let text = doc(
        "r",
        "image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: bin/fn\n",
    );
    let report = parse_str(&text, "r.yaml");
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("bin/fn"))
    );
    let report = parse_str_with(
        &text,
        "r.yaml",
        Some(Path::new("/fns")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("/fns/bin/fn"))
    );
    let abs = doc(
        "a",
        "image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: /usr/bin/fn\n",
    );
    let report = parse_str_with(
        &abs,
        "a.yaml",
        Some(Path::new("/fns")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("/usr/bin/fn"))
    );
}

#[test]
fn duplicates_within_one_text() {
    let text = format!(
        "{}---\n{}",
        doc("one", "image: fn\npodExecutor:\n  tags: [v1]\n"),
        doc(
            "two",
            "image: fn\nprefixes: [\"\"]\ngoExecutor:\n  tags: [v1]\n"
        ),
    );
    let report = parse_str(&text, "d.yaml");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(
        error_strings(&report),
        vec![format!(
            "d.yaml (document 2): spec.goExecutor.tags[0]: image \"{PREFIX}/fn:v1\" is already configured by FunctionConfig porch-fn-system/one (d.yaml (document 1)); this FunctionConfig is ignored"
        )]
    );
    // With another default prefix the two names differ... but both configs use the short
    // name, so they still collide.
    let report = parse_str_with(&text, "d.yaml", None, "example.com");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.errors.len(), 1);
}

// ----------------------------------------------------------------------------------------
// Directories
// ----------------------------------------------------------------------------------------

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write fixture");
}

#[test]
fn load_dir_loads_good_files_and_reports_bad_documents() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write(
        dir,
        "a.yaml",
        &format!(
            "{}---\n{}",
            doc(
                "a-good",
                "image: a\nbinaryExecutor:\n  tags: [v1]\n  path: bin/a\n"
            ),
            doc(
                "a-bad",
                "image: b\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: x\n"
            ),
        ),
    );
    write(
        dir,
        "b.yml",
        &doc("b", "image: b\npodExecutor:\n  tags: [v1]\n"),
    );
    write(
        dir,
        "c.JSON",
        "{\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\", \"kind\": \"FunctionConfig\", \"metadata\": {\"name\": \"c\"}, \"spec\": {\"image\": \"c\", \"goExecutor\": {\"tags\": [\"v1\"]}}}",
    );
    write(dir, "broken.yaml", "kind: [\n");
    write(
        dir,
        "notes.txt",
        &doc("txt", "image: t\npodExecutor:\n  tags: [v1]\n"),
    );
    write(
        dir,
        ".hidden.yaml",
        &doc("hidden", "image: h\npodExecutor:\n  tags: [v1]\n"),
    );
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    write(
        &dir.join("sub"),
        "d.yaml",
        &doc("d", "image: d\npodExecutor:\n  tags: [v1]\n"),
    );

    let report = load_dir(dir);
    assert_eq!(
        report
            .configs
            .iter()
            .map(|c| c.metadata.name.as_str())
            .collect::<Vec<_>>(),
        vec!["a-good", "b", "c"]
    );
    let a_path = dir.join("a.yaml").display().to_string();
    assert_eq!(report.errors.len(), 2, "{:?}", error_strings(&report));
    assert_eq!(
        report.errors[0].to_string(),
        format!(
            "{a_path} (document 2): spec.podExecutor.maxParallelExecutions: invalid type: string \"x\", expected u32 (at line 21, column 28)"
        )
    );
    assert_eq!(
        report.errors[0].field(),
        Some("spec.podExecutor.maxParallelExecutions")
    );
    assert_eq!(
        report.errors[1].location(),
        Some(&DocLocation {
            source: dir.join("broken.yaml").display().to_string(),
            document: Some(1)
        })
    );
    // The relative binary path is resolved against the file's directory.
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(dir.join("bin/a"))
    );
    assert_eq!(
        report.configs[0].source,
        Some(DocLocation {
            source: a_path,
            document: Some(1)
        })
    );
}

#[test]
fn load_dir_reports_duplicates_across_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write(
        dir,
        "1-first.yaml",
        &doc(
            "first",
            "image: set-namespace\npodExecutor:\n  tags: [v0.4.1]\n",
        ),
    );
    write(
        dir,
        "2-second.yaml",
        &doc(
            "second",
            &format!(
                "image: {PREFIX}/set-namespace\nbinaryExecutor:\n  tags: [v0.4.1]\n  path: /b\n"
            ),
        ),
    );
    let report = load_dir(dir);
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.configs[0].metadata.name, "first");
    let first = dir.join("1-first.yaml").display().to_string();
    let second = dir.join("2-second.yaml").display().to_string();
    assert_eq!(
        error_strings(&report),
        vec![format!(
            "{second} (document 1): spec.binaryExecutor.tags[0]: image \"{}\" is already configured by FunctionConfig porch-fn-system/first ({first} (document 1)); this FunctionConfig is ignored",
            sn("v0.4.1")
        )]
    );
    // Under another default prefix, the two are different images.
    let report = load_dir_with_prefix(dir, "example.com/fns");
    assert_eq!(report.configs.len(), 2);
    assert!(report.errors.is_empty());
}

#[test]
fn load_dir_of_a_missing_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nope");
    let report = load_dir(&missing);
    assert!(report.configs.is_empty());
    assert_eq!(report.errors.len(), 1);
    assert!(matches!(&report.errors[0], ConfigError::ReadDir { path, .. } if path == &missing));
    assert!(report.errors[0]
        .to_string()
        .starts_with(&format!("{}: cannot read directory: ", missing.display())));
}

#[test]
fn load_dir_of_an_empty_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let report = load_dir(tmp.path());
    assert!(report.configs.is_empty());
    assert!(report.is_clean());
}

#[cfg(unix)]
#[test]
fn load_dir_follows_configmap_style_symlinks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::create_dir(dir.join("..2024_01_01")).expect("mkdir");
    write(
        &dir.join("..2024_01_01"),
        "fns.yaml",
        &doc("linked", "image: l\npodExecutor:\n  tags: [v1]\n"),
    );
    std::os::unix::fs::symlink("..2024_01_01", dir.join("..data")).expect("symlink");
    std::os::unix::fs::symlink("..data/fns.yaml", dir.join("fns.yaml")).expect("symlink");
    let report = load_dir(dir);
    assert!(report.is_clean(), "{:?}", error_strings(&report));
    assert_eq!(
        report
            .configs
            .iter()
            .map(|c| c.metadata.name.as_str())
            .collect::<Vec<_>>(),
        vec!["linked"]
    );
}

/// The runner's build has serde_json's `arbitrary_precision` on (through
/// the `starlark` crate): a number in an object from the API server must
/// still read as a number (it read as a map, and pools were ignored).
#[test]
fn numbers_in_an_object_from_the_api_server_are_numbers() {
    let object = serde_json::json!({
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "FunctionConfig",
        "metadata": {"name": "pooled"},
        "spec": {"image": "fn", "podExecutor": {"tags": ["v1"], "idlePods": 2, "maxParallelExecutions": 3}},
    });
    let report = parse_object(&object, "in the cluster", None);
    assert!(report.is_clean(), "{:?}", error_strings(&report));
    let pod = report.configs[0]
        .spec
        .pod_executor
        .as_ref()
        .expect("podExecutor");
    assert_eq!(pod.idle_pods, Some(2));
}

#[test]
fn an_object_from_the_api_server_is_checked_as_a_document_is() {
    let object = serde_json::json!({
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "FunctionConfig",
        "metadata": {"name": "cat", "namespace": "fns"},
        "spec": {"image": "cat-fn", "binaryExecutor": {"tags": ["v1", "1.10"], "path": "bin/cat"}},
    });
    let report = parse_object(&object, "in the cluster", Some(Path::new("/srv/functions")));
    assert!(report.is_clean(), "{:?}", error_strings(&report));
    let config = &report.configs[0];
    assert_eq!(config.display_name(), "fns/cat");
    let binary = config
        .spec
        .binary_executor
        .as_ref()
        .expect("binaryExecutor");
    assert_eq!(binary.path, PathBuf::from("/srv/functions/bin/cat"));
    // A JSON string stays a string, even when it looks like a number.
    assert_eq!(binary.tags, strings(&["v1", "1.10"]));
    assert_eq!(
        config.source,
        Some(DocLocation {
            source: "in the cluster".into(),
            document: None
        })
    );

    let mut bad = object.clone();
    bad["spec"]["podExecutor"] = serde_json::json!({"tags": ["v1"], "maxParallelExecutions": "3"});
    bad["spec"]["binaryExecutor"]["tags"] = serde_json::json!(["bad tag"]);
    let report = parse_object(&bad, "in the cluster", None);
    assert!(report.configs.is_empty());
    let [error] = &report.errors[..] else {
        panic!("{:?}", error_strings(&report))
    };
    assert_eq!(
        error.field(),
        Some("spec.podExecutor.maxParallelExecutions")
    );
    assert!(
        matches!(error, ConfigError::Invalid { position: None, at, .. } if at.document.is_none()),
        "{error:?}"
    );

    bad["spec"]["podExecutor"]["maxParallelExecutions"] = serde_json::json!(3);
    let report = parse_object(&bad, "in the cluster", None);
    assert_eq!(
        error_strings(&report),
        vec![
            "in the cluster: spec.binaryExecutor.tags[0]: invalid tag \"bad tag\" (expected \
             1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')"
        ]
    );
}
