//! What the comment replay and the composer read ([`Source`]): the batches
//! from the [`Feed`], their events waiting for the composer, their tokens in
//! a [`Window`] (on the error path, a fixed token list instead).

use std::collections::VecDeque;

use compact_str::CompactString;
use libyaml_safer::{Event, EventData};

use super::error::{directive_line, tab_error, version_before, ParseError};
use super::feed::{Failure, Feed, BATCH};
use super::tokens::{Mk, VTok};

/// The replay's tokens: token `i` is `toks[i - base]` (those well behind
/// the parser are dropped).
#[derive(Default)]
pub(super) struct Window {
    toks: Vec<VTok>,
    pub(super) base: usize,
}

impl Window {
    pub(super) fn len(&self) -> usize {
        self.base + self.toks.len()
    }

    pub(super) fn get(&self, i: usize) -> Option<&VTok> {
        self.toks.get(i.checked_sub(self.base)?)
    }

    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut VTok> {
        self.toks.get_mut(i.checked_sub(self.base)?)
    }

    pub(super) fn drop_before(&mut self, i: usize) {
        let n = i.saturating_sub(self.base).min(self.toks.len());
        self.toks.drain(..n);
        self.base += n;
    }
}

/// What the replay and the composer read: batches from the [`Feed`], their
/// events waiting in `events` for the
/// [`Composer`](super::compose::Composer), their tokens in the window. (On
/// the error path, a fixed token list instead.)
pub(super) struct Source<'a> {
    feed: Feed<'a>,
    text: &'a [u8],
    eof: Option<Mk>,
    pub(super) window: Window,
    pub(super) recon_ok: bool,
    pub(super) events: VecDeque<(Event, CompactString)>,
    /// Events received so far.
    pub(super) pulled: usize,
    pub(super) error: Option<ParseError>,
    /// Where libyaml's error is a tab that cannot start a token.
    pub(super) tab_at: Option<usize>,
    /// The error is yaml.v3's own, not libyaml's.
    pub(super) own_error: bool,
}

impl<'a> Source<'a> {
    pub(super) fn new(feed: Feed<'a>, text: &'a str, eof: Option<Mk>) -> Source<'a> {
        Source {
            feed,
            text: text.as_bytes(),
            eof,
            window: Window::default(),
            recon_ok: true,
            events: VecDeque::with_capacity(2 * BATCH),
            pulled: 0,
            error: None,
            tab_at: None,
            own_error: false,
        }
    }

    pub(super) fn fixed(toks: Vec<VTok>) -> Source<'static> {
        Source {
            feed: Feed::Done,
            text: &[],
            eof: None,
            window: Window { toks, base: 0 },
            recon_ok: true,
            events: VecDeque::new(),
            pulled: 0,
            error: None,
            tab_at: None,
            own_error: false,
        }
    }

    /// Takes the next batch; false when there is none.
    pub(super) fn pull(&mut self) -> bool {
        let Some(batch) = self.feed.next() else {
            return false;
        };
        self.recon_ok &= batch.recon_ok;
        self.window.toks.extend(batch.toks);
        for ev in batch.events {
            let (mut ev, value) = match ev {
                Ok(ev) => ev,
                Err(Failure::Libyaml(e)) => {
                    self.tab_at = tab_error(&e, self.text);
                    self.error = Some(
                        version_before(&e, self.text)
                            .unwrap_or_else(|| ParseError::from_libyaml(&e, self.eof)),
                    );
                    self.feed = Feed::Done;
                    break;
                }
                Err(Failure::Go(e)) => {
                    self.error = Some(e);
                    self.own_error = true;
                    self.feed = Feed::Done;
                    break;
                }
            };
            match &mut ev.data {
                EventData::StreamEnd => self.feed = Feed::Done,
                EventData::DocumentStart {
                    version_directive: Some(v),
                    ..
                } if v.minor != 1 => {
                    // yaml.v3 accepts only `%YAML 1.1`
                    // (`yaml_parser_process_directives`); libyaml also 1.2.
                    self.error = Some(ParseError {
                        line: directive_line(self.text, ev.start_mark.index as usize),
                        message: "found incompatible YAML document".to_owned(),
                    });
                    self.feed = Feed::Done;
                    break;
                }
                _ => {}
            }
            self.events.push_back((ev, value));
            self.pulled += 1;
        }
        true
    }
}
