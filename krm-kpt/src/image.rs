//! Image names as kpt writes and runs them: bare names (no `/`) name the
//! catalog's functions.

/// Where kpt expands bare image names in its lines.
pub const KPT_IMAGE_PREFIX: &str = "gcr.io/kpt-fn/";

/// Where a bare name's image is run from: the catalog's registry.
pub const CATALOG_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";

/// The name kpt gives an image in its lines: a bare name is expanded to
/// kpt's registry (`set-labels:v0.2` → `gcr.io/kpt-fn/set-labels:v0.2`).
pub fn kpt_image_name(image: &str) -> String {
    with_prefix(image, KPT_IMAGE_PREFIX)
}

/// The image a function names, as the evaluator is asked for it: a bare
/// name under `prefix` (with or without its slashes), other names as
/// written.
pub fn with_prefix(image: &str, prefix: &str) -> String {
    match prefix.trim_matches('/') {
        _ if image.contains('/') => image.to_owned(),
        "" => image.to_owned(),
        registry => format!("{registry}/{image}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_get_kpts_registry_in_its_lines_and_the_catalogs_to_run() {
        assert_eq!(
            kpt_image_name("set-labels:v0.2"),
            "gcr.io/kpt-fn/set-labels:v0.2"
        );
        assert_eq!(kpt_image_name("example.com/x:v1"), "example.com/x:v1");
        assert_eq!(
            with_prefix("set-labels:v0.2", CATALOG_IMAGE_PREFIX),
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2"
        );
        assert_eq!(
            with_prefix("set-labels", "example.com/fns"),
            "example.com/fns/set-labels"
        );
        assert_eq!(with_prefix("set-labels", ""), "set-labels");
        assert_eq!(
            with_prefix("a.io/b/c:v1", CATALOG_IMAGE_PREFIX),
            "a.io/b/c:v1"
        );
    }
}
