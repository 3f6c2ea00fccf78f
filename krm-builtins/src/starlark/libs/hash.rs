//! `hash.star` (starlib's `hash`): `md5`, `sha1` and `sha256` of a
//! string's bytes (UTF-8), as lowercase hex.

use sha1::Digest;
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("hash", members);
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        for nibble in [b >> 4, b & 0x0f] {
            out.push(char::from(
                DIGITS.get(usize::from(nibble)).copied().unwrap_or(b'0'),
            ));
        }
    }
    out
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn md5(#[starlark(require = pos)] s: &str) -> anyhow::Result<String> {
        Ok(hex(&::md5::Md5::digest(s.as_bytes())))
    }

    fn sha1(#[starlark(require = pos)] s: &str) -> anyhow::Result<String> {
        Ok(hex(&::sha1::Sha1::digest(s.as_bytes())))
    }

    fn sha256(#[starlark(require = pos)] s: &str) -> anyhow::Result<String> {
        Ok(hex(&::sha2::Sha256::digest(s.as_bytes())))
    }
}
