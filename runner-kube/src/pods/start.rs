//! A function pod's start: a name claimed, the pod created (or another
//! runner's adopted), its Service, and the waits until it serves.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::time::Duration;
use tracing::Instrument as _;

use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::PostParams;
use kube::runtime::wait::await_condition;
use kube::Api;

use super::delete::Exactly;
use super::failures::{is_conflict, Attempt, StartError, Taken};
use super::inner::{owner_of, Inner};
use super::naming::{service_name, MAX_SLOTS};
use super::readiness::{
    answering, ended, is_ready, lists_address, pod_ip, service_accepts, wrapper_uri,
};
use super::reclaim::now_secs;
use super::settings::Dial;
use crate::lifecycle::{self, OpType, Outcome, Phase};
use crate::names::WRAPPER_PORT;
use crate::template::{FunctionPod, Template};
use runner_core::backend::{
    cause, pod_name, BackendError, Cause, PodId, PodSpec, ReadyPod, Retire,
};

/// How often a cold start asks its pod's wrapper again, from the moment the
/// pod has an address until it answers (a refused connection costs next to
/// nothing; the wait is the kubelet's).
const ASK_AGAIN_COLD: Duration = Duration::from_millis(25);
/// How long each of those attempts may take: an address not routed yet
/// drops the connection's first packet rather than refusing it.
const ANSWER_COLD: Duration = Duration::from_millis(200);

/// A health check in flight.
type Asking = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a start did, for the cleanup after a failure or a timeout.
#[derive(Default)]
pub(super) struct Progress {
    /// The name claimed last.
    pub(super) name: Option<String>,
    /// The uid of that pod if this start created it (and so deletes it on
    /// failure; its Service goes with it).
    pub(super) created: Option<String>,
    /// What the start waits for, named when it times out: an API server
    /// that does not answer (or answers 503, which the client retries) is
    /// not a pod that does not become Ready.
    pub(super) step: &'static str,
}

impl Inner {
    /// Waits for the watches to have read the template.
    pub(super) async fn current_template(&self) -> Result<Arc<Template>, StartError> {
        let mut template = self.template.clone();
        let current = template
            .wait_for(Option::is_some)
            .await
            .map_err(|_| StartError::TemplateGone)?
            .clone();
        match current {
            Some(Ok(template)) => Ok(template),
            Some(Err(err)) => Err(StartError::Template(err)),
            None => Err(StartError::TemplateGone),
        }
    }

    /// A pod for `spec` that takes calls: claimed from its idle pool, or
    /// started, within its ready timeout; held as handed out.
    pub(super) async fn ready_pod(&self, spec: PodSpec) -> Result<ReadyPod, BackendError> {
        let started = tokio::time::Instant::now();
        let mut progress = Progress::default();
        let pooled = spec.idle_pods > 0;
        let start = async {
            if pooled {
                self.claim(&spec, &mut progress)
                    .instrument(tracing::info_span!(target: "otel", "kube.claim"))
                    .await
            } else {
                self.start(&spec, &mut progress).await
            }
        };
        let outcome = tokio::time::timeout(spec.ready_timeout, start).await;
        let (name, pod, version) = match outcome {
            Ok(Ok(found)) => found,
            Ok(Err(source)) => {
                self.forget_failed(&progress);
                return Err(self.start_error(spec.image, source));
            }
            Err(_) => {
                self.forget_failed(&progress);
                return Err(self.timed_out(spec.image, spec.ready_timeout, &progress));
            }
        };
        if progress.created.is_some() {
            // A whole start (create, Service, gate, operation) went
            // through: whatever was refused is granted again.
            self.access.start_went_through(&self.settings.namespace);
        }
        if let Err(ended) = self.hold_ready(&name, &pod) {
            return Err(BackendError::StartFailed {
                image: spec.image,
                source: cause(ended),
            });
        }
        let endpoint = self.endpoint(&name, &pod, pooled);
        tracing::info!(pod = %name, image = %spec.image, %endpoint, ms = started.elapsed().as_millis() as u64, "pod ready");
        self.replace_if_template_changed(&name, &version);
        Ok(ReadyPod {
            id: PodId(name),
            endpoint,
        })
    }

    /// After a failed start: the name it claimed is free again, and the
    /// pod it made (or claimed) is deleted.
    fn forget_failed(&self, progress: &Progress) {
        if let Some(name) = &progress.name {
            self.held().claimed.remove(name);
            if let Some(uid) = &progress.created {
                self.spawn_delete(name.clone(), Exactly::Uid(uid.clone()));
            }
        }
    }

    /// What a start that ran out of time tells: what it waited for, and
    /// why the pod watch fails if it does.
    fn timed_out(&self, image: String, timeout: Duration, progress: &Progress) -> BackendError {
        let watch = self
            .watch_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let waiting = match &progress.name {
            Some(name) => format!("pod {name}: waiting for {}", progress.step),
            None => format!("waiting for {}", progress.step),
        };
        BackendError::ReadyTimeout {
            image,
            timeout,
            detail: match watch {
                Some(err) => format!("{waiting}; the pod watch fails: {err}"),
                None => waiting,
            },
        }
    }

    /// Holds the pod as handed out: its end is reported from now on. One
    /// that ended meanwhile is let go and deleted instead.
    fn hold_ready(&self, name: &str, pod: &Pod) -> Result<(), StartError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        {
            let mut held = self.held();
            held.ready.insert(name.to_string());
            held.uids.insert(name.to_string(), uid.clone());
        }
        // A failure seen after the last check and before the insert was
        // not reported (the pod was not handed out yet): look again now
        // that it would be.
        let now = self
            .store
            .get(&self.key(name))
            .filter(|p| p.metadata.uid.as_deref() == Some(uid.as_str()));
        let gone = now.map_or(Some("was deleted".to_string()), |p| ended(&p));
        if let Some(reason) = gone {
            {
                let mut held = self.held();
                held.ready.remove(name);
                held.claimed.remove(name);
                held.uids.remove(name);
                held.known.remove(name);
            }
            self.spawn_delete(name.to_string(), Exactly::Uid(uid));
            return Err(StartError::Ended {
                name: name.to_string(),
                reason,
            });
        }
        Ok(())
    }

    /// Where the runner dials the pod: by its Service's name or its IP, as
    /// set.
    fn endpoint(&self, name: &str, pod: &Pod, pooled: bool) -> String {
        let settings = &self.settings;
        // A claimed pod has no Service: it is dialled by its IP.
        let dial = if pooled { Dial::PodIp } else { settings.dial };
        match dial {
            Dial::PodIp => wrapper_uri(pod_ip(pod).unwrap_or_default()),
            Dial::Service => format!(
                "http://{name}.{}.svc.cluster.local:{WRAPPER_PORT}",
                settings.namespace
            ),
        }
    }

    /// Reports the pod stale if the template is no longer the `version` it
    /// was made from.
    fn replace_if_template_changed(&self, name: &str, version: &str) {
        // The template changed while the pod started: the template
        // watch retired only the pods handed out then. This one serves
        // the call that waits for it, and is replaced once idle.
        let current = self.template.borrow().clone();
        if let Some(Ok(template)) = current {
            if template.version != version {
                tracing::info!(pod = %name, "the pod template changed while the pod started: replacing it once idle");
                self.report_stale(name.to_string(), Retire::TemplateChanged);
            }
        }
    }

    /// Starts (or adopts) a pod for `spec`: its name, the pod, and the
    /// version of the template it was made from.
    pub(super) async fn start(
        &self,
        spec: &PodSpec,
        progress: &mut Progress,
    ) -> Result<(String, Pod, String), Cause> {
        progress.step = "the function pod template";
        let template = self
            .current_template()
            .instrument(tracing::info_span!(target: "otel", "kube.template"))
            .await
            .map_err(cause)?;
        progress.step = "the image's entrypoint from its registry";
        let entrypoint = self
            .entrypoints
            .of(&spec.image)
            .instrument(tracing::info_span!(target: "otel", "kube.entrypoint"))
            .await
            .map_err(cause)?;
        let settings = &self.settings;
        let pull_secret = self.pull_secret_for(&spec.image);
        let key = self.spec_key(spec, &template, &[]);
        let reclaim_after = now_secs().saturating_add(spec.ttl.as_secs());
        // A single-use pod's name is its own: no other runner's start, or
        // later run, ever computes it, so none is handed the pod.
        let slots = if spec.single_use { 1 } else { MAX_SLOTS };
        for slot in 0..slots {
            let slot = if spec.single_use {
                format!("u{:08x}", self.pools.random() as u32)
            } else {
                slot.to_string()
            };
            let name = service_name(pod_name(&spec.image, &format!("{key}-{slot}")));
            if !self.held().claimed.insert(name.clone()) {
                continue;
            }
            *progress = Progress {
                name: Some(name.clone()),
                created: None,
                step: "the API server to answer its create",
            };
            let function_pod = FunctionPod {
                name: name.clone(),
                namespace: settings.namespace.clone(),
                image: spec.image.clone(),
                entrypoint: entrypoint.clone(),
                wrapper_image: settings.wrapper_image.clone(),
                max_message_bytes: settings.max_message_bytes,
                prespawn: spec.prespawn,
                owner: settings.owner.clone(),
                reclaim_after,
                pull_secret: pull_secret.clone(),
                deployment: settings.deployment.clone(),
                readiness_gate: settings.features.readiness_gate,
            };
            match self
                .start_named(&function_pod, &template, spec, progress)
                .await
            {
                Ok(pod) => return Ok((name, pod, template.version.clone())),
                Err(Attempt::Taken(Taken(why))) => {
                    tracing::debug!(pod = %name, %why, "pod name taken; trying the next");
                    self.held().claimed.remove(&name);
                    progress.name = None;
                }
                Err(Attempt::Failed(err)) => return Err(err),
            }
        }
        Err(cause(StartError::NoFreeName))
    }

    /// Creates the pod `fp.name`, or uses the one of that name that another
    /// runner (or an earlier run) made; then its Service; then waits until
    /// it serves.
    async fn start_named(
        &self,
        fp: &FunctionPod,
        template: &Template,
        spec: &PodSpec,
        progress: &mut Progress,
    ) -> Result<Pod, Attempt> {
        let name = &fp.name;
        let uid = match self.store.get(&self.key(name)) {
            Some(existing) => self.adopt(&existing, spec.ttl)?,
            None => {
                self.create(fp, template, spec, progress)
                    .instrument(tracing::info_span!(target: "otel", "kube.create", pod = %name))
                    .await?
            }
        };
        progress.step = "its Service to be created";
        self.ensure_service(fp, template, &uid)
            .instrument(tracing::info_span!(target: "otel", "kube.service"))
            .await?;
        let pod = if self.settings.dial == Dial::PodIp {
            // Dialled by its IP, a pod takes calls as soon as its wrapper
            // answers there: the kubelet notices the running container at
            // its next relist (up to a second), probes it and writes the
            // status, and the Endpoints controller and kube-proxy follow;
            // none of which this runner's calls need. Its Service keeps
            // following the kubelet's readiness, for whoever dials it.
            let pod = self
                .wait_answering(name, &uid, progress)
                .instrument(tracing::info_span!(target: "otel", "kube.ready"))
                .await?;
            self.tell_ready(
                &pod,
                progress,
                format!(
                    "its wrapper answers on its IP and its traffic gate {} is True \
                     (its Service lists it once the kubelet reports it Ready)",
                    lifecycle::SERVING_GATE
                ),
            );
            pod
        } else {
            self.wait_routed(name, &uid, progress).await?
        };
        // Declared before the first call goes to it: a runner about to
        // delete the pod sees it in use, and one that drains it already
        // makes this patch fail (its resourceVersion moved), and the pod
        // is read again and refused.
        progress.step = "the API server to answer the declaration of its serve operation";
        self.declare_serving(name, &uid, &pod)
            .instrument(tracing::info_span!(target: "otel", "kube.declare"))
            .await?;
        Ok(pod)
    }

    /// The Ready event of a pod this start created (an adopted one's was
    /// told by its creator).
    fn tell_ready(&self, pod: &Pod, progress: &Progress, message: String) {
        if progress.created.is_some() {
            self.lifecycle.emit(pod, Phase::Ready, message);
        }
    }

    /// Waits until the pod's Service routes to it (dialled by the Service's
    /// name): the pod Ready, listed in its Endpoints, and the Service
    /// taking connections.
    async fn wait_routed(
        &self,
        name: &str,
        uid: &str,
        progress: &mut Progress,
    ) -> Result<Pod, StartError> {
        progress.step = "it to be Ready";
        let pod = self
            .wait_ready(name, uid)
            .instrument(tracing::info_span!(target: "otel", "kube.ready"))
            .await?;
        self.tell_ready(
            &pod,
            progress,
            format!(
                "its wrapper answers and its traffic gate {} is True: in its Service's Endpoints",
                lifecycle::SERVING_GATE
            ),
        );
        // The Service routes to the pod only once its Endpoints list the
        // pod's IP: before that, a call by the Service's name is refused,
        // and would count as a dead pod.
        progress.step = "its Service's Endpoints to list it";
        self.wait_listed(name, &pod)
            .instrument(tracing::info_span!(target: "otel", "kube.endpoints"))
            .await?;
        // kube-proxy programs the Service's address a moment after its
        // Endpoints list the pod, and refuses connections until then: a
        // call made at once would find the pod "unreachable". Wait until
        // the Service takes a connection.
        progress.step = "its Service to take a connection";
        self.wait_service_accepts(name).await?;
        Ok(pod)
    }

    /// Creates the pod `fp.name`, with its pull Secret first if it needs
    /// one, and switches its traffic on; its uid. A pod of that name made
    /// meanwhile by another runner is adopted instead.
    async fn create(
        &self,
        fp: &FunctionPod,
        template: &Template,
        spec: &PodSpec,
        progress: &mut Progress,
    ) -> Result<String, Attempt> {
        let name = &fp.name;
        let pod = fp.pod_with_env(
            template,
            spec.overrides.as_deref(),
            &self.settings.function_env,
        )?;
        // Private registries: the Secret the kubelet pulls with holds
        // the auth file's content before the pod needs it.
        if let (Some(secret), Some(_)) = (&self.settings.pull_secret, &fp.pull_secret) {
            let secrets = Api::namespaced(self.pods.clone().into_client(), &fp.namespace);
            secret
                .ensure(&secrets)
                .await
                .map_err(|err| Attempt::Failed(cause(err)))?;
        }
        match self.pods.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                self.switch_on_created(fp, template, created, progress)
                    .await
            }
            // Another runner made it first (the store had not seen it yet).
            Err(err) if is_conflict(&err) => self.adopt_made_first(name, spec.ttl, progress).await,
            Err(source) => Err(StartError::Api {
                verb: "creating",
                kind: "pod",
                name: name.clone(),
                source,
            }
            .into()),
        }
    }

    /// The pod this start just created: recorded as this start's (a failed
    /// start deletes it) and its traffic switched on; its uid.
    async fn switch_on_created(
        &self,
        fp: &FunctionPod,
        template: &Template,
        created: Pod,
        progress: &mut Progress,
    ) -> Result<String, Attempt> {
        let name = &fp.name;
        self.lifecycle.emit(
            &created,
            Phase::Created,
            format!(
                "runner {} created it for {} (template {} version {})",
                self.runner, fp.image, template.source, template.version
            ),
        );
        let uid = created.metadata.uid.clone().unwrap_or_default();
        progress.created = Some(uid.clone());
        // Its traffic is switched on now, while the kubelet starts it: the
        // pod is Ready (in its Service's Endpoints) only once its wrapper
        // also answers the readiness probe, and the gate costs the cold
        // start nothing (set after the probe, it would wait for the
        // kubelet's next look at the pod).
        // (Without the right to set it, the pod has no gate: see
        // `Features::readiness_gate`.)
        if lifecycle::has_gate(&created) {
            progress.step = "the API server to answer the switch of its traffic gate";
            self.switch_on(name, &uid, created).await?;
        }
        self.held().written.insert(name.clone(), fp.reclaim_after);
        Ok(uid)
    }

    /// Adopts the pod `name` that another runner created first (this
    /// start's create conflicted with it); its uid.
    async fn adopt_made_first(
        &self,
        name: &str,
        ttl: Duration,
        progress: &mut Progress,
    ) -> Result<String, Attempt> {
        progress.step = "the API server to answer a read of it";
        let existing = self
            .pods
            .get_opt(name)
            .await
            .map_err(|source| StartError::Api {
                verb: "reading",
                kind: "pod",
                name: name.to_string(),
                source,
            })?;
        match existing {
            Some(existing) => self.adopt(&existing, ttl),
            None => Err(Attempt::Taken(Taken("deleted meanwhile".into()))),
        }
    }

    /// Waits until the pod's Service's Endpoints list it; fails if the pod
    /// ends meanwhile.
    async fn wait_listed(&self, name: &str, pod: &Pod) -> Result<(), StartError> {
        let ip = pod_ip(pod).unwrap_or_default().to_string();
        let listed = await_condition(
            self.endpoints.clone(),
            name,
            move |e: Option<&Endpoints>| lists_address(e, &ip),
        );
        tokio::select! {
            listed = listed => {
                listed.map_err(|source| StartError::Endpoints { name: name.to_string(), source })?;
            }
            // The pod may end while its Endpoints are awaited.
            ended = self.wait_ended(name) => return Err(ended),
        }
        Ok(())
    }

    /// Waits until the pod's Service takes a connection; fails if the pod
    /// ends meanwhile.
    async fn wait_service_accepts(&self, name: &str) -> Result<(), StartError> {
        let address = format!(
            "{name}.{}.svc.cluster.local:{WRAPPER_PORT}",
            self.settings.namespace
        );
        tokio::select! {
            () = service_accepts(&address) => {}
            ended = self.wait_ended(name) => return Err(ended),
        }
        Ok(())
    }

    /// Declares this runner's `serve` operation on the pod; refused if the
    /// pod is being taken away (deleted, or drained by another runner).
    async fn declare_serving(&self, name: &str, uid: &str, pod: &Pod) -> Result<(), Attempt> {
        let declared = lifecycle::patch_meta(&self.pods, name, uid, Some(pod.clone()), |pod| {
            if let Some(why) = self.taken_away(pod) {
                return Err(why);
            }
            Ok(Some(lifecycle::declaring(
                &self.runner,
                Some(OpType::Serve),
            )))
        })
        .await
        .map_err(|source| StartError::Lifecycle {
            verb: "declaring the serve operation on",
            name: name.to_string(),
            source,
        })?;
        match declared {
            Outcome::Done(declared) => {
                self.held()
                    .declared
                    .insert(name.to_string(), lifecycle::now_ns());
                self.lifecycle.emit(
                    &declared,
                    Phase::Serving,
                    format!("runner {} hands it out for calls", self.runner),
                );
                Ok(())
            }
            Outcome::Gone => Err(Attempt::Taken(Taken("deleted meanwhile".into()))),
            Outcome::Refused(why) => Err(Attempt::Taken(Taken(why))),
        }
    }

    /// Uses a pod of the wanted name that exists already; its uid. One that
    /// ended is deleted (whoever made it: it serves no one) and its name
    /// skipped.
    fn adopt(&self, pod: &Pod, ttl: Duration) -> Result<String, Attempt> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod
            .metadata
            .uid
            .as_ref()
            .is_some_and(|uid| self.held().deleting.contains(uid))
        {
            return Err(Attempt::Taken(Taken("being deleted by this runner".into())));
        }
        if let Some(reason) = ended(pod) {
            if pod.metadata.deletion_timestamp.is_none() {
                let version = pod.metadata.resource_version.clone().unwrap_or_default();
                self.spawn_delete(name, Exactly::Version(version));
            }
            return Err(Attempt::Taken(Taken(reason)));
        }
        if let Some(why) = self.taken_away(pod) {
            return Err(Attempt::Taken(Taken(why)));
        }
        tracing::info!(pod = %name, owner = owner_of(pod).unwrap_or(""), "using an existing pod");
        // Another runner's pod: its reclaim-after must move now, so that
        // its owner, going idle or shutting down, sees it in use here and
        // leaves it.
        self.extend(&name, ttl, !self.mine(pod));
        Ok(pod.metadata.uid.clone().unwrap_or_default())
    }

    /// Resolves once the pod has ended (or is gone).
    async fn wait_ended(&self, name: &str) -> StartError {
        let key = self.key(name);
        let mut changed = self.changed.clone();
        loop {
            let reason = match self.store.get(&key) {
                None => Some("was deleted".to_string()),
                Some(pod) => ended(&pod),
            };
            if let Some(reason) = reason {
                return StartError::Ended {
                    name: name.to_string(),
                    reason,
                };
            }
            if changed.changed().await.is_err() {
                return StartError::Ended {
                    name: name.to_string(),
                    reason: "was not seen: the pod watch ended".into(),
                };
            }
        }
    }

    /// Waits until the pod's wrapper answers on the pod's IP (or the pod is
    /// Ready, whichever the runner sees first), or fails if it ended or
    /// went. A pod another start created whose traffic gate its creator
    /// never switched on gets it switched on here, as [`Self::wait_ready`]
    /// does.
    async fn wait_answering(
        &self,
        name: &str,
        uid: &str,
        progress: &mut Progress,
    ) -> Result<Pod, StartError> {
        let adopted = progress.created.is_none();
        let key = self.key(name);
        let mut changed = self.changed.clone();
        let ended_as = |reason| StartError::Ended {
            name: name.to_string(),
            reason,
        };
        progress.step = "it to be scheduled and given an address";
        // The pod as last seen, once seen.
        let mut latest: Option<Arc<Pod>> = None;
        // The health check asking the pod's address: kept across the
        // watch's ticks (a change of any function pod ticks it) while that
        // address stays.
        let mut asking: Option<(String, Asking)> = None;
        let pod = loop {
            let current = self
                .store
                .get(&key)
                .filter(|pod| pod.metadata.uid.as_deref() == Some(uid));
            match current {
                // Gone, or replaced by a pod of the same name.
                None if latest.is_some() => return Err(ended_as("was deleted".into())),
                // Not seen yet: the watch trails the create.
                None => {}
                Some(pod) => {
                    if let Some(reason) = ended(&pod) {
                        return Err(ended_as(self.wrapper_unpullable(&pod).unwrap_or(reason)));
                    }
                    if is_ready(&pod) && pod_ip(&pod).is_some() {
                        break (*pod).clone();
                    }
                    // The kubelet writes the pod's IP with its first status
                    // after the sandbox exists, while the init container
                    // runs: asked from then on.
                    match pod_ip(&pod) {
                        Some(ip) if asking.as_ref().is_none_or(|(asked, _)| asked != ip) => {
                            progress.step = "its wrapper to answer on its IP";
                            let check = answering(ip.to_string(), ASK_AGAIN_COLD, ANSWER_COLD);
                            asking = Some((ip.to_string(), Box::pin(check)));
                        }
                        Some(_) => {}
                        None => asking = None,
                    }
                    latest = Some(pod);
                }
            }
            let answered = async {
                match asking.as_mut() {
                    Some((_, check)) => check.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                // Asked only once the pod was seen with an address.
                () = answered => match latest {
                    Some(pod) => break (*pod).clone(),
                    None => asking = None,
                },
                seen = changed.changed() => {
                    if seen.is_err() {
                        return Err(ended_as("was not seen: the pod watch ended".into()));
                    }
                }
            }
        };
        // Off only if never switched on: one switched off (False) is being
        // drained by another runner, and its declaration below is refused.
        if adopted && lifecycle::has_gate(&pod) && lifecycle::gate(&pod).is_none() {
            self.switch_on(name, uid, pod.clone())
                .await
                .map_err(|attempt| match attempt {
                    Attempt::Failed(cause) => ended_as(cause.to_string()),
                    Attempt::Taken(Taken(reason)) => ended_as(reason),
                })?;
        }
        Ok(pod)
    }

    /// Waits (on watch events) until the pod is Ready, or fails if it ended.
    /// Its traffic is switched on (the gate set True) once its containers
    /// are ready, that is once the wrapper answers its probe.
    async fn wait_ready(&self, name: &str, uid: &str) -> Result<Pod, StartError> {
        let key = self.key(name);
        let mut changed = self.changed.clone();
        let mut gate_set = false;
        loop {
            if let Some(pod) = self.store.get(&key) {
                if let Some(reason) = ended(&pod) {
                    return Err(StartError::Ended {
                        name: name.to_string(),
                        reason: self.wrapper_unpullable(&pod).unwrap_or(reason),
                    });
                }
                if is_ready(&pod) && pod_ip(&pod).is_some() {
                    return Ok((*pod).clone());
                }
                // A pod whose creator died before it switched the gate on
                // would never be Ready: whoever waits for it does.
                // (Never switched on: one switched off is being drained.)
                let off = lifecycle::gate(&pod).is_none();
                if !gate_set
                    && off
                    && lifecycle::has_gate(&pod)
                    && lifecycle::containers_ready(&pod)
                    && pod.metadata.uid.as_deref() == Some(uid)
                {
                    gate_set = true;
                    self.switch_on(name, uid, (*pod).clone()).await.map_err(
                        |attempt| match attempt {
                            Attempt::Failed(cause) => StartError::Ended {
                                name: name.to_string(),
                                reason: cause.to_string(),
                            },
                            Attempt::Taken(Taken(reason)) => StartError::Ended {
                                name: name.to_string(),
                                reason,
                            },
                        },
                    )?;
                    continue;
                }
            }
            if changed.changed().await.is_err() {
                return Err(StartError::Ended {
                    name: name.to_string(),
                    reason: "was not seen: the pod watch ended".into(),
                });
            }
        }
    }
}
