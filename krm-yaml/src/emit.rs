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

use super::node::Node;
use super::resolve::LONG_TAG_PREFIX;

use chars::{is_blank, is_blankz, is_break, is_printable, width, PLAIN_TAIL};

mod chars;
mod marshal;
mod writers;

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

/// [`encode`] with a sequence style per document (`true`: compact), as
/// kyaml's `ByteWriter` drives one encoder: `CompactSeqIndent()` or
/// `DefaultSeqIndent()` before each `Encode`. One encoder for the whole
/// stream matters beyond the `---`: a line comment the encoder holds back
/// at the end of one document (a block collection's) is written in the
/// next.
pub fn encode_documents(docs: &[(&Node, bool)]) -> String {
    if docs.is_empty() {
        return String::new();
    }
    let mut e = Emitter::new(docs[0].1);
    e.emit(&Event::new(EventType::StreamStart));
    for (doc, compact) in docs {
        e.compact_sequence_indent = *compact;
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
}

#[cfg(test)]
mod tests;
