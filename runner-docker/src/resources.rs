//! What the FunctionConfig's `templateOverrides.container` asks of the
//! container, in the engine's terms ([`Resources`]), from Kubernetes
//! quantities.

use runner_core::config::TemplateOverrides;

use crate::errors::StartError;

/// What the FunctionConfig's `templateOverrides.container` asks of the
/// container, in the engine's terms.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Resources {
    pub(super) memory: Option<i64>,
    pub(super) memory_reservation: Option<i64>,
    pub(super) nano_cpus: Option<i64>,
    pub(super) cpu_shares: Option<i64>,
    pub(super) env: Vec<String>,
}

impl Resources {
    pub(super) fn from_overrides(
        overrides: Option<&TemplateOverrides>,
    ) -> Result<Self, StartError> {
        let mut out = Resources::default();
        let Some(container) = overrides.and_then(|o| o.container.as_ref()) else {
            return Ok(out);
        };
        let bad = |what: String| StartError::Resources(what);
        if let Some(resources) = &container.resources {
            let get = |section: &str, key: &str| -> Result<Option<f64>, StartError> {
                let Some(value) = resources.get(section).and_then(|s| s.get(key)) else {
                    return Ok(None);
                };
                let text = match value {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    other => {
                        return Err(bad(format!("{section}.{key}: {other} is not a quantity")))
                    }
                };
                parse_quantity(&text).map(Some).ok_or_else(|| {
                    bad(format!(
                        "{section}.{key}: {text:?} is not a Kubernetes quantity"
                    ))
                })
            };
            out.memory = get("limits", "memory")?.map(|b| b.ceil() as i64);
            out.memory_reservation = get("requests", "memory")?.map(|b| b.ceil() as i64);
            out.nano_cpus = get("limits", "cpu")?.map(|c| (c * 1e9).round() as i64);
            out.cpu_shares = get("requests", "cpu")?.map(|c| ((c * 1024.0).round() as i64).max(2));
            if out.memory.is_some_and(|m| m < 6 << 20) {
                return Err(bad("limits.memory: the engine needs at least 6Mi".into()));
            }
        }
        for var in &container.env {
            let name = var.get("name").and_then(|v| v.as_str());
            match (name, var.get("value"), var.get("valueFrom")) {
                (Some(name), value, None) => {
                    let value = value.and_then(|v| v.as_str()).unwrap_or("");
                    out.env.push(format!("{name}={value}"));
                }
                (Some(name), _, Some(_)) => {
                    return Err(bad(format!(
                    "env {name}: valueFrom needs a cluster; the docker backend takes plain values"
                )))
                }
                (None, _, _) => return Err(bad("an env entry has no name".into())),
            }
        }
        Ok(out)
    }
}

/// A Kubernetes quantity (`512Mi`, `1G`, `500m`, `1.5`, `2e3`) as a number.
pub(super) fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse().ok()?),
        _ => return None,
    };
    let value = number * scale;
    (value.is_finite() && value >= 0.0).then_some(value)
}
