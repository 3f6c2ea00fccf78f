//! FunctionConfig documents (`config.porch.kpt.dev/v1alpha1`, kind `FunctionConfig`) and
//! image matching.
//!
//! A FunctionConfig says how a function image is executed: by a local binary
//! (`binaryExecutor`), in a cached pod (`podExecutor`) or by a built-in Go function
//! (`goExecutor`), each for a list of tags. This module
//!
//! * defines the document types ([`FunctionConfig`] and friends),
//! * parses them from a directory ([`load_dir`]) or from one string ([`parse_str`], which the
//!   cluster watch feeds), validating types and semantics and reporting every bad document
//!   with its file, document number and field while the good ones still load,
//! * builds an [`ImageIndex`] answering "which binary / which pod settings for this requested
//!   image and tag constraint" with hash-map lookups,
//! * resolves semver tag constraints ([`resolve_tag`], [`TagConstraint`]) and parses Go
//!   duration strings ([`parse_go_duration`]).
//!
//! # Image names
//!
//! A request names an image as `[REGISTRY/PATH/]NAME[:TAG][@DIGEST]`. A name without any `/`
//! is a short name of the default image prefix (by default [`DEFAULT_IMAGE_PREFIX`]), so
//! `set-namespace:v0.4.1` and `ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1`
//! are the same image. A name that contains a `/` is taken literally (there is no Docker Hub
//! `docker.io/library/` normalisation).
//!
//! A FunctionConfig whose `spec.image` has no `/` (e.g. `set-namespace`) matches
//! `PREFIX/set-namespace:TAG` for every prefix in `spec.prefixes` and every tag of the
//! executor. Prefixes are registry paths; a trailing (or leading) `/` is optional and the
//! empty prefix `""` stands for the default image prefix (as in Porch). With no prefixes
//! the default prefix applies. A `spec.image` that contains a `/` is a full image path and
//! matches exactly that path; `spec.prefixes` is then ignored.
//!
//! # Parsing leniency
//!
//! Unknown fields are ignored and `null` counts as absent. Values of the wrong shape (a
//! string for a list, a list for a string, a non-number for a count, a non-mapping for
//! `resources` or `securityContext`) are errors. As in serde_yaml generally, an unquoted
//! scalar in a string field is taken as written (`tags: [1.10]` is the tag `1.10`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The API group of FunctionConfig.
pub const GROUP: &str = "config.porch.kpt.dev";
/// The `apiVersion` this module understands.
pub const API_VERSION: &str = "config.porch.kpt.dev/v1alpha1";
/// The `kind` of a FunctionConfig document.
pub const KIND: &str = "FunctionConfig";
/// The registry path that short image names (no `/`) belong to.
pub const DEFAULT_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";
/// The tag an image reference without a tag (and without a constraint) means.
pub const LATEST_TAG: &str = "latest";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Where a document came from: a file path (or another source name) and, for documents of a
/// multi-document stream, the 1-based document number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocLocation {
    /// File path as it was opened (directory argument joined with the file name), or the
    /// source name given to [`parse_str`].
    pub source: String,
    /// 1-based index of the YAML document within the source (every `---` separated document
    /// counts, including empty and non-FunctionConfig ones). `None` for objects that did not
    /// come from a parsed text.
    pub document: Option<usize>,
}

impl fmt::Display for DocLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.document {
            Some(n) => write!(f, "{} (document {n})", self.source),
            None => write!(f, "{}", self.source),
        }
    }
}

/// Errors from loading, validating and matching FunctionConfigs.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration directory could not be listed.
    #[error("{}: cannot read directory: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A configuration file could not be read.
    #[error("{}: cannot read file: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A document could not be parsed at all (YAML syntax) or failed at its root.
    /// A syntax error ends the parsing of that file: later documents are not reached.
    #[error("{at}: {message}{}", fmt_position(position))]
    Parse {
        at: DocLocation,
        message: String,
        /// Where in the source text, when known.
        position: Option<Position>,
    },
    /// A field has the wrong type or an invalid value.
    #[error("{at}: {field}: {message}{}", fmt_position(position))]
    Invalid {
        at: DocLocation,
        /// Dotted path of the field, e.g. `spec.podExecutor.maxParallelExecutions`.
        field: String,
        message: String,
        /// Where in the source text, when known.
        position: Option<Position>,
    },
    /// An (image, tag) pair is already mapped by an earlier FunctionConfig. The later
    /// FunctionConfig (the one at `at`) is dropped as a whole; the first one is kept.
    #[error(
        "{at}: {field}: image \"{image}\" is already configured by {first}; this FunctionConfig is ignored"
    )]
    Duplicate {
        at: DocLocation,
        field: String,
        /// Full image reference `NAME:TAG` that is mapped twice.
        image: String,
        /// Description of the FunctionConfig that keeps the mapping.
        first: String,
    },
    /// A tag constraint could not be parsed.
    #[error("invalid tag constraint \"{constraint}\": {reason}")]
    InvalidConstraint { constraint: String, reason: String },
}

fn fmt_position(position: &Option<Position>) -> String {
    match position {
        Some(p) => format!(" (at line {}, column {})", p.line, p.column),
        None => String::new(),
    }
}

/// A 1-based line and column in a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl ConfigError {
    /// The location of the offending document, if the error concerns one.
    pub fn location(&self) -> Option<&DocLocation> {
        match self {
            ConfigError::Parse { at, .. }
            | ConfigError::Invalid { at, .. }
            | ConfigError::Duplicate { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The dotted field path the error concerns, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } | ConfigError::Duplicate { field, .. } => {
                Some(field)
            }
            _ => None,
        }
    }
}

/// A Go duration string that could not be parsed (or is negative).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration \"{input}\": {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

// ---------------------------------------------------------------------------------------------
// Go durations
// ---------------------------------------------------------------------------------------------

/// Parses a Go `time.ParseDuration` string: an optional sign and a sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`,
/// `m`, `h`), e.g. `300ms`, `30m`, `1h30m`, `1.5s`, `2h`. `0` needs no unit.
/// Negative durations are rejected (a [`Duration`] cannot be negative); `0s` is accepted.
/// Fractions are exact to the nanosecond (digits beyond nanosecond precision truncate).
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        // Integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, rest) = s.split_at(int_len);
        s = rest;
        // Fraction.
        let mut frac_digits = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (digits, rest) = rest.split_at(frac_len);
            frac_digits = digits;
            s = rest;
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(err("expected a number"));
        }
        // Unit.
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => {
                return Err(err(
                    "missing unit (valid units are ns, us, µs, ms, s, m, h)",
                ))
            }
            _ => {
                return Err(err(&format!(
                    "unknown unit \"{unit}\" (valid units are ns, us, µs, ms, s, m, h)"
                )))
            }
        };
        let int_value: u128 = if int_digits.is_empty() {
            0
        } else {
            // More than 30 digits overflows any sensible duration anyway.
            if int_digits.len() > 30 {
                return Err(err("overflow"));
            }
            int_digits.parse().map_err(|_| err("overflow"))?
        };
        let mut value = int_value
            .checked_mul(unit_ns)
            .ok_or_else(|| err("overflow"))?;
        // Keep at most 18 fraction digits: beyond that no unit reaches a nanosecond.
        let frac_digits = &frac_digits[..frac_digits.len().min(18)];
        if !frac_digits.is_empty() {
            let frac: u128 = frac_digits.parse().map_err(|_| err("overflow"))?;
            let scale = 10u128.pow(frac_digits.len() as u32);
            value = value
                .checked_add(frac * unit_ns / scale)
                .ok_or_else(|| err("overflow"))?;
        }
        total = total.checked_add(value).ok_or_else(|| err("overflow"))?;
    }
    if negative && total > 0 {
        return Err(err("negative durations are not allowed"));
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| err("overflow"))?;
    // The remainder is < 1e9 and always fits.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// A positive duration written as a Go duration string (`30m`, `1h30m`). Keeps the original
/// text so that it serialises back unchanged. Deserialising rejects invalid, zero and
/// negative durations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration {
    duration: Duration,
    text: String,
}

impl GoDuration {
    /// Parses a positive Go duration string.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let duration = parse_go_duration(text)?;
        if duration.is_zero() {
            return Err(DurationError {
                input: text.to_string(),
                reason: "must be greater than zero".to_string(),
            });
        }
        Ok(GoDuration {
            duration,
            text: text.to_string(),
        })
    }

    /// The parsed duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"30m\" or \"1h30m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                GoDuration::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

// ---------------------------------------------------------------------------------------------
// Document types
// ---------------------------------------------------------------------------------------------

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

    fn describe(&self) -> String {
        match &self.source {
            Some(at) => format!("FunctionConfig {} ({at})", self.display_name()),
            None => format!("FunctionConfig {}", self.display_name()),
        }
    }

    /// Semantic validation (types are already checked by deserialisation). Returns
    /// `(field, message)` pairs; empty when valid. Checks: `spec.image` set and without tag
    /// or digest; prefixes without whitespace or `@`; every present executor has a non-empty
    /// list of valid tags; `binaryExecutor.path` non-empty; `podExecutor.maxParallelExecutions`
    /// at least 1; `goExecutor.id` non-empty when present; env entries have a name.
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinaryExecutor {
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// Path of the binary. A relative path is resolved, when loading, against the directory
    /// of the file it was read from ([`load_dir`]) or the base directory given to
    /// [`parse_str_with`]; [`parse_str`] leaves it as written.
    #[serde(default, deserialize_with = "null_default")]
    pub path: PathBuf,
}

/// Run the function in a cached pod for these tags, with these settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExecutor {
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// How long an idle pod stays cached (Go duration, must be positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_live: Option<GoDuration>,
    /// Maximum number of pods for one image (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel_executions: Option<u32>,
    /// Waitlist length per pod before another pod is started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_max_queue_length: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_overrides: Option<TemplateOverrides>,
}

/// Customisations of the function pod template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') {
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

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

/// The outcome of loading: every FunctionConfig that passed validation (in file-name order,
/// then document order) and one error per rejected document / file.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub configs: Vec<FunctionConfig>,
    pub errors: Vec<ConfigError>,
}

impl LoadReport {
    /// True when nothing was rejected.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Loads every `*.yaml`, `*.yml` and `*.json` file (extension case-insensitive) directly in
/// `dir` — not recursively; entries whose name starts with `.` are skipped, which keeps the
/// `..data` links of a mounted ConfigMap from being read twice. Files are read in name
/// order; each may hold several `---` documents (JSON files are parsed by the same YAML
/// parser). Documents that are not `config.porch.kpt.dev` FunctionConfigs are skipped.
/// Relative `binaryExecutor.path`s are resolved against the directory (made absolute).
/// Duplicates are judged with [`DEFAULT_IMAGE_PREFIX`]; see [`load_dir_with_prefix`].
pub fn load_dir(dir: impl AsRef<Path>) -> LoadReport {
    load_dir_with_prefix(dir, DEFAULT_IMAGE_PREFIX)
}

/// [`load_dir`] with the default image prefix used to decide which short and full image
/// names are the same image (for duplicate detection).
pub fn load_dir_with_prefix(dir: impl AsRef<Path>, default_prefix: &str) -> LoadReport {
    let dir = dir.as_ref();
    let mut report = LoadReport::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            report.errors.push(ConfigError::ReadDir {
                path: dir.to_path_buf(),
                source,
            });
            return report;
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(source) => {
                report.errors.push(ConfigError::ReadDir {
                    path: dir.to_path_buf(),
                    source,
                });
                continue;
            }
        };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !has_config_extension(name) {
            continue;
        }
        let path = entry.path();
        // Follows symlinks: ConfigMap mounts are links to regular files.
        if std::fs::metadata(&path)
            .map(|m| m.is_file())
            .unwrap_or(false)
        {
            files.push(path);
        }
    }
    files.sort();

    let base_dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut parsed = Vec::new();
    for path in files {
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(source) => {
                report.errors.push(ConfigError::ReadFile { path, source });
                continue;
            }
        };
        let source_name = path.display().to_string();
        parse_documents(
            &text,
            &source_name,
            Some(&base_dir),
            &mut parsed,
            &mut report.errors,
        );
    }
    let (configs, duplicates) = remove_duplicates(parsed, default_prefix);
    report.configs = configs;
    report.errors.extend(duplicates);
    report
}

fn has_config_extension(name: &str) -> bool {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return false;
    };
    ["yaml", "yml", "json"]
        .iter()
        .any(|e| ext.eq_ignore_ascii_case(e))
}

/// Parses one text (one or more `---` documents) exactly like [`load_dir`] parses a file;
/// `source_name` names it in errors. Relative `binaryExecutor.path`s are left as written.
/// Duplicates within the text are judged with [`DEFAULT_IMAGE_PREFIX`].
pub fn parse_str(text: &str, source_name: &str) -> LoadReport {
    parse_str_with(text, source_name, None, DEFAULT_IMAGE_PREFIX)
}

/// [`parse_str`] resolving relative `binaryExecutor.path`s against `base_dir` (when given)
/// and judging duplicates with `default_prefix`.
pub fn parse_str_with(
    text: &str,
    source_name: &str,
    base_dir: Option<&Path>,
    default_prefix: &str,
) -> LoadReport {
    let mut parsed = Vec::new();
    let mut errors = Vec::new();
    parse_documents(text, source_name, base_dir, &mut parsed, &mut errors);
    let (configs, duplicates) = remove_duplicates(parsed, default_prefix);
    errors.extend(duplicates);
    LoadReport { configs, errors }
}

/// What the first pass learns about a document.
enum Probe {
    FunctionConfig,
    Other,
    BadVersion(String),
}

fn probe(value: &serde_yaml::Value) -> Probe {
    let Some(map) = value.as_mapping() else {
        return Probe::Other;
    };
    let kind = map.get("kind").and_then(serde_yaml::Value::as_str);
    let api_version = map.get("apiVersion").and_then(serde_yaml::Value::as_str);
    match (kind, api_version) {
        (Some(KIND), Some(API_VERSION)) => Probe::FunctionConfig,
        (Some(KIND), Some(v)) if v.split('/').next() == Some(GROUP) => {
            Probe::BadVersion(v.to_string())
        }
        _ => Probe::Other,
    }
}

fn parse_documents(
    text: &str,
    source_name: &str,
    base_dir: Option<&Path>,
    configs: &mut Vec<FunctionConfig>,
    errors: &mut Vec<ConfigError>,
) {
    // First pass: find the FunctionConfig documents (and syntax errors) via generic values.
    // Second pass: deserialise those documents again into the typed struct, so that type
    // errors carry serde_yaml's field path and line numbers relative to the whole text.
    let mut wanted = HashSet::new();
    let mut last_wanted = 0;
    let mut previous_error: Option<String> = None;
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = DocLocation {
            source: source_name.to_string(),
            document: Some(i + 1),
        };
        match serde_yaml::Value::deserialize(document) {
            Ok(value) => match probe(&value) {
                Probe::FunctionConfig => {
                    wanted.insert(i);
                    last_wanted = i;
                }
                Probe::Other => {}
                Probe::BadVersion(version) => errors.push(ConfigError::Invalid {
                    at,
                    field: "apiVersion".to_string(),
                    message: format!(
                        "unsupported apiVersion \"{version}\" for kind {KIND} (expected \"{API_VERSION}\")"
                    ),
                    position: None,
                }),
            },
            Err(e) => {
                // After a YAML syntax error the parser cannot resynchronise: every later
                // "document" repeats the same error. Other errors (e.g. a duplicate key)
                // concern one document only, and the next documents still load.
                let message = e.to_string();
                if previous_error.as_deref() == Some(message.as_str()) {
                    break;
                }
                errors.push(yaml_error(at, &e));
                previous_error = Some(message);
                continue;
            }
        }
        previous_error = None;
    }
    if wanted.is_empty() {
        return;
    }
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        if i > last_wanted {
            break;
        }
        if !wanted.contains(&i) {
            continue;
        }
        let at = DocLocation {
            source: source_name.to_string(),
            document: Some(i + 1),
        };
        let mut config = match FunctionConfig::deserialize(document) {
            Ok(config) => config,
            Err(e) => {
                errors.push(yaml_error(at, &e));
                continue;
            }
        };
        let problems = config.validate();
        if !problems.is_empty() {
            for (field, message) in problems {
                errors.push(ConfigError::Invalid {
                    at: at.clone(),
                    field,
                    message,
                    position: None,
                });
            }
            continue;
        }
        if let (Some(binary), Some(base)) = (config.spec.binary_executor.as_mut(), base_dir) {
            if binary.path.is_relative() {
                binary.path = base.join(&binary.path);
            }
        }
        config.source = Some(at);
        configs.push(config);
    }
}

/// Turns a serde_yaml error into a [`ConfigError`], splitting off the field path
/// (`spec.podExecutor.maxParallelExecutions: ...`) and the position suffix.
fn yaml_error(at: DocLocation, error: &serde_yaml::Error) -> ConfigError {
    let mut message = error.to_string();
    let position = error.location().map(|loc| {
        let suffix = format!(" at line {} column {}", loc.line(), loc.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
        Position {
            line: loc.line(),
            column: loc.column(),
        }
    });
    if let Some((path, rest)) = message.split_once(": ") {
        let looks_like_path = !path.is_empty()
            && !path.contains(char::is_whitespace)
            && !path.contains('`')
            && !path.contains('"');
        if looks_like_path {
            return ConfigError::Invalid {
                at,
                field: path.to_string(),
                message: rest.to_string(),
                position,
            };
        }
    }
    ConfigError::Parse {
        at,
        message,
        position,
    }
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
    let mut owners: HashMap<(String, String), usize> = HashMap::new();
    let mut kept: Vec<FunctionConfig> = Vec::new();
    let mut errors = Vec::new();
    for config in configs {
        let maps = mappings(&config, default_prefix);
        let conflict = maps.iter().find_map(|m| {
            owners
                .get(&(m.image.clone(), m.tag.clone()))
                .map(|&o| (m, o))
        });
        if let Some((m, owner)) = conflict {
            errors.push(ConfigError::Duplicate {
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
            });
            continue;
        }
        let index = kept.len();
        for m in maps {
            owners.insert((m.image, m.tag), index);
        }
        kept.push(config);
    }
    (kept, errors)
}

// ---------------------------------------------------------------------------------------------
// Image names
// ---------------------------------------------------------------------------------------------

/// A parsed image reference `NAME[:TAG][@DIGEST]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Everything before the tag and digest, as written.
    pub name: &'a str,
    pub tag: Option<&'a str>,
    /// The digest without the `@`, e.g. `sha256:abc…`.
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    /// Splits an image reference. The tag is the part after the last `:` that follows the
    /// last `/` (so `localhost:5000/fn` has no tag). Returns `None` for an empty name, an
    /// empty tag or an empty digest.
    pub fn parse(image: &'a str) -> Option<Self> {
        let image = image.trim();
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        let slash = rest.rfind('/');
        let (name, tag) = match rest.rfind(':') {
            Some(colon) if slash.is_none_or(|s| colon > s) => {
                (&rest[..colon], Some(&rest[colon + 1..]))
            }
            _ => (rest, None),
        };
        if name.is_empty() || tag == Some("") || digest == Some("") {
            return None;
        }
        Some(ImageRef { name, tag, digest })
    }
}

/// `prefix` without surrounding slashes.
fn trim_prefix(prefix: &str) -> &str {
    prefix.trim_matches('/')
}

fn join_image(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// The canonical image name (no tag): short names (no `/`) get the default prefix, other
/// names are returned unchanged.
pub fn normalize_image_name(name: &str, default_prefix: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        join_image(trim_prefix(default_prefix), name)
    }
}

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

// ---------------------------------------------------------------------------------------------
// Tag constraints
// ---------------------------------------------------------------------------------------------

/// A parsed tag constraint: alternatives separated by `||`, each a set of comparators that
/// must all hold.
///
/// The syntax is that of Masterminds/semver (what Porch and kpt use), translated to the
/// `semver` crate: comparators are separated by commas or whitespace (`>=0.2, <0.3`,
/// `>= 0.2 < 0.3`); a leading `v` is dropped from versions (`v0.4.x`); a version without an
/// operator means `=` (exactly that version, or any version within a partial one: `0.4` =
/// `0.4.*`) — unlike the `semver` crate, where it would mean `^`; `~`, `^`, `<`, `<=`, `>`,
/// `>=`, `=` and wildcards (`*`, `x`, `X`) keep their meaning; `A - B` is `>=A, <=B`.
/// `!=` is not supported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagConstraint {
    alternatives: Vec<semver::VersionReq>,
}

impl TagConstraint {
    /// Parses a constraint. An empty (or blank) constraint matches every semver tag.
    pub fn parse(constraint: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidConstraint {
            constraint: constraint.to_string(),
            reason,
        };
        if constraint.trim().is_empty() {
            return Ok(TagConstraint {
                alternatives: vec![semver::VersionReq::STAR],
            });
        }
        let mut alternatives = Vec::new();
        for alternative in constraint.split("||") {
            let translated = translate_alternative(alternative).map_err(invalid)?;
            let req = semver::VersionReq::parse(&translated).map_err(|e| invalid(e.to_string()))?;
            alternatives.push(req);
        }
        Ok(TagConstraint { alternatives })
    }

    /// Whether a parsed version satisfies the constraint.
    pub fn matches(&self, version: &semver::Version) -> bool {
        self.alternatives.iter().any(|req| req.matches(version))
    }

    /// Whether a tag satisfies the constraint; non-semver tags never do.
    pub fn matches_tag(&self, tag: &str) -> bool {
        tag_version(tag).is_some_and(|v| self.matches(&v))
    }
}

fn strip_v(version: &str) -> &str {
    match version.strip_prefix(['v', 'V']) {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => version,
    }
}

/// Translates one `||` alternative into `semver::VersionReq` syntax.
fn translate_alternative(alternative: &str) -> Result<String, String> {
    #[derive(Debug)]
    enum Token<'a> {
        Comparator(&'a str, &'a str),
        Hyphen,
    }
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!' | '~' | '^');
    let is_version =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '-' | '_');
    let mut tokens = Vec::new();
    let mut rest = alternative;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if rest.is_empty() {
            break;
        }
        let op_len = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
        let (op, after_op) = rest.split_at(op_len);
        let after_ws = after_op.trim_start();
        let version_len = after_ws
            .find(|c: char| !is_version(c))
            .unwrap_or(after_ws.len());
        let (version, after) = after_ws.split_at(version_len);
        if op.is_empty() && version == "-" {
            tokens.push(Token::Hyphen);
        } else if version.is_empty() {
            let unexpected = after_ws.chars().next().map_or_else(
                || format!("operator \"{op}\" without a version"),
                |c| format!("unexpected character '{c}'"),
            );
            return Err(unexpected);
        } else {
            tokens.push(Token::Comparator(op, strip_v(version)));
        }
        rest = after;
    }
    if tokens.is_empty() {
        return Err("empty alternative".to_string());
    }
    let mut comparators: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            (
                Token::Comparator("", low),
                Some(Token::Hyphen),
                Some(Token::Comparator("", high)),
            ) => {
                comparators.push(format!(">={low}"));
                comparators.push(format!("<={high}"));
                i += 3;
            }
            (Token::Hyphen, _, _) => return Err("misplaced '-' (use \"A - B\")".to_string()),
            (Token::Comparator(op, version), _, _) => {
                let op = match *op {
                    "" | "==" => {
                        if version.contains(['*', 'x', 'X']) {
                            ""
                        } else {
                            "="
                        }
                    }
                    "!=" => return Err("operator \"!=\" is not supported".to_string()),
                    "=<" => "<=",
                    "=>" => ">=",
                    other => other,
                };
                comparators.push(format!("{op}{version}"));
                i += 1;
            }
        }
    }
    Ok(comparators.join(", "))
}

/// A tag as a semver version: a leading `v` is dropped and a missing minor or patch is
/// padded with 0 (`v0.4.1` → 0.4.1, `0.4` → 0.4.0, `v1` → 1.0.0, `v1.2.3-rc.1` →
/// 1.2.3-rc.1). `None` for non-semver tags (`latest`, `unstable`, `v1.2.3.4`).
pub fn tag_version(tag: &str) -> Option<semver::Version> {
    let tag = strip_v(tag);
    let (core, build) = match tag.split_once('+') {
        Some((core, build)) => (core, Some(build)),
        None => (tag, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (core, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let mut text = String::new();
    for i in 0..3 {
        if i > 0 {
            text.push('.');
        }
        let part = parts.get(i).copied().unwrap_or("0");
        // Tolerate leading zeros (`v01`), which strict semver rejects.
        let trimmed = part.trim_start_matches('0');
        text.push_str(if trimmed.is_empty() { "0" } else { trimmed });
    }
    if let Some(pre) = pre {
        text.push('-');
        text.push_str(pre);
    }
    if let Some(build) = build {
        text.push('+');
        text.push_str(build);
    }
    semver::Version::parse(&text).ok()
}

/// Picks the highest tag of `candidates` satisfying `constraint` (see [`TagConstraint`] for
/// the syntax). Non-semver tags never satisfy a constraint; an empty constraint accepts
/// every semver tag (so the highest semver tag wins). When several candidates are the same
/// version (`v0.4` and `v0.4.0`), the first one listed wins. `Ok(None)` when nothing
/// satisfies; an error naming the constraint when it does not parse.
pub fn resolve_tag(candidates: &[String], constraint: &str) -> Result<Option<String>, ConfigError> {
    let constraint = TagConstraint::parse(constraint)?;
    Ok(best_tag(candidates.iter().map(String::as_str), &constraint).map(str::to_string))
}

fn best_tag<'a>(
    candidates: impl Iterator<Item = &'a str>,
    constraint: &TagConstraint,
) -> Option<&'a str> {
    let mut best: Option<(semver::Version, &'a str)> = None;
    for tag in candidates {
        let Some(version) = tag_version(tag) else {
            continue;
        };
        if !constraint.matches(&version) {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| version > *b) {
            best = Some((version, tag));
        }
    }
    best.map(|(_, tag)| tag)
}

// ---------------------------------------------------------------------------------------------
// Image index
// ---------------------------------------------------------------------------------------------

/// A binaryExecutor match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMatch {
    /// The binary to run (absolute when the config was loaded with a base directory).
    pub path: PathBuf,
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
    config_name: Arc<str>,
}

#[derive(Debug)]
struct PodTarget {
    ttl: Option<Duration>,
    max_parallel_executions: Option<u32>,
    preferred_max_queue_length: Option<u32>,
    template_overrides: Option<Arc<TemplateOverrides>>,
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
    /// [`DEFAULT_IMAGE_PREFIX`]; a trailing `/` is optional).
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
                        config_name: Arc::clone(&config_name),
                    }),
                )
            });
            let pod = spec.pod_executor.as_ref().map(|e| {
                (
                    &e.tags,
                    Arc::new(PodTarget {
                        ttl: e.time_to_live.as_ref().map(GoDuration::duration),
                        max_parallel_executions: e.max_parallel_executions,
                        preferred_max_queue_length: e.preferred_max_queue_length,
                        template_overrides: e.template_overrides.clone().map(Arc::new),
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
        let name = self.normalize(reference.name);
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
