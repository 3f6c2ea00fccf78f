//! yaml.v3's `Marshal` of the Kptfile's types (kyaml's forked encoder):
//! the types' field order, `omitempty` fields left out, maps sorted as
//! yaml.v3 sorts them, every value a Go string.

use krm_yaml::gov3::{go_key_order, go_string};
use krm_yaml::Node;

use super::kptfile::{
    Function, Git, GitLock, Inventory, KptFile, ObjectMeta, PackageInfo, Pipeline, StrMap,
    Upstream, UpstreamLock,
};

/// A struct's fields, in the struct's order, `omitempty` ones left out.
#[derive(Default)]
struct Fields(Vec<Node>);

impl Fields {
    fn put(&mut self, name: &str, value: Node) {
        self.0.push(go_string(name));
        self.0.push(value);
    }
    fn string(mut self, name: &str, v: &str) -> Fields {
        if !v.is_empty() {
            self.put(name, go_string(v));
        }
        self
    }
    fn strings(mut self, name: &str, v: Option<&Vec<String>>) -> Fields {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            self.put(
                name,
                Node::sequence(v.iter().map(|s| go_string(s)).collect()),
            );
        }
        self
    }
    fn map(mut self, name: &str, v: Option<&StrMap>) -> Fields {
        if let Some(m) = v.filter(|m| !m.is_empty()) {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| go_key_order(a, b));
            let content = keys
                .into_iter()
                .flat_map(|k| [go_string(k), go_string(m.get(k).map_or("", String::as_str))])
                .collect();
            self.put(name, Node::mapping(content));
        }
        self
    }
    /// A pointer: any struct is written, `{}` too.
    fn pointer<T: Marshal>(mut self, name: &str, v: Option<&T>) -> Fields {
        if let Some(t) = v {
            self.put(name, t.marshal());
        }
        self
    }
    /// A struct value: left out when all its fields are.
    fn structure<T: Marshal>(mut self, name: &str, v: &T) -> Fields {
        let node = v.marshal();
        if !node.content.is_empty() {
            self.put(name, node);
        }
        self
    }
    fn list<T: Marshal>(mut self, name: &str, v: &[T]) -> Fields {
        if !v.is_empty() {
            self.put(
                name,
                Node::sequence(v.iter().map(Marshal::marshal).collect()),
            );
        }
        self
    }
    fn done(self) -> Node {
        Node::mapping(self.0)
    }
}

pub(super) trait Marshal {
    fn marshal(&self) -> Node;
}

impl Marshal for KptFile {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("apiVersion", &self.api_version)
            .string("kind", &self.kind)
            .structure("metadata", &self.metadata)
            .pointer("upstream", self.upstream.as_ref())
            .pointer("upstreamLock", self.upstream_lock.as_ref())
            .pointer("info", self.info.as_ref())
            .pointer("pipeline", self.pipeline.as_ref())
            .pointer("inventory", self.inventory.as_ref())
            .done()
    }
}

impl Marshal for ObjectMeta {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("name", &self.name)
            .string("namespace", &self.namespace)
            .map("labels", self.labels.as_ref())
            .map("annotations", self.annotations.as_ref())
            .done()
    }
}

impl Marshal for Upstream {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("type", &self.kind)
            .pointer("git", self.git.as_ref())
            .string("updateStrategy", &self.update_strategy)
            .done()
    }
}

impl Marshal for Git {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("repo", &self.repo)
            .string("directory", &self.directory)
            .string("ref", &self.reference)
            .done()
    }
}

impl Marshal for UpstreamLock {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("type", &self.kind)
            .pointer("git", self.git.as_ref())
            .done()
    }
}

impl Marshal for GitLock {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("repo", &self.repo)
            .string("directory", &self.directory)
            .string("ref", &self.reference)
            .string("commit", &self.commit)
            .done()
    }
}

impl Marshal for PackageInfo {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("site", &self.site)
            .strings("emails", self.emails.as_ref())
            .string("license", &self.license)
            .string("licenseFile", &self.license_file)
            .string("description", &self.description)
            .strings("keywords", self.keywords.as_ref())
            .string("man", &self.man)
            .done()
    }
}

impl Marshal for Pipeline {
    fn marshal(&self) -> Node {
        Fields::default()
            .list("mutators", &self.mutators)
            .list("validators", &self.validators)
            .done()
    }
}

impl Marshal for Function {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("image", &self.image)
            .string("configPath", &self.config_path)
            .map("configMap", self.config_map.as_ref())
            .done()
    }
}

impl Marshal for Inventory {
    fn marshal(&self) -> Node {
        Fields::default()
            .string("namespace", &self.namespace)
            .string("name", &self.name)
            .string("inventoryID", &self.inventory_id)
            .map("labels", self.labels.as_ref())
            .map("annotations", self.annotations.as_ref())
            .done()
    }
}
