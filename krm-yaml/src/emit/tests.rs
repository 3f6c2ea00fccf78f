//! The encoder's tests: the golden fixtures in `tests/fixtures/yaml/emit`
//! against yaml.v3's output, and the trees the parser never builds.

use super::*;
use crate::node::Kind;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml/emit")
}

/// The first differing line of `want` and `got`, with two lines of
/// context, each line shown escaped so whitespace differences show.
fn diff(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.split_inclusive('\n').collect();
    let g: Vec<&str> = got.split_inclusive('\n').collect();
    let first = w
        .iter()
        .zip(&g)
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    let from = first.saturating_sub(2);
    let mut out = format!("  first difference at line {}\n", first + 1);
    for (i, line) in w.iter().enumerate().skip(from).take(first - from) {
        out.push_str(&format!("  {:>4}   {line:?}\n", i + 1));
    }
    for (i, line) in w.iter().enumerate().skip(first).take(3) {
        out.push_str(&format!("  {:>4} - {line:?}\n", i + 1));
    }
    for (i, line) in g.iter().enumerate().skip(first).take(3) {
        out.push_str(&format!("  {:>4} + {line:?}\n", i + 1));
    }
    out
}

/// Every `NAME.json` under tests/fixtures/yaml/emit encodes to exactly
/// what yaml.v3 wrote for it (`NAME.out.yaml`, and `NAME.compact.yaml`
/// with CompactSeqIndent); see regen.sh there.
#[test]
fn golden_cases_match_yaml_v3() {
    let dir = fixtures();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the emit fixtures directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    assert!(
        names.len() >= 80,
        "only {} golden cases in {}",
        names.len(),
        dir.display()
    );

    let mut failures = Vec::new();
    for name in &names {
        let json =
            std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("a case's input");
        // A stream with no documents (comments only) dumps as `null`.
        let docs: Vec<Node> = serde_json::from_str::<Option<Vec<Node>>>(&json)
            .unwrap_or_else(|e| panic!("{name}.json: {e}"))
            .unwrap_or_default();
        for (compact, ext) in [(false, "out.yaml"), (true, "compact.yaml")] {
            let file = format!("{name}.{ext}");
            let want =
                std::fs::read_to_string(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            let got = encode(&docs, compact);
            if got != want {
                failures.push(format!("{file}:\n{}", diff(&want, &got)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden files differ:\n{}",
        failures.len(),
        names.len() * 2,
        failures.join("\n")
    );
}

#[test]
fn no_documents_is_empty_output() {
    assert_eq!(encode(&[], false), "");
}

#[test]
fn a_bare_node_is_its_own_document() {
    let map = Node::mapping(vec![Node::string("a"), Node::string("1")]);
    assert_eq!(encode_node(&map, false), "a: \"1\"\n");
    let docs = [map.clone(), Node::string("x")];
    assert_eq!(encode(&docs, true), "a: \"1\"\n---\nx\n");
}

/// Trees the Go encoder refuses: written as documented on the module.
#[test]
fn invalid_trees_are_written_sanely() {
    let empty_doc = Node {
        kind: Kind::Document,
        ..Node::default()
    };
    assert_eq!(encode_node(&empty_doc, false), "null\n");

    let nested = Node::sequence(vec![Node {
        kind: Kind::Document,
        content: vec![Node::string("inner")],
        ..Node::default()
    }]);
    assert_eq!(encode_node(&nested, false), "- inner\n");

    let alias = |value: &str, alias: &str| Node {
        kind: Kind::Alias,
        value: value.into(),
        alias: alias.into(),
        ..Node::default()
    };
    let mut anchored = Node::string("v");
    anchored.anchor = "a".into();
    let seq = Node::sequence(vec![anchored, alias("", "a"), alias("", "")]);
    assert_eq!(encode_node(&seq, false), "- &a v\n- *a\n- null\n");
}

#[test]
fn resolve_feeds_quoting() {
    // Node::scalar tags by resolve_plain, so the value stays plain;
    // Node::string quotes what would read back as another type.
    let m = Node::mapping(vec![
        Node::string("n"),
        Node::scalar("10"),
        Node::string("s"),
        Node::string("10"),
        Node::string("t"),
        Node::string("2001-12-14"),
    ]);
    assert_eq!(
        encode_node(&m, false),
        "n: 10\ns: \"10\"\nt: \"2001-12-14\"\n"
    );
}
