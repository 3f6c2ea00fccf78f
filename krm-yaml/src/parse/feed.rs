//! libyaml-safer's events in batches, with the tokens rebuilt from them
//! ([`Producer`]), and where the batches come from ([`Feed`]): the calling
//! thread, or a second one running ahead.

use compact_str::CompactString;
use libyaml_safer::{Event, EventData, MappingStyle, Parser, ScalarStyle, SequenceStyle};

use super::error::ParseError;
use super::recon::Recon;
use super::tokens::{at, Mk, VTok, T};

/// Events per batch from the parser thread.
pub(super) const BATCH: usize = 512;

/// An event, and a scalar's value as the node holds it (converted on the
/// thread that parsed it: freeing libyaml's string there is cheap, on
/// another thread it contends for the allocator).
type EventResult = Result<(Event, CompactString), Failure>;

/// Why the events stop before the stream end.
pub(super) enum Failure {
    /// libyaml's error.
    Libyaml(libyaml_safer::Error),
    /// yaml.v3's own limit, which libyaml-safer does not have.
    Go(ParseError),
}

/// yaml.v3's scanner's `max_flow_level` and `max_indents`: deeper nesting
/// is refused ("exceeded max depth of 10000").
const MAX_DEPTH: usize = 10000;

/// Events from libyaml-safer's parser, and the tokens rebuilt from them
/// that are final (no simple key before them still waits for its `:`).
pub(super) struct Batch {
    pub(super) events: Vec<EventResult>,
    pub(super) toks: Vec<VTok>,
    pub(super) recon_ok: bool,
}

/// libyaml-safer's parser and the token rebuild ([`Recon`]), batch by
/// batch: on the calling thread, or ahead of it on another.
pub(super) struct Producer<'a> {
    parser: Parser<std::io::BufReader<&'a [u8]>>,
    recon: Recon<'a>,
    recon_ok: bool,
    done: bool,
    /// [`prepare`](super::prepare) added a final break.
    eof_patched: bool,
    /// The open collections: whether each is a flow collection, a block
    /// collection (an indentation level for yaml.v3), or neither (an
    /// indentless sequence); and how many of the first two are open.
    open: Vec<Nest>,
    flows: usize,
    blocks: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nest {
    Flow,
    Block,
    Indentless,
}

impl<'a> Producer<'a> {
    pub(super) fn new(text: &'a str, eof: Option<Mk>) -> Producer<'a> {
        let mut parser = Parser::new();
        // The text is UTF-8 and its byte order mark is gone (`prepare`):
        // left to guess, libyaml-safer 0.3 takes any first byte 0xEF for a
        // mark and refuses a first character from U+F000 to U+FFFF
        // ("invalid byte order marker"), which yaml.v3 reads.
        parser.set_encoding(libyaml_safer::Encoding::Utf8);
        // libyaml-safer decodes all the input it is given into its
        // character buffer: in small pieces that buffer stays in cache.
        parser.set_input(std::io::BufReader::with_capacity(
            16 * 1024,
            text.as_bytes(),
        ));
        Producer {
            parser,
            recon: Recon::new(text.as_bytes(), eof),
            recon_ok: true,
            done: false,
            eof_patched: eof.is_some(),
            open: Vec::new(),
            flows: 0,
            blocks: 0,
        }
    }

    /// Counts nesting as yaml.v3's scanner does, refusing what it refuses
    /// (`yaml_parser_increase_flow_level`, `yaml_parser_roll_indent`: the
    /// error's line is that of the opening token).
    fn nest(&mut self, e: &Event) -> Option<ParseError> {
        let nest = match &e.data {
            EventData::SequenceStart { style, .. } => {
                if *style == SequenceStyle::Flow {
                    Nest::Flow
                } else if at(self.recon.src, e.end_mark.index as usize) == b'-' {
                    Nest::Block
                } else {
                    Nest::Indentless
                }
            }
            EventData::MappingStart { style, .. } => {
                if *style == MappingStyle::Flow {
                    Nest::Flow
                } else {
                    Nest::Block
                }
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                match self.open.pop() {
                    Some(Nest::Flow) => self.flows -= 1,
                    Some(Nest::Block) => self.blocks -= 1,
                    _ => {}
                }
                return None;
            }
            _ => return None,
        };
        self.open.push(nest);
        match nest {
            Nest::Flow => self.flows += 1,
            Nest::Block => self.blocks += 1,
            Nest::Indentless => {}
        }
        (self.flows > MAX_DEPTH || self.blocks > MAX_DEPTH).then(|| {
            let line = e.end_mark.line as usize;
            ParseError {
                line: if line != 0 { line + 1 } else { 0 },
                message: format!("exceeded max depth of {MAX_DEPTH}"),
            }
        })
    }

    pub(super) fn batch(&mut self) -> Option<Batch> {
        if self.done {
            return None;
        }
        let mut events = Vec::with_capacity(BATCH);
        while events.len() < BATCH {
            let ev = match self.parser.parse() {
                Ok(mut e) => match self.nest(&e) {
                    Some(too_deep) => Err(Failure::Go(too_deep)),
                    None => {
                        if self.recon_ok && self.recon.event(&e).is_err() {
                            self.recon_ok = false;
                        }
                        if self.eof_patched {
                            self.eof_block_scalar(&mut e);
                        }
                        let value = match &mut e.data {
                            EventData::Scalar { value, .. } => {
                                CompactString::from(std::mem::take(value).as_str())
                            }
                            _ => CompactString::default(),
                        };
                        Ok((e, value))
                    }
                },
                Err(e) => Err(Failure::Libyaml(e)),
            };
            self.done = !matches!(&ev, Ok((e, _)) if !matches!(e.data, EventData::StreamEnd));
            events.push(ev);
            if self.done {
                break;
            }
        }
        Some(Batch {
            events,
            toks: self.recon.take_stable(),
            recon_ok: self.recon_ok,
        })
    }
}

impl Producer<'_> {
    /// A block scalar that ran into the break [`prepare`](super::prepare)
    /// added got it as one more `\n` than yaml.v3 gives (its `read_line` at
    /// the end reads nothing): in the last line break a clipped or kept
    /// scalar adds if the last line is content, and in its trailing breaks,
    /// which only a kept one adds, if the last line is blanks within its
    /// indentation.
    fn eof_block_scalar(&self, e: &mut Event) {
        let src = self.recon.src;
        let EventData::Scalar { value, style, .. } = &mut e.data else {
            return;
        };
        if !matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            || e.end_mark.index as usize != src.len()
            || !value.ends_with('\n')
        {
            return;
        }
        // The header (`|`, `>`, chomping and indentation indicators).
        let Some(start) = self
            .recon
            .toks
            .last()
            .filter(|t| t.t == T::Scalar)
            .map(|t| t.start.index as usize)
        else {
            return;
        };
        let mut keep = false;
        let mut strip = false;
        let mut increment = 0i64;
        for &c in src.iter().skip(start + 1).take(2) {
            match c {
                b'+' => keep = true,
                b'-' => strip = true,
                b'1'..=b'9' => increment = i64::from(c - b'0'),
                _ => break,
            }
        }
        if strip {
            return;
        }
        // The last line, and the indentation as
        // `yaml_parser_scan_block_scalar_breaks` settles it.
        let text = &src[..src.len() - 1];
        let last_start = text.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
        let last = &text[last_start..];
        let parent = self.recon.indent();
        let indent = if increment > 0 {
            if parent >= 0 {
                parent + increment
            } else {
                increment
            }
        } else {
            let mut i = src[start..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(text.len(), |p| start + p + 1);
            let mut max_indent = 0;
            while i < text.len() {
                let spaces = text[i..].iter().take_while(|&&c| c == b' ').count();
                max_indent = max_indent.max(spaces as i64);
                match text.get(i + spaces) {
                    Some(b'\n') => i += spaces + 1,
                    Some(b'\r') if text.get(i + spaces + 1) == Some(&b'\n') => i += spaces + 2,
                    _ => break,
                }
            }
            max_indent.max(parent + 1).max(1)
        };
        let content = last.iter().any(|&c| c != b' ') || last.len() as i64 > indent;
        if keep || content {
            value.pop();
        }
    }
}

/// Where the batches come from.
pub(super) enum Feed<'a> {
    Inline(Box<Producer<'a>>),
    Thread(std::sync::mpsc::Receiver<Batch>),
    Done,
}

impl Feed<'_> {
    pub(super) fn next(&mut self) -> Option<Batch> {
        match self {
            Feed::Inline(p) => p.batch(),
            Feed::Thread(rx) => rx.recv().ok(),
            Feed::Done => None,
        }
    }
}
