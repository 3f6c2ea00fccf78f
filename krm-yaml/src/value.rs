//! Conversions between [`Node`] trees and `serde_yaml_ng::Value`, for the
//! parts of `eval` that read or write plain data (results) rather than a
//! resource's text.

use serde_yaml_ng::{Mapping, Value};

use crate::alias::{AliasError, Follow};
use crate::{Kind, Node};

/// A node's data: tags decide the types, as yaml.v3 decodes into Go
/// values; aliases are followed within `node` (see [`to_value_in`]).
pub fn to_value(node: &Node) -> Result<Value, AliasError> {
    to_value_in(node, node)
}

/// The data of `node`, a node of the tree `root` (a results list inside
/// a ResourceList): its aliases may name anchors anywhere before them in
/// `root`. Aliases are followed under yaml.v3's budget ([`crate::alias`]),
/// so an alias bomb is an error, as is an alias inside what it names.
pub fn to_value_in(root: &Node, node: &Node) -> Result<Value, AliasError> {
    // Without an alias in `node`, no anchor needs finding in `root` (a
    // ResourceList's items are nearly all of it).
    let root = if crate::alias::has_alias(node) {
        root
    } else {
        node
    };
    Follow::new(root).fold(node, |n, content| match n.kind {
        Kind::Document => content.into_iter().next().unwrap_or(Value::Null),
        Kind::Mapping => {
            let mut map = Mapping::with_capacity(content.len() / 2);
            let mut content = content.into_iter();
            while let (Some(k), Some(v)) = (content.next(), content.next()) {
                map.insert(k, v);
            }
            Value::Mapping(map)
        }
        Kind::Sequence => Value::Sequence(content),
        // Never given (aliases are followed); no data.
        Kind::Alias => Value::Null,
        Kind::Scalar => scalar(n),
    })
}

fn scalar(node: &Node) -> Value {
    match node.tag.as_str() {
        "!!null" => Value::Null,
        "!!bool" => Value::Bool(matches!(node.value.as_str(), "true" | "True" | "TRUE")),
        "!!int" | "!!float" => serde_yaml_ng::from_str::<Value>(&node.value)
            .ok()
            .filter(Value::is_number)
            .unwrap_or_else(|| Value::String(node.value.to_string())),
        _ => Value::String(node.value.to_string()),
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
