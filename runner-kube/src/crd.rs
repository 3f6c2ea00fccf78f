//! FunctionConfig as a Kubernetes custom resource: the CustomResourceDefinition, generated
//! from the document types of [`runner_core::config`] so that what the API server admits and what
//! the parser accepts cannot drift apart, and the status the runner writes.
//!
//! The schema checks shapes only (a list is a list, a count a non-negative integer); the
//! semantic checks ([`FunctionConfig::validate`](runner_core::config::FunctionConfig::validate): tags,
//! image names, ...) stay with the runner, which reports them in the object's status. The
//! Kubernetes shapes the runner passes through (`resources`, `env`, `envFrom`,
//! `securityContext`) are free-form objects.
//!
//! Names and status fields are Porch's (its `FunctionConfig` CRD, reconciled by the Porch
//! server, its controller and its function runner alike): each component writes its own
//! `…ObservedGeneration`; this runner writes `functionRunnerObservedGeneration`, `error`
//! and a condition of type [`CONDITION_TYPE`]. The other components' fields are in the
//! schema too, so that their writes are not pruned where this CRD is installed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use runner_core::config::{FunctionConfigSpec, GROUP, KIND};

/// The version of the API group this runner serves and reads.
pub const VERSION: &str = "v1alpha1";
/// The resource's plural name (the path segment of its API).
pub const PLURAL: &str = "functionconfigs";
/// The CRD's own name: `<plural>.<group>`.
pub const CRD_NAME: &str = "functionconfigs.config.porch.kpt.dev";
/// The condition this runner sets on each FunctionConfig it has read: `True` once applied,
/// `False` (reason [`REASON_INVALID`] or [`REASON_CONFLICT`]) with the message why not.
pub const CONDITION_TYPE: &str = "FunctionRunnerApplied";
/// Reason of a condition that is `True`.
pub const REASON_APPLIED: &str = "Applied";
/// Reason: the object does not parse or validate.
pub const REASON_INVALID: &str = "Invalid";
/// Reason: an (image, tag) the object maps is already mapped by another FunctionConfig.
pub const REASON_CONFLICT: &str = "Conflict";
/// How to regenerate `deploy/functionconfig-crd.yaml`; named by the drift test.
pub const REGENERATE: &str =
    "cargo run -p function-runner --bin function-runner -- crd > deploy/functionconfig-crd.yaml";

/// `status` of a FunctionConfig object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionConfigStatus {
    /// The generation the Porch server has applied (written by Porch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_observed_generation: Option<i64>,
    /// The generation the function runner has applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_runner_observed_generation: Option<i64>,
    /// The generation the Porch controller has applied (written by Porch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_observed_generation: Option<i64>,
    /// Why the last generation could not be applied; absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Conditions; the function runner's is `FunctionRunnerApplied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A status condition, shaped as Kubernetes' `metav1.Condition`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: String,
    /// One CamelCase word.
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// Errors building the CRD: a schema the Kubernetes types cannot hold (a bug here).
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("building the FunctionConfig CRD: {0}")]
    Build(#[from] serde_json::Error),
    #[error("writing the FunctionConfig CRD as YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// The openAPIV3Schema of the FunctionConfig resource, structural as apiextensions.k8s.io/v1
/// requires: every node typed, free-form objects marked `x-kubernetes-preserve-unknown-fields`.
pub fn schema() -> Value {
    json!({
        "description": "How the function runner executes a function image: a local binary \
            (binaryExecutor), a cached pod (podExecutor) or a built-in function (goExecutor), \
            each for a list of tags.",
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "spec": structural(schema_of::<FunctionConfigSpec>()),
            "status": structural(schema_of::<FunctionConfigStatus>()),
        },
    })
}

/// The CustomResourceDefinition (apiextensions.k8s.io/v1): group `config.porch.kpt.dev`,
/// kind `FunctionConfig`, namespaced, one served and stored version, status subresource.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": CRD_NAME },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": format!("{KIND}List"),
                "plural": PLURAL,
                "singular": "functionconfig",
            },
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "additionalPrinterColumns": [
                    { "name": "Image", "type": "string", "jsonPath": ".spec.image" },
                    {
                        "name": "FnRunner Applied",
                        "type": "integer",
                        "jsonPath": ".status.functionRunnerObservedGeneration",
                    },
                    { "name": "Error", "type": "string", "jsonPath": ".status.error", "priority": 1 },
                    { "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp" },
                ],
                "schema": { "openAPIV3Schema": schema() },
            }],
        },
    });
    Ok(serde_json::from_value(crd)?)
}

/// The CRD as the YAML file `deploy/functionconfig-crd.yaml` holds.
pub fn crd_yaml() -> Result<String, CrdError> {
    let crd = crd()?;
    let body = serde_yaml_ng::to_string(&crd)?;
    Ok(format!(
        "# Generated from runner-core/src/config/types.rs and runner-kube/src/crd.rs; do not edit.\n\
         # Regenerate: {REGENERATE}\n{body}"
    ))
}

/// The JSON schema schemars derives for `T` (OpenAPI 3 flavour, every subschema inline).
fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// Rewrites a derived schema into a structural one, node by node:
///
/// * free-form maps (`additionalProperties: true`, from `serde_json::Map`) become
///   `x-kubernetes-preserve-unknown-fields: true`;
/// * `default`s go: the parser supplies them, and the API server would otherwise write them
///   into every stored object;
/// * `nullable` goes, so the API server drops a `null` (which the parser reads as absent)
///   instead of storing it;
/// * `format`s Kubernetes does not know (`uint32`) become the range they stand for;
/// * `title`s go, and descriptions lose rustdoc's line wrapping and link targets.
fn structural(mut node: Value) -> Value {
    if let Value::Object(map) = &mut node {
        map.remove("title");
        map.remove("default");
        map.remove("nullable");
        if map.get("additionalProperties") == Some(&Value::Bool(true)) {
            map.remove("additionalProperties");
            map.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
        }
        if let Some(format) = map.get("format").and_then(Value::as_str) {
            let maximum = match format {
                "uint32" => Some(u64::from(u32::MAX)),
                "uint64" | "uint" => Some(u64::MAX),
                _ => None,
            };
            if let Some(maximum) = maximum {
                map.remove("format");
                map.insert("minimum".into(), json!(0));
                map.insert("maximum".into(), json!(maximum));
            }
        }
        if let Some(Value::String(description)) = map.get_mut("description") {
            *description = plain_description(description);
        }
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for property in properties.values_mut() {
                *property = structural(property.take());
            }
        }
        if let Some(items) = map.get_mut("items") {
            *items = structural(items.take());
        }
    }
    node
}

/// A doc comment as an API description: wrapped lines joined (blank lines kept as
/// paragraph breaks) and rustdoc links (``[`name`](path)``) reduced to their text.
fn plain_description(doc: &str) -> String {
    let joined = doc
        .split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(start) = rest.find("[`") {
        let after = &rest[start + 1..];
        let link = after.find("`](").and_then(|end| {
            after[end + 3..]
                .find(')')
                .map(|close| (end, end + 3 + close))
        });
        match link {
            Some((end, close)) => {
                out.push_str(&rest[..start]);
                out.push_str(&after[..=end]);
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[..start + 2]);
                rest = &rest[start + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
