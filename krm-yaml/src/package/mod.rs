//! Packages as kpt reads and writes them: a package directory (or a stream
//! of YAML documents) read into resources ([`Document`]: a yaml.v3-style
//! node tree with its comments, see [`crate`]), and a function's
//! resources written back to files.
//!
//! Observed with kpt 1.0.0-beta.56 and its kyaml:
//!
//! - Files: `*.yaml`, `*.yml`, `*.json` and `Kptfile`, hidden ones and
//!   subpackages included, walked in Go's `filepath.Walk` order (names
//!   sorted bytewise in each directory), `.krmignore` at the package root and
//!   at subpackage roots (a gitignore subset), symlinks to files followed.
//! - Documents (kyaml's `ByteReader`): CRLF becomes LF, the text is split at
//!   every `\n---...\n` line (a comment may follow the marker; any other
//!   text is an error), and the first YAML document of each piece is
//!   parsed. Every file is parsed before anything runs: malformed YAML is
//!   kpt's `MalformedYAMLError`, with the line counted from the piece's
//!   start, as kpt counts it. Empty and null documents are skipped, so
//!   comments before a first `---` separator go.
//! - Duplicate keys (unlike kpt): a mapping that holds one key twice, at
//!   any depth, is refused as malformed, naming the key and both lines
//!   (counted from the start of the file). kpt reads it, kyaml's look-ups
//!   find only the first, and the second value is lost without a word
//!   (`kpt fn eval --exec cat` writes the first value over it).
//! - Writing (kyaml's `LocalPackageWriter`): one file per path, resources in
//!   index order, each written by the yaml.v3 encoder in its file's sequence
//!   indentation (`compact` or `wide`, derived from the text as kyaml
//!   derives it), `---` between them; a `.json` file holding one resource is
//!   written as indented JSON with sorted keys. Every file is written to a
//!   temporary file in its directory and renamed over the old one, so a
//!   crash leaves each file whole, old or new.
//! - Confinement (unlike kpt): every path written or deleted is resolved
//!   beneath the package root, symlinks followed; one that leaves the
//!   package (a symlinked directory, or a symlinked file, to a place
//!   outside) is refused and nothing is written. Symlinks that stay in the
//!   package are written through, as kpt writes through them.
//!
//! [`kyaml`] holds the operations kpt applies to a resource in between.

mod error;
mod ignore;
mod json;
pub mod kyaml;

use error::io_err;
pub use error::PackageError;
use ignore::IgnoreRules;
pub use ignore::{glob_match, is_resource_file};

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::quote::{go_quote, go_quote_bytes};
use crate::{self as yaml, Kind, Node};
pub use json::to_json;
pub use kyaml::Meta;

/// The annotations kpt adds to items and removes again.
pub mod annotations {
    /// Path of the file, relative to the package (legacy form).
    pub const LEGACY_PATH: &str = "config.kubernetes.io/path";
    /// Index of the document in its file (legacy form).
    pub const LEGACY_INDEX: &str = "config.kubernetes.io/index";
    /// Path of the file, relative to the package.
    pub const PATH: &str = "internal.config.kubernetes.io/path";
    /// Index of the document in its file.
    pub const INDEX: &str = "internal.config.kubernetes.io/index";
    /// The package a resource was read from (an absolute path; `render`).
    pub const PACKAGE_PATH: &str = "internal.config.kubernetes.io/package-path";
    /// `compact` or `wide`: how sequences were indented.
    pub const SEQ_INDENT: &str = "internal.config.kubernetes.io/seqindent";
    /// kpt's id for matching an item with the one it sent.
    pub const MIGRATION_ID: &str =
        "internal.config.kubernetes.io/annotations-migration-resource-id";
    /// kpt's item id.
    pub const ID: &str = "internal.config.kubernetes.io/id";
    /// kpt's item id (legacy form).
    pub const LEGACY_ID: &str = "config.k8s.io/id";

    /// The ids, removed from every output.
    pub const IDS: [&str; 3] = [MIGRATION_ID, ID, LEGACY_ID];

    /// Whether kpt adds (and removes) this annotation.
    pub fn is_kpt(key: &str) -> bool {
        matches!(
            key,
            LEGACY_PATH | LEGACY_INDEX | PATH | INDEX | SEQ_INDENT | MIGRATION_ID | ID | LEGACY_ID
        )
    }

    /// Whether this is one of kpt's ids.
    pub fn is_id(key: &str) -> bool {
        IDS.contains(&key)
    }
}

/// One resource read from a file or a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The document node, as yaml.v3 decodes it.
    pub node: Node,
    /// `compact` or `wide` (kyaml's derivation on the original text).
    pub seq_indent: &'static str,
}

/// Text as kyaml reads it: a leading BOM dropped, CRLF as LF.
pub fn normalize_newlines(text: &str) -> Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains("\r\n") {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Why a stream could not be read as documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    /// A `---` line with text after it.
    #[error("invalid document separator: {0}")]
    Separator(String),
    /// yaml.v3's error (`yaml: line N: ...`).
    #[error("MalformedYAMLError: {0}")]
    Malformed(String),
    /// A mapping with a key twice (which kpt reads): reported as malformed
    /// YAML, in yaml.v3's words, with its lines counted from the start of
    /// the text. A variant of its own so that a caller can say where the
    /// text came from (a function's output: which function).
    #[error("MalformedYAMLError: yaml: {0}")]
    DuplicateKey(yaml::parse::DuplicateKey),
}

/// The pieces kyaml's `splitDocuments` cuts a stream (already through
/// [`normalize_newlines`]) into: at every `\n---...\n` line, the newline
/// before the marker kept with the piece before it.
pub fn split_pieces(text: &str) -> Result<Vec<&str>, DocError> {
    let mut pieces = Vec::new();
    if text.is_empty() {
        return Ok(pieces);
    }
    let b = text.as_bytes();
    let mut prev = 0;
    let mut i = 0;
    while let Some(off) = find_sub(&b[i..], b"\n---") {
        let sep_start = i + off;
        let line_start = sep_start + 1;
        let Some(nl) = b[line_start..].iter().position(|c| *c == b'\n') else {
            break;
        };
        let line_end = line_start + nl;
        let after = text[line_start + 3..line_end].trim();
        if !after.is_empty() && !after.starts_with('#') {
            return Err(DocError::Separator(
                text[line_start..line_end].trim().to_owned(),
            ));
        }
        pieces.push(&text[prev..=sep_start]);
        prev = line_end + 1;
        i = line_end + 1;
    }
    pieces.push(&text[prev.min(text.len())..]);
    Ok(pieces)
}

fn find_sub(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// kyaml's `ByteReader` on a stream: each piece's first document, parsed
/// (empty and null documents skipped), and refused if it holds a mapping
/// with a key twice ([`DocError::DuplicateKey`]).
pub fn read_documents(text: &str) -> Result<Vec<Document>, DocError> {
    read_documents_with(text, true)
}

/// [`read_documents`] as kyaml's `ByteReader` is: a mapping with a key
/// twice is read. For a reader that goes on to say what kpt says about it
/// (render's Kptfile check: kpt decodes a Kptfile strictly and names every
/// repeated key in its own words).
pub fn read_documents_keeping_duplicates(text: &str) -> Result<Vec<Document>, DocError> {
    read_documents_with(text, false)
}

fn read_documents_with(text: &str, unique_keys: bool) -> Result<Vec<Document>, DocError> {
    let text = normalize_newlines(text);
    let mut docs = Vec::new();
    for piece in split_pieces(&text)? {
        let parsed = yaml::parse::parse(piece).map_err(|e| DocError::Malformed(e.to_string()))?;
        let Some(node) = parsed.into_iter().next() else {
            continue;
        };
        // kpt keeps such a document and loses the second value; refused
        // here, with its line in the whole text (a later piece's lines do
        // not start at 1, unlike yaml.v3's own errors above, which kpt
        // counts from the piece).
        if let Some(dup) = unique_keys
            .then(|| yaml::parse::duplicate_key(&node))
            .flatten()
        {
            // `piece` lies within `text`.
            let before = (piece.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
            let lines = text
                .as_bytes()
                .get(..before)
                .unwrap_or_default()
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            return Err(DocError::DuplicateKey(dup.shifted(lines)));
        }
        // `IsYNodeEmptyDoc` and `IsMissingOrNull`.
        if node.kind == Kind::Document
            && node
                .content
                .first()
                .is_none_or(|c| c.tag == kyaml::NULL_TAG)
        {
            continue;
        }
        docs.push(Document {
            seq_indent: derive_seq_indent(piece),
            node,
        });
    }
    Ok(docs)
}

/// indented two more than its key, `compact` otherwise.
pub fn derive_seq_indent(doc: &str) -> &'static str {
    let lines: Vec<&str> = doc.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(pos) = line.find("- ") else {
            continue;
        };
        if !line[..pos].bytes().all(|b| b == b' ') {
            continue;
        }
        let seq_spaces = pos;
        let key_line = (0..i)
            .rev()
            .map(|j| lines[j])
            .find(|l| !l.trim_matches(' ').starts_with('#'));
        let Some(key_line) = key_line else {
            continue;
        };
        let key_line = key_line.split('#').next().unwrap_or("");
        if key_line.is_empty() {
            continue;
        }
        let key_spaces = key_line.len() - key_line.trim_start_matches(' ').len();
        let trimmed = key_line.trim_matches(' ');
        if trimmed.matches(':').count() != 1 || !trimmed.ends_with(':') {
            continue;
        }
        if seq_spaces == key_spaces {
            return "compact";
        }
        if seq_spaces == key_spaces + 2 {
            return "wide";
        }
    }
    "compact"
}

/// One file of a package and its resources.
#[derive(Debug, Clone)]
pub struct PackageFile {
    /// Path relative to the package, `/`-separated.
    pub path: String,
    pub documents: Vec<Document>,
}

/// Reports progress on stderr for long work: nothing during the first
/// second, then a line every five seconds, and a summary at the end.
pub struct Progress<'a> {
    out: Option<&'a mut (dyn Write + Send)>,
    start: Instant,
    last: Instant,
    printed: bool,
}

impl<'a> Progress<'a> {
    pub fn new(out: Option<&'a mut (dyn Write + Send)>) -> Self {
        let now = Instant::now();
        Self {
            out,
            start: now,
            last: now,
            printed: false,
        }
    }

    /// Prints `message()` if the work has run for over a second and nothing
    /// was printed in the last second.
    pub fn tick(&mut self, message: impl FnOnce() -> String) {
        let now = Instant::now();
        if now.duration_since(self.start) < Duration::from_secs(1)
            || (self.printed && now.duration_since(self.last) < Duration::from_secs(5))
        {
            return;
        }
        if let Some(out) = self.out.as_mut() {
            let _ = writeln!(out, "[INFO] {}", message());
        }
        self.printed = true;
        self.last = now;
    }

    /// Prints `message(elapsed)` if anything was printed before.
    pub fn done(&mut self, message: impl FnOnce(Duration) -> String) {
        if self.printed {
            let elapsed = self.start.elapsed();
            if let Some(out) = self.out.as_mut() {
                let _ = writeln!(out, "[INFO] {}", message(elapsed));
            }
        }
    }
}

/// Reads a package the way kpt does (see the module documentation),
/// subpackages included.
pub fn read_package(
    dir: &Path,
    progress: &mut Progress<'_>,
) -> Result<Vec<PackageFile>, PackageError> {
    read(dir, None, progress)
}

/// Reads a package without its subpackages (kpt's `LocalResources`): the
/// package's own files (a directory with a Kptfile below it is a
/// subpackage, not read; the caller walks those itself).
pub fn read_local_files(
    dir: &Path,
    progress: &mut Progress<'_>,
) -> Result<Vec<PackageFile>, PackageError> {
    let mut listed = Vec::new();
    read(dir, Some(&mut listed), progress)
}

fn read(
    dir: &Path,
    subpackages: Option<&mut Vec<String>>,
    progress: &mut Progress<'_>,
) -> Result<Vec<PackageFile>, PackageError> {
    let meta = fs::metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(PackageError::File {
            path: dir.display().to_string(),
            message: "not a directory".into(),
        });
    }
    let mut files = Vec::new();
    let mut count = (0usize, 0usize);
    let rules = IgnoreRules::read(dir)?;
    let mut walker = Walker {
        files: &mut files,
        subpackages,
        progress,
        count: &mut count,
    };
    walker.walk(dir, "", &rules)?;
    let count = *walker.count;
    progress_done(walker.progress, count);
    Ok(files)
}

fn progress_done(progress: &mut Progress<'_>, count: (usize, usize)) {
    progress.done(|t| {
        format!(
            "read {} resources from {} files in {t:.1?}",
            count.1, count.0
        )
    });
}

struct Walker<'w, 'p> {
    files: &'w mut Vec<PackageFile>,
    /// Where subpackages are listed instead of read (`None`: read them).
    subpackages: Option<&'w mut Vec<String>>,
    progress: &'w mut Progress<'p>,
    count: &'w mut (usize, usize),
}

impl Walker<'_, '_> {
    fn walk(&mut self, dir: &Path, rel: &str, rules: &IgnoreRules) -> Result<(), PackageError> {
        let mut entries: Vec<(Vec<u8>, PathBuf)> = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            entries.push((entry.file_name().as_bytes().to_vec(), entry.path()));
        }
        entries.sort();
        for (name, path) in entries {
            let name_str = String::from_utf8_lossy(&name);
            let child_rel = if rel.is_empty() {
                name_str.into_owned()
            } else {
                format!("{rel}/{name_str}")
            };
            let lmeta = fs::symlink_metadata(&path).map_err(io_err(&path))?;
            if lmeta.is_dir() {
                // A subpackage has its own .krmignore. kyaml's reader checks
                // the parent's rules first (an ignored subpackage is not
                // read); kpt's subpackage discovery for render ignores them.
                if path.join("Kptfile").is_file() {
                    if let Some(subs) = self.subpackages.as_mut() {
                        subs.push(child_rel);
                        continue;
                    }
                    if rules.ignored(&child_rel, true) {
                        continue;
                    }
                    let sub = IgnoreRules::read(&path)?;
                    let start = self.files.len();
                    self.walk(&path, "", &sub)?;
                    for f in &mut self.files[start..] {
                        f.path = format!("{child_rel}/{}", f.path);
                    }
                    continue;
                }
                if rules.ignored(&child_rel, true) {
                    continue;
                }
                self.walk(&path, &child_rel, rules)?;
                continue;
            }
            if !is_resource_file(&name) || rules.ignored(&child_rel, false) {
                continue;
            }
            if lmeta.file_type().is_symlink() {
                match fs::metadata(&path) {
                    Ok(m) if m.is_file() => {}
                    _ => continue,
                }
            }
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            let text = String::from_utf8(bytes).map_err(|_| PackageError::File {
                path: child_rel.clone(),
                message: "not UTF-8 text".into(),
            })?;
            let absolute = || {
                std::path::absolute(&path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string()
            };
            let documents = read_documents(&text).map_err(|e| match e {
                // kpt names the file by its absolute path here.
                DocError::Malformed(message) => PackageError::Malformed {
                    path: absolute(),
                    message,
                },
                // Not an error kpt has: in the same words as its
                // malformed YAML.
                DocError::DuplicateKey(dup) => PackageError::Malformed {
                    path: absolute(),
                    message: format!("yaml: {dup}"),
                },
                e => PackageError::File {
                    path: child_rel.clone(),
                    message: e.to_string(),
                },
            })?;
            self.count.0 += 1;
            self.count.1 += documents.len();
            if !documents.is_empty() {
                self.files.push(PackageFile {
                    path: child_rel,
                    documents,
                });
            }
            let count = *self.count;
            self.progress.tick(|| {
                format!(
                    "reading package: {} files, {} resources so far",
                    count.0, count.1
                )
            });
        }
        Ok(())
    }
}

/// kyaml's default path for a resource without one:
/// `[namespace/]kind_name.yaml`, the kind in lower case.
pub fn default_path(meta: &Meta) -> String {
    let file = format!("{}_{}.yaml", meta.kind.to_lowercase(), meta.name);
    if meta.namespace.is_empty() {
        file
    } else {
        format!("{}/{file}", meta.namespace)
    }
}

/// Go's `path.Clean`.
pub fn clean_path(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// One output resource, placed.
#[derive(Debug, Clone)]
pub struct Placed {
    /// Cleaned path relative to the package.
    pub path: String,
    /// The index annotation (`None`: none; such items come first).
    pub index: Option<i64>,
    /// The resource, kpt's annotations removed.
    pub node: Node,
    /// Written with `wide` sequences (kpt's seqindent annotation).
    pub wide: bool,
}

/// What [`write_package`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    pub written: usize,
    pub unchanged: usize,
    pub deleted: usize,
}

/// Resources as kyaml's `ByteWriter` writes them without a wrapper: one
/// yaml.v3 encoder, each document in its own sequence style, `---`
/// between them.
pub fn documents_text(docs: &[(&Node, bool)]) -> String {
    let compact: Vec<(&Node, bool)> = docs.iter().map(|(n, wide)| (*n, !*wide)).collect();
    yaml::emit::encode_documents(&compact)
}

/// A file's content from its resources: documents joined by `---`, or
/// indented JSON with sorted keys for a `.json` file with one resource
/// (which fails only on aliases that cannot be followed).
pub fn file_content(path: &str, docs: &[(&Node, bool)]) -> Result<String, PackageError> {
    if docs.len() == 1
        && path
            .rsplit('/')
            .next()
            .is_some_and(|n| glob_match(b"*.json", n.as_bytes()))
    {
        return json::text(kyaml::content(docs[0].0)).map_err(|e| PackageError::File {
            path: path.to_owned(),
            message: e.to_string(),
        });
    }
    Ok(documents_text(docs))
}

/// Writes `content` to `target` through a temporary file in the same
/// directory and a rename, so the file is whole, old or new, whatever
/// happens; an existing file's mode and owner are kept, from the start.
/// A symlink is written through: the link stays, the file
/// it names is replaced. The path is taken as it is: a file of a package
/// goes through [`write_in_package`], which keeps it in the package.
pub fn write_atomic(target: &Path, content: &[u8]) -> Result<(), PackageError> {
    let target = match fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(target).map_err(io_err(target))?,
        _ => target.to_path_buf(),
    };
    let tmp = write_temp(&target, content)?;
    fs::rename(&tmp, &target).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err(&target)(e)
    })
}

/// [`write_atomic`] for the file `rel` (relative, `/`-separated) of the
/// package at `root`, confined to it as [`write_package`] confines its
/// files: a path that leaves the package through a symlink is refused
/// ([`PackageError::Escapes`]), nothing written.
pub fn write_in_package(root: &Path, rel: &str, content: &[u8]) -> Result<(), PackageError> {
    let root = canonical_root(root)?;
    let Some(planned) = plan(&root, rel, content)? else {
        return Ok(());
    };
    let mut created = Vec::new();
    let staged = stage(&planned, content, &mut created);
    let result = staged.and_then(|(tmp, target)| {
        fs::rename(&tmp, &target).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err(&target)(e)
        })
    });
    if result.is_err() {
        remove_dirs(&created);
    }
    result
}

/// The package root every written path must resolve beneath.
fn canonical_root(root: &Path) -> Result<PathBuf, PackageError> {
    fs::canonicalize(root).map_err(io_err(root))
}

/// Where a file of a package is: the deepest directory of its path that
/// exists (canonical, so beneath the canonical root), the directories
/// below it that do not exist yet, and the file's name in the last one.
/// For a symlinked file that is followed, the file it names.
#[derive(Debug)]
struct Resolved {
    dir: PathBuf,
    missing: Vec<String>,
    name: std::ffi::OsString,
}

impl Resolved {
    fn path(&self) -> PathBuf {
        let mut p = self.dir.clone();
        p.extend(&self.missing);
        p.push(&self.name);
        p
    }
}

/// Resolves the file `rel` of the package at `root` (canonical): every
/// symlink on the way (a directory; the file itself when `follow_file`) is
/// followed and must lead to a place beneath the root, or the path is
/// refused with [`PackageError::Escapes`] (`verb` says what was not done).
/// `..` components and absolute paths are refused too. A symlink to a place
/// in the package is fine: kpt writes through them.
fn resolve(
    root: &Path,
    rel: &str,
    verb: &'static str,
    follow_file: bool,
) -> Result<Resolved, PackageError> {
    if rel.starts_with('/') {
        return Err(PackageError::Absolute(rel.to_owned()));
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(PackageError::OutsidePackage(rel.to_owned())),
            s => parts.push(s),
        }
    }
    let Some(name) = parts.pop() else {
        return Err(PackageError::File {
            path: rel.to_owned(),
            message: "path cannot be a directory".into(),
        });
    };
    // Follows the symlink `link` (the path's first `upto` components).
    let follow = |link: &Path, upto: usize| -> Result<PathBuf, PackageError> {
        let target = fs::canonicalize(link).map_err(io_err(link))?;
        if target.starts_with(root) {
            return Ok(target);
        }
        Err(PackageError::Escapes {
            path: rel.to_owned(),
            verb,
            link: parts
                .iter()
                .copied()
                .chain(std::iter::once(name))
                .take(upto)
                .collect::<Vec<_>>()
                .join("/"),
            target: fs::read_link(link).unwrap_or(target),
        })
    };
    let mut dir = root.to_path_buf();
    let mut missing: Vec<String> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if !missing.is_empty() {
            missing.push((*part).to_owned());
            continue;
        }
        let p = dir.join(part);
        match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push((*part).to_owned()),
            Err(e) => return Err(io_err(&p)(e)),
            Ok(m) if m.file_type().is_symlink() => dir = follow(&p, i + 1)?,
            Ok(_) => dir = p,
        }
    }
    let mut resolved = Resolved {
        dir,
        missing,
        name: name.into(),
    };
    if follow_file && resolved.missing.is_empty() {
        let p = resolved.dir.join(name);
        if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            let target = follow(&p, parts.len() + 1)?;
            if let (Some(dir), Some(name)) = (target.parent(), target.file_name()) {
                resolved.name = name.to_owned();
                resolved.dir = dir.to_path_buf();
            }
        }
    }
    Ok(resolved)
}

/// Where the file `rel` of the package at `root` (canonical) is written
/// with `content`, or `None` if it already holds it (nothing to write).
/// A file whose path leaves the package is refused, unless it already
/// holds that content (a symlink to a file outside the package that the
/// function left alone: not written, so not refused).
fn plan(root: &Path, rel: &str, content: &[u8]) -> Result<Option<Resolved>, PackageError> {
    let unchanged = |path: &Path| fs::read(path).is_ok_and(|old| old == content);
    match resolve(root, rel, "written", true) {
        Ok(r) if r.missing.is_empty() && unchanged(&r.path()) => Ok(None),
        Ok(r) => Ok(Some(r)),
        Err(e @ PackageError::Escapes { .. }) if !unchanged(&root.join(rel)) => Err(e),
        Err(PackageError::Escapes { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates the directories `r` is missing (each recorded in `created`, none
/// through a symlink) and writes `content` to a temporary file beside the
/// file. Returns the temporary file and the file to rename it to.
fn stage(
    r: &Resolved,
    content: &[u8],
    created: &mut Vec<PathBuf>,
) -> Result<(PathBuf, PathBuf), PackageError> {
    let mut dir = r.dir.clone();
    for m in &r.missing {
        dir.push(m);
        match fs::create_dir(&dir) {
            Ok(()) => created.push(dir.clone()),
            // Made for another file of this write: a directory, not a
            // symlink (which could lead anywhere).
            Err(e)
                if e.kind() == io::ErrorKind::AlreadyExists
                    && fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) => {}
            Err(e) => return Err(io_err(&dir)(e)),
        }
    }
    let target = dir.join(&r.name);
    let tmp = write_temp(&target, content)?;
    Ok((tmp, target))
}

/// Removes the directories a failed write created (empty ones: the
/// deepest first).
fn remove_dirs(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = fs::remove_dir(d);
    }
}

/// The first half of [`write_atomic`]: `content` in a new temporary file
/// beside `target` (the file itself, symlinks resolved). The temporary
/// file is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, so whatever is
/// already at its name (a symlink above all) is never written through (the
/// next name is tried), and with an existing target's mode (less the umask;
/// then exactly) and owner (when this process may give it: root, or a group
/// of its own) before any content is in it. Returns the temporary file.
fn write_temp(target: &Path, content: &[u8]) -> Result<PathBuf, PackageError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let old = fs::symlink_metadata(target).ok();
    if old.as_ref().is_some_and(fs::Metadata::is_dir) {
        return Err(PackageError::File {
            path: target.display().to_string(),
            message: "path cannot be a directory".into(),
        });
    }
    let old = old.filter(fs::Metadata::is_file);
    let mode = old.as_ref().map(|m| m.mode() & 0o7777);
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pid = std::process::id();
    let mut attempt = 0u32;
    let (tmp, mut f) = loop {
        let tmp = match attempt {
            0 => dir.join(format!(".{name}.{pid}.tmp")),
            n => dir.join(format!(".{name}.{pid}.{n}.tmp")),
        };
        let opened = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
            .mode(mode.unwrap_or(0o666) & 0o777)
            .open(&tmp);
        match opened {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            // Not ours to remove.
            Err(e) => return Err(io_err(target)(e)),
        }
    };
    let result = (|| {
        if let (Some(old), Some(mode)) = (&old, mode) {
            copy_owner(&f, old)?;
            if f.metadata()?.mode() & 0o7777 != mode {
                f.set_permissions(fs::Permissions::from_mode(mode))?;
            }
        }
        f.write_all(content)?;
        f.sync_all()
    })();
    if let Err(e) = result {
        drop(f);
        let _ = fs::remove_file(&tmp);
        return Err(io_err(target)(e));
    }
    Ok(tmp)
}

/// Gives `f` the owner and group of `old` where they differ: both as root;
/// otherwise the group alone if it is one of this process's (a user cannot
/// give a file away: the owner stays this process's).
fn copy_owner(f: &fs::File, old: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::{fchown, MetadataExt};
    let new = f.metadata()?;
    let uid = (new.uid() != old.uid()).then_some(old.uid());
    let gid = (new.gid() != old.gid()).then_some(old.gid());
    if uid.is_none() && gid.is_none() {
        return Ok(());
    }
    let denied = |r: io::Result<()>| match r {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(false),
        r => r.map(|()| true),
    };
    if denied(fchown(f, uid, gid))? || uid.is_none() || gid.is_none() {
        return Ok(());
    }
    denied(fchown(f, None, gid)).map(|_| ())
}

/// Writes resources to `root` as kpt does: one file per path, documents in
/// index order (those without an index first). Files whose content does
/// not change are not touched. Every changed file is first written to a
/// temporary file beside it, and only when all of them are written are
/// they renamed into place, so an error (a path that is a directory, a
/// full disk) leaves the package as it was. Returns the paths written (or
/// unchanged).
///
/// Every path is confined to the package: each symlink on it (a directory
/// on the way, or the file itself) must lead to a place beneath `root`, as
/// `openat2`'s `RESOLVE_BENEATH` would have it (an absolute symlink to a
/// place in the package is fine too). A file whose path leaves the package
/// ([`PackageError::Escapes`], naming it) refuses the whole write before
/// anything is created, unless it already holds its content (then nothing
/// is written to it, as for any unchanged file). A symlinked file in the
/// package is written through, as kpt does: the link stays, the file it
/// names is replaced.
pub fn write_package(
    root: &Path,
    items: Vec<Placed>,
    progress: &mut Progress<'_>,
) -> Result<(WriteReport, HashSet<String>), PackageError> {
    // By path: index, order of arrival, resource, wide sequences.
    type Docs = Vec<(Option<i64>, usize, Node, bool)>;
    let mut by_path: BTreeMap<String, Docs> = BTreeMap::new();
    for (seq, p) in items.into_iter().enumerate() {
        by_path
            .entry(p.path)
            .or_default()
            .push((p.index, seq, p.node, p.wide));
    }
    let root = canonical_root(root)?;
    let mut report = WriteReport::default();
    let mut paths = HashSet::with_capacity(by_path.len());
    let total = by_path.len();
    // Every file's content and where it goes first: nothing is created
    // until every path is known to stay in the package.
    let mut planned: Vec<(Resolved, String)> = Vec::new();
    for (n, (path, mut docs)) in by_path.into_iter().enumerate() {
        docs.sort_by_key(|d| (d.0.is_some(), d.0, d.1));
        let nodes: Vec<(&Node, bool)> = docs.iter().map(|d| (&d.2, d.3)).collect();
        let content = file_content(&path, &nodes)?;
        match plan(&root, &path, content.as_bytes())? {
            Some(r) => planned.push((r, content)),
            None => report.unchanged += 1,
        }
        paths.insert(path);
        progress.tick(|| format!("writing package: {} of {total} files", n + 1));
    }
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(planned.len());
    let mut created = Vec::new();
    let unstage = |staged: &[(PathBuf, PathBuf)], created: &[PathBuf]| {
        for (tmp, _) in staged {
            let _ = fs::remove_file(tmp);
        }
        remove_dirs(created);
    };
    for (r, content) in &planned {
        match stage(r, content.as_bytes(), &mut created) {
            Ok(pair) => staged.push(pair),
            Err(e) => {
                unstage(&staged, &created);
                return Err(e);
            }
        }
    }
    for (i, (tmp, target)) in staged.iter().enumerate() {
        if let Err(e) = fs::rename(tmp, target) {
            unstage(&staged[i..], &[]);
            return Err(io_err(target)(e));
        }
        report.written += 1;
    }
    progress.done(|t| format!("wrote {total} files in {t:.1?}"));
    Ok((report, paths))
}

/// Deletes the files of `read` that are not in `kept` (relative paths). A
/// symlinked file is deleted itself (the link, not what it names), and a
/// path that leaves the package through a symlinked directory is refused
/// ([`PackageError::Escapes`]) before anything is deleted.
pub fn delete_gone(
    root: &Path,
    read: &[String],
    kept: &HashSet<String>,
) -> Result<usize, PackageError> {
    let root = canonical_root(root)?;
    let mut gone = Vec::new();
    for path in read {
        if kept.contains(path) {
            continue;
        }
        let r = resolve(&root, path, "deleted", false)?;
        if r.missing.is_empty() {
            gone.push(r.path());
        }
    }
    let mut n = 0;
    for target in gone {
        match fs::remove_file(&target) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&target)(e)),
        }
    }
    Ok(n)
}

/// Checks kpt's path invariants on output resources: no path outside the
/// package, no two resources with the same path and index.
pub fn check_paths(placed: &[(String, String)]) -> Result<(), PackageError> {
    let mut seen: HashMap<(&str, &str), ()> = HashMap::new();
    for (path, index) in placed {
        if path.starts_with("../") || path == ".." {
            return Err(PackageError::OutsidePackage(path.clone()));
        }
        if seen.insert((path.as_str(), index.as_str()), ()).is_some() {
            return Err(PackageError::Duplicate {
                path: path.clone(),
                index: index.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
