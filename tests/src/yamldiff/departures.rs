//! The differences the harness accepts, each exactly: where our oracle is
//! not kpt's yaml.v3, and where kpt loses or misplaces what the user wrote
//! and we keep it (docs/eval-render.md, "Where we depart from kpt").

use krm_yaml::{Kind, Node, Style};

use super::gen::Package;
use super::FileDiff;

/// gopkg.in/yaml.v3 3.0.1 (Debian's, the oracle) drops the empty line
/// that starts a literal or folded scalar's body (`|2\n\n  text`); kpt's
/// go.yaml.in/yaml/v3 v3.0.4 writes it (go-yaml issue 755, fixed in the
/// kyaml fork that v3.0.4 took in), and so do we.
pub const ORACLE_LEADING_BLANK: &str = "yaml.v3 3.0.1 drops a block scalar's leading empty line";

/// `ours` as yaml.v3 3.0.1 would write it: the empty line right after a
/// block scalar's header line removed.
pub fn block_scalar_leading_blank(ours: &str) -> String {
    let mut out = String::with_capacity(ours.len());
    let mut after_header = false;
    for line in ours.split_inclusive('\n') {
        if after_header && line == "\n" {
            after_header = false;
            continue;
        }
        after_header = is_block_header(line.trim_end_matches('\n'));
        out.push_str(line);
    }
    out
}

/// Whether a line written by yaml.v3 ends with a block scalar's header
/// (`|`, `>`, with indicators) and no line comment: 3.0.1 writes the line
/// break after a comment, and loses it only where there is none.
fn is_block_header(line: &str) -> bool {
    let code = line;
    let Some(at) = code.rfind(['|', '>']) else {
        return false;
    };
    let before = &code[..at];
    let after = &code[at + 1..];
    (before.is_empty() || before.ends_with(' '))
        && after
            .chars()
            .all(|c| c.is_ascii_digit() || c == '-' || c == '+')
}

/// kpt fails a run whose resources hold an empty mapping key (`"": x`)
/// or a key that is a collection (`? [a, b]`, `{}: x`) after the function
/// returns (kyaml's walker cannot look such a key up: "wrong node kind:
/// expected ScalarNode but got MappingNode"); we run it.
pub const EMPTY_KEY: &str = "kpt refuses a resource with an empty or collection key";

/// The departure that explains kpt failing where we did not.
pub fn refused_by_kpt(
    pkg: &Package,
    kpt: &(i32, String),
    ours: &(i32, String),
) -> Option<&'static str> {
    let refused = kpt.0 != 0
        && ours.0 == 0
        && kpt
            .1
            .contains("wrong node kind: expected ScalarNode but got MappingNode: node contents:");
    (refused && pkg.files.iter().any(|(_, b)| has_empty_key(b))).then_some(EMPTY_KEY)
}

fn has_empty_key(bytes: &[u8]) -> bool {
    fn walk(n: &Node) -> bool {
        match n.kind {
            Kind::Mapping => {
                n.content
                    .chunks(2)
                    .any(|kv| kv[0].kind != Kind::Scalar || kv[0].value.is_empty())
                    || n.content.iter().any(walk)
            }
            _ => n.content.iter().any(walk),
        }
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    krm_yaml::parse::parse(text).is_ok_and(|docs| docs.iter().any(walk))
}

/// A flow collection's line comment that the function wrote in block
/// style stays with what the user wrote it on (on the key's line, or for a
/// sequence entry that is a mapping on the line above it); kpt moves it after the next scalar,
/// to the next document's head, or drops it.
pub const FLOW_LINE_COMMENT: &str = "a flow collection's line comment kept on its line";

/// The name of the documented departure that explains every difference
/// between kpt's files and ours, if one does: each of our files, with the
/// departure undone, is kpt's byte for byte.
pub fn accepts(pkg: &Package, differs: &[FileDiff]) -> Option<&'static str> {
    let inputs = input_resources(pkg);
    for (_, kpt, ours) in differs {
        let (Some(kpt), Some(ours)) = (kpt, ours) else {
            return None;
        };
        if undo_flow_line_comments(&inputs, ours)?.as_bytes() != kpt.as_slice() {
            return None;
        }
    }
    Some(FLOW_LINE_COMMENT)
}

/// The package's resources by kind and name (the generator's names are
/// unique).
fn input_resources(pkg: &Package) -> Vec<Node> {
    pkg.files
        .iter()
        .filter_map(|(_, b)| std::str::from_utf8(b).ok())
        .filter_map(|t| krm_yaml::parse::parse(t).ok())
        .flatten()
        .collect()
}

fn identity(doc: &Node) -> Option<(String, String)> {
    let root = doc.content.first()?;
    let kind = root.get("kind")?.value.to_string();
    let name = root.get("metadata")?.get("name")?.value.to_string();
    Some((kind, name))
}

/// Our file with each moved comment put back on its block collection,
/// written again (the file's sequence style kept): None if it does not
/// read or does not write back to itself.
fn undo_flow_line_comments(inputs: &[Node], ours: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(ours).ok()?;
    let mut docs = krm_yaml::parse::parse(text).ok()?;
    let compact = [false, true]
        .into_iter()
        .find(|c| krm_yaml::emit::encode(&docs, *c) == text)?;
    for doc in &mut docs {
        let Some(id) = identity(doc) else { continue };
        let Some(input) = inputs.iter().find(|i| identity(i).as_ref() == Some(&id)) else {
            continue;
        };
        if let (Some(from), Some(to)) = (input.content.first(), doc.content.first_mut()) {
            undo(from, to);
        }
    }
    Some(krm_yaml::emit::encode(&docs, compact))
}

/// A flow collection with a line comment.
fn flow_with_line(n: &Node) -> Option<&str> {
    (matches!(n.kind, Kind::Mapping | Kind::Sequence)
        && n.style.has(Style::FLOW)
        && !n.line_comment.is_empty())
    .then(|| n.line_comment.as_str())
}

fn block_with_content(n: &Node) -> bool {
    matches!(n.kind, Kind::Mapping | Kind::Sequence)
        && !n.style.has(Style::FLOW)
        && !n.content.is_empty()
        && n.line_comment.is_empty()
}

fn undo(from: &Node, to: &mut Node) {
    match (from.kind, to.kind) {
        (Kind::Mapping, Kind::Mapping) => {
            for kv in to.content.chunks_exact_mut(2) {
                let (k, v) = kv.split_at_mut(1);
                let (key, value) = (&mut k[0], &mut v[0]);
                let Some(fv) = from.get(&key.value) else {
                    continue;
                };
                if let Some(c) = flow_with_line(fv) {
                    if block_with_content(value) && key.line_comment.as_str() == c {
                        value.line_comment = std::mem::take(&mut key.line_comment);
                    }
                }
                undo(fv, value);
            }
        }
        (Kind::Sequence, Kind::Sequence) => {
            for (f, t) in from.content.iter().zip(to.content.iter_mut()) {
                if let Some(c) = flow_with_line(f) {
                    if t.kind == Kind::Mapping
                        && block_with_content(t)
                        && t.head_comment.as_str() == c
                    {
                        t.line_comment = std::mem::take(&mut t.head_comment);
                    }
                }
                undo(f, t);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_blank_line_after_a_block_header_goes() {
        let ours = "a: |2\n\n  x\nb: >-\n\n  y\nc: \"|\"\n\nd: x | y\n\ne: |2 # c\n\n  z\n";
        assert_eq!(
            block_scalar_leading_blank(ours),
            "a: |2\n  x\nb: >-\n  y\nc: \"|\"\n\nd: x | y\n\ne: |2 # c\n\n  z\n"
        );
    }
}
