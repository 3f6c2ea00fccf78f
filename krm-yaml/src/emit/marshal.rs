//! encode.go's layer: a [`Node`] tree turned into events for the emitter
//! (`marshalDoc`, `node`), deciding which tags to show, which scalars to
//! quote, and where foot comments go.

use crate::node::{Kind, Node, Style};
use crate::resolve::{self, MAP_TAG, SEQ_TAG, STR_TAG};

use super::{Emitter, Event, EventType, ScalarStyle};

impl<'a> Emitter<'a> {
    /// `encoder.marshalDoc` for a `*Node`.
    pub(super) fn marshal_doc(&mut self, node: &'a Node) {
        if node.kind == Kind::Document {
            self.document(node);
        } else {
            self.emit(&Event::new(EventType::DocumentStart));
            self.node(node, "", false);
            self.emit(&Event::new(EventType::DocumentEnd));
        }
    }

    /// `encoder.node`'s DocumentNode case.
    fn document(&mut self, node: &'a Node) {
        self.emit(&Event {
            head_comment: &node.head_comment,
            ..Event::new(EventType::DocumentStart)
        });
        // Go emits every child and its emitter fails on none or a second
        // one; one root is what a document holds.
        match node.content.first() {
            Some(root) => self.node(root, "", false),
            None => self.null(),
        }
        self.emit(&Event {
            foot_comment: &node.foot_comment,
            ..Event::new(EventType::DocumentEnd)
        });
    }

    /// `encoder.nilv`.
    fn null(&mut self) {
        self.emit(&Event {
            value: "null",
            ..Event::new(EventType::Scalar)
        });
    }

    /// `encoder.node`. `tail` is the foot comment of the previous mapping
    /// key, written before this node; `key` marks a mapping key, whose own
    /// foot comment moved to the next key (Go copies the key node and
    /// clears its foot).
    fn node(&mut self, node: &'a Node, tail: &'a str, key: bool) {
        let foot: &'a str = if key { "" } else { &node.foot_comment };

        // If the tag was not explicitly requested, and dropping it won't
        // change the implicit tag of the value, don't include it.
        let mut tag: &'a str = &node.tag;
        let mut force_quoting = false;
        if !tag.is_empty() && !node.style.has(Style::TAGGED) {
            let stag = resolve::short_tag(tag);
            if node.kind == Kind::Scalar {
                let quoted =
                    Style::SINGLE_QUOTED | Style::DOUBLE_QUOTED | Style::LITERAL | Style::FOLDED;
                if stag == STR_TAG && node.style.has(quoted) {
                    tag = "";
                } else {
                    let rtag = resolve::resolve_plain(&node.value);
                    if rtag == stag {
                        tag = "";
                    } else if stag == STR_TAG {
                        tag = "";
                        force_quoting = true;
                    }
                }
            } else {
                let rtag = match node.kind {
                    Kind::Mapping => MAP_TAG,
                    Kind::Sequence => SEQ_TAG,
                    _ => "",
                };
                if rtag == stag {
                    tag = "";
                }
            }
        }

        match node.kind {
            Kind::Document => {
                // Not valid below the top (Go's emitter fails): write what
                // the document holds.
                match node.content.first() {
                    Some(root) => self.node(root, tail, key),
                    None => self.null(),
                }
            }
            Kind::Sequence => {
                self.emit(&Event {
                    anchor: &node.anchor,
                    tag,
                    implicit: tag.is_empty(),
                    flow: node.style.has(Style::FLOW),
                    empty: node.content.is_empty(),
                    head_comment: &node.head_comment,
                    ..Event::new(EventType::SequenceStart)
                });
                for item in &node.content {
                    self.node(item, "", false);
                }
                self.emit(&Event {
                    line_comment: &node.line_comment,
                    foot_comment: foot,
                    ..Event::new(EventType::SequenceEnd)
                });
            }
            Kind::Mapping => {
                self.emit(&Event {
                    anchor: &node.anchor,
                    tag,
                    implicit: tag.is_empty(),
                    flow: node.style.has(Style::FLOW),
                    // Go pairs content[i], content[i+1]; an odd last node
                    // is dropped.
                    empty: node.content.len() < 2,
                    tail_comment: tail,
                    head_comment: &node.head_comment,
                    ..Event::new(EventType::MappingStart)
                });
                // A key's foot comment is written before the next key (or
                // at the mapping's end), after the whole value.
                let mut tail: &'a str = "";
                for pair in node.content.chunks_exact(2) {
                    self.node(&pair[0], tail, true);
                    tail = &pair[0].foot_comment;
                    self.node(&pair[1], "", false);
                }
                self.emit(&Event {
                    tail_comment: tail,
                    line_comment: &node.line_comment,
                    foot_comment: foot,
                    ..Event::new(EventType::MappingEnd)
                });
            }
            Kind::Alias => {
                // Go names the alias by its Value (the decoder sets it to
                // the anchor); a built node may only name it in `alias`.
                let name: &'a str = if node.value.is_empty() {
                    &node.alias
                } else {
                    &node.value
                };
                if name.is_empty() {
                    self.null();
                    return;
                }
                self.emit(&Event {
                    anchor: name,
                    head_comment: &node.head_comment,
                    line_comment: &node.line_comment,
                    foot_comment: foot,
                    ..Event::new(EventType::Alias)
                });
            }
            Kind::Scalar => {
                let value: &'a str = &node.value;
                let s = node.style;
                let style = if s.has(Style::DOUBLE_QUOTED) {
                    ScalarStyle::DoubleQuoted
                } else if s.has(Style::SINGLE_QUOTED) {
                    ScalarStyle::SingleQuoted
                } else if s.has(Style::LITERAL) {
                    ScalarStyle::Literal
                } else if s.has(Style::FOLDED) {
                    ScalarStyle::Folded
                } else if value.contains('\n') {
                    ScalarStyle::Literal
                } else if force_quoting {
                    ScalarStyle::DoubleQuoted
                } else {
                    ScalarStyle::Plain
                };
                self.emit(&Event {
                    anchor: &node.anchor,
                    tag,
                    value,
                    implicit: tag.is_empty(),
                    scalar_style: style,
                    head_comment: &node.head_comment,
                    line_comment: &node.line_comment,
                    foot_comment: foot,
                    tail_comment: tail,
                    ..Event::new(EventType::Scalar)
                });
            }
        }
    }
}
