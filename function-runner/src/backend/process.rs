//! The `process` backend, the embedded default: each "pod" is a
//! `wrapper-server` child process on a loopback port, started exactly as a
//! pod's container is (`wrapper-server --port P -- ENTRYPOINT`).
//!
//! - The wrapper binds `127.0.0.1:0` and prints the address it got
//!   (`--print-address`), so ports never collide.
//! - Ready means its health service says SERVING (a health Watch: no fixed
//!   sleeps, no polling); failed means it exited, reported as
//!   [`PodEvent::Failed`] at once.
//! - It holds the write end of the wrapper's stdin (`--exit-with-stdin`):
//!   however the runner ends, even by SIGKILL, the wrapper sees EOF and exits,
//!   killing its functions. `stop` sends SIGTERM (drain), then SIGKILL.
//!
//! # Which entrypoint serves an image: [`FunctionMap`]
//!
//! Given `--process-functions PATH`:
//! - PATH a directory: the executable `PATH/<name>:<tag>`, else `PATH/<name>`,
//!   where `<name>` is the last path segment of the image without tag or
//!   digest: `ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1` →
//!   `set-namespace:v0.4.1`, then `set-namespace`.
//! - PATH a YAML file: a map from image reference to argv, looked up by the
//!   full reference, then without the tag, then by `<name>:<tag>`, then by
//!   `<name>`:
//!   ```yaml
//!   ghcr.io/kptdev/krm-functions-catalog/set-namespace: [/opt/fns/set-namespace]
//!   example-fn: [/usr/local/bin/example-fn, --verbose]
//!   ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tracing::Instrument as _;

use futures::future::BoxFuture;
use krm_fn::exec::{Process, Signal};
use runner_core::backend::serving::{wait_serving, ServingError};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use runner_core::backend::{Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, StopReason};
use runner_core::image::ImageRef;

/// How long a stopping wrapper may drain before it is killed: less than the
/// runner's own wait for its pods at exit (8 s), so that they are gone
/// before it sweeps what they left.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Image → entrypoint, for local use. See the module docs.
#[derive(Debug, Clone)]
pub enum FunctionMap {
    Dir(PathBuf),
    File(HashMap<String, Vec<String>>),
    /// No `--process-functions` was given: no image is known.
    Unset,
}

#[derive(Debug, thiserror::Error)]
pub enum FunctionMapError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: expected a map from image to a non-empty list of strings: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("{path}: entry {image:?} has an empty command")]
    Empty { path: PathBuf, image: String },
}

impl FunctionMap {
    /// A directory of executables, or a YAML file mapping images to argv.
    pub fn load(path: &Path) -> Result<Self, FunctionMapError> {
        if path.is_dir() {
            return Ok(FunctionMap::Dir(path.to_path_buf()));
        }
        let text = std::fs::read_to_string(path).map_err(|source| FunctionMapError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let map: HashMap<String, Vec<String>> =
            serde_yaml_ng::from_str(&text).map_err(|source| FunctionMapError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        if let Some((image, _)) = map.iter().find(|(_, argv)| argv.is_empty()) {
            return Err(FunctionMapError::Empty {
                path: path.to_path_buf(),
                image: image.clone(),
            });
        }
        Ok(FunctionMap::File(map))
    }

    /// The argv that serves `image`, if any.
    pub fn resolve(&self, image: &str) -> Option<Vec<String>> {
        let parts = ImageParts::parse(image);
        match self {
            FunctionMap::Dir(dir) => parts
                .dir_candidates()
                .into_iter()
                .map(|name| dir.join(name))
                .find(|p| is_executable(p))
                .map(|p| vec![p.to_string_lossy().into_owned()]),
            FunctionMap::File(map) => parts
                .file_candidates(image)
                .iter()
                .find_map(|key| map.get(key).cloned()),
            FunctionMap::Unset => None,
        }
    }

    /// The map's own name for what serves `image` (the executable's file
    /// name, or the YAML key that matched): an image reference that
    /// resolves to the same entrypoint. Images that differ only where the
    /// map does not look (`r1/echo-fn`, `r2/echo-fn`) share it, and so one
    /// pod.
    pub fn canonical(&self, image: &str) -> Option<String> {
        let parts = ImageParts::parse(image);
        match self {
            FunctionMap::Dir(dir) => parts
                .dir_candidates()
                .into_iter()
                .find(|name| is_executable(&dir.join(name))),
            FunctionMap::File(map) => parts
                .file_candidates(image)
                .into_iter()
                .find(|key| map.contains_key(key)),
            FunctionMap::Unset => None,
        }
    }

    /// Whether no map was given at all.
    pub fn is_unset(&self) -> bool {
        matches!(self, FunctionMap::Unset)
    }
}

/// The keys a function map looks an image up by: the pieces of its [`ImageRef`].
struct ImageParts<'a> {
    without_tag: &'a str,
    name: &'a str,
    tag: Option<&'a str>,
}

impl<'a> ImageParts<'a> {
    fn parse(image: &'a str) -> Self {
        // `split`, not `parse`: the map answers for whatever image it is handed; refusing
        // malformed requests is not its job.
        let image = ImageRef::split(image);
        Self {
            without_tag: image.name,
            name: image.last_segment(),
            tag: image.tag,
        }
    }

    fn dir_candidates(&self) -> Vec<String> {
        let mut c = Vec::new();
        if let Some(tag) = self.tag {
            c.push(format!("{}:{tag}", self.name));
        }
        c.push(self.name.to_string());
        c
    }

    fn file_candidates(&self, image: &str) -> Vec<String> {
        let mut c = vec![image.to_string(), self.without_tag.to_string()];
        c.extend(self.dir_candidates());
        c
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The process backend. See the module docs.
pub struct ProcessBackend {
    wrapper: PathBuf,
    functions: FunctionMap,
    max_message_bytes: usize,
    /// Added to each wrapper's environment, which its function inherits.
    env: Vec<(String, String)>,
    events: OnceLock<mpsc::UnboundedSender<PodEvent>>,
    pods: Arc<Mutex<HashMap<PodId, oneshot::Sender<oneshot::Sender<()>>>>>,
    next_id: AtomicU64,
    /// [`Backend::pod_key`]'s answers by image: the cache asks on every
    /// call, and a directory map costs stats. Found entries only (a stale
    /// one costs a start that resolves afresh and fails, saying why);
    /// emptied when it holds [`MAX_REMEMBERED_KEYS`].
    keys: Mutex<HashMap<String, String>>,
}

/// Most images whose pod key the process backend remembers.
const MAX_REMEMBERED_KEYS: usize = 4096;

impl ProcessBackend {
    pub fn new(wrapper: PathBuf, functions: FunctionMap, max_message_bytes: usize) -> Self {
        Self {
            wrapper,
            functions,
            max_message_bytes,
            env: Vec::new(),
            events: OnceLock::new(),
            pods: Arc::default(),
            next_id: AtomicU64::new(1),
            keys: Mutex::default(),
        }
    }

    /// Functions get `env` on top of this process's environment (`eval
    /// -e`): it is the wrappers', which their functions inherit.
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// `wrapper-server` next to the running executable (where cargo and the
    /// release layout put it), else on `PATH`.
    pub fn default_wrapper_path() -> PathBuf {
        Some(runner_core::backend::binaries_dir().join("wrapper-server"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("wrapper-server"))
    }

    /// Number of wrapper processes running now.
    pub fn running(&self) -> usize {
        self.pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// An image the function map does not know.
fn unknown(image: String, no_map: bool) -> BackendError {
    let reason = if no_map {
        "no function map was given (--process-functions: a directory of executables or a YAML map of image to argv), so the process backend knows no image"
    } else {
        "the process backend's function map (--process-functions) has no entry for it"
    };
    BackendError::UnknownImage {
        image,
        reason: reason.into(),
    }
}

impl Backend for ProcessBackend {
    fn name(&self) -> &'static str {
        "process"
    }

    /// What the map runs for it: a caller naming one function under many
    /// prefixes gets one pod, not one each.
    fn pod_key(&self, image: &str) -> Option<String> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = keys.get(image) {
            return Some(key.clone());
        }
        let key = self.functions.canonical(image)?;
        if keys.len() >= MAX_REMEMBERED_KEYS {
            keys.clear();
        }
        keys.insert(image.to_string(), key.clone());
        Some(key)
    }

    fn check(&self, image: &str) -> Result<(), BackendError> {
        match self.functions.canonical(image) {
            Some(_) => Ok(()),
            None => Err(unknown(image.to_string(), self.functions.is_unset())),
        }
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.events.set(events);
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let entrypoint = self.functions.resolve(&spec.image);
        let no_map = self.functions.is_unset();
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = PodId(runner_core::backend::pod_name(
            &spec.image,
            &format!("p{n}"),
        ));
        let wrapper = self.wrapper.clone();
        let max = self.max_message_bytes;
        let env = self.env.clone();
        let events = self.events.get().cloned();
        let pods = self.pods.clone();
        Box::pin(async move {
            let Some(entrypoint) = entrypoint else {
                return Err(unknown(spec.image, no_map));
            };
            // The wrapper refuses to start on an entrypoint that cannot run;
            // checked here too, so that the call's error says why (the
            // wrapper's own message goes to its log).
            if let Some(Err(err)) =
                krm_fn::exec::ExecSpec::from_argv(entrypoint.iter()).map(|e| e.resolve())
            {
                return Err(BackendError::StartFailed {
                    image: spec.image,
                    source: runner_core::backend::cause(err),
                });
            }
            let started = tokio::time::Instant::now();
            let mut cmd = Command::new(&wrapper);
            cmd.args([
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--print-address",
                "--exit-with-stdin",
            ])
            .args(["--max-request-body-size", &max.to_string()])
            .args(spec.prespawn_args())
            .arg("--")
            .args(&entrypoint)
            // The wrapper exports spans as the runner does (the OTEL_*
            // variables it inherits), under a name of its own; its metrics
            // would all want one port on this host: off.
            .env("OTEL_SERVICE_NAME", "wrapper-server")
            .env("OTEL_METRICS_EXPORTER", "none")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            let failed = |err: StartError| BackendError::StartFailed {
                image: spec.image.clone(),
                source: runner_core::backend::cause(err),
            };
            let (mut process, stdio) = tracing::info_span!(target: "otel", "wrapper.spawn")
                .in_scope(|| Process::spawn_server(&mut cmd))
                .map_err(|source| {
                    failed(StartError::Spawn {
                        wrapper: wrapper.clone(),
                        source,
                    })
                })?;
            // The lifeline: dropped (closed) only when this pod is stopped or
            // the runner is gone.
            let lifeline = stdio.stdin;
            let stdout = stdio
                .stdout
                .map(pipe::Receiver::from_owned_fd)
                .transpose()
                .map_err(|e| failed(StartError::Stdout(e)))?;
            if let Some(stderr) = stdio
                .stderr
                .map(pipe::Receiver::from_owned_fd)
                .transpose()
                .ok()
                .flatten()
            {
                let pod = id.clone();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(pod = %pod, "{line}");
                    }
                });
            }
            let ready = async {
                let mut first = String::new();
                if let Some(stdout) = stdout {
                    BufReader::new(stdout)
                        .read_line(&mut first)
                        .await
                        .map_err(StartError::ReadAddress)?;
                }
                let addr = first.trim().to_string();
                if addr.is_empty() {
                    return Err(StartError::NoAddress);
                }
                let endpoint = format!("http://{addr}");
                wait_serving(&endpoint).await?;
                Ok::<_, StartError>(endpoint)
            }
            .instrument(tracing::info_span!(target: "otel", "wrapper.ready"));
            let endpoint = tokio::select! {
                res = tokio::time::timeout(spec.ready_timeout, ready) => match res {
                    Ok(Ok(endpoint)) => endpoint,
                    Ok(Err(err)) => {
                        let status = tokio::time::timeout(Duration::from_millis(200), process.wait()).await;
                        return Err(failed(match status {
                            Ok(Ok(status)) => StartError::WrapperExited { source: Box::new(err), status },
                            _ => err,
                        }));
                    }
                    Err(_) => {
                        return Err(BackendError::ReadyTimeout {
                            image: spec.image,
                            timeout: spec.ready_timeout,
                            detail: "health never said SERVING".into(),
                        });
                    }
                },
                status = process.wait() => {
                    return Err(failed(match status {
                        Ok(status) => StartError::ExitedEarly { status },
                        Err(e) => StartError::Wait(e),
                    }));
                }
            };
            tracing::info!(pod = %id, image = %spec.image, %endpoint, ms = started.elapsed().as_millis() as u64, "pod ready");

            // From here a monitor task owns the process: it reports an
            // unexpected exit, or stops it on request.
            let (stop_tx, stop_rx) = oneshot::channel::<oneshot::Sender<()>>();
            pods.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.clone(), stop_tx);
            let pod = id.clone();
            tokio::spawn(async move {
                tokio::select! {
                    status = process.wait() => {
                        pods.lock().unwrap_or_else(PoisonError::into_inner).remove(&pod);
                        let reason = match status {
                            Ok(status) => format!("wrapper-server exited ({status})"),
                            Err(e) => format!("waiting for wrapper-server: {e}"),
                        };
                        tracing::warn!(pod = %pod, %reason, "pod failed");
                        if let Some(events) = events {
                            let _ = events.send(PodEvent::Failed { id: pod, reason });
                        }
                    }
                    done = stop_rx => {
                        process.signal(Signal::TERM);
                        if tokio::time::timeout(STOP_GRACE, process.wait()).await.is_err() {
                            tracing::warn!(pod = %pod, "did not drain in time; killing");
                        }
                        drop(process); // kills whatever is left of the group
                        drop(lifeline);
                        if let Ok(done) = done {
                            let _ = done.send(());
                        }
                    }
                }
            });
            Ok(ReadyPod { id, endpoint })
        })
    }

    fn stop(&self, id: PodId, _: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        let stop = self
            .pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        Box::pin(async move {
            if let Some(stop) = stop {
                let (done_tx, done_rx) = oneshot::channel();
                if stop.send(done_tx).is_ok() {
                    let _ = done_rx.await;
                }
            }
            Ok(())
        })
    }
}

/// Why a process pod did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error("spawning {}: {source}", .wrapper.display())]
    Spawn {
        wrapper: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("wrapper stdout: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("reading the wrapper's address: {0}")]
    ReadAddress(#[source] std::io::Error),
    #[error("the wrapper exited before listening")]
    NoAddress,
    #[error(transparent)]
    Serving(#[from] ServingError),
    #[error("{source} (wrapper-server {status})")]
    WrapperExited {
        #[source]
        source: Box<StartError>,
        status: krm_fn::exec::ExitStatus,
    },
    #[error("wrapper-server exited ({status}) before it was ready")]
    ExitedEarly { status: krm_fn::exec::ExitStatus },
    #[error("waiting for wrapper-server: {0}")]
    Wait(#[source] std::io::Error),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn image_parts() {
        let p = ImageParts::parse("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1");
        assert_eq!(p.name, "set-namespace");
        assert_eq!(p.tag, Some("v0.4.1"));
        assert_eq!(
            p.without_tag,
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace"
        );
        let p = ImageParts::parse("localhost:5000/fn@sha256:abc");
        assert_eq!(
            (p.name, p.tag, p.without_tag),
            ("fn", None, "localhost:5000/fn")
        );
        let p = ImageParts::parse("example-fn");
        assert_eq!((p.name, p.tag), ("example-fn", None));
    }

    #[test]
    fn directory_convention_prefers_name_with_tag() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for name in ["set-namespace", "set-namespace:v2", "not-executable"] {
            let p = dir.path().join(name);
            std::fs::write(&p, b"#!/bin/sh\n").unwrap();
            let mode = if name == "not-executable" {
                0o644
            } else {
                0o755
            };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let map = FunctionMap::load(dir.path()).unwrap();
        let path = |n: &str| vec![dir.path().join(n).to_string_lossy().into_owned()];
        assert_eq!(
            map.resolve("ghcr.io/x/set-namespace:v2"),
            Some(path("set-namespace:v2"))
        );
        assert_eq!(
            map.resolve("ghcr.io/x/set-namespace:v1"),
            Some(path("set-namespace"))
        );
        assert_eq!(map.resolve("set-namespace"), Some(path("set-namespace")));
        assert_eq!(map.resolve("not-executable"), None);
        assert_eq!(map.resolve("other"), None);
    }

    #[test]
    fn file_convention_and_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fns.yaml");
        std::fs::write(
            &file,
            "ghcr.io/a/fn:v1: [/bin/fn-v1]\nghcr.io/a/fn: [/bin/fn, --flag]\nshort: [/bin/short]\n",
        )
        .unwrap();
        let map = FunctionMap::load(&file).unwrap();
        assert_eq!(
            map.resolve("ghcr.io/a/fn:v1"),
            Some(vec!["/bin/fn-v1".to_string()])
        );
        assert_eq!(
            map.resolve("ghcr.io/a/fn:v9"),
            Some(vec!["/bin/fn".into(), "--flag".into()])
        );
        assert_eq!(
            map.resolve("registry.example/short:v3"),
            Some(vec!["/bin/short".to_string()])
        );
        assert_eq!(map.resolve("ghcr.io/a/other"), None);

        std::fs::write(&file, "fn: []\n").unwrap();
        let err = FunctionMap::load(&file).unwrap_err().to_string();
        assert!(err.contains("fns.yaml") && err.contains("\"fn\""), "{err}");
        std::fs::write(&file, "fn: 3\n").unwrap();
        let err = FunctionMap::load(&file).unwrap_err().to_string();
        assert!(err.contains("fns.yaml"), "{err}");
    }
}
