//! The SDK's Kptfile v1 types (kpt-functions-sdk 632b30549de6,
//! go/pkg/api/kptfile/v1/types.go): decoded strictly by yaml.v3 (each
//! type's [`Decode`], through [`super::decode`]), marshalled by kyaml's
//! `yaml.Marshal` ([`super::marshal`]).

use std::collections::BTreeMap;

use krm_yaml::Node;

use super::decode::{Decode, Decoder, Fatal, STRING};

pub(super) type StrMap = BTreeMap<String, String>;

#[derive(Debug, Default)]
pub(super) struct KptFile {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) metadata: ObjectMeta,
    pub(super) upstream: Option<Upstream>,
    pub(super) upstream_lock: Option<UpstreamLock>,
    pub(super) info: Option<PackageInfo>,
    pub(super) pipeline: Option<Pipeline>,
    pub(super) inventory: Option<Inventory>,
}

#[derive(Debug, Default)]
pub(super) struct ObjectMeta {
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) labels: Option<StrMap>,
    pub(super) annotations: Option<StrMap>,
}

#[derive(Debug, Default)]
pub(super) struct Upstream {
    pub(super) kind: String,
    pub(super) git: Option<Git>,
    pub(super) update_strategy: String,
}

#[derive(Debug, Default)]
pub(super) struct Git {
    pub(super) repo: String,
    pub(super) directory: String,
    pub(super) reference: String,
}

#[derive(Debug, Default)]
pub(super) struct UpstreamLock {
    pub(super) kind: String,
    pub(super) git: Option<GitLock>,
}

#[derive(Debug, Default)]
pub(super) struct GitLock {
    pub(super) repo: String,
    pub(super) directory: String,
    pub(super) reference: String,
    pub(super) commit: String,
}

#[derive(Debug, Default)]
pub(super) struct PackageInfo {
    pub(super) site: String,
    pub(super) emails: Option<Vec<String>>,
    pub(super) license: String,
    pub(super) license_file: String,
    pub(super) description: String,
    pub(super) keywords: Option<Vec<String>>,
    pub(super) man: String,
}

#[derive(Debug, Default)]
pub(super) struct Pipeline {
    pub(super) mutators: Vec<Function>,
    pub(super) validators: Vec<Function>,
}

#[derive(Debug, Default)]
pub(super) struct Function {
    pub(super) image: String,
    pub(super) config_path: String,
    /// `nil` (absent, null) is not `{}`.
    pub(super) config_map: Option<StrMap>,
}

#[derive(Debug, Default)]
pub(super) struct Inventory {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) inventory_id: String,
    pub(super) labels: Option<StrMap>,
    pub(super) annotations: Option<StrMap>,
}

const ORIGIN_TYPE: &str = "v1.OriginType";

impl Decode for KptFile {
    const NAME: &'static str = "v1.KptFile";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "apiVersion" => d.string(v, STRING, &mut self.api_version),
            "kind" => d.string(v, STRING, &mut self.kind),
            "metadata" => d.structure(v, &mut self.metadata)?,
            "upstream" => d.pointer(v, &mut self.upstream)?,
            "upstreamLock" => d.pointer(v, &mut self.upstream_lock)?,
            "info" => d.pointer(v, &mut self.info)?,
            "pipeline" => d.pointer(v, &mut self.pipeline)?,
            "inventory" => d.pointer(v, &mut self.inventory)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for ObjectMeta {
    const NAME: &'static str = "v1.ObjectMeta";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "name" => d.string(v, STRING, &mut self.name),
            "namespace" => d.string(v, STRING, &mut self.namespace),
            "labels" => d.string_map(v, &mut self.labels)?,
            "annotations" => d.string_map(v, &mut self.annotations)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Upstream {
    const NAME: &'static str = "v1.Upstream";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "type" => d.string(v, ORIGIN_TYPE, &mut self.kind),
            "git" => d.pointer(v, &mut self.git)?,
            "updateStrategy" => d.string(v, "v1.UpdateStrategyType", &mut self.update_strategy),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Git {
    const NAME: &'static str = "v1.Git";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "repo" => d.string(v, STRING, &mut self.repo),
            "directory" => d.string(v, STRING, &mut self.directory),
            "ref" => d.string(v, STRING, &mut self.reference),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for UpstreamLock {
    const NAME: &'static str = "v1.UpstreamLock";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "type" => d.string(v, ORIGIN_TYPE, &mut self.kind),
            "git" => d.pointer(v, &mut self.git)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for GitLock {
    const NAME: &'static str = "v1.GitLock";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "repo" => d.string(v, STRING, &mut self.repo),
            "directory" => d.string(v, STRING, &mut self.directory),
            "ref" => d.string(v, STRING, &mut self.reference),
            "commit" => d.string(v, STRING, &mut self.commit),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for PackageInfo {
    const NAME: &'static str = "v1.PackageInfo";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "site" => d.string(v, STRING, &mut self.site),
            "emails" => d.strings(v, &mut self.emails),
            "license" => d.string(v, STRING, &mut self.license),
            "licenseFile" => d.string(v, STRING, &mut self.license_file),
            "description" => d.string(v, STRING, &mut self.description),
            "keywords" => d.strings(v, &mut self.keywords),
            "man" => d.string(v, STRING, &mut self.man),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Pipeline {
    const NAME: &'static str = "v1.Pipeline";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "mutators" => d.list(v, &mut self.mutators)?,
            "validators" => d.list(v, &mut self.validators)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Function {
    const NAME: &'static str = "v1.Function";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "image" => d.string(v, STRING, &mut self.image),
            "configPath" => d.string(v, STRING, &mut self.config_path),
            "configMap" => d.string_map(v, &mut self.config_map)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Decode for Inventory {
    const NAME: &'static str = "v1.Inventory";
    fn field<'a>(&mut self, d: &mut Decoder<'a>, name: &str, v: &'a Node) -> Result<bool, Fatal> {
        match name {
            "namespace" => d.string(v, STRING, &mut self.namespace),
            "name" => d.string(v, STRING, &mut self.name),
            "inventoryID" => d.string(v, STRING, &mut self.inventory_id),
            "labels" => d.string_map(v, &mut self.labels)?,
            "annotations" => d.string_map(v, &mut self.annotations)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
