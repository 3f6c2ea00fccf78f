//! yaml.v3's `Node`.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// yaml.v3's `Kind` (the same numbers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum Kind {
    Document = 1,
    Sequence = 2,
    Mapping = 4,
    #[default]
    Scalar = 8,
    Alias = 16,
}

impl From<Kind> for u8 {
    fn from(k: Kind) -> u8 {
        k as u8
    }
}

impl TryFrom<u8> for Kind {
    type Error = String;
    fn try_from(v: u8) -> Result<Kind, String> {
        Ok(match v {
            1 => Kind::Document,
            2 => Kind::Sequence,
            4 => Kind::Mapping,
            8 => Kind::Scalar,
            16 => Kind::Alias,
            _ => return Err(format!("no node kind {v}")),
        })
    }
}

/// yaml.v3's `Style` bits (the same values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Style(pub u8);

impl Style {
    pub const TAGGED: Style = Style(1);
    pub const DOUBLE_QUOTED: Style = Style(2);
    pub const SINGLE_QUOTED: Style = Style(4);
    pub const LITERAL: Style = Style(8);
    pub const FOLDED: Style = Style(16);
    pub const FLOW: Style = Style(32);

    pub fn has(self, s: Style) -> bool {
        self.0 & s.0 != 0
    }
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Style {
    type Output = Style;
    fn bitor(self, o: Style) -> Style {
        Style(self.0 | o.0)
    }
}

/// One node, as yaml.v3's decoder builds it and its encoder reads it.
/// The serde form is the yaml.v3 oracle's JSON (tests' golden files).
///
/// Kept small (104 bytes), because a package of 4,000 Deployments is half
/// a million nodes and `eval` holds two such trees (the input and the
/// function's output): values up to 24 bytes are inline, a tag is two
/// bytes ([`Tag`]), and the fields that are nearly always empty
/// are one pointer each ([`Text`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Style::is_empty")]
    pub style: Style,
    /// yaml.v3's short tag (`!!str`, `!!map`, `!foo`).
    #[serde(default, skip_serializing_if = "Tag::is_empty")]
    pub tag: Tag,
    #[serde(default, skip_serializing_if = "CompactString::is_empty")]
    pub value: CompactString,
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub anchor: Text,
    /// For an alias node: the anchor it names.
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub alias: Text,
    #[serde(default, rename = "head", skip_serializing_if = "Text::is_empty")]
    pub head_comment: Text,
    #[serde(default, rename = "line", skip_serializing_if = "Text::is_empty")]
    pub line_comment: Text,
    #[serde(default, rename = "foot", skip_serializing_if = "Text::is_empty")]
    pub foot_comment: Text,
    /// 1-based, as yaml.v3's `Line` and `Column`; 0 for built nodes.
    #[serde(default, rename = "line_no", skip_serializing_if = "is_zero")]
    pub line: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub column: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Node>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A tag, in two bytes: an index into the tags seen. yaml.v3's own short
/// tags are there from the start; any other tag is added (and kept for the
/// life of the process) the first time it is seen. Documents use a handful
/// of distinct tags, so this trades a few leaked bytes for 22 bytes on
/// every node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Tag(u16);

/// The tags yaml.v3 gives; index 0 is no tag.
const KNOWN_TAGS: [&str; 12] = [
    "",
    "!!str",
    "!!map",
    "!!seq",
    "!!int",
    "!!float",
    "!!bool",
    "!!null",
    "!!timestamp",
    "!!binary",
    "!!merge",
    "!",
];

/// Tags beyond [`KNOWN_TAGS`], by index minus its length, and their
/// indexes by name.
struct OtherTags {
    names: Vec<&'static str>,
    index: std::collections::HashMap<&'static str, usize>,
}

static OTHER_TAGS: std::sync::RwLock<Option<OtherTags>> = std::sync::RwLock::new(None);

impl Tag {
    pub fn as_str(&self) -> &'static str {
        let i = usize::from(self.0);
        if let Some(t) = KNOWN_TAGS.get(i) {
            return t;
        }
        let others = OTHER_TAGS.read().unwrap_or_else(|e| e.into_inner());
        others
            .as_ref()
            .and_then(|o| o.names.get(i - KNOWN_TAGS.len()).copied())
            .unwrap_or("")
    }
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }
    fn intern(s: &str) -> Tag {
        if let Some(i) = KNOWN_TAGS.iter().position(|t| *t == s) {
            return Tag(i as u16);
        }
        if let Some(o) = OTHER_TAGS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            if let Some(i) = o.index.get(s) {
                return Tag((KNOWN_TAGS.len() + i) as u16);
            }
        }
        let mut guard = OTHER_TAGS.write().unwrap_or_else(|e| e.into_inner());
        let others = guard.get_or_insert_with(|| OtherTags {
            names: Vec::new(),
            index: std::collections::HashMap::new(),
        });
        let i = match others.index.get(s) {
            Some(i) => *i,
            // Past 65,000 distinct tags, further ones read as the last one
            // kept; no document comes near that many.
            None if KNOWN_TAGS.len() + others.names.len() >= usize::from(u16::MAX) => {
                others.names.len() - 1
            }
            None => {
                let name: &'static str = Box::leak(s.to_owned().into_boxed_str());
                others.names.push(name);
                others.index.insert(name, others.names.len() - 1);
                others.names.len() - 1
            }
        };
        Tag((KNOWN_TAGS.len() + i) as u16)
    }
}

impl From<&str> for Tag {
    fn from(s: &str) -> Tag {
        Tag::intern(s)
    }
}

impl From<String> for Tag {
    fn from(s: String) -> Tag {
        Tag::intern(&s)
    }
}

impl From<Tag> for String {
    fn from(t: Tag) -> String {
        t.as_str().to_owned()
    }
}

impl std::ops::Deref for Tag {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Tag {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Tag {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is nearly always empty (comments, anchors): one pointer,
/// allocated only when set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
// A thin pointer (8 bytes) where `String` is 24: the point of the type.
#[allow(clippy::box_collection)]
pub struct Text(Option<Box<String>>);

impl Text {
    pub fn as_str(&self) -> &str {
        self.0.as_deref().map_or("", String::as_str)
    }
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }
    pub fn push_str(&mut self, s: &str) {
        if !s.is_empty() {
            self.0.get_or_insert_with(Box::default).push_str(s);
        }
    }
    pub fn push(&mut self, c: char) {
        self.0.get_or_insert_with(Box::default).push(c);
    }
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text((!s.is_empty()).then(|| Box::new(s)))
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::from(s.to_owned())
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.0.map(|b| *b).unwrap_or_default()
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Node {
    /// A plain scalar with yaml.v3's resolved tag for its value.
    pub fn scalar(value: impl Into<CompactString>) -> Node {
        let value = value.into();
        Node {
            kind: Kind::Scalar,
            tag: crate::resolve::resolve_plain(&value).into(),
            value,
            ..Node::default()
        }
    }

    /// A string scalar (`!!str`), quoted by the encoder where needed.
    pub fn string(value: impl Into<CompactString>) -> Node {
        Node {
            kind: Kind::Scalar,
            tag: "!!str".into(),
            value: value.into(),
            ..Node::default()
        }
    }

    pub fn mapping(content: Vec<Node>) -> Node {
        Node {
            kind: Kind::Mapping,
            tag: "!!map".into(),
            content,
            ..Node::default()
        }
    }

    pub fn sequence(content: Vec<Node>) -> Node {
        Node {
            kind: Kind::Sequence,
            tag: "!!seq".into(),
            content,
            ..Node::default()
        }
    }

    /// The value under `key` in a mapping node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        if self.kind != Kind::Mapping {
            return None;
        }
        self.content
            .chunks_exact(2)
            .find(|kv| kv[0].value == key && kv[0].kind == Kind::Scalar)
            .map(|kv| &kv[1])
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        if self.kind != Kind::Mapping {
            return None;
        }
        self.content
            .chunks_exact_mut(2)
            .find(|kv| kv[0].value == key && kv[0].kind == Kind::Scalar)
            .map(|kv| &mut kv[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_stays_small_and_tags_read_back() {
        // Two trees of half a million nodes each: every byte here is a
        // megabyte there (see the type's documentation).
        assert!(
            std::mem::size_of::<Node>() <= 104,
            "{}",
            std::mem::size_of::<Node>()
        );
        for t in [
            "",
            "!!str",
            "!!map",
            "!custom",
            "tag:example.com,2024:x",
            "!custom",
        ] {
            assert_eq!(Tag::from(t).as_str(), t);
        }
        assert_eq!(Tag::from("!custom"), Tag::from(String::from("!custom")));
        assert_ne!(Tag::from("!a"), Tag::from("!b"));
        let mut text = Text::default();
        assert!(text.is_empty());
        assert_eq!(text.as_str(), "");
        text.push_str("# a");
        text.push('\n');
        assert_eq!(text, "# a\n");
        assert_eq!(Text::from(String::new()), Text::default());
    }
}
