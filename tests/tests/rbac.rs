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

use std::time::Duration;

use e2e_tests::{eventually_async, health_status, prerequisite};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams};
use kube::Api;
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;
use support::{require_runner_kubeconfig, setup, EXAMPLE_FN_DOCKERFILE};

#[tokio::test]
async fn a_pods_whole_life_needs_no_right_beyond_deploy_rbac() {
    let Some(kubeconfig) = prerequisite(require_runner_kubeconfig()) else {
        return;
    };
    let Some(s) = setup("rbac", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    // setup() granted deploy/rbac.yaml's Roles in the test's namespace (both
    // the pods' and the runner's own); their subject stays the identity.
    assert_eq!(s.runner_kubeconfig.as_deref(), Some(kubeconfig.as_path()));

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

    let runner = s.runner("runner-rbac", &[]);
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
    // Shutdown drains, deletes and unprotects the pod: all of it allowed
    // (once the kubelet has it Ready: see `Setup::wait_ready`).
    assert!(s.wait_ready(&name).await, "pod {name} never Ready");
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
    // Not a bare "403": timestamps and pod names contain it (".064033Z" failed a CI run);
    // an API error is logged as "MESSAGE (REASON CODE)".
    for denied in ["Forbidden 403", "forbidden", "Forbidden"] {
        assert!(!logs.contains(denied), "a request was refused: {logs}");
    }
}

/// #31 item 1: a runner whose rights to start pods are taken away says so in
/// its health (NOT_SERVING: readiness sends calls elsewhere), its calls get
/// UNAVAILABLE naming the refused right, the log says it once in one line,
/// and it comes back by itself once the RoleBinding is back.
#[tokio::test]
async fn health_says_not_serving_while_rbac_refuses_pods_and_comes_back() {
    let Some(_) = prerequisite(require_runner_kubeconfig()) else {
        return;
    };
    let Some(s) = setup("denied", EXAMPLE_FN_DOCKERFILE, &["example-fn"]).await else {
        return;
    };
    let runner = s.runner("runner-denied", &[]);
    let endpoint = runner.endpoint();
    const SERVING: i32 = 1;
    const NOT_SERVING: i32 = 2;
    assert_eq!(health_status(&endpoint, "").await.unwrap(), SERVING);

    let bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &s.namespace);
    let binding = bindings.get("porch-function-executor").await.unwrap();
    bindings
        .delete("porch-function-executor", &Default::default())
        .await
        .unwrap();
    let call = async || {
        let mut fns = runner.client().await.unwrap();
        let mut request = tonic::Request::new(EvaluateFunctionRequest {
            resource_list: support::resource_list().into(),
            image: s.fn_image.clone(),
            tag: String::new(),
        });
        request.set_timeout(Duration::from_secs(90));
        fns.evaluate_function(request).await
    };
    // The authorizer sees the binding gone within moments.
    let mut last = None;
    let refused = eventually_async(Duration::from_secs(30), async || {
        last = Some(call().await);
        matches!(&last, Some(Err(status)) if status.code() == tonic::Code::Unavailable)
    })
    .await;
    assert!(refused, "{last:?}\n{}", runner.logs());
    let Some(Err(status)) = last else {
        unreachable!()
    };
    assert!(
        status.message().contains("cannot create resource \"pods\""),
        "the refused right is named: {status:?}"
    );
    // Health follows on the server's own task: at once, give or take.
    let down = eventually_async(Duration::from_secs(10), async || {
        health_status(&endpoint, "").await.ok() == Some(NOT_SERVING)
            && health_status(&endpoint, proto::EVALUATOR_SERVICE)
                .await
                .ok()
                == Some(NOT_SERVING)
    })
    .await;
    assert!(down, "{}", runner.logs());
    // More calls: still one line in the log, and never the client's dump
    // of the API's Status.
    for _ in 0..3 {
        assert!(call().await.is_err());
    }
    // Once per refused right (the pod watch may also relist meanwhile and
    // be refused its own right: a line of its own, once).
    let logs = runner.logs();
    for right in [
        "cannot create resource \"pods\"",
        "cannot watch resource \"pods\"",
        "cannot list resource \"pods\"",
    ] {
        let said = logs
            .lines()
            .filter(|l| l.contains("the API server refuses the runner:") && l.contains(right))
            .count();
        assert!(said <= 1, "{right}: said {said} times\n{logs}");
    }
    assert!(logs.contains("cannot create resource \"pods\""), "{logs}");
    assert!(
        !logs.contains("ErrorResponse") && !logs.contains("Status {"),
        "{logs}"
    );

    // The binding back: SERVING again without a call, and calls work.
    let again = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: binding.metadata.name.clone(),
            ..Default::default()
        },
        role_ref: binding.role_ref.clone(),
        subjects: binding.subjects.clone(),
    };
    bindings
        .create(&PostParams::default(), &again)
        .await
        .unwrap();
    let back = eventually_async(Duration::from_secs(60), async || {
        health_status(&endpoint, "").await.ok() == Some(SERVING)
    })
    .await;
    assert!(back, "{}", runner.logs());
    // Said just before health turns: the test reads the runner's stderr on
    // a thread of its own, which may not have it yet.
    let said = eventually_async(Duration::from_secs(10), async || {
        runner.logs().contains("health SERVING")
    })
    .await;
    assert!(said, "{}", runner.logs());
    let out = s.call(&runner).await;
    assert!(out.contains("owner: team-shop"), "{out}");
    s.stop(runner).await;
}
