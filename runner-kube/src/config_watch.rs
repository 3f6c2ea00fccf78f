//! FunctionConfig objects in the cluster, watched live (`serve --backend kube`).
//!
//! One task lists and watches the FunctionConfig objects of one namespace (Porch's function
//! runner watches its `--pod-namespace`) or of all, and on every change of what they
//! configure
//!
//! 1. combines them with the FunctionConfigs from `--functions` into a new [`ImageIndex`]
//!    and publishes it: the next call reads it ([`LiveIndex`](runner_core::config::LiveIndex));
//! 2. writes each object's outcome into its status (the status subresource, a merge patch):
//!    applied: `functionRunnerObservedGeneration` = `metadata.generation`, no `error`, the
//!    condition `FunctionRunnerApplied` `True`; rejected: `error` and the condition `False`,
//!    reason `Invalid` or `Conflict`, naming the fields. An object whose status already says
//!    its outcome is not written, so a steady state makes no writes;
//! 3. keeps Porch's finalizer on each object as Porch's runner does ([`finalizer`]):
//!    added while it lives (with Porch's command line), removed once it is being deleted.
//!
//! # Combining
//!
//! The directory's FunctionConfigs come first (in file order), then the cluster's, oldest
//! first (`creationTimestamp`, then namespace and name). A FunctionConfig that maps an
//! (image, tag) an earlier one already maps conflicts and is ignored whole, as duplicates in
//! a directory are: the directory is never overridden, and a new object never takes over a
//! function another object already serves. An object that does not parse or validate is
//! ignored too (a bad edit takes its function out of service rather than leaving an older
//! generation in use that the object no longer says). A relative `binaryExecutor.path` is
//! resolved against the `--functions` directory, as Porch does; without one it is invalid.
//! An object being deleted (`deletionTimestamp` set) counts as gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::backoff::with_backoff;

use super::crd::{
    self, Condition, FunctionConfigStatus, CONDITION_TYPE, REASON_APPLIED, REASON_CONFLICT,
    REASON_INVALID,
};
use runner_core::config::{
    parse_object, partition_duplicates, ConfigError, FunctionConfig, ImageIndex, IndexPublisher,
    API_VERSION, GROUP, KIND,
};

/// What the watch reads and how it resolves what it reads.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    /// The namespace watched; `None`: all namespaces.
    pub namespace: Option<String>,
    /// The `--functions` directory: relative `binaryExecutor.path`s are resolved against it.
    pub functions_dir: Option<PathBuf>,
    /// The registry path of short image names.
    pub default_prefix: String,
    /// Add Porch's finalizer to live objects (as Porch's runner does); it is taken off
    /// deleted ones either way.
    pub add_finalizer: bool,
    /// How long [`start`] waits for the first complete list before the runner serves
    /// without it (the objects then apply once listed).
    pub sync_timeout: Duration,
}

/// The running watch; dropping it stops the watch.
#[derive(Debug)]
pub struct ConfigWatch {
    task: JoinHandle<()>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a cluster FunctionConfig comes from, as messages about conflicts name it.
const SOURCE: &str = "in the cluster";
/// The condition's message while applied.
const MESSAGE_APPLIED: &str = "the function runner serves this FunctionConfig";
/// Who writes the status, in the objects' managedFields.
const FIELD_MANAGER: &str = "function-runner";
/// Bound on one status write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// When a failed status write is tried again (also any later event retries it), doubled
/// after each failed pass up to [`MAX_RETRY_AFTER`].
const RETRY_AFTER: Duration = Duration::from_secs(5);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Starts watching FunctionConfig objects and publishing indexes built from them and
/// `local` (the `--functions` directory's configs, already checked) into `publisher`.
/// Returns once the first complete list is applied (index published, statuses written),
/// or the first attempt failed (the watch keeps retrying, with backoff: a CRD installed
/// later is picked up), or after `settings.sync_timeout`.
pub async fn start(
    client: Client,
    settings: WatchSettings,
    local: Vec<FunctionConfig>,
    publisher: IndexPublisher,
) -> ConfigWatch {
    let gvk = GroupVersionKind::gvk(GROUP, crd::VERSION, KIND);
    let resource = ApiResource::from_gvk_with_plural(&gvk, crd::PLURAL);
    let (api, scope) = match &settings.namespace {
        Some(ns) => (
            Api::namespaced_with(client.clone(), ns, &resource),
            format!("namespace {ns}"),
        ),
        None => (
            Api::all_with(client.clone(), &resource),
            "all namespaces".to_string(),
        ),
    };
    let (synced, first_list) = oneshot::channel();
    let watch = Watch {
        client,
        resource,
        scope,
        combiner: Combiner::new(
            local,
            settings.functions_dir.clone(),
            settings.default_prefix.clone(),
        ),
        publisher,
        finalizers: finalizer::Pending::new(settings.add_finalizer),
        synced: Some(synced),
        retry_after: RETRY_AFTER,
    };
    let task = tokio::spawn(watch.run(api));
    match tokio::time::timeout(settings.sync_timeout, first_list).await {
        Ok(Ok(Ok(count))) => tracing::info!(count, "FunctionConfigs read from the cluster"),
        Ok(Ok(Err(why))) => tracing::warn!(
            "serving without FunctionConfigs from the cluster until they can be read (retrying): {why}"
        ),
        Ok(Err(_)) => tracing::error!("the FunctionConfig watch ended"),
        Err(_) => tracing::warn!(
            timeout = ?settings.sync_timeout,
            "the FunctionConfigs in the cluster are not listed yet; serving, they apply once listed"
        ),
    }
    ConfigWatch { task }
}

/// The watch task's state.
struct Watch {
    client: Client,
    resource: ApiResource,
    /// `namespace NS` or `all namespaces`, for messages.
    scope: String,
    combiner: Combiner,
    publisher: IndexPublisher,
    /// Porch's finalizer writes still to make.
    finalizers: finalizer::Pending,
    /// Told the outcome of the first list.
    synced: Option<oneshot::Sender<Result<usize, String>>>,
    /// How long after the next failed status write to try again.
    retry_after: Duration,
}

impl Watch {
    async fn run(mut self, api: Api<DynamicObject>) {
        let events = with_backoff(watcher(api, watcher::Config::default()));
        let mut events = std::pin::pin!(events);
        // The objects of a (re)list in progress: applied together once complete, so that
        // an object deleted while the watch was down goes.
        let mut listing: Option<Vec<DynamicObject>> = None;
        let mut failing = false;
        let mut retry: Option<Instant> = None;
        // The size of a list just applied, to tell `start` once the statuses are written.
        let mut listed: Option<usize> = None;
        loop {
            let event = tokio::select! {
                event = events.next() => match event {
                    Some(event) => event,
                    None => return,
                },
                () = sleep_until(retry) => {
                    retry = None;
                    self.write(&mut retry).await;
                    continue;
                }
            };
            let changed = match event {
                Ok(watcher::Event::Init) => {
                    listing = Some(Vec::new());
                    false
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listing.get_or_insert_with(Vec::new).push(object);
                    false
                }
                Ok(watcher::Event::InitDone) => {
                    let objects = listing.take().unwrap_or_default();
                    if failing {
                        tracing::info!(scope = %self.scope, "FunctionConfigs readable again");
                        failing = false;
                    }
                    listed = Some(objects.len());
                    self.finalizers
                        .replace(objects.iter().filter_map(|o| key_of(o).map(|key| (key, o))));
                    self.combiner.replace(&objects)
                }
                Ok(watcher::Event::Apply(object)) => {
                    if let Some(key) = key_of(&object) {
                        self.finalizers.observe(key, &object);
                    }
                    self.combiner.observe(&object)
                }
                Ok(watcher::Event::Delete(object)) => key_of(&object).is_some_and(|key| {
                    self.finalizers.forget(&key);
                    self.combiner.forget(&key)
                }),
                Err(err) => {
                    let why = explain(&err, &self.scope);
                    // The watcher retries with backoff; say it once per outage (at startup
                    // `start` says it).
                    if failing || self.synced.is_some() {
                        tracing::debug!("FunctionConfig watch: {why}");
                    } else {
                        tracing::warn!("FunctionConfig watch: {why}; retrying");
                    }
                    failing = true;
                    if let Some(synced) = self.synced.take() {
                        let _ = synced.send(Err(why));
                    }
                    continue;
                }
            };
            if changed {
                let index = self.combiner.rebuild();
                tracing::info!(
                    images = index.len(),
                    local = self.combiner.local.len(),
                    cluster = self.combiner.applied(),
                    "FunctionConfigs changed: new image index in use"
                );
                self.publisher.publish(Arc::new(index));
            }
            if listing.is_none() {
                self.write(&mut retry).await;
            }
            if let Some(count) = listed.take() {
                if let Some(synced) = self.synced.take() {
                    let _ = synced.send(Ok(count));
                }
            }
        }
    }

    /// Writes every status that does not say its object's outcome yet, and Porch's
    /// finalizer where it is missing or due to go; on a failure, sets `retry`, further
    /// away after each failed pass (a runner without the right to write must not flood
    /// the API server, nor its log).
    async fn write(&mut self, retry: &mut Option<Instant>) {
        // Finalizers first: a status write changes the resourceVersion that a finalizer
        // patch is conditional on.
        let failed = self.write_finalizers().await | self.write_statuses().await;
        if failed {
            *retry = Some(Instant::now() + self.retry_after);
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
        } else {
            self.retry_after = RETRY_AFTER;
        }
    }

    /// Adds or removes Porch's finalizer where [`finalizer::Pending`] says; whether a
    /// write failed.
    async fn write_finalizers(&mut self) -> bool {
        let mut failed = false;
        for (key, patch) in self.finalizers.patches() {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &key.namespace, &self.resource);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let merge = Patch::Merge(&patch);
            let write = api.patch(&key.name, &params, &merge);
            match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                Ok(Ok(_)) => self.finalizers.done(&key, &patch),
                // Changed meanwhile (the resourceVersion is the patch's precondition) or
                // deleted: its next event says what it needs.
                Ok(Err(kube::Error::Api(status))) if matches!(status.code, 404 | 409) => {
                    self.finalizers.done(&key, &patch);
                }
                Ok(Err(err)) => {
                    let hint = match &err {
                        kube::Error::Api(status) if status.code == 403 => format!(
                            " (the runner needs patch on {} in namespace {}, as Porch's \
                             Role porch-function-executor grants)",
                            crd::CRD_NAME,
                            key.namespace
                        ),
                        _ => String::new(),
                    };
                    self.write_failed(&format!(
                        "updating the finalizer {} of FunctionConfig {key}: {}{hint}",
                        finalizer::FINALIZER,
                        crate::access::one_line(&err)
                    ));
                    failed = true;
                }
                Err(_) => {
                    self.write_failed(&format!(
                        "updating the finalizer of FunctionConfig {key}: no answer within {WRITE_TIMEOUT:?}"
                    ));
                    failed = true;
                }
            }
        }
        failed
    }

    /// Writes every status that does not say its object's outcome yet; whether a write
    /// failed.
    async fn write_statuses(&mut self) -> bool {
        let now = now_rfc3339();
        let mut failed = false;
        for (key, patch) in self.combiner.status_patches(&now) {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &key.namespace, &self.resource);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let patch = Patch::Merge(&patch);
            let write = api.patch_status(&key.name, &params, &patch);
            match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                Ok(Ok(object)) => self.combiner.wrote(&key, &object),
                // Deleted meanwhile: its Delete event follows.
                Ok(Err(kube::Error::Api(status))) if status.code == 404 => {}
                Ok(Err(err)) => {
                    self.write_failed(&format!(
                        "writing the status of FunctionConfig {key}: {}",
                        crate::access::one_line(&err)
                    ));
                    failed = true;
                }
                Err(_) => {
                    self.write_failed(&format!(
                        "writing the status of FunctionConfig {key}: no answer within {WRITE_TIMEOUT:?}"
                    ));
                    failed = true;
                }
            }
        }
        failed
    }

    /// Logs a failed status write: a warning the first time after a success.
    fn write_failed(&self, why: &str) {
        if self.retry_after == RETRY_AFTER {
            tracing::warn!("{why}; retrying in {:?}", self.retry_after);
        } else {
            tracing::debug!("{why}");
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A watch error, with what usually causes it.
fn explain(err: &watcher::Error, scope: &str) -> String {
    let code = match err {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => match e {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        },
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    };
    let err = crate::access::watch_one_line(err);
    match code {
        Some(404) => {
            format!("{err} (is the FunctionConfig CRD installed? deploy/functionconfig-crd.yaml)")
        }
        Some(403) => format!(
            "{err} (the runner needs list, watch and patch on {} and patch on {}/status in {scope})",
            crd::CRD_NAME,
            crd::CRD_NAME
        ),
        _ => err,
    }
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// The combination, apart from the I/O
// ---------------------------------------------------------------------------------------------

/// A FunctionConfig object's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjectKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

fn key_of(object: &DynamicObject) -> Option<ObjectKey> {
    Some(ObjectKey {
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        name: object.metadata.name.clone()?,
    })
}

/// What the watch knows of one object.
#[derive(Debug)]
struct Observed {
    generation: i64,
    created: Option<Time>,
    resource_version: Option<String>,
    /// The object as the parser reads it: what the index is built from, and so what tells
    /// a change of configuration from a status write.
    document: Value,
    /// The config, or why it is invalid.
    parsed: Result<FunctionConfig, String>,
    status: FunctionConfigStatus,
}

/// What an object's current generation came to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Applied,
    Rejected {
        reason: &'static str,
        message: String,
    },
}

/// The FunctionConfigs from the directory and from the cluster, combined into an index
/// and into each object's outcome.
pub(crate) struct Combiner {
    local: Vec<FunctionConfig>,
    functions_dir: Option<PathBuf>,
    default_prefix: String,
    objects: BTreeMap<ObjectKey, Observed>,
    /// Each object's outcome at the last rebuild.
    outcomes: BTreeMap<ObjectKey, Outcome>,
    /// The generation and outcome last logged for each object.
    logged: BTreeMap<ObjectKey, (i64, Outcome)>,
    /// For each object, the resourceVersion it had after this runner's last status write
    /// to it, and the generation and outcome that write said.
    written: HashMap<ObjectKey, (String, i64, Outcome)>,
}

impl Combiner {
    pub(crate) fn new(
        local: Vec<FunctionConfig>,
        functions_dir: Option<PathBuf>,
        default_prefix: String,
    ) -> Self {
        Self {
            local,
            functions_dir,
            default_prefix,
            objects: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            logged: BTreeMap::new(),
            written: HashMap::new(),
        }
    }

    /// Records an object's new state; `true` when what the index is built from changed
    /// (not when only its status or metadata did).
    pub(crate) fn observe(&mut self, object: &DynamicObject) -> bool {
        let Some(key) = key_of(object) else {
            return false;
        };
        if object.metadata.deletion_timestamp.is_some() {
            return self.forget(&key);
        }
        let generation = object.metadata.generation.unwrap_or(0);
        let document = json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": { "name": key.name, "namespace": key.namespace },
            "spec": object.data.get("spec").cloned().unwrap_or(Value::Null),
        });
        // A status this runner cannot read (another CRD's shape) is one to rewrite.
        let status = object
            .data
            .get("status")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        let resource_version = object.metadata.resource_version.clone();
        if let Some(seen) = self.objects.get_mut(&key) {
            seen.status = status;
            seen.resource_version = resource_version;
            // A spec changed and changed back still makes a new generation, which the
            // status must then name; the index stays as it is.
            seen.generation = generation;
            // Changed only by a delete and re-create the watch missed.
            seen.created = object.metadata.creation_timestamp.clone();
            if seen.document == document {
                return false;
            }
            seen.parsed = parse(&document, self.functions_dir.as_deref());
            seen.document = document;
            return true;
        }
        let parsed = parse(&document, self.functions_dir.as_deref());
        self.objects.insert(
            key,
            Observed {
                generation,
                created: object.metadata.creation_timestamp.clone(),
                resource_version,
                document,
                parsed,
                status,
            },
        );
        true
    }

    /// Forgets a deleted object; `true` when it was known.
    pub(crate) fn forget(&mut self, key: &ObjectKey) -> bool {
        self.written.remove(key);
        self.objects.remove(key).is_some()
    }

    /// Replaces what is known with a complete list; `true` when the index must change.
    pub(crate) fn replace(&mut self, objects: &[DynamicObject]) -> bool {
        let listed: BTreeSet<ObjectKey> = objects
            .iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none())
            .filter_map(key_of)
            .collect();
        let gone: Vec<ObjectKey> = self
            .objects
            .keys()
            .filter(|key| !listed.contains(key))
            .cloned()
            .collect();
        let mut changed = false;
        for key in gone {
            changed |= self.forget(&key);
        }
        for object in objects {
            changed |= self.observe(object);
        }
        changed
    }

    /// Number of cluster objects applied at the last rebuild.
    pub(crate) fn applied(&self) -> usize {
        self.outcomes
            .values()
            .filter(|o| **o == Outcome::Applied)
            .count()
    }

    /// The outcome of an object at the last rebuild.
    #[cfg(test)]
    pub(crate) fn outcome(&self, key: &ObjectKey) -> Option<&Outcome> {
        self.outcomes.get(key)
    }

    /// Builds the index of the directory's and the cluster's FunctionConfigs (see the
    /// module's rule), decides each object's outcome and logs the outcomes that changed.
    pub(crate) fn rebuild(&mut self) -> ImageIndex {
        let mut ordered: Vec<(&ObjectKey, &Observed)> = self.objects.iter().collect();
        ordered.sort_by(|(ka, a), (kb, b)| (&a.created, ka).cmp(&(&b.created, kb)));
        let mut configs = self.local.clone();
        let mut owners = Vec::new();
        let mut outcomes = BTreeMap::new();
        for (key, seen) in ordered {
            match &seen.parsed {
                Ok(config) => {
                    configs.push(config.clone());
                    owners.push(key.clone());
                }
                Err(message) => {
                    outcomes.insert(
                        key.clone(),
                        Outcome::Rejected {
                            reason: REASON_INVALID,
                            message: message.clone(),
                        },
                    );
                }
            }
        }
        let local = self.local.len();
        let (kept, dropped) = partition_duplicates(configs, &self.default_prefix);
        for (position, error) in dropped {
            // The directory's configs are free of duplicates among themselves and come
            // first: only cluster objects are dropped here.
            if let Some(key) = position.checked_sub(local).and_then(|i| owners.get(i)) {
                outcomes.insert(
                    key.clone(),
                    Outcome::Rejected {
                        reason: REASON_CONFLICT,
                        message: problem(&error),
                    },
                );
            }
        }
        for key in owners {
            outcomes.entry(key).or_insert(Outcome::Applied);
        }
        self.outcomes = outcomes;
        self.log_changes();
        // No duplicates are left to report.
        ImageIndex::build(&kept, &self.default_prefix).0
    }

    fn log_changes(&mut self) {
        let mut logged = BTreeMap::new();
        for (key, outcome) in &self.outcomes {
            let generation = self.objects.get(key).map_or(0, |o| o.generation);
            let now = (generation, outcome.clone());
            if self.logged.get(key) != Some(&now) {
                match outcome {
                    Outcome::Applied => {
                        tracing::info!("FunctionConfig {key} (generation {generation}) applied")
                    }
                    Outcome::Rejected { reason, message } => tracing::error!(
                        "FunctionConfig {key} (generation {generation}) ignored ({reason}): {message}"
                    ),
                }
            }
            logged.insert(key.clone(), now);
        }
        for key in self.logged.keys() {
            if !logged.contains_key(key) {
                tracing::info!("FunctionConfig {key} deleted: no longer applied");
            }
        }
        self.logged = logged;
    }

    /// Merge patches of the status subresource that make each object's status say its
    /// outcome. None for an object whose status says it already, nor for one whose last
    /// change was this runner's own write of the same outcome: its status is then what the
    /// API server kept of that write (a CRD without the condition in its schema prunes it,
    /// and writing it again would only loop).
    pub(crate) fn status_patches(&self, now: &str) -> Vec<(ObjectKey, Value)> {
        let mut patches = Vec::new();
        for (key, outcome) in &self.outcomes {
            let Some(seen) = self.objects.get(key) else {
                continue;
            };
            if says(&seen.status, seen.generation, outcome) {
                continue;
            }
            let ours = self
                .written
                .get(key)
                .is_some_and(|(version, generation, said)| {
                    seen.resource_version.as_ref() == Some(version)
                        && *generation == seen.generation
                        && said == outcome
                });
            if ours {
                continue;
            }
            patches.push((
                key.clone(),
                patch(&seen.status, seen.generation, outcome, now),
            ));
        }
        patches
    }

    /// Records this runner's status write, as the API server answered it.
    pub(crate) fn wrote(&mut self, key: &ObjectKey, object: &DynamicObject) {
        let (Some(seen), Some(outcome)) = (self.objects.get_mut(key), self.outcomes.get(key))
        else {
            return;
        };
        if let Some(version) = &object.metadata.resource_version {
            self.written.insert(
                key.clone(),
                (version.clone(), seen.generation, outcome.clone()),
            );
            seen.resource_version = Some(version.clone());
        }
        seen.status = object
            .data
            .get("status")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
    }
}

/// An object's config, or why it is invalid.
fn parse(document: &Value, functions_dir: Option<&Path>) -> Result<FunctionConfig, String> {
    let report = parse_object(document, SOURCE, functions_dir);
    if !report.errors.is_empty() {
        return Err(report
            .errors
            .iter()
            .map(problem)
            .collect::<Vec<_>>()
            .join("; "));
    }
    let Some(config) = report.configs.into_iter().next() else {
        return Err("not a FunctionConfig".into());
    };
    if let Some(binary) = &config.spec.binary_executor {
        if binary.path.is_relative() {
            return Err(format!(
                "spec.binaryExecutor.path: the relative path \"{}\" needs the runner's \
                 --functions directory, and it has none; give an absolute path",
                binary.path.display()
            ));
        }
    }
    Ok(config)
}

/// A config error as a status message: the object is the location.
fn problem(error: &ConfigError) -> String {
    match error {
        ConfigError::Invalid { field, message, .. } => format!("{field}: {message}"),
        ConfigError::Duplicate {
            field,
            image,
            first,
            ..
        } => format!("{field}: image \"{image}\" is already configured by {first}"),
        ConfigError::Parse { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The condition an outcome makes: (status, reason, message).
fn condition_of(outcome: &Outcome) -> (&'static str, &'static str, &str) {
    match outcome {
        Outcome::Applied => ("True", REASON_APPLIED, MESSAGE_APPLIED),
        Outcome::Rejected { reason, message } => ("False", reason, message),
    }
}

/// Whether `status` already says `outcome` for `generation`.
fn says(status: &FunctionConfigStatus, generation: i64, outcome: &Outcome) -> bool {
    let (want, reason, message) = condition_of(outcome);
    let fields = match outcome {
        Outcome::Applied => {
            status.function_runner_observed_generation == Some(generation) && status.error.is_none()
        }
        Outcome::Rejected { message, .. } => status.error.as_deref() == Some(message.as_str()),
    };
    fields
        && status.conditions.iter().any(|c| {
            c.type_ == CONDITION_TYPE
                && c.status == want
                && c.reason == reason
                && c.message == message
                && c.observed_generation == Some(generation)
        })
}

/// The merge patch that makes `seen` say `outcome`. Other conditions are kept (a merge
/// patch replaces a list whole); the transition time moves only when the condition's
/// status does.
fn patch(seen: &FunctionConfigStatus, generation: i64, outcome: &Outcome, now: &str) -> Value {
    let (want, reason, message) = condition_of(outcome);
    let since = seen
        .conditions
        .iter()
        .find(|c| {
            c.type_ == CONDITION_TYPE && c.status == want && !c.last_transition_time.is_empty()
        })
        .map_or_else(|| now.to_string(), |c| c.last_transition_time.clone());
    let mut conditions: Vec<Condition> = seen
        .conditions
        .iter()
        .filter(|c| c.type_ != CONDITION_TYPE)
        .cloned()
        .collect();
    conditions.push(Condition {
        type_: CONDITION_TYPE.to_string(),
        status: want.to_string(),
        observed_generation: Some(generation),
        last_transition_time: since,
        reason: reason.to_string(),
        message: message.to_string(),
    });
    let mut status = json!({ "conditions": conditions });
    match outcome {
        Outcome::Applied => {
            status["functionRunnerObservedGeneration"] = json!(generation);
            status["error"] = Value::Null;
        }
        Outcome::Rejected { message, .. } => status["error"] = json!(message),
    }
    json!({ "status": status })
}

pub mod finalizer;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
