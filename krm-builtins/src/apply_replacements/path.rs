//! kyaml's field paths as the replacement filter uses them: the splitter
//! (`utils.SmarterPathSplitter`), the source lookup (`yaml.PathGetter`
//! without create) and the target matcher (`yaml.PathMatcher`, with
//! `[name=regex]`, `*`, indexes and create).
//!
//! A place in a resource is an index path: the positions in `content`
//! from the resource's mapping down to the node.

use krm_yaml::emit::encode_node;
use krm_yaml::package::kyaml::{self, kind_name, NULL_TAG};
use krm_yaml::{Kind, Node};
use regex::Regex;

/// A node's place: positions in `content`, from the resource down.
pub(crate) type Place = Vec<usize>;

/// `utils.PathSplitter`: split on `delimiter`, a `\` before it escapes it;
/// one leading empty part (a path starting with the delimiter) dropped.
fn path_splitter(path: &str, delimiter: &str) -> Vec<String> {
    let mut ps: Vec<&str> = path.split(delimiter).collect();
    if ps.len() > 1 && ps.first().is_some_and(|p| p.is_empty()) {
        ps.remove(0);
    }
    let mut res: Vec<String> = Vec::with_capacity(ps.len());
    for p in ps {
        match res.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push_str(delimiter);
                last.push_str(p);
            }
            _ => res.push(p.to_owned()),
        }
    }
    res
}

/// `utils.SmarterPathSplitter(path, ".")`: a `[...]` part that the split
/// cut at its dots is joined again (kept with its brackets when it has an
/// `=`, stripped of them otherwise).
pub(crate) fn smarter_path_splitter(path: &str) -> Vec<String> {
    const DELIM: &str = ".";
    let split = path_splitter(path, DELIM);
    let mut result = Vec::with_capacity(split.len());
    let mut i = 0;
    while let Some(elem) = split.get(i) {
        if elem.starts_with('[') && !elem.ends_with(']') {
            let mut bracketed = vec![elem.as_str()];
            while i + 1 < split.len() {
                i += 1;
                let Some(next) = split.get(i) else { break };
                bracketed.push(next);
                if next.ends_with(']') {
                    break;
                }
            }
            let joined = bracketed.join(DELIM);
            if joined.contains('=') {
                result.push(joined);
            } else {
                result.push(joined.trim_matches(|c| c == '[' || c == ']').to_owned());
            }
        } else {
            result.push(elem.clone());
        }
        i += 1;
    }
    result
}

/// Go's `strconv.Atoi` (64-bit `int`): an optional sign, then decimal
/// digits only.
pub(crate) fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// `IsListIndex`.
fn is_list_index(p: &str) -> bool {
    p.starts_with('[') && p.ends_with(']')
}

/// `IsIdxNumber`.
fn is_idx_number(p: &str) -> bool {
    atoi(p).is_some_and(|i| i >= 0)
}

/// `SplitIndexNameValue`.
fn split_index_name_value(p: &str) -> Result<(String, String), String> {
    let elem = p.strip_suffix(']').unwrap_or(p);
    let elem = elem.strip_prefix('[').unwrap_or(elem);
    match elem.split_once('=') {
        Some((n, v)) => Ok((n.to_owned(), v.to_owned())),
        None => Err(
            "list path element must contain fieldName=fieldValue for element to match".to_owned(),
        ),
    }
}

fn is_null(n: &Node) -> bool {
    n.tag == NULL_TAG
}

/// kyaml's `RNode.String()` (what `InvalidNodeKindError` and the list
/// matchers print and compare).
pub(crate) fn node_string(n: &Node) -> String {
    encode_node(n, true)
}

/// `InvalidNodeKindError`.
fn wrong_kind(expected: Kind, node: &Node) -> String {
    format!(
        "wrong node kind: expected {} but got {}: node contents:\n{}",
        kind_name(expected),
        kind_name(node.kind),
        node_string(node)
    )
}

/// `ErrorIfInvalid(rn, kind)`.
fn check_kind(node: &Node, kind: Kind) -> Result<(), String> {
    if is_null(node) || node.kind == kind {
        Ok(())
    } else {
        Err(wrong_kind(kind, node))
    }
}

/// The node at `place` under `root`.
pub(crate) fn at<'a>(root: &'a Node, place: &[usize]) -> Option<&'a Node> {
    place.iter().try_fold(root, |n, &i| n.content.get(i))
}

pub(crate) fn at_mut<'a>(root: &'a mut Node, place: &[usize]) -> Option<&'a mut Node> {
    place.iter().try_fold(root, |n, &i| n.content.get_mut(i))
}

/// `visitMappingNodeFields(content, fn, name)`: the first field of the
/// name (by key value), as a position of its value.
fn field_value_index(node: &Node, name: &str) -> Option<usize> {
    node.content
        .chunks_exact(2)
        .position(|kv| kv.first().is_some_and(|k| k.value == name))
        .map(|i| 2 * i + 1)
}

/// `Lookup(path...)` (a `PathGetter` without create) from `root`: the
/// place of the node found, `None` when missing.
pub(crate) fn lookup(root: &Node, path: &[String]) -> Result<Option<Place>, String> {
    // cleanPath: parts trimmed, empty ones dropped.
    let parts: Vec<&str> = path
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect();
    let mut place: Place = Vec::new();
    let mut node = root;
    for part in parts {
        let found: Option<usize> = if let Some(idx) = atoi(part) {
            if idx < 0 {
                return Err(format!("array index {idx} cannot be negative"));
            }
            element_by_index(node, Some(idx))?
        } else if part == "-" {
            element_by_index(node, None)?
        } else if part == "*" {
            return Err("wildcard is not supported in PathGetter".to_owned());
        } else if is_list_index(part) {
            let (name, value) = split_index_name_value(part)?;
            match_element(node, &name, &value)?
        } else {
            // FieldMatcher{Name}: nothing under null, an error under other
            // kinds than a mapping.
            if is_null(node) {
                None
            } else {
                check_kind(node, Kind::Mapping)?;
                field_value_index(node, part)
            }
        };
        let Some(i) = found else {
            return Ok(None);
        };
        let Some(next) = node.content.get(i) else {
            return Ok(None);
        };
        place.push(i);
        node = next;
    }
    Ok(Some(place))
}

/// `GetElementByIndex` (`None`: `-`, the last element).
fn element_by_index(node: &Node, index: Option<i64>) -> Result<Option<usize>, String> {
    check_kind(node, Kind::Sequence)?;
    let len = node.content.len();
    Ok(match index {
        // kyaml indexes past the end of an empty list here (a panic);
        // nothing is found instead.
        None => len.checked_sub(1),
        Some(i) => usize::try_from(i).ok().filter(|&i| i < len),
    })
}

/// `MatchElement(name, value)` (`ElementMatcher` without create): the
/// first element whose field `name` has exactly this value (`name` empty:
/// the first scalar element of this value).
fn match_element(node: &Node, name: &str, value: &str) -> Result<Option<usize>, String> {
    check_kind(node, Kind::Sequence)?;
    if name.is_empty() {
        return Ok(node.content.iter().position(|e| e.value == value));
    }
    Ok(node.content.iter().position(|e| {
        if is_null(e) || e.kind != Kind::Mapping {
            return false;
        }
        field_value_index(e, name)
            .and_then(|i| e.content.get(i))
            .is_some_and(|v| v.value == value)
    }))
}

/// `getPathPartKind(nextPart, create)`.
fn path_part_kind(next: Option<&str>, create: Kind) -> Kind {
    match next {
        None | Some("") => create,
        Some(p) if is_list_index(p) || is_idx_number(p) => Kind::Sequence,
        Some(_) => Kind::Mapping,
    }
}

/// A node as kyaml builds one (`&yaml.Node{Kind: kind}`): no tag.
fn bare(kind: Kind) -> Node {
    Node {
        kind,
        ..Node::default()
    }
}

/// `yaml.PathMatcher{Path, Create}` on `root` (a resource): the places of
/// the nodes matched, in kyaml's order. `create` (`Some(kind)`) adds the
/// missing fields and elements on the way, as kyaml adds them.
pub(crate) fn path_match(
    root: &mut Node,
    path: &[String],
    create: Option<Kind>,
) -> Result<Vec<Place>, String> {
    let mut out = Vec::new();
    let mut here = Vec::new();
    matcher(root, path, create, &mut here, &mut out)?;
    Ok(out)
}

/// `PathMatcher.filter` on `node` (at `here`): appends the places matched.
fn matcher(
    node: &mut Node,
    path: &[String],
    create: Option<Kind>,
    here: &mut Place,
    out: &mut Vec<Place>,
) -> Result<(), String> {
    let Some((first, rest)) = path.split_first() else {
        out.push(here.clone());
        return Ok(());
    };
    let next = rest.first().map(String::as_str);
    if is_idx_number(first) {
        // doIndexSeq
        let idx = atoi(first).unwrap_or(0);
        check_kind(node, Kind::Sequence)?;
        let len = node.content.len();
        if let Some(kind) = create {
            if usize::try_from(idx).is_ok_and(|i| i == len) {
                node.content.push(bare(path_part_kind(next, kind)));
            }
        }
        let len = node.content.len();
        let Some(i) = usize::try_from(idx).ok().filter(|&i| i < len) else {
            return Err(format!(
                "index {idx} specified but only {len} elements found"
            ));
        };
        let Some(element) = node.content.get_mut(i) else {
            return Ok(());
        };
        here.push(i);
        let r = matcher(element, rest, create, here, out);
        here.pop();
        return r;
    }
    if is_list_index(first) {
        return do_seq(node, first, rest, create, here, out, true);
    }
    if first == "*" {
        // doMatchEvery
        check_kind(node, Kind::Sequence)?;
        for (i, element) in node.content.iter_mut().enumerate() {
            here.push(i);
            let r = matcher(element, rest, create, here, out);
            here.pop();
            r?;
        }
        return Ok(());
    }
    // doField
    let found = if is_null(node) {
        None
    } else {
        check_kind(node, Kind::Mapping)?;
        field_value_index(node, first)
    };
    let i = match (found, create) {
        (Some(i), _) => i,
        (None, None) => return Ok(()),
        (None, Some(kind)) => {
            // SetField(name, {Kind}) appends the field (to a null node's
            // content too, where the encoder never writes it).
            node.content.push(Node {
                kind: Kind::Scalar,
                value: first.as_str().into(),
                ..Node::default()
            });
            node.content.push(bare(path_part_kind(next, kind)));
            node.content.len() - 1
        }
    };
    let Some(field) = node.content.get_mut(i) else {
        return Ok(());
    };
    here.push(i);
    let r = matcher(field, rest, create, here, out);
    here.pop();
    r
}

/// `PathMatcher.doSeq`: elements matched by `[field=regex]` (the regex
/// unanchored, against the field's value as kyaml writes it), or for
/// `[=regex]` scalar elements. With create, an element is appended when
/// none matched, and matched again.
fn do_seq(
    node: &mut Node,
    part: &str,
    rest: &[String],
    create: Option<Kind>,
    here: &mut Place,
    out: &mut Vec<Place>,
    may_create: bool,
) -> Result<(), String> {
    let (field, pattern) = split_index_name_value(part)?;
    check_kind(node, Kind::Sequence)?;
    let before = out.len();
    // kyaml compiles the regex for each element: no element, no error.
    let mut re: Option<Regex> = None;
    for i in 0..node.content.len() {
        let Some(element) = node.content.get_mut(i) else {
            break;
        };
        let re = match &re {
            Some(r) => r,
            None => re.insert(compile(&pattern)?),
        };
        if field.is_empty() {
            if re.is_match(node_string(element).trim()) {
                here.push(i);
                out.push(here.clone());
                here.pop();
            }
            continue;
        }
        if element.kind != Kind::Mapping {
            continue;
        }
        let Some(v) = field_value_index(element, &field).and_then(|j| element.content.get(j))
        else {
            continue;
        };
        if !re.is_match(node_string(v).trim()) {
            continue;
        }
        here.push(i);
        let r = matcher(element, rest, create, here, out);
        here.pop();
        r?;
    }
    if out.len() > before || create.is_none() {
        return Ok(());
    }
    // kyaml matches again after appending and recurses for ever when the
    // new element does not match its own pattern; here it matches once.
    if !may_create {
        return Ok(());
    }
    let value = Node {
        kind: Kind::Scalar,
        value: pattern.as_str().into(),
        ..Node::default()
    };
    let element = if field.is_empty() {
        value
    } else {
        Node {
            kind: Kind::Mapping,
            content: vec![
                Node {
                    kind: Kind::Scalar,
                    value: field.as_str().into(),
                    ..Node::default()
                },
                value,
            ],
            ..Node::default()
        }
    };
    node.content.push(element);
    do_seq(node, part, rest, create, here, out, false)
}

/// Go's `regexp.Compile` (RE2 syntax; Rust's `regex` is RE2's dialect).
fn compile(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            let detail = match &e {
                regex::Error::Syntax(s) => s
                    .lines()
                    .last()
                    .unwrap_or("invalid pattern")
                    .trim_start_matches("error: ")
                    .to_owned(),
                _ => "expression too large".to_owned(),
            };
            // Go's names for the errors it reports with the whole pattern.
            let detail = match detail.as_str() {
                "unclosed group" => "missing closing )",
                "unopened group" => "unexpected )",
                d => d,
            };
            format!("error parsing regexp: {detail}: `{pattern}`")
        })
}

/// The value under `name` in a mapping, as `kyaml::field` finds it.
pub(crate) fn field<'a>(node: &'a Node, name: &str) -> Option<&'a Node> {
    if node.kind != Kind::Mapping {
        return None;
    }
    kyaml::field(node, name)
}
