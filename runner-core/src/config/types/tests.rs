use std::path::{Path, PathBuf};
use std::time::Duration;

use krm_fn::duration::PositiveDuration as GoDuration;

use crate::config::test_support::*;
use crate::config::*;

#[test]
fn parses_the_design_examples() {
    let text = include_str!("../../../tests/fixtures/config/set-namespace.yaml");
    let report = parse_str_with(
        text,
        "functions/set-namespace.yaml",
        Some(Path::new("/srv/functions")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert!(report.errors.is_empty(), "{:?}", error_strings(&report));
    assert_eq!(report.configs.len(), 2);
    let sn_cfg = &report.configs[0];
    assert_eq!(sn_cfg.api_version, API_VERSION);
    assert_eq!(sn_cfg.kind, KIND);
    assert_eq!(
        sn_cfg.metadata,
        ObjectMeta {
            name: "set-namespace".to_string(),
            namespace: "porch-fn-system".to_string()
        }
    );
    assert_eq!(
        sn_cfg.source,
        Some(DocLocation {
            source: "functions/set-namespace.yaml".to_string(),
            document: Some(1)
        })
    );
    assert_eq!(
        sn_cfg.spec.binary_executor,
        Some(BinaryExecutor {
            tags: strings(&["v0.4.2"]),
            path: PathBuf::from("/srv/functions/set-namespace"),
            prespawn: None,
        })
    );
    assert_eq!(
        sn_cfg.spec.go_executor,
        Some(GoExecutor {
            tags: strings(&["v0.4", "v0.4.5"]),
            id: Some("set-namespace".to_string()),
        })
    );
    let apply = &report.configs[1];
    assert_eq!(apply.source.as_ref().and_then(|s| s.document), Some(3));
    let pod = apply.spec.pod_executor.as_ref().expect("pod executor");
    assert_eq!(
        pod.time_to_live.as_ref().map(GoDuration::duration),
        Some(Duration::from_secs(1800))
    );
    let container = pod
        .template_overrides
        .as_ref()
        .and_then(|t| t.container.as_ref())
        .expect("container overrides");
    assert_eq!(
        serde_json::Value::Object(container.resources.clone().expect("resources")),
        serde_json::json!({"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}})
    );

    let index = ImageIndex::new(&report.configs, DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index.binary_for("set-namespace:v0.4.2", "").map(|m| m.path),
        Some(PathBuf::from("/srv/functions/set-namespace"))
    );
    assert_eq!(
        index
            .pod_settings_for("apply-setters:v0.2.2", "")
            .and_then(|m| m.ttl),
        Some(Duration::from_secs(1800))
    );
    assert_eq!(
        index
            .go_for("set-namespace", "~0.4")
            .map(|m| m.resolved_image),
        Some(sn("v0.4.5"))
    );
    assert_eq!(
        index.warm_images(),
        vec![sn("v0.4.1"), format!("{PREFIX}/apply-setters:v0.2.2")]
    );
}

#[test]
fn template_overrides_parse() {
    let cfg = config(
        "t",
        r#"image: fn
podExecutor:
  tags: [v1]
  templateOverrides:
    serviceAccountName: runner
    securityContext:
      runAsNonRoot: true
      runAsUser: 1000
    container:
      env:
        - name: A
          value: "1"
        - name: B
          valueFrom: {secretKeyRef: {name: s, key: k}}
      envFrom:
        - configMapRef: {name: cm}
    initContainer:
      resources: {limits: {cpu: 100m}}
"#,
    );
    let overrides = cfg
        .spec
        .pod_executor
        .and_then(|p| p.template_overrides)
        .expect("overrides");
    let json = serde_json::to_value(&overrides).expect("serialise");
    assert_eq!(
        json,
        serde_json::json!({
            "serviceAccountName": "runner",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
            "container": {
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                ],
                "envFrom": [{"configMapRef": {"name": "cm"}}]
            },
            "initContainer": {"resources": {"limits": {"cpu": "100m"}}}
        })
    );
}

#[test]
fn unknown_fields_and_nulls_are_accepted() {
    let cfg = config(
        "u",
        r#"image: fn
prefixes:
futureField: {a: 1}
podExecutor:
  tags: [v1]
  somethingNew: true
  templateOverrides:
    container:
      env:
      futureKnob: 3
"#,
    );
    assert!(cfg.spec.prefixes.is_empty());
    let text = "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: u\n  labels: {a: b}\nstatus: {observedGeneration: 3}\nspec:\n  image: fn\n  binaryExecutor: {tags: [v1], path: /b}\n";
    assert_eq!(parse_ok(text).len(), 1);
}

#[test]
fn serialises_back_to_an_equivalent_document() {
    let original = set_namespace_config();
    let text = serde_yaml_ng::to_string(&original).expect("serialise");
    let again = parse_ok(&text);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].spec, original.spec);
    assert_eq!(again[0].metadata, original.metadata);
    assert!(text.contains("timeToLive: 45m"), "{text}");
}

/// Parses one FunctionConfig document with the given spec and returns the error strings
/// (without the location prefix and position suffix).
fn spec_errors(spec: &str) -> Vec<String> {
    let report = parse_str(&doc("x", spec), "f.yaml");
    assert!(report.configs.is_empty(), "expected rejection of {spec}");
    report
        .errors
        .iter()
        .map(|e| match e {
            ConfigError::Invalid { field, message, .. } => format!("{field}: {message}"),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn type_errors_name_the_field() {
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: v1\n"),
        vec!["spec.podExecutor.tags: invalid type: string \"v1\", expected a sequence"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: -1\n"),
        vec!["spec.podExecutor.maxParallelExecutions: invalid type: integer `-1`, expected u32"]
    );
    assert_eq!(
        spec_errors("image: [fn]\n"),
        vec!["spec.image: invalid type: sequence, expected a string"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: 30\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"30\": missing unit (valid units are ns, us, µs, ms, s, m, h)"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    container:\n      resources: lots\n"),
        vec!["spec.podExecutor.templateOverrides.container.resources: invalid type: string \"lots\", expected a map"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    securityContext: [1]\n"),
        vec!["spec.podExecutor.templateOverrides.securityContext: invalid type: sequence, expected a map"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor: [1]\n"),
        vec!["spec.binaryExecutor: invalid type: sequence, expected struct BinaryExecutor"]
    );
}

#[test]
fn durations_are_validated() {
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: 0s\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"0s\": must be greater than zero"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: -5m\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"-5m\": negative durations are not allowed"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: soon\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"soon\": expected a number"]
    );
}

#[test]
fn semantic_errors_name_the_field() {
    assert_eq!(
        spec_errors("prefixes: [a.io]\nbinaryExecutor:\n  tags: [v1]\n  path: /b\n"),
        vec!["spec.image: must be set"]
    );
    assert_eq!(
        spec_errors("image: fn:v1\nbinaryExecutor:\n  tags: [v1]\n  path: /b\n"),
        vec!["spec.image: invalid image name \"fn:v1\": must not contain a tag (list tags in the executors)"]
    );
    assert_eq!(
        spec_errors("image: fn@sha256:abc\npodExecutor:\n  tags: [v1]\n"),
        vec!["spec.image: invalid image name \"fn@sha256:abc\": must not contain a digest (list tags in the executors)"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: []\n  path: /b\n"),
        vec!["spec.binaryExecutor.tags: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  timeToLive: 5m\n"),
        vec!["spec.podExecutor.tags: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\ngoExecutor:\n  tags: []\n  id: \"\"\n"),
        vec![
            "spec.goExecutor.tags: must not be empty",
            "spec.goExecutor.id: must not be empty when set"
        ]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: \"\"\n"),
        vec!["spec.binaryExecutor.path: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: [v1]\n"),
        vec!["spec.binaryExecutor.path: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1, \"\", \"-x\", \"a b\"]\n"),
        vec![
            "spec.podExecutor.tags[1]: invalid tag \"\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
            "spec.podExecutor.tags[2]: invalid tag \"-x\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
            "spec.podExecutor.tags[3]: invalid tag \"a b\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
        ]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: 0\n"),
        vec!["spec.podExecutor.maxParallelExecutions: must be at least 1"]
    );
    assert_eq!(
        spec_errors("image: fn\nprefixes: [\"a io\"]\npodExecutor:\n  tags: [v1]\n"),
        vec!["spec.prefixes[0]: invalid registry prefix \"a io\""]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    initContainer:\n      env: [{value: x}]\n"),
        vec!["spec.podExecutor.templateOverrides.initContainer.env[0].name: must be a non-empty string"]
    );
    // A missing spec is a missing image, and no executor.
    let report = parse_str(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {name: n}\n",
        "f.yaml",
    );
    assert_eq!(
        error_strings(&report),
        vec![
            "f.yaml (document 1): spec.image: must be set",
            "f.yaml (document 1): spec: no executor set: one of binaryExecutor, podExecutor or goExecutor is needed"
        ]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  pidsLimit: 10\n"),
        vec!["spec.podExecutor.pidsLimit: must be at least 64 (the wrapper's own threads count)"]
    );
    let ok = parse_str(
        &doc(
            "x",
            "image: fn\npodExecutor:\n  tags: [v1]\n  pidsLimit: 64\n",
        ),
        "f.yaml",
    );
    assert!(ok.errors.is_empty());
    assert_eq!(
        ok.configs[0]
            .spec
            .pod_executor
            .as_ref()
            .expect("a podExecutor")
            .pids_limit,
        Some(64)
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  idlePods: 1000\n"),
        vec!["spec.podExecutor.idlePods: must be at most 100"]
    );
    let pool = parse_str(
        &doc(
            "x",
            "image: fn\npodExecutor:\n  tags: [v1]\n  idlePods: 3\n  singleUse: true\n",
        ),
        "f.yaml",
    );
    assert!(pool.errors.is_empty(), "{:?}", pool.errors);
    let pod = pool.configs[0]
        .spec
        .pod_executor
        .as_ref()
        .expect("a podExecutor");
    assert_eq!((pod.idle_pods, pod.single_use), (Some(3), Some(true)));
    // #31 item 4: a misspelt executor is dropped (the API server prunes it,
    // serde ignores it): what is left configures nothing.
    assert_eq!(
        spec_errors("image: fn\npodExecuter:\n  tags: [v1]\n"),
        vec!["spec: no executor set: one of binaryExecutor, podExecutor or goExecutor is needed"]
    );
}

#[test]
fn plain_scalars_are_taken_as_written_for_string_fields() {
    // YAML leniency (as serde_yaml_ng does it): an unquoted number in a string field is its
    // text, so `1.10` stays `1.10`.
    let cfg = config("n", "image: 7\npodExecutor:\n  tags: [1.10, 2, true]\n");
    assert_eq!(cfg.spec.image, "7");
    assert_eq!(
        cfg.spec.pod_executor.map(|p| p.tags),
        Some(strings(&["1.10", "2", "true"]))
    );
}
