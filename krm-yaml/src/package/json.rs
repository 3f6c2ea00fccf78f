//! A resource as a `.json` file: kyaml's `RNode.MarshalJSON`, which
//! encodes the node, decodes the text into Go values (aliases followed) and
//! writes those with Go's encoding/json.

use serde_json::Value as J;

use crate::alias::{AliasError, Follow};
use crate::{Kind, Node};

/// The file's text: indented, keys sorted, a final newline, and the
/// characters Go escapes escaped.
pub(super) fn text(node: &Node) -> Result<String, AliasError> {
    let value = to_json(node)?;
    let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
    s.push('\n');
    // Go's encoding/json escapes these.
    if s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        s = s
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029");
    }
    Ok(s)
}

/// A node as JSON, the way kyaml's `RNode.MarshalJSON` goes through Go
/// values (mappings become objects with sorted keys; aliases are what
/// they name, under yaml.v3's budget).
pub fn to_json(node: &Node) -> Result<J, AliasError> {
    // Each result keeps the node it came from: a key is written as its
    // text.
    Follow::new(node)
        .fold(node, |n, content: Vec<(J, &Node)>| {
            let value = match n.kind {
                Kind::Document => content.into_iter().next().map_or(J::Null, |c| c.0),
                Kind::Mapping => {
                    let mut map = serde_json::Map::new();
                    let mut content = content.into_iter();
                    while let (Some((_, k)), Some((v, _))) = (content.next(), content.next()) {
                        map.insert(k.value.to_string(), v);
                    }
                    J::Object(map)
                }
                Kind::Sequence => J::Array(content.into_iter().map(|c| c.0).collect()),
                // Never given (aliases are followed).
                Kind::Alias => J::Null,
                Kind::Scalar => scalar(n),
            };
            (value, n)
        })
        .map(|(value, _)| value)
}

fn scalar(node: &Node) -> J {
    match node.tag.as_str() {
        "!!null" => J::Null,
        "!!bool" => J::Bool(matches!(node.value.as_str(), "true" | "True" | "TRUE")),
        "!!int" => go_int(&node.value)
            .or_else(|| node.value.parse::<f64>().ok().and_then(go_float))
            .unwrap_or_else(|| J::String(node.value.to_string())),
        "!!float" => float_value(&node.value)
            .and_then(go_float)
            .unwrap_or_else(|| J::String(node.value.to_string())),
        _ => J::String(node.value.to_string()),
    }
}

/// An integer as yaml.v3 reads one (`0x`, `0o`, `0b` and a leading `0`
/// for octal, `_` between digits, past `i64` as `u64`), for JSON.
fn go_int(s: &str) -> Option<serde_json::Value> {
    let t = s.replace('_', "");
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(&t)),
    };
    let (radix, digits) = if let Some(d) = digits.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = digits.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = digits.strip_prefix("0b") {
        (2, d)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if !neg {
        return Some(magnitude.into());
    }
    0i64.checked_sub_unsigned(magnitude).map(Into::into)
}

/// A float as yaml.v3 reads one (`.inf` and `.nan` have no JSON form).
fn float_value(s: &str) -> Option<f64> {
    s.replace('_', "")
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
}

/// A float as Go's encoding/json writes it: whole numbers below 1e21
/// without a fraction (`1`, `1000`), others as Rust's shortest form.
fn go_float(f: f64) -> Option<serde_json::Value> {
    if f.fract() == 0.0 && f.abs() < 1e21 && f.abs() < 9.2e18 {
        #[allow(clippy::cast_possible_truncation)]
        return Some((f as i64).into());
    }
    serde_json::Number::from_f64(f).map(serde_json::Value::Number)
}
