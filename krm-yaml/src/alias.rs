//! Aliases followed: what an alias node stands for, for the code that reads
//! YAML as data ([`crate::value`]) and for writing resources that came
//! from one document into documents of their own ([`Expansions`]).
//!
//! The tree keeps an alias as the name of its anchor ([`Node::alias`]), as
//! the text does. An alias stands for the node that carries the most recent
//! anchor of that name before it in document order (a name may be anchored
//! again further on); an anchor counts from the start of its node, so an
//! alias inside the node it names makes a cycle, as in yaml.v3's parser.
//! [`Anchors`] walks a tree once in that order and keeps each alias's node.
//!
//! Following aliases can make a small document huge ("billion laughs":
//! ten aliases to a list of ten aliases to ...): [`Budget`] is yaml.v3's
//! decoder's rule against that, so what kpt decodes we decode, and what it
//! refuses we refuse with its message, in bounded time and memory.

use std::collections::{HashMap, HashSet};

use crate::{Kind, Node};

/// Why aliases could not be followed (yaml.v3's messages, which kpt
/// prints).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    /// No anchor of that name before the alias.
    #[error("yaml: unknown anchor '{0}' referenced")]
    Unknown(String),
    /// An alias inside the node its anchor names.
    #[error("yaml: anchor '{0}' value contains itself")]
    Recursive(String),
    /// Past [`Budget`]'s ratio of nodes reached through aliases.
    #[error("yaml: document contains excessive aliasing")]
    Excessive,
}

/// The anchor an alias node names: its `alias`, else its value (where
/// yaml.v3 keeps the name, and built nodes may set only that).
fn alias_name(n: &Node) -> &str {
    if n.alias.is_empty() {
        &n.value
    } else {
        &n.alias
    }
}

/// Where each alias of a tree points, found in one walk in document order.
pub(crate) struct Anchors<'a> {
    targets: HashMap<*const Node, &'a Node>,
    /// Nodes walked: the whole tree.
    nodes: u64,
    /// Alias nodes met, with or without an anchor.
    aliases: usize,
    /// Text of the whole tree ([`text_len`]).
    bytes: u64,
}

impl<'a> Anchors<'a> {
    pub(crate) fn new(root: &'a Node) -> Anchors<'a> {
        Anchors::walk(root, &HashMap::new())
    }

    /// `fallback`: the node an alias with no anchor of its name before it
    /// stands for.
    fn walk(root: &'a Node, fallback: &HashMap<&str, &'a Node>) -> Anchors<'a> {
        let mut targets = HashMap::new();
        let mut defined: HashMap<&'a str, &'a Node> = HashMap::new();
        let (mut nodes, mut aliases, mut bytes) = (0u64, 0usize, 0u64);
        // Pre-order is document order: a mapping's content is key, value,
        // key, value. No recursion: the tree may be 10,000 deep.
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            nodes += 1;
            bytes += text_len(n);
            if !n.anchor.is_empty() {
                defined.insert(n.anchor.as_str(), n);
            }
            if n.kind == Kind::Alias {
                aliases += 1;
                let name = alias_name(n);
                if let Some(t) = defined.get(name).or_else(|| fallback.get(name)) {
                    targets.insert(n as *const Node, *t);
                }
            }
            stack.extend(n.content.iter().rev());
        }
        Anchors {
            targets,
            nodes,
            aliases,
            bytes,
        }
    }

    /// The node `alias` (an alias node of the tree) stands for.
    pub(crate) fn target(&self, alias: &Node) -> Result<&'a Node, AliasError> {
        self.targets
            .get(&(alias as *const Node))
            .copied()
            .ok_or_else(|| AliasError::Unknown(alias_name(alias).to_owned()))
    }

    /// Whether the tree holds any alias.
    pub(crate) fn has_aliases(&self) -> bool {
        self.aliases > 0
    }
}

/// yaml.v3's decoder's limit on aliasing (`allowedAliasRatio` in
/// decode.go): past 1,000 nodes, of which more than 100 were reached
/// through an alias, the share so reached may be at most 99% up to 400,000
/// nodes, falling linearly to 10% at 4,000,000 and beyond. Work stays
/// proportional to the text: a small document can grow a hundredfold, a
/// large one barely.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    decoded: u64,
    aliased: u64,
}

impl Budget {
    const LOW: u64 = 400_000;
    const HIGH: u64 = 4_000_000;

    /// Counts one node, `aliased` when reached through an alias.
    pub(crate) fn count(&mut self, aliased: bool) -> Result<(), AliasError> {
        self.decoded += 1;
        if aliased {
            self.aliased += 1;
        }
        if self.aliased > 100
            && self.decoded > 1000
            && self.aliased as f64 / self.decoded as f64 > Self::allowed(self.decoded)
        {
            return Err(AliasError::Excessive);
        }
        Ok(())
    }

    fn allowed(decoded: u64) -> f64 {
        if decoded <= Self::LOW {
            0.99
        } else if decoded >= Self::HIGH {
            0.10
        } else {
            0.99 - 0.89 * ((decoded - Self::LOW) as f64 / (Self::HIGH - Self::LOW) as f64)
        }
    }
}

/// A walk that follows aliases: the anchors, the budget, and the aliases
/// being followed (yaml.v3's `d.aliases`, to catch cycles).
pub(crate) struct Follow<'a> {
    pub(crate) anchors: Anchors<'a>,
    pub(crate) budget: Budget,
    open: HashSet<*const Node>,
    /// Text reached through aliases so far, which the result copies.
    copied: u64,
}

/// The text of a node itself, which following an alias to it copies.
fn text_len(n: &Node) -> u64 {
    (n.value.len()
        + n.head_comment.as_str().len()
        + n.line_comment.as_str().len()
        + n.foot_comment.as_str().len()) as u64
}

/// Most text a walk may copy through aliases, for a tree of `bytes` of
/// text. yaml.v3's [`Budget`] counts nodes only: a Go string is shared,
/// not copied, where each copy here is new memory, so one anchored long
/// scalar and many aliases to it (kept under the node ratio by a few plain
/// nodes) grew 122 KiB of text into 1.3 GB. This bound, a hundredfold
/// like yaml.v3's ratio, plus 1 MiB, is far beyond what anchors in real
/// documents copy; past it, the walk fails as yaml.v3's budget does.
fn most_copied(bytes: u64) -> u64 {
    bytes.saturating_mul(100).saturating_add(1 << 20)
}

/// A node being folded: its children's results so far, the next child,
/// and the aliases followed to reach it.
struct Frame<'a, T> {
    node: &'a Node,
    done: Vec<T>,
    next: usize,
    through: Vec<*const Node>,
}

impl<'a> Follow<'a> {
    pub(crate) fn new(root: &'a Node) -> Follow<'a> {
        Follow {
            anchors: Anchors::new(root),
            budget: Budget::default(),
            open: HashSet::new(),
            copied: 0,
        }
    }

    /// For copies made while writing: the walk of the whole tree counts
    /// as decoded nodes, as if yaml.v3 had decoded it, and the copies as
    /// nodes reached through aliases.
    fn copying(anchors: Anchors<'a>) -> Follow<'a> {
        let budget = Budget {
            decoded: anchors.nodes,
            aliased: 0,
        };
        Follow {
            anchors,
            budget,
            open: HashSet::new(),
            copied: 0,
        }
    }

    /// Builds a result bottom-up from `root` (a node of the tree), aliases
    /// followed: `make` gets each node reached (never an alias) with its
    /// children's results in order. No recursion: followed aliases can
    /// nest deeper than any stack.
    pub(crate) fn fold<T>(
        &mut self,
        root: &'a Node,
        mut make: impl FnMut(&'a Node, Vec<T>) -> T,
    ) -> Result<T, AliasError> {
        let mut cur = self.enter(root)?;
        let mut parents: Vec<Frame<'a, T>> = Vec::new();
        loop {
            let node = cur.node;
            if let Some(child) = node.content.get(cur.next) {
                cur.next += 1;
                let next = self.enter(child)?;
                parents.push(std::mem::replace(&mut cur, next));
                continue;
            }
            for alias in &cur.through {
                self.open.remove(alias);
            }
            let built = make(node, std::mem::take(&mut cur.done));
            match parents.pop() {
                Some(mut parent) => {
                    parent.done.push(built);
                    cur = parent;
                }
                None => return Ok(built),
            }
        }
    }

    /// Counts `n` (and, for an alias, its target) and gives its frame.
    fn enter<T>(&mut self, mut n: &'a Node) -> Result<Frame<'a, T>, AliasError> {
        let mut through = Vec::new();
        self.budget.count(!self.open.is_empty())?;
        // A loop, not an `if`: a built tree may anchor an alias node. (After
        // an error the walk is over: `open` is not cleaned up.)
        while n.kind == Kind::Alias {
            let key = n as *const Node;
            if self.open.contains(&key) {
                return Err(AliasError::Recursive(alias_name(n).to_owned()));
            }
            let target = self.anchors.target(n)?;
            self.open.insert(key);
            through.push(key);
            // The target counts as a node of its own, reached through the
            // alias (yaml.v3 decodes it anew).
            self.budget.count(true)?;
            n = target;
        }
        if !self.open.is_empty() {
            self.copied += text_len(n);
            if self.copied > most_copied(self.anchors.bytes) {
                return Err(AliasError::Excessive);
            }
        }
        Ok(Frame {
            node: n,
            done: Vec::with_capacity(n.content.len()),
            next: 0,
            through,
        })
    }

    /// What `alias` stands for, to put in its place: a copy of its target
    /// ([`Follow::expand`]) with the alias's own comments (its target's
    /// belong to the target's place).
    fn replacement(&mut self, alias: &'a Node) -> Result<Node, AliasError> {
        let mut out = self.expand(alias)?;
        out.head_comment = alias.head_comment.clone();
        out.line_comment = alias.line_comment.clone();
        out.foot_comment = alias.foot_comment.clone();
        Ok(out)
    }

    /// A copy of `n` with every alias in it replaced by a copy of its
    /// target (anchors dropped: the copy names nothing).
    pub(crate) fn expand(&mut self, n: &'a Node) -> Result<Node, AliasError> {
        self.fold(n, |n, content| Node {
            kind: n.kind,
            style: n.style,
            tag: n.tag,
            value: n.value.clone(),
            head_comment: n.head_comment.clone(),
            line_comment: n.line_comment.clone(),
            foot_comment: n.foot_comment.clone(),
            line: n.line,
            column: n.column,
            content,
            ..Node::default()
        })
    }
}

/// [`Expansions::misplaced`], applied to `part`.
pub fn expand_misplaced(part: &mut Node) -> Result<(), AliasError> {
    let found = Expansions::misplaced(part)?;
    if !found.is_empty() {
        found.apply(std::slice::from_mut(part));
    }
    Ok(())
}

/// Where a node stands in its parent, for [`Expansions::apply`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Key,
    Value,
    Other,
}

/// A mapping value's line comment, once the value is a block collection,
/// goes on its key: there yaml.v3 reads `key: # comment` back from the
/// text, and writes it.
fn comment_to_key(key: &mut Node, value: &mut Node) {
    let block = matches!(value.kind, Kind::Mapping | Kind::Sequence)
        && !value.style.has(crate::Style::FLOW)
        && !value.content.is_empty();
    if block && !value.line_comment.is_empty() && key.line_comment.is_empty() {
        key.line_comment = std::mem::take(&mut value.line_comment);
    }
}

pub(crate) fn has_alias(root: &Node) -> bool {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind == Kind::Alias {
            return true;
        }
        stack.extend(n.content.iter());
    }
    false
}

/// The aliases in some parts of a tree (the items of a ResourceList) whose
/// anchors lie outside their part, with what each stands for: what makes
/// every part stand alone when each is written as a document of its own,
/// where such an alias would name nothing. Aliases to anchors in the same
/// part stay, as they read the same in the part's own document.
#[derive(Debug, Default)]
pub struct Expansions {
    /// For each part: (the alias's rank among the part's aliases in
    /// document order, its expansion).
    parts: Vec<Vec<(usize, Node)>>,
}

impl Expansions {
    /// `parts` are nodes of `root`, in document order.
    pub fn find(root: &Node, parts: &[Node]) -> Result<Expansions, AliasError> {
        let mut follow = Follow::copying(Anchors::new(root));
        if !follow.anchors.has_aliases() {
            return Ok(Expansions::default());
        }
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            let mut own: HashSet<*const Node> = HashSet::new();
            let mut aliases = Vec::new();
            let mut stack = vec![part];
            while let Some(n) = stack.pop() {
                if !n.anchor.is_empty() {
                    own.insert(n as *const Node);
                }
                if n.kind == Kind::Alias {
                    aliases.push(n);
                }
                stack.extend(n.content.iter().rev());
            }
            let mut found = Vec::new();
            for (rank, alias) in aliases.into_iter().enumerate() {
                let target = follow.anchors.target(alias)?;
                if !own.contains(&(target as *const Node)) {
                    found.push((rank, follow.replacement(alias)?));
                }
            }
            out.push(found);
        }
        Ok(Expansions { parts: out })
    }

    /// For one part whose fields were moved after it was read (kyaml's
    /// field order sync puts them back in the input's order): the aliases
    /// that now come before every anchor of their name, which its document
    /// could not hold, with what each stands for: the part's first anchor
    /// of that name (PyYAML names each anchor once, so it is the one the
    /// alias named before the move).
    pub fn misplaced(part: &Node) -> Result<Expansions, AliasError> {
        let mut first: HashMap<&str, &Node> = HashMap::new();
        let mut misplaced = Vec::new();
        let mut rank = 0;
        let mut stack = vec![part];
        while let Some(n) = stack.pop() {
            if !n.anchor.is_empty() {
                first.entry(n.anchor.as_str()).or_insert(n);
            }
            if n.kind == Kind::Alias {
                if !first.contains_key(alias_name(n)) {
                    misplaced.push((rank, n));
                }
                rank += 1;
            }
            stack.extend(n.content.iter().rev());
        }
        if misplaced.is_empty() {
            return Ok(Expansions::default());
        }
        let mut follow = Follow::copying(Anchors::walk(part, &first));
        let found = misplaced
            .into_iter()
            .map(|(rank, alias)| Ok((rank, follow.replacement(alias)?)))
            .collect::<Result<Vec<_>, AliasError>>()?;
        Ok(Expansions { parts: vec![found] })
    }

    /// Replaces the aliases found in `parts` (the same parts, taken out of
    /// the tree).
    pub fn apply(self, parts: &mut [Node]) {
        for (part, found) in parts.iter_mut().zip(self.parts) {
            let mut found = found.into_iter().peekable();
            let mut rank = 0;
            // Pre-order, as `find` ranked them; each node with whether it
            // is a mapping's key or value, and the key last met.
            let mut stack = vec![(part, Role::Other)];
            let mut key: Option<&mut Node> = None;
            while let Some((n, role)) = stack.pop() {
                if found.peek().is_none() {
                    break;
                }
                if n.kind == Kind::Alias {
                    rank += 1;
                    if let Some((_, expansion)) = found.next_if(|(r, _)| *r == rank - 1) {
                        *n = expansion;
                        match role {
                            Role::Value => {
                                if let Some(k) = key.as_deref_mut() {
                                    comment_to_key(k, n);
                                }
                            }
                            Role::Key => key = Some(n),
                            Role::Other => {}
                        }
                    } else if role == Role::Key {
                        key = None;
                    }
                    continue;
                }
                if role == Role::Key {
                    if n.content.is_empty() {
                        key = Some(n);
                        continue;
                    }
                    // A collection as a key (no resource has one): its
                    // aliases are ranked like any others.
                    key = None;
                }
                let mapping = n.kind == Kind::Mapping;
                let roles = (0..n.content.len()).map(|i| match (mapping, i % 2) {
                    (false, _) => Role::Other,
                    (true, 0) => Role::Key,
                    (true, _) => Role::Value,
                });
                let children: Vec<_> = n.content.iter_mut().zip(roles).collect();
                stack.extend(children.into_iter().rev());
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Vec::is_empty)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
