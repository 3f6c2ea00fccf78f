//! When a function pod is ready and when it has ended: its wrapper
//! answering the runner's own health check on the pod's IP, its Pod's Ready
//! condition and container states, its address in the Service's Endpoints,
//! and the Service taking connections.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod};

/// Resolves once `address` takes a TCP connection; the caller bounds it.
pub(super) async fn service_accepts(address: &str) {
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(address),
        );
        if let Ok(Ok(_)) = attempt.await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The URI of the wrapper on the pod IP `ip` (an IPv6 address bracketed).
pub(super) fn wrapper_uri(ip: &str) -> String {
    let port = crate::names::WRAPPER_PORT;
    if ip.contains(':') {
        format!("http://[{ip}]:{port}")
    } else {
        format!("http://{ip}:{port}")
    }
}

/// Whether the wrapper at `ip` says SERVING within `within`: the runner's
/// own check, which a starting pod passes as soon as its wrapper listens,
/// up to the kubelet's relist (a second), a probe period and a status write
/// before the kubelet reports it Ready.
pub(super) async fn answers(ip: &str, within: Duration) -> bool {
    use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
    let check = async {
        let channel = tonic::transport::Endpoint::from_shared(wrapper_uri(ip))
            .ok()?
            .connect_timeout(within)
            .connect()
            .await
            .ok()?;
        let answer = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .ok()?;
        Some(answer.get_ref().status == ServingStatus::Serving as i32)
    };
    matches!(tokio::time::timeout(within, check).await, Ok(Some(true)))
}

/// Resolves once the wrapper at `ip` says SERVING, asked every `every`,
/// each attempt given `within`; the caller bounds it.
pub(super) async fn answering(ip: String, every: Duration, within: Duration) {
    while !answers(&ip, within).await {
        tokio::time::sleep(every).await;
    }
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Whether `endpoints` list `ip` as a ready address.
pub(super) fn lists_address(endpoints: Option<&Endpoints>, ip: &str) -> bool {
    endpoints
        .and_then(|e| e.subsets.as_ref())
        .is_some_and(|subsets| {
            subsets.iter().any(|s| {
                s.addresses
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|a| a.ip == ip))
            })
        })
}

pub(super) fn pod_ip(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.pod_ip.as_deref()
}

/// Why the pod can serve no more, if it cannot: it is being deleted, it
/// ended (Failed or Succeeded: function pods never restart), or its
/// function container terminated (OOM-killed included).
pub(super) fn ended(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("is being deleted".into());
    }
    terminated(pod)
}

/// Why the pod's containers cannot serve even the calls they have: it
/// ended, or its function container terminated or cannot start. (A pod
/// being deleted still answers the calls it has until its wrapper drained.)
pub(super) fn terminated(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if let Some(phase @ ("Failed" | "Succeeded")) = status.phase.as_deref() {
        let detail = status.reason.clone().unwrap_or_default();
        return Some(format!(
            "ended ({phase}{}{detail})",
            if detail.is_empty() { "" } else { ": " }
        ));
    }
    let init = status.init_container_statuses.iter().flatten();
    let containers = status.container_statuses.iter().flatten();
    let init_names: Vec<&str> = init.clone().map(|c| c.name.as_str()).collect();
    containers.chain(init).find_map(|c| {
        // Function pods never restart (restartPolicy Never), but an idle
        // pool's (a ReplicaSet's: Always) do: one that did has ended once.
        if c.restart_count > 0 {
            return Some(format!(
                "container {} restarted ({} times): it ended",
                c.name, c.restart_count
            ));
        }
        let state = c.state.as_ref()?;
        if let Some(terminated) = &state.terminated {
            // An init container that did its job is not an end.
            if terminated.exit_code == 0 && init_names.contains(&c.name.as_str()) {
                return None;
            }
            return Some(format!(
                "container {} terminated ({}, exit code {})",
                c.name,
                terminated.reason.as_deref().unwrap_or("no reason"),
                terminated.exit_code
            ));
        }
        // Waiting for what will not come by itself: fail now rather than at
        // the ready timeout.
        let waiting = state.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        (is_pull_failure(reason)
            || matches!(
                reason,
                "CreateContainerConfigError" | "CreateContainerError"
            ))
        .then(|| {
            format!(
                "container {} cannot start ({reason}: {})",
                c.name,
                waiting.message.as_deref().unwrap_or("")
            )
        })
    })
}

/// Whether a container waits for an image the kubelet cannot pull (and will
/// not, by itself).
pub(super) fn is_pull_failure(reason: &str) -> bool {
    matches!(
        reason,
        "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" | "InvalidImageName"
    )
}
