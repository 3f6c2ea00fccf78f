//! Image references, `[REGISTRY/PATH/]NAME[:TAG][@DIGEST]`, split one way for the whole
//! runner: FunctionConfig matching ([`crate::config`]), the process backend's function map
//! and pod names ([`crate::backend`]) all read the same name, tag and digest out of a
//! requested image.
//!
//! A name without any `/` is a short name of the default image prefix (by default
//! [`crate::config::DEFAULT_IMAGE_PREFIX`]), so `set-namespace:v0.4.1` and
//! `ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1` are the same image. A name
//! that contains a `/` is taken literally (there is no Docker Hub `docker.io/library/`
//! normalisation).

/// An image reference `[REGISTRY/PATH/]NAME[:TAG][@DIGEST]`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Everything before the tag and digest, as written (registry, path and name).
    pub name: &'a str,
    pub tag: Option<&'a str>,
    /// The digest without the `@`, e.g. `sha256:abc…`.
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    /// Splits any string, as written; pieces may be empty (`fn:` has the tag `""`). The
    /// digest is everything after the first `@`; the tag is the part after the last `:`
    /// that follows the last `/`, so a registry port is not a tag (`localhost:5000/fn` has
    /// none). The pod name and the function map use this: they must answer for whatever
    /// image they are handed.
    pub fn split(image: &'a str) -> Self {
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        let slash = rest.rfind('/');
        let (name, tag) = match rest.rfind(':') {
            Some(colon) if slash.is_none_or(|s| colon > s) => {
                (&rest[..colon], Some(&rest[colon + 1..]))
            }
            _ => (rest, None),
        };
        ImageRef { name, tag, digest }
    }

    /// A well-formed reference: [`ImageRef::split`] of the trimmed text, or `None` for an
    /// empty name, an empty tag or an empty digest. Requested images are matched with
    /// this, so that a malformed request matches nothing.
    pub fn parse(image: &'a str) -> Option<Self> {
        let reference = Self::split(image.trim());
        if reference.name.is_empty() || reference.tag == Some("") || reference.digest == Some("") {
            return None;
        }
        Some(reference)
    }

    /// The last path segment of the name: `set-namespace` for
    /// `ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1`.
    pub fn last_segment(&self) -> &'a str {
        self.name.rsplit('/').next().unwrap_or(self.name)
    }

    /// The canonical name (no tag or digest); see [`normalize_image_name`].
    pub fn normalized_name(&self, default_prefix: &str) -> String {
        normalize_image_name(self.name, default_prefix)
    }
}

/// The canonical image name (no tag): short names (no `/`) get the default prefix, other
/// names are returned unchanged.
pub fn normalize_image_name(name: &str, default_prefix: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        join_image(trim_prefix(default_prefix), name)
    }
}

/// `prefix` without surrounding slashes: configurations may write a registry path with or
/// without them.
pub(crate) fn trim_prefix(prefix: &str) -> &str {
    prefix.trim_matches('/')
}

/// `prefix/name`, or `name` for the empty prefix.
pub(crate) fn join_image(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Whether `registry` (`host[:port]`) is on a loopback address:
/// `localhost`, 127.0.0.0/8 or `[::1]`. Such a registry is read over plain
/// HTTP where HTTPS fails, without `--insecure-registries`, as Docker and
/// Porch's registry client (go-containerregistry) read it: TLS to oneself
/// protects nothing, and a registry a test or a developer starts there has
/// none.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::PREFIX;
    use crate::config::DEFAULT_IMAGE_PREFIX;

    #[test]
    fn image_references_split() {
        let r = |name, tag, digest| Some(ImageRef { name, tag, digest });
        assert_eq!(
            ImageRef::parse("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1"),
            r(
                "ghcr.io/kptdev/krm-functions-catalog/set-namespace",
                Some("v0.4.1"),
                None
            )
        );
        assert_eq!(
            ImageRef::parse("set-namespace"),
            r("set-namespace", None, None)
        );
        assert_eq!(
            ImageRef::parse("localhost:5000/fn"),
            r("localhost:5000/fn", None, None)
        );
        assert_eq!(
            ImageRef::parse("localhost:5000/fn:v1"),
            r("localhost:5000/fn", Some("v1"), None)
        );
        assert_eq!(
            ImageRef::parse("fn@sha256:abc"),
            r("fn", None, Some("sha256:abc"))
        );
        assert_eq!(
            ImageRef::parse(" fn:v1@sha256:abc "),
            r("fn", Some("v1"), Some("sha256:abc"))
        );
        assert_eq!(ImageRef::parse(""), None);
        assert_eq!(ImageRef::parse("fn:"), None);
        assert_eq!(ImageRef::parse("fn@"), None);
        assert_eq!(ImageRef::parse(":v1"), None);
    }

    #[test]
    fn ports_digests_and_tags() {
        let split = |image| {
            let r = ImageRef::split(image);
            (r.name, r.last_segment(), r.tag, r.digest)
        };
        // A registry port is not a tag, with or without a tag after the path.
        assert_eq!(
            split("localhost:5000/fns/fn"),
            ("localhost:5000/fns/fn", "fn", None, None)
        );
        assert_eq!(
            split("localhost:5000/fns/fn:v1.2"),
            ("localhost:5000/fns/fn", "fn", Some("v1.2"), None)
        );
        // A digest alone: its own `:` is not a tag either.
        assert_eq!(
            split("localhost:5000/fn@sha256:abc"),
            ("localhost:5000/fn", "fn", None, Some("sha256:abc"))
        );
        // A tag and a digest.
        assert_eq!(
            split("ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2@sha256:5e0b"),
            (
                "ghcr.io/kptdev/krm-functions-catalog/apply-setters",
                "apply-setters",
                Some("v0.2"),
                Some("sha256:5e0b")
            )
        );
        // Without a `/`, a `:` is a tag.
        assert_eq!(split("fn:v1"), ("fn", "fn", Some("v1"), None));
        // `split` never fails; empty pieces stay visible and `parse` refuses them.
        assert_eq!(split("fn:"), ("fn", "fn", Some(""), None));
        assert_eq!(split("fn@"), ("fn", "fn", None, Some("")));
        assert_eq!(split(""), ("", "", None, None));
        assert_eq!(split(" fn "), (" fn ", " fn ", None, None));
        // Normalisation works on the name only.
        assert_eq!(
            ImageRef::split("set-namespace:v1@sha256:abc").normalized_name(DEFAULT_IMAGE_PREFIX),
            format!("{PREFIX}/set-namespace")
        );
        assert_eq!(
            ImageRef::split("localhost:5000/fn:v1").normalized_name(DEFAULT_IMAGE_PREFIX),
            "localhost:5000/fn"
        );
    }

    #[test]
    fn image_names_normalise() {
        assert_eq!(
            normalize_image_name("set-namespace", DEFAULT_IMAGE_PREFIX),
            format!("{PREFIX}/set-namespace")
        );
        assert_eq!(
            normalize_image_name("set-namespace", "example.com/fns"),
            "example.com/fns/set-namespace"
        );
        assert_eq!(normalize_image_name("set-namespace", ""), "set-namespace");
        assert_eq!(
            normalize_image_name("example.com/x/fn", DEFAULT_IMAGE_PREFIX),
            "example.com/x/fn"
        );
    }
}
