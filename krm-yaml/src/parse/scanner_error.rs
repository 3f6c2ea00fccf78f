//! Whether yaml.v3's scanner fails before libyaml's parser does
//! ([`scanner_error_first`]): libyaml-safer's scanner tokens up to its
//! error, replayed through yaml.v3's lookahead.

use libyaml_safer::ScalarStyle;

use super::error::{tab_error, ParseError};
use super::goparse::GoParser;
use super::scan::Sim;
use super::source::Source;
use super::tokens::{end_mark, Mk, Sc, VTok, NO, T};

/// Tokens that ran into the break [`prepare`](super::prepare) added end at
/// the end of `src` instead.
fn clamp_to(src: &[u8], toks: &mut [VTok]) {
    if toks.last().is_some_and(|t| t.end.index <= src.len() as i64) {
        return;
    }
    let eof = end_mark(src);
    for t in toks {
        if t.end.index > eof.index {
            t.end = eof;
        }
        if t.start.index > eof.index {
            t.start = eof;
        }
    }
}

/// Whether yaml.v3 meets a scanner error before libyaml's parser fails
/// producing event `n`: replays yaml.v3's lookahead over libyaml's tokens
/// (its scanner is yaml.v3's) and gives how many events yaml.v3's parser
/// produces first, the error, and where it is if it is a tab that cannot
/// start a token (see [`comment_tabs`](super::comment_tabs)).
pub(super) fn scanner_error_first(
    text: &str,
    src: &[u8],
    eof: Option<Mk>,
    n: usize,
) -> Option<(usize, ParseError, Option<usize>)> {
    let (mut toks, error) = scanner_tokens(text);
    let error = error?;
    // The scanner gives no token it still holds when it fails (a possible
    // simple key waits for its `:`): the text up to the failing token, ended
    // there, gives them all.
    let problem = error.problem_mark().map_or(0, |m| m.index as usize);
    let cut = error
        .context_mark()
        .map_or(problem, |m| problem.min(m.index as usize));
    if let Some(head) = text.get(..cut) {
        let (mut before, none) = scanner_tokens(&format!("{head}\n"));
        if none.is_none() {
            // Less what the end of the text added.
            before.retain(|t| t.start.index < cut as i64 && t.t != T::StreamEnd);
            if before.len() > toks.len() {
                toks = before;
            }
        }
    }
    let tab = tab_error(&error, text.as_bytes());
    let error = super::error::version_before(&error, text.as_bytes())
        .unwrap_or_else(|| ParseError::from_libyaml(&error, eof));
    clamp_to(src, &mut toks);
    let mut go = GoParser::new(Sim::new(src, Source::fixed(toks)));
    let mut produced = 0;
    while produced <= n && go.next_event().is_some() {
        produced += 1;
    }
    go.sim.hit_end.then_some((produced, error, tab))
}

/// libyaml-safer's scanner tokens up to its error, marked as
/// [`Recon`](super::recon::Recon) marks them (simple keys' KEY and mapping starts as inserted by their
/// VALUE).
fn scanner_tokens(text: &str) -> (Vec<VTok>, Option<libyaml_safer::Error>) {
    let mut input = text.as_bytes();
    let mut scanner = libyaml_safer::Scanner::new();
    // UTF-8, no byte order mark: as the parser is told (see `Producer::new`).
    scanner.set_encoding(libyaml_safer::Encoding::Utf8);
    scanner.set_input_string(&mut input);
    let mut toks: Vec<VTok> = Vec::new();
    // Per flow level, the simple key's KEY waiting for its VALUE.
    let mut pending = vec![NO];
    for tok in scanner {
        let tok = match tok {
            Ok(t) => t,
            Err(e) => return (toks, Some(e)),
        };
        let mut v = VTok::new(
            token_type(&tok.data),
            Mk::of(tok.start_mark),
            Mk::of(tok.end_mark),
        );
        let i = toks.len();
        match &tok.data {
            libyaml_safer::TokenData::Scalar { style, .. } => {
                v.sc = match style {
                    ScalarStyle::Plain => Sc::Plain,
                    ScalarStyle::Literal | ScalarStyle::Folded => Sc::Block,
                    _ => Sc::Quoted,
                };
            }
            libyaml_safer::TokenData::Key if v.start == v.end => {
                v.inserted = true;
                if let Some(p) = pending.last_mut() {
                    *p = i as u32;
                }
                if let Some(prev) = toks.last_mut() {
                    if prev.t == T::Bms && prev.start == v.start {
                        prev.inserted = true;
                    }
                }
            }
            libyaml_safer::TokenData::FlowSequenceStart
            | libyaml_safer::TokenData::FlowMappingStart => pending.push(NO),
            libyaml_safer::TokenData::FlowSequenceEnd
            | libyaml_safer::TokenData::FlowMappingEnd
                if pending.len() > 1 =>
            {
                pending.pop();
            }
            libyaml_safer::TokenData::Value => {
                if let Some(p) = pending.last_mut() {
                    v.link = std::mem::replace(p, NO);
                }
            }
            _ => {}
        }
        toks.push(v);
    }
    (toks, None)
}

/// yaml.v3's token type for a libyaml-safer token.
pub(super) fn token_type(data: &libyaml_safer::TokenData) -> T {
    use libyaml_safer::TokenData as D;
    match data {
        D::StreamStart { .. } => T::StreamStart,
        D::StreamEnd => T::StreamEnd,
        D::VersionDirective { .. } | D::TagDirective { .. } => T::Directive,
        D::DocumentStart => T::DocStart,
        D::DocumentEnd => T::DocEnd,
        D::BlockSequenceStart => T::Bss,
        D::BlockMappingStart => T::Bms,
        D::BlockEnd => T::Be,
        D::FlowSequenceStart => T::Fss,
        D::FlowSequenceEnd => T::Fse,
        D::FlowMappingStart => T::Fms,
        D::FlowMappingEnd => T::Fme,
        D::BlockEntry => T::BlockEntry,
        D::FlowEntry => T::FlowEntry,
        D::Key => T::Key,
        D::Value => T::Value,
        D::Alias { .. } => T::Alias,
        D::Anchor { .. } => T::Anchor,
        D::Tag { .. } => T::Tag,
        D::Scalar { .. } => T::Scalar,
    }
}
