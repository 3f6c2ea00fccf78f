//! decode.go's node building ([`Composer`]): node trees from the events,
//! with yaml.v3's comment moves and its own errors.

use std::collections::HashSet;

use compact_str::CompactString;
use libyaml_safer::{EventData, MappingStyle, ScalarStyle, SequenceStyle};

use crate::node::{Kind, Node, Style, Tag};
use crate::resolve::resolve_plain;

use super::error::ParseError;
use super::goparse::{Ev, GoParser};
use super::scanner_error::scanner_error_first;
use super::tokens::Mk;

fn kind_of(data: &EventData) -> Option<Ev> {
    Some(match data {
        EventData::StreamStart { .. } => Ev::StreamStart,
        EventData::StreamEnd => Ev::StreamEnd,
        EventData::DocumentStart { .. } => Ev::DocStart,
        EventData::DocumentEnd { .. } => Ev::DocEnd,
        EventData::Alias { .. } => Ev::Alias,
        EventData::Scalar { .. } => Ev::Scalar,
        EventData::SequenceStart { .. } => Ev::SeqStart,
        EventData::SequenceEnd => Ev::SeqEnd,
        EventData::MappingStart { .. } => Ev::MapStart,
        EventData::MappingEnd => Ev::MapEnd,
    })
}

/// yaml.v3's `shortTag`.
fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    }
}

/// One event with its yaml.v3 comments and mark.
struct Item {
    data: EventData,
    /// A scalar's value.
    value: CompactString,
    start: Mk,
    head: String,
    line: String,
    foot: String,
}

/// decode.go's `parser`: nodes from events (`node`, `document`, `mapping`,
/// `sequence`, `scalar`, `alias`), with their comment moves.
pub(super) struct Composer<'a> {
    pub(super) go: GoParser<'a>,
    pub(super) go_ok: bool,
    peeked: Option<Item>,
    /// Events taken so far.
    taken: usize,
    anchors: HashSet<String>,
    /// Children of the collections being built.
    stack: Vec<Node>,
    /// The collections being built, outermost first.
    open: Vec<Open>,
    /// yaml.v3's scanner fails first, on a tab that cannot start a token.
    pub(super) tab_at: Option<usize>,
    text: &'a str,
    src: &'a [u8],
    eof: Option<Mk>,
}

/// Composition stops: the events ran out (at libyaml's error) or yaml.v3
/// fails on its own (with the index of the event it fails at).
enum Stop {
    End,
    Fail(ParseError, usize),
}

impl<'a> Composer<'a> {
    pub(super) fn new(
        go: GoParser<'a>,
        text: &'a str,
        src: &'a [u8],
        eof: Option<Mk>,
    ) -> Composer<'a> {
        Composer {
            go,
            go_ok: true,
            peeked: None,
            taken: 0,
            anchors: HashSet::new(),
            stack: Vec::with_capacity(64),
            open: Vec::with_capacity(16),
            tab_at: None,
            text,
            src,
            eof,
        }
    }

    pub(super) fn run(&mut self) -> Result<Vec<Node>, ParseError> {
        let mut docs = Vec::new();
        let stop = 'compose: {
            // `parser.init`: STREAM-START.
            if self.next().is_none() {
                break 'compose None;
            }
            loop {
                match self.peek_kind() {
                    None => break 'compose None,
                    Some(Ev::StreamEnd) => return Ok(docs),
                    Some(_) => match self.document() {
                        Ok(n) => docs.push(n),
                        Err(Stop::Fail(e, at)) => break 'compose Some((e, at)),
                        Err(Stop::End) => break 'compose None,
                    },
                }
            }
        };
        // yaml.v3's scanner runs up to three tokens ahead of its parser, so
        // a scanner error there comes before libyaml's parser error, and
        // before an unknown anchor in the events in between.
        let source = &self.go.sim.source;
        let error = source.error.clone();
        let scanner_first = match &error {
            Some(_) if !source.own_error => {
                scanner_error_first(self.text, self.src, self.eof, source.pulled)
            }
            _ => None,
        };
        let scanner_first = scanner_first.map(|(limit, serr, tab)| {
            self.tab_at = tab;
            (limit, serr)
        });
        Err(match (stop, scanner_first) {
            (Some((e, at)), Some((limit, serr))) => {
                if at >= limit {
                    serr
                } else {
                    e
                }
            }
            (Some((e, _)), None) => e,
            (None, Some((_, serr))) => serr,
            (None, None) => error.unwrap_or_else(|| {
                ParseError::plain("unknown problem parsing YAML content".into())
            }),
        })
    }

    fn fill(&mut self) {
        if self.peeked.is_some() {
            return;
        }
        let (ev, value) = loop {
            if let Some(ev) = self.go.sim.source.events.pop_front() {
                break ev;
            }
            if !self.go.sim.source.pull() {
                return;
            }
        };
        self.taken += 1;
        let kind = kind_of(&ev.data);
        let mut item = Item {
            start: Mk::of(ev.start_mark),
            data: ev.data,
            value,
            head: String::new(),
            line: String::new(),
            foot: String::new(),
        };
        if self.go_ok {
            match self.go.next_event() {
                Some(g) if Some(g.kind) == kind => {
                    item.start = g.start;
                    item.head = g.head;
                    item.line = g.line;
                    item.foot = g.foot;
                }
                _ => {
                    // The replay lost step with libyaml (a bug, or a case
                    // where libyaml-safer and yaml.v3 disagree): the rest
                    // goes without comments.
                    self.go_ok = false;
                }
            }
        }
        self.peeked = Some(item);
    }

    fn peek_kind(&mut self) -> Option<Ev> {
        self.fill();
        self.peeked.as_ref().and_then(|i| kind_of(&i.data))
    }

    fn next(&mut self) -> Option<Item> {
        self.fill();
        self.peeked.take()
    }

    /// `parser.parse`: the next node, pushed on the stack. decode.go
    /// recurses into collections; here the open collections are a list
    /// (`open`), so nesting costs no call stack.
    fn parse(&mut self) -> Result<(), Stop> {
        let depth = self.open.len();
        loop {
            match self.peek_kind() {
                Some(Ev::Scalar) => self.scalar()?,
                Some(Ev::Alias) => self.alias()?,
                Some(Ev::MapStart | Ev::SeqStart) => {
                    self.collection_start()?;
                    continue;
                }
                Some(Ev::MapEnd | Ev::SeqEnd) if self.open.len() > depth => {
                    self.collection_end()?
                }
                _ => return Err(Stop::End),
            }
            // A node is complete.
            if self.open.len() == depth {
                return Ok(());
            }
            self.child_done();
        }
    }

    /// decode.go `parser.mapping`'s moves as its entries complete: a key's
    /// foot comment (a dedented comment after the prior value) goes to the
    /// prior key; a value's foot comment to its key, if that has none.
    fn child_done(&mut self) {
        let Some(Open { node, base }) = self.open.last() else {
            return;
        };
        if node.kind != Kind::Mapping {
            return;
        }
        let block = !node.style.has(Style::FLOW);
        let last = self.stack.len() - 1;
        let count = self.stack.len() - base;
        if count % 2 == 1 {
            if block && !self.stack[last].foot_comment.is_empty() && count > 2 {
                let foot = std::mem::take(&mut self.stack[last].foot_comment);
                self.stack[last - 2].foot_comment = foot;
            }
        } else if self.stack[last - 1].foot_comment.is_empty()
            && !self.stack[last].foot_comment.is_empty()
        {
            let foot = std::mem::take(&mut self.stack[last].foot_comment);
            self.stack[last - 1].foot_comment = foot;
        }
    }

    /// `parser.node`: the tag (explicit tags short and TAGGED), position
    /// and the event's comments.
    fn node(
        kind: Kind,
        default_tag: &'static str,
        tag: Option<String>,
        value: CompactString,
        item: &mut Item,
    ) -> Node {
        let mut style = Style::default();
        let tag = match tag {
            Some(t) if !t.is_empty() && t != "!" => {
                style = Style::TAGGED;
                Tag::from(short_tag(&t))
            }
            _ if !default_tag.is_empty() => Tag::from(default_tag),
            _ if kind == Kind::Scalar => Tag::from(resolve_plain(&value)),
            _ => Tag::default(),
        };
        Node {
            kind,
            style,
            tag,
            value,
            line: (item.start.line + 1) as u32,
            column: (item.start.column + 1) as u32,
            head_comment: std::mem::take(&mut item.head).into(),
            line_comment: std::mem::take(&mut item.line).into(),
            foot_comment: std::mem::take(&mut item.foot).into(),
            ..Node::default()
        }
    }

    fn anchor(&mut self, n: &mut Node, anchor: Option<String>) {
        if let Some(a) = anchor {
            self.anchors.insert(a.clone());
            n.anchor = a.into();
        }
    }

    /// `parser.document`.
    fn document(&mut self) -> Result<Node, Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let mut n = Composer::node(
            Kind::Document,
            "",
            None,
            CompactString::default(),
            &mut item,
        );
        let base = self.stack.len();
        self.parse()?;
        n.content = self.stack.split_off(base);
        if self.peek_kind() != Some(Ev::DocEnd) {
            return Err(Stop::End);
        }
        let end = self.next().ok_or(Stop::End)?;
        n.foot_comment = end.foot.into();
        Ok(n)
    }

    fn alias(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let name = match std::mem::replace(&mut item.data, EventData::StreamEnd) {
            EventData::Alias { anchor } => anchor,
            _ => return Err(Stop::End),
        };
        if !self.anchors.contains(&name) {
            return Err(Stop::Fail(
                ParseError::plain(format!("unknown anchor '{name}' referenced")),
                self.taken - 1,
            ));
        }
        let value = CompactString::from(name.as_str());
        let mut n = Composer::node(Kind::Alias, "", None, value, &mut item);
        n.alias = name.into();
        self.stack.push(n);
        Ok(())
    }

    fn scalar(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let EventData::Scalar {
            anchor, tag, style, ..
        } = std::mem::replace(&mut item.data, EventData::StreamEnd)
        else {
            return Err(Stop::End);
        };
        let value = std::mem::take(&mut item.value);
        let node_style = match style {
            ScalarStyle::DoubleQuoted => Style::DOUBLE_QUOTED,
            ScalarStyle::SingleQuoted => Style::SINGLE_QUOTED,
            ScalarStyle::Literal => Style::LITERAL,
            ScalarStyle::Folded => Style::FOLDED,
            _ => Style::default(),
        };
        let default_tag = if node_style.is_empty() {
            if value == "<<" {
                "!!merge"
            } else {
                ""
            }
        } else {
            "!!str"
        };
        let mut n = Composer::node(Kind::Scalar, default_tag, tag, value, &mut item);
        n.style = n.style | node_style;
        self.anchor(&mut n, anchor);
        self.stack.push(n);
        Ok(())
    }

    /// A sequence or mapping starts: its node waits in `open` while its
    /// entries gather on the shared stack (one exact allocation for the
    /// content at the end).
    fn collection_start(&mut self) -> Result<(), Stop> {
        let mut item = self.next().ok_or(Stop::End)?;
        let (kind, default_tag, anchor, tag, flow) =
            match std::mem::replace(&mut item.data, EventData::StreamEnd) {
                EventData::SequenceStart {
                    anchor, tag, style, ..
                } => (
                    Kind::Sequence,
                    "!!seq",
                    anchor,
                    tag,
                    style == SequenceStyle::Flow,
                ),
                EventData::MappingStart {
                    anchor, tag, style, ..
                } => (
                    Kind::Mapping,
                    "!!map",
                    anchor,
                    tag,
                    style == MappingStyle::Flow,
                ),
                _ => return Err(Stop::End),
            };
        let mut n = Composer::node(kind, default_tag, tag, CompactString::default(), &mut item);
        if flow {
            n.style = n.style | Style::FLOW;
        }
        self.anchor(&mut n, anchor);
        self.open.push(Open {
            node: n,
            base: self.stack.len(),
        });
        Ok(())
    }

    fn collection_end(&mut self) -> Result<(), Stop> {
        let Open { node: mut n, base } = self.open.pop().ok_or(Stop::End)?;
        n.content = self.stack.split_off(base);
        let end = self.next().ok_or(Stop::End)?;
        n.line_comment = end.line.into();
        n.foot_comment = end.foot.into();
        if n.kind == Kind::Mapping
            && !n.style.has(Style::FLOW)
            && !n.foot_comment.is_empty()
            && n.content.len() > 1
        {
            // A block mapping's foot comment goes to its last key.
            let i = n.content.len() - 2;
            n.content[i].foot_comment = std::mem::take(&mut n.foot_comment);
        }
        self.stack.push(n);
        Ok(())
    }
}

/// A collection being composed: its node, and where its entries start on
/// the stack.
struct Open {
    node: Node,
    base: usize,
}
