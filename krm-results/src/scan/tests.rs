use super::*;
use crate::fixtures::{big_list, ok, result, NO_RESULTS, SPEC_SHAPE, SPEC_SHAPE_JSON, VARIANTS};
use crate::{parse_output, parse_output_strict, Severity};

/// Whether the fast path (JSON or line scan) answered by itself.
fn fast(input: &str) -> bool {
    parse_fast(input.as_bytes()).is_some()
}

/// Items full of traps for a line scanner: nested `results:` and `kind:`
/// keys, block scalars, comments, column-0 sequence entries.
const TRAPS: &str = "\
# leading comment
---
# another comment
apiVersion: config.kubernetes.io/v1
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: script
  data:
    run.sh: |
      #!/bin/sh
      kind: Foo
      results:
      - message: not me
    folded: >-
      results: nope
        kind: Bar

# a comment in the middle of items
- apiVersion: fn.example/v1
  kind: Report
  results:
  - message: nested results, not the top-level ones
    severity: error
  status:
    kind: Deployment
- kind: Namespace
  metadata: {name: x}
kind: ResourceList # the kind, after items
results:
# comment inside results
- message: the real one
  severity: warning
";

const CRLF: &str = "apiVersion: config.kubernetes.io/v1\r\nkind: ResourceList\r\nitems:\r\n- kind: A\r\n  data: |\r\n    results: x\r\nresults:\r\n- message: crlf\r\n  severity: info\r\n";

/// Every input used below; the agreement test runs them all.
fn all_inputs() -> Vec<String> {
    let mut inputs: Vec<String> = [
        SPEC_SHAPE,
        SPEC_SHAPE_JSON,
        VARIANTS,
        TRAPS,
        // kinds with odd quoting, comments
        "kind: \"ResourceList\"\nitems: []\n",
        "kind: 'ResourceList' # comment\nitems: []\n",
        "kind:\n  ResourceList\nitems: []\n",
        "kind: !!str ResourceList\nitems: []\n",
        // not a ResourceList
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
        "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\"}",
        "apiVersion: v1\nitems: []\n",
        "kind: null\nitems: []\n",
        "kind: [a, b]\n",
        "kind: Deployment\nresults: 5\n",
        "- a\n- b\n",
        "[1, 2]",
        "just a string\n",
        "42\n",
        "null\n",
        // empty
        "",
        " \n\t\r\n",
        "# nothing but a comment\n",
        "---\n",
        "---\n# c\n...\n",
        // streams
        "---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
        "--- # c\nkind: ResourceList\nitems: []\n...\n",
        "kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n---\n: : bad [\n",
        "kind: ResourceList\nresults: [{message: first doc}]\n...\nkind: Other\n",
        "---\n---\nkind: ResourceList\n",
        "%YAML 1.1\n---\nkind: ResourceList\nitems: []\n",
        // CRLF
        CRLF,
        // lone CR, NEL, LS line breaks
        "kind: ResourceList\ritems: []\rresults: [{message: cr}]\r",
        "kind: ResourceList\r\nitems: []\r\nresults: [{message: cr at the end}]\r",
        "kind: ResourceList\r\nitems: []\r\nresults: [{message: cr}]\r\nfoo: a\rb\r\n",
        "kind: ResourceList\nitems:\n- a: \"x\u{2028}y\"\nresults: [{message: ls}]\n",
        // flow-style root (YAML, not JSON)
        "{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: [], results: [{message: flow}]}",
        // JSON with trailing document
        "{\"kind\": \"ResourceList\", \"results\": [{\"message\": \"j\"}]}\n---\nkind: X\n",
        // top-level flow values on one line, quotes and brackets inside
        "kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n",
        // top-level flow value running over lines (may continue at column 0)
        "kind: ResourceList\nitems: [\n{a: 1},\n]\nresults:\n- message: after a multi-line flow\n",
        "kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n",
        // anchors and aliases across sections
        "kind: ResourceList\nitems:\n- &msg {message: from an anchor in items}\nresults:\n- *msg\n",
        "kind: &k ResourceList\nitems: []\nresults: [{message: *k}]\n",
        // only items
        "items:\n- a: 1\n",
        // duplicate keys
        "kind: ResourceList\nitems: []\nkind: ResourceList\n",
        "kind: ResourceList\nitems: []\nitems: []\n",
        // indented root, tabs, odd keys
        "  kind: ResourceList\n  items: []\n",
        "kind: ResourceList\n\titems: []\n",
        "\"kind\": ResourceList\nitems: []\n",
        "? kind\n: ResourceList\n",
        "kind : ResourceList\n",
        // invalid YAML
        "kind: ResourceList\nitems: []\nresults: [\n",
        "kind: ResourceList\nitems: []\nthis line has no colon\n",
        "kind: ResourceList\nresults:\n- message: x\n  severity: [\n",
        "kind: ResourceList\nresults:\n- message: a\n   severity: b\n",
        "kind: ResourceList\nitems: []\nresults: {message: not a list}\n",
        "kind: ResourceList\nresults:\n- just a string\n",
        "kind: ResourceList\nresults:\n- message: x\n  field: [1]\n",
        "kind: ResourceList\nitems: @bad\n",
        // non-string keys, tags
        "kind: ResourceList\n1: one\n[a]: seq key\nresults:\n- message: x\n  tags: {1: 2, true: null}\n  field: {path: p, currentValue: {1: !custom x}}\n",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    inputs.extend(NO_RESULTS.map(str::to_owned));
    inputs.push(big_list(40, "results:\n- message: big\n"));
    inputs.push(big_list(3, ""));
    inputs.push(
        String::from_utf8_lossy(
            b"kind: ResourceList\nitems: []\nresults: [{message: caf\xc3\xa9}]\n",
        )
        .into_owned(),
    );
    inputs
}

#[test]
fn fast_path_and_full_parse_agree() {
    for input in all_inputs() {
        let full = parse_output_strict(input.as_bytes());
        let got = parse_output(input.as_bytes());
        assert_eq!(got, full, "input:\n{input}");
        if let Some(fast) = parse_fast(input.as_bytes()) {
            assert_eq!(fast, full, "fast path, input:\n{input}");
        }
    }
}

#[test]
fn fast_path_handles_the_usual_shapes() {
    for input in [
        SPEC_SHAPE,
        SPEC_SHAPE_JSON,
        VARIANTS,
        TRAPS,
        "kind: 'ResourceList' # comment\nitems: []\n",
        "kind:\n  ResourceList\nitems: []\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
        "items:\n- a: 1\n",
        "kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n",
        "kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n",
    ] {
        assert!(fast(input), "fell back on:\n{input}");
    }
    assert!(fast(CRLF));
    assert!(fast(&big_list(40, "results:\n- message: big\n")));
}

#[test]
fn fast_path_falls_back_when_unsure() {
    for input in [
        "  kind: ResourceList\n  items: []\n",
        "kind: ResourceList\n\titems: []\n",
        "\"kind\": ResourceList\nitems: []\n",
        "? kind\n: ResourceList\n",
        "kind : ResourceList\n",
        "kind: ResourceList\nitems: []\nkind: ResourceList\n",
        "kind: ResourceList\nitems: [\n{a: 1},\n]\n",
        "kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n",
        "kind: ResourceList\nitems: []\rresults: []\r",
        "kind: ResourceList\r\nitems: []\r\nresults: []\r",
        "kind: ResourceList\r\nitems: []\r\nfoo: a\rb\r\n",
        "kind: ResourceList\nitems: []\nresults: [\n",
        "kind: ResourceList\nitems:\n- &msg {message: m}\nresults:\n- *msg\n",
        "%YAML 1.1\n---\nkind: ResourceList\n",
        "---\n---\nkind: ResourceList\n",
        "- a\n",
        "{kind: ResourceList}",
    ] {
        assert!(!fast(input), "fast path answered:\n{input}");
    }
}

#[test]
fn scanner_traps_are_not_taken_for_top_level_keys() {
    assert_eq!(ok(TRAPS), vec![result(Severity::Warning, "the real one")]);
    assert_eq!(ok(CRLF), vec![result(Severity::Info, "crlf")]);
}

#[test]
fn multi_line_and_aliased_values_fall_back_correctly() {
    assert_eq!(
        ok("kind: ResourceList\nitems: [\n{a: 1},\n]\nresults:\n- message: after a multi-line flow\n"),
        vec![result(Severity::Unset, "after a multi-line flow")]
    );
    assert_eq!(
        ok("kind: ResourceList\nfunctionConfig: \"a\nresults: fake\"\nitems: []\n"),
        vec![]
    );
    assert_eq!(
        ok("kind: ResourceList\nitems:\n- &msg {message: from an anchor in items}\nresults:\n- *msg\n"),
        vec![result(Severity::Unset, "from an anchor in items")]
    );
    assert_eq!(
        ok("kind: ResourceList\nitems: [{a: \"]\"}, {'b': 'it''s'}, {\"c\":\"d\"}]\nresults: [{\"message\": \"x, y]\", severity: warn}]\n"),
        vec![result(Severity::Other("warn".into()), "x, y]")]
    );
    assert_eq!(
        ok("kind: ResourceList\ritems: []\rresults: [{message: cr}]\r"),
        vec![result(Severity::Unset, "cr")]
    );
}

#[test]
fn big_output() {
    let input = big_list(40, "results:\n- message: big\n  severity: info\n");
    assert_eq!(ok(&input), vec![result(Severity::Info, "big")]);
    let json =
        serde_json::to_string(&serde_yaml_ng::from_str::<serde_json::Value>(&input).unwrap())
            .unwrap();
    assert_eq!(ok(&json), vec![result(Severity::Info, "big")]);
}

#[test]
fn column0_search_matches_a_naive_one() {
    let naive = |b: &[u8], from: usize| {
        (from..b.len().saturating_sub(1))
            .find(|&i| {
                let entry = b[i + 1] == b'-' && b.get(i + 2) == Some(&b' ');
                b[i] == b'\n' && b[i + 1] != b' ' && !entry
            })
            .map(|i| i + 1)
    };
    let mut seed = 0x2545_f491_u64;
    for len in [0, 1, 2, 63, 64, 65, 66, 127, 128, 129, 200, 1000] {
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    match seed >> 60 {
                        0..=1 => b'\n',
                        2 => b'x',
                        3..=4 => b'-',
                        _ => b' ',
                    }
                })
                .collect();
            for from in 0..=len {
                assert_eq!(
                    next_column0_line(&bytes, from),
                    naive(&bytes, from),
                    "{bytes:?} from {from}"
                );
            }
        }
    }
}

/// The documented limit of the fast path: the syntax inside a block-style
/// `items` section is not checked (the strict parse does check it).
#[test]
fn broken_items_pass_the_fast_path_only() {
    let input = "kind: ResourceList\nitems:\n- a: 1\n   b: 2\nresults: [{message: m}]\n";
    assert_eq!(ok(input), vec![result(Severity::Unset, "m")]);
    assert!(matches!(
        parse_output_strict(input.as_bytes()),
        Err(OutputError::Parse(_))
    ));
}

/// A realistic item for the benchmark: ~1.2 KiB of block YAML.
fn bench_item(i: usize) -> String {
    format!(
        "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app-{i}
    namespace: ns-{i}
    labels:
      app: app-{i}
      tier: backend
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'deploy/app-{i}.yaml'
  spec:
    replicas: 3
    selector:
      matchLabels:
        app: app-{i}
    template:
      metadata:
        labels:
          app: app-{i}
      spec:
        containers:
        - name: main
          image: registry.example.com/team/app-{i}:v1.2.3
          args: [\"--port\", \"8080\", \"--verbose\"]
          ports:
          - containerPort: 8080
            name: http
          env:
          - name: FOO
            value: \"bar\"
          - name: DESCRIPTION
            value: |
              multi line
              text here
          resources:
            limits: {{cpu: 500m, memory: 128Mi}}
            requests: {{cpu: 100m, memory: 64Mi}}
          readinessProbe:
            httpGet: {{path: /healthz, port: 8080}}
            initialDelaySeconds: 5
        - name: sidecar
          image: registry.example.com/sidecar:v0.0.1
          command: [/bin/sidecar, --mode=proxy]
"
    )
}

/// Run in release mode, e.g. `cargo test --release -p krm-fn --lib
/// results::scan::tests::bench_6mib -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark"]
fn bench_6mib() {
    use std::time::{Duration, Instant};
    fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> Duration {
        let mut best = Duration::MAX;
        for _ in 0..n {
            let t = Instant::now();
            std::hint::black_box(f());
            best = best.min(t.elapsed());
        }
        best
    }
    const RESULTS: &str = "results:\n- message: big\n  severity: info\n";
    let mut yaml =
        String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let mut n = 0;
    while yaml.len() + RESULTS.len() < 6 << 20 {
        yaml.push_str(&bench_item(n));
        n += 1;
    }
    yaml.push_str(RESULTS);
    let json = serde_json::to_string(&serde_yaml_ng::from_str::<serde_json::Value>(&yaml).unwrap())
        .unwrap();
    println!(
        "{n} Deployments: block YAML {} bytes, compact JSON {} bytes",
        yaml.len(),
        json.len()
    );
    for (name, input) in [("yaml", &yaml), ("json", &json)] {
        assert_eq!(parse_output(input.as_bytes()).unwrap().results.len(), 1);
        assert!(parse_fast(input.as_bytes()).is_some());
        let fast = best_of(20, || parse_output(input.as_bytes()));
        let strict = best_of(3, || parse_output_strict(input.as_bytes()));
        let value = best_of(2, || serde_yaml_ng::from_str::<serde_yaml_ng::Value>(input));
        println!(
            "{name}: parse_output {fast:?}; parse_output_strict (serde_yaml_ng, IgnoredAny items) \
             {strict:?}; serde_yaml_ng::Value {value:?}"
        );
    }
    let crlf = yaml.replace('\n', "\r\n");
    assert!(parse_fast(crlf.as_bytes()).is_some());
    let t = best_of(20, || parse_output(crlf.as_bytes()));
    println!("yaml with CRLF ({} bytes): parse_output {t:?}", crlf.len());
    let with_results = format!("{yaml}{}", "- message: another\n  severity: warning\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: x, namespace: y}\n  field: {path: data.x}\n".repeat(1000));
    let t = best_of(10, || parse_output(with_results.as_bytes()));
    println!(
        "yaml + 1000 results ({} bytes): parse_output {t:?}",
        with_results.len()
    );
}
