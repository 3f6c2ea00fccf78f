//! The request's `tag` resolved against the image's registry (`serve`):
//! Porch sends a semver constraint (`~0.4`, `>=v0.1.0 <v0.3.0`) in
//! `EvaluateFunctionRequest.tag` beside an untagged image, and the function
//! that runs is the image's **highest tag in its registry** that meets it,
//! as kpt's `render` resolves a Kptfile `tag:`
//! ([`krm_kpt::tag::highest_matching_tag`]: one matcher for both).
//!
//! - [`TagResolver`]: lists a repository's tags through a [`TagSource`]
//!   (the registry's tag list API, [`RegistryTags`]) and keeps them for a
//!   TTL, so a warm call does not list again; one listing per repository
//!   at a time, however many calls wait for it.
//! - [`TagResolving`]: the evaluator in front of the chain that rewrites
//!   the request to `image:resolved-tag`, so that the built-in, the pod
//!   and the FunctionConfig settings are chosen for the resolved tag.
//!
//! Only a constraint is listed for: an exact tag (`v0.4.1`, `0.4`,
//! `=v0.4.1`, `latest`) or an image that carries its own tag or digest
//! passes through untouched, at no cost. A FunctionConfig `binaryExecutor`
//! or `goExecutor` whose tags meet the constraint keeps deciding as before
//! (against its own tags, no registry asked): those run locally, and their
//! images need not be in any registry.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::Instrument as _;

use futures::future::BoxFuture;
use krm_fn::call::deadline;
use krm_kpt::tag::semver::Constraints;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use proto::pb::EvaluateFunctionResponse;
use runner_core::config::LiveIndex;
use runner_core::image::{is_loopback, normalize_image_name, ImageRef};
use tokio::time::Instant;
use tonic::Code;

use crate::evaluator::{EvalError, EvalRequest, Evaluator};

/// How long a repository's tags are kept (`serve --tag-cache-ttl`): a tag
/// pushed since shows up at most this late.
pub const DEFAULT_TAG_CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// Tags a NOT_FOUND answer names, at most (then their count).
const MAX_TAGS_NAMED: usize = 20;

/// Repositories past which expired listings are dropped (each entry is a
/// repository some call asked a constraint of).
const MAX_REPOSITORIES: usize = 1024;

/// How a registry failed to list a repository's tags; decides the gRPC
/// code ([`ListError::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFailure {
    /// No answer: connection refused, DNS, TLS, timeout; or the registry
    /// said it is overloaded or broken (429, 5xx). UNAVAILABLE: a retry
    /// may succeed.
    Unreachable,
    /// 401/403: the runner's credentials for the registry are missing or
    /// wrong. FAILED_PRECONDITION: the runner's configuration must change.
    Refused,
    /// The registry has no such repository: the image does not exist.
    /// NOT_FOUND, as for an image whose manifest its registry has not.
    NoRepository,
    /// Any other failure (an answer the client could not read, a
    /// credentials file that does not parse). FAILED_PRECONDITION.
    Failed,
}

/// A repository's tags could not be listed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("listing the tags of {repository} in registry {registry} failed: {cause}")]
pub struct ListError {
    pub registry: String,
    pub repository: String,
    pub failure: ListFailure,
    pub cause: String,
}

impl ListError {
    pub fn code(&self) -> Code {
        match self.failure {
            ListFailure::Unreachable => Code::Unavailable,
            ListFailure::Refused | ListFailure::Failed => Code::FailedPrecondition,
            ListFailure::NoRepository => Code::NotFound,
        }
    }
}

/// Lists the tags of a repository (`registry/path`, no tag).
pub trait TagSource: Send + Sync {
    fn list<'a>(&'a self, repository: &'a str) -> BoxFuture<'a, Result<Vec<String>, ListError>>;
}

/// Why a request's constraint resolved to no tag.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The registry answered, and no tag meets the constraint: NOT_FOUND.
    #[error(
        "no tag of image {repository} matches the tag constraint {constraint:?}; its registry has {}",
        tags_seen(tags)
    )]
    NoMatch {
        repository: String,
        constraint: String,
        tags: Arc<[String]>,
    },
    /// The registry could not be asked (the code is [`ListError::code`]'s).
    #[error("resolving the tag constraint {constraint:?} of image {image}: {source}")]
    Registry {
        image: String,
        constraint: String,
        #[source]
        source: ListError,
    },
}

impl ResolveError {
    pub fn code(&self) -> Code {
        match self {
            ResolveError::NoMatch { .. } => Code::NotFound,
            ResolveError::Registry { source, .. } => source.code(),
        }
    }
}

/// `no tags`, or the first [`MAX_TAGS_NAMED`] tags and how many there are.
fn tags_seen(tags: &[String]) -> String {
    match tags.len() {
        0 => "no tags".into(),
        n if n <= MAX_TAGS_NAMED => format!("{n} tag(s): {}", tags.join(", ")),
        n => format!(
            "{n} tags: {}, ... ({} more)",
            tags[..MAX_TAGS_NAMED].join(", "),
            n - MAX_TAGS_NAMED
        ),
    }
}

/// A request's constraint, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The image as requested, with the tag: `image:tag`.
    pub image: String,
    pub tag: String,
    /// The tags came from the cache (no registry request).
    pub cached: bool,
}

/// A repository's tags as listed, and when.
struct Listed {
    at: Instant,
    tags: Arc<[String]>,
}

/// One repository's listing and its last failure; its lock is held while it
/// is listed, so the calls that wait for the same repository share one
/// listing.
type Slot = Arc<tokio::sync::Mutex<Entry>>;

#[derive(Default)]
struct Entry {
    listed: Option<Listed>,
    /// A failed listing, answered again for [`FAILURE_KEPT`]: the calls
    /// queued behind one that failed do not each wait for the registry.
    failed: Option<(Instant, ListError)>,
}

/// How long a failed listing is answered without asking the registry again,
/// and how long tags whose TTL passed are used again when listing them
/// anew fails.
const FAILURE_KEPT: Duration = Duration::from_secs(5);

/// Resolves request tag constraints against the registries' tags, cached
/// per repository for a TTL. A listing that fails is answered for a few
/// seconds (not cached for the TTL: a registry that comes back is seen
/// soon); where an earlier listing exists, its tags are used instead (a
/// registry's blip does not fail the calls).
pub struct TagResolver {
    source: Arc<dyn TagSource>,
    ttl: Duration,
    default_prefix: String,
    repositories: Mutex<HashMap<String, Slot>>,
}

impl std::fmt::Debug for TagResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagResolver")
            .field("ttl", &self.ttl)
            .field("default_prefix", &self.default_prefix)
            .finish_non_exhaustive()
    }
}

impl TagResolver {
    /// `default_prefix`: the registry path of bare names
    /// (`--default-image-prefix`), whose repository is listed for them.
    pub fn new(source: Arc<dyn TagSource>, ttl: Duration, default_prefix: &str) -> Self {
        TagResolver {
            source,
            ttl,
            default_prefix: default_prefix.to_string(),
            repositories: Mutex::new(HashMap::new()),
        }
    }

    /// The constraint to resolve for a request, if any: only an image with
    /// neither tag nor digest, and a tag that is a constraint
    /// ([`krm_kpt::tag::is_constraint`]); everything else is used as it is.
    pub fn constraint_of(image: &str, tag: &str) -> Option<Constraints> {
        let reference = ImageRef::split(image.trim());
        if reference.tag.is_some() || reference.digest.is_some() {
            return None;
        }
        krm_kpt::tag::is_constraint(tag)
    }

    /// The highest tag of `image`'s repository that meets `constraint`
    /// (written `tag` in the request).
    pub async fn resolve(
        &self,
        image: &str,
        tag: &str,
        constraint: &Constraints,
    ) -> Result<Resolution, ResolveError> {
        let image = image.trim();
        let repository = normalize_image_name(ImageRef::split(image).name, &self.default_prefix);
        let (tags, cached) =
            self.tags_of(&repository)
                .await
                .map_err(|source| ResolveError::Registry {
                    image: image.to_string(),
                    constraint: tag.to_string(),
                    source,
                })?;
        let Some(found) = krm_kpt::tag::highest_matching_tag(&tags, constraint) else {
            tracing::info!(%image, constraint = %tag, cached, tags = tags.len(), "no tag matches the request's tag constraint");
            return Err(ResolveError::NoMatch {
                repository,
                constraint: tag.to_string(),
                tags,
            });
        };
        // One log line per call; the `tag.resolve` span carries the same.
        tracing::info!(%image, constraint = %tag, resolved = %found, cached, "resolved the request's tag constraint");
        Ok(Resolution {
            image: format!("{image}:{found}"),
            tag: found.to_string(),
            cached,
        })
    }

    /// The repository's tags, from the cache while they are fresh; and
    /// whether they came from it.
    async fn tags_of(&self, repository: &str) -> Result<(Arc<[String]>, bool), ListError> {
        let slot = self.slot(repository);
        let mut entry = slot.lock().await;
        if let Some(l) = entry.listed.as_ref().filter(|l| l.at.elapsed() < self.ttl) {
            return Ok((l.tags.clone(), true));
        }
        if let Some((_, err)) = entry
            .failed
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FAILURE_KEPT)
        {
            return Err(err.clone());
        }
        match self.source.list(repository).await {
            Ok(tags) => {
                let tags: Arc<[String]> = tags.into();
                entry.listed = Some(Listed {
                    at: Instant::now(),
                    tags: tags.clone(),
                });
                entry.failed = None;
                Ok((tags, false))
            }
            Err(err) => {
                if let Some(l) = entry.listed.as_mut() {
                    tracing::warn!(%repository, error = %err, "listing the tags failed: the last listing's are used");
                    // Listed again in FAILURE_KEPT, not at every call.
                    l.at = Instant::now()
                        .checked_sub(self.ttl.saturating_sub(FAILURE_KEPT))
                        .unwrap_or_else(Instant::now);
                    return Ok((l.tags.clone(), true));
                }
                entry.failed = Some((Instant::now(), err.clone()));
                Err(err)
            }
        }
    }

    fn slot(&self, repository: &str) -> Slot {
        let mut repositories = self
            .repositories
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = repositories.get(repository) {
            return slot.clone();
        }
        if repositories.len() >= MAX_REPOSITORIES {
            // Expired and idle listings go; one being listed stays.
            repositories.retain(|_, slot| {
                slot.try_lock().map_or(true, |l| {
                    l.listed.as_ref().is_some_and(|l| l.at.elapsed() < self.ttl)
                })
            });
        }
        repositories
            .entry(repository.to_string())
            .or_default()
            .clone()
    }
}

/// Resolves the request's tag constraint, then hands the request, as
/// `image:resolved-tag`, to the chain (`inner`).
pub struct TagResolving {
    resolver: Arc<TagResolver>,
    index: LiveIndex,
    /// The exec evaluator runs (a binaryExecutor keeps its constraint).
    exec: bool,
    inner: Box<dyn Evaluator>,
}

impl TagResolving {
    pub fn new(
        resolver: Arc<TagResolver>,
        index: LiveIndex,
        exec: bool,
        inner: Box<dyn Evaluator>,
    ) -> Self {
        TagResolving {
            resolver,
            index,
            exec,
            inner,
        }
    }

    /// Whether a FunctionConfig runs this image and constraint locally (a
    /// present binaryExecutor binary, a goExecutor): its own tags decide,
    /// as before, and no registry is asked.
    fn configured_locally(&self, image: &str, tag: &str) -> Result<bool, EvalError> {
        let index = self.index.current();
        let invalid = |e: runner_core::config::ConfigError| EvalError::InvalidTag(e.into());
        if self.exec {
            let binary = index.try_binary_for(image, tag).map_err(invalid)?;
            if binary.is_some_and(|found| !crate::evaluator::binary_missing(&found)) {
                return Ok(true);
            }
        }
        Ok(index.try_go_for(image, tag).map_err(invalid)?.is_some())
    }
}

impl Evaluator for TagResolving {
    fn evaluate(
        &self,
        mut req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        Box::pin(async move {
            let Some(constraint) = TagResolver::constraint_of(&req.request.image, &req.request.tag)
            else {
                return self.inner.evaluate(req).await;
            };
            if self.configured_locally(&req.request.image, &req.request.tag)? {
                return self.inner.evaluate(req).await;
            }
            let image = req.request.image.clone();
            let span = tracing::info_span!(
                target: "otel",
                "tag.resolve",
                image = %krm_fn::call::shown_name(&image),
                constraint = %krm_fn::call::shown_name(&req.request.tag),
                resolved = tracing::field::Empty,
                cached = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
            );
            let resolving = self.resolver.resolve(&image, &req.request.tag, &constraint);
            let resolved = deadline::before(req.deadline, resolving)
                .instrument(span.clone())
                .await
                .ok_or(EvalError::DeadlineExceeded { image })
                .and_then(|listed| {
                    listed.map_err(|err| EvalError::TagNotResolved {
                        code: err.code(),
                        source: Box::new(err),
                    })
                })
                .inspect_err(|err| {
                    span.record("otel.status_code", "ERROR");
                    span.record("otel.status_description", tracing::field::display(err));
                })?;
            span.record("resolved", resolved.image.as_str());
            span.record("cached", resolved.cached);
            drop(span);
            req.request.image = resolved.image;
            // The tag is in the image now: nothing further down resolves
            // it again (against configured tags).
            req.request.tag.clear();
            self.inner.evaluate(req).await
        })
    }
}

/// Who may read a registry: the credentials for `registry` (`host[:port]`,
/// as the image names it) to list `repository` with.
pub type AuthFor = Arc<dyn Fn(&str, &str) -> Result<RegistryAuth, String> + Send + Sync>;

/// A registry's tag list API (`GET /v2/<repository>/tags/list`) through
/// oci-client, with the serve path's registry settings: registries spoken
/// to over plain HTTP (`--insecure-registries`, and any on a loopback
/// address where HTTPS fails, as the entrypoint reader does), a CA trusted
/// besides the system's, and credentials per registry.
pub struct RegistryTags {
    insecure: Vec<String>,
    /// DER certificates.
    extra_ca: Vec<Vec<u8>>,
    auth: AuthFor,
}

impl RegistryTags {
    pub fn new(insecure: Vec<String>, extra_ca: Vec<Vec<u8>>, auth: AuthFor) -> Self {
        RegistryTags {
            insecure,
            extra_ca,
            auth,
        }
    }

    /// Anonymous, the system's roots, HTTPS but to loopback registries.
    pub fn anonymous() -> Self {
        Self::new(
            Vec::new(),
            Vec::new(),
            Arc::new(|_, _| Ok(RegistryAuth::Anonymous)),
        )
    }

    fn client(&self, protocol: ClientProtocol) -> Result<Client, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::try_from(ClientConfig {
            protocol,
            extra_root_certificates: self
                .extra_ca
                .iter()
                .map(|der| Certificate {
                    encoding: CertificateEncoding::Der,
                    data: der.clone(),
                })
                .collect(),
            // A registry that never answers must not hold a call past
            // these (the call's own deadline may be shorter).
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(30)),
            ..ClientConfig::default()
        })
        .map_err(|err| format!("making the registry client: {err}"))
    }

    async fn list_tags(&self, repository: &str) -> Result<Vec<String>, ListError> {
        let failed = |registry: &str, failure, cause: String| ListError {
            registry: registry.to_string(),
            repository: repository.to_string(),
            failure,
            cause,
        };
        let reference: Reference = repository
            .parse()
            .map_err(|err| failed("?", ListFailure::Failed, format!("{err}")))?;
        let registry = reference.registry().to_string();
        let auth = (self.auth)(&registry, repository)
            .map_err(|cause| failed(&registry, ListFailure::Failed, cause))?;
        // A client per listing (once per repository and TTL): a client
        // keeps the first credentials it was given for a registry, and a
        // rotated password must be used at the next listing.
        let client = self
            .client(ClientProtocol::HttpsExcept(self.insecure.clone()))
            .map_err(|cause| failed(&registry, ListFailure::Failed, cause))?;
        let mut listed = list_all(&client, &reference, &auth).await;
        // HTTPS failed at the transport: a registry on loopback is asked
        // over plain HTTP. Its answer is kept where it has one (the tags,
        // or no such repository); else HTTPS's error says more.
        if matches!(listed, Err(OciDistributionError::RequestError(_)))
            && is_loopback(&registry)
            && !self.insecure.contains(&registry)
        {
            let http = self
                .client(ClientProtocol::Http)
                .map_err(|cause| failed(&registry, ListFailure::Failed, cause))?;
            let over_http = list_all(&http, &reference, &auth).await;
            if over_http.as_ref().map_or_else(no_such_repository, |_| true) {
                listed = over_http;
            }
        }
        listed.map_err(|err| failed(&registry, failure_of(&err), krm_fn::error_chain(&err)))
    }
}

impl TagSource for RegistryTags {
    fn list<'a>(&'a self, repository: &'a str) -> BoxFuture<'a, Result<Vec<String>, ListError>> {
        Box::pin(self.list_tags(repository))
    }
}

/// What kind of failure the registry client's error is.
fn failure_of(err: &OciDistributionError) -> ListFailure {
    use OciDistributionError as E;
    if no_such_repository(err) {
        return ListFailure::NoRepository;
    }
    match err {
        E::RequestError(_) => ListFailure::Unreachable,
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => ListFailure::Refused,
        E::ServerError {
            code: 401 | 403, ..
        } => ListFailure::Refused,
        E::ServerError { code, .. } if *code == 429 || *code >= 500 => ListFailure::Unreachable,
        E::RegistryError { envelope, .. } => {
            let codes = || envelope.errors.iter().map(|e| &e.code);
            if codes().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                ListFailure::Refused
            } else if codes().any(|c| matches!(c, OciErrorCode::Toomanyrequests)) {
                ListFailure::Unreachable
            } else {
                ListFailure::Failed
            }
        }
        _ => ListFailure::Failed,
    }
}

/// Every tag of the repository. regclient follows the `Link` header of a
/// paginated answer, which oci-client does not show: the next page is
/// asked with `last` (the OCI distribution spec's other way), until a page
/// brings nothing new; that costs a registry that answers at once one
/// more (empty) request. A later page's failure ends the list there.
pub async fn list_all(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
) -> Result<Vec<String>, OciDistributionError> {
    let mut tags = client.list_tags(reference, auth, None, None).await?.tags;
    let mut seen: HashSet<String> = tags.iter().cloned().collect();
    while let Some(last) = tags.last().cloned() {
        let page = match client.list_tags(reference, auth, None, Some(&last)).await {
            Ok(page) => page.tags,
            Err(err) => {
                tracing::debug!("listing the tags of {reference} after {last:?}: {err}");
                break;
            }
        };
        let before = tags.len();
        tags.extend(page.into_iter().filter(|tag| seen.insert(tag.clone())));
        if tags.len() == before {
            break;
        }
    }
    Ok(tags)
}

/// Whether the registry answered that it has no such repository.
pub fn no_such_repository(err: &OciDistributionError) -> bool {
    match err {
        OciDistributionError::ServerError { code: 404, .. } => true,
        OciDistributionError::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, OciErrorCode::NameUnknown)),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
