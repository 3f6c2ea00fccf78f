//! Quantities and resources, fingerprints, the runner lock and the socket
//! directory's checks: what needs no Docker engine.

use std::time::Duration;

use super::host::{fingerprint, lock_file, lock_socket_dir, make_socket_dir, private_dir};
use super::resources::{parse_quantity, Resources};
use runner_core::config::TemplateOverrides;

#[test]
fn quantities() {
    for (text, want) in [
        ("512Mi", 512.0 * 1024.0 * 1024.0),
        ("1G", 1e9),
        ("500m", 0.5),
        ("1.5", 1.5),
        ("2e3", 2000.0),
        ("128974848", 128974848.0),
        ("1Ki", 1024.0),
    ] {
        assert_eq!(parse_quantity(text), Some(want), "{text}");
    }
    for bad in ["", "Mi", "12Q", "-1", "1..2", "abc"] {
        assert_eq!(parse_quantity(bad), None, "{bad}");
    }
}

#[test]
fn resources_from_overrides() {
    let overrides: TemplateOverrides = serde_json::from_value(serde_json::json!({
        "container": {
            "resources": {
                "limits": {"memory": "64Mi", "cpu": "500m"},
                "requests": {"memory": "32Mi", "cpu": 1}
            },
            "env": [{"name": "A", "value": "b"}, {"name": "EMPTY"}]
        }
    }))
    .unwrap();
    let r = Resources::from_overrides(Some(&overrides)).unwrap();
    assert_eq!(r.memory, Some(64 << 20));
    assert_eq!(r.memory_reservation, Some(32 << 20));
    assert_eq!(r.nano_cpus, Some(500_000_000));
    assert_eq!(r.cpu_shares, Some(1024));
    assert_eq!(r.env, vec!["A=b".to_string(), "EMPTY=".to_string()]);
    assert_eq!(
        Resources::from_overrides(None).unwrap(),
        Resources::default()
    );

    let bad: TemplateOverrides = serde_json::from_value(serde_json::json!({
        "container": {"resources": {"limits": {"memory": "lots"}}}
    }))
    .unwrap();
    let err = Resources::from_overrides(Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("limits.memory") && err.contains("lots"),
        "{err}"
    );
    let from: TemplateOverrides = serde_json::from_value(serde_json::json!({
        "container": {"env": [{"name": "S", "valueFrom": {"secretKeyRef": {}}}]}
    }))
    .unwrap();
    let err = Resources::from_overrides(Some(&from))
        .unwrap_err()
        .to_string();
    assert!(err.contains("env S") && err.contains("valueFrom"), "{err}");
}

#[test]
fn fingerprints_are_stable_and_tell_shapes_apart() {
    // Fixed (FNV-1a, checked by hand): a kept-warm container made by one
    // build is found by the next.
    assert_eq!(fingerprint(&["a", "b"]), "ab40d7820d408076");
    assert_ne!(fingerprint(&["ab", ""]), fingerprint(&["a", "b"]));
}

#[test]
fn a_live_lock_is_told_from_a_free_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let held = lock_file(&path).unwrap();
    let err = lock_file(&path).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::WOULDBLOCK.raw_os_error())
    );
    drop(held);
    lock_file(&path).unwrap();
}

#[test]
fn the_socket_dir_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sockets");
    private_dir(&root).unwrap();
    let mode = std::fs::metadata(&root).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    // Loosened by someone: tightened again.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    private_dir(&root).unwrap();
    let mode = std::fs::metadata(&root).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    assert!(private_dir(&file).is_err());
}

/// #30 item 1: a socket directory is taken back (no longer writable by
/// others) and must then hold the socket alone.
#[test]
fn a_socket_directory_is_taken_back_and_must_hold_the_socket_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("1");
    make_socket_dir(&dir).unwrap();
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o777
    );
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("wrapper.sock")).unwrap();
    lock_socket_dir(&dir, "wrapper.sock").unwrap();
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o755
    );
    std::fs::write(dir.join("big"), b"x").unwrap();
    let err = lock_socket_dir(&dir, "wrapper.sock").unwrap_err();
    assert!(err.contains("\"big\"") && err.contains("not used"), "{err}");
}

/// An engine on a Unix socket that answers each request with
/// `answer(path)` (status, extra headers, body) and records the paths
/// asked. Real engines older than the client's API are not at hand; this
/// one says what such an engine says.
async fn fake_engine(
    dir: &std::path::Path,
    answer: fn(&str) -> (u16, &'static str, &'static str),
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let path = dir.join("docker.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&req).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let (status, headers, body) = answer(&path);
                seen.lock().unwrap().push(path);
                let resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    (format!("unix://{}", path.display()), asked)
}

#[tokio::test]
async fn a_local_engine_s_version_comes_from_its_ping() {
    let dir = tempfile::tempdir().unwrap();
    let (host, asked) = fake_engine(dir.path(), |path| match path {
        // What dockerd 19.03 says: API 1.40, older than bollard's.
        "/_ping" => (200, "Api-Version: 1.40\r\n", "OK"),
        _ => (500, "", r#"{"message":"not expected"}"#),
    })
    .await;
    let docker = super::connect::connect_to(&host, Duration::from_secs(5)).await;
    let asked_now = asked.lock().unwrap().clone();
    let docker = docker.unwrap_or_else(|err| panic!("{err}; asked {asked_now:?}"));
    assert_eq!(docker.client_version().to_string(), "1.40");
    assert_eq!(asked_now, ["/_ping"], "no /version asked");
}

#[tokio::test]
async fn an_engine_whose_ping_names_no_version_is_asked_it() {
    let dir = tempfile::tempdir().unwrap();
    let (host, asked) = fake_engine(dir.path(), |path| {
        if path == "/_ping" {
            (200, "", "OK")
        } else if path.ends_with("/version") {
            (200, "", r#"{"Version":"19.03.15","ApiVersion":"1.39"}"#)
        } else {
            (500, "", r#"{"message":"not expected"}"#)
        }
    })
    .await;
    let docker = super::connect::connect_to(&host, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(docker.client_version().to_string(), "1.39");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].ends_with("/version"), "{asked:?}");
}

#[tokio::test]
async fn no_engine_is_an_error_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let host = format!("unix://{}", dir.path().join("none.sock").display());
    let err = super::connect::connect_to(&host, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("no Docker engine answers"),
        "{err}"
    );
    // A socket whose server is no engine.
    let (host, _) = fake_engine(dir.path(), |_| (404, "", "page not found")).await;
    let err = super::connect::connect_to(&host, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/_ping answered"), "{err}");
}
