use super::*;

use proto::pb::EvaluateFunctionRequest;
use runner_core::config::test_support::config;
use runner_core::config::ImageIndex;
use tonic::Code;

fn builtins(configs: &[runner_core::config::FunctionConfig], mode: BuiltinsMode) -> Builtins {
    let index = ImageIndex::new(configs, runner_core::config::DEFAULT_IMAGE_PREFIX);
    Builtins::new(LiveIndex::fixed(Arc::new(index)), mode)
}

fn name_of(b: Result<Option<&'static Builtin>, EvalError>) -> Option<&'static str> {
    b.unwrap().map(|b| b.name)
}

#[test]
fn the_catalogs_images_run_built_in_unless_a_function_config_says_otherwise() {
    let b = builtins(&[], BuiltinsMode::AnyTag);
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/set-namespace:v0.4.1", "")),
        Some("set-namespace")
    );
    assert_eq!(
        name_of(b.resolve("set-namespace:unstable", "")),
        Some("set-namespace")
    );
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/starlark:v0.4", "")),
        Some("starlark")
    );
    assert_eq!(name_of(b.resolve("gcr.io/kpt-fn/kubeval:v0.3", "")), None);
    assert_eq!(name_of(b.resolve("example.com/set-namespace:v1", "")), None);
    // Turned off: only goExecutor entries.
    assert_eq!(
        name_of(builtins(&[], BuiltinsMode::None).resolve("set-namespace:v0.4", "")),
        None
    );
    // A podExecutor or binaryExecutor keeps its tags; other tags stay
    // built in.
    let configs = [
        config(
            "pod",
            "image: gcr.io/kpt-fn/set-labels\npodExecutor:\n  tags: [v0.2]\n",
        ),
        config(
            "bin",
            "image: set-image\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/true\n",
        ),
    ];
    let b = builtins(&configs, BuiltinsMode::AnyTag);
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/set-labels:v0.2", "")),
        None
    );
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/set-labels:v0.3", "")),
        Some("set-labels")
    );
    assert_eq!(name_of(b.resolve("set-image:v1", "")), None);
    assert_eq!(name_of(b.resolve("set-image:v2", "")), Some("set-image"));
}

/// Every built-in, by default: each release tag its row reproduces runs
/// built in, under each of the catalog's names; the releases it does not
/// reproduce, later ones, moving tags and digests do not, and say why.
#[test]
fn by_default_only_the_reproduced_releases_run_built_in() {
    let b = builtins(&[], BuiltinsMode::default());
    for builtin in krm_builtins::ALL {
        let versions = builtin.versions().unwrap();
        for prefix in [
            "",
            "gcr.io/kpt-fn/",
            "ghcr.io/kptdev/krm-functions-catalog/",
        ] {
            let name = format!("{prefix}{}", builtin.name);
            for tag in versions.reproduced {
                let image = format!("{name}:{tag}");
                assert_eq!(
                    name_of(b.resolve(&image, "")),
                    Some(builtin.name),
                    "{image}"
                );
                assert_eq!(b.not_reproduced(&image, ""), None, "{image}");
                // Porch may send the tag beside an untagged image.
                assert_eq!(
                    name_of(b.resolve(&name, tag)),
                    Some(builtin.name),
                    "{name} {tag}"
                );
            }
            let outside = versions
                .releases
                .iter()
                .filter(|r| !versions.reproduced.contains(r))
                .map(|r| format!("{name}:{r}"))
                .chain([
                    format!("{name}:v9.9.9"),
                    format!("{name}:latest"),
                    format!("{name}:unstable"),
                    format!("{name}:v0"),
                    name.clone(),
                    format!(
                        "{name}:{}@sha256:{}",
                        versions.reproduced.first().unwrap_or(&"v0.1.0"),
                        "0".repeat(64)
                    ),
                ]);
            for image in outside {
                assert_eq!(name_of(b.resolve(&image, "")), None, "{image}");
                let why = b.not_reproduced(&image, "").unwrap();
                if versions.reproduced.is_empty() {
                    assert!(why.contains("answers as no release"), "{why}");
                } else {
                    assert!(why.contains(&versions.span()), "{why}");
                }
                assert!(why.contains("--builtins=any-tag"), "{why}");
                // Opted in: built in whatever the tag.
                let any = builtins(&[], BuiltinsMode::AnyTag);
                assert_eq!(
                    name_of(any.resolve(&image, "")),
                    Some(builtin.name),
                    "{image}"
                );
                assert_eq!(any.not_reproduced(&image, ""), None);
            }
        }
    }
}

#[test]
fn a_go_executor_opts_a_tag_in_and_a_missing_binary_falls_back_by_version() {
    let configs = [
        config(
            "go",
            "image: gcr.io/kpt-fn/set-namespace
goExecutor:
  tags: [v0.3.4, v0.4]
",
        ),
        config(
            "bin",
            "image: gcr.io/kpt-fn/set-labels
binaryExecutor:
  tags: [v0.2.1, v0.2.3]
  path: /nonexistent/set-labels
",
        ),
    ];
    let b = builtins(&configs, BuiltinsMode::Versions);
    for image in [
        "gcr.io/kpt-fn/set-namespace:v0.3.4",
        "gcr.io/kpt-fn/set-namespace:v0.4",
    ] {
        assert_eq!(
            name_of(b.resolve(image, "")),
            Some("set-namespace"),
            "{image}"
        );
    }
    // Porch's FunctionConfig names a binary this image lacks: a release
    // the built-in reproduces runs built in, a later one does not.
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/set-labels:v0.2.1", "")),
        Some("set-labels")
    );
    assert_eq!(
        name_of(b.resolve("gcr.io/kpt-fn/set-labels:v0.2.3", "")),
        None
    );
}

/// The tag that counts is the one a FunctionConfig resolved a constraint
/// to, else the request's when it names one version; where a config
/// decided, no note about versions is given.
#[test]
fn the_resolved_tag_counts_and_configs_silence_the_note() {
    let configs = [
        config(
            "go",
            "image: gcr.io/kpt-fn/set-namespace\ngoExecutor:\n  tags: [v0.4.0, v0.4]\n",
        ),
        config(
            "bin",
            "image: gcr.io/kpt-fn/set-labels\nbinaryExecutor:\n  tags: [v0.2.1]\n  path: /nonexistent/set-labels\n",
        ),
        config(
            "pod",
            "image: gcr.io/kpt-fn/set-image\npodExecutor:\n  tags: [v0.1]\n",
        ),
    ];
    let b = builtins(&configs, BuiltinsMode::Versions);
    // A goExecutor's constraint resolves to its tag: that release answers.
    let (builtin, pinned) = b
        .resolve_pinned("gcr.io/kpt-fn/set-namespace", "~0.4.0")
        .unwrap()
        .unwrap();
    assert_eq!(builtin.name, "set-namespace");
    assert_eq!(builtin.release_of(&pinned), Some("v0.4.0"), "{pinned}");
    // A missing binary's matched tag counts for the built-in's versions.
    let (builtin, pinned) = b
        .resolve_pinned("gcr.io/kpt-fn/set-labels", "~0.2.1")
        .unwrap()
        .unwrap();
    assert_eq!(
        (builtin.name, &*pinned),
        ("set-labels", "gcr.io/kpt-fn/set-labels:v0.2.1")
    );
    // A request tag naming one version pins it; other constraints do not.
    for tag in ["v0.2.2", "0.2.2", "=v0.2.2", " = 0.2.2 "] {
        assert_eq!(
            name_of(b.resolve("ghcr.io/kptdev/krm-functions-catalog/set-labels", tag)),
            Some("set-labels"),
            "{tag:?}"
        );
    }
    for tag in ["~0.2.2", "0.2", ">= v0.2.0"] {
        assert_eq!(
            name_of(b.resolve("ghcr.io/kptdev/krm-functions-catalog/set-labels", tag)),
            None,
            "{tag:?}"
        );
    }
    // Decided by a config: no note (the goExecutor ran it, the pod keeps it).
    assert_eq!(
        b.not_reproduced("gcr.io/kpt-fn/set-namespace:v0.4", ""),
        None
    );
    assert_eq!(b.not_reproduced("gcr.io/kpt-fn/set-image:v0.1", ""), None);
    // Nothing decided: the note.
    assert!(b
        .not_reproduced("gcr.io/kpt-fn/set-image:v0.1.1", "")
        .is_some());
}

#[test]
fn the_mode_parses_from_its_flag_values() {
    assert_eq!("versions".parse(), Ok(BuiltinsMode::Versions));
    assert_eq!("any-tag".parse(), Ok(BuiltinsMode::AnyTag));
    assert_eq!("none".parse(), Ok(BuiltinsMode::None));
    let err = "all".parse::<BuiltinsMode>().unwrap_err();
    assert!(err.contains("any-tag"), "{err}");
}

#[test]
fn a_binary_executor_wins_and_bare_names_follow_the_default_prefix() {
    // One config lists v1 under both: the binary runs, as in serve.
    let both = [config(
        "both",
        "image: example.com/fns/ns\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/true\ngoExecutor:\n  tags: [v1, v2]\n  id: set-namespace\n",
    )];
    let b = builtins(&both, BuiltinsMode::AnyTag);
    assert_eq!(name_of(b.resolve("example.com/fns/ns:v1", "")), None);
    assert_eq!(
        name_of(b.resolve("example.com/fns/ns:v2", "")),
        Some("set-namespace")
    );
    // A runner whose bare names mean its own registry runs those.
    let index = ImageIndex::new(&[], "registry.corp/fns/");
    let own = Builtins::new(LiveIndex::fixed(Arc::new(index)), BuiltinsMode::AnyTag);
    assert_eq!(name_of(own.resolve("set-namespace:v1", "")), None);
    assert_eq!(
        name_of(own.resolve("gcr.io/kpt-fn/set-namespace:v1", "")),
        Some("set-namespace")
    );
    for prefix in ["gcr.io/kpt-fn", "/ghcr.io/kptdev/krm-functions-catalog/"] {
        let index = ImageIndex::new(&[], prefix);
        let catalog = Builtins::new(LiveIndex::fixed(Arc::new(index)), BuiltinsMode::AnyTag);
        assert_eq!(
            name_of(catalog.resolve("set-namespace:v1", "")),
            Some("set-namespace"),
            "{prefix}"
        );
    }
}

#[test]
fn go_executor_entries_name_their_function() {
    let configs = [
        config(
            "mirror",
            "image: example.com/mirror/ns-fn\ngoExecutor:\n  tags: [v1]\n  id: set-namespace\n",
        ),
        config(
            "by-name",
            "image: example.com/mirror/set-labels\ngoExecutor:\n  tags: [v1]\n",
        ),
        config(
            "wrong",
            "image: example.com/mirror/other\ngoExecutor:\n  tags: [v1]\n  id: no-such-fn\n",
        ),
    ];
    for mode in [
        BuiltinsMode::Versions,
        BuiltinsMode::AnyTag,
        BuiltinsMode::None,
    ] {
        let b = builtins(&configs, mode);
        assert_eq!(
            name_of(b.resolve("example.com/mirror/ns-fn:v1", "")),
            Some("set-namespace")
        );
        assert_eq!(
            name_of(b.resolve("example.com/mirror/set-labels:v1", "")),
            Some("set-labels")
        );
        assert_eq!(name_of(b.resolve("example.com/mirror/ns-fn:v2", "")), None);
        let err = b.resolve("example.com/mirror/other:v1", "").unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        let msg = err.to_string();
        assert!(
            msg.contains("\"no-such-fn\"") && msg.contains("set-namespace"),
            "{msg}"
        );
    }
}

const INPUT: &str = "apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm # keep me
  data:
    k: v
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    namespace: prod
";

fn request(image: &str, resource_list: &str) -> EvalRequest {
    EvalRequest::new(EvaluateFunctionRequest {
        resource_list: Bytes::from(resource_list.to_owned()),
        image: image.into(),
        tag: String::new(),
    })
}

fn evaluator(max: usize) -> BuiltinEvaluator {
    BuiltinEvaluator::new(builtins(&[], BuiltinsMode::AnyTag), max)
}

#[tokio::test]
async fn a_call_answers_as_the_catalogs_container_would() {
    let resp = evaluator(1 << 20)
        .evaluate(request("gcr.io/kpt-fn/set-namespace:v0.4", INPUT))
        .await
        .unwrap();
    let out = std::str::from_utf8(&resp.resource_list).unwrap();
    assert!(out.starts_with("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm # keep me\n    namespace: prod\n"), "{out}");
    assert!(out.contains("\nfunctionConfig:\n"), "{out}");
    assert!(
        out.contains("\nresults:\n") && out.contains("severity: info"),
        "{out}"
    );
    // The wrapper's parser reads it as a ResourceList.
    let parsed = krm_results::parse_output(&resp.resource_list).unwrap();
    assert!(!parsed.has_errors());
}

#[tokio::test]
async fn images_it_does_not_run_fall_through() {
    let err = evaluator(1 << 20)
        .evaluate(request("example.com/fn:v1", INPUT))
        .await
        .unwrap_err();
    assert!(matches!(err, EvalError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn failures_are_answered_as_a_failing_pod_is() {
    let no_config = INPUT.split("functionConfig:").next().unwrap().to_owned();
    let err = evaluator(1 << 20)
        .evaluate(request("gcr.io/kpt-fn/apply-replacements:v0.1", &no_config))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    let msg = err.to_string();
    assert!(msg.contains("[error]"), "{msg}");
    assert!(msg.contains("FunctionConfig is missing"), "{msg}");
    // Input that is not a ResourceList: an error naming it, not a panic.
    for input in [
        "",
        "- a\n",
        "kind: Other\n",
        "items: {a: 1}\nkind: ResourceList\n",
        "\u{0}",
    ] {
        let err = evaluator(1 << 20)
            .evaluate(request("set-labels", input))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{input:?}: {err}");
        assert!(err.to_string().contains("set-labels"), "{err}");
    }
}

#[tokio::test]
async fn the_deadline_and_the_output_limit_hold() {
    let mut req = request("set-namespace", INPUT);
    req.deadline = Some(tokio::time::Instant::now());
    let err = evaluator(1 << 20).evaluate(req).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    let err = evaluator(100)
        .evaluate(request("set-namespace", INPUT))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("--max-request-body-size"), "{err}");
}

#[tokio::test]
async fn deeply_nested_input_is_answered() {
    // The parser takes nesting 10,000 deep; every walk over it is
    // recursive, so the call's thread has the stack for it.
    let depth = 9_000;
    let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    for (name, data) in [
        ("search-replace", "{by-value: '1', put-value: '2'}"),
        ("set-labels", "{app: a}"),
    ] {
        let input = format!(
            "kind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: c}}\n  data: {{k: '1'}}\n  deep: {nested}\nfunctionConfig: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: x}}, data: {data}}}\n"
        );
        let resp = evaluator(1 << 24)
            .evaluate(request(name, &input))
            .await
            .unwrap();
        assert!(resp.resource_list.len() > 2 * depth, "{name}");
    }
}
