//! Conversions between [`Node`] trees and `serde_yaml_ng::Value`, for the
//! parts of `eval` that read or write plain data (results) rather than a
//! resource's text.

use serde_yaml_ng::{Mapping, Value};

use super::{Kind, Node};

/// A node's data: tags decide the types, as yaml.v3 decodes into Go
/// values (aliases are followed no further than `null`).
pub fn to_value(node: &Node) -> Value {
    match node.kind {
        Kind::Document => node.content.first().map(to_value).unwrap_or(Value::Null),
        Kind::Mapping => Value::Mapping(
            node.content
                .chunks_exact(2)
                .map(|kv| (to_value(&kv[0]), to_value(&kv[1])))
                .collect::<Mapping>(),
        ),
        Kind::Sequence => Value::Sequence(node.content.iter().map(to_value).collect()),
        Kind::Alias => Value::Null,
        Kind::Scalar => match node.tag.as_str() {
            "!!null" => Value::Null,
            "!!bool" => Value::Bool(matches!(node.value.as_str(), "true" | "True" | "TRUE")),
            "!!int" | "!!float" => serde_yaml_ng::from_str::<Value>(&node.value)
                .ok()
                .filter(Value::is_number)
                .unwrap_or_else(|| Value::String(node.value.to_string())),
            _ => Value::String(node.value.to_string()),
        },
    }
}

/// A node for data, as yaml.v3 encodes Go values: strings tagged `!!str`
/// (the encoder quotes those that would read as another type).
pub fn from_value(v: &Value) -> Node {
    match v {
        Value::Null => Node {
            tag: "!!null".into(),
            value: "null".into(),
            ..Node::default()
        },
        Value::Bool(b) => Node {
            tag: "!!bool".into(),
            value: b.to_string().into(),
            ..Node::default()
        },
        Value::Number(n) => Node {
            tag: if n.is_f64() { "!!float" } else { "!!int" }.into(),
            value: n.to_string().into(),
            ..Node::default()
        },
        Value::String(s) => Node::string(s.as_str()),
        Value::Sequence(s) => Node::sequence(s.iter().map(from_value).collect()),
        Value::Mapping(m) => Node::mapping(
            m.iter()
                .flat_map(|(k, v)| [from_value(k), from_value(v)])
                .collect(),
        ),
        Value::Tagged(t) => from_value(&t.value),
    }
}
