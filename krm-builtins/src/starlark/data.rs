//! The resources as plain data: what a program can see of them (no
//! comments, styles or positions), the sandbox's wire form both ways
//! (postcard: a ResourceList of 4,000 Deployments is ~6 MB where the
//! nodes' JSON was 36 MB), and what tells a resource the program left
//! alone (its data is equal to what went in).

use krm_yaml::{gov3, Kind, Node};
use serde::{Deserialize, Serialize};

/// One value, typed as yaml.v3 decodes a node into a Go `interface{}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Data {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer past i64, as its decimal text.
    Big(String),
    Float(f64),
    Str(String),
    Seq(Vec<Data>),
    Map(Vec<(Data, Data)>),
}

impl Data {
    /// A node's data; aliases followed (under yaml.v3's budget).
    pub fn from_node(node: &Node) -> Result<Data, String> {
        if let Some(d) = Data::walk(node) {
            return Ok(d);
        }
        let v = krm_yaml::value::to_value(node).map_err(|e| e.to_string())?;
        Ok(Data::from_value(&v))
    }

    /// [`Data::from_node`] of a node without aliases (`None` at the first
    /// alias: krm_yaml's values follow them).
    fn walk(node: &Node) -> Option<Data> {
        Some(match node.kind {
            Kind::Document => match node.content.first() {
                Some(c) => Data::walk(c)?,
                None => Data::Null,
            },
            Kind::Mapping => {
                let mut map = Vec::with_capacity(node.content.len() / 2);
                for kv in node.content.chunks_exact(2) {
                    if let [k, v] = kv {
                        map.push((Data::walk(k)?, Data::walk(v)?));
                    }
                }
                Data::Map(map)
            }
            Kind::Sequence => Data::Seq(
                node.content
                    .iter()
                    .map(Data::walk)
                    .collect::<Option<Vec<_>>>()?,
            ),
            Kind::Alias => return None,
            Kind::Scalar => match node.tag.as_str() {
                "!!null" => Data::Null,
                "!!bool" => Data::Bool(matches!(node.value.as_str(), "true" | "True" | "TRUE")),
                "!!int" | "!!float" => {
                    let v = node.value.as_str();
                    let int = (node.tag == "!!int")
                        .then(|| crate::config::yaml_int(v, false))
                        .flatten();
                    // Past i64, or a float: Go's ParseFloat; `.inf` and
                    // the like as krm_yaml's values read them.
                    match (int, v.replace('_', "").parse::<f64>()) {
                        (Some(i), _) => Data::Int(i),
                        (None, Ok(f)) if f.is_finite() => Data::Float(f),
                        _ => serde_yaml_ng::from_str::<serde_yaml_ng::Value>(v)
                            .ok()
                            .filter(serde_yaml_ng::Value::is_number)
                            .map_or_else(|| Data::Str(v.to_owned()), |n| Data::from_value(&n)),
                    }
                }
                _ => Data::Str(node.value.to_string()),
            },
        })
    }

    pub fn from_value(v: &serde_yaml_ng::Value) -> Data {
        use serde_yaml_ng::Value as Y;
        match v {
            Y::Null => Data::Null,
            Y::Bool(b) => Data::Bool(*b),
            Y::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Data::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Data::Big(u.to_string())
                } else {
                    Data::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Y::String(s) => Data::Str(s.clone()),
            Y::Sequence(s) => Data::Seq(s.iter().map(Data::from_value).collect()),
            Y::Mapping(m) => Data::Map(
                m.iter()
                    .map(|(k, v)| (Data::from_value(k), Data::from_value(v)))
                    .collect(),
            ),
            Y::Tagged(t) => Data::from_value(&t.value),
        }
    }

    /// A node for the data, as yaml.v3 encodes Go values: strings tagged
    /// `!!str` (the encoder quotes those that would read as another type).
    pub fn to_node(&self) -> Node {
        let scalar = |tag: &str, value: String| Node {
            tag: tag.into(),
            value: value.into(),
            ..Node::default()
        };
        match self {
            Data::Null => scalar("!!null", "null".into()),
            Data::Bool(b) => scalar("!!bool", b.to_string()),
            Data::Int(i) => scalar("!!int", i.to_string()),
            Data::Big(s) => scalar("!!int", s.clone()),
            // yaml.v3's words for what strconv calls NaN and ±Inf.
            Data::Float(f) if f.is_nan() => scalar("!!float", ".nan".into()),
            Data::Float(f) if f.is_infinite() => {
                scalar("!!float", if *f > 0.0 { ".inf" } else { "-.inf" }.into())
            }
            Data::Float(f) => scalar("!!float", go_float(*f)),
            Data::Str(s) => Node::string(s.as_str()),
            Data::Seq(s) => Node::sequence(s.iter().map(Data::to_node).collect()),
            Data::Map(m) => Node::mapping(
                m.iter()
                    .flat_map(|(k, v)| [k.to_node(), v.to_node()])
                    .collect(),
            ),
        }
    }

    /// Every mapping's keys, at every depth, in the order yaml.v3 writes
    /// the keys of a Go map (`keyList.Less`, [`go_key_less`]): what the
    /// catalog's container writes, as it marshals what the program left
    /// through `map[string]interface{}` (starlib's `util.Unmarshal`) with
    /// `yaml.Marshal` (`third_party/.../starlark/starlark.go`,
    /// `starlarkValueToRNode`).
    pub fn sort_go_keys(&mut self) {
        match self {
            Data::Seq(seq) => seq.iter_mut().for_each(Data::sort_go_keys),
            Data::Map(map) => {
                for (_, v) in map.iter_mut() {
                    v.sort_go_keys();
                }
                merge_sort(map, &|(a, _), (b, _)| go_key_less(a, b));
            }
            _ => {}
        }
    }

    /// The string at `path` through mappings.
    pub fn get_str(&self, path: &[&str]) -> Option<&str> {
        let mut cur = self;
        for key in path {
            let Data::Map(m) = cur else { return None };
            cur = m
                .iter()
                .find(|(k, _)| matches!(k, Data::Str(s) if s == key))
                .map(|(_, v)| v)?;
        }
        match cur {
            Data::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A key's `reflect.Kind` as yaml.v3's sorter sees it (the value in an
/// `interface{}`; a nil one stays `Interface`), and its number for
/// `keyFloat` (ints, floats, booleans).
fn key_kind(d: &Data) -> (u8, Option<f64>) {
    match d {
        Data::Bool(b) => (1, Some(if *b { 1.0 } else { 0.0 })),
        Data::Int(i) => (2, Some(*i as f64)),
        Data::Big(s) => (2, s.parse().ok()),
        Data::Float(f) => (14, Some(*f)),
        Data::Null => (20, None),
        Data::Map(_) => (21, None),
        Data::Seq(_) => (23, None),
        Data::Str(_) => (24, None),
    }
}

/// yaml.v3's `keyList.Less` (`sorter.go`, the same in every yaml.v3 the
/// catalog's releases used, and in sigs.k8s.io/yaml's `goyaml.v3` of
/// kyaml v0.19.0): numbers and booleans by value, then by kind; other
/// kinds by kind; strings compared rune by rune, a run of digits as its
/// number, a letter before a non-letter unless after a digit
/// ([`gov3::go_key_less`]).
pub fn go_key_less(a: &Data, b: &Data) -> bool {
    let ((ak, af), (bk, bf)) = (key_kind(a), key_kind(b));
    if let (Some(af), Some(bf)) = (af, bf) {
        if af != bf {
            // NaN keys (Go's order among them is arbitrary) go last.
            return match (af.is_nan(), bf.is_nan()) {
                (false, false) => af < bf,
                (an, bn) => !an && bn,
            };
        }
        if ak != bk {
            return ak < bk;
        }
        return match (a, b) {
            (Data::Int(x), Data::Int(y)) => x < y,
            (Data::Bool(x), Data::Bool(y)) => !x && *y,
            _ => false,
        };
    }
    match (a, b) {
        (Data::Str(a), Data::Str(b)) => gov3::go_key_less(a, b),
        _ => ak < bk,
    }
}

/// `v` sorted by `less`, stably, with a merge sort that (unlike the
/// standard library's sorts) cannot panic on an order that is not total.
fn merge_sort<T>(v: &mut Vec<T>, less: &dyn Fn(&T, &T) -> bool) {
    if v.len() < 2 {
        return;
    }
    let mut order: Vec<usize> = (0..v.len()).collect();
    let mut width = 1;
    while width < order.len() {
        let mut out = Vec::with_capacity(order.len());
        for chunk in order.chunks(2 * width) {
            let (left, right) = chunk.split_at(width.min(chunk.len()));
            let (mut l, mut r) = (left.iter().peekable(), right.iter().peekable());
            loop {
                let take_right = match (l.peek(), r.peek()) {
                    (Some(&&a), Some(&&b)) => match (v.get(a), v.get(b)) {
                        (Some(x), Some(y)) => less(y, x),
                        _ => false,
                    },
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (None, None) => break,
                };
                let next = if take_right { r.next() } else { l.next() };
                out.extend(next.copied());
            }
        }
        std::mem::swap(&mut order, &mut out);
        width *= 2;
    }
    let mut slots: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    v.extend(
        order
            .into_iter()
            .filter_map(|i| slots.get_mut(i).and_then(Option::take)),
    );
}

/// A float as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes it
/// (what `%v` and the YAML encoders write): shortest digits, an exponent
/// from 1e+06 on and below 1e-04.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return format!("{f}");
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
    use super::*;

    #[test]
    fn nodes_read_as_yaml_v3_types_and_go_floats() {
        let doc = &krm_yaml::parse::parse(
            "a: 0x10\nb: 1_000\nc: yes\nd: true\ne: ~\nf: 1.5\ng: .inf\nh: '7'\ni: 99999999999999999999\nj: 2001-12-14\n",
        )
        .unwrap()[0];
        let d = Data::from_node(doc).unwrap();
        let Data::Map(m) = &d else { panic!() };
        let vals: Vec<&Data> = m.iter().map(|(_, v)| v).collect();
        assert_eq!(vals[0], &Data::Int(16));
        assert_eq!(vals[1], &Data::Int(1000));
        assert_eq!(vals[2], &Data::Str("yes".into()));
        assert_eq!(vals[3], &Data::Bool(true));
        assert_eq!(vals[4], &Data::Null);
        assert_eq!(vals[5], &Data::Float(1.5));
        assert_eq!(vals[6], &Data::Float(f64::INFINITY));
        assert_eq!(vals[7], &Data::Str("7".into()));
        assert_eq!(vals[8], &Data::Float(1e20));
        assert_eq!(vals[9], &Data::Str("2001-12-14".into()));
        for (f, s) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1.25e-5, "1.25e-05"),
            (-2.5e30, "-2.5e+30"),
            (0.0, "0"),
        ] {
            assert_eq!(go_float(f), s);
        }
    }
}
