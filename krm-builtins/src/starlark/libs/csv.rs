//! `encoding/csv.star` (starlib's `csv`, on Go's `encoding/csv`):
//! `read_all(source, comma=",", comment="", lazy_quotes=False,
//! trim_leading_space=False, fields_per_record=0, skip=0)` gives a list
//! of lists of strings, `write_all(source, comma=",")` a string.
//!
//! The reader and writer are written here after Go's `encoding/csv`
//! (the `csv` crate's quoting and error rules are not Go's): quoted
//! fields with doubled quotes and line breaks, `\r\n` read as `\n`,
//! empty lines skipped, the field count checked, and Go's messages
//! (`parse error on line 2, column 5: bare " in non-quoted-field`).
//! `write_all` writes `\n` line ends and quotes as Go's `Writer` does; a
//! field that is a list or a dict is an error (starlib writes Go's `%v`
//! of it). Skipping past the last record gives no rows.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::list::ListRef;
use starlark::values::tuple::TupleRef;
use starlark::values::Value;

use super::super::data::go_float;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("csv", members);
}

const BARE_QUOTE: &str = "bare \" in non-quoted-field";
const QUOTE: &str = "extraneous or missing \" in quoted-field";
const FIELD_COUNT: &str = "wrong number of fields";

/// Go's `csv.ParseError`, as its `Error()` reads.
fn parse_error(start_line: usize, line: usize, column: usize, err: &str) -> String {
    if err == FIELD_COUNT {
        format!("record on line {line}: {err}")
    } else if start_line != line {
        format!("record on line {start_line}; parse error on line {line}, column {column}: {err}")
    } else {
        format!("parse error on line {line}, column {column}: {err}")
    }
}

/// Go's `validDelim`.
fn valid_delim(c: char) -> bool {
    c != '\0' && c != '"' && c != '\r' && c != '\n' && c != char::REPLACEMENT_CHARACTER
}

/// One character of a parameter ("" for `default`).
fn one_char(
    function: &str,
    name: &str,
    s: &str,
    default: Option<char>,
) -> anyhow::Result<Option<char>> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (None, _) => Ok(default),
        (Some(c), None) => Ok(Some(c)),
        _ => Err(anyhow::anyhow!(
            "csv.{function}: expected {name} param to be a single-character string"
        )),
    }
}

/// 1 when `line` ends in a newline.
fn length_nl(line: &str) -> usize {
    usize::from(line.ends_with('\n'))
}

/// Go's `csv.Reader` over a string.
struct Reader<'a> {
    rest: &'a str,
    /// Lines read so far.
    line: usize,
    comma: char,
    comment: Option<char>,
    lazy_quotes: bool,
    trim_leading_space: bool,
    fields_per_record: i64,
}

impl Reader<'_> {
    /// The next line, its `\r\n` made `\n` (and a last `\r` dropped).
    fn read_line(&mut self) -> Option<String> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match self.rest.find('\n') {
            Some(i) => self.rest.split_at(i + 1),
            None => (self.rest, ""),
        };
        self.rest = rest;
        self.line += 1;
        let mut line = line.to_owned();
        if line.ends_with("\r\n") {
            line.truncate(line.len() - 2);
            line.push('\n');
        } else if !line.ends_with('\n') && line.ends_with('\r') {
            line.pop();
        }
        Some(line)
    }

    /// Go's `readRecord`: the next record, or None at the end.
    fn read_record(&mut self) -> Result<Option<Vec<String>>, String> {
        let mut line = loop {
            let Some(line) = self.read_line() else {
                return Ok(None);
            };
            if self.comment.is_some() && line.chars().next() == self.comment {
                continue;
            }
            if line.len() == length_nl(&line) {
                continue;
            }
            break line;
        };
        let record_line = self.line;
        let comma_len = self.comma.len_utf8();
        let mut fields = Vec::new();
        // Where the rest of `line` starts (a column is this plus one).
        let mut pos = 0;
        'field: loop {
            if self.trim_leading_space {
                let rest = line.get(pos..).unwrap_or("");
                pos += rest.len() - rest.trim_start_matches(char::is_whitespace).len();
            }
            let rest = line.get(pos..).unwrap_or("");
            if !rest.starts_with('"') {
                let end = rest.find(self.comma);
                let field = match end {
                    Some(i) => rest.get(..i),
                    None => rest.get(..rest.len() - length_nl(rest)),
                }
                .unwrap_or("");
                if !self.lazy_quotes {
                    if let Some(j) = field.find('"') {
                        return Err(parse_error(record_line, self.line, pos + 1 + j, BARE_QUOTE));
                    }
                }
                fields.push(field.to_owned());
                match end {
                    Some(i) => {
                        pos += i + comma_len;
                        continue 'field;
                    }
                    None => break 'field,
                }
            }
            // A quoted field, which may go on over lines.
            let mut field = String::new();
            pos += 1;
            loop {
                let rest = line.get(pos..).unwrap_or("");
                if let Some(i) = rest.find('"') {
                    field.push_str(rest.get(..i).unwrap_or(""));
                    pos += i + 1;
                    let rest = line.get(pos..).unwrap_or("");
                    match rest.chars().next() {
                        Some('"') => {
                            field.push('"');
                            pos += 1;
                        }
                        Some(c) if c == self.comma => {
                            pos += comma_len;
                            fields.push(field);
                            continue 'field;
                        }
                        _ if rest.len() == length_nl(rest) => {
                            fields.push(field);
                            break 'field;
                        }
                        _ if self.lazy_quotes => field.push('"'),
                        // The column of the quote.
                        _ => return Err(parse_error(record_line, self.line, pos, QUOTE)),
                    }
                } else if !rest.is_empty() {
                    field.push_str(rest);
                    match self.read_line() {
                        Some(next) => {
                            line = next;
                            pos = 0;
                        }
                        None => pos = line.len(),
                    }
                } else {
                    // The input ended inside the quotes.
                    if !self.lazy_quotes {
                        return Err(parse_error(record_line, self.line, pos + 1, QUOTE));
                    }
                    fields.push(field);
                    break 'field;
                }
            }
        }
        if self.fields_per_record > 0 {
            if i64::try_from(fields.len()).ok() != Some(self.fields_per_record) {
                return Err(parse_error(record_line, record_line, 1, FIELD_COUNT));
            }
        } else if self.fields_per_record == 0 {
            self.fields_per_record = i64::try_from(fields.len()).unwrap_or(i64::MAX);
        }
        Ok(Some(fields))
    }
}

/// Go's `Writer.fieldNeedsQuotes`.
fn needs_quotes(field: &str, comma: char) -> bool {
    if field.is_empty() {
        return false;
    }
    if field == r"\." {
        return true;
    }
    if field.contains([comma, '"', '\r', '\n']) {
        return true;
    }
    field.chars().next().is_some_and(char::is_whitespace)
}

/// A field as starlib writes it (Go's `%v` of the value).
fn field_text(v: Value<'_>, row: usize, col: usize) -> anyhow::Result<String> {
    if let Some(s) = v.unpack_str() {
        return Ok(s.to_owned());
    }
    if v.is_none() {
        return Ok("<nil>".into());
    }
    match v.get_type() {
        "bool" => Ok(if v.to_bool() { "true" } else { "false" }.into()),
        "int" => Ok(v.to_str()),
        "float" => Ok(go_float(v.to_str().parse::<f64>().unwrap_or(f64::NAN))),
        t => Err(anyhow::anyhow!(
            "csv.write_all: row {row}, field {col}: a {t} cannot be a CSV field"
        )),
    }
}

fn elements(v: Value<'_>) -> Option<Vec<Value<'_>>> {
    ListRef::from_value(v)
        .map(|l| l.content().to_vec())
        .or_else(|| TupleRef::from_value(v).map(|t| t.content().to_vec()))
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn read_all(
        #[starlark(require = pos)] source: &str,
        #[starlark(default = ",")] comma: &str,
        #[starlark(default = "")] comment: &str,
        #[starlark(default = false)] lazy_quotes: bool,
        #[starlark(default = false)] trim_leading_space: bool,
        #[starlark(default = 0)] fields_per_record: i64,
        #[starlark(default = 0)] skip: i64,
    ) -> anyhow::Result<Vec<Vec<String>>> {
        let comma = one_char("read_all", "comma", comma, Some(','))?.unwrap_or(',');
        let comment = one_char("read_all", "comment", comment, None)?;
        if Some(comma) == comment || !valid_delim(comma) || comment.is_some_and(|c| !valid_delim(c))
        {
            return Err(anyhow::anyhow!(
                "csv.read_all: csv: invalid field or comment delimiter"
            ));
        }
        let mut reader = Reader {
            rest: source,
            line: 0,
            comma,
            comment,
            lazy_quotes,
            trim_leading_space,
            fields_per_record,
        };
        let mut rows = Vec::new();
        let mut skip = skip;
        while let Some(record) = reader
            .read_record()
            .map_err(|e| anyhow::anyhow!("csv.read_all: {e}"))?
        {
            if skip > 0 {
                skip -= 1;
            } else {
                rows.push(record);
            }
        }
        Ok(rows)
    }

    fn write_all<'v>(
        #[starlark(require = pos)] source: Value<'v>,
        #[starlark(default = ",")] comma: &str,
    ) -> anyhow::Result<String> {
        let comma = one_char("write_all", "comma", comma, Some(','))?.unwrap_or(',');
        if !valid_delim(comma) {
            return Err(anyhow::anyhow!(
                "csv.write_all: csv: invalid field or comment delimiter"
            ));
        }
        let Some(rows) = elements(source) else {
            return Err(anyhow::anyhow!(
                "csv.write_all: expected value to be an array type"
            ));
        };
        let mut out = String::new();
        for (r, row) in rows.into_iter().enumerate() {
            let Some(fields) = elements(row) else {
                return Err(anyhow::anyhow!(
                    "csv.write_all: row {r} is not an array type"
                ));
            };
            for (c, v) in fields.into_iter().enumerate() {
                if c > 0 {
                    out.push(comma);
                }
                let field = field_text(v, r, c)?;
                if !needs_quotes(&field, comma) {
                    out.push_str(&field);
                    continue;
                }
                out.push('"');
                for ch in field.chars() {
                    if ch == '"' {
                        out.push('"');
                    }
                    out.push(ch);
                }
                out.push('"');
            }
            out.push('\n');
        }
        Ok(out)
    }
}
