//! emitterc.go's writers: indentation, indicators, tags, the five scalar
//! styles and comments, as bytes on the emitter's output.

use super::chars::{
    at, hex_digit, is_alpha, is_blank, is_blankz, is_break, is_printable, is_space, width,
};
use super::{Emitter, BEST_INDENT};

impl<'a> Emitter<'a> {
    /// `yaml_emitter_write_indent`.
    pub(super) fn write_indent(&mut self) {
        let indent = self.indent.max(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        if self.foot_indent == indent {
            self.put_break();
        }
        if self.column < indent {
            // put(' ') until the column is reached.
            let n = (indent - self.column) as usize;
            self.out.resize(self.out.len() + n, b' ');
            self.column = indent;
        }
        self.whitespace = true;
        self.foot_indent = -1;
    }

    /// `yaml_emitter_write_indicator`.
    pub(super) fn write_indicator(
        &mut self,
        indicator: &[u8],
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(b' ');
        }
        self.write_all(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    /// `yaml_emitter_write_tag_content`: URI characters as they are, the
    /// rest percent-encoded byte by byte.
    pub(super) fn write_tag_content(&mut self, value: &[u8], need_whitespace: bool) {
        if need_whitespace && !self.whitespace {
            self.put(b' ');
        }
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            let must_write = matches!(
                c,
                b';' | b'/'
                    | b'?'
                    | b':'
                    | b'@'
                    | b'&'
                    | b'='
                    | b'+'
                    | b'$'
                    | b','
                    | b'_'
                    | b'.'
                    | b'~'
                    | b'*'
                    | b'\''
                    | b'('
                    | b')'
                    | b'['
                    | b']'
            ) || is_alpha(c);
            if must_write {
                self.write(value, &mut i);
            } else {
                let w = width(c).max(1);
                for _ in 0..w {
                    let Some(&octet) = value.get(i) else { break };
                    i += 1;
                    self.put(b'%');
                    self.put(hex_digit(octet >> 4));
                    self.put(hex_digit(octet & 0x0f));
                }
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_plain_scalar`.
    pub(super) fn write_plain_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        if !value.is_empty() && !self.whitespace {
            self.put(b' ');
        }
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if value[i] == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                // A run of ordinary characters at once.
                let start = i;
                let mut chars = 0;
                while i < value.len() && value[i] != b' ' && !is_break(value, i) {
                    i += width(value[i]).max(1);
                    chars += 1;
                }
                let end = i.min(value.len());
                self.out.extend_from_slice(&value[start..end]);
                self.column += chars;
                i = end;
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if !value.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
    }

    /// `yaml_emitter_write_single_quoted_scalar`.
    pub(super) fn write_single_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        self.write_indicator(b"'", true, false, false);
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if value[i] == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i < value.len() - 1
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if value[i] == b'\'' {
                    self.put(b'\'');
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator(b"'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_double_quoted_scalar`.
    pub(super) fn write_double_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        let mut spaces = false;
        self.write_indicator(b"\"", true, false, false);
        // [Go] is_bom looks at the start of the value, not at i: a value
        // starting with a BOM has every character escaped.
        let bom = value.starts_with(&[0xEF, 0xBB, 0xBF]);
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            if bom || !is_printable(value, i) || is_break(value, i) || c == b'"' || c == b'\\' {
                let (mut w, mut v): (usize, u32) = if c & 0x80 == 0 {
                    (1, u32::from(c & 0x7F))
                } else if c & 0xE0 == 0xC0 {
                    (2, u32::from(c & 0x1F))
                } else if c & 0xF0 == 0xE0 {
                    (3, u32::from(c & 0x0F))
                } else {
                    (4, u32::from(c & 0x07))
                };
                for k in 1..w {
                    v = (v << 6) + u32::from(at(value, i + k) & 0x3F);
                }
                i += w;
                self.put(b'\\');
                let esc = match v {
                    0x00 => Some(b'0'),
                    0x07 => Some(b'a'),
                    0x08 => Some(b'b'),
                    0x09 => Some(b't'),
                    0x0A => Some(b'n'),
                    0x0B => Some(b'v'),
                    0x0C => Some(b'f'),
                    0x0D => Some(b'r'),
                    0x1B => Some(b'e'),
                    0x22 => Some(b'"'),
                    0x5C => Some(b'\\'),
                    0x85 => Some(b'N'),
                    0xA0 => Some(b'_'),
                    0x2028 => Some(b'L'),
                    0x2029 => Some(b'P'),
                    _ => None,
                };
                match esc {
                    Some(e) => self.put(e),
                    None => {
                        if v <= 0xFF {
                            self.put(b'x');
                            w = 2;
                        } else if v <= 0xFFFF {
                            self.put(b'u');
                            w = 4;
                        } else {
                            self.put(b'U');
                            w = 8;
                        }
                        for k in (0..w).rev() {
                            self.put(hex_digit(((v >> (k * 4)) & 0x0F) as u8));
                        }
                    }
                }
                spaces = false;
            } else if c == b' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i < value.len() - 1
                {
                    self.write_indent();
                    if is_space(value, i + 1) {
                        self.put(b'\\');
                    }
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else {
                self.write(value, &mut i);
                spaces = false;
            }
        }
        self.write_indicator(b"\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// `yaml_emitter_write_block_scalar_hints`: an indentation indicator
    /// when the value starts with a space or break, and the chomping
    /// indicator (`-` no final break, none for one, `+` for more).
    fn write_block_scalar_hints(&mut self, value: &[u8]) {
        if is_space(value, 0) || is_break(value, 0) {
            let hint = [b'0' + BEST_INDENT as u8];
            self.write_indicator(&hint, false, false, false);
        }
        let mut chomp = None;
        if value.is_empty() {
            chomp = Some(b'-');
        } else {
            let mut i = value.len() - 1;
            while i > 0 && value[i] & 0xC0 == 0x80 {
                i -= 1;
            }
            if !is_break(value, i) {
                chomp = Some(b'-');
            } else if i == 0 {
                chomp = Some(b'+');
            } else {
                i -= 1;
                while i > 0 && value[i] & 0xC0 == 0x80 {
                    i -= 1;
                }
                if is_break(value, i) {
                    chomp = Some(b'+');
                }
            }
        }
        if let Some(c) = chomp {
            self.write_indicator(&[c], false, false, false);
        }
    }

    /// `yaml_emitter_write_literal_scalar`.
    pub(super) fn write_literal_scalar(&mut self, value: &[u8]) {
        self.write_indicator(b"|", true, false, false);
        self.write_block_scalar_hints(value);
        self.process_line_comment_linebreak(true);
        self.whitespace = true;
        let mut breaks = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                // The rest of the line at once.
                let start = i;
                let mut chars = 0;
                while i < value.len() && !is_break(value, i) {
                    i += width(value[i]).max(1);
                    chars += 1;
                }
                let end = i.min(value.len());
                self.out.extend_from_slice(&value[start..end]);
                self.column += chars;
                i = end;
                self.indention = false;
                breaks = false;
            }
        }
    }

    /// `yaml_emitter_write_folded_scalar`.
    pub(super) fn write_folded_scalar(&mut self, value: &[u8]) {
        self.write_indicator(b">", true, false, false);
        self.write_block_scalar_hints(value);
        self.process_line_comment_linebreak(true);
        self.whitespace = true;

        let mut breaks = true;
        let mut leading_spaces = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                if !breaks && !leading_spaces && value[i] == b'\n' {
                    // [Go] k starts at 0, not i: it skips the breaks that
                    // start the value, not those that follow this one.
                    let mut k = 0;
                    while is_break(value, k) {
                        k += width(value[k]).max(1);
                    }
                    if !is_blankz(value, k) {
                        self.put_break();
                    }
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    leading_spaces = is_blank(value, i);
                }
                if !breaks
                    && is_space(value, i)
                    && !is_space(value, i + 1)
                    && self.column > self.best_width
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                self.indention = false;
                breaks = false;
            }
        }
    }

    /// `yaml_emitter_write_comment`: each line gets `# ` unless it starts
    /// with `#`; lines after the first are indented.
    pub(super) fn write_comment(&mut self, comment: &[u8]) {
        let mut breaks = false;
        let mut pound = false;
        let mut i = 0;
        while i < comment.len() {
            if is_break(comment, i) {
                self.write_break(comment, &mut i);
                breaks = true;
                pound = false;
            } else {
                if breaks {
                    self.write_indent();
                }
                if !pound {
                    if comment[i] != b'#' {
                        self.put(b'#');
                        self.put(b' ');
                    }
                    pound = true;
                }
                self.write(comment, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
        if !breaks {
            self.put_break();
        }
        self.whitespace = true;
    }
}
