use std::collections::BTreeMap;

use crate::fixtures::{
    err, ok, spec_shape_expected, variants_expected, yaml, NO_RESULTS, SPEC_SHAPE, SPEC_SHAPE_JSON,
    VARIANTS,
};
use crate::{Field, FnResult, OutputError};

#[test]
fn spec_shape_yaml_and_json() {
    assert_eq!(ok(SPEC_SHAPE), spec_shape_expected());
    assert_eq!(ok(SPEC_SHAPE_JSON), spec_shape_expected());
    // JSON written out by serde_json, compact.
    let value: serde_json::Value = serde_yaml_ng::from_str(SPEC_SHAPE).unwrap();
    assert_eq!(ok(&value.to_string()), spec_shape_expected());
}

#[test]
fn variants_real_functions_emit() {
    assert_eq!(ok(VARIANTS), variants_expected());
    let value: serde_json::Value = serde_yaml_ng::from_str(VARIANTS).unwrap();
    assert_eq!(
        ok(&serde_json::to_string_pretty(&value).unwrap()),
        variants_expected()
    );
}

#[test]
fn no_results() {
    for input in NO_RESULTS {
        assert_eq!(ok(input), vec![], "input:\n{input}");
    }
}

#[test]
fn results_of_the_wrong_shape() {
    for (input, place) in [
        (
            "kind: ResourceList\nitems: []\nresults: {message: not a list}\n",
            "line 3",
        ),
        ("kind: ResourceList\nresults:\n- just a string\n", "line 3"),
        (
            "kind: ResourceList\nresults:\n- message: x\n  field: [1]\n",
            "line 4",
        ),
    ] {
        let e = err(input);
        assert!(
            matches!(&e, OutputError::Parse(m) if m.contains(place)),
            "{e}, input:\n{input}"
        );
    }
}

#[test]
fn non_string_keys_and_tags() {
    let got = ok("kind: ResourceList\n1: one\n[a]: seq key\nresults:\n- message: x\n  tags: {1: 2, true: null}\n  field: {path: p, currentValue: {1: !custom x}}\n");
    assert_eq!(
        got,
        vec![FnResult {
            message: "x".into(),
            field: Some(Field {
                path: "p".into(),
                current_value: Some(yaml("{1: !custom x}")),
                proposed_value: None,
            }),
            tags: BTreeMap::from([
                ("1".to_owned(), "2".to_owned()),
                ("true".to_owned(), String::new())
            ]),
            ..FnResult::default()
        }]
    );
}
