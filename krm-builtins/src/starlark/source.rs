//! `while` for the Rust interpreter. Go Starlark with `AllowRecursion`
//! (the catalog's setting) runs `while` loops; the `starlark` crate
//! reserves the word. Each `while COND:` becomes
//!
//! ```text
//! for _krm_n in range(2147483647):
//!     if not _krm_while(_krm_n, (COND)): break
//!     BODY
//! ```
//!
//! which runs the same (`break` and `continue` included; `_krm_while`
//! fails a loop that would go past the range rather than stop it
//! quietly). The inserted line is counted back out of the line numbers
//! errors give ([`Rewritten::original_line`]).

/// The program as the interpreter reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    pub text: String,
    /// The user's line (1-based) of each line of `text`; empty when
    /// nothing was rewritten.
    lines: Vec<usize>,
}

impl Rewritten {
    /// The user's line for line `line` (0-based) of the rewritten text,
    /// 1-based.
    pub fn original_line(&self, line: usize) -> usize {
        self.lines.get(line).copied().unwrap_or(line + 1)
    }
}

/// Which string the lexer is in.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
enum Quote {
    #[default]
    None,
    Single(char),
    Triple(char),
}

/// A line's leading blanks.
fn indentation(line: &str) -> &str {
    line.get(..line.len() - line.trim_start().len())
        .unwrap_or_default()
}

/// Tabs in indentation as Go Starlark reads them (to the next multiple
/// of 8 columns), as spaces: the Rust lexer refuses tabs there. The
/// lines stay where they were.
fn expand_tabs(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains('\t') {
        return src.into();
    }
    let mut out = String::with_capacity(src.len() + 64);
    let mut lexer = Lexer::default();
    let mut continued = false;
    for (n, line) in src.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let at_start = lexer.quote == Quote::None && lexer.depth == 0 && !continued;
        let indent = indentation(line);
        if at_start && indent.contains('\t') {
            let mut col = 0;
            for c in indent.chars() {
                col = if c == '\t' {
                    col + 8 - col % 8
                } else {
                    col + 1
                };
            }
            out.extend(std::iter::repeat_n(' ', col));
            out.push_str(line.get(indent.len()..).unwrap_or_default());
        } else {
            out.push_str(line);
        }
        continued = scan(line, &mut lexer);
    }
    out.into()
}

pub fn rewrite(src: &str) -> Rewritten {
    let src = expand_tabs(src);
    if !src.contains("while") {
        return Rewritten {
            text: src.into_owned(),
            lines: Vec::new(),
        };
    }
    let lines: Vec<&str> = src.split('\n').collect();
    let mut out = String::with_capacity(src.len() + 64);
    let mut map = Vec::with_capacity(lines.len() + 4);
    let mut lexer = Lexer::default();
    let mut continued = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines.get(i).copied().unwrap_or_default();
        let at_start = lexer.quote == Quote::None && lexer.depth == 0 && !continued;
        if at_start {
            if let Some(header) = while_header(&lines, i) {
                let indent = indentation(line);
                out.push_str(indent);
                out.push_str("for _krm_n in range(2147483647):");
                map.push(i + 1);
                let check = |ind: &str| {
                    format!(
                        "{ind}if not _krm_while(_krm_n, ({})): break",
                        header.cond.trim()
                    )
                };
                let rest = header.rest.trim();
                if rest.is_empty() || rest.starts_with('#') {
                    if !rest.is_empty() {
                        out.push(' ');
                        out.push_str(rest);
                    }
                    out.push('\n');
                    let body_indent = lines
                        .iter()
                        .skip(header.last + 1)
                        .find(|l| {
                            let t = l.trim_start();
                            !t.is_empty() && !t.starts_with('#')
                        })
                        .map(|l| indentation(l))
                        .unwrap_or("");
                    let body_indent = if body_indent.len() > indent.len() {
                        body_indent.to_owned()
                    } else {
                        format!("{indent}    ")
                    };
                    push_mapped(&mut out, &mut map, &check(&body_indent), i + 1);
                } else {
                    out.push('\n');
                    let inner = format!("{indent}    ");
                    push_mapped(&mut out, &mut map, &check(&inner), i + 1);
                    push_mapped(
                        &mut out,
                        &mut map,
                        &format!("{inner}{rest}"),
                        header.last + 1,
                    );
                }
                // What follows the colon may open a string or a bracket.
                continued = scan(&header.rest, &mut lexer);
                i = header.last + 1;
                continue;
            }
        }
        continued = scan(line, &mut lexer);
        out.push_str(line);
        map.push(i + 1);
        i += 1;
        if i < lines.len() {
            out.push('\n');
        }
    }
    Rewritten {
        text: out,
        lines: map,
    }
}

/// Appends `text` (maybe several lines) and a newline, each line mapped
/// to `line`.
fn push_mapped(out: &mut String, map: &mut Vec<usize>, text: &str, line: usize) {
    for l in text.split('\n') {
        out.push_str(l);
        out.push('\n');
        map.push(line);
    }
}

struct Header {
    cond: String,
    /// After the header's `:` on its last line.
    rest: String,
    /// The header's last line.
    last: usize,
}

/// A `while COND:` header starting line `first`, if there is one.
fn while_header(lines: &[&str], first: usize) -> Option<Header> {
    let line = lines.get(first)?;
    let t = line.trim_start();
    let after = t.strip_prefix("while")?;
    if after
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
    {
        return None;
    }
    let mut cond = String::new();
    let mut lexer = Lexer::default();
    let mut text = after;
    let mut n = first;
    loop {
        if let Some(at) = lexer.run(text, true) {
            cond.push_str(text.get(..at).unwrap_or_default());
            return Some(Header {
                cond,
                rest: text.get(at + 1..).unwrap_or_default().to_owned(),
                last: n,
            });
        }
        // The line ended before the colon: the header goes on only inside
        // brackets, a triple-quoted string or after a backslash.
        let joined = lexer.depth > 0
            || matches!(lexer.quote, Quote::Triple(_))
            || text.trim_end_matches('\r').ends_with('\\');
        if !joined {
            return None;
        }
        let line = text.trim_end_matches('\r');
        cond.push_str(line.strip_suffix('\\').unwrap_or(line));
        cond.push('\n');
        n += 1;
        text = lines.get(n)?;
    }
}

/// Where the lexer is between characters: in which string, how deep in
/// brackets.
#[derive(Debug, Clone, Copy, Default)]
struct Lexer {
    quote: Quote,
    depth: usize,
}

impl Lexer {
    /// Moves over `text` (one physical line, or what is left of it); with
    /// `colon`, stops at a `:` outside strings and brackets and gives its
    /// index.
    fn run(&mut self, text: &str, colon: bool) -> Option<usize> {
        let triple = |at: usize, q: char| {
            text.get(at..)
                .is_some_and(|t| t.starts_with(&format!("{q}{q}{q}")))
        };
        let mut chars = text.char_indices();
        while let Some((at, c)) = chars.next() {
            match self.quote {
                Quote::None => match c {
                    '#' => break,
                    '(' | '[' | '{' => self.depth += 1,
                    ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                    ':' if colon && self.depth == 0 => return Some(at),
                    '\'' | '"' => {
                        if triple(at, c) {
                            chars.next();
                            chars.next();
                            self.quote = Quote::Triple(c);
                        } else {
                            self.quote = Quote::Single(c);
                        }
                    }
                    _ => {}
                },
                Quote::Single(q) => match c {
                    '\\' => {
                        chars.next();
                    }
                    c if c == q => self.quote = Quote::None,
                    _ => {}
                },
                Quote::Triple(q) => match c {
                    '\\' => {
                        chars.next();
                    }
                    c if c == q && triple(at, q) => {
                        chars.next();
                        chars.next();
                        self.quote = Quote::None;
                    }
                    _ => {}
                },
            }
        }
        None
    }
}

/// Moves the lexer over one physical line; whether the next line goes on
/// this one's logical line after a backslash.
fn scan(line: &str, lexer: &mut Lexer) -> bool {
    lexer.run(line, false);
    // A one-quote string cannot run past its line.
    if matches!(lexer.quote, Quote::Single(_)) {
        lexer.quote = Quote::None;
    }
    lexer.quote == Quote::None && line.trim_end().ends_with('\\') && !line.contains('#')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_while_becomes_a_bounded_for_with_its_check_first() {
        let r = rewrite("x = 3\nwhile x > 0:\n  x -= 1\nprint(x)\n");
        assert_eq!(
            r.text,
            "x = 3\nfor _krm_n in range(2147483647):\n  if not _krm_while(_krm_n, (x > 0)): break\n  x -= 1\nprint(x)\n"
        );
        // `print(x)` is line 5 of the text, the user's 4.
        assert_eq!(r.original_line(4), 4);
        assert_eq!(r.original_line(2), 2);
    }

    #[test]
    fn one_line_bodies_comments_strings_and_brackets() {
        let r = rewrite("def f(n):\n    while n: n -= 1 # down\n    return n\n");
        assert_eq!(
            r.text,
            "def f(n):\n    for _krm_n in range(2147483647):\n        if not _krm_while(_krm_n, (n)): break\n        n -= 1 # down\n    return n\n"
        );
        assert_eq!(r.original_line(4), 3);
        // Not a loop: in a string, a longer name, inside brackets.
        for src in [
            "s = '''\nwhile x:\n'''\n",
            "whilex = 1\n",
            "x = [\nwhile y:\n]\n",
        ] {
            assert_eq!(rewrite(src).text, src);
        }
        // What follows a header's colon is scanned: a string it opens
        // hides the `while` inside.
        let src = "while x: s = \"\"\"\nwhile y:\n\"\"\"\n";
        let r = rewrite(src);
        assert!(
            r.text.ends_with("    s = \"\"\"\nwhile y:\n\"\"\"\n"),
            "{}",
            r.text
        );
        // CRLF lines and a backslash inside the header.
        let r = rewrite("while a and \\\r\n  b:\r\n  pass\r\n");
        assert!(r.text.starts_with("for _krm_n"), "{}", r.text);
        // Tabs in indentation go to the next multiple of 8; not in strings.
        let r = rewrite("def f():\n\treturn 1\ns = '''\n\tx'''\n");
        assert_eq!(r.text, "def f():\n        return 1\ns = '''\n\tx'''\n");
        let r = rewrite("while d[\"a:b\"] or (\n  x):\n  pass\n");
        assert!(r
            .text
            .contains("if not _krm_while(_krm_n, (d[\"a:b\"] or (\n  x))): break"));
    }
}
