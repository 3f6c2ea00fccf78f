//! Where the rendered resources go: back into the package, each to its
//! package's directory (files that held resources and hold none now
//! deleted), or, for kpt's `-o`, as one text with paths made relative to
//! the root package.

use std::io::Write;
use std::path::{Path, PathBuf};

use krm_yaml::package::{self, annotations as ann, kyaml, PackageError, Placed, Progress};
use krm_yaml::Node;

use crate::eval::{self, Error};

/// The rendered resources as kpt writes them for `-o` (its
/// `adjustRelPath`, then kyaml's `ByteWriter` keeping the reader's
/// annotations): each path made relative to the root package (a new
/// resource's default path first), in both path annotations, and the
/// package-path annotation removed.
pub(super) fn output_text(root: &Path, resources: Vec<Node>) -> Result<String, Error> {
    let mut items = Vec::with_capacity(resources.len());
    for mut item in resources {
        let pkg = kyaml::annotation(&item, ann::PACKAGE_PATH)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.to_path_buf());
        let rel_pkg = match pkg.strip_prefix(root) {
            Ok(r) if !r.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
            _ => ".".to_owned(),
        };
        let path = kyaml::annotation(&item, ann::PATH)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_PATH))
            .map(str::to_owned)
            .unwrap_or_else(|| package::default_path(&kyaml::meta(&item)));
        // Go's `filepath.Join(subpackage, filepath.Clean(path))`.
        let rel = package::clean_path(&format!("{rel_pkg}/{path}"));
        for key in [ann::PATH, ann::LEGACY_PATH] {
            kyaml::set_annotation(&mut item, key, &rel)
                .map_err(|e| Error::BadOutput(e.to_string()))?;
        }
        kyaml::clear_annotation(&mut item, ann::PACKAGE_PATH);
        items.push(item);
    }
    Ok(eval::resource_list_text(&mut items))
}

/// Writes the rendered resources back, each to its package's directory,
/// and (`prune`) deletes the files that held resources and hold none now.
pub(super) fn write_back(
    root: &Path,
    resources: Vec<Node>,
    files_read: &[String],
    prune: bool,
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let mut placed = Vec::with_capacity(resources.len());
    for mut item in resources {
        let pkg = kyaml::annotation(&item, ann::PACKAGE_PATH)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.to_path_buf());
        let rel_pkg = pkg
            .strip_prefix(root)
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let path = kyaml::annotation(&item, ann::PATH)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_PATH))
            .map(str::to_owned)
            .unwrap_or_else(|| package::default_path(&kyaml::meta(&item)));
        let index = kyaml::annotation(&item, ann::INDEX)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_INDEX))
            .and_then(|i| i.trim().parse::<i64>().ok());
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        let rel = package::clean_path(&join(
            &rel_pkg.to_string_lossy(),
            path.trim_start_matches('/'),
        ));
        if rel == ".." || rel.starts_with("../") {
            return Err(PackageError::OutsidePackage(rel).into());
        }
        eval::clear_annotations(&mut item, |k| ann::is_kpt(k) || k == ann::PACKAGE_PATH);
        placed.push(Placed {
            path: rel,
            index,
            node: item,
            wide,
        });
    }
    let mut progress = Progress::new(Some(stderr));
    let (_, kept) = package::write_package(root, placed, &mut progress)?;
    if prune {
        package::delete_gone(root, files_read, &kept)?;
    }
    Ok(())
}

/// `rel/path`, or `path` for the root.
pub(super) fn join(rel: &str, path: &str) -> String {
    if rel.is_empty() {
        path.to_owned()
    } else {
        format!("{rel}/{path}")
    }
}
