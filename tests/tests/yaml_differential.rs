//! The YAML differential harness on a fixed set of seeds (issue 42):
//! generated packages through our parse and emit against yaml.v3's, and
//! through `eval --exec` and `render` against kpt's (tests/src/yamldiff).
//! Any difference that is not a documented departure fails, with its seed
//! and the smallest package that still shows it. The long run is
//! tests/bench/yaml-soak.sh.
//!
//! Needs kpt, Go with Debian's yaml.v3 source, and python3 with PyYAML
//! (`.ci/run` provides them); without one it prints `SKIPPED` (fails in CI).

use e2e_tests::yamldiff::{run_plan, Outcome, Plan, Tools};
use e2e_tests::{prerequisite, yamldiff};

#[test]
fn generated_packages_agree_with_yaml_v3_and_kpt() {
    let Some(tools) = prerequisite(Tools::find()) else {
        return;
    };
    // ~20 s of yaml.v3 cases and ~50 s of kpt cases on this 2-core
    // machine in a debug build.
    let plan = Plan {
        yaml_seeds: 0..3000,
        kpt_seeds: 0..40,
        shrink_at_most: 3,
        shrink_budget: 200,
    };
    let report = run_plan(&tools, &plan, &mut |_| {}).expect("the harness runs");
    eprint!("{}", report.summary());
    let failures: Vec<String> = report.failures.iter().map(|f| f.to_string()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every check ran on every seed it was given.
    assert_eq!(report.cases.get("yaml.v3"), Some(&3000));
    assert_eq!(report.cases.get("eval"), Some(&160));
    assert_eq!(report.cases.get("render"), Some(&40));
}

/// The harness can fail: a difference it is shown is reported, not
/// accepted, and each documented departure is accepted only as written.
#[test]
fn the_harness_tells_a_difference_from_a_departure() {
    let Some(tools) = prerequisite(Tools::find()) else {
        return;
    };
    let pkg = yamldiff::gen::package(7);
    let bytes = &pkg.files[0].1;
    // The oracle's answer for the file, checked against itself, is the same.
    let own = tools
        .check(yamldiff::Check::Yaml, &pkg)
        .expect("the oracle answers");
    assert!(!matches!(own, Outcome::Differs(_)), "{own:?}");
    // A tree that is not yaml.v3's is found.
    let json = r#"[{"kind": 1, "content": [{"kind": 8, "tag": "!!str", "value": "other"}]}]"#;
    assert!(matches!(
        yamldiff::compare_yaml(bytes, json, Some(b"other\n")),
        Outcome::Differs(d) if d.contains("trees differ")
    ));
    // Bytes that are not yaml.v3's are found.
    let text = "a: |2\n\n  x\n";
    let json = r#"[{"kind":1,"line_no":1,"column":1,"content":[{"kind":4,"tag":"!!map","line_no":1,"column":1,"content":[{"kind":8,"tag":"!!str","value":"a","line_no":1,"column":1},{"kind":8,"style":8,"tag":"!!str","value":"\nx\n","line_no":1,"column":4}]}]}]"#;
    assert!(matches!(
        yamldiff::compare_yaml(text.as_bytes(), json, Some(b"a: |\n  x\n")),
        Outcome::Differs(d) if d.contains("emitted bytes differ")
    ));
    // 3.0.1's lost leading line is the one departure accepted there.
    assert_eq!(
        yamldiff::compare_yaml(text.as_bytes(), json, Some(b"a: |2\n  x\n")),
        Outcome::Departure(yamldiff::departures::ORACLE_LEADING_BLANK)
    );
}
