//! Pod names that every runner computes alike: a hash of what the pod is
//! made from, a slot, and a valid Service name.

use super::inner::Inner;
use crate::template::Template;
use runner_core::backend::PodSpec;

/// Slots tried per start before giving up: more than any function's pod
/// limit plus the pods of other runners it might collide with.
pub(super) const MAX_SLOTS: u32 = 64;

/// 8 hex digits of FNV-1a over `parts`: stable across runs and builds, so
/// that every runner computes the same pod names.
pub(super) fn name_key(parts: &[&str]) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u32::from(byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    format!("{hash:08x}")
}

/// A pod name that is also a valid Service name (DNS-1035: it starts with a
/// letter): `fn-` in front when it does not, keeping its unique end.
pub(super) fn service_name(name: String) -> String {
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return name;
    }
    let tail = &name[name.len().saturating_sub(60)..];
    format!("fn-{tail}")
}

impl Inner {
    /// A hash of everything `spec`'s pods are made of from `template`
    /// (image, template and its version, wrapper image, message size,
    /// overrides, pull Secret) and `extra`: the same in every runner.
    pub(super) fn spec_key(&self, spec: &PodSpec, template: &Template, extra: &[&str]) -> String {
        let settings = &self.settings;
        let overrides = spec
            .overrides
            .as_ref()
            .map(|o| serde_json::to_string(&**o).unwrap_or_default())
            .unwrap_or_default();
        let pull_secret = self.pull_secret_for(&spec.image).unwrap_or_default();
        let max_message_bytes = settings.max_message_bytes.to_string();
        let mut parts = vec![
            spec.image.as_str(),
            &template.source,
            &template.version,
            &settings.wrapper_image,
            &max_message_bytes,
            &overrides,
            &pull_secret,
        ];
        parts.extend_from_slice(extra);
        name_key(&parts)
    }
}
