#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::function::{Context, ResourceList, Stop};
use crate::test_support::{list, messages, out};

/// Runs the function (in this process: no sandbox is configured in unit
/// tests) on a thread with the sandbox's stack.
fn run_list(mut rl: ResourceList) -> (Result<(), Stop>, ResourceList) {
    std::thread::Builder::new()
        .stack_size(super::sandbox::STACK_BYTES)
        .spawn(move || {
            let r = super::run(&mut rl, &Context::new());
            (r, rl)
        })
        .unwrap()
        .join()
        .unwrap()
}

fn run(config: &str, items: &str) -> (Result<(), Stop>, ResourceList) {
    run_list(list(items, Some(config)))
}

/// A StarlarkRun with this program.
fn star(source: &str) -> String {
    let body: String = source.lines().map(|l| format!("  {l}\n")).collect();
    format!("apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: prog\nsource: |\n{body}")
}

const FAILURE: &str = "failed to evaluate function: error: function failure";

const APP: &str = "\
# the deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # its name
  annotations:
    config.k8s.io/id: '1'
spec:
  replicas: 3 # three
  template: {spec: {containers: [{name: c, image: nginx}]}}
---
# left alone
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  annotations:
    config.k8s.io/id: '2'
data:
  port: 0x10
  when: 2001-12-14
  flag: yes
  empty:
";

#[test]
fn a_program_changes_what_it_touches_and_nothing_else() {
    let (r, rl) = run(
        &star(
            "for r in ctx.resource_list[\"items\"]:\n  if r[\"kind\"] == \"Deployment\":\n    r[\"metadata\"][\"labels\"] = {\"app\": \"web\"}\n    r[\"spec\"][\"replicas\"] = 5",
        ),
        APP,
    );
    assert_eq!(r, Ok(()));
    let text = out(&rl);
    // The touched one keeps its comments and order (its styles are
    // those of new YAML, as kpt writes a container's output); the new
    // field is written where the program put it.
    assert!(
        text.starts_with(
            "# the deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # its name\n  annotations:\n    config.k8s.io/id: \"1\"\n  labels:\n    app: web\nspec:\n  replicas: 5 # three\n  template:\n    spec:\n"
        ),
        "{text}"
    );
    // The untouched one is as it came: hex, a date, `yes`, a null, its
    // comment and id.
    assert!(
        text.contains(
            "# left alone\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    config.k8s.io/id: '2'\ndata:\n  port: 0x10\n  when: 2001-12-14\n  flag: yes\n  empty:\n"
        ),
        "{text}"
    );
    assert!(rl.results.is_empty());
    assert_eq!(rl.log, "");
}

#[test]
fn the_program_sees_the_list_its_config_and_an_empty_environment_and_prints_to_stderr() {
    let (r, rl) = run(
        &star(
            "rl = ctx.resource_list\nprint(rl[\"apiVersion\"], rl[\"kind\"], len(rl[\"items\"]))\nprint(rl[\"functionConfig\"][\"params\"][\"n\"] + 1, ctx.environment)\nprint(type(rl[\"items\"][1][\"data\"][\"port\"]), rl[\"items\"][1][\"data\"][\"empty\"])",
        )
        .replace("source: |", "params:\n  n: 41\nsource: |"),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert_eq!(
        rl.log,
        "config.kubernetes.io/v1 ResourceList 2\n42 {}\nint None\n"
    );
}

#[test]
fn go_starlarks_dialect_as_the_catalog_enables_it() {
    let (r, rl) = run(
        &star(
            "x = set([\"foo\", \"bar\"])\nprint(x)\ndef fib(n):\n  if n < 2:\n    return n\n  return fib(n - 1) + fib(n - 2)\nprint(fib(10))\nn = 0\nwhile n < 5:\n  n += 1\n  if n == 2:\n    continue\n  if n == 4: break\nprint(n)\nx = 1\nx = 2\nif x == 2:\n  print(\"top-level if\")",
        ),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert_eq!(rl.log, "set([\"foo\", \"bar\"])\n55\n4\ntop-level if\n");
}

#[test]
fn fail_is_an_error_result_with_the_catalogs_message_and_exit() {
    let (r, rl) = run(&star("fail(\"it is prohibited\")"), APP);
    assert_eq!(r, Err(Stop::Failed(FAILURE.into())));
    assert_eq!(messages(&rl), ["error: fail: it is prohibited"]);
    // The items as they came.
    assert!(out(&rl).contains("port: 0x10"));
}

#[test]
fn errors_name_the_line_and_column_the_user_wrote() {
    // Line 5 of the user's program, after a rewritten `while`.
    let (r, rl) = run(&star("n = 0\nwhile n < 1:\n  n += 1\nx = 1\ny = = 2"), APP);
    assert_eq!(r, Err(Stop::Failed(FAILURE.into())));
    let m = messages(&rl);
    assert!(m[0].starts_with("error: prog:5:5: "), "{m:?}");
    let (_, rl) = run(&star("x = 1\nprint(undefined)"), APP);
    let m = messages(&rl);
    assert!(
        m[0].starts_with("error: prog:2:7: ") && m[0].contains("undefined"),
        "{m:?}"
    );
}

#[test]
fn recursion_without_end_is_stopped_by_the_depth_limit() {
    let (r, rl) = run(&star("def f(n):\n  return f(n + 1)\nf(0)"), APP);
    assert_eq!(r, Err(Stop::Failed(FAILURE.into())));
    assert_eq!(
        messages(&rl),
        ["error: prog: the program's calls nest deeper than 2000 (the depth limit)"]
    );
}

#[test]
fn config_forms_and_the_catalogs_messages() {
    // A ConfigMap: `source` is the program, every key a param; its name
    // names the program.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  replicas: '5'\n  source: |\n    print(ctx.resource_list[\"functionConfig\"][\"data\"][\"replicas\"])\n    fail(\"x\")\n";
    let (_, rl) = run(cm, APP);
    assert_eq!(rl.log, "5\n");
    assert_eq!(messages(&rl), ["error: fail: x"]);
    // Another version of the group reads as the catalog reads it.
    let (r, _) = run(&star("print(1)").replace("v1alpha1", "v1beta1"), APP);
    assert_eq!(r, Ok(()));
    for (config, message) in [
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata: {name: x}\nsource: ''\n",
            "`source` must not be empty",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n",
            "`source` must not be empty",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
            "`functionConfig` must be either /v1, Kind=ConfigMap or fn.kpt.dev/v1alpha1, Kind=StarlarkRun, but we got: apps/v1, Kind=Deployment",
        ),
        ("{}", "FunctionConfig is missing. Expect `ConfigMap` or `StarlarkRun`"),
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata: {name: x}\nparams: [a]\nsource: print(1)\n",
            "yaml: unmarshal errors:\n  line 4: cannot unmarshal !!seq into map[string]interface {}",
        ),
    ] {
        let (r, rl) = run(config, APP);
        assert_eq!(r, Err(Stop::Failed(FAILURE.into())), "{config}");
        assert_eq!(messages(&rl), [format!("error: {message}")], "{config}");
    }
}

#[test]
fn new_removed_and_reordered_items_and_bad_output() {
    let (r, rl) = run(
        &star(
            "items = ctx.resource_list[\"items\"]\nitems.pop(0)\nitems.append({\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}, \"x\": [1, 2.5, True, None, \"true\"]})",
        ),
        APP,
    );
    assert_eq!(r, Ok(()));
    let text = out(&rl);
    // The SDK's order (by apiVersion, kind, namespace, name); the new
    // one's values typed as written, a string that reads as a bool quoted.
    assert!(
        text.contains("kind: Namespace\nmetadata:\n  name: a\nx:\n  - 1\n  - 2.5\n  - true\n  - null\n  - \"true\"\n"),
        "{text}"
    );
    assert!(!text.contains("kind: Deployment"));
    for (program, message) in [
        (
            "ctx.resource_list[\"items\"] = 3",
            "must be a list, not a int",
        ),
        (
            "ctx.resource_list[\"items\"].append(1)",
            "[\"items\"][2] must be a dict",
        ),
        (
            "ctx.resource_list[\"items\"][0][\"f\"] = lambda x: x",
            "of type function cannot be written",
        ),
    ] {
        let (r, rl) = run(&star(program), APP);
        assert_eq!(r, Err(Stop::Failed(FAILURE.into())), "{program}");
        assert!(
            messages(&rl)[0].contains(message),
            "{program}: {:?}",
            messages(&rl)
        );
    }
}

#[test]
fn open_api_is_the_kubernetes_document() {
    let (r, rl) = run(
        &star("d = ctx.open_api[\"definitions\"][\"io.k8s.api.apps.v1.Deployment\"]\nprint(d[\"x-kubernetes-group-version-kind\"][0][\"kind\"])"),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert_eq!(rl.log, "Deployment\n");
}

#[test]
fn krmfn_and_json_load() {
    let (r, rl) = run(
        &star("load(\"krmfn.star\", \"krmfn\")\nload(\"encoding/json.star\", \"json\")\nfor r in ctx.resource_list[\"items\"]:\n  print(krmfn.match_gvk(r, \"apps/v1\", \"Deployment\"), krmfn.match_name(r, \"cm\"), krmfn.match_namespace(r, \"\"))\nprint(json.encode(json.decode('{\"b\": 1, \"a\": [true]}')))"),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert_eq!(
        rl.log,
        "True False True\nFalse True True\n{\"b\":1,\"a\":[true]}\n"
    );
}

#[test]
fn a_cancelled_call_runs_nothing() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rl = list(APP, Some(&star("print(1)")));
    let r = super::run(&mut rl, &Context::new().with_cancel(flag));
    assert_eq!(r, Err(Stop::Cancelled));
    assert_eq!(rl.log, "");
}

#[test]
fn without_ids_a_reordered_resource_keeps_its_own_comments() {
    let items = "# first\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {x: '1'}\n---\n# second\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata: {x: '2'}\n";
    // Reversed and both changed: neither takes the other's comment.
    let (r, rl) = run(
        &star("items = ctx.resource_list[\"items\"]\nfor r in items:\n  r[\"data\"][\"y\"] = \"3\"\nctx.resource_list[\"items\"] = [items[1], items[0]]"),
        items,
    );
    assert_eq!(r, Ok(()));
    let text = out(&rl);
    assert!(
        !text.contains("# second\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a"),
        "{text}"
    );
    assert!(
        !text.contains("# first\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b"),
        "{text}"
    );
    // In place, each keeps its own.
    let (_, rl) = run(
        &star("for r in ctx.resource_list[\"items\"]:\n  r[\"data\"][\"y\"] = \"3\""),
        items,
    );
    let text = out(&rl);
    assert!(
        text.starts_with("# first\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a"),
        "{text}"
    );
    assert!(
        text.contains("# second\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b"),
        "{text}"
    );
}

#[test]
fn tabs_crlf_and_while_in_a_real_program() {
    let program = "def count(n):\r\n\ti = 0\r\n\twhile i < n:\r\n\t\ti += 1\r\n\treturn i\r\nprint(count(3))\r\n";
    let mut rl = list(APP, None);
    rl.function_config = Some(krm_yaml::Node::mapping(vec![
        krm_yaml::Node::string("apiVersion"),
        krm_yaml::Node::string("fn.kpt.dev/v1alpha1"),
        krm_yaml::Node::string("kind"),
        krm_yaml::Node::string("StarlarkRun"),
        krm_yaml::Node::string("source"),
        krm_yaml::Node::string(program),
    ]));
    let (r, rl) = run_list(rl);
    assert_eq!(r, Ok(()), "{:?}", messages(&rl));
    assert_eq!(rl.log, "3\n");
}
