//! The probe against TLS servers, with a CA and certificates made by rcgen.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

struct Pki {
    _dir: tempfile::TempDir,
    ca_pem: String,
    ca: PathBuf,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_key: PathBuf,
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).expect("write");
    p
}

/// A CA; a server certificate for `localhost` and `probe.test` (no IP address); a
/// client certificate.
fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "health-probe test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().expect("key");
    let mut sp = CertificateParams::new(vec!["localhost".to_string(), "probe.test".to_string()])
        .expect("params");
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = sp.signed_by(&server_key, &issuer).expect("server cert");

    let client_key = KeyPair::generate().expect("key");
    let mut cp = CertificateParams::new(Vec::<String>::new()).expect("params");
    cp.distinguished_name
        .push(DnType::CommonName, "probe client");
    cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = cp.signed_by(&client_key, &issuer).expect("client cert");
    let other_key = KeyPair::generate().expect("key");

    let d = dir.path();
    Pki {
        ca_pem: ca_cert.pem(),
        ca: write(d, "ca.pem", &ca_cert.pem()),
        server_cert_pem: server_cert.pem(),
        server_key_pem: server_key.serialize_pem(),
        client_cert: write(d, "client.pem", &client_cert.pem()),
        client_key: write(d, "client.key", &client_key.serialize_pem()),
        other_key: write(d, "other.key", &other_key.serialize_pem()),
        _dir: dir,
    }
}

/// A TLS health server; it requires a client certificate from the CA when `mtls`.
async fn tls_server(pki: &Pki, mtls: bool) -> String {
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(
        &pki.server_cert_pem,
        &pki.server_key_pem,
    ));
    if mtls {
        tls = tls.client_ca_root(Certificate::from_pem(&pki.ca_pem));
    }
    let router = Server::builder()
        .tls_config(tls)
        .expect("tls config")
        .add_service(standard_health().await);
    serve(router).await
}

fn port(addr: &str) -> &str {
    addr.rsplit(':').next().expect("port")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[tokio::test]
async fn tls_with_ca_cert() {
    let pki = pki();
    let addr = tls_server(&pki, false).await;
    let localhost = format!("localhost:{}", port(&addr));
    let o = probe(&["-addr", &localhost, "-tls", "-tls-ca-cert", s(&pki.ca)]).await;
    expect(&o, 0, "status: SERVING");
    let o = probe(&[
        "-addr",
        &localhost,
        "-tls",
        "-tls-ca-cert",
        s(&pki.ca),
        "-service",
        "svc.Down",
    ])
    .await;
    expect(&o, 4, "service unhealthy (responded with \"NOT_SERVING\")");
}

#[tokio::test]
async fn tls_without_the_ca_fails_to_connect() {
    let pki = pki();
    let addr = tls_server(&pki, false).await;
    let localhost = format!("localhost:{}", port(&addr));
    // The system's roots do not know the test CA.
    let o = probe(&["-addr", &localhost, "-tls"]).await;
    expect_prefix(
        &o,
        2,
        &format!("error: failed to connect service at \"{localhost}\": authentication handshake failed: "),
    );
    assert!(o.stderr.contains("certificate"), "{o:#?}");
}

#[tokio::test]
async fn tls_no_verify() {
    let pki = pki();
    let addr = tls_server(&pki, false).await;
    let o = probe(&["-addr", &addr, "-tls", "-tls-no-verify"]).await;
    expect(&o, 0, "status: SERVING");
}

#[tokio::test]
async fn tls_server_name() {
    let pki = pki();
    let addr = tls_server(&pki, false).await;
    // The certificate has no IP address in it.
    let o = probe(&["-addr", &addr, "-tls", "-tls-ca-cert", s(&pki.ca)]).await;
    expect_prefix(
        &o,
        2,
        &format!(
            "error: failed to connect service at \"{addr}\": authentication handshake failed: "
        ),
    );
    let o = probe(&[
        "-addr",
        &addr,
        "-tls",
        "-tls-ca-cert",
        s(&pki.ca),
        "-tls-server-name",
        "probe.test",
    ])
    .await;
    expect(&o, 0, "status: SERVING");
    let o = probe(&[
        "-addr",
        &addr,
        "-tls",
        "-tls-ca-cert",
        s(&pki.ca),
        "-tls-server-name",
        "other.test",
    ])
    .await;
    assert_eq!(o.code, 2, "{o:#?}");
}

#[tokio::test]
async fn mutual_tls() {
    let pki = pki();
    let addr = tls_server(&pki, true).await;
    let localhost = format!("localhost:{}", port(&addr));
    let o = probe(&[
        "-addr",
        &localhost,
        "-tls",
        "-tls-ca-cert",
        s(&pki.ca),
        "-tls-client-cert",
        s(&pki.client_cert),
        "-tls-client-key",
        s(&pki.client_key),
    ])
    .await;
    expect(&o, 0, "status: SERVING");

    // Without a client certificate the server refuses the connection, and says why.
    let o = probe(&["-addr", &localhost, "-tls", "-tls-ca-cert", s(&pki.ca)]).await;
    expect_prefix(
        &o,
        2,
        &format!("error: failed to connect service at \"{localhost}\": "),
    );
    assert!(o.stderr.contains("alert"), "{o:#?}");
}

#[tokio::test]
async fn tls_against_plaintext_and_plaintext_against_tls() {
    let pki = pki();
    let plain = health_server().await;
    let o = probe(&["-addr", &plain, "-tls", "-tls-no-verify"]).await;
    expect_prefix(
        &o,
        2,
        &format!(
            "error: failed to connect service at \"{plain}\": authentication handshake failed: "
        ),
    );

    let tls = tls_server(&pki, false).await;
    let o = probe(&["-addr", &tls]).await;
    expect_prefix(
        &o,
        2,
        &format!("error: failed to connect service at \"{tls}\": server did not answer with the HTTP/2 server preface"),
    );
    assert!(o.stderr.contains("does it need -tls?"), "{o:#?}");
}

#[tokio::test]
async fn bad_tls_files_are_exit_1() {
    let pki = pki();
    let missing = pki.ca.with_file_name("missing.pem");
    let o = probe(&["-addr", "x:1", "-tls", "-tls-ca-cert", s(&missing)]).await;
    expect(
        &o,
        1,
        &format!(
            "failed to initialize tls credentials. error=failed to load root CA certificates from file ({m}) error=open {m}: no such file or directory",
            m = s(&missing)
        ),
    );

    // A PEM file with no certificate in it.
    let o = probe(&["-addr", "x:1", "-tls", "-tls-ca-cert", s(&pki.client_key)]).await;
    expect(
        &o,
        1,
        &format!(
            "failed to initialize tls credentials. error=no root CA certs parsed from file {}",
            s(&pki.client_key)
        ),
    );

    // A key that does not belong to the certificate.
    let o = probe(&[
        "-addr",
        "x:1",
        "-tls",
        "-tls-ca-cert",
        s(&pki.ca),
        "-tls-client-cert",
        s(&pki.client_cert),
        "-tls-client-key",
        s(&pki.other_key),
    ])
    .await;
    expect_prefix(
        &o,
        1,
        "failed to initialize tls credentials. error=failed to load tls client cert/key pair. error=",
    );
}
