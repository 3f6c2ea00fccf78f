//! The decoder's tests: the golden fixtures in `tests/fixtures/yaml/parse`,
//! the rebuilt tokens against libyaml's, the threaded path against the
//! inline one, errors, and the inputs kept from libyaml-safer.

use super::recon::Recon;
use super::scanner_error::token_type;
use super::tokens::{Desync, Mk, T};
use super::*;
use libyaml_safer::{Event, EventData, Parser};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml/parse")
}

/// libyaml-safer's events up to the stream end or the first error.
fn libyaml_events(text: &str) -> (Vec<Event>, Option<libyaml_safer::Error>) {
    let mut input = text.as_bytes();
    let mut parser = Parser::new();
    parser.set_input_string(&mut input);
    let mut events = Vec::with_capacity(text.len() / 8 + 4);
    loop {
        match parser.parse() {
            Ok(ev) => {
                let end = matches!(ev.data, EventData::StreamEnd);
                events.push(ev);
                if end {
                    return (events, None);
                }
            }
            Err(e) => return (events, Some(e)),
        }
    }
}

fn cases() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let dir = std::fs::read_dir(fixtures()).expect("fixtures dir");
    for entry in dir {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let bytes = std::fs::read(&path).expect("read case");
        out.push((name, String::from_utf8(bytes).expect("utf-8 case")));
    }
    out.sort();
    out
}

/// The first difference between two trees, as a path and both values.
fn diff(path: &str, got: &Node, want: &Node) -> Option<String> {
    macro_rules! field {
        ($f:ident) => {
            if got.$f != want.$f {
                return Some(format!(
                    "{path}.{}: got {:?}, want {:?} (node {:?} at {}:{})",
                    stringify!($f),
                    got.$f,
                    want.$f,
                    want.value,
                    want.line,
                    want.column
                ));
            }
        };
    }
    field!(kind);
    field!(style);
    field!(tag);
    field!(value);
    field!(anchor);
    field!(alias);
    field!(line);
    field!(column);
    field!(head_comment);
    field!(line_comment);
    field!(foot_comment);
    for (i, (g, w)) in got.content.iter().zip(&want.content).enumerate() {
        if let Some(d) = diff(&format!("{path}.content[{i}]"), g, w) {
            return Some(d);
        }
    }
    field!(content);
    None
}

fn check(name: &str, text: &str, golden: &str) -> Result<(), String> {
    let want: serde_json::Value =
        serde_json::from_str(golden).map_err(|e| format!("{name}: bad golden: {e}"))?;
    let (got, in_step) = parse_traced(text);
    if !in_step && got.is_ok() {
        return Err(format!("{name}: comment replay out of step"));
    }
    if let Some(err) = want.get("error").and_then(|e| e.as_str()) {
        return match got {
            Err(e) if e.to_string() == err => Ok(()),
            Err(e) => Err(format!("{name}: error {:?}, want {err:?}", e.to_string())),
            Ok(_) => Err(format!("{name}: parsed, want error {err:?}")),
        };
    }
    let want: Vec<Node> = if want.is_null() {
        Vec::new()
    } else {
        serde_json::from_value(want).map_err(|e| format!("{name}: bad golden: {e}"))?
    };
    let got = got.map_err(|e| format!("{name}: error {:?}, want a tree", e.to_string()))?;
    if got.len() != want.len() {
        return Err(format!(
            "{name}: {} documents, want {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Some(d) = diff(&format!("[{i}]"), g, w) {
            return Err(format!("{name}: {d}"));
        }
    }
    Ok(())
}

/// Every `NAME.yaml` in tests/fixtures/yaml/parse gives yaml.v3's tree
/// or error as recorded in `NAME.json` (see regen.sh there).
#[test]
fn golden() {
    let cases = cases();
    assert!(cases.len() >= 100, "only {} golden cases", cases.len());
    let mut failures = Vec::new();
    for (name, text) in &cases {
        let golden =
            std::fs::read_to_string(fixtures().join(format!("{name}.json"))).expect("golden file");
        if let Err(e) = check(name, text, &golden) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The token stream rebuilt from the events is libyaml's own.
#[test]
fn rebuilt_tokens_are_libyamls() {
    let mut failures = Vec::new();
    for (name, text) in cases() {
        let (text, _) = prepare(&text);
        let text = text.as_ref();
        let (events, err) = libyaml_events(text);
        if err.is_some() {
            continue;
        }
        let toks = match Recon::run(text.as_bytes(), &events) {
            Ok(t) => t,
            Err(Desync) => {
                failures.push(format!("{name}: rebuild failed"));
                continue;
            }
        };
        let mut input = text.as_bytes();
        let mut scanner = libyaml_safer::Scanner::new();
        scanner.set_input_string(&mut input);
        let want: Vec<(T, Mk)> = scanner
            .map(|t| t.map(|t| (token_type(&t.data), Mk::of(t.start_mark))))
            .collect::<Result<_, _>>()
            .expect("scanner accepts what the parser accepts");
        let got: Vec<(T, Mk)> = toks
            .iter()
            .filter(|t| !t.dead)
            .map(|t| (t.t, t.start))
            .collect();
        if got != want {
            let i = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g != w)
                .unwrap_or(got.len().min(want.len()));
            failures.push(format!(
                "{name}: token {i}: got {:?}, want {:?}",
                got.get(i.saturating_sub(1)..(i + 2).min(got.len())),
                want.get(i.saturating_sub(1)..(i + 2).min(want.len()))
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The parser thread gives what the single thread gives.
#[test]
fn threaded_matches_inline() {
    let mut text = String::new();
    for (name, case) in cases() {
        if name.starts_with("err_") || !matches!(parse(&case), Ok(d) if !d.is_empty()) {
            continue;
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if !text.is_empty() {
            text.push_str("---\n");
        }
        text.push_str(case.strip_prefix('\u{feff}').unwrap_or(&case));
    }
    while text.len() < 2 * THREAD_MIN {
        text = format!("{text}\n---\n{text}");
    }
    let (inline, ok) = parse_with(&text, false);
    assert!(ok, "comment replay out of step");
    let (threaded, ok) = parse_with(&text, true);
    assert!(ok, "comment replay out of step");
    assert_eq!(inline, threaded);
    assert!(inline.is_ok_and(|d| d.len() > 100));
    // An error late in a large input.
    let bad = format!("{text}\n---\na: [1, 2\n");
    assert_eq!(parse_with(&bad, false).0, parse_with(&bad, true).0);
}

#[test]
fn error_display_and_line() {
    let e = parse("a: [1, 2\nb: 3\n").expect_err("unclosed flow sequence");
    assert_eq!(
        e.to_string(),
        "yaml: line 1: did not find expected ',' or ']'"
    );
    assert_eq!(e.line(), Some(1));
    assert_eq!(e.message(), "did not find expected ',' or ']'");
    let e = parse("a: *x\n").expect_err("unknown anchor");
    assert_eq!(e.to_string(), "yaml: unknown anchor 'x' referenced");
    assert_eq!(e.line(), None);
}

/// Inputs libyaml-safer 0.3 panics on (a process abort in release) are
/// kept from it: a block scalar running into the end of input, and a
/// tag followed by `,` in a flow collection.
#[test]
fn libyaml_panics_are_avoided() {
    for (text, value) in [
        ("a: |\n  text", "text"),
        ("a: |+\n  text", "text"),
        ("a: |-\n  text", "text"),
        ("a: >\n  one\n  two", "one two"),
        ("a: |\n  text\n    ", "text\n  "),
    ] {
        let docs = parse(text).expect(text);
        assert_eq!(docs[0].content[0].content[1].value, value, "{text:?}");
    }
    for text in ["[!!str, a]\n", "x: {a: !t, b: c}\n", "x: [!<tag:x>, b]\n"] {
        let e = parse(text).expect_err(text);
        assert_eq!(
            e.message(),
            "did not find expected whitespace or line break"
        );
    }
    // A `!` and a `,` that are no tag: parsed as usual.
    let docs = parse("x: \"a !t, b\"\ny: [a!b, c]\n").expect("no tag");
    assert_eq!(docs[0].content[0].content[1].value, "a !t, b");
}

/// yaml.v3's nesting limit for flow collections (block ones: the
/// `err_depth_block_seq` golden case). Ignored: libyaml-safer checks
/// every open flow level at each token, slow in a debug build.
#[test]
#[ignore = "seconds in a debug build: libyaml-safer rechecks every open flow level per token"]
fn flow_depth_limit() {
    let deep = format!("{}{}\n", "[".repeat(10001), "]".repeat(10001));
    let e = parse(&deep).expect_err("too deep");
    assert_eq!(e.to_string(), "yaml: exceeded max depth of 10000");
    let ok = format!("{}{}\n", "[".repeat(10000), "]".repeat(10000));
    assert!(parse(&ok).is_ok());
}

/// `cargo test --release -p function-runner --lib yaml::parse -- --ignored`:
/// 4,000 Deployments (~5 MB).
#[test]
#[ignore = "a timing, for release builds by hand (see its doc comment)"]
fn speed_4000_deployments() {
    let mut text = String::new();
    for i in 0..4000 {
        if i > 0 {
            text.push_str("---\n");
        }
        text.push_str(&format!(
            "# Deployment {i}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: default # ns\n  labels:\n    app: app-{i}\n    tier: backend\n  annotations:\n    config.kubernetes.io/index: '{i}'\n    description: \"A deployment for app {i}\"\nspec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n      # main container\n      - name: app\n        image: registry.example.com/app:{i}.0.1\n        args: [\"--port\", \"8080\", \"--verbose\"]\n        ports:\n        - containerPort: 8080\n          protocol: TCP\n        env:\n        - name: FOO\n          value: bar\n        - name: NUMBER\n          value: \"{i}\"\n        resources:\n          limits:\n            cpu: 500m\n            memory: 128Mi\n          requests:\n            cpu: 250m\n            memory: 64Mi\n        readinessProbe:\n          httpGet:\n            path: /healthz\n            port: 8080\n          initialDelaySeconds: 5\n        volumeMounts:\n        - name: config\n          mountPath: /etc/config\n      volumes:\n      - name: config\n        configMap:\n          name: app-config-{i}\n"
        ));
    }
    let mut best = std::time::Duration::MAX;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let docs = parse(&text).expect("deployments parse");
        best = best.min(t.elapsed());
        assert_eq!(docs.len(), 4000);
    }
    eprintln!("parsed {} bytes in {best:?}", text.len());
}
