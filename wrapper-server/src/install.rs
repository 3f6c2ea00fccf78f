//! `wrapper-server install DIR`: the init container's whole job, with no
//! shell in the image. Copies this binary and the health probe into the
//! shared emptyDir, each atomically (temp file in DIR, fsync, rename) with
//! mode 0755, so the function container never sees a half-written binary.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Names the probe is installed under: ours, and grpc-health-probe's, which
/// readiness probes written for Porch's wrapper already use.
pub const PROBE_NAMES: [&str; 2] = ["health-probe", "grpc-health-probe"];

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot find the wrapper-server binary itself: {0}")]
    SelfPath(#[source] io::Error),
    #[error("no health probe next to {wrapper}: looked for {looked:?} (pass --probe PATH)")]
    NoProbe {
        wrapper: PathBuf,
        looked: Vec<PathBuf>,
    },
    #[error("installing {from} as {to}: {source}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("creating {dir}: {source}")]
    Dir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Installs `wrapper` as `DIR/wrapper-server` and `probe` (default: a
/// `health-probe` or `grpc-health-probe` beside `wrapper`) under both
/// [`PROBE_NAMES`]. Returns the paths written.
pub fn install(
    dir: &Path,
    wrapper: Option<&Path>,
    probe: Option<&Path>,
) -> Result<Vec<PathBuf>, InstallError> {
    let wrapper = match wrapper {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().map_err(InstallError::SelfPath)?,
    };
    let probe = match probe {
        Some(p) => p.to_path_buf(),
        None => find_probe(&wrapper)?,
    };
    fs::create_dir_all(dir).map_err(|source| InstallError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    let targets = std::iter::once((&wrapper, "wrapper-server"))
        .chain(PROBE_NAMES.iter().map(|n| (&probe, *n)));
    for (from, name) in targets {
        let to = dir.join(name);
        copy_atomic(from, &to).map_err(|source| InstallError::Copy {
            from: from.clone(),
            to: to.clone(),
            source,
        })?;
        written.push(to);
    }
    Ok(written)
}

fn find_probe(wrapper: &Path) -> Result<PathBuf, InstallError> {
    let dir = wrapper.parent().unwrap_or(Path::new("."));
    let looked: Vec<PathBuf> = PROBE_NAMES.iter().map(|n| dir.join(n)).collect();
    looked
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| InstallError::NoProbe {
            wrapper: wrapper.to_path_buf(),
            looked,
        })
}

fn copy_atomic(from: &Path, to: &Path) -> io::Result<()> {
    let dir = to.parent().unwrap_or(Path::new("."));
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut src = fs::File::open(from)?;
        let mut dst = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        io::copy(&mut src, &mut dst)?;
        dst.flush()?;
        dst.set_permissions(fs::Permissions::from_mode(0o755))?;
        dst.sync_all()?;
        drop(dst);
        fs::rename(&tmp, to)?;
        // Make the rename itself durable.
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn installs_wrapper_and_probe_under_both_names() {
        let src = tempfile::tempdir().unwrap();
        let wrapper = src.path().join("wrapper-server");
        fs::write(&wrapper, b"wrapper-bytes").unwrap();
        fs::write(src.path().join("health-probe"), b"probe-bytes").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("tools");
        let written = install(&target, Some(&wrapper), None).unwrap();
        assert_eq!(written.len(), 3);
        assert_eq!(
            fs::read(target.join("wrapper-server")).unwrap(),
            b"wrapper-bytes"
        );
        for name in PROBE_NAMES {
            assert_eq!(fs::read(target.join(name)).unwrap(), b"probe-bytes");
            let mode = fs::metadata(target.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        // No temp files left behind.
        let names: Vec<_> = fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn missing_probe_is_named() {
        let src = tempfile::tempdir().unwrap();
        let wrapper = src.path().join("wrapper-server");
        fs::write(&wrapper, b"w").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let err = install(dst.path(), Some(&wrapper), None).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("health-probe") && msg.contains("--probe"),
            "{msg}"
        );
    }

    #[test]
    fn overwrites_an_existing_install() {
        let src = tempfile::tempdir().unwrap();
        let wrapper = src.path().join("w");
        let probe = src.path().join("p");
        fs::write(&wrapper, b"new").unwrap();
        fs::write(&probe, b"probe").unwrap();
        let dst = tempfile::tempdir().unwrap();
        fs::write(dst.path().join("wrapper-server"), b"old").unwrap();
        install(dst.path(), Some(&wrapper), Some(&probe)).unwrap();
        assert_eq!(fs::read(dst.path().join("wrapper-server")).unwrap(), b"new");
    }
}
