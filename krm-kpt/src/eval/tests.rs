//! Tests of `eval`'s pieces against what kpt reads, prints and writes.

use std::time::Duration;

use serde_yaml_ng::Value;

use super::exec::container_stderr;
use super::input::bare;
use super::results::{print_results, print_stderr, results_yaml};
use super::*;
use krm_results::FnResult;
use krm_yaml::package::kyaml;
use krm_yaml::{self as yaml, Node};

#[test]
fn image_pull_policy_as_kpt_reads_it() {
    assert_eq!(
        ImagePullPolicy::parse("never").unwrap(),
        ImagePullPolicy::Never
    );
    assert_eq!(
        ImagePullPolicy::parse("ALWAYS").unwrap(),
        ImagePullPolicy::Always
    );
    assert_eq!(
        ImagePullPolicy::parse("IfNotPresent").unwrap(),
        ImagePullPolicy::default()
    );
    assert_eq!(
        ImagePullPolicy::parse("foo").unwrap_err().to_string(),
        "invalid argument \"foo\" for \"--image-pull-policy\" flag: must be one of: Always, IfNotPresent, Never"
    );
    assert!(ImagePullPolicy::parse("").is_err());
}

#[test]
fn durations_as_go_prints_them() {
    assert_eq!(kpt_duration(Duration::from_millis(0)), "0s");
    assert_eq!(kpt_duration(Duration::from_millis(99)), "0s");
    assert_eq!(kpt_duration(Duration::from_millis(250)), "200ms");
    assert_eq!(kpt_duration(Duration::from_millis(1000)), "1s");
    assert_eq!(kpt_duration(Duration::from_millis(1570)), "1.5s");
    assert_eq!(kpt_duration(Duration::from_millis(62_300)), "1m2.3s");
    assert_eq!(kpt_duration(Duration::from_secs(3600)), "1h0m0s");
}

#[test]
fn shlex() {
    assert_eq!(
        shlex_split("./fn a 'b c' \"d \\\"e\\\"\" f\\ g").unwrap(),
        vec!["./fn", "a", "b c", "d \"e\"", "f g"]
    );
    assert_eq!(shlex_split("  cat  ").unwrap(), vec!["cat"]);
    assert!(shlex_split("'open").is_err());
}

#[test]
fn function_input_config_map_as_kpt_writes_it() {
    let args = |a: &[&str]| FnConfig::Args(a.iter().map(|s| s.to_string()).collect());
    // As the ResourceList sends it: under `functionConfig:`.
    let function_config = |cfg: &FnConfig| {
        function_config(cfg).map(|n| {
            let list = Node::mapping(vec![bare("functionConfig"), kyaml::content(&n).clone()]);
            yaml::emit::encode_node(&list, true)["functionConfig:\n".len()..].to_owned()
        })
    };
    assert_eq!(
        function_config(&args(&[])).unwrap(),
        "  metadata:\n    name: function-input\n  data: {}\n  kind: ConfigMap\n  apiVersion: v1\n"
    );
    // Observed with kpt 1.0.0-beta.56.
    let got = function_config(&args(&[
        "z=1",
        "a=2",
        "b=true",
        "c=yes",
        "d=hello world",
        "e=",
        "f=1.5",
        "g=null",
        "h=~",
        "i=0x1",
        "j=:x",
        "k=-x",
        "l=a,b",
        "m=#x",
        "n=a: b",
        "o=Yes",
        "p=y",
        "q=off",
        "r=it's",
        "s=\"q\"",
        "t=1e3",
        "u=.inf",
        "v=2001-01-01",
        "w=a\nb",
        "x= lead",
    ]))
    .unwrap();
    assert!(got.contains(r##"  data: {z: "1", a: "2", b: "true", c: "yes", d: hello world, e: "", f: "1.5", g: "null", h: "~", i: "0x1", j: ':x', k: -x, l: 'a,b', m: "#x", n: "a: b", o: "Yes", p: "y", q: "off", r: it's, s: '"q"', t: "1e3", u: ".inf", v: "2001-01-01", w: "a\nb", x: ' lead'}"##), "{got}");
    let got = function_config(&args(&["novalue", "a=b=c", "a=x"])).unwrap();
    assert!(got.contains("  data: {a: x}\n  kind: novalue\n"), "{got}");
    assert!(matches!(
        function_config(&args(&["a=b", "novalue"])),
        Err(Error::BadArg)
    ));
    assert!(matches!(
        function_config(&args(&["=x"])),
        Err(Error::BadArg)
    ));
}

#[test]
fn result_lines_as_kpt_prints_them() {
    let v: Value = serde_yaml_ng::from_str(
        r#"
- message: bad replicas
  severity: error
  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}
  field: {path: spec.replicas, currentValue: 1, proposedValue: 3}
  file: {path: sub/deploy.yaml, index: 0}
- message: just a warning
  severity: warning
- message: nosev
- message: withfield
  field: {path: a.b}
- message: legacy
  severity: warn
  resourceRef: {kind: ConfigMap, metadata: {name: cm, namespace: "''"}}
"#,
    )
    .unwrap();
    let lines: Vec<String> = krm_results::kpt::read(&v).iter().map(kpt_line).collect();
    assert_eq!(
        lines,
        vec![
            "[error] apps/v1/Deployment/ns/app spec.replicas: bad replicas",
            "[warning]: just a warning",
            "[info]: nosev",
            "[info] a.b: withfield",
            "[warn] ConfigMap/cm: legacy",
        ]
    );
    let wrapped: Value =
        serde_yaml_ng::from_str("{name: x, items: [{message: m, severity: info}]}").unwrap();
    assert_eq!(krm_results::kpt::read(&wrapped).len(), 1);
}

#[test]
fn results_file_as_kpt_writes_it() {
    let v: Value = serde_yaml_ng::from_str(
        "- {message: bad replicas, severity: error, resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}, field: {path: spec.replicas, currentValue: 1, proposedValue: 3}, file: {path: sub/deploy.yaml, index: 0}}\n- {message: \"multi\\nline\", severity: warning}\n",
    )
    .unwrap();
    let record = FnRecord {
        key: "exec",
        name: "./fail.sh".into(),
        stderr: "some stderr line\nsecond stderr line\n".into(),
        exit_code: 1,
        results: krm_results::kpt::read(&v).into(),
    };
    assert_eq!(
        results_yaml(&record),
        "apiVersion: kpt.dev/v1
kind: FunctionResultList
metadata:
  name: fnresults
exitCode: 1
items:
  - exec: ./fail.sh
    stderr: |
      some stderr line
      second stderr line
    exitCode: 1
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
      - message: |-
          multi
          line
        severity: warning
"
    );
}

#[test]
fn container_stderr_is_read_by_lines_as_kpt_reads_it() {
    assert_eq!(container_stderr(b"one\ntwo\n"), b"one\ntwo");
    assert_eq!(container_stderr(b"one\r\ntwo"), b"one\ntwo");
    assert_eq!(container_stderr(b"a\n\nb\n\n"), b"a\n\nb\n");
    assert_eq!(container_stderr(b""), b"");
}

/// beta.67's one-line forms, every line whatever `--truncate-output`
/// says (`pkg/fn/runtime/runner.go@v1.0.0-beta.67:433-472`): results
/// joined after `[Results]: `; stderr unquoted after ` Stderr: `, its
/// trailing line break an empty last entry, and no line break after it.
#[test]
fn results_and_stderr_print_on_one_line_as_beta_67() {
    let mut out = Vec::new();
    let results: Vec<FnResult> = (1..=6)
        .map(|i| FnResult {
            message: format!("r{i}\nnext  "),
            ..FnResult::default()
        })
        .collect();
    print_results(&mut out, &results).unwrap();
    print_stderr(&mut out, b"a \"q\"\tb\n  c\n").unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "[Results]: [info]: r1 next, [info]: r2 next, [info]: r3 next, [info]: r4 next, [info]: r5 next, [info]: r6 next\n Stderr: a \"q\"\tb, c, "
    );
}
