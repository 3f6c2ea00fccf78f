//! The FunctionConfigs a runner starts with, read once: the documents of
//! `--functions` and the entries of `--pod-cache-config`, the index they
//! make, and every document left out, said. `serve`, `eval` and `render`
//! read them here and hand the result to every part that needs them (the
//! runner, the built-ins' choice, eval's choice of backend, the cluster's
//! watch), so no part reads them again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::index::ImageIndex;
use super::live::{IndexPublisher, LiveIndex};
use super::load::load_dir_with_prefix;
use super::pod_cache::{load_pod_cache_config, PodCacheConfigError};
use super::types::FunctionConfig;

/// Why the FunctionConfigs could not be read at all (a bad document is
/// not: it is left out and said, and the others are used).
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("--functions {}: {reason}", path.display())]
    Functions { path: PathBuf, reason: String },
    #[error(transparent)]
    PodCacheConfig(#[from] PodCacheConfigError),
}

/// The FunctionConfigs read at start.
#[derive(Debug, Clone)]
pub struct FunctionConfigs {
    /// Every FunctionConfig that loaded, in the order read (the cluster's
    /// watch combines its own after these).
    pub configs: Vec<FunctionConfig>,
    /// What they configure, duplicates left out.
    pub index: Arc<ImageIndex>,
    /// Every document left out, said: a call for an image that matches
    /// nothing names them (one may have been meant for it).
    pub rejected: Vec<String>,
}

impl FunctionConfigs {
    /// Reads `functions` (a directory of FunctionConfig documents) and
    /// `pod_cache_config` (Porch's list of functions to keep pods for).
    /// Bad documents are logged with file and field and left out.
    pub fn load(
        functions: Option<&Path>,
        pod_cache_config: Option<&Path>,
        default_prefix: &str,
    ) -> Result<Self, StartupError> {
        let mut rejected = Vec::new();
        let mut configs = match functions {
            None => Vec::new(),
            Some(dir) => {
                match std::fs::metadata(dir) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        return Err(StartupError::Functions {
                            path: dir.to_path_buf(),
                            reason: "not a directory".into(),
                        })
                    }
                    Err(err) => {
                        return Err(StartupError::Functions {
                            path: dir.to_path_buf(),
                            reason: err.to_string(),
                        })
                    }
                }
                let report = load_dir_with_prefix(dir, default_prefix);
                for err in &report.errors {
                    tracing::error!("FunctionConfig: {err}");
                    rejected.push(err.to_string());
                }
                if report.configs.is_empty() && report.errors.is_empty() {
                    // Porch's meaning of the flag: its image's folder of
                    // function binaries, which FunctionConfigs'
                    // binaryExecutor paths are relative to.
                    tracing::info!(
                        dir = %dir.display(),
                        "--functions holds no FunctionConfig documents: read as Porch's \
                         folder of function binaries (relative binaryExecutor paths)"
                    );
                } else {
                    tracing::info!(
                        loaded = report.configs.len(),
                        rejected = report.errors.len(),
                        dir = %dir.display(),
                        "FunctionConfigs read (--functions)"
                    );
                }
                report.configs
            }
        };
        if let Some(path) = pod_cache_config {
            let from_cache_config = load_pod_cache_config(path)?;
            tracing::info!(
                loaded = from_cache_config.len(),
                path = %path.display(),
                "pod cache config read (--pod-cache-config)"
            );
            configs.extend(from_cache_config);
        }
        Ok(Self::from_configs(configs, rejected, default_prefix))
    }

    fn from_configs(
        configs: Vec<FunctionConfig>,
        mut rejected: Vec<String>,
        default_prefix: &str,
    ) -> Self {
        let (index, errors) = ImageIndex::build(&configs, default_prefix);
        for err in &errors {
            tracing::error!("FunctionConfig: {err}");
            rejected.push(err.to_string());
        }
        FunctionConfigs {
            configs,
            index: Arc::new(index),
            rejected,
        }
    }

    /// The index as a runner uses it, never replaced.
    pub fn fixed(&self) -> LiveIndex {
        LiveIndex::fixed(self.index.clone())
    }

    /// The index as a runner uses it, replaced by whoever holds the
    /// publisher (the cluster's watch).
    pub fn live(&self) -> (IndexPublisher, LiveIndex) {
        LiveIndex::new(self.index.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::test_support::{doc, PREFIX};

    #[test]
    fn a_functions_path_that_is_no_directory_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = FunctionConfigs::load(Some(&missing), None, PREFIX)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("--functions {}: ", missing.display())),
            "{err}"
        );
        let file = dir.path().join("file.yaml");
        std::fs::write(&file, "").unwrap();
        let err = FunctionConfigs::load(Some(&file), None, PREFIX)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!("--functions {}: not a directory", file.display())
        );
    }

    #[test]
    fn bad_documents_are_left_out_and_said_and_the_pod_cache_config_joins() {
        let dir = tempfile::tempdir().unwrap();
        let functions = dir.path().join("functions");
        std::fs::create_dir(&functions).unwrap();
        std::fs::write(
            functions.join("a.yaml"),
            doc(
                "a",
                "image: a\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/true\n",
            ) + "---\n"
                + &doc(
                    "bad",
                    "image: b\npodExecutor:\n  maxParallelExecutions: x\n",
                ),
        )
        .unwrap();
        let cache_config = dir.path().join("pod-cache-config.yaml");
        std::fs::write(&cache_config, "- name: example.com/fns/c:v2\n").unwrap();
        let loaded = FunctionConfigs::load(Some(&functions), Some(&cache_config), PREFIX).unwrap();
        assert_eq!(loaded.configs.len(), 2, "{:?}", loaded.rejected);
        assert_eq!(loaded.rejected.len(), 1);
        assert!(
            loaded.rejected[0].contains("maxParallelExecutions"),
            "{:?}",
            loaded.rejected
        );
        assert!(loaded
            .index
            .binary_for(&format!("{PREFIX}/a:v1"), "")
            .is_some());
        assert!(loaded
            .index
            .pod_settings_for("example.com/fns/c:v2", "")
            .is_some());
        // Neither: nothing, and nothing said.
        let none = FunctionConfigs::load(None, None, PREFIX).unwrap();
        assert!(none.configs.is_empty() && none.rejected.is_empty());
    }
}
