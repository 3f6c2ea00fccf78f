//! YAML as kpt's yaml.v3 sees it: a node tree with comments
//! ([`Node`]), parsed by libyaml (the `libyaml-safer` port: libyaml's
//! grammar and error messages, which yaml.v3 shares) with comments attached
//! from the source text ([`parse`]), and written back as yaml.v3's encoder
//! writes it ([`emit`]).
//!
//! The tree mirrors `yaml.v3`'s `Node` field for field, so kyaml's
//! algorithms (comment copying, field-order sync) translate one to one.

pub mod emit;
pub mod node;
pub mod parse;
pub mod resolve;
pub mod value;

pub use node::{Kind, Node, Style, Tag, Text};
