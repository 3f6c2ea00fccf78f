//! kpt's error values (`pkg/lib/errors/errors.go@v1.0.0-beta.67`), as far
//! as a render's failure message needs them: the `Rendered` condition's
//! message is the text of the error `hydrate` returns, made by kpt's
//! `errors.E` wrapping at each level, so the same wrapping is done here to
//! get the same text (`pkg.render: pkg ./a:\n\tpkg ./a/b:\n\tpipeline.run:
//! already handled error`).

use std::path::{Component, Path, PathBuf};

/// An error as kpt holds it: its own (`*errors.Error`) or any other.
#[derive(Debug, Clone)]
pub(super) enum KptError {
    Kpt {
        op: &'static str,
        path: Option<PathBuf>,
        err: Option<Box<KptError>>,
    },
    Plain(String),
}

/// kpt's `ErrAlreadyHandled`: a function failed and its lines are
/// printed.
pub(super) const ALREADY_HANDLED: &str = "already handled error";

impl KptError {
    /// kpt's `errors.E(op, path, err)`: a wrapped kpt error loses the op
    /// and path it shares with the new one.
    pub(super) fn e(op: &'static str, path: &Path, err: KptError) -> KptError {
        let err = match err {
            KptError::Kpt {
                op: inner_op,
                path: inner_path,
                err,
            } => KptError::Kpt {
                op: if inner_op == op { "" } else { inner_op },
                path: inner_path.filter(|p| p != path),
                err,
            },
            plain => plain,
        };
        KptError::Kpt {
            op,
            path: Some(path.to_path_buf()),
            err: Some(Box::new(err)),
        }
    }

    /// kpt's `Error()`: the op, `pkg` and the path relative to the
    /// working directory (absolute when it is not below it), then the
    /// wrapped error after `:\n\t` (a kpt error) or `: ` (another).
    pub(super) fn text(&self, cwd: &Path) -> String {
        match self {
            KptError::Plain(s) => s.clone(),
            KptError::Kpt { op, path, err } => {
                let mut b = String::new();
                let pad = |b: &mut String, s: &str| {
                    if !b.is_empty() {
                        b.push_str(s);
                    }
                };
                if !op.is_empty() {
                    b.push_str(op);
                }
                if let Some(p) = path {
                    pad(&mut b, ": ");
                    b.push_str("pkg ");
                    b.push_str(&relative_path(cwd, p));
                }
                match err.as_deref() {
                    Some(inner @ KptError::Kpt { .. }) => {
                        pad(&mut b, ":\n\t");
                        b.push_str(&inner.text(cwd));
                    }
                    Some(KptError::Plain(s)) => {
                        pad(&mut b, ": ");
                        b.push_str(s);
                    }
                    None => {}
                }
                if b.is_empty() {
                    "no error".into()
                } else {
                    b
                }
            }
        }
    }

    /// The message of the `Rendered` condition: the text, with the root
    /// package's absolute path written as `.` wherever it appears (kpt's
    /// plain `strings.ReplaceAll`).
    pub(super) fn condition_message(&self, root: &Path) -> String {
        let cwd = std::env::current_dir().unwrap_or_default();
        self.text(&cwd).replace(&root.display().to_string(), ".")
    }
}

/// kpt's `UniquePath.RelativePath`: Go's `filepath.Rel(cwd, path)`, the
/// path itself when that climbs out (`..`).
fn relative_path(cwd: &Path, path: &Path) -> String {
    let rel = go_rel(cwd, path);
    if rel.starts_with("..") {
        path.display().to_string()
    } else {
        rel
    }
}

/// Go's `filepath.Rel` for two absolute paths.
fn go_rel(base: &Path, target: &Path) -> String {
    let parts = |p: &Path| -> Vec<String> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    let (b, t) = (parts(base), parts(target));
    let common = b.iter().zip(&t).take_while(|(x, y)| x == y).count();
    let mut out: Vec<String> = vec!["..".into(); b.len() - common];
    out.extend(t[common..].iter().cloned());
    if out.is_empty() {
        ".".into()
    } else {
        out.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline_failure(pkg: &Path) -> KptError {
        KptError::Kpt {
            op: "pipeline.run",
            path: Some(pkg.to_path_buf()),
            err: Some(Box::new(KptError::Plain(ALREADY_HANDLED.into()))),
        }
    }

    /// The messages of `render-status.md`'s goldens: a failure in the root,
    /// in a child, in a grandchild (each `hydrate` wrapping), with the
    /// working directory outside the package (paths absolute, then `.`).
    #[test]
    fn messages_as_kpt_wraps_them() {
        let root = Path::new("/w/pkg");
        let cwd = Path::new("/elsewhere");
        let here = KptError::e("pkg.render", root, pipeline_failure(root));
        assert_eq!(
            here.text(cwd).replace("/w/pkg", "."),
            "pkg.render: pkg .:\n\tpipeline.run: already handled error"
        );
        let sub = root.join("sub");
        let child = KptError::e("pkg.render", &sub, pipeline_failure(&sub));
        let child = KptError::e("pkg.render", &sub, child);
        assert_eq!(
            child.text(cwd).replace("/w/pkg", "."),
            "pkg.render: pkg ./sub:\n\tpipeline.run: already handled error"
        );
        let (a, b) = (root.join("a"), root.join("a/b"));
        let deep = KptError::e("pkg.render", &b, pipeline_failure(&b));
        let deep = KptError::e("pkg.render", &b, deep);
        let deep = KptError::e("pkg.render", &a, deep);
        assert_eq!(
            deep.text(cwd).replace("/w/pkg", "."),
            "pkg.render: pkg ./a:\n\tpkg ./a/b:\n\tpipeline.run: already handled error"
        );
        // From the package's parent: relative paths, no `.` for the root.
        assert_eq!(
            here.text(Path::new("/w")),
            "pkg.render: pkg pkg:\n\tpipeline.run: already handled error"
        );
        // A plain error of the package itself: after `: `.
        let plain = KptError::e("pkg.render", root, KptError::Plain("bad".into()));
        assert_eq!(plain.text(root), "pkg.render: pkg .: bad");
        // BFS: the failing package stays inside `pipeline.run`.
        let bfs = KptError::e("pkg.render", root, pipeline_failure(&sub));
        assert_eq!(
            bfs.text(cwd).replace("/w/pkg", "."),
            "pkg.render: pkg .:\n\tpipeline.run: pkg ./sub: already handled error"
        );
    }
}
