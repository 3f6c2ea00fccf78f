//! This host's side of the pods: the private socket directories, the
//! runner's lock file, instance names and ids, and the fingerprints
//! kept-warm pods are found by.

use std::path::Path;

/// The socket directory must be this user's alone: it is in a shared
/// temporary directory, and whoever can enter it can call the functions.
pub(super) fn private_dir(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(path)
    {
        Ok(()) => {}
        Err(err) => return Err(err.to_string()),
    }
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "owned by uid {}, not by this user: another user could reach the functions' sockets",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A pod's socket directory: writable by the function's user (65534) until
/// its wrapper has made the socket there ([`lock_socket_dir`]); the parent
/// directory (this user's alone) keeps everyone else out.
pub(super) fn make_socket_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
}

/// Takes the socket directory back once the socket is there: the function
/// container writes nothing more on the host (connecting needs only the
/// socket, which the wrapper made connectable). The wrapper runs no function
/// before this (its pre-spawned processes wait until the directory is not
/// writable), and calls come after.
///
/// Then the directory must hold the socket alone: anything else there was
/// written by the container before the lock (a wrapper image older than
/// the runner, which starts pre-spawned functions at once), and the pod is
/// not used.
pub(super) fn lock_socket_dir(path: &Path, socket: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("taking the socket directory back (mode 0755): {e}"))?;
    let entries = std::fs::read_dir(path).map_err(|e| format!("reading it: {e}"))?;
    let mut others: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != socket)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    others.sort();
    Err(format!(
        "the function container wrote {others:?} there before the runner took it back \
         (a wrapper image older than the runner starts pre-spawned functions at once): not used"
    ))
}

/// Opens the directory `path` and takes an exclusive `flock` on it without
/// waiting: `EWOULDBLOCK` if a live process holds it. A directory rather
/// than a file in it: temporary-directory cleaners leave locked directories
/// alone, and there is no file to lose.
pub(super) fn lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    Ok(file)
}

/// A runner directory's name: [`instance_id`]'s eight hex digits.
pub(super) fn is_instance_name(name: &str) -> bool {
    name.len() == 8
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Eight hex digits, from the clock and the process id: short (the socket
/// paths must fit 108 bytes) and unique among the runners of one host.
pub(super) fn instance_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mixed = fingerprint(&[&nanos.to_string(), &std::process::id().to_string()]);
    mixed[..8].to_string()
}

/// FNV-1a over the parts: a stable name for a container's shape (the same
/// from one build to the next, unlike std's hasher).
pub(super) fn fingerprint(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}
