//! A function's entrypoint, read from its image's config in the registry.
//!
//! In a function pod the wrapper replaces the image's command, so the runner
//! must know what the image would have run: its config's `Entrypoint`
//! followed by its `Cmd` (Docker's rule: `Cmd` is the default arguments of
//! an `Entrypoint`, or the command when there is none). Answers are cached
//! per image reference until the runner restarts, so only a function's
//! first pod costs registry requests (a tag moved to another image later
//! keeps its first entrypoint meanwhile).

use std::collections::HashMap;
use std::sync::Mutex;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::config::ConfigFile;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

/// Why an image's entrypoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EntrypointError {
    #[error("{image:?} is not an image reference: {source}")]
    Reference {
        image: String,
        #[source]
        source: oci_client::ParseError,
    },
    #[error("reading the config of image {image:?} from its registry: {source}")]
    Registry {
        image: String,
        #[source]
        source: oci_client::errors::OciDistributionError,
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

/// Reads and caches image entrypoints.
pub struct Entrypoints {
    client: Client,
    auth: RegistryAuth,
    /// Image reference → entrypoint.
    by_reference: Mutex<HashMap<String, Vec<String>>>,
}

impl Entrypoints {
    /// `insecure_registries`: registries (`host:port`) spoken to over plain
    /// HTTP, as a registry on loopback usually is.
    pub fn new(insecure_registries: Vec<String>) -> Self {
        // rustls on ring, as the rest of the runner: the registry client
        // takes the process' default provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure_registries),
            ..ClientConfig::default()
        });
        Self {
            client,
            auth: RegistryAuth::Anonymous,
            by_reference: Mutex::new(HashMap::new()),
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
        let (_, _digest, config) = self
            .client
            .pull_manifest_and_config(&reference, &self.auth)
            .await
            .map_err(|source| EntrypointError::Registry {
                image: image.to_string(),
                source,
            })?;
        let argv = argv_of(image, &config)?;
        self.by_reference
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(image.to_string(), argv.clone());
        Ok(argv)
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(image)
            .cloned()
    }
}

/// `Entrypoint` then `Cmd` from an image config (JSON).
fn argv_of(image: &str, config: &str) -> Result<Vec<String>, EntrypointError> {
    let file: ConfigFile =
        serde_json::from_str(config).map_err(|source| EntrypointError::Config {
            image: image.to_string(),
            source,
        })?;
    let runtime = file.config.unwrap_or_default();
    let argv: Vec<String> = runtime
        .entrypoint
        .unwrap_or_default()
        .into_iter()
        .chain(runtime.cmd.unwrap_or_default())
        .collect();
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
    fn entrypoint_then_cmd_as_docker_runs_them() {
        let both = config(r#"{"Entrypoint":["/fn","--x"],"Cmd":["a"]}"#);
        assert_eq!(argv_of("img", &both).unwrap(), ["/fn", "--x", "a"]);
        let cmd_only = config(r#"{"Cmd":["/bin/sh","-c","cat"]}"#);
        assert_eq!(argv_of("img", &cmd_only).unwrap(), ["/bin/sh", "-c", "cat"]);
        let entrypoint_only = config(r#"{"Entrypoint":["function"]}"#);
        assert_eq!(argv_of("img", &entrypoint_only).unwrap(), ["function"]);
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
