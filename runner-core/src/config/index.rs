//! Image matching: which (image, tag) pairs a FunctionConfig maps, duplicate detection
//! across configs ([`remove_duplicates`]), and the [`ImageIndex`] that answers requests.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use krm_fn::duration::PositiveDuration;

use super::error::{ConfigError, DocLocation};
use super::names::LATEST_TAG;
use super::tag::best_tag;
use super::tag::TagConstraint;
use super::types::{FunctionConfig, FunctionConfigSpec, TemplateOverrides};
use crate::image::{join_image, normalize_image_name, trim_prefix, ImageRef};

// ---------------------------------------------------------------------------------------------
// What a config maps
// ---------------------------------------------------------------------------------------------

/// The canonical image names a spec matches (deduplicated, in prefix order).
fn config_image_names(spec: &FunctionConfigSpec, default_prefix: &str) -> Vec<String> {
    let image = spec.image.trim();
    if image.is_empty() {
        return Vec::new();
    }
    if image.contains('/') {
        return vec![image.to_string()];
    }
    let default_prefix = trim_prefix(default_prefix);
    let mut names: Vec<String> = Vec::new();
    let prefixes: Vec<&str> = if spec.prefixes.is_empty() {
        vec![default_prefix]
    } else {
        spec.prefixes
            .iter()
            .map(|p| match trim_prefix(p) {
                "" => default_prefix,
                p => p,
            })
            .collect()
    };
    for prefix in prefixes {
        let name = join_image(prefix, image);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// One (image, tag) pair a config maps, with the field that maps it.
struct Mapping {
    image: String,
    tag: String,
    field: String,
}

/// All (normalised image, tag) pairs of a config across its executors; a pair listed by two
/// executors of the same config appears once per executor.
fn mappings(config: &FunctionConfig, default_prefix: &str) -> Vec<Mapping> {
    let names = config_image_names(&config.spec, default_prefix);
    let spec = &config.spec;
    let executors: [(&str, Option<&Vec<String>>); 3] = [
        (
            "binaryExecutor",
            spec.binary_executor.as_ref().map(|e| &e.tags),
        ),
        ("podExecutor", spec.pod_executor.as_ref().map(|e| &e.tags)),
        ("goExecutor", spec.go_executor.as_ref().map(|e| &e.tags)),
    ];
    let mut out = Vec::new();
    for (executor, tags) in executors {
        let Some(tags) = tags else { continue };
        for (i, tag) in tags.iter().enumerate() {
            for name in &names {
                out.push(Mapping {
                    image: name.clone(),
                    tag: tag.clone(),
                    field: format!("spec.{executor}.tags[{i}]"),
                });
            }
        }
    }
    out
}

/// Drops every config that maps an (image, tag) pair — for any executor — already mapped
/// by an earlier config (the first one is kept) and reports it. Images are compared after
/// normalisation with `default_prefix`, so `set-namespace` and
/// `ghcr.io/kptdev/krm-functions-catalog/set-namespace` collide. The same pair listed
/// by two executors of one config is not a duplicate.
pub fn remove_duplicates(
    configs: Vec<FunctionConfig>,
    default_prefix: &str,
) -> (Vec<FunctionConfig>, Vec<ConfigError>) {
    let (kept, dropped) = partition_duplicates(configs, default_prefix);
    (kept, dropped.into_iter().map(|(_, error)| error).collect())
}

/// [`remove_duplicates`], telling for each dropped config its position in `configs`.
pub fn partition_duplicates(
    configs: Vec<FunctionConfig>,
    default_prefix: &str,
) -> (Vec<FunctionConfig>, Vec<(usize, ConfigError)>) {
    let mut owners: HashMap<(String, String), usize> = HashMap::new();
    let mut kept: Vec<FunctionConfig> = Vec::new();
    let mut dropped = Vec::new();
    for (position, config) in configs.into_iter().enumerate() {
        let maps = mappings(&config, default_prefix);
        let conflict = maps.iter().find_map(|m| {
            owners
                .get(&(m.image.clone(), m.tag.clone()))
                .map(|&o| (m, o))
        });
        if let Some((m, owner)) = conflict {
            let error = ConfigError::Duplicate {
                at: config.source.clone().unwrap_or_else(|| DocLocation {
                    source: config.describe(),
                    document: None,
                }),
                field: m.field.clone(),
                image: format!("{}:{}", m.image, m.tag),
                first: kept
                    .get(owner)
                    .map(FunctionConfig::describe)
                    .unwrap_or_default(),
            };
            dropped.push((position, error));
            continue;
        }
        let index = kept.len();
        for m in maps {
            owners.insert((m.image, m.tag), index);
        }
        kept.push(config);
    }
    (kept, dropped)
}
// ---------------------------------------------------------------------------------------------
// Image index
// ---------------------------------------------------------------------------------------------

/// A binaryExecutor match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMatch {
    /// The binary to run (absolute when the config was loaded with a base directory).
    pub path: PathBuf,
    /// binaryExecutor `prespawn`.
    pub prespawn: Option<u32>,
    /// The full image reference that matched: canonical name, `:` the resolved tag, and
    /// `@digest` when the request carried one.
    pub resolved_image: String,
    /// `namespace/name` of the FunctionConfig.
    pub config_name: String,
}

/// A podExecutor match: the pod settings for the image (`None` = runner default).
#[derive(Debug, Clone, PartialEq)]
pub struct PodMatch {
    /// See [`BinaryMatch::resolved_image`]; this is the image the pod should run.
    pub resolved_image: String,
    pub ttl: Option<Duration>,
    pub max_parallel_executions: Option<u32>,
    pub preferred_max_queue_length: Option<u32>,
    pub template_overrides: Option<Arc<TemplateOverrides>>,
    /// podExecutor `prespawn`, passed to the pod's wrapper.
    pub prespawn: Option<u32>,
    /// podExecutor `pidsLimit` (the docker backend's containers).
    pub pids_limit: Option<u32>,
    /// podExecutor `idlePods` (0: no pool).
    pub idle_pods: u32,
    /// podExecutor `singleUse`.
    pub single_use: bool,
    /// `namespace/name` of the FunctionConfig.
    pub config_name: String,
}

/// A goExecutor match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoMatch {
    /// The built-in function id (`goExecutor.id`, else the last component of `spec.image`).
    pub id: String,
    /// See [`BinaryMatch::resolved_image`].
    pub resolved_image: String,
    /// `namespace/name` of the FunctionConfig.
    pub config_name: String,
}

#[derive(Debug)]
struct BinaryTarget {
    path: PathBuf,
    prespawn: Option<u32>,
    config_name: Arc<str>,
}

#[derive(Debug)]
struct PodTarget {
    ttl: Option<Duration>,
    max_parallel_executions: Option<u32>,
    preferred_max_queue_length: Option<u32>,
    template_overrides: Option<Arc<TemplateOverrides>>,
    prespawn: Option<u32>,
    pids_limit: Option<u32>,
    idle_pods: u32,
    single_use: bool,
    config_name: Arc<str>,
}

#[derive(Debug)]
struct GoTarget {
    id: String,
    config_name: Arc<str>,
}

/// Tag → target for one image and one executor kind; `order` keeps the tags in
/// configuration order for constraint resolution.
#[derive(Debug)]
struct TagTable<T> {
    by_tag: HashMap<String, Arc<T>>,
    order: Vec<String>,
}

impl<T> Default for TagTable<T> {
    fn default() -> Self {
        TagTable {
            by_tag: HashMap::new(),
            order: Vec::new(),
        }
    }
}

impl<T> TagTable<T> {
    fn insert(&mut self, tag: &str, target: &Arc<T>) {
        if !self.by_tag.contains_key(tag) {
            self.by_tag.insert(tag.to_string(), Arc::clone(target));
            self.order.push(tag.to_string());
        }
    }
}

#[derive(Debug, Default)]
struct ImageEntry {
    binary: TagTable<BinaryTarget>,
    pod: TagTable<PodTarget>,
    go: TagTable<GoTarget>,
}

/// Image → executor lookups built once from a set of FunctionConfigs.
///
/// Matching a request `(image, constraint)`:
/// * the image name is normalised (short names get the default prefix) and looked up;
/// * an explicit tag must be configured for the executor and, when the constraint is not
///   empty, satisfy it (non-semver tags never do);
/// * without a tag and with a constraint, the highest configured tag of that executor
///   satisfying the constraint is chosen;
/// * without a tag and without a constraint, the tag is `latest` — except for a
///   digest-pinned reference (`name@sha256:…`), which then matches nothing, since nothing
///   says which configured tag that digest is;
/// * the digest never takes part in matching, and is kept in `resolved_image`.
#[derive(Debug, Default)]
pub struct ImageIndex {
    default_prefix: String,
    images: HashMap<String, ImageEntry>,
    warm: Vec<String>,
}

impl ImageIndex {
    /// Builds the index. Duplicate (image, tag) mappings keep the first config (see
    /// [`remove_duplicates`]); they are logged as warnings — use [`ImageIndex::build`] to
    /// get them. `default_prefix` is the registry path of short names (e.g.
    /// [`DEFAULT_IMAGE_PREFIX`](super::DEFAULT_IMAGE_PREFIX); a trailing `/` is optional).
    pub fn new(configs: &[FunctionConfig], default_prefix: &str) -> Self {
        let (index, errors) = Self::build(configs, default_prefix);
        for error in errors {
            tracing::warn!(%error, "FunctionConfig ignored");
        }
        index
    }

    /// [`ImageIndex::new`], returning the duplicate errors instead of logging them.
    /// Configs with an empty `spec.image` are skipped silently (they match nothing).
    pub fn build(configs: &[FunctionConfig], default_prefix: &str) -> (Self, Vec<ConfigError>) {
        let (configs, errors) = remove_duplicates(configs.to_vec(), default_prefix);
        let mut index = ImageIndex {
            default_prefix: trim_prefix(default_prefix).to_string(),
            images: HashMap::new(),
            warm: Vec::new(),
        };
        let mut warm_seen = HashSet::new();
        for config in &configs {
            let names = config_image_names(&config.spec, default_prefix);
            if names.is_empty() {
                continue;
            }
            let config_name: Arc<str> = Arc::from(config.display_name());
            let spec = &config.spec;
            let binary = spec.binary_executor.as_ref().map(|e| {
                (
                    &e.tags,
                    Arc::new(BinaryTarget {
                        path: e.path.clone(),
                        prespawn: e.prespawn,
                        config_name: Arc::clone(&config_name),
                    }),
                )
            });
            let pod = spec.pod_executor.as_ref().map(|e| {
                (
                    &e.tags,
                    Arc::new(PodTarget {
                        ttl: e.time_to_live.as_ref().map(PositiveDuration::duration),
                        max_parallel_executions: e.max_parallel_executions,
                        preferred_max_queue_length: e.preferred_max_queue_length,
                        template_overrides: e.template_overrides.clone().map(Arc::new),
                        prespawn: e.prespawn,
                        pids_limit: e.pids_limit,
                        idle_pods: e.idle_pods.unwrap_or(0),
                        single_use: e.single_use.unwrap_or(false),
                        config_name: Arc::clone(&config_name),
                    }),
                )
            });
            let go = spec.go_executor.as_ref().map(|e| {
                let id = e.id.clone().unwrap_or_else(|| {
                    spec.image
                        .rsplit('/')
                        .next()
                        .unwrap_or(&spec.image)
                        .to_string()
                });
                (
                    &e.tags,
                    Arc::new(GoTarget {
                        id,
                        config_name: Arc::clone(&config_name),
                    }),
                )
            });
            for name in &names {
                let entry = index.images.entry(name.clone()).or_default();
                if let Some((tags, target)) = &binary {
                    for tag in tags.iter() {
                        entry.binary.insert(tag, target);
                    }
                }
                if let Some((tags, target)) = &pod {
                    for tag in tags.iter() {
                        entry.pod.insert(tag, target);
                    }
                }
                if let Some((tags, target)) = &go {
                    for tag in tags.iter() {
                        entry.go.insert(tag, target);
                    }
                }
            }
            // Warm one pod per tag, under the first prefix only: the other prefixes are
            // alternative spellings (mirrors) of the same function.
            if let (Some((tags, _)), Some(first)) = (&pod, names.first()) {
                for tag in tags.iter() {
                    let image = format!("{first}:{tag}");
                    if warm_seen.insert(image.clone()) {
                        index.warm.push(image);
                    }
                }
            }
        }
        (index, errors)
    }

    /// The default prefix in use (without trailing `/`).
    pub fn default_prefix(&self) -> &str {
        &self.default_prefix
    }

    /// Number of distinct normalised image names indexed.
    pub fn len(&self) -> usize {
        self.images.len()
    }

    /// True when no image is indexed.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    /// The canonical form of a requested image name (see [`normalize_image_name`]).
    pub fn normalize(&self, name: &str) -> String {
        normalize_image_name(name, &self.default_prefix)
    }

    /// The binary for a requested image, or `None` (also for a bad constraint, which is
    /// logged; use [`ImageIndex::try_binary_for`] to get the error).
    pub fn binary_for(&self, image: &str, tag_constraint: &str) -> Option<BinaryMatch> {
        log_bad_constraint(self.try_binary_for(image, tag_constraint))
    }

    /// [`ImageIndex::binary_for`], with an error for a constraint that does not parse.
    pub fn try_binary_for(
        &self,
        image: &str,
        tag_constraint: &str,
    ) -> Result<Option<BinaryMatch>, ConfigError> {
        Ok(self
            .lookup(image, tag_constraint, |e| &e.binary)?
            .map(|(resolved_image, t)| BinaryMatch {
                path: t.path.clone(),
                prespawn: t.prespawn,
                resolved_image,
                config_name: t.config_name.to_string(),
            }))
    }

    /// The pod settings for a requested image, or `None` (also for a bad constraint, which
    /// is logged; use [`ImageIndex::try_pod_settings_for`] to get the error).
    pub fn pod_settings_for(&self, image: &str, tag_constraint: &str) -> Option<PodMatch> {
        log_bad_constraint(self.try_pod_settings_for(image, tag_constraint))
    }

    /// [`ImageIndex::pod_settings_for`], with an error for a constraint that does not parse.
    pub fn try_pod_settings_for(
        &self,
        image: &str,
        tag_constraint: &str,
    ) -> Result<Option<PodMatch>, ConfigError> {
        Ok(self
            .lookup(image, tag_constraint, |e| &e.pod)?
            .map(|(resolved_image, t)| PodMatch {
                resolved_image,
                ttl: t.ttl,
                max_parallel_executions: t.max_parallel_executions,
                preferred_max_queue_length: t.preferred_max_queue_length,
                template_overrides: t.template_overrides.clone(),
                prespawn: t.prespawn,
                pids_limit: t.pids_limit,
                idle_pods: t.idle_pods,
                single_use: t.single_use,
                config_name: t.config_name.to_string(),
            }))
    }

    /// The built-in function for a requested image, or `None` (also for a bad constraint,
    /// which is logged).
    pub fn go_for(&self, image: &str, tag_constraint: &str) -> Option<GoMatch> {
        log_bad_constraint(self.try_go_for(image, tag_constraint))
    }

    /// [`ImageIndex::go_for`], with an error for a constraint that does not parse.
    pub fn try_go_for(
        &self,
        image: &str,
        tag_constraint: &str,
    ) -> Result<Option<GoMatch>, ConfigError> {
        Ok(self
            .lookup(image, tag_constraint, |e| &e.go)?
            .map(|(resolved_image, t)| GoMatch {
                id: t.id.clone(),
                resolved_image,
                config_name: t.config_name.to_string(),
            }))
    }

    /// Full image references (`NAME:TAG`) of every podExecutor tag, for warming the pod
    /// cache: one per tag under the config's first prefix, in configuration order,
    /// without repeats.
    pub fn warm_images(&self) -> Vec<String> {
        self.warm.clone()
    }

    fn lookup<T>(
        &self,
        image: &str,
        constraint: &str,
        table: impl Fn(&ImageEntry) -> &TagTable<T>,
    ) -> Result<Option<(String, Arc<T>)>, ConfigError> {
        let constraint = if constraint.trim().is_empty() {
            None
        } else {
            Some(TagConstraint::parse(constraint)?)
        };
        let Some(reference) = ImageRef::parse(image) else {
            return Ok(None);
        };
        let name = reference.normalized_name(&self.default_prefix);
        let Some(entry) = self.images.get(&name) else {
            return Ok(None);
        };
        let table = table(entry);
        let tag = match (reference.tag, &constraint) {
            (Some(tag), Some(c)) if !c.matches_tag(tag) => return Ok(None),
            (Some(tag), _) => tag,
            (None, Some(c)) => match best_tag(table.order.iter().map(String::as_str), c) {
                Some(tag) => tag,
                None => return Ok(None),
            },
            (None, None) if reference.digest.is_some() => return Ok(None),
            (None, None) => LATEST_TAG,
        };
        let Some(target) = table.by_tag.get(tag) else {
            return Ok(None);
        };
        let mut resolved = format!("{name}:{tag}");
        if let Some(digest) = reference.digest {
            resolved.push('@');
            resolved.push_str(digest);
        }
        Ok(Some((resolved, Arc::clone(target))))
    }
}

fn log_bad_constraint<T>(result: Result<Option<T>, ConfigError>) -> Option<T> {
    match result {
        Ok(found) => found,
        Err(error) => {
            tracing::warn!(%error, "image lookup failed");
            None
        }
    }
}

#[cfg(test)]
mod tests;
