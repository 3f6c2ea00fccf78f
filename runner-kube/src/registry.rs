//! Private registries (Porch's `--enable-private-registries`): the
//! credentials for an image's registry, read from a docker config JSON; the
//! CA to trust for registry TLS; and the image pull Secret through which the
//! kubelet pulls the same images with the same credentials (the pods name
//! it: [`super::template::FunctionPod::pull_secret`]).
//!
//! Images from the default registry (the KRM functions catalog) are public:
//! they are read anonymously and their pods get no pull Secret, as in Porch.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::Api;
use oci_client::secrets::RegistryAuth;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use runner_core::config::DEFAULT_IMAGE_PREFIX;

/// `--registry-auth-secret-path`'s default: where Porch's deployment mounts
/// the Secret holding the docker config JSON.
pub const DEFAULT_AUTH_FILE: &str = "/var/tmp/config-secret/.dockerconfigjson";
/// `--registry-auth-secret-name`'s default.
pub const DEFAULT_PULL_SECRET_NAME: &str = "auth-secret";
/// `--tls-secret-path`'s default.
pub const DEFAULT_TLS_DIR: &str = "/var/tmp/tls-secret/";
/// The type of a Secret the kubelet reads pull credentials from, and its key.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The CA file names looked for in the TLS directory, in this order.
const CA_FILES: [&str; 2] = ["ca.crt", "ca.pem"];

/// How the runner reaches registries.
#[derive(Debug, Clone)]
pub struct RegistrySettings {
    /// Registries (`host:port`) spoken to over plain HTTP
    /// (`--insecure-registries`).
    pub insecure: Vec<String>,
    /// The docker config JSON holding registry credentials
    /// (`--registry-auth-secret-path`); set when private registries are
    /// enabled (`--enable-private-registries`).
    pub auth_file: Option<PathBuf>,
    /// The directory holding the CA (`ca.crt`, else `ca.pem`) trusted for
    /// registry TLS besides the system's (`--tls-secret-path`); set when
    /// `--enable-private-registries-tls` is.
    pub ca_dir: Option<PathBuf>,
    /// The image pull Secret made from `auth_file` in the pod namespace
    /// (`--registry-auth-secret-name`).
    pub pull_secret_name: String,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        Self {
            insecure: Vec::new(),
            auth_file: None,
            ca_dir: None,
            pull_secret_name: DEFAULT_PULL_SECRET_NAME.to_string(),
        }
    }
}

impl RegistrySettings {
    /// The pull Secret that pods of private images get, when private
    /// registries are enabled.
    pub fn pull_secret(&self) -> Option<PullSecret> {
        let auth_file = self.auth_file.clone()?;
        Some(PullSecret::new(self.pull_secret_name.clone(), auth_file))
    }
}

/// Whether `image` may need credentials: it is not from the default
/// registry, whose images are public.
pub fn is_private(image: &str) -> bool {
    !image.starts_with(DEFAULT_IMAGE_PREFIX.trim_end_matches('/'))
}

/// Why registry credentials, the CA or the pull Secret could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("reading the registry auth file {}: {source}", path.display())]
    ReadAuth {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the registry auth file {} is not JSON: {source}", path.display())]
    AuthNotJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the registry auth file {} has no \"auths\" object: it must be a docker config JSON, \
         {{\"auths\": {{\"HOST[:PORT]\": {{\"auth\": \"BASE64(USER:PASSWORD)\"}}}}}}",
        path.display()
    )]
    NoAuths { path: PathBuf },
    #[error("the registry auth file {}, entry {registry:?}: {reason}", path.display())]
    AuthEntry {
        path: PathBuf,
        registry: String,
        reason: String,
    },
    #[error("no CA for registry TLS in {}: neither {} nor {}", dir.display(), CA_FILES[0], CA_FILES[1])]
    NoCa { dir: PathBuf },
    #[error("reading the registry CA {}: {source}", path.display())]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the registry CA {} is not a PEM certificate: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error("making the registry client: {0}")]
    Client(#[source] oci_client::errors::OciDistributionError),
}

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    // Logs and error messages never show the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The `auths` of a docker config JSON (`~/.docker/config.json`, or the
/// `.dockerconfigjson` of a `kubernetes.io/dockerconfigjson` Secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    /// Key as written → its credentials; `None` for an entry that has none
    /// (a credential helper's, say), which means anonymous, as in Docker.
    auths: BTreeMap<String, Option<Credentials>>,
}

impl DockerConfig {
    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let bytes = std::fs::read(path).map_err(|source| RegistryError::ReadAuth {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &bytes)
    }

    /// Parses `bytes`, read from `path` (named in errors). Each entry has
    /// `auth` (base64 of `user:password`) or `username` and `password`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, RegistryError> {
        let root: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|source| RegistryError::AuthNotJson {
                path: path.to_path_buf(),
                source,
            })?;
        let Some(entries) = root.get("auths").and_then(|a| a.as_object()) else {
            return Err(RegistryError::NoAuths {
                path: path.to_path_buf(),
            });
        };
        let mut auths = BTreeMap::new();
        for (registry, entry) in entries {
            let credentials = credentials_of(entry).map_err(|reason| RegistryError::AuthEntry {
                path: path.to_path_buf(),
                registry: registry.clone(),
                reason,
            })?;
            auths.insert(registry.clone(), credentials);
        }
        Ok(Self { auths })
    }

    /// The credentials for `registry` (`host` or `host:port`, as in an image
    /// reference), by Docker's rule: the entry whose key is exactly that,
    /// else the first whose key names that host once any scheme and path
    /// are cut off (`https://host:port/v1/`). Docker Hub goes by several
    /// names, which all match one another.
    pub fn credentials_for(&self, registry: &str) -> Option<&Credentials> {
        if let Some(exact) = self.auths.get(registry) {
            return exact.as_ref();
        }
        self.auths
            .iter()
            .find(|(key, _)| same_registry(key_host(key), registry))
            .and_then(|(_, credentials)| credentials.as_ref())
    }

    /// [`DockerConfig::credentials_for`] as the registry client takes it.
    pub fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.credentials_for(registry) {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// One `auths` entry's credentials; the error says what is wrong with it.
fn credentials_of(entry: &serde_json::Value) -> Result<Option<Credentials>, String> {
    let Some(entry) = entry.as_object() else {
        return Err("not an object".into());
    };
    let text = |field: &str| match entry.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{field:?} is not a string")),
    };
    if let Some(auth) = text("auth")?.filter(|a| !a.is_empty()) {
        // Padding optional: some tools leave it out.
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let decoded = engine
            .decode(auth.trim())
            .map_err(|err| format!("\"auth\" is not base64: {err}"))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| "\"auth\" decodes to no UTF-8 text".to_string())?;
        let Some((username, password)) = decoded.split_once(':') else {
            return Err("\"auth\" decodes to no \"user:password\" (there is no colon)".to_string());
        };
        return Ok(Some(Credentials {
            username: username.to_string(),
            password: password.to_string(),
        }));
    }
    match (text("username")?, text("password")?) {
        (Some(username), password) if !username.is_empty() => Ok(Some(Credentials {
            username,
            password: password.unwrap_or_default(),
        })),
        _ => Ok(None),
    }
}

/// The registry host of a config key, as Docker's `ConvertToHostname` has
/// it: without scheme and path.
fn key_host(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

/// The names of Docker Hub: references say `docker.io`, docker config files
/// `https://index.docker.io/v1/`.
const DOCKER_HUB: [&str; 3] = ["docker.io", "index.docker.io", "registry-1.docker.io"];

fn same_registry(a: &str, b: &str) -> bool {
    let hub = |h: &str| DOCKER_HUB.iter().any(|d| d.eq_ignore_ascii_case(h));
    a.eq_ignore_ascii_case(b) || (hub(a) && hub(b))
}

/// The CA in `dir` (`ca.crt`, else `ca.pem`): its certificates, and the file
/// they came from.
pub fn load_ca(dir: &Path) -> Result<(PathBuf, Vec<CertificateDer<'static>>), RegistryError> {
    let Some(path) = CA_FILES.iter().map(|f| dir.join(f)).find(|p| p.is_file()) else {
        return Err(RegistryError::NoCa {
            dir: dir.to_path_buf(),
        });
    };
    let pem = std::fs::read(&path).map_err(|source| RegistryError::ReadCa {
        path: path.clone(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| RegistryError::BadCa {
            path: path.clone(),
            reason: err.to_string(),
        })?;
    if certs.is_empty() {
        return Err(RegistryError::BadCa {
            path,
            reason: "no \"BEGIN CERTIFICATE\" block".into(),
        });
    }
    Ok((path, certs))
}

/// Why the pull Secret could not be made what the auth file says.
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    #[error("image pull Secret {name}: {source}")]
    Auth {
        name: String,
        #[source]
        source: RegistryError,
    },
    #[error("image pull Secret {name}: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "image pull Secret {name} exists with type {found:?}, which the kubelet does not read \
         pull credentials from (it must be {DOCKER_CONFIG_JSON_TYPE:?}, and a Secret's type \
         cannot change): delete it, or pick another --registry-auth-secret-name"
    )]
    WrongType { name: String, found: String },
    #[error("image pull Secret {name} was changed by someone else at each of {attempts} attempts")]
    Contended { name: String, attempts: usize },
}

/// What [`ensure_pull_secret`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    Created,
    Updated,
    Unchanged,
}

/// How often [`ensure_pull_secret`] tries again when the Secret changes
/// between its read and its write.
const ENSURE_ATTEMPTS: usize = 5;

/// Makes the Secret `name` of `api` a `kubernetes.io/dockerconfigjson`
/// holding `bytes`: creates it, or updates it when its content differs.
/// Runners share the namespace, so another may create, update or delete the
/// Secret meanwhile: a conflict is answered by reading it again.
pub async fn ensure_pull_secret(
    api: &Api<Secret>,
    name: &str,
    bytes: &[u8],
) -> Result<Ensured, PullSecretError> {
    let failed = |source| PullSecretError::Api {
        name: name.to_string(),
        source,
    };
    let mut wanted = Secret::default();
    wanted.metadata.name = Some(name.to_string());
    wanted.type_ = Some(DOCKER_CONFIG_JSON_TYPE.to_string());
    wanted.data = Some(BTreeMap::from([(
        DOCKER_CONFIG_JSON_KEY.to_string(),
        ByteString(bytes.to_vec()),
    )]));
    for _ in 0..ENSURE_ATTEMPTS {
        match api.create(&PostParams::default(), &wanted).await {
            Ok(_) => return Ok(Ensured::Created),
            Err(err) if is_status(&err, 409) => {}
            Err(err) => return Err(failed(err)),
        }
        // It exists: deleted again since, it is created at the next try.
        let Some(mut existing) = api.get_opt(name).await.map_err(failed)? else {
            continue;
        };
        let found = existing.type_.clone().unwrap_or_default();
        if found != DOCKER_CONFIG_JSON_TYPE {
            return Err(PullSecretError::WrongType {
                name: name.to_string(),
                found,
            });
        }
        let data = existing.data.get_or_insert_with(BTreeMap::new);
        if data.get(DOCKER_CONFIG_JSON_KEY).map(|b| b.0.as_slice()) == Some(bytes) {
            return Ok(Ensured::Unchanged);
        }
        data.insert(
            DOCKER_CONFIG_JSON_KEY.to_string(),
            ByteString(bytes.to_vec()),
        );
        // The replace carries the resourceVersion just read: a Secret changed
        // since then makes it fail with a 409, and one deleted with a 404;
        // both are read (or created) again.
        match api.replace(name, &PostParams::default(), &existing).await {
            Ok(_) => return Ok(Ensured::Updated),
            Err(err) if is_status(&err, 409) || is_status(&err, 404) => {}
            Err(err) => return Err(failed(err)),
        }
    }
    Err(PullSecretError::Contended {
        name: name.to_string(),
        attempts: ENSURE_ATTEMPTS,
    })
}

fn is_status(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

/// The pull Secret that pods of private images get: the auth file's content
/// as a `kubernetes.io/dockerconfigjson` Secret in the pod namespace.
#[derive(Debug, Clone)]
pub struct PullSecret {
    pub name: String,
    pub auth_file: PathBuf,
    /// The file content this runner last made the Secret hold: the Secret is
    /// written once, and again only when the file changes (a mounted Secret
    /// is updated in place). The lock makes concurrent pod starts wait for
    /// one write rather than race.
    ensured: Arc<tokio::sync::Mutex<Option<Vec<u8>>>>,
}

impl PullSecret {
    pub fn new(name: String, auth_file: PathBuf) -> Self {
        Self {
            name,
            auth_file,
            ensured: Arc::default(),
        }
    }

    /// Makes sure the Secret (in `secrets`' namespace) holds the auth
    /// file's current content.
    pub async fn ensure(&self, secrets: &Api<Secret>) -> Result<(), PullSecretError> {
        let bytes =
            tokio::fs::read(&self.auth_file)
                .await
                .map_err(|source| PullSecretError::Auth {
                    name: self.name.clone(),
                    source: RegistryError::ReadAuth {
                        path: self.auth_file.clone(),
                        source,
                    },
                })?;
        let mut ensured = self.ensured.lock().await;
        if ensured.as_deref() != Some(bytes.as_slice()) {
            let done = ensure_pull_secret(secrets, &self.name, &bytes).await?;
            tracing::info!(secret = %self.name, ?done, "image pull secret");
            *ensured = Some(bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<DockerConfig, RegistryError> {
        DockerConfig::parse(Path::new("/auth/.dockerconfigjson"), json.as_bytes())
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn basic(user: &str, password: &str) -> RegistryAuth {
        RegistryAuth::Basic(user.to_string(), password.to_string())
    }

    #[test]
    fn auth_and_username_password_entries_give_basic_credentials() {
        let config = parse(&format!(
            r#"{{"auths": {{
                "registry.example.com:5000": {{"auth": "{}"}},
                "other.example.com": {{"username": "bob", "password": "s3cret"}},
                "helper.example.com": {{}}
            }}, "credsStore": "desktop"}}"#,
            b64("alice:pa:ss")
        ))
        .unwrap();
        // The password is everything after the first colon.
        assert_eq!(
            config.auth_for("registry.example.com:5000"),
            basic("alice", "pa:ss")
        );
        assert_eq!(config.auth_for("other.example.com"), basic("bob", "s3cret"));
        assert_eq!(
            config.auth_for("helper.example.com"),
            RegistryAuth::Anonymous
        );
        assert_eq!(
            config.auth_for("unknown.example.com"),
            RegistryAuth::Anonymous
        );
        // Unpadded base64 is taken too.
        let unpadded = b64("u:p").trim_end_matches('=').to_string();
        let config = parse(&format!(
            r#"{{"auths": {{"r": {{"auth": "{unpadded}"}}}}}}"#
        ))
        .unwrap();
        assert_eq!(config.auth_for("r"), basic("u", "p"));
    }

    #[test]
    fn keys_match_by_host_as_docker_matches_them() {
        let config = parse(&format!(
            r#"{{"auths": {{
                "https://registry.example.com:5000/v1/": {{"auth": "{}"}},
                "http://plain.example.com": {{"auth": "{}"}},
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "Mixed.Example.com": {{"auth": "{}"}}
            }}}}"#,
            b64("a:1"),
            b64("b:2"),
            b64("hub:3"),
            b64("m:4")
        ))
        .unwrap();
        assert_eq!(
            config.auth_for("registry.example.com:5000"),
            basic("a", "1")
        );
        assert_eq!(config.auth_for("plain.example.com"), basic("b", "2"));
        assert_eq!(config.auth_for("docker.io"), basic("hub", "3"));
        assert_eq!(config.auth_for("index.docker.io"), basic("hub", "3"));
        assert_eq!(config.auth_for("mixed.example.com"), basic("m", "4"));
        // A port is part of the host: no match without it, or with another.
        assert_eq!(
            config.auth_for("registry.example.com"),
            RegistryAuth::Anonymous
        );
        assert_eq!(
            config.auth_for("registry.example.com:5001"),
            RegistryAuth::Anonymous
        );
    }

    #[test]
    fn an_exact_key_wins_over_a_normalised_one() {
        let config = parse(&format!(
            r#"{{"auths": {{"https://r.example.com/v1/": {{"auth": "{}"}}, "r.example.com": {{"auth": "{}"}}}}}}"#,
            b64("old:1"),
            b64("new:2")
        ))
        .unwrap();
        assert_eq!(config.auth_for("r.example.com"), basic("new", "2"));
    }

    #[test]
    fn a_bad_auth_file_is_a_clear_error_naming_the_file_and_what_is_wrong() {
        let cases = [
            ("not json", "the registry auth file /auth/.dockerconfigjson is not JSON: "),
            (
                r#"{"credsStore": "desktop"}"#,
                "the registry auth file /auth/.dockerconfigjson has no \"auths\" object",
            ),
            (
                r#"{"auths": ["r"]}"#,
                "the registry auth file /auth/.dockerconfigjson has no \"auths\" object",
            ),
            (
                r#"{"auths": {"r.example.com": {"auth": "%%%"}}}"#,
                "the registry auth file /auth/.dockerconfigjson, entry \"r.example.com\": \"auth\" is not base64: ",
            ),
            (
                r#"{"auths": {"r.example.com": "x"}}"#,
                "the registry auth file /auth/.dockerconfigjson, entry \"r.example.com\": not an object",
            ),
            (
                r#"{"auths": {"r.example.com": {"auth": 5}}}"#,
                "the registry auth file /auth/.dockerconfigjson, entry \"r.example.com\": \"auth\" is not a string",
            ),
        ];
        for (json, expected) in cases {
            let err = parse(json).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{json}: {err}");
        }
        let no_colon = format!(
            r#"{{"auths": {{"r.example.com": {{"auth": "{}"}}}}}}"#,
            b64("alice")
        );
        assert_eq!(
            parse(&no_colon).unwrap_err().to_string(),
            "the registry auth file /auth/.dockerconfigjson, entry \"r.example.com\": \
             \"auth\" decodes to no \"user:password\" (there is no colon)"
        );
        let missing = DockerConfig::load(Path::new("/nonexistent/.dockerconfigjson")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("reading the registry auth file /nonexistent/.dockerconfigjson: "),
            "{missing}"
        );
    }

    #[test]
    fn credentials_never_show_the_password() {
        let config = parse(&format!(
            r#"{{"auths": {{"r": {{"auth": "{}"}}}}}}"#,
            b64("u:hunter2")
        ))
        .unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn the_ca_is_ca_crt_else_ca_pem_and_must_be_pem() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_ca(dir.path()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "no CA for registry TLS in {}: neither ca.crt nor ca.pem",
                dir.path().display()
            )
        );
        std::fs::write(dir.path().join("ca.pem"), "not a certificate").unwrap();
        let err = load_ca(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("ca.pem is not a PEM certificate: no \"BEGIN CERTIFICATE\" block"),
            "{err}"
        );
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.cert.pem()).unwrap();
        let (path, certs) = load_ca(dir.path()).unwrap();
        assert_eq!((path, certs.len()), (dir.path().join("ca.pem"), 1));
        // ca.crt first.
        std::fs::write(dir.path().join("ca.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        let err = load_ca(dir.path()).unwrap_err().to_string();
        assert!(err.contains("ca.crt is not a PEM certificate"), "{err}");
    }

    #[test]
    fn images_of_the_default_registry_are_public() {
        assert!(!is_private(
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1"
        ));
        assert!(is_private("registry.example.com/fns/set-namespace:v1"));
        assert!(is_private("ghcr.io/someone/set-namespace:v1"));
    }
}
