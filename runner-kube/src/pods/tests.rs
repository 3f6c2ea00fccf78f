//! Reading pod objects: when a pod has ended, Endpoints listing a pod, pod
//! names as Service names.

use super::naming::{name_key, service_name};
use super::readiness::{ended, lists_address};
use super::*;

fn pod(json: serde_json::Value) -> Pod {
    serde_json::from_value(json).unwrap()
}

#[test]
fn a_pod_has_ended_when_deleted_finished_or_its_container_terminated() {
    let running = pod(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "function", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"running": {}}}]}
    }));
    assert_eq!(ended(&running), None);
    let oom = pod(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "function", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}
    }));
    assert_eq!(
        ended(&oom).unwrap(),
        "container function terminated (OOMKilled, exit code 137)"
    );
    let failed = pod(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Failed", "reason": "Evicted"}
    }));
    assert_eq!(ended(&failed).unwrap(), "ended (Failed: Evicted)");
    let deleting = pod(serde_json::json!({
        "metadata": {"name": "p", "deletionTimestamp": "2026-11-23T00:00:00Z"}
    }));
    assert_eq!(ended(&deleting).unwrap(), "is being deleted");
}

#[test]
fn a_pod_that_cannot_pull_has_ended_and_a_finished_init_container_has_not() {
    let pulling = pod(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Pending",
          "initContainerStatuses": [
            {"name": "copy-wrapper-server", "image": "w", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
          "containerStatuses": [
            {"name": "function", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}
    }));
    assert_eq!(
        ended(&pulling).unwrap(),
        "container function cannot start (ImagePullBackOff: no such image)"
    );
    let initialised = pod(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Running",
          "initContainerStatuses": [
            {"name": "copy-wrapper-server", "image": "w", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
    }));
    assert_eq!(ended(&initialised), None);
}

#[test]
fn names_are_service_names_too() {
    assert_eq!(
        service_name("set-namespace-v1-ab-0".into()),
        "set-namespace-v1-ab-0"
    );
    assert_eq!(service_name("2fa-fn-v1-ab-0".into()), "fn-2fa-fn-v1-ab-0");
    let long = format!("9{}", "a".repeat(62));
    let name = service_name(long);
    assert!(
        name.len() <= 63 && name.starts_with("fn-") && name.ends_with('a'),
        "{name}"
    );
    assert_eq!(name_key(&["a", "b"]), name_key(&["a", "b"]));
    assert_ne!(name_key(&["a", "b"]), name_key(&["ab", ""]));
    assert_eq!(name_key(&[]), "811c9dc5");
}

#[test]
fn endpoints_list_the_pod_once_its_ip_is_a_ready_address() {
    let endpoints: Endpoints = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "subsets": [{"addresses": [{"ip": "172.17.0.2"}], "notReadyAddresses": [{"ip": "172.17.0.3"}]}]
    }))
    .unwrap();
    assert!(lists_address(Some(&endpoints), "172.17.0.2"));
    assert!(!lists_address(Some(&endpoints), "172.17.0.3"));
    assert!(!lists_address(None, "172.17.0.2"));
}
