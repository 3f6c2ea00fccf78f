//! Where `render` finds the tags of a function image whose Kptfile `tag:`
//! is a constraint: kpt's two listers, the local engine's images
//! ([`LocalLister`]) and the registry's tag list ([`RegistryLister`]), for
//! [`krm_kpt::tag::resolve_function_image`]. kpt asks the local one first,
//! and only when `KRM_FN_RUNTIME` names a runtime it knows; that choice is
//! the caller's.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bollard::models::ImageSummary;
use bollard::query_parameters::ListImagesOptions;
use function_runner::tag_resolution::{list_all, no_such_repository};
use futures::future::BoxFuture;
use krm_kpt::tag::TagLister;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use runner_core::image::is_loopback;
use runner_docker::Docker;

/// How long the engine has to answer before the local lister gives up (it
/// is then skipped, as kpt skips a lister whose `docker` fails).
const ENGINE_TIMEOUT: Duration = Duration::from_secs(10);

/// The local Docker engine's tags of a repository: what
/// `docker image ls --filter reference=<image> --format '{{ .Tag }}'`
/// prints, which is kpt's local lister, asked over the engine's API.
///
/// The engine matches the filter against the familiar name (`foo`,
/// `myorg/foo`) and the full one of registries other than Docker Hub, so a
/// Docker Hub repository, which kpt names `docker.io/library/foo`, has no
/// local tags for kpt nor here (an engine on the classic image store).
pub(crate) struct LocalLister {
    engine: tokio::sync::OnceCell<Docker>,
}

impl LocalLister {
    /// Connects (`DOCKER_HOST`, else the local socket) at the first listing:
    /// a render whose tags are all versions never needs the engine.
    pub(crate) fn new() -> Self {
        Self {
            engine: tokio::sync::OnceCell::new(),
        }
    }

    async fn list_tags(&self, image: &str) -> Result<Vec<String>, String> {
        let docker = self
            .engine
            .get_or_try_init(|| runner_docker::connect(ENGINE_TIMEOUT))
            .await
            .map_err(|err| err.to_string())?;
        let options = ListImagesOptions {
            filters: Some(HashMap::from([(
                "reference".to_string(),
                vec![image.to_string()],
            )])),
            ..ListImagesOptions::default()
        };
        let images = tokio::time::timeout(ENGINE_TIMEOUT, docker.list_images(Some(options)))
            .await
            .map_err(|_| format!("the engine did not list its images within {ENGINE_TIMEOUT:?}"))?
            .map_err(|err| err.to_string())?;
        Ok(image_ls_tags(&images))
    }
}

impl TagLister for LocalLister {
    /// kpt's `"local-" + binary`.
    fn name(&self) -> String {
        "local-docker".into()
    }

    fn list<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            self.list_tags(image)
                .await
                .map_err(|err| format!("failed to list local tags using \"docker\": {err}"))
        })
    }
}

/// The `TAG` column of `docker image ls` for the images the engine listed
/// (newest first, as it lists them): a row per tag, and `<none>` for an
/// image that has none (a dangling one, or one known by digest only).
fn image_ls_tags(images: &[ImageSummary]) -> Vec<String> {
    let mut tags = Vec::new();
    for image in images {
        let mut tagged_repos = HashSet::new();
        for reference in &image.repo_tags {
            // The docker CLI skips what it cannot read (`<none>:<none>`).
            if reference == "<none>:<none>" {
                continue;
            }
            let (repo, tag) = match reference.rfind(':') {
                Some(colon) if !reference[colon..].contains('/') => {
                    (&reference[..colon], &reference[colon + 1..])
                }
                _ => continue,
            };
            tagged_repos.insert(repo);
            tags.push(tag.to_string());
        }
        // One `<none>` row per repository known by digest only; one for an
        // image known by nothing.
        let digest_only: HashSet<&str> = image
            .repo_digests
            .iter()
            .filter(|r| r.as_str() != "<none>@<none>")
            .filter_map(|r| r.split_once('@').map(|(repo, _)| repo))
            .filter(|repo| !tagged_repos.contains(repo))
            .collect();
        let rows = if tagged_repos.is_empty() {
            digest_only.len().max(1)
        } else {
            digest_only.len()
        };
        tags.extend(std::iter::repeat_n("<none>".to_string(), rows));
    }
    tags
}

/// A registry's tags of a repository, `GET /v2/<repository>/tags/list`,
/// with the credentials of the user's docker config for its registry
/// (anonymous without): kpt's regclient lister.
///
/// A registry on a loopback address that does not speak TLS is asked over
/// plain HTTP where HTTPS fails (kpt's regclient would not: it speaks
/// HTTP only to a registry whose docker config entry says `http://`,
/// which this lister honours too).
pub(crate) struct RegistryLister {
    credentials: DockerCredentials,
    https: Client,
    http: Client,
}

impl RegistryLister {
    /// With the user's docker config, read now (as regclient reads it when
    /// kpt makes its client).
    pub(crate) fn new() -> Result<Self, String> {
        Self::with_credentials(DockerCredentials::load())
    }

    pub(crate) fn with_credentials(credentials: DockerCredentials) -> Result<Self, String> {
        Ok(Self {
            credentials,
            https: client(ClientProtocol::Https)?,
            http: client(ClientProtocol::Http)?,
        })
    }

    async fn list_tags(&self, image: &str) -> Result<Vec<String>, String> {
        let reference: Reference = image.parse().map_err(|err| format!("{err}"))?;
        let registry = reference.registry().to_string();
        let (auth, plain_http) = self.credentials.auth_for(&registry).await;
        if plain_http {
            return list_all(&self.http, &reference, &auth)
                .await
                .map_err(|err| err.to_string());
        }
        let mut listed = list_all(&self.https, &reference, &auth).await;
        // HTTPS failed before any HTTP answer (no TLS there): a registry on
        // loopback is asked again over plain HTTP. Its answer is kept where
        // it has one (the tags, or no such repository); else HTTPS's error
        // says more (a registry whose TLS certificate is not trusted
        // answers plain HTTP with a 400).
        if matches!(listed, Err(OciDistributionError::RequestError(_))) && is_loopback(&registry) {
            let over_http = list_all(&self.http, &reference, &auth).await;
            if over_http.as_ref().map_or_else(no_such_repository, |_| true) {
                listed = over_http;
            }
        }
        listed.map_err(|err| err.to_string())
    }
}

impl TagLister for RegistryLister {
    fn name(&self) -> String {
        "regclient".into()
    }

    fn list<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(self.list_tags(image))
    }
}

/// A registry client over `protocol`, on ring (the provider the rest of
/// the runner's TLS uses), trusting the system's roots (`SSL_CERT_FILE`
/// and `SSL_CERT_DIR` replace them, as they do for Go).
fn client(protocol: ClientProtocol) -> Result<Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::try_from(ClientConfig {
        protocol,
        // regclient has no timeout of its own; a registry that never
        // answers should not hang a render.
        connect_timeout: Some(Duration::from_secs(30)),
        read_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    })
    .map_err(|err| format!("making the registry client: {err}"))
}

/// Docker Hub, as image references name it.
const DOCKER_HUB: &str = "docker.io";
/// Docker Hub, as `docker login` and credential helpers name it.
const DOCKER_HUB_AUTH: &str = "https://index.docker.io/v1/";

/// The registry credentials of the user's docker config, found as
/// regclient's `config.DockerLoad` finds them: `$DOCKER_CONFIG/config.json`
/// (else `~/.docker/config.json`), then `DOCKER_AUTH_CONFIG`; `auths`
/// entries (`auth`, or `username` and `password`), credential helpers
/// (`credHelpers`, `credsStore`). An unreadable config counts as none, as
/// regclient only warns (to a log kpt discards). Identity tokens (refresh
/// tokens of an OAuth2 exchange) are not used: such a registry is asked
/// anonymously.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DockerCredentials {
    /// Later entries win (the environment's over the file's).
    hosts: Vec<HostEntry>,
    /// `credsStore`: the helper for registries no entry names.
    store: Option<String>,
}

#[derive(Clone, PartialEq, Eq)]
struct HostEntry {
    /// `host[:port]`, Docker Hub as `docker.io`.
    registry: String,
    /// The entry was written `http://…`: the registry speaks plain HTTP.
    plain_http: bool,
    username: String,
    password: String,
    /// `docker-credential-<helper>` holds the credentials.
    helper: Option<String>,
    /// The name the helper knows the registry by.
    helper_key: String,
}

impl std::fmt::Debug for HostEntry {
    // Never a password in a log or a test failure.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEntry")
            .field("registry", &self.registry)
            .field("plain_http", &self.plain_http)
            .field("username", &self.username)
            .field("helper", &self.helper)
            .finish_non_exhaustive()
    }
}

impl DockerCredentials {
    /// From the user's config file and `DOCKER_AUTH_CONFIG`.
    pub(crate) fn load() -> Self {
        let path = config_path(
            std::env::var_os("DOCKER_CONFIG").as_deref(),
            std::env::var_os("HOME").as_deref().map(Path::new),
        );
        let mut credentials = path
            .and_then(|path| std::fs::read_to_string(path).ok())
            .map(|text| Self::parse(&text))
            .unwrap_or_default();
        if let Some(env) = std::env::var("DOCKER_AUTH_CONFIG")
            .ok()
            .filter(|v| !v.is_empty())
        {
            let from_env = Self::parse(&env);
            credentials.hosts.extend(from_env.hosts);
            credentials.store = from_env.store.or(credentials.store);
        }
        credentials
    }

    /// A docker config JSON; what it cannot read counts as absent.
    pub(crate) fn parse(text: &str) -> Self {
        let Ok(root) = serde_json::from_str::<serde_json::Value>(text) else {
            return Self::default();
        };
        let helpers: HashMap<&str, &str> = root
            .get("credHelpers")
            .and_then(|h| h.as_object())
            .into_iter()
            .flatten()
            .filter_map(|(key, helper)| Some((key.as_str(), helper.as_str()?)))
            .collect();
        let mut hosts = Vec::new();
        let auths = root.get("auths").and_then(|a| a.as_object());
        for (key, entry) in auths.into_iter().flatten() {
            let Some((plain_http, registry)) = host_of(key) else {
                continue;
            };
            let field = |name: &str| {
                entry
                    .get(name)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let (mut username, mut password) = (field("username"), field("password"));
            let auth = field("auth");
            if !auth.is_empty() {
                let Some((user, pass)) = decode_auth(&auth) else {
                    continue;
                };
                (username, password) = (user, pass);
            }
            let helper = helpers.get(key.as_str()).map(|h| h.to_string());
            if (username.is_empty() || password.is_empty()) && helper.is_none() {
                continue;
            }
            hosts.push(HostEntry {
                helper_key: helper_key(key, &registry),
                registry,
                plain_http,
                username,
                password,
                helper,
            });
        }
        for (key, helper) in &helpers {
            if auths.is_some_and(|a| a.contains_key(*key)) {
                continue;
            }
            let Some((plain_http, registry)) = host_of(key) else {
                continue;
            };
            hosts.push(HostEntry {
                helper_key: helper_key(key, &registry),
                registry,
                plain_http,
                username: String::new(),
                password: String::new(),
                helper: Some(helper.to_string()),
            });
        }
        let store = root
            .get("credsStore")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        Self { hosts, store }
    }

    /// The credentials for `registry` (as an image reference names it),
    /// and whether it speaks plain HTTP.
    pub(crate) async fn auth_for(&self, registry: &str) -> (RegistryAuth, bool) {
        let entry = self.hosts.iter().rev().find(|h| h.registry == registry);
        let plain_http = entry.is_some_and(|h| h.plain_http);
        let (helper, key) = match entry {
            Some(h) if !h.username.is_empty() && !h.password.is_empty() => {
                return (
                    RegistryAuth::Basic(h.username.clone(), h.password.clone()),
                    plain_http,
                );
            }
            Some(h) => (h.helper.clone(), h.helper_key.clone()),
            None => (self.store.clone(), helper_key(registry, registry)),
        };
        let auth = match helper {
            Some(helper) => helper_credentials(&helper, &key)
                .await
                .map_or(RegistryAuth::Anonymous, |(user, secret)| {
                    RegistryAuth::Basic(user, secret)
                }),
            None => RegistryAuth::Anonymous,
        };
        (auth, plain_http)
    }
}

/// The config file: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json`.
pub(crate) fn config_path(
    docker_config: Option<&std::ffi::OsStr>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    match docker_config.filter(|d| !d.is_empty()) {
        Some(dir) => Some(Path::new(dir).join("config.json")),
        None => home.map(|home| home.join(".docker").join("config.json")),
    }
}

/// regclient's `parseName` of a config key: whether it says `http://`, and
/// the registry (`https://index.docker.io/v1/`, `registry-1.docker.io` and
/// `docker.io` are Docker Hub). A key naming a repository path is not a
/// registry's (regclient rejects it).
fn host_of(key: &str) -> Option<(bool, String)> {
    if matches!(key, DOCKER_HUB_AUTH | "registry-1.docker.io" | DOCKER_HUB) {
        return Some((false, DOCKER_HUB.into()));
    }
    let (scheme, rest) = match key.split_once("://") {
        Some((scheme, rest)) if !scheme.is_empty() => (scheme, rest),
        _ => ("https", key),
    };
    let host = rest.split('/').next().unwrap_or(rest);
    if host.is_empty() || !key.trim_end_matches('/').ends_with(host) {
        return None;
    }
    Some((scheme == "http", host.to_string()))
}

/// What a credential helper is asked for: Docker Hub by its login name,
/// others by the config key as written when it is not bare.
fn helper_key(key: &str, registry: &str) -> String {
    if registry == DOCKER_HUB {
        DOCKER_HUB_AUTH.into()
    } else {
        key.into()
    }
}

/// A config entry's `auth`: base64 of `user:password`.
fn decode_auth(auth: &str) -> Option<(String, String)> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.trim_matches('\0').to_string()))
}

/// `docker-credential-<helper> get`, the registry on its stdin: the user
/// and secret it answers; `None` when it fails, knows none, or holds an
/// identity token (`<token>`).
async fn helper_credentials(helper: &str, key: &str) -> Option<(String, String)> {
    let program = format!("docker-credential-{helper}");
    let key = key.to_string();
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new(&program)
            .arg("get")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(key.as_bytes());
        }
        let out = child.wait_with_output().ok()?;
        out.status.success().then_some(out.stdout)
    })
    .await
    .ok()??;
    let answer: serde_json::Value = serde_json::from_slice(&answer).ok()?;
    let user = answer.get("Username")?.as_str()?;
    let secret = answer.get("Secret")?.as_str()?;
    (!user.is_empty() && user != "<token>" && !secret.is_empty())
        .then(|| (user.to_string(), secret.to_string()))
}
