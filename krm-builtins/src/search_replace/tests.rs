#![allow(clippy::unwrap_used, clippy::panic)]

use super::{back_track_match, element_match};
use crate::function::Stop;
use crate::test_support::run;

const PACKAGE: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the name
  annotations:
    config.kubernetes.io/path: deploy/web.yaml
    internal.config.kubernetes.io/path: deploy/web.yaml
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.7.1 # keep
      - name: side
        image: "busybox:1.2"
      envs:
      - dev
      - stage
---
apiVersion: v1
kind: Service
metadata:
  name: web-svc
  annotations:
    config.kubernetes.io/path: svc.yaml
spec:
  replicas: 3
"#;

fn cm(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n{data}")
}

#[test]
fn search_by_value_and_path() {
    let (items, results, outcome) = run("search-replace", Some(&cm("  by-value: '3'\n")), PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        items,
        crate::test_support::stream(&crate::test_support::nodes(PACKAGE))
    );
    assert_eq!(
        results,
        "- message: Matched field value \"3\"\n  field:\n    path: spec.replicas\n  file:\n    path: deploy/web.yaml\n- message: Matched field value \"3\"\n  field:\n    path: spec.replicas\n  file:\n    path: svc.yaml\n"
    );
    let (_, results, _) = run(
        "search-replace",
        Some(&cm("  by-path: spec.**.containers[*].image\n")),
        PACKAGE,
    );
    assert_eq!(
        results,
        "- message: 'Matched field value \"nginx:1.7.1 # keep\"'\n  field:\n    path: spec.template.spec.containers[0].image\n  file:\n    path: deploy/web.yaml\n- message: Matched field value \"\\\"busybox:1.2\\\"\"\n  field:\n    path: spec.template.spec.containers[1].image\n  file:\n    path: deploy/web.yaml\n"
    );
    let (_, results, _) = run(
        "search-replace",
        Some(&cm("  by-value: nothing\n")),
        PACKAGE,
    );
    assert_eq!(results, "- message: no matches\n");
}

#[test]
fn regex_put_value_and_put_comment() {
    let config = cm("  by-value-regex: '(.*):(.*)'\n  put-value: ${1}:2.0\n  put-comment: 'kpt-set: ${1}:${tag}'\n  by-file-path: 'deploy/**'\n");
    let (items, results, outcome) = run("search-replace", Some(&config), PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert!(items.contains(
        "        - name: web\n          image: nginx:2.0 # kpt-set: nginx:${tag}\n        - name: side\n          image: \"busybox:2.0\" # kpt-set: busybox:${tag}\n"
    ), "{items}");
    assert_eq!(
        results,
        "- message: 'Mutated field value to \"nginx:2.0 # kpt-set: nginx:${tag}\"'\n  field:\n    path: spec.template.spec.containers[0].image\n  file:\n    path: deploy/web.yaml\n- message: 'Mutated field value to \"\\\"busybox:2.0\\\" # kpt-set: busybox:${tag}\"'\n  field:\n    path: spec.template.spec.containers[1].image\n  file:\n    path: deploy/web.yaml\n"
    );
    // A comment on a sequence found by path.
    let config = cm("  by-path: spec.template.spec.envs\n  put-comment: 'kpt-set: ${envs}'\n");
    let (items, results, _) = run("search-replace", Some(&config), PACKAGE);
    assert!(
        items.contains("      envs: # kpt-set: ${envs}\n        - dev\n        - stage\n"),
        "{items}"
    );
    assert_eq!(
        results,
        "- message: Mutated field value to \"[dev, stage]\"\n  field:\n    path: 'spec.template.spec.envs # kpt-set: ${envs}'\n  file:\n    path: deploy/web.yaml\n"
    );
}

#[test]
fn put_value_by_an_absolute_path_creates_the_field() {
    let item =
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a # n\nspec:\n  replicas: \"3\" # old\n";
    let config = cm("  by-path: spec.replicas\n  put-value: '4'\n");
    let (items, results, outcome) = run("search-replace", Some(&config), item);
    assert_eq!(outcome, Ok(()));
    // The value's style is kept, its comment replaced with the node.
    assert_eq!(
        items,
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a # n\nspec:\n  replicas: \"4\"\n"
    );
    assert_eq!(
        results,
        "- message: Mutated field value to \"4\"\n  field:\n    path: spec.replicas\n"
    );
    let config = cm("  by-path: spec.template.x\n  put-value: 'on'\n");
    let (items, _, _) = run("search-replace", Some(&config), item);
    assert_eq!(
        items,
        "apiVersion: v1\nkind: A\nmetadata:\n  name: a # n\nspec:\n  replicas: \"3\" # old\n  template:\n    x: on\n"
    );
    let config = cm("  by-path: spec.replicas.x\n  put-value: '1'\n");
    let (_, _, outcome) = run("search-replace", Some(&config), item);
    let err = "wrong Node Kind for spec.replicas expected: MappingNode was ScalarNode: value: {\"3\" # old}";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
}

#[test]
fn the_function_config_kind_is_read_too() {
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SearchReplace\nmetadata:\n  name: x\ndata:\n  by-value: web-svc\n  put-value: api\n";
    let (items, results, outcome) = run("search-replace", Some(config), PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert!(items.contains("  name: api\n"));
    assert_eq!(
        results,
        "- message: Mutated field value to \"api\"\n  field:\n    path: metadata.name\n  file:\n    path: svc.yaml\n"
    );
}

#[test]
fn bad_configs_fail_with_the_catalogs_text() {
    let cases = [
        (
            cm("  by-valu: x\n"),
            r#"invalid matcher "by-valu", must be one of ["by-value" "by-file-path" "by-value-regex" "by-path" "put-value" "put-comment"]"#,
        ),
        (
            cm("  by-value: x\n  by-value-regex: y\n"),
            r#"only one of ["by-value", "by-value-regex"] can be provided"#,
        ),
        (
            cm("  by-value-regex: (a\n"),
            "error parsing regexp: missing closing ): `(a`",
        ),
        (cm("  by-file-path: '[a'\n"), "syntax error in pattern"),
        (
            cm("  by-value-regex: web\n  put-value: ${2}\n"),
            "unable to resolve capture groups",
        ),
    ];
    for (config, err) in cases {
        let (_, results, outcome) = run("search-replace", Some(&config), PACKAGE);
        assert_eq!(
            outcome,
            Err(Stop::Failed(format!("{err}{err}\n"))),
            "{config}"
        );
        let message = format!(
            "failed to perform search-replace operation: {}",
            crate::catalog::quote(err)
        );
        let expected = crate::test_support::results(&[crate::result::FnResult::error(message)]);
        assert_eq!(results, expected);
    }
    let (_, _, outcome) = run("search-replace", Some(&cm("  by-value: x\n")), "- a\n");
    let err = "missing Resource metadata";
    assert_eq!(outcome, Err(Stop::Failed(format!("{err}{err}\n"))));
}

#[test]
fn no_config_matches_nothing_and_odd_trees_never_panic() {
    let (_, results, outcome) = run("search-replace", None, PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(results, "- message: no matches\n");
    let odd = "kind: A\nmetadata:\n  name: a\nx: &a [1]\ny: *a\nz: ~\nk: 1\nk: 2\n? [q]\n: v\n";
    for data in [
        "  by-path: '**'\n  put-value: v\n",
        "  by-path: '*.*'\n  put-comment: c\n",
        "  by-path: z.a.b\n  put-value: v\n",
        "  by-path: x.5\n  put-value: v\n",
        "  by-path: x.-1.a\n  put-value: v\n",
        "  by-path: x.-.a\n  put-value: v\n",
        "  by-value-regex: '.*'\n  put-value: ${1}\n",
    ] {
        let _ = run("search-replace", Some(&cm(data)), odd);
    }
}

#[test]
fn regexp_errors_read_as_go_writes_them() {
    for (pattern, code) in [
        ("(a", "missing closing )"),
        ("a)", "unexpected )"),
        ("[a", "missing closing ]"),
        ("*a", "missing argument to repetition operator"),
        ("\\q", "invalid escape sequence"),
        ("[z-a]", "invalid character class range"),
    ] {
        let Err(err) = regex::Regex::new(pattern) else {
            panic!("{pattern} compiles");
        };
        assert_eq!(
            super::go_regexp_error(pattern, &err),
            format!("error parsing regexp: {code}: `{pattern}`"),
            "{err}"
        );
    }
    // Go refuses a repetition of a repetition, which the `regex` crate
    // takes; a lazy `?` is no repetition.
    assert_eq!(
        super::nested_repetition("a+b**c"),
        Some("error parsing regexp: invalid nested repetition operator: `**`".to_owned())
    );
    assert_eq!(
        super::nested_repetition("a*?+"),
        Some("error parsing regexp: invalid nested repetition operator: `*?+`".to_owned())
    );
    for ok in ["a*?", "[**]", "\\**", "(a*)*", "a+?b?"] {
        assert_eq!(super::nested_repetition(ok), None, "{ok}");
    }
}

#[test]
fn path_patterns() {
    let m = |path: &str, pattern: &str| {
        back_track_match(
            &path.split('.').collect::<Vec<_>>(),
            &pattern.split('.').collect::<Vec<_>>(),
        )
    };
    assert!(m("a.a.b.c.e.b", "a.*.b.**.b"));
    assert!(m("spec.x", "**.x"));
    assert!(m("x", "**.x"));
    assert!(!m("spec.x", "*"));
    assert!(m("a[0].b", "a[*].b"));
    assert!(element_match("a[1]", "*[1]"));
    assert!(!element_match("a[1]", "a"));
    assert!(!element_match("a[1]", "a[2]"));
}

#[test]
fn by_path_parts_are_capped() {
    // An absolute path would create fields this deep; any other is
    // matched against every field's path.
    for data in [
        format!("  by-path: {}a\n  put-value: x\n", "a.".repeat(2000)),
        format!("  by-path: '**.{}a'\n", "a.".repeat(2000)),
    ] {
        let (_, results, outcome) = run("search-replace", Some(&cm(&data)), PACKAGE);
        let Err(Stop::Failed(text)) = outcome else {
            panic!("{outcome:?}");
        };
        assert!(
            text.contains("\"by-path\" has 200")
                && text.contains(" parts, more than the limit of 1000"),
            "{text}"
        );
        assert!(results.contains("more than the limit of 1000"), "{results}");
    }
}

#[test]
fn long_file_path_patterns_are_refused() {
    let data = format!("  by-file-path: '{}b'\n  by-value: x\n", "*a".repeat(3000));
    let (_, _, outcome) = run("search-replace", Some(&cm(&data)), PACKAGE);
    let Err(Stop::Failed(text)) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        text.contains("\"by-file-path\" is 6001 bytes long, more than the limit of 4096"),
        "{text}"
    );
}

#[test]
fn put_values_growing_without_bound_are_refused() {
    // Each `${1}` a copy of the whole value: 20,000 × 8 KiB per field.
    let data = format!(
        "  by-value-regex: '(.*)'\n  by-path: spec.replicas\n  put-value: '{}'\n",
        "${1}".repeat(20_000)
    );
    let package = PACKAGE.replace("replicas: 3", &format!("replicas: {}", "9".repeat(8192)));
    let (_, results, outcome) = run("search-replace", Some(&cm(&data)), &package);
    let Err(Stop::Failed(text)) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        text.contains("put-value and put-comment would produce more than 67108864 bytes"),
        "{text}"
    );
    assert!(results.contains("67108864"), "{results}");
}

#[test]
fn by_file_path_alternatives_are_capped() {
    let data = format!(
        "  by-file-path: '{}'\n  by-value: '3'\n",
        "{a,b}".repeat(40)
    );
    let (_, results, outcome) = run("search-replace", Some(&cm(&data)), PACKAGE);
    let Err(Stop::Failed(text)) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        text.contains("more than 10000 {a,b} alternatives"),
        "{text}"
    );
    assert!(results.contains("10000"), "{results}");
}

/// Runs search-replace over `items` with the ConfigMap `data`, as the
/// image of `release` names it.
fn run_as(
    release: Option<&'static str>,
    data: &str,
    items: &str,
) -> (String, String, Result<(), Stop>) {
    let mut rl = crate::test_support::list(items, Some(&cm(data)));
    let outcome = crate::find("search-replace")
        .unwrap()
        .run(&mut rl, &crate::Context::new().with_release(release));
    assert_eq!(rl.log, "");
    (
        crate::test_support::out(&rl),
        crate::test_support::results(&rl.results),
        outcome,
    )
}

/// The one error result and stderr of a failure.
fn failure(err: &str) -> (String, Result<(), Stop>) {
    let message = format!(
        "failed to perform search-replace operation: {}",
        crate::catalog::quote(err)
    );
    (
        crate::test_support::results(&[crate::result::FnResult::error(message)]),
        Err(Stop::Failed(format!("{err}{err}\n"))),
    )
}

#[test]
fn v0_2_0_reads_only_the_legacy_path() {
    let item = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n    internal.config.kubernetes.io/path: svc.yaml\nspec:\n  replicas: 3\n";
    // kyaml v0.10.21 finds no file: the field is not reported.
    let (_, results, outcome) = run_as(Some("v0.2.0"), "  by-value: '3'\n", item);
    assert_eq!(outcome, Ok(()));
    assert_eq!(results, "- message: no matches\n");
    let (_, results, _) = run_as(None, "  by-value: '3'\n", item);
    assert_eq!(
        results,
        "- message: Matched field value \"3\"\n  field:\n    path: spec.replicas\n  file:\n    path: svc.yaml\n"
    );
    // With both forms (as kpt sends them), as master.
    for data in [
        "  by-value: '3'\n",
        "  by-path: spec.**.image\n  put-value: x\n",
    ] {
        assert_eq!(
            run_as(Some("v0.2.0"), data, PACKAGE),
            run_as(None, data, PACKAGE),
            "{data}"
        );
    }
    // No search matcher: nothing matches, as master.
    let (_, results, outcome) = run_as(Some("v0.2.0"), "  put-value: x\n", PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(results, "- message: no matches\n");
}

#[test]
fn v0_2_0_globs_as_doublestar_v4_0_2() {
    let data = "  by-file-path: '**/{web,svc}.yaml'\n  by-value: '3'\n";
    // v4.0.2 commits at `{` with `**` matching nothing: `svc.yaml`
    // matches, `deploy/web.yaml` does not.
    let (_, results, outcome) = run_as(Some("v0.2.0"), data, PACKAGE);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        results,
        "- message: Matched field value \"3\"\n  field:\n    path: spec.replicas\n  file:\n    path: svc.yaml\n"
    );
    let (_, results, _) = run_as(None, data, PACKAGE);
    assert!(results.contains("deploy/web.yaml"), "{results}");
    // A trailing `/**/` is no zero-length match in v4.0.2.
    let (_, results, _) = run_as(
        Some("v0.2.0"),
        "  by-file-path: 'deploy/**/'\n  by-value: '3'\n",
        PACKAGE,
    );
    assert_eq!(results, "- message: no matches\n");
    // A malformed pattern: where matching stops, the rest is checked.
    for pattern in ["x{a", "deploy/{a", "deploy/[a"] {
        let data = format!("  by-file-path: '{pattern}'\n  by-value: '3'\n");
        let (_, results, outcome) = run_as(Some("v0.2.0"), &data, PACKAGE);
        assert_eq!(
            (results, outcome),
            failure("syntax error in pattern"),
            "{pattern}"
        );
    }
}

#[test]
fn v0_1_1_has_no_by_file_path_and_wants_a_search() {
    let names = r#"["by-value" "by-value-regex" "by-path" "put-value" "put-comment"]"#;
    let at_least_one =
        r#"at least one of ["by-value", "by-value-regex", "by-path"] must be provided"#;
    for (data, err) in [
        (
            "  by-file-path: deploy/**\n  by-value: '3'\n".to_owned(),
            format!(r#"invalid matcher "by-file-path", must be one of {names}"#),
        ),
        ("  put-value: x\n".to_owned(), at_least_one.to_owned()),
        (
            "  put-comment: x\n  by-value: ''\n".to_owned(),
            at_least_one.to_owned(),
        ),
        (
            "  by-value: x\n  by-value-regex: y\n".to_owned(),
            r#"only one of ["by-value", "by-value-regex"] can be provided"#.to_owned(),
        ),
    ] {
        let (items, results, outcome) = run_as(Some("v0.1.1"), &data, PACKAGE);
        assert_eq!((results, outcome), failure(&err), "{data}");
        assert_eq!(
            items,
            crate::test_support::stream(&crate::test_support::nodes(PACKAGE))
        );
    }
    // No config at all: no search either.
    let mut rl = crate::test_support::list(PACKAGE, None);
    let outcome = crate::find("search-replace")
        .unwrap()
        .run(&mut rl, &crate::Context::new().with_release(Some("v0.1.1")));
    assert_eq!(
        (crate::test_support::results(&rl.results), outcome),
        failure(at_least_one)
    );
    // Otherwise as v0.2.0.
    let item = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n    internal.config.kubernetes.io/path: svc.yaml\nspec:\n  replicas: 3\n";
    for (data, items) in [
        ("  by-value: '3'\n", PACKAGE),
        ("  by-value: '3'\n", item),
        ("  by-path: spec.**.image\n  put-value: x\n", PACKAGE),
    ] {
        assert_eq!(
            run_as(Some("v0.1.1"), data, items),
            run_as(Some("v0.2.0"), data, items),
            "{data}"
        );
    }
}
