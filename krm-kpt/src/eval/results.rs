//! Results as kpt reads and prints them: [`KptResult`] and
//! [`parse_results`], kpt's printed lines (`[FAIL]`, `Results:`,
//! `Stderr:`, durations) and the results file (`FunctionResultList`).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use serde_yaml_ng::{Mapping, Value};

use super::{Error, EvalOptions};
use krm_yaml as yaml;
use krm_yaml::package::{go_quote, go_quote_bytes};

/// A structured result, as kpt (kyaml's `framework.Result`) reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KptResult {
    pub message: String,
    /// As written (empty when missing; printed as `info`).
    pub severity: String,
    pub resource_ref: Option<[String; 4]>,
    pub field: Option<(String, Option<Value>, Option<Value>)>,
    pub file: Option<(String, i64)>,
    pub tags: Vec<(String, String)>,
}

/// A scalar's text (`""` for null; `None` for collections).
fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        Value::Tagged(t) => scalar_string(&t.value),
        _ => None,
    }
}

fn str_of(v: Option<&Value>) -> String {
    v.and_then(scalar_string).unwrap_or_default()
}

/// Reads `results` as kpt does: a list, or the legacy `{items: [...]}`;
/// `resourceRef.metadata.name|namespace` and `field.suggestedValue` are
/// migrated. Entries that are not mappings are skipped.
pub fn parse_results(v: &Value) -> Vec<KptResult> {
    let list = match v {
        Value::Mapping(m) => match m.get("items") {
            Some(Value::Sequence(s)) => s.as_slice(),
            _ => &[],
        },
        Value::Sequence(s) => s.as_slice(),
        _ => &[],
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let Value::Mapping(m) = item else {
            continue;
        };
        let mut r = KptResult {
            message: str_of(m.get("message")),
            severity: str_of(m.get("severity")),
            ..KptResult::default()
        };
        if let Some(Value::Mapping(rr)) = m.get("resourceRef") {
            let mut name = str_of(rr.get("name"));
            let mut namespace = str_of(rr.get("namespace"));
            if let Some(Value::Mapping(md)) = rr.get("metadata") {
                if md.get("name").is_some() {
                    name = str_of(md.get("name")).trim().to_owned();
                }
                let ns = str_of(md.get("namespace"));
                let ns = ns.trim();
                if !ns.is_empty() && ns != "''" {
                    namespace = ns.to_owned();
                }
            }
            r.resource_ref = Some([
                str_of(rr.get("apiVersion")),
                str_of(rr.get("kind")),
                name,
                namespace,
            ]);
        }
        match m.get("field") {
            Some(Value::Mapping(f)) => {
                let proposed = f.get("suggestedValue").or(f.get("proposedValue")).cloned();
                r.field = Some((
                    str_of(f.get("path")),
                    f.get("currentValue").cloned(),
                    proposed,
                ));
            }
            Some(Value::String(s)) => r.field = Some((s.clone(), None, None)),
            _ => {}
        }
        if let Some(Value::Mapping(f)) = m.get("file") {
            let index = f.get("index").and_then(Value::as_i64).unwrap_or(0);
            r.file = Some((str_of(f.get("path")), index));
        }
        if let Some(Value::Mapping(t)) = m.get("tags") {
            let mut tags: Vec<(String, String)> = t
                .iter()
                .map(|(k, v)| {
                    (
                        scalar_string(k).unwrap_or_default(),
                        scalar_string(v).unwrap_or_default(),
                    )
                })
                .collect();
            tags.sort();
            r.tags = tags;
        }
        out.push(r);
    }
    out
}

impl KptResult {
    /// kpt's line: `[severity] apiVersion/kind/namespace/name field.path: message`.
    pub fn line(&self) -> String {
        let severity = if self.severity.is_empty() {
            "info"
        } else {
            &self.severity
        };
        let mut s = format!("[{severity}]");
        if let Some([api_version, kind, name, namespace]) = &self.resource_ref {
            let ids: Vec<&str> = [api_version, kind, namespace, name]
                .into_iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty())
                .collect();
            if !ids.is_empty() {
                s.push(' ');
                s.push_str(&ids.join("/"));
            }
        }
        if let Some((path, _, _)) = &self.field {
            s.push(' ');
            s.push_str(path);
        }
        s.push_str(": ");
        s.push_str(&self.message);
        s
    }

    /// As kpt writes it in `results.yaml`.
    fn to_value(&self) -> Value {
        let mut m = Mapping::new();
        let put = |m: &mut Mapping, k: &str, v: &str| {
            if !v.is_empty() {
                m.insert(k.into(), v.into());
            }
        };
        put(&mut m, "message", &self.message);
        put(&mut m, "severity", &self.severity);
        if let Some([api_version, kind, name, namespace]) = &self.resource_ref {
            let mut r = Mapping::new();
            put(&mut r, "apiVersion", api_version);
            put(&mut r, "kind", kind);
            put(&mut r, "name", name);
            put(&mut r, "namespace", namespace);
            m.insert("resourceRef".into(), Value::Mapping(r));
        }
        if let Some((path, current, proposed)) = &self.field {
            let mut f = Mapping::new();
            put(&mut f, "path", path);
            if let Some(c) = current {
                f.insert("currentValue".into(), c.clone());
            }
            if let Some(p) = proposed {
                f.insert("proposedValue".into(), p.clone());
            }
            m.insert("field".into(), Value::Mapping(f));
        }
        if let Some((path, index)) = &self.file {
            let mut f = Mapping::new();
            put(&mut f, "path", path);
            if *index != 0 {
                f.insert("index".into(), (*index).into());
            }
            m.insert("file".into(), Value::Mapping(f));
        }
        if !self.tags.is_empty() {
            let t: Mapping = self
                .tags
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
                .collect();
            m.insert("tags".into(), Value::Mapping(t));
        }
        Value::Mapping(m)
    }
}

/// One function's entry in `results.yaml`.
#[derive(Debug, Clone)]
pub(crate) struct FnRecord {
    /// `exec` or `image`.
    pub key: &'static str,
    pub name: String,
    pub stderr: String,
    pub exit_code: i32,
    pub results: Vec<KptResult>,
}

/// kpt's `FunctionResultList` of one function.
pub(super) fn results_yaml(record: &FnRecord) -> String {
    results_list_yaml(
        std::slice::from_ref(record),
        i32::from(record.exit_code != 0),
    )
}

/// kpt's `FunctionResultList` (`items` left out when there are none).
pub(crate) fn results_list_yaml(records: &[FnRecord], exit_code: i32) -> String {
    let items: Vec<Value> = records.iter().map(record_value).collect();
    let mut list = Mapping::new();
    list.insert("apiVersion".into(), "kpt.dev/v1".into());
    list.insert("kind".into(), "FunctionResultList".into());
    let mut md = Mapping::new();
    md.insert("name".into(), "fnresults".into());
    list.insert("metadata".into(), Value::Mapping(md));
    list.insert("exitCode".into(), exit_code.into());
    if !items.is_empty() {
        list.insert("items".into(), Value::Sequence(items));
    }
    yaml::emit::encode_node(&yaml::value::from_value(&Value::Mapping(list)), false)
}

fn record_value(record: &FnRecord) -> Value {
    let mut item = Mapping::new();
    item.insert(record.key.into(), record.name.as_str().into());
    if !record.stderr.is_empty() {
        item.insert("stderr".into(), record.stderr.as_str().into());
    }
    item.insert("exitCode".into(), record.exit_code.into());
    if !record.results.is_empty() {
        item.insert(
            "results".into(),
            Value::Sequence(record.results.iter().map(KptResult::to_value).collect()),
        );
    }
    Value::Mapping(item)
}

/// kpt's first step with `--results-dir`: the directory made (or found),
/// before anything reads or runs, with kpt's error (Go's `os.MkdirAll`:
/// `mkdir DIR: not a directory` for a file in the way).
pub fn prepare_results_dir(dir: &std::path::Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| {
        let why = if dir.exists() && !dir.is_dir() {
            "not a directory".to_owned()
        } else {
            super::exec::go_os_error(&e)
        };
        Error::Input(format!(
            "cannot read or create results dir {}: mkdir {}: {why}",
            go_quote(&dir.display().to_string()),
            dir.display()
        ))
    })
}

/// Writes `results.yaml` (if asked) and says where it is.
pub(super) fn finish_results(
    opts: &EvalOptions,
    record: &FnRecord,
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let Some(dir) = &opts.results_dir else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(Error::Results)?;
    let path = dir.join("results.yaml");
    std::fs::write(&path, results_yaml(record)).map_err(Error::Results)?;
    write!(stderr, "\nFor complete results, see {}\n", path.display())?;
    Ok(())
}

pub(super) fn fail_line(
    stderr: &mut (dyn Write + Send),
    name: &str,
    started: Instant,
) -> io::Result<()> {
    writeln!(
        stderr,
        "[FAIL] {} in {}",
        go_quote(name),
        kpt_duration(started.elapsed())
    )
}

/// kpt's multi-line block: a title, the lines (newlines as spaces), at
/// most four of them when truncating.
pub(super) fn block(title: &str, lines: &[String], truncate: bool) -> String {
    let mut s = format!("  {title}:\n");
    let max = if truncate { 4 } else { usize::MAX };
    for l in lines.iter().take(max) {
        s.push_str("    ");
        s.push_str(&l.replace('\n', " "));
        s.push('\n');
    }
    if lines.len() > max {
        s.push_str(&format!(
            "    ...({} line(s) truncated, use '--truncate-output=false' to disable)\n",
            lines.len() - max
        ));
    }
    s
}

pub(super) fn print_results(
    stderr: &mut (dyn Write + Send),
    results: &[KptResult],
    truncate: bool,
) -> io::Result<()> {
    if results.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = results.iter().map(KptResult::line).collect();
    stderr.write_all(block("Results", &lines, truncate).as_bytes())
}

pub(super) fn print_stderr(
    stderr: &mut (dyn Write + Send),
    text: &[u8],
    truncate: bool,
) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = text.split(|b| *b == b'\n').map(go_quote_bytes).collect();
    stderr.write_all(block("Stderr", &lines, truncate).as_bytes())
}

/// Go's `Duration.String()` of the time truncated to 100 ms, as kpt
/// prints it (`0s`, `200ms`, `1.5s`, `1m2.3s`).
pub fn kpt_duration(d: Duration) -> String {
    let ms = (d.as_millis() / 100 * 100) as u64;
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    let tenths = (ms % 1000) / 100;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let sec = if tenths == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{tenths}s")
    };
    if h > 0 {
        format!("{h}h{m}m{sec}")
    } else if m > 0 {
        format!("{m}m{sec}")
    } else {
        sec
    }
}
