//! kustomize's `api/image`: an image reference's name, tag and digest,
//! from which both the catalog's own renaming and kustomize's filter
//! (`additionalImageFields`) start.

/// kustomize's `image.Split`: name, tag and digest.
pub(super) fn split(image: &str) -> (&str, &str, &str) {
    let slash = match image.find('/') {
        Some(i) if i > 0 => i,
        _ => 0,
    };
    let search = image.get(slash..).unwrap_or("");
    let at = search.find('@');
    let colon = search.find(':');
    match (at, colon) {
        (None, None) => (image, "", ""),
        (Some(a), c) if c.is_none_or(|c| a < c) => {
            let a = a + slash;
            (
                image.get(..a).unwrap_or(""),
                "",
                image.get(a + 1..).unwrap_or(""),
            )
        }
        (Some(a), Some(c)) => {
            let (a, c) = (a + slash, c + slash);
            (
                image.get(..c).unwrap_or(""),
                image.get(c + 1..a).unwrap_or(""),
                image.get(a + 1..).unwrap_or(""),
            )
        }
        (_, Some(c)) => {
            let c = c + slash;
            (
                image.get(..c).unwrap_or(""),
                image.get(c + 1..).unwrap_or(""),
                "",
            )
        }
        (Some(_), None) => (image, "", ""),
    }
}
