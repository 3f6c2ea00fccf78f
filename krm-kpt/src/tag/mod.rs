//! A Kptfile function's `tag:`, resolved to the image to run as kpt
//! v1.0.0-beta.67's `TagResolver.ResolveFunctionImage` resolves it
//! (`pkg/fn/runtime/tag_resolution.go`), byte for byte on the image and the
//! messages:
//!
//! - a tag that is a version (`v0.4.3`, `0.4`, `1`) is used as written,
//!   nothing listed;
//! - a tag that is a constraint (`~0.4`, `0.4.1 - 0.4.3`, `*`) lists the
//!   repository's tags with every [`TagLister`] (the local engine's, the
//!   registry's), and takes the highest that meets it;
//! - any other tag (`latest`) is used as written, with kpt's warning.
//!
//! The image named is then regclient's `CommonName` of the reference, its
//! tag and digest replaced: `docker.io/` and `library/` added where Docker
//! Hub is meant. The listers are the caller's: this crate does no IO.
//!
//! Also here, kpt's rules for an image without `tag:` ([`with_latest`]) and
//! for a tag's syntax ([`valid_tag`]); [`semver`] is the version and
//! constraint language.

pub mod semver;

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use krm_yaml::package::go_quote;
use regex::Regex;

use self::semver::{Constraints, Version};

/// Lists the tags of a repository (`registry/repository`, no tag), as kpt's
/// `TagLister`: the local container engine's images, a registry's tags.
pub trait TagLister: Send + Sync {
    /// The name kpt's debug lines give the lister (`regclient`,
    /// `local-docker`).
    fn name(&self) -> String;

    /// The tags of `image`, in the lister's order; an error is logged and
    /// the lister skipped.
    fn list<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Result<Vec<String>, String>>;
}

/// The image a function runs, its tag resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub image: String,
    /// kpt's warning for a tag that is neither a version nor a
    /// constraint, used as written; kpt prints it through klog, as
    /// `W<date> <time> <pid> tag_resolution.go:91] <warning>` on stderr.
    pub warning: Option<String>,
}

/// kpt's text for a tag that is not a valid image tag (E2's reason).
const IMAGE_TAG_ERROR: &str = "must start with an alphanumeric character or underscore, followed by at most 127 alphanumeric characters, underscores, periods, or dashes";

/// `image` with `tag` resolved, as kpt's `ResolveFunctionImage`: an empty
/// tag leaves the image as it is; otherwise its tag and digest are
/// replaced by `tag` (a version or other literal tag), or by the highest
/// tag the listers know that meets it (a constraint).
///
/// The errors are kpt's texts: `failed to parse image "<image>" as
/// reference: <why>` (E3), `no tag could be found matching the version
/// constraint "<tag>"` (E1), and `` `function.tag` "<tag>" must be a valid
/// image tag: ... `` (E2). kpt prints the warning of [`tag_warning`] before
/// an E2 about a tag that is neither a version nor a constraint (`>>0.1`):
/// on an error starting with `` `function.tag` ``, a caller prints
/// `tag_warning(tag)` first if it has one.
pub async fn resolve_function_image(
    image: &str,
    tag: &str,
    listers: &[Arc<dyn TagLister>],
) -> Result<Resolved, String> {
    if tag.is_empty() {
        return Ok(Resolved {
            image: image.to_string(),
            warning: None,
        });
    }
    let mut reference = ImageRef::parse(image).map_err(|why| {
        format!(
            "failed to parse image {} as reference: {why}",
            go_quote(image)
        )
    })?;
    reference.tag.clear();
    reference.digest.clear();
    let repository = reference.common_name();

    let warning = match Version::parse(tag) {
        // A version is a constraint too, but listing to find the one tag
        // it names would be a waste: kpt uses it as written (`0.4` stays
        // `0.4`, not `v0.4.0`).
        Ok(_) => None,
        Err(version_err) => match Constraints::parse(tag) {
            Ok(constraint) => {
                reference.tag = highest_match(&repository, tag, &constraint, listers)
                    .await?
                    .original()
                    .to_string();
                return Ok(Resolved {
                    image: reference.common_name(),
                    warning: None,
                });
            }
            Err(constraint_err) => Some(literal_warning(tag, &version_err, &constraint_err)),
        },
    };
    if !valid_tag(tag) {
        return Err(format!(
            "`function.tag` {} must be a valid image tag: {IMAGE_TAG_ERROR}",
            go_quote(tag)
        ));
    }
    reference.tag = tag.to_string();
    Ok(Resolved {
        image: reference.common_name(),
        warning,
    })
}

/// The warning kpt prints for `tag` when it resolves it: for a tag that is
/// neither a version nor a constraint, which it then uses as written.
pub fn tag_warning(tag: &str) -> Option<String> {
    if tag.is_empty() {
        return None;
    }
    let version_err = Version::parse(tag).err()?;
    let constraint_err = Constraints::parse(tag).err()?;
    Some(literal_warning(tag, &version_err, &constraint_err))
}

fn literal_warning(
    tag: &str,
    version_err: &semver::VersionError,
    constraint_err: &semver::ConstraintError,
) -> String {
    format!(
        "Tag {} could not be parsed as a semantic version (\"{version_err}\") or constraint (\"{constraint_err}\"), will use it literally",
        go_quote(tag)
    )
}

/// The highest version among all listers' tags that meets `constraint`:
/// the union of every lister's matches (one that fails or has nothing is
/// skipped, at kpt's `-v=2`), sorted high to low, stably (as Go's sort of
/// kpt's at most a dozen tags is), the first taken.
async fn highest_match(
    repository: &str,
    tag: &str,
    constraint: &Constraints,
    listers: &[Arc<dyn TagLister>],
) -> Result<Version, String> {
    let mut matches = Vec::new();
    for lister in listers {
        let tags = match lister.list(repository).await {
            Ok(tags) => tags,
            Err(err) => {
                tracing::debug!(
                    "failed to list tags for image {} using lister {}: {err}",
                    go_quote(repository),
                    go_quote(&lister.name())
                );
                continue;
            }
        };
        if tags.is_empty() {
            tracing::debug!(
                "no tags found for image {} with lister {}",
                go_quote(repository),
                go_quote(&lister.name())
            );
            continue;
        }
        let found = filter_parse_tags(&tags, constraint);
        if found.is_empty() {
            // kpt names the (empty) matches here, not the tags: its line
            // always ends with `(from [])`.
            tracing::debug!(
                "no tag matched the version constraint {} when using lister {} (from {})",
                go_quote(tag),
                go_quote(&lister.name()),
                abbrev_slice(&found)
            );
        }
        matches.extend(found);
    }
    if matches.is_empty() {
        return Err(format!(
            "no tag could be found matching the version constraint {}",
            go_quote(tag)
        ));
    }
    sort_versions(&mut matches);
    Ok(matches.swap_remove(0))
}

/// The highest of `tags` that meets `constraint`, by kpt's rules (as
/// [`resolve_function_image`] takes it from one lister's tags): signatures
/// and git builds are not versions, equal versions keep their order, the
/// tag returned as written. For a caller that lists tags itself (the
/// runner's serving path, which caches them).
pub fn highest_matching_tag<'a>(tags: &'a [String], constraint: &Constraints) -> Option<&'a str> {
    let mut found = filter_parse_tags(tags, constraint);
    sort_versions(&mut found);
    let best = found.first()?;
    tags.iter()
        .find(|t| t.as_str() == best.original())
        .map(String::as_str)
}

/// Whether `tag` (a request's, a Kptfile's) is a constraint to resolve
/// against a repository's tags: one that is not a version kpt uses as
/// written (`v0.4.1`, `0.4`, `1`), nor a literal tag (`latest`), nor one
/// version with `=` before it (`=v0.4.1`, which names that tag).
pub fn is_constraint(tag: &str) -> Option<Constraints> {
    let t = tag.trim();
    if t.is_empty() || Version::parse(t).is_ok() {
        return None;
    }
    if let Some(one) = t.strip_prefix('=') {
        if Version::parse(one.trim()).is_ok() {
            return None;
        }
    }
    Constraints::parse(t).ok()
}

/// kpt's `filterParseTags`: the tags that are versions meeting
/// `constraint`, in order; signatures and attestations (`sha256-…`) and
/// git builds (`…-git-…`) are not versions to it.
fn filter_parse_tags(tags: &[String], constraint: &Constraints) -> Vec<Version> {
    let mut versions = Vec::new();
    for tag in tags {
        if tag.starts_with("sha256-") {
            tracing::trace!(
                "Skipping tag {} because it looks like a hash",
                go_quote(tag)
            );
            continue;
        }
        if tag.contains("-git-") {
            tracing::trace!(
                "Skipping tag {} because it looks like a git-based build tag",
                go_quote(tag)
            );
            continue;
        }
        let Ok(version) = Version::parse(tag) else {
            tracing::trace!(
                "Failed to parse tag {} as semantic version, ignoring",
                go_quote(tag)
            );
            continue;
        };
        if constraint.check(&version) {
            versions.push(version);
        } else {
            tracing::trace!(
                "Tag {} did not match constraint {}",
                go_quote(tag),
                go_quote(&constraint.to_string())
            );
        }
    }
    versions
}

/// kpt's `sortVersions`: highest first; equal versions (`v0.2`, `0.2.0`)
/// keep their order.
fn sort_versions(versions: &mut [Version]) {
    versions.sort_by(|a, b| b.compare(a));
}

/// kpt's `abbrevSlice`: `[a, b, c]`, or `[a, b, ..., z]` from four on.
fn abbrev_slice(versions: &[Version]) -> String {
    match versions {
        [first, second, _, _, ..] => format!(
            "[{}, {}, ..., {}]",
            first.original(),
            second.original(),
            versions[versions.len() - 1].original()
        ),
        few => format!(
            "[{}]",
            few.iter()
                .map(Version::original)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// kpt's `hasTagOrDigest`: a digest (`@`), or a `:` after the last `/`
/// (`localhost:5000/fn` has none).
pub fn has_tag_or_digest(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    match image.rfind('/') {
        Some(slash) => image[slash..].contains(':'),
        None => image.contains(':'),
    }
}

/// The image render runs for a function without `tag:`: `:latest` added
/// when it has neither tag nor digest, as kpt's `NewRunner` adds it.
pub fn with_latest(image: &str) -> String {
    if has_tag_or_digest(image) {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// Whether `tag` is an image tag: distribution's `TagRegexp`
/// (`[\w][\w.-]{0,127}`, ASCII `\w`) over the whole text.
pub fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    match bytes.split_first() {
        Some((&first, rest)) => {
            word(first)
                && rest.len() <= 127
                && rest.iter().all(|&b| word(b) || b == b'.' || b == b'-')
        }
        None => false,
    }
}

/// An image reference as regclient's `ref.New` reads it (v0.11.5,
/// `types/ref/ref.go`), for its `CommonName`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ImageRef {
    /// `reg` (a registry), or `ocidir`/`ocifile` (`ocidir://path`).
    scheme: String,
    registry: String,
    repository: String,
    tag: String,
    digest: String,
    path: String,
}

/// regclient's reference grammar, its patterns as written there.
mod grammar {
    const HOST_PART: &str = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)";
    const PORT: &str = r"(?::[0-9]+)";
    const IPV6_PART: &str = r"(?:[0-9a-fA-F]{1,4}:){0,7}[0-9a-fA-F]{1,4}";
    const TAG: &str = r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}";
    const DIGEST: &str = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}";
    const REPO_PART: &str = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*";
    const PATH: &str = r"[/a-zA-Z0-9_\-. ~\+]+";

    fn registry() -> String {
        let ipv6 = format!(r"(?:\[(?:{p}|::{p}|{p}::{p}|{p}::)\])", p = IPV6_PART);
        let domain = format!(r"(?:{h}(?:(?:\.{h})+\.?|\.))", h = HOST_PART);
        let upper = r"(?:[a-zA-Z0-9]*[A-Z][a-zA-Z0-9-]*[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[A-Z][a-zA-Z0-9]*)";
        format!(r"(?:(?:{domain}|{upper}|{ipv6}|localhost){PORT}?|{HOST_PART}{PORT})")
    }

    pub(super) fn reference() -> String {
        format!(
            r"^(?:({})/)?({REPO_PART}(?:/{REPO_PART})*)(?::({TAG}))?(?:@({DIGEST}))?$",
            registry()
        )
    }

    pub(super) fn ocidir() -> String {
        format!(r"^({PATH})(?::({TAG}))?(?:@({DIGEST}))?$")
    }
}

static SCHEME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([a-z]+)://(.+)$").expect("the scheme pattern compiles"));
static REF_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&grammar::reference()).expect("the reference pattern compiles"));
static OCIDIR_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&grammar::ocidir()).expect("the ocidir pattern compiles"));

/// kpt's `ImageBaseName`: the last segment of the repository regclient
/// reads in `image`, without tag or digest; `image` itself when regclient
/// cannot read it (`""` for an exec function).
pub(crate) fn image_base_name(image: &str) -> String {
    match ImageRef::parse(image) {
        Ok(r) => r
            .repository
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        Err(_) => image.to_owned(),
    }
}

impl ImageRef {
    /// `ref.New`: Docker Hub's names made `docker.io` (and `library/` for
    /// a one-part repository), `localhost/…` read as that registry, a
    /// missing tag and digest made `latest`. Errors are regclient's texts.
    fn parse(text: &str) -> Result<ImageRef, String> {
        let (scheme, tail) = match SCHEME_RE.captures(text) {
            Some(m) => (
                m.get(1).map_or("", |g| g.as_str()),
                m.get(2).map_or("", |g| g.as_str()),
            ),
            None => ("", text),
        };
        let group = |m: &regex::Captures<'_>, i: usize| {
            m.get(i).map_or(String::new(), |g| g.as_str().to_string())
        };
        let mut parsed = ImageRef {
            scheme: scheme.to_string(),
            registry: String::new(),
            repository: String::new(),
            tag: String::new(),
            digest: String::new(),
            path: String::new(),
        };
        match scheme {
            "" => {
                parsed.scheme = "reg".into();
                let Some(m) = REF_RE.captures(tail) else {
                    if REF_RE.is_match(&tail.to_lowercase()) {
                        return Err(format!(
                            "invalid reference \"{tail}\", repo must be lowercase"
                        ));
                    }
                    return Err(format!("invalid reference \"{tail}\""));
                };
                parsed.registry = group(&m, 1);
                parsed.repository = group(&m, 2);
                parsed.tag = group(&m, 3);
                parsed.digest = group(&m, 4);
                // `localhost/x` reads as a repository path; it is the
                // registry.
                if parsed.registry.is_empty() {
                    if let Some(rest) = parsed.repository.strip_prefix("localhost") {
                        if rest.is_empty() || rest.starts_with('/') {
                            parsed.registry = "localhost".into();
                            parsed.repository = rest.trim_start_matches('/').to_string();
                        }
                    }
                }
                if matches!(
                    parsed.registry.as_str(),
                    "" | "registry-1.docker.io" | "index.docker.io"
                ) {
                    parsed.registry = "docker.io".into();
                }
                if parsed.registry == "docker.io" && !parsed.repository.contains('/') {
                    parsed.repository = format!("library/{}", parsed.repository);
                }
                if parsed.tag.is_empty() && parsed.digest.is_empty() {
                    parsed.tag = "latest".into();
                }
                if parsed.repository.is_empty() {
                    return Err(format!("invalid reference \"{tail}\""));
                }
            }
            "ocidir" | "ocifile" => {
                let m = OCIDIR_RE
                    .captures(tail)
                    .filter(|m| m.get(1).is_some_and(|p| !p.as_str().is_empty()))
                    .ok_or_else(|| {
                        format!("invalid reference, invalid path for scheme \"{scheme}\": {tail}")
                    })?;
                parsed.path = group(&m, 1);
                parsed.tag = group(&m, 2);
                parsed.digest = group(&m, 3);
            }
            _ => {
                return Err(format!(
                    "invalid reference, unknown scheme \"{scheme}\" in \"{text}\""
                ))
            }
        }
        Ok(parsed)
    }

    /// `CommonName`: `registry/repository[:tag][@digest]`; regclient has
    /// none for `ocifile` (the empty text).
    fn common_name(&self) -> String {
        let mut name = match self.scheme.as_str() {
            "reg" => {
                if self.repository.is_empty() {
                    return String::new();
                }
                let mut name = String::new();
                if !self.registry.is_empty() {
                    name.push_str(&self.registry);
                    name.push('/');
                }
                name.push_str(&self.repository);
                name
            }
            "ocidir" => format!("ocidir://{}", self.path),
            _ => return String::new(),
        };
        if !self.tag.is_empty() {
            name.push(':');
            name.push_str(&self.tag);
        }
        if !self.digest.is_empty() {
            name.push('@');
            name.push_str(&self.digest);
        }
        name
    }
}

#[cfg(test)]
mod tests;
