//! Image names as kpt v1.0.0-beta.67 writes and runs them: names without
//! a `/` are short names of the KRM functions catalog, expanded under the
//! image prefix (`--image-prefix`, else `$KPT_IMAGE_PREFIX`, else the
//! catalog's registry on ghcr.io; beta.56 used `gcr.io/kpt-fn/`), and
//! `render` runs an image without a tag or digest as `:latest`.

/// The catalog's registry, kpt's default prefix
/// (`pkg/lib/runneroptions/runneroptions.go@v1.0.0-beta.67:25-37`).
pub const GHCR_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";

/// The environment variable that changes the default prefix.
pub const PREFIX_ENV: &str = "KPT_IMAGE_PREFIX";

/// kpt's `DefaultImagePrefix`: `$KPT_IMAGE_PREFIX` when set and not
/// empty, else the catalog's registry.
pub fn default_image_prefix() -> String {
    match std::env::var(PREFIX_ENV) {
        Ok(p) if !p.is_empty() => p,
        _ => GHCR_IMAGE_PREFIX.to_owned(),
    }
}

/// kpt's `ResolveToImage`: a name without a `/` under `prefix` (its
/// trailing slashes trimmed, one put back); other names, and every name
/// when the prefix is empty, as written.
pub fn resolve_to_image(image: &str, prefix: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() || image.contains('/') {
        image.to_owned()
    } else {
        format!("{prefix}/{image}")
    }
}

/// The image `render` runs for a pipeline function without `tag:`: the
/// name expanded, and `:latest` added when it has no tag or digest
/// (beta.67's `NewRunner`, `pkg/fn/runtime/runner.go@v1.0.0-beta.67:59-94`).
pub fn render_image(image: &str, prefix: &str) -> String {
    crate::tag::with_latest(&resolve_to_image(image, prefix))
}

/// kpt's `ValidatePrefix`: no scheme, no query or fragment, and a host
/// that Go's `url.Parse` accepts. The message quotes the prefix as given.
pub fn validate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    let quoted = krm_yaml::package::go_quote(prefix);
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.contains("://") {
        return Err(format!(
            "invalid image prefix {quoted}: must not include a scheme (e.g. https://)"
        ));
    }
    if trimmed.contains(['?', '#']) {
        return Err(format!(
            "invalid image prefix {quoted}: must not contain '?' or '#'"
        ));
    }
    let host = trimmed.split('/').next().unwrap_or_default();
    if !go_url_host_ok(host) {
        return Err(format!(
            "invalid image prefix {quoted}: must be a valid registry path"
        ));
    }
    Ok(())
}

/// Whether Go's `url.Parse("https://" + host + "/...")` takes `host` as a
/// non-empty host: its characters (`net/url`'s `shouldEscape` in host
/// mode: letters, digits, `-._~!$&'()*+,;=:[]<>"`, `%` escapes and any
/// non-ASCII byte) and a port of digits only.
fn go_url_host_ok(host: &str) -> bool {
    if host.is_empty() {
        return false;
    }
    let allowed = |c: char| {
        c.is_ascii_alphanumeric() || !c.is_ascii() || "-._~!$&'()*+,;=:[]<>\"%".contains(c)
    };
    if !host.chars().all(allowed) {
        return false;
    }
    // The port: what follows the last `:` outside an IPv6 literal.
    let after_bracket = host.rfind(']').map_or(0, |i| i + 1);
    match host[after_bracket..].rfind(':') {
        Some(colon) => host[after_bracket + colon + 1..]
            .chars()
            .all(|c| c.is_ascii_digit()),
        None => true,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn short_names_under_the_prefix_as_beta_67() {
        assert_eq!(
            resolve_to_image("set-labels:v0.2", GHCR_IMAGE_PREFIX),
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2"
        );
        assert_eq!(
            resolve_to_image("set-labels", "example.com/fns//"),
            "example.com/fns/set-labels"
        );
        assert_eq!(resolve_to_image("set-labels", ""), "set-labels");
        assert_eq!(
            resolve_to_image("a.io/b/c:v1", GHCR_IMAGE_PREFIX),
            "a.io/b/c:v1"
        );
        // No domain check: a host and port without a path is a short name.
        assert_eq!(
            resolve_to_image("localhost:5000", "r.io"),
            "r.io/localhost:5000"
        );
    }

    #[test]
    fn latest_only_without_tag_or_digest() {
        assert_eq!(
            render_image("set-namespace", GHCR_IMAGE_PREFIX),
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest"
        );
        assert_eq!(
            render_image("localhost:5000/fn", GHCR_IMAGE_PREFIX),
            "localhost:5000/fn:latest"
        );
        assert_eq!(render_image("x/y@sha256:00", ""), "x/y@sha256:00");
    }

    /// `runneroptions_test.go@v1.0.0-beta.67:22-51`'s cases.
    #[test]
    fn prefixes_checked_as_beta_67() {
        for ok in [
            "",
            "my-registry.io/org/",
            "localhost:5000/path",
            "192.168.1.100:5000/images/",
            "ghcr.io/org",
        ] {
            assert_eq!(validate_prefix(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            validate_prefix("https://r.io/x").unwrap_err(),
            "invalid image prefix \"https://r.io/x\": must not include a scheme (e.g. https://)"
        );
        assert!(validate_prefix("://bad").unwrap_err().contains("scheme"));
        for bad in ["registry.io/path#fragment", "registry.io/path?query=1"] {
            assert!(
                validate_prefix(bad).unwrap_err().contains("'?' or '#'"),
                "{bad}"
            );
        }
        for bad in [
            "my registry.io/org/",
            "my\tregistry.io/org/",
            "/",
            "/just/a/path/",
        ] {
            assert!(
                validate_prefix(bad)
                    .unwrap_err()
                    .ends_with("must be a valid registry path"),
                "{bad}"
            );
        }
    }
}
