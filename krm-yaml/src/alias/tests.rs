use super::*;
use crate::emit::encode_node;
use crate::parse::parse;
use crate::value::{to_value, to_value_in};
use serde_yaml_ng::Value;

fn doc(text: &str) -> Node {
    parse(text).unwrap().remove(0)
}

fn yaml(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap()
}

#[test]
fn an_alias_is_the_latest_anchor_of_its_name_before_it() {
    let d = doc("a: &x 1\nb: *x\nc: &x {k: v}\nd: *x\ne: [*x, *x]\n");
    assert_eq!(
        to_value(&d).unwrap(),
        yaml("a: 1\nb: 1\nc: {k: v}\nd: {k: v}\ne: [{k: v}, {k: v}]\n")
    );
    // Keys may be aliases too.
    let d = doc("- &k name\n- {*k : v}\n");
    assert_eq!(to_value(&d).unwrap(), yaml("[name, {name: v}]"));
}

#[test]
fn results_sharing_one_dict_keep_it_in_each() {
    // What PyYAML's dump writes for two results holding the same dicts.
    let d = doc(
        "results:\n\
         - file: &id001\n    path: a.yaml\n    index: 1\n  message: first\n  resourceRef: &id002\n    kind: ConfigMap\n    name: cm1\n\
         - file: *id001\n  message: second\n  resourceRef: *id002\n",
    );
    let v = to_value(&d).unwrap();
    let results = v["results"].as_sequence().unwrap();
    assert_eq!(results[0]["file"], results[1]["file"]);
    assert_eq!(results[1]["file"]["path"], Value::from("a.yaml"));
    assert_eq!(results[1]["resourceRef"]["name"], Value::from("cm1"));
}

#[test]
fn a_part_reads_anchors_from_its_whole_document() {
    let d = doc("items:\n- &m {a: 1}\nresults:\n- *m\n");
    let results = crate::package::kyaml::field(&d, "results").unwrap();
    assert_eq!(to_value_in(&d, results).unwrap(), yaml("[{a: 1}]"));
    // On its own the part names an anchor it does not hold: an error, not
    // a null.
    assert_eq!(to_value(results), Err(AliasError::Unknown("m".into())));
    assert_eq!(
        to_value(results).unwrap_err().to_string(),
        "yaml: unknown anchor 'm' referenced"
    );
}

#[test]
fn an_alias_inside_what_it_names_is_refused() {
    for text in ["&a [*a]\n", "a: &r\n  more: [x, {deep: *r}]\n"] {
        let d = doc(text);
        let want = if text.starts_with("&a") { "a" } else { "r" };
        assert_eq!(
            to_value(&d),
            Err(AliasError::Recursive(want.into())),
            "{text}"
        );
        assert!(matches!(
            Follow::new(&d).expand(&d),
            Err(AliasError::Recursive(_))
        ));
    }
    assert_eq!(
        AliasError::Recursive("r".into()).to_string(),
        "yaml: anchor 'r' value contains itself"
    );
}

/// Nine levels of ten aliases each: 10^9 nodes once expanded.
fn billion_laughs() -> String {
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        let refs = vec![format!("*{prev}"); 10].join(", ");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    text
}

#[test]
fn an_alias_bomb_is_refused_quickly() {
    let d = doc(&billion_laughs());
    let started = std::time::Instant::now();
    assert_eq!(to_value(&d), Err(AliasError::Excessive));
    assert!(matches!(
        Follow::new(&d).expand(&d),
        Err(AliasError::Excessive)
    ));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        AliasError::Excessive.to_string(),
        "yaml: document contains excessive aliasing"
    );
    // Modest sharing is fine: the first three levels are 10 + 100 + 1,000
    // values from 33 nodes.
    let small: String = billion_laughs()
        .lines()
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    let v = to_value(&doc(&small)).unwrap();
    assert_eq!(v["c"].as_sequence().unwrap().len(), 10);
    assert_eq!(v["c"][9][9][9], Value::from("x"));
}

#[test]
fn the_budget_is_yaml_v3s_ratio() {
    // Up to 400,000 nodes, 99% may come through aliases, once past 1,000
    // nodes of which 100 aliased: after 10 plain nodes, the 991st aliased
    // one (991 of 1,001) is one too many.
    let mut b = Budget::default();
    for _ in 0..10 {
        b.count(false).unwrap();
    }
    for _ in 0..990 {
        b.count(true).unwrap();
    }
    assert_eq!(b.count(true), Err(AliasError::Excessive));
    // Few aliased nodes never trip it, however few the others.
    let mut b = Budget::default();
    for _ in 0..100 {
        b.count(true).unwrap();
    }
    for _ in 0..5000 {
        b.count(false).unwrap();
    }
    // Past 4,000,000 nodes the share falls to 10%.
    assert_eq!(Budget::allowed(4_000_000), 0.10);
    assert_eq!(Budget::allowed(400_000), 0.99);
    assert!((Budget::allowed(2_200_000) - 0.545).abs() < 1e-9);
}

#[test]
fn deep_nesting_needs_no_deep_stack() {
    // 9,000 levels (the parser allows 10,000), read on a test thread's
    // small stack.
    let depth = 9000;
    let text = format!("a: &a {}{}\nb: *a\n", "[".repeat(depth), "]".repeat(depth));
    let d = doc(&text);
    let v = to_value(&d).unwrap();
    let mut inner = &v["b"];
    for _ in 1..depth {
        inner = &inner[0];
    }
    assert_eq!(inner, &Value::Sequence(Vec::new()));
    drop(v);
    // The copy of the anchored list must not overflow either.
    let copy = Follow::new(&d).expand(&d).unwrap();
    assert_eq!(copy.content[0].content[3].kind, Kind::Sequence);
}

#[test]
fn parts_stand_alone_with_foreign_aliases_expanded() {
    let text = "\
items:
- metadata:
    labels: &id001
      app: demo
      shared: &s yes
- metadata:
    labels: *id001 # from the first
    other: *s
- spec:
    p: &id002
      a: b
    q: *id002
    r: *fc
functionConfig: &fc {k: v}
";
    // An anchor after the items (PyYAML sorts `functionConfig` before
    // `items`; here it comes after to test the order): `*fc` there is unknown.
    assert!(parse(text).is_err());
    let text = text.replace("functionConfig: &fc {k: v}\n", "");
    let text = format!("functionConfig: &fc {{k: v}}\n{text}");
    let mut d = doc(&text);
    let root = &d.content[0];
    let items = crate::package::kyaml::field(root, "items").unwrap();
    let found = Expansions::find(&d, &items.content).unwrap();
    assert!(!found.is_empty());
    let items = &mut d.content[0].content[3].content;
    found.apply(items);
    let texts: Vec<String> = items.iter().map(|i| encode_node(i, false)).collect();
    assert_eq!(
        texts[0],
        "metadata:\n  labels: &id001\n    app: demo\n    shared: &s yes\n"
    );
    assert_eq!(
        texts[1],
        "metadata:\n  labels: # from the first\n    app: demo\n    shared: yes\n  other: yes\n"
    );
    assert_eq!(
        texts[2],
        "spec:\n  p: &id002\n    a: b\n  q: *id002\n  r: {k: v}\n"
    );
    // Each parses on its own, to the data it had in the list.
    for t in &texts {
        to_value(&doc(t)).unwrap();
    }
    assert_eq!(
        to_value(&doc(&texts[1])).unwrap(),
        yaml("metadata: {labels: {app: demo, shared: 'yes'}, other: 'yes'}")
    );
}

#[test]
fn parts_without_aliases_are_left_alone() {
    let d = doc("items:\n- &a {x: 1}\n- {y: 2}\n");
    let items = crate::package::kyaml::field(&d.content[0], "items").unwrap();
    let found = Expansions::find(&d, &items.content).unwrap();
    assert!(found.is_empty());
    let d = doc("items:\n- {x: 1}\n");
    let items = crate::package::kyaml::field(&d.content[0], "items").unwrap();
    assert!(Expansions::find(&d, &items.content).unwrap().is_empty());
    // A bomb across parts is refused.
    let bomb = format!(
        "items:\n- {{{}}}\n- {{z: *i}}\n",
        billion_laughs().trim_end().replace('\n', ", ")
    );
    let d = doc(&bomb);
    let items = crate::package::kyaml::field(&d.content[0], "items").unwrap();
    assert!(matches!(
        Expansions::find(&d, &items.content),
        Err(AliasError::Excessive)
    ));
}

#[test]
fn aliases_moved_before_their_anchor_are_expanded() {
    // PyYAML writes `p` (anchored) before `q` (its alias); the input had
    // `q` first, and the field order sync puts it back there.
    let mut d = doc("spec:\n  p: &id001\n    a: b\n  q: *id001 # same\n  r: *id001\n");
    let spec = &mut d.content[0].content[1];
    spec.content.swap(0, 2);
    spec.content.swap(1, 3);
    let before = encode_node(&d, false);
    assert!(parse(&before).is_err(), "{before}");
    expand_misplaced(&mut d).unwrap();
    let after = encode_node(&d, false);
    assert_eq!(
        after,
        "spec:\n  q: # same\n    a: b\n  p: &id001\n    a: b\n  r: *id001\n"
    );
    to_value(&doc(&after)).unwrap();
    // In order: nothing to do.
    let mut d = doc("spec:\n  p: &id001\n    a: b\n  q: *id001\n");
    let want = d.clone();
    expand_misplaced(&mut d).unwrap();
    assert_eq!(d, want);
}
