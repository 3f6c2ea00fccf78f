//! The runner under real RBAC, as its ServiceAccount, with the Roles of
//! `deploy/rbac.yaml` and nothing else: a function pod's whole life (create,
//! traffic gate, Service, serve operation, events, drain, delete, finalizer)
//! needs no right those Roles do not grant.
//!
//! Needs a cluster whose API server enforces RBAC and knows the identity
//! `system:serviceaccount:porch-system:porch-fn-runner`, with its kubeconfig
//! beside `KUBECONFIG` (`kube-cluster` started with `KAS_AUTHORIZATION=RBAC`
//! and that identity in `KAS_USERS`, as `.ci/run` starts it).

#![allow(clippy::unwrap_used)]

#[path = "support/kube.rs"]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use e2e_tests::{eventually_async, prerequisite, require_kubeconfig};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ListParams, PostParams};
use kube::Api;
use nix::sys::signal::Signal;
use support::{setup, EXAMPLE_FN_DOCKERFILE};

/// The runner's identity, as `deploy/rbac.yaml` binds it.
const IDENTITY: &str = "system:serviceaccount:porch-system:porch-fn-runner";

/// The identity's kubeconfig, which `kube-cluster` writes beside the
/// admin's when `KAS_USERS` names it.
fn require_runner_kubeconfig() -> anyhow::Result<PathBuf> {
    let admin = require_kubeconfig()?;
    let dir = admin.parent().context("KUBECONFIG has no directory")?;
    let name: String = IDENTITY
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
        "no {}: the cluster was not started with KAS_AUTHORIZATION=RBAC and KAS_USERS={IDENTITY}=... (see .ci/run)",
        path.display()
    );
    Ok(path)
}

#[tokio::test]
async fn a_pods_whole_life_needs_no_right_beyond_deploy_rbac() {
    let Some(kubeconfig) = prerequisite(require_runner_kubeconfig()) else {
        return;
    };
    let Some(s) = setup("rbac", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    // The Roles and RoleBindings as written, in the test's namespace (both
    // the pods' and the runner's own); their subject stays the identity.
    let manifests =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml"))
            .unwrap();
    let roles: Api<Role> = Api::namespaced(s.client.clone(), &s.namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut applied = 0;
    for doc in manifests.split("\n---\n") {
        let value: serde_json::Value = serde_yaml_ng::from_str(doc).unwrap();
        match value["kind"].as_str() {
            Some("Role") => {
                let mut role: Role = serde_json::from_value(value).unwrap();
                role.metadata.namespace = Some(s.namespace.clone());
                roles.create(&PostParams::default(), &role).await.unwrap();
                applied += 1;
            }
            Some("RoleBinding") => {
                let mut binding: RoleBinding = serde_json::from_value(value).unwrap();
                binding.metadata.namespace = Some(s.namespace.clone());
                bindings
                    .create(&PostParams::default(), &binding)
                    .await
                    .unwrap();
                applied += 1;
            }
            _ => {}
        }
    }
    assert!(applied >= 4, "the Roles and their bindings: {applied}");

    // Enforced: what no Role grants is refused to the identity.
    let as_runner = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let elsewhere: Api<Pod> = Api::namespaced(as_runner, "kube-system");
    let refused = elsewhere.list(&ListParams::default()).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
        "RBAC is not enforced: {refused:?}"
    );

    let runner = s.runner_as(&kubeconfig, "runner-rbac", &[]);
    for attempt in ["cold", "warm"] {
        let out = s.call(&runner).await;
        assert!(
            out.contains("owner: team-shop"),
            "{attempt}: {out}\n{}",
            runner.logs()
        );
    }
    let pods = s.live_pods().await;
    assert_eq!(pods.len(), 1, "{:?}", pods.keys());
    let (name, pod) = pods.into_iter().next().unwrap();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["operation-type.fn.kpt.dev/runner-rbac"], "serve");
    // Its events were published (a refused one is only logged at debug).
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(s.client.clone(), &s.namespace);
    let published = eventually_async(Duration::from_secs(30), async || {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reporting_instance.as_deref() == Some("runner-rbac")
                    && e.reason.as_deref() == Some("Serving")
            })
    })
    .await;
    assert!(published, "no Serving event from the runner");
    // Shutdown drains, deletes and unprotects the pod: all of it allowed.
    let mut runner = runner;
    runner.signal(Signal::SIGTERM);
    let status = runner.wait_exit(Duration::from_secs(60)).await.unwrap();
    let logs = runner.logs();
    assert!(status.success(), "{status:?}\n{logs}");
    let gone = eventually_async(Duration::from_secs(60), async || {
        s.pods.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(gone, "the pod stays: {logs}");
    // Not a bare "403": timestamps and pod names contain it (".064033Z" failed a CI run).
    for denied in ["code: 403", "forbidden", "Forbidden"] {
        assert!(!logs.contains(denied), "a request was refused: {logs}");
    }
}
