use super::*;

const PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog";

fn sn(tag: &str) -> String {
    format!("{PREFIX}/set-namespace:{tag}")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn parse_ok(text: &str) -> Vec<FunctionConfig> {
    let report = parse_str(text, "test.yaml");
    assert!(
        report.errors.is_empty(),
        "unexpected errors: {:?}",
        report
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    report.configs
}

fn error_strings(report: &LoadReport) -> Vec<String> {
    report.errors.iter().map(|e| e.to_string()).collect()
}

/// A FunctionConfig document with the given name and spec body (indented by 2).
fn doc(name: &str, spec: &str) -> String {
    let spec: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: {name}\n  namespace: porch-fn-system\nspec:\n{spec}"
    )
}

fn config(name: &str, spec: &str) -> FunctionConfig {
    let mut configs = parse_ok(&doc(name, spec));
    assert_eq!(configs.len(), 1);
    configs.remove(0)
}

// ----------------------------------------------------------------------------------------
// Go durations
// ----------------------------------------------------------------------------------------

#[test]
fn go_durations_parse() {
    let cases = [
        ("300ms", Duration::from_millis(300)),
        ("30m", Duration::from_secs(1800)),
        ("1h30m", Duration::from_secs(5400)),
        ("1.5s", Duration::from_millis(1500)),
        ("2h", Duration::from_secs(7200)),
        ("0", Duration::ZERO),
        ("0s", Duration::ZERO),
        ("-0", Duration::ZERO),
        ("+5s", Duration::from_secs(5)),
        (".5s", Duration::from_millis(500)),
        ("1.s", Duration::from_secs(1)),
        ("10ns", Duration::from_nanos(10)),
        ("7us", Duration::from_micros(7)),
        ("7µs", Duration::from_micros(7)),
        ("7μs", Duration::from_micros(7)),
        ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
        ("0.000000001s", Duration::from_nanos(1)),
        ("1.0000000019s", Duration::new(1, 1)),
        ("1.5h", Duration::from_secs(5400)),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_go_duration(input), Ok(expected), "{input}");
    }
}

#[test]
fn go_durations_reject() {
    let cases = [
        ("", "empty duration"),
        ("-", "empty duration"),
        (
            "5",
            "missing unit (valid units are ns, us, µs, ms, s, m, h)",
        ),
        (
            "5x",
            "unknown unit \"x\" (valid units are ns, us, µs, ms, s, m, h)",
        ),
        (
            "1h-5m",
            "unknown unit \"h-\" (valid units are ns, us, µs, ms, s, m, h)",
        ),
        (".s", "expected a number"),
        ("s", "expected a number"),
        ("-5m", "negative durations are not allowed"),
        (
            "30 m",
            "unknown unit \" m\" (valid units are ns, us, µs, ms, s, m, h)",
        ),
        ("99999999999999999999999999999999h", "overflow"),
        ("9999999999999999999h", "overflow"),
    ];
    for (input, reason) in cases {
        assert_eq!(
            parse_go_duration(input),
            Err(DurationError {
                input: input.to_string(),
                reason: reason.to_string()
            }),
            "{input}"
        );
    }
    assert_eq!(
        parse_go_duration("-5m").map_err(|e| e.to_string()),
        Err("invalid duration \"-5m\": negative durations are not allowed".to_string())
    );
}

#[test]
fn go_duration_type_is_positive_and_keeps_text() {
    let d = GoDuration::parse("1h30m").expect("valid");
    assert_eq!(d.duration(), Duration::from_secs(5400));
    assert_eq!(d.as_str(), "1h30m");
    assert_eq!(d.to_string(), "1h30m");
    assert_eq!(
        GoDuration::parse("0s").map_err(|e| e.to_string()),
        Err("invalid duration \"0s\": must be greater than zero".to_string())
    );
}

// ----------------------------------------------------------------------------------------
// Tags and constraints
// ----------------------------------------------------------------------------------------

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

// ----------------------------------------------------------------------------------------
// Image references
// ----------------------------------------------------------------------------------------

#[test]
fn image_references_split() {
    let r = |name, tag, digest| Some(ImageRef { name, tag, digest });
    assert_eq!(
        ImageRef::parse("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1"),
        r(
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace",
            Some("v0.4.1"),
            None
        )
    );
    assert_eq!(
        ImageRef::parse("set-namespace"),
        r("set-namespace", None, None)
    );
    assert_eq!(
        ImageRef::parse("localhost:5000/fn"),
        r("localhost:5000/fn", None, None)
    );
    assert_eq!(
        ImageRef::parse("localhost:5000/fn:v1"),
        r("localhost:5000/fn", Some("v1"), None)
    );
    assert_eq!(
        ImageRef::parse("fn@sha256:abc"),
        r("fn", None, Some("sha256:abc"))
    );
    assert_eq!(
        ImageRef::parse(" fn:v1@sha256:abc "),
        r("fn", Some("v1"), Some("sha256:abc"))
    );
    assert_eq!(ImageRef::parse(""), None);
    assert_eq!(ImageRef::parse("fn:"), None);
    assert_eq!(ImageRef::parse("fn@"), None);
    assert_eq!(ImageRef::parse(":v1"), None);
}

#[test]
fn image_names_normalise() {
    assert_eq!(
        normalize_image_name("set-namespace", DEFAULT_IMAGE_PREFIX),
        format!("{PREFIX}/set-namespace")
    );
    assert_eq!(
        normalize_image_name("set-namespace", "example.com/fns"),
        "example.com/fns/set-namespace"
    );
    assert_eq!(normalize_image_name("set-namespace", ""), "set-namespace");
    assert_eq!(
        normalize_image_name("example.com/x/fn", DEFAULT_IMAGE_PREFIX),
        "example.com/x/fn"
    );
}

// ----------------------------------------------------------------------------------------
// Index
// ----------------------------------------------------------------------------------------

fn set_namespace_config() -> FunctionConfig {
    config(
        "set-namespace",
        r#"image: set-namespace
prefixes: ["", "example.com/mirror/"]
binaryExecutor:
  tags: [v0.4.2, latest]
  path: /opt/fns/set-namespace
podExecutor:
  tags: [v0.4.1, v0.4.3, v0.5.0, unstable]
  timeToLive: 45m
  maxParallelExecutions: 3
  preferredMaxQueueLength: 5
  templateOverrides:
    serviceAccountName: fn-sa
goExecutor:
  tags: [v0.4]
"#,
    )
}

#[test]
fn short_and_full_names_match_with_the_default_prefix() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    let expected = BinaryMatch {
        path: PathBuf::from("/opt/fns/set-namespace"),
        resolved_image: sn("v0.4.2"),
        config_name: "porch-fn-system/set-namespace".to_string(),
    };
    assert_eq!(
        index.binary_for("set-namespace:v0.4.2", ""),
        Some(expected.clone())
    );
    assert_eq!(index.binary_for(&sn("v0.4.2"), ""), Some(expected));
    assert_eq!(index.binary_for("other.io/set-namespace:v0.4.2", ""), None);
    assert_eq!(index.binary_for("set-namespace:v9", ""), None);
    assert_eq!(index.binary_for("apply-setters:v0.4.2", ""), None);
    assert_eq!(index.len(), 2);
    assert_eq!(index.default_prefix(), PREFIX);
}

#[test]
fn prefixes_times_tags_expand() {
    let cfg = config(
        "fn",
        r#"image: fn
prefixes: ["p1.io/a", "p2.io/b/"]
binaryExecutor:
  tags: [t1, t2]
  path: /bin/fn
"#,
    );
    let index = ImageIndex::new(&[cfg], DEFAULT_IMAGE_PREFIX);
    for prefix in ["p1.io/a", "p2.io/b"] {
        for tag in ["t1", "t2"] {
            let image = format!("{prefix}/fn:{tag}");
            let found = index.binary_for(&image, "").expect(&image);
            assert_eq!(found.resolved_image, image);
            assert_eq!(found.path, PathBuf::from("/bin/fn"));
        }
    }
    // Explicit prefixes replace the default prefix.
    assert_eq!(index.binary_for("fn:t1", ""), None);
    assert_eq!(index.binary_for(&format!("{PREFIX}/fn:t1"), ""), None);
    assert_eq!(index.binary_for("p1.io/a/fn:t3", ""), None);
}

#[test]
fn no_prefixes_means_the_default_prefix_and_full_paths_match_literally() {
    let short = config(
        "short",
        "image: apply-setters\nbinaryExecutor:\n  tags: [v0.2.0]\n  path: /bin/as\n",
    );
    let full = config(
        "full",
        "image: example.com/fns/custom\nprefixes: [ignored.io]\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/custom\n",
    );
    let index = ImageIndex::new(&[short, full], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index
            .binary_for("apply-setters:v0.2.0", "")
            .map(|m| m.resolved_image),
        Some(format!("{PREFIX}/apply-setters:v0.2.0"))
    );
    assert_eq!(
        index.binary_for("example.com/apply-setters:v0.2.0", ""),
        None
    );
    assert_eq!(
        index
            .binary_for("example.com/fns/custom:v1", "")
            .map(|m| m.path),
        Some(PathBuf::from("/bin/custom"))
    );
    assert_eq!(index.binary_for("custom:v1", ""), None);
    assert_eq!(index.binary_for("ignored.io/custom:v1", ""), None);
}

#[test]
fn a_configurable_default_prefix() {
    let cfg = config(
        "fn",
        "image: fn\nprefixes: [\"\"]\nbinaryExecutor:\n  tags: [v1]\n  path: /bin/fn\n",
    );
    let index = ImageIndex::new(std::slice::from_ref(&cfg), "example.com/fns/");
    assert_eq!(index.default_prefix(), "example.com/fns");
    assert_eq!(
        index.binary_for("fn:v1", "").map(|m| m.resolved_image),
        Some("example.com/fns/fn:v1".to_string())
    );
    assert_eq!(index.binary_for(&format!("{PREFIX}/fn:v1"), ""), None);
    // An empty default prefix keeps short names short.
    let index = ImageIndex::new(&[cfg], "");
    assert_eq!(
        index.binary_for("fn:v1", "").map(|m| m.resolved_image),
        Some("fn:v1".to_string())
    );
}

#[test]
fn pod_settings() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    let found = index
        .pod_settings_for("example.com/mirror/set-namespace:v0.4.1", "")
        .expect("pod match");
    assert_eq!(
        found,
        PodMatch {
            resolved_image: "example.com/mirror/set-namespace:v0.4.1".to_string(),
            ttl: Some(Duration::from_secs(45 * 60)),
            max_parallel_executions: Some(3),
            preferred_max_queue_length: Some(5),
            template_overrides: Some(Arc::new(TemplateOverrides {
                service_account_name: Some("fn-sa".to_string()),
                ..TemplateOverrides::default()
            })),
            config_name: "porch-fn-system/set-namespace".to_string(),
        }
    );
    // Binary tags are not pod tags and vice versa.
    assert_eq!(index.pod_settings_for("set-namespace:v0.4.2", ""), None);
    assert_eq!(index.binary_for("set-namespace:v0.4.1", ""), None);
    // Unset settings stay unset.
    let bare = config("bare", "image: bare\npodExecutor:\n  tags: [v1]\n");
    let index = ImageIndex::new(&[bare], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index.pod_settings_for("bare:v1", ""),
        Some(PodMatch {
            resolved_image: format!("{PREFIX}/bare:v1"),
            ttl: None,
            max_parallel_executions: None,
            preferred_max_queue_length: None,
            template_overrides: None,
            config_name: "porch-fn-system/bare".to_string(),
        })
    );
}

#[test]
fn go_executor_ids() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index.go_for("set-namespace:v0.4", ""),
        Some(GoMatch {
            id: "set-namespace".to_string(),
            resolved_image: sn("v0.4"),
            config_name: "porch-fn-system/set-namespace".to_string(),
        })
    );
    let explicit = config(
        "x",
        "image: example.com/fns/starlark-fn\ngoExecutor:\n  tags: [v1]\n  id: starlark\n",
    );
    let index = ImageIndex::new(&[explicit], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index
            .go_for("example.com/fns/starlark-fn:v1", "")
            .map(|m| m.id),
        Some("starlark".to_string())
    );
}

#[test]
fn no_tag_means_latest() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index
            .binary_for("set-namespace", "")
            .map(|m| m.resolved_image),
        Some(sn("latest"))
    );
    // No `latest` pod tag: no match.
    assert_eq!(index.pod_settings_for("set-namespace", ""), None);
}

#[test]
fn digest_images() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    // Tag and digest: matched by the tag, the digest is kept.
    assert_eq!(
        index
            .binary_for("set-namespace:v0.4.2@sha256:0123abcd", "")
            .map(|m| m.resolved_image),
        Some(format!("{}@sha256:0123abcd", sn("v0.4.2")))
    );
    // Digest only, no constraint: it is not assumed to be `latest`.
    assert_eq!(index.binary_for("set-namespace@sha256:0123abcd", ""), None);
    // Digest only, with a constraint: the constraint picks the tag.
    assert_eq!(
        index
            .pod_settings_for(&format!("{PREFIX}/set-namespace@sha256:0123abcd"), "~0.4")
            .map(|m| m.resolved_image),
        Some(format!("{}@sha256:0123abcd", sn("v0.4.3")))
    );
}

#[test]
fn constraint_picks_the_highest_configured_tag() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    let pod = |image: &str, c: &str| index.pod_settings_for(image, c).map(|m| m.resolved_image);
    assert_eq!(pod("set-namespace", "~0.4"), Some(sn("v0.4.3")));
    assert_eq!(pod("set-namespace", ">=0.4.2, <0.5"), Some(sn("v0.4.3")));
    assert_eq!(pod("set-namespace", "v0.4.x"), Some(sn("v0.4.3")));
    assert_eq!(pod("set-namespace", ">=0.4"), Some(sn("v0.5.0")));
    assert_eq!(pod("set-namespace", "<0.4.3"), Some(sn("v0.4.1")));
    assert_eq!(pod("set-namespace", "^1"), None);
    assert_eq!(
        pod("example.com/mirror/set-namespace", "~0.4"),
        Some("example.com/mirror/set-namespace:v0.4.3".to_string())
    );
    // Each executor resolves among its own tags.
    assert_eq!(
        index
            .binary_for("set-namespace", "~0.4")
            .map(|m| m.resolved_image),
        Some(sn("v0.4.2"))
    );
    // A blank constraint is no constraint.
    assert_eq!(
        index
            .binary_for("set-namespace", "  ")
            .map(|m| m.resolved_image),
        Some(sn("latest"))
    );
}

#[test]
fn explicit_tag_must_satisfy_the_constraint() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index.pod_settings_for("set-namespace:v0.4.1", ">=0.4.2"),
        None
    );
    assert_eq!(
        index
            .pod_settings_for("set-namespace:v0.4.3", ">=0.4.2")
            .map(|m| m.resolved_image),
        Some(sn("v0.4.3"))
    );
    // Satisfying the constraint is not enough: the tag must be configured.
    assert_eq!(
        index.pod_settings_for("set-namespace:v0.4.9", ">=0.4.2"),
        None
    );
    // Non-semver explicit tags never satisfy a constraint.
    assert_eq!(index.pod_settings_for("set-namespace:unstable", "*"), None);
    assert_eq!(index.binary_for("set-namespace:latest", ">=0"), None);
    assert_eq!(
        index
            .pod_settings_for("set-namespace:unstable", "")
            .map(|m| m.resolved_image),
        Some(sn("unstable"))
    );
}

#[test]
fn bad_constraint_in_a_lookup() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    let err = index
        .try_binary_for("set-namespace", ">=x")
        .expect_err("bad constraint");
    assert_eq!(
        err.to_string(),
        "invalid tag constraint \">=x\": unexpected character 'x' while parsing major version number"
    );
    assert!(matches!(
        index.try_pod_settings_for("unknown-image", "!=1"),
        Err(ConfigError::InvalidConstraint { .. })
    ));
    assert!(index.try_go_for("set-namespace:v0.4", "%%").is_err());
    assert_eq!(index.binary_for("set-namespace", ">=x"), None);
    assert_eq!(index.pod_settings_for("set-namespace", ">=x"), None);
}

#[test]
fn malformed_request_images_match_nothing() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    for image in ["", "set-namespace:", "set-namespace@", ":v0.4.2"] {
        assert_eq!(index.binary_for(image, ""), None, "{image:?}");
    }
}

#[test]
fn warm_images_lists_pod_tags_under_the_first_prefix() {
    let other = config(
        "other",
        "image: other\nprefixes: [mirror.io/fns, \"\"]\npodExecutor:\n  tags: [v2, v1, v2]\n",
    );
    let binary_only = config(
        "bin",
        "image: bin\nbinaryExecutor:\n  tags: [v1]\n  path: /b\n",
    );
    let index = ImageIndex::new(
        &[set_namespace_config(), binary_only, other],
        DEFAULT_IMAGE_PREFIX,
    );
    assert_eq!(
        index.warm_images(),
        vec![
            sn("v0.4.1"),
            sn("v0.4.3"),
            sn("v0.5.0"),
            sn("unstable"),
            "mirror.io/fns/other:v2".to_string(),
            "mirror.io/fns/other:v1".to_string(),
        ]
    );
    assert!(ImageIndex::new(&[], DEFAULT_IMAGE_PREFIX)
        .warm_images()
        .is_empty());
}

#[test]
fn index_drops_later_duplicates() {
    let first = config(
        "first",
        "image: set-namespace\npodExecutor:\n  tags: [v1, v2]\n",
    );
    // Same image under its full default-prefixed name, overlapping tag v2.
    let second = config(
        "second",
        &format!("image: {PREFIX}/set-namespace\nbinaryExecutor:\n  tags: [v3, v2]\n  path: /b\n"),
    );
    let third = config(
        "third",
        "image: set-namespace\nbinaryExecutor:\n  tags: [v4]\n  path: /c\n",
    );
    let (index, errors) = ImageIndex::build(&[first, second, third], DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        vec![format!(
            "test.yaml (document 1): spec.binaryExecutor.tags[1]: image \"{}\" is already configured by FunctionConfig porch-fn-system/first (test.yaml (document 1)); this FunctionConfig is ignored",
            sn("v2")
        )]
    );
    assert_eq!(errors[0].field(), Some("spec.binaryExecutor.tags[1]"));
    assert_eq!(
        errors[0].location(),
        Some(&DocLocation {
            source: "test.yaml".to_string(),
            document: Some(1)
        })
    );
    // The second config is dropped as a whole (v3 too); the third does not collide.
    assert_eq!(index.binary_for("set-namespace:v3", ""), None);
    assert_eq!(index.binary_for("set-namespace:v2", ""), None);
    assert_eq!(
        index
            .pod_settings_for("set-namespace:v2", "")
            .map(|m| m.config_name),
        Some("porch-fn-system/first".to_string())
    );
    assert_eq!(
        index.binary_for("set-namespace:v4", "").map(|m| m.path),
        Some(PathBuf::from("/c"))
    );
}

#[test]
fn one_config_may_list_a_tag_in_several_executors() {
    let cfg = config(
        "multi",
        "image: fn\nprefixes: [\"\", ghcr.io/kptdev/krm-functions-catalog]\nbinaryExecutor:\n  tags: [v1]\n  path: /b\npodExecutor:\n  tags: [v1]\n",
    );
    let (index, errors) = ImageIndex::build(&[cfg], DEFAULT_IMAGE_PREFIX);
    assert!(errors.is_empty());
    assert!(index.binary_for("fn:v1", "").is_some());
    assert!(index.pod_settings_for("fn:v1", "").is_some());
    // "" and the default prefix spelled out are one image.
    assert_eq!(index.len(), 1);
    assert_eq!(index.warm_images(), vec![format!("{PREFIX}/fn:v1")]);
}

// ----------------------------------------------------------------------------------------
// Parsing
// ----------------------------------------------------------------------------------------

#[test]
fn parses_the_design_examples() {
    let text = include_str!("../../tests/fixtures/config/set-namespace.yaml");
    let report = parse_str_with(
        text,
        "functions/set-namespace.yaml",
        Some(Path::new("/srv/functions")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert!(report.errors.is_empty(), "{:?}", error_strings(&report));
    assert_eq!(report.configs.len(), 2);
    let sn_cfg = &report.configs[0];
    assert_eq!(sn_cfg.api_version, API_VERSION);
    assert_eq!(sn_cfg.kind, KIND);
    assert_eq!(
        sn_cfg.metadata,
        ObjectMeta {
            name: "set-namespace".to_string(),
            namespace: "porch-fn-system".to_string()
        }
    );
    assert_eq!(
        sn_cfg.source,
        Some(DocLocation {
            source: "functions/set-namespace.yaml".to_string(),
            document: Some(1)
        })
    );
    assert_eq!(
        sn_cfg.spec.binary_executor,
        Some(BinaryExecutor {
            tags: strings(&["v0.4.2"]),
            path: PathBuf::from("/srv/functions/set-namespace"),
        })
    );
    assert_eq!(
        sn_cfg.spec.go_executor,
        Some(GoExecutor {
            tags: strings(&["v0.4", "v0.4.5"]),
            id: Some("set-namespace".to_string()),
        })
    );
    let apply = &report.configs[1];
    assert_eq!(apply.source.as_ref().and_then(|s| s.document), Some(3));
    let pod = apply.spec.pod_executor.as_ref().expect("pod executor");
    assert_eq!(
        pod.time_to_live.as_ref().map(GoDuration::duration),
        Some(Duration::from_secs(1800))
    );
    let container = pod
        .template_overrides
        .as_ref()
        .and_then(|t| t.container.as_ref())
        .expect("container overrides");
    assert_eq!(
        serde_json::Value::Object(container.resources.clone().expect("resources")),
        serde_json::json!({"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}})
    );

    let index = ImageIndex::new(&report.configs, DEFAULT_IMAGE_PREFIX);
    assert_eq!(
        index.binary_for("set-namespace:v0.4.2", "").map(|m| m.path),
        Some(PathBuf::from("/srv/functions/set-namespace"))
    );
    assert_eq!(
        index
            .pod_settings_for("apply-setters:v0.2.2", "")
            .and_then(|m| m.ttl),
        Some(Duration::from_secs(1800))
    );
    assert_eq!(
        index
            .go_for("set-namespace", "~0.4")
            .map(|m| m.resolved_image),
        Some(sn("v0.4.5"))
    );
    assert_eq!(
        index.warm_images(),
        vec![sn("v0.4.1"), format!("{PREFIX}/apply-setters:v0.2.2")]
    );
}

#[test]
fn template_overrides_parse() {
    let cfg = config(
        "t",
        r#"image: fn
podExecutor:
  tags: [v1]
  templateOverrides:
    serviceAccountName: runner
    securityContext:
      runAsNonRoot: true
      runAsUser: 1000
    container:
      env:
        - name: A
          value: "1"
        - name: B
          valueFrom: {secretKeyRef: {name: s, key: k}}
      envFrom:
        - configMapRef: {name: cm}
    initContainer:
      resources: {limits: {cpu: 100m}}
"#,
    );
    let overrides = cfg
        .spec
        .pod_executor
        .and_then(|p| p.template_overrides)
        .expect("overrides");
    let json = serde_json::to_value(&overrides).expect("serialise");
    assert_eq!(
        json,
        serde_json::json!({
            "serviceAccountName": "runner",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
            "container": {
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                ],
                "envFrom": [{"configMapRef": {"name": "cm"}}]
            },
            "initContainer": {"resources": {"limits": {"cpu": "100m"}}}
        })
    );
}

#[test]
fn unknown_fields_and_nulls_are_accepted() {
    let cfg = config(
        "u",
        r#"image: fn
prefixes:
futureField: {a: 1}
podExecutor:
  tags: [v1]
  somethingNew: true
  templateOverrides:
    container:
      env:
      futureKnob: 3
"#,
    );
    assert!(cfg.spec.prefixes.is_empty());
    let text = "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: u\n  labels: {a: b}\nstatus: {observedGeneration: 3}\nspec:\n  image: fn\n  binaryExecutor: {tags: [v1], path: /b}\n";
    assert_eq!(parse_ok(text).len(), 1);
}

#[test]
fn serialises_back_to_an_equivalent_document() {
    let original = set_namespace_config();
    let text = serde_yaml::to_string(&original).expect("serialise");
    let again = parse_ok(&text);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].spec, original.spec);
    assert_eq!(again[0].metadata, original.metadata);
    assert!(text.contains("timeToLive: 45m"), "{text}");
}

#[test]
fn other_kinds_are_skipped_and_bad_documents_reported() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n---\n{}---\n# empty\n---\n- a list\n---\n{}",
        doc("good-1", "image: a\nbinaryExecutor:\n  tags: [v1]\n  path: /a\n"),
        doc("bad", "image: b\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: x\n"),
        doc("good-2", "image: c\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "functions/a.yaml");
    assert_eq!(
        report
            .configs
            .iter()
            .map(FunctionConfig::display_name)
            .collect::<Vec<_>>(),
        vec!["porch-fn-system/good-1", "porch-fn-system/good-2"]
    );
    assert_eq!(
        report.configs[1].source,
        Some(DocLocation {
            source: "functions/a.yaml".to_string(),
            document: Some(6)
        })
    );
    assert_eq!(
        error_strings(&report),
        vec![
            "functions/a.yaml (document 3): spec.podExecutor.maxParallelExecutions: invalid type: string \"x\", expected u32 (at line 26, column 28)"
        ]
    );
    match &report.errors[0] {
        ConfigError::Invalid {
            at,
            field,
            message,
            position,
        } => {
            assert_eq!(at.source, "functions/a.yaml");
            assert_eq!(at.document, Some(3));
            assert_eq!(field, "spec.podExecutor.maxParallelExecutions");
            assert_eq!(message, "invalid type: string \"x\", expected u32");
            assert_eq!(
                *position,
                Some(Position {
                    line: 26,
                    column: 28
                })
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Parses one FunctionConfig document with the given spec and returns the error strings
/// (without the location prefix and position suffix).
fn spec_errors(spec: &str) -> Vec<String> {
    let report = parse_str(&doc("x", spec), "f.yaml");
    assert!(report.configs.is_empty(), "expected rejection of {spec}");
    report
        .errors
        .iter()
        .map(|e| match e {
            ConfigError::Invalid { field, message, .. } => format!("{field}: {message}"),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn type_errors_name_the_field() {
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: v1\n"),
        vec!["spec.podExecutor.tags: invalid type: string \"v1\", expected a sequence"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: -1\n"),
        vec!["spec.podExecutor.maxParallelExecutions: invalid type: integer `-1`, expected u32"]
    );
    assert_eq!(
        spec_errors("image: [fn]\n"),
        vec!["spec.image: invalid type: sequence, expected a string"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: 30\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"30\": missing unit (valid units are ns, us, µs, ms, s, m, h)"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    container:\n      resources: lots\n"),
        vec!["spec.podExecutor.templateOverrides.container.resources: invalid type: string \"lots\", expected a map"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    securityContext: [1]\n"),
        vec!["spec.podExecutor.templateOverrides.securityContext: invalid type: sequence, expected a map"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor: [1]\n"),
        vec!["spec.binaryExecutor: invalid type: sequence, expected struct BinaryExecutor"]
    );
}

#[test]
fn durations_are_validated() {
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: 0s\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"0s\": must be greater than zero"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: -5m\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"-5m\": negative durations are not allowed"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  timeToLive: soon\n"),
        vec!["spec.podExecutor.timeToLive: invalid duration \"soon\": expected a number"]
    );
}

#[test]
fn semantic_errors_name_the_field() {
    assert_eq!(
        spec_errors("prefixes: [a.io]\nbinaryExecutor:\n  tags: [v1]\n  path: /b\n"),
        vec!["spec.image: must be set"]
    );
    assert_eq!(
        spec_errors("image: fn:v1\nbinaryExecutor:\n  tags: [v1]\n  path: /b\n"),
        vec!["spec.image: invalid image name \"fn:v1\": must not contain a tag (list tags in the executors)"]
    );
    assert_eq!(
        spec_errors("image: fn@sha256:abc\npodExecutor:\n  tags: [v1]\n"),
        vec!["spec.image: invalid image name \"fn@sha256:abc\": must not contain a digest (list tags in the executors)"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: []\n  path: /b\n"),
        vec!["spec.binaryExecutor.tags: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  timeToLive: 5m\n"),
        vec!["spec.podExecutor.tags: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\ngoExecutor:\n  tags: []\n  id: \"\"\n"),
        vec![
            "spec.goExecutor.tags: must not be empty",
            "spec.goExecutor.id: must not be empty when set"
        ]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: \"\"\n"),
        vec!["spec.binaryExecutor.path: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\nbinaryExecutor:\n  tags: [v1]\n"),
        vec!["spec.binaryExecutor.path: must not be empty"]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1, \"\", \"-x\", \"a b\"]\n"),
        vec![
            "spec.podExecutor.tags[1]: invalid tag \"\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
            "spec.podExecutor.tags[2]: invalid tag \"-x\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
            "spec.podExecutor.tags[3]: invalid tag \"a b\" (expected 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-')",
        ]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: 0\n"),
        vec!["spec.podExecutor.maxParallelExecutions: must be at least 1"]
    );
    assert_eq!(
        spec_errors("image: fn\nprefixes: [\"a io\"]\npodExecutor:\n  tags: [v1]\n"),
        vec!["spec.prefixes[0]: invalid registry prefix \"a io\""]
    );
    assert_eq!(
        spec_errors("image: fn\npodExecutor:\n  tags: [v1]\n  templateOverrides:\n    initContainer:\n      env: [{value: x}]\n"),
        vec!["spec.podExecutor.templateOverrides.initContainer.env[0].name: must be a non-empty string"]
    );
    // A missing spec is a missing image.
    let report = parse_str(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {name: n}\n",
        "f.yaml",
    );
    assert_eq!(
        error_strings(&report),
        vec!["f.yaml (document 1): spec.image: must be set"]
    );
}

#[test]
fn api_versions() {
    let other_version =
        "apiVersion: config.porch.kpt.dev/v1beta1\nkind: FunctionConfig\nspec: {image: fn}\n";
    let report = parse_str(other_version, "f.yaml");
    assert!(report.configs.is_empty());
    assert_eq!(
        error_strings(&report),
        vec!["f.yaml (document 1): apiVersion: unsupported apiVersion \"config.porch.kpt.dev/v1beta1\" for kind FunctionConfig (expected \"config.porch.kpt.dev/v1alpha1\")"]
    );
    // A FunctionConfig of another API group is somebody else's kind: skipped.
    let other_group = "apiVersion: example.com/v1\nkind: FunctionConfig\nspec: {image: [1]}\n";
    let report = parse_str(other_group, "f.yaml");
    assert!(report.configs.is_empty());
    assert!(report.errors.is_empty());
}

#[test]
fn syntax_errors_stop_the_file_but_keep_earlier_documents() {
    let text = format!(
        "{}---\nkind: [unclosed\n---\n{}",
        doc("before", "image: a\npodExecutor:\n  tags: [v1]\n"),
        doc("after", "image: b\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "s.yaml");
    assert_eq!(
        report
            .configs
            .iter()
            .map(FunctionConfig::display_name)
            .collect::<Vec<_>>(),
        vec!["porch-fn-system/before"]
    );
    assert_eq!(report.errors.len(), 1);
    let err = &report.errors[0];
    assert_eq!(
        err.location(),
        Some(&DocLocation {
            source: "s.yaml".to_string(),
            document: Some(2)
        })
    );
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("s.yaml (document 2): "),
        "{err}"
    );
}

#[test]
fn a_duplicate_key_spoils_only_its_document() {
    let text = format!(
        "{}---\n{}",
        doc("dup", "image: a\nimage: b\npodExecutor:\n  tags: [v1]\n"),
        doc("after", "image: c\npodExecutor:\n  tags: [v1]\n"),
    );
    let report = parse_str(&text, "d.yaml");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.configs[0].metadata.name, "after");
    assert_eq!(report.errors.len(), 1);
    assert_eq!(
        report.errors[0].location().and_then(|l| l.document),
        Some(1)
    );
}

#[test]
fn plain_scalars_are_taken_as_written_for_string_fields() {
    // YAML leniency (as serde_yaml does it): an unquoted number in a string field is its
    // text, so `1.10` stays `1.10`.
    let cfg = config("n", "image: 7\npodExecutor:\n  tags: [1.10, 2, true]\n");
    assert_eq!(cfg.spec.image, "7");
    assert_eq!(
        cfg.spec.pod_executor.map(|p| p.tags),
        Some(strings(&["1.10", "2", "true"]))
    );
}

#[test]
fn json_documents_parse() {
    let text = "{\n\t\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\",\n\t\"kind\": \"FunctionConfig\",\n\t\"metadata\": {\"name\": \"j\"},\n\t\"spec\": {\"image\": \"fn\", \"podExecutor\": {\"tags\": [\"v1\"], \"timeToLive\": \"1h\"}}\n}\n";
    let configs = parse_ok(text);
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].display_name(), "j");
    let bad = "{\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\", \"kind\": \"FunctionConfig\", \"spec\": {\"image\": {\"a\": 1}}}";
    let report = parse_str(bad, "b.json");
    assert_eq!(
        error_strings(&report),
        vec!["b.json (document 1): spec.image: invalid type: map, expected a string (at line 1, column 93)"]
    );
}

#[test]
fn relative_binary_paths() {
    let text = doc(
        "r",
        "image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: bin/fn\n",
    );
    let report = parse_str(&text, "r.yaml");
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("bin/fn"))
    );
    let report = parse_str_with(
        &text,
        "r.yaml",
        Some(Path::new("/fns")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("/fns/bin/fn"))
    );
    let abs = doc(
        "a",
        "image: fn\nbinaryExecutor:\n  tags: [v1]\n  path: /usr/bin/fn\n",
    );
    let report = parse_str_with(
        &abs,
        "a.yaml",
        Some(Path::new("/fns")),
        DEFAULT_IMAGE_PREFIX,
    );
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(PathBuf::from("/usr/bin/fn"))
    );
}

#[test]
fn duplicates_within_one_text() {
    let text = format!(
        "{}---\n{}",
        doc("one", "image: fn\npodExecutor:\n  tags: [v1]\n"),
        doc(
            "two",
            "image: fn\nprefixes: [\"\"]\ngoExecutor:\n  tags: [v1]\n"
        ),
    );
    let report = parse_str(&text, "d.yaml");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(
        error_strings(&report),
        vec![format!(
            "d.yaml (document 2): spec.goExecutor.tags[0]: image \"{PREFIX}/fn:v1\" is already configured by FunctionConfig porch-fn-system/one (d.yaml (document 1)); this FunctionConfig is ignored"
        )]
    );
    // With another default prefix the two names differ... but both configs use the short
    // name, so they still collide.
    let report = parse_str_with(&text, "d.yaml", None, "example.com");
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.errors.len(), 1);
}

// ----------------------------------------------------------------------------------------
// Directories
// ----------------------------------------------------------------------------------------

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write fixture");
}

#[test]
fn load_dir_loads_good_files_and_reports_bad_documents() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write(
        dir,
        "a.yaml",
        &format!(
            "{}---\n{}",
            doc(
                "a-good",
                "image: a\nbinaryExecutor:\n  tags: [v1]\n  path: bin/a\n"
            ),
            doc(
                "a-bad",
                "image: b\npodExecutor:\n  tags: [v1]\n  maxParallelExecutions: x\n"
            ),
        ),
    );
    write(
        dir,
        "b.yml",
        &doc("b", "image: b\npodExecutor:\n  tags: [v1]\n"),
    );
    write(
        dir,
        "c.JSON",
        "{\"apiVersion\": \"config.porch.kpt.dev/v1alpha1\", \"kind\": \"FunctionConfig\", \"metadata\": {\"name\": \"c\"}, \"spec\": {\"image\": \"c\", \"goExecutor\": {\"tags\": [\"v1\"]}}}",
    );
    write(dir, "broken.yaml", "kind: [\n");
    write(
        dir,
        "notes.txt",
        &doc("txt", "image: t\npodExecutor:\n  tags: [v1]\n"),
    );
    write(
        dir,
        ".hidden.yaml",
        &doc("hidden", "image: h\npodExecutor:\n  tags: [v1]\n"),
    );
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    write(
        &dir.join("sub"),
        "d.yaml",
        &doc("d", "image: d\npodExecutor:\n  tags: [v1]\n"),
    );

    let report = load_dir(dir);
    assert_eq!(
        report
            .configs
            .iter()
            .map(|c| c.metadata.name.as_str())
            .collect::<Vec<_>>(),
        vec!["a-good", "b", "c"]
    );
    let a_path = dir.join("a.yaml").display().to_string();
    assert_eq!(report.errors.len(), 2, "{:?}", error_strings(&report));
    assert_eq!(
        report.errors[0].to_string(),
        format!(
            "{a_path} (document 2): spec.podExecutor.maxParallelExecutions: invalid type: string \"x\", expected u32 (at line 21, column 28)"
        )
    );
    assert_eq!(
        report.errors[0].field(),
        Some("spec.podExecutor.maxParallelExecutions")
    );
    assert_eq!(
        report.errors[1].location(),
        Some(&DocLocation {
            source: dir.join("broken.yaml").display().to_string(),
            document: Some(1)
        })
    );
    // The relative binary path is resolved against the file's directory.
    assert_eq!(
        report.configs[0]
            .spec
            .binary_executor
            .as_ref()
            .map(|b| b.path.clone()),
        Some(dir.join("bin/a"))
    );
    assert_eq!(
        report.configs[0].source,
        Some(DocLocation {
            source: a_path,
            document: Some(1)
        })
    );
}

#[test]
fn load_dir_reports_duplicates_across_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write(
        dir,
        "1-first.yaml",
        &doc(
            "first",
            "image: set-namespace\npodExecutor:\n  tags: [v0.4.1]\n",
        ),
    );
    write(
        dir,
        "2-second.yaml",
        &doc(
            "second",
            &format!(
                "image: {PREFIX}/set-namespace\nbinaryExecutor:\n  tags: [v0.4.1]\n  path: /b\n"
            ),
        ),
    );
    let report = load_dir(dir);
    assert_eq!(report.configs.len(), 1);
    assert_eq!(report.configs[0].metadata.name, "first");
    let first = dir.join("1-first.yaml").display().to_string();
    let second = dir.join("2-second.yaml").display().to_string();
    assert_eq!(
        error_strings(&report),
        vec![format!(
            "{second} (document 1): spec.binaryExecutor.tags[0]: image \"{}\" is already configured by FunctionConfig porch-fn-system/first ({first} (document 1)); this FunctionConfig is ignored",
            sn("v0.4.1")
        )]
    );
    // Under another default prefix, the two are different images.
    let report = load_dir_with_prefix(dir, "example.com/fns");
    assert_eq!(report.configs.len(), 2);
    assert!(report.errors.is_empty());
}

#[test]
fn load_dir_of_a_missing_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nope");
    let report = load_dir(&missing);
    assert!(report.configs.is_empty());
    assert_eq!(report.errors.len(), 1);
    assert!(matches!(&report.errors[0], ConfigError::ReadDir { path, .. } if path == &missing));
    assert!(report.errors[0]
        .to_string()
        .starts_with(&format!("{}: cannot read directory: ", missing.display())));
}

#[test]
fn load_dir_of_an_empty_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let report = load_dir(tmp.path());
    assert!(report.configs.is_empty());
    assert!(report.is_clean());
}

#[cfg(unix)]
#[test]
fn load_dir_follows_configmap_style_symlinks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::create_dir(dir.join("..2024_01_01")).expect("mkdir");
    write(
        &dir.join("..2024_01_01"),
        "fns.yaml",
        &doc("linked", "image: l\npodExecutor:\n  tags: [v1]\n"),
    );
    std::os::unix::fs::symlink("..2024_01_01", dir.join("..data")).expect("symlink");
    std::os::unix::fs::symlink("..data/fns.yaml", dir.join("fns.yaml")).expect("symlink");
    let report = load_dir(dir);
    assert!(report.is_clean(), "{:?}", error_strings(&report));
    assert_eq!(
        report
            .configs
            .iter()
            .map(|c| c.metadata.name.as_str())
            .collect::<Vec<_>>(),
        vec!["linked"]
    );
}
