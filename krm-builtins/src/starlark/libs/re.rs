//! `re.star` (starlib's `re`, on Go's `regexp`): `compile(pattern,
//! flags=0)`, `findall(pattern, text, flags=0)`, `match(pattern, text,
//! flags=0)`, `search(pattern, text, flags=0)`, `split(pattern, text,
//! maxsplit=0, flags=0)`, `sub(pattern, repl, text, count=0, flags=0)`.
//!
//! What each returns is what starlib's returns, not Python's: `findall`
//! a tuple of the whole matches (no groups), `match` a list with a tuple
//! (the match, then its groups) for every match anywhere in the text, or
//! None when there is none, `search` `[start, end]` (byte offsets) of the
//! first match or None, `split` a tuple, `sub` a string with `$1` and
//! `${name}` replaced (Go's template syntax, not Python's `\1`). `flags`
//! is accepted and unused, as in starlib. Where starlib ignores
//! arguments, they are honoured as documented: `split`'s `maxsplit` (at
//! most that many splits, 0 for all) and `sub`'s `count` (0 for all).
//! `compile` gives a struct: `pattern`, and `match`, `search`,
//! `findall`, `split(text, maxsplit=0)` and `sub(repl, text, count=0)`
//! bound to it.
//!
//! Patterns are RE2's, run by the `regex` crate; Go's ASCII-only `\d`,
//! `\w`, `\s` (and their negations) are kept ASCII, and `\Q...\E` is
//! quoted, by rewriting them before compiling. `\b` and `\B` are Unicode
//! word boundaries here (ASCII in Go), which differ only next to
//! non-ASCII letters and digits.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::{Captures, Regex};
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::list::AllocList;
use starlark::values::tuple::AllocTuple;
use starlark::values::{Heap, Value};

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("_re", members);
}

/// The module's symbol, and `compile`'s patterns: structs of closures
/// over the pattern.
pub(super) const PRELUDE: &str = r#"
def _compile(pattern, flags = 0):
    _re.compile(pattern, flags)

    def match(text, flags = 0):
        return _re.match(pattern, text, flags)

    def search(text, flags = 0):
        return _re.search(pattern, text, flags)

    def findall(text, flags = 0):
        return _re.findall(pattern, text, flags)

    def split(text, maxsplit = 0, flags = 0):
        return _re.split(pattern, text, maxsplit, flags)

    def sub(repl, text, count = 0, flags = 0):
        return _re.sub(pattern, repl, text, count, flags)

    return struct(
        pattern = pattern,
        match = match,
        search = search,
        findall = findall,
        split = split,
        sub = sub,
    )

re = struct(
    compile = _compile,
    findall = _re.findall,
    match = _re.match,
    search = _re.search,
    split = _re.split,
    sub = _re.sub,
)
"#;

/// Patterns compiled in this run (a program calls `re.sub(p, ...)` in a
/// loop over its resources).
const CACHE_SIZE: usize = 64;

thread_local! {
    static CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// Go's class escapes as ASCII classes, in a class (`[...]`) or outside.
fn perl_class(c: char, in_class: bool) -> Option<&'static str> {
    Some(match (c, in_class) {
        ('d', false) => "[0-9]",
        ('D', false) => "[^0-9]",
        ('w', false) => "[0-9A-Za-z_]",
        ('W', false) => "[^0-9A-Za-z_]",
        ('s', false) => r"[\t\n\f\r ]",
        ('S', false) => r"[^\t\n\f\r ]",
        ('d', true) => "0-9",
        ('D', true) => "[:^digit:]",
        ('w', true) => "0-9A-Za-z_",
        ('W', true) => "[:^word:]",
        ('s', true) => r"\t\n\f\r ",
        ('S', true) => "[:^space:]",
        _ => return None,
    })
}

/// A Go (RE2) pattern in the `regex` crate's syntax: Go's ASCII Perl
/// classes, `\Q...\E`, and a class's `[`, `&` and `~`, which are literal
/// in Go and operators in a Rust class.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    // Right after `[` or `[^`, where `]` is literal.
    let mut class_start = false;
    while let Some(c) = chars.next() {
        if c == '\\' {
            let Some(n) = chars.next() else {
                out.push('\\');
                break;
            };
            if let Some(class) = perl_class(n, in_class) {
                out.push_str(class);
            } else if n == 'Q' && !in_class {
                let mut literal = String::new();
                while let Some(q) = chars.next() {
                    if q == '\\' && chars.peek() == Some(&'E') {
                        chars.next();
                        break;
                    }
                    literal.push(q);
                }
                out.push_str(&regex::escape(&literal));
            } else {
                out.push('\\');
                out.push(n);
            }
            class_start = false;
            continue;
        }
        if !in_class {
            out.push(c);
            if c == '[' {
                in_class = true;
                class_start = true;
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            continue;
        }
        match c {
            ']' if !class_start => in_class = false,
            '[' if chars.peek() == Some(&':') => {
                // A named ASCII class, `[:alpha:]`, copied whole.
                out.push('[');
                for k in chars.by_ref() {
                    out.push(k);
                    if k == ']' {
                        break;
                    }
                }
                class_start = false;
                continue;
            }
            '[' | '&' | '~' => out.push('\\'),
            _ => {}
        }
        out.push(c);
        class_start = false;
    }
    out
}

/// Go's `regexp.Compile` message for a pattern the crate refuses.
fn compile_error(function: &str, pattern: &str, e: &regex::Error) -> anyhow::Error {
    let detail = match e {
        regex::Error::Syntax(s) => {
            let last = s
                .lines()
                .last()
                .unwrap_or("invalid pattern")
                .trim_start_matches("error: ");
            match last {
                "unclosed group" => "missing closing )",
                "unopened group" => "unexpected )",
                "unclosed character class" => "missing closing ]",
                "repetition operator missing expression" => {
                    "missing argument to repetition operator"
                }
                "unrecognized escape sequence" => "invalid escape sequence",
                "incomplete escape sequence, reached end of pattern prematurely" => {
                    "trailing backslash at end of expression"
                }
                other => other,
            }
            .to_owned()
        }
        _ => "expression too large".to_owned(),
    };
    anyhow::anyhow!("re.{function}: error parsing regexp: {detail}: `{pattern}`")
}

fn regex_for(function: &str, pattern: &str) -> anyhow::Result<Regex> {
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = regex::RegexBuilder::new(&translate(pattern))
        .size_limit(1 << 22)
        .build()
        .map_err(|e| compile_error(function, pattern, &e))?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_SIZE {
            c.clear();
        }
        c.insert(pattern.to_owned(), re.clone());
    });
    Ok(re)
}

/// Go's successive matches (`FindAll...`, at most `limit` when it is
/// some): an empty match right where the previous match ended is not
/// one.
fn go_matches<'t>(re: &Regex, text: &'t str, limit: Option<usize>) -> Vec<Captures<'t>> {
    let mut out = Vec::new();
    let mut prev_end = None;
    for caps in re.captures_iter(text) {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        let Some(m) = caps.get(0) else { continue };
        let accept = !(m.is_empty() && prev_end == Some(m.start()));
        prev_end = Some(m.end());
        if accept {
            out.push(caps);
        }
    }
    out
}

/// A non-negative count as a limit (0 or less: none).
fn limit(n: i64) -> Option<usize> {
    usize::try_from(n).ok().filter(|n| *n > 0)
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn compile(
        #[starlark(require = pos)] pattern: &str,
        #[starlark(default = 0)] flags: i64,
    ) -> anyhow::Result<starlark::values::none::NoneType> {
        let _ = flags;
        regex_for("compile", pattern)?;
        Ok(starlark::values::none::NoneType)
    }

    fn findall<'v>(
        pattern: &str,
        text: &str,
        #[starlark(default = 0)] flags: i64,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let _ = flags;
        let re = regex_for("findall", pattern)?;
        let found: Vec<&str> = go_matches(&re, text, None)
            .iter()
            .filter_map(|c| c.get(0).map(|m| m.as_str()))
            .collect();
        Ok(heap.alloc(AllocTuple(found)))
    }

    fn r#match<'v>(
        pattern: &str,
        text: &str,
        #[starlark(default = 0)] flags: i64,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let _ = flags;
        let re = regex_for("match", pattern)?;
        let matches = go_matches(&re, text, None);
        if matches.is_empty() {
            return Ok(Value::new_none());
        }
        let rows: Vec<Value<'v>> = matches
            .iter()
            .map(|caps| {
                // A group that took no part reads "", as in Go.
                let groups: Vec<&str> = caps.iter().map(|g| g.map_or("", |m| m.as_str())).collect();
                heap.alloc(AllocTuple(groups))
            })
            .collect();
        Ok(heap.alloc(AllocList(rows)))
    }

    fn search<'v>(
        pattern: &str,
        text: &str,
        #[starlark(default = 0)] flags: i64,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let _ = flags;
        let re = regex_for("search", pattern)?;
        Ok(match re.find(text) {
            Some(m) => heap.alloc(AllocList([m.start(), m.end()])),
            None => Value::new_none(),
        })
    }

    fn split<'v>(
        pattern: &str,
        text: &str,
        #[starlark(default = 0)] maxsplit: i64,
        #[starlark(default = 0)] flags: i64,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let _ = flags;
        let re = regex_for("split", pattern)?;
        // Go's `Regexp.Split(text, n)`, n pieces being maxsplit + 1.
        if !pattern.is_empty() && text.is_empty() {
            return Ok(heap.alloc(AllocTuple([""])));
        }
        let pieces = limit(maxsplit).map(|m| m.saturating_add(1));
        let mut out: Vec<&str> = Vec::new();
        let (mut begin, mut end) = (0, 0);
        for caps in go_matches(&re, text, pieces) {
            if pieces.is_some_and(|n| out.len() + 1 == n) {
                break;
            }
            let Some(m) = caps.get(0) else { continue };
            end = m.start();
            if m.end() != 0 {
                out.push(text.get(begin..end).unwrap_or(""));
            }
            begin = m.end();
        }
        if end != text.len() {
            out.push(text.get(begin..).unwrap_or(""));
        }
        Ok(heap.alloc(AllocTuple(out)))
    }

    fn sub(
        pattern: &str,
        repl: &str,
        text: &str,
        #[starlark(default = 0)] count: i64,
        #[starlark(default = 0)] flags: i64,
    ) -> anyhow::Result<String> {
        let _ = flags;
        let re = regex_for("sub", pattern)?;
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for caps in go_matches(&re, text, limit(count)) {
            let Some(m) = caps.get(0) else { continue };
            out.push_str(text.get(last..m.start()).unwrap_or(""));
            caps.expand(repl, &mut out);
            last = m.end();
        }
        out.push_str(text.get(last..).unwrap_or(""));
        Ok(out)
    }
}
