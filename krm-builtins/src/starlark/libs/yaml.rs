//! `encoding/yaml.star` (starlib's `yaml`, on gopkg.in/yaml.v2):
//! `loads(source)` and `dumps(obj, *more)`.
//!
//! - `loads` reads the first document (None for an empty one) with the
//!   workspace's YAML parser, which is yaml.v3's: YAML 1.1-only forms
//!   (`yes`/`no` booleans, `0777` octals) read as yaml.v3 reads them, not
//!   as yaml.v2 does. A dict keeps the document's key order (starlib's
//!   comes from a Go map, in no fixed order).
//! - `dumps` writes each value as yaml.v2 writes the Go value starlib
//!   makes of it: keys sorted (yaml.v2's order: numbers by value, strings
//!   with their digit runs compared as numbers), floats as Go formats
//!   them (`1e+06`), a list under a key not indented, documents after the
//!   first preceded by `---`. Long strings
//!   are not folded at 80 columns as yaml.v2 folds them.

use std::cmp::Ordering;

use krm_yaml::{Kind, Node};
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::tuple::UnpackTuple;
use starlark::values::{Heap, Value};

use super::super::convert::{node_value, value_node};
use super::super::data::go_float;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("yaml", members);
}

/// A mapping key's place in yaml.v2's order: its `reflect.Kind` and, for
/// numbers and booleans, its value.
fn key_rank(key: &Node) -> (u8, Option<f64>) {
    match key.tag.as_str() {
        "!!bool" => (1, Some(if key.value == "true" { 1.0 } else { 0.0 })),
        "!!int" => (2, key.value.parse::<f64>().ok()),
        "!!float" => (14, key.value.parse::<f64>().ok()),
        "!!null" => (20, None),
        _ => (24, None),
    }
}

/// yaml.v2's `keyList.Less`.
fn key_less(a: &Node, b: &Node) -> bool {
    let ((ak, af), (bk, bf)) = (key_rank(a), key_rank(b));
    if let (Some(af), Some(bf)) = (af, bf) {
        if af != bf {
            return af < bf;
        }
        if ak != bk {
            return ak < bk;
        }
        return a.value < b.value;
    }
    if ak != 24 || bk != 24 {
        return ak < bk;
    }
    natural_less(
        &a.value.chars().collect::<Vec<_>>(),
        &b.value.chars().collect::<Vec<_>>(),
    )
}

/// Strings compared letter by letter, a run of digits as its number.
fn natural_less(a: &[char], b: &[char]) -> bool {
    let digit = |c: Option<&char>| c.is_some_and(char::is_ascii_digit);
    let value = |c: char| i64::from(u32::from(c).wrapping_sub(u32::from('0')));
    let mut i = 0;
    while let (Some(&ca), Some(&cb)) = (a.get(i), b.get(i)) {
        if ca == cb {
            i += 1;
            continue;
        }
        let (al, bl) = (ca.is_alphabetic(), cb.is_alphabetic());
        if al && bl {
            return ca < cb;
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ca == '0' || cb == '0' {
            // A zero after other digits is not a leading zero.
            let mut j = i;
            while j > 0 && digit(a.get(j - 1)) {
                j -= 1;
                if a.get(j) != Some(&'0') {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while let Some(&c) = a.get(ai).filter(|c| c.is_ascii_digit()) {
            an = an.wrapping_mul(10).wrapping_add(value(c));
            ai += 1;
        }
        let mut bi = i;
        while let Some(&c) = b.get(bi).filter(|c| c.is_ascii_digit()) {
            bn = bn.wrapping_mul(10).wrapping_add(value(c));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ca < cb;
    }
    a.len() < b.len()
}

/// Every mapping's keys in yaml.v2's order (a Go map's marshaling), and
/// floats as yaml.v2 writes them (`1e+06`).
fn go_order(node: &mut Node) {
    for child in &mut node.content {
        go_order(child);
    }
    if node.kind == Kind::Scalar && node.tag == "!!float" {
        if let Some(f) = node.value.parse::<f64>().ok().filter(|f| f.is_finite()) {
            let text = go_float(f);
            // Go writes an integral float plainly (`1`), which reads
            // back as an int; so is it tagged, lest the tag be written.
            if text
                .trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
            {
                node.tag = "!!int".into();
            }
            node.value = text.into();
        }
    }
    if node.kind != Kind::Mapping {
        return;
    }
    let mut pairs = Vec::with_capacity(node.content.len() / 2);
    let mut content = std::mem::take(&mut node.content).into_iter();
    while let (Some(k), Some(v)) = (content.next(), content.next()) {
        pairs.push((k, v));
    }
    pairs.sort_by(|(a, _), (b, _)| {
        if key_less(a, b) {
            Ordering::Less
        } else if key_less(b, a) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    });
    node.content = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn loads<'v>(
        #[starlark(require = pos)] source: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let docs =
            krm_yaml::parse::parse(source).map_err(|e| anyhow::anyhow!("yaml.loads: {e}"))?;
        match docs.first() {
            None => Ok(Value::new_none()),
            Some(doc) => node_value(heap, doc).map_err(|e| anyhow::anyhow!("yaml.loads: {e}")),
        }
    }

    fn dumps<'v>(
        #[starlark(require = pos)] obj: Value<'v>,
        #[starlark(args)] more: UnpackTuple<Value<'v>>,
    ) -> anyhow::Result<String> {
        let mut out = String::new();
        for (n, v) in std::iter::once(obj).chain(more.items).enumerate() {
            if n > 0 {
                out.push_str("---\n");
            }
            let mut node = value_node(v, 0).map_err(|e| anyhow::anyhow!("yaml.dumps: {e}"))?;
            go_order(&mut node);
            out.push_str(&krm_yaml::emit::encode_node(&node, true));
        }
        Ok(out)
    }
}
