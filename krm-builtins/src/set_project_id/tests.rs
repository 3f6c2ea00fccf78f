#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use krm_yaml::gov3::go_key_order;

use super::{kcc_group, run};
use crate::function::{Context, ResourceList, Stop};
use crate::test_support::{go, list, nodes, out, stream};

/// `eval -- project-id=<id>`'s config.
fn input(id: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  project-id: {id}\n")
}

/// Runs the function over `items` with `config`.
fn call(items: &str, config: Option<&str>) -> (ResourceList, Result<(), Stop>) {
    let mut rl = list(items, config);
    let outcome = go(run, &mut rl);
    (rl, outcome)
}

/// The failure the binary reports: the error twice on stderr.
fn failed(err: &str) -> Result<(), Stop> {
    Err(Stop::Failed(format!("{err}{err}\n")))
}

/// The items as they went in (written the same way).
fn same(items: &str) -> String {
    stream(&nodes(items))
}

/// A package like the catalog's `set-project-id-simple`: the Kptfile's
/// apply-setters reads its setters from a file; Config Connector
/// resources with and without the annotation, a system one, and others.
const SHOP: &str = r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    config.kubernetes.io/path: Kptfile
pipeline:
  mutators:
  - image: gcr.io/kpt-fn/apply-setters:v0.2
    configPath: values.yaml
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: values
  annotations:
    config.kubernetes.io/path: values.yaml
data:
  tier: 'gold'
  region: us-east1 # where it runs
---
apiVersion: sql.cnrm.cloud.google.com/v1beta1
kind: SQLInstance
metadata:
  name: orders-db # kpt-set: ${project-id}-orders
  annotations:
    cnrm.cloud.google.com/project-id: shop-prod # kpt-set: ${project-id}
    config.kubernetes.io/path: db.yaml
spec:
  region: us-east1
---
apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubTopic
metadata:
  annotations:
    config.kubernetes.io/path: topic.yaml
    cnrm.cloud.google.com/force-destroy: "false"
    cnrm.cloud.google.com/state-into-spec: absent # kept?
  name: orders
spec: {}
---
apiVersion: iam.cnrm.cloud.google.com/v1beta1
kind: IAMServiceAccount
metadata:
  name: web-sa
  namespace: shop # kpt-set: ${namespace}
spec:
  displayName: Web
---
apiVersion: core.cnrm.cloud.google.com/v1beta1
kind: ConfigConnectorContext
metadata:
  name: configconnectorcontext.core.cnrm.cloud.google.com
  namespace: shop
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
"#;

#[test]
fn the_setters_file_and_the_resources_without_the_annotation_get_the_id() {
    let (rl, outcome) = call(SHOP, Some(&input("shop-dev")));
    assert_eq!(outcome, Ok(()));
    assert!(rl.results.is_empty());
    assert_eq!(rl.log, "");
    assert_eq!(
        out(&rl),
        r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    config.kubernetes.io/path: Kptfile
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configPath: values.yaml
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: values
  annotations:
    config.kubernetes.io/path: values.yaml
data:
  project-id: shop-dev
  region: us-east1
  tier: gold
---
apiVersion: sql.cnrm.cloud.google.com/v1beta1
kind: SQLInstance
metadata:
  name: orders-db # kpt-set: ${project-id}-orders
  annotations:
    cnrm.cloud.google.com/project-id: shop-prod # kpt-set: ${project-id}
    config.kubernetes.io/path: db.yaml
spec:
  region: us-east1
---
apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubTopic
metadata:
  name: orders
  annotations:
    cnrm.cloud.google.com/force-destroy: "false"
    cnrm.cloud.google.com/project-id: shop-dev
    cnrm.cloud.google.com/state-into-spec: absent
    config.kubernetes.io/path: topic.yaml
spec: {}
---
apiVersion: iam.cnrm.cloud.google.com/v1beta1
kind: IAMServiceAccount
metadata:
  name: web-sa
  namespace: shop # kpt-set: ${namespace}
  annotations:
    cnrm.cloud.google.com/project-id: shop-dev
spec:
  displayName: Web
---
apiVersion: core.cnrm.cloud.google.com/v1beta1
kind: ConfigConnectorContext
metadata:
  name: configconnectorcontext.core.cnrm.cloud.google.com
  namespace: shop
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
"#
    );
    // Run again: everything is set, nothing changes.
    let again = out(&rl);
    let (rl, outcome) = call(&again, Some(&input("other")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(out(&rl), again);
}

/// As kpt sends a package with a subpackage (the catalog's
/// `set-project-id-advanced`): the legacy and internal path and index
/// annotations.
const NESTED: &str = r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'Kptfile'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/path: 'Kptfile'
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configPath: values.yaml
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: values
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'values.yaml'
data:
  project-id: ""
---
apiVersion: kpt.dev/v1
kind: Kptfile
metadata: # the subpackage
  name: backend
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'backend/Kptfile'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/path: 'backend/Kptfile'
---
apiVersion: storage.cnrm.cloud.google.com/v1beta1
kind: StorageBucket
metadata:
  name: assets
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'backend/bucket.yaml'
"#;

/// v0.1.0 is v0.2.0 but for the mutator it appends.
#[test]
fn for_v0_1_0_the_appended_mutator_is_apply_setters_v0_1() {
    let (v02, outcome) = call(NESTED, Some(&input("shop-dev")));
    assert_eq!(outcome, Ok(()));
    let mut rl = list(NESTED, Some(&input("shop-dev")));
    let ctx = Context::new().with_release(Some("v0.1.0"));
    assert_eq!(run(&mut rl, &ctx), Ok(()));
    assert_eq!(
        out(&rl),
        out(&v02).replace(
            "    - image: gcr.io/kpt-fn/apply-setters:v0.2\n      configMap:",
            "    - image: gcr.io/kpt-fn/apply-setters:v0.1\n      configMap:"
        )
    );
    assert!(out(&rl).contains("apply-setters:v0.1"));
}

#[test]
fn a_kptfile_without_apply_setters_gets_one_and_is_written_as_go_marshals_it() {
    let (rl, outcome) = call(NESTED, Some(&input("shop-dev")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out(&rl),
        r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'Kptfile'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/path: 'Kptfile'
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configPath: values.yaml
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: values
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'values.yaml'
data:
  project-id: shop-dev
---
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: backend
  annotations:
    config.kubernetes.io/index: "0"
    config.kubernetes.io/path: backend/Kptfile
    internal.config.kubernetes.io/index: "0"
    internal.config.kubernetes.io/path: backend/Kptfile
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configMap:
        project-id: shop-dev
---
apiVersion: storage.cnrm.cloud.google.com/v1beta1
kind: StorageBucket
metadata:
  name: assets
  annotations:
    cnrm.cloud.google.com/project-id: shop-dev
    config.kubernetes.io/index: "0"
    config.kubernetes.io/path: backend/bucket.yaml
"#
    );
}

#[test]
fn a_config_map_setter_is_filled_and_the_kptfile_rewritten_through_the_sdk_types() {
    let kptfile = r#"# the package
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop # its name
  labels: {team: web, "10": x, "9": y}
  annotations:
    config.kubernetes.io/path: Kptfile
info:
  description: The shop
  emails: [a@example.com, null, 'b@example.com']
  keywords: []
pipeline:
  validators:
    - image: kubeval
  mutators:
    - image: gcr.io/kpt-fn/set-labels:v0.1
      configMap: {}
    - ~
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configMap:
        zone: us-east1-b # the zone
        replicas: 3
        on: yes
        region: ""
        project-id:
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configPath: ignored.yaml
upstream:
  updateStrategy: resource-merge
  git: {repo: 'https://github.com/x/y', directory: /shop, ref: main}
  type: git
upstreamLock: {}
"#;
    let (rl, outcome) = call(kptfile, Some(&input("shop-dev")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out(&rl),
        r#"apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: shop
  labels:
    "9": "y"
    "10": x
    team: web
  annotations:
    config.kubernetes.io/path: Kptfile
upstream:
  type: git
  git:
    repo: https://github.com/x/y
    directory: /shop
    ref: main
  updateStrategy: resource-merge
upstreamLock: {}
info:
  emails:
    - a@example.com
    - b@example.com
  description: The shop
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/set-labels:v0.1
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configMap:
        "on": "yes"
        project-id: shop-dev
        region: ""
        replicas: "3"
        zone: us-east1-b
    - image: gcr.io/kpt-fn/apply-setters:v0.2
      configPath: ignored.yaml
  validators:
    - image: kubeval
"#
    );
}

#[test]
fn a_set_config_map_setter_stays_but_the_kptfile_is_still_rewritten() {
    let kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters:v0.2 # here\n    configMap:\n      project-id: 'kept'\n";
    let (rl, outcome) = call(kptfile, Some(&input("new")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out(&rl),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n    - image: apply-setters:v0.2\n      configMap:\n        project-id: kept\n"
    );
}

#[test]
fn a_setters_file_with_the_id_is_left_as_it_is() {
    let items = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configMap: ~\n    configPath: s.yaml\n---\nkind: ConfigMap\nmetadata:\n  name: s\n  annotations:\n    config.kubernetes.io/path: s.yaml\ndata:\n  b: 'x' # b\n  project-id: set\n  a: y\nother: 1\n";
    let (rl, outcome) = call(items, Some(&input("new")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(out(&rl), same(items));
    // Without the id (or with an empty one), `data` is written anew, at
    // the end, sorted, its values strings (a node's `y` is not quoted, as
    // the encoder quotes by YAML 1.2 only; a marshalled Go string is).
    let items = items.replace("  project-id: set\n", "");
    let (rl, outcome) = call(&items, Some(&input("new")));
    assert_eq!(outcome, Ok(()));
    let written = out(&rl);
    assert!(written.ends_with(
        "    config.kubernetes.io/path: s.yaml\nother: 1\ndata:\n  a: y\n  b: x\n  project-id: new\n"
    ), "{written}");
}

#[test]
fn every_config_form_with_data_is_read_and_no_id_is_the_empty_string() {
    let items = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n---\napiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPolicy\nmetadata:\n  name: pol\n";
    for (config, id) in [
        (Some(input("a")), "a"),
        (
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  project-id: 123\n".to_owned()),
            "\"123\"",
        ),
        (
            Some("apiVersion: example.com/v1\nkind: Anything\ndata:\n  project-id: b\n  project-id: c\n".to_owned()),
            "b",
        ),
        (None, "\"\""),
        (Some("kind: ConfigMap\n".to_owned()), "\"\""),
        (Some("kind: ConfigMap\ndata: [project-id]\n".to_owned()), "\"\""),
        (Some("kind: ConfigMap\ndata:\n  project-id: {a: b}\n".to_owned()), "\"\""),
        (Some("just text\n".to_owned()), "\"\""),
    ] {
        let (rl, outcome) = call(items, config.as_deref());
        assert_eq!(outcome, Ok(()), "{config:?}");
        assert_eq!(
            out(&rl),
            format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/apply-setters:v0.2\n      configMap:\n        project-id: {id}\n---\napiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPolicy\nmetadata:\n  name: pol\n  annotations:\n    cnrm.cloud.google.com/project-id: {id}\n"),
            "{config:?}"
        );
    }
}

#[test]
fn which_resources_are_config_connector_ones() {
    assert_eq!(kcc_group("iam.cnrm.cloud.google.com/v1beta1"), Some("iam"));
    assert_eq!(
        kcc_group("core.cnrm.cloud.google.com/v1alpha1"),
        Some("core")
    );
    assert_eq!(kcc_group("a_1.cnrm.cloud.google.com/V2"), Some("a_1"));
    for no in [
        "cnrm.cloud.google.com/v1",
        ".cnrm.cloud.google.com/v1",
        "a.b.cnrm.cloud.google.com/v1",
        "iam.cnrm.cloud.google.com/",
        "iam.cnrm.cloud.google.com/v1/x",
        "iam.cnrm.cloud.google.com/v1\n",
        "iam.cnrm.cloud.google.com",
        "iam-x.cnrm.cloud.google.com/v1",
        "ïam.cnrm.cloud.google.com/v1",
        "v1",
    ] {
        assert_eq!(kcc_group(no), None, "{no}");
    }
    // An annotation that is there, even empty, is kept; so is a system
    // resource's lack of one.
    let items = "kind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configMap: {project-id: x}\n---\napiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPolicy\nmetadata:\n  name: a\n  annotations:\n    cnrm.cloud.google.com/project-id: ''\n---\napiVersion: core.cnrm.cloud.google.com/v1beta1\nkind: ConfigConnector\nmetadata:\n  name: b\n";
    let (rl, outcome) = call(items, Some(&input("new")));
    assert_eq!(outcome, Ok(()));
    assert!(out(&rl).ends_with(&same(items).split_once("---\n").unwrap().1.to_owned()));
}

#[test]
fn annotations_are_rewritten_sorted_at_the_end_of_metadata() {
    let items = "kind: Kptfile\nmetadata:\n  name: p\n---\napiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata:\n  annotations:\n    z: |\n      two\n      lines\n    b: 'on'\n    a: 1 # one\n    b: ignored\n  name: r\nspec: {}\n---\napiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nspec: {}\n---\napiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata: {}\n---\napiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata:\n  name: n\n  annotations: ~\n";
    let (rl, outcome) = call(items, Some(&input("p1")));
    assert_eq!(outcome, Ok(()));
    let written = out(&rl);
    let resources: Vec<&str> = written.split("---\n").skip(1).collect();
    assert_eq!(
        resources,
        [
            "apiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata:\n  name: r\n  annotations:\n    a: \"1\"\n    b: on\n    cnrm.cloud.google.com/project-id: p1\n    z: |\n      two\n      lines\nspec: {}\n",
            "apiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nspec: {}\nmetadata:\n  annotations:\n    cnrm.cloud.google.com/project-id: p1\n",
            // A flow `metadata` stays flow.
            "apiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata: {annotations: {cnrm.cloud.google.com/project-id: p1}}\n",
            "apiVersion: redis.cnrm.cloud.google.com/v1beta1\nkind: RedisInstance\nmetadata:\n  name: n\n  annotations:\n    cnrm.cloud.google.com/project-id: p1\n",
        ]
    );
}

#[test]
fn without_a_kptfile_nothing_is_set() {
    let items = "apiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPolicy\nmetadata:\n  name: a\n---\napiVersion: kpt.dev/v1\nkind: KptFile\nmetadata:\n  name: wrong-case\n";
    let (rl, outcome) = call(items, Some(&input("x")));
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: faild to find Kptfile: unable to find Kptfile, please include --include-meta-resources flag if a Kptfile is present")
    );
    assert!(rl.results.is_empty());
    assert_eq!(out(&rl), same(items));
    let (rl, outcome) = call("", Some(&input("x")));
    assert!(matches!(outcome, Err(Stop::Failed(_))));
    assert!(rl.items.is_empty());
}

#[test]
fn a_kptfile_the_sdk_types_refuse_fails_with_yaml_v3_lines() {
    // Any apiVersion of kind Kptfile is decoded (a v1alpha2 one too);
    // the lines are those of the item as kyaml writes it.
    let kptfile = "# head\napiVersion: kpt.dev/v1alpha2\nkind: Kptfile\nmetadata:\n  name: p\n  labels: [a]\n  annotations:\n    config.kubernetes.io/path: Kptfile\nopenAPI: {}\nupstream:\n  type: {git: x}\n  git: 'github'\ninfo:\n  emails: a@example.com\n  keywords: [{a: b}, c]\npipeline:\n  mutators:\n  - image: apply-setters\n    config: x\n    configMap: {a: [1], b: 2, c: a-very-long-value}\n  - just-a-string-that-is-long\n  validators: {}\ninventory:\n  name: a\n  name: b\n";
    let (rl, outcome) = call(
        &format!("{kptfile}---\napiVersion: iam.cnrm.cloud.google.com/v1\nkind: IAMPolicy\nmetadata:\n  name: a\n"),
        Some(&input("x")),
    );
    let err = "failed to set project-id setter: faild to find Kptfile: failed to read Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:
  line 6: cannot unmarshal !!seq into map[string]string
  line 9: field openAPI not found in type v1.KptFile
  line 11: cannot unmarshal !!map into v1.OriginType
  line 12: cannot unmarshal !!str `github` into v1.Git
  line 14: cannot unmarshal !!str `a@examp...` into []string
  line 15: cannot unmarshal !!map into string
  line 19: field config not found in type v1.Function
  line 20: cannot unmarshal !!seq into string
  line 21: cannot unmarshal !!str `just-a-...` into v1.Function
  line 22: cannot unmarshal !!map into []v1.Function
  line 25: mapping key \"name\" already defined at line 24";
    assert_eq!(outcome, failed(err));
    assert!(!out(&rl).contains("cnrm.cloud.google.com/project-id"));
    // A sequence that names itself a Kptfile does not decode
    // (`cannot unmarshal !!seq into v1.KptFile`), but kyaml's writer then
    // refuses it, and its error is the one reported.
    let (_, outcome) = call("- kind\n- Kptfile\n", None);
    assert_eq!(
        outcome,
        failed("wrong Node Kind for  expected: MappingNode was SequenceNode: value: {- kind\n- Kptfile}")
    );
}

#[test]
fn aliases_and_merge_keys_in_a_kptfile_decode_as_yaml_v3_decodes_them() {
    let kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  labels: &l {a: b}\n  annotations:\n    <<: *l\n    config.kubernetes.io/path: Kptfile\ninfo: &i\n  site: x\n  man: y\npipeline:\n  mutators:\n  - image: apply-setters\n    configMap: &cm\n      <<: [{z: '1'}, {z: '2', y: ~}]\n      y: n\n";
    let (rl, outcome) = call(kptfile, Some(&input("x")));
    assert_eq!(outcome, Ok(()));
    // Merged as yaml.v3 merges: a list's maps from its end, a null value
    // only where the key is new; the anchors are gone.
    assert_eq!(
        out(&rl),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n  labels:\n    a: b\n  annotations:\n    a: b\n    config.kubernetes.io/path: Kptfile\ninfo:\n  site: x\n  man: \"y\"\npipeline:\n  mutators:\n    - image: apply-setters\n      configMap:\n        project-id: x\n        \"y\": \"n\"\n        z: \"1\"\n"
    );
    // An alias bomb is yaml.v3's refusal, not work.
    let mut bomb = String::from("kind: Kptfile\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let (_, outcome) = call(&bomb, None);
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: faild to find Kptfile: failed to read Kptfile: invalid 'v1' Kptfile: yaml: document contains excessive aliasing")
    );
    // An alias to another item's anchor names nothing in the Kptfile's
    // own text.
    let (_, outcome) = call(
        "kind: A\nx: &cm {a: b}\n---\nkind: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configMap: *cm\n",
        None,
    );
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: faild to find Kptfile: failed to read Kptfile: invalid 'v1' Kptfile: yaml: unknown anchor 'cm' referenced")
    );
    let (_, outcome) = call("kind: Kptfile\npipeline:\n  <<: 3\n", None);
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: faild to find Kptfile: failed to read Kptfile: invalid 'v1' Kptfile: yaml: map merge requires map or sequence of maps as the value")
    );
}

#[test]
fn a_setters_file_that_is_not_there_or_no_setters_config_fails() {
    // `configPath` is looked up as a package path, not from the
    // subpackage's Kptfile: `values.yaml` is not `backend/values.yaml`.
    let items = "kind: Kptfile\nmetadata:\n  name: b\n  annotations:\n    config.kubernetes.io/path: backend/Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configPath: values.yaml\n---\nkind: ConfigMap\nmetadata:\n  name: values\n  annotations:\n    config.kubernetes.io/path: backend/values.yaml\ndata: {}\n---\napiVersion: iam.cnrm.cloud.google.com/v1\nkind: IAMPolicy\nmetadata:\n  name: a\n";
    let (rl, outcome) = call(items, Some(&input("x")));
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: error updating Kptfile: failed to find setter file: file values.yaml doesn't exist, please ensure the file specified in \"configPath\" exists and retry")
    );
    assert_eq!(out(&rl), same(items));
    let items = "kind: Kptfile\nmetadata:\n  name: b\npipeline:\n  mutators:\n  - image: set-labels\n  - image: my/apply-setters-fork\n    configMap: null\n    configPath: ''\n  - image: apply-setters\n    configMap: {}\n";
    let (rl, outcome) = call(items, Some(&input("x")));
    assert_eq!(
        outcome,
        failed("failed to set project-id setter: error updating Kptfile: unable to find `ConfigMap` or `configPath` as the `functionConfig` for apply-setters")
    );
    assert_eq!(out(&rl), same(items));
}

#[test]
fn each_kptfile_is_handled_and_an_earlier_one_stays_changed_when_a_later_fails() {
    let items = "kind: Kptfile\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: Kptfile\n---\nkind: Kptfile\nmetadata:\n  name: b\n  annotations:\n    config.kubernetes.io/path: b/Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configPath: gone.yaml\n";
    let (rl, outcome) = call(items, Some(&input("x")));
    assert!(matches!(outcome, Err(Stop::Failed(_))));
    assert_eq!(
        out(&rl).split("---\n").next().unwrap(),
        "kind: Kptfile\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/apply-setters:v0.2\n      configMap:\n        project-id: x\n"
    );
}

#[test]
fn a_rewritten_kptfile_takes_the_place_of_the_first_item_with_its_path() {
    // Without a path annotation the Kptfile's path is "", which the first
    // item without one has: that item is replaced, the Kptfile stays.
    let items =
        "kind: Service\nmetadata:\n  name: first\n---\nkind: Kptfile\nmetadata:\n  name: p\n";
    let (rl, outcome) = call(items, Some(&input("x")));
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        out(&rl),
        "kind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/apply-setters:v0.2\n      configMap:\n        project-id: x\n---\nkind: Kptfile\nmetadata:\n  name: p\n"
    );
}

#[test]
fn the_writer_clears_empty_annotations_and_refuses_what_is_not_a_resource() {
    let kptfile = "kind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configMap: {project-id: x}\n";
    let items = format!("{kptfile}---\nkind: A\nmetadata:\n  annotations: {{}}\n---\nkind: B\nmetadata:\n  name: b\n  annotations: ~\n---\nkind: C\nmetadata: ~\n---\nnull\n");
    let (rl, outcome) = call(&items, None);
    assert_eq!(outcome, Ok(()));
    assert!(out(&rl)
        .ends_with("---\nkind: A\n---\nkind: B\nmetadata:\n  name: b\n---\nkind: C\n---\nnull\n"));
    // A `metadata` that is not a mapping: the annotation fails first, then
    // the writer, whose error is the one reported.
    let items = format!("{kptfile}---\napiVersion: iam.cnrm.cloud.google.com/v1\nkind: IAMPolicy\nmetadata: [a] # m\n");
    let (_, outcome) = call(&items, None);
    assert_eq!(
        outcome,
        failed(
            "wrong Node Kind for metadata expected: MappingNode was SequenceNode: value: {[a] # m}"
        )
    );
    let items = format!("{kptfile}---\nkind: A\nmetadata: 3\n");
    let (_, outcome) = call(&items, None);
    assert_eq!(
        outcome,
        failed("wrong Node Kind for metadata expected: MappingNode was ScalarNode: value: {3}")
    );
    for (item, err) in [
        (
            "just text",
            "wrong Node Kind for  expected: MappingNode was ScalarNode: value: {just text}",
        ),
        (
            "[1, 2]",
            "wrong Node Kind for  expected: MappingNode was SequenceNode: value: {[1, 2]}",
        ),
    ] {
        let (_, outcome) = call(&format!("{kptfile}---\n{item}\n"), None);
        assert_eq!(outcome, failed(err), "{item}");
    }
}

#[test]
fn where_go_crashes_the_run_fails() {
    // kyaml reads a sequence's elements as key, value pairs; a `kind`
    // without a value is an index panic.
    let (_, outcome) = call("[a, b, kind]\n", None);
    assert_eq!(
        outcome,
        Err(Stop::Failed(
            "panic: runtime error: index out of range [3] with length 3\n".into()
        ))
    );
    let kptfile = "kind: Kptfile\nmetadata:\n  name: p\n";
    let (_, outcome) = call(&format!("{kptfile}---\n[apiVersion]\n"), None);
    assert_eq!(
        outcome,
        Err(Stop::Failed(
            "panic: runtime error: index out of range [1] with length 1\n".into()
        ))
    );
    // A sequence that reads as a Config Connector resource cannot take an
    // annotation; the writer refuses it too.
    let (_, outcome) = call(
        &format!("{kptfile}---\n[apiVersion, iam.cnrm.cloud.google.com/v1]\n"),
        None,
    );
    assert_eq!(
        outcome,
        failed("wrong Node Kind for  expected: MappingNode was SequenceNode: value: {[apiVersion, iam.cnrm.cloud.google.com/v1]}")
    );
    // A setters file with a second `data` that is not a mapping:
    // `log.Fatal`, once.
    let items = "kind: Kptfile\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: apply-setters\n    configPath: s.yaml\n---\nkind: ConfigMap\nmetadata:\n  annotations:\n    config.kubernetes.io/path: s.yaml\ndata: {a: b}\ndata: text\n";
    let (_, outcome) = call(items, Some(&input("x")));
    assert_eq!(
        outcome,
        Err(Stop::Failed(
            "wrong Node Kind for data expected: MappingNode was ScalarNode: value: {text}\n".into()
        ))
    );
    // A second `data` mapping takes the entries (keeping its values'
    // styles); a null one takes nothing.
    let items2 = items.replace("data: text\n", "data: {a: 'old', c: d}\n");
    let (rl, outcome) = call(&items2, Some(&input("x")));
    assert_eq!(outcome, Ok(()));
    assert!(
        out(&rl).ends_with("data: {a: 'b', c: d, project-id: x}\n"),
        "{}",
        out(&rl)
    );
    let items3 = items.replace("data: text\n", "data: ~\n");
    let (rl, outcome) = call(&items3, Some(&input("x")));
    assert_eq!(outcome, Ok(()));
    assert!(
        out(&rl).ends_with("    config.kubernetes.io/path: s.yaml\ndata: ~\n"),
        "{}",
        out(&rl)
    );
}

#[test]
fn map_keys_sort_as_yaml_v3_sorts_them() {
    let mut keys = vec![
        "b",
        "a10",
        "a2",
        "A",
        "_x",
        "a",
        "1",
        "10",
        "2",
        "a02",
        "z",
        "project-id",
    ];
    keys.sort_by(|a, b| go_key_order(a, b));
    assert_eq!(
        keys,
        [
            "_x",
            "1",
            "2",
            "10",
            "A",
            "a",
            "a2",
            "a02",
            "a10",
            "b",
            "project-id",
            "z"
        ]
    );
}

#[test]
fn odd_trees_never_panic() {
    let kptfile = "kind: Kptfile\nmetadata:\n  name: p\n";
    for item in [
        "- a\n",
        "{}\n",
        "~\n",
        "kind: Kptfile\npipeline: [1]\n",
        "kind: Kptfile\npipeline:\n  mutators: [~, 1, {image: apply-setters, configMap: {? [a] : b, ~: c}}]\n",
        "kind: Kptfile\nmetadata: {annotations: {config.kubernetes.io/path: ~}}\n",
        "kind: Kptfile\n[a]: b\n{a: b}: c\n",
        "kind: Kptfile\na: &x [*x]\n",
        "apiVersion: iam.cnrm.cloud.google.com/v1\nmetadata: {annotations: [1]}\n",
        "apiVersion: iam.cnrm.cloud.google.com/v1\nmetadata: {annotations: {a: [1]}, annotations: 3}\n",
        "apiVersion: iam.cnrm.cloud.google.com/v1\nmetadata: ~\n",
        "apiVersion: iam.cnrm.cloud.google.com/v1\nmetadata: {annotations: {}, annotations: ~}\n",
    ] {
        for config in [None, Some("data: [1]\n"), Some("- 1\n")] {
            let _ = call(&format!("{kptfile}---\n{item}"), config);
            let _ = call(item, config);
        }
    }
}

#[test]
fn a_cancelled_call_stops() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rl = list(SHOP, Some(&input("x")));
    let before = rl.clone();
    assert_eq!(
        run(&mut rl, &Context::new().with_cancel(flag)),
        Err(Stop::Cancelled)
    );
    assert_eq!(rl, before);
}
