use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::test_support::*;
use crate::config::*;

#[test]
fn short_and_full_names_match_with_the_default_prefix() {
    let index = ImageIndex::new(&[set_namespace_config()], DEFAULT_IMAGE_PREFIX);
    let expected = BinaryMatch {
        path: PathBuf::from("/opt/fns/set-namespace"),
        prespawn: Some(1),
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
            prespawn: Some(2),
            pids_limit: None,
            idle_pods: 0,
            single_use: false,
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
            prespawn: None,
            pids_limit: None,
            idle_pods: 0,
            single_use: false,
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
