//! yaml.v3's encoder for [`Node`] trees, byte for byte (go.yaml.in/yaml/v3
//! v3.0.4 as kpt's kyaml drives it: `NewEncoder`, `SetIndent(2)`, optionally
//! `CompactSeqIndent()`, one `Encode` per document, `Close`).
//!
//! Two layers, as in Go:
//! - `node` and `marshal_doc` port `encode.go`: they walk the tree and turn
//!   it into libyaml events, deciding which tags to show, which scalars to
//!   quote, and moving a key's foot comment to the next key (`tail`).
//! - `Emitter` ports `emitterc.go`: the libyaml emitter state machine with
//!   yaml.v3's comment handling. Events are handed to it one by one; the
//!   lookahead libyaml's event queue provides (is the collection empty?) is
//!   carried on the start event instead (`Event::empty`).
//!
//! `NewEncoder` leaves the line width at -1, which the stream start turns
//! into `1<<31 - 1`: lines never wrap. The width checks are kept so the
//! writers read like their Go originals.
//!
//! The Go encoder fails on a few trees the parser never builds (an empty
//! document, a document inside a collection, an alias without a name); here
//! those write `null` or the document's content instead.

use super::node::{Kind, Node, Style};
use super::resolve::{self, LONG_TAG_PREFIX, MAP_TAG, SEQ_TAG, STR_TAG};

/// The YAML stream for `docs`, as yaml.v3's `Encoder` writes it: each
/// document after the first starts with `---`. A non-document node is
/// written as a document of its own (`marshalDoc`). `compact` is
/// `CompactSeqIndent()`: `- ` counts as indentation, so a sequence under a
/// mapping key is not indented further.
pub fn encode(docs: &[Node], compact: bool) -> String {
    if docs.is_empty() {
        // `Close` without `Encode` fails in Go and writes nothing.
        return String::new();
    }
    let mut e = Emitter::new(compact);
    e.emit(&Event::new(EventType::StreamStart));
    for doc in docs {
        e.marshal_doc(doc);
    }
    e.emit(&Event::new(EventType::StreamEnd));
    e.into_string()
}

/// [`encode`] for one node (a document node, or any node, which is then
/// written as a document of its own).
pub fn encode_node(node: &Node, compact: bool) -> String {
    encode(std::slice::from_ref(node), compact)
}

// ---------------------------------------------------------------------------
// Events (yamlh.go's yaml_event_t, the fields the Node path sets).

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum EventType {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias,
    Scalar,
    SequenceStart,
    SequenceEnd,
    MappingStart,
    MappingEnd,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

struct Event<'a> {
    typ: EventType,
    anchor: &'a str,
    /// The tag as the node spells it (short `!!x`, long, or local `!x`),
    /// "" when implicit; `long_tag` and `yaml_emitter_analyze_tag` are
    /// folded into `Emitter::analyze_tag`.
    tag: &'a str,
    value: &'a str,
    /// `implicit` and `quoted_implicit`: the Node path sets both to
    /// `tag == ""`.
    implicit: bool,
    scalar_style: ScalarStyle,
    /// A flow collection (`yaml_FLOW_*_STYLE`).
    flow: bool,
    /// A collection start whose end event comes next
    /// (`yaml_emitter_check_empty_sequence/mapping`).
    empty: bool,
    head_comment: &'a str,
    line_comment: &'a str,
    foot_comment: &'a str,
    tail_comment: &'a str,
}

impl<'a> Event<'a> {
    fn new(typ: EventType) -> Event<'a> {
        Event {
            typ,
            anchor: "",
            tag: "",
            value: "",
            implicit: true,
            scalar_style: ScalarStyle::Plain,
            flow: false,
            empty: false,
            head_comment: "",
            line_comment: "",
            foot_comment: "",
            tail_comment: "",
        }
    }
}

// ---------------------------------------------------------------------------
// encode.go: Node tree → events.

impl<'a> Emitter<'a> {
    /// `encoder.marshalDoc` for a `*Node`.
    fn marshal_doc(&mut self, node: &'a Node) {
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

// ---------------------------------------------------------------------------
// emitterc.go: the emitter.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    StreamStart,
    FirstDocumentStart,
    DocumentStart,
    DocumentContent,
    DocumentEnd,
    FlowSequenceFirstItem,
    FlowSequenceTrailItem,
    FlowSequenceItem,
    FlowMappingFirstKey,
    FlowMappingTrailKey,
    FlowMappingKey,
    FlowMappingSimpleValue,
    FlowMappingValue,
    BlockSequenceFirstItem,
    BlockSequenceItem,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingSimpleValue,
    BlockMappingValue,
    End,
}

/// `scalar_data`: what `yaml_emitter_analyze_scalar` found.
#[derive(Default)]
struct ScalarData<'a> {
    value: &'a str,
    multiline: bool,
    flow_plain_allowed: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

/// `best_indent`: the encoder's `SetIndent(2)` (within libyaml's 2..=9).
const BEST_INDENT: isize = 2;

/// `yaml_emitter_t`, less what the Node path never reads (encoding,
/// canonical, line breaks other than `\n`, directives, `open_ended`, which
/// only adds `...` before directives or after `Close`, where Go clears it).
struct Emitter<'a> {
    out: Vec<u8>,

    best_width: isize,
    compact_sequence_indent: bool,

    state: State,
    states: Vec<State>,
    indents: Vec<isize>,
    indent: isize,
    flow_level: usize,

    mapping_context: bool,
    simple_key_context: bool,

    column: isize,
    whitespace: bool,
    indention: bool,
    foot_indent: isize,

    /// `anchor_data`: the anchor or alias name and whether it is an alias.
    anchor: Option<(&'a str, bool)>,
    /// `tag_data`.
    tag_handle: &'a str,
    tag_suffix: &'a str,
    scalar: ScalarData<'a>,
    scalar_style: ScalarStyle,

    head_comment: &'a str,
    line_comment: &'a str,
    foot_comment: &'a str,
    tail_comment: &'a str,
    key_line_comment: &'a str,
}

impl<'a> Emitter<'a> {
    fn new(compact: bool) -> Emitter<'a> {
        Emitter {
            out: Vec::with_capacity(4096),
            // `yaml_emitter_initialize` sets width -1.
            best_width: -1,
            compact_sequence_indent: compact,
            state: State::StreamStart,
            states: Vec::with_capacity(16),
            indents: Vec::with_capacity(16),
            indent: -1,
            flow_level: 0,
            mapping_context: false,
            simple_key_context: false,
            column: 0,
            whitespace: true,
            indention: true,
            foot_indent: -1,
            anchor: None,
            tag_handle: "",
            tag_suffix: "",
            scalar: ScalarData::default(),
            scalar_style: ScalarStyle::Plain,
            head_comment: "",
            line_comment: "",
            foot_comment: "",
            tail_comment: "",
            key_line_comment: "",
        }
    }

    fn into_string(self) -> String {
        // Everything written is whole UTF-8 characters of the input or ASCII.
        String::from_utf8(self.out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    // -- output primitives (put, put_break, write, write_all, write_break)

    fn put(&mut self, b: u8) {
        self.out.push(b);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push(b'\n');
        self.column = 0;
        self.indention = true;
    }

    /// Copies the character at `s[*i]` and steps over it.
    fn write(&mut self, s: &[u8], i: &mut usize) {
        let w = width(s[*i]).max(1);
        let end = (*i + w).min(s.len());
        self.out.extend_from_slice(&s[*i..end]);
        self.column += 1;
        *i = end;
    }

    fn write_all(&mut self, s: &[u8]) {
        self.out.extend_from_slice(s);
        self.column += s.iter().filter(|&&b| b & 0xC0 != 0x80).count() as isize;
    }

    fn write_break(&mut self, s: &[u8], i: &mut usize) {
        if s[*i] == b'\n' {
            self.put_break();
            *i += 1;
        } else {
            self.write(s, i);
            self.column = 0;
            self.indention = true;
        }
    }

    fn pop_state(&mut self) {
        self.state = self.states.pop().unwrap_or(State::End);
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    /// `yaml_emitter_emit`: analyze the event, then run the state machine.
    fn emit(&mut self, ev: &Event<'a>) {
        self.analyze_event(ev);
        self.state_machine(ev);
    }

    /// `yaml_emitter_increase_indent_compact`.
    fn increase_indent_compact(&mut self, flow: bool, indentless: bool, compact_seq: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            if self.states.last() == Some(&State::BlockSequenceItem) {
                // The first indent inside a sequence just skips the "- ".
                self.indent += 2;
            } else {
                self.indent = BEST_INDENT * ((self.indent + BEST_INDENT) / BEST_INDENT);
                if compact_seq {
                    // A block sequence in a mapping: "- " is indentation.
                    self.indent -= 2;
                }
            }
        }
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.increase_indent_compact(flow, indentless, false);
    }

    /// `yaml_emitter_state_machine`.
    fn state_machine(&mut self, ev: &Event<'a>) {
        match self.state {
            State::StreamStart => self.emit_stream_start(ev),
            State::FirstDocumentStart => self.emit_document_start(ev, true),
            State::DocumentStart => self.emit_document_start(ev, false),
            State::DocumentContent => self.emit_document_content(ev),
            State::DocumentEnd => self.emit_document_end(ev),
            State::FlowSequenceFirstItem => self.emit_flow_sequence_item(ev, true, false),
            State::FlowSequenceTrailItem => self.emit_flow_sequence_item(ev, false, true),
            State::FlowSequenceItem => self.emit_flow_sequence_item(ev, false, false),
            State::FlowMappingFirstKey => self.emit_flow_mapping_key(ev, true, false),
            State::FlowMappingTrailKey => self.emit_flow_mapping_key(ev, false, true),
            State::FlowMappingKey => self.emit_flow_mapping_key(ev, false, false),
            State::FlowMappingSimpleValue => self.emit_flow_mapping_value(ev, true),
            State::FlowMappingValue => self.emit_flow_mapping_value(ev, false),
            State::BlockSequenceFirstItem => self.emit_block_sequence_item(ev, true),
            State::BlockSequenceItem => self.emit_block_sequence_item(ev, false),
            State::BlockMappingFirstKey => self.emit_block_mapping_key(ev, true),
            State::BlockMappingKey => self.emit_block_mapping_key(ev, false),
            State::BlockMappingSimpleValue => self.emit_block_mapping_value(ev, true),
            State::BlockMappingValue => self.emit_block_mapping_value(ev, false),
            State::End => {}
        }
    }

    /// `yaml_emitter_emit_stream_start`.
    fn emit_stream_start(&mut self, ev: &Event<'a>) {
        if ev.typ != EventType::StreamStart {
            return;
        }
        if self.best_width >= 0 && self.best_width <= BEST_INDENT * 2 {
            self.best_width = 80;
        }
        if self.best_width < 0 {
            self.best_width = (1 << 31) - 1;
        }
        self.indent = -1;
        self.column = 0;
        self.whitespace = true;
        self.indention = true;
        self.foot_indent = -1;
        self.state = State::FirstDocumentStart;
    }

    /// `yaml_emitter_emit_document_start`: the encoder's documents are
    /// implicit, so only documents after the first get `---`.
    fn emit_document_start(&mut self, ev: &Event<'a>, first: bool) {
        match ev.typ {
            EventType::DocumentStart => {
                if !first {
                    self.write_indent();
                    self.write_indicator(b"---", true, false, false);
                    self.write_indent();
                }
                if !self.head_comment.is_empty() {
                    self.process_head_comment();
                    self.put_break();
                }
                self.state = State::DocumentContent;
            }
            EventType::StreamEnd => self.state = State::End,
            _ => {}
        }
    }

    /// `yaml_emitter_emit_document_content`.
    fn emit_document_content(&mut self, ev: &Event<'a>) {
        self.states.push(State::DocumentEnd);
        self.process_head_comment();
        self.emit_node(ev, false, false);
        self.process_line_comment();
        self.process_foot_comment();
    }

    /// `yaml_emitter_emit_document_end` (implicit: no `...`).
    fn emit_document_end(&mut self, ev: &Event<'a>) {
        if ev.typ != EventType::DocumentEnd {
            return;
        }
        // [Go] Force document foot separation.
        self.foot_indent = 0;
        self.process_foot_comment();
        self.foot_indent = -1;
        self.write_indent();
        self.state = State::DocumentStart;
    }

    fn has_trailing_comments(&self) -> bool {
        !self.line_comment.is_empty()
            || !self.foot_comment.is_empty()
            || !self.tail_comment.is_empty()
    }

    /// `yaml_emitter_emit_flow_sequence_item`.
    fn emit_flow_sequence_item(&mut self, ev: &Event<'a>, first: bool, trail: bool) {
        if first {
            self.write_indicator(b"[", true, true, false);
            self.increase_indent(true, false);
            self.flow_level += 1;
        }
        if ev.typ == EventType::SequenceEnd {
            self.flow_level = self.flow_level.saturating_sub(1);
            self.pop_indent();
            if self.column == 0 {
                self.write_indent();
            }
            self.write_indicator(b"]", false, false, false);
            self.process_line_comment();
            self.process_foot_comment();
            self.pop_state();
            return;
        }
        if !first && !trail {
            self.write_indicator(b",", false, false, false);
        }
        self.process_head_comment();
        if self.column == 0 {
            self.write_indent();
        }
        if self.column > self.best_width {
            self.write_indent();
        }
        if self.has_trailing_comments() {
            self.states.push(State::FlowSequenceTrailItem);
        } else {
            self.states.push(State::FlowSequenceItem);
        }
        self.emit_node(ev, false, false);
        if self.has_trailing_comments() {
            self.write_indicator(b",", false, false, false);
        }
        self.process_line_comment();
        self.process_foot_comment();
    }

    /// `yaml_emitter_emit_flow_mapping_key`.
    fn emit_flow_mapping_key(&mut self, ev: &Event<'a>, first: bool, trail: bool) {
        if first {
            self.write_indicator(b"{", true, true, false);
            self.increase_indent(true, false);
            self.flow_level += 1;
        }
        if ev.typ == EventType::MappingEnd {
            let comments = !self.head_comment.is_empty()
                || !self.foot_comment.is_empty()
                || !self.tail_comment.is_empty();
            if comments && !first && !trail {
                self.write_indicator(b",", false, false, false);
            }
            self.process_head_comment();
            self.flow_level = self.flow_level.saturating_sub(1);
            self.pop_indent();
            self.write_indicator(b"}", false, false, false);
            self.process_line_comment();
            self.process_foot_comment();
            self.pop_state();
            return;
        }
        if !first && !trail {
            self.write_indicator(b",", false, false, false);
        }
        self.process_head_comment();
        if self.column == 0 {
            self.write_indent();
        }
        if self.column > self.best_width {
            self.write_indent();
        }
        if self.check_simple_key(ev) {
            self.states.push(State::FlowMappingSimpleValue);
            self.emit_node(ev, true, true);
            return;
        }
        self.write_indicator(b"?", true, false, false);
        self.states.push(State::FlowMappingValue);
        self.emit_node(ev, true, false);
    }

    /// `yaml_emitter_emit_flow_mapping_value`.
    fn emit_flow_mapping_value(&mut self, ev: &Event<'a>, simple: bool) {
        if simple {
            self.write_indicator(b":", false, false, false);
        } else {
            if self.column > self.best_width {
                self.write_indent();
            }
            self.write_indicator(b":", true, false, false);
        }
        if self.has_trailing_comments() {
            self.states.push(State::FlowMappingTrailKey);
        } else {
            self.states.push(State::FlowMappingKey);
        }
        self.emit_node(ev, true, false);
        if self.has_trailing_comments() {
            self.write_indicator(b",", false, false, false);
        }
        self.process_line_comment();
        self.process_foot_comment();
    }

    /// `yaml_emitter_emit_block_sequence_item`.
    fn emit_block_sequence_item(&mut self, ev: &Event<'a>, first: bool) {
        if first {
            // In a mapping, with CompactSeqIndent, "- " is part of the
            // indentation of the items.
            let seq = self.mapping_context
                && (self.column == 0 || !self.indention)
                && self.compact_sequence_indent;
            self.increase_indent_compact(false, false, seq);
        }
        if ev.typ == EventType::SequenceEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.process_head_comment();
        self.write_indent();
        self.write_indicator(b"-", true, false, true);
        self.states.push(State::BlockSequenceItem);
        self.emit_node(ev, false, false);
        self.process_line_comment();
        self.process_foot_comment();
    }

    /// `yaml_emitter_emit_block_mapping_key`.
    fn emit_block_mapping_key(&mut self, ev: &Event<'a>, first: bool) {
        if first {
            self.increase_indent(false, false);
        }
        self.process_head_comment();
        if ev.typ == EventType::MappingEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.write_indent();
        if !self.line_comment.is_empty() {
            // [Go] A line comment on the key: kept for the value.
            self.key_line_comment = self.line_comment;
            self.line_comment = "";
        }
        if self.check_simple_key(ev) {
            self.states.push(State::BlockMappingSimpleValue);
            self.emit_node(ev, true, true);
            return;
        }
        self.write_indicator(b"?", true, false, true);
        self.states.push(State::BlockMappingValue);
        self.emit_node(ev, true, false);
    }

    /// `yaml_emitter_emit_block_mapping_value`.
    fn emit_block_mapping_value(&mut self, ev: &Event<'a>, simple: bool) {
        if simple {
            self.write_indicator(b":", false, false, false);
        } else {
            self.write_indent();
            self.write_indicator(b":", true, false, true);
        }
        if !self.key_line_comment.is_empty() {
            // [Go] The key's line comment goes with a scalar value (unless
            // it has its own: then the key's stays pending), or right
            // away before an indented block.
            if ev.typ == EventType::Scalar {
                if self.line_comment.is_empty() {
                    self.line_comment = self.key_line_comment;
                    self.key_line_comment = "";
                }
            } else if !ev.flow
                && matches!(ev.typ, EventType::MappingStart | EventType::SequenceStart)
            {
                std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
                self.process_line_comment();
                std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
            }
        }
        self.states.push(State::BlockMappingKey);
        self.emit_node(ev, true, false);
        self.process_line_comment();
        self.process_foot_comment();
    }

    /// `yaml_emitter_emit_node` (the root and sequence contexts only feed
    /// `open_ended`, which is not kept).
    fn emit_node(&mut self, ev: &Event<'a>, mapping: bool, simple_key: bool) {
        self.mapping_context = mapping;
        self.simple_key_context = simple_key;
        match ev.typ {
            EventType::Alias => {
                self.process_anchor();
                self.pop_state();
            }
            EventType::Scalar => self.emit_scalar(ev),
            EventType::SequenceStart => {
                self.process_anchor();
                self.process_tag();
                self.state = if self.flow_level > 0 || ev.flow || ev.empty {
                    State::FlowSequenceFirstItem
                } else {
                    State::BlockSequenceFirstItem
                };
            }
            EventType::MappingStart => {
                self.process_anchor();
                self.process_tag();
                self.state = if self.flow_level > 0 || ev.flow || ev.empty {
                    State::FlowMappingFirstKey
                } else {
                    State::BlockMappingFirstKey
                };
            }
            _ => {}
        }
    }

    /// `yaml_emitter_emit_scalar`.
    fn emit_scalar(&mut self, ev: &Event<'a>) {
        self.select_scalar_style(ev);
        self.process_anchor();
        self.process_tag();
        self.increase_indent(true, false);
        self.process_scalar();
        self.pop_indent();
        self.pop_state();
    }

    /// `yaml_emitter_check_simple_key`.
    fn check_simple_key(&self, ev: &Event<'a>) -> bool {
        let anchor = self.anchor.map_or(0, |(a, _)| a.len());
        let tag = self.tag_handle.len() + self.tag_suffix.len();
        let length = match ev.typ {
            EventType::Alias => anchor,
            EventType::Scalar => {
                if self.scalar.multiline {
                    return false;
                }
                anchor + tag + self.scalar.value.len()
            }
            EventType::SequenceStart | EventType::MappingStart => {
                if !ev.empty {
                    return false;
                }
                anchor + tag
            }
            _ => return false,
        };
        length <= 128
    }

    /// `yaml_emitter_select_scalar_style`.
    fn select_scalar_style(&mut self, ev: &Event<'a>) {
        let no_tag = self.tag_handle.is_empty() && self.tag_suffix.is_empty();
        let mut style = ev.scalar_style;
        if self.simple_key_context && self.scalar.multiline {
            style = ScalarStyle::DoubleQuoted;
        }
        if style == ScalarStyle::Plain {
            let flow = self.flow_level > 0;
            if flow && !self.scalar.flow_plain_allowed || !flow && !self.scalar.block_plain_allowed
            {
                style = ScalarStyle::SingleQuoted;
            }
            if self.scalar.value.is_empty() && (flow || self.simple_key_context) {
                style = ScalarStyle::SingleQuoted;
            }
            if no_tag && !ev.implicit {
                style = ScalarStyle::SingleQuoted;
            }
        }
        if style == ScalarStyle::SingleQuoted && !self.scalar.single_quoted_allowed {
            style = ScalarStyle::DoubleQuoted;
        }
        if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            && (!self.scalar.block_allowed || self.flow_level > 0 || self.simple_key_context)
        {
            style = ScalarStyle::DoubleQuoted;
        }
        if no_tag && !ev.implicit && style != ScalarStyle::Plain {
            self.tag_handle = "!";
        }
        self.scalar_style = style;
    }

    /// `yaml_emitter_process_anchor`.
    fn process_anchor(&mut self) {
        if let Some((anchor, alias)) = self.anchor {
            self.write_indicator(if alias { b"*" } else { b"&" }, true, false, false);
            self.write_all(anchor.as_bytes());
            self.whitespace = false;
            self.indention = false;
        }
    }

    /// `yaml_emitter_process_tag`.
    fn process_tag(&mut self) {
        if self.tag_handle.is_empty() && self.tag_suffix.is_empty() {
            return;
        }
        if !self.tag_handle.is_empty() {
            // yaml_emitter_write_tag_handle
            if !self.whitespace {
                self.put(b' ');
            }
            self.write_all(self.tag_handle.as_bytes());
            self.whitespace = false;
            self.indention = false;
            if !self.tag_suffix.is_empty() {
                self.write_tag_content(self.tag_suffix.as_bytes(), false);
            }
        } else {
            self.write_indicator(b"!<", true, false, false);
            self.write_tag_content(self.tag_suffix.as_bytes(), false);
            self.write_indicator(b">", false, false, false);
        }
    }

    /// `yaml_emitter_process_scalar`.
    fn process_scalar(&mut self) {
        let value = self.scalar.value.as_bytes();
        let allow_breaks = !self.simple_key_context;
        match self.scalar_style {
            ScalarStyle::Plain => self.write_plain_scalar(value, allow_breaks),
            ScalarStyle::SingleQuoted => self.write_single_quoted_scalar(value, allow_breaks),
            ScalarStyle::DoubleQuoted => self.write_double_quoted_scalar(value, allow_breaks),
            ScalarStyle::Literal => self.write_literal_scalar(value),
            ScalarStyle::Folded => self.write_folded_scalar(value),
        }
    }

    /// `yaml_emitter_process_head_comment`: a pending tail comment (the
    /// previous key's foot), then the head comment.
    fn process_head_comment(&mut self) {
        if !self.tail_comment.is_empty() {
            self.write_indent();
            self.write_comment(self.tail_comment.as_bytes());
            self.tail_comment = "";
            self.foot_indent = self.indent.max(0);
        }
        if self.head_comment.is_empty() {
            return;
        }
        self.write_indent();
        self.write_comment(self.head_comment.as_bytes());
        self.head_comment = "";
    }

    fn process_line_comment(&mut self) {
        self.process_line_comment_linebreak(false);
    }

    /// `yaml_emitter_process_line_comment_linebreak`.
    fn process_line_comment_linebreak(&mut self, linebreak: bool) {
        if self.line_comment.is_empty() {
            if linebreak {
                self.put_break();
            }
            return;
        }
        if !self.whitespace {
            self.put(b' ');
        }
        self.write_comment(self.line_comment.as_bytes());
        self.line_comment = "";
    }

    /// `yaml_emitter_process_foot_comment`.
    fn process_foot_comment(&mut self) {
        if self.foot_comment.is_empty() {
            return;
        }
        self.write_indent();
        self.write_comment(self.foot_comment.as_bytes());
        self.foot_comment = "";
        self.foot_indent = self.indent.max(0);
    }

    /// `yaml_emitter_analyze_event`. Anchors are not validated (Go fails on
    /// names with characters other than `[0-9A-Za-z_-]`).
    fn analyze_event(&mut self, ev: &Event<'a>) {
        self.anchor = None;
        self.tag_handle = "";
        self.tag_suffix = "";
        self.scalar.value = "";

        if !ev.head_comment.is_empty() {
            self.head_comment = ev.head_comment;
        }
        if !ev.line_comment.is_empty() {
            self.line_comment = ev.line_comment;
        }
        if !ev.foot_comment.is_empty() {
            self.foot_comment = ev.foot_comment;
        }
        if !ev.tail_comment.is_empty() {
            self.tail_comment = ev.tail_comment;
        }

        match ev.typ {
            EventType::Alias => self.anchor = Some((ev.anchor, true)),
            EventType::Scalar | EventType::SequenceStart | EventType::MappingStart => {
                if !ev.anchor.is_empty() {
                    self.anchor = Some((ev.anchor, false));
                }
                if !ev.tag.is_empty() && !ev.implicit {
                    self.analyze_tag(ev.tag);
                }
                if ev.typ == EventType::Scalar {
                    self.analyze_scalar(ev.value);
                }
            }
            _ => {}
        }
    }

    /// `longTag` then `yaml_emitter_analyze_tag` against the default tag
    /// directives (`!` → `!`, `!!` → `tag:yaml.org,2002:`, tried in that
    /// order): the handle and suffix to write.
    fn analyze_tag(&mut self, tag: &'a str) {
        let (handle, suffix) = if let Some(rest) = tag.strip_prefix("!!") {
            ("!!", rest)
        } else if let Some(rest) = tag.strip_prefix('!') {
            ("!", rest)
        } else if let Some(rest) = tag.strip_prefix(LONG_TAG_PREFIX) {
            ("!!", rest)
        } else {
            ("", tag)
        };
        self.tag_handle = handle;
        self.tag_suffix = suffix;
    }

    /// `yaml_emitter_analyze_scalar`: which styles can carry the value.
    fn analyze_scalar(&mut self, text: &'a str) {
        let value = text.as_bytes();
        self.scalar.value = text;

        if value.is_empty() {
            self.scalar.multiline = false;
            self.scalar.flow_plain_allowed = false;
            self.scalar.block_plain_allowed = true;
            self.scalar.single_quoted_allowed = true;
            self.scalar.block_allowed = false;
            return;
        }

        let mut block_indicators = false;
        let mut flow_indicators = false;
        let mut line_breaks = false;
        let mut special_characters = false;
        let mut tab_characters = false;

        let mut leading_space = false;
        let mut leading_break = false;
        let mut trailing_space = false;
        let mut trailing_break = false;
        let mut break_space = false;
        let mut space_break = false;

        let mut previous_space = false;
        let mut previous_break = false;

        if value.starts_with(b"---") || value.starts_with(b"...") {
            block_indicators = true;
            flow_indicators = true;
        }

        let mut preceded_by_whitespace = true;
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            if i > 0 && PLAIN_TAIL[usize::from(c)] {
                // Fast path for what the general case below would only
                // note as "not a space, not a break".
                while i < value.len() && PLAIN_TAIL[usize::from(value[i])] {
                    i += 1;
                }
                previous_space = false;
                previous_break = false;
                preceded_by_whitespace = false;
                continue;
            }
            let w = width(c).max(1);
            let followed_by_whitespace = i + w >= value.len() || is_blank(value, i + w);

            if i == 0 {
                match c {
                    b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                    | b'\'' | b'"' | b'%' | b'@' | b'`' => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    b'?' | b':' => {
                        flow_indicators = true;
                        if followed_by_whitespace {
                            block_indicators = true;
                        }
                    }
                    b'-' if followed_by_whitespace => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    _ => {}
                }
            } else {
                match c {
                    b',' | b'?' | b'[' | b']' | b'{' | b'}' => flow_indicators = true,
                    b':' => {
                        flow_indicators = true;
                        if followed_by_whitespace {
                            block_indicators = true;
                        }
                    }
                    b'#' if preceded_by_whitespace => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    _ => {}
                }
            }

            if c == b'\t' {
                tab_characters = true;
            } else if !is_printable(value, i) {
                // (unicode output is on: non-ASCII alone is not special)
                special_characters = true;
            }
            if c == b' ' {
                if i == 0 {
                    leading_space = true;
                }
                if i + w == value.len() {
                    trailing_space = true;
                }
                if previous_break {
                    break_space = true;
                }
                previous_space = true;
                previous_break = false;
            } else if is_break(value, i) {
                line_breaks = true;
                if i == 0 {
                    leading_break = true;
                }
                if i + w == value.len() {
                    trailing_break = true;
                }
                if previous_space {
                    space_break = true;
                }
                previous_space = false;
                previous_break = true;
            } else {
                previous_space = false;
                previous_break = false;
            }

            preceded_by_whitespace = is_blankz(value, i);
            i += w;
        }

        let s = &mut self.scalar;
        s.multiline = line_breaks;
        s.flow_plain_allowed = true;
        s.block_plain_allowed = true;
        s.single_quoted_allowed = true;
        s.block_allowed = true;

        if leading_space || leading_break || trailing_space || trailing_break {
            s.flow_plain_allowed = false;
            s.block_plain_allowed = false;
        }
        if trailing_space {
            s.block_allowed = false;
        }
        if break_space {
            s.flow_plain_allowed = false;
            s.block_plain_allowed = false;
            s.single_quoted_allowed = false;
        }
        if space_break || tab_characters || special_characters {
            s.flow_plain_allowed = false;
            s.block_plain_allowed = false;
            s.single_quoted_allowed = false;
        }
        if space_break || special_characters {
            s.block_allowed = false;
        }
        if line_breaks {
            s.flow_plain_allowed = false;
            s.block_plain_allowed = false;
        }
        if flow_indicators {
            s.flow_plain_allowed = false;
        }
        if block_indicators {
            s.block_plain_allowed = false;
        }
    }

    // -- writers

    /// `yaml_emitter_write_indent`.
    fn write_indent(&mut self) {
        let indent = self.indent.max(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        if self.foot_indent == indent {
            self.put_break();
        }
        if self.column < indent {
            // put(' ') until the column is reached.
            let n = (indent - self.column) as usize;
            self.out.resize(self.out.len() + n, b' ');
            self.column = indent;
        }
        self.whitespace = true;
        self.foot_indent = -1;
    }

    /// `yaml_emitter_write_indicator`.
    fn write_indicator(
        &mut self,
        indicator: &[u8],
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(b' ');
        }
        self.write_all(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    /// `yaml_emitter_write_tag_content`: URI characters as they are, the
    /// rest percent-encoded byte by byte.
    fn write_tag_content(&mut self, value: &[u8], need_whitespace: bool) {
        if need_whitespace && !self.whitespace {
            self.put(b' ');
        }
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            let must_write = matches!(
                c,
                b';' | b'/'
                    | b'?'
                    | b':'
                    | b'@'
                    | b'&'
                    | b'='
                    | b'+'
                    | b'$'
                    | b','
                    | b'_'
                    | b'.'
                    | b'~'
                    | b'*'
                    | b'\''
                    | b'('
                    | b')'
                    | b'['
                    | b']'
            ) || is_alpha(c);
            if must_write {
                self.write(value, &mut i);
            } else {
                let w = width(c).max(1);
                for _ in 0..w {
                    let Some(&octet) = value.get(i) else { break };
                    i += 1;
                    self.put(b'%');
                    self.put(hex_digit(octet >> 4));
                    self.put(hex_digit(octet & 0x0f));
                }
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_plain_scalar`.
    fn write_plain_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        if !value.is_empty() && !self.whitespace {
            self.put(b' ');
        }
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if value[i] == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                // A run of ordinary characters at once.
                let start = i;
                let mut chars = 0;
                while i < value.len() && value[i] != b' ' && !is_break(value, i) {
                    i += width(value[i]).max(1);
                    chars += 1;
                }
                let end = i.min(value.len());
                self.out.extend_from_slice(&value[start..end]);
                self.column += chars;
                i = end;
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if !value.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
    }

    /// `yaml_emitter_write_single_quoted_scalar`.
    fn write_single_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        self.write_indicator(b"'", true, false, false);
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if value[i] == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i < value.len() - 1
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if value[i] == b'\'' {
                    self.put(b'\'');
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator(b"'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_double_quoted_scalar`.
    fn write_double_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        let mut spaces = false;
        self.write_indicator(b"\"", true, false, false);
        // [Go] is_bom looks at the start of the value, not at i: a value
        // starting with a BOM has every character escaped.
        let bom = value.starts_with(&[0xEF, 0xBB, 0xBF]);
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            if bom || !is_printable(value, i) || is_break(value, i) || c == b'"' || c == b'\\' {
                let (mut w, mut v): (usize, u32) = if c & 0x80 == 0 {
                    (1, u32::from(c & 0x7F))
                } else if c & 0xE0 == 0xC0 {
                    (2, u32::from(c & 0x1F))
                } else if c & 0xF0 == 0xE0 {
                    (3, u32::from(c & 0x0F))
                } else {
                    (4, u32::from(c & 0x07))
                };
                for k in 1..w {
                    v = (v << 6) + u32::from(at(value, i + k) & 0x3F);
                }
                i += w;
                self.put(b'\\');
                let esc = match v {
                    0x00 => Some(b'0'),
                    0x07 => Some(b'a'),
                    0x08 => Some(b'b'),
                    0x09 => Some(b't'),
                    0x0A => Some(b'n'),
                    0x0B => Some(b'v'),
                    0x0C => Some(b'f'),
                    0x0D => Some(b'r'),
                    0x1B => Some(b'e'),
                    0x22 => Some(b'"'),
                    0x5C => Some(b'\\'),
                    0x85 => Some(b'N'),
                    0xA0 => Some(b'_'),
                    0x2028 => Some(b'L'),
                    0x2029 => Some(b'P'),
                    _ => None,
                };
                match esc {
                    Some(e) => self.put(e),
                    None => {
                        if v <= 0xFF {
                            self.put(b'x');
                            w = 2;
                        } else if v <= 0xFFFF {
                            self.put(b'u');
                            w = 4;
                        } else {
                            self.put(b'U');
                            w = 8;
                        }
                        for k in (0..w).rev() {
                            self.put(hex_digit(((v >> (k * 4)) & 0x0F) as u8));
                        }
                    }
                }
                spaces = false;
            } else if c == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i < value.len() - 1
                {
                    self.write_indent();
                    if is_space(value, i + 1) {
                        self.put(b'\\');
                    }
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else {
                self.write(value, &mut i);
                spaces = false;
            }
        }
        self.write_indicator(b"\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_block_scalar_hints`: an indentation indicator
    /// when the value starts with a space or break, and the chomping
    /// indicator (`-` no final break, none for one, `+` for more).
    fn write_block_scalar_hints(&mut self, value: &[u8]) {
        if is_space(value, 0) || is_break(value, 0) {
            let hint = [b'0' + BEST_INDENT as u8];
            self.write_indicator(&hint, false, false, false);
        }
        let mut chomp = None;
        if value.is_empty() {
            chomp = Some(b'-');
        } else {
            let mut i = value.len() - 1;
            while i > 0 && value[i] & 0xC0 == 0x80 {
                i -= 1;
            }
            if !is_break(value, i) {
                chomp = Some(b'-');
            } else if i == 0 {
                chomp = Some(b'+');
            } else {
                i -= 1;
                while i > 0 && value[i] & 0xC0 == 0x80 {
                    i -= 1;
                }
                if is_break(value, i) {
                    chomp = Some(b'+');
                }
            }
        }
        if let Some(c) = chomp {
            self.write_indicator(&[c], false, false, false);
        }
    }

    /// `yaml_emitter_write_literal_scalar`.
    fn write_literal_scalar(&mut self, value: &[u8]) {
        self.write_indicator(b"|", true, false, false);
        self.write_block_scalar_hints(value);
        self.process_line_comment_linebreak(true);
        self.whitespace = true;
        let mut breaks = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                // The rest of the line at once.
                let start = i;
                let mut chars = 0;
                while i < value.len() && !is_break(value, i) {
                    i += width(value[i]).max(1);
                    chars += 1;
                }
                let end = i.min(value.len());
                self.out.extend_from_slice(&value[start..end]);
                self.column += chars;
                i = end;
                self.indention = false;
                breaks = false;
            }
        }
    }

    /// `yaml_emitter_write_folded_scalar`.
    fn write_folded_scalar(&mut self, value: &[u8]) {
        self.write_indicator(b">", true, false, false);
        self.write_block_scalar_hints(value);
        self.process_line_comment_linebreak(true);
        self.whitespace = true;

        let mut breaks = true;
        let mut leading_spaces = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                if !breaks && !leading_spaces && value[i] == b'\n' {
                    // [Go] k starts at 0, not i: it skips the breaks that
                    // start the value, not those that follow this one.
                    let mut k = 0;
                    while is_break(value, k) {
                        k += width(value[k]).max(1);
                    }
                    if !is_blankz(value, k) {
                        self.put_break();
                    }
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    leading_spaces = is_blank(value, i);
                }
                if !breaks
                    && is_space(value, i)
                    && !is_space(value, i + 1)
                    && self.column > self.best_width
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                self.indention = false;
                breaks = false;
            }
        }
    }

    /// `yaml_emitter_write_comment`: each line gets `# ` unless it starts
    /// with `#`; lines after the first are indented.
    fn write_comment(&mut self, comment: &[u8]) {
        let mut breaks = false;
        let mut pound = false;
        let mut i = 0;
        while i < comment.len() {
            if is_break(comment, i) {
                self.write_break(comment, &mut i);
                breaks = true;
                pound = false;
            } else {
                if breaks {
                    self.write_indent();
                }
                if !pound {
                    if comment[i] != b'#' {
                        self.put(b'#');
                        self.put(b' ');
                    }
                    pound = true;
                }
                self.write(comment, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
        if !breaks {
            self.put_break();
        }
        self.whitespace = true;
    }
}

// ---------------------------------------------------------------------------
// yamlprivateh.go's character classes. Out-of-range reads give 0 (Go would
// index past the end only where a valid UTF-8 value cannot reach).

/// Bytes that, past the first position, affect none of
/// `yaml_emitter_analyze_scalar`'s findings beyond "neither space nor
/// break": printable ASCII other than space and `,?[]{}:#`.
const PLAIN_TAIL: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x21;
    while c <= 0x7E {
        t[c] = !matches!(
            c as u8,
            b',' | b'?' | b'[' | b']' | b'{' | b'}' | b':' | b'#'
        );
        c += 1;
    }
    t
};

fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

fn width(c: u8) -> usize {
    if c & 0x80 == 0x00 {
        1
    } else if c & 0xE0 == 0xC0 {
        2
    } else if c & 0xF0 == 0xE0 {
        3
    } else if c & 0xF8 == 0xF0 {
        4
    } else {
        0
    }
}

fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn is_space(b: &[u8], i: usize) -> bool {
    at(b, i) == b' '
}

fn is_blank(b: &[u8], i: usize) -> bool {
    matches!(at(b, i), b' ' | b'\t')
}

fn is_break(b: &[u8], i: usize) -> bool {
    match at(b, i) {
        b'\r' | b'\n' => true,
        0xC2 => at(b, i + 1) == 0x85,
        0xE2 => at(b, i + 1) == 0x80 && matches!(at(b, i + 2), 0xA8 | 0xA9),
        _ => false,
    }
}

fn is_blankz(b: &[u8], i: usize) -> bool {
    is_blank(b, i) || is_break(b, i) || at(b, i) == 0
}

/// `is_printable`: what YAML allows unescaped. Note that 4-byte characters
/// (emoji and the like) are not, so they get `\U` escapes.
fn is_printable(b: &[u8], i: usize) -> bool {
    let c = at(b, i);
    let c1 = at(b, i + 1);
    let c2 = at(b, i + 2);
    c == 0x0A
        || (0x20..=0x7E).contains(&c)
        || (c == 0xC2 && c1 >= 0xA0)
        || (c > 0xC2 && c < 0xED)
        || (c == 0xED && c1 < 0xA0)
        || c == 0xEE
        || (c == 0xEF && !(c1 == 0xBB && c2 == 0xBF) && !(c1 == 0xBF && (c2 == 0xBE || c2 == 0xBF)))
}

fn hex_digit(d: u8) -> u8 {
    if d < 10 {
        b'0' + d
    } else {
        b'A' + d - 10
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yaml/emit")
    }

    /// The first differing line of `want` and `got`, with two lines of
    /// context, each line shown escaped so whitespace differences show.
    fn diff(want: &str, got: &str) -> String {
        let w: Vec<&str> = want.split_inclusive('\n').collect();
        let g: Vec<&str> = got.split_inclusive('\n').collect();
        let first = w
            .iter()
            .zip(&g)
            .position(|(a, b)| a != b)
            .unwrap_or(w.len().min(g.len()));
        let from = first.saturating_sub(2);
        let mut out = format!("  first difference at line {}\n", first + 1);
        for (i, line) in w.iter().enumerate().skip(from).take(first - from) {
            out.push_str(&format!("  {:>4}   {line:?}\n", i + 1));
        }
        for (i, line) in w.iter().enumerate().skip(first).take(3) {
            out.push_str(&format!("  {:>4} - {line:?}\n", i + 1));
        }
        for (i, line) in g.iter().enumerate().skip(first).take(3) {
            out.push_str(&format!("  {:>4} + {line:?}\n", i + 1));
        }
        out
    }

    /// Every `NAME.json` under tests/fixtures/yaml/emit encodes to exactly
    /// what yaml.v3 wrote for it (`NAME.out.yaml`, and `NAME.compact.yaml`
    /// with CompactSeqIndent); see regen.sh there.
    #[test]
    fn golden_cases_match_yaml_v3() {
        let dir = fixtures();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("the emit fixtures directory")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
            .collect();
        names.sort();
        assert!(
            names.len() >= 80,
            "only {} golden cases in {}",
            names.len(),
            dir.display()
        );

        let mut failures = Vec::new();
        for name in &names {
            let json =
                std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("a case's input");
            // A stream with no documents (comments only) dumps as `null`.
            let docs: Vec<Node> = serde_json::from_str::<Option<Vec<Node>>>(&json)
                .unwrap_or_else(|e| panic!("{name}.json: {e}"))
                .unwrap_or_default();
            for (compact, ext) in [(false, "out.yaml"), (true, "compact.yaml")] {
                let file = format!("{name}.{ext}");
                let want = std::fs::read_to_string(dir.join(&file))
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
                let got = encode(&docs, compact);
                if got != want {
                    failures.push(format!("{file}:\n{}", diff(&want, &got)));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} golden files differ:\n{}",
            failures.len(),
            names.len() * 2,
            failures.join("\n")
        );
    }

    #[test]
    fn no_documents_is_empty_output() {
        assert_eq!(encode(&[], false), "");
    }

    #[test]
    fn a_bare_node_is_its_own_document() {
        let map = Node::mapping(vec![Node::string("a"), Node::string("1")]);
        assert_eq!(encode_node(&map, false), "a: \"1\"\n");
        let docs = [map.clone(), Node::string("x")];
        assert_eq!(encode(&docs, true), "a: \"1\"\n---\nx\n");
    }

    /// Trees the Go encoder refuses: written as documented on the module.
    #[test]
    fn invalid_trees_are_written_sanely() {
        let empty_doc = Node {
            kind: Kind::Document,
            ..Node::default()
        };
        assert_eq!(encode_node(&empty_doc, false), "null\n");

        let nested = Node::sequence(vec![Node {
            kind: Kind::Document,
            content: vec![Node::string("inner")],
            ..Node::default()
        }]);
        assert_eq!(encode_node(&nested, false), "- inner\n");

        let alias = |value: &str, alias: &str| Node {
            kind: Kind::Alias,
            value: value.into(),
            alias: alias.into(),
            ..Node::default()
        };
        let mut anchored = Node::string("v");
        anchored.anchor = "a".into();
        let seq = Node::sequence(vec![anchored, alias("", "a"), alias("", "")]);
        assert_eq!(encode_node(&seq, false), "- &a v\n- *a\n- null\n");
    }

    #[test]
    fn resolve_feeds_quoting() {
        // Node::scalar tags by resolve_plain, so the value stays plain;
        // Node::string quotes what would read back as another type.
        let m = Node::mapping(vec![
            Node::string("n"),
            Node::scalar("10"),
            Node::string("s"),
            Node::string("10"),
            Node::string("t"),
            Node::string("2001-12-14"),
        ]);
        assert_eq!(
            encode_node(&m, false),
            "n: 10\ns: \"10\"\nt: \"2001-12-14\"\n"
        );
    }
}
