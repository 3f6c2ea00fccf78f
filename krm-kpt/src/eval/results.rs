//! Results as kpt prints and records them: kpt's lines (`[FAIL]`,
//! `[Results]:`, ` Stderr:`, durations, one entry per result:
//! [`kpt_line`]) and the results file (`FunctionResultList`). The results
//! themselves are the workspace's one model, read as kpt reads them
//! ([`krm_results::kpt`]).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use serde_yaml_ng::{Mapping, Value};

use super::error::Error;
use super::options::EvalOptions;
use krm_results::FnResult;
use krm_yaml as yaml;
use krm_yaml::package::go_quote;

/// kpt's line: `[severity] apiVersion/kind/namespace/name field.path:
/// message`, the severity as written (`info` when there is none).
pub fn kpt_line(result: &FnResult) -> String {
    let severity = match result.severity.as_written() {
        "" => "info",
        written => written,
    };
    let mut s = format!("[{severity}]");
    if let Some(r) = &result.resource_ref {
        let ids: Vec<&str> = [&r.api_version, &r.kind, &r.namespace, &r.name]
            .into_iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        if !ids.is_empty() {
            s.push(' ');
            s.push_str(&ids.join("/"));
        }
    }
    if let Some(field) = &result.field {
        s.push(' ');
        s.push_str(&field.path);
    }
    s.push_str(": ");
    s.push_str(&result.message);
    s
}

/// A result as kpt writes it in `results.yaml`.
pub(crate) fn result_value(result: &FnResult) -> Value {
    let mut m = Mapping::new();
    let put = |m: &mut Mapping, k: &str, v: &str| {
        if !v.is_empty() {
            m.insert(k.into(), v.into());
        }
    };
    put(&mut m, "message", &result.message);
    put(&mut m, "severity", result.severity.as_written());
    if let Some(r) = &result.resource_ref {
        let mut rm = Mapping::new();
        put(&mut rm, "apiVersion", &r.api_version);
        put(&mut rm, "kind", &r.kind);
        put(&mut rm, "name", &r.name);
        put(&mut rm, "namespace", &r.namespace);
        m.insert("resourceRef".into(), Value::Mapping(rm));
    }
    if let Some(field) = &result.field {
        let mut f = Mapping::new();
        put(&mut f, "path", &field.path);
        // beta.67 holds these as strings (fnresult's `Field`, since
        // beta.63): a number is written back as `"3"`, a mapping as its
        // YAML text.
        for (key, value) in [
            ("currentValue", &field.current_value),
            ("proposedValue", &field.proposed_value),
        ] {
            if let Some(text) = value.as_ref().map(field_text).filter(|t| !t.is_empty()) {
                f.insert(key.into(), text.into());
            }
        }
        m.insert("field".into(), Value::Mapping(f));
    }
    if let Some(file) = &result.file {
        let mut f = Mapping::new();
        put(&mut f, "path", &file.path);
        if file.index != 0 {
            f.insert("index".into(), file.index.into());
        }
        m.insert("file".into(), Value::Mapping(f));
    }
    if !result.tags.is_empty() {
        let t: Mapping = result
            .tags
            .iter()
            .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
            .collect();
        m.insert("tags".into(), Value::Mapping(t));
    }
    Value::Mapping(m)
}

/// A field value as beta.67's `Field.UnmarshalYAML` keeps it: a scalar's
/// text, a collection's YAML text trimmed
/// (`api/fnresult/v1/types.go@v1.0.0-beta.67:175-215`).
fn field_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => {
            let node = yaml::value::from_value(other);
            yaml::emit::encode_node(&node, true).trim().to_owned()
        }
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
    /// Shared with the render status's step (a function's results can be
    /// one per resource: not copied).
    pub results: std::sync::Arc<[FnResult]>,
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
            Value::Sequence(record.results.iter().map(result_value).collect()),
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

/// kpt's one-line list (beta.67's `SingleLineFormatter`,
/// `pkg/lib/runneroptions/runneroptions.go@v1.0.0-beta.67:112-133`):
/// `Title: a, b`, each line's newlines as spaces and its ends trimmed.
/// Nothing is cut: beta.67 prints every line whatever `--truncate-output`
/// says (beta.56 printed a block of at most four).
fn single_line(title: &str, lines: &[&[u8]]) -> Vec<u8> {
    let mut s = format!("{title}: ").into_bytes();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            s.extend_from_slice(b", ");
        }
        let line: Vec<u8> = line
            .iter()
            .map(|&b| if b == b'\n' { b' ' } else { b })
            .collect();
        s.extend_from_slice(go_trim_space(&line));
    }
    s
}

/// Go's `strings.TrimSpace` on bytes: ASCII white space, and Unicode's
/// where the text is UTF-8.
fn go_trim_space(b: &[u8]) -> &[u8] {
    match std::str::from_utf8(b) {
        Ok(s) => s.trim().as_bytes(),
        Err(_) => b.trim_ascii(),
    }
}

/// kpt's results line after `[PASS]`/`[FAIL]`: `[Results]: a, b` (one
/// line, every result; beta.67's `printFnResult`).
pub(super) fn print_results(
    stderr: &mut (dyn Write + Send),
    results: &[FnResult],
) -> io::Result<()> {
    if results.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = results.iter().map(kpt_line).collect();
    let lines: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let mut s = single_line("[Results]", &lines);
    s.push(b'\n');
    stderr.write_all(&s)
}

/// kpt's stderr of a function: ` Stderr: a, b` with no line break after
/// it (beta.67's `printFnStderr`: what kpt prints next goes on the same
/// line), the lines as written, unquoted; a stderr that ends with a line
/// break ends with `, ` (its last, empty line).
pub(super) fn print_stderr(stderr: &mut (dyn Write + Send), text: &[u8]) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    let mut s = b" ".to_vec();
    s.extend_from_slice(&single_line("Stderr", &lines));
    stderr.write_all(&s)
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
