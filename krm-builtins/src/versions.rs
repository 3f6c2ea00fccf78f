//! Which of the catalog's releases each built-in answers as: one table
//! ([`TABLE`]), read from the catalog's history (kptdev/krm-functions-catalog,
//! its per-function release tags and the function's source between them, up
//! to master at 76fe3817, 2025-06-25), and how an image reference is matched
//! against it ([`Builtin::reproduces`]).
//!
//! The built-ins follow the catalog's master at 76fe3817; where a release
//! differs from it only in a small, clear way, the function answers as
//! that release for its tag ([`crate::Context::release`]). Porch's runner
//! image bundles, for each function it ships, the first release the
//! catalog published from master after the history read here
//! (`set-namespace:v0.4.2`, ...): those count as master's.
//!
//! A built-in stands for a container only where it answers as that
//! container does. So, by default, only the release tags a built-in
//! reproduces run it; anything else runs as the image it names:
//!
//! - a release the catalog published later still (`set-namespace:v0.4.5`):
//!   its code may differ, and nobody here read it;
//! - a moving tag (`latest`, `v0.4`, `v0`, `unstable`) or no tag (which a
//!   container runtime reads as `latest`): the registry decides today what
//!   it means, and it may be a release past the table;
//! - a digest (`@sha256:…`, with or without a tag): it names bytes, and
//!   which release they are cannot be told offline.
//!
//! FunctionConfig `goExecutor` entries and `--builtins=any-tag` opt in
//! explicitly; render's semver constraints are resolved to a tag first.

use crate::function::Builtin;

/// The catalog's releases of one function, and those the built-in
/// reproduces.
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    /// The catalog's name of the function.
    pub name: &'static str,
    /// Every release of the function known here, oldest first: the
    /// catalog's release tags in the history read, and the one release
    /// after it that Porch's runner image bundles (its `func/Dockerfile`),
    /// which the catalog published from master after its move to kptdev
    /// (the function's Go module path there, `github.com/kptdev/...`, is
    /// master's alone: no release tag in the history read has it).
    pub releases: &'static [&'static str],
    /// The releases the built-in answers as (a run of `releases`).
    pub reproduced: &'static [&'static str],
    /// The release of `releases` that Porch's runner image bundles (and
    /// that was published after the history read here), if any.
    pub porch: Option<&'static str>,
    /// What the releases outside `reproduced` do differently, and any
    /// older behaviour the built-in takes on for them.
    pub note: &'static str,
}

impl Versions {
    /// `v0.4.0` or `v0.4.0–v0.4.1`: the releases reproduced.
    pub fn span(&self) -> String {
        match (self.reproduced.first(), self.reproduced.last()) {
            (Some(a), Some(b)) if a == b => (*a).to_string(),
            (Some(a), Some(b)) => format!("{a}–{b}"),
            _ => "none".to_string(),
        }
    }
}

/// The table. Kept in the catalog's order of names; every built-in has a
/// row (tested).
pub const TABLE: &[Versions] = &[
    Versions {
        name: "apply-replacements",
        releases: &["v0.1.0", "v0.1.1", "v0.1.2"],
        reproduced: &["v0.1.2"],
        porch: None,
        note: "v0.1.0–v0.1.1: kustomize api v0.10.1's replacements (field paths, a missing \
               target field skipped, other error texts)",
    },
    Versions {
        name: "apply-setters",
        releases: &["v0.1.0", "v0.1.1", "v0.2.0", "v0.2.1", "v0.2.2"],
        reproduced: &["v0.1.1", "v0.2.0", "v0.2.1", "v0.2.2"],
        porch: Some("v0.2.2"),
        note: "v0.1.1 answers as that release (an empty setter list and no match fail, exit 1); \
               v0.1.0 writes no results and walks and matches by other rules (all: results written as a list where kyaml \
               before v0.13 writes one `{name, items}` mapping, as for \
               remove-local-config-resources)",
    },
    Versions {
        name: "create-setters",
        releases: &["v0.1.0"],
        reproduced: &[],
        porch: None,
        note: "v0.1.0 also comments multi-line scalars and replaces values one setter at a \
               time in Go's random map order (not reproducible); the built-in is master's, \
               never released (all: results written as a list where kyaml \
               before v0.13 writes one `{name, items}` mapping, as for \
               remove-local-config-resources)",
    },
    Versions {
        name: "ensure-name-substring",
        releases: &["v0.1.0", "v0.1.1", "v0.2.0", "v0.2.1"],
        reproduced: &["v0.2.0", "v0.2.1"],
        porch: Some("v0.2.1"),
        note: "v0.2.0 answers as that release (keeps the file path and index annotations on its \
               output); v0.1.x print a debug line and errors twice",
    },
    Versions {
        name: "list-setters",
        releases: &["v0.1.0"],
        reproduced: &["v0.1.0"],
        porch: None,
        note: "v0.1.0 answers as that release (it fails when no setters are found; master, never \
               released, warns) (all: results written as a list where kyaml \
               before v0.13 writes one `{name, items}` mapping, as for \
               remove-local-config-resources)",
    },
    Versions {
        name: "remove-local-config-resources",
        releases: &["v0.1.0"],
        reproduced: &["v0.1.0"],
        porch: None,
        note: "its results are written as a list, where the binary writes kyaml v0.12.0's \
               `{name, items}` mapping (a departure the module documents)",
    },
    Versions {
        name: "search-replace",
        releases: &["v0.1.0", "v0.1.1", "v0.2.0", "v0.2.1"],
        reproduced: &["v0.1.1", "v0.2.0", "v0.2.1"],
        porch: Some("v0.2.1"),
        note: "v0.1.1 and v0.2.0 answer as those releases (only `config.kubernetes.io/path` read; \
               v0.2.0's `by-file-path` globs with doublestar v4.0.2; v0.1.1 has no \
               `by-file-path` and wants one of by-value, by-value-regex or by-path); v0.1.0: \
               other matchers (all: results written as a list where kyaml \
               before v0.13 writes one `{name, items}` mapping, as for \
               remove-local-config-resources)",
    },
    Versions {
        name: "set-annotations",
        releases: &["v0.1.3", "v0.1.4", "v0.1.5"],
        reproduced: &["v0.1.5"],
        porch: Some("v0.1.5"),
        note: "v0.1.3–v0.1.4: kustomize's annotations filter, no results on success, results \
               written as `{name, items}`",
    },
    Versions {
        name: "set-image",
        releases: &["v0.1.0", "v0.1.1", "v0.1.2"],
        reproduced: &["v0.1.2"],
        porch: Some("v0.1.2"),
        note: "v0.1.0–v0.1.1: kustomize's image filter (v0.1.0 passes on errors)",
    },
    Versions {
        name: "set-labels",
        releases: &["v0.1.3", "v0.1.4", "v0.1.5", "v0.2.0", "v0.2.1", "v0.2.2"],
        reproduced: &["v0.2.0", "v0.2.1", "v0.2.2"],
        porch: Some("v0.2.2"),
        note: "v0.1.x: kustomize's label filter, `SetLabelConfig`, results written as \
               `{name, items}`",
    },
    Versions {
        name: "set-namespace",
        releases: &[
            "v0.1.0", "v0.1.1", "v0.1.2", "v0.1.3", "v0.1.4", "v0.2.0", "v0.3.0", "v0.3.1",
            "v0.3.2", "v0.3.3", "v0.3.4", "v0.4.0", "v0.4.1", "v0.4.2",
        ],
        reproduced: &["v0.4.0", "v0.4.1", "v0.4.2"],
        porch: Some("v0.4.2"),
        note: "v0.4.0–v0.4.1 answer as those releases (before master's rewrite: no \
               origins, `namespaceMatcher` ignored, RoleBinding subjects re-encoded, \
               depends-on by group, their result texts and config errors); v0.3.x replace \
               one old namespace; v0.1.x–v0.2.0: kustomize's namespace filter",
    },
    Versions {
        name: "set-project-id",
        releases: &["v0.1.0", "v0.2.0", "v0.2.1"],
        reproduced: &["v0.1.0", "v0.2.0"],
        porch: Some("v0.2.1"),
        note: "v0.1.0 appends `apply-setters:v0.1` where v0.2.0 appends `:v0.2` (done); \
               the built-in is v0.2.0's, not master's (kyaml v0.19.0, the \"faild to find \
               Kptfile\" typo fixed), so Porch's v0.2.1 runs as an image",
    },
    Versions {
        name: "starlark",
        releases: &[
            "v0.1.0", "v0.1.1", "v0.1.2", "v0.2.0", "v0.2.1", "v0.2.2", "v0.3.0", "v0.4.0",
            "v0.4.1", "v0.4.2", "v0.4.3", "v0.5.0", "v0.5.1", "v0.5.2",
        ],
        reproduced: &["v0.5.1", "v0.5.2"],
        porch: Some("v0.5.2"),
        note: "v0.5.0: an older Go Starlark (`json.encode(1.0)` is `1`, one-argument \
               `json.decode`, sets with `union` only), exact config apiVersions, \
               `match_gvk` on the whole apiVersion; v0.4.x and older: other stderr, \
               libraries and config forms",
    },
    Versions {
        name: "upsert-resource",
        releases: &["v0.1.0", "v0.2.0", "v0.2.1"],
        reproduced: &["v0.2.0", "v0.2.1"],
        porch: Some("v0.2.1"),
        note: "v0.2.0 answers as that release (the path and index annotations under \
               `config.kubernetes.io/`); v0.1.0 compares no groups and ignores `target-path`",
    },
];

/// The table's row for a function.
pub fn of(name: &str) -> Option<&'static Versions> {
    TABLE.iter().find(|v| v.name == name)
}

/// What an image reference pins: the part a container runtime pulls by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin<'a> {
    /// `NAME@sha256:…` (a tag beside it is not what is pulled).
    Digest(&'a str),
    /// `NAME:TAG`.
    Tag(&'a str),
    /// `NAME`: the runtime pulls `latest`.
    Untagged,
}

/// The pin of `image` (a registry's port is not a tag).
pub fn pin(image: &str) -> Pin<'_> {
    if let Some((_, digest)) = image.split_once('@') {
        return Pin::Digest(digest);
    }
    match image.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => Pin::Tag(tag),
        _ => Pin::Untagged,
    }
}

impl Builtin {
    /// The catalog's releases of this function and those it reproduces.
    pub fn versions(&self) -> Option<&'static Versions> {
        of(self.name)
    }

    /// Whether `image` (the catalog's image of this function) names a
    /// release this built-in answers as: a release tag in its row's
    /// `reproduced`, and no digest.
    pub fn reproduces(&self, image: &str) -> bool {
        match (pin(image), self.versions()) {
            (Pin::Tag(tag), Some(v)) => v.reproduced.contains(&tag),
            _ => false,
        }
    }

    /// The release of this function that `image` names by its tag, as
    /// the table writes it (any release read, reproduced or not: a
    /// function that answers as an older release in a small way does so
    /// for it, under `--builtins=any-tag` too). `None` for a digest, no
    /// tag, or a tag that is not a release.
    pub fn release_of(&self, image: &str) -> Option<&'static str> {
        let Pin::Tag(tag) = pin(image) else {
            return None;
        };
        self.versions()
            .and_then(|v| v.releases.iter().copied().find(|r| *r == tag))
    }

    /// Why `image` does not run built-in, and how to make it: for an
    /// error or note where it then cannot run as an image.
    pub fn not_reproduced(&self, image: &str) -> String {
        let span = self
            .versions()
            .map_or_else(|| "none".to_string(), Versions::span);
        let what = match pin(image) {
            Pin::Digest(_) => "a digest, which cannot be matched to a release offline".to_string(),
            Pin::Untagged => {
                "no tag (a runtime pulls latest: whatever the registry holds now)".to_string()
            }
            Pin::Tag(tag) => match self.versions() {
                Some(v) if v.releases.contains(&tag) => {
                    format!("release {tag}, whose behaviour the built-in does not reproduce")
                }
                _ if tag.starts_with('v') && tag.matches('.').count() == 2 => {
                    format!("tag {tag}, a release this build has not read")
                }
                _ => format!("tag {tag}, which moves or is not a release"),
            },
        };
        let answers = if span == "none" {
            "answers as no release of the catalog (master's code, never released)".to_string()
        } else {
            format!("answers as {span} only")
        };
        format!(
            "{image}: {what}; the built-in {} {answers}, so it runs as an image: name one of \
             those tags, or run it built in anyway with --builtins=any-tag (or a \
             FunctionConfig goExecutor listing the tag)",
            self.name
        )
    }
}

/// The table as docs/builtins.md prints it (a Markdown table).
pub fn markdown() -> String {
    let mut out = String::from(
        "| function | built in for | the catalog's releases | how the others differ |\n\
         |---|---|---|---|\n",
    );
    let marked = |v: &Versions, list: &[&str]| {
        list.iter()
            .map(|r| match v.porch {
                Some(p) if p == *r => format!("{r} (Porch's)"),
                _ => (*r).to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for v in TABLE {
        let built_in = if v.reproduced.is_empty() {
            "none (`--builtins=any-tag` or a goExecutor runs master's code)".to_string()
        } else {
            marked(v, v.reproduced)
        };
        let note = if v.note.is_empty() {
            "the same code"
        } else {
            v.note
        };
        out.push_str(&format!(
            "| `{}` | {built_in} | {} | {note} |\n",
            v.name,
            marked(v, v.releases),
        ));
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_has_a_row_and_every_row_a_builtin() {
        for b in crate::ALL {
            assert!(b.versions().is_some(), "{} has no row", b.name);
        }
        for v in TABLE {
            assert!(
                crate::find(v.name).is_some(),
                "row {} is no built-in",
                v.name
            );
        }
    }

    #[test]
    fn a_row_reproduces_a_run_of_its_releases() {
        for v in TABLE {
            if v.reproduced.is_empty() {
                // Master's code, never released (create-setters).
                assert!(!v.note.is_empty(), "{}: say why", v.name);
                continue;
            }
            let start = v
                .releases
                .iter()
                .position(|r| Some(r) == v.reproduced.first())
                .unwrap_or_else(|| panic!("{}: {:?} not a release", v.name, v.reproduced));
            assert_eq!(
                &v.releases[start..start + v.reproduced.len()],
                v.reproduced,
                "{}",
                v.name
            );
        }
    }

    #[test]
    fn only_reproduced_release_tags_pin_a_builtin() {
        let b = crate::find("set-namespace").unwrap();
        let v = b.versions().unwrap();
        for tag in v.reproduced {
            for image in [
                format!("gcr.io/kpt-fn/set-namespace:{tag}"),
                format!("ghcr.io/kptdev/krm-functions-catalog/set-namespace:{tag}"),
                format!("set-namespace:{tag}"),
            ] {
                assert!(b.reproduces(&image), "{image}");
            }
        }
        for image in [
            "set-namespace",
            "set-namespace:latest",
            "set-namespace:v0.4",
            "set-namespace:v0",
            "set-namespace:unstable",
            "set-namespace:v0.4.3",
            "set-namespace:v0.3.4",
            "set-namespace:0.4.1",
            "set-namespace:v0.4.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "set-namespace@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "localhost:5000/set-namespace",
        ] {
            assert!(!b.reproduces(image), "{image}");
        }
    }

    /// docs/builtins.md prints the table between two markers;
    /// `UPDATE_DOCS=1 cargo test -p krm-builtins docs_print` writes it there.
    #[test]
    fn docs_print_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/builtins.md");
        let docs = std::fs::read_to_string(path).unwrap();
        let begin = "<!-- versions table: krm-builtins/src/versions.rs -->\n";
        let end = "<!-- end of versions table -->";
        let from = docs.find(begin).expect("the table's first marker") + begin.len();
        let to = docs.find(end).expect("the table's last marker");
        let table = markdown();
        if docs[from..to] != table && std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &docs[..from], &docs[to..])).unwrap();
            return;
        }
        assert_eq!(
            docs[from..to],
            table,
            "docs/builtins.md's version table is not versions.rs's (UPDATE_DOCS=1 writes it)"
        );
    }

    #[test]
    fn pins() {
        assert_eq!(pin("a"), Pin::Untagged);
        assert_eq!(pin("a:v1"), Pin::Tag("v1"));
        assert_eq!(pin("localhost:5000/a"), Pin::Untagged);
        assert_eq!(pin("localhost:5000/a:v2"), Pin::Tag("v2"));
        assert_eq!(pin("a:v1@sha256:00"), Pin::Digest("sha256:00"));
        assert_eq!(pin("a@sha256:00"), Pin::Digest("sha256:00"));
    }

    #[test]
    fn the_reason_names_the_reproduced_releases_and_the_opt_in() {
        let b = crate::find("set-namespace").unwrap();
        let span = b.versions().unwrap().span();
        for (image, says) in [
            ("set-namespace:v0.3.4", "release v0.3.4, whose behaviour"),
            ("set-namespace:v0.4.5", "a release this build has not read"),
            ("set-namespace:v0.4", "which moves or is not a release"),
            ("set-namespace", "no tag"),
            ("set-namespace@sha256:00", "a digest"),
        ] {
            let text = b.not_reproduced(image);
            assert!(text.contains(says), "{text}");
            assert!(text.contains(&span), "{text}");
            assert!(text.contains("--builtins=any-tag"), "{text}");
        }
    }
}
