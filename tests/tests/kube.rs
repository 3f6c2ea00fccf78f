//! Function pods in a real Kubernetes cluster: the one `KUBECONFIG` names
//! (`.ci/run` starts `../shared/tools/kube-cluster`, a single node whose
//! kubelet runs on this machine's Docker engine). The images are built here,
//! `FROM scratch`, into that engine: the wrapper image from `Dockerfile`,
//! and a function image holding `example-fn`.

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e_tests::{
    build_image, docker, evaluator_client, eventually_async, health_status, prerequisite,
    remove_images, require_docker, require_kubeconfig, require_registry, require_root,
    start_private_registry, Wrapper,
};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service};
use kube::api::PostParams;
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use proto::pb::EvaluateFunctionRequest;
use runner_kube::lifecycle;
use runner_kube::pods::is_ready;
use runner_kube::registry::{ensure_pull_secret, Ensured};
use runner_kube::template::{FunctionPod, Template};
use support::{
    call, cluster, create_namespace, grant_runner_roles, runner_kubeconfig, setup, start_runner_as,
    wrapper_dockerfile, Cleanup, EXAMPLE_FN_DOCKERFILE,
};

fn pod_ready(pod: Option<&Pod>) -> bool {
    pod.is_some_and(is_ready)
}

#[tokio::test]
async fn the_built_in_template_serves_a_function_on_its_pod_ip_and_service() {
    let Some(_) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let Some(()) = prerequisite(require_docker()) else {
        return;
    };
    let client = cluster().await;

    let id = std::process::id();
    let wrapper_image = format!("localhost/krm-test/wrapper-server:{id}");
    let fn_image = format!("localhost/krm-test/example-fn:{id}");
    let namespace = format!("krm-test-{id}");
    let _cleanup = Cleanup {
        namespace: namespace.clone(),
        images: vec![wrapper_image.clone(), fn_image.clone()],
    };

    // The images, into the engine the kubelet runs pods with.
    build_image(
        &wrapper_image,
        &wrapper_dockerfile(),
        &["wrapper-server", "health-probe"],
    )
    .unwrap();
    build_image(&fn_image, EXAMPLE_FN_DOCKERFILE, &["example-fn"]).unwrap();

    create_namespace(&client, &namespace).await;

    let function_pod = FunctionPod {
        name: runner_core::backend::pod_name(&fn_image, "1"),
        namespace: namespace.clone(),
        image: fn_image.clone(),
        entrypoint: vec!["/example-fn".to_string()],
        wrapper_image: wrapper_image.clone(),
        max_message_bytes: proto::DEFAULT_MAX_MESSAGE_BYTES,
        prespawn: None,
        owner: format!("e2e-{id}"),
        reclaim_after: 4_000_000_000,
        pull_secret: None,
        deployment: None,
        readiness_gate: true,
    };
    let template = Template::inline();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    pods.create(
        &PostParams::default(),
        &function_pod.pod(&template, None).unwrap(),
    )
    .await
    .unwrap();
    let service = services
        .create(&PostParams::default(), &function_pod.service(&template))
        .await
        .unwrap();

    // ContainersReady means the installed probe found the wrapper SERVING:
    // the init copy, the restricted security context and the command all
    // worked. The pod is Ready only once its serving gate is True (the
    // runner sets it; here the test does).
    let containers = tokio::time::timeout(
        Duration::from_secs(90),
        await_condition(pods.clone(), &function_pod.name, |pod: Option<&Pod>| {
            pod.is_some_and(lifecycle::containers_ready)
        }),
    )
    .await;
    let pod = pods.get(&function_pod.name).await.unwrap();
    assert!(
        matches!(containers, Ok(Ok(_))),
        "the pod's containers did not become ready: {:?}",
        pod.status
    );
    assert!(!is_ready(&pod), "Ready before its gate: {:?}", pod.status);
    let uid = pod.metadata.uid.clone().unwrap();
    let set = lifecycle::set_gate(&pods, &function_pod.name, &uid, None, true, "test")
        .await
        .unwrap();
    assert!(matches!(set, lifecycle::Outcome::Done(_)), "{set:?}");
    let ready = tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(pods.clone(), &function_pod.name, pod_ready),
    )
    .await;
    let pod = pods.get(&function_pod.name).await.unwrap();
    assert!(
        matches!(ready, Ok(Ok(_))),
        "the pod did not become Ready: {:?}",
        pod.status
    );
    let pod_ip = pod.status.unwrap().pod_ip.unwrap();
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();

    let rl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/resourcelist.yaml"
    ))
    .unwrap();
    for host in [pod_ip, cluster_ip] {
        let endpoint = format!("http://{host}:9446");
        // A new Service's ClusterIP refuses connections until kube-proxy has
        // programmed it, a moment after the pod is Ready.
        let mut connected = None;
        eventually_async(Duration::from_secs(30), async || {
            connected = evaluator_client(&endpoint, 1 << 20).await.ok();
            connected.is_some()
        })
        .await;
        let mut client = connected.unwrap_or_else(|| panic!("cannot connect to {endpoint}"));
        let mut request = tonic::Request::new(EvaluateFunctionRequest {
            resource_list: rl.clone().into(),
            image: fn_image.clone(),
            tag: String::new(),
        });
        request.set_timeout(Duration::from_secs(30));
        let resp = client
            .evaluate_function(request)
            .await
            .unwrap_or_else(|status| panic!("{endpoint}: {status:?}"))
            .into_inner();
        let out = String::from_utf8_lossy(&resp.resource_list);
        assert!(out.contains("owner: team-shop"), "{endpoint}: {out}");
    }
}

#[tokio::test]
async fn serve_runs_functions_in_pods_it_creates_and_deletes() {
    // In the registry: the runner reads the function's entrypoint there.
    let Some(s) = setup("example-fn", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let id = std::process::id();
    let owner = format!("e2e-{id}");
    let runner = s.runner(&owner, &[]);
    // Cold: the runner reads the entrypoint, creates the Pod and its
    // Service, and waits for Ready; warm: the same pod.
    for attempt in ["cold", "warm"] {
        let out = s.call(&runner).await;
        assert!(out.contains("owner: team-shop"), "{attempt}: {out}");
    }
    let listed = s.pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "one pod for two calls: {listed:?}");
    let labels = listed[0].metadata.labels.clone().unwrap();
    assert_eq!(labels["fn.kpt.dev/runner"], owner);
    assert_eq!(labels["fn.kpt.dev/image"], format!("example-fn_{id}"));
    let annotations = listed[0].metadata.annotations.clone().unwrap();
    assert!(annotations.contains_key("fn.kpt.dev/reclaim-after"));
    let name = listed[0].metadata.name.clone().unwrap();
    assert!(s.services.get(&name).await.is_ok(), "the pod's Service");

    // SIGTERM: the runner drains, then deletes what it created (once the
    // kubelet has the pod Ready: see `Setup::wait_ready`).
    assert!(s.wait_ready(&name).await, "pod {name} never Ready");
    s.stop(runner).await;
    let gone = eventually_async(Duration::from_secs(60), async || {
        let service = s.services.get_opt(&name).await.ok().flatten();
        service.is_none() && s.gone(&name).await
    })
    .await;
    assert!(gone, "the runner left its pod or Service behind");
}

/// The registry's CA where the Docker engine, and so the kubelet, reads it
/// at each pull (no restart needed): `/etc/docker/certs.d/ADDR/ca.crt`;
/// removed on drop.
struct DockerTrust {
    dir: PathBuf,
    /// `certs.d` itself, when this made it.
    made_parent: Option<PathBuf>,
}

impl DockerTrust {
    fn new(addr: &str, ca_pem: &str) -> anyhow::Result<DockerTrust> {
        let parent = Path::new("/etc/docker/certs.d");
        let made_parent = (!parent.exists()).then(|| parent.to_path_buf());
        let trust = DockerTrust {
            dir: parent.join(addr),
            made_parent,
        };
        std::fs::create_dir_all(&trust.dir)?;
        std::fs::write(trust.dir.join("ca.crt"), ca_pem)?;
        Ok(trust)
    }
}

impl Drop for DockerTrust {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(parent) = &self.made_parent {
            // Only if empty: someone else may have put a CA there meanwhile.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// The node's InternalIP: in this cluster, the Docker bridge's address on
/// this machine, where both the engine and the runner reach a registry.
async fn node_address(client: &Client) -> IpAddr {
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = nodes.list(&Default::default()).await.unwrap().items;
    let address = listed
        .iter()
        .flat_map(|n| n.status.iter().flat_map(|s| s.addresses.iter().flatten()))
        .find(|a| a.type_ == "InternalIP")
        .unwrap_or_else(|| panic!("no node has an InternalIP: {listed:?}"));
    address
        .address
        .parse()
        .unwrap_or_else(|err| panic!("the node address {:?}: {err}", address.address))
}

#[tokio::test]
async fn private_images_are_read_and_pulled_with_the_auth_file_and_the_ca() {
    let Some(_) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let Some(()) = prerequisite(require_registry()) else {
        return;
    };
    // To put the CA where the Docker engine reads it.
    let Some(()) = prerequisite(require_root()) else {
        return;
    };
    let client = cluster().await;
    let id = std::process::id();
    // Not on loopback: Docker checks no certificate of a registry on
    // 127.0.0.0/8 (it counts them as insecure), so there the pull would not
    // show that the engine trusts the CA.
    let private = start_private_registry(node_address(&client).await).unwrap();
    let _trust = DockerTrust::new(&private.addr, &private.ca_pem().unwrap()).unwrap();
    let wrapper_image = format!("localhost/krm-test/wrapper-server:{id}-private");
    let fn_image = format!("{}/fns/example-fn:{id}", private.addr);
    let namespace = format!("krm-test-{id}-private");
    let _cleanup = Cleanup {
        namespace: namespace.clone(),
        images: vec![wrapper_image.clone(), fn_image.clone()],
    };
    build_image(
        &wrapper_image,
        &wrapper_dockerfile(),
        &["wrapper-server", "health-probe"],
    )
    .unwrap();
    build_image(&fn_image, EXAMPLE_FN_DOCKERFILE, &["example-fn"]).unwrap();
    private.push(&fn_image).unwrap();
    // Only in the registry now: the kubelet must pull it.
    remove_images(std::slice::from_ref(&fn_image));
    assert!(docker(&["image", "inspect", &fn_image]).is_err());
    create_namespace(&client, &namespace).await;
    let kubeconfig = runner_kubeconfig();
    if kubeconfig.is_some() {
        grant_runner_roles(&client, &namespace).await;
    }

    let mut runner = start_runner_as(
        &[
            "--metrics-port",
            "0",
            "--backend",
            "kube",
            "--pod-namespace",
            &namespace,
            "--kube-dial",
            "pod-ip",
            "--wrapper-server-image",
            &wrapper_image,
            "--runner-id",
            &format!("e2e-{id}-private"),
            "--enable-private-registries",
            "--registry-auth-secret-path",
            &private.auth_file.to_string_lossy(),
            "--enable-private-registries-tls",
            "--tls-secret-path",
            &private.tls_dir.to_string_lossy(),
        ],
        kubeconfig.as_deref(),
    );
    let out = call(&runner, &fn_image).await;
    assert!(out.contains("owner: team-shop"), "{out}");

    // The pull Secret holds the auth file's bytes, and the pod names it.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets.get("auth-secret").await.unwrap();
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    let data = secret.data.unwrap_or_default();
    assert_eq!(
        data.get(".dockerconfigjson").map(|b| b.0.clone()),
        Some(std::fs::read(&private.auth_file).unwrap())
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let listed = pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let pull_secrets: Vec<String> = listed[0]
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(pull_secrets, ["auth-secret"]);
    // The kubelet pulled it, through the engine.
    assert!(docker(&["image", "inspect", &fn_image]).is_ok());

    runner.signal(nix::sys::signal::Signal::SIGTERM);
    let status = runner.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert!(status.success(), "{status:?}\n{}", runner.logs());
}

#[tokio::test]
async fn the_pull_secret_is_created_then_updated_only_when_the_file_changes() {
    let Some(_) = prerequisite(require_kubeconfig()) else {
        return;
    };
    let client = cluster().await;
    let namespace = format!("krm-test-{}-secret", std::process::id());
    let _cleanup = Cleanup {
        namespace: namespace.clone(),
        images: Vec::new(),
    };
    create_namespace(&client, &namespace).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let first = br#"{"auths": {"r.example.com": {"auth": "dTpw"}}}"#;
    let second = br#"{"auths": {"r.example.com": {"auth": "dTpx"}}}"#;
    let ensure = |bytes: &'static [u8]| ensure_pull_secret(&secrets, "auth-secret", bytes);
    assert_eq!(ensure(first).await.unwrap(), Ensured::Created);
    assert_eq!(ensure(first).await.unwrap(), Ensured::Unchanged);
    let before = secrets.get("auth-secret").await.unwrap();
    assert_eq!(ensure(second).await.unwrap(), Ensured::Updated);
    let after = secrets.get("auth-secret").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid, "updated in place");
    assert_eq!(after.data.unwrap()[".dockerconfigjson"].0, second.to_vec());

    // A Secret of another type by that name cannot become a pull Secret.
    let mut opaque = Secret::default();
    opaque.metadata.name = Some("taken".to_string());
    secrets
        .create(&PostParams::default(), &opaque)
        .await
        .unwrap();
    let err = ensure_pull_secret(&secrets, "taken", first)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("image pull Secret taken exists with type \"Opaque\""),
        "{err}"
    );
}

/// #31 items 1 and 2: a function whose pods cannot start is that function's
/// failure, not the runner's. An image its registry does not have answers
/// NOT_FOUND; a wrapper image no pod can pull fails the call as soon as the
/// kubelet says so, naming the image and where it was set. The runner stays
/// SERVING through both.
#[tokio::test]
async fn a_missing_image_is_not_found_and_an_unpullable_wrapper_is_named_with_its_source() {
    let Some(s) = setup("unstartable", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    const SERVING: i32 = 1;
    let call = async |runner: &Wrapper, image: &str| {
        let mut fns = runner.client().await.unwrap();
        let mut request = tonic::Request::new(EvaluateFunctionRequest {
            resource_list: support::resource_list().into(),
            image: image.to_string(),
            tag: String::new(),
        });
        request.set_timeout(Duration::from_secs(100));
        fns.evaluate_function(request).await
    };

    let runner = s.runner("runner-missing", &[]);
    let missing = format!("{}/fns/no-such-fn:v1", s.registry_addr);
    let status = call(&runner, &missing).await.expect_err("no such image");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    assert!(
        status.message().contains("no-such-fn") && status.message().contains("not in its registry"),
        "{status:?}"
    );
    assert_eq!(
        health_status(&runner.endpoint(), "").await.unwrap(),
        SERVING
    );
    assert!(s.live_pods().await.is_empty(), "no pod for a missing image");
    s.stop(runner).await;

    // The wrapper image from the environment, as deploy/ sets it.
    let wrapper = "localhost/krm-test/no-such-wrapper:1";
    let runner = s.runner_env(
        "runner-badwrapper",
        // Longer than the call: an error is the kubelet's answer, not a timeout.
        &["--pod-ready-timeout", "300s"],
        &[("WRAPPER_SERVER_IMAGE", wrapper)],
    );
    let status = call(&runner, &s.fn_image).await.expect_err("no wrapper");
    let message = status.message();
    assert_ne!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    for part in [wrapper, "env WRAPPER_SERVER_IMAGE", "init container"] {
        assert!(message.contains(part), "{part:?} not in {status:?}");
    }
    assert_eq!(
        health_status(&runner.endpoint(), "").await.unwrap(),
        SERVING
    );
    s.stop(runner).await;
    // The pod that could not start is deleted.
    let cleared = eventually_async(Duration::from_secs(60), async || {
        s.live_pods().await.is_empty()
    })
    .await;
    assert!(cleared, "{:?}", s.live_pods().await.keys());
}

/// OpenTelemetry on the cluster: a call with a `traceparent` through `serve
/// --backend kube` is one trace, from the runner's call span (its pod start
/// with the kube steps under the wait in the pod cache) to the wrapper in
/// the function pod, which exports its spans with the settings the runner
/// passed on, to a real OTLP receiver on the node's address.
#[tokio::test]
async fn a_call_on_the_cluster_is_one_trace_from_the_caller_to_the_function() {
    use e2e_tests::otlp::Receiver;
    let Some(setup) = setup("otel", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let host = node_address(&setup.client).await;
    let receiver = Receiver::grpc(std::net::SocketAddr::new(host, 0))
        .await
        .unwrap();
    let endpoint = receiver.endpoint();
    let runner = setup.runner_env(
        "otel",
        &[],
        &[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let trace_id = "5bf92f3577b34da6a3ce929d0e0e4737";
    let caller = "10f067aa0ba902b8";
    let mut client = runner.client().await.unwrap();
    let mut request = tonic::Request::new(EvaluateFunctionRequest {
        resource_list: support::resource_list().into(),
        image: setup.fn_image.clone(),
        tag: String::new(),
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{caller}-01").parse().unwrap(),
    );
    tokio::time::timeout(Duration::from_secs(120), client.evaluate_function(request))
        .await
        .expect("the call answers within 2 minutes")
        .unwrap_or_else(|status| panic!("{status}\nlogs:\n{}", runner.logs()));
    let spans = receiver
        .wait_for(Duration::from_secs(30), |s| {
            // The runner's own call spans end after the wrapper's, and may
            // come in a later batch: wait for them too.
            let runner_call = |kind: i32| {
                s.iter().any(|x| {
                    x.service == "function-runner"
                        && x.name == "evaluator.FunctionEvaluator/EvaluateFunction"
                        && x.kind == kind
                })
            };
            s.iter()
                .any(|x| x.service == "wrapper-server" && x.name == "function")
                && s.iter().any(|x| x.name == "kube.ready")
                && runner_call(2)
                && runner_call(3)
        })
        .await;
    let shown: String = spans
        .iter()
        .map(|s| {
            format!(
                "{} {} {} parent={}\n",
                s.service, s.name, s.span_id, s.parent_id
            )
        })
        .collect();
    let find = |service: &str, name: &str, kind: Option<i32>| {
        spans
            .iter()
            .find(|s| s.service == service && s.name == name && kind.is_none_or(|k| s.kind == k))
            .unwrap_or_else(|| panic!("no {service} {name} in\n{shown}\nlogs:\n{}", runner.logs()))
    };
    let call_name = "evaluator.FunctionEvaluator/EvaluateFunction";
    let call = find("function-runner", call_name, Some(2));
    assert_eq!(
        (call.trace_id.as_str(), call.parent_id.as_str()),
        (trace_id, caller),
        "{shown}"
    );
    assert_eq!(call.attribute("evaluator"), Some("pod"));
    let wait = find("function-runner", "pod_cache.get", None);
    assert_eq!(wait.parent_id, call.span_id, "{shown}");
    let start = find("function-runner", "pod.start", None);
    assert_eq!(start.parent_id, wait.span_id, "{shown}");
    assert_eq!(start.attribute("backend"), Some("kube"));
    for step in ["kube.create", "kube.ready"] {
        let span = find("function-runner", step, None);
        assert_eq!(span.trace_id, trace_id, "{shown}");
    }
    let client_span = find("function-runner", call_name, Some(3));
    assert_eq!(client_span.parent_id, call.span_id, "{shown}");
    let served = find("wrapper-server", call_name, Some(2));
    assert_eq!(served.trace_id, trace_id, "{shown}");
    assert_eq!(served.parent_id, client_span.span_id, "{shown}");
    let function = find("wrapper-server", "function", None);
    assert_eq!(function.parent_id, served.span_id, "{shown}");
    assert_eq!(function.attribute("exit_code"), Some("0"));
}
