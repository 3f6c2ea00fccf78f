//! Marks and tokens: positions ([`Mk`], and [`end_mark`]), yaml.v3's token
//! types ([`T`]), the rebuilt token stream's tokens ([`VTok`]) and yaml.v3's
//! byte classes.

/// A position: byte index, 0-based line, 0-based column (in characters),
/// signed because yaml.v3's comment arithmetic steps below 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Mk {
    pub(super) index: i64,
    pub(super) line: i64,
    pub(super) column: i64,
}

impl Mk {
    pub(super) fn of(m: libyaml_safer::Mark) -> Mk {
        Mk {
            index: m.index as i64,
            line: m.line as i64,
            column: m.column as i64,
        }
    }
}

/// yaml.v3's token types (directives folded into one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum T {
    StreamStart,
    StreamEnd,
    Directive,
    DocStart,
    DocEnd,
    Bss,
    Bms,
    Be,
    Fss,
    Fse,
    Fms,
    Fme,
    BlockEntry,
    FlowEntry,
    Key,
    Value,
    Alias,
    Anchor,
    Tag,
    Scalar,
}

/// How a scalar token ends, which decides where yaml.v3's scanner stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sc {
    None,
    Plain,
    Quoted,
    Block,
}

pub(super) const NO: u32 = u32::MAX;

/// One token of the stream yaml.v3's scanner produces, in queue order.
#[derive(Clone, Copy, Debug)]
pub(super) struct VTok {
    pub(super) t: T,
    pub(super) sc: Sc,
    /// Inserted into the queue by a later VALUE fetch (a simple key's KEY,
    /// and the BLOCK-MAPPING-START before it) rather than appended.
    pub(super) inserted: bool,
    /// A possible simple key's KEY that libyaml never produced.
    pub(super) dead: bool,
    pub(super) produced: bool,
    /// For a VALUE: the simple key's KEY it inserts (or [`NO`]).
    pub(super) link: u32,
    pub(super) start: Mk,
    pub(super) end: Mk,
}

impl VTok {
    pub(super) fn new(t: T, start: Mk, end: Mk) -> VTok {
        VTok {
            t,
            sc: Sc::None,
            inserted: false,
            dead: false,
            produced: false,
            link: NO,
            start,
            end,
        }
    }
}

/// The rebuilt token stream did not fit the events (a bug, or a case where
/// libyaml-safer and yaml.v3 disagree); comments are then left off.
#[derive(Debug)]
pub(super) struct Desync;

// Byte classes, as yaml.v3's `is_blank`, `is_break`, `is_breakz`
// (yamlprivateh.go); past the end reads as NUL, like its padded buffer.
pub(super) fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

pub(super) fn is_blank(s: &[u8], i: usize) -> bool {
    matches!(at(s, i), b' ' | b'\t')
}

pub(super) fn is_break(s: &[u8], i: usize) -> bool {
    match at(s, i) {
        b'\r' | b'\n' => true,
        0xC2 => at(s, i + 1) == 0x85,
        0xE2 => at(s, i + 1) == 0x80 && matches!(at(s, i + 2), 0xA8 | 0xA9),
        _ => false,
    }
}

pub(super) fn is_z(s: &[u8], i: usize) -> bool {
    i >= s.len()
}

pub(super) fn is_breakz(s: &[u8], i: usize) -> bool {
    is_break(s, i) || is_z(s, i)
}

pub(super) fn is_blankz(s: &[u8], i: usize) -> bool {
    is_blank(s, i) || is_breakz(s, i)
}

/// The length of the run of blanks at `i`.
pub(super) fn blanks(s: &[u8], i: usize) -> usize {
    s.get(i..).map_or(0, |r| {
        r.iter().take_while(|&&b| b == b' ' || b == b'\t').count()
    })
}

pub(super) fn is_bom(s: &[u8], i: usize) -> bool {
    s.get(i..i + 3) == Some(b"\xEF\xBB\xBF".as_slice())
}

/// The byte width of the UTF-8 character starting with `b`.
pub(super) fn width(b: u8) -> usize {
    match b {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// The mark at the end of `src`.
pub(super) fn end_mark(src: &[u8]) -> Mk {
    let mut m = Mk::default();
    let mut i = 0;
    while i < src.len() {
        if is_break(src, i) {
            i += if src[i] == b'\r' && at(src, i + 1) == b'\n' {
                2
            } else {
                width(src[i])
            };
            m.line += 1;
            m.column = 0;
        } else {
            i += width(src[i]);
            m.column += 1;
        }
    }
    m.index = src.len() as i64;
    m
}
