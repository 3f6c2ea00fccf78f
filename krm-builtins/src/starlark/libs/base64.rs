//! `encoding/base64.star` (starlib's `base64`): `encode(src,
//! encoding="standard")` and `decode(src, encoding="standard")` with Go's
//! four encodings (`standard`, `standard_raw`, `url`, `url_raw`).
//!
//! Decoding is Go's: the padded encodings need their padding, the raw
//! ones refuse it, line breaks in the input are skipped, and unused
//! trailing bits are allowed. It differs in one way: a Starlark string
//! here holds UTF-8 text, so decoded bytes that are not UTF-8 are an
//! error (Go's string would hold the bytes).

use ::base64::alphabet;
use ::base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use ::base64::engine::DecodePaddingMode;
use ::base64::{DecodeError, Engine};
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("base64", members);
}

/// Go's `base64.StdEncoding` and the others, by starlib's names.
fn engine(function: &str, encoding: &str) -> anyhow::Result<GeneralPurpose> {
    let (alphabet, padded) = match encoding {
        "standard" => (&alphabet::STANDARD, true),
        "standard_raw" => (&alphabet::STANDARD, false),
        "url" => (&alphabet::URL_SAFE, true),
        "url_raw" => (&alphabet::URL_SAFE, false),
        other => {
            return Err(anyhow::anyhow!(
                "base64.{function}: unsupported encoding format: {other:?} (standard, standard_raw, url or url_raw)"
            ))
        }
    };
    let config = GeneralPurposeConfig::new()
        .with_encode_padding(padded)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(if padded {
            DecodePaddingMode::RequireCanonical
        } else {
            DecodePaddingMode::RequireNone
        });
    Ok(GeneralPurpose::new(alphabet, config))
}

/// Go's message for bad input ("illegal base64 data at input byte N").
fn go_error(e: &DecodeError, len: usize) -> String {
    let at = match e {
        DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => *at,
        DecodeError::InvalidLength(_) | DecodeError::InvalidPadding => len,
    };
    format!("illegal base64 data at input byte {at}")
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn encode(
        #[starlark(require = pos)] src: &str,
        #[starlark(default = "standard")] encoding: &str,
    ) -> anyhow::Result<String> {
        Ok(engine("encode", encoding)?.encode(src.as_bytes()))
    }

    fn decode(
        #[starlark(require = pos)] src: &str,
        #[starlark(default = "standard")] encoding: &str,
    ) -> anyhow::Result<String> {
        let engine = engine("decode", encoding)?;
        // Go's decoder skips CR and LF wherever they are.
        let text: String = src.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        let bytes = engine
            .decode(text.as_bytes())
            .map_err(|e| anyhow::anyhow!("base64.decode: {}", go_error(&e, text.len())))?;
        String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "base64.decode: the decoded bytes are not UTF-8 text, which a string here must be"
            )
        })
    }
}
