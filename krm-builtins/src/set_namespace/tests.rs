#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use krm_yaml::{emit, parse, Node};

use super::run;
use crate::{Context, ResourceList, Stop};

fn nodes(text: &str) -> Vec<Node> {
    parse::parse(text)
        .unwrap()
        .into_iter()
        .map(|d| d.content.into_iter().next().unwrap())
        .collect()
}

fn list(items: &str, config: Option<&str>) -> ResourceList {
    ResourceList {
        items: nodes(items),
        function_config: config.map(|c| nodes(c).remove(0)),
        ..ResourceList::default()
    }
}

fn out(rl: &ResourceList) -> String {
    emit::encode(&rl.items, false)
}

/// Each result as `severity: message`.
fn results(rl: &ResourceList) -> Vec<String> {
    rl.results
        .iter()
        .map(|r| format!("{}: {}", r.severity.map_or("", |s| s.as_str()), r.message))
        .collect()
}

fn go(rl: &mut ResourceList) -> Result<(), Stop> {
    run(rl, &Context::new())
}

const PACKAGE: &str = r#"# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: 'old' # was here
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: svc
---
apiVersion: v1
kind: Namespace
metadata:
  name: old
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  conversion:
    webhook:
      clientConfig:
        service:
          name: hook
          namespace: old
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: crb
subjects:
- kind: ServiceAccount
  name: sa
  namespace: old
- kind: User
  name: jane
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: old
  annotations:
    config.kubernetes.io/local-config: "true"
"#;

#[test]
fn a_config_map_sets_every_namespace_and_keeps_comments() {
    let mut rl = list(
        PACKAGE,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  namespace: new\n"),
    );
    go(&mut rl).unwrap();
    assert_eq!(
        out(&rl),
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  conversion:
    webhook:
      clientConfig:
        service:
          name: hook
          namespace: new
---
# the app
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: new # was here
spec:
  replicas: 1
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: crb
subjects:
  - kind: ServiceAccount
    name: sa
    namespace: new
  - kind: User
    name: jane
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local
  namespace: old
  annotations:
    config.kubernetes.io/local-config: "true"
---
apiVersion: v1
kind: Namespace
metadata:
  name: new
---
apiVersion: v1
kind: Service
metadata:
  name: svc
  namespace: new
"#
    );
    assert_eq!(
        results(&rl),
        [
            "warning: Resource(apiVersion=apps/v1, kind=Deployment, namespace=old, name=app) does not have upstream origin.",
            "warning: Resource(apiVersion=v1, kind=Service, namespace=, name=svc) does not have upstream origin.",
            "warning: Resource(apiVersion=v1, kind=Namespace, namespace=, name=old) does not have upstream origin.",
            "warning: Resource(apiVersion=apiextensions.k8s.io/v1, kind=CustomResourceDefinition, namespace=, name=widgets.example.com) does not have upstream origin.",
            "warning: Resource(apiVersion=rbac.authorization.k8s.io/v1, kind=ClusterRoleBinding, namespace=, name=crb) does not have upstream origin.",
            "info: namespace [default old] updated to \"new\", 5 value(s) changed",
            "info: all `depends-on` annotations are up-to-date. no `namespace` changed",
        ]
    );
}
