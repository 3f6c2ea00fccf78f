//! The status as beta.67 writes it: the layouts of the Kptfiles in
//! `e2e/testdata/fn-render/*/.expected/diff.patch@v1.0.0-beta.67`
//! (`basicpipeline`, `fn-failure`, `exec-without-permissions`,
//! `basicpipeline-semver`), on packages of our own.

use super::*;
use krm_results::{Field, Severity};

fn package(kptfile: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Kptfile"), kptfile).unwrap();
    dir
}

fn written(dir: &tempfile::TempDir) -> String {
    std::fs::read_to_string(dir.path().join("Kptfile")).unwrap()
}

fn image_step(image: &str, results: Vec<FnResult>) -> StepStatus {
    StepStatus {
        image: image.into(),
        results: results.into(),
        ..StepStatus::default()
    }
}

/// A passed render: the condition without message, every step with
/// `exitCode: 0`; the file marshalled from kpt's types (its comment gone,
/// `metadata` in struct order, the compact list made wide, `tag` after
/// `configMap` and unquoted, map keys sorted), an older `Rendered`
/// condition replaced and another kept before it.
#[test]
fn a_passed_render_as_beta_67_writes_it() {
    let dir = package(
        r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  annotations:
    zeta: "1"
    kpt.dev/save-on-render-failure: "true"
  name: shop # the shop
pipeline:
  mutators:
  - image: set-namespace
    tag: "0.4.1 - 0.4.3"
    configMap:
      namespace: shop
status:
  conditions:
  - type: Rendered
    status: "False"
    reason: RenderFailed
    message: old
  - type: Ready
    status: "True"
"#,
    );
    let report = RenderReport {
        failure: None,
        mutation_steps: vec![image_step(
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.3",
            vec![FnResult::info(
                "namespace [default] updated to \"shop\", 1 value(s) changed",
            )],
        )],
        validation_steps: Vec::new(),
    };
    write_render_status(dir.path(), &report);
    assert_eq!(
        written(&dir),
        r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    kpt.dev/save-on-render-failure: "true"
    zeta: "1"
pipeline:
  mutators:
    - image: set-namespace
      configMap:
        namespace: shop
      tag: 0.4.1 - 0.4.3
status:
  conditions:
    - type: Ready
      status: "True"
    - type: Rendered
      status: "True"
      reason: RenderSuccess
  renderStatus:
    mutationSteps:
      - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.3
        exitCode: 0
        results:
          - message: namespace [default] updated to "shop", 1 value(s) changed
            severity: info
"#
    );
    // Idempotent: the same report again changes nothing.
    let before = written(&dir);
    write_render_status(dir.path(), &report);
    assert_eq!(written(&dir), before);
}

/// A failed function: the message as a literal block (its tab kept), the
/// stderr single-quoted (`: ` in it), errors again under `errorResults`,
/// the summary naming the step; a validator under `validationSteps`.
#[test]
fn a_failed_function_as_beta_67_writes_it() {
    let dir = package(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: shop\npipeline:\n  validators:\n  - image: ghcr.io/kptdev/krm-functions-catalog/starlark:latest\n    configPath: check.yaml # checks\n",
    );
    let field = Field {
        path: "spec.replicas".into(),
        current_value: Some(serde_yaml_ng::Value::from(1)),
        ..Field::default()
    };
    let report = RenderReport {
        failure: Some("pkg.render: pkg .:\n\tpipeline.run: already handled error".into()),
        mutation_steps: Vec::new(),
        validation_steps: vec![StepStatus {
            image: "ghcr.io/kptdev/krm-functions-catalog/starlark:latest".into(),
            stderr: "failed to evaluate function: error: function failure".into(),
            exit_code: 1,
            results: vec![
                FnResult {
                    field: Some(field),
                    ..FnResult::new(Severity::Error, "fail: no deployment")
                },
                FnResult::warning("just so"),
            ]
            .into(),
            ..StepStatus::default()
        }],
    };
    write_render_status(dir.path(), &report);
    assert_eq!(
        written(&dir),
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
pipeline:
  validators:
    - image: ghcr.io/kptdev/krm-functions-catalog/starlark:latest
      configPath: check.yaml
status:
  conditions:
    - type: Rendered
      status: \"False\"
      reason: RenderFailed
      message: |-
        pkg.render: pkg .:
        \tpipeline.run: already handled error
  renderStatus:
    validationSteps:
      - image: ghcr.io/kptdev/krm-functions-catalog/starlark:latest
        stderr: 'failed to evaluate function: error: function failure'
        exitCode: 1
        results:
          - message: 'fail: no deployment'
            severity: error
            field:
              path: spec.replicas
              currentValue: \"1\"
          - message: just so
            severity: warning
        errorResults:
          - message: 'fail: no deployment'
            severity: error
            field:
              path: spec.replicas
              currentValue: \"1\"
    errorSummary: 'ghcr.io/kptdev/krm-functions-catalog/starlark:latest: exit code 1'
"
    );
}

/// A step that failed before it ran (exec without `--allow-exec`): its
/// `executionError` and `exitCode: 1`, the command as the pipeline wrote
/// it (quotes doubled in the summary's single-quoted scalar).
#[test]
fn a_step_that_could_not_run_as_beta_67_writes_it() {
    let dir = package(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - exec: \"sed -e 's/a/b/'\"\n",
    );
    let why = "must run with `--allow-exec` option to allow running function binaries";
    let report = RenderReport {
        failure: Some(format!("pkg.render: pkg .:\n\tpipeline.run: {why}")),
        mutation_steps: vec![StepStatus {
            exec: "sed -e 's/a/b/'".into(),
            execution_error: why.into(),
            exit_code: 1,
            ..StepStatus::default()
        }],
        validation_steps: Vec::new(),
    };
    write_render_status(dir.path(), &report);
    assert_eq!(
        written(&dir),
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - exec: sed -e 's/a/b/'
status:
  conditions:
    - type: Rendered
      status: \"False\"
      reason: RenderFailed
      message: |-
        pkg.render: pkg .:
        \tpipeline.run: must run with `--allow-exec` option to allow running function binaries
  renderStatus:
    mutationSteps:
      - exec: sed -e 's/a/b/'
        executionError: must run with `--allow-exec` option to allow running function binaries
        exitCode: 1
    errorSummary: 'sed -e ''s/a/b/'': must run with `--allow-exec` option to allow running function binaries'
"
    );
}

/// No step ran: no `renderStatus` (an earlier one is removed), and a
/// Kptfile that does not read strictly is left as it is.
#[test]
fn no_steps_no_render_status_and_unreadable_kptfiles_untouched() {
    let dir = package(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\nstatus:\n  renderStatus:\n    mutationSteps:\n    - image: x\n      exitCode: 0\n",
    );
    write_render_status(dir.path(), &RenderReport::default());
    assert_eq!(
        written(&dir),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\nstatus:\n  conditions:\n    - type: Rendered\n      status: \"True\"\n      reason: RenderSuccess\n"
    );
    let odd = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\nextra: 1\n";
    let dir = package(odd);
    write_render_status(dir.path(), &RenderReport::default());
    assert_eq!(written(&dir), odd);
}
