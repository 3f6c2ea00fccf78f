//! Semver tag constraints as Porch and kpt write them ([`TagConstraint`]), and picking the
//! highest tag that satisfies one ([`resolve_tag`]).

use super::error::ConfigError;

/// A parsed tag constraint: alternatives separated by `||`, each a set of comparators that
/// must all hold.
///
/// The syntax is that of Masterminds/semver (what Porch and kpt use), translated to the
/// `semver` crate: comparators are separated by commas or whitespace (`>=0.2, <0.3`,
/// `>= 0.2 < 0.3`); a leading `v` is dropped from versions (`v0.4.x`); a version without an
/// operator means `=` (exactly that version, or any version within a partial one: `0.4` =
/// `0.4.*`) — unlike the `semver` crate, where it would mean `^`; `~`, `^`, `<`, `<=`, `>`,
/// `>=`, `=` and wildcards (`*`, `x`, `X`) keep their meaning; `A - B` is `>=A, <=B`.
/// `!=` is not supported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagConstraint {
    alternatives: Vec<semver::VersionReq>,
}

impl TagConstraint {
    /// Parses a constraint. An empty (or blank) constraint matches every semver tag.
    pub fn parse(constraint: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidConstraint {
            constraint: constraint.to_string(),
            reason,
        };
        if constraint.trim().is_empty() {
            return Ok(TagConstraint {
                alternatives: vec![semver::VersionReq::STAR],
            });
        }
        let mut alternatives = Vec::new();
        for alternative in constraint.split("||") {
            let translated = translate_alternative(alternative).map_err(invalid)?;
            let req = semver::VersionReq::parse(&translated).map_err(|e| invalid(e.to_string()))?;
            alternatives.push(req);
        }
        Ok(TagConstraint { alternatives })
    }

    /// Whether a parsed version satisfies the constraint.
    pub fn matches(&self, version: &semver::Version) -> bool {
        self.alternatives.iter().any(|req| req.matches(version))
    }

    /// Whether a tag satisfies the constraint; non-semver tags never do.
    pub fn matches_tag(&self, tag: &str) -> bool {
        tag_version(tag).is_some_and(|v| self.matches(&v))
    }
}

fn strip_v(version: &str) -> &str {
    match version.strip_prefix(['v', 'V']) {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => version,
    }
}

/// Translates one `||` alternative into `semver::VersionReq` syntax.
fn translate_alternative(alternative: &str) -> Result<String, String> {
    #[derive(Debug)]
    enum Token<'a> {
        Comparator(&'a str, &'a str),
        Hyphen,
    }
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!' | '~' | '^');
    let is_version =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '-' | '_');
    let mut tokens = Vec::new();
    let mut rest = alternative;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if rest.is_empty() {
            break;
        }
        let op_len = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
        let (op, after_op) = rest.split_at(op_len);
        let after_ws = after_op.trim_start();
        let version_len = after_ws
            .find(|c: char| !is_version(c))
            .unwrap_or(after_ws.len());
        let (version, after) = after_ws.split_at(version_len);
        if op.is_empty() && version == "-" {
            tokens.push(Token::Hyphen);
        } else if version.is_empty() {
            let unexpected = after_ws.chars().next().map_or_else(
                || format!("operator \"{op}\" without a version"),
                |c| format!("unexpected character '{c}'"),
            );
            return Err(unexpected);
        } else {
            tokens.push(Token::Comparator(op, strip_v(version)));
        }
        rest = after;
    }
    if tokens.is_empty() {
        return Err("empty alternative".to_string());
    }
    let mut comparators: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            (
                Token::Comparator("", low),
                Some(Token::Hyphen),
                Some(Token::Comparator("", high)),
            ) => {
                comparators.push(format!(">={low}"));
                comparators.push(format!("<={high}"));
                i += 3;
            }
            (Token::Hyphen, _, _) => return Err("misplaced '-' (use \"A - B\")".to_string()),
            (Token::Comparator(op, version), _, _) => {
                let op = match *op {
                    "" | "==" => {
                        if version.contains(['*', 'x', 'X']) {
                            ""
                        } else {
                            "="
                        }
                    }
                    "!=" => return Err("operator \"!=\" is not supported".to_string()),
                    "=<" => "<=",
                    "=>" => ">=",
                    other => other,
                };
                comparators.push(format!("{op}{version}"));
                i += 1;
            }
        }
    }
    Ok(comparators.join(", "))
}

/// A tag as a semver version: a leading `v` is dropped and a missing minor or patch is
/// padded with 0 (`v0.4.1` → 0.4.1, `0.4` → 0.4.0, `v1` → 1.0.0, `v1.2.3-rc.1` →
/// 1.2.3-rc.1). `None` for non-semver tags (`latest`, `unstable`, `v1.2.3.4`).
pub fn tag_version(tag: &str) -> Option<semver::Version> {
    let tag = strip_v(tag);
    let (core, build) = match tag.split_once('+') {
        Some((core, build)) => (core, Some(build)),
        None => (tag, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (core, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let mut text = String::new();
    for i in 0..3 {
        if i > 0 {
            text.push('.');
        }
        let part = parts.get(i).copied().unwrap_or("0");
        // Tolerate leading zeros (`v01`), which strict semver rejects.
        let trimmed = part.trim_start_matches('0');
        text.push_str(if trimmed.is_empty() { "0" } else { trimmed });
    }
    if let Some(pre) = pre {
        text.push('-');
        text.push_str(pre);
    }
    if let Some(build) = build {
        text.push('+');
        text.push_str(build);
    }
    semver::Version::parse(&text).ok()
}

/// Picks the highest tag of `candidates` satisfying `constraint` (see [`TagConstraint`] for
/// the syntax). Non-semver tags never satisfy a constraint; an empty constraint accepts
/// every semver tag (so the highest semver tag wins). When several candidates are the same
/// version (`v0.4` and `v0.4.0`), the first one listed wins. `Ok(None)` when nothing
/// satisfies; an error naming the constraint when it does not parse.
pub fn resolve_tag(candidates: &[String], constraint: &str) -> Result<Option<String>, ConfigError> {
    let constraint = TagConstraint::parse(constraint)?;
    Ok(best_tag(candidates.iter().map(String::as_str), &constraint).map(str::to_string))
}

/// The highest of `candidates` satisfying `constraint`, the first listed among equal
/// versions: [`resolve_tag`] and the index, which keeps its tags in configuration order,
/// share it.
pub(super) fn best_tag<'a>(
    candidates: impl Iterator<Item = &'a str>,
    constraint: &TagConstraint,
) -> Option<&'a str> {
    let mut best: Option<(semver::Version, &'a str)> = None;
    for tag in candidates {
        let Some(version) = tag_version(tag) else {
            continue;
        };
        if !constraint.matches(&version) {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| version > *b) {
            best = Some((version, tag));
        }
    }
    best.map(|(_, tag)| tag)
}
#[cfg(test)]
mod tests;
