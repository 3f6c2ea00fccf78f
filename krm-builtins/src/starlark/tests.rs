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
        &star("load(\"krmfn.star\", \"krmfn\")\nload(\"encoding/json.star\", \"json\")\nfor r in ctx.resource_list[\"items\"]:\n  print(krmfn.match_gvk(r, \"apps/v1\", \"Deployment\"), krmfn.match_gvk(r, \"v1\", \"ConfigMap\"), krmfn.match_name(r, \"cm\"), krmfn.match_namespace(r, \"\"))\nprint(json.encode(json.decode('{\"b\": 1, \"a\": [true]}')))"),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert_eq!(
        rl.log,
        "False False False True\nFalse True True True\n{\"b\":1,\"a\":[true]}\n"
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

/// The catalog's `starlark-inject-sidecar` example: its Deployment and its
/// program (which builds the container as `{"name": ..., "image": ...}`).
const SIDECAR_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: nginx:1.14.2
          ports:
            - containerPort: 80
";

const SIDECAR_PROGRAM: &str = "\
def ensure_inject_sidecar_to_depl(r):
  if r[\"apiVersion\"] == \"apps/v1\" and r[\"kind\"] == \"Deployment\":
    containers = r[\"spec\"][\"template\"][\"spec\"][\"containers\"]
    for container in containers:
      if container[\"name\"] == \"logging-agent\":
        return
    sidecar = {
      \"name\": \"logging-agent\",
      \"image\": \"k8s.gcr.io/fluentd-gcp:1.30\",
    }
    containers.append(sidecar)

for resource in ctx.resource_list[\"items\"]:
  ensure_inject_sidecar_to_depl(resource)";

#[test]
fn a_new_mapping_is_written_with_its_keys_sorted_as_the_catalogs_container_writes_them() {
    // The example's expected diff: the new container `image` first.
    for items in [
        SIDECAR_DEPLOYMENT.to_owned(),
        // With kpt's ids, as `render` sends them.
        SIDECAR_DEPLOYMENT.replace(
            "  labels:\n    app: nginx\nspec:",
            "  labels:\n    app: nginx\n  annotations:\n    config.k8s.io/id: '1'\nspec:",
        ),
    ] {
        let (r, rl) = run(&star(SIDECAR_PROGRAM), &items);
        assert_eq!(r, Ok(()), "{:?}", messages(&rl));
        let text = out(&rl);
        assert!(
            text.ends_with(
                "      containers:\n        - name: nginx\n          image: nginx:1.14.2\n          ports:\n            - containerPort: 80\n        - image: k8s.gcr.io/fluentd-gcp:1.30\n          name: logging-agent\n"
            ),
            "{text}"
        );
        // The input's own mappings keep their order.
        assert!(
            text.starts_with("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx-deployment\n  labels:\n    app: nginx\n"),
            "{text}"
        );
    }
}

#[test]
fn input_mappings_keep_their_order_and_what_the_program_adds_is_sorted() {
    let program = "\
r = ctx.resource_list[\"items\"][0]
# New keys in a mapping of the input: after its own, sorted.
r[\"spec\"][\"zeta\"] = 1
r[\"spec\"][\"alpha\"] = {\"z\": 1, \"b\": {\"y\": 2, \"x\": 1}, \"a\": [{\"n\": 1, \"m\": 2}]}
# A new mapping where the input has none: sorted throughout.
r[\"metadata\"][\"labels\"] = {\"tier\": \"web\", \"app\": \"x\"}
# A mapping of the input copied, changed and put in a new place.
c = dict(r[\"spec\"][\"template\"][\"spec\"][\"containers\"][0])
c[\"name\"] = \"copy\"
c[\"args\"] = [\"-v\"]
r[\"spec\"][\"template\"][\"spec\"][\"containers\"].append(c)
# A mapping of the input rebuilt in another order at its own place:
# the input's order again, new keys after.
r[\"spec\"][\"template\"][\"spec\"][\"containers\"][0] = {\"image\": \"nginx:2\", \"name\": \"c\", \"env\": []}";
    let items = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    config.k8s.io/id: '1'
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: c
          image: nginx
          ports: [{containerPort: 80}]
";
    let (r, rl) = run(&star(program), items);
    assert_eq!(r, Ok(()), "{:?}", messages(&rl));
    assert_eq!(
        out(&rl),
        "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    config.k8s.io/id: \"1\"
  labels:
    app: x
    tier: web
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: c
          image: nginx:2
          env: []
        - args:
            - -v
          image: nginx
          name: copy
          ports:
            - containerPort: 80
  alpha:
    a:
      - m: 2
        n: 1
    b:
      x: 1
      y: 2
    z: 1
  zeta: 1
"
    );
}

#[test]
fn a_new_resource_is_sorted_throughout_in_yaml_v3s_order() {
    let program = "ctx.resource_list[\"items\"].append({\"kind\": \"ConfigMap\", \"apiVersion\": \"v1\", \"metadata\": {\"name\": \"n\"}, \"data\": {\"b\": \"1\", \"a10\": \"2\", \"a9\": \"3\", \"A\": \"4\", \"_x\": \"5\", \"10\": \"6\", \"2\": \"7\"}})";
    let (r, rl) = run(&star(program), APP);
    assert_eq!(r, Ok(()), "{:?}", messages(&rl));
    let text = out(&rl);
    assert!(
        text.contains(
            "---\napiVersion: v1\ndata:\n  _x: \"5\"\n  \"2\": \"7\"\n  \"10\": \"6\"\n  A: \"4\"\n  a9: \"3\"\n  a10: \"2\"\n  b: \"1\"\nkind: ConfigMap\nmetadata:\n  name: n\n"
        ),
        "{text}"
    );
}

#[test]
fn yaml_v3s_key_order_across_kinds() {
    use super::data::{go_key_less, Data};
    let keys = [
        Data::Str("x".into()),
        Data::Null,
        Data::Int(2),
        Data::Float(1.5),
        Data::Int(1),
        Data::Bool(true),
        Data::Str("a1".into()),
        Data::Str("a01".into()),
        Data::Str("a-1".into()),
    ];
    let mut map = Data::Map(keys.iter().map(|k| (k.clone(), Data::Null)).collect());
    map.sort_go_keys();
    let sorted: Vec<Data> = match map {
        Data::Map(m) => m.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    };
    assert_eq!(
        sorted,
        [
            Data::Bool(true),
            Data::Int(1),
            Data::Float(1.5),
            Data::Int(2),
            Data::Null,
            Data::Str("a-1".into()),
            Data::Str("a1".into()),
            Data::Str("a01".into()),
            Data::Str("x".into()),
        ]
    );
    // A letter after a digit comes before a non-letter; else after.
    assert!(go_key_less(
        &Data::Str("1a".into()),
        &Data::Str("1_".into())
    ));
    assert!(go_key_less(&Data::Str("_".into()), &Data::Str("a".into())));
}

/// What the program printed, and the messages of its results.
fn printed(program: &str) -> (String, Vec<String>) {
    let (_, rl) = run(&star(program), APP);
    (rl.log.clone(), messages(&rl))
}

#[test]
fn range_takes_go_s_64_bit_ints() {
    // Go's `range(10000000000)` loops (here without 10^10 rounds).
    let (log, m) = printed(
        "r = range(10000000000)\nfor i in r:\n  if i == 3:\n    break\nprint(i, len(r), type(r), r[5], list(r[:3]), r[:3], 7 in r, bool(r))\nprint(len(range(0, 10000000000, 2)), len(range(0, -10000000000, -1)), len(range(-5, 10000000000)), len(range(-5, 10000000000)[:4]), list(range(0, -10000000000, -1)[:3]))\nn = 0\nfor j in range(1, 100000000000000):\n  n += j\n  if j == 100:\n    break\nprint(n)",
    );
    assert_eq!(m, Vec::<String>::new());
    assert_eq!(
        log,
        "3 10000000000 range 5 [0, 1, 2] range(3) True True\n5000000000 10000000000 10000000005 4 [0, -1, -2]\n5050\n"
    );
    // Integers past 32 bits: Go's values.
    let (log, m) = printed(
        "r = range(5000000000, 5000000003)\nprint(len(r), list(r), r[-1], 5000000001 in r)\nprint(list(range(-10000000000, 0, 3000000000)))\nprint([x for x in range(2147483646, 2147483650)])\nfor x in range(9223372036854775806, 9223372036854775807):\n  print(x)",
    );
    assert_eq!(m, Vec::<String>::new());
    assert_eq!(
        log,
        "3 [5000000000, 5000000001, 5000000002] 5000000002 True\n[-10000000000, -7000000000, -4000000000, -1000000000]\n[2147483646, 2147483647, 2147483648, 2147483649]\n9223372036854775806\n"
    );
    // 32-bit ranges are the interpreter's own, as Go's print.
    let (log, _) = printed("print(range(10), range(1, 10), range(0, 10, 3), range(10, 0), len(range(10, 0)), list(range(10, 0, -3)))");
    assert_eq!(
        log,
        "range(10) range(1, 10) range(0, 10, 3) range(10, 0) 0 [10, 7, 4, 1]\n"
    );
}

#[test]
fn range_refuses_what_go_s_refuses_with_go_s_messages() {
    for (call, message) in [
        ("range()", "range: got 0 arguments, want at least 1"),
        ("range(1, 2, 3, 4)", "range: got 4 arguments, want at most 3"),
        ("range(stop = 3)", "range: unexpected keyword arguments"),
        ("range(1.5)", "range: for parameter 1: got float, want int"),
        ("range(0, \"3\")", "range: for parameter 2: got string, want int"),
        (
            "range(9223372036854775807 + 1)",
            "range: for parameter 1: 9223372036854775808 out of range (want value in signed 64-bit range)",
        ),
        ("range(1, 2, 0)", "range: step argument must not be zero"),
        ("enumerate()", "enumerate: got 0 arguments, want at least 1"),
        ("enumerate(3)", "enumerate: for parameter 1: got int, want iterable"),
        ("enumerate([], start = 1)", "enumerate: unexpected keyword arguments"),
        ("len(3)", "len: value of type int has no len"),
        ("len()", "len: got 0 arguments, want 1"),
    ] {
        let (_, m) = printed(call);
        assert_eq!(m.len(), 1, "{call}: {m:?}");
        assert!(
            m[0].starts_with("error: prog:1:1: ") && m[0].ends_with(message),
            "{call}: {m:?}"
        );
    }
    // Longer than can be listed and past 32 bits at once: said so.
    let (_, m) = printed("range(5000000000, 6000000000)");
    assert!(
        m[0].contains("range(5000000000, 6000000000) has 1000000000 integers"),
        "{m:?}"
    );
}

#[test]
fn integers_past_32_bits_in_arithmetic_enumerate_and_the_output() {
    let (log, m) = printed(
        "x = 10000000000 * 3\nprint(x, x // 7, x % 7, -x, 2147483647 + 1, (1 << 40) | 1, enumerate([\"a\", \"b\"], 10000000000))\nctx.resource_list[\"items\"][0][\"spec\"][\"replicas\"] = x",
    );
    assert_eq!(m, Vec::<String>::new());
    assert_eq!(
        log,
        "30000000000 4285714285 5 -30000000000 2147483648 1099511627777 [(10000000000, \"a\"), (10000000001, \"b\")]\n"
    );
    let (r, rl) = run(
        &star("ctx.resource_list[\"items\"][0][\"spec\"][\"replicas\"] = 9223372036854775807"),
        APP,
    );
    assert_eq!(r, Ok(()));
    assert!(out(&rl).contains("  replicas: 9223372036854775807 # three\n"));
    // Past 64 bits, the catalog's conversion (starlib's `util.Unmarshal`
    // into a Go int) fails, a prefix for each dict around the value.
    let (r, rl) = run(
        &star("ctx.resource_list[\"items\"][0][\"spec\"][\"replicas\"] = 9223372036854775807 + 1"),
        APP,
    );
    assert_eq!(r, Err(Stop::Failed(FAILURE.into())));
    assert_eq!(
        messages(&rl),
        ["error: unmarshaling starlark value: unmarshaling starlark value: unmarshaling starlark value: 9223372036854775808 out of range (want value in signed 64-bit range)"]
    );
}
