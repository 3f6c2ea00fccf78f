//! Rebuilding yaml.v3's token stream from libyaml's events ([`Recon`]).

use libyaml_safer::{Event, EventData, MappingStyle, ScalarStyle, SequenceStyle};

use super::tokens::{
    at, blanks, is_blankz, is_bom, is_break, is_breakz, is_z, width, Desync, Mk, Sc, VTok, NO, T,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FrameKind {
    Doc,
    BlockMap,
    FlowMap,
    /// The single-pair mapping of `[a: b]`.
    FlowPair,
    BlockSeq,
    Indentless,
    FlowSeq,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    kind: FrameKind,
    /// A mapping's next node is a value.
    value_next: bool,
    /// The current key came after `?`.
    explicit: bool,
    /// The current key's simple-key KEY placeholder.
    key_ph: u32,
    /// A block collection's column (yaml.v3's indentation level in it).
    col: i64,
}

/// Rebuilds yaml.v3's token stream from libyaml's events: the events give
/// every scalar, alias and collection with its marks; the tokens between
/// them (indicators and properties) are read from the source text, and the
/// zero-width ones (BLOCK-*-START, BLOCK-END, simple keys' KEY) placed where
/// libyaml's scanner puts them.
///
/// It runs as the events arrive and keeps a window of tokens: token `i` is
/// `toks[i - base]`.
pub(super) struct Recon<'a> {
    pub(super) src: &'a [u8],
    pos: usize,
    line: i64,
    col: i64,
    flow: usize,
    pub(super) toks: Vec<VTok>,
    base: usize,
    frames: Vec<Frame>,
    /// Marks past this (the break [`prepare`](super::prepare) added) are at it.
    clamp: Option<Mk>,
}

impl<'a> Recon<'a> {
    pub(super) fn new(src: &'a [u8], clamp: Option<Mk>) -> Recon<'a> {
        Recon {
            src,
            pos: 0,
            line: 0,
            col: 0,
            flow: 0,
            toks: Vec::with_capacity(2048),
            base: 0,
            frames: Vec::new(),
            clamp,
        }
    }

    /// All tokens for `events` at once.
    #[cfg(test)]
    pub(super) fn run(src: &'a [u8], events: &[Event]) -> Result<Vec<VTok>, Desync> {
        let mut r = Recon::new(src, None);
        for ev in events {
            r.event(ev)?;
        }
        Ok(r.toks)
    }

    /// Tokens rebuilt so far (dropped ones included).
    fn len(&self) -> usize {
        self.base + self.toks.len()
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.toks.get_mut(i.checked_sub(self.base)?)
    }

    /// Hands over the tokens that are final: those before the first
    /// simple key still waiting for its `:` (all once the stream ended).
    pub(super) fn take_stable(&mut self) -> Vec<VTok> {
        let pending = self
            .frames
            .iter()
            .filter(|f| f.key_ph != NO)
            .map(|f| f.key_ph as usize)
            .min()
            .unwrap_or(usize::MAX);
        let n = pending.saturating_sub(self.base).min(self.toks.len());
        self.base += n;
        self.toks.drain(..n).collect()
    }

    fn mk(&self) -> Mk {
        Mk {
            index: self.pos as i64,
            line: self.line,
            column: self.col,
        }
    }

    fn jump(&mut self, m: Mk) -> Result<(), Desync> {
        if m.index < self.pos as i64 {
            return Err(Desync);
        }
        self.pos = m.index as usize;
        self.line = m.line;
        self.col = m.column;
        Ok(())
    }

    fn advance(&mut self) {
        self.pos += width(at(self.src, self.pos));
        self.col += 1;
    }

    fn advance_break(&mut self) {
        if at(self.src, self.pos) == b'\r' && at(self.src, self.pos + 1) == b'\n' {
            self.pos += 2;
        } else {
            self.pos += width(at(self.src, self.pos));
        }
        self.line += 1;
        self.col = 0;
    }

    fn push(&mut self, t: T, start: Mk, end: Mk) -> usize {
        self.push_tok(VTok::new(t, start, end))
    }

    fn push_tok(&mut self, mut t: VTok) -> usize {
        if let Some(eof) = self.clamp {
            if t.start.index > eof.index {
                t.start = eof;
            }
            if t.end.index > eof.index {
                t.end = eof;
            }
        }
        self.toks.push(t);
        self.len() - 1
    }

    /// A simple key's KEY, waiting for its `:` (libyaml makes it only if
    /// one follows).
    fn push_placeholder(&mut self, at_mark: Mk) -> usize {
        let mut t = VTok::new(T::Key, at_mark, at_mark);
        t.inserted = true;
        t.dead = true;
        self.push_tok(t)
    }

    /// The current key got no `:`: libyaml never made its KEY.
    fn key_dead(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            f.key_ph = NO;
        }
    }

    /// libyaml's `yaml_parser_scan_to_next_token`: blanks, breaks, comments.
    fn skip_gap(&mut self) {
        loop {
            if self.col == 0 && is_bom(self.src, self.pos) {
                self.pos += 3;
                self.col += 1;
            }
            match at(self.src, self.pos) {
                b' ' | b'\t' => {
                    let n = blanks(self.src, self.pos);
                    self.pos += n;
                    self.col += n as i64;
                }
                b'#' => {
                    // To the end of the line, counting characters.
                    let rest = &self.src[self.pos..];
                    let n = rest
                        .iter()
                        .position(|&b| b == b'\n' || b == b'\r')
                        .unwrap_or(rest.len());
                    let mut end = self.pos + n;
                    // NEL, LS and PS break lines too.
                    if let Some(i) = (self.pos..end).find(|&i| is_break(self.src, i)) {
                        end = i;
                    }
                    self.col += self.src[self.pos..end]
                        .iter()
                        .filter(|&&b| b & 0xC0 != 0x80)
                        .count() as i64;
                    self.pos = end;
                }
                _ if is_break(self.src, self.pos) => self.advance_break(),
                _ => return,
            }
        }
    }

    /// Reads the indicator tokens that start before byte `limit`.
    fn lex_until(&mut self, limit: i64) -> Result<(), Desync> {
        loop {
            if self.pos as i64 >= limit {
                return Ok(());
            }
            self.skip_gap();
            if self.pos as i64 >= limit || is_z(self.src, self.pos) {
                return Ok(());
            }
            self.lex_indicator()?;
        }
    }

    fn lex_indicator(&mut self) -> Result<(), Desync> {
        let s = self.src;
        let p = self.pos;
        let start = self.mk();
        let c = at(s, p);
        let one = |r: &mut Recon<'_>, t: T| {
            r.advance();
            let end = r.mk();
            r.push(t, start, end)
        };
        if self.col == 0
            && (s.get(p..p + 3) == Some(b"---".as_slice())
                || s.get(p..p + 3) == Some(b"...".as_slice()))
            && is_blankz(s, p + 3)
        {
            let t = if c == b'-' { T::DocStart } else { T::DocEnd };
            self.advance();
            self.advance();
            self.advance();
            let end = self.mk();
            self.push(t, start, end);
            return Ok(());
        }
        if self.col == 0 && c == b'%' {
            // The directive's line; its comment is discarded by yaml.v3
            // (`yaml_parser_scan_directive`).
            while !is_breakz(s, self.pos) {
                self.advance();
            }
            let end = self.mk();
            self.push(T::Directive, start, end);
            return Ok(());
        }
        match c {
            b']' => {
                one(self, T::Fse);
            }
            b'}' => {
                one(self, T::Fme);
            }
            b',' => {
                one(self, T::FlowEntry);
            }
            b'-' if is_blankz(s, p + 1) => {
                one(self, T::BlockEntry);
            }
            b'?' if self.flow > 0 || is_blankz(s, p + 1) => {
                one(self, T::Key);
                if let Some(f) = self.frames.last_mut() {
                    if matches!(
                        f.kind,
                        FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
                    ) {
                        f.explicit = true;
                    }
                }
            }
            b':' if self.flow > 0 || is_blankz(s, p + 1) => {
                let v = one(self, T::Value);
                // A VALUE after a simple key: libyaml's `fetch_value` inserts
                // the KEY (and the mapping start before a first key).
                let ph = self
                    .frames
                    .last_mut()
                    .map_or(NO, |f| std::mem::replace(&mut f.key_ph, NO));
                if let Some(t) = self.get_mut(ph as usize) {
                    t.dead = false;
                    if let Some(v) = self.get_mut(v) {
                        v.link = ph;
                    }
                }
            }
            _ => return Err(Desync),
        }
        Ok(())
    }

    /// Anchor and tag tokens in front of a node.
    fn lex_props(&mut self, anchor: Option<&str>, tag: bool) -> Result<(), Desync> {
        let mut anchor = anchor;
        let mut tag = tag;
        while anchor.is_some() || tag {
            self.skip_gap();
            let start = self.mk();
            match at(self.src, self.pos) {
                b'&' if anchor.is_some() => {
                    let n = anchor.map_or(0, str::len);
                    self.pos += 1 + n;
                    self.col += 1 + n as i64;
                    anchor = None;
                    let end = self.mk();
                    self.push(T::Anchor, start, end);
                }
                b'!' if tag => {
                    if at(self.src, self.pos + 1) == b'<' {
                        while !is_breakz(self.src, self.pos) && at(self.src, self.pos) != b'>' {
                            self.advance();
                        }
                        self.advance();
                    } else {
                        while !(is_blankz(self.src, self.pos)
                            || self.flow > 0 && at(self.src, self.pos) == b',')
                        {
                            self.advance();
                        }
                    }
                    tag = false;
                    let end = self.mk();
                    self.push(T::Tag, start, end);
                }
                _ => return Err(Desync),
            }
        }
        Ok(())
    }

    /// A node starts: its key placeholder if it is a simple key.
    fn node_start(&mut self, at_mark: Mk, has_tokens: bool) {
        let Some(f) = self.frames.last() else {
            return;
        };
        if !matches!(
            f.kind,
            FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
        ) {
            return;
        }
        if f.value_next {
            // A value: its key's wait for `:` is over.
            self.key_dead();
            return;
        }
        if f.kind == FrameKind::FlowPair || f.explicit || !has_tokens {
            return;
        }
        let idx = self.push_placeholder(at_mark);
        if let Some(f) = self.frames.last_mut() {
            f.key_ph = idx as u32;
        }
    }

    /// A node ended: its parent mapping expects the other half.
    fn node_done(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            if matches!(
                f.kind,
                FrameKind::BlockMap | FrameKind::FlowMap | FrameKind::FlowPair
            ) {
                if f.value_next {
                    f.value_next = false;
                    f.explicit = false;
                    f.key_ph = NO;
                } else {
                    f.value_next = true;
                }
            }
        }
    }

    fn frame(&mut self, kind: FrameKind) {
        self.frames.push(Frame {
            kind,
            value_next: false,
            explicit: false,
            key_ph: NO,
            col: self.col,
        });
    }

    /// yaml.v3's indentation level here: the innermost block collection's
    /// column (`parser.indent`).
    pub(super) fn indent(&self) -> i64 {
        self.frames
            .iter()
            .rev()
            .find(|f| matches!(f.kind, FrameKind::BlockMap | FrameKind::BlockSeq))
            .map_or(-1, |f| f.col)
    }

    pub(super) fn event(&mut self, ev: &Event) -> Result<(), Desync> {
        let start = Mk::of(ev.start_mark);
        let end = Mk::of(ev.end_mark);
        match &ev.data {
            EventData::StreamStart { .. } => {
                self.push(T::StreamStart, start, start);
            }
            EventData::StreamEnd => {
                self.lex_until(self.src.len() as i64)?;
                self.push(T::StreamEnd, start, start);
            }
            EventData::DocumentStart { implicit, .. } => {
                if !implicit {
                    self.lex_until(end.index)?;
                }
                self.frame(FrameKind::Doc);
            }
            EventData::DocumentEnd { implicit } => {
                if !implicit {
                    self.lex_until(end.index)?;
                }
                self.frames.pop();
            }
            EventData::Alias { .. } => {
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.push(T::Alias, start, end);
                self.jump(end)?;
                self.node_done();
            }
            EventData::Scalar {
                anchor,
                tag,
                value,
                style,
                ..
            } => {
                let has_token = !(*style == ScalarStyle::Plain && value.is_empty());
                let has_props = anchor.is_some() || tag.is_some();
                if has_props || has_token {
                    self.lex_until(start.index)?;
                } else {
                    // An empty scalar: the indicators before its mark.
                    self.lex_until(start.index)?;
                }
                self.node_start(start, has_props || has_token);
                if has_props || has_token {
                    self.jump(start)?;
                }
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if has_token {
                    if has_props {
                        self.skip_gap();
                    }
                    let s = self.mk();
                    let mut t = VTok::new(T::Scalar, s, end);
                    t.sc = match style {
                        ScalarStyle::Plain => Sc::Plain,
                        ScalarStyle::Literal | ScalarStyle::Folded => Sc::Block,
                        _ => Sc::Quoted,
                    };
                    self.push_tok(t);
                    self.jump(end)?;
                }
                self.node_done();
            }
            EventData::SequenceStart {
                anchor, tag, style, ..
            } => {
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if *style == SequenceStyle::Flow {
                    self.skip_gap();
                    if at(self.src, self.pos) != b'[' {
                        return Err(Desync);
                    }
                    let s = self.mk();
                    self.advance();
                    let e = self.mk();
                    self.push(T::Fss, s, e);
                    self.flow += 1;
                    self.frame(FrameKind::FlowSeq);
                } else if at(self.src, end.index as usize) == b'-' {
                    self.jump(end)?;
                    self.push(T::Bss, end, end);
                    self.frame(FrameKind::BlockSeq);
                } else {
                    self.frame(FrameKind::Indentless);
                }
            }
            EventData::MappingStart {
                anchor, tag, style, ..
            } => {
                let parent_flow_seq = self
                    .frames
                    .last()
                    .is_some_and(|f| f.kind == FrameKind::FlowSeq);
                if *style == MappingStyle::Flow
                    && parent_flow_seq
                    && (end == start || at(self.src, start.index as usize) == b'?')
                {
                    // `yaml_parser_parse_flow_sequence_entry` on a KEY: a
                    // single-pair mapping.
                    self.lex_until(start.index)?;
                    self.frame(FrameKind::FlowPair);
                    if end == start {
                        let idx = self.push_placeholder(start);
                        if let Some(f) = self.frames.last_mut() {
                            f.key_ph = idx as u32;
                        }
                    } else {
                        self.lex_until(start.index + 1)?;
                        if let Some(f) = self.frames.last_mut() {
                            f.explicit = true;
                        }
                    }
                    return Ok(());
                }
                self.lex_until(start.index)?;
                self.node_start(start, true);
                self.jump(start)?;
                self.lex_props(anchor.as_deref(), tag.is_some())?;
                if *style == MappingStyle::Flow {
                    self.skip_gap();
                    if at(self.src, self.pos) != b'{' {
                        return Err(Desync);
                    }
                    let s = self.mk();
                    self.advance();
                    let e = self.mk();
                    self.push(T::Fms, s, e);
                    self.flow += 1;
                    self.frame(FrameKind::FlowMap);
                } else {
                    self.jump(end)?;
                    // Known now, before its first key's event: the mapping
                    // start comes with a simple key's KEY (inserted by the
                    // VALUE fetch) unless the key is explicit (`? `).
                    let explicit =
                        at(self.src, self.pos) == b'?' && is_blankz(self.src, self.pos + 1);
                    let mut t = VTok::new(T::Bms, end, end);
                    t.inserted = !explicit;
                    self.push_tok(t);
                    self.frame(FrameKind::BlockMap);
                }
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                self.key_dead();
                let f = self.frames.pop().ok_or(Desync)?;
                match f.kind {
                    FrameKind::BlockMap | FrameKind::BlockSeq => {
                        self.push(T::Be, start, start);
                    }
                    FrameKind::FlowSeq | FrameKind::FlowMap => {
                        self.lex_until(start.index + 1)?;
                        self.flow = self.flow.saturating_sub(1);
                    }
                    FrameKind::Indentless | FrameKind::FlowPair => {}
                    FrameKind::Doc => return Err(Desync),
                }
                self.node_done();
            }
        }
        Ok(())
    }
}
