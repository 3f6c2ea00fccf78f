//! yamlprivateh.go's character classes. Out-of-range reads give 0 (Go would
//! index past the end only where a valid UTF-8 value cannot reach).

/// Bytes that, past the first position, affect none of
/// `yaml_emitter_analyze_scalar`'s findings beyond "neither space nor
/// break": printable ASCII other than space and `,?[]{}:#`.
pub(super) const PLAIN_TAIL: [bool; 256] = {
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

pub(super) fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

pub(super) fn width(c: u8) -> usize {
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

pub(super) fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

pub(super) fn is_space(b: &[u8], i: usize) -> bool {
    at(b, i) == b' '
}

pub(super) fn is_blank(b: &[u8], i: usize) -> bool {
    matches!(at(b, i), b' ' | b'\t')
}

pub(super) fn is_break(b: &[u8], i: usize) -> bool {
    match at(b, i) {
        b'\r' | b'\n' => true,
        0xC2 => at(b, i + 1) == 0x85,
        0xE2 => at(b, i + 1) == 0x80 && matches!(at(b, i + 2), 0xA8 | 0xA9),
        _ => false,
    }
}

pub(super) fn is_blankz(b: &[u8], i: usize) -> bool {
    is_blank(b, i) || is_break(b, i) || at(b, i) == 0
}

/// `is_printable`: what YAML allows unescaped. Note that 4-byte characters
/// (emoji and the like) are not, so they get `\U` escapes.
pub(super) fn is_printable(b: &[u8], i: usize) -> bool {
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

pub(super) fn hex_digit(d: u8) -> u8 {
    if d < 10 {
        b'0' + d
    } else {
        b'A' + d - 10
    }
}
