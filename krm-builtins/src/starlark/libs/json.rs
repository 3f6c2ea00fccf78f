//! `encoding/json.star`: Go Starlark's `lib/json` (`encode`, `decode`,
//! `indent`, `encode_indent`).

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::{Heap, Value};

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("json", members);
}

/// `s` re-indented as Go's `json.Indent(dst, s, prefix, indent)`.
fn indent_json(s: &str, prefix: &str, indent: &str) -> anyhow::Result<String> {
    let v: serde_json::Value = serde_json::from_str(s)?;
    let mut out = String::new();
    write_indented(&v, prefix, indent, 0, &mut out)?;
    Ok(out)
}

fn write_indented(
    v: &serde_json::Value,
    prefix: &str,
    indent: &str,
    level: usize,
    out: &mut String,
) -> anyhow::Result<()> {
    use serde_json::Value as J;
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        out.push_str(prefix);
        for _ in 0..level {
            out.push_str(indent);
        }
    };
    match v {
        J::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                write_indented(x, prefix, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push(']');
        }
        J::Object(o) if !o.is_empty() => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                out.push_str(&serde_json::to_string(k)?);
                out.push_str(": ");
                write_indented(x, prefix, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push('}');
        }
        x => out.push_str(&serde_json::to_string(x)?),
    }
    Ok(())
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn encode(#[starlark(require = pos)] x: Value<'_>) -> anyhow::Result<String> {
        x.to_json()
    }

    fn decode<'v>(
        #[starlark(require = pos)] x: &str,
        #[starlark(require = pos)] default: Option<Value<'v>>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        // Through YAML's data model, which keeps an object's key order
        // (Go's decode makes dicts in the document's order).
        match serde_json::from_str::<serde_yaml_ng::Value>(x) {
            Ok(v) => super::super::convert::data_value(heap, &v).map_err(anyhow::Error::msg),
            Err(_) if default.is_some() => Ok(default.unwrap_or_else(Value::new_none)),
            Err(e) => Err(anyhow::anyhow!("json.decode: {e}")),
        }
    }

    fn indent(
        #[starlark(require = pos)] s: &str,
        #[starlark(require = named, default = "")] prefix: &str,
        #[starlark(require = named, default = "\t")] indent: &str,
    ) -> anyhow::Result<String> {
        indent_json(s, prefix, indent).map_err(|e| anyhow::anyhow!("json.indent: {e}"))
    }

    fn encode_indent(
        #[starlark(require = pos)] x: Value<'_>,
        #[starlark(require = named, default = "")] prefix: &str,
        #[starlark(require = named, default = "\t")] indent: &str,
    ) -> anyhow::Result<String> {
        indent_json(&x.to_json()?, prefix, indent)
            .map_err(|e| anyhow::anyhow!("json.encode_indent: {e}"))
    }
}
