//! The cases of kpt's `tag_resolution_test.go` and `runner_test.go`, of
//! Masterminds/semver's `version_test.go` and `constraints_test.go`, and of
//! regclient's `ref_test.go`, in our words; the lister is in memory.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use futures::executor::block_on;
use futures::future::BoxFuture;

use super::semver::{
    rewrite_range, validate_metadata, validate_prerelease, Constraint, ConstraintError,
    Constraints, Version, VersionError,
};
use super::*;

/// kpt's `fakeLister`: the tags of each image, or one error for all.
#[derive(Default)]
struct FakeLister {
    tags: HashMap<String, Vec<String>>,
    err: Option<String>,
    /// The images it was asked for.
    asked: std::sync::Mutex<Vec<String>>,
    calls: AtomicUsize,
}

impl FakeLister {
    fn with(image: &str, tags: &[&str]) -> Arc<FakeLister> {
        Arc::new(FakeLister {
            tags: HashMap::from([(
                image.to_string(),
                tags.iter().map(|t| t.to_string()).collect(),
            )]),
            ..FakeLister::default()
        })
    }

    fn failing(err: &str) -> Arc<FakeLister> {
        Arc::new(FakeLister {
            err: Some(err.to_string()),
            ..FakeLister::default()
        })
    }
}

impl TagLister for FakeLister {
    fn name(&self) -> String {
        "fake".into()
    }

    fn list<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Result<Vec<String>, String>> {
        self.calls.fetch_add(1, AtomicOrdering::SeqCst);
        self.asked.lock().unwrap().push(image.to_string());
        let answer = match &self.err {
            Some(err) => Err(err.clone()),
            None => Ok(self.tags.get(image).cloned().unwrap_or_default()),
        };
        Box::pin(async move { answer })
    }
}

fn listers(fakes: &[&Arc<FakeLister>]) -> Vec<Arc<dyn TagLister>> {
    fakes
        .iter()
        .map(|f| Arc::clone(*f) as Arc<dyn TagLister>)
        .collect()
}

fn resolve(image: &str, tag: &str, fakes: &[&Arc<FakeLister>]) -> Result<Resolved, String> {
    block_on(resolve_function_image(image, tag, &listers(fakes)))
}

const IMAGE: &str = "ghcr.io/kptdev/krm-functions-catalog/test-function";
const TAG_SET: [&str; 8] = [
    "v0.1", "v0.2.3", "v0.1.2", "v0", "v0.2", "v0.1.1", "v0.2.1", "v0.2.2",
];

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn originals(versions: &[Version]) -> Vec<&str> {
    versions.iter().map(Version::original).collect()
}

// ---- kpt: tag_resolution_test.go ----------------------------------------

#[test]
fn tags_are_filtered_parsed_and_sorted_highest_first() {
    let all = Constraints::parse("*").unwrap();
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["v0.1.0", "v0.1.2", "v0.1.1"],
            &["v0.1.2", "v0.1.1", "v0.1.0"],
        ),
        (
            &TAG_SET,
            &[
                "v0.2.3", "v0.2.2", "v0.2.1", "v0.2", "v0.1.2", "v0.1.1", "v0.1", "v0",
            ],
        ),
        (
            &[
                "v0.1.0",
                "sha256-59a5a43c8fcafaf14b5fd4463ccb3fda61d6c0b55ff218cbb5783a29c8d6c20c.sbom",
                "v0.1.1",
            ],
            &["v0.1.1", "v0.1.0"],
        ),
        (
            &["v0.1.0", "master-git-38f885f", "v0.1.1"],
            &["v0.1.1", "v0.1.0"],
        ),
        (&["v0.1.0", "38f885f", "v0.1.1"], &["v0.1.1", "v0.1.0"]),
    ];
    for (tags, expected) in cases {
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        let mut found = filter_parse_tags(&tags, &all);
        sort_versions(&mut found);
        assert_eq!(originals(&found), expected, "{tags:?}");
    }
}

#[test]
fn a_constraint_takes_the_highest_matching_tag_and_replaces_tag_and_digest() {
    let lister = FakeLister::with(IMAGE, &TAG_SET);
    let digest = "@sha256:59a5a43c8fcafaf14b5fd4463ccb3fda61d6c0b55ff218cbb5783a29c8d6c20c";
    let cases = [
        (IMAGE.to_string(), "~0.1", "v0.1.2"),
        (IMAGE.to_string(), "0.2 - 0.2.2", "v0.2.2"),
        (format!("{IMAGE}{digest}"), "~0.1", "v0.1.2"),
        (format!("{IMAGE}:v9"), "~0.1", "v0.1.2"),
    ];
    for (image, tag, expected) in cases {
        let resolved = resolve(&image, tag, &[&lister]).unwrap();
        assert_eq!(
            resolved,
            Resolved {
                image: format!("{IMAGE}:{expected}"),
                warning: None
            },
            "{image} {tag}"
        );
    }
    // The lister is asked for the repository, without tag or digest.
    assert!(lister.asked.lock().unwrap().iter().all(|i| i == IMAGE));

    let without_latest = FakeLister::with(IMAGE, &TAG_SET[..7]);
    assert_eq!(
        resolve(IMAGE, "0.2 - 0.2.2", &[&without_latest])
            .unwrap()
            .image,
        format!("{IMAGE}:v0.2.1")
    );
}

#[test]
fn no_match_no_tags_or_a_failed_listing_is_kpts_error() {
    let expected = |tag: &str| {
        Err(format!(
            "no tag could be found matching the version constraint \"{tag}\""
        ))
    };
    let all = FakeLister::with(IMAGE, &TAG_SET);
    assert_eq!(resolve(IMAGE, "0.3.x", &[&all]), expected("0.3.x"));
    let none = FakeLister::with(IMAGE, &[]);
    assert_eq!(resolve(IMAGE, "~0.1", &[&none]), expected("~0.1"));
    let failing = FakeLister::failing("test");
    assert_eq!(resolve(IMAGE, "~0.1", &[&failing]), expected("~0.1"));
    assert_eq!(resolve(IMAGE, "~9.9", &[]), expected("~9.9"));
}

#[test]
fn an_empty_tag_leaves_the_image_as_written() {
    let lister = FakeLister::with(IMAGE, &TAG_SET);
    for image in [
        format!("{IMAGE}:v0.3.1"),
        "nginx".into(),
        "Not A Ref".into(),
    ] {
        assert_eq!(
            resolve(&image, "", &[&lister]),
            Ok(Resolved {
                image: image.clone(),
                warning: None
            })
        );
    }
    assert_eq!(lister.calls.load(AtomicOrdering::SeqCst), 0);
}

#[test]
fn an_exact_version_is_used_as_written_without_listing() {
    let failing = FakeLister::failing("test");
    let lister = FakeLister::with(IMAGE, &TAG_SET);
    // `0.4` and `v0.4` are versions, not constraints: no `v0.4.x` is
    // looked for, and the text is not normalized.
    for tag in [
        "v0.3.1",
        "0.4",
        "v0.4",
        "0.4.3",
        "1",
        "v1.2.3-rc.1",
        "01.2.3",
        "1234567",
    ] {
        for fake in [&failing, &lister] {
            assert_eq!(
                resolve(IMAGE, tag, &[fake]),
                Ok(Resolved {
                    image: format!("{IMAGE}:{tag}"),
                    warning: None
                }),
                "{tag}"
            );
        }
    }
    assert_eq!(failing.calls.load(AtomicOrdering::SeqCst), 0);
    assert_eq!(lister.calls.load(AtomicOrdering::SeqCst), 0);
    // A version that is no image tag.
    assert_eq!(
        resolve(IMAGE, "v0.3.1+build", &[&lister]),
        Err(format!(
            "`function.tag` \"v0.3.1+build\" must be a valid image tag: {IMAGE_TAG_ERROR}"
        ))
    );
    assert_eq!(tag_warning("v0.3.1+build"), None);
}

#[test]
fn any_other_tag_is_used_literally_with_kpts_warning() {
    let failing = FakeLister::failing("test");
    for tag in ["master-git-38f885f", "latest", "de3c135"] {
        let resolved = resolve(IMAGE, tag, &[&failing]).unwrap();
        assert_eq!(resolved.image, format!("{IMAGE}:{tag}"));
        assert_eq!(resolved.warning, tag_warning(tag));
        assert!(resolved.warning.is_some());
    }
    assert_eq!(failing.calls.load(AtomicOrdering::SeqCst), 0);
    assert_eq!(
        tag_warning("latest").unwrap(),
        r#"Tag "latest" could not be parsed as a semantic version ("invalid semantic version") or constraint ("improper constraint: "latest""), will use it literally"#
    );
    // Neither, and no tag: kpt warns, then fails.
    assert_eq!(
        resolve(IMAGE, ">>0.1", &[&failing]),
        Err(format!(
            "`function.tag` \">>0.1\" must be a valid image tag: {IMAGE_TAG_ERROR}"
        ))
    );
    assert_eq!(
        tag_warning(">>0.1").unwrap(),
        r#"Tag ">>0.1" could not be parsed as a semantic version ("invalid semantic version") or constraint ("improper constraint: ">>0.1""), will use it literally"#
    );
    // Versions and constraints have no warning.
    for tag in ["", "0.4", "~0.4", "*"] {
        assert_eq!(tag_warning(tag), None, "{tag}");
    }
}

#[test]
fn an_image_regclient_cannot_read_is_kpts_error() {
    let cases = [
        (
            "aaaaa~~234..=/",
            r#"failed to parse image "aaaaa~~234..=/" as reference: invalid reference "aaaaa~~234..=/""#,
        ),
        (
            "docker.io/Upper/Repo",
            r#"failed to parse image "docker.io/Upper/Repo" as reference: invalid reference "docker.io/Upper/Repo", repo must be lowercase"#,
        ),
        (
            "unknown://repo:tag",
            r#"failed to parse image "unknown://repo:tag" as reference: invalid reference, unknown scheme "unknown" in "unknown://repo:tag""#,
        ),
    ];
    for (image, expected) in cases {
        assert_eq!(resolve(image, "~0.1", &[]), Err(expected.to_string()));
    }
}

#[test]
fn all_listers_matches_are_pooled_and_failing_or_empty_ones_skipped() {
    // The listers, the tag, and the tag taken (`None`: kpt's error).
    type Case = (Vec<Arc<FakeLister>>, &'static str, Option<&'static str>);
    let cases: [Case; 7] = [
        (
            vec![
                FakeLister::with(IMAGE, &["v0.1.0", "v0.1.1"]),
                FakeLister::with(IMAGE, &["v0.2.0"]),
            ],
            "~0.1",
            Some("v0.1.1"),
        ),
        (
            vec![
                FakeLister::with(IMAGE, &["v0.1.0"]),
                FakeLister::with(IMAGE, &["v0.2.0", "v0.2.1"]),
            ],
            "*",
            Some("v0.2.1"),
        ),
        (
            vec![
                FakeLister::failing("registry unavailable"),
                FakeLister::with(IMAGE, &["v0.3.0"]),
            ],
            "*",
            Some("v0.3.0"),
        ),
        (
            vec![
                FakeLister::with(IMAGE, &[]),
                FakeLister::with(IMAGE, &["v0.1.0", "v0.1.2"]),
            ],
            "~0.1",
            Some("v0.1.2"),
        ),
        (
            vec![
                FakeLister::with(IMAGE, &["v0.1.0"]),
                FakeLister::with(IMAGE, &["v0.2.0"]),
            ],
            "0.3.x",
            None,
        ),
        (
            vec![
                FakeLister::with(IMAGE, &["v0.1.0", "v0.2.0"]),
                FakeLister::with(IMAGE, &["v0.2.0", "v0.1.5"]),
            ],
            "*",
            Some("v0.2.0"),
        ),
        (
            vec![FakeLister::failing("a down"), FakeLister::failing("b down")],
            "*",
            None,
        ),
    ];
    for (fakes, tag, expected) in cases {
        let fakes: Vec<&Arc<FakeLister>> = fakes.iter().collect();
        let got = resolve(IMAGE, tag, &fakes);
        match expected {
            Some(expected) => assert_eq!(got.unwrap().image, format!("{IMAGE}:{expected}")),
            None => assert_eq!(
                got.unwrap_err(),
                format!("no tag could be found matching the version constraint \"{tag}\"")
            ),
        }
        // Every lister is asked, also after one had a match.
        assert!(fakes
            .iter()
            .all(|f| f.calls.load(AtomicOrdering::SeqCst) == 1));
    }
}

#[test]
fn equal_versions_keep_the_listers_order() {
    // `v0.2` (the local engine's) and `0.2.0` (the registry's) are equal
    // versions: the first listed is taken, as kpt's sort keeps it first.
    let local = FakeLister::with(IMAGE, &["v0.2"]);
    let registry = FakeLister::with(IMAGE, &["0.2.0", "v0.1.9"]);
    assert_eq!(
        resolve(IMAGE, "*", &[&local, &registry]).unwrap().image,
        format!("{IMAGE}:v0.2")
    );
    assert_eq!(
        resolve(IMAGE, "*", &[&registry, &local]).unwrap().image,
        format!("{IMAGE}:0.2.0")
    );
}

#[test]
fn prereleases_are_taken_only_by_a_constraint_that_names_one() {
    let lister = FakeLister::with(
        IMAGE,
        &[
            "v0.4.1",
            "v0.4.3",
            "v0.4.4-rc.1",
            "v0.5.0-alpha",
            "v1.0.0-beta.2",
        ],
    );
    let cases = [
        ("~0.4", "v0.4.3"),
        ("*", "v0.4.3"),
        ("^0.4", "v0.4.3"),
        (">=0.4", "v0.4.3"),
        ("~0.4.4-rc.0", "v0.4.4-rc.1"),
        (">=0.4.0-0", "v1.0.0-beta.2"),
        (">=0.4.0-0 <0.4.5", "v0.4.4-rc.1"),
        // A prerelease of 1.0.0 is below 1.0.0, so `<1` lets it in.
        (">=0.4.0-0 <1", "v1.0.0-beta.2"),
        // The group without one keeps them out, the other lets them in.
        ("~0.4 || >=1.0.0-beta.1", "v1.0.0-beta.2"),
    ];
    for (tag, expected) in cases {
        assert_eq!(
            resolve(IMAGE, tag, &[&lister]).unwrap().image,
            format!("{IMAGE}:{expected}"),
            "{tag}"
        );
    }
}

#[test]
fn the_resolved_image_is_regclients_common_name() {
    let cases = [
        ("nginx", "1.25", "docker.io/library/nginx:1.25"),
        ("myorg/fn:v1", "v2", "docker.io/myorg/fn:v2"),
        ("docker.io/alpine", "3", "docker.io/library/alpine:3"),
        ("index.docker.io/library/alpine", "3", "docker.io/library/alpine:3"),
        ("registry-1.docker.io/x/y", "3", "docker.io/x/y:3"),
        ("localhost/group/image", "v1", "localhost/group/image:v1"),
        ("localhost:5000/fn:old", "v1", "localhost:5000/fn:v1"),
        ("127.0.0.1:5000/fn", "latest", "127.0.0.1:5000/fn:latest"),
        ("[::1]:5000/fn", "v1", "[::1]:5000/fn:v1"),
        (
            "ghcr.io/kptdev/krm-functions-catalog/set-labels@sha256:59a5a43c8fcafaf14b5fd4463ccb3fda61d6c0b55ff218cbb5783a29c8d6c20c",
            "v0.2.3",
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.3",
        ),
        (
            "example.com/fns/x:v0.1.0@sha256:59a5a43c8fcafaf14b5fd4463ccb3fda61d6c0b55ff218cbb5783a29c8d6c20c",
            "v0.2",
            "example.com/fns/x:v0.2",
        ),
        ("EXAMPLE/group-image:V42", "v1", "EXAMPLE/group-image:v1"),
        ("ocidir://path/to/dir:v1", "v2", "ocidir://path/to/dir:v2"),
        // regclient names no `ocifile` reference.
        ("ocifile://path/to/file.tgz", "v2", ""),
    ];
    for (image, tag, expected) in cases {
        let resolved = resolve(image, tag, &[]).unwrap();
        assert_eq!(resolved.image, expected, "{image} {tag}");
    }
    // Listers are asked for the normalized repository.
    let lister = FakeLister::with("docker.io/library/nginx", &["1.24.0", "1.25.3", "1.25.1"]);
    assert_eq!(
        resolve("nginx:1.20", "~1.25", &[&lister]).unwrap().image,
        "docker.io/library/nginx:1.25.3"
    );
    assert_eq!(
        *lister.asked.lock().unwrap(),
        vec!["docker.io/library/nginx".to_string()]
    );
}

#[test]
fn abbrev_slice_shows_three_or_the_first_two_and_the_last() {
    let versions: Vec<Version> = TAG_SET.iter().map(|t| v(t)).collect();
    let cases = [
        (0, "[]"),
        (1, "[v0.1]"),
        (2, "[v0.1, v0.2.3]"),
        (3, "[v0.1, v0.2.3, v0.1.2]"),
        (4, "[v0.1, v0.2.3, ..., v0]"),
        (8, "[v0.1, v0.2.3, ..., v0.2.2]"),
    ];
    for (n, expected) in cases {
        assert_eq!(abbrev_slice(&versions[..n]), expected);
    }
}

// ---- kpt: runner_test.go -------------------------------------------------

#[test]
fn has_tag_or_digest_looks_after_the_last_slash() {
    let cases = [
        ("nginx:1.25", true),
        ("nginx:latest", true),
        (
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5",
            true,
        ),
        ("nginx@sha256:abc123", true),
        (
            "ghcr.io/kptdev/krm-functions-catalog/set-labels@sha256:abc123",
            true,
        ),
        ("nginx:1.25@sha256:abc123", true),
        ("nginx", false),
        ("ghcr.io/kptdev/krm-functions-catalog/set-labels", false),
        ("library/nginx", false),
        ("localhost:5000/myimage", false),
        ("localhost:5000/myimage:v1", true),
        ("localhost:5000/myimage@sha256:abc123", true),
    ];
    for (image, expected) in cases {
        assert_eq!(has_tag_or_digest(image), expected, "{image}");
    }
    assert_eq!(
        with_latest("localhost:5000/myimage"),
        "localhost:5000/myimage:latest"
    );
    assert_eq!(with_latest("nginx:1.25"), "nginx:1.25");
    assert_eq!(with_latest("nginx@sha256:abc123"), "nginx@sha256:abc123");
    assert_eq!(
        with_latest("builtins/gen-pkg-context"),
        "builtins/gen-pkg-context:latest"
    );
}

#[test]
fn valid_tags_are_distributions_tag_pattern_whole() {
    let long = "a".repeat(128);
    for tag in ["v0.1.0", "_x", "0", "latest", "__a--b..5__", long.as_str()] {
        assert!(valid_tag(tag), "{tag}");
    }
    let too_long = "a".repeat(129);
    for tag in [
        "",
        ".v1",
        "-v1",
        "v1+b",
        ">>0.1",
        "a b",
        "é",
        too_long.as_str(),
    ] {
        assert!(!valid_tag(tag), "{tag}");
    }
}

// ---- regclient: ref_test.go ----------------------------------------------

#[test]
fn references_are_read_as_regclient_reads_them() {
    let digest = "sha256:15f840677a5e245d9ea199eb9b026b1539208a5183621dced7b469f6aa678115";
    let with_digest = format!("registry:5000/group/image@{digest}");
    let cases = [
        ("alpine", "docker.io", "library/alpine", "latest", ""),
        (
            "regclient/regctl:edge",
            "docker.io",
            "regclient/regctl",
            "edge",
            "",
        ),
        (
            "example.com/group/image:v42",
            "example.com",
            "group/image",
            "v42",
            "",
        ),
        (
            "Example-1/image:1.0-BETA",
            "Example-1",
            "image",
            "1.0-BETA",
            "",
        ),
        (
            "example./g/roup/image:a",
            "example.",
            "g/roup/image",
            "a",
            "",
        ),
        (
            "e.xample.co/g-r.o__u_p/im----age:a",
            "e.xample.co",
            "g-r.o__u_p/im----age",
            "a",
            "",
        ),
        (
            "localhost:5000/group/image:v42",
            "localhost:5000",
            "group/image",
            "v42",
            "",
        ),
        (
            "[fddd:1222:1222:1222::ac29:5a6a]:5000/image:v42",
            "[fddd:1222:1222:1222::ac29:5a6a]:5000",
            "image",
            "v42",
            "",
        ),
        (
            with_digest.as_str(),
            "registry:5000",
            "group/image",
            "",
            digest,
        ),
    ];
    for (text, registry, repository, tag, digest) in cases {
        let parsed = ImageRef::parse(text).unwrap();
        assert_eq!(
            (
                parsed.scheme.as_str(),
                parsed.registry.as_str(),
                parsed.repository.as_str(),
                parsed.tag.as_str(),
                parsed.digest.as_str()
            ),
            ("reg", registry, repository, tag, digest),
            "{text}"
        );
    }
    for bad in [
        "-docker.io/project/image:tag",
        "docker-.io/project/image:tag",
        "[1::2::3]/project/image:tag",
        "::1/project/image:tag",
        "project/-image:tag",
        "project/image-:tag",
        "project/image___x:tag",
        "project/star*:tag",
        "localhost",
        "",
    ] {
        assert_eq!(
            ImageRef::parse(bad),
            Err(format!("invalid reference \"{bad}\"")),
            "{bad}"
        );
    }
    let dir = ImageRef::parse("ocidir://path/2/~dir~/+rules_oci+/examples:latest").unwrap();
    assert_eq!(
        (dir.scheme.as_str(), dir.path.as_str(), dir.tag.as_str()),
        ("ocidir", "path/2/~dir~/+rules_oci+/examples", "latest")
    );
    assert_eq!(
        ImageRef::parse("ocifile://path/to/file.tgz@sha256:ZZ15"),
        Err(
            r#"invalid reference, invalid path for scheme "ocifile": path/to/file.tgz@sha256:ZZ15"#
                .into()
        )
    );
}

// ---- Masterminds/semver: version_test.go ---------------------------------

#[test]
fn versions_are_read_loosely() {
    let good = [
        "1.2.3",
        "1.2.3+test.01",
        "1.2.3-alpha.-1",
        "v1.2.3",
        "1.0",
        "v1.0",
        "1",
        "v1",
        "1.2-5",
        "v1.2-5",
        "1.2-beta.5",
        "v1.2-beta.5",
        "1.2.0-x.Y.0+metadata",
        "v1.2.0-x.Y.0+metadata",
        "1.2.0-x.Y.0+metadata-width-hypen",
        "1.2.3-rc1-with-hypen",
        "v1.2.3-rc1-with-hypen",
        "1.2.3-0abc123",
        "1.2.2147483648",
        "1.2147483648.3",
        "2147483648.3.0",
        "20221209-update-renovatejson-v4",
        "01.1.1",
        "1.01.1",
        "1.1.01",
        "18446744073709551615",
    ];
    for text in good {
        let version = Version::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(version.original(), text);
    }
    let bad = [
        ("1.2.3-alpha.01", VersionError::SegmentStartsZero),
        ("1.2.3-beta.01", VersionError::SegmentStartsZero),
        ("1.2.3-023658", VersionError::SegmentStartsZero),
        (
            "1.2.31----RC-SNAPSHOT.12.09.1--.12+788",
            VersionError::SegmentStartsZero,
        ),
        ("1.2.beta", VersionError::Invalid),
        ("v1.2.beta", VersionError::Invalid),
        ("foo", VersionError::Invalid),
        ("\n1.2", VersionError::Invalid),
        ("1.2.3\n", VersionError::Invalid),
        ("1.2.3.4", VersionError::Invalid),
        ("12.3.4.1234", VersionError::Invalid),
        ("1.1.2+.123", VersionError::Invalid),
        ("1.0.0-alpha_beta", VersionError::Invalid),
        ("1.0.0-alpha..", VersionError::Invalid),
        ("1.0.0-alpha..1", VersionError::Invalid),
        ("9.8.7+meta+meta", VersionError::Invalid),
        ("V1.2.3", VersionError::Invalid),
        ("+1.2.3", VersionError::Invalid),
        ("", VersionError::Invalid),
        ("latest", VersionError::Invalid),
    ];
    for (text, expected) in bad {
        assert_eq!(Version::parse(text).unwrap_err(), expected, "{text:?}");
    }
    assert_eq!(
        Version::parse("18446744073709551616")
            .unwrap_err()
            .to_string(),
        r#"error parsing version segment: strconv.ParseUint: parsing "18446744073709551616": value out of range"#
    );
    assert_eq!(
        Version::parse("1.99999999999999999999")
            .unwrap_err()
            .to_string(),
        r#"error parsing version segment: strconv.ParseUint: parsing "99999999999999999999": value out of range"#
    );
    for (err, text) in [
        (VersionError::Invalid, "invalid semantic version"),
        (
            VersionError::SegmentStartsZero,
            "version segment starts with 0",
        ),
        (VersionError::InvalidPrerelease, "invalid prerelease string"),
        (VersionError::InvalidMetadata, "invalid metadata string"),
    ] {
        assert_eq!(err.to_string(), text);
    }
}

#[test]
fn version_parts_and_string() {
    let version = v("v1.2.3-beta.1+build.123");
    assert_eq!(
        (
            version.major(),
            version.minor(),
            version.patch(),
            version.prerelease(),
            version.metadata()
        ),
        (1, 2, 3, "beta.1", "build.123")
    );
    assert_eq!(version.to_string(), "1.2.3-beta.1+build.123");
    assert_eq!(v("v0.4").to_string(), "0.4.0");
    assert_eq!(v("v0.4").original(), "v0.4");
    assert_eq!(v("01.02.03").to_string(), "1.2.3");
}

#[test]
fn prerelease_and_metadata_identifiers_are_checked() {
    for (pre, expected) in [
        ("foo", Ok(())),
        ("alpha.1", Ok(())),
        ("alpha.01", Err(VersionError::SegmentStartsZero)),
        ("foo☃︎", Err(VersionError::InvalidPrerelease)),
        ("alpha.0-1", Ok(())),
        ("alpha..1", Err(VersionError::InvalidPrerelease)),
    ] {
        assert_eq!(validate_prerelease(pre), expected, "{pre}");
    }
    for (meta, expected) in [
        ("foo", Ok(())),
        ("alpha.1", Ok(())),
        ("alpha.01", Ok(())),
        ("foo☃︎", Err(VersionError::InvalidMetadata)),
        ("alpha.0-1", Ok(())),
        ("a.", Err(VersionError::InvalidMetadata)),
    ] {
        assert_eq!(validate_metadata(meta), expected, "{meta}");
    }
}

#[test]
fn versions_compare_by_precedence() {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let cases = [
        ("1.2.3", "1.5.1", Less),
        ("2.2.3", "1.5.1", Greater),
        ("2.2.3", "2.2.2", Greater),
        ("3.2-beta", "3.2-beta", Equal),
        ("1.3", "1.1.4", Greater),
        ("4.2", "4.2-beta", Greater),
        ("4.2-beta", "4.2", Less),
        ("4.2-alpha", "4.2-beta", Less),
        ("4.2-alpha", "4.2-alpha", Equal),
        ("4.2-beta.2", "4.2-beta.1", Greater),
        ("4.2-beta2", "4.2-beta1", Greater),
        ("4.2-beta", "4.2-beta.2", Less),
        ("4.2-beta", "4.2-beta.foo", Less),
        ("4.2-beta.2", "4.2-beta", Greater),
        ("4.2-beta.foo", "4.2-beta", Greater),
        ("1.2+bar", "1.2+baz", Equal),
        ("1.0.0-beta.4", "1.0.0-beta.-2", Less),
        ("1.0.0-beta.-2", "1.0.0-beta.-3", Less),
        ("1.0.0-beta.-3", "1.0.0-beta.5", Greater),
        ("3.2-beta+foo", "3.2-beta+bar", Equal),
        ("v0.2", "0.2.0", Equal),
        ("1.0.0-rc.10", "1.0.0-rc.9", Greater),
        ("1.0.0-rc.a", "1.0.0-rc.B", Greater),
    ];
    for (a, b, expected) in cases {
        assert_eq!(v(a).compare(&v(b)), expected, "{a} vs {b}");
    }
}

// ---- Masterminds/semver: constraints_test.go -----------------------------

#[test]
fn one_constraint_reads_its_operator_and_version() {
    let cases = [
        (">= 1.2", ">=", "1.2.0"),
        ("1.0", "", "1.0.0"),
        ("<= 1.2", "<=", "1.2.0"),
        ("=< 1.2", "=<", "1.2.0"),
        ("=> 1.2", "=>", "1.2.0"),
        ("v1.2", "", "1.2.0"),
        ("=1.5", "=", "1.5.0"),
        ("> 1.3", ">", "1.3.0"),
        ("< 1.4.1", "<", "1.4.1"),
        ("< 40.50.10", "<", "40.50.10"),
        ("~> 1.x", "~>", "1.0.0"),
        ("^2.x.x-beta", "^", "2.0.0-beta"),
        ("1.2.3+meta", "", "1.2.3+meta"),
        ("1.2.x+meta", "", "1.2.0"),
    ];
    for (text, op, version) in cases {
        let c = Constraint::parse(text).unwrap();
        assert_eq!(
            (c.origfunc.as_str(), c.con.to_string()),
            (op, version.into()),
            "{text}"
        );
    }
    assert!(Constraint::parse("foo").is_err());
}

#[test]
fn one_constraint_checks_a_version() {
    let cases = [
        ("=2.0.0", "1.2.3", false),
        ("=2.0.0", "2.0.0", true),
        ("=2.0", "1.2.3", false),
        ("=2.0", "2.0.0", true),
        ("=2.0", "2.0.1", true),
        ("4.1", "4.1.0", true),
        ("!=4.1.0", "4.1.0", false),
        ("!=4.1.0", "4.1.1", true),
        ("!=4.1", "4.1.0", false),
        ("!=4.1", "4.1.1", false),
        ("!=4.1", "5.1.0-alpha.1", false),
        ("!=4.1.0", "5.1.0-alpha.1", false),
        ("!=4.1-alpha", "4.1.0", true),
        ("!=4.1", "5.1.0", true),
        ("<11", "0.1.0", true),
        ("<11", "11.1.0", false),
        ("<1.1", "0.1.0", true),
        ("<1.1", "1.1.0", false),
        ("<1.1", "1.1.1", false),
        ("<=11", "1.2.3", true),
        ("<=11", "12.2.3", false),
        ("<=11", "11.2.3", true),
        ("<=1.1", "1.2.3", false),
        ("<=1.1", "0.1.0", true),
        ("<=1.1", "1.1.0", true),
        ("<=1.1", "1.1.1", true),
        (">1.1", "4.1.0", true),
        (">1.1", "1.1.0", false),
        (">0", "0", false),
        (">0", "1", true),
        (">0", "0.0.1-alpha", false),
        (">0.0", "0.0.1-alpha", false),
        (">0-0", "0.0.1-alpha", false),
        (">0.0-0", "0.0.1-alpha", false),
        (">0", "0.0.0-alpha", false),
        (">0-0", "0.0.0-alpha", false),
        (">0.0.0-0", "0.0.0-alpha", true),
        (">1.2.3-alpha.1", "1.2.3-alpha.2", true),
        (">1.2.3-alpha.1", "1.3.3-alpha.2", true),
        (">11", "11.1.0", false),
        (">11.1", "11.1.0", false),
        (">11.1", "11.1.1", false),
        (">11.1", "11.2.1", true),
        (">=11", "11.1.2", true),
        (">=11.1", "11.1.2", true),
        (">=11.1", "11.0.2", false),
        (">=1.1", "4.1.0", true),
        (">=1.1", "1.1.0", true),
        (">=1.1", "0.0.9", false),
        (">=0", "0.0.1-alpha", false),
        (">=0.0", "0.0.1-alpha", false),
        (">=0-0", "0.0.1-alpha", true),
        (">=0.0-0", "0.0.1-alpha", true),
        (">=0", "0.0.0-alpha", false),
        (">=0-0", "0.0.0-alpha", true),
        (">=0.0.0-0", "0.0.0-alpha", true),
        (">=0.0.0-0", "1.2.3", true),
        (">=0.0.0-0", "3.4.5-beta.1", true),
        ("<0", "0.0.0-alpha", false),
        ("<0-z", "0.0.0-alpha", true),
        (">=0", "0", true),
        ("=0", "1", false),
        ("*", "1", true),
        ("*", "4.5.6", true),
        ("*", "1.2.3-alpha.1", false),
        ("*-0", "1.2.3-alpha.1", true),
        ("2.*", "1", false),
        ("2.*", "3.4.5", false),
        ("2.*", "2.1.1", true),
        ("2.1.*", "2.1.1", true),
        ("2.1.*", "2.2.1", false),
        ("", "1", true),
        ("", "4.5.6", true),
        ("", "1.2.3-alpha.1", false),
        ("2", "1", false),
        ("2", "3.4.5", false),
        ("2", "2.1.1", true),
        ("2.1", "2.1.1", true),
        ("2.1", "2.2.1", false),
        ("~1.2.3", "1.2.4", true),
        ("~1.2.3", "1.3.4", false),
        ("~1.2", "1.2.4", true),
        ("~1.2", "1.3.4", false),
        ("~1", "1.2.4", true),
        ("~1", "2.3.4", false),
        ("~0.2.3", "0.2.5", true),
        ("~0.2.3", "0.3.5", false),
        ("~1.2.3-beta.2", "1.2.3-beta.4", true),
        ("~1.2.3-beta.2", "1.2.4-beta.2", true),
        ("~1.2.3-beta.2", "1.3.4-beta.2", false),
        ("^1.2.3", "1.8.9", true),
        ("^1.2.3", "2.8.9", false),
        ("^1.2.3", "1.2.1", false),
        ("^1.1.0", "2.1.0", false),
        ("^1.2.0", "2.2.1", false),
        ("^1.2.0", "1.2.1-alpha.1", false),
        ("^1.2.0-alpha.0", "1.2.1-alpha.1", true),
        ("^1.2.0-alpha.0", "1.2.1-alpha.0", true),
        ("^1.2.0-alpha.2", "1.2.0-alpha.1", false),
        ("^1.2", "1.8.9", true),
        ("^1.2", "2.8.9", false),
        ("^1", "1.8.9", true),
        ("^1", "2.8.9", false),
        ("^0.2.3", "0.2.5", true),
        ("^0.2.3", "0.5.6", false),
        ("^0.2", "0.2.5", true),
        ("^0.2", "0.5.6", false),
        ("^0.0.3", "0.0.3", true),
        ("^0.0.3", "0.0.4", false),
        ("^0.0", "0.0.3", true),
        ("^0.0", "0.1.4", false),
        ("^0.0", "1.0.4", false),
        ("^0", "0.2.3", true),
        ("^0", "1.1.4", false),
        ("^0.2.3-beta.2", "0.2.3-beta.4", true),
        ("^0.2.3-beta.2", "0.2.4-beta.2", true),
        ("^0.2.3-beta.2", "0.3.4-beta.2", false),
        ("^0.2.3-beta.2", "0.2.3-beta.2", true),
    ];
    for (text, version, expected) in cases {
        let c = Constraint::parse(text).unwrap();
        let has_pre = !c.con.prerelease().is_empty();
        assert_eq!(c.check(&v(version), has_pre), expected, "{text} {version}");
    }
}

#[test]
fn constraints_split_into_or_and_and_groups() {
    let cases = [
        (">= 1.1", Some((1, 1))),
        (">40.50.60, < 50.70", Some((1, 2))),
        ("2.0", Some((1, 1))),
        ("v2.3.5-20161202202307-sha.e8fc5e5", Some((1, 1))),
        ("v1.2.3-0abc", Some((1, 1))),
        ("v1.2.3-beta.01", None),
        (">= bar", None),
        ("BAR >= 1.2.3", None),
        (">= 1.2.3 < 2.0", Some((1, 2))),
        (">= 1.2.3 < 2.0 || => 3.0 < 4", Some((2, 2))),
        (">= 1.2.3, < 2.0", Some((1, 2))),
        (">= 1.2.3, < 2.0 || => 3.0, < 4", Some((2, 2))),
        ("3 - 4 || => 3.0, < 4", Some((2, 2))),
        ("12.3.4.1234", None),
        ("12.23.4.1234", None),
        ("12.3.34.1234", None),
        ("12.3.34 ~1.2.3", Some((1, 2))),
        ("12.3.34~ 1.2.3", None),
        ("1.0.0 - 2.0.0, <=2.0.0", Some((1, 3))),
    ];
    for (text, expected) in cases {
        let got = Constraints::parse(text)
            .ok()
            .map(|c| (c.groups.len(), c.groups[0].len()));
        assert_eq!(got, expected, "{text}");
    }
}

#[test]
fn constraints_check_versions() {
    let cases = [
        ("*", "1.2.3", true),
        ("~0.0.0", "1.2.3", true),
        ("0.x.x", "1.2.3", false),
        ("0.0.x", "1.2.3", false),
        ("0.0.0", "1.2.3", false),
        ("^0.0.0", "1.2.3", false),
        ("= 2.0", "1.2.3", false),
        ("= 2.0", "2.0.0", true),
        ("4.1", "4.1.0", true),
        ("4.1.x", "4.1.3", true),
        ("1.x", "1.4", true),
        ("!=4.1", "4.1.0", false),
        ("!=4.1-alpha", "4.1.0-alpha", false),
        ("!=4.1-alpha", "4.1.1-alpha", false),
        ("!=4.1-alpha", "4.1.0", true),
        ("!=4.1", "5.1.0", true),
        ("!=4.x", "5.1.0", true),
        ("!=4.x", "4.1.0", false),
        ("!=4.1.x", "4.2.0", true),
        ("!=4.2.x", "4.2.3", false),
        (">1.1", "4.1.0", true),
        (">1.1", "1.1.0", false),
        ("<1.1", "0.1.0", true),
        ("<1.1", "1.1.0", false),
        ("<1.1", "1.1.1", false),
        ("<1.x", "1.1.1", false),
        ("<1.x", "0.1.1", true),
        ("<1.x", "2.0.0", false),
        ("<1.1.x", "1.2.1", false),
        ("<1.1.x", "1.1.500", false),
        ("<1.1.x", "1.0.500", true),
        ("<1.2.x", "1.1.1", true),
        (">=1.1", "4.1.0", true),
        (">=1.1", "4.1.0-beta", false),
        (">=1.1", "1.1.0", true),
        (">=1.1", "0.0.9", false),
        ("<=1.1", "0.1.0", true),
        ("<=1.1", "0.1.0-alpha", false),
        ("<=1.1-a", "0.1.0-alpha", true),
        ("<=1.1", "1.1.0", true),
        ("<=1.x", "1.1.0", true),
        ("<=2.x", "3.0.0", false),
        ("<=1.1", "1.1.1", true),
        ("<=1.1.x", "1.2.500", false),
        ("<=4.5", "3.4.0", true),
        ("<=4.5", "3.7.0", true),
        ("<=4.5", "4.6.3", false),
        (">1.1, <2", "1.1.1", false),
        (">1.1, <2", "1.2.1", true),
        (">1.1, <3", "4.3.2", false),
        (">=1.1, <2, !=1.2.3", "1.2.3", false),
        (">1.1 <2", "1.1.1", false),
        (">1.1 <2", "1.2.1", true),
        (">1.1    <3", "4.3.2", false),
        (">=1.1    <2    !=1.2.3", "1.2.3", false),
        (">=1.1, <2, !=1.2.3 || > 3", "4.1.2", true),
        (">=1.1, <2, !=1.2.3 || > 3", "3.1.2", false),
        (">=1.1, <2, !=1.2.3 || >= 3", "3.0.0", true),
        (">=1.1, <2, !=1.2.3 || > 3", "3.0.0", false),
        (">=1.1, <2, !=1.2.3 || > 3", "1.2.3", false),
        (">=1.1 <2 !=1.2.3 || > 3", "4.1.2", true),
        (">= 1.1, <     2, !=1.2.3", "1.2.3", false),
        ("> 1.1 < 2", "1.1.1", false),
        (">1.1 < 2", "1.2.1", true),
        (">= 1.0.0  <= 2.0.0-beta", "1.0.1-beta", true),
        (">= 1.0.0  <= 2.0.0-beta", "1.0.1", true),
        (">= 1.0.0  <= 2.0.0-beta", "3.0.0", false),
        (">= 1.0.0  <= 2.0.0-beta || > 3", "1.0.1-beta", true),
        (">= 1.0.0  <= 2.0.0-beta || > 3", "3.0.1-beta", false),
        (
            ">= 1.0.0  <= 2.0.0-beta != 1.0.1 || > 3",
            "1.0.1-beta",
            true,
        ),
        (
            ">= 1.0.0  <= 2.0.0-beta != 1.0.1-beta || > 3",
            "1.0.1-beta",
            false,
        ),
        (">= 1.0.0-0  <= 2.0.0", "1.0.1-beta", true),
        ("1.1 - 2", "1.1.1", true),
        ("1.5.0 - 4.5", "3.7.0", true),
        ("1.1-3", "4.3.2", false),
        ("^1.1", "1.1.1", true),
        ("^1.1", "4.3.2", false),
        ("^1.x", "1.1.1", true),
        ("^2.x", "1.1.1", false),
        ("^1.x", "2.1.1", false),
        ("^1.x", "1.1.1-beta1", false),
        ("^1.1.2-alpha", "1.2.1-beta1", true),
        ("^1.2.x-alpha", "1.1.1-beta1", false),
        ("^0.0.1", "0.0.1", true),
        ("^0.0.1", "0.3.1", false),
        ("~*", "2.1.1", true),
        ("~1", "2.1.1", false),
        ("~1", "1.3.5", true),
        ("~1", "1.4", true),
        ("~1.x", "2.1.1", false),
        ("~1.x", "1.3.5", true),
        ("~1.x", "1.4", true),
        ("~1.1", "1.1.1", true),
        ("~1.1", "1.1.1-alpha", false),
        ("~1.1-alpha", "1.1.1-beta", true),
        ("~1.1.1-beta", "1.1.1-alpha", false),
        ("~1.1.1-beta", "1.1.1", true),
        ("~1.2.3", "1.2.5", true),
        ("~1.2.3", "1.2.2", false),
        ("~1.2.3", "1.3.2", false),
        ("~1.1", "1.2.3", false),
        ("~1.3", "2.4.5", false),
        ("1.0.0 - 2.0.0 <=2.0.0", "1.5.0", true),
        ("1.0.0 - 2.0.0, <=2.0.0", "1.5.0", true),
        // `v` prefixes and operators spelled both ways.
        ("~v0.4", "v0.4.3", true),
        ("=>v1, =<v2", "1.9.9", true),
        ("~>0.4", "0.5.0", false),
    ];
    for (text, version, expected) in cases {
        let c = Constraints::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.check(&v(version)), expected, "{text} {version}");
    }
}

#[test]
fn tilde_and_caret_are_the_ranges_the_facts_give() {
    // `~1.2.3` = `>=1.2.3 <1.3.0`, `~1.2` = `>=1.2.0 <1.3.0`, `~1` =
    // `>=1.0.0 <2.0.0`, `~0.0.0` and `~*` any; `^1.2.3` = `>=1.2.3 <2.0.0`,
    // `^0.2.3` = `>=0.2.3 <0.3.0`, `^0.0.3` = `=0.0.3`, `^0` = `<1.0.0`.
    let cases: [(&str, &[&str], &[&str]); 8] = [
        ("~1.2.3", &["1.2.3", "1.2.99"], &["1.2.2", "1.3.0"]),
        ("~1.2", &["1.2.0", "1.2.99"], &["1.1.9", "1.3.0"]),
        ("~1", &["1.0.0", "1.99.0"], &["0.9.9", "2.0.0"]),
        ("~0.0.0", &["0.0.0", "9.9.9"], &["1.0.0-rc.1"]),
        ("^1.2.3", &["1.2.3", "1.99.99"], &["1.2.2", "2.0.0"]),
        ("^0.2.3", &["0.2.3", "0.2.99"], &["0.2.2", "0.3.0"]),
        ("^0.0.3", &["0.0.3"], &["0.0.2", "0.0.4", "0.1.0"]),
        ("^0", &["0.0.0", "0.99.99"], &["1.0.0"]),
    ];
    for (text, inside, outside) in cases {
        let c = Constraints::parse(text).unwrap();
        for version in inside {
            assert!(c.check(&v(version)), "{text} {version}");
        }
        for version in outside {
            assert!(!c.check(&v(version)), "{text} {version}");
        }
    }
    let any = Constraints::parse("~*").unwrap();
    assert!(any.check(&v("0.0.0")) && any.check(&v("123.4.5")));
}

#[test]
fn hyphen_ranges_are_rewritten_as_masterminds_rewrites_them() {
    let cases = [
        ("2 - 3", ">= 2, <= 3 "),
        ("2 - 3, 2 - 3", ">= 2, <= 3 ,>= 2, <= 3 "),
        ("2 - 3, 4.0.0 - 5.1", ">= 2, <= 3 ,>= 4.0.0, <= 5.1 "),
        ("2 - 3 4.0.0 - 5.1", ">= 2, <= 3 >= 4.0.0, <= 5.1 "),
        ("1.0.0 - 2.0.0 <=2.0.0", ">= 1.0.0, <= 2.0.0 <=2.0.0"),
        ("0.4.1 - 0.4.3", ">= 0.4.1, <= 0.4.3 "),
    ];
    for (text, expected) in cases {
        assert_eq!(rewrite_range(text), expected, "{text}");
    }
}

#[test]
fn constraints_print_as_masterminds_prints_them() {
    let cases = [
        ("*", "*"),
        (">=1.2.3", ">=1.2.3"),
        (">= 1.2.3", ">=1.2.3"),
        (
            "2.x,   >=1.2.3 || >4.5.6, < 5.7",
            "2.x >=1.2.3 || >4.5.6 <5.7",
        ),
        (
            "2.x,   >=1.2.3 || >4.5.6, < 5.7 || >40.50.60, < 50.70",
            "2.x >=1.2.3 || >4.5.6 <5.7 || >40.50.60 <50.70",
        ),
        ("1.2", "1.2"),
        ("0.4.1 - 0.4.3", ">=0.4.1 <=0.4.3"),
    ];
    for (text, expected) in cases {
        let printed = Constraints::parse(text).unwrap().to_string();
        assert_eq!(printed, expected);
        assert!(Constraints::parse(&printed).is_ok());
    }
}

#[test]
fn improper_constraints_say_which_group() {
    let cases = [
        (">>0.1", r#"improper constraint: ">>0.1""#),
        ("latest", r#"improper constraint: "latest""#),
        ("", r#"improper constraint: """#),
        ("1.2 || foo", r#"improper constraint: " foo""#),
        ("a\"b", r#"improper constraint: "a\"b""#),
        ("1|2", "constraint parser error"),
        ("99999999999999999999", "constraint parser error"),
    ];
    for (text, expected) in cases {
        let err: ConstraintError = Constraints::parse(text).unwrap_err();
        assert_eq!(err.to_string(), expected, "{text:?}");
    }
    // The warning kpt prints for such a tag quotes both errors.
    assert_eq!(
        tag_warning("99999999999999999999").unwrap(),
        r#"Tag "99999999999999999999" could not be parsed as a semantic version ("error parsing version segment: strconv.ParseUint: parsing "99999999999999999999": value out of range") or constraint ("constraint parser error"), will use it literally"#
    );
}

#[test]
fn the_highest_matching_tag_is_taken_from_a_listing_as_written() {
    let tags: Vec<String> = [
        "v0.1.0",
        "v0.4.0",
        "v0.4.10",
        "v0.4.2",
        "0.4.11-rc.1",
        "latest",
        "sha256-v0.4.99",
        "v0.4.3-git-abc",
    ]
    .iter()
    .map(|t| t.to_string())
    .collect();
    let constraint = |c: &str| Constraints::parse(c).unwrap();
    assert_eq!(
        highest_matching_tag(&tags, &constraint("~0.4")),
        Some("v0.4.10")
    );
    assert_eq!(
        highest_matching_tag(&tags, &constraint("<0.4")),
        Some("v0.1.0")
    );
    assert_eq!(highest_matching_tag(&tags, &constraint("~0.9")), None);
    assert_eq!(highest_matching_tag(&[], &constraint("*")), None);
}

#[test]
fn only_constraints_that_are_not_one_version_are_resolved() {
    for exact in [
        "", "v0.4.1", "0.4", "1", "=v0.4.1", "= 0.4.1", "latest", "unstable",
    ] {
        assert!(is_constraint(exact).is_none(), "{exact:?}");
    }
    for constraint in [
        "~0.4",
        "^1",
        ">=v0.1.0 <v0.3.0",
        "0.4.x",
        "*",
        "0.4.1 - 0.4.3",
    ] {
        assert!(is_constraint(constraint).is_some(), "{constraint:?}");
    }
}
