//! Built-in functions ([`krm_builtins`]) in the runner: which image runs
//! built-in ([`Builtins::resolve`]), and the evaluator that runs one for a
//! gRPC call ([`BuiltinEvaluator`]), answering exactly as a pod running
//! the catalog's image would (the same outcome mapping,
//! [`krm_fn::call::outcome`], on the ResourceList and log the function
//! leaves).
//!
//! An image runs built-in when a FunctionConfig's `goExecutor` lists it
//! (its `id` names the function, else the image's last path segment), or,
//! unless turned off (`--no-default-builtins`), when it is one of the
//! catalog's images of a built-in name: `gcr.io/kpt-fn/NAME`,
//! `ghcr.io/kptdev/krm-functions-catalog/NAME` or the bare `NAME`, with any
//! tag or digest, and no FunctionConfig maps that image and tag to a binary
//! or a pod.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use futures::future::BoxFuture;
use krm_builtins::{Builtin, Context, ResourceList, Stop};
use krm_fn::call::deadline;
use krm_fn::exec::{ExitStatus, Output};
use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};
use proto::pb::EvaluateFunctionResponse;

use crate::evaluator::{EvalError, EvalRequest, Evaluator};
use crate::metrics::RunnerMetrics;
use runner_core::config::LiveIndex;

/// The registries whose images of a built-in name run built-in by
/// default: kpt's (`gcr.io/kpt-fn`, where kpt expands bare names) and the
/// catalog's current one.
pub const CATALOG_PREFIXES: [&str; 2] = ["gcr.io/kpt-fn/", "ghcr.io/kptdev/krm-functions-catalog/"];

/// The function name of a catalog image (`gcr.io/kpt-fn/set-labels:v0.2`
/// → `set-labels`; bare `set-labels@sha256:…` → `set-labels`), or `None`
/// for an image of another registry or path.
pub fn catalog_name(image: &str) -> Option<&str> {
    let path = image.split_once('@').map_or(image, |(p, _)| p);
    // A tag follows the last `:` after the last `/` (a registry's port
    // comes before a `/`).
    let path = match path.rfind(':') {
        Some(i) if !path[i..].contains('/') => &path[..i],
        _ => path,
    };
    let name = CATALOG_PREFIXES
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .unwrap_or(path);
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The name kpt gives an image in its lines: a bare name is expanded to
/// kpt's registry (`set-labels:v0.2` → `gcr.io/kpt-fn/set-labels:v0.2`).
pub fn kpt_image_name(image: &str) -> String {
    if image.contains('/') {
        image.to_owned()
    } else {
        format!("{}{image}", CATALOG_PREFIXES[0])
    }
}

/// Whether `prefix` (`--default-image-prefix`, with or without its
/// slashes) is one of the catalog's registries.
fn bare_names_are_the_catalogs(prefix: &str) -> bool {
    let prefix = prefix.trim_matches('/');
    CATALOG_PREFIXES
        .iter()
        .any(|p| p.trim_end_matches('/') == prefix)
}

/// Decides which images run built-in, from the FunctionConfigs in use.
#[derive(Clone)]
pub struct Builtins {
    index: LiveIndex,
    defaults: bool,
}

impl Builtins {
    /// `defaults`: the catalog's images of built-in names run built-in
    /// where no FunctionConfig says otherwise.
    pub fn new(index: LiveIndex, defaults: bool) -> Self {
        Builtins { index, defaults }
    }

    /// From the FunctionConfig documents in `dir` (those that do not load
    /// are left out: the runner names them when it starts), with short
    /// names under `default_prefix`: for `eval` and `render`, which decide
    /// before any runner is started.
    pub fn from_dir(dir: Option<&std::path::Path>, default_prefix: &str, defaults: bool) -> Self {
        let configs = dir
            .map(|d| runner_core::config::load_dir_with_prefix(d, default_prefix).configs)
            .unwrap_or_default();
        let (index, _) = runner_core::config::ImageIndex::build(&configs, default_prefix);
        Builtins::new(LiveIndex::fixed(Arc::new(index)), defaults)
    }

    /// The built-in function that runs `image` (with the request's tag
    /// constraint), or `None`: not built-in.
    pub fn resolve(&self, image: &str, tag: &str) -> Result<Option<&'static Builtin>, EvalError> {
        let index = self.index.current();
        // A tag that one FunctionConfig lists under binaryExecutor and
        // goExecutor runs the binary, as in serve's chain (exec first).
        if index
            .try_binary_for(image, tag)
            .map_err(|e| EvalError::InvalidTag(e.into()))?
            .is_some()
        {
            return Ok(None);
        }
        if let Some(go) = index
            .try_go_for(image, tag)
            .map_err(|e| EvalError::InvalidTag(e.into()))?
        {
            return match krm_builtins::find(&go.id) {
                Some(b) => Ok(Some(b)),
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
        if !self.defaults {
            return Ok(None);
        }
        // A bare name is the catalog's only where the runner's default
        // prefix is (a runner whose bare names mean its own registry's
        // images runs those).
        if !image.contains('/') && !bare_names_are_the_catalogs(index.default_prefix()) {
            return Ok(None);
        }
        let Some(builtin) = catalog_name(image).and_then(krm_builtins::find) else {
            return Ok(None);
        };
        // An image and tag that a FunctionConfig gives a pod keep it (a
        // binary was looked for first; a constraint that does not parse
        // was refused there).
        Ok(index
            .pod_settings_for(image, tag)
            .is_none()
            .then_some(builtin))
    }
}

/// Why a ResourceList could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the ResourceList is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("the ResourceList does not parse: {0}")]
    Parse(#[from] krm_yaml::parse::ParseError),
    #[error("the input is empty: no ResourceList")]
    Empty,
    #[error("the input is not a ResourceList: {0}")]
    NotAResourceList(String),
}

/// A ResourceList's text read into the tree: its `items` and
/// `functionConfig` (JSON too: it is YAML).
pub fn read_resource_list(input: &[u8]) -> Result<ResourceList, InputError> {
    let text = std::str::from_utf8(input)?;
    let mut docs = krm_yaml::parse::parse(text)?;
    if docs.is_empty() {
        return Err(InputError::Empty);
    }
    let mut doc = docs.swap_remove(0);
    let root = kyaml::content_mut(&mut doc);
    if root.kind != Kind::Mapping {
        return Err(InputError::NotAResourceList(format!(
            "a {}, not a mapping",
            kyaml::kind_name(root.kind)
        )));
    }
    let kind = kyaml::value_of(kyaml::field(root, "kind"));
    if kind != "ResourceList" {
        return Err(InputError::NotAResourceList(format!(
            "kind is {kind:?}, not \"ResourceList\""
        )));
    }
    let mut rl = ResourceList::default();
    let mut content = std::mem::take(&mut root.content).into_iter();
    while let (Some(key), Some(value)) = (content.next(), content.next()) {
        match key.value.as_str() {
            "items" => match value.kind {
                Kind::Sequence => rl.items = value.content,
                Kind::Scalar if value.tag == kyaml::NULL_TAG => {}
                k => {
                    return Err(InputError::NotAResourceList(format!(
                        "items is a {}, not a sequence",
                        kyaml::kind_name(k)
                    )))
                }
            },
            "functionConfig" if value.tag != kyaml::NULL_TAG => rl.function_config = Some(value),
            _ => {}
        }
    }
    Ok(rl)
}

/// The ResourceList a catalog function writes: its items, its
/// functionConfig and its results.
pub fn write_resource_list(rl: ResourceList) -> String {
    let mut m = vec![
        Node::string("apiVersion"),
        Node::string("config.kubernetes.io/v1"),
        Node::string("kind"),
        Node::string("ResourceList"),
        Node::string("items"),
        Node::sequence(rl.items),
    ];
    if let Some(fc) = rl.function_config {
        m.push(Node::string("functionConfig"));
        m.push(fc);
    }
    if !rl.results.is_empty() {
        m.push(Node::string("results"));
        m.push(Node::sequence(
            rl.results
                .iter()
                .map(krm_builtins::FnResult::to_node)
                .collect(),
        ));
    }
    krm_yaml::emit::encode_node(&Node::mapping(m), true)
}

/// What the catalog's binary would have done with `input`: exit status,
/// stdout (the ResourceList) and stderr. `None`: cancelled.
pub fn run_on_bytes(builtin: &Builtin, input: &[u8], ctx: &Context) -> Option<Output> {
    let failed = |stderr: String| Output {
        status: ExitStatus::Code(1),
        stdout: Bytes::new(),
        stderr: Bytes::from(stderr),
        stderr_truncated: false,
    };
    let mut rl = match read_resource_list(input) {
        Ok(rl) => rl,
        Err(err) => return Some(failed(format!("{}: {err}\n", builtin.name))),
    };
    let outcome = builtin.run(&mut rl, ctx);
    let mut stderr = std::mem::take(&mut rl.log);
    let status = match outcome {
        Ok(()) => ExitStatus::Code(0),
        Err(Stop::Cancelled) => return None,
        Err(Stop::Failed(text)) => {
            stderr.push_str(&text);
            ExitStatus::Code(1)
        }
    };
    Some(Output {
        status,
        stdout: Bytes::from(write_resource_list(rl)),
        stderr: Bytes::from(stderr),
        stderr_truncated: false,
    })
}

/// Gives untagged scalars the tag a YAML reader would (`!!int` for a plain
/// `3`, `!!str` for a quoted one), as writing the items out and reading
/// them back between two functions would: the catalog's setters leave new
/// values untagged, and the next function in a pipeline reads tags.
pub fn retag(items: &mut [Node]) {
    let mut stack: Vec<&mut Node> = items.iter_mut().collect();
    while let Some(n) = stack.pop() {
        if n.kind == Kind::Scalar && n.tag.is_empty() {
            n.tag = if n.style.is_empty() {
                krm_yaml::resolve::resolve_plain(&n.value)
            } else {
                "!!str"
            }
            .into();
        }
        stack.extend(n.content.iter_mut());
    }
}

/// Runs `f` on a thread with [`CALL_STACK_BYTES`] of stack (the
/// caller's may be smaller than deep input needs); `None` if no thread
/// could start.
pub fn on_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .stack_size(CALL_STACK_BYTES)
            .spawn_scoped(scope, f);
        match spawned {
            Ok(thread) => Some(
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            ),
            Err(err) => {
                tracing::warn!(%err, "no thread for a built-in function");
                None
            }
        }
    })
}

/// [`Builtin::run`] on a big stack ([`on_big_stack`]).
pub fn run_with_stack(builtin: &Builtin, rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    on_big_stack(|| builtin.run(rl, ctx)).unwrap_or_else(|| {
        Err(Stop::Failed(format!(
            "no thread could start for built-in {}",
            builtin.name
        )))
    })
}

/// Stack of the threads built-in calls run on: the tree is walked
/// recursively, and the parser accepts nesting 10,000 deep (reserved, not
/// committed, until used).
pub(crate) const CALL_STACK_BYTES: usize = 256 << 20;

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
            let Some(builtin) = self.builtins.resolve(&image, &req.request.tag)? else {
                return Err(EvalError::NotFound { image });
            };
            let flag = Arc::new(AtomicBool::new(false));
            let _cancel = CancelOnDrop(flag.clone());
            let ctx = Context::new()
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
                    Ok(()) => run_on_bytes(builtin, &input, &ctx),
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
