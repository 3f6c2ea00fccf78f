use super::fixtures::{err, ok, result, rref, SPEC_SHAPE, VARIANTS};
use super::*;

#[test]
fn kind_quoting_and_layout() {
    for input in [
        "kind: \"ResourceList\"\nitems: []\n",
        "kind: 'ResourceList' # comment\nitems: []\n",
        "kind:\n  ResourceList\nitems: []\n",
        "kind: !!str ResourceList\nitems: []\n",
        "{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: []}",
        "---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
        "--- # c\nkind: ResourceList\nitems: []\n...\n",
        "%YAML 1.1\n---\nkind: ResourceList\nitems: []\n",
    ] {
        assert_eq!(ok(input), vec![], "input:\n{input}");
    }
    assert_eq!(
        ok("kind: &k ResourceList\nitems: []\nresults: [{message: *k}]\n"),
        vec![result(Severity::Unset, "ResourceList")]
    );
}

#[test]
fn only_the_first_document_counts() {
    assert_eq!(
        ok("kind: ResourceList\nitems: []\nresults: [{message: first doc}]\n---\nkind: Other\n---\n: : bad [\n"),
        vec![result(Severity::Unset, "first doc")]
    );
    assert_eq!(
        ok("kind: ResourceList\nresults: [{message: first doc}]\n...\nkind: Other\n"),
        vec![result(Severity::Unset, "first doc")]
    );
    assert_eq!(
        ok("{\"kind\": \"ResourceList\", \"results\": [{\"message\": \"j\"}]}\n---\nkind: X\n"),
        vec![result(Severity::Unset, "j")]
    );
    assert_eq!(err("---\n---\nkind: ResourceList\n"), OutputError::Empty);
}

#[test]
fn not_a_resource_list() {
    let kind = |k: &str| OutputError::NotResourceList { kind: k.to_owned() };
    assert_eq!(
        err("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"),
        kind("Deployment")
    );
    assert_eq!(
        err("{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\"}"),
        kind("Deployment")
    );
    assert_eq!(err("apiVersion: v1\nitems: []\n"), kind(NO_KIND));
    assert_eq!(err("items:\n- a: 1\n"), kind(NO_KIND));
    assert_eq!(err("kind: null\nitems: []\n"), kind(NO_KIND));
    assert_eq!(err("kind: [a, b]\n"), kind("(a sequence)"));
    // `results` of another kind is not read.
    assert_eq!(err("kind: Deployment\nresults: 5\n"), kind("Deployment"));
    assert_eq!(
        err("- a\n- b\n"),
        OutputError::NotAMapping {
            found: "a sequence"
        }
    );
    assert_eq!(
        err("[1, 2]"),
        OutputError::NotAMapping {
            found: "a sequence"
        }
    );
    assert_eq!(
        err("just a string\n"),
        OutputError::NotAMapping { found: "a string" }
    );
    assert_eq!(err("42\n"), OutputError::NotAMapping { found: "a number" });
    assert_eq!(
        err("apiVersion: apps/v1\nkind: Deployment\n").to_string(),
        "stdout is not a ResourceList: its kind is \"Deployment\""
    );
    assert_eq!(
        err("apiVersion: v1\n").to_string(),
        "stdout is not a ResourceList: it has no kind"
    );
    assert_eq!(
        err("- a\n").to_string(),
        "stdout is not a ResourceList: its top level is a sequence, not a mapping"
    );
}

#[test]
fn empty() {
    for input in [
        "",
        " \n\t\r\n",
        "# nothing but a comment\n",
        "---\n",
        "---\n# c\n...\n",
        "null\n",
        "~",
    ] {
        assert_eq!(err(input), OutputError::Empty, "input: {input:?}");
    }
    assert_eq!(
        OutputError::Empty.to_string(),
        "stdout is empty, expected a ResourceList"
    );
}

#[test]
fn invalid_yaml_says_where() {
    let cases = [
        ("kind: ResourceList\nitems: []\nresults: [\n", "line 4"),
        (
            "kind: ResourceList\nitems: []\nthis line has no colon\n",
            "line 4 column 1",
        ),
        (
            "kind: ResourceList\nresults:\n- message: x\n  severity: [\n",
            "line 5",
        ),
        (
            "kind: ResourceList\nresults:\n- message: a\n   severity: b\n",
            "line 4 column 12",
        ),
        ("kind: ResourceList\nitems: @bad\n", "line 2 column 8"),
        (
            "kind: ResourceList\nitems: []\nitems: []\n",
            "line 3 column 1",
        ),
    ];
    for (input, place) in cases {
        let e = err(input);
        let OutputError::Parse(message) = &e else {
            panic!("not a parse error: {e:?}, input:\n{input}");
        };
        assert!(
            message.contains(place),
            "{message:?} does not name {place}, input:\n{input}"
        );
    }
    assert_eq!(
        err("kind: ResourceList\nitems: []\nkind: ResourceList\n").to_string(),
        "cannot parse stdout as a ResourceList: duplicate top-level key `kind` at line 3 column 1"
    );
    // Not UTF-8.
    assert!(matches!(
        parse_output(b"kind: ResourceList\nitems: [\xff]\n"),
        Err(OutputError::Parse(_))
    ));
}

#[test]
fn format_results_lines() {
    let results = vec![
        FnResult {
            message: "replicas too low".into(),
            severity: Severity::Error,
            resource_ref: rref("apps/v1", "Deployment", "prod", "app"),
            field: Some(Field {
                path: "spec.replicas".into(),
                ..Field::default()
            }),
            ..FnResult::default()
        },
        FnResult {
            message: "cluster-scoped".into(),
            severity: Severity::Warning,
            resource_ref: rref("v1", "Namespace", "", "team"),
            ..FnResult::default()
        },
        FnResult {
            message: "only a field".into(),
            severity: Severity::Info,
            field: Some(Field {
                path: "data.x".into(),
                ..Field::default()
            }),
            ..FnResult::default()
        },
        result(Severity::Error, "plain message\n"),
        FnResult {
            message: "kind and name only".into(),
            resource_ref: rref("", "ConfigMap", "", "cm"),
            file: Some(File {
                path: "cm.yaml".into(),
                index: 1,
            }),
            ..FnResult::default()
        },
    ];
    assert_eq!(
        format_results(&results),
        "[error] apps/v1/Deployment/prod/app spec.replicas: replicas too low\n\
         [warning] v1/Namespace/team: cluster-scoped\n\
         [info] data.x: only a field\n\
         [error] plain message\n\
         [error] ConfigMap/cm: kind and name only"
    );
    assert_eq!(format_results(&[]), "");
    assert_eq!(
        format_results(&ok(SPEC_SHAPE)),
        "[error] apps/v1/Deployment/prod/app spec.replicas: replicas too low\n[info] just so you know"
    );
    assert_eq!(
        format_results(&ok(VARIANTS)),
        "[warning] a warn\n\
         [warning] shouting\n\
         [info] mixed case\n\
         [error] no severity\n\
         [error] null severity\n\
         [error] odd severity\n\
         [warning] v1/ConfigMap/default/cm data.key: legacy one\n\
         [error] legacy two\n\
         [error] v1/Namespace/team spec.template: field as string"
    );
    assert_eq!(
        Severity::Other("warn".into()).level().to_string(),
        "warning"
    );
    assert_eq!(
        results[1].to_string(),
        "[warning] v1/Namespace/team: cluster-scoped"
    );
}

#[test]
fn results_as_one_mapping_in_older_kyamls_shape() {
    assert_eq!(
        ok("kind: ResourceList\nitems: []\nresults:\n  name: old-validator\n  items:\n  - message: one\n    severity: warning\n  - message: two\n"),
        vec![result(Severity::Warning, "one"), result(Severity::Unset, "two")]
    );
    assert_eq!(
        ok("{\"kind\": \"ResourceList\", \"results\": {\"name\": \"j\", \"items\": [{\"message\": \"m\", \"severity\": \"info\"}]}}"),
        vec![result(Severity::Info, "m")]
    );
    // Neither a list nor a mapping: still refused, saying what is wanted.
    let bad = format!("{:?}", err("kind: ResourceList\nresults: 5\n"));
    assert!(bad.contains("one {name, items} mapping"), "{bad}");
}

#[test]
fn severities_are_kept_as_written_and_read_two_ways() {
    use super::Level;
    // (as written, the SDK's rule: fails the function, the wrapper's level)
    for (text, fails, level) in [
        ("error", true, Level::Error),
        ("warning", false, Level::Warning),
        ("info", false, Level::Info),
        ("", false, Level::Error),
        ("ERROR", false, Level::Error),
        ("warn", false, Level::Warning),
        ("Info", false, Level::Info),
        ("fatal", false, Level::Error),
    ] {
        let severity = Severity::from_written(text);
        assert_eq!(severity.as_written(), text);
        assert_eq!(severity.is_error(), fails, "{text:?}");
        assert_eq!(severity.level(), level, "{text:?}");
    }
    assert!(ok("kind: ResourceList\nresults: [{message: m, severity: error}]\n")[0].is_error());
    assert!(!ok("kind: ResourceList\nresults: [{message: m}]\n")[0].is_error());
}

#[test]
fn kpt_reads_the_legacy_shapes_its_own_way() {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        "items:\n\
         - message: m\n  \
           resourceRef: {kind: ConfigMap, name: top, namespace: ns, metadata: {name: ' meta ', namespace: \"''\"}}\n  \
           field: {path: p, proposedValue: 1, suggestedValue: 2}\n\
         - just text\n\
         - message: n\n  field: a.b\n  tags: {b: 2, a: 1}\n",
    )
    .unwrap();
    let read = super::kpt::read(&value);
    // Entries that are not mappings are skipped; `metadata.name` (trimmed)
    // wins over `name`, a quoted-empty namespace does not; `suggestedValue`
    // wins over `proposedValue` (the wrapper's reading does the opposite).
    assert_eq!(read.len(), 2);
    let rr = read[0].resource_ref.as_ref().unwrap();
    assert_eq!((rr.name.as_str(), rr.namespace.as_str()), ("meta", "ns"));
    let field = read[0].field.as_ref().unwrap();
    assert_eq!(
        field.proposed_value,
        Some(serde_yaml_ng::Value::Number(2.into()))
    );
    assert_eq!(read[1].field.as_ref().unwrap().path, "a.b");
    assert_eq!(
        read[1].tags.iter().collect::<Vec<_>>(),
        [
            (&"a".to_owned(), &"1".to_owned()),
            (&"b".to_owned(), &"2".to_owned())
        ]
    );
    let wrapper = ok("kind: ResourceList\nresults: [{message: m, field: {path: p, proposedValue: 1, suggestedValue: 2}}]\n");
    assert_eq!(
        wrapper[0].field.as_ref().unwrap().proposed_value,
        Some(serde_yaml_ng::Value::Number(1.into()))
    );
}
