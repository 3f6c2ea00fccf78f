//! Mapping keys that appear twice in one mapping.
//!
//! yaml.v3 composes such a mapping into a node tree without complaint, and
//! kpt reads packages and function output as node trees, so it accepts
//! them; kyaml's field look-ups then find the first of the two and the
//! second is silently lost (or overwritten by the first on write). yaml.v3
//! only refuses them when it decodes into Go values (`decoder.mapping`,
//! `uniqueKeys`, on by default): two keys are the same when they are of the
//! same kind and have the same value, whatever their style or tag, so `a`,
//! `"a"` and `!!str a` are one key, two aliases to one anchor are one key,
//! and a second `<<` merge key is refused like any other. That is the rule
//! here, with one exception: yaml.v3 compares a sequence or mapping used as
//! a key by its (always empty) value, so any two of them would clash; they
//! are not compared here (Kubernetes resources never have them, and two
//! different collections are different keys).
//!
//! This is a pass over a tree already parsed, not part of [`super::parse`]:
//! the parser serves callers (the built-in functions' inputs, Starlark's
//! `yaml.loads`) where yaml.v3 does not refuse them either, and the pass
//! costs nothing to the callers that do not ask for it.

use std::collections::HashMap;

use crate::node::{Kind, Node};
use crate::quote::go_quote;

/// A key met a second time in one mapping. [`Display`](std::fmt::Display)
/// follows yaml.v3's wording for it (`line 7: mapping key "a" already
/// defined at line 6`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: mapping key {} already defined at line {first_line}", go_quote(.key))]
pub struct DuplicateKey {
    /// The key's value (an alias key: its anchor's name).
    pub key: String,
    /// The line of its second occurrence, 1-based.
    pub line: usize,
    /// The line of its first occurrence, 1-based.
    pub first_line: usize,
    /// The column of its second occurrence: with `line`, which of several
    /// duplicates comes first in the text.
    column: usize,
}

impl DuplicateKey {
    /// The same, with `lines` added to both lines: for a tree parsed from a
    /// piece of a larger text that starts `lines` lines into it.
    pub fn shifted(mut self, lines: usize) -> DuplicateKey {
        self.line += lines;
        self.first_line += lines;
        self
    }
}

/// Mappings with up to this many keys are checked pair by pair: no
/// allocation, and for the few keys a Kubernetes mapping mostly has,
/// faster than hashing them.
const PAIRWISE_MAX: usize = 16;

/// The duplicate key of `root` (any node, a document included) whose second
/// occurrence comes first in the text, if any: every mapping at every
/// depth is checked.
pub fn duplicate_key(root: &Node) -> Option<DuplicateKey> {
    let mut found: Option<DuplicateKey> = None;
    // An explicit stack, as the parser keeps one: a deeply nested document
    // must not exhaust the call stack.
    let mut stack: Vec<&Node> = vec![root];
    let mut seen: HashMap<(bool, &str), &Node> = HashMap::new();
    while let Some(node) = stack.pop() {
        if node.kind == Kind::Mapping {
            if let Some(dup) = in_mapping(node, &mut seen) {
                let earlier = found
                    .as_ref()
                    .is_none_or(|f| (dup.line, dup.column) < (f.line, f.column));
                if earlier {
                    found = Some(dup);
                }
            }
        }
        stack.extend(node.content.iter().filter(|c| !c.content.is_empty()));
    }
    found
}

/// yaml.v3's identity of a key: alias or scalar, and its value; `None` for
/// a collection, which is not compared.
fn identity(key: &Node) -> Option<(bool, &str)> {
    match key.kind {
        Kind::Scalar => Some((false, key.value.as_str())),
        Kind::Alias => Some((true, key.value.as_str())),
        _ => None,
    }
}

/// The first key of `map` (in order) that an earlier key of it already
/// defined, with that earlier key's line. `seen` is scratch space, kept
/// between calls for its allocation.
fn in_mapping<'a>(
    map: &'a Node,
    seen: &mut HashMap<(bool, &'a str), &'a Node>,
) -> Option<DuplicateKey> {
    let keys = || map.content.iter().step_by(2);
    let dup = |first: &Node, second: &Node| DuplicateKey {
        key: second.value.to_string(),
        line: second.line as usize,
        first_line: first.line as usize,
        column: second.column as usize,
    };
    if map.content.len() <= 2 * PAIRWISE_MAX {
        for (j, second) in keys().enumerate() {
            let Some(id) = identity(second) else {
                continue;
            };
            if let Some(first) = keys().take(j).find(|k| identity(k) == Some(id)) {
                return Some(dup(first, second));
            }
        }
        return None;
    }
    seen.clear();
    for key in keys() {
        let Some(id) = identity(key) else {
            continue;
        };
        if let Some(first) = seen.get(&id) {
            return Some(dup(first, key));
        }
        seen.insert(id, key);
    }
    None
}

#[cfg(test)]
mod tests;
