//! `function-runner serve` resolving a request's tag constraint against
//! the image's registry (issue 41): a real registry (Debian's
//! `docker-registry` on loopback, started here) holding several tags of
//! one repository, pushed here as small manifests; the runner on the
//! process backend, whose `--process-functions` directory has a script per
//! tag that says which tag ran. The runner reaches the registry through a
//! proxy that counts the tag list requests, so that a warm call can be
//! seen not to list again.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use e2e_tests::{example_request, prerequisite, require_command, start_registry, Wrapper};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The tags pushed: the catalog's `vX.Y.Z`, a prerelease and a moving tag.
const TAGS: &[&str] = &[
    "v0.1.0",
    "v0.2.0",
    "v0.2.1",
    "v0.3.0",
    "v0.4.0",
    "v0.4.2",
    "v0.5.0-rc.1",
    "latest",
];

/// Pushes a one-layer image (a few bytes: the registry does not look
/// inside) to `repository` under each of `tags`.
async fn push_tags(repository: &str, tags: &[&str]) {
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let layer = ImageLayer::oci_v1(b"krm-runtime tag constraint test".to_vec(), None);
    let config = Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None);
    for tag in tags {
        let reference: Reference = format!("{repository}:{tag}").parse().unwrap();
        client
            .push(
                &reference,
                std::slice::from_ref(&layer),
                config.clone(),
                &RegistryAuth::Anonymous,
                None,
            )
            .await
            .unwrap_or_else(|err| panic!("pushing {reference}: {err}"));
    }
}

/// A TCP proxy on loopback to `upstream` that counts the tag list requests
/// (`/tags/list` in what clients send); its tasks end with the test's
/// runtime.
async fn counting_proxy(upstream: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let counted = counted.clone();
            tokio::spawn(async move {
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = async {
                    const NEEDLE: &[u8] = b"/tags/list";
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut tail: Vec<u8> = Vec::new();
                    loop {
                        let n = match client_read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        // The bytes kept from the last read let a path cut
                        // across two reads count once.
                        let mut seen = std::mem::take(&mut tail);
                        seen.extend_from_slice(&buf[..n]);
                        let found = seen.windows(NEEDLE.len()).filter(|w| *w == NEEDLE).count();
                        counted.fetch_add(found, Ordering::SeqCst);
                        tail = seen[seen.len().saturating_sub(NEEDLE.len() - 1)..].to_vec();
                        if server_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = server_write.shutdown().await;
                };
                let down = async {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    let _ = client_write.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    (addr, count)
}

/// A `--process-functions` directory: `fn:<tag>` for each tag, which says
/// on stderr which it is and passes its input through, and `fn` (what an
/// untagged image runs).
fn functions_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in TAGS
        .iter()
        .map(|tag| format!("fn:{tag}"))
        .chain(["fn".to_string()])
    {
        let path = dir.path().join(&name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho \"ran {name}\" >&2\nexec cat\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn request(image: &str, tag: &str) -> proto::pb::EvaluateFunctionRequest {
    proto::pb::EvaluateFunctionRequest {
        tag: tag.into(),
        ..example_request(image)
    }
}

#[tokio::test]
async fn a_request_tag_constraint_runs_the_highest_matching_tag_of_the_registry() {
    let Some(()) = prerequisite(require_command("docker-registry", &["--version"])) else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (_registry, registry_addr) = start_registry().unwrap();
    push_tags(&format!("{registry_addr}/fns/fn"), TAGS).await;
    let (proxy, listings) = counting_proxy(registry_addr).await;
    let image = format!("{proxy}/fns/fn");

    let functions = functions_dir();
    let runner = Wrapper::start_runner(&[
        "--process-functions",
        &functions.path().to_string_lossy(),
        "--metrics-port",
        "0",
        // Plain HTTP at once: no TLS attempt through the proxy.
        "--insecure-registries",
        &proxy,
    ])
    .unwrap();
    let mut client = runner.client().await.unwrap();
    let mut call = async |tag: &str| {
        client
            .evaluate_function(request(&image, tag))
            .await
            .map(|resp| String::from_utf8_lossy(&resp.into_inner().log).into_owned())
    };

    // The highest tag meeting `~0.4` (>=0.4.0 <0.5.0; the prerelease is
    // not taken), listed once.
    let log = call("~0.4").await.unwrap();
    assert!(log.contains("ran fn:v0.4.2"), "{log}");
    let listed = listings.load(Ordering::SeqCst);
    assert!(listed >= 1, "the registry's tags were not listed");

    // Warm: another constraint of the same image lists nothing.
    let log = call(">=v0.1.0 <v0.3.0").await.unwrap();
    assert!(log.contains("ran fn:v0.2.1"), "{log}");
    assert_eq!(listings.load(Ordering::SeqCst), listed);

    // Nothing matches: NOT_FOUND naming the constraint and the tags seen.
    let status = call("~0.9").await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    let message = status.message();
    assert!(
        message.contains("\"~0.9\"") && message.contains("v0.4.2") && message.contains("latest"),
        "{message}"
    );
    assert_eq!(listings.load(Ordering::SeqCst), listed);

    // An exact tag, or an image with its own tag, lists nothing and runs
    // as before.
    call("v0.3.0").await.unwrap();
    let tagged = client
        .evaluate_function(request(&format!("{image}:v0.1.0"), "~0.4"))
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&tagged.get_ref().log).into_owned();
    assert!(log.contains("ran fn:v0.1.0"), "{log}");
    assert_eq!(listings.load(Ordering::SeqCst), listed);

    // The resolution is in the call's log.
    let logs = runner.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("resolved the request's tag constraint")
                && l.contains("~0.4")
                && l.contains("v0.4.2")
                && l.contains("cached=false")),
        "{logs}"
    );
    assert!(
        logs.lines()
            .any(|l| l.contains("resolved=v0.2.1") && l.contains("cached=true")),
        "{logs}"
    );

    // A registry that does not answer: UNAVAILABLE naming it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = closed.local_addr().unwrap().to_string();
    drop(closed);
    let status = client
        .evaluate_function(request(&format!("{nowhere}/fns/fn"), "~0.4"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains(&nowhere), "{}", status.message());
}

/// A private registry (TLS with its own CA, a password): the tags are
/// listed with the registry flags' credentials and CA, as the runner reads
/// private images; without the credentials the call is refused
/// FAILED_PRECONDITION, naming the registry.
#[tokio::test]
async fn a_private_registrys_tags_are_listed_with_the_registry_flags() {
    use e2e_tests::{start_private_registry, REGISTRY_PASSWORD, REGISTRY_USER};
    use oci_client::client::{Certificate, CertificateEncoding};

    let Some(()) = prerequisite(require_command("docker-registry", &["--version"])) else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let private = start_private_registry(std::net::IpAddr::from([127, 0, 0, 1])).unwrap();
    let image = format!("{}/fns/fn", private.addr);
    let with_ca = Client::try_from(ClientConfig {
        extra_root_certificates: vec![Certificate {
            encoding: CertificateEncoding::Pem,
            data: private.ca_pem().unwrap().into_bytes(),
        }],
        ..ClientConfig::default()
    })
    .unwrap();
    let password = RegistryAuth::Basic(REGISTRY_USER.into(), REGISTRY_PASSWORD.into());
    let layer = ImageLayer::oci_v1(b"krm-runtime private tag test".to_vec(), None);
    let config = Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None);
    for tag in ["v1.0.0", "v1.2.0", "v2.0.0"] {
        let reference: Reference = format!("{image}:{tag}").parse().unwrap();
        with_ca
            .push(
                &reference,
                std::slice::from_ref(&layer),
                config.clone(),
                &password,
                None,
            )
            .await
            .unwrap();
    }

    let functions = functions_dir();
    let script = functions.path().join("fn:v1.2.0");
    std::fs::write(&script, "#!/bin/sh\necho \"ran fn:v1.2.0\" >&2\nexec cat\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = functions.path().to_string_lossy().into_owned();
    let auth_file = private.auth_file.to_string_lossy().into_owned();
    let tls_dir = private.tls_dir.to_string_lossy().into_owned();
    let with_credentials = Wrapper::start_runner(&[
        "--process-functions",
        &dir,
        "--metrics-port",
        "0",
        "--enable-private-registries",
        "--registry-auth-secret-path",
        &auth_file,
        "--enable-private-registries-tls",
        "--tls-secret-path",
        &tls_dir,
    ])
    .unwrap();
    let resp = with_credentials
        .client()
        .await
        .unwrap()
        .evaluate_function(request(&image, "^1"))
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&resp.get_ref().log).into_owned();
    assert!(log.contains("ran fn:v1.2.0"), "{log}");

    // The CA, but no credentials for the registry: it refuses (401).
    let empty_auth = functions.path().join("auth.json");
    std::fs::write(&empty_auth, "{\"auths\": {}}\n").unwrap();
    let without = Wrapper::start_runner(&[
        "--process-functions",
        &dir,
        "--metrics-port",
        "0",
        "--enable-private-registries",
        "--registry-auth-secret-path",
        &empty_auth.to_string_lossy(),
        "--enable-private-registries-tls",
        "--tls-secret-path",
        &tls_dir,
    ])
    .unwrap();
    let status = without
        .client()
        .await
        .unwrap()
        .evaluate_function(request(&image, "^1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains(&private.addr) && status.message().contains("Not authorized"),
        "{}",
        status.message()
    );
}
