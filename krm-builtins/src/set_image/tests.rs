#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use krm_yaml::emit;

use super::fields::new_name_for_tests;
use super::{new_image_name, run, split, Image};
use crate::function::{Context, Stop};
use crate::result::{File, FnResult, ResourceRef};
use crate::test_support::{list_each, text};

const DEPLOY: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: nginx:1.0
      containers:
      - name: a
        # the server
        image: \"nginx:1.0\" # pinned
      - name: b
        image: docker.io/nginx:1.0
      - name: c
        image: nginx@sha256:abc
      - name: d
        image: nginx:2.0@sha256:abc
      - name: e
";

const DEPLOY_NEW_TAG: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: nginx:1.0
      containers:
      - name: a
        # the server
        image: nginx:1.2 # pinned
      - name: b
        image: docker.io/nginx:1.0
      - name: c
        image: nginx:1.2
      - name: d
        image: nginx:1.2
      - name: e
";

const POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  iniContainers:
  - image: nginx
  containers:
  - image: nginx:1.0
";

fn summary(n: usize) -> FnResult {
    FnResult::info(format!("summary: updated a total of {n} image(s)"))
}

#[test]
fn a_config_map_sets_the_tag_of_matching_containers() {
    for config in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  name: nginx\n  newTag: '1.2'\n",
        // What `kpt fn eval -- name=nginx newTag=1.2` sends.
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata: {name: nginx, newTag: \"1.2\"}\n",
        // The SDK takes an object without kind for a ConfigMap too.
        "data:\n  name: nginx\n  newTag: 1.2\n",
    ] {
        let mut rl = list_each(&[DEPLOY], Some(config));
        run(&mut rl, &Context::new()).unwrap();
        // initContainers are left alone (the catalog reads `iniContainers`),
        // the comments and the other fields stay, the style is plain.
        assert_eq!(text(&rl.items), DEPLOY_NEW_TAG, "{config}");
        assert_eq!(rl.results, vec![summary(3)]);
    }
}

#[test]
fn the_function_s_own_kind_and_pods() {
    let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetImage\nmetadata:\n  name: s\nimage:\n  name: nginx\n  NewName: registry/nginx\n  digest: sha256:fff\n";
    let mut rl = list_each(&[POD, DEPLOY], Some(config));
    run(&mut rl, &Context::new()).unwrap();
    // Sorted as the SDK writes them: `apps/v1 ...` before `v1 Pod`.
    assert_eq!(
        text(&rl.items[1..]),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  iniContainers:\n  - image: registry/nginx@sha256:fff\n  containers:\n  - image: registry/nginx@sha256:fff\n"
    );
    assert!(text(&rl.items[..1]).contains("        image: registry/nginx@sha256:fff # pinned\n"));
    assert_eq!(rl.results, vec![summary(5)]);
    // `data` in the function's own kind, and no group or version.
    let mut rl = list_each(
        &[POD],
        Some("kind: SetImage\ndata:\n  name: nginx\n  newName: other\n"),
    );
    run(&mut rl, &Context::new()).unwrap();
    // The catalog drops the tag's `:` when only the name changes.
    assert_eq!(
        text(&rl.items),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  iniContainers:\n  - image: other\n  containers:\n  - image: other1.0\n"
    );
}

#[test]
fn images_split_and_renamed_as_the_catalog_does() {
    assert_eq!(split("nginx"), ("nginx", "", ""));
    assert_eq!(split("nginx:1"), ("nginx", "1", ""));
    assert_eq!(split("host:5000/nginx:1"), ("host:5000/nginx", "1", ""));
    assert_eq!(split("nginx@sha256:a"), ("nginx", "", "sha256:a"));
    assert_eq!(split("nginx:1@sha256:a"), ("nginx", "1", "sha256:a"));
    let img = |n: &str, t: &str, d: &str| Image {
        name: "nginx".into(),
        new_name: n.into(),
        new_tag: t.into(),
        digest: d.into(),
    };
    assert_eq!(new_image_name("nginx:1", &img("", "2", "")), "nginx:2");
    assert_eq!(new_image_name("nginx", &img("", "2", "")), "nginx:2");
    assert_eq!(
        new_image_name("nginx:1", &img("", "2", "sha256:d")),
        "nginx@sha256:d"
    );
    assert_eq!(
        new_image_name("nginx@sha256:a", &img("x", "", "")),
        "xsha256:a"
    );
    assert_eq!(new_image_name("nginx", &img("x", "", "")), "x");
}

fn die(results: &[FnResult], message: &str) -> Vec<FnResult> {
    let mut r = results.to_vec();
    r.push(FnResult::error(message));
    r.push(FnResult::error(format!(
        "function is terminated: {message}"
    )));
    r
}

#[test]
fn bad_configs_fail_with_the_catalog_s_messages() {
    let not_given = FnResult::info("`FunctionConfig` is not given");
    for config in [None, Some("{}")] {
        let mut rl = list_each(&[POD], config);
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(
                "failed to evaluate function: function is terminated: must specify `name`".into()
            ))
        );
        assert_eq!(
            rl.results,
            die(std::slice::from_ref(&not_given), "must specify `name`")
        );
        assert_eq!(text(&rl.items), POD);
    }
    let cases = [
        (
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  name: nginx\n",
            "must specify one of `newName`, `newTag`, or `digest`",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  name: nginx\n  tag: x\n",
            "ConfigMap has wrong field name tag",
        ),
        (
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: SetImage\nimage:\n  newTag: x\n",
            "must specify `name`",
        ),
    ];
    for (config, message) in cases {
        let mut rl = list_each(&[POD], Some(config));
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(format!(
                "failed to evaluate function: function is terminated: {message}"
            ))),
            "{config}"
        );
        assert_eq!(rl.results, die(&[], message));
    }
    // Another kind: the result names the config.
    let mut rl = list_each(
        &[POD],
        Some("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: x\n  namespace: ns\n"),
    );
    let message = "unknown FunctionConfig `SetLabels`, expect SetImage";
    assert_eq!(
        run(&mut rl, &Context::new()),
        Err(Stop::Failed(format!(
            "failed to evaluate function: function is terminated by Resource(apiVersion=fn.kpt.dev/v1alpha1, kind=SetLabels, namespace=ns, name=x): {message}"
        )))
    );
    let mut first = FnResult::error(message);
    first.resource_ref = Some(ResourceRef {
        api_version: "fn.kpt.dev/v1alpha1".into(),
        kind: "SetLabels".into(),
        name: "x".into(),
        namespace: "ns".into(),
    });
    first.file = Some(File {
        path: String::new(),
        index: -1,
    });
    assert_eq!(rl.results[0], first);
    assert_eq!(rl.results.len(), 2);
    assert_eq!(
        emit::encode_node(&crate::result::to_node(&rl.results[0]), true),
        "message: unknown FunctionConfig `SetLabels`, expect SetImage\nseverity: error\nresourceRef:\n  apiVersion: fn.kpt.dev/v1alpha1\n  kind: SetLabels\n  name: x\n  namespace: ns\nfile:\n  index: -1\n"
    );
    // Fields of the wrong type: the SDK's "unmatched field type".
    for (config, field) in [
        ("apiVersion: v1\nkind: ConfigMap\ndata: [a]\n", "data"),
        (
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  name: {a: b}\n",
            "data",
        ),
        ("kind: SetImage\nimage:\n  name: 1\n  newTag: x\n", ""),
        ("kind: SetImage\nimage: [a]\n", ""),
    ] {
        let mut rl = list_each(&[POD], Some(config));
        let message = format!("SubObject has unmatched field type: `{field}");
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(format!(
                "failed to evaluate function: {message}"
            ))),
            "{config}"
        );
        assert_eq!(rl.results, vec![FnResult::error(message)]);
    }
}

#[test]
fn odd_items_fail_as_the_sdk_fails_and_never_panic() {
    let config = Some("data: {name: nginx, newTag: '2'}\n");
    // Not a mapping: the SDK cannot read the ResourceList.
    let mut rl = list_each(&[POD, "- a\n"], config);
    assert_eq!(
        run(&mut rl, &Context::new()),
        Err(Stop::Failed(
            "failed to evaluate function: failed to extract objects from items: unhandled node kind 2"
                .into()
        ))
    );
    assert!(rl.results.is_empty());
    let mut rl = list_each(&[POD], Some("[a]"));
    assert_eq!(
        run(&mut rl, &Context::new()),
        Err(Stop::Failed("failed to evaluate function: failed when tried to get functionConfig: wrong type, got: *internal.sliceVariant".into()))
    );
    // Containers, or an image, of the wrong kind.
    for (item, field) in [
        ("kind: Pod\nspec:\n  containers: {a: b}\n", "containers"),
        ("kind: Pod\nspec:\n  containers: [a]\n", "containers"),
        ("kind: Pod\nspec:\n  containers: null\n", "containers"),
        (
            "kind: Pod\nspec:\n  containers:\n  - image: null\n",
            "image",
        ),
        ("kind: Pod\nspec:\n  containers:\n  - image: [x]\n", "image"),
        ("kind: Pod\nspec:\n  iniContainers: 1\n", "iniContainers"),
    ] {
        let mut rl = list_each(&[item], config);
        let message = format!("SubObject has unmatched field type: `{field}");
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(format!(
                "failed to evaluate function: {message}"
            ))),
            "{item}"
        );
        assert_eq!(rl.results, vec![FnResult::error(message)]);
    }
    // Odd but harmless shapes.
    for item in [
        "kind: Pod\n",
        "kind: Pod\nspec: null\n",
        "kind: Pod\nspec: [1, 2]\n",
        "kind: Deployment\nspec: 1\n",
        "kind: Service\nspec:\n  template:\n    spec: 1\n",
        "kind: [Pod]\n",
        "{}\n",
    ] {
        let mut rl = list_each(&[item], config);
        run(&mut rl, &Context::new()).unwrap();
        assert_eq!(text(&rl.items), item, "{item}");
        assert_eq!(rl.results, vec![summary(0)]);
    }
    // A pod template without spec: the Go binary crashes.
    for item in [
        "kind: Deployment\nspec:\n  template: {}\n",
        "kind: Deployment\nspec:\n  template: x\n",
    ] {
        let mut rl = list_each(&[item], config);
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(
                "panic: runtime error: invalid memory address or nil pointer dereference".into()
            ))
        );
        assert!(rl.results.is_empty());
    }
    // A name that is no regular expression.
    let mut rl = list_each(&[POD], Some("data: {name: '(', newTag: '2'}\n"));
    assert!(
        matches!(run(&mut rl, &Context::new()), Err(Stop::Failed(m)) if m.starts_with("panic: "))
    );
    let mut rl = list_each(&["kind: Pod\n"], Some("data: {name: '(', newTag: '2'}\n"));
    run(&mut rl, &Context::new()).unwrap();
}

#[test]
fn a_name_is_a_regular_expression_and_a_cancelled_call_stops() {
    let mut rl = list_each(&[POD], Some("data: {name: ngin., newTag: '2'}\n"));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(rl.results, vec![summary(2)]);
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rl = list_each(&[POD], Some("data: {name: nginx, newTag: '2'}\n"));
    assert_eq!(
        run(&mut rl, &Context::new().with_cancel(flag)),
        Err(Stop::Cancelled)
    );
}

/// A Pod and a custom resource with images in a list of its own.
const APP_POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: registry.local/web:3.1
";

const APP_CR: &str = "\
apiVersion: apps.acme.io/v2
kind: Bundle
metadata:
  name: shop
  namespace: prod
spec:
  parts:
  # the front end
  - image: registry.local/web:3.1 # bump me
    replicas: 2
  - image: registry.local/db:9
  extra:
    image: registry.local/web
  none: null
";

const BUMP: &str = "\
apiVersion: fn.kpt.dev/v1alpha1
kind: SetImage
metadata:
  name: bump
image:
  name: registry.local/web
  newTag: '3.2'
additionalImageFields:
- group: apps.acme.io
  version: v2
  kind: Bundle
  path: spec/parts[]/image
  create: false
";

#[test]
fn additional_fields_are_updated_in_place_with_their_comments() {
    let mut rl = list_each(&[APP_POD, APP_CR], Some(BUMP));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(
        text(&rl.items),
        "\
apiVersion: apps.acme.io/v2
kind: Bundle
metadata:
  name: shop
  namespace: prod
spec:
  parts:
  # the front end
  - image: registry.local/web:3.2 # bump me
    replicas: 2
  - image: registry.local/db:9
  extra:
    image: registry.local/web
  none: null
---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: registry.local/web:3.2
"
    );
    assert_eq!(rl.results, vec![summary(2)]);
    // Without `[]`, with a leading `/`, on a map, and a null list read
    // as a list (kustomize makes it an empty one).
    let config = BUMP.replace(
        "  path: spec/parts[]/image\n",
        "  path: /spec/parts/image\n- kind: Bundle\n  path: spec/extra/image\n- path: spec/none[]/image\n",
    );
    let mut rl = list_each(&[APP_CR], Some(&config));
    run(&mut rl, &Context::new()).unwrap();
    let out = text(&rl.items);
    assert!(
        out.contains("  - image: registry.local/web:3.2 # bump me\n"),
        "{out}"
    );
    assert!(
        out.contains("  extra:\n    image: registry.local/web:3.2\n"),
        "{out}"
    );
    assert!(out.contains("  none: []\n"), "{out}");
    assert_eq!(rl.results, vec![summary(2)]);
}

#[test]
fn a_fieldspec_selects_by_group_version_and_kind() {
    // Kind, group or version of another type: the item is left alone.
    for spec in [
        "- kind: Other\n  path: spec/parts[]/image\n",
        "- group: apps\n  kind: Bundle\n  path: spec/parts[]/image\n",
        "- version: v1\n  path: spec/parts[]/image\n",
    ] {
        let config = format!(
            "kind: SetImage\nimage: {{name: registry.local/web, newTag: '4'}}\nadditionalImageFields:\n{spec}"
        );
        let mut rl = list_each(&[APP_CR], Some(&config));
        run(&mut rl, &Context::new()).unwrap();
        assert_eq!(text(&rl.items), APP_CR, "{spec}");
        assert_eq!(rl.results, vec![summary(0)]);
    }
    // No gvk at all: every item; the Pod's container is counted twice
    // (the catalog's own pass, then the fieldspec's: kustomize counts a
    // value it sets to what it was).
    let config = "kind: SetImage\nimage: {name: registry.local/web, newTag: '4'}\nadditionalImageFields:\n- path: spec/containers[]/image\n";
    let mut rl = list_each(&[APP_POD], Some(config));
    run(&mut rl, &Context::new()).unwrap();
    assert!(text(&rl.items).contains("    image: registry.local/web:4\n"));
    assert_eq!(rl.results, vec![summary(2)]);
    // CRDs are never changed.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: c\nspec:\n  image: registry.local/web\n";
    let config = "kind: SetImage\nimage: {name: registry.local/web, newTag: '4'}\nadditionalImageFields:\n- path: spec/image\n";
    let mut rl = list_each(&[crd], Some(config));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(text(&rl.items), crd);
    assert_eq!(rl.results, vec![summary(0)]);
}

#[test]
fn kustomize_builds_the_new_name_of_an_additional_field() {
    let new = new_name_for_tests;
    assert_eq!(new("web:1@sha256:a", "", "2", "", ""), "web:2");
    assert_eq!(
        new("web:1@sha256:a", "", "", "sha256:b", ""),
        "web@sha256:b"
    );
    assert_eq!(new("web:1", "", "2", "sha256:b", ""), "web:2@sha256:b");
    assert_eq!(
        new("web:1@sha256:a", "x/web", "", "", ""),
        "x/web:1@sha256:a"
    );
    assert_eq!(new("web:1", "", "", "", "-rc"), "web:1-rc");
    // The catalog's own pass would give `x/web1` here.
    assert_eq!(new("web:1", "x/web", "", "", ""), "x/web:1");
    // `tagSuffix` is read for the additional fields only.
    let config = "kind: SetImage\nimage: {name: registry.local/db, newName: db, tagSuffix: -debug}\nadditionalImageFields:\n- path: spec/parts/image\n";
    let mut rl = list_each(&[APP_CR], Some(config));
    run(&mut rl, &Context::new()).unwrap();
    assert!(text(&rl.items).contains("  - image: db:9-debug\n"));
    assert_eq!(rl.results, vec![summary(1)]);
}

#[test]
fn a_bad_fieldspec_leaves_the_item_with_kustomize_s_error() {
    let object = "Bundle.v2.apps.acme.io/shop.prod";
    let cases = [
        (
            "spec/parts/replicas/image",
            "visit traversal on path: [replicas image]: expected sequence or mapping node".to_owned(),
        ),
        ("spec//image", "cannot set or create an empty field name".to_owned()),
        (
            "spec/extra",
            "wrong node kind: expected ScalarNode but got MappingNode: node contents:\n{\"image\": \"registry.local/web\"}\n".to_owned(),
        ),
        (
            "spec/extra/0",
            "fieldName: 0: wrong node kind: expected SequenceNode but got MappingNode: node contents:\n{\"image\": \"registry.local/web\"}\n".to_owned(),
        ),
        ("spec/*/image", "fieldName: *: wildcard is not supported in PathGetter".to_owned()),
        ("spec/extra/-1", "fieldName: -1: array index -1 cannot be negative".to_owned()),
    ];
    for (path, inner) in cases {
        // The first fieldspec sets a value before the second fails: the
        // item is left as it was, the value still counted.
        let config = format!(
            "kind: SetImage\nimage: {{name: registry.local/web, newTag: '4'}}\nadditionalImageFields:\n- path: spec/parts[]/image\n- kind: Bundle\n  path: {path}\n"
        );
        let mut rl = list_each(&[APP_POD, APP_CR], Some(&config));
        run(&mut rl, &Context::new()).unwrap();
        assert_eq!(text(&rl.items[..1]), APP_CR, "{path}");
        assert!(text(&rl.items[1..]).contains("image: registry.local/web:4\n"));
        let mut error = FnResult::error(format!(
            "considering field '{path}' of object {object}: {inner}"
        ));
        error.resource_ref = Some(ResourceRef {
            api_version: "apps.acme.io/v2".into(),
            kind: "Bundle".into(),
            name: "shop".into(),
            namespace: "prod".into(),
        });
        error.file = Some(File {
            path: String::new(),
            index: -1,
        });
        assert_eq!(rl.results, vec![error, summary(2)], "{path}");
    }
    // Fields of the wrong type stop the function as the SDK's decoding does.
    for spec in [
        "- path: 1\n",
        "- path: spec/image\n  create: 'yes'\n",
        "- spec/image\n",
    ] {
        let config = format!(
            "kind: SetImage\nimage: {{name: a, newTag: b}}\nadditionalImageFields:\n{spec}"
        );
        let mut rl = list_each(&[APP_CR], Some(&config));
        let message = "SubObject has unmatched field type: `";
        assert_eq!(
            run(&mut rl, &Context::new()),
            Err(Stop::Failed(format!(
                "failed to evaluate function: {message}"
            ))),
            "{spec}"
        );
        assert_eq!(rl.results, vec![FnResult::error(message)]);
    }
    // The image given in `data` only: no `image` for kustomize's filter.
    let config = "kind: SetImage\ndata: {name: a, newTag: b}\nadditionalImageFields: []\n";
    let mut rl = list_each(&[APP_CR], Some(config));
    assert_eq!(
        run(&mut rl, &Context::new()),
        Err(Stop::Failed(
            "failed to evaluate function: SubObject has unmatched field type: `".into()
        ))
    );
    // `null` is no list of fieldspecs.
    let config = "kind: SetImage\nimage: {name: a, newTag: b}\nadditionalImageFields: null\n";
    let mut rl = list_each(&[APP_CR], Some(config));
    run(&mut rl, &Context::new()).unwrap();
    assert_eq!(rl.results, vec![summary(0)]);
}
