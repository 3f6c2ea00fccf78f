//! Reading a function's `functionConfig`: its kind, a ConfigMap's `data`
//! (also what `eval -- key=value` sends: the `function-input` ConfigMap),
//! and a function's own kind decoded into a typed struct, as Go's YAML
//! decoder fills one (unknown fields ignored).

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};
use serde::de::DeserializeOwned;

/// `apiVersion` and `kind` of a config (empty strings when absent).
pub fn type_of(config: &Node) -> (&str, &str) {
    let config = kyaml::content(config);
    (
        kyaml::value_of(kyaml::field(config, "apiVersion")),
        kyaml::value_of(kyaml::field(config, "kind")),
    )
}

/// Whether the config is a `v1 ConfigMap`.
pub fn is_config_map(config: &Node) -> bool {
    matches!(type_of(config), ("v1", "ConfigMap"))
}

/// A ConfigMap's `data`, in order, each value as Go's decoder reads a
/// scalar into a string. `Err` names the key whose value is not a scalar
/// (Go: "cannot unmarshal !!map into string"). No `data`: empty.
pub fn config_map_data(config: &Node) -> Result<Vec<(String, String)>, String> {
    let config = kyaml::content(config);
    let Some(data) = kyaml::field(config, "data") else {
        return Ok(Vec::new());
    };
    match data.kind {
        Kind::Mapping => {}
        Kind::Scalar if data.tag == kyaml::NULL_TAG => return Ok(Vec::new()),
        k => {
            return Err(format!(
                "data: expected a mapping, found a {}",
                kyaml::kind_name(k)
            ))
        }
    }
    let mut out = Vec::new();
    for kv in data.content.chunks_exact(2) {
        let [k, v] = kv else { continue };
        let value = match v.kind {
            Kind::Scalar if v.tag == kyaml::NULL_TAG => String::new(),
            Kind::Scalar => v.value.to_string(),
            other => {
                return Err(format!(
                    "data.{}: expected a string, found a {}",
                    k.value,
                    kyaml::kind_name(other)
                ))
            }
        };
        out.push((k.value.to_string(), value));
    }
    Ok(out)
}

/// The config decoded into `T` (serde's names: use
/// `#[serde(rename_all = "camelCase")]` and `#[serde(default)]` as the Go
/// struct's yaml tags say). `Err` is the decoder's message.
pub fn decode<T: DeserializeOwned>(config: &Node) -> Result<T, String> {
    let value = krm_yaml::value::to_value(config);
    serde_yaml_ng::from_value(value).map_err(|e| e.to_string())
}
