//! `ctx.open_api`: the Kubernetes OpenAPI v2 document, as kyaml embeds
//! one for the catalog's function. Ours is Kubernetes v1.20.2's
//! `api/openapi-spec/swagger.json` from Debian's `kubernetes` source
//! package (what that version's API server serves at `/openapi/v2` for
//! its built-in types), gzipped (270 KB for 5.5 MB).

use std::io::Read;

use starlark::values::{Heap, Value};

const DOCUMENT: &[u8] = include_bytes!("../../data/kubernetes-v1.20.2-openapi-v2.json.gz");

/// The document as Starlark values (~0.1 s; made only for a program
/// that names `open_api`).
pub(super) fn value(heap: Heap<'_>) -> Result<Value<'_>, String> {
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(DOCUMENT)
        .read_to_end(&mut text)
        .map_err(|e| format!("reading the OpenAPI document: {e}"))?;
    let data: serde_yaml_ng::Value =
        serde_json::from_slice(&text).map_err(|e| format!("reading the OpenAPI document: {e}"))?;
    super::convert::data_value(heap, &data)
}
