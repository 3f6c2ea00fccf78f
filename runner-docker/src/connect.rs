//! Connecting to the Docker engine, and agreeing on the API version to
//! speak to it.

use std::time::Duration;

use bollard::Docker;

use crate::errors::DockerSetupError;

/// Connects to the engine of `DOCKER_HOST` (else the local socket) and
/// agrees on an API version with it; an error if none answers within
/// `timeout`.
///
/// bollard speaks the newest API, which older engines refuse, and its way
/// to agree on one asks `/version`, which dockerd answers only after asking
/// its components (containerd, runc) theirs: 7–12 ms, the largest single
/// cost of a warm `eval --keep-warm`. A Unix socket's engine is asked
/// `/_ping` instead, whose `Api-Version` header names its version (as the
/// docker CLI agrees on one) in a fraction of a millisecond; a remote
/// engine, or one whose ping names none, is asked `/version`.
pub async fn connect(timeout: Duration) -> Result<Docker, DockerSetupError> {
    connect_to(&engine_host(), timeout).await
}

/// The engine's address: `DOCKER_HOST`, else the local socket.
pub fn engine_host() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into())
}

/// Whether the engine at `host` is on this machine (a Unix socket): only
/// such an engine can bind-mount this host's paths.
pub fn is_local(host: &str) -> bool {
    host.starts_with("unix://")
}

/// [`connect`] to the engine at `host` (`DOCKER_HOST`'s form).
pub(super) async fn connect_to(host: &str, timeout: Duration) -> Result<Docker, DockerSetupError> {
    if !is_local(host) {
        let docker = Docker::connect_with_host(host).map_err(DockerSetupError::Engine)?;
        return within(timeout, docker.negotiate_version()).await;
    }
    let path = host.trim_start_matches("unix://");
    let pinged = tokio::time::timeout(timeout, ping_api_version(path))
        .await
        .map_err(|_| DockerSetupError::Engine(bollard::errors::Error::RequestTimeoutError))?
        .map_err(|err| DockerSetupError::Engine(bollard::errors::Error::IOError { err }))?;
    let newest = bollard::API_DEFAULT_VERSION;
    match pinged {
        Some(theirs) => {
            let version = if theirs < *newest { theirs } else { *newest };
            Docker::connect_with_unix(host, 120, &version).map_err(DockerSetupError::Engine)
        }
        None => {
            let docker =
                Docker::connect_with_unix(host, 120, newest).map_err(DockerSetupError::Engine)?;
            within(timeout, docker.negotiate_version()).await
        }
    }
}

/// `GET /_ping` on the engine's socket at `path`: the API version its
/// `Api-Version` header names, `None` if it names none (HTTP/1.1 by hand:
/// bollard's `ping` gives the body only).
async fn ping_api_version(path: &str) -> std::io::Result<Option<bollard::ClientVersion>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|err| std::io::Error::new(err.kind(), format!("{path}: {err}")))?;
    conn.write_all(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
        .await?;
    // The headers are a few hundred bytes; the body ("OK") is not needed.
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if status.is_empty() {
        return Err(std::io::Error::other(format!(
            "{path}: the socket closed without an HTTP answer to /_ping"
        )));
    }
    if status.split(' ').nth(1) != Some("200") {
        return Err(std::io::Error::other(format!(
            "{path}: /_ping answered {:?}",
            status.trim()
        )));
    }
    Ok(lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("api-version"))
        .and_then(|(_, value)| {
            let (major, minor) = value.trim().split_once('.')?;
            Some(bollard::ClientVersion {
                major_version: major.parse().ok()?,
                minor_version: minor.parse().ok()?,
            })
        }))
}

/// `fut`, an engine request, within `timeout`.
async fn within<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, DockerSetupError> {
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| DockerSetupError::Engine(bollard::errors::Error::RequestTimeoutError))?
        .map_err(DockerSetupError::Engine)
}
