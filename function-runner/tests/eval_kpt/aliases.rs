//! #28 items 2 and 3: YAML aliases in what a function writes, as PyYAML
//! writes them (`&id001` on the first use of a dict or list, `*id001` on
//! the others). Where kpt reads and writes them right, the same bytes;
//! where it fails or writes a file that does not parse, what we do
//! instead, asserted as such.

use super::common::text_tree;
use super::*;

use e2e_tests::require_command;
use krm_yaml::value::to_value;

/// kpt, and Python with PyYAML for the functions.
fn prerequisites() -> Option<PathBuf> {
    let kpt = prerequisite(require_kpt())?;
    prerequisite(require_command("python3", &["-c", "import yaml"]))?;
    Some(kpt)
}

/// A Python function: `body` edits `rl` (the ResourceList) and `items`.
fn python(dir: &Path, name: &str, body: &str) -> String {
    script(
        dir,
        name,
        &format!(
            "#!/usr/bin/env python3\nimport sys, yaml\nrl = yaml.safe_load(sys.stdin)\nitems = rl['items']\n{body}\nyaml.safe_dump(rl, sys.stdout)\n"
        ),
    )
}

/// Whether `text` parses as YAML documents each on its own (yaml.v3 keeps
/// anchors from one document to the next of a stream; a file or a reader
/// of one document does not), every alias naming an anchor of its own
/// document.
fn each_document_parses(text: &str) -> Result<(), String> {
    for doc in text.split("\n---\n") {
        let nodes = krm_yaml::parse::parse(doc).map_err(|e| format!("{e}:\n{doc}"))?;
        for node in &nodes {
            to_value(node).map_err(|e| format!("{e}:\n{doc}"))?;
        }
    }
    Ok(())
}

/// Results that share one dict (PyYAML: the first holds it anchored, the
/// others alias it) keep it, in the printed lines and `results.yaml`. kpt
/// gets `file` and `tags` right: the same lines and file.
#[test]
fn results_sharing_file_and_tags_read_like_kpt() {
    let Some(kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = python(
        fns.path(),
        "shared-file.py",
        "where = {'path': 'res.yaml', 'index': 1}\n\
         tags = {'team': 'a', 'tier': 'web'}\n\
         rl['results'] = [\n\
         \x20   {'message': 'first', 'severity': 'warning', 'file': where, 'tags': tags},\n\
         \x20   {'message': 'second', 'severity': 'info', 'file': where, 'tags': tags},\n\
         ]",
    );
    let p = pair(&selection_package);
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f, "--results-dir", "results"],
        None,
    );
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_same_run(&k, &o, "eval");
    assert_same_tree(&p.k, &p.o, "eval");
    let results = fs::read_to_string(p.o.join("results/results.yaml")).unwrap();
    assert_eq!(
        results.matches("path: res.yaml").count(),
        2,
        "both results keep their file:\n{results}"
    );

    let p = pair(&|d: &Path| {
        selection_package(d);
        kptfile(d, &format!("  mutators:\n  - exec: {f}\n"));
    });
    let (k, o) = both_render(
        &kpt,
        &p,
        &["pkg", "--allow-exec", "--results-dir", "results"],
    );
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_eq!(untimed(&k.stderr), untimed(&o.stderr), "render");
    assert_same_tree(&p.k, &p.o, "render");
}

/// Results that share `resourceRef` and `field`: kpt prints them, then
/// fails ("wrong node kind: expected MappingNode but got AliasNode") and
/// records no results. Each result keeps every field here.
#[test]
fn results_sharing_resource_ref_and_field_keep_them() {
    let Some(kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = python(
        fns.path(),
        "shared-ref.py",
        "ref = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'name': 'cm1', 'namespace': 'ns'}\n\
         field = {'path': 'data.a', 'currentValue': '1', 'proposedValue': '2'}\n\
         where = {'path': 'res.yaml'}\n\
         rl['results'] = [\n\
         \x20   {'message': 'first', 'severity': 'warning', 'resourceRef': ref, 'field': field, 'file': where},\n\
         \x20   {'message': 'second', 'severity': 'warning', 'resourceRef': ref, 'field': field, 'file': where},\n\
         ]",
    );
    let lines =
        "[Results]: [warning] v1/ConfigMap/ns/cm1 data.a: first, [warning] v1/ConfigMap/ns/cm1 data.a: second\n";
    let p = pair(&selection_package);
    let (k, o) = both(
        &kpt,
        &p,
        &["pkg", "--exec", &f, "--results-dir", "results"],
        None,
    );
    assert_eq!(k.code, 1, "kpt fails on these: {}", k.stderr);
    assert!(k.stderr.contains("AliasNode"), "{}", k.stderr);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(lines), "{}", o.stderr);
    let check_file = |path: &Path| {
        let text = fs::read_to_string(path).unwrap();
        let list: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        let results = list["items"][0]["results"].as_sequence().unwrap();
        assert_eq!(results.len(), 2, "{text}");
        for key in ["resourceRef", "field", "file"] {
            assert!(results[1][key].is_mapping(), "{key}:\n{text}");
            assert_eq!(results[0][key], results[1][key], "{key}:\n{text}");
        }
        assert_eq!(results[1]["field"]["proposedValue"], "2", "{text}");
        assert_eq!(results[1]["file"]["path"], "res.yaml", "{text}");
    };
    check_file(&p.o.join("results/results.yaml"));

    let p = pair(&|d: &Path| {
        selection_package(d);
        kptfile(d, &format!("  mutators:\n  - exec: {f}\n"));
    });
    let (_, o) = both_render(
        &kpt,
        &p,
        &["pkg", "--allow-exec", "--results-dir", "results"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(lines), "{}", o.stderr);
    check_file(&p.o.join("results/results.yaml"));
}

/// Sets cm1's labels and gives a new resource the same dict (the anchor in
/// one item, the alias in another); gives the Deployment and a second new
/// resource a dict used twice inside themselves.
const SHARING: &str = "\
labels = {'app': 'demo', 'tier': 'web'}
for it in items:
    name = it['metadata']['name']
    if name == 'cm1':
        it['metadata']['labels'] = labels
    if name == 'd':
        shared = {'app': 'd'}
        it['spec']['selector'] = {'matchLabels': shared}
        it['spec']['template'] = {'metadata': {'labels': shared}}
inner = {'a': 'b'}
items.append({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'added', 'labels': labels}, 'data': {'x': '1'}})
items.append({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'self'}, 'data': {'p': inner, 'q': inner}})";

/// What `added` becomes: the alias to cm1's anchor expanded. kpt writes
/// `labels: *id002`, an anchor its file does not hold.
const ADDED: &str = "apiVersion: v1\ndata:\n  x: '1'\nkind: ConfigMap\nmetadata:\n  labels:\n    app: demo\n    tier: web\n  name: added\n";

/// A new resource whose alias names an anchor in another is written with
/// the alias expanded, so every file parses and the next run works; the
/// anchors and aliases inside one resource stay as kpt writes them.
#[test]
fn output_aliases_across_resources_are_expanded() {
    let Some(kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = python(fns.path(), "sharing.py", SHARING);
    let p = pair(&selection_package);
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &f], None);
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_same_run(&k, &o, "eval");
    let (kt, ot) = (text_tree(&p.k), text_tree(&p.o));
    assert_eq!(kt.keys().collect::<Vec<_>>(), ot.keys().collect::<Vec<_>>());
    for (path, text) in &kt {
        if path != "pkg/configmap_added.yaml" {
            assert_eq!(text, &ot[path], "{path} (left kpt, right ours)");
        }
    }
    assert!(kt["pkg/configmap_added.yaml"].contains("labels: *id002"));
    assert_eq!(ot["pkg/configmap_added.yaml"], ADDED);
    assert!(ot["pkg/res.yaml"].contains("labels: &id002\n"));
    assert!(ot["pkg/res.yaml"].contains("labels: *id001\n"));
    assert!(ot["pkg/configmap_self.yaml"].contains("q: *id003\n"));
    for (path, text) in &ot {
        each_document_parses(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    // The next run: kpt cannot read its own file.
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", "cat"], None);
    assert_eq!(k.code, 1);
    assert!(
        k.stderr.contains("unknown anchor 'id002' referenced"),
        "{}",
        k.stderr
    );
    assert_eq!(o.code, 0, "{}", o.stderr);

    // To stdout: one document each with `-o unwrap`, so the alias is
    // expanded there too; `-o stdout` is one document either way.
    let p = pair(&selection_package);
    for out in ["unwrap", "stdout"] {
        let (k, o) = both(&kpt, &p, &["pkg", "--exec", &f, "-o", out], None);
        assert_eq!((k.code, o.code), (0, 0), "{}\n{}", k.stderr, o.stderr);
        assert_eq!(untimed(&k.stderr), untimed(&o.stderr));
        let (kout, oout) = (
            String::from_utf8(k.stdout).unwrap(),
            String::from_utf8(o.stdout).unwrap(),
        );
        let (kpt_alias, ours) = match out {
            "unwrap" => (
                "  labels: *id002\n  name: added\n",
                "  labels:\n    app: demo\n    tier: web\n  name: added\n",
            ),
            _ => (
                "    labels: *id002\n    name: added\n",
                "    labels:\n      app: demo\n      tier: web\n    name: added\n",
            ),
        };
        assert!(kout.contains(kpt_alias), "kpt -o {out}:\n{kout}");
        assert_eq!(kout.replace(kpt_alias, ours), oout, "-o {out}");
        each_document_parses(&oout).unwrap();
    }
    let fresh = pair(&selection_package);
    assert_same_tree(&fresh.o, &p.o, "-o stdout and -o unwrap write nothing");

    // render, then a second run over what it wrote.
    let p = pair(&|d: &Path| {
        selection_package(d);
        kptfile(d, &format!("  mutators:\n  - exec: {f}\n"));
    });
    let (k, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
    assert_eq!((k.code, o.code), (0, 0), "{}\n{}", k.stderr, o.stderr);
    assert_eq!(untimed(&k.stderr), untimed(&o.stderr), "render");
    let ot = text_tree(&p.o);
    assert_eq!(ot["pkg/configmap_added.yaml"], ADDED);
    for (path, text) in &ot {
        each_document_parses(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", "cat"], None);
    assert_eq!((k.code, o.code), (1, 0), "{}\n{}", k.stderr, o.stderr);
}

/// A dict shared by two fields the input has in the other order: the
/// field order sync puts the alias first, before its anchor. kpt fails
/// ("expected MappingNode but got AliasNode"); the alias is expanded here,
/// so the file parses.
#[test]
fn an_alias_the_order_sync_moves_first_is_expanded() {
    let Some(kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = python(
        fns.path(),
        "reorder.py",
        "for it in items:\n    if it['metadata']['name'] == 't':\n        shared = {'a': 'b'}\n        it['spec']['q'] = shared\n        it['spec']['p'] = shared",
    );
    let make = |d: &Path| {
        selection_package(d);
        fs::write(
            d.join("t.yaml"),
            "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  q:\n    x: 1\n  p:\n    x: 2\n",
        )
        .unwrap();
    };
    let p = pair(&make);
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &f], None);
    assert_eq!(k.code, 1, "kpt fails on this: {}", k.stderr);
    assert!(k.stderr.contains("AliasNode"), "{}", k.stderr);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        fs::read_to_string(p.o.join("pkg/t.yaml")).unwrap(),
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  q:\n    a: b\n  p: &id001\n    a: b\n"
    );
    let p = pair(&|d: &Path| {
        make(d);
        kptfile(d, &format!("  mutators:\n  - exec: {f}\n"));
    });
    let (_, o) = both_render(&kpt, &p, &["pkg", "--allow-exec"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    each_document_parses(&fs::read_to_string(p.o.join("pkg/t.yaml")).unwrap()).unwrap();
}

/// Aliases that would expand past yaml.v3's budget (a list of ten lists of
/// ten ..., nine deep, that PyYAML writes in a few lines): a clear error,
/// quickly, nothing written. kpt writes the alias into a file of its own
/// (items), or panics (results); so it does on a result holding itself.
#[test]
fn excessive_aliasing_is_a_clear_error() {
    let Some(_kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let bomb = "x = ['x'] * 10\nfor _ in range(8):\n    x = [x] * 10\n";
    let items = python(
        fns.path(),
        "bomb-items.py",
        &format!(
            "{bomb}for n in ['a', 'b']:\n    items.append({{'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {{'name': n}}, 'data': {{'v': x}}}})"
        ),
    );
    let results = python(
        fns.path(),
        "bomb-results.py",
        &format!("{bomb}rl['results'] = [{{'message': 'm', 'field': {{'path': 'a', 'currentValue': x}}}}]"),
    );
    let p = pair(&selection_package);
    let started = std::time::Instant::now();
    let o = run(
        Path::new(ours()),
        &p.o,
        &["eval", "pkg", "--exec", &items],
        None,
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "error: function output: items: yaml: document contains excessive aliasing\n"
        ),
        "{}",
        o.stderr
    );
    let o = run(
        Path::new(ours()),
        &p.o,
        &["eval", "pkg", "--exec", &results],
        None,
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "error: function output: results: yaml: document contains excessive aliasing\n"
        ),
        "{}",
        o.stderr
    );
    // A result that holds itself (kpt panics).
    let cycle = python(
        fns.path(),
        "cycle.py",
        "r = {'message': 'm'}\nr['field'] = {'path': 'a', 'currentValue': r}\nrl['results'] = [r]",
    );
    let o = run(
        Path::new(ours()),
        &p.o,
        &["eval", "pkg", "--exec", &cycle],
        None,
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "error: function output: results: yaml: anchor 'id001' value contains itself\n"
        ),
        "{}",
        o.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let fresh = pair(&selection_package);
    assert_same_tree(&fresh.o, &p.o, "nothing written");
}

/// A resource written as a `.json` file: kpt goes through Go values, so a
/// dict used twice is written twice (it was `null` the second time here).
#[test]
fn json_files_follow_aliases_like_kpt() {
    let Some(kpt) = prerequisites() else {
        return;
    };
    let fns = tempfile::tempdir().unwrap();
    let f = python(
        fns.path(),
        "json.py",
        "shared = {'a': 'b'}\nitems.append({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'js', 'annotations': {'config.kubernetes.io/path': 'js.json'}}, 'data': {'p': shared, 'q': shared}})",
    );
    let p = pair(&selection_package);
    let (k, o) = both(&kpt, &p, &["pkg", "--exec", &f], None);
    assert_eq!(k.code, 0, "{}", k.stderr);
    assert_same_run(&k, &o, "eval");
    assert_same_tree(&p.k, &p.o, "eval");
    let json = fs::read_to_string(p.o.join("pkg/js.json")).unwrap();
    assert!(
        json.contains("\"q\": {\n      \"a\": \"b\"\n    }"),
        "{json}"
    );
}
