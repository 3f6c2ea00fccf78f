//! What the cluster tests share: a client, a namespace of their own that is
//! deleted however the test ends, and the images they build.

#![allow(dead_code, clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use e2e_tests::{eventually_blocking, output_within, remove_images};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

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
                let namespaces: Api<Namespace> = Api::all(client);
                let _ = tokio::time::timeout(
                    bounded,
                    namespaces.delete(&namespace, &DeleteParams::default()),
                )
                .await;
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
