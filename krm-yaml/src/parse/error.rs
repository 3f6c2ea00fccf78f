//! The error yaml.v3 gives ([`ParseError`]), and how libyaml's errors are
//! read as yaml.v3 reports them: the line it names, and where a tab libyaml
//! refused stands.

use std::fmt;

use super::tokens::Mk;

/// A document stream yaml.v3 rejects. [`Display`](fmt::Display) is
/// yaml.v3's `err.Error()` (`yaml: line 4: did not find expected ',' or
/// ']'`), which is what kpt prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line yaml.v3 names (its `parser.fail()` arithmetic, so for parser
    /// errors often the line before the problem); 0 when it names none.
    pub(super) line: usize,
    pub(super) message: String,
}

impl ParseError {
    /// The line number in the message (`yaml: line N: ...`), if any.
    pub fn line(&self) -> Option<usize> {
        (self.line != 0).then_some(self.line)
    }

    /// The message without the `yaml: line N: ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(super) fn plain(message: String) -> ParseError {
        ParseError { line: 0, message }
    }

    /// decode.go `parser.fail()`: the context mark's line if set, else the
    /// problem mark's; both are 0-based and only scanner errors add 1.
    /// `eof`: the end of the text as yaml.v3 reads it, when
    /// [`prepare`](super::prepare) added a break after it: a scanner stopped
    /// past it is at it for yaml.v3 (while yaml.v3's STREAM-END token, where
    /// parser errors at the end point, is on the next line, as after the
    /// added break).
    pub(super) fn from_libyaml(err: &libyaml_safer::Error, eof: Option<Mk>) -> ParseError {
        let scanner = err.kind() == libyaml_safer::ErrorKind::Scanner;
        let line = |m: libyaml_safer::Mark| match eof {
            Some(e) if scanner && m.index as i64 > e.index => e.line as u64,
            _ => m.line,
        };
        let ctx = err.context_mark().map_or(0, line);
        let prob = err.problem_mark().map_or(0, line);
        let base = if ctx != 0 { ctx } else { prob };
        let line = if base != 0 {
            base as usize + usize::from(scanner)
        } else {
            0
        };
        let problem = err.problem();
        let message = if problem.is_empty() {
            "unknown problem parsing YAML content".to_owned()
        } else {
            problem.to_owned()
        };
        ParseError { line, message }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line != 0 {
            write!(f, "yaml: line {}: {}", self.line, self.message)
        } else {
            write!(f, "yaml: {}", self.message)
        }
    }
}

impl std::error::Error for ParseError {}

/// Where libyaml's error is a tab that cannot start a token.
pub(super) fn tab_error(e: &libyaml_safer::Error, text: &[u8]) -> Option<usize> {
    let at = e.problem_mark()?.index as usize;
    (e.problem() == "found character that cannot start any token" && text.get(at) == Some(&b'\t'))
        .then_some(at)
}

/// The `%YAML` directive's line as yaml.v3 reports a parser error there
/// (0-based: parser errors don't add 1).
pub(super) fn directive_line(text: &[u8], doc_start: usize) -> usize {
    let head = text.get(doc_start..).unwrap_or_default();
    let before = text[..doc_start.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    head.split(|&b| b == b'\n')
        .position(|l| l.starts_with(b"%YAML"))
        .map_or(0, |i| before + i)
}

/// yaml.v3 refuses a `%YAML` other than 1.1 as it reads the directives
/// (`yaml_parser_process_directives`), before it looks for the `---` they
/// need; libyaml accepts 1.2 and fails later, on the missing `---` or on
/// what comes instead (a file that is only `%YAML 1.2`, as kyaml's reader
/// cuts one at its `---`). So an error on the line right after directives
/// naming another version is yaml.v3's
/// "found incompatible YAML document" at the directive's line (0-based, as
/// parser errors are).
pub(super) fn version_before(e: &libyaml_safer::Error, text: &[u8]) -> Option<ParseError> {
    let at = (e.problem_mark()?.index as usize).min(text.len());
    let lines: Vec<&[u8]> = text[..at].split(|&b| b == b'\n').collect();
    // The directives just before the error's line, with comments and blank
    // lines among them.
    let mut found = None;
    for (i, line) in lines.iter().enumerate().rev().skip(1) {
        let t = line.strip_suffix(b"\r").unwrap_or(line);
        let t = t.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") {
            continue;
        }
        if !t.starts_with(b"%") {
            break;
        }
        if let Some(v) = t.strip_prefix(b"%YAML") {
            let v = v.trim_ascii();
            let v = v
                .split(|b| b.is_ascii_whitespace())
                .next()
                .unwrap_or_default();
            if v != b"1.1" {
                found = Some(i);
            }
        }
    }
    found.map(|line| ParseError {
        line,
        message: "found incompatible YAML document".to_owned(),
    })
}
