//! The setter comment syntax apply-setters, create-setters and
//! list-setters share (catalog `functions/go/*-setters`): a field's line
//! comment `# kpt-set: <pattern>`, where `${name}` in the pattern is a
//! setter, and the pattern's value parts read back from a field's value.

/// `SetterCommentIdentifier`.
pub(crate) const SETTER_COMMENT: &str = "# kpt-set: ";

/// `extractSetterPattern`: the pattern after `# kpt-set: `, trimmed; ""
/// when the comment is not a setter comment.
pub(crate) fn extract_setter_pattern(line_comment: &str) -> &str {
    line_comment
        .strip_prefix(SETTER_COMMENT)
        .map_or("", str::trim)
}

/// `unresolvedSetters`: each `${...}` in the pattern (regexp
/// `\$\{([^}]*)\}`, leftmost, not overlapping), with its braces.
pub(crate) fn unresolved_setters(pattern: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = pattern.get(from..).and_then(|rest| rest.find("${")) {
        let start = from + start;
        let Some(close) = pattern.get(start + 2..).and_then(|rest| rest.find('}')) else {
            break;
        };
        let end = start + 2 + close + 1;
        if let Some(s) = pattern.get(start..end) {
            out.push(s);
        }
        from = end;
    }
    out
}

/// `clean`: the name inside `${...}`.
pub(crate) fn clean(input: &str) -> &str {
    let input = input.trim();
    let input = input.strip_prefix("${").unwrap_or(input);
    input.strip_suffix('}').unwrap_or(input)
}

/// `currentSetterValues`: the values of the pattern's setters in a field's
/// current value, by matching the value against the pattern with each
/// setter a greedy `(.*)` (Go's regexp, unanchored, leftmost-first: the
/// `regex` crate's semantics). Empty when it does not match or any setter
/// would be empty. Go returns a map; here a setter named twice is listed
/// once, with its last match (the map's last write).
pub(crate) fn current_setter_values(pattern: &str, value: &str) -> Vec<(String, String)> {
    let urs = unresolved_setters(pattern);
    let mut re = regex::escape(pattern);
    for name in &urs {
        re = re.replace(&regex::escape(name), "(.*)");
    }
    let Ok(re) = regex::Regex::new(&re) else {
        return Vec::new();
    };
    let Some(caps) = re.captures(value) else {
        return Vec::new();
    };
    let values: Vec<&str> = caps
        .iter()
        .skip(1)
        .map(|m| m.map_or("", |m| m.as_str()))
        .collect();
    if values.len() != urs.len() {
        return Vec::new();
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, v) in urs.iter().zip(values) {
        if v.is_empty() {
            return Vec::new();
        }
        let name = clean(name);
        match out.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = v.to_owned(),
            None => out.push((name.to_owned(), v.to_owned())),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_their_values() {
        assert_eq!(extract_setter_pattern("# kpt-set: ${a} "), "${a}");
        assert_eq!(extract_setter_pattern("#kpt-set: ${a}"), "");
        assert_eq!(unresolved_setters("x${a}-${b}}${c"), vec!["${a}", "${b}"]);
        assert_eq!(clean(" ${name} "), "name");
        assert_eq!(
            current_setter_values("app.${stage}.${domain}.${tld}", "app.dev.example.com"),
            vec![
                ("stage".to_owned(), "dev".to_owned()),
                ("domain".to_owned(), "example".to_owned()),
                ("tld".to_owned(), "com".to_owned())
            ]
        );
        // Greedy: the first setter takes what it can.
        assert_eq!(
            current_setter_values("${a}-${b}", "x-y-z"),
            vec![
                ("a".to_owned(), "x-y".to_owned()),
                ("b".to_owned(), "z".to_owned())
            ]
        );
        assert!(current_setter_values("${a}-${b}", "x-").is_empty());
        assert!(current_setter_values("${a}.x", "nope").is_empty());
        // Regex characters in the pattern and in names are literal.
        assert_eq!(
            current_setter_values("(${a+b})*", "(v)*"),
            vec![("a+b".to_owned(), "v".to_owned())]
        );
    }
}
