//! Porch's `--pod-cache-config`: a YAML list of functions to keep pods for,
//! each with its own pod settings:
//!
//! ```yaml
//! - name: ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.0
//!   timeToLive: 30m
//!   maxWaitlistLength: 2
//!   maxParallelPodsPerFunction: 1
//!   resources: {limits: {memory: 256Mi}}
//!   idlePods: 2        # ours: an idle pool (podExecutor.idlePods)
//!   singleUse: true    # ours: one call per pod (podExecutor.singleUse)
//! ```
//!
//! Each entry becomes a FunctionConfig with a `podExecutor` for that one
//! image and tag, so it is matched, warmed and validated as any other, and
//! its settings apply to every call of the function, not only the warm-up.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::DocLocation;
use super::names::{API_VERSION, KIND, LATEST_TAG};
use super::types::{
    ContainerOverrides, FunctionConfig, FunctionConfigSpec, ObjectMeta, PodExecutor,
    TemplateOverrides,
};
use crate::image::ImageRef;
use krm_fn::duration::PositiveDuration;

/// Why the pod cache config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PodCacheConfigError {
    #[error("--pod-cache-config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--pod-cache-config {path}: not a list of {{name, timeToLive, maxWaitlistLength, maxParallelPodsPerFunction, resources, idlePods, singleUse}}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("--pod-cache-config {path}: entry {index} ({name:?}): {problem}")]
    Entry {
        path: PathBuf,
        /// 1-based.
        index: usize,
        name: String,
        problem: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default)]
    time_to_live: Option<String>,
    #[serde(default)]
    max_waitlist_length: Option<u32>,
    #[serde(default)]
    max_parallel_pods_per_function: Option<u32>,
    #[serde(default)]
    resources: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    idle_pods: Option<u32>,
    #[serde(default)]
    single_use: Option<bool>,
}

/// Reads the file into FunctionConfigs, one per entry; every problem names
/// the entry.
pub fn load_pod_cache_config(path: &Path) -> Result<Vec<FunctionConfig>, PodCacheConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| PodCacheConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // An empty file is an empty list.
    let entries: Vec<Entry> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_yaml_ng::from_str::<Option<Vec<Entry>>>(&text)
            .map_err(|source| PodCacheConfigError::Parse {
                path: path.to_path_buf(),
                source,
            })?
            .unwrap_or_default()
    };
    entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| to_config(path, i + 1, entry))
        .collect()
}

fn to_config(
    path: &Path,
    index: usize,
    entry: Entry,
) -> Result<FunctionConfig, PodCacheConfigError> {
    let problem = |problem: String| PodCacheConfigError::Entry {
        path: path.to_path_buf(),
        index,
        name: entry.name.clone(),
        problem,
    };
    let reference = ImageRef::split(entry.name.trim());
    if reference.digest.is_some() {
        return Err(problem(
            "a digest cannot be warmed by name: give the image with a tag".into(),
        ));
    }
    let image = reference.name.to_string();
    if image.is_empty() {
        return Err(problem("name must be an image reference".into()));
    }
    let tag = reference.tag.unwrap_or(LATEST_TAG).to_string();
    let time_to_live = entry
        .time_to_live
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(PositiveDuration::parse)
        .transpose()
        .map_err(|err| problem(format!("timeToLive: {err}")))?;
    for (field, value) in [
        ("maxWaitlistLength", entry.max_waitlist_length),
        (
            "maxParallelPodsPerFunction",
            entry.max_parallel_pods_per_function,
        ),
    ] {
        if value == Some(0) {
            return Err(problem(format!("{field} must be at least 1")));
        }
    }
    let config = FunctionConfig {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        metadata: ObjectMeta {
            name: format!("pod-cache-config-{index}"),
            namespace: String::new(),
        },
        spec: FunctionConfigSpec {
            image,
            prefixes: Vec::new(),
            binary_executor: None,
            pod_executor: Some(PodExecutor {
                tags: vec![tag],
                time_to_live,
                max_parallel_executions: entry.max_parallel_pods_per_function,
                preferred_max_queue_length: entry.max_waitlist_length,
                prespawn: None,
                pids_limit: None,
                idle_pods: entry.idle_pods,
                single_use: entry.single_use,
                template_overrides: entry.resources.map(|resources| TemplateOverrides {
                    container: Some(ContainerOverrides {
                        resources: Some(resources),
                        ..ContainerOverrides::default()
                    }),
                    ..TemplateOverrides::default()
                }),
            }),
            go_executor: None,
        },
        source: Some(DocLocation {
            source: path.display().to_string(),
            document: Some(index),
        }),
    };
    if let Some((field, why)) = config.validate().into_iter().next() {
        return Err(problem(format!("{field}: {why}")));
    }
    Ok(config)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::ImageIndex;
    use crate::config::DEFAULT_IMAGE_PREFIX;

    fn load(text: &str) -> Result<Vec<FunctionConfig>, PodCacheConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod-cache-config.yaml");
        std::fs::write(&path, text).unwrap();
        load_pod_cache_config(&path)
    }

    #[test]
    fn entries_become_pod_settings_for_their_image_and_are_warmed() {
        let configs = load(
            "- name: ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.0\n  timeToLive: 10m\n  maxWaitlistLength: 4\n  maxParallelPodsPerFunction: 3\n  resources: {limits: {memory: 256Mi}}\n- name: localhost:5000/fns/example-fn\n",
        )
        .unwrap();
        let (index, errors) = ImageIndex::build(&configs, DEFAULT_IMAGE_PREFIX);
        assert!(errors.is_empty(), "{errors:?}");
        let setters = "ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.0";
        let m = index.pod_settings_for(setters, "").unwrap();
        assert_eq!(m.ttl, Some(std::time::Duration::from_secs(600)));
        assert_eq!(m.preferred_max_queue_length, Some(4));
        assert_eq!(m.max_parallel_executions, Some(3));
        let resources = m
            .template_overrides
            .unwrap()
            .container
            .clone()
            .unwrap()
            .resources
            .unwrap();
        assert_eq!(resources["limits"]["memory"], "256Mi");
        let warm = index.warm_images();
        assert!(warm.contains(&setters.to_string()), "{warm:?}");
        assert!(
            warm.contains(&"localhost:5000/fns/example-fn:latest".to_string()),
            "{warm:?}"
        );
        assert!(load("").unwrap().is_empty());
    }

    #[test]
    fn idle_pools_and_single_use_pods_are_pod_settings() {
        let configs =
            load("- name: example.com/fns/secret-fn:v1\n  idlePods: 2\n  singleUse: true\n")
                .unwrap();
        let (index, errors) = ImageIndex::build(&configs, DEFAULT_IMAGE_PREFIX);
        assert!(errors.is_empty(), "{errors:?}");
        let m = index
            .pod_settings_for("example.com/fns/secret-fn:v1", "")
            .unwrap();
        assert_eq!((m.idle_pods, m.single_use), (2, true));
        let err = load("- name: a:v1\n  idlePods: 101\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("spec.podExecutor.idlePods: must be at most 100"),
            "{err}"
        );
    }

    #[test]
    fn bad_entries_are_named() {
        let err = load("- name: a:v1\n- name: b@sha256:0123\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("entry 2 (\"b@sha256:0123\"): a digest"),
            "{err}"
        );
        let err = load("- name: a:v1\n  timeToLive: soon\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("entry 1 (\"a:v1\"): timeToLive: "), "{err}");
        let err = load("- name: a:v1\n  maxParallelPodsPerFunction: 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("maxParallelPodsPerFunction must be at least 1"),
            "{err}"
        );
        let err = load("apply-setters: 30m\n").unwrap_err().to_string();
        assert!(err.contains("not a list of"), "{err}");
        let err = load("- name: a:v1\n  ttl: 5m\n").unwrap_err().to_string();
        assert!(err.contains("unknown field `ttl`"), "{err}");
        let missing = load_pod_cache_config(Path::new("/nonexistent/pcc.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.starts_with("--pod-cache-config /nonexistent/pcc.yaml: "),
            "{missing}"
        );
    }
}
