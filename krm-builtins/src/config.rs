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
    let value = krm_yaml::value::to_value(config).map_err(|e| e.to_string())?;
    serde_yaml_ng::from_value(value).map_err(|e| e.to_string())
}

/// kustomize's `types.FieldSpec` (ensure-name-substring leaves `create`
/// false).
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSpec {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) path: String,
    pub(crate) create: bool,
}

/// A YAML int's value as Go reads one: `_`s dropped, a sign, then `0x`,
/// `0o`, `0b`, a leading `0` (octal) or decimal digits. With
/// `integral_floats` (JSON, which writes `2.0` as `2`), other text that
/// parses as a float with an integral value also counts.
pub(crate) fn yaml_int(text: &str, integral_floats: bool) -> Option<i64> {
    let raw = text.replace('_', "");
    let (neg, digits) = match raw.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, raw.strip_prefix('+').unwrap_or(&raw)),
    };
    // One sign only, before any base prefix (Go refuses `0x-10`, `--5`).
    if digits.starts_with(['+', '-']) {
        return None;
    }
    let unsigned = |d: &str, radix: u32| {
        if d.starts_with(['+', '-']) {
            None
        } else {
            u64::from_str_radix(d, radix).ok()
        }
    };
    let magnitude = if let Some(h) = digits.strip_prefix("0x") {
        unsigned(h, 16)
    } else if let Some(o) = digits.strip_prefix("0o") {
        unsigned(o, 8)
    } else if let Some(b) = digits.strip_prefix("0b") {
        unsigned(b, 2)
    } else if digits.len() > 1
        && digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        // yaml.v2 and v3 read a leading 0 as octal (`ParseInt(s, 0, 64)`).
        unsigned(digits, 8)
    } else if let Some(u) = unsigned(digits, 10) {
        Some(u)
    } else if integral_floats {
        digits
            .parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as u64)
    } else {
        None
    };
    // In i128, so that i64::MIN reads and nothing overflows.
    let signed = |m: u64| {
        let m = i128::from(m);
        i64::try_from(if neg { -m } else { m }).ok()
    };
    magnitude.and_then(signed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{decode, yaml_int};

    #[test]
    fn a_config_decodes_through_its_aliases_and_refuses_cycles() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Config {
            a: Vec<String>,
            b: Vec<String>,
        }
        let doc = |t: &str| krm_yaml::parse::parse(t).unwrap().remove(0);
        // PyYAML writes a list two fields share once, anchored.
        let config: Config = decode(&doc("a: &id001 [x, y]\nb: *id001\n")).unwrap();
        assert_eq!(config.b, ["x", "y"]);
        assert_eq!(config.a, config.b);
        let err = decode::<Config>(&doc("a: &r [*r]\nb: []\n")).unwrap_err();
        assert_eq!(err, "yaml: anchor 'r' value contains itself");
    }

    #[test]
    fn go_ints_read_as_yaml_reads_them_and_overflow_is_no_number() {
        assert_eq!(yaml_int("010", false), Some(8));
        assert_eq!(yaml_int("-0x10", false), Some(-16));
        assert_eq!(yaml_int("1_000", false), Some(1000));
        assert_eq!(yaml_int("2.0", true), Some(2));
        assert_eq!(yaml_int("2.0", false), None);
        assert_eq!(yaml_int("-0x-8000000000000000", false), None);
        assert_eq!(yaml_int("0x-10", false), None);
        assert_eq!(yaml_int("--5", false), None);
        assert_eq!(yaml_int("-9223372036854775808", false), Some(i64::MIN));
        assert_eq!(yaml_int("9223372036854775808", false), None);
        assert_eq!(yaml_int("x", true), None);
    }
}
