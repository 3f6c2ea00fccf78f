//! A function's results, as the catalog's functions report them (kyaml's
//! `framework.Result`, the SDK's `fn.Result`): the workspace's one model
//! ([`krm_results`]), and how they are written in the `results` of the
//! ResourceList a function leaves (the fields and their order).

use krm_yaml::Node;

pub use krm_results::{Field, File, FnResult, ResourceRef, Severity};

/// A result as Go's YAML encoder writes it in a ResourceList (`omitempty`
/// fields left out, the framework's field order).
pub fn to_node(result: &FnResult) -> Node {
    let mut m = Vec::new();
    let mut put = |k: &str, v: Node| {
        m.push(Node::string(k));
        m.push(v);
    };
    if !result.message.is_empty() {
        put("message", Node::string(result.message.as_str()));
    }
    if result.severity != Severity::Unset {
        put("severity", Node::string(result.severity.as_written()));
    }
    if let Some(r) = &result.resource_ref {
        let mut rm = Vec::new();
        for (k, v) in [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("namespace", &r.namespace),
        ] {
            if !v.is_empty() {
                rm.push(Node::string(k));
                rm.push(Node::string(v.as_str()));
            }
        }
        put("resourceRef", Node::mapping(rm));
    }
    if let Some(f) = &result.field {
        let mut fm = Vec::new();
        if !f.path.is_empty() {
            fm.push(Node::string("path"));
            fm.push(Node::string(f.path.as_str()));
        }
        for (k, v) in [
            ("currentValue", &f.current_value),
            ("proposedValue", &f.proposed_value),
        ] {
            if let Some(v) = v {
                fm.push(Node::string(k));
                fm.push(krm_yaml::value::from_value(v));
            }
        }
        put("field", Node::mapping(fm));
    }
    if let Some(f) = &result.file {
        let mut fm = Vec::new();
        if !f.path.is_empty() {
            fm.push(Node::string("path"));
            fm.push(Node::string(f.path.as_str()));
        }
        if f.index != 0 {
            fm.push(Node::string("index"));
            fm.push(Node::scalar(f.index.to_string()));
        }
        put("file", Node::mapping(fm));
    }
    if !result.tags.is_empty() {
        let tags = result
            .tags
            .iter()
            .flat_map(|(k, v)| [Node::string(k.as_str()), Node::string(v.as_str())])
            .collect();
        put("tags", Node::mapping(tags));
    }
    Node::mapping(m)
}
