//! #44: the operator's swap. Porch's own manifests (nephio-project/porch
//! `deployments/porch/`: the runner's Deployment and Service of
//! `2-function-runner.yaml`, its Role and RoleBinding of `5-rbac.yaml` and
//! `6-rbac-bind.yaml`, the PodTemplate and ServiceTemplate of
//! `22-function-templates.yaml`, FunctionConfigs shaped as
//! `23-function-configurations.yaml`'s, and the ServiceTemplate CRD), written
//! out here from their facts, with only the two image names changed to ours:
//! the runner pod becomes Ready by Porch's own readiness probe, under
//! Porch's Role alone (not deploy/rbac.yaml), and serves, through its
//! Service, a catalog function (whose binaryExecutor binary our image does
//! not ship: it runs built in) and a function built into a registry on the
//! host's loopback (no `--insecure-registries` on Porch's command line), in
//! a pod made from Porch's templates; a deleted FunctionConfig goes (the
//! runner takes Porch's finalizer off). docs/deploy.md, "Swapping into an
//! existing Porch", is this test.
//!
//! What the test changes beyond the images, none of it Porch's to say: the
//! namespaces (the test's own, so parallel runs never meet), and what this
//! cluster needs to run any Deployment that talks to the API server
//! (`tests/tests/deploy.rs` does the same): the ServiceAccount's kubeconfig
//! from a Secret (the cluster mounts no tokens), host networking (the API
//! server and the registry listen on the host's loopback) with the cluster's
//! DNS kept, and a short termination grace.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{
    build_image, build_runner_image, docker, evaluator_client, eventually_async, prerequisite,
    require_kubeconfig, require_registry, start_registry,
};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use proto::pb::EvaluateFunctionRequest;
use runner_kube::pods::is_ready;
use serde_yaml_ng::Value;
use support::{
    apply, cluster, functionconfigs, install_crd, resource_list, runner_kubeconfig, runner_report,
    str_at, wait_crd_established, wrapper_dockerfile, Cleanup, EXAMPLE_FN_DOCKERFILE,
};

const MANAGER: &str = "krm-porch-swap-test";

/// Porch's images, as its manifests name them: the two an operator swaps.
const PORCH_RUNNER_IMAGE: &str = "docker.io/nephio/porch-function-runner:latest";
const PORCH_WRAPPER_IMAGE: &str = "docker.io/nephio/porch-wrapper-server:latest";

/// Where the test-only kubeconfig Secret is mounted in the runner.
const KUBECONFIG_DIR: &str = "/var/run/krm-test";

/// `2-function-runner.yaml`: the ServiceAccount, Deployment and Service.
const RUNNER: &str = r#"
kind: ServiceAccount
apiVersion: v1
metadata:
  name: porch-fn-runner
  namespace: porch-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: function-runner
  namespace: porch-system
spec:
  replicas: 1
  selector:
    matchLabels:
      app: function-runner
  template:
    metadata:
      labels:
        app: function-runner
    spec:
      serviceAccountName: porch-fn-runner
      containers:
        - name: function-runner
          image: docker.io/nephio/porch-function-runner:latest
          imagePullPolicy: IfNotPresent
          securityContext:
            runAsNonRoot: true
            runAsUser: 10001
            runAsGroup: 10001
          command:
            - /home/nonroot/server
            - --pod-namespace=porch-fn-system
            - --max-request-body-size=6291456
            - --max-parallel-pods-per-function=2
            - --max-waitlist-length=1
            - --warm-up-pod-cache=true
            - --functions=/home/nonroot/functions
          env:
            - name: WRAPPER_SERVER_IMAGE
              value: docker.io/nephio/porch-wrapper-server:latest
            - name: OTEL_METRICS_EXPORTER
              value: "prometheus"
            - name: OTEL_EXPORTER_PROMETHEUS_HOST
              value: 0.0.0.0
            - name: OTEL_EXPORTER_PROMETHEUS_PORT
              value: "9464"
            - name: OTEL_TRACES_EXPORTER
              value: none
            - name: OTEL_SERVICE_NAME
              value: porch-function-runner
          ports:
            - containerPort: 9445
            - containerPort: 9464
              name: metrics
          readinessProbe:
            exec:
              command:
                - /home/nonroot/grpc-health-probe
                - -addr
                - localhost:9445
          resources:
            requests:
              memory: "64Mi"
              cpu: "125m"
---
apiVersion: v1
kind: Service
metadata:
  name: function-runner
  namespace: porch-system
spec:
  selector:
    app: function-runner
  ports:
    - port: 9445
      protocol: TCP
      targetPort: 9445
"#;

/// `5-rbac.yaml`'s Role for the runner and `6-rbac-bind.yaml`'s binding.
const RBAC: &str = r#"
kind: Role
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: porch-function-executor
  namespace: porch-fn-system
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["create", "delete", "patch", "get", "watch", "list"]
  - apiGroups: [""]
    resources: ["services", "endpoints"]
    verbs: ["create", "delete", "get", "watch", "list"]
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create", "delete", "update", "get"]
  - apiGroups: ["config.porch.kpt.dev"]
    resources: ["functionconfigs"]
    verbs: ["get", "list", "watch", "patch"]
  - apiGroups: ["config.porch.kpt.dev"]
    resources: ["functionconfigs/status"]
    verbs: ["get", "update", "patch"]
  - apiGroups: [ "" ]
    resources: [ "podtemplates" ]
    verbs: [ "get", "list", "watch", "create", "update", "patch" ]
  - apiGroups: [ "config.porch.kpt.dev" ]
    resources: [ "servicetemplates" ]
    verbs: [ "get", "list", "watch", "create", "update", "patch" ]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: porch-function-executor
  namespace: porch-fn-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: porch-function-executor
subjects:
  - kind: ServiceAccount
    name: porch-fn-runner
    namespace: porch-system
"#;

/// `22-function-templates.yaml`.
const TEMPLATES: &str = r#"
apiVersion: v1
kind: PodTemplate
metadata:
  name: base-pod-template
  namespace: porch-fn-system
template:
  metadata:
    annotations:
      cluster-autoscaler.kubernetes.io/safe-to-evict: "true"
  spec:
    initContainers:
      - name: copy-wrapper-server
        image: docker.io/nephio/porch-wrapper-server:latest
        command:
          - cp
          - -a
          - /home/nonroot/wrapper-server/.
          - /wrapper-server-tools
        volumeMounts:
          - name: wrapper-server-tools
            mountPath: /wrapper-server-tools
        imagePullPolicy: IfNotPresent
    containers:
      - name: function
        image: image-replaced-by-kpt-func-image
        command:
          - /wrapper-server-tools/wrapper-server
        env:
          - name: OTEL_METRICS_EXPORTER
            value: prometheus
          - name: OTEL_TRACES_EXPORTER
            value: none
          - name: OTEL_EXPORTER_PROMETHEUS_HOST
            value: 0.0.0.0
        readinessProbe:
          exec:
            command: [ "/wrapper-server-tools/grpc-health-probe", "-addr", "localhost:9446" ]
        livenessProbe:
          exec:
            command: [ "/wrapper-server-tools/grpc-health-probe", "-addr", "localhost:9446" ]
        volumeMounts:
          - name: wrapper-server-tools
            mountPath: /wrapper-server-tools
        imagePullPolicy: IfNotPresent
    volumes:
      - name: wrapper-server-tools
        emptyDir: { }
---
apiVersion: config.porch.kpt.dev/v1alpha1
kind: ServiceTemplate
metadata:
  name: base-service-template
  namespace: porch-fn-system
template:
  spec:
    ports:
      - port: 9446
        protocol: TCP
        targetPort: 9446
    selector:
      fn.kpt.dev/image: to-be-replaced
    type: ClusterIP
"#;

/// `23-function-configurations.yaml`'s set-namespace. Its `prefixes: [""]`
/// (the default prefix) is spelled out: the dev cluster's API server (v1.20
/// built with a newer Go) reads an empty string in a custom resource as
/// null and refuses it.
const SET_NAMESPACE: &str = r#"
apiVersion: config.porch.kpt.dev/v1alpha1
kind: FunctionConfig
metadata:
  name: set-namespace
  namespace: porch-fn-system
spec:
  image: set-namespace
  prefixes:
    - ghcr.io/kptdev/krm-functions-catalog/
    - ghcr.io/kptdev/krm-functions-catalog
  podExecutor:
    tags:
      - v0.4.1
    timeToLive: 30m
  binaryExecutor:
    tags:
      - v0.4.2
    path: set-namespace
  goExecutor:
    id: set-namespace
    tags:
      - v0.4
      - v0.4.5
"#;

/// Porch's ServiceTemplate CRD (`config.porch.kpt.dev_servicetemplates.yaml`),
/// its schema cut to what this cluster's API server (v1.20) reads: a
/// `template` object, kept as written.
const SERVICE_TEMPLATE_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicetemplates.config.porch.kpt.dev
spec:
  group: config.porch.kpt.dev
  names:
    kind: ServiceTemplate
    listKind: ServiceTemplateList
    plural: servicetemplates
    singular: servicetemplate
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          required: [template]
          properties:
            template:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"#;

/// The documents of `text`, Porch's namespaces renamed to the test's, and
/// Porch's two images to ours.
fn documents(text: &str, system: &str, functions: &str, images: (&str, &str)) -> Vec<Value> {
    text.replace("porch-fn-system", functions)
        .replace("porch-system", system)
        .replace(PORCH_RUNNER_IMAGE, images.0)
        .replace(PORCH_WRAPPER_IMAGE, images.1)
        .split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// What this cluster needs to run a Deployment that talks to the API server
/// (see the module docs); the images and Porch's command line stay.
fn patch_for_this_cluster(deployment: &mut Value, kubeconfig_secret: &str) {
    let spec = &mut deployment["spec"]["template"]["spec"];
    let container = &mut spec["containers"][0];
    container["env"].as_sequence_mut().unwrap().push(
        serde_yaml_ng::from_str(&format!(
            "{{name: KUBECONFIG, value: {KUBECONFIG_DIR}/kubeconfig}}"
        ))
        .unwrap(),
    );
    container["volumeMounts"] = serde_yaml_ng::from_str(&format!(
        "[{{name: kubeconfig, mountPath: {KUBECONFIG_DIR}, readOnly: true}}]"
    ))
    .unwrap();
    spec["hostNetwork"] = true.into();
    spec["dnsPolicy"] = "ClusterFirstWithHostNet".into();
    spec["terminationGracePeriodSeconds"] = 15.into();
    // Readable by the runner's user (10001): mode 0444 (292).
    spec["volumes"] = serde_yaml_ng::from_str(&format!(
        "[{{name: kubeconfig, secret: {{secretName: {kubeconfig_secret}, defaultMode: 292}}}}]"
    ))
    .unwrap();
}

/// One EvaluateFunction of the example ResourceList through the runner's
/// Service; the output ResourceList.
async fn call(
    fns: &mut proto::pb::function_evaluator_client::FunctionEvaluatorClient<
        tonic::transport::Channel,
    >,
    image: &str,
    resource_list: String,
) -> Result<String, tonic::Status> {
    let mut request = tonic::Request::new(EvaluateFunctionRequest {
        resource_list: resource_list.into(),
        image: image.to_string(),
        tag: String::new(),
    });
    request.set_timeout(Duration::from_secs(90));
    let response = fns.evaluate_function(request).await?.into_inner();
    Ok(String::from_utf8_lossy(&response.resource_list).into_owned())
}

#[tokio::test]
async fn porchs_manifests_with_our_images_serve_under_porchs_rbac() {
    let Some(kubeconfig) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let ca_bundle = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
    let client = cluster().await;
    let id = std::process::id();
    let system = format!("krm-swap-sys-{id}");
    let functions = format!("krm-swap-fn-{id}");
    let runner_image = format!("localhost/krm-test/function-runner:{id}-swap");
    let wrapper_image = format!("localhost/krm-test/wrapper-server:{id}-swap");

    // Dropped in reverse: the runner's namespace, then the function pods',
    // then the registry (see deploy.rs).
    let (mut registry, registry_addr) = start_registry().unwrap();
    let fn_image = format!("{registry_addr}/fns/swap:{id}");
    registry.images = vec![fn_image.clone()];
    let _registry = registry;
    let _function_namespace = Cleanup {
        namespace: functions.clone(),
        images: vec![wrapper_image.clone()],
    };
    let _runner_namespace = Cleanup {
        namespace: system.clone(),
        images: vec![runner_image.clone()],
    };
    build_runner_image(&runner_image, ca_bundle).unwrap();
    build_image(
        &wrapper_image,
        &wrapper_dockerfile(),
        &["wrapper-server", "health-probe"],
    )
    .unwrap();
    build_image(&fn_image, EXAMPLE_FN_DOCKERFILE, &["example-fn"]).unwrap();
    docker(&["push", "-q", &fn_image]).unwrap();

    // The CRDs, installed (or brought to this tree's) and left installed:
    // deleting one deletes every object of its kind in the cluster.
    install_crd(&client).await;
    let crd: Value = serde_yaml_ng::from_str(SERVICE_TEMPLATE_CRD).unwrap();
    apply(&client, MANAGER, &crd, false).await.unwrap();
    wait_crd_established(&client).await;
    let service_templates_served = eventually_async(Duration::from_secs(30), async || {
        let gvk =
            kube::api::GroupVersionKind::gvk("config.porch.kpt.dev", "v1alpha1", "ServiceTemplate");
        kube::discovery::pinned_kind(&client, &gvk).await.is_ok()
    })
    .await;
    assert!(service_templates_served, "the ServiceTemplate CRD");

    let images = (runner_image.as_str(), wrapper_image.as_str());
    let namespaces: Vec<Value> = [&system, &functions]
        .iter()
        .map(|ns| {
            serde_yaml_ng::from_str(&format!(
                "{{apiVersion: v1, kind: Namespace, metadata: {{name: {ns}}}}}"
            ))
            .unwrap()
        })
        .collect();
    for doc in &namespaces {
        apply(&client, MANAGER, doc, false).await.unwrap();
    }
    // Porch's Role binds the identity kube-cluster knows the runner by
    // (porch-system's ServiceAccount), as written.
    let identity = runner_kubeconfig();
    let mut rbac = documents(RBAC, &system, &functions, images);
    for doc in rbac
        .iter_mut()
        .filter(|d| str_at(d, "kind") == "RoleBinding")
    {
        for subject in doc["subjects"].as_sequence_mut().unwrap() {
            subject["namespace"] = "porch-system".into();
        }
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &system);
    let mut secret = Secret::default();
    secret.metadata.name = Some("runner-kubeconfig".to_string());
    secret.string_data = Some(BTreeMap::from([(
        "kubeconfig".to_string(),
        std::fs::read_to_string(identity.as_deref().unwrap_or(&kubeconfig)).unwrap(),
    )]));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    // A FunctionConfig that Porch's runner finalized before the swap, and
    // one for the registry's function: its podExecutor warms a pod.
    let (fn_repository, fn_tag) = fn_image.rsplit_once(':').unwrap();
    let own = format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: swap\n  namespace: porch-fn-system\n  finalizers: [config.porch.kpt.dev/functionconfig-function-runner]\nspec:\n  image: {fn_repository}\n  podExecutor:\n    tags: ['{fn_tag}']\n    timeToLive: 30m\n"
    );
    let mut docs = rbac;
    docs.extend(documents(TEMPLATES, &system, &functions, images));
    docs.extend(documents(SET_NAMESPACE, &system, &functions, images));
    docs.extend(documents(&own, &system, &functions, images));
    for mut doc in documents(RUNNER, &system, &functions, images) {
        if str_at(&doc, "kind") == "Deployment" {
            let container = &doc["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(
                str_at(container, "image"),
                runner_image,
                "the image swapped"
            );
            patch_for_this_cluster(&mut doc, "runner-kubeconfig");
        }
        docs.push(doc);
    }
    for doc in &docs {
        apply(&client, MANAGER, doc, false)
            .await
            .unwrap_or_else(|err| panic!("applying {doc:?}: {err}"));
    }

    // Ready by Porch's probe (the kubelet runs it in the runner's container).
    let runner_pods: Api<Pod> = Api::namespaced(client.clone(), &system);
    let ready = eventually_async(Duration::from_secs(120), async || {
        runner_pods
            .list(&ListParams::default().labels("app=function-runner"))
            .await
            .is_ok_and(|pods| pods.items.iter().any(is_ready))
    })
    .await;
    assert!(
        ready,
        "the runner pod is not Ready:\n{}",
        runner_report(&runner_pods).await
    );

    // Through the runner's Service.
    let services: Api<Service> = Api::namespaced(client.clone(), &system);
    let cluster_ip = services
        .get("function-runner")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let endpoint = format!("http://{cluster_ip}:9445");
    let mut fns = None;
    eventually_async(Duration::from_secs(60), async || {
        fns = evaluator_client(&endpoint, 64 << 20).await.ok();
        fns.is_some()
    })
    .await;
    let Some(mut fns) = fns else {
        panic!(
            "no connection to the runner's Service at {endpoint}\n{}",
            runner_report(&runner_pods).await
        );
    };
    // The catalog's set-namespace: Porch's binary is not in our image, the
    // built-in answers.
    let with_namespace =
        resource_list().replace("    owner: team-shop\n", "    namespace: swapped\n");
    let catalogs = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2";
    let out = match call(&mut fns, catalogs, with_namespace).await {
        Ok(out) => out,
        Err(status) => panic!("{status:?}\n{}", runner_report(&runner_pods).await),
    };
    assert!(out.contains("namespace: swapped"), "{out}");
    // The registry's function, in a pod of Porch's templates.
    let out = match call(&mut fns, &fn_image, resource_list()).await {
        Ok(out) => out,
        Err(status) => panic!("{status:?}\n{}", runner_report(&runner_pods).await),
    };
    assert!(out.contains("owner: team-shop"), "{out}");
    let function_pods: Api<Pod> = Api::namespaced(client.clone(), &functions);
    let pods = function_pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let pod = pods
        .iter()
        .find(|p| {
            p.spec.as_ref().is_some_and(|s| {
                s.containers
                    .iter()
                    .any(|c| c.image.as_deref() == Some(fn_image.as_str()))
            })
        })
        .unwrap_or_else(|| panic!("no function pod: {pods:?}"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.init_containers.as_ref().unwrap()[0].image.as_deref(),
        Some(wrapper_image.as_str()),
        "the init image is WRAPPER_SERVER_IMAGE"
    );
    assert!(
        spec.readiness_gates.is_none(),
        "no readiness gate without pods/status: {:?}",
        spec.readiness_gates
    );
    // Its Service from Porch's ServiceTemplate: its spec (an unnamed port).
    let fn_services: Api<Service> = Api::namespaced(client.clone(), &functions);
    let service = fn_services
        .get(pod.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    let ports = service.spec.unwrap().ports.unwrap();
    assert_eq!((ports[0].port, ports[0].name.as_deref()), (9446, None));

    let report = runner_report(&runner_pods).await;
    for said in [
        "the readiness gate fn.kpt.dev/serving is off",
        "Events on function pods are off",
        "idle pools (FunctionConfig idlePods) are off",
    ] {
        assert!(report.contains(said), "{said:?} not said:\n{report}");
    }
    assert!(!report.contains("NOT_SERVING"), "{report}");

    // Deleted FunctionConfigs go: the runner takes the finalizer off, also
    // the one Porch's runner put on before the swap.
    let configs = functionconfigs(&client, &functions);
    for name in ["swap", "set-namespace"] {
        configs
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        let gone = eventually_async(Duration::from_secs(30), async || {
            configs.get_opt(name).await.unwrap().is_none()
        })
        .await;
        assert!(
            gone,
            "FunctionConfig {name} stays Terminating\n{}",
            runner_report(&runner_pods).await
        );
    }

    // The runner goes before its namespaces (see Cleanup).
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &system);
    deployments
        .delete("function-runner", &DeleteParams::background())
        .await
        .unwrap();
    let stopped = eventually_async(Duration::from_secs(60), async || {
        runner_pods
            .list(&ListParams::default().labels("app=function-runner"))
            .await
            .is_ok_and(|pods| pods.items.is_empty())
    })
    .await;
    assert!(stopped, "{}", runner_report(&runner_pods).await);
}
