//! YAML as kpt's yaml.v3 sees it, and kpt's packages: what `eval`,
//! `render` and the built-in functions share.
//!
//! - The tree: a node tree with comments ([`Node`]), parsed by libyaml (the
//!   `libyaml-safer` port: libyaml's grammar and error messages, which
//!   yaml.v3 shares) with comments attached from the source text
//!   ([`parse`]), and written back as yaml.v3's encoder writes it
//!   ([`emit`]). It mirrors `yaml.v3`'s `Node` field for field, so kyaml's
//!   algorithms (comment copying, field-order sync) translate one to one.
//! - [`alias`]: what an alias stands for (the tree keeps only its anchor's
//!   name), followed under yaml.v3's budget, for reading data
//!   ([`value`]) and for writing parts of one document as documents of
//!   their own.
//! - [`gov3`]: how yaml.v3's encoder writes a Go string and orders a Go
//!   map's keys, for what is marshalled from Go types.
//! - [`package`]: a package directory (or a stream of documents) read into
//!   resources and written back as kpt writes it, and the kyaml operations
//!   kpt applies to a resource in between ([`package::kyaml`]).

#![forbid(unsafe_code)]

pub mod alias;
pub mod emit;
pub mod gov3;
pub mod node;
pub mod package;
pub mod parse;
mod quote;
pub mod resolve;
pub mod value;

pub use node::{Kind, Node, Style, Tag, Text};
