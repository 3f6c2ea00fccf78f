use crate::config::test_support::*;
use crate::config::*;

#[test]
fn tags_as_versions() {
    let v = |s: &str| semver::Version::parse(s).expect("version");
    assert_eq!(tag_version("v0.4.1"), Some(v("0.4.1")));
    assert_eq!(tag_version("0.4"), Some(v("0.4.0")));
    assert_eq!(tag_version("v1"), Some(v("1.0.0")));
    assert_eq!(tag_version("V2.1"), Some(v("2.1.0")));
    assert_eq!(tag_version("v1.2.3-rc.1"), Some(v("1.2.3-rc.1")));
    assert_eq!(tag_version("v1.2-rc.1+b5"), Some(v("1.2.0-rc.1+b5")));
    assert_eq!(tag_version("v01.02.03"), Some(v("1.2.3")));
    assert_eq!(tag_version("latest"), None);
    assert_eq!(tag_version("unstable"), None);
    assert_eq!(tag_version("v1.2.3.4"), None);
    assert_eq!(tag_version("v"), None);
    assert_eq!(tag_version("1..2"), None);
}

#[test]
fn resolve_tag_picks_the_highest_satisfying_tag() {
    let tags = strings(&[
        "v0.1.0",
        "v0.2.0",
        "v0.2.5",
        "v0.3.0",
        "v1.0.0-rc.1",
        "latest",
    ]);
    let cases = [
        (">=0.2, <0.3", Some("v0.2.5")),
        (">= 0.2 < 0.3", Some("v0.2.5")),
        (">=v0.2,<v0.3", Some("v0.2.5")),
        ("~0.2", Some("v0.2.5")),
        ("^0.2", Some("v0.2.5")),
        ("v0.2.x", Some("v0.2.5")),
        ("0.2.*", Some("v0.2.5")),
        ("0.2", Some("v0.2.5")),
        ("v0.2", Some("v0.2.5")),
        // A bare full version is exact (Masterminds semantics), not a caret range.
        ("0.2.0", Some("v0.2.0")),
        ("v0.2.0", Some("v0.2.0")),
        ("=0.2.0", Some("v0.2.0")),
        ("<0.2", Some("v0.1.0")),
        ("<0.2 || >=0.3", Some("v0.3.0")),
        ("0.1 - 0.2.0", Some("v0.2.0")),
        ("~0.4", None),
        ("^1", None),
        // Pre-releases only match comparators that name a pre-release.
        (">=1.0.0-rc.0", Some("v1.0.0-rc.1")),
        ("*", Some("v0.3.0")),
        ("", Some("v0.3.0")),
    ];
    for (constraint, expected) in cases {
        assert_eq!(
            resolve_tag(&tags, constraint).expect("valid constraint"),
            expected.map(str::to_string),
            "{constraint}"
        );
    }
}

#[test]
fn resolve_tag_pads_tags_and_breaks_ties_by_order() {
    let tags = strings(&["v0.4", "v0.4.0", "v1"]);
    assert_eq!(
        resolve_tag(&tags, "~0.4").expect("valid"),
        Some("v0.4".to_string())
    );
    assert_eq!(
        resolve_tag(&tags, "^1").expect("valid"),
        Some("v1".to_string())
    );
    assert_eq!(
        resolve_tag(&tags, ">=1.0.0").expect("valid"),
        Some("v1".to_string())
    );
}

#[test]
fn non_semver_tags_never_satisfy_a_constraint() {
    let tags = strings(&["latest", "unstable", "main"]);
    assert_eq!(resolve_tag(&tags, "*").expect("valid"), None);
    assert_eq!(resolve_tag(&tags, ">=0").expect("valid"), None);
    let c = TagConstraint::parse(">=0").expect("valid");
    assert!(!c.matches_tag("latest"));
    assert!(c.matches_tag("v0.0.1"));
}

#[test]
fn bad_constraints_are_errors_naming_the_constraint() {
    let tags = strings(&["v1.0.0"]);
    for (constraint, reason) in [
        (
            ">=abc",
            "unexpected character 'a' while parsing major version number",
        ),
        ("!=1.0", "operator \"!=\" is not supported"),
        (">=", "operator \">=\" without a version"),
        ("1.0 ||", "empty alternative"),
        ("- 1.0", "misplaced '-' (use \"A - B\")"),
        ("(1.0)", "unexpected character '('"),
    ] {
        let err = resolve_tag(&tags, constraint).expect_err(constraint);
        match &err {
            ConfigError::InvalidConstraint {
                constraint: c,
                reason: r,
            } => {
                assert_eq!(c, constraint);
                assert_eq!(r, reason, "{constraint}");
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!("invalid tag constraint \"{constraint}\": {reason}")
        );
    }
}
