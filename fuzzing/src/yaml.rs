//! YAML-ish text: token soups, well-formed trees (block and flow styles,
//! comments, anchors and aliases, tags, every scalar style), mutated seed
//! files, and ResourceLists built from them.
//!
//! Random bytes alone rarely get past a YAML scanner's first line; these
//! reach the parser, the composer and the emitter, and their mutations the
//! error paths next to them.

use std::fmt::Write as _;
use std::path::Path;

use crate::arbitrary::Result;
use crate::bytes::mutate;
use crate::Unstructured;

/// Pieces of YAML syntax, for the soups and for mutations.
pub const FRAGMENTS: &[&str] = &[
    "\n",
    "\n  ",
    "\n    ",
    "\n- ",
    "\n  - ",
    "- ",
    "-",
    "? ",
    ": ",
    ":",
    ",",
    " ",
    "  ",
    "\t",
    "\r\n",
    "\r",
    "\u{feff}",
    "---",
    "--- ",
    "\n---\n",
    "...",
    "\n...\n",
    "%YAML 1.1\n",
    "%YAML 1.2\n",
    "%TAG !e! tag:e.com,2000:\n",
    "%FOO bar\n",
    "#",
    " #",
    " # c",
    "# head\n",
    "\n# foot\n",
    "&a ",
    "&b ",
    "&a",
    "*a",
    "*b",
    "*a ",
    "*",
    "&",
    "<<: *a",
    "<<: [*a, *b]",
    "!!str ",
    "!!int ",
    "!!map ",
    "!!seq ",
    "!!binary ",
    "!!null ",
    "!t ",
    "!e!x ",
    "!<tag:x> ",
    "!",
    "!!",
    "[",
    "]",
    "{",
    "}",
    "[]",
    "{}",
    "[a, b]",
    "{a: b}",
    "'",
    "''",
    "'a b'",
    "\"",
    "\"\\n\\t\\u00e9\\x41\\U0001F600\"",
    "\"\\",
    "\\",
    "|",
    "|-",
    "|+",
    "|2",
    "|9",
    ">",
    ">-",
    ">+1",
    "|\n  x\n",
    ">\n  a\n\n  b\n",
    "key",
    "value",
    "a",
    "b",
    "a: b",
    "a:b",
    "1",
    "-1",
    "0",
    "0x1F",
    "0o17",
    "017",
    "1_000",
    "1.5e3",
    ".inf",
    "-.Inf",
    ".NaN",
    "true",
    "False",
    "yes",
    "null",
    "~",
    "2001-12-14",
    "é",
    "日本",
    "😀",
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\u{0}",
    "\u{7}",
    "\u{7f}",
    "\u{a0}",
    "\u{fffd}",
    "@",
    "`",
    "%",
    "=",
    "kind: ResourceList",
    "apiVersion: v1",
    "items:",
    "results:",
    "metadata:",
    "name: x",
    "annotations:",
    "config.kubernetes.io/index: '0'",
];

/// Plain scalars worth having: every type yaml.v3 resolves, and look-alikes.
const WORDS: &[&str] = &[
    "a",
    "b",
    "key",
    "value",
    "x y",
    "1",
    "-1",
    "0",
    "007",
    "0x1F",
    "0o17",
    "0b101",
    "1_000",
    "1.5",
    "-2.5e-3",
    "1e3",
    ".5",
    ".inf",
    "-.Inf",
    ".nan",
    "true",
    "False",
    "TRUE",
    "yes",
    "No",
    "on",
    "off",
    "y",
    "n",
    "null",
    "Null",
    "~",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "12:30:45",
    "a-b",
    "a.b",
    "a/b",
    "é",
    "日本語",
    "😀",
    "<<",
    "=",
    "-",
    "?x",
    ":x",
    "a:b",
    "a#b",
    "a\u{a0}b",
    "ResourceList",
    "config.kubernetes.io/v1",
    "path",
    "message",
];

/// Escapes of a double-quoted scalar, valid or not.
const ESCAPES: &[&str] = &[
    "\\n",
    "\\t",
    "\\\\",
    "\\\"",
    "\\/",
    "\\0",
    "\\a",
    "\\e",
    "\\N",
    "\\_",
    "\\L",
    "\\P",
    "\\x41",
    "\\u00e9",
    "\\U0001F600",
    "\\ud800",
    "\\x",
    "\\u12",
    "\\q",
    "\\ ",
];

/// The seed files `dir/*.ext`, by name.
pub fn seeds(dir: &Path, ext: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("seed directory {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("seed {}: {e}", p.display())))
        .collect();
    assert!(!seeds.is_empty(), "no *.{ext} seed in {}", dir.display());
    seeds
}

/// YAML-ish text of at most `max` bytes: a seed mutated, a tree (sometimes
/// mutated), a soup of [`FRAGMENTS`], or a splice of those.
pub fn text(u: &mut Unstructured<'_>, seeds: &[Vec<u8>], max: usize) -> Result<String> {
    let bytes = match u.int_in_range(0..=9u8)? {
        0 | 1 => soup(u, max)?.into_bytes(),
        2..=4 => tree(u, max)?.into_bytes(),
        5 => {
            let t = tree(u, max)?;
            let other = u.choose(seeds)?;
            mutate(u, t.as_bytes(), FRAGMENTS, other, max)?
        }
        6 => u.choose(seeds)?.clone(),
        _ => {
            let seed = u.choose(seeds)?;
            let other = u.choose(seeds)?;
            mutate(u, seed, FRAGMENTS, other, max)?
        }
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    // Whole-text variants a mutation seldom makes: CRLF line ends, a BOM.
    if u.ratio(1, 12)? {
        text = text.replace('\n', "\r\n");
    }
    if u.ratio(1, 20)? {
        text.insert(0, '\u{feff}');
    }
    truncate(&mut text, max);
    Ok(text)
}

/// Cuts `s` to at most `max` bytes, on a char boundary.
pub fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// [`FRAGMENTS`] strung together, some repeated (long runs of `[` or of
/// indentation).
pub fn soup(u: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let mut s = String::new();
    for _ in 0..u.int_in_range(0..=200u16)? {
        let piece = if u.ratio(1, 5)? {
            *u.choose(WORDS)?
        } else {
            *u.choose(FRAGMENTS)?
        };
        let times = if u.ratio(1, 20)? {
            u.int_in_range(2..=300u16)?
        } else {
            1
        };
        for _ in 0..times {
            s.push_str(piece);
        }
        if s.len() >= max {
            break;
        }
    }
    truncate(&mut s, max);
    Ok(s)
}

/// A stream of documents that are mostly well formed: block and flow
/// collections, every scalar style, anchors and aliases (some to anchors
/// not defined), tags, comments everywhere, `---` and `...`.
pub fn tree(u: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let mut g = Tree {
        u,
        out: String::new(),
        anchors: Vec::new(),
        nodes: 0,
        max,
    };
    for i in 0..g.u.int_in_range(1..=3u8)? {
        g.document(i > 0)?;
        if g.out.len() >= max {
            break;
        }
    }
    let mut s = g.out;
    truncate(&mut s, max);
    Ok(s)
}

/// Most nodes of one tree: what keeps a tree's text within its bound
/// without cutting it.
const MOST_NODES: usize = 2_000;

struct Tree<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    out: String,
    /// Anchor names defined so far.
    anchors: Vec<String>,
    nodes: usize,
    max: usize,
}

impl Tree<'_, '_> {
    fn full(&self) -> bool {
        self.nodes >= MOST_NODES || self.out.len() >= self.max || self.u.is_empty()
    }

    fn document(&mut self, after_another: bool) -> Result<()> {
        if self.u.ratio(1, 8)? {
            self.out.push_str(
                self.u
                    .choose(&["%YAML 1.1\n", "%TAG !e! tag:e.com,2000:\n"])?,
            );
        }
        if after_another || self.u.ratio(1, 3)? {
            self.out.push_str("---");
            if self.u.ratio(1, 4)? {
                self.out.push_str(" # doc");
            }
            self.out.push('\n');
        }
        self.comment_lines(0)?;
        match self.u.int_in_range(0..=9u8)? {
            0 => {
                self.out.push_str("---");
                self.value(0, 0)?;
            }
            1 => self.flow(0)?,
            2..=3 => self.seq_entries(0, 0)?,
            _ => self.map_entries(0, 0)?,
        }
        self.comment_lines(0)?;
        if self.u.ratio(1, 6)? {
            self.out.push_str("...\n");
        }
        Ok(())
    }

    fn indent(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }

    fn comment_lines(&mut self, indent: usize) -> Result<()> {
        while self.u.ratio(1, 6)? && !self.full() {
            if self.u.ratio(1, 4)? {
                self.out.push('\n');
            }
            self.indent(indent);
            self.out.push_str("# c");
            self.out
                .push_str(self.u.choose(&["", " x", " é", "  # y", "\t"])?);
            self.out.push('\n');
        }
        Ok(())
    }

    fn line_comment(&mut self) -> Result<()> {
        if self.u.ratio(1, 6)? {
            self.out.push_str(self.u.choose(&[" # l", "  #l", " #"])?);
        }
        Ok(())
    }

    /// `&name ` and a tag, each sometimes.
    fn properties(&mut self, collection: bool) -> Result<()> {
        if self.u.ratio(1, 6)? {
            let name = if !self.anchors.is_empty() && self.u.ratio(1, 5)? {
                // Defined again: an alias names the latest.
                self.u.choose(&self.anchors)?.clone()
            } else {
                format!("a{}", self.anchors.len())
            };
            let _ = write!(self.out, " &{name}");
            self.anchors.push(name);
        }
        if self.u.ratio(1, 10)? {
            let tags: &[&str] = if collection {
                &["!!map", "!!seq", "!t", "!e!x", "!!str"]
            } else {
                &[
                    "!!str", "!!int", "!!float", "!!bool", "!!null", "!!binary", "!t", "!",
                ]
            };
            let _ = write!(self.out, " {}", self.u.choose(tags)?);
        }
        Ok(())
    }

    /// The value after `key:` or `- ` (already written), to the end of its
    /// lines: `indent` is the indentation of that key or dash.
    fn value(&mut self, indent: usize, depth: usize) -> Result<()> {
        self.nodes += 1;
        let deep = depth >= 12 || self.full();
        match self.u.int_in_range(0..=11u8)? {
            0..=1 if !deep => {
                self.properties(true)?;
                self.line_comment()?;
                self.out.push('\n');
                let step = *self.u.choose(&[2, 2, 2, 4, 1, 3])?;
                self.map_entries(indent + step, depth + 1)
            }
            2 if !deep => {
                self.properties(true)?;
                self.line_comment()?;
                self.out.push('\n');
                // Compact (as deep as the key) or wide.
                let step = *self.u.choose(&[0, 2, 2, 4])?;
                self.seq_entries(indent + step, depth + 1)
            }
            3 if !deep => {
                self.properties(true)?;
                self.out.push(' ');
                self.flow(depth + 1)?;
                self.line_comment()?;
                self.out.push('\n');
                Ok(())
            }
            4 => self.block_scalar(indent),
            5 if !self.anchors.is_empty() || self.u.ratio(1, 8)? => {
                let name = if self.anchors.is_empty() {
                    "nowhere".to_owned()
                } else {
                    self.u.choose(&self.anchors)?.clone()
                };
                let _ = write!(self.out, " *{name}");
                self.line_comment()?;
                self.out.push('\n');
                Ok(())
            }
            _ => {
                self.properties(false)?;
                self.out.push(' ');
                self.scalar(indent + 2)?;
                self.line_comment()?;
                self.out.push('\n');
                Ok(())
            }
        }
    }

    fn map_entries(&mut self, indent: usize, depth: usize) -> Result<()> {
        for i in 0..self.u.int_in_range(1..=6u8)? {
            if i > 0 && self.full() {
                break;
            }
            self.comment_lines(indent)?;
            self.indent(indent);
            if self.u.ratio(1, 20)? {
                // A complex key.
                self.out.push_str("? ");
                self.scalar(indent + 2)?;
                self.out.push('\n');
                self.indent(indent);
                self.out.push(':');
            } else if !self.anchors.is_empty() && self.u.ratio(1, 15)? {
                self.out.push_str("<<:");
            } else {
                self.key()?;
                self.out.push(':');
            }
            self.value(indent, depth)?;
        }
        Ok(())
    }

    fn seq_entries(&mut self, indent: usize, depth: usize) -> Result<()> {
        for i in 0..self.u.int_in_range(1..=6u8)? {
            if i > 0 && self.full() {
                break;
            }
            self.comment_lines(indent)?;
            self.indent(indent);
            self.out.push('-');
            if !self.full() && depth < 12 && self.u.ratio(1, 5)? {
                // `- a: 1` with the mapping's first key on the dash's line.
                self.out.push(' ');
                self.key()?;
                self.out.push(':');
                self.value(indent + 2, depth + 1)?;
                if self.u.ratio(1, 2)? {
                    self.indent(indent + 2);
                    self.key()?;
                    self.out.push(':');
                    self.value(indent + 2, depth + 1)?;
                }
            } else {
                self.value(indent, depth)?;
            }
        }
        Ok(())
    }

    fn key(&mut self) -> Result<()> {
        match self.u.int_in_range(0..=5u8)? {
            0 => self.quoted(b'\'', None),
            1 => self.quoted(b'"', None),
            _ => {
                let w = *self.u.choose(WORDS)?;
                // A plain key cannot hold `: ` or start with an indicator;
                // those stay, as errors to meet, sometimes.
                self.out.push_str(w);
                Ok(())
            }
        }
    }

    fn scalar(&mut self, indent: usize) -> Result<()> {
        match self.u.int_in_range(0..=7u8)? {
            0 => self.quoted(b'\'', Some(indent)),
            1 => self.quoted(b'"', Some(indent)),
            2 => {
                // Long: what aliases copy many times over.
                let w = *self.u.choose(WORDS)?;
                for i in 0..self.u.int_in_range(2..=400u16)? {
                    if i > 0 {
                        self.out.push('_');
                    }
                    self.out.push_str(w);
                }
                Ok(())
            }
            _ => {
                let w = *self.u.choose(WORDS)?;
                self.out.push_str(w);
                if self.u.ratio(1, 12)? {
                    // A plain scalar over two lines.
                    self.out.push('\n');
                    self.indent(indent);
                    self.out.push_str(self.u.choose(WORDS)?);
                }
                Ok(())
            }
        }
    }

    /// A quoted scalar; over several lines if `indent` is given.
    fn quoted(&mut self, quote: u8, indent: Option<usize>) -> Result<()> {
        let q = char::from(quote);
        self.out.push(q);
        for _ in 0..self.u.int_in_range(0..=5u8)? {
            match self.u.int_in_range(0..=5u8)? {
                0 if quote == b'"' => self.out.push_str(self.u.choose(ESCAPES)?),
                0 => self.out.push_str("''"),
                1 => match indent {
                    Some(indent) => {
                        self.out.push('\n');
                        if self.u.ratio(1, 3)? {
                            self.out.push('\n');
                        }
                        self.indent(indent);
                    }
                    None => self.out.push(' '),
                },
                2 => self
                    .out
                    .push_str(self.u.choose(&["# not a comment", ": x", ", ", "[]{}"])?),
                _ => self.out.push_str(self.u.choose(WORDS)?),
            }
        }
        self.out.push(q);
        Ok(())
    }

    fn block_scalar(&mut self, indent: usize) -> Result<()> {
        self.out.push(' ');
        self.out.push(*self.u.choose(&['|', '>'])?);
        let explicit = self.u.ratio(1, 5)?;
        if explicit {
            self.out.push('2');
        }
        self.out.push_str(self.u.choose(&["", "", "-", "+"])?);
        self.line_comment()?;
        self.out.push('\n');
        let inner = indent + 2;
        for _ in 0..self.u.int_in_range(0..=5u8)? {
            match self.u.int_in_range(0..=5u8)? {
                0 => self.out.push('\n'),
                1 => {
                    // More indented: kept as it is, even in a folded one.
                    self.indent(inner + 2);
                    self.out.push_str(self.u.choose(WORDS)?);
                    self.out.push('\n');
                }
                2 => {
                    self.indent(inner);
                    self.out.push_str("# not a comment  \n");
                }
                _ => {
                    self.indent(inner);
                    self.out.push_str(self.u.choose(WORDS)?);
                    self.out.push_str(self.u.choose(&["", " ", " x y", "\t"])?);
                    self.out.push('\n');
                }
            }
        }
        Ok(())
    }

    /// `[...]` or `{...}` on one line (or several), nested.
    fn flow(&mut self, depth: usize) -> Result<()> {
        self.nodes += 1;
        let mapping = self.u.ratio(1, 2)?;
        self.out.push(if mapping { '{' } else { '[' });
        let n = if self.full() {
            0
        } else {
            self.u.int_in_range(0..=5u8)?
        };
        for i in 0..n {
            if i > 0 {
                self.out
                    .push_str(self.u.choose(&[", ", ",", " , ", ",\n  "])?);
            }
            if mapping || self.u.ratio(1, 8)? {
                self.key()?;
                self.out.push_str(": ");
            }
            self.flow_item(depth)?;
        }
        if n > 0 && self.u.ratio(1, 10)? {
            self.out.push(',');
        }
        self.out.push(if mapping { '}' } else { ']' });
        Ok(())
    }

    fn flow_item(&mut self, depth: usize) -> Result<()> {
        self.nodes += 1;
        match self.u.int_in_range(0..=7u8)? {
            0..=1 if depth < 12 && !self.full() => {
                self.properties(true)?;
                if self
                    .out
                    .ends_with(|c: char| c != ' ' && c != '[' && c != '{')
                {
                    self.out.push(' ');
                }
                self.flow(depth + 1)
            }
            2 if !self.anchors.is_empty() => {
                let name = self.u.choose(&self.anchors)?.clone();
                let _ = write!(self.out, "*{name}");
                Ok(())
            }
            3 => self.quoted(b'"', None),
            4 => self.quoted(b'\'', None),
            _ => {
                self.out.push_str(self.u.choose(WORDS)?);
                Ok(())
            }
        }
    }
}

/// A function's stdout: mostly a ResourceList (block YAML, JSON, or flow
/// YAML) with items and results of every shape real functions write, its
/// top-level keys in any order, sometimes broken.
pub fn resource_list(u: &mut Unstructured<'_>, seeds: &[Vec<u8>], max: usize) -> Result<String> {
    let mut s = match u.int_in_range(0..=9u8)? {
        0 => return text(u, seeds, max),
        1..=2 => resource_list_json(u)?,
        _ => resource_list_yaml(u, max)?,
    };
    if u.ratio(1, 4)? {
        let other = u.choose(seeds)?;
        let bytes = mutate(u, s.as_bytes(), FRAGMENTS, other, max)?;
        s = String::from_utf8_lossy(&bytes).into_owned();
    }
    if u.ratio(1, 12)? {
        s = s.replace('\n', "\r\n");
    }
    truncate(&mut s, max);
    Ok(s)
}

fn resource_list_yaml(u: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let mut sections: Vec<String> = Vec::new();
    let kind = *u.choose(&[
        "kind: ResourceList",
        "kind: 'ResourceList'",
        "kind: \"ResourceList\" # k",
        "kind:\n  ResourceList",
        "kind: Other",
        "kind: [ResourceList]",
        "kind:",
    ])?;
    if u.ratio(7, 8)? {
        sections.push(format!("{kind}\n"));
    }
    if u.ratio(3, 4)? {
        sections.push("apiVersion: config.kubernetes.io/v1\n".to_owned());
    }
    if u.ratio(7, 8)? {
        let mut items = String::from("items:");
        if u.ratio(1, 5)? {
            items.push_str(" []\n");
        } else {
            items.push('\n');
            let tree = tree(u, max / 2)?;
            // The tree's documents as items: each line indented under `- `.
            for doc in tree.split("---\n").filter(|d| !d.trim().is_empty()) {
                let mut first = true;
                for line in doc.lines() {
                    items.push_str(if first { "- " } else { "  " });
                    items.push_str(line);
                    items.push('\n');
                    first = false;
                }
            }
        }
        sections.push(items);
    }
    if u.ratio(1, 3)? {
        sections
            .push("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  data: {a: b}\n".into());
    }
    if u.ratio(3, 4)? {
        sections.push(results_yaml(u)?);
    }
    // Any order: the fast path cuts the document at its top-level keys.
    for i in (1..sections.len()).rev() {
        let j = u.int_in_range(0..=i)?;
        sections.swap(i, j);
    }
    let mut s = String::new();
    if u.ratio(1, 4)? {
        s.push_str(u.choose(&["---\n", "# head\n", "--- # c\n", "%YAML 1.1\n---\n"])?);
    }
    for section in sections {
        s.push_str(&section);
        if u.ratio(1, 10)? {
            s.push_str(u.choose(&["# between\n", "\n", "  # indented\n", "\t\n"])?);
        }
    }
    if u.ratio(1, 6)? {
        s.push_str(u.choose(&["---\nkind: Other\n", "...\n", "---\n", "---\n[\n"])?);
    }
    Ok(s)
}

fn results_yaml(u: &mut Unstructured<'_>) -> Result<String> {
    let mut s = String::from("results:");
    match u.int_in_range(0..=7u8)? {
        0 => s.push_str(" []\n"),
        1 => s.push_str(u.choose(&[" ~\n", " x\n", " {items: [{message: m}]}\n", " 1\n"])?),
        2 => {
            // Flow style, on one line.
            s.push_str(" [");
            for i in 0..u.int_in_range(0..=4u8)? {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{{message: m{i}, severity: {}}}", severity(u)?);
            }
            s.push_str("]\n");
        }
        _ => {
            s.push('\n');
            for i in 0..u.int_in_range(0..=6u8)? {
                result_yaml(u, &mut s, i)?;
            }
        }
    }
    Ok(s)
}

fn severity<'a>(u: &mut Unstructured<'_>) -> Result<&'a str> {
    u.choose(&[
        "error", "warning", "info", "Error", "WARN", "", "''", "fatal", "[]", "1", "null",
    ])
    .copied()
}

/// One entry of `results`, in the spec's shape or one of the variants.
fn result_yaml(u: &mut Unstructured<'_>, s: &mut String, i: u8) -> Result<()> {
    let message = *u.choose(&[
        "m",
        "'quoted: m'",
        "\"line\\nbreak\"",
        "|\n    block\n    text",
        "1",
        "[a]",
        "~",
        "é 😀",
    ])?;
    let _ = writeln!(s, "- message: {message}");
    if u.ratio(2, 3)? {
        let _ = writeln!(s, "  severity: {}", severity(u)?);
    }
    if u.ratio(1, 2)? {
        s.push_str("  resourceRef:\n    apiVersion: apps/v1\n    kind: Deployment\n");
        if u.ratio(1, 2)? {
            let _ = writeln!(s, "    name: app{i}\n    namespace: ns");
        } else {
            let _ = writeln!(s, "    metadata:\n      name: app{i}\n      namespace: ns");
        }
    }
    if u.ratio(1, 3)? {
        s.push_str("  field:\n    path: spec.replicas\n");
        let v = *u.choose(&["1", "'x'", "{a: b}", "[1, 2]", "~"])?;
        let key = *u.choose(&["currentValue", "proposedValue", "suggestedValue"])?;
        let _ = writeln!(s, "    {key}: {v}");
    }
    if u.ratio(1, 4)? {
        let index = *u.choose(&["0", "'1'", "-1", "x", "99999999999999999999"])?;
        let _ = writeln!(s, "  file:\n    path: a.yaml\n    index: {index}");
    }
    if u.ratio(1, 5)? {
        s.push_str("  tags:\n    a: b\n");
    }
    if u.ratio(1, 8)? {
        s.push_str("  unknown: [1, {2: 3}]\n");
    }
    Ok(())
}

fn resource_list_json(u: &mut Unstructured<'_>) -> Result<String> {
    let mut s = String::from("{");
    if u.ratio(7, 8)? {
        s.push_str("\"kind\": \"ResourceList\", ");
    }
    s.push_str("\"apiVersion\": \"config.kubernetes.io/v1\", \"items\": [");
    for i in 0..u.int_in_range(0..=3u8)? {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"kind\": \"K\", \"metadata\": {{\"name\": \"n{i}\"}}}}"
        );
    }
    s.push(']');
    if u.ratio(3, 4)? {
        s.push_str(", \"results\": [");
        for i in 0..u.int_in_range(0..=3u8)? {
            if i > 0 {
                s.push(',');
            }
            let sev = *u.choose(&["error", "warning", "info", "x"])?;
            let _ = write!(
                s,
                "{{\"message\": \"m{i} \\u00e9\", \"severity\": \"{sev}\", \"field\": {{\"path\": \"a\"}}}}"
            );
        }
        s.push(']');
    }
    s.push('}');
    if u.ratio(1, 6)? {
        s.push_str(u.choose(&["\n", " trailing", "\n---\nkind: X\n", "}"])?);
    }
    Ok(s)
}
