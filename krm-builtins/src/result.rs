//! A function's results, as the catalog's functions report them (kyaml's
//! `framework.Result`, the SDK's `fn.Result`): the fields and their order
//! in the `results` of the ResourceList they write.

use std::collections::BTreeMap;

use krm_yaml::Node;

/// `error`, `warning` or `info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Severity {
    #[default]
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// `resourceRef`: kyaml's `ResourceIdentifier`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// `field`: the path of the field, its value and the one proposed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Field {
    pub path: String,
    pub current_value: Option<Node>,
    pub proposed_value: Option<Node>,
}

/// `file`: where the resource was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub index: i64,
}

/// One result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FnResult {
    pub message: String,
    /// `None`: written without `severity` (kpt prints such a result as
    /// `[info]`).
    pub severity: Option<Severity>,
    pub resource_ref: Option<ResourceRef>,
    pub field: Option<Field>,
    pub file: Option<File>,
    pub tags: BTreeMap<String, String>,
}

impl FnResult {
    /// A result with this severity and message.
    pub fn new(severity: Severity, message: impl Into<String>) -> FnResult {
        FnResult {
            message: message.into(),
            severity: Some(severity),
            ..FnResult::default()
        }
    }

    pub fn error(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Error, message)
    }

    pub fn warning(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Warning, message)
    }

    pub fn info(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Info, message)
    }

    /// The result as Go's YAML encoder writes it in a ResourceList
    /// (`omitempty` fields left out, the framework's field order).
    pub fn to_node(&self) -> Node {
        let mut m = Vec::new();
        let mut put = |k: &str, v: Node| {
            m.push(Node::string(k));
            m.push(v);
        };
        if !self.message.is_empty() {
            put("message", Node::string(self.message.as_str()));
        }
        if let Some(s) = self.severity {
            put("severity", Node::string(s.as_str()));
        }
        if let Some(r) = &self.resource_ref {
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
        if let Some(f) = &self.field {
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
                    fm.push(v.clone());
                }
            }
            put("field", Node::mapping(fm));
        }
        if let Some(f) = &self.file {
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
        if !self.tags.is_empty() {
            let tags = self
                .tags
                .iter()
                .flat_map(|(k, v)| [Node::string(k.as_str()), Node::string(v.as_str())])
                .collect();
            put("tags", Node::mapping(tags));
        }
        Node::mapping(m)
    }
}
