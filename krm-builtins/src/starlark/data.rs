//! The resources as plain data: what a program can see of them (no
//! comments, styles or positions), the sandbox's wire form both ways
//! (postcard: a ResourceList of 4,000 Deployments is ~6 MB where the
//! nodes' JSON was 36 MB), and what tells a resource the program left
//! alone (its data is equal to what went in).

use krm_yaml::{Kind, Node};
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
