//! Fuzzing the readers of outside YAML: the decoder ([`parse`]), what is
//! parsed written back ([`encode`]), aliases followed under their budget
//! ([`to_value`], `.json` files), the package stream reader and writer, and
//! `.krmignore` globs. Each target runs for a bounded time (see the
//! `fuzzing` crate for the knobs: `FUZZ_SECONDS`, `FUZZ_INPUT_SECONDS`,
//! `ARBTEST_SEED`); a failure prints its input.
//!
//! Properties, on every input: no panic, no input past its deadline, and
//! output in proportion to the input where that can be measured.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fuzzing::{yaml, Unstructured};
use krm_yaml::emit::encode;
use krm_yaml::package::{
    derive_seq_indent, documents_text, file_content, glob_match, read_documents,
    read_documents_keeping_duplicates, split_pieces, DocError,
};
use krm_yaml::parse::parse;
use krm_yaml::value::to_value;
use krm_yaml::{Kind, Node};

/// Largest input: big enough for deep nesting and long runs, small enough
/// for hundreds of inputs a second in a debug build.
const MAX_INPUT: usize = 32 * 1024;

fn seeds() -> Arc<Vec<Vec<u8>>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml/parse");
    Arc::new(yaml::seeds(&dir, "yaml"))
}

/// Nodes of a tree, and the deepest path (no recursion: 10,000 deep).
fn measure(docs: &[Node]) -> (usize, usize, usize) {
    let (mut nodes, mut depth, mut text) = (0, 0, 0);
    let mut stack: Vec<(&Node, usize)> = docs.iter().map(|d| (d, 1)).collect();
    while let Some((n, d)) = stack.pop() {
        nodes += 1;
        depth = depth.max(d);
        text += n.value.len()
            + n.anchor.as_str().len()
            + n.head_comment.as_str().len()
            + n.line_comment.as_str().len()
            + n.foot_comment.as_str().len();
        stack.extend(n.content.iter().map(|c| (c, d + 1)));
    }
    (nodes, depth, text)
}

/// The nodes and scalar bytes of a value (no recursion).
fn value_size(v: &serde_yaml_ng::Value) -> usize {
    use serde_yaml_ng::Value;
    let mut size = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        size += 1;
        match v {
            Value::String(s) => size += s.len(),
            Value::Sequence(s) => stack.extend(s),
            Value::Mapping(m) => {
                for (k, v) in m {
                    stack.push(k);
                    stack.push(v);
                }
            }
            Value::Tagged(t) => stack.push(&t.value),
            _ => {}
        }
    }
    size
}

/// `docs` with every comment taken off.
fn without_comments(docs: &[Node]) -> Vec<Node> {
    let mut docs = docs.to_vec();
    let mut stack: Vec<&mut Node> = docs.iter_mut().collect();
    while let Some(n) = stack.pop() {
        n.head_comment = Default::default();
        n.line_comment = Default::default();
        n.foot_comment = Default::default();
        stack.extend(n.content.iter_mut());
    }
    docs
}

/// How far aliases may make data grow: yaml.v3's budget lets up to 99% of
/// the nodes decoded come through aliases (so about 100 times the tree) past
/// 1,000 nodes; an alias to a scalar copies its text.
fn data_bound(input_len: usize, nodes: usize) -> usize {
    100 * (nodes + input_len) + 100_000
}

/// parse → encode (compact and wide) → parse again; and the data of what
/// was parsed, aliases followed.
#[test]
fn fuzz_parse_and_emit() {
    let seeds = seeds();
    let stats = fuzzing::run(
        "krm-yaml parse+emit",
        Duration::from_secs(10),
        move |u: &mut Unstructured<'_>| yaml::text(u, &seeds, MAX_INPUT),
        |text: &String| {
            let Ok(docs) = parse(text) else {
                return false;
            };
            let (nodes, depth, bytes) = measure(&docs);
            // Every node and every byte of value or comment comes from the
            // input (the tree keeps aliases as names, not copies).
            assert!(nodes <= 4 * text.len() + 4, "{nodes} nodes");
            assert!(bytes <= 2 * text.len() + 64, "{bytes} bytes of text");
            for compact in [true, false] {
                let out = encode(&docs, compact);
                // Indentation can grow with depth (a comment from column 0
                // written at its node's), nothing else.
                let bound = 8 * (text.len() + 16) * (depth + 1);
                assert!(out.len() <= bound, "{} bytes written", out.len());
                if parse(&out).is_err() {
                    // yaml.v3's encoder writes some comments where they
                    // break the text (`a: !!map # x\n  b: &a\n    c: 1\n`
                    // is written with `&a` at column 0), and this one
                    // writes what it writes: without comments, the text
                    // must read back.
                    let bare = encode(&without_comments(&docs), compact);
                    if let Err(e) = parse(&bare) {
                        panic!("compact={compact}: what was written does not parse: {e}\n{bare}");
                    }
                }
            }
            for doc in &docs {
                if let Ok(v) = to_value(doc) {
                    let size = value_size(&v);
                    assert!(
                        size <= data_bound(text.len(), nodes),
                        "aliases made {size} of data from {} bytes",
                        text.len()
                    );
                }
            }
            true
        },
    );
    stats.assert_both_paths("parse+emit", 0.1);
}

/// A stream read as kpt reads a file's resources, written back as kpt
/// writes them (YAML, or JSON for a `.json` file), and read again.
#[test]
fn fuzz_package_streams() {
    let seeds = seeds();
    let stats = fuzzing::run(
        "krm-yaml package streams",
        Duration::from_secs(8),
        move |u: &mut Unstructured<'_>| yaml::text(u, &seeds, MAX_INPUT),
        |text: &String| {
            let _ = split_pieces(text);
            let _ = derive_seq_indent(text);
            let kept = read_documents_keeping_duplicates(text);
            let docs = match read_documents(text) {
                Ok(docs) => docs,
                // The reader that keeps duplicates reads on, and may meet
                // an error in a later document.
                Err(DocError::DuplicateKey(_)) => return false,
                Err(e) => {
                    assert_eq!(kept.err(), Some(e), "the two readers disagree");
                    return false;
                }
            };
            assert_eq!(kept.as_ref().ok(), Some(&docs), "the two readers disagree");
            let pairs: Vec<(&Node, bool)> = docs
                .iter()
                .map(|d| (&d.node, d.seq_indent == "wide"))
                .collect();
            let written = documents_text(&pairs);
            let (nodes, depth, _) =
                measure(&docs.iter().map(|d| d.node.clone()).collect::<Vec<_>>());
            assert!(written.len() <= 8 * (text.len() + 16) * (depth + 1));
            if read_documents(&written).is_err() {
                // As in `fuzz_parse_and_emit`: yaml.v3's comment placement.
                let bare: Vec<Node> = docs.iter().map(|d| d.node.clone()).collect();
                let bare = without_comments(&bare);
                let pairs: Vec<(&Node, bool)> = bare.iter().map(|n| (n, false)).collect();
                let written = documents_text(&pairs);
                if let Err(e) = read_documents(&written) {
                    panic!("what was written does not read back: {e}\n{written}");
                }
            }
            // Indented JSON: each line as deep as its node, so a deep input
            // writes depth x size bytes, as Go's encoder does (24 KB of
            // `- - - ...` 3,000 deep is 180 MB, 11 s in a debug build):
            // written only where a rough estimate of that is under 8 MiB.
            let rough = (text.len() + 16 * nodes).saturating_mul(depth + 1);
            if rough <= 8 << 20 {
                for d in &docs {
                    if let Ok(json) = file_content("r.json", &[(&d.node, false)]) {
                        assert!(json.len() <= 8 * data_bound(text.len(), nodes) * (depth + 1));
                    }
                }
            }
            assert_eq!(
                docs.iter()
                    .filter(|d| d.node.kind != Kind::Document)
                    .count(),
                0
            );
            true
        },
    );
    stats.assert_both_paths("package streams", 0.05);
}

/// A `.krmignore` pattern against a path: no panic, no blow-up.
#[test]
fn fuzz_krmignore_globs() {
    let stats = fuzzing::run(
        "krm-yaml krmignore globs",
        Duration::from_secs(3),
        |u: &mut Unstructured<'_>| {
            const ALPHABET: &[&str] = &["*", "?", "[", "]", "^", "!", "-", "/", "a", "b", ".", "é"];
            // Short ones are checked against the reference too.
            let short = u.ratio(1, 2)?;
            let pieces = if short { (8, 8) } else { (40, 60) };
            let mut pick = |n: usize| -> fuzzing::arbitrary::Result<String> {
                let mut s = String::new();
                for _ in 0..n {
                    let piece = *u.choose(ALPHABET)?;
                    let times = if !short && u.ratio(1, 8)? {
                        u.int_in_range(2..=64u8)?
                    } else {
                        1
                    };
                    for _ in 0..times {
                        s.push_str(piece);
                    }
                }
                Ok(s)
            };
            Ok(Glob {
                pattern: pick(pieces.0)?,
                path: pick(pieces.1)?,
            })
        },
        |g: &Glob| {
            let hit = glob_match(g.pattern.as_bytes(), g.path.as_bytes());
            if g.pattern.len() + g.path.len() <= 24 {
                let want = glob_reference(g.pattern.as_bytes(), g.path.as_bytes());
                assert_eq!(hit, want, "the reference says {want}");
            }
            hit
        },
    );
    assert!(stats.cases > 0);
}

#[derive(Debug)]
struct Glob {
    pattern: String,
    path: String,
}

impl fuzzing::Input for Glob {
    fn size(&self) -> usize {
        self.pattern.len() + self.path.len()
    }
}

/// [`glob_match`] before it remembered failed states: the reference, on
/// inputs short enough for its exponential worst case.
fn glob_reference(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len())
            .take_while(|&i| i == 0 || s[i - 1] != b'/')
            .any(|i| glob_reference(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && s[0] != b'/' && glob_reference(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(close) = p.iter().skip(1).position(|c| *c == b']').map(|i| i + 1) else {
                return !s.is_empty() && s[0] == b'[' && glob_reference(&p[1..], &s[1..]);
            };
            let Some(&c) = s.first() else {
                return false;
            };
            let class = &p[1..close];
            let (neg, class) = match class.first() {
                Some(b'^' | b'!') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != neg && c != b'/' && glob_reference(&p[close + 1..], &s[1..])
        }
        Some(&c) => !s.is_empty() && s[0] == c && glob_reference(&p[1..], &s[1..]),
    }
}

/// Found by `fuzz_krmignore_globs`: stars before a byte the name lacks
/// tried every split of the name, exponentially many.
#[test]
fn a_glob_with_many_stars_fails_fast() {
    let (hit, spread) = fuzzing::within(Duration::from_secs(10), || {
        let name = [b'a'; 200];
        (
            glob_match(b"*a*a*a*a*a*a*a*a*a*a*a*a*b", &name),
            glob_match(b"*a*a*a*a*a*a*a*a*a*a*a*a*", &name),
        )
    });
    assert!(!hit);
    assert!(spread);
    let stars = "*".repeat(100_000);
    assert!(fuzzing::within(
        Duration::from_secs(10),
        move || glob_match(stars.as_bytes(), b"abc")
    ));
}

/// Found by `fuzz_parse_and_emit`: libyaml-safer 0.3, left to guess the
/// encoding, took any first byte 0xEF for a byte order mark and refused a
/// first character from U+F000 to U+FFFF, which yaml.v3 reads.
#[test]
fn a_first_character_from_u_f000_to_u_ffff_is_read() {
    for text in ["\u{fffd}a: 1\n", "\u{ff4b}ind: x\n", "\u{f900}\n"] {
        assert!(parse(text).is_ok(), "{text:?}: {:?}", parse(text));
    }
    // Parsed after a line break, written first.
    let docs = parse("\n\u{fffd}a: 1\n").unwrap();
    assert!(parse(&encode(&docs, true)).is_ok());
}

/// Found by measuring what `to_value` makes of an anchored long scalar
/// aliased many times (under yaml.v3's node ratio thanks to a plain node
/// every 60): 122 KiB of text made 1.3 GB of strings. Now refused once
/// the copies pass a hundred times the tree's text.
#[test]
fn aliases_to_a_long_scalar_copy_a_bounded_amount() {
    let big = "x".repeat(64 * 1024);
    let mut text = format!("a: &x {big}\nb: [");
    for i in 0..20_000 {
        text.push_str(if i % 60 == 59 { "1," } else { "*x," });
    }
    text.push_str("]\n");
    let docs = parse(&text).unwrap();
    let err = fuzzing::within(Duration::from_secs(10), move || {
        to_value(&docs[0]).map(|v| value_size(&v))
    });
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("yaml: document contains excessive aliasing".to_owned())
    );
    // Anchors as documents use them copy far less, and are followed.
    let text = format!("a: &x {}\nb: [*x, *x, *x]\n", "y".repeat(1000));
    let v = to_value(&parse(&text).unwrap()[0]).unwrap();
    assert!(value_size(&v) > 4000);
}
