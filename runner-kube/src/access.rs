//! Whether the API server lets the runner do what its function pods need.
//!
//! A refusal (403 Forbidden, 401 Unauthorized) on the pod watch or on a
//! pod's start breaks every call until someone fixes RBAC or credentials;
//! until then the runner says so: its health turns NOT_SERVING (a replica
//! that cannot start pods leaves its Service's endpoints), the log says
//! which right is missing once when it goes and once when it comes back (not
//! once per call or retry), and the metrics carry the state. A refused right
//! is asked about again every [`RECHECK`] with a SelfSubjectAccessReview,
//! which every authenticated user may create (`system:basic-user`), so the
//! runner turns SERVING again by itself once the right is back, even with
//! no call coming (its readiness keeps calls away).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;
use tokio::sync::watch;

/// How often refused rights are asked about again.
pub const RECHECK: Duration = Duration::from_secs(5);

/// What the runner asked to do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Right {
    pub verb: String,
    /// API group, `""` for the core group.
    pub group: String,
    pub resource: String,
    /// `""`: cluster-wide.
    pub namespace: String,
}

impl Right {
    /// `authenticate`: a 401, the runner's credentials themselves refused.
    fn authentication() -> Right {
        Right {
            verb: "authenticate".into(),
            group: String::new(),
            resource: String::new(),
            namespace: String::new(),
        }
    }
}

impl std::fmt::Display for Right {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.resource.is_empty() {
            return f.write_str("authenticate to the API server");
        }
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if !self.namespace.is_empty() {
            write!(f, " in namespace {}", self.namespace)?;
        }
        Ok(())
    }
}

/// The refusal of an API request, as the API server's message says it:
/// RBAC's `pods is forbidden: User "U" cannot create resource "pods" in API
/// group "" in the namespace "N"` (a cluster-wide one ends `at the cluster
/// scope`), or a 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub right: Right,
    /// Who was refused, when the message says.
    pub user: String,
    pub message: String,
}

impl Refusal {
    /// The refusal `err` is, if it is one.
    pub fn of(err: &kube::Error) -> Option<Refusal> {
        let kube::Error::Api(status) = err else {
            return None;
        };
        match status.code {
            401 => Some(Refusal {
                right: Right::authentication(),
                user: String::new(),
                message: status.message.clone(),
            }),
            // RBAC's (or another authorizer's) refusal names the user and
            // what was refused. Other 403s are not about the runner's
            // rights: a quota exceeded, an admission webhook or Pod Security
            // denying one function's pod, a namespace being deleted. Those
            // fail that start, not the runner.
            403 if status.message.contains("User \"") && status.message.contains("\" cannot ") => {
                let message = &status.message;
                let quoted = |after: &str| {
                    let start = message.find(after)? + after.len();
                    let end = message[start..].find('"')?;
                    Some(message[start..start + end].to_string())
                };
                let verb = message
                    .split_once("\" cannot ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .unwrap_or("access")
                    .to_string();
                let details = status.details.as_ref();
                let resource = quoted("resource \"")
                    .or_else(|| details.map(|d| d.kind.clone()))
                    .unwrap_or_default();
                let group = quoted("in API group \"")
                    .or_else(|| details.map(|d| d.group.clone()))
                    .unwrap_or_default();
                Some(Refusal {
                    right: Right {
                        verb,
                        group,
                        resource,
                        namespace: quoted("in the namespace \"").unwrap_or_default(),
                    },
                    user: quoted("User \"").unwrap_or_default(),
                    message: message.clone(),
                })
            }
            _ => None,
        }
    }
}

/// The rights refused now, and the readiness they make.
pub struct Access {
    refused: Mutex<BTreeMap<Right, Refusal>>,
    ready: watch::Sender<bool>,
    /// A review failed since the last time every right was granted.
    review_failed: AtomicBool,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            refused: Mutex::new(BTreeMap::new()),
            ready: watch::channel(true).0,
            review_failed: AtomicBool::new(false),
        }
    }
}

impl Access {
    /// True while no right the runner needs is refused.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Notes `err` if it is a refusal (logged once, until the right is back);
    /// whether it was one.
    pub fn note(&self, err: &kube::Error) -> bool {
        let Some(refusal) = Refusal::of(err) else {
            return false;
        };
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if !refused.contains_key(&refusal.right) {
            tracing::error!(
                verb = %refusal.right.verb,
                resource = %refusal.right.resource,
                group = %refusal.right.group,
                namespace = %refusal.right.namespace,
                user = %refusal.user,
                "the API server refuses the runner: {}: function pods cannot start until it may \
                 (deploy/rbac.yaml has every right the runner needs); health NOT_SERVING",
                refusal.message
            );
            refused.insert(refusal.right.clone(), refusal);
            self.ready.send_replace(false);
        }
        true
    }

    /// The rights `allowed` says are granted again stop counting.
    pub fn granted(&self, allowed: impl Fn(&Right) -> bool) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.is_empty() {
            return;
        }
        let before = refused.len();
        refused.retain(|right, _| {
            let back = allowed(right);
            if back {
                tracing::info!(
                    verb = %right.verb,
                    resource = %right.resource,
                    namespace = %right.namespace,
                    "the API server lets the runner {right} again"
                );
            }
            !back
        });
        if refused.is_empty() && before > 0 {
            tracing::info!("every right the runner needs is granted: health SERVING");
            self.review_failed.store(false, Ordering::Relaxed);
            self.ready.send_replace(true);
        }
    }

    /// What a pod start that created its pod in `namespace` did: create the
    /// pod and its Service, patch the pod and its status, read Endpoints.
    /// Those rights count as granted again.
    pub fn start_went_through(&self, namespace: &str) {
        self.granted(|right| {
            right == &Right::authentication()
                || (right.namespace == namespace
                    && right.group.is_empty()
                    && matches!(
                        (right.verb.as_str(), right.resource.as_str()),
                        ("create", "pods" | "services")
                            | ("patch", "pods" | "pods/status")
                            | ("get" | "list" | "watch", "endpoints")
                    ))
        });
    }

    /// The rights refused now.
    pub fn refused(&self) -> Vec<Right> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Asks the API server whether each refused right is granted now.
    pub async fn recheck(&self, client: &kube::Client) {
        let rights = self.refused();
        if rights.is_empty() {
            return;
        }
        let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
        let mut back = Vec::new();
        for right in rights {
            if right == Right::authentication() {
                // Any answer but a 401 is the credentials accepted again.
                let review = review_of(&Right {
                    verb: "list".into(),
                    group: String::new(),
                    resource: "pods".into(),
                    namespace: String::new(),
                });
                match reviews.create(&PostParams::default(), &review).await {
                    Err(kube::Error::Api(status)) if status.code == 401 => {}
                    // Any other answer from the API server is the
                    // credentials accepted.
                    Ok(_) | Err(kube::Error::Api(_)) => back.push(right),
                    Err(err) => self.review_failed(&err),
                }
                continue;
            }
            match reviews
                .create(&PostParams::default(), &review_of(&right))
                .await
            {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => back.push(right),
                Ok(_) => {}
                Err(err) => self.review_failed(&err),
            }
        }
        self.granted(|right| back.contains(right));
    }

    /// A review that could not be made: said once per refusal, since then
    /// only a pod start that goes through turns the runner SERVING again.
    fn review_failed(&self, err: &kube::Error) {
        if !self.review_failed.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                err = %one_line(err),
                "cannot ask the API server whether the refused right is back (a \
                 SelfSubjectAccessReview, which Kubernetes lets every authenticated user create \
                 unless system:basic-user is unbound): the runner turns SERVING again once a pod \
                 start goes through"
            );
        }
    }
}

fn review_of(right: &Right) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(right.verb.clone()),
                group: Some(right.group.clone()),
                resource: Some(right.resource.clone()),
                namespace: (!right.namespace.is_empty()).then(|| right.namespace.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// An API error in one line: the API server's message and code, not the
/// client's dump of the whole Status.
pub fn one_line(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!("{} ", status.reason)
            };
            format!("{} ({reason}{})", status.message, status.code)
        }
        err => err.to_string(),
    }
}

/// A watch's error in one line, as [`one_line`] has an API error.
pub fn watch_one_line(err: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as E;
    match err {
        E::InitialListFailed(api) => format!("listing: {}", one_line(api)),
        E::WatchStartFailed(api) => format!("starting the watch: {}", one_line(api)),
        E::WatchFailed(api) => format!("watching: {}", one_line(api)),
        E::WatchError(status) => format!(
            "the watch ended: {}",
            one_line(&kube::Error::Api(status.clone()))
        ),
        err => err.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        let mut status = kube::core::Status::failure(message, "Forbidden");
        status.code = code;
        kube::Error::Api(Box::new(status))
    }

    const CREATE_PODS: &str = "pods is forbidden: User \"system:serviceaccount:porch-system:porch-fn-runner\" cannot create resource \"pods\" in API group \"\" in the namespace \"porch-fn-system\"";

    #[test]
    fn a_forbidden_message_names_verb_resource_namespace_and_user() {
        let refusal = Refusal::of(&api_error(403, CREATE_PODS)).unwrap();
        assert_eq!(
            refusal.right,
            Right {
                verb: "create".into(),
                group: String::new(),
                resource: "pods".into(),
                namespace: "porch-fn-system".into(),
            }
        );
        assert_eq!(
            refusal.user,
            "system:serviceaccount:porch-system:porch-fn-runner"
        );
        assert_eq!(
            refusal.right.to_string(),
            "create pods in namespace porch-fn-system"
        );
        let status = Refusal::of(&api_error(
            403,
            "pods is forbidden: User \"u\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"n\"",
        ))
        .unwrap();
        assert_eq!(status.right.resource, "pods/status");
        assert_eq!(status.right.verb, "patch");
        let events = Refusal::of(&api_error(
            403,
            "events.events.k8s.io is forbidden: User \"u\" cannot create resource \"events\" in API group \"events.k8s.io\" at the cluster scope",
        ))
        .unwrap();
        assert_eq!(events.right.group, "events.k8s.io");
        assert_eq!(events.right.namespace, "");
        assert_eq!(events.right.to_string(), "create events.events.k8s.io");
        assert!(Refusal::of(&api_error(401, "Unauthorized")).is_some());
        // Forbidden by something else than the runner's rights.
        for other in [
            "pods \"f-1\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1",
            "pods \"f-1\" is forbidden: violates PodSecurity \"restricted:latest\": privileged",
            "admission webhook \"deny.example.com\" denied the request: no",
            "pods \"f-1\" is forbidden: unable to create new content in namespace n because it is being terminated",
        ] {
            assert!(Refusal::of(&api_error(403, other)).is_none(), "{other}");
        }
        assert!(Refusal::of(&api_error(409, "conflict")).is_none());
        assert!(Refusal::of(&api_error(404, "not found")).is_none());
    }

    #[test]
    fn readiness_goes_with_the_first_refusal_and_comes_back_with_the_last_grant() {
        let access = Access::default();
        let ready = access.ready();
        assert!(*ready.borrow());
        assert!(access.note(&api_error(403, CREATE_PODS)));
        assert!(!*ready.borrow());
        // The same refusal again changes nothing (and is not logged again).
        assert!(access.note(&api_error(403, CREATE_PODS)));
        assert_eq!(access.refused().len(), 1);
        assert!(access.note(&api_error(
            403,
            "pods is forbidden: User \"u\" cannot list resource \"pods\" in API group \"\" in the namespace \"porch-fn-system\"",
        )));
        assert!(!access.note(&api_error(500, "oops")));
        access.granted(|right| right.verb == "list");
        assert!(!*ready.borrow(), "create is still refused");
        access.granted(|right| right.verb == "create");
        assert!(*ready.borrow());
        assert!(access.refused().is_empty());
    }

    #[test]
    fn an_api_error_is_one_line_without_the_status_dump() {
        let line = one_line(&api_error(403, CREATE_PODS));
        assert_eq!(line, format!("{CREATE_PODS} (Forbidden 403)"));
        assert!(!api_error(403, CREATE_PODS).to_string().eq(&line));
        let listed = watch_one_line(&kube::runtime::watcher::Error::InitialListFailed(
            api_error(404, "404 page not found"),
        ));
        assert_eq!(listed, "listing: 404 page not found (Forbidden 404)");
    }
}
