//! The first YAML document read with `serde_yaml_ng` (the full parse, and
//! the fast path's small document), and what its top level makes: the
//! output, or why there is none.

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::de::{flatten, Top};
use super::output::{OutputError, ResourceListOutput, NO_KIND, RESOURCE_LIST_KIND};

/// The YAML syntax error in the first document, if any.
pub(super) fn syntax_error(bytes: &[u8]) -> Option<serde_yaml_ng::Error> {
    let document = serde_yaml_ng::Deserializer::from_slice(bytes).next()?;
    IgnoredAny::deserialize(document).err()
}

pub(super) fn parse_first_yaml_document(bytes: &[u8]) -> Result<Top, serde_yaml_ng::Error> {
    match serde_yaml_ng::Deserializer::from_slice(bytes).next() {
        Some(document) => Top::deserialize(document),
        None => Ok(Top::Null),
    }
}

pub(super) fn finish(top: Top) -> Result<ResourceListOutput, OutputError> {
    match top {
        Top::Null => Err(OutputError::Empty),
        Top::NotMapping(found) => Err(OutputError::NotAMapping { found }),
        Top::Mapping { kind, results } => match kind {
            Some(kind) if kind == RESOURCE_LIST_KIND => {
                let mut out = Vec::with_capacity(results.len());
                flatten(results, &mut out);
                Ok(ResourceListOutput { results: out })
            }
            Some(kind) => Err(OutputError::NotResourceList { kind }),
            None => Err(OutputError::NotResourceList {
                kind: NO_KIND.to_owned(),
            }),
        },
    }
}
