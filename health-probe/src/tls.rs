//! The rustls client configuration for `-tls`, built the way grpc-health-probe builds its
//! `tls.Config`: optional client key pair, then either no verification, the given CA
//! file, or the system's roots.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring::{cipher_suite as suite, kx_group, sign};
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::SigningKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use webpki::ring as alg;

use crate::flags::Options;
use crate::oserror::io_error;

/// Where Go's crypto/x509 looks for the system's trusted roots on Linux.
const CERT_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];
const CERT_DIRS: &[&str] = &["/etc/ssl/certs", "/etc/pki/tls/certs"];

/// Signature algorithms accepted in certificates and handshakes: ECDSA P-256/P-384,
/// RSA PKCS#1 and PSS. (ring's default list also has Ed25519, rare in certificates;
/// leaving it out keeps its code out of the binary.)
static SIGNATURE_ALGORITHMS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        alg::ECDSA_P256_SHA256,
        alg::ECDSA_P256_SHA384,
        alg::ECDSA_P384_SHA256,
        alg::ECDSA_P384_SHA384,
        alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        alg::RSA_PKCS1_2048_8192_SHA256,
        alg::RSA_PKCS1_2048_8192_SHA384,
        alg::RSA_PKCS1_2048_8192_SHA512,
        alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
        ),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[alg::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[alg::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[alg::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

#[derive(Debug)]
struct Ring;

impl SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for Ring {
    /// Client keys: RSA (PKCS#1 or PKCS#8) or ECDSA (SEC1 or PKCS#8).
    fn load_private_key(
        &self,
        der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        if let Ok(rsa) = sign::RsaSigningKey::new(&der) {
            return Ok(Arc::new(rsa));
        }
        sign::any_ecdsa_type(&der)
            .map_err(|_| rustls::Error::General("the private key is neither RSA nor ECDSA".into()))
    }
}

/// ring's provider, trimmed to what every TLS server offers: AES-GCM suites (TLS 1.3
/// and 1.2), P-256 and P-384 key exchange (P-256 is mandatory in TLS 1.3), RSA and
/// ECDSA signatures. ChaCha20 and X25519/Ed25519 are left out to keep the static
/// binary small.
fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            suite::TLS13_AES_128_GCM_SHA256,
            suite::TLS13_AES_256_GCM_SHA384,
            suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ],
        kx_groups: vec![kx_group::SECP256R1, kx_group::SECP384R1],
        signature_verification_algorithms: SIGNATURE_ALGORITHMS,
        secure_random: &Ring,
        key_provider: &Ring,
    }
}

/// Builds the client configuration; the error reads like the Go tool's
/// (`failed to load root CA certificates from file (ca.pem) error=...`).
pub fn client_config(o: &Options) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;

    let client_auth = if !o.tls_client_cert.is_empty() && !o.tls_client_key.is_empty() {
        Some(
            load_key_pair(&o.tls_client_cert, &o.tls_client_key)
                .map_err(|e| format!("failed to load tls client cert/key pair. error={e}"))?,
        )
    } else {
        None
    };

    let builder = if o.tls_no_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
    } else if !o.tls_ca_cert.is_empty() {
        builder.with_root_certificates(load_ca(&o.tls_ca_cert)?)
    } else {
        builder.with_root_certificates(system_roots())
    };

    let mut cfg = match client_auth {
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("failed to load tls client cert/key pair. error={e}"))?,
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// The name to verify the server's certificate against (and send as SNI unless it is
/// an IP address).
pub fn server_name(name: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(name.to_string())
        .map_err(|e| format!("invalid TLS server name {name:?}: {e}"))
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("open {path}: {}", io_error(&e)))
}

type KeyPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn load_key_pair(cert: &str, key: &str) -> Result<KeyPair, String> {
    let certs = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{cert}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "tls: failed to find any PEM data in certificate input ({cert})"
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|e| format!("tls: failed to find any PEM data in key input ({key}): {e}"))?;
    Ok((certs, key))
}

fn load_ca(path: &str) -> Result<RootCertStore, String> {
    let pem = std::fs::read(path).map_err(|e| {
        format!(
            "failed to load root CA certificates from file ({path}) error=open {path}: {}",
            io_error(&e)
        )
    })?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots
        .add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
    if added == 0 {
        return Err(format!("no root CA certs parsed from file {path}"));
    }
    Ok(roots)
}

fn add_pem_file(roots: &mut RootCertStore, path: &Path) -> usize {
    match std::fs::read(path) {
        Ok(pem) => {
            roots
                .add_parsable_certificates(
                    CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok),
                )
                .0
        }
        Err(_) => 0,
    }
}

/// The system's trusted roots, found where Go finds them (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`, then the usual bundle files and directories). Loaded only when
/// `-tls` is given without `-tls-ca-cert` or `-tls-no-verify`.
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let files: Vec<PathBuf> = match std::env::var_os("SSL_CERT_FILE") {
        Some(f) => vec![f.into()],
        None => CERT_FILES.iter().map(PathBuf::from).collect(),
    };
    for f in files {
        if add_pem_file(&mut roots, &f) > 0 {
            break;
        }
    }
    let dirs: Vec<PathBuf> = match std::env::var_os("SSL_CERT_DIR") {
        Some(d) => std::env::split_paths(&d).collect(),
        // The default directories hold the same certificates as the bundle files.
        None if !roots.is_empty() => Vec::new(),
        None => CERT_DIRS.iter().map(PathBuf::from).collect(),
    };
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                add_pem_file(&mut roots, &entry.path());
            }
        }
    }
    roots
}

/// `-tls-no-verify`: accept any server certificate (Go's `InsecureSkipVerify`), while
/// still checking the handshake signatures made with it.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
