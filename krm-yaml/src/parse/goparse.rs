//! yaml.v3's parser state machine (parserc.go) over the replayed scanner
//! ([`GoParser`]), for which event takes which comments.

use super::scan::{Comment, Sim};
use super::tokens::{Mk, VTok, T};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    StreamStart,
    ImplicitDocStart,
    DocStart,
    DocContent,
    DocEnd,
    BlockNode,
    BlockSeqFirst,
    BlockSeqEntry,
    IndentlessEntry,
    BlockMapFirstKey,
    BlockMapKey,
    BlockMapValue,
    FlowSeqFirst,
    FlowSeqEntry,
    FlowPairKey,
    FlowPairValue,
    FlowPairEnd,
    FlowMapFirstKey,
    FlowMapKey,
    FlowMapValue,
    FlowMapEmptyValue,
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ev {
    StreamStart,
    StreamEnd,
    DocStart,
    DocEnd,
    Alias,
    Scalar,
    SeqStart,
    SeqEnd,
    MapStart,
    MapEnd,
}

/// One of yaml.v3's events: its kind, start mark and comments.
#[derive(Debug)]
pub(super) struct GoEv {
    pub(super) kind: Ev,
    pub(super) start: Mk,
    pub(super) head: String,
    pub(super) line: String,
    pub(super) foot: String,
}

impl GoEv {
    fn new(kind: Ev, start: Mk) -> GoEv {
        GoEv {
            kind,
            start,
            head: String::new(),
            line: String::new(),
            foot: String::new(),
        }
    }
}

/// yaml.v3's parser state machine over the replayed scanner. It makes the
/// same events as libyaml's parser; what it adds is when each token is
/// peeked (which is when comments are taken from the scanner's queue) and
/// which event takes them.
pub(super) struct GoParser<'a> {
    pub(super) sim: Sim<'a>,
    state: St,
    states: Vec<St>,
    token_available: bool,
    /// The queue head's token.
    head: usize,
    head_comment: String,
    line_comment: String,
    foot_comment: String,
    stem_comment: String,
}

impl<'a> GoParser<'a> {
    pub(super) fn new(sim: Sim<'a>) -> GoParser<'a> {
        GoParser {
            sim,
            state: St::StreamStart,
            states: Vec::new(),
            token_available: false,
            head: 0,
            head_comment: String::new(),
            line_comment: String::new(),
            foot_comment: String::new(),
            stem_comment: String::new(),
        }
    }

    /// `peek_token`: the head token's index and type.
    fn peek(&mut self) -> Option<(usize, T)> {
        if !self.token_available {
            self.sim.fetch_more_tokens();
            if self.sim.hit_end {
                return None;
            }
            self.token_available = true;
        }
        loop {
            // (Tokens reach the window only once final: no KEY here is
            // still waiting for its `:`.)
            let tok = self.sim.tok(self.head)?;
            if tok.dead {
                self.head += 1;
            } else if !tok.produced {
                // A simple key's KEY arrives with its VALUE.
                if !self.sim.fetch_next_token() {
                    return None;
                }
            } else {
                self.unfold_comments(&tok);
                return Some((self.head, tok.t));
            }
        }
    }

    /// `yaml_parser_unfold_comments`: comments tied to positions up to the
    /// token's go to the parser's pending head, line and foot comments.
    fn unfold_comments(&mut self, tok: &VTok) {
        let sim = &mut self.sim;
        while let Some(c) = sim.comments.get_mut(sim.comments_head) {
            if tok.start.index < c.token_mark.index {
                break;
            }
            if !c.head.is_empty() {
                if tok.t == T::Be {
                    // No heads on ends: kept for the token that follows.
                    break;
                }
                join(&mut self.head_comment, &c.head);
            }
            if !c.foot.is_empty() {
                join(&mut self.foot_comment, &c.foot);
            }
            if !c.line.is_empty() {
                join(&mut self.line_comment, &c.line);
            }
            *c = Comment::default();
            sim.comments_head += 1;
        }
    }

    /// `skip_token`.
    fn skip(&mut self) {
        self.token_available = false;
        self.sim.consumed += 1;
        self.head += 1;
        // Keep memory flat: tokens well behind the parser and comments
        // already taken are not looked at again (one taken comment stays:
        // it stops `unroll_indent`'s backward search, as in yaml.v3).
        let recon = &mut self.sim.source.window;
        if self.head > recon.base + 1024 {
            recon.drop_before(self.head - 64);
        }
        let sim = &mut self.sim;
        if sim.comments_head > 256 {
            sim.comments.drain(..sim.comments_head - 1);
            sim.comments_head = 1;
        }
    }

    fn tok(&self, i: usize) -> VTok {
        self.sim.source.window.get(i).copied().unwrap_or(VTok::new(
            T::StreamEnd,
            Mk::default(),
            Mk::default(),
        ))
    }

    fn pop_state(&mut self) -> St {
        self.states.pop().unwrap_or(St::End)
    }

    /// `yaml_parser_set_event_comments`.
    fn set_event_comments(&mut self, ev: &mut GoEv) {
        ev.head = std::mem::take(&mut self.head_comment);
        ev.line = std::mem::take(&mut self.line_comment);
        ev.foot = std::mem::take(&mut self.foot_comment);
        self.stem_comment.clear();
    }

    pub(super) fn next_event(&mut self) -> Option<GoEv> {
        match self.state {
            St::StreamStart => {
                let (h, _) = self.peek()?;
                self.state = St::ImplicitDocStart;
                let ev = GoEv::new(Ev::StreamStart, self.tok(h).start);
                self.skip();
                Some(ev)
            }
            St::ImplicitDocStart => self.document_start(true),
            St::DocStart => self.document_start(false),
            St::DocContent => {
                let (h, t) = self.peek()?;
                if matches!(t, T::Directive | T::DocStart | T::DocEnd | T::StreamEnd) {
                    self.state = self.pop_state();
                    Some(GoEv::new(Ev::Scalar, self.tok(h).start))
                } else {
                    self.parse_node(true, false)
                }
            }
            St::DocEnd => {
                let (h, t) = self.peek()?;
                let start = self.tok(h).start;
                if t == T::DocEnd {
                    self.skip();
                }
                self.state = St::DocStart;
                let mut ev = GoEv::new(Ev::DocEnd, start);
                self.set_event_comments(&mut ev);
                if !ev.head.is_empty() && ev.foot.is_empty() {
                    ev.foot = std::mem::take(&mut ev.head);
                }
                Some(ev)
            }
            St::BlockNode => self.parse_node(true, false),
            St::BlockSeqFirst => self.block_sequence_entry(true),
            St::BlockSeqEntry => self.block_sequence_entry(false),
            St::IndentlessEntry => self.indentless_sequence_entry(),
            St::BlockMapFirstKey => self.block_mapping_key(true),
            St::BlockMapKey => self.block_mapping_key(false),
            St::BlockMapValue => self.block_mapping_value(),
            St::FlowSeqFirst => self.flow_sequence_entry(true),
            St::FlowSeqEntry => self.flow_sequence_entry(false),
            St::FlowPairKey => {
                let (h, t) = self.peek()?;
                if !matches!(t, T::Value | T::FlowEntry | T::Fse) {
                    self.states.push(St::FlowPairValue);
                    return self.parse_node(false, false);
                }
                let mark = self.tok(h).end;
                self.skip();
                self.state = St::FlowPairValue;
                Some(GoEv::new(Ev::Scalar, mark))
            }
            St::FlowPairValue => {
                let (mut h, mut t) = self.peek()?;
                if t == T::Value {
                    self.skip();
                    (h, t) = self.peek()?;
                    if !matches!(t, T::FlowEntry | T::Fse) {
                        self.states.push(St::FlowPairEnd);
                        return self.parse_node(false, false);
                    }
                }
                self.state = St::FlowPairEnd;
                Some(GoEv::new(Ev::Scalar, self.tok(h).start))
            }
            St::FlowPairEnd => {
                let (h, _) = self.peek()?;
                self.state = St::FlowSeqEntry;
                Some(GoEv::new(Ev::MapEnd, self.tok(h).start))
            }
            St::FlowMapFirstKey => self.flow_mapping_key(true),
            St::FlowMapKey => self.flow_mapping_key(false),
            St::FlowMapValue => self.flow_mapping_value(false),
            St::FlowMapEmptyValue => self.flow_mapping_value(true),
            St::End => None,
        }
    }

    /// `yaml_parser_parse_document_start`, with yaml.v3's split of the
    /// comment before the first token: up to its last blank line it is the
    /// document's head comment.
    fn document_start(&mut self, implicit: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if !implicit {
            while t == T::DocEnd {
                self.skip();
                (h, t) = self.peek()?;
            }
        }
        if implicit && !matches!(t, T::Directive | T::DocStart | T::StreamEnd) {
            self.states.push(St::DocEnd);
            self.state = St::BlockNode;
            let mut ev = GoEv::new(Ev::DocStart, self.tok(h).start);
            let hc = self.head_comment.as_bytes();
            for i in (1..hc.len()).rev() {
                if hc[i] == b'\n' {
                    if i == hc.len() - 1 {
                        ev.head = self.head_comment[..i].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    } else if hc[i - 1] == b'\n' {
                        ev.head = self.head_comment[..i - 1].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    }
                }
            }
            Some(ev)
        } else if t != T::StreamEnd {
            let start = self.tok(h).start;
            while t == T::Directive {
                self.skip();
                (_, t) = self.peek()?;
            }
            if t != T::DocStart {
                return None;
            }
            self.states.push(St::DocEnd);
            self.state = St::DocContent;
            self.skip();
            Some(GoEv::new(Ev::DocStart, start))
        } else {
            self.state = St::End;
            let ev = GoEv::new(Ev::StreamEnd, self.tok(h).start);
            self.skip();
            Some(ev)
        }
    }

    /// `yaml_parser_parse_node`.
    fn parse_node(&mut self, block: bool, indentless: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if t == T::Alias {
            self.state = self.pop_state();
            let mut ev = GoEv::new(Ev::Alias, self.tok(h).start);
            self.set_event_comments(&mut ev);
            self.skip();
            return Some(ev);
        }
        let start = self.tok(h).start;
        let mut props = false;
        if t == T::Anchor || t == T::Tag {
            let first = t;
            props = true;
            self.skip();
            (h, t) = self.peek()?;
            if (first == T::Anchor && t == T::Tag) || (first == T::Tag && t == T::Anchor) {
                self.skip();
                (h, t) = self.peek()?;
            }
        }
        let _ = h;
        if indentless && t == T::BlockEntry {
            self.state = St::IndentlessEntry;
            return Some(GoEv::new(Ev::SeqStart, start));
        }
        match t {
            T::Scalar => {
                self.state = self.pop_state();
                let mut ev = GoEv::new(Ev::Scalar, start);
                self.set_event_comments(&mut ev);
                self.skip();
                Some(ev)
            }
            T::Fss => {
                self.state = St::FlowSeqFirst;
                let mut ev = GoEv::new(Ev::SeqStart, start);
                self.set_event_comments(&mut ev);
                Some(ev)
            }
            T::Fms => {
                self.state = St::FlowMapFirstKey;
                let mut ev = GoEv::new(Ev::MapStart, start);
                self.set_event_comments(&mut ev);
                Some(ev)
            }
            T::Bss if block => {
                self.state = St::BlockSeqFirst;
                let mut ev = GoEv::new(Ev::SeqStart, start);
                ev.head = std::mem::take(&mut self.stem_comment);
                Some(ev)
            }
            T::Bms if block => {
                self.state = St::BlockMapFirstKey;
                let mut ev = GoEv::new(Ev::MapStart, start);
                ev.head = std::mem::take(&mut self.stem_comment);
                Some(ev)
            }
            _ if props => {
                self.state = self.pop_state();
                Some(GoEv::new(Ev::Scalar, start))
            }
            _ => None,
        }
    }

    /// `yaml_parser_split_stem_comment`: a head comment before `- ` whose
    /// entry is a collection belongs to the collection, not its first
    /// entry.
    fn split_stem_comment(&mut self, stem_len: usize) {
        if stem_len == 0 {
            return;
        }
        match self.peek() {
            Some((_, T::Bss | T::Bms)) => {}
            _ => return,
        }
        let hc = std::mem::take(&mut self.head_comment);
        self.stem_comment = hc.get(..stem_len).unwrap_or(&hc).to_owned();
        self.head_comment = hc.get(stem_len + 1..).unwrap_or_default().to_owned();
    }

    fn block_sequence_entry(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (h, t) = self.peek()?;
        if t == T::BlockEntry {
            let mark = self.tok(h).end;
            let prior = self.head_comment.len();
            self.skip();
            self.split_stem_comment(prior);
            let (_, t) = self.peek()?;
            if t != T::BlockEntry && t != T::Be {
                self.states.push(St::BlockSeqEntry);
                return self.parse_node(true, false);
            }
            self.state = St::BlockSeqEntry;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        if t == T::Be {
            self.state = self.pop_state();
            let ev = GoEv::new(Ev::SeqEnd, self.tok(h).start);
            self.skip();
            return Some(ev);
        }
        None
    }

    fn indentless_sequence_entry(&mut self) -> Option<GoEv> {
        let (h, t) = self.peek()?;
        if t == T::BlockEntry {
            let mark = self.tok(h).end;
            let prior = self.head_comment.len();
            self.skip();
            self.split_stem_comment(prior);
            let (_, t) = self.peek()?;
            if !matches!(t, T::BlockEntry | T::Key | T::Value | T::Be) {
                self.states.push(St::IndentlessEntry);
                return self.parse_node(true, false);
            }
            self.state = St::IndentlessEntry;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        self.state = self.pop_state();
        Some(GoEv::new(Ev::SeqEnd, self.tok(h).start))
    }

    fn block_mapping_key(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (h, t) = self.peek()?;
        if t == T::Key {
            let mark = self.tok(h).end;
            self.skip();
            let (_, t) = self.peek()?;
            if !matches!(t, T::Key | T::Value | T::Be) {
                self.states.push(St::BlockMapValue);
                return self.parse_node(true, true);
            }
            self.state = St::BlockMapValue;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        if t == T::Be {
            self.state = self.pop_state();
            let mut ev = GoEv::new(Ev::MapEnd, self.tok(h).start);
            self.set_event_comments(&mut ev);
            self.skip();
            return Some(ev);
        }
        None
    }

    fn block_mapping_value(&mut self) -> Option<GoEv> {
        let (h, t) = self.peek()?;
        if t == T::Value {
            let mark = self.tok(h).end;
            self.skip();
            let (_, t) = self.peek()?;
            if !matches!(t, T::Key | T::Value | T::Be) {
                self.states.push(St::BlockMapKey);
                return self.parse_node(true, true);
            }
            self.state = St::BlockMapKey;
            return Some(GoEv::new(Ev::Scalar, mark));
        }
        self.state = St::BlockMapKey;
        Some(GoEv::new(Ev::Scalar, self.tok(h).start))
    }

    fn flow_sequence_entry(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (mut h, mut t) = self.peek()?;
        if t != T::Fse {
            if !first {
                if t != T::FlowEntry {
                    return None;
                }
                self.skip();
                (h, t) = self.peek()?;
            }
            if t == T::Key {
                self.state = St::FlowPairKey;
                let ev = GoEv::new(Ev::MapStart, self.tok(h).start);
                self.skip();
                return Some(ev);
            }
            if t != T::Fse {
                self.states.push(St::FlowSeqEntry);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        let mut ev = GoEv::new(Ev::SeqEnd, self.tok(h).start);
        self.set_event_comments(&mut ev);
        self.skip();
        Some(ev)
    }

    fn flow_mapping_key(&mut self, first: bool) -> Option<GoEv> {
        if first {
            self.peek()?;
            self.skip();
        }
        let (mut h, mut t) = self.peek()?;
        if t != T::Fme {
            if !first {
                if t != T::FlowEntry {
                    return None;
                }
                self.skip();
                (h, t) = self.peek()?;
            }
            if t == T::Key {
                self.skip();
                let (h, t) = self.peek()?;
                if !matches!(t, T::Value | T::FlowEntry | T::Fme) {
                    self.states.push(St::FlowMapValue);
                    return self.parse_node(false, false);
                }
                self.state = St::FlowMapValue;
                return Some(GoEv::new(Ev::Scalar, self.tok(h).start));
            }
            if t != T::Fme {
                self.states.push(St::FlowMapEmptyValue);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        let mut ev = GoEv::new(Ev::MapEnd, self.tok(h).start);
        self.set_event_comments(&mut ev);
        self.skip();
        Some(ev)
    }

    fn flow_mapping_value(&mut self, empty: bool) -> Option<GoEv> {
        let (mut h, mut t) = self.peek()?;
        if empty {
            self.state = St::FlowMapKey;
            return Some(GoEv::new(Ev::Scalar, self.tok(h).start));
        }
        if t == T::Value {
            self.skip();
            (h, t) = self.peek()?;
            if !matches!(t, T::FlowEntry | T::Fme) {
                self.states.push(St::FlowMapKey);
                return self.parse_node(false, false);
            }
        }
        self.state = St::FlowMapKey;
        Some(GoEv::new(Ev::Scalar, self.tok(h).start))
    }
}

/// Appends a comment to pending text, newline-separated.
fn join(to: &mut String, s: &str) {
    if !to.is_empty() {
        to.push('\n');
    }
    to.push_str(s);
}
