//! Quantities and resources, fingerprints, the runner lock and the socket
//! directory's checks: what needs no Docker engine.

use super::host::{fingerprint, lock_file, lock_socket_dir, make_socket_dir, private_dir};
use super::resources::{parse_quantity, Resources};
use crate::config::TemplateOverrides;

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
