//! Function entrypoints read from a real registry: Debian's
//! `docker-registry` on loopback, started here, with images built here
//! (`FROM scratch`) and pushed by the Docker engine.

#![allow(clippy::unwrap_used)]

use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

use e2e_tests::{
    bin, build_image, docker, output_within, prerequisite, require_registry,
    start_private_registry, start_registry, PrivateRegistry, REGISTRY_PASSWORD, REGISTRY_USER,
};
use runner_kube::entrypoint::{EntrypointError, Entrypoints};
use runner_kube::registry::RegistrySettings;

#[tokio::test]
async fn entrypoints_come_from_the_image_config_in_the_registry() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (mut registry, addr) = start_registry().unwrap();
    let id = std::process::id();
    let with_both = format!("{addr}/fns/example-fn:{id}");
    registry.images = vec![with_both.clone()];

    build_image(
        &with_both,
        "FROM scratch\nCOPY example-fn /example-fn\nENTRYPOINT [\"/example-fn\"]\nCMD [\"--verbose\"]\n",
        &["example-fn"],
    )
    .unwrap();
    docker(&["push", "-q", &with_both]).unwrap();

    // Porch's rule: the Entrypoint alone, its Cmd dropped.
    let entrypoints = Entrypoints::new(vec![addr.clone()]);
    assert_eq!(entrypoints.of(&with_both).await.unwrap(), ["/example-fn"]);
    // A registry on loopback is read over plain HTTP without being named
    // insecure, as Porch's registry client reads it.
    let unnamed = Entrypoints::new(Vec::new());
    assert_eq!(unnamed.of(&with_both).await.unwrap(), ["/example-fn"]);
    // Again, from the cache: the registry is gone.
    let _ = registry.child.kill();
    let _ = registry.child.wait();
    assert_eq!(entrypoints.of(&with_both).await.unwrap(), ["/example-fn"]);
    let fresh = Entrypoints::new(vec![addr.clone()]);
    let err = fresh.of(&with_both).await.unwrap_err();
    assert!(matches!(err, EntrypointError::Registry { .. }), "{err}");
    assert!(err.to_string().contains(&with_both), "{err}");
}

#[tokio::test]
async fn an_image_with_nothing_to_run_is_refused_by_name() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (mut registry, addr) = start_registry().unwrap();
    let image = format!("{addr}/fns/nothing:{}", std::process::id());
    registry.images = vec![image.clone()];
    build_image(
        &image,
        "FROM scratch\nCOPY example-fn /example-fn\n",
        &["example-fn"],
    )
    .unwrap();
    docker(&["push", "-q", &image]).unwrap();
    let err = Entrypoints::new(vec![addr]).of(&image).await.unwrap_err();
    assert!(matches!(err, EntrypointError::Empty { .. }), "{err}");
}

/// A private registry on loopback: TLS with its own CA, and a password.
/// Returns it with `image` (holding `example-fn`) pushed.
fn private_registry_with_image(name: &str) -> (PrivateRegistry, String) {
    let mut private = start_private_registry(IpAddr::from([127, 0, 0, 1])).unwrap();
    let image = format!("{}/fns/{name}:{}", private.addr, std::process::id());
    private.registry.images = vec![image.clone()];
    build_image(
        &image,
        "FROM scratch\nCOPY example-fn /example-fn\nENTRYPOINT [\"/example-fn\"]\nCMD [\"--verbose\"]\n",
        &["example-fn"],
    )
    .unwrap();
    private.push(&image).unwrap();
    (private, image)
}

#[tokio::test]
async fn private_images_are_read_over_tls_with_the_ca_and_the_auth_files_credentials() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (private, image) = private_registry_with_image("private-fn");
    let settings = RegistrySettings {
        auth_file: Some(private.auth_file.clone()),
        ca_dir: Some(private.tls_dir.clone()),
        ..RegistrySettings::default()
    };
    let entrypoints = Entrypoints::with_settings(&settings).unwrap();
    assert_eq!(entrypoints.of(&image).await.unwrap(), ["/example-fn"]);

    // The auth file is read again for each new image: a changed password
    // is used at once (and here, refused).
    let other = format!("{image}-other");
    docker(&["tag", &image, &other]).unwrap();
    private.push(&other).unwrap();
    let wrong = std::fs::read_to_string(&private.auth_file)
        .unwrap()
        .replace(
            &b64(&format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}")),
            &b64(&format!("{REGISTRY_USER}:wrong")),
        );
    std::fs::write(&private.auth_file, wrong).unwrap();
    let err = entrypoints.of(&other).await.unwrap_err().to_string();
    assert!(err.contains("HTTP 401 Unauthorized"), "{err}");
    docker(&["rmi", &other]).unwrap();
}

#[tokio::test]
async fn without_credentials_or_without_the_ca_the_error_says_which() {
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let (private, image) = private_registry_with_image("refused-fn");
    let no_credentials = RegistrySettings {
        ca_dir: Some(private.tls_dir.clone()),
        ..RegistrySettings::default()
    };
    let err = Entrypoints::with_settings(&no_credentials)
        .unwrap()
        .of(&image)
        .await
        .unwrap_err();
    assert!(matches!(err, EntrypointError::Registry { .. }), "{err}");
    let err = err.to_string();
    assert!(
        err.contains(&image) && err.contains("HTTP 401 Unauthorized"),
        "{err}"
    );
    let no_ca = RegistrySettings {
        auth_file: Some(private.auth_file.clone()),
        ..RegistrySettings::default()
    };
    let err = Entrypoints::with_settings(&no_ca)
        .unwrap()
        .of(&image)
        .await
        .unwrap_err()
        .to_string();
    // rustls' verdict, and what to do about it.
    assert!(
        err.contains("invalid peer certificate: UnknownIssuer")
            && err.contains("--enable-private-registries-tls"),
        "{err}"
    );
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn serve_refuses_a_bad_auth_file_or_a_missing_ca_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let auth_file = dir.path().join("config.json");
    std::fs::write(
        &auth_file,
        r#"{"auths": {"r.example.com": {"auth": "bm9jb2xvbg=="}}}"#,
    )
    .unwrap();
    let serve = |extra: &[&str]| {
        let out = output_within(
            Command::new(bin("function-runner"))
                .args([
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--metrics-port",
                    "0",
                ])
                .args(["--backend", "kube", "--wrapper-server-image", "w"])
                .args(extra),
            None,
            Duration::from_secs(30),
        )
        .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let auth = auth_file.to_string_lossy();
    let err = serve(&[
        "--enable-private-registries",
        "--registry-auth-secret-path",
        &auth,
    ]);
    assert!(
        err.contains(&format!(
            "private registries: the registry auth file {auth}, entry \"r.example.com\": \
             \"auth\" decodes to no \"user:password\" (there is no colon)"
        )),
        "{err}"
    );
    std::fs::write(&auth_file, r#"{"auths": {}}"#).unwrap();
    let tls = dir.path().join("tls");
    let err = serve(&[
        "--enable-private-registries",
        "--registry-auth-secret-path",
        &auth,
        "--enable-private-registries-tls",
        "--tls-secret-path",
        &tls.to_string_lossy(),
    ]);
    assert!(
        err.contains(&format!(
            "no CA for registry TLS in {}: neither ca.crt nor ca.pem",
            tls.display()
        )),
        "{err}"
    );
}
