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

/// Where the lexer is, between characters.
#[derive(Clone, Copy, PartialEq)]
enum Quote {
    None,
    Single(char),
    Triple(char),
}

pub fn rewrite(src: &str) -> Rewritten {
    if !src.contains("while") {
        return Rewritten {
            text: src.to_owned(),
            lines: Vec::new(),
        };
    }
    let lines: Vec<&str> = src.split('\n').collect();
    let mut out = String::with_capacity(src.len() + 64);
    let mut map = Vec::with_capacity(lines.len() + 4);
    let mut quote = Quote::None;
    let mut depth = 0usize;
    let mut continued = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines.get(i).copied().unwrap_or_default();
        let at_start = quote == Quote::None && depth == 0 && !continued;
        if at_start {
            if let Some(header) = while_header(&lines, i) {
                let indent = &line[..line.len() - line.trim_start().len()];
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
                        .map(|l| &l[..l.len() - l.trim_start().len()])
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
                i = header.last + 1;
                continue;
            }
        }
        scan(line, &mut quote, &mut depth, &mut continued);
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
    let mut quote = Quote::None;
    let mut depth = 0usize;
    let mut text = after;
    let mut n = first;
    loop {
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match quote {
                Quote::None => match c {
                    '#' => break,
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth = depth.saturating_sub(1),
                    ':' if depth == 0 => {
                        cond.push_str(&text[..at]);
                        return Some(Header {
                            cond,
                            rest: text[at + 1..].to_owned(),
                            last: n,
                        });
                    }
                    '\'' | '"' => {
                        let triple = text[at..].starts_with(&format!("{c}{c}{c}"));
                        if triple {
                            chars.next();
                            chars.next();
                            quote = Quote::Triple(c);
                        } else {
                            quote = Quote::Single(c);
                        }
                    }
                    _ => {}
                },
                Quote::Single(q) => match c {
                    '\\' => {
                        chars.next();
                    }
                    c if c == q => quote = Quote::None,
                    _ => {}
                },
                Quote::Triple(q) => match c {
                    '\\' => {
                        chars.next();
                    }
                    c if c == q && text[at..].starts_with(&format!("{q}{q}{q}")) => {
                        chars.next();
                        chars.next();
                        quote = Quote::None;
                    }
                    _ => {}
                },
            }
        }
        // The line ended before the colon: the header goes on only inside
        // brackets, a triple-quoted string or after a backslash.
        let joined = depth > 0 || matches!(quote, Quote::Triple(_)) || text.ends_with('\\');
        if !joined {
            return None;
        }
        cond.push_str(text.strip_suffix('\\').unwrap_or(text));
        cond.push('\n');
        n += 1;
        text = lines.get(n)?;
    }
}

/// Moves the lexer state over one physical line.
fn scan(line: &str, quote: &mut Quote, depth: &mut usize, continued: &mut bool) {
    let mut chars = line.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match *quote {
            Quote::None => match c {
                '#' => break,
                '(' | '[' | '{' => *depth += 1,
                ')' | ']' | '}' => *depth = depth.saturating_sub(1),
                '\'' | '"' => {
                    if line[at..].starts_with(&format!("{c}{c}{c}")) {
                        chars.next();
                        chars.next();
                        *quote = Quote::Triple(c);
                    } else {
                        *quote = Quote::Single(c);
                    }
                }
                _ => {}
            },
            Quote::Single(q) => match c {
                '\\' => {
                    chars.next();
                }
                c if c == q => *quote = Quote::None,
                _ => {}
            },
            Quote::Triple(q) => match c {
                '\\' => {
                    chars.next();
                }
                c if c == q && line[at..].starts_with(&format!("{q}{q}{q}")) => {
                    chars.next();
                    chars.next();
                    *quote = Quote::None;
                }
                _ => {}
            },
        }
    }
    // A one-quote string cannot run past its line.
    if matches!(*quote, Quote::Single(_)) {
        *quote = Quote::None;
    }
    *continued = *quote == Quote::None && line.trim_end().ends_with('\\') && !line.contains('#');
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
            "x = [\nwhile_ok]\n",
        ] {
            assert_eq!(rewrite(src).text, src);
        }
        let r = rewrite("while d[\"a:b\"] or (\n  x):\n  pass\n");
        assert!(r
            .text
            .contains("if not _krm_while(_krm_n, (d[\"a:b\"] or (\n  x))): break"));
    }
}
