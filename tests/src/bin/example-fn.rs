//! An example KRM function, shipped so the README's demo and the tests have
//! a real function to run: it reads a ResourceList on stdin and sets the
//! annotations given in its functionConfig (a ConfigMap's `data`) on every
//! item. With `data.fail: MESSAGE` it reports an error result for each item
//! and exits 1, as failing functions do.

use std::io::{Read, Write};

use serde_yaml_ng::{Mapping, Value};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(code) => std::process::ExitCode::from(code),
        Err(err) => {
            eprintln!("example-fn: {err}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> Result<u8, String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("reading stdin: {e}"))?;
    let mut rl: Value =
        serde_yaml_ng::from_str(&input).map_err(|e| format!("parsing ResourceList: {e}"))?;
    let data = rl
        .get("functionConfig")
        .and_then(|fc| fc.get("data"))
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    let fail = data.get("fail").and_then(Value::as_str).map(str::to_owned);
    let mut results = Vec::new();
    if let Some(items) = rl.get_mut("items").and_then(Value::as_sequence_mut) {
        for item in items.iter_mut() {
            if let Some(message) = &fail {
                results.push(error_result(item, message));
                continue;
            }
            let Some(meta) = item.get_mut("metadata").and_then(Value::as_mapping_mut) else {
                continue;
            };
            let annotations = meta
                .entry("annotations".into())
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if !annotations.is_mapping() {
                *annotations = Value::Mapping(Mapping::new());
            }
            if let Some(annotations) = annotations.as_mapping_mut() {
                for (k, v) in &data {
                    annotations.insert(k.clone(), v.clone());
                }
            }
        }
    }
    eprintln!("example-fn: processed ResourceList");
    if !results.is_empty() {
        if let Some(map) = rl.as_mapping_mut() {
            map.insert("results".into(), Value::Sequence(results));
        }
    }
    let out = serde_yaml_ng::to_string(&rl).map_err(|e| format!("writing ResourceList: {e}"))?;
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(|e| format!("writing stdout: {e}"))?;
    Ok(if fail.is_some() { 1 } else { 0 })
}

fn error_result(item: &Value, message: &str) -> Value {
    let field = |path: &[&str]| {
        let mut v = item;
        for p in path {
            v = v.get(*p)?;
        }
        v.as_str().map(|s| Value::String(s.to_owned()))
    };
    let mut rref = Mapping::new();
    for (key, path) in [
        ("apiVersion", &["apiVersion"][..]),
        ("kind", &["kind"][..]),
        ("name", &["metadata", "name"][..]),
        ("namespace", &["metadata", "namespace"][..]),
    ] {
        if let Some(v) = field(path) {
            rref.insert(key.into(), v);
        }
    }
    let mut result = Mapping::new();
    result.insert("message".into(), message.into());
    result.insert("severity".into(), "error".into());
    result.insert("resourceRef".into(), Value::Mapping(rref));
    Value::Mapping(result)
}
