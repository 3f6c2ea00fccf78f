//! What the cluster tests share: a client, a namespace of their own that is
//! deleted however the test ends, and the images they build.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use e2e_tests::{
    build_image, docker, eventually_blocking, output_within, prerequisite, remove_images,
    require_kubeconfig, require_registry, start_registry, Registry, Wrapper,
};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;
use runner_kube::crd::{self, CRD_NAME};
use serde_json::{json, Value};

/// The function image: `example-fn` as its entrypoint, not root.
pub const EXAMPLE_FN_DOCKERFILE: &str =
    "FROM scratch\nCOPY example-fn /example-fn\nUSER 65532:65532\nENTRYPOINT [\"/example-fn\"]\n";

/// The repository's Dockerfile: the wrapper image.
pub fn wrapper_dockerfile() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile")).unwrap()
}

/// The example ResourceList.
pub fn resource_list() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/resourcelist.yaml"
    ))
    .unwrap()
}

/// One EvaluateFunction of the example ResourceList with `image` through
/// `runner`; the output ResourceList (a failed call panics, with the
/// runner's log).
pub async fn call(runner: &Wrapper, image: &str) -> String {
    let mut fns = runner.client().await.unwrap();
    let mut request = tonic::Request::new(EvaluateFunctionRequest {
        resource_list: resource_list().into(),
        image: image.to_string(),
        tag: String::new(),
    });
    request.set_timeout(Duration::from_secs(90));
    let resp = fns
        .evaluate_function(request)
        .await
        .unwrap_or_else(|status| panic!("call: {status:?}\n{}", runner.logs()))
        .into_inner();
    String::from_utf8_lossy(&resp.resource_list).into_owned()
}

/// The runner's identity, as `deploy/rbac.yaml` binds it.
pub const RUNNER_IDENTITY: &str = "system:serviceaccount:porch-system:porch-fn-runner";

/// The runner identity's kubeconfig, which `kube-cluster` writes beside the
/// admin's when `KAS_USERS` names it.
pub fn require_runner_kubeconfig() -> anyhow::Result<PathBuf> {
    let admin = require_kubeconfig()?;
    let dir = admin.parent().context("KUBECONFIG has no directory")?;
    let name: String = RUNNER_IDENTITY
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let path = dir.join(format!("kubeconfig.{name}"));
    anyhow::ensure!(
        path.is_file(),
        "no {}: the cluster was not started with KAS_AUTHORIZATION=RBAC and KAS_USERS={RUNNER_IDENTITY}=... (see .ci/run)",
        path.display()
    );
    Ok(path)
}

/// The credentials the tests' runners act with: the runner identity's where
/// the cluster has it (a right missing from `deploy/rbac.yaml` then fails
/// the test, as it would fail in production); in CI it must. Elsewhere the
/// admin's, said once per test.
pub fn runner_kubeconfig() -> Option<PathBuf> {
    match require_runner_kubeconfig() {
        Ok(path) => Some(path),
        Err(why) if e2e_tests::in_ci() => {
            panic!("{why:#} (CI is set: the runners must act as their ServiceAccount)")
        }
        Err(why) => {
            eprintln!("NOTE: {why:#}: the runner acts as the admin, RBAC untested");
            None
        }
    }
}

/// `deploy/rbac.yaml`'s Roles and RoleBindings, as written but in
/// `namespace` (both the pods' and the runner's own): their subject stays
/// the runner identity. How many objects that made.
pub async fn grant_runner_roles(client: &Client, namespace: &str) -> usize {
    let manifests =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml"))
            .unwrap();
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let mut applied = 0;
    for doc in manifests.split("\n---\n") {
        let value: serde_json::Value = serde_yaml_ng::from_str(doc).unwrap();
        match value["kind"].as_str() {
            Some("Role") => {
                let mut role: Role = serde_json::from_value(value).unwrap();
                role.metadata.namespace = Some(namespace.to_string());
                roles.create(&PostParams::default(), &role).await.unwrap();
                applied += 1;
            }
            Some("RoleBinding") => {
                let mut binding: RoleBinding = serde_json::from_value(value).unwrap();
                binding.metadata.namespace = Some(namespace.to_string());
                bindings
                    .create(&PostParams::default(), &binding)
                    .await
                    .unwrap();
                applied += 1;
            }
            _ => {}
        }
    }
    applied
}

/// `function-runner serve ARGS` on loopback, with `kubeconfig`'s
/// credentials if given (else the test's).
pub fn start_runner_as(args: &[&str], kubeconfig: Option<&Path>) -> Wrapper {
    start_runner_env(args, kubeconfig, &[])
}

/// [`start_runner_as`] with `env` added to the runner's environment.
pub fn start_runner_env(args: &[&str], kubeconfig: Option<&Path>, env: &[(&str, &str)]) -> Wrapper {
    let mut cmd = Command::new(e2e_tests::bin("function-runner"));
    cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .args(args)
        .envs(env.iter().copied());
    if let Some(kubeconfig) = kubeconfig {
        cmd.env("KUBECONFIG", kubeconfig);
    }
    Wrapper::spawn(cmd, "function-runner serving").unwrap()
}

/// A client for the cluster, bounded.
pub async fn cluster() -> Client {
    tokio::time::timeout(Duration::from_secs(10), Client::try_default())
        .await
        .expect("connecting to the cluster timed out")
        .expect("a client for KUBECONFIG")
}

/// Creates the test's own namespace.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Removes what the test created, however it ends: the namespace (and with
/// it the pods and Services; the pods at once, so the kubelet's containers
/// go too), then the images once no container uses them.
pub struct Cleanup {
    pub namespace: String,
    pub images: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which is blocked here, and a
        // kube Client works only while the runtime it was made on runs: a
        // thread with its own runtime and its own client does the deletes.
        let namespace = self.namespace.clone();
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = Client::try_default().await.unwrap();
                let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                let now = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                };
                let bounded = Duration::from_secs(30);
                let _ = tokio::time::timeout(
                    bounded,
                    pods.delete_collection(&now, &Default::default()),
                )
                .await;
                // A runner that was killed leaves the lifecycle's finalizer
                // on its pods: they and the namespace would stay.
                let _ = tokio::time::timeout(bounded, strip_finalizers(&pods)).await;
                // And Porch's finalizer on FunctionConfigs (a runner with
                // Porch's command line adds it, and removes it only while it
                // runs); no CRD, no list. Again once the namespace is being
                // deleted: a runner still stopping may have added it back
                // meanwhile (after that, it only takes it off).
                let fcs = functionconfigs(&client, &namespace);
                let _ = tokio::time::timeout(bounded, strip_finalizers(&fcs)).await;
                let namespaces: Api<Namespace> = Api::all(client.clone());
                let _ = tokio::time::timeout(
                    bounded,
                    namespaces.delete(&namespace, &DeleteParams::default()),
                )
                .await;
                let _ = tokio::time::timeout(bounded, strip_finalizers(&fcs)).await;
            });
        })
        .join();
        if deleted.is_err() {
            eprintln!("cleanup of namespace {} failed", self.namespace);
        }
        // The kubelet removes a deleted pod's containers within seconds; an
        // image still in use would only be untagged.
        for image in &self.images {
            eventually_blocking(Duration::from_secs(60), || {
                output_within(
                    Command::new("docker")
                        .args(["ps", "-aq", "--filter"])
                        .arg(format!("ancestor={image}")),
                    None,
                    Duration::from_secs(30),
                )
                .is_ok_and(|out| out.status.success() && out.stdout.is_empty())
            });
        }
        remove_images(&self.images);
    }
}

/// Takes every finalizer off every object of `api` that has one (a test's
/// leftovers, so that their namespace can go).
async fn strip_finalizers<K>(api: &Api<K>) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    for object in api.list(&Default::default()).await?.items {
        let meta = object.meta();
        if meta.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            let name = meta.name.clone().unwrap_or_default();
            let _ = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
    }
    Ok(())
}

/// Waits, at most 30 s, until the API server serves the FunctionConfig CRD.
pub async fn wait_crd_established(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, CRD_NAME, conditions::is_crd_established()),
    )
    .await;
    assert!(
        matches!(established, Ok(Ok(_))),
        "the CRD was not established: {established:?}"
    );
}

/// A namespace, the wrapper image, a registry holding the function image,
/// and what removes them all.
pub struct Setup {
    pub client: Client,
    pub namespace: String,
    pub wrapper_image: String,
    pub fn_image: String,
    pub registry_addr: String,
    pub pods: Api<Pod>,
    pub services: Api<Service>,
    /// What the runners act as ([`runner_kubeconfig`]).
    pub runner_kubeconfig: Option<PathBuf>,
    _cleanup: Cleanup,
    _registry: Registry,
}

/// `None` (test skipped) without a cluster or registry.
pub async fn setup(name: &str, fn_dockerfile: &str, binaries: &[&str]) -> Option<Setup> {
    setup_with_files(name, fn_dockerfile, binaries, &[]).await
}

/// [`setup`] with more files in the function image's build context.
pub async fn setup_with_files(
    name: &str,
    fn_dockerfile: &str,
    binaries: &[&str],
    files: &[(&str, &Path)],
) -> Option<Setup> {
    prerequisite(require_kubeconfig())?;
    prerequisite(require_registry())?;
    let client = cluster().await;
    let id = std::process::id();
    let (mut registry, addr) = start_registry().unwrap();
    let wrapper_image = format!("localhost/krm-test/wrapper-server:{id}-{name}");
    let fn_image = format!("{addr}/fns/{name}:{id}");
    let namespace = format!("krm-{name}-{id}");
    registry.images = vec![fn_image.clone()];
    let cleanup = Cleanup {
        namespace: namespace.clone(),
        images: vec![wrapper_image.clone()],
    };
    build_image(
        &wrapper_image,
        &wrapper_dockerfile(),
        &["wrapper-server", "health-probe"],
    )
    .unwrap();
    e2e_tests::build_image_with_files(&fn_image, fn_dockerfile, binaries, files).unwrap();
    docker(&["push", "-q", &fn_image]).unwrap();
    create_namespace(&client, &namespace).await;
    let runner_kubeconfig = runner_kubeconfig();
    if runner_kubeconfig.is_some() {
        grant_runner_roles(&client, &namespace).await;
    }
    Some(Setup {
        runner_kubeconfig,
        pods: Api::namespaced(client.clone(), &namespace),
        services: Api::namespaced(client.clone(), &namespace),
        client,
        namespace,
        wrapper_image,
        fn_image,
        registry_addr: addr,
        _cleanup: cleanup,
        _registry: registry,
    })
}

impl Setup {
    /// `serve --backend kube` in the test's namespace, dialling pod IPs
    /// (this host cannot resolve cluster DNS names).
    /// It acts as the runner identity under `deploy/rbac.yaml`'s Roles
    /// where the cluster has it.
    pub fn runner(&self, id: &str, extra: &[&str]) -> Wrapper {
        self.runner_with(id, extra, self.runner_kubeconfig.as_deref(), &[])
    }

    /// [`Setup::runner`] with `env` added to its environment; with
    /// `WRAPPER_SERVER_IMAGE` there, without the flag that would override it.
    pub fn runner_env(&self, id: &str, extra: &[&str], env: &[(&str, &str)]) -> Wrapper {
        self.runner_with(id, extra, self.runner_kubeconfig.as_deref(), env)
    }

    /// [`Setup::runner`] with the client credentials of `kubeconfig` (an
    /// identity of its own, under RBAC) instead of the test's.
    pub fn runner_as(&self, kubeconfig: &std::path::Path, id: &str, extra: &[&str]) -> Wrapper {
        self.runner_with(id, extra, Some(kubeconfig), &[])
    }

    fn runner_with(
        &self,
        id: &str,
        extra: &[&str],
        kubeconfig: Option<&std::path::Path>,
        env: &[(&str, &str)],
    ) -> Wrapper {
        let mut args = vec![
            "--metrics-port",
            "0",
            "--backend",
            "kube",
            "--pod-namespace",
            &self.namespace,
            "--runner-namespace",
            &self.namespace,
            "--kube-dial",
            "pod-ip",
            "--insecure-registries",
            &self.registry_addr,
            "--runner-id",
            id,
        ];
        if !env.iter().any(|(name, _)| *name == "WRAPPER_SERVER_IMAGE") {
            args.extend(["--wrapper-server-image", &self.wrapper_image]);
        }
        args.extend_from_slice(extra);
        start_runner_env(&args, kubeconfig, env)
    }

    /// One EvaluateFunction through `runner`; the output ResourceList.
    pub async fn call(&self, runner: &Wrapper) -> String {
        call(runner, &self.fn_image).await
    }

    /// The pods of the namespace not being deleted, by name.
    pub async fn live_pods(&self) -> BTreeMap<String, Pod> {
        self.pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.metadata.name.clone().unwrap(), p))
            .collect()
    }

    /// Whether the pod is gone or going.
    pub async fn gone(&self, name: &str) -> bool {
        self.pods
            .get_opt(name)
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    }

    /// Waits (at most 60 s) until the kubelet reports the pod `name`
    /// Ready; whether it did. A runner dialling pods by their IP hands a pod
    /// out before that (once its wrapper answers), and v1.20's kubelet was
    /// seen to take the delete of a pod it had not reported Ready yet only
    /// at its next resync, a minute or more later: a test that deletes the
    /// pod (or stops the runner, which does) soon after its first call and
    /// then waits for it to leave the API waits for this first.
    pub async fn wait_ready(&self, name: &str) -> bool {
        e2e_tests::eventually_async(Duration::from_secs(60), async || {
            self.pods
                .get_opt(name)
                .await
                .unwrap()
                .is_some_and(|pod| runner_kube::pods::is_ready(&pod))
        })
        .await
    }

    /// Waits (at most `within`) until the pod `name` has left the API
    /// (finalizers and all); whether it did.
    pub async fn wait_absent(&self, name: &str, within: Duration) -> bool {
        e2e_tests::eventually_async(within, async || {
            self.pods.get_opt(name).await.unwrap().is_none()
        })
        .await
    }

    pub async fn stop(&self, mut runner: Wrapper) {
        runner.signal(Signal::SIGTERM);
        let status = runner.wait_exit(Duration::from_secs(60)).await.unwrap();
        assert!(status.success(), "{status:?}\n{}", runner.logs());
    }
}

/// The Docker container of the pod's `function` container (the kubelet
/// labels its containers).
pub fn function_container(pod: &str) -> String {
    let out = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=io.kubernetes.pod.name={pod}"),
        "--filter",
        "label=io.kubernetes.container.name=function",
    ])
    .unwrap();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!id.is_empty(), "no function container for pod {pod}");
    id
}

/// A function pod template (the ConfigMap's `template` key) whose pods
/// carry the label `generation`, so that a test can tell its versions apart.
pub fn pod_template(wrapper_image: &str, generation: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {{generation: {generation}}}\nspec:\n  restartPolicy: Never\n  securityContext: {{runAsNonRoot: true, runAsUser: 65532}}\n  initContainers:\n  - name: copy-wrapper-server\n    image: {wrapper_image}\n    imagePullPolicy: IfNotPresent\n    command: [/wrapper-server, install, /wrapper-server-tools]\n    volumeMounts: [{{name: tools, mountPath: /wrapper-server-tools}}]\n  containers:\n  - name: function\n    image: replaced\n    imagePullPolicy: IfNotPresent\n    command: [/wrapper-server-tools/wrapper-server]\n    readinessProbe:\n      periodSeconds: 1\n      exec: {{command: [/wrapper-server-tools/grpc-health-probe, -addr, 'localhost:9446']}}\n    volumeMounts: [{{name: tools, mountPath: /wrapper-server-tools}}]\n  volumes: [{{name: tools, emptyDir: {{}}}}]\n"
    )
}

/// Waits until a call runs in pod `pod`'s function container: one of its
/// processes' command lines ends in `needle` (for the slow test function,
/// ` sleep 3`: the wrapper's and the shell's command lines hold it too, but
/// end in `exec cat`). Whether it did within 30 s.
pub async fn wait_call_running(pod: &str, needle: &str) -> bool {
    let container = function_container(pod);
    e2e_tests::eventually_async(Duration::from_secs(30), async || {
        docker(&["top", &container]).is_ok_and(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|line| line.trim_end().ends_with(needle))
        })
    })
    .await
}

/// Installs this tree's CRD (server-side apply: creates or updates it) and
/// waits until the API server serves the resource.
pub async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd::crd().unwrap();
    crds.patch(
        CRD_NAME,
        &PatchParams::apply("krm-e2e-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    wait_crd_established(client).await;
}

pub fn functionconfigs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.porch.kpt.dev", crd::VERSION, "FunctionConfig");
    let resource = ApiResource::from_gvk_with_plural(&gvk, crd::PLURAL);
    Api::namespaced_with(client.clone(), namespace, &resource)
}

pub fn functionconfig(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "FunctionConfig",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

/// A manifest document's string field `key` (a test's own manifests: a
/// missing one is the test's bug).
pub fn str_at<'a>(doc: &'a serde_yaml_ng::Value, key: &str) -> &'a str {
    doc[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {doc:?}"))
}

/// Server-side apply of one manifest document as `manager`, its resource
/// found by discovery; `dry_run` only asks the API server whether it would.
pub async fn apply(
    client: &Client,
    manager: &str,
    doc: &serde_yaml_ng::Value,
    dry_run: bool,
) -> Result<(), kube::Error> {
    let (group, version) = match str_at(doc, "apiVersion").split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", str_at(doc, "apiVersion")),
    };
    let gvk = GroupVersionKind::gvk(group, version, str_at(doc, "kind"));
    let (resource, caps): (ApiResource, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let metadata = &doc["metadata"];
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), str_at(metadata, "namespace"), &resource)
        }
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let mut params = PatchParams::apply(manager).force();
    params.dry_run = dry_run;
    api.patch(str_at(metadata, "name"), &params, &Patch::Apply(doc))
        .await?;
    Ok(())
}

/// What the runner's pods say, for a failure message.
pub async fn runner_report(pods: &Api<Pod>) -> String {
    let mut out = String::new();
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        out.push_str(&format!("pod {name}: {:?}\n", pod.status));
        let logs = pods
            .logs(&name, &kube::api::LogParams::default())
            .await
            .unwrap_or_else(|err| format!("(no logs: {err})"));
        out.push_str(&logs);
    }
    out
}
