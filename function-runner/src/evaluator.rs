//! Evaluators: the strategies that run a function for a request.
//!
//! [`Evaluator`] (the trait, with its request and errors, is `krm_fn`'s:
//! `eval` and `render` take one too) has one async method.
//! [`EvalError::NotFound`] means "not mine" and lets a [`MultiEvaluator`]
//! fall through to the next evaluator; every other error stops the chain.
//!
//! - [`ExecEvaluator`]: FunctionConfig `binaryExecutor`: runs a local binary
//!   through the same call core as the wrapper ([`krm_fn::call`]), so both
//!   answer alike.
//! - [`PodEvaluator`]: asks the [`PodCache`] for a pod, calls it; when the
//!   call breaks off at the transport, retries (bounded), evicting the pod
//!   only if it is gone (its health check fails or cannot connect): a
//!   connection ended by GOAWAY, or a call torn down with it, says nothing
//!   about the pod, and its channel re-dials.
//! - [`crate::builtin::BuiltinEvaluator`]: the catalog's functions built in
//!   (FunctionConfig `goExecutor`, and the catalog's images by default).
//! - [`MultiEvaluator`]: a fixed order: exec, built-in, pod.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::Duration;
use tracing::Instrument as _;

use futures::future::BoxFuture;
use krm_fn::call::{deadline, Function};
use krm_fn::exec::ExecSpec;
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use tokio::time::Instant;
use tonic::{Code, Status};

use crate::cache::{CacheError, PodCache, PodRequestSettings};
pub use krm_fn::evaluator::{EvalError, EvalRequest, Evaluator};
use runner_core::config::{BinaryMatch, LiveIndex};

/// No pod could be had for `image`: the error names the code the cache's
/// error decides.
pub fn pod_error(image: String, source: CacheError) -> EvalError {
    EvalError::Pod {
        image,
        code: source.code(),
        source: Box::new(source),
    }
}

/// Longest image reference accepted: the distribution spec's 255-byte
/// repository name, a tag of 128 and a digest with room to spare.
pub const MAX_IMAGE_BYTES: usize = 512;

/// Checks a requested image name before anything uses it: at most
/// [`MAX_IMAGE_BYTES`], and only the characters of image references
/// (registry host and port, path, tag, digest): ASCII letters, digits and
/// `. _ - / : @ +`.
pub fn validate_image(image: &str) -> Result<(), EvalError> {
    let invalid = |reason: String| EvalError::InvalidImage {
        shown: krm_fn::call::shown_name(image).into_owned(),
        reason,
    };
    if image.is_empty() {
        return Err(EvalError::EmptyImage);
    }
    if image.len() > MAX_IMAGE_BYTES {
        return Err(invalid(format!(
            "{} bytes, more than {MAX_IMAGE_BYTES}",
            image.len()
        )));
    }
    if let Some(c) = image
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-/:@+".contains(*c)))
    {
        return Err(invalid(format!("it contains {:?}", c)));
    }
    Ok(())
}

/// Runs `fut` until `deadline`, if any.
async fn with_deadline<T>(
    deadline: Option<Instant>,
    image: &str,
    fut: impl std::future::Future<Output = Result<T, EvalError>>,
) -> Result<T, EvalError> {
    deadline::before(deadline, fut).await.unwrap_or_else(|| {
        Err(EvalError::DeadlineExceeded {
            image: image.to_string(),
        })
    })
}

/// Whether `found`'s binary is missing: Porch's FunctionConfigs name the
/// binaries Porch's runner image ships (`binaryExecutor.path` relative to
/// `--functions`); in an image without them the call goes on down the
/// chain (the built-in, else a pod of the image), as if no binary were
/// configured, and that is said once per binary. A binary that exists but
/// will not run is the configuration's error, and stays one.
pub(crate) fn binary_missing(found: &BinaryMatch) -> bool {
    static SAID: std::sync::Mutex<Option<std::collections::HashSet<PathBuf>>> =
        std::sync::Mutex::new(None);
    if std::fs::symlink_metadata(&found.path).is_ok() {
        return false;
    }
    let mut said = SAID.lock().unwrap_or_else(PoisonError::into_inner);
    if said
        .get_or_insert_with(Default::default)
        .insert(found.path.clone())
    {
        tracing::warn!(
            image = %found.resolved_image,
            binary = %found.path.display(),
            config = %found.config_name,
            "binaryExecutor: the binary does not exist; its calls run built-in where the \
             image has a built-in, else in a pod of the image"
        );
    }
    true
}

/// FunctionConfig `binaryExecutor`: local binaries, one process per call
/// (pre-spawned ones if the config's `prespawn`, else the runner's
/// `--prespawn`, asks for them).
pub struct ExecEvaluator {
    index: LiveIndex,
    max_message_bytes: usize,
    pools: Arc<ExecPools>,
    /// Added to each binary's environment (`eval -e`).
    env: Vec<(String, String)>,
}

/// The pre-spawned processes of the binaries the exec evaluator ran, one
/// pool per binary and size.
pub struct ExecPools {
    /// `None`: none at all, whatever a FunctionConfig says.
    default_size: Option<usize>,
    pools: std::sync::Mutex<HashMap<(PathBuf, usize), Arc<krm_fn::prespawn::Pool>>>,
    /// Closed (the runner stops): no more pools.
    closed: std::sync::atomic::AtomicBool,
}

impl ExecPools {
    /// Pools of `default_size` processes unless a FunctionConfig says.
    pub fn new(default_size: usize) -> Self {
        Self::with_default(Some(default_size))
    }

    /// No pools, whatever a FunctionConfig says: for a run that calls each
    /// function about once (`eval`, `render`), where a waiting process
    /// would only be started to be killed at the end.
    pub fn off() -> Self {
        Self::with_default(None)
    }

    fn with_default(default_size: Option<usize>) -> Self {
        Self {
            default_size,
            pools: Default::default(),
            closed: Default::default(),
        }
    }

    /// The pool of `size` (the config's, else the default) for `spec`'s
    /// binary, if that is not 0. Kept by binary and size, so that two
    /// configs of one binary do not replace each other's pool per call. A
    /// pool whose config went away stays until the runner stops (its
    /// processes are idle; a runner's configs change rarely).
    fn pool(&self, spec: &ExecSpec, size: Option<u32>) -> Option<Arc<krm_fn::prespawn::Pool>> {
        let default = self.default_size?;
        let size = size.map_or(default, |n| n as usize);
        if size == 0 || self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let key = (PathBuf::from(&spec.program), size);
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        let pool = pools.entry(key).or_insert_with_key(|(path, size)| {
            tracing::info!(binary = %path.display(), size, "pre-spawning function processes");
            Arc::new(krm_fn::prespawn::Pool::new(spec.clone(), *size))
        });
        Some(pool.clone())
    }

    /// Kills every waiting process (the runner stops).
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let pools = std::mem::take(&mut *self.pools.lock().unwrap_or_else(PoisonError::into_inner));
        for pool in pools.values() {
            pool.close();
        }
    }
}

impl ExecEvaluator {
    /// `index`: the FunctionConfigs in use, read afresh by each call.
    pub fn new(index: impl Into<LiveIndex>, max_message_bytes: usize) -> Self {
        Self::with_pools(index, max_message_bytes, Arc::new(ExecPools::new(0)))
    }

    /// [`ExecEvaluator::new`], pre-spawning through `pools`.
    pub fn with_pools(
        index: impl Into<LiveIndex>,
        max_message_bytes: usize,
        pools: Arc<ExecPools>,
    ) -> Self {
        Self {
            index: index.into(),
            max_message_bytes,
            pools,
            env: Vec::new(),
        }
    }

    /// Binaries get `env` on top of this process's environment.
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }
}

impl Evaluator for ExecEvaluator {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        Box::pin(async move {
            let image = req.request.image.clone();
            let Some(found) = self
                .index
                .current()
                .try_binary_for(&image, &req.request.tag)
                .map_err(|e| EvalError::InvalidTag(e.into()))?
                .filter(|found| !binary_missing(found))
            else {
                return Err(EvalError::NotFound { image });
            };
            tracing::Span::current().record("evaluator", "exec");
            let spec = ExecSpec {
                program: found.path.into_os_string(),
                args: Vec::new(),
                env: self.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                current_dir: None,
            };
            // Run as the wrapper runs an entrypoint, answered alike (past the
            // deadline its processes are killed).
            let prespawn = self.pools.pool(&spec, found.prespawn);
            let mut function = Function::new(
                spec,
                self.max_message_bytes,
                self.max_message_bytes,
                "--max-request-body-size",
            );
            function.prespawn = prespawn;
            Ok(function
                .run(
                    &found.resolved_image,
                    req.request.resource_list,
                    req.deadline,
                )
                .await?)
        })
    }
}

/// Functions in pods from the [`PodCache`].
pub struct PodEvaluator {
    cache: PodCache,
    index: LiveIndex,
    max_message_bytes: usize,
    max_grpc_retries: usize,
}

impl PodEvaluator {
    pub fn new(
        cache: PodCache,
        index: impl Into<LiveIndex>,
        max_message_bytes: usize,
        max_grpc_retries: usize,
    ) -> Self {
        Self {
            cache,
            index: index.into(),
            max_message_bytes,
            max_grpc_retries,
        }
    }

    async fn call(&self, req: EvalRequest) -> Result<EvaluateFunctionResponse, EvalError> {
        let index = self.index.current();
        let (image, overrides) = match index
            .try_pod_settings_for(&req.request.image, &req.request.tag)
            .map_err(|e| EvalError::InvalidTag(e.into()))?
        {
            Some(m) => (m.resolved_image.clone(), PodRequestSettings::from(&m)),
            None => (
                index.normalize(&req.request.image),
                PodRequestSettings::default(),
            ),
        };
        tracing::Span::current().record("evaluator", "pod");
        let mut attempt = 0;
        loop {
            let waited = tracing::info_span!(
                target: "otel",
                "pod_cache.get",
                image = %image,
                pod = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
            );
            let lease = self
                .cache
                .get(&image, overrides.clone())
                .instrument(waited.clone())
                .await
                .map_err(|source| pod_error(image.clone(), source))
                .inspect_err(|err| {
                    waited.record("otel.status_code", "ERROR");
                    waited.record("otel.status_description", tracing::field::display(err));
                })?;
            waited.record("pod", tracing::field::display(lease.pod_id()));
            drop(waited);
            let mut client = FunctionEvaluatorClient::new(lease.channel())
                .max_decoding_message_size(self.max_message_bytes)
                .max_encoding_message_size(self.max_message_bytes);
            let mut call = tonic::Request::new(EvaluateFunctionRequest {
                image: image.clone(),
                ..req.request.clone()
            });
            if let Some(deadline) = req.deadline {
                // The pod enforces the same deadline and kills the function.
                call.set_timeout(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                );
            }
            // The call to the wrapper, a client span whose context goes
            // with the call: the wrapper's spans are its children.
            let calling = tracing::info_span!(
                target: "otel",
                "evaluator.FunctionEvaluator/EvaluateFunction",
                otel.kind = "client",
                rpc.system = "grpc",
                rpc.service = proto::EVALUATOR_SERVICE,
                rpc.method = "EvaluateFunction",
                pod = %lease.pod_id(),
                attempt,
                rpc.grpc.status_code = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
            );
            telemetry::propagate::inject(&calling, call.metadata_mut());
            let answered = client
                .evaluate_function(call)
                .instrument(calling.clone())
                .await;
            if !calling.is_disabled() {
                let code = answered.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
                calling.record("rpc.grpc.status_code", code as i32);
                if let Err(status) = &answered {
                    calling.record("otel.status_code", "ERROR");
                    calling.record("otel.status_description", status.message());
                }
            }
            drop(calling);
            match answered {
                Ok(resp) => return Ok(resp.into_inner()),
                Err(status) if pod_unreachable(&status) && attempt < self.max_grpc_retries => {
                    if !pod_gone(lease.channel()).await {
                        tracing::info!(%image, pod = %lease.pod_id(), attempt, %status, "call broke off but the pod is not gone; retrying");
                    } else {
                        tracing::info!(%image, pod = %lease.pod_id(), attempt, %status, "pod unavailable; evicting and retrying");
                        self.cache.evict(lease.pod_id()).await;
                    }
                    attempt += 1;
                }
                Err(source) => return Err(EvalError::PodAnswered { source }),
            }
        }
    }
}

impl Evaluator for PodEvaluator {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        Box::pin(async move {
            let image = req.request.image.clone();
            let deadline = req.deadline;
            with_deadline(deadline, &image, self.call(req)).await
        })
    }
}

/// How long a pod's health check may take before the pod counts as gone.
const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the pod behind `channel` is gone: its health check (on a new
/// connection if the last one was closed) answers anything but SERVING, or
/// fails (connection refused). No answer within the timeout is not proof:
/// on a busy pod the check may queue behind the calls on its connection.
/// (A process pod that exited, or a kube pod deleted or failed, is also
/// reported by its backend and removed from the cache.)
async fn pod_gone(channel: tonic::transport::Channel) -> bool {
    use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
    let mut client = HealthClient::new(channel);
    let check = client.check(HealthCheckRequest {
        service: String::new(),
    });
    match tokio::time::timeout(HEALTH_CHECK_TIMEOUT, check).await {
        Ok(Ok(resp)) => resp.get_ref().status != ServingStatus::Serving as i32,
        Ok(Err(_)) => true,
        Err(_) => false,
    }
}

/// Whether a pod call failed because the pod is not reachable (rather than
/// because of what the function did): UNAVAILABLE, or a broken connection,
/// which tonic reports as UNKNOWN with a transport error as its source, or
/// as CANCELLED when the connection's task ended under a call in flight
/// (the pod died mid-call). Our own caller's cancellation never shows up
/// here: it drops this future instead. Functions are pure, so calling
/// another pod is safe.
fn pod_unreachable(status: &Status) -> bool {
    use std::error::Error;
    match status.code() {
        Code::Unavailable | Code::Cancelled => true,
        Code::Unknown => {
            let mut source = status.source();
            while let Some(err) = source {
                if err.is::<tonic::transport::Error>() || err.is::<std::io::Error>() {
                    return true;
                }
                source = err.source();
            }
            false
        }
        _ => false,
    }
}

/// Tries each evaluator in the configured order; `NotFound` falls through.
pub struct MultiEvaluator {
    evaluators: Vec<Box<dyn Evaluator>>,
    /// The FunctionConfig documents rejected at start, said in one line.
    rejected: Option<String>,
    /// Why an image (and request tag) did not run built-in, if its tag is
    /// the only reason.
    not_built_in: Option<NotBuiltIn>,
}

/// [`MultiEvaluator::with_not_built_in`]'s question.
pub type NotBuiltIn = Arc<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

/// Rejected documents named in a NotFound answer, at most.
const MAX_REJECTED_NAMED: usize = 3;

impl MultiEvaluator {
    pub fn new(evaluators: Vec<Box<dyn Evaluator>>) -> Self {
        Self {
            evaluators,
            rejected: None,
            not_built_in: None,
        }
    }

    /// Adds `why(image, tag)` to the error of a call whose function never
    /// ran (no pod, no binary): the catalog's image of a built-in whose
    /// tag the built-in does not reproduce says so, and how to opt in.
    pub fn with_not_built_in(mut self, why: NotBuiltIn) -> Self {
        self.not_built_in = Some(why);
        self
    }

    fn note(&self, req: &EvalRequest, err: EvalError) -> EvalError {
        let err = self.note_rejected(err);
        // Only where no function ran and nothing else decided: no pod or
        // binary for the image, or its pod did not start.
        if !matches!(
            err,
            EvalError::NotFound { .. }
                | EvalError::NotFoundWithRejected { .. }
                | EvalError::Pod { .. }
                | EvalError::DeadlineExceeded { .. }
        ) {
            return err;
        }
        match self
            .not_built_in
            .as_ref()
            .and_then(|why| why(&req.request.image, &req.request.tag))
        {
            Some(note) => EvalError::NotBuiltIn {
                source: Box::new(err),
                note,
            },
            None => err,
        }
    }

    /// Names `rejected` (why each FunctionConfig document was rejected) in
    /// every NotFound answer.
    pub fn with_rejected(mut self, rejected: Vec<String>) -> Self {
        if rejected.is_empty() {
            return self;
        }
        let mut said = rejected
            .iter()
            .take(MAX_REJECTED_NAMED)
            .map(|r| krm_fn::call::shown_name(r).into_owned())
            .collect::<Vec<_>>()
            .join("; ");
        if rejected.len() > MAX_REJECTED_NAMED {
            said.push_str(&format!(
                "; and {} more (see the log)",
                rejected.len() - MAX_REJECTED_NAMED
            ));
        }
        self.rejected = Some(said);
        self
    }

    fn note_rejected(&self, err: EvalError) -> EvalError {
        match &self.rejected {
            Some(rejected) if err.code() == Code::NotFound => EvalError::NotFoundWithRejected {
                source: Box::new(err),
                rejected: rejected.clone(),
            },
            _ => err,
        }
    }
}

impl Evaluator for MultiEvaluator {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        Box::pin(async move {
            for evaluator in &self.evaluators {
                match evaluator.evaluate(req.clone()).await {
                    Err(EvalError::NotFound { .. }) => continue,
                    other => return other.map_err(|err| self.note(&req, err)),
                }
            }
            let image = req.request.image.clone();
            Err(self.note(&req, EvalError::NotFound { image }))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use crate::cache::CacheSettings;
    use proto::pb::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
    use runner_core::backend::{
        Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, StopReason,
    };
    use runner_core::config::ImageIndex;

    /// A pod on loopback whose first `break_first` calls fail UNAVAILABLE
    /// (as a call on a connection ended by GOAWAY does), with its health
    /// SERVING or not.
    #[derive(Clone)]
    struct FlakyPod {
        calls: Arc<AtomicUsize>,
        break_first: usize,
    }

    #[tonic::async_trait]
    impl FunctionEvaluator for FlakyPod {
        async fn evaluate_function(
            &self,
            req: tonic::Request<EvaluateFunctionRequest>,
        ) -> Result<tonic::Response<EvaluateFunctionResponse>, Status> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.break_first {
                return Err(Status::unavailable("connection reset"));
            }
            Ok(tonic::Response::new(EvaluateFunctionResponse {
                resource_list: req.into_inner().resource_list,
                log: Default::default(),
            }))
        }
    }

    async fn start_pod(pod: FlakyPod, serving: bool) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (reporter, health) = proto::health::health_reporter();
        let status = if serving {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        reporter.set_service_status("", status).await;
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(health)
                .add_service(FunctionEvaluatorServer::new(pod))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
        (format!("http://{addr}"), task)
    }

    /// Hands out the one pod at `endpoint`; records stops.
    struct OnePod {
        endpoint: String,
        stops: Mutex<Vec<PodId>>,
    }

    impl Backend for OnePod {
        fn name(&self) -> &'static str {
            "one-pod"
        }

        fn start(&self, _spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
            let pod = ReadyPod {
                id: PodId("pod-1".into()),
                endpoint: self.endpoint.clone(),
            };
            Box::pin(async move { Ok(pod) })
        }

        fn stop(
            &self,
            id: PodId,
            _reason: StopReason,
        ) -> BoxFuture<'static, Result<(), BackendError>> {
            self.stops.lock().unwrap().push(id);
            Box::pin(async { Ok(()) })
        }

        fn set_events(&self, _events: tokio::sync::mpsc::UnboundedSender<PodEvent>) {}
    }

    /// #11 item 2: a call that broke off at the transport is retried; the
    /// pod is evicted only if its health check fails.
    #[tokio::test]
    async fn a_broken_call_evicts_the_pod_only_if_its_health_fails() {
        for serving in [true, false] {
            let calls = Arc::new(AtomicUsize::new(0));
            let pod = FlakyPod {
                calls: calls.clone(),
                break_first: 1,
            };
            let (endpoint, server) = start_pod(pod, serving).await;
            let backend = Arc::new(OnePod {
                endpoint,
                stops: Mutex::new(Vec::new()),
            });
            let cache = PodCache::spawn(
                backend.clone() as Arc<dyn Backend>,
                CacheSettings::default(),
            );
            let index = Arc::new(ImageIndex::new(&[], "example.com/fn"));
            let evaluator = PodEvaluator::new(cache, index, 1 << 20, 2);
            let resp = evaluator
                .evaluate(EvalRequest::new(EvaluateFunctionRequest {
                    resource_list: bytes::Bytes::from_static(b"rl"),
                    image: "example.com/fn/flaky:v1".into(),
                    tag: String::new(),
                }))
                .await
                .unwrap();
            assert_eq!(&resp.resource_list[..], b"rl");
            assert_eq!(calls.load(Ordering::SeqCst), 2, "retried once");
            let stops = backend.stops.lock().unwrap().len();
            if serving {
                assert_eq!(stops, 0, "a serving pod was evicted");
            } else {
                assert_eq!(stops, 1, "a pod that does not serve was kept");
            }
            server.abort();
        }
    }

    #[test]
    fn a_broken_connection_counts_as_an_unreachable_pod_and_a_function_error_does_not() {
        assert!(pod_unreachable(&Status::unavailable("connection refused")));
        // hyper's "operation was canceled": the connection's task ended under
        // the call (the pod died mid-call).
        assert!(pod_unreachable(&Status::cancelled(
            "operation was canceled"
        )));
        assert!(!pod_unreachable(&Status::internal("function failed")));
        assert!(!pod_unreachable(&Status::unknown(
            "no transport error behind it"
        )));
        assert!(!pod_unreachable(&Status::deadline_exceeded("too slow")));
    }

    #[test]
    fn codes_are_chosen_by_walking_the_causes() {
        let unknown = pod_error(
            "img".into(),
            CacheError::PodStart {
                image: "img".into(),
                source: BackendError::UnknownImage {
                    image: "img".into(),
                    reason: "no entry".into(),
                },
            },
        );
        assert_eq!(unknown.code(), Code::NotFound);
        // Naming the FunctionConfigs rejected at start keeps the code.
        let named = EvalError::NotFoundWithRejected {
            source: Box::new(unknown),
            rejected: "configs.yaml (document 1): spec.image: empty".into(),
        };
        assert_eq!(Status::from(named).code(), Code::NotFound);
        let closing = pod_error("img".into(), CacheError::ShuttingDown);
        assert_eq!(Status::from(closing).code(), Code::Unavailable);
        let failed = pod_error(
            "img".into(),
            CacheError::PodStart {
                image: "img".into(),
                source: BackendError::StartFailed {
                    image: "img".into(),
                    source: runner_core::backend::cause("image pull backoff"),
                },
            },
        );
        let status = Status::from(failed);
        assert_eq!(status.code(), Code::Internal);
        assert!(
            status.message().contains("image pull backoff"),
            "{}",
            status.message()
        );
    }
}
