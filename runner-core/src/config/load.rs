//! Loading FunctionConfigs: from a directory ([`load_dir`]) or one text ([`parse_str`]),
//! each document validated on its own so that one bad document is reported (with its
//! source, document number, field and position) while the good ones still load.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use super::error::{ConfigError, DocLocation, Position};
use super::index::remove_duplicates;
use super::names::{API_VERSION, DEFAULT_IMAGE_PREFIX, GROUP, KIND};
use super::types::FunctionConfig;

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

/// Parses one FunctionConfig object as the API server returns it (JSON), checked exactly as
/// a document of a file is; `source` names its origin in [`FunctionConfig::source`] and in
/// errors. Errors carry no position: it would point into this function's own rendering of
/// the object, not at anything its author wrote. Relative `binaryExecutor.path`s are
/// resolved against `base_dir` when given.
///
/// The object is turned into YAML's data model by hand: serialised as it
/// is, a number would not survive, since the `starlark` crate turns on
/// serde_json's `arbitrary_precision` for the whole build (a number is then
/// a map with a private key to any serialiser but serde_json's).
pub fn parse_object(
    object: &serde_json::Value,
    source: &str,
    base_dir: Option<&Path>,
) -> LoadReport {
    let at = DocLocation {
        source: source.to_string(),
        document: None,
    };
    let mut report = LoadReport::default();
    // Through YAML text, so that type errors name the field's path as they do in files.
    let text = match serde_yaml_ng::to_string(&json_to_yaml(object)) {
        Ok(text) => text,
        Err(e) => {
            report.errors.push(ConfigError::Parse {
                at,
                message: e.to_string(),
                position: None,
            });
            return report;
        }
    };
    parse_documents(
        &text,
        source,
        base_dir,
        &mut report.configs,
        &mut report.errors,
    );
    for config in &mut report.configs {
        config.source = Some(at.clone());
    }
    for error in &mut report.errors {
        if let ConfigError::Parse {
            at: location,
            position,
            ..
        }
        | ConfigError::Invalid {
            at: location,
            position,
            ..
        } = error
        {
            *location = at.clone();
            *position = None;
        }
    }
    report
}

/// What the first pass learns about a document.
enum Probe {
    FunctionConfig,
    Other,
    BadVersion(String),
}

fn probe(value: &serde_yaml_ng::Value) -> Probe {
    let Some(map) = value.as_mapping() else {
        return Probe::Other;
    };
    let kind = map.get("kind").and_then(serde_yaml_ng::Value::as_str);
    let api_version = map.get("apiVersion").and_then(serde_yaml_ng::Value::as_str);
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
    // errors carry serde_yaml_ng's field path and line numbers relative to the whole text.
    let mut wanted = HashSet::new();
    let mut last_wanted = 0;
    let mut previous_error: Option<String> = None;
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let at = DocLocation {
            source: source_name.to_string(),
            document: Some(i + 1),
        };
        match serde_yaml_ng::Value::deserialize(document) {
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
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
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

/// Turns a serde_yaml_ng error into a [`ConfigError`], splitting off the field path
/// (`spec.podExecutor.maxParallelExecutions: ...`) and the position suffix.
fn yaml_error(at: DocLocation, error: &serde_yaml_ng::Error) -> ConfigError {
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

#[cfg(test)]
mod tests;

/// A JSON value as YAML data (see [`parse_object`]).
fn json_to_yaml(v: &serde_json::Value) -> serde_yaml_ng::Value {
    use serde_json::Value as J;
    use serde_yaml_ng::Value as Y;
    match v {
        J::Null => Y::Null,
        J::Bool(b) => Y::Bool(*b),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                Y::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Y::Number(u.into())
            } else {
                Y::Number(n.as_f64().unwrap_or(f64::NAN).into())
            }
        }
        J::String(s) => Y::String(s.clone()),
        J::Array(a) => Y::Sequence(a.iter().map(json_to_yaml).collect()),
        J::Object(o) => Y::Mapping(
            o.iter()
                .map(|(k, v)| (Y::String(k.clone()), json_to_yaml(v)))
                .collect(),
        ),
    }
}
