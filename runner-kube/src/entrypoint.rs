//! A function's entrypoint, read from its image's config in the registry.
//!
//! In a function pod the wrapper replaces the image's command, so the runner
//! must know what the image would have run, read as Porch's runner reads
//! it: its config's `Entrypoint`, or its `Cmd` when it has no `Entrypoint`
//! (never both: an image with both runs its `Entrypoint` alone, where
//! `docker run` would add the `Cmd`; a drop-in runs a function as Porch
//! did). Answers are cached
//! per image reference until the runner restarts, so only a function's
//! first pod costs registry requests (a tag moved to another image later
//! keeps its first entrypoint meanwhile). Private images are read with the
//! credentials and the CA of [`RegistrySettings`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::config::ConfigFile;
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use rustls::pki_types::CertificateDer;

use super::registry::{self, DockerConfig, RegistryError, RegistrySettings};

/// Why an image's entrypoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EntrypointError {
    #[error("{image:?} is not an image reference: {source}")]
    Reference {
        image: String,
        #[source]
        source: oci_client::ParseError,
    },
    // The client's errors say little at their top ("error sending request
    // for url", "Not authorized"): the causes below (TLS verification,
    // connection refused) and what to do about the usual ones are what a
    // user can act on, so the message has them.
    #[error(
        "reading the config of image {image:?} from its registry: {}{}",
        chain(source),
        hint(source)
    )]
    Registry {
        image: String,
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry answers that it has no such image (manifest or
    /// repository unknown): the call asked for a function that does not
    /// exist, NOT_FOUND.
    #[error("image {image:?} is not in its registry: {}", chain(source))]
    NotInRegistry {
        image: String,
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    #[error("credentials for image {image:?}: {source}")]
    Credentials {
        image: String,
        #[source]
        source: RegistryError,
    },
    #[error("the config of image {image:?} is not an image config: {source}")]
    Config {
        image: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("image {image:?} has neither Entrypoint nor Cmd: nothing to run as the function")]
    Empty { image: String },
}

/// Whether the registry says the image does not exist: `MANIFEST_UNKNOWN`
/// or `NAME_UNKNOWN` (the distribution spec's codes for a tag or repository
/// it has not), or a bare 404.
fn not_in_registry(err: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    match err {
        E::ImageManifestNotFoundError(_) | E::ServerError { code: 404, .. } => true,
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

/// What to do about the usual registry errors, after their message.
fn hint(err: &oci_client::errors::OciDistributionError) -> &'static str {
    use oci_client::errors::OciDistributionError as E;
    match err {
        E::UnauthorizedError { .. } => {
            " (HTTP 401 Unauthorized: the registry wants credentials that the runner has not, \
             or not right: with --enable-private-registries, an entry for the registry in the \
             --registry-auth-secret-path file)"
        }
        _ if chain(err).contains("UnknownIssuer") => {
            " (the registry's TLS certificate is not signed by a trusted CA: \
             --enable-private-registries-tls trusts the ca.crt or ca.pem in --tls-secret-path)"
        }
        _ => "",
    }
}

/// `err`'s message followed by those of its causes that add something.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(err) = cause {
        let more = err.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = err.source();
    }
    text
}

/// Reads and caches image entrypoints.
pub struct Entrypoints {
    insecure: Vec<String>,
    /// Trusted for registry TLS besides the system's roots.
    ca: Vec<CertificateDer<'static>>,
    /// The docker config JSON with the credentials for private images.
    auth_file: Option<PathBuf>,
    /// The registry client, and the auth file content it was made under:
    /// a client keeps the first credentials it is given for a registry, so
    /// new content (a rotated password) needs a new client.
    client: Mutex<(Option<Vec<u8>>, Client)>,
    /// Image reference → entrypoint.
    by_reference: Mutex<HashMap<String, Vec<String>>>,
    /// The plain-HTTP client for registries on a loopback address.
    loopback_client: std::sync::OnceLock<Client>,
}

pub use runner_core::image::is_loopback;

/// A client that speaks plain HTTP to every registry.
fn loopback_client() -> Client {
    Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..client_config(&[], &[])
    })
}

impl Entrypoints {
    /// Anonymous, trusting the system's roots; `insecure_registries`:
    /// registries (`host:port`) spoken to over plain HTTP, as a registry on
    /// loopback usually is.
    pub fn new(insecure_registries: Vec<String>) -> Self {
        let settings = RegistrySettings {
            insecure: insecure_registries,
            ..RegistrySettings::default()
        };
        let client = Client::new(client_config(&settings.insecure, &[]));
        Self::with_client(settings, Vec::new(), client)
    }

    /// With the credentials and the CA of `settings`, both read now, so that
    /// a bad file stops the runner at its start; the auth file is read again
    /// at each lookup of a private image, to follow its changes.
    pub fn with_settings(settings: &RegistrySettings) -> Result<Self, RegistryError> {
        if let Some(path) = &settings.auth_file {
            DockerConfig::load(path)?;
        }
        let ca = match &settings.ca_dir {
            Some(dir) => registry::load_ca(dir)?.1,
            None => Vec::new(),
        };
        let client = Client::try_from(client_config(&settings.insecure, &ca))
            .map_err(RegistryError::Client)?;
        Ok(Self::with_client(settings.clone(), ca, client))
    }

    fn with_client(
        settings: RegistrySettings,
        ca: Vec<CertificateDer<'static>>,
        client: Client,
    ) -> Self {
        Self {
            insecure: settings.insecure,
            ca,
            auth_file: settings.auth_file,
            client: Mutex::new((None, client)),
            by_reference: Mutex::new(HashMap::new()),
            loopback_client: std::sync::OnceLock::new(),
        }
    }

    /// The argv that `image` runs.
    pub async fn of(&self, image: &str) -> Result<Vec<String>, EntrypointError> {
        if let Some(found) = self.cached(image) {
            return Ok(found);
        }
        let reference: Reference = image.parse().map_err(|source| EntrypointError::Reference {
            image: image.to_string(),
            source,
        })?;
        let (client, auth) = self.client_for(image, &reference).await.map_err(|source| {
            EntrypointError::Credentials {
                image: image.to_string(),
                source,
            }
        })?;
        let mut pulled = client.pull_manifest_and_config(&reference, &auth).await;
        // A registry on a loopback address that does not speak TLS is read
        // over plain HTTP, HTTPS having failed at the transport (as Docker
        // and go-containerregistry do).
        let registry = reference.resolve_registry();
        if matches!(pulled, Err(OciDistributionError::RequestError(_)))
            && is_loopback(registry)
            && !self.insecure.iter().any(|r| r == registry)
        {
            let http = self.loopback_client.get_or_init(loopback_client);
            let over_http = http.pull_manifest_and_config(&reference, &auth).await;
            // Plain HTTP's answer where it has one (the config, or no such
            // image); else HTTPS's failure says more (a registry speaking
            // TLS that is not trusted answers plain HTTP with a 400).
            if over_http.as_ref().map_or_else(not_in_registry, |_| true) {
                pulled = over_http;
            }
        }
        let (_, _digest, config) = pulled.map_err(|source| {
            if not_in_registry(&source) {
                EntrypointError::NotInRegistry {
                    image: image.to_string(),
                    source,
                }
            } else {
                EntrypointError::Registry {
                    image: image.to_string(),
                    source,
                }
            }
        })?;
        let argv = argv_of(image, &config)?;
        self.by_reference
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(image.to_string(), argv.clone());
        Ok(argv)
    }

    /// The client and the credentials to read `image` with: the auth file's
    /// for its registry when the image is private and there is a file,
    /// anonymous otherwise.
    async fn client_for(
        &self,
        image: &str,
        reference: &Reference,
    ) -> Result<(Client, RegistryAuth), RegistryError> {
        let Some(path) = self
            .auth_file
            .as_ref()
            .filter(|_| registry::is_private(image))
        else {
            let current = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            return Ok((current.1.clone(), RegistryAuth::Anonymous));
        };
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|source| RegistryError::ReadAuth {
                path: path.clone(),
                source,
            })?;
        let auth = DockerConfig::parse(path, &bytes)?.auth_for(reference.resolve_registry());
        let mut current = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0.as_deref() != Some(bytes.as_slice()) {
            let client = Client::try_from(client_config(&self.insecure, &self.ca))
                .map_err(RegistryError::Client)?;
            *current = (Some(bytes), client);
        }
        Ok((current.1.clone(), auth))
    }

    /// Entrypoints known in advance, so that tests need no registry.
    #[cfg(test)]
    pub(crate) fn with_known<'a>(
        known: impl IntoIterator<Item = (&'a str, &'a [&'a str])>,
    ) -> Self {
        let entrypoints = Self::new(Vec::new());
        entrypoints
            .by_reference
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(known.into_iter().map(|(image, argv)| {
                (
                    image.to_string(),
                    argv.iter().map(|a| a.to_string()).collect(),
                )
            }));
        entrypoints
    }

    fn cached(&self, image: &str) -> Option<Vec<String>> {
        self.by_reference
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(image)
            .cloned()
    }
}

/// A registry client speaking plain HTTP to `insecure`, trusting `ca`
/// besides the system's roots.
fn client_config(insecure: &[String], ca: &[CertificateDer<'static>]) -> ClientConfig {
    // rustls on ring, as the rest of the runner: the registry client takes
    // the process' default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ClientConfig {
        protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
        extra_root_certificates: ca
            .iter()
            .map(|der| Certificate {
                encoding: CertificateEncoding::Der,
                data: der.to_vec(),
            })
            .collect(),
        ..ClientConfig::default()
    }
}

/// `Entrypoint`, else `Cmd`, from an image config (JSON), as Porch's
/// runner (`func/internal/podmanager.go`) takes them.
fn argv_of(image: &str, config: &str) -> Result<Vec<String>, EntrypointError> {
    let file: ConfigFile =
        serde_json::from_str(config).map_err(|source| EntrypointError::Config {
            image: image.to_string(),
            source,
        })?;
    let runtime = file.config.unwrap_or_default();
    let argv: Vec<String> = match runtime.entrypoint {
        Some(entrypoint) if !entrypoint.is_empty() => entrypoint,
        _ => runtime.cmd.unwrap_or_default(),
    };
    if argv.is_empty() {
        return Err(EntrypointError::Empty {
            image: image.to_string(),
        });
    }
    Ok(argv)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(runtime: &str) -> String {
        format!(
            r#"{{"architecture":"amd64","os":"linux","config":{runtime},"rootfs":{{"type":"layers","diff_ids":[]}}}}"#
        )
    }

    #[test]
    fn entrypoint_else_cmd_as_porch_runs_them() {
        let both = config(r#"{"Entrypoint":["/fn","--x"],"Cmd":["a"]}"#);
        assert_eq!(argv_of("img", &both).unwrap(), ["/fn", "--x"]);
        let empty_entrypoint = config(r#"{"Entrypoint":[],"Cmd":["/fn"]}"#);
        assert_eq!(argv_of("img", &empty_entrypoint).unwrap(), ["/fn"]);
        let cmd_only = config(r#"{"Cmd":["/bin/sh","-c","cat"]}"#);
        assert_eq!(argv_of("img", &cmd_only).unwrap(), ["/bin/sh", "-c", "cat"]);
        let entrypoint_only = config(r#"{"Entrypoint":["function"]}"#);
        assert_eq!(argv_of("img", &entrypoint_only).unwrap(), ["function"]);
    }

    #[test]
    fn loopback_registries_are_told_apart() {
        for loopback in [
            "localhost:5000",
            "LOCALHOST",
            "127.0.0.1:5000",
            "127.8.9.10",
            "[::1]:5000",
        ] {
            assert!(is_loopback(loopback), "{loopback}");
        }
        for remote in [
            "ghcr.io",
            "registry.example.com:5000",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[2001:db8::1]:5000",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn an_image_with_nothing_to_run_is_a_clear_error() {
        let err = argv_of("example.com/fn:v1", &config("{}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "image \"example.com/fn:v1\" has neither Entrypoint nor Cmd: nothing to run as the function"
        );
        let err = argv_of("img", "not json").unwrap_err();
        assert!(matches!(err, EntrypointError::Config { .. }), "{err}");
    }
}
