//! yaml.v3's scanner (scannerc.go), replayed over the rebuilt tokens
//! ([`Sim`]): whitespace, comments, indentation, simple keys, lookahead.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::source::Source;
use super::tokens::{at, blanks, is_blank, is_break, is_breakz, is_z, width, Mk, Sc, VTok, NO, T};

/// Hashes a token number (the keys of `simple_keys_by_tok`) by one
/// multiplication.
#[derive(Default)]
struct TokHasher(u64);

impl std::hash::Hasher for TokHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// yaml.v3's `yaml_comment_t`.
#[derive(Clone, Debug, Default)]
pub(super) struct Comment {
    scan_mark: Mk,
    pub(super) token_mark: Mk,
    start_mark: Mk,
    end_mark: Mk,
    pub(super) head: String,
    pub(super) line: String,
    pub(super) foot: String,
}

/// yaml.v3's `yaml_simple_key_t`.
#[derive(Clone, Copy, Debug, Default)]
struct SimpleKey {
    possible: bool,
    token_number: usize,
    mark: Mk,
}

/// yaml.v3's scanner state (scannerc.go), with token bodies taken from the
/// rebuilt tokens instead of scanned: what remains is what decides comment
/// placement — the cursor between tokens, `newlines`, the indentation
/// stack, flow level, simple keys (they decide how far the scanner runs
/// ahead of the parser) and the comments queue.
pub(super) struct Sim<'a> {
    src: &'a [u8],
    pub(super) source: Source<'a>,
    pos: usize,
    mark: Mk,
    newlines: usize,
    indent: i64,
    indents: Vec<i64>,
    flow_level: usize,
    simple_key_allowed: bool,
    simple_keys: Vec<SimpleKey>,
    /// `simple_keys_by_tok`: token number to flow level; stale entries are
    /// kept as yaml.v3 keeps them (but those behind the parser, never
    /// looked up again, are dropped now and then).
    by_tok: HashMap<usize, usize, BuildHasherDefault<TokHasher>>,
    stream_start_produced: bool,
    stream_end_produced: bool,
    /// Tokens in the queue so far (`tokens_parsed + len(tokens) - head`).
    produced: usize,
    /// `tokens_parsed`.
    pub(super) consumed: usize,
    /// Next token a fetch appends.
    next_tok: usize,
    /// The queue's last token (`tokens[len(tokens)-1]`).
    last_prod: usize,
    pub(super) comments: Vec<Comment>,
    pub(super) comments_head: usize,
    desync: bool,
    /// A fetch found no token left before the stream end: where the tokens
    /// stop at a scanner error, yaml.v3's scanner fails here.
    pub(super) hit_end: bool,
}

impl<'a> Sim<'a> {
    pub(super) fn new(src: &'a [u8], source: Source<'a>) -> Sim<'a> {
        Sim {
            src,
            source,
            pos: 0,
            mark: Mk::default(),
            newlines: 0,
            indent: 0,
            indents: Vec::new(),
            flow_level: 0,
            simple_key_allowed: false,
            simple_keys: Vec::new(),
            by_tok: HashMap::default(),
            stream_start_produced: false,
            stream_end_produced: false,
            produced: 0,
            consumed: 0,
            next_tok: 0,
            last_prod: 0,
            comments: Vec::new(),
            comments_head: 0,
            desync: false,
            hit_end: false,
        }
    }

    fn at(&self, off: usize) -> u8 {
        at(self.src, self.pos + off)
    }

    /// `skip`.
    fn skip(&mut self) {
        if !is_blank(self.src, self.pos) {
            self.newlines = 0;
        }
        let w = width(self.at(0));
        self.pos += w;
        self.mark.index += w as i64;
        self.mark.column += 1;
    }

    /// `skip` over a run of blanks (which leave `newlines` alone).
    fn skip_blanks(&mut self) {
        let n = blanks(self.src, self.pos);
        self.pos += n;
        self.mark.index += n as i64;
        self.mark.column += n as i64;
    }

    /// `skip_line`.
    fn skip_line(&mut self) {
        if self.at(0) == b'\r' && self.at(1) == b'\n' {
            self.pos += 2;
            self.mark.index += 2;
            self.mark.column = 0;
            self.mark.line += 1;
            self.newlines += 1;
        } else if is_break(self.src, self.pos) {
            let w = width(self.at(0));
            self.pos += w;
            self.mark.index += w as i64;
            self.mark.column = 0;
            self.mark.line += 1;
            self.newlines += 1;
        }
    }

    /// `read`: one character into `text`.
    fn read(&mut self, text: &mut String) {
        let w = width(self.at(0));
        if let Some(s) = self.src.get(self.pos..self.pos + w) {
            text.push_str(&String::from_utf8_lossy(s));
        }
        self.skip();
    }

    fn jump(&mut self, m: Mk) {
        if m.index >= self.pos as i64 {
            self.pos = m.index as usize;
            self.mark = m;
        } else {
            self.desync = true;
        }
    }

    /// Token `i`, pulling events until it is rebuilt.
    pub(super) fn tok(&mut self, i: usize) -> Option<VTok> {
        while i >= self.source.window.len() {
            if !self.source.pull() {
                return None;
            }
        }
        self.source.window.get(i).copied()
    }

    /// Token `i` to update (one already seen).
    fn tok_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.source.window.get_mut(i)
    }

    fn kind(&self, i: usize) -> Option<T> {
        self.source.window.get(i).map(|t| t.t)
    }

    /// The next token a fetch appends (inserted and dead ones are not
    /// appended).
    fn next_appended(&mut self) -> Option<usize> {
        loop {
            let t = self.tok(self.next_tok)?;
            if t.inserted || t.dead || t.produced {
                self.next_tok += 1;
            } else {
                return Some(self.next_tok);
            }
        }
    }

    fn produce(&mut self, i: usize) {
        if let Some(t) = self.tok_mut(i) {
            t.produced = true;
        }
        self.produced += 1;
        self.last_prod = self.last_prod.max(i);
    }

    /// The queue's token before `i` (`tokens[len(tokens)-2]` when `i` is
    /// the last).
    fn prev_produced(&self, i: usize) -> Option<usize> {
        let recon = &self.source.window;
        (recon.base..i)
            .rev()
            .find(|&j| recon.get(j).is_some_and(|t| t.produced))
    }

    /// Takes the next appended token, which must be of type `t`.
    fn take(&mut self, t: T) -> Option<usize> {
        match self.next_appended() {
            Some(i) if self.kind(i) == Some(t) => {
                self.produce(i);
                Some(i)
            }
            _ => {
                self.desync = true;
                None
            }
        }
    }

    /// `yaml_parser_fetch_more_tokens`: keeps the queue at least three
    /// tokens ahead of the parser, and further while the head is a simple
    /// key not yet resolved.
    pub(super) fn fetch_more_tokens(&mut self) {
        loop {
            if self.produced >= self.consumed + 3 {
                match self.by_tok.get(&self.consumed).copied() {
                    None => break,
                    Some(l) => {
                        if !self.simple_key_is_valid(l) {
                            break;
                        }
                    }
                }
            }
            if !self.fetch_next_token() {
                break;
            }
        }
    }

    /// `yaml_simple_key_is_valid`.
    fn simple_key_is_valid(&mut self, level: usize) -> bool {
        let mark = self.mark;
        let Some(k) = self.simple_keys.get_mut(level) else {
            return false;
        };
        if !k.possible {
            return false;
        }
        if k.mark.line < mark.line || k.mark.index + 1024 < mark.index {
            k.possible = false;
            return false;
        }
        true
    }

    /// `yaml_parser_save_simple_key`.
    fn save_simple_key(&mut self) {
        if self.simple_key_allowed {
            let k = SimpleKey {
                possible: true,
                token_number: self.produced,
                mark: self.mark,
            };
            self.remove_simple_key();
            let level = self.simple_keys.len() - 1;
            self.simple_keys[level] = k;
            if self.by_tok.len() >= 64 + 2 * self.simple_keys.len() {
                let consumed = self.consumed;
                self.by_tok.retain(|&n, _| n >= consumed);
            }
            self.by_tok.insert(k.token_number, level);
        }
    }

    /// `yaml_parser_remove_simple_key`.
    fn remove_simple_key(&mut self) {
        if let Some(k) = self.simple_keys.last_mut() {
            if k.possible {
                k.possible = false;
                let n = k.token_number;
                self.by_tok.remove(&n);
            }
        }
    }

    /// `yaml_parser_increase_flow_level`.
    fn increase_flow_level(&mut self) {
        self.simple_keys.push(SimpleKey {
            token_number: self.produced,
            mark: self.mark,
            ..SimpleKey::default()
        });
        self.flow_level += 1;
    }

    /// `yaml_parser_decrease_flow_level`.
    fn decrease_flow_level(&mut self) {
        if self.flow_level > 0 {
            self.flow_level -= 1;
            if let Some(k) = self.simple_keys.pop() {
                self.by_tok.remove(&k.token_number);
            }
        }
    }

    /// `yaml_parser_roll_indent` for an appended BLOCK-*-START.
    fn roll_indent(&mut self, column: i64, t: T) {
        if self.flow_level > 0 {
            return;
        }
        if self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            self.take(t);
        }
    }

    /// `yaml_parser_unroll_indent`: one BLOCK-END per closed level, placed
    /// before the comments that belong to the parent (yaml.v3 moves the
    /// mark back to the first comment at the closed level's column).
    fn unroll_indent(&mut self, column: i64, scan_mark: Mk) {
        if self.flow_level > 0 {
            return;
        }
        let mut block_mark = scan_mark;
        block_mark.index -= 1;
        while self.indent > column {
            let mut stop_index = block_mark.index;
            for c in self.comments.iter().rev() {
                if c.end_mark.index < stop_index {
                    break;
                }
                if c.start_mark.column == self.indent + 1 {
                    block_mark = c.start_mark;
                }
                stop_index = c.scan_mark.index;
            }
            if let Some(t) = self.take(T::Be).and_then(|i| self.tok_mut(i)) {
                t.start = block_mark;
                t.end = block_mark;
            }
            self.indent = self.indents.pop().unwrap_or(-1);
        }
    }

    /// `yaml_parser_fetch_next_token`; false when there is nothing left.
    pub(super) fn fetch_next_token(&mut self) -> bool {
        if self.stream_end_produced || self.desync {
            return false;
        }
        if !self.stream_start_produced {
            // `yaml_parser_fetch_stream_start`.
            self.indent = -1;
            self.simple_keys.push(SimpleKey::default());
            self.simple_key_allowed = true;
            self.stream_start_produced = true;
            return self.take(T::StreamStart).is_some();
        }
        if self.next_appended().is_none() {
            self.hit_end = true;
            return false;
        }
        let scan_mark = self.mark;
        self.scan_to_next_token();
        self.unroll_indent(self.mark.column, scan_mark);
        // The token this fetch is for (BLOCK-ENDs come from the unrolls).
        let Some(i) = self.next_appended() else {
            return false;
        };
        let mut i = i;
        let tok = loop {
            let Some(t) = self.tok(i) else {
                self.desync = true;
                return false;
            };
            if !(t.inserted || t.dead || t.produced || t.t == T::Be) {
                break t;
            }
            i += 1;
        };
        match tok.t {
            T::StreamEnd => {
                // `yaml_parser_fetch_stream_end`.
                if self.mark.column != 0 {
                    self.mark.column = 0;
                    self.mark.line += 1;
                }
                self.unroll_indent(-1, self.mark);
                self.remove_simple_key();
                self.simple_key_allowed = false;
                let mark = self.mark;
                if let Some(t) = self.take(T::StreamEnd).and_then(|i| self.tok_mut(i)) {
                    t.start = mark;
                    t.end = mark;
                }
                self.stream_end_produced = true;
                return true;
            }
            T::Directive | T::DocStart | T::DocEnd => {
                // `yaml_parser_fetch_directive`,
                // `yaml_parser_fetch_document_indicator`: no line comments.
                self.unroll_indent(-1, self.mark);
                self.remove_simple_key();
                self.simple_key_allowed = false;
                self.take(tok.t);
                if tok.t == T::Directive {
                    while !is_breakz(self.src, self.pos) {
                        self.skip();
                    }
                    self.skip_line();
                } else {
                    self.skip();
                    self.skip();
                    self.skip();
                }
                return !self.desync;
            }
            _ => {}
        }
        // Comments after `:` (block) or `,` (flow) belong to the token before.
        let c = self.at(0);
        let mut comment_mark = self.mark;
        if (self.flow_level == 0 && c == b':') || (self.flow_level > 0 && c == b',') {
            comment_mark = self.tok(self.last_prod).map_or(self.mark, |t| t.start);
        }
        match tok.t {
            T::Fss | T::Fms => {
                self.save_simple_key();
                self.increase_flow_level();
                self.simple_key_allowed = true;
                self.take(tok.t);
                self.skip();
            }
            T::Fse | T::Fme => {
                self.remove_simple_key();
                self.decrease_flow_level();
                self.simple_key_allowed = false;
                self.take(tok.t);
                self.skip();
            }
            T::FlowEntry => {
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.take(T::FlowEntry);
                self.skip();
            }
            T::Bss | T::BlockEntry => {
                if self.flow_level == 0 {
                    self.roll_indent(self.mark.column, T::Bss);
                }
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.take(T::BlockEntry);
                self.skip();
            }
            T::Bms | T::Key | T::Value => {
                let value = if tok.t == T::Bms {
                    // The mapping start goes with the indicator after it.
                    self.tok(i + 1).map_or(T::Key, |t| t.t) == T::Value
                } else {
                    tok.t == T::Value
                };
                if value {
                    self.fetch_value();
                } else {
                    if self.flow_level == 0 {
                        self.roll_indent(self.mark.column, T::Bms);
                    }
                    self.remove_simple_key();
                    self.simple_key_allowed = self.flow_level == 0;
                    self.take(T::Key);
                }
                self.skip();
            }
            T::Alias | T::Anchor | T::Tag => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.take(tok.t);
                self.jump(tok.end);
                self.newlines = 0;
            }
            T::Scalar => match tok.sc {
                Sc::Block => {
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.take(T::Scalar);
                    self.block_scalar(tok.end);
                }
                Sc::Plain => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.take(T::Scalar);
                    self.jump(tok.end);
                    self.newlines = 0;
                    // `yaml_parser_scan_plain_scalar` eats the blanks and
                    // breaks after the last word.
                    let mut leading_blanks = false;
                    while is_blank(self.src, self.pos) || is_break(self.src, self.pos) {
                        if is_blank(self.src, self.pos) {
                            self.skip_blanks();
                        } else {
                            self.skip_line();
                            leading_blanks = true;
                        }
                    }
                    if leading_blanks {
                        self.simple_key_allowed = true;
                    }
                }
                _ => {
                    self.save_simple_key();
                    self.simple_key_allowed = false;
                    self.take(T::Scalar);
                    self.jump(tok.end);
                    self.newlines = 0;
                }
            },
            _ => {
                self.desync = true;
                return false;
            }
        }
        // The deferred line comment: sequence indicators alone have none.
        if self.kind(self.last_prod) != Some(T::BlockEntry) {
            self.scan_line_comment(comment_mark);
        }
        !self.desync
    }

    /// `yaml_parser_fetch_value`.
    fn fetch_value(&mut self) {
        let Some(v) = self.next_appended() else {
            self.desync = true;
            return;
        };
        let level = self.simple_keys.len() - 1;
        let valid = self.simple_key_is_valid(level);
        // The VALUE (after a BLOCK-MAPPING-START appended for a complex
        // key) and the simple key's KEY it brings.
        let value = if self.kind(v) == Some(T::Value) {
            v
        } else {
            v + 1
        };
        let link = self.tok(value).map_or(NO, |t| t.link);
        if link != NO {
            if !valid {
                self.desync = true;
            }
            let key = link as usize;
            let k = self.simple_keys[level];
            // The KEY, and a BLOCK-MAPPING-START before it when the key opens
            // a new indentation level (`yaml_parser_roll_indent` with the
            // key's number).
            if self.flow_level == 0 && self.indent < k.mark.column {
                self.indents.push(self.indent);
                self.indent = k.mark.column;
                let bms = key.checked_sub(1).and_then(|b| self.tok(b));
                if bms.is_some_and(|t| t.t == T::Bms && t.inserted) {
                    self.produce(key - 1);
                } else {
                    self.desync = true;
                }
            }
            self.produce(key);
            self.simple_keys[level].possible = false;
            let n = k.token_number;
            self.by_tok.remove(&n);
            self.simple_key_allowed = false;
        } else {
            if self.flow_level == 0 {
                self.roll_indent(self.mark.column, T::Bms);
            }
            self.simple_key_allowed = self.flow_level == 0;
        }
        self.take(T::Value);
    }

    /// The rest of `yaml_parser_scan_block_scalar` after the indicator:
    /// the header's line comment, then the cursor where yaml.v3's scanner
    /// stops (the token's end plus the next line's indentation, up to the
    /// scalar's indentation).
    fn block_scalar(&mut self, end: Mk) {
        let start_mark = self.mark;
        self.skip();
        let mut increment = 0i64;
        for _ in 0..2 {
            let c = self.at(0);
            if c == b'+' || c == b'-' {
                self.skip();
            } else if c.is_ascii_digit() {
                increment = i64::from(c - b'0');
                self.skip();
            }
        }
        while is_blank(self.src, self.pos) {
            self.skip();
        }
        if self.at(0) == b'#' {
            self.scan_line_comment(start_mark);
            while !is_breakz(self.src, self.pos) {
                self.skip();
            }
        }
        if is_break(self.src, self.pos) {
            self.skip_line();
        }
        // `yaml_parser_scan_block_scalar_breaks` decides the indentation.
        let mut indent = if increment > 0 {
            if self.indent >= 0 {
                self.indent + increment
            } else {
                increment
            }
        } else {
            0
        };
        if indent == 0 {
            let mut p = self.pos;
            let mut max_indent = 0;
            loop {
                let mut col = 0;
                while at(self.src, p) == b' ' {
                    p += 1;
                    col += 1;
                }
                max_indent = max_indent.max(col);
                if !is_break(self.src, p) {
                    break;
                }
                p += if at(self.src, p) == b'\r' && at(self.src, p + 1) == b'\n' {
                    2
                } else {
                    width(at(self.src, p))
                };
            }
            indent = max_indent.max(self.indent + 1).max(1);
        }
        if end.index < self.pos as i64 {
            // Nothing after the header line.
            return;
        }
        // `newlines`: the breaks since the last non-blank character read.
        let mut newlines = 0;
        let mut p = end.index as usize;
        while p > self.pos {
            match at(self.src, p - 1) {
                b'\n' => {
                    newlines += 1;
                    if p >= 2 && at(self.src, p - 2) == b'\r' {
                        p -= 1;
                    }
                }
                b'\r' => newlines += 1,
                b' ' | b'\t' => {}
                _ => break,
            }
            p -= 1;
        }
        let since_header = p == self.pos;
        self.jump(end);
        self.newlines = if since_header {
            self.newlines + newlines
        } else {
            newlines
        };
        while self.mark.column < indent && self.at(0) == b' ' {
            self.skip();
        }
    }

    /// `yaml_parser_scan_to_next_token`.
    fn scan_to_next_token(&mut self) {
        let scan_mark = self.mark;
        loop {
            // (yaml.v3's byte order mark check, `is_bom`, looks at the start
            // of its buffer whatever the position: in effect never true
            // here.)
            //
            // yaml.v3 skips tabs only where it allows them; where it does
            // not, libyaml has already failed.
            self.skip_blanks();
            // A line comment right after `- ` that reads as the head of
            // the entry's content.
            let b = self.last_prod;
            if self.comments.last().is_some_and(|c| !c.line.is_empty())
                && self.kind(b) == Some(T::BlockEntry)
                && !is_break(self.src, self.pos)
                && self
                    .prev_produced(b)
                    .is_some_and(|a| self.kind(a) == Some(T::Bss))
            {
                let mark = self.mark;
                if let Some(c) = self.comments.last_mut() {
                    c.head = std::mem::take(&mut c.line);
                    if c.start_mark.line == mark.line - 1 {
                        c.token_mark = mark;
                    }
                }
            }
            if self.at(0) == b'#' {
                self.scan_comments(scan_mark);
            }
            if is_break(self.src, self.pos) {
                self.skip_line();
                if self.flow_level == 0 {
                    self.simple_key_allowed = true;
                }
            } else {
                break;
            }
        }
    }

    /// `yaml_parser_scan_line_comment`: a comment on the rest of the line,
    /// tied to `token_mark`.
    fn scan_line_comment(&mut self, token_mark: Mk) {
        if self.newlines > 0 {
            return;
        }
        let mut start_mark = Mk::default();
        let mut text = String::new();
        let mut peek = 0;
        while peek < 512 {
            if is_blank(self.src, self.pos + peek) {
                peek += 1;
                continue;
            }
            if self.at(peek) == b'#' {
                let seen = self.mark.index + peek as i64;
                loop {
                    if is_breakz(self.src, self.pos) {
                        if self.mark.index >= seen {
                            break;
                        }
                        self.skip_line();
                    } else if self.mark.index >= seen {
                        if text.is_empty() {
                            start_mark = self.mark;
                        }
                        self.read(&mut text);
                    } else {
                        self.skip();
                    }
                }
            }
            break;
        }
        if !text.is_empty() {
            self.comments.push(Comment {
                token_mark,
                start_mark,
                line: text,
                ..Comment::default()
            });
        }
    }

    /// `yaml_parser_scan_comments`: the comment lines starting here, split
    /// into foot comments of what came before (same or deeper indentation,
    /// no blank line) and the head comment of what follows.
    fn scan_comments(&mut self, scan_mark: Mk) {
        let mut scan_mark = scan_mark;
        let mut token_i = self.last_prod;
        if self.kind(token_i) == Some(T::FlowEntry) {
            if let Some(p) = self.prev_produced(token_i) {
                token_i = p;
            }
        }
        let Some(token) = self.tok(token_i) else {
            self.desync = true;
            return;
        };
        let mut token_mark = token.start;
        let mut start_mark = Mk::default();
        let mut next_indent = self.indent.max(0);
        let mut recent_empty = false;
        let mut first_empty = self.newlines <= 1;
        let mut line = self.mark.line;
        let mut column = self.mark.column;
        let mut text = String::new();

        let mut foot_line = -1;
        if scan_mark.line > 0 {
            foot_line = self.mark.line - self.newlines as i64 + 1;
            if self.newlines == 0 && self.mark.column > 1 {
                foot_line += 1;
            }
        }

        let mut peek = 0usize;
        while peek < 512 {
            column += 1;
            let p = self.pos + peek;
            if is_blank(self.src, p) {
                peek += 1;
                continue;
            }
            let c = at(self.src, p);
            let close_flow = self.flow_level > 0 && (c == b']' || c == b'}');
            if close_flow || is_breakz(self.src, p) {
                // A line break or the end.
                if close_flow || !recent_empty {
                    if close_flow
                        || (first_empty
                            && ((start_mark.line == foot_line && token.t != T::Value)
                                || start_mark.column - 1 < next_indent))
                    {
                        // The first part, before any blank line, is a foot of
                        // the token before (or the last comment in a flow).
                        if !text.is_empty() {
                            if start_mark.column - 1 < next_indent {
                                // Dedented: unrelated to the token before.
                                token_mark = start_mark;
                            }
                            let here = Mk {
                                index: self.mark.index + peek as i64,
                                line,
                                column,
                            };
                            self.comments.push(Comment {
                                scan_mark,
                                token_mark,
                                start_mark,
                                end_mark: here,
                                foot: std::mem::take(&mut text),
                                ..Comment::default()
                            });
                            scan_mark = here;
                            token_mark = scan_mark;
                        }
                    } else if !text.is_empty() && !is_z(self.src, p) {
                        text.push('\n');
                    }
                }
                if !is_break(self.src, p) {
                    break;
                }
                first_empty = false;
                recent_empty = true;
                column = 0;
                line += 1;
                peek += 1;
                continue;
            }

            if !text.is_empty()
                && (close_flow || (column - 1 < next_indent && column != start_mark.column))
            {
                // A comment at another indentation: a foot of what came
                // before rather than a head of what follows.
                let here = Mk {
                    index: self.mark.index + peek as i64,
                    line,
                    column,
                };
                self.comments.push(Comment {
                    scan_mark,
                    token_mark,
                    start_mark,
                    end_mark: here,
                    foot: std::mem::take(&mut text),
                    ..Comment::default()
                });
                scan_mark = here;
                token_mark = scan_mark;
            }

            if c != b'#' {
                break;
            }

            if text.is_empty() {
                start_mark = Mk {
                    index: self.mark.index + peek as i64,
                    line,
                    column,
                };
            } else {
                text.push('\n');
            }
            recent_empty = false;

            // Consume the comment line.
            let seen = self.mark.index + peek as i64;
            loop {
                if is_breakz(self.src, self.pos) {
                    if self.mark.index >= seen {
                        break;
                    }
                    self.skip_line();
                } else if self.mark.index >= seen {
                    self.read(&mut text);
                } else {
                    self.skip();
                }
            }

            // Go sets `peek = 0` and its for-loop then adds 1: the break
            // after the comment is stepped over, and `line` lags a line
            // behind until the next break (with CRLF the `\n` is seen).
            peek = 1;
            column = 0;
            line = self.mark.line;
            next_indent = self.indent.max(0);
        }

        if !text.is_empty() {
            let end = Mk {
                index: self.mark.index + peek as i64 - 1,
                line,
                column,
            };
            self.comments.push(Comment {
                scan_mark,
                token_mark: start_mark,
                start_mark,
                end_mark: end,
                head: text,
                ..Comment::default()
            });
        }
    }
}
