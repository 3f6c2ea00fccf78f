//! render's tag listers (the binary's `tags` module, compiled in here)
//! against what they read: a registry (Debian's `docker-registry` on
//! loopback, plain HTTP, and one with TLS and a password), images pushed
//! to it here as manifests; and the local Docker engine, with an image
//! built here `FROM scratch`. Then `tag:` resolved through them.

#![allow(clippy::unwrap_used)]

#[path = "../src/bin/function-runner/tags.rs"]
mod tags;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use e2e_tests::{
    build_image_with_files, docker, prerequisite, remove_images, require_command, require_docker,
    start_private_registry, start_registry, REGISTRY_PASSWORD, REGISTRY_USER,
};
use krm_kpt::tag::{resolve_function_image, TagLister};
use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tags::{DockerCredentials, LocalLister, RegistryLister};

fn require_registry_binary() -> anyhow::Result<()> {
    require_command("docker-registry", &["--version"])
}

/// Pushes a one-layer image (a few bytes: the registry does not look
/// inside) to `repository` under each of `tags`.
async fn push_tags(client: &Client, auth: &RegistryAuth, repository: &str, tags: &[&str]) {
    let layer = ImageLayer::oci_v1(b"krm-runtime tag listing test".to_vec(), None);
    let config = Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None);
    for tag in tags {
        let reference: Reference = format!("{repository}:{tag}").parse().unwrap();
        client
            .push(
                &reference,
                std::slice::from_ref(&layer),
                config.clone(),
                auth,
                None,
            )
            .await
            .unwrap_or_else(|err| panic!("pushing {reference}: {err}"));
    }
}

fn set(tags: &[impl AsRef<str>]) -> BTreeSet<String> {
    tags.iter().map(|t| t.as_ref().to_string()).collect()
}

#[tokio::test]
async fn the_registry_lister_reads_a_loopback_registry_over_http_and_a_private_one_with_the_docker_config(
) {
    let Some(()) = prerequisite(require_registry_binary()) else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();

    // A registry without TLS, as a developer runs one: HTTPS fails, plain
    // HTTP answers.
    let (_registry, addr) = start_registry().unwrap();
    let repository = format!("{addr}/fns/set-things");
    let pushed = ["v0.1.0", "v0.2.0", "v0.2.1-rc.1", "latest"];
    let plain = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    push_tags(&plain, &RegistryAuth::Anonymous, &repository, &pushed).await;

    let lister = RegistryLister::with_credentials(DockerCredentials::default()).unwrap();
    assert_eq!(lister.name(), "regclient");
    assert_eq!(set(&lister.list(&repository).await.unwrap()), set(&pushed));
    let err = lister
        .list(&format!("{addr}/fns/never-pushed"))
        .await
        .unwrap_err();
    // Plain HTTP's answer, not HTTPS's failure to connect.
    assert!(
        err.contains("repository name not known to registry")
            && err.starts_with("Registry error: url http://"),
        "{err}"
    );

    // Through kpt's resolution: the prerelease is not taken by `~0.2`.
    let listers: Vec<Arc<dyn TagLister>> = vec![Arc::new(lister)];
    let resolved = resolve_function_image(&repository, "~0.2", &listers)
        .await
        .unwrap();
    assert_eq!(resolved.image, format!("{repository}:v0.2.0"));
    assert_eq!(
        resolve_function_image(&repository, "~0.3", &listers).await,
        Err("no tag could be found matching the version constraint \"~0.3\"".into())
    );

    // A registry with TLS (its own CA) and a password: the credentials come
    // from `$DOCKER_CONFIG/config.json`, the CA from `SSL_CERT_FILE`, as
    // kpt's (Go's) client takes them. No other test of this binary speaks
    // TLS, so the environment set here changes nothing for them.
    let private = start_private_registry(IpAddr::from([127, 0, 0, 1])).unwrap();
    let private_repository = format!("{}/fns/private-things", private.addr);
    let ca_pem = private.ca_pem().unwrap();
    let with_ca = Client::try_from(ClientConfig {
        extra_root_certificates: vec![Certificate {
            encoding: CertificateEncoding::Pem,
            data: ca_pem.into_bytes(),
        }],
        ..ClientConfig::default()
    })
    .unwrap();
    let password = RegistryAuth::Basic(REGISTRY_USER.into(), REGISTRY_PASSWORD.into());
    push_tags(
        &with_ca,
        &password,
        &private_repository,
        &["v1.0.0", "v1.1.0"],
    )
    .await;

    std::env::set_var("SSL_CERT_FILE", private.tls_dir.join("ca.crt"));
    std::env::set_var("DOCKER_CONFIG", private.auth_file.parent().unwrap());
    let from_config = RegistryLister::new().unwrap();
    let anonymous = RegistryLister::with_credentials(DockerCredentials::default()).unwrap();
    std::env::remove_var("DOCKER_CONFIG");
    std::env::remove_var("SSL_CERT_FILE");

    assert_eq!(
        set(&from_config.list(&private_repository).await.unwrap()),
        set(&["v1.0.0", "v1.1.0"])
    );
    let refused = anonymous.list(&private_repository).await.unwrap_err();
    assert!(refused.starts_with("Not authorized"), "{refused}");
}

/// Removes the images when the test ends, however it ends.
struct Images(Vec<String>);

impl Drop for Images {
    fn drop(&mut self) {
        remove_images(&self.0);
    }
}

#[tokio::test]
async fn the_local_lister_lists_the_engines_tags_of_the_repository() {
    let Some(()) = prerequisite(require_docker()) else {
        return;
    };
    // Not a Docker Hub name: the engine's reference filter does not match
    // those by the full name kpt gives (`docker.io/library/…`).
    let repository = format!("localhost/krm-tag-listing-{}", std::process::id());
    let tags = ["v0.1.0", "v0.2.0", "v0.3.0-rc.1", "latest"];
    let images = Images(tags.iter().map(|t| format!("{repository}:{t}")).collect());
    build_image_with_files(&images.0[0], "FROM scratch\nCMD [\"/nothing\"]\n", &[], &[]).unwrap();
    for image in &images.0[1..] {
        docker(&["tag", &images.0[0], image]).unwrap();
    }
    // Another repository's tag is not listed.
    let other = Images(vec![format!("{repository}-other:v9.9.9")]);
    docker(&["tag", &images.0[0], &other.0[0]]).unwrap();

    let lister = LocalLister::new();
    assert_eq!(lister.name(), "local-docker");
    assert_eq!(set(&lister.list(&repository).await.unwrap()), set(&tags));
    assert!(lister
        .list(&format!("{repository}-none"))
        .await
        .unwrap()
        .is_empty());

    let listers: Vec<Arc<dyn TagLister>> = vec![Arc::new(lister)];
    let resolved = resolve_function_image(&repository, ">=0.1, <1", &listers)
        .await
        .unwrap();
    assert_eq!(resolved.image, format!("{repository}:v0.2.0"));
}

#[tokio::test]
async fn credentials_are_found_as_regclient_finds_them() {
    let auth = |user: &str, pass: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    };
    let config = format!(
        r#"{{"auths": {{
            "https://index.docker.io/v1/": {{"auth": "{hub}"}},
            "ghcr.io": {{"username": "gh-user", "password": "gh-pass"}},
            "http://localhost:5000": {{"auth": "{local}"}},
            "https://example.com/": {{"auth": "{example}"}},
            "https://other.example.com/v1/": {{"auth": "{example}"}},
            "quay.io/some/repo": {{"auth": "{example}"}},
            "empty.example.com": {{}}
        }}}}"#,
        hub = auth("hub-user", "hub-pass\u{0}"),
        local = auth("local-user", "local:pass"),
        example = auth("ex-user", "ex-pass"),
    );
    let credentials = DockerCredentials::parse(&config);
    let basic = |u: &str, p: &str| RegistryAuth::Basic(u.into(), p.into());
    let cases = [
        ("docker.io", basic("hub-user", "hub-pass"), false),
        ("ghcr.io", basic("gh-user", "gh-pass"), false),
        ("localhost:5000", basic("local-user", "local:pass"), true),
        ("example.com", basic("ex-user", "ex-pass"), false),
        // A key with a path names no registry (regclient's rule).
        ("quay.io", RegistryAuth::Anonymous, false),
        ("other.example.com", RegistryAuth::Anonymous, false),
        // No credentials in the entry: anonymous.
        ("empty.example.com", RegistryAuth::Anonymous, false),
        ("unknown.example.com", RegistryAuth::Anonymous, false),
    ];
    for (registry, expected, plain_http) in cases {
        assert_eq!(
            credentials.auth_for(registry).await,
            (expected, plain_http),
            "{registry}"
        );
    }
    // A helper that is not installed gives nothing: anonymous.
    let helpers = DockerCredentials::parse(
        r#"{"credHelpers": {"gcr.io": "krm-test-missing"}, "credsStore": "krm-test-missing"}"#,
    );
    for registry in ["gcr.io", "docker.io"] {
        assert_eq!(
            helpers.auth_for(registry).await,
            (RegistryAuth::Anonymous, false)
        );
    }
    // What is not a docker config is no credentials.
    assert_eq!(
        DockerCredentials::parse("not json"),
        DockerCredentials::default()
    );

    use std::path::{Path, PathBuf};
    assert_eq!(
        tags::config_path(Some("/cfg".as_ref()), Some(Path::new("/home/u"))),
        Some(PathBuf::from("/cfg/config.json"))
    );
    assert_eq!(
        tags::config_path(Some("".as_ref()), Some(Path::new("/home/u"))),
        Some(PathBuf::from("/home/u/.docker/config.json"))
    );
    assert_eq!(tags::config_path(None, None), None);
}
