//! yaml.v3's `Node`.

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Style::is_empty")]
    pub style: Style,
    /// yaml.v3's short tag (`!!str`, `!!map`, `!foo`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub anchor: String,
    /// For an alias node: the anchor it names.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
    #[serde(default, rename = "head", skip_serializing_if = "String::is_empty")]
    pub head_comment: String,
    #[serde(default, rename = "line", skip_serializing_if = "String::is_empty")]
    pub line_comment: String,
    #[serde(default, rename = "foot", skip_serializing_if = "String::is_empty")]
    pub foot_comment: String,
    /// 1-based, as yaml.v3's `Line` and `Column`; 0 for built nodes.
    #[serde(default, rename = "line_no", skip_serializing_if = "is_zero")]
    pub line: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub column: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Node>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Node {
    /// A plain scalar with yaml.v3's resolved tag for its value.
    pub fn scalar(value: impl Into<String>) -> Node {
        let value = value.into();
        Node {
            kind: Kind::Scalar,
            tag: crate::yaml::resolve::resolve_plain(&value).to_owned(),
            value,
            ..Node::default()
        }
    }

    /// A string scalar (`!!str`), quoted by the encoder where needed.
    pub fn string(value: impl Into<String>) -> Node {
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
