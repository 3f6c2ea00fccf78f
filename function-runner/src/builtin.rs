//! Built-in functions ([`krm_builtins`]) in the runner: which image runs
//! built-in ([`Builtins::resolve`]), and the evaluator that runs one for a
//! gRPC call ([`BuiltinEvaluator`]), answering exactly as a pod running
//! the catalog's image would (the same outcome mapping,
//! [`krm_fn::call::outcome`], on the ResourceList and log the function
//! leaves).
//!
//! An image runs built-in when a FunctionConfig's `goExecutor` lists it
//! (its `id` names the function, else the image's last path segment), or,
//! by default ([`BuiltinsMode`]), when it is one of the catalog's images of
//! a built-in name (`gcr.io/kpt-fn/NAME`,
//! `ghcr.io/kptdev/krm-functions-catalog/NAME` or the bare `NAME`) with a
//! release tag the built-in reproduces ([`krm_builtins::versions`]; with
//! any tag or digest under `--builtins=any-tag`), and no FunctionConfig
//! maps that image and tag to a binary or a pod.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use futures::future::BoxFuture;
use krm_builtins::container::{run_on_bytes, Answer, CALL_STACK_BYTES};
use krm_builtins::{Builtin, Context, CATALOG_PREFIXES};
use krm_fn::call::deadline;
use krm_fn::exec::{ExitStatus, Output};
use proto::pb::EvaluateFunctionResponse;

use crate::evaluator::{EvalError, EvalRequest, Evaluator};
use crate::metrics::RunnerMetrics;
use runner_core::config::{ImageIndex, LiveIndex};

/// Whether `prefix` (`--default-image-prefix`, with or without its
/// slashes) is one of the catalog's registries.
fn bare_names_are_the_catalogs(prefix: &str) -> bool {
    let prefix = prefix.trim_matches('/');
    CATALOG_PREFIXES
        .iter()
        .any(|p| p.trim_end_matches('/') == prefix)
}

/// Which of the catalog's images run built-in where no FunctionConfig
/// says (`--builtins`; goExecutor entries run built-in in every mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BuiltinsMode {
    /// `versions`: the release tags each built-in reproduces
    /// ([`krm_builtins::versions::TABLE`]); other tags, digests and no tag
    /// run as images.
    #[default]
    Versions,
    /// `any-tag`: every tag and digest of the catalog's images, whatever
    /// release it is (the built-in answers as the releases it reproduces).
    AnyTag,
    /// `none` (`--no-default-builtins`): the catalog's images run as any
    /// image.
    None,
}

impl std::str::FromStr for BuiltinsMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "versions" => Ok(BuiltinsMode::Versions),
            "any-tag" => Ok(BuiltinsMode::AnyTag),
            "none" => Ok(BuiltinsMode::None),
            other => Err(format!(
                "{other:?} is not a built-ins mode: versions (the release tags each built-in \
                 reproduces), any-tag (every tag of the catalog's images) or none"
            )),
        }
    }
}

/// `image` with the request's `tag` where the image has none (Porch sends
/// the tag in the image) and the tag names one version: a plain tag, or a
/// semver constraint that only one version meets (`0.4.2`, `=v0.4.2`; the
/// catalog's tags are written with their `v`). Any other constraint pins
/// nothing here: `serve` resolves it against the registry's tags first
/// ([`crate::tag_resolution`]) and hands this the resolved `image:tag`;
/// without that (`eval`), the image stays untagged and runs as an image.
fn pinned<'a>(image: &'a str, tag: &str) -> Cow<'a, str> {
    use krm_builtins::versions::{pin, Pin};
    let t = tag.trim();
    let t = t.strip_prefix('=').unwrap_or(t).trim();
    let one = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !one || pin(image) != Pin::Untagged {
        return image.into();
    }
    let exact_version = t.starts_with(|c: char| c.is_ascii_digit())
        && t.split('.').count() == 3
        && t.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if exact_version {
        format!("{image}:v{t}").into()
    } else {
        format!("{image}:{t}").into()
    }
}

/// Decides which images run built-in, from the FunctionConfigs in use.
#[derive(Clone)]
pub struct Builtins {
    index: LiveIndex,
    mode: BuiltinsMode,
}

/// What decides an image and tag, before the catalog's default.
enum Configured {
    /// A binary (present) runs it.
    Binary,
    /// A goExecutor names this built-in; the image reference it matched.
    Go(&'static Builtin, String),
    /// No FunctionConfig, or a binaryExecutor whose binary is missing (its
    /// matched reference, whose tag counts).
    Default(Option<String>),
}

impl Builtins {
    /// `mode`: which of the catalog's images of built-in names run built-in
    /// where no FunctionConfig says otherwise.
    pub fn new(index: LiveIndex, mode: BuiltinsMode) -> Self {
        Builtins { index, mode }
    }

    /// The built-in function that runs `image` (with the request's tag
    /// constraint), or `None`: not built-in.
    pub fn resolve(&self, image: &str, tag: &str) -> Result<Option<&'static Builtin>, EvalError> {
        Ok(self.resolve_pinned(image, tag)?.map(|(b, _)| b))
    }

    /// [`Builtins::resolve`], with the image reference the built-in
    /// answers for: its tag (a FunctionConfig's resolved one, else the
    /// request's) names the release it answers as
    /// ([`Builtin::release_of`]).
    pub fn resolve_pinned<'a>(
        &self,
        image: &'a str,
        tag: &str,
    ) -> Result<Option<(&'static Builtin, Cow<'a, str>)>, EvalError> {
        let index = self.index.current();
        let matched = match self.configured(&index, image, tag)? {
            Configured::Binary => return Ok(None),
            Configured::Go(builtin, matched) => return Ok(Some((builtin, matched.into()))),
            Configured::Default(matched) => matched,
        };
        let Some((builtin, pinned)) = self.catalog_default(&index, image, tag, matched) else {
            return Ok(None);
        };
        if self.mode == BuiltinsMode::Versions && !builtin.reproduces(&pinned) {
            return Ok(None);
        }
        Ok(Some((builtin, pinned)))
    }

    /// What the binaryExecutor and goExecutor FunctionConfigs say of
    /// `image` and `tag`.
    fn configured(
        &self,
        index: &ImageIndex,
        image: &str,
        tag: &str,
    ) -> Result<Configured, EvalError> {
        // A tag that one FunctionConfig lists under binaryExecutor and
        // goExecutor runs the binary, as in serve's chain (exec first).
        // A binary that is missing (Porch's FunctionConfigs in an image
        // without Porch's binaries) leaves the call to the built-in of its
        // image, if there is one, else to a pod.
        let binary = index
            .try_binary_for(image, tag)
            .map_err(|e| EvalError::InvalidTag(e.into()))?;
        let missing = match binary {
            Some(found) if crate::evaluator::binary_missing(&found) => Some(found.resolved_image),
            Some(_) => return Ok(Configured::Binary),
            None => None,
        };
        if let Some(go) = index
            .try_go_for(image, tag)
            .map_err(|e| EvalError::InvalidTag(e.into()))?
        {
            return match krm_builtins::find(&go.id) {
                Some(b) => Ok(Configured::Go(b, go.resolved_image)),
                None => Err(EvalError::UnknownBuiltin {
                    id: go.id,
                    config: go.config_name,
                    known: krm_builtins::ALL
                        .iter()
                        .map(|b| b.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            };
        }
        Ok(Configured::Default(missing))
    }

    /// The built-in of a catalog image, where the mode runs the catalog's
    /// images built in at all and no podExecutor keeps the image and tag,
    /// with the reference whose tag counts (`matched`, a missing binary's,
    /// else the request's): whatever that tag is.
    fn catalog_default<'a>(
        &self,
        index: &ImageIndex,
        image: &'a str,
        tag: &str,
        matched: Option<String>,
    ) -> Option<(&'static Builtin, Cow<'a, str>)> {
        if self.mode == BuiltinsMode::None {
            return None;
        }
        // A bare name is the catalog's only where the runner's default
        // prefix is (a runner whose bare names mean its own registry's
        // images runs those).
        if !image.contains('/') && !bare_names_are_the_catalogs(index.default_prefix()) {
            return None;
        }
        let builtin = krm_builtins::for_catalog_image(image)?;
        // An image and tag that a FunctionConfig gives a pod keep it (a
        // binary was looked for first; a constraint that does not parse
        // was refused there). Asked only of the catalog's images: other
        // calls pay nothing more here.
        if index.pod_settings_for(image, tag).is_some() {
            return None;
        }
        let pinned = matched.map_or_else(|| pinned(image, tag), Cow::Owned);
        Some((builtin, pinned))
    }

    /// Why the catalog's `image` did not run built-in, when its tag is the
    /// only reason (no FunctionConfig decided it, and `--builtins=any-tag`
    /// would run it built in): for the error of a call that then found no
    /// other way to run it.
    pub fn not_reproduced(&self, image: &str, tag: &str) -> Option<String> {
        if self.mode != BuiltinsMode::Versions {
            return None;
        }
        let index = self.index.current();
        let Ok(Configured::Default(matched)) = self.configured(&index, image, tag) else {
            return None;
        };
        self.catalog_default(&index, image, tag, matched)
            .filter(|(b, pinned)| !b.reproduces(pinned))
            .map(|(b, pinned)| b.not_reproduced(&pinned))
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The threads built-in calls run on, started once and kept: a thread
/// with that stack costs ~0.1 ms to start, a fifth of a small call. As many
/// as [`WORKERS_PER_CPU`] per processor: the calls are CPU work, and a long
/// one holds its thread until its next check of the deadline. `None` when
/// not one thread could start.
fn workers() -> Option<&'static std::sync::Mutex<std::sync::mpsc::Sender<Job>>> {
    static WORKERS: std::sync::OnceLock<Option<std::sync::Mutex<std::sync::mpsc::Sender<Job>>>> =
        std::sync::OnceLock::new();
    WORKERS
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let rx = Arc::new(std::sync::Mutex::new(rx));
            let mut started = 0;
            for i in 0..worker_count() {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("builtin-{i}"))
                    .stack_size(CALL_STACK_BYTES)
                    .spawn(move || loop {
                        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok(job) = job else { return };
                        // A panic (none is known; release builds abort on
                        // one) drops the job's answer: its caller gets
                        // an error, and the thread serves on.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    });
                match spawned {
                    Ok(_) => started += 1,
                    Err(err) => {
                        tracing::warn!(%err, "a thread for built-in functions did not start")
                    }
                }
            }
            (started > 0).then(|| std::sync::Mutex::new(tx))
        })
        .as_ref()
}

/// Threads for built-in calls per processor.
const WORKERS_PER_CPU: usize = 4;

/// How many threads [`workers`] starts.
fn worker_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) * WORKERS_PER_CPU
}

/// One slot per thread of [`workers`]: a call takes one before it is
/// queued.
fn slots() -> &'static Arc<tokio::sync::Semaphore> {
    static SLOTS: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(worker_count())))
}

/// A built-in's answer as the exec core reports a process's.
fn output_of(answer: Answer) -> Output {
    Output {
        status: ExitStatus::Code(answer.exit_code),
        stdout: Bytes::from(answer.stdout),
        stderr: Bytes::from(answer.stderr),
        stderr_truncated: false,
    }
}

/// Runs a built-in for gRPC calls: FunctionConfig `goExecutor` images and,
/// by default, the catalog's.
pub struct BuiltinEvaluator {
    builtins: Builtins,
    max_message_bytes: usize,
    metrics: Option<Arc<RunnerMetrics>>,
}

impl BuiltinEvaluator {
    pub fn new(builtins: Builtins, max_message_bytes: usize) -> Self {
        BuiltinEvaluator {
            builtins,
            max_message_bytes,
            metrics: None,
        }
    }

    /// Counts calls in `metrics` (`builtin_evaluations`).
    pub fn with_metrics(mut self, metrics: Arc<RunnerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// Sets the flag when dropped: a call whose caller went away, or whose
/// deadline passed, stops at its function's next check.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Evaluator for BuiltinEvaluator {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        Box::pin(async move {
            let image = req.request.image.clone();
            let Some((builtin, pinned)) = self.builtins.resolve_pinned(&image, &req.request.tag)?
            else {
                return Err(EvalError::NotFound { image });
            };
            let current = tracing::Span::current();
            if !current.is_disabled() {
                current.record("evaluator", "builtin");
                current.record(
                    "builtin_release",
                    builtin.release_of(&pinned).unwrap_or("master"),
                );
            }
            let flag = Arc::new(AtomicBool::new(false));
            let _cancel = CancelOnDrop(flag.clone());
            let ctx = Context::new()
                .with_release(builtin.release_of(&pinned))
                .with_deadline(req.deadline.map(|d| d.into_std()))
                .with_cancel(flag);
            let input = req.request.resource_list;
            let (tx, rx) = tokio::sync::oneshot::channel();
            // A call waits for a free thread here, under its deadline,
            // holding nothing but its request: a queue of calls behind
            // slow ones cannot grow past the threads.
            let Some(permit) =
                deadline::before(req.deadline, slots().clone().acquire_owned()).await
            else {
                return Err(EvalError::DeadlineExceeded { image });
            };
            let job: Job = Box::new(move || {
                let _permit = permit;
                // Gone or late while it waited: not even parsed.
                let answer = match ctx.check() {
                    Ok(()) => run_on_bytes(builtin, &input, &ctx).map(output_of),
                    Err(_) => None,
                };
                let _ = tx.send(answer);
            });
            let queued = workers().is_some_and(|w| {
                w.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .send(job)
                    .is_ok()
            });
            if !queued {
                return Err(EvalError::Call(krm_fn::call::CallError::StartFailed {
                    image,
                    source: krm_fn::exec::ExecError::Spawn {
                        program: format!("built-in {}", builtin.name),
                        source: std::io::Error::other(
                            "no thread for built-in functions could start",
                        ),
                    },
                }));
            }
            let answer = deadline::before(req.deadline, rx).await;
            let result = match answer {
                None | Some(Ok(None)) => Err(EvalError::DeadlineExceeded {
                    image: image.clone(),
                }),
                // The thread ended without an answer: it panicked.
                Some(Err(_)) => Err(EvalError::BuiltinPanicked {
                    image: image.clone(),
                }),
                Some(Ok(Some(output))) => {
                    if output.stdout.len() > self.max_message_bytes {
                        Err(EvalError::Call(krm_fn::call::CallError::OutputTooLarge {
                            image: image.clone(),
                            limit: self.max_message_bytes,
                            flag: "--max-request-body-size",
                        }))
                    } else {
                        krm_fn::call::outcome(&image, output, self.max_message_bytes)
                            .map_err(EvalError::Call)
                    }
                }
            };
            let code = match &result {
                Ok(_) => tonic::Code::Ok,
                Err(e) => e.code(),
            };
            tracing::info!(%image, function = builtin.name, outcome = ?code, "evaluated by a built-in function");
            if let Some(m) = &self.metrics {
                m.observe_builtin(builtin.name, code);
            }
            result
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
