//! How the OTLP exporters reach the collector over TLS: the SDK's tonic
//! exporter trusts no root unless told to, and its hyper client speaks plain
//! HTTP only. So an `https` endpoint gets the system's roots or, as the
//! specification says, `OTEL_EXPORTER_OTLP_(SIGNAL_)CERTIFICATE`'s (PEM);
//! the HTTP exporters get a hyper client over rustls (ring, as tonic and
//! kube use here).

use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::hyper::HyperClient;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;

/// An OTLP transport setting that cannot be honoured.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct TransportError {
    pub var: String,
    pub reason: String,
}

/// The signal's variable (`OTEL_EXPORTER_OTLP_TRACES_X`), else the general
/// one (`OTEL_EXPORTER_OTLP_X`): its name and value.
fn var(signal: &str, what: &str) -> Option<(String, String)> {
    [
        format!("OTEL_EXPORTER_OTLP_{signal}_{what}"),
        format!("OTEL_EXPORTER_OTLP_{what}"),
    ]
    .into_iter()
    .find_map(|name| {
        std::env::var(&name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (name, v))
    })
}

/// The endpoint the signal's exporter uses, as the variables say.
pub(crate) fn endpoint(signal: &str) -> Option<String> {
    var(signal, "ENDPOINT").map(|(_, v)| v)
}

fn is_https(signal: &str) -> bool {
    endpoint(signal).is_some_and(|e| e.trim().to_ascii_lowercase().starts_with("https://"))
}

/// `OTEL_EXPORTER_OTLP_(SIGNAL_)TIMEOUT` in milliseconds (the
/// specification's default: 10 s).
fn timeout(signal: &str) -> Duration {
    var(signal, "TIMEOUT")
        .and_then(|(_, v)| v.trim().parse().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// A certificate file's PEM text and its certificates.
type Roots = (Vec<u8>, Vec<CertificateDer<'static>>);

/// The certificates of `OTEL_EXPORTER_OTLP_(SIGNAL_)CERTIFICATE`, if set.
fn extra_roots(signal: &str) -> Result<Option<Roots>, TransportError> {
    let Some((name, path)) = var(signal, "CERTIFICATE") else {
        return Ok(None);
    };
    let refused = |reason: String| TransportError {
        var: name.clone(),
        reason,
    };
    let pem = std::fs::read(&path).map_err(|e| refused(format!("reading {path}: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refused(format!("{path}: not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(refused(format!("{path}: no certificate in it")));
    }
    Ok(Some((pem, certs)))
}

/// The TLS settings of the gRPC exporter: `None` for a plain `http`
/// endpoint with no certificate named.
pub(crate) fn grpc_tls(
    signal: &str,
) -> Result<Option<tonic::transport::ClientTlsConfig>, TransportError> {
    let extra = extra_roots(signal)?;
    if !is_https(signal) && extra.is_none() {
        return Ok(None);
    }
    // The certificate named is what the server is checked against; without
    // one, the system's roots (tonic refuses to connect if there are none).
    let config = match extra {
        Some((pem, _)) => tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(pem)),
        None => tonic::transport::ClientTlsConfig::new().with_native_roots(),
    };
    Ok(Some(config))
}

/// The HTTP exporters' client: plain HTTP or HTTPS (the system's roots and
/// the certificate variable's), with the timeout variable.
pub(crate) fn http_client(
    signal: &str,
) -> Result<HyperClient<HttpsConnector<HttpConnector>>, TransportError> {
    let mut roots = rustls::RootCertStore::empty();
    // The system's roots: one unreadable is skipped, as tonic does.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    for cert in extra_roots(signal)?
        .map(|(_, certs)| certs)
        .unwrap_or_default()
    {
        roots.add(cert).map_err(|e| TransportError {
            var: format!(
                "OTEL_EXPORTER_OTLP_{signal}_CERTIFICATE or OTEL_EXPORTER_OTLP_CERTIFICATE"
            ),
            reason: e.to_string(),
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError {
            var: "TLS".into(),
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(HyperClient::new(connector, timeout(signal), None))
}
