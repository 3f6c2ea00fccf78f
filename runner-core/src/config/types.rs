//! The FunctionConfig document types and their semantic validation. Type errors are
//! serde's, reported by [`super::load`] with the field path and position.

use std::path::PathBuf;

use krm_fn::duration::PositiveDuration;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::error::DocLocation;

/// The least `podExecutor.pidsLimit`: the wrapper's runtime threads and a
/// function's processes must fit.
pub const MIN_PIDS_LIMIT: u32 = 64;

/// The most `podExecutor.idlePods`: a pool is pods that run all the time.
pub const MAX_IDLE_PODS: u32 = 100;

/// `null` (or an absent field) becomes the type's default, as Kubernetes treats them.
fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A `config.porch.kpt.dev/v1alpha1` FunctionConfig object. Unknown fields are ignored
/// (forward compatibility); fields of a wrong type are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionConfig {
    #[serde(default, deserialize_with = "null_default")]
    pub api_version: String,
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: FunctionConfigSpec,
    /// Where the object was parsed from (not part of the document).
    #[serde(skip)]
    pub source: Option<DocLocation>,
}

impl FunctionConfig {
    /// `namespace/name`, or `name` when there is no namespace, or `<unnamed>`.
    pub fn display_name(&self) -> String {
        match (
            self.metadata.namespace.as_str(),
            self.metadata.name.as_str(),
        ) {
            (_, "") => "<unnamed>".to_string(),
            ("", name) => name.to_string(),
            (ns, name) => format!("{ns}/{name}"),
        }
    }

    /// `FunctionConfig NAME (SOURCE)`, for messages that name a config.
    pub(super) fn describe(&self) -> String {
        match &self.source {
            Some(at) => format!("FunctionConfig {} ({at})", self.display_name()),
            None => format!("FunctionConfig {}", self.display_name()),
        }
    }

    /// Semantic validation (types are already checked by deserialisation). Returns
    /// `(field, message)` pairs; empty when valid. Checks: `spec.image` set and without tag
    /// or digest; prefixes without whitespace or `@`; every present executor has a non-empty
    /// list of valid tags; `binaryExecutor.path` non-empty; `podExecutor.maxParallelExecutions`
    /// at least 1; `goExecutor.id` non-empty when present; env entries have a name; at least
    /// one executor.
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut problems: Vec<(String, String)> = Vec::new();
        let spec = &self.spec;

        if spec.image.trim().is_empty() {
            problems.push(("spec.image".into(), "must be set".into()));
        } else if let Some(problem) = image_name_problem(&spec.image) {
            problems.push(("spec.image".into(), problem));
        }
        for (i, prefix) in spec.prefixes.iter().enumerate() {
            if prefix.chars().any(char::is_whitespace) || prefix.contains('@') {
                problems.push((
                    format!("spec.prefixes[{i}]"),
                    format!("invalid registry prefix \"{prefix}\""),
                ));
            }
        }
        // A misspelt executor (`podExecuter:`) is dropped by the API server's pruning or
        // by deserialisation: what is left configures nothing and must not pass as applied.
        if spec.binary_executor.is_none()
            && spec.pod_executor.is_none()
            && spec.go_executor.is_none()
        {
            problems.push((
                "spec".into(),
                "no executor set: one of binaryExecutor, podExecutor or goExecutor is needed"
                    .into(),
            ));
        }
        if let Some(binary) = &spec.binary_executor {
            check_tags("binaryExecutor", &binary.tags, &mut problems);
            if binary.path.as_os_str().is_empty() {
                problems.push((
                    "spec.binaryExecutor.path".into(),
                    "must not be empty".into(),
                ));
            }
        }
        if let Some(pod) = &spec.pod_executor {
            check_tags("podExecutor", &pod.tags, &mut problems);
            if pod.pids_limit.is_some_and(|n| n < MIN_PIDS_LIMIT) {
                problems.push((
                    "spec.podExecutor.pidsLimit".into(),
                    format!("must be at least {MIN_PIDS_LIMIT} (the wrapper's own threads count)"),
                ));
            }
            if pod.idle_pods.is_some_and(|n| n > MAX_IDLE_PODS) {
                problems.push((
                    "spec.podExecutor.idlePods".into(),
                    format!("must be at most {MAX_IDLE_PODS}"),
                ));
            }
            if pod.max_parallel_executions == Some(0) {
                problems.push((
                    "spec.podExecutor.maxParallelExecutions".into(),
                    "must be at least 1".into(),
                ));
            }
            if let Some(overrides) = &pod.template_overrides {
                for (name, container) in [
                    ("container", &overrides.container),
                    ("initContainer", &overrides.init_container),
                ] {
                    let Some(container) = container else { continue };
                    for (i, env) in container.env.iter().enumerate() {
                        let ok = env
                            .get("name")
                            .and_then(serde_json::Value::as_str)
                            .is_some_and(|n| !n.is_empty());
                        if !ok {
                            problems.push((
                                format!("spec.podExecutor.templateOverrides.{name}.env[{i}].name"),
                                "must be a non-empty string".into(),
                            ));
                        }
                    }
                }
            }
        }
        for (field, n) in [
            (
                "binaryExecutor",
                spec.binary_executor.as_ref().and_then(|e| e.prespawn),
            ),
            (
                "podExecutor",
                spec.pod_executor.as_ref().and_then(|e| e.prespawn),
            ),
        ] {
            if n.is_some_and(|n| n as usize > krm_fn::prespawn::MAX_SIZE) {
                problems.push((
                    format!("spec.{field}.prespawn"),
                    format!("must be at most {}", krm_fn::prespawn::MAX_SIZE),
                ));
            }
        }
        if let Some(go) = &spec.go_executor {
            check_tags("goExecutor", &go.tags, &mut problems);
            if go.id.as_deref().is_some_and(|id| id.trim().is_empty()) {
                problems.push((
                    "spec.goExecutor.id".into(),
                    "must not be empty when set".into(),
                ));
            }
        }
        problems
    }
}

fn check_tags(executor: &str, tags: &[String], problems: &mut Vec<(String, String)>) {
    if tags.is_empty() {
        problems.push((format!("spec.{executor}.tags"), "must not be empty".into()));
    }
    for (i, tag) in tags.iter().enumerate() {
        if !is_valid_tag(tag) {
            problems.push((
                format!("spec.{executor}.tags[{i}]"),
                format!(
                    "invalid tag \"{tag}\" (expected 1-128 characters of [A-Za-z0-9_.-], \
                     not starting with '.' or '-')"
                ),
            ));
        }
    }
}

/// The Kubernetes metadata this module uses; other metadata fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
}

/// `spec` of a FunctionConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionConfigSpec {
    /// Function image name: a short name (`set-namespace`) combined with `prefixes`, or a
    /// full image path (`example.com/fns/set-namespace`). Never a tag or digest.
    #[serde(default, deserialize_with = "null_default")]
    pub image: String,
    /// Registry prefixes the short name is valid under; `""` is the default image prefix.
    /// Empty: the default image prefix only. Ignored when `image` is a full path.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub prefixes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_executor: Option<BinaryExecutor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_executor: Option<PodExecutor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_executor: Option<GoExecutor>,
}

/// Run the function as a local binary for these tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BinaryExecutor {
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// Path of the binary. A relative path is resolved, when loading, against the directory
    /// of the file it was read from ([`load_dir`](super::load_dir)) or the base directory given to
    /// [`parse_str_with`](super::parse_str_with); [`parse_str`](super::parse_str) leaves it as written.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "Path of the binary in the function runner's file system. A relative path is \
                       resolved against the directory of the file the FunctionConfig was read from, \
                       or, for an object in the cluster, against the runner's --functions directory."
    )]
    pub path: PathBuf,
    /// Processes of the binary kept started and waiting for a call (0: one
    /// spawned per call); the runner's `--prespawn` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prespawn: Option<u32>,
}

/// Run the function in a cached pod for these tags, with these settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodExecutor {
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// How long an idle pod stays cached (Go duration, must be positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub time_to_live: Option<PositiveDuration>,
    /// Maximum number of pods for one image (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel_executions: Option<u32>,
    /// Waitlist length per pod before another pod is started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_max_queue_length: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_overrides: Option<TemplateOverrides>,
    /// Processes of the function each pod keeps started and waiting for a
    /// call (the wrapper's `--prespawn`); the wrapper's default (0) when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prespawn: Option<u32>,
    /// Most processes and threads in each pod's container (the docker
    /// backend's PIDs limit, so that a fork bomb stays in its container);
    /// the backend's default (1024) when unset. Kubernetes pods get theirs
    /// from the kubelet (`podPidsLimit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<u32>,
    /// Pods of each tag kept started, Ready and unclaimed, beyond those in
    /// use (an idle pool): a call that needs a new pod claims one at once,
    /// and a replacement starts. 0 or unset: no pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_pods: Option<u32>,
    /// A pod serves one call, then is drained and deleted: no call sees
    /// what an earlier one left in its pod. Unset: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_use: Option<bool>,
}

/// Customisations of the function pod template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Pod security context, passed through as written (must be a mapping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerOverrides>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_container: Option<ContainerOverrides>,
}

/// Customisations of one container of the function pod. Values are Kubernetes shapes
/// passed through as JSON (`resources` a mapping, `env`/`envFrom` lists of mappings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env: Vec<serde_json::Map<String, serde_json::Value>>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env_from: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// Run the function as a built-in (in-process) function for these tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoExecutor {
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// Registered function id; defaults to the last path component of `spec.image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A docker tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {}
        _ => return false,
    }
    tag.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn image_name_problem(image: &str) -> Option<String> {
    if image.chars().any(char::is_whitespace) {
        return Some(format!(
            "invalid image name \"{image}\": contains whitespace"
        ));
    }
    if image.contains('@') {
        return Some(format!(
            "invalid image name \"{image}\": must not contain a digest (list tags in the executors)"
        ));
    }
    if crate::image::ImageRef::split(image).tag.is_some() {
        return Some(format!(
            "invalid image name \"{image}\": must not contain a tag (list tags in the executors)"
        ));
    }
    if image.starts_with('/') || image.ends_with('/') || image.contains("//") {
        return Some(format!(
            "invalid image name \"{image}\": empty path component"
        ));
    }
    None
}
#[cfg(test)]
mod tests;
