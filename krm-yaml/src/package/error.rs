//! Why a package could not be read or written ([`PackageError`]), and the
//! helper that turns an I/O error on a path into one.

use std::io;
use std::path::{Path, PathBuf};

use crate::quote::go_quote;

/// Why a package could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("function must not modify resources outside of package: resource has path {0}")]
    OutsidePackage(String),
    #[error(
        "resource at path {} and index {} already exists",
        go_quote(path),
        go_quote(index)
    )]
    Duplicate { path: String, index: String },
    #[error("resource input to function has mismatched legacy and internal {0} annotations")]
    Mismatched(&'static str),
    #[error("{path}: invalid index annotation {}", go_quote(value))]
    BadIndex { path: String, value: String },
    #[error("package paths may not be absolute paths")]
    Absolute(String),
    /// A path of the package that leads out of it through a symlink (a
    /// directory on its way, or the file itself): nothing is written (or
    /// deleted) outside the package.
    #[error(
        "{path}: not {verb}: it would leave the package through the symlink {link} -> {}",
        target.display()
    )]
    Escapes {
        /// The path, relative to the package.
        path: String,
        /// `written` or `deleted`.
        verb: &'static str,
        /// The symlink, relative to the package.
        link: String,
        /// What the symlink says.
        target: PathBuf,
    },
    /// kyaml's `MalformedYAMLError`, after the file's path.
    #[error("{path}: MalformedYAMLError: {message}")]
    Malformed { path: String, message: String },
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}
