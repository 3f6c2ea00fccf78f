//! The serde deserialisers behind every parse (JSON, the scan's small
//! document, the full YAML parse): the top level of the first document, and
//! `results` in the spec's shape or the variants real functions emit,
//! normalised into [`FnResult`]s.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::model::{Field, File, FnResult, ResourceRef, Severity};
use super::output::RESOURCE_LIST_KIND;

/// The top level of the first document.
pub(super) enum Top {
    /// Empty document or `null`.
    Null,
    NotMapping(&'static str),
    Mapping {
        kind: Option<String>,
        results: Vec<RawResult>,
    },
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ResourceList")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut seen: Vec<String> = Vec::new();
        let mut kind: Option<String> = None;
        let mut results: Option<Vec<RawResult>> = None;
        while let Some(key) = map.next_key_seed(KeySeed { seen: &seen })? {
            let Key::Str(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            match name.as_str() {
                "kind" => kind = map.next_value::<KindText>()?.0,
                // Not read once the kind shows this is not a ResourceList.
                "results" if kind.as_deref().is_none_or(|k| k == RESOURCE_LIST_KIND) => {
                    results = map.next_value::<Option<ResultsField>>()?.map(|r| r.0);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            seen.push(name);
        }
        Ok(Top::Mapping {
            kind,
            results: results.unwrap_or_default(),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Top::NotMapping("a sequence"))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Top, A::Error> {
        IgnoredAny.visit_enum(data)?;
        Ok(Top::NotMapping("a tagged value"))
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        Top::deserialize(deserializer)
    }

    fn visit_none<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
        Ok(Top::NotMapping("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
        Ok(Top::NotMapping("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
        Ok(Top::NotMapping("a string"))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Top, E> {
        Ok(Top::NotMapping("a string"))
    }
}

/// A top-level key: a string, or anything else (ignored).
enum Key {
    Str(String),
    Other,
}

/// Reads a top-level key, failing on a string key already `seen` (as kyaml
/// does). Failing here rather than in the map visitor lets serde_yaml_ng give the
/// error the key's line and column.
struct KeySeed<'a> {
    seen: &'a [String],
}

impl<'de> de::DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        if self.seen.iter().any(|s| s == v) {
            return Err(E::custom(format_args!("duplicate top-level key `{v}`")));
        }
        Ok(Key::Str(v.to_owned()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| Key::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Key::Other)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Key, A::Error> {
        IgnoredAny.visit_enum(data).map(|_| Key::Other)
    }
}

/// A scalar read as text (`null` → `None`); sequences and mappings are errors.
#[derive(Default)]
struct Text(Option<String>);

struct TextVisitor {
    /// For `kind`: describe a sequence or mapping instead of failing.
    describe_collections: bool,
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        if !self.describe_collections {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        IgnoredAny.visit_seq(seq)?;
        Ok(Some("(a sequence)".to_owned()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        if !self.describe_collections {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        IgnoredAny.visit_map(map)?;
        Ok(Some("(a mapping)".to_owned()))
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TextVisitor {
                describe_collections: false,
            })
            .map(Text)
    }
}

/// The top-level `kind`: any scalar as text; a collection is described.
struct KindText(Option<String>);

impl<'de> Deserialize<'de> for KindText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TextVisitor {
                describe_collections: true,
            })
            .map(KindText)
    }
}

impl Text {
    fn into_string(self) -> String {
        self.0.unwrap_or_default()
    }
}

/// `results`: a list (the spec's shape), or one mapping, as older kyaml
/// wrote it (`results: {name, items: [...]}`) and Porch still accepts: read
/// as a list of that one entry, whose legacy wrapper [`flatten`] opens.
struct ResultsField(Vec<RawResult>);

impl<'de> Deserialize<'de> for ResultsField {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ResultsVisitor;
        impl<'de> Visitor<'de> for ResultsVisitor {
            type Value = ResultsField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of results, or one {name, items} mapping")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ResultsField, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(ResultsField)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ResultsField, A::Error> {
                let one = RawResult::deserialize(de::value::MapAccessDeserializer::new(map))?;
                // A bare result that is not in a list is not a shape any
                // tool wrote: refused as before.
                if one.items.is_none() {
                    return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
                }
                Ok(ResultsField(vec![one]))
            }
        }
        deserializer.deserialize_any(ResultsVisitor)
    }
}

/// One entry of `results`: a result, or a legacy `{name, items}` wrapper.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct RawResult {
    message: Text,
    severity: Text,
    #[serde(rename = "resourceRef")]
    resource_ref: Option<RawResourceRef>,
    field: Option<RawField>,
    file: Option<RawFile>,
    tags: Option<Tags>,
    /// Legacy wrapper: the results it holds.
    items: Option<Vec<RawResult>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawResourceRef {
    #[serde(rename = "apiVersion")]
    api_version: Text,
    kind: Text,
    name: Text,
    namespace: Text,
    metadata: Option<RawMetadata>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawMetadata {
    name: Text,
    namespace: Text,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawFieldMap {
    path: Text,
    #[serde(rename = "currentValue")]
    current_value: Option<serde_yaml_ng::Value>,
    #[serde(rename = "proposedValue")]
    proposed_value: Option<serde_yaml_ng::Value>,
    #[serde(rename = "suggestedValue")]
    suggested_value: Option<serde_yaml_ng::Value>,
}

/// `field`: a mapping, or just the path as a string.
struct RawField(RawFieldMap);

impl<'de> Deserialize<'de> for RawField {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl<'de> Visitor<'de> for FieldVisitor {
            type Value = RawField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field mapping or a field path")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawField, A::Error> {
                RawFieldMap::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawField)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap {
                    path: Text(Some(v.to_owned())),
                    ..RawFieldMap::default()
                }))
            }
            fn visit_unit<E: de::Error>(self) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap::default()))
            }
            fn visit_none<E: de::Error>(self) -> Result<RawField, E> {
                Ok(RawField(RawFieldMap::default()))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<RawField, D::Error> {
                d.deserialize_any(self)
            }
        }
        deserializer.deserialize_any(FieldVisitor)
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawFile {
    path: Text,
    index: Text,
}

/// `tags`: scalar keys and values, as text.
struct Tags(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TagsVisitor;
        impl<'de> Visitor<'de> for TagsVisitor {
            type Value = Tags;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of tags")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tags, A::Error> {
                let mut tags = BTreeMap::new();
                while let Some((k, v)) = map.next_entry::<Text, Text>()? {
                    tags.insert(k.into_string(), v.into_string());
                }
                Ok(Tags(tags))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(BTreeMap::new()))
            }
            fn visit_none<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(BTreeMap::new()))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Tags, D::Error> {
                d.deserialize_any(self)
            }
        }
        deserializer.deserialize_any(TagsVisitor)
    }
}

/// Normalises raw results into `out`, flattening legacy wrappers in place.
pub(super) fn flatten(raw: Vec<RawResult>, out: &mut Vec<FnResult>) {
    for r in raw {
        match r.items {
            Some(items) => {
                // A legacy wrapper; keep a message it may carry itself.
                let message = r.message.into_string();
                if !message.is_empty() {
                    out.push(FnResult {
                        message,
                        severity: Severity::from_written(r.severity.0.as_deref().unwrap_or("")),
                        ..FnResult::default()
                    });
                }
                flatten(items, out);
            }
            None => out.push(normalise(RawResult { items: None, ..r })),
        }
    }
}

fn normalise(r: RawResult) -> FnResult {
    let resource_ref = r.resource_ref.map(|rr| {
        let metadata = rr.metadata.unwrap_or_default();
        ResourceRef {
            api_version: rr.api_version.into_string(),
            kind: rr.kind.into_string(),
            namespace: rr.namespace.0.or(metadata.namespace.0).unwrap_or_default(),
            name: rr.name.0.or(metadata.name.0).unwrap_or_default(),
        }
    });
    let field = r.field.map(|RawField(f)| Field {
        path: f.path.into_string(),
        current_value: f.current_value,
        proposed_value: f.proposed_value.or(f.suggested_value),
    });
    let file = r.file.map(|f| File {
        path: f.path.into_string(),
        index: f.index.0.and_then(|i| i.trim().parse().ok()).unwrap_or(0),
    });
    FnResult {
        message: r.message.into_string(),
        severity: Severity::from_written(r.severity.0.as_deref().unwrap_or("")),
        resource_ref: resource_ref.filter(|rr| *rr != ResourceRef::default()),
        field: field.filter(|f| *f != Field::default()),
        file: file.filter(|f| *f != File::default()),
        tags: r.tags.map(|t| t.0).unwrap_or_default(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
