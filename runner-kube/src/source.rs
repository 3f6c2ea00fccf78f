//! Where function pod templates come from, kept current by watches.
//!
//! `--function-pod-template NAME` names a ConfigMap in the runner's own
//! namespace (keys `template` and `serviceTemplate`, as Porch's flag) or a
//! PodTemplate in the pod namespace (newer Porch); the ConfigMap wins when
//! both exist, and a start fails, naming both places, when neither does.
//! Without the flag, a PodTemplate `base-pod-template` in the pod namespace
//! is used if there is one (newer Porch keeps its template there, so an
//! operator's edits to it carry over), else the built-in template.
//!
//! With the default, Porch's ServiceTemplate `base-service-template`
//! (`config.porch.kpt.dev/v1alpha1`) in the pod namespace, if there is one,
//! makes the pods' Services, as in Porch's runner (a change applies to the
//! Services made from then on; it is not a new template version); a
//! cluster without the CRD, a runner that may not read it, or a
//! ServiceTemplate without a usable `template.spec`, uses the built-in
//! Service.
//!
//! Each source is watched (one object, by name), so a start reads the
//! template from memory, and a change is seen at once: its resourceVersion
//! becomes the new template version, and pods of the old one are replaced.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::watch;

use super::backoff::with_backoff;
use super::template::Template;

/// The PodTemplate newer Porch keeps its function pod template in.
pub const BASE_POD_TEMPLATE: &str = "base-pod-template";
/// The ServiceTemplate newer Porch keeps its function Service template in.
pub const BASE_SERVICE_TEMPLATE: &str = "base-service-template";

/// Which template the pods are made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateChoice {
    /// `base-pod-template` if the pod namespace has it, else built in.
    Default,
    /// `--function-pod-template NAME`.
    Named(String),
}

/// The current template, or why there is none. `None` until the watches
/// have listed once.
pub type Current = Option<Result<Arc<Template>, String>>;

/// Starts the watches; the receiver always holds the current template. The
/// watches end when every receiver is dropped.
pub fn spawn(
    client: Client,
    choice: TemplateChoice,
    runner_namespace: &str,
    pod_namespace: &str,
) -> watch::Receiver<Current> {
    let (tx, rx) = watch::channel(None);
    let name = match &choice {
        TemplateChoice::Default => BASE_POD_TEMPLATE.to_string(),
        TemplateChoice::Named(name) => name.clone(),
    };
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let templates: Api<PodTemplate> = Api::namespaced(client.clone(), pod_namespace);
    let template_stream = with_backoff(watcher(templates, by_name.clone())).boxed();
    let service_stream = match &choice {
        TemplateChoice::Default => {
            let gvk =
                GroupVersionKind::gvk(runner_core::config::GROUP, "v1alpha1", "ServiceTemplate");
            let resource = ApiResource::from_gvk_with_plural(&gvk, "servicetemplates");
            let services: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), pod_namespace, &resource);
            let by_name = watcher::Config::default()
                .fields(&format!("metadata.name={BASE_SERVICE_TEMPLATE}"));
            Some(with_backoff(watcher(services, by_name)).boxed())
        }
        TemplateChoice::Named(_) => None,
    };
    let map_stream = match &choice {
        TemplateChoice::Named(_) => {
            let maps: Api<ConfigMap> = Api::namespaced(client, runner_namespace);
            Some(with_backoff(watcher(maps, by_name)).boxed())
        }
        TemplateChoice::Default => None,
    };
    let mut state = State {
        choice,
        name,
        runner_namespace: runner_namespace.to_string(),
        pod_namespace: pod_namespace.to_string(),
        map: One::new(),
        template: One::new(),
        service: One::new(),
    };
    if map_stream.is_none() {
        state.map.seen = Seen::Absent;
    }
    if service_stream.is_none() {
        state.service.seen = Seen::Absent;
    }
    tokio::spawn(async move {
        let mut template_stream = template_stream;
        let mut map_stream = map_stream;
        let mut service_stream = service_stream;
        loop {
            let changed = tokio::select! {
                event = template_stream.next() => match event {
                    Some(event) => state.on_template(event),
                    None => return,
                },
                event = next(&mut map_stream) => match event {
                    Some(event) => state.on_map(event),
                    None => return,
                },
                event = next(&mut service_stream) => match event {
                    Some(event) => state.on_service(event),
                    None => return,
                },
                () = tx.closed() => return,
            };
            if changed {
                if let Some(current) = state.current() {
                    let keep = tx.borrow().as_ref().is_some_and(|old| same(old, &current));
                    if !keep {
                        match &current {
                            Ok(t) => {
                                tracing::info!(source = %t.source, version = %t.version, "function pod template")
                            }
                            Err(err) => tracing::error!(%err, "function pod template"),
                        }
                        tx.send_replace(Some(current));
                    }
                }
            }
        }
    });
    rx
}

type Boxed<K> = futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

async fn next<K>(
    stream: &mut Option<Boxed<K>>,
) -> Option<Result<watcher::Event<K>, watcher::Error>> {
    match stream {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

fn same(a: &Result<Arc<Template>, String>, b: &Result<Arc<Template>, String>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a.same_as(b),
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

/// What a watch knows of its one object.
struct One<K> {
    seen: Seen<K>,
    /// During a relist: the object, if listed so far.
    relist: Option<Option<Box<K>>>,
}

impl<K> One<K> {
    fn new() -> Self {
        One {
            seen: Seen::Unknown,
            relist: None,
        }
    }
}

enum Seen<K> {
    /// Not listed yet.
    Unknown,
    Absent,
    Present(Box<K>),
}

struct State {
    choice: TemplateChoice,
    name: String,
    runner_namespace: String,
    pod_namespace: String,
    map: One<ConfigMap>,
    template: One<PodTemplate>,
    /// Porch's ServiceTemplate (with the default choice only).
    service: One<DynamicObject>,
}

impl State {
    /// Whether anything changed.
    fn on_template(&mut self, event: Result<watcher::Event<PodTemplate>, watcher::Error>) -> bool {
        apply(&mut self.template, event, &self.choice, "PodTemplate")
    }

    fn on_map(&mut self, event: Result<watcher::Event<ConfigMap>, watcher::Error>) -> bool {
        apply(&mut self.map, event, &self.choice, "ConfigMap")
    }

    fn on_service(&mut self, event: Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
        // Optional (Porch's CRD may not be installed, and our RBAC need not
        // grant it): a failing watch means none, and only a debug line.
        if let Err(err) = &event {
            tracing::debug!(err = %super::access::watch_one_line(err), "watching the ServiceTemplate");
            if matches!(self.service.seen, Seen::Unknown) {
                self.service.seen = Seen::Absent;
                return true;
            }
            return false;
        }
        apply(&mut self.service, event, &self.choice, "ServiceTemplate")
    }

    /// `template` with Porch's ServiceTemplate, if there is one. One that
    /// cannot make a Service is said, and the built-in Service is used:
    /// a bad ServiceTemplate does not stop every pod.
    fn with_service(&self, template: Template) -> Result<Template, String> {
        match &self.service.seen {
            Seen::Present(service) => match template.clone().with_service_template(service) {
                Ok(with) => Ok(with),
                Err(err) => {
                    tracing::error!(%err, "the ServiceTemplate is not used: the built-in Service is");
                    Ok(template)
                }
            },
            _ => Ok(template),
        }
    }

    fn current(&self) -> Current {
        if matches!(self.service.seen, Seen::Unknown) {
            return None;
        }
        match (&self.map.seen, &self.template.seen) {
            (Seen::Present(map), _) => Some(Template::from_config_map(map).map(Arc::new).map_err(|e| e.to_string())),
            (Seen::Unknown, _) | (_, Seen::Unknown) => None,
            (Seen::Absent, Seen::Present(template)) => Some(
                Template::from_pod_template(template)
                    .map_err(|e| e.to_string())
                    .and_then(|t| self.with_service(t))
                    .map(Arc::new),
            ),
            (Seen::Absent, Seen::Absent) => Some(match &self.choice {
                TemplateChoice::Default => self.with_service(Template::inline()).map(Arc::new),
                TemplateChoice::Named(_) => Err(format!(
                    "--function-pod-template {name}: there is neither a ConfigMap {name} in namespace {} nor a PodTemplate {name} in namespace {}",
                    self.runner_namespace,
                    self.pod_namespace,
                    name = self.name,
                )),
            }),
        }
    }
}

fn apply<K: Clone>(
    one: &mut One<K>,
    event: Result<watcher::Event<K>, watcher::Error>,
    choice: &TemplateChoice,
    kind: &str,
) -> bool {
    match event {
        Ok(watcher::Event::Apply(object)) => one.seen = Seen::Present(Box::new(object)),
        Ok(watcher::Event::Delete(_)) => one.seen = Seen::Absent,
        // A (re)list: what is listed before InitDone is what exists, so an
        // object deleted while the watch was down goes too.
        Ok(watcher::Event::Init) => {
            one.relist = Some(None);
            return false;
        }
        Ok(watcher::Event::InitApply(object)) => {
            one.relist = Some(Some(Box::new(object)));
            return false;
        }
        Ok(watcher::Event::InitDone) => {
            one.seen = match one.relist.take().flatten() {
                Some(object) => Seen::Present(object),
                None => Seen::Absent,
            };
        }
        Err(err) => {
            let err = super::access::watch_one_line(&err);
            tracing::warn!(%err, kind, "watching the function pod template");
            // Without the flag the template is optional: a runner that may
            // not read PodTemplates (no RBAC for them) uses the built-in
            // one rather than waiting for ever.
            if *choice == TemplateChoice::Default && matches!(one.seen, Seen::Unknown) {
                one.seen = Seen::Absent;
            } else {
                return false;
            }
        }
    }
    true
}
