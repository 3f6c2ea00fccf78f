//! Helpers shared by the tests of the config submodules (and of [`crate::image`]).

use super::load::{parse_str, LoadReport};
use super::types::FunctionConfig;

pub const PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog";

pub fn sn(tag: &str) -> String {
    format!("{PREFIX}/set-namespace:{tag}")
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

pub fn parse_ok(text: &str) -> Vec<FunctionConfig> {
    let report = parse_str(text, "test.yaml");
    assert!(
        report.errors.is_empty(),
        "unexpected errors: {:?}",
        report
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    report.configs
}

pub fn error_strings(report: &LoadReport) -> Vec<String> {
    report.errors.iter().map(|e| e.to_string()).collect()
}

/// A FunctionConfig document with the given name and spec body (indented by 2).
pub fn doc(name: &str, spec: &str) -> String {
    let spec: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: {name}\n  namespace: porch-fn-system\nspec:\n{spec}"
    )
}

pub fn config(name: &str, spec: &str) -> FunctionConfig {
    let mut configs = parse_ok(&doc(name, spec));
    assert_eq!(configs.len(), 1);
    configs.remove(0)
}

pub fn set_namespace_config() -> FunctionConfig {
    config(
        "set-namespace",
        r#"image: set-namespace
prefixes: ["", "example.com/mirror/"]
binaryExecutor:
  tags: [v0.4.2, latest]
  path: /opt/fns/set-namespace
  prespawn: 1
podExecutor:
  tags: [v0.4.1, v0.4.3, v0.5.0, unstable]
  timeToLive: 45m
  maxParallelExecutions: 3
  preferredMaxQueueLength: 5
  prespawn: 2
  templateOverrides:
    serviceAccountName: fn-sa
goExecutor:
  tags: [v0.4]
"#,
    )
}
