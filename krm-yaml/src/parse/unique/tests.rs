//! Duplicate keys: found at any depth, in block and flow mappings, keys
//! compared as yaml.v3's decoder compares them.

use super::*;
use crate::parse::parse;

/// The duplicate in the first document of `text`, as its message.
fn dup(text: &str) -> Option<String> {
    let docs = parse(text).expect("parses");
    duplicate_key(&docs[0]).map(|d| d.to_string())
}

#[test]
fn top_level_block_mapping() {
    assert_eq!(
        dup("a: \"1\"\na: \"2\"\n").as_deref(),
        Some("line 2: mapping key \"a\" already defined at line 1")
    );
}

#[test]
fn nested_at_any_depth() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels:\n    app: a\n    \
                tier: b\n    app: c\ndata:\n  k: v\n";
    assert_eq!(
        dup(text).as_deref(),
        Some("line 8: mapping key \"app\" already defined at line 6")
    );
    // In a mapping inside a sequence inside a mapping.
    let text = "spec:\n  containers:\n  - name: a\n    image: x\n  - name: b\n    env:\n    \
                - name: E\n      value: \"1\"\n      value: \"2\"\n";
    assert_eq!(
        dup(text).as_deref(),
        Some("line 9: mapping key \"value\" already defined at line 8")
    );
}

#[test]
fn flow_mappings() {
    assert_eq!(
        dup("m: {a: 1, b: 2, a: 3}\n").as_deref(),
        Some("line 1: mapping key \"a\" already defined at line 1")
    );
    assert_eq!(
        dup("l: [{x: 1}, {y: 2, y: 2}]\n").as_deref(),
        Some("line 1: mapping key \"y\" already defined at line 1")
    );
    assert_eq!(
        dup("m: {a: 1,\n  b: 2,\n  a: 3}\n").as_deref(),
        Some("line 3: mapping key \"a\" already defined at line 1")
    );
}

#[test]
fn quoted_and_plain_keys_are_one_key() {
    for text in [
        "a: 1\n\"a\": 2\n",
        "'a': 1\na: 2\n",
        "\"a\": 1\n'a': 2\n",
        "!!str a: 1\na: 2\n",
        "? a\n: 1\na: 2\n",
        "? |-\n  a\n: 1\na: 2\n",
    ] {
        let got = dup(text).unwrap_or_else(|| panic!("no duplicate found in {text:?}"));
        assert!(got.contains("mapping key \"a\""), "{text:?}: {got}");
    }
    // By value, as yaml.v3 compares: `1` and `"1"` are one key.
    assert!(dup("1: a\n\"1\": b\n").is_some());
}

#[test]
fn different_keys_are_not_refused() {
    for text in [
        "a: 1\nb: 2\nA: 3\n\"a \": 4\n",
        "x:\n  a: 1\ny:\n  a: 1\n",
        "- a: 1\n- a: 2\n",
        "m: {a: 1, b: 2}\nn: {a: 1}\n",
        "1: a\n01: b\n0x1: c\n",
        "a: &x 1\nb: *x\n",
        // Keys that are collections are not compared.
        "? [a]\n: 1\n? [b]\n: 2\n",
        "? {a: 1}\n: 1\n? {b: 1}\n: 2\n",
        // A value repeated is not a key repeated.
        "a: a\nb: a\n",
    ] {
        assert_eq!(dup(text), None, "{text:?}");
    }
    // Many keys (the hashed path), none repeated.
    let text: String = (0..200).map(|i| format!("k{i}: {i}\n")).collect();
    assert_eq!(dup(&text), None);
}

#[test]
fn many_keys_use_the_same_rule() {
    let mut text: String = (0..100).map(|i| format!("k{i}: {i}\n")).collect();
    text.push_str("\"k42\": again\n");
    assert_eq!(
        dup(&text).as_deref(),
        Some("line 101: mapping key \"k42\" already defined at line 43")
    );
}

#[test]
fn merge_keys_as_yaml_v3() {
    // One `<<` beside keys it also merges is fine: the mapping's own key
    // wins, as YAML's merge says.
    let one = "base: &b {a: 1, c: 2}\nm:\n  <<: *b\n  a: 3\n";
    assert_eq!(dup(one), None);
    // A second `<<` in one mapping is a duplicate key for yaml.v3's
    // decoder, as any other; a sequence of maps is the way to merge two.
    let two = "b1: &b1 {a: 1}\nb2: &b2 {c: 2}\nm:\n  <<: *b1\n  <<: *b2\n";
    assert_eq!(
        dup(two).as_deref(),
        Some("line 5: mapping key \"<<\" already defined at line 4")
    );
    assert_eq!(
        dup("b1: &b1 {a: 1}\nb2: &b2 {c: 2}\nm:\n  <<: [*b1, *b2]\n"),
        None
    );
}

#[test]
fn alias_keys() {
    // Two aliases to one anchor are one key; an alias and a scalar with
    // the anchor's name are not (different kinds, as yaml.v3 compares).
    assert!(dup("k: &a x\nm:\n  *a : 1\n  *a : 2\n").is_some());
    assert_eq!(dup("k: &a x\nm:\n  *a : 1\n  a: 2\n"), None);
}

#[test]
fn the_first_in_the_text_is_named() {
    // The outer mapping's duplicate is later in the text than the inner
    // one's: the inner one is named.
    let text = "a:\n  x: 1\n  x: 2\nb: 1\nb: 2\n";
    assert_eq!(
        dup(text).as_deref(),
        Some("line 3: mapping key \"x\" already defined at line 2")
    );
    let text = "b: 1\nb: 2\na:\n  x: 1\n  x: 2\n";
    assert_eq!(
        dup(text).as_deref(),
        Some("line 2: mapping key \"b\" already defined at line 1")
    );
}

#[test]
fn keys_are_go_quoted() {
    assert_eq!(
        dup("\"a\\tb\\\"\": 1\n\"a\\tb\\\"\": 2\n").as_deref(),
        Some("line 2: mapping key \"a\\tb\\\"\" already defined at line 1")
    );
}

#[test]
fn shifted_lines() {
    let d = duplicate_key(&parse("a: 1\na: 2\n").expect("parses")[0]).expect("duplicate");
    assert_eq!(
        d.shifted(10).to_string(),
        "line 12: mapping key \"a\" already defined at line 11"
    );
}

#[test]
fn deep_nesting_does_not_recurse() {
    // Just inside yaml.v3's nesting limit (10,000).
    let depth = 9_990;
    let mut text = "[".repeat(depth);
    text.push_str("{a: 1, a: 2}");
    text.push_str(&"]".repeat(depth));
    let docs = parse(&text).expect("parses");
    assert!(duplicate_key(&docs[0]).is_some());
}
