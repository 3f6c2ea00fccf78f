//! The `deploy/` manifests, applied to the real cluster `KUBECONFIG` names
//! (see kube.rs), with the runner image built from `Dockerfile.runner`: the
//! runner Deployment's pod becomes Ready and serves one EvaluateFunction,
//! through its Service, that runs a function pod.
//!
//! The package is rendered first, as an operator customises it
//! (docs/deploy.md, "Customising the package"): a copy of `deploy/` with its
//! Kptfile's setters set to the test's namespaces and images, rendered by
//! the built `function-runner render`, so parallel tests and leftovers never
//! collide. What is rendered is applied as it is except for a few test-only
//! patches (see [`patch_for_this_cluster`]). The runner acts as its
//! ServiceAccount's identity under enforced RBAC where the cluster has it
//! (as `.ci/run` starts it), so the Roles and RoleBindings are exercised as
//! rendered, but for their subject's namespace: the cluster's identity is
//! `porch-system`'s, not the test's.
//!
//! Then the operator's day two: the metrics are scraped as Prometheus would
//! (the pod's scrape annotations, and the Service's `metrics` port), and
//! deleting the Deployment takes its function pods and their Services with
//! it.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e_tests::deploy_pkg::render_deploy_package;
use e2e_tests::{
    build_image, build_runner_image, docker, evaluator_client, eventually_async, prerequisite,
    require_kubeconfig, require_registry, start_registry,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use proto::pb::EvaluateFunctionRequest;
use runner_kube::pods::is_ready;
use serde_yaml_ng::Value;
use support::{
    apply, cluster, resource_list, runner_kubeconfig, runner_report, str_at, wait_crd_established,
    wrapper_dockerfile, Cleanup, EXAMPLE_FN_DOCKERFILE,
};

/// The manifests the runner needs, in the order docs/deploy.md gives.
const MANIFESTS: &[&str] = &["namespaces.yaml", "rbac.yaml", "function-runner.yaml"];

/// The field manager of the test's server-side applies.
const MANAGER: &str = "krm-deploy-test";

/// The FunctionConfig CRD (from the crd branch's generator).
const CRD: &str = "functionconfig-crd.yaml";

/// Where the test-only kubeconfig Secret is mounted in the runner.
const KUBECONFIG_DIR: &str = "/var/run/krm-test";

/// Debian's CA bundle, where Dockerfile.runner expects it in the image too.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The host's CA bundle, which Dockerfile.runner copies into the image.
fn require_ca_bundle() -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(CA_BUNDLE);
    if !path.is_file() {
        anyhow::bail!("no CA bundle at {CA_BUNDLE} for the runner image (Debian: ca-certificates)");
    }
    Ok(path)
}

/// The documents of the rendered package's `FILE`.
fn documents(package: &Path, file: &str) -> Vec<Value> {
    let path = package.join(file).display().to_string();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("reading {path}: {err}"));
    text.split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap_or_else(|err| panic!("{path}: {err}")))
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// What the test changes in the runner Deployment so that it runs in this
/// cluster; none of it belongs in a real deployment. The images are the
/// render's (the setters), only checked here.
struct ClusterPatch<'a> {
    runner_image: &'a str,
    wrapper_image: &'a str,
    /// The runner's gRPC port on the host.
    port: u16,
    /// Its metrics port on the host.
    metrics_port: u16,
    registry: &'a str,
    runner_id: &'a str,
    kubeconfig_secret: &'a str,
}

/// Applies [`ClusterPatch`] to the Deployment, checking on the way that the
/// render set what the operator swaps (the two images) and that the
/// manifest has the probes docs/deploy.md describes.
fn patch_for_this_cluster(deployment: &mut Value, p: &ClusterPatch<'_>) {
    let port = p.port.to_string();
    let metrics_port = p.metrics_port.to_string();
    {
        // Prometheus' pod discovery finds the metrics by these.
        let annotations = &mut deployment["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"));
        assert_eq!(annotations["prometheus.io/path"].as_str(), Some("/metrics"));
        assert_eq!(annotations["prometheus.io/port"].as_str(), Some("9464"));
        annotations["prometheus.io/port"] = metrics_port.clone().into();
    }
    let spec = &mut deployment["spec"]["template"]["spec"];
    {
        let container = &mut spec["containers"][0];
        assert_eq!(container["name"].as_str(), Some("function-runner"));
        assert_eq!(container["image"].as_str(), Some(p.runner_image));
        let env = container["env"].as_sequence_mut().unwrap();
        let wrapper = env
            .iter()
            .find(|e| e["name"].as_str() == Some("WRAPPER_SERVER_IMAGE"))
            .expect("env WRAPPER_SERVER_IMAGE");
        assert_eq!(wrapper["value"].as_str(), Some(p.wrapper_image));
        // No service account token here (the ServiceAccount admission plugin
        // is off), so in-cluster authentication cannot work: the runner reads
        // the test's kubeconfig instead, from a Secret.
        env.push(
            serde_yaml_ng::from_str(&format!(
                "{{name: KUBECONFIG, value: {KUBECONFIG_DIR}/kubeconfig}}"
            ))
            .unwrap(),
        );
        container["volumeMounts"] = serde_yaml_ng::from_str(&format!(
            "[{{name: kubeconfig, mountPath: {KUBECONFIG_DIR}, readOnly: true}}]"
        ))
        .unwrap();
        let command = &mut container["readinessProbe"]["exec"]["command"];
        let expected: Value =
            serde_yaml_ng::from_str("[/health-probe, -addr, 'localhost:9445']").unwrap();
        assert_eq!(*command, expected, "readinessProbe");
        command[2] = format!("localhost:{port}").into();
        // Liveness is the port answering (a restart fixes no RBAC); by the
        // port's name, so it follows the port below.
        assert_eq!(
            container["livenessProbe"]["tcpSocket"]["port"].as_str(),
            Some("grpc")
        );
        // hostNetwork (below): the ports are the host's, so free ones.
        let expected: Value = serde_yaml_ng::from_str(
            "[{name: grpc, containerPort: 9445}, {name: metrics, containerPort: 9464}]",
        )
        .unwrap();
        assert_eq!(container["ports"], expected);
        container["ports"] = serde_yaml_ng::from_str(&format!(
            "[{{name: grpc, containerPort: {port}}}, {{name: metrics, containerPort: {metrics_port}}}]"
        ))
        .unwrap();
        let args = container["args"].as_sequence_mut().unwrap();
        for arg in [
            format!("--port={port}"),
            format!("--metrics-port={metrics_port}"),
            // The test's registry speaks plain HTTP.
            format!("--insecure-registries={}", p.registry),
            // With hostNetwork HOSTNAME is the node's name, not the pod's.
            format!("--runner-id={}", p.runner_id),
        ] {
            args.push(arg.into());
        }
    }
    // hostNetwork: the test's registry and the API server listen on the
    // host's 127.0.0.1 (the kubeconfig's server), which a pod on the Docker
    // bridge cannot reach. ClusterFirstWithHostNet keeps the cluster DNS the
    // pod would have without hostNetwork.
    spec["hostNetwork"] = true.into();
    // Time for the runner to delete its function pods when the Deployment
    // is deleted (seconds here: no call runs), short enough that a pod the
    // ReplicaSet makes while Cleanup deletes the namespace goes soon too.
    spec["terminationGracePeriodSeconds"] = 15.into();
    spec["dnsPolicy"] = "ClusterFirstWithHostNet".into();
    // Readable by the runner's non-root user: mode 0444 (292).
    spec["volumes"] = serde_yaml_ng::from_str(&format!(
        "[{{name: kubeconfig, secret: {{secretName: {}, defaultMode: 292}}}}]",
        p.kubeconfig_secret
    ))
    .unwrap();
}

#[tokio::test]
async fn the_deploy_manifests_run_the_runner_image_which_serves_a_function_pod() {
    let Some(kubeconfig) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    let Some(ca_bundle) = prerequisite(require_ca_bundle()) else {
        return;
    };
    let client = cluster().await;
    let id = std::process::id();
    let system = format!("krm-deploy-sys-{id}");
    let functions = format!("krm-deploy-fn-{id}");
    let runner_image = format!("localhost/krm-test/function-runner:{id}-deploy");
    let wrapper_image = format!("localhost/krm-test/wrapper-server:{id}-deploy");
    let runner_id = format!("deploy-{id}");

    // Dropped in the reverse order of these lines: the runner's namespace
    // first (then its image, which no container uses any more), then the
    // function pods' (then the wrapper image), then the registry (and the
    // function image). An image removed while a pod still runs it is only
    // untagged, and stays behind.
    let (mut registry, registry_addr) = start_registry().unwrap();
    let _registry = {
        let fn_image = format!("{registry_addr}/fns/deploy:{id}");
        registry.images = vec![fn_image];
        registry
    };
    let _function_namespace = Cleanup {
        namespace: functions.clone(),
        images: vec![wrapper_image.clone()],
    };
    let _runner_namespace = Cleanup {
        namespace: system.clone(),
        images: vec![runner_image.clone()],
    };
    let fn_image = _registry.images[0].clone();

    build_runner_image(&runner_image, &ca_bundle).unwrap();
    build_image(
        &wrapper_image,
        &wrapper_dockerfile(),
        &["wrapper-server", "health-probe"],
    )
    .unwrap();
    build_image(&fn_image, EXAMPLE_FN_DOCKERFILE, &["example-fn"]).unwrap();
    docker(&["push", "-q", &fn_image]).unwrap();

    // The package as the operator renders it, into a copy (removed with
    // `rendered`): the setters name the test's namespaces and images.
    let rendered = tempfile::tempdir().unwrap();
    let package = rendered.path().join("deploy");
    render_deploy_package(
        &package,
        &[
            ("runner-namespace", &system),
            ("function-namespace", &functions),
            ("runner-image", &runner_image),
            ("wrapper-server-image", &wrapper_image),
        ],
    )
    .unwrap();
    let mut docs: Vec<Value> = MANIFESTS
        .iter()
        .flat_map(|file| documents(&package, file))
        .collect();
    // The runner's credentials: its ServiceAccount's identity, which the
    // cluster knows as porch-system's (.ci/run's KAS_USERS): the subjects
    // the render moved to the test's namespace name it again.
    let identity = runner_kubeconfig();
    if identity.is_some() {
        for doc in docs
            .iter_mut()
            .filter(|d| str_at(d, "kind") == "RoleBinding")
        {
            for subject in doc["subjects"].as_sequence_mut().unwrap() {
                subject["namespace"] = "porch-system".into();
            }
        }
    }
    let kinds: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (
                str_at(d, "kind").to_string(),
                str_at(&d["metadata"], "name").to_string(),
            )
        })
        .collect();
    for wanted in [
        ("Namespace", system.as_str()),
        ("Namespace", functions.as_str()),
        ("ServiceAccount", "porch-fn-runner"),
        ("Deployment", "function-runner"),
        ("Service", "function-runner"),
    ] {
        assert!(
            kinds.contains(&(wanted.0.to_string(), wanted.1.to_string())),
            "{wanted:?} in {kinds:?}"
        );
    }

    // The namespaces first: the kubeconfig Secret goes into the runner's.
    let (namespaces, rest): (Vec<Value>, Vec<Value>) = docs
        .drain(..)
        .partition(|d| str_at(d, "kind") == "Namespace");
    for doc in &namespaces {
        apply(&client, MANAGER, doc, false).await.unwrap();
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

    // The FunctionConfig CRD, installed (or brought to this tree's) and left
    // installed, as functionconfig_crd.rs does: deleting it would delete
    // every FunctionConfig of the tests running beside this one.
    for crd in documents(&package, CRD) {
        apply(&client, MANAGER, &crd, false).await.unwrap();
    }
    wait_crd_established(&client).await;
    // The examples are valid FunctionConfigs (a dry run: they name catalog
    // images this cluster cannot pull).
    for example in documents(&package, "functionconfigs.yaml") {
        apply(&client, MANAGER, &example, true)
            .await
            .unwrap_or_else(|err| panic!("the CRD refuses {example:?}: {err}"));
    }
    // One for the test's function, shaped as the examples: the runner reads
    // it from the pod namespace and its pod gets the overrides.
    let (fn_repository, fn_tag) = fn_image.rsplit_once(':').unwrap();
    let config: Value = serde_yaml_ng::from_str(&format!(
        "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {{name: deploy-test, namespace: {functions}}}\nspec:\n  image: {fn_repository}\n  podExecutor:\n    tags: ['{fn_tag}']\n    timeToLive: 30m\n    templateOverrides:\n      container:\n        resources: {{requests: {{cpu: 50m, memory: 32Mi}}, limits: {{memory: 128Mi}}}}\n"
    ))
    .unwrap();
    apply(&client, MANAGER, &config, false).await.unwrap();

    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let port = free_port();
    let metrics_port = free_port();
    for mut doc in rest {
        if str_at(&doc, "kind") == "Deployment" {
            patch_for_this_cluster(
                &mut doc,
                &ClusterPatch {
                    runner_image: &runner_image,
                    wrapper_image: &wrapper_image,
                    port,
                    metrics_port,
                    registry: &registry_addr,
                    runner_id: &runner_id,
                    kubeconfig_secret: "runner-kubeconfig",
                },
            );
        }
        apply(&client, MANAGER, &doc, false)
            .await
            .unwrap_or_else(|err| panic!("applying {doc:?}: {err}"));
    }

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

    // Through the runner's Service (its ClusterIP, which this host reaches).
    let services: Api<Service> = Api::namespaced(client.clone(), &system);
    let service = services.get("function-runner").await.unwrap();
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();
    // The Service routes once the endpoints controller listed the Ready pod
    // and kube-proxy wrote its rules (until then the dev cluster rejects the
    // ClusterIP): connecting is retried, bounded.
    let endpoint = format!("http://{cluster_ip}:9445");
    let mut connected_client = None;
    let mut last_error = String::new();
    eventually_async(Duration::from_secs(60), async || {
        match evaluator_client(&endpoint, 64 << 20).await {
            Ok(connected) => connected_client = Some(connected),
            Err(err) => last_error = format!("{err:#}"),
        }
        connected_client.is_some()
    })
    .await;
    let Some(mut fns) = connected_client else {
        panic!(
            "no connection to the runner's Service at {endpoint}: {last_error}\n{}",
            runner_report(&runner_pods).await
        );
    };
    let mut request = tonic::Request::new(EvaluateFunctionRequest {
        resource_list: resource_list().into(),
        image: fn_image.clone(),
        tag: String::new(),
    });
    request.set_timeout(Duration::from_secs(90));
    let response = match fns.evaluate_function(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => panic!("call: {status:?}\n{}", runner_report(&runner_pods).await),
    };
    let out = String::from_utf8_lossy(&response.resource_list);
    assert!(out.contains("owner: team-shop"), "{out}");
    // Through the function pod's Service, by its DNS name (the manifest's
    // dial mode), on the first try.
    let report = runner_report(&runner_pods).await;
    assert!(
        report.contains(&format!(".{functions}.svc.cluster.local:9446")),
        "not dialled by the Service's name\n{report}"
    );
    assert!(
        !report.contains("pod unavailable; evicting"),
        "the new pod's Service refused the first call\n{report}"
    );

    // It ran in a function pod of the runner's, in the pod namespace.
    let function_pods: Api<Pod> = Api::namespaced(client.clone(), &functions);
    let pods = function_pods
        .list(&ListParams::default().labels(&format!("fn.kpt.dev/runner={runner_id}")))
        .await
        .unwrap()
        .items;
    assert_eq!(pods.len(), 1, "one function pod");
    assert!(is_ready(&pods[0]));
    let function = pods[0]
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == "function")
        .unwrap();
    let resources = serde_yaml_ng::to_string(&function.resources).unwrap();
    assert!(
        resources.contains("cpu: 50m") && resources.contains("memory: 128Mi"),
        "the FunctionConfig's templateOverrides: {resources}"
    );

    // And says so in its status.
    let gvk = GroupVersionKind::gvk("config.porch.kpt.dev", "v1alpha1", "FunctionConfig");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    let configs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &functions, &resource);
    let mut last = None;
    let applied = eventually_async(Duration::from_secs(60), async || {
        last = configs.get_opt("deploy-test").await.ok().flatten();
        last.as_ref().is_some_and(|o| {
            o.data["status"]["functionRunnerObservedGeneration"].as_i64() == o.metadata.generation
        })
    })
    .await;
    assert!(applied, "the FunctionConfig's status: {last:?}");

    // #31 item 6: scraped as Prometheus finds it: the pod's annotations
    // name the port and path on the pod's address; and through the
    // Service's `metrics` port.
    let runner_pod = runner_pods
        .list(&ListParams::default().labels("app=function-runner"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(is_ready)
        .unwrap();
    let annotations = runner_pod.metadata.annotations.clone().unwrap_or_default();
    let pod_ip = runner_pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    let scraped = e2e_tests::http_get(
        &format!("{pod_ip}:{}", annotations["prometheus.io/port"]),
        &annotations["prometheus.io/path"],
    )
    .await
    .unwrap();
    assert!(
        scraped.contains("function_runner_backend_ready 1"),
        "{scraped}"
    );
    assert!(
        scraped.contains("function_runner_pod_starts_total{outcome=\"ok\"} 1"),
        "{scraped}"
    );
    let service = services.get("function-runner").await.unwrap();
    let metrics = service
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a port named metrics");
    assert_eq!(metrics.port, 9464);
    let mut via_service = Err(std::io::Error::other("not tried"));
    let reached = eventually_async(Duration::from_secs(60), async || {
        via_service = e2e_tests::http_get(&format!("{cluster_ip}:9464"), "/metrics").await;
        via_service
            .as_ref()
            .is_ok_and(|text| text.contains("function_runner_backend_ready"))
    })
    .await;
    assert!(reached, "through the Service: {via_service:?}");

    // #31 item 5: uninstalling, the Deployment deleted as `kubectl delete`
    // does (in the background), takes its function pods and their Services
    // with it: the runner, told to stop, finds its Deployment gone.
    let deployment_uid = deployments_uid(&client, &system).await;
    let labels = pods[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("fn.kpt.dev/runner-deployment"),
        Some(&deployment_uid),
        "the function pod names the runner's Deployment"
    );
    // And one left by a replica of it that was killed: not this runner's,
    // still in that replica's rotation as far as its labels say (its serve
    // operation not stale for a TTL yet), and no runner of the Deployment
    // left to delete it later.
    let mut orphan = pods[0].clone();
    let orphan_name = format!("{}-orphan", orphan.metadata.name.clone().unwrap());
    let mut orphan_labels = labels.clone();
    orphan_labels.insert("fn.kpt.dev/runner".into(), "gone-replica".into());
    orphan_labels.insert("fn.kpt.dev/pod".into(), orphan_name.clone());
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    orphan_labels.insert(
        "operating.fn.kpt.dev/gone-replica".into(),
        now_ns.to_string(),
    );
    orphan_labels.insert(
        "operation-type.fn.kpt.dev/gone-replica".into(),
        "serve".into(),
    );
    orphan.metadata = kube::api::ObjectMeta {
        name: Some(orphan_name),
        labels: Some(orphan_labels),
        annotations: orphan.metadata.annotations.clone(),
        finalizers: orphan.metadata.finalizers.clone(),
        ..Default::default()
    };
    orphan.status = None;
    function_pods
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let report = runner_report(&runner_pods).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &system);
    deployments
        .delete("function-runner", &DeleteParams::background())
        .await
        .unwrap();
    let function_services: Api<Service> = Api::namespaced(client.clone(), &functions);
    let mut left = String::new();
    let cleared = eventually_async(Duration::from_secs(120), async || {
        let pods = function_pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let services = function_services
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        left = format!(
            "pods {:?}, services {:?}",
            pods.iter().map(|p| &p.metadata.name).collect::<Vec<_>>(),
            services
                .iter()
                .map(|s| &s.metadata.name)
                .collect::<Vec<_>>()
        );
        pods.is_empty() && services.is_empty()
    })
    .await;
    assert!(
        cleared,
        "left after the Deployment went: {left}\nthe runner before:\n{report}"
    );
}

/// The uid of the runner's Deployment.
async fn deployments_uid(client: &Client, namespace: &str) -> String {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    deployments
        .get("function-runner")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}
