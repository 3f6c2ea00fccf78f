//! `search-replace`: finds fields by path (`by-path`, with `*` and `**`
//! elements and `[i]`/`[*]` indexes), by value (`by-value`) or by a
//! regular expression on the value (`by-value-regex`), in resources
//! whose file matches `by-file-path` (a doublestar glob), and sets their
//! value (`put-value`) or line comment (`put-comment`), where `${1}`...
//! are the regular expression's capture groups. An absolute `by-path`
//! with only `put-value` sets the field, creating it and its parents.
//!
//! Follows kptdev/krm-functions-catalog at
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/search-replace/main.go` and
//! `searchreplace/{search_replace,pathparser,walk}.go`, on kyaml v0.12.0
//! (`PathGetter`, `FieldSetter`, `GetDataMap`, `GetFileAnnotations`) and
//! doublestar v4.8.1.
//!
//! - Config: any config's `data` (`GetDataMap`): a `v1 ConfigMap`, the
//!   `function-input` ConfigMap, a `SearchReplace` with `data`. A key
//!   other than the six matchers, or both `by-value` and
//!   `by-value-regex`, fails.
//! - Results: `Mutated field value to "<v>"` (with put-value or
//!   put-comment) or `Matched field value "<v>"`, with the field's path
//!   and the resource's file, no severity; `<v>` is the field as YAML
//!   (its line comment included). A scalar found in a resource without a
//!   path annotation is changed but not reported, as in Go. None: `no
//!   matches`. A failure leaves only `failed to perform search-replace
//!   operation: "<error>"` (severity error), the items as far as they were
//!   changed, and the error twice on stderr (exit 1).
//!
//! Releases: answers as master (76fe3817: kyaml v0.12.0 and doublestar
//! v4.8.1 since v0.2.0, no tag up to 76fe3817), and as v0.2.0 or v0.1.1
//! when [`Context::release`] names them. The function's code is v0.2.0's
//! at master; what its libraries did then:
//! - v0.2.0 (`search-replace/v0.2.0`, 1ac3c930, kyaml v0.10.21,
//!   doublestar v4.0.2): the file path is `config.kubernetes.io/path`
//!   only; `by-file-path` is matched as doublestar v4.0.2 matches
//!   ([`glob::matches_v4_0_2`]: `{a,b}` commits where it is reached, a
//!   trailing `**/` is no zero-length match).
//! - v0.1.1 (2b5aa744, kyaml v0.10.21): as v0.2.0, but before
//!   `by-file-path`: the keys are `by-value`, `by-value-regex`,
//!   `by-path`, `put-value`, `put-comment` (another is `invalid matcher`),
//!   and one of `by-value`, `by-value-regex`, `by-path` must be given
//!   (`at least one of ["by-value", "by-value-regex", "by-path"] must be
//!   provided`, checked before `only one of`).
//!
//! kyaml v0.12.0's copying of legacy and internal file annotations onto
//! the items (master) is not done here; kpt sends both, so nothing shows.
//! v0.1.0 (kyaml's older framework: no results on no match, the error
//! also on stdout) is not reproduced.
//!
//! Departures: a `by-value-regex` the `regex` crate refuses is reported
//! with Go's message for the common syntax errors (`missing closing )`,
//! `unexpected )`, `missing closing ]`, `missing argument to repetition
//! operator`, `invalid escape sequence`, `invalid character class
//! range`), quoting the pattern where Go may quote only its faulty
//! part; others read `error parsing regexp: invalid or unsupported Perl
//! syntax`; a repetition of a repetition (`a**`), which the crate
//! takes, is refused as Go refuses it. Go reads the config from a map, so of two unknown keys it
//! names a random one; here the first. A put-value path through a null
//! field changes nothing (kyaml would append the field to the null
//! scalar, which it then writes as null anyway).

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node, Style, Tag};

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;

mod glob;
#[cfg(test)]
mod tests;

const BY_VALUE: &str = "by-value";
const BY_VALUE_REGEX: &str = "by-value-regex";
const BY_PATH: &str = "by-path";
const BY_FILE_PATH: &str = "by-file-path";
const PUT_VALUE: &str = "put-value";
const PUT_COMMENT: &str = "put-comment";
/// The most `.`-separated parts a `by-path` may have (each visited field
/// matches its path against them; an absolute one creates that deep).
const MAX_PATH_PARTS: usize = 1000;

/// Longest `by-file-path` pattern.
const MAX_FILE_PATH_PATTERN: usize = 4096;

/// What differs between the releases the function answers as.
struct Release {
    /// The config keys `Decode` takes, in the order its error lists them.
    matchers: &'static [&'static str],
    /// `GetFileAnnotations` reads `internal.config.kubernetes.io/path`
    /// (kyaml v0.12.0) first, else only `config.kubernetes.io/path`
    /// (kyaml v0.10.21).
    internal_path: bool,
    /// `validateMatchers` wants one of by-value, by-value-regex, by-path
    /// (v0.1.1).
    needs_a_search: bool,
    /// doublestar's `Match` (v4.8.1; v0.2.0's v4.0.2).
    glob: fn(&str, &str) -> Result<bool, &'static str>,
}

/// master (kyaml v0.12.0, doublestar v4.8.1).
const MASTER: Release = Release {
    matchers: &[
        BY_VALUE,
        BY_FILE_PATH,
        BY_VALUE_REGEX,
        BY_PATH,
        PUT_VALUE,
        PUT_COMMENT,
    ],
    internal_path: true,
    needs_a_search: false,
    glob: glob::matches,
};

/// v0.2.0 (kyaml v0.10.21, doublestar v4.0.2).
const V0_2_0: Release = Release {
    internal_path: false,
    glob: glob::matches_v4_0_2,
    ..MASTER
};

/// v0.1.1: v0.2.0 before `by-file-path`, with the check it dropped.
const V0_1_1: Release = Release {
    matchers: &[BY_VALUE, BY_VALUE_REGEX, BY_PATH, PUT_VALUE, PUT_COMMENT],
    needs_a_search: true,
    ..V0_2_0
};

/// The release the call answers as.
fn release(ctx: &Context) -> &'static Release {
    match ctx.release() {
        Some("v0.2.0") => &V0_2_0,
        Some("v0.1.1") => &V0_1_1,
        _ => &MASTER,
    }
}

struct Found {
    file_path: String,
    field_path: String,
    value: String,
}

struct SearchReplace {
    release: &'static Release,
    by_value: String,
    by_value_regex: String,
    by_path: String,
    by_file_path: String,
    put_value: String,
    put_comment: String,
    regex: Option<regex::Regex>,
    results: Vec<Found>,
    file_path: String,
    /// The text put-value and put-comment put in, bounded for a run.
    produced: catalog::Produced,
}

/// `Decode`.
fn decode(config: Option<&Node>, release: &'static Release) -> Result<SearchReplace, String> {
    let data = catalog::data_map(config);
    let matchers = release.matchers;
    if let Some((key, _)) = data.iter().find(|(k, _)| !matchers.contains(&k.as_str())) {
        let names: Vec<String> = matchers.iter().map(|m| catalog::quote(m)).collect();
        return Err(format!(
            "invalid matcher {}, must be one of [{}]",
            catalog::quote(key),
            names.join(" ")
        ));
    }
    let get = |name: &str| {
        data.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Ok(SearchReplace {
        release,
        by_path: get(BY_PATH),
        by_value: get(BY_VALUE),
        by_value_regex: get(BY_VALUE_REGEX),
        put_value: get(PUT_VALUE),
        put_comment: get(PUT_COMMENT),
        by_file_path: get(BY_FILE_PATH),
        produced: catalog::Produced::new("put-value and put-comment"),
        regex: None,
        results: Vec::new(),
        file_path: String::new(),
    })
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let failure = match decode(rl.function_config.as_ref(), release(ctx)) {
        Err(e) => Some(e),
        Ok(mut sr) => match sr.filter(&mut rl.items, ctx) {
            Err(FilterStop::Cancelled) => return Err(Stop::Cancelled),
            Err(FilterStop::Failed(e)) => Some(e),
            Ok(()) => {
                rl.results.extend(sr.to_results());
                None
            }
        },
    };
    match failure {
        Some(err) => {
            let result = FnResult::error(format!(
                "failed to perform search-replace operation: {}",
                catalog::quote(&err)
            ));
            Err(catalog::fail(rl, result, &err))
        }
        None => Ok(()),
    }
}

enum FilterStop {
    Failed(String),
    Cancelled,
}

impl From<String> for FilterStop {
    fn from(e: String) -> FilterStop {
        FilterStop::Failed(e)
    }
}

/// Go's `regexp.Compile` error for a pattern the `regex` crate refuses.
fn go_regexp_error(pattern: &str, err: &regex::Error) -> String {
    let text = err.to_string();
    let code = [
        ("unclosed group", "missing closing )"),
        ("unopened group", "unexpected )"),
        ("unclosed character class", "missing closing ]"),
        (
            "repetition operator missing expression",
            "missing argument to repetition operator",
        ),
        ("unrecognized escape sequence", "invalid escape sequence"),
        (
            "incomplete escape sequence",
            "trailing backslash at end of expression",
        ),
        (
            "invalid character class range",
            "invalid character class range",
        ),
    ]
    .iter()
    .find(|(rust, _)| text.contains(rust))
    .map_or("invalid or unsupported Perl syntax", |(_, go)| go);
    format!("error parsing regexp: {code}: `{pattern}`")
}

/// Go's refusal of a repetition operator after another (`a**`, `a*?+`),
/// which the `regex` crate accepts: its message, with the operators.
fn nested_repetition(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    // Where the last repetition began, and whether its lazy `?` was seen.
    let mut last: Option<(usize, bool)> = None;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                i += 2;
                last = None;
                continue;
            }
            '[' => {
                // Past the class (`]` first in it is literal).
                i += 1;
                if chars.get(i) == Some(&'^') {
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    i += 1;
                }
                while let Some(&d) = chars.get(i) {
                    i += if d == '\\' { 2 } else { 1 };
                    if d == ']' {
                        break;
                    }
                }
                last = None;
                continue;
            }
            '*' | '+' | '?' => match last {
                Some((_, false)) if c == '?' => {
                    if let Some(l) = last.as_mut() {
                        l.1 = true;
                    }
                }
                Some((start, _)) => {
                    let ops: String = chars.get(start..=i).unwrap_or_default().iter().collect();
                    return Some(format!(
                        "error parsing regexp: invalid nested repetition operator: `{ops}`"
                    ));
                }
                None => last = Some((i, false)),
            },
            _ => last = None,
        }
        i += 1;
    }
    None
}

impl SearchReplace {
    /// `Filter`.
    fn filter(&mut self, items: &mut [Node], ctx: &Context) -> Result<(), FilterStop> {
        if self.release.needs_a_search
            && self.by_value.is_empty()
            && self.by_value_regex.is_empty()
            && self.by_path.is_empty()
        {
            return Err(format!(
                "at least one of [{}, {}, {}] must be provided",
                catalog::quote(BY_VALUE),
                catalog::quote(BY_VALUE_REGEX),
                catalog::quote(BY_PATH)
            )
            .into());
        }
        if !self.by_value.is_empty() && !self.by_value_regex.is_empty() {
            return Err(format!(
                "only one of [{}, {}] can be provided",
                catalog::quote(BY_VALUE),
                catalog::quote(BY_VALUE_REGEX)
            )
            .into());
        }
        // The glob matcher backtracks and recurses per pattern character:
        // a file path pattern is short, a hostile one is not.
        if self.by_file_path.len() > MAX_FILE_PATH_PATTERN {
            return Err(format!(
                "{} is {} bytes long, more than the limit of {MAX_FILE_PATH_PATTERN}",
                catalog::quote(BY_FILE_PATH),
                self.by_file_path.len()
            )
            .into());
        }
        let parts = self.by_path.split('.').count();
        if parts > MAX_PATH_PARTS {
            return Err(format!(
                "{} has {parts} parts, more than the limit of {MAX_PATH_PARTS}",
                catalog::quote(BY_PATH)
            )
            .into());
        }
        if !self.by_value_regex.is_empty() {
            if let Some(e) = nested_repetition(&self.by_value_regex) {
                return Err(e.into());
            }
            let re = regex::Regex::new(&self.by_value_regex)
                .map_err(|e| go_regexp_error(&self.by_value_regex, &e))?;
            self.regex = Some(re);
        }
        for item in items.iter_mut() {
            ctx.check().map_err(|_| FilterStop::Cancelled)?;
            self.perform(item, ctx)?;
        }
        Ok(())
    }

    /// `Perform`.
    fn perform(&mut self, item: &mut Node, ctx: &Context) -> Result<(), FilterStop> {
        let file_path =
            catalog::file_path(item, self.release.internal_path).map_err(str::to_owned)?;
        if !self.by_file_path.is_empty()
            && !(self.release.glob)(&self.by_file_path, &file_path).map_err(str::to_owned)?
        {
            return Ok(());
        }
        self.file_path = file_path;
        if self.should_put_value_by_path() {
            return Ok(self.put_value_by_path(item)?);
        }
        catalog::accept(self, item, ctx).map_err(|e| match e {
            catalog::WalkStop::Error(e) => FilterStop::Failed(e),
            catalog::WalkStop::Cancelled => FilterStop::Cancelled,
        })
    }

    fn to_results(&self) -> Vec<FnResult> {
        if self.results.is_empty() {
            return vec![catalog::item("no matches".into(), "", "")];
        }
        let mutated = !self.put_comment.is_empty() || !self.put_value.is_empty();
        self.results
            .iter()
            .map(|r| {
                let message = if mutated {
                    format!("Mutated field value to {}", catalog::quote(&r.value))
                } else {
                    format!("Matched field value {}", catalog::quote(&r.value))
                };
                catalog::item(message, &r.field_path, &r.file_path)
            })
            .collect()
    }

    /// `pathMatch`.
    fn path_match(&self, yaml_path: &str) -> bool {
        if self.by_path.is_empty() {
            return false;
        }
        let pattern: Vec<&str> = self.by_path.split('.').collect();
        let elems: Vec<&str> = yaml_path
            .strip_prefix('.')
            .unwrap_or(yaml_path)
            .split('.')
            .collect();
        back_track_match(&elems, &pattern)
    }

    /// `shouldPutValueByPath`.
    fn should_put_value_by_path(&self) -> bool {
        is_abs_path(&self.by_path)
            && !self.by_path.contains('[')
            && self.by_value.is_empty()
            && self.by_value_regex.is_empty()
            && !self.put_value.is_empty()
    }

    /// `putValueByPath`: kyaml's `LookupCreate(MappingNode, parents...)`
    /// then `SetField(last, value)`.
    fn put_value_by_path(&mut self, item: &mut Node) -> Result<(), String> {
        let parts: Vec<&str> = self.by_path.split('.').collect();
        let (last, parents) = match parts.split_last() {
            Some((last, parents)) => (*last, parents),
            None => ("", &[][..]),
        };
        let mut node = Some(item);
        let mut walked: Vec<&str> = Vec::new();
        for (i, part) in parents.iter().enumerate() {
            let Some(cur) = node.take() else { break };
            let next = parents.get(i + 1).copied().unwrap_or(last);
            node = step(cur, part, next, &walked)?;
            walked.push(part);
        }
        if let Some(target) = node {
            if !catalog::is_null(target) {
                if target.kind != Kind::Mapping {
                    return Err(wrong_kind(target, &walked, Kind::Mapping));
                }
                self.produced.take(self.put_value.len())?;
                let value = Node {
                    kind: Kind::Scalar,
                    value: self.put_value.as_str().into(),
                    ..Node::default()
                };
                catalog::set_field(target, last, value);
            }
        }
        self.results.push(Found {
            file_path: self.file_path.clone(),
            field_path: self.by_path.clone(),
            value: self.put_value.clone(),
        });
        Ok(())
    }
}

impl catalog::Visitor for SearchReplace {
    type Error = String;

    /// `visitMapping`: put-comment on the sequences `by-path` finds.
    fn visit_mapping(&mut self, map: &mut Node, path: &str) -> Result<(), String> {
        if self.put_comment.is_empty() {
            return Ok(());
        }
        for i in catalog::visit_fields(map) {
            let Some([key, value]) = map.content.get_mut(i..i + 2) else {
                continue;
            };
            if catalog::is_nil_or_empty(value) || value.kind != Kind::Sequence {
                continue;
            }
            let key_text = krm_yaml::emit::encode_node(key, false);
            let path_to_key = format!("{path}.{}", key_text.trim());
            if !self.path_match(path_to_key.strip_prefix('.').unwrap_or(&path_to_key)) {
                continue;
            }
            self.produced.take(self.put_comment.len())?;
            key.line_comment = self.put_comment.as_str().into();
            value.style = Style::FLOW;
            let val = krm_yaml::emit::encode_node(value, false);
            value.style = Style::FOLDED;
            self.results.push(Found {
                file_path: self.file_path.clone(),
                field_path: format!("{} # {}", self.by_path, self.put_comment),
                value: val.trim().to_owned(),
            });
        }
        Ok(())
    }

    /// `matchAndReplace`.
    fn visit_scalar(&mut self, node: &mut Node, path: &str) -> Result<(), String> {
        let path_match = self.path_match(path);
        let value_match = (!self.by_value.is_empty() && self.by_value == node.value)
            || self.regex.as_ref().is_some_and(|r| r.is_match(&node.value));
        let by_path_only = path_match && self.by_value.is_empty() && self.by_value_regex.is_empty();
        // `searchCriteriaMatch`: value and path, value only, path only.
        let found = (value_match && (path_match || self.by_path.is_empty())) || by_path_only;
        if !found {
            return Ok(());
        }
        if !self.put_comment.is_empty() {
            let comment = resolve_pattern(
                self.regex.as_ref(),
                &mut self.produced,
                &node.value,
                &self.put_comment,
            )?;
            node.line_comment = comment.into();
        }
        if !self.put_value.is_empty() {
            let value = resolve_pattern(
                self.regex.as_ref(),
                &mut self.produced,
                &node.value,
                &self.put_value,
            )?;
            node.value = value.into();
            node.tag = Tag::default();
        }
        if !self.file_path.is_empty() {
            let text = krm_yaml::emit::encode_node(node, false);
            self.results.push(Found {
                file_path: self.file_path.clone(),
                field_path: path.strip_prefix('.').unwrap_or(path).to_owned(),
                value: text.trim().to_owned(),
            });
        }
        Ok(())
    }
}

/// kyaml's `ErrorIfInvalid` message.
fn wrong_kind(node: &Node, path: &[&str], want: Kind) -> String {
    format!(
        "wrong Node Kind for {} expected: {} was {}: value: {{{}}}",
        path.join("."),
        kyaml::kind_name(want),
        kyaml::kind_name(node.kind),
        krm_yaml::emit::encode_node(node, false).trim()
    )
}

/// Go's `strconv.Atoi` accepts it.
fn is_int(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// One `PathGetter` step with `Create`: a sequence's element by index
/// (`-`: the last), or a mapping's field, created as a mapping (a
/// sequence when the next part is an index) when missing. `None`: the
/// path ends at a null or missing element; kyaml stops there.
fn step<'a>(
    cur: &'a mut Node,
    part: &str,
    next: &str,
    walked: &[&str],
) -> Result<Option<&'a mut Node>, String> {
    if catalog::is_null(cur) {
        return Ok(None);
    }
    if is_int(part) || part == "-" {
        if cur.kind != Kind::Sequence {
            return Err(wrong_kind(cur, walked, Kind::Sequence));
        }
        if part == "-" {
            return Ok(cur.content.last_mut());
        }
        return match part.parse::<i64>() {
            Ok(i) if i < 0 => Err(format!("array index {i} cannot be negative")),
            Ok(i) => Ok(usize::try_from(i).ok().and_then(|i| cur.content.get_mut(i))),
            Err(_) => Ok(None),
        };
    }
    if cur.kind != Kind::Mapping {
        return Err(wrong_kind(cur, walked, Kind::Mapping));
    }
    let i = match kyaml::field_index(cur, part) {
        Some(i) => i,
        None => {
            let kind = if is_int(next) || next == "-" {
                Kind::Sequence
            } else {
                Kind::Mapping
            };
            cur.content.push(Node {
                kind: Kind::Scalar,
                value: part.into(),
                ..Node::default()
            });
            cur.content.push(Node {
                kind,
                ..Node::default()
            });
            cur.content.len() - 2
        }
    };
    Ok(cur.content.get_mut(i + 1))
}

/// `resolvePattern`: `${n}` in the pattern replaced by the value's
/// capture groups; the text made counted in `produced`.
fn resolve_pattern(
    regex: Option<&regex::Regex>,
    produced: &mut catalog::Produced,
    value: &str,
    pattern: &str,
) -> Result<String, String> {
    produced.take(pattern.len())?;
    let Some(re) = regex else {
        return Ok(pattern.to_owned());
    };
    let mut res = pattern.to_owned();
    if let Some(caps) = re.captures(value) {
        for (i, m) in caps.iter().enumerate().skip(1) {
            res = produced.replace(&res, &format!("${{{i}}}"), m.map_or("", |m| m.as_str()))?;
        }
    }
    if has_group_reference(&res) {
        return Err("unable to resolve capture groups".into());
    }
    Ok(res)
}

/// Whether `\$\{([0-9]+)\}` matches.
fn has_group_reference(s: &str) -> bool {
    s.match_indices("${").any(|(i, _)| {
        let rest = s.get(i + 2..).unwrap_or_default();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest.as_bytes().get(digits) == Some(&b'}')
    })
}

/// `isAbsPath`.
fn is_abs_path(path: &str) -> bool {
    path.split('.').all(|e| !e.is_empty() && !e.contains('*'))
}

/// `backTrackMatch`: `*` is any one element, `**` any number. Go's
/// (n+1)×(m+1) table, kept one row at a time: `row[j]`, the elements so
/// far match the first `j` parts of the pattern.
fn back_track_match(elems: &[&str], pattern: &[&str]) -> bool {
    let m = pattern.len();
    let mut row = vec![false; m + 1];
    let mut next = vec![false; m + 1];
    let mut prev = true;
    for (j, cell) in row.iter_mut().enumerate() {
        // The empty elements match a prefix of `**`s only.
        prev = prev && (j == 0 || pattern.get(j - 1) == Some(&"**"));
        *cell = prev;
    }
    for e in elems {
        next.fill(false);
        for (j, p) in pattern.iter().enumerate() {
            let v = if *p == "**" {
                next.get(j).copied().unwrap_or(false) || row.get(j + 1).copied().unwrap_or(false)
            } else if *p == "*" || element_match(e, p) {
                row.get(j).copied().unwrap_or(false)
            } else {
                false
            };
            if let Some(c) = next.get_mut(j + 1) {
                *c = v;
            }
        }
        std::mem::swap(&mut row, &mut next);
    }
    row.get(m).copied().unwrap_or(false)
}

/// `elementMatch`: `a[0]` matches `a[0]`, `a[*]`, `*[0]` and `*[*]`.
fn element_match(elem: &str, pattern: &str) -> bool {
    if elem == pattern {
        return true;
    }
    if !elem.contains('[') {
        return false;
    }
    let e: Vec<&str> = elem.split('[').collect();
    let p: Vec<&str> = pattern.split('[').collect();
    let (e0, p0) = (
        e.first().copied().unwrap_or_default(),
        p.first().copied().unwrap_or_default(),
    );
    if p0 != "*" && e0 != p0 {
        return false;
    }
    match p.get(1) {
        Some(p1) => *p1 == "*]" || e.get(1) == Some(p1),
        None => false,
    }
}
