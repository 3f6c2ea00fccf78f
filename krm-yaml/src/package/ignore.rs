//! `.krmignore`, and which files of a package are resources.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::Path;

use super::error::{io_err, PackageError};

/// `.krmignore` patterns of one package (a gitignore subset: `#` comments,
/// `!` negation, trailing `/` for directories only, a `/` inside anchors the
/// pattern to the package root, `*`, `?` and `[...]` globs; `**` is not
/// supported, as in kyaml).
#[derive(Debug, Clone, Default)]
pub(super) struct IgnoreRules {
    rules: Vec<IgnoreRule>,
}

#[derive(Debug, Clone)]
struct IgnoreRule {
    pattern: String,
    negate: bool,
    dir_only: bool,
    anchored: bool,
}

impl IgnoreRules {
    pub(super) fn read(dir: &Path) -> Result<Self, PackageError> {
        let path = dir.join(".krmignore");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let mut rules = Vec::new();
        for line in text.lines() {
            let mut p = line.trim_end();
            if p.is_empty() || p.starts_with('#') {
                continue;
            }
            let negate = p.starts_with('!');
            if negate {
                p = &p[1..];
            }
            let dir_only = p.ends_with('/');
            let p = p.trim_end_matches('/');
            let anchored = p.contains('/');
            let p = p.trim_start_matches('/');
            if p.is_empty() {
                continue;
            }
            rules.push(IgnoreRule {
                pattern: p.to_owned(),
                negate,
                dir_only,
                anchored,
            });
        }
        Ok(Self { rules })
    }

    /// Whether `rel` (relative to the package root) is ignored.
    pub(super) fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for r in &self.rules {
            if r.dir_only && !is_dir {
                continue;
            }
            let hit = if r.anchored {
                glob_match(r.pattern.as_bytes(), rel.as_bytes())
            } else {
                glob_match(
                    r.pattern.as_bytes(),
                    rel.rsplit('/').next().unwrap_or(rel).as_bytes(),
                )
            };
            if hit {
                ignored = !r.negate;
            }
        }
        ignored
    }
}

/// Go's `filepath.Match` (no `\` escapes): `*` and `?` do not match `/`.
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    // A `.krmignore` is package content. Trying every split after each `*`
    // afresh made `*a*a*a*a*a*a*a*a*b` against a long name run for hours:
    // a `*` either ends or takes one more byte, and each (pattern rest,
    // name rest) it fails on is remembered, so each is tried once.
    glob_from(p, s, &mut HashSet::new())
}

/// [`glob_match`], with the `*` states that failed (by what is left of the
/// pattern and of the name).
fn glob_from(p: &[u8], s: &[u8], failed: &mut HashSet<(usize, usize)>) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => {
            if failed.contains(&(p.len(), s.len())) {
                return false;
            }
            // `**` is `*` (neither crosses `/`): one level per run of stars.
            let after = p
                .iter()
                .position(|c| *c != b'*')
                .map_or(&p[p.len()..], |i| &p[i..]);
            let hit = glob_from(after, s, failed)
                || (!s.is_empty() && s[0] != b'/' && glob_from(p, &s[1..], failed));
            if !hit {
                failed.insert((p.len(), s.len()));
            }
            hit
        }
        Some(b'?') => !s.is_empty() && s[0] != b'/' && glob_from(&p[1..], &s[1..], failed),
        Some(b'[') => {
            let Some(close) = p.iter().skip(1).position(|c| *c == b']').map(|i| i + 1) else {
                return !s.is_empty() && s[0] == b'[' && glob_from(&p[1..], &s[1..], failed);
            };
            let Some(&c) = s.first() else {
                return false;
            };
            let class = &p[1..close];
            let (neg, class) = match class.first() {
                Some(b'^' | b'!') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    if class[i] <= c && c <= class[i + 2] {
                        hit = true;
                    }
                    i += 3;
                } else {
                    if class[i] == c {
                        hit = true;
                    }
                    i += 1;
                }
            }
            hit != neg && c != b'/' && glob_from(&p[close + 1..], &s[1..], failed)
        }
        Some(&c) => !s.is_empty() && s[0] == c && glob_from(&p[1..], &s[1..], failed),
    }
}

/// Whether kpt reads a file with this name as resources.
pub fn is_resource_file(name: &[u8]) -> bool {
    name == b"Kptfile"
        || name.ends_with(b".yaml")
        || name.ends_with(b".yml")
        || name.ends_with(b".json")
}
