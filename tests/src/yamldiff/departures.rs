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

/// kpt fails a run whose function returns an alias where the input had a
/// value (PyYAML writes `*id001` for a value used twice, as the input's
/// `*a1` is) after the function returns: kyaml's comment copier expects
/// the input's kind ("wrong node kind: expected SequenceNode but got
/// AliasNode"); we run it.
pub const ALIAS_OUTPUT: &str = "kpt refuses a function's output holding an alias";

/// The departure that explains kpt failing where we did not.
pub fn refused_by_kpt(
    pkg: &Package,
    kpt: &(i32, String),
    ours: &(i32, String),
) -> Option<&'static str> {
    // Ours may fail later for a reason of its own (a later step): kpt
    // stopped before it, and what ours said is not compared.
    if kpt.0 == 0 || ours.1.contains("wrong node kind: expected ") {
        return None;
    }
    let walker = |got: &str| {
        kpt.1.lines().any(|l| {
            // eval's `error: `, render's `Error: `.
            let l = l
                .strip_prefix("error: ")
                .or_else(|| l.strip_prefix("Error: "));
            l.is_some_and(|l| {
                l.starts_with("wrong node kind: expected ")
                    && l.contains(&format!(" but got {got}: node contents:"))
            })
        })
    };
    let holds = |found: fn(&Node) -> bool| pkg.files.iter().any(|(_, b)| holds(b, found));
    if (walker("MappingNode") || walker("SequenceNode")) && holds(odd_key) {
        return Some(EMPTY_KEY);
    }
    if walker("AliasNode") && holds(|n| n.kind == Kind::Alias) {
        return Some(ALIAS_OUTPUT);
    }
    None
}

/// A mapping whose keys include an empty one or one that is not a scalar.
fn odd_key(n: &Node) -> bool {
    n.kind == Kind::Mapping
        && n.content
            .chunks(2)
            .any(|kv| kv[0].kind != Kind::Scalar || kv[0].value.is_empty())
}

/// Whether a file holds a node that `found` picks.
fn holds(bytes: &[u8], found: fn(&Node) -> bool) -> bool {
    fn walk(n: &Node, found: fn(&Node) -> bool) -> bool {
        found(n) || n.content.iter().any(|c| walk(c, found))
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    krm_yaml::parse::parse(text).is_ok_and(|docs| docs.iter().any(|d| walk(d, found)))
}

/// A flow collection's line comment that the function wrote in block
/// style stays with what the user wrote it on (on the key's line, or for a
/// sequence entry that is a mapping on the line above it); kpt moves it after the next scalar,
/// to the next document's head, or drops it.
pub const FLOW_LINE_COMMENT: &str = "a flow collection's line comment kept on its line";

/// The name of the documented departure that explains every difference
/// between kpt's files and ours, if one does: in each differing file, the
/// comments we kept on their line (a flow collection's line comment found
/// on its key or above its entry) are taken out of ours and out of kpt's
/// (wherever kpt put them, or nowhere), and the two must then be the same,
/// both written by kyaml's writer.
pub fn accepts(pkg: &Package, differs: &[FileDiff]) -> Option<&'static str> {
    if differs.is_empty() {
        return None;
    }
    let inputs = input_resources(pkg);
    for (_, kpt, ours) in differs {
        let (Some(kpt), Some(ours)) = (kpt, ours) else {
            return None;
        };
        let mut ours = read(ours)?;
        let mut moved = Vec::new();
        for doc in &mut ours {
            let Some(id) = identity(&doc.node) else {
                continue;
            };
            let Some(input) = inputs.iter().find(|i| identity(i).as_ref() == Some(&id)) else {
                continue;
            };
            if let (Some(from), Some(to)) = (input.content.first(), doc.node.content.first_mut()) {
                take_kept(from, to, &mut moved);
            }
        }
        if moved.is_empty() {
            return None;
        }
        // The same text elsewhere (`#` is a common comment) goes from both.
        for doc in &mut ours {
            drop_comments(&mut doc.node, &moved);
        }
        let mut kpt = read(kpt)?;
        for doc in &mut kpt {
            drop_comments(&mut doc.node, &moved);
        }
        if write(&kpt) != write(&ours) {
            return None;
        }
    }
    Some(FLOW_LINE_COMMENT)
}

fn read(bytes: &[u8]) -> Option<Vec<krm_yaml::package::Document>> {
    krm_yaml::package::read_documents(std::str::from_utf8(bytes).ok()?).ok()
}

fn write(docs: &[krm_yaml::package::Document]) -> String {
    let pairs: Vec<(&Node, bool)> = docs
        .iter()
        .map(|d| (&d.node, d.seq_indent == "wide"))
        .collect();
    krm_yaml::package::documents_text(&pairs)
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

/// Takes out of `to` each comment kept where a flow collection of `from`
/// (at the same key or position) had it as its line comment, now that
/// `to` holds a block collection there; collects their texts.
fn take_kept(from: &Node, to: &mut Node, moved: &mut Vec<String>) {
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
                        moved.push(c.to_owned());
                        key.line_comment.clear();
                    }
                }
                take_kept(fv, value, moved);
            }
        }
        (Kind::Sequence, Kind::Sequence) => {
            for (f, t) in from.content.iter().zip(to.content.iter_mut()) {
                if let Some(c) = flow_with_line(f) {
                    if t.kind == Kind::Mapping
                        && block_with_content(t)
                        && t.head_comment.as_str() == c
                    {
                        moved.push(c.to_owned());
                        t.head_comment.clear();
                    }
                }
                take_kept(f, t, moved);
            }
        }
        _ => {}
    }
}

/// Removes the comments in `moved` from every node: line comments equal to
/// one, and such lines of head and foot comments.
fn drop_comments(n: &mut Node, moved: &[String]) {
    if moved.iter().any(|m| m == n.line_comment.as_str()) {
        n.line_comment.clear();
    }
    for text in [&mut n.head_comment, &mut n.foot_comment] {
        if text.is_empty() {
            continue;
        }
        let kept: Vec<&str> = text
            .as_str()
            .split('\n')
            .filter(|l| !moved.iter().any(|m| m == l))
            .collect();
        let kept = kept.join("\n");
        text.clear();
        text.push_str(kept.trim_matches('\n'));
    }
    for c in &mut n.content {
        drop_comments(c, moved);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(text: &str) -> Package {
        Package {
            files: vec![("f.yaml".to_owned(), text.as_bytes().to_vec())],
        }
    }

    const INPUT: &str = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata: {v: x} # c\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n";
    const KPT: &str = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata:\n  v: x\n---\n# c\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n";
    const OURS: &str = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata: # c\n  v: x\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n";

    fn diff(kpt: &str, ours: &str) -> Vec<FileDiff> {
        vec![(
            "f.yaml".to_owned(),
            Some(kpt.as_bytes().to_vec()),
            Some(ours.as_bytes().to_vec()),
        )]
    }

    #[test]
    fn the_flow_comment_departure_is_accepted_exactly() {
        assert_eq!(
            accepts(&pkg(INPUT), &diff(KPT, OURS)),
            Some(FLOW_LINE_COMMENT)
        );
        // One more byte changed anywhere: not the departure.
        let other = OURS.replace("name: b", "name: c");
        assert_eq!(accepts(&pkg(INPUT), &diff(KPT, &other)), None);
        // The comment moved where the input had no flow collection.
        let block_input = INPUT.replace("data: {v: x} # c", "data:\n  v: x");
        assert_eq!(accepts(&pkg(&block_input), &diff(KPT, OURS)), None);
        // A file only one side has, or nothing different: not accepted.
        let missing = vec![("f.yaml".to_owned(), Some(KPT.as_bytes().to_vec()), None)];
        assert_eq!(accepts(&pkg(INPUT), &missing), None);
        assert_eq!(accepts(&pkg(INPUT), &[]), None);
    }

    /// Found by the soak: a sequence entry's comment that kpt drops.
    #[test]
    fn a_sequence_entrys_comment_kpt_drops() {
        let first =
            "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: r2-a\n# foot\n---\n";
        let input = format!("{first}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r3-a\nspec:\t#no space\n- {{back: app}} # env image\n");
        let kpt = format!("{first}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r3-a\nspec: #no space\n- back: app\n");
        let ours = format!("{first}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r3-a\nspec: #no space\n# env image\n- back: app\n");
        assert_eq!(
            accepts(&pkg(&input), &diff(&kpt, &ours)),
            Some(FLOW_LINE_COMMENT)
        );
        // Another comment lost by kpt is not this departure.
        let input = input.replace("r3-a\n", "r3-a # mine\n");
        let ours = ours.replace("r3-a\n", "r3-a # mine\n");
        assert_eq!(accepts(&pkg(&input), &diff(&kpt, &ours)), None);
    }

    #[test]
    fn kpts_refusal_is_accepted_only_for_its_keys_and_message() {
        let with_key = pkg("apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata:\n  \"\": x\n");
        let refusal = (
            1,
            "error: wrong node kind: expected ScalarNode but got MappingNode: node contents:\n"
                .to_owned(),
        );
        let passed = (0, String::new());
        assert_eq!(
            refused_by_kpt(&with_key, &refusal, &passed),
            Some(EMPTY_KEY)
        );
        let complex = pkg("apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata:\n  ? [a]\n  : x\n");
        assert_eq!(refused_by_kpt(&complex, &refusal, &passed), Some(EMPTY_KEY));
        // Another message, ours refusing alike, or no such key: not
        // accepted (ours failing later for a reason of its own is).
        let other = (1, "error: something else\n".to_owned());
        assert_eq!(refused_by_kpt(&with_key, &other, &passed), None);
        assert_eq!(refused_by_kpt(&with_key, &refusal, &refusal), None);
        assert_eq!(refused_by_kpt(&pkg(INPUT), &refusal, &passed), None);
        // An alias the function returned, where the input holds one.
        let aliased =
            pkg("apiVersion: v1\nkind: A\nmetadata:\n  name: a\ndata:\n  a: &x [1]\n  b: *x\n");
        let alias_refusal = (
            1,
            "error: wrong node kind: expected SequenceNode but got AliasNode: node contents:\n"
                .to_owned(),
        );
        assert_eq!(
            refused_by_kpt(&aliased, &alias_refusal, &passed),
            Some(ALIAS_OUTPUT)
        );
        assert_eq!(refused_by_kpt(&pkg(INPUT), &alias_refusal, &passed), None);
        assert_eq!(refused_by_kpt(&aliased, &refusal, &passed), None);
    }

    #[test]
    fn only_the_blank_line_after_a_block_header_goes() {
        let ours = "a: |2\n\n  x\nb: >-\n\n  y\nc: \"|\"\n\nd: x | y\n\ne: |2 # c\n\n  z\n";
        assert_eq!(
            block_scalar_leading_blank(ours),
            "a: |2\n  x\nb: >-\n  y\nc: \"|\"\n\nd: x | y\n\ne: |2 # c\n\n  z\n"
        );
    }
}
