//! The `docker` backend: each "pod" is a container of the function's own
//! image on the local Docker engine, with `wrapper-server` as its
//! entrypoint, as a Kubernetes pod of Porch's is.
//!
//! # A pod
//! - **Tools.** An init container from the wrapper image runs `wrapper-server
//!   install /wrapper-server-tools` into a volume. The tools are the same for
//!   every pod, so one volume per runner holds them, installed once (at the
//!   first start), and every function container mounts it read-only. With
//!   no wrapper image named and none in the engine, the static binaries
//!   beside this program are bind-mounted read-only instead ([`tools`]).
//! - **The function container**: the function's image, entrypoint
//!   `/wrapper-server-tools/wrapper-server`, and after `--` the image's own
//!   Entrypoint and Cmd (from the engine's image inspect). Stricter than `kpt
//!   fn eval`'s `docker run`: no network, user 65534 (kpt's `nobody`, by
//!   number, so images without /etc/passwd work), no new privileges, no
//!   capabilities, a read-only root filesystem with a tmpfs `/tmp`; memory
//!   and CPU from the FunctionConfig's `templateOverrides.container.resources`.
//!   `eval`'s kpt flags ([`ContainerOptions`]) add an environment and
//!   mounts, or give it the host's network or the caller's user.
//! - **Reached through a Unix socket**: with no network, the wrapper listens
//!   on `wrapper.sock` in a host directory (one per pod, under
//!   `--docker-socket-dir`) mounted into the container; the runner dials
//!   `unix:` that path. The engine must be local (it bind-mounts a path of
//!   this host).
//! - **Ready** once the wrapper printed its address (read from the attached
//!   stdout) and its health Watch says SERVING. **Failed** when the container
//!   exits or is OOM-killed, from the engine's events stream (no polling);
//!   a container that exits while starting fails the start with its exit
//!   code and the end of its log.
//!
//! # What is left behind, and who removes it
//! Everything is labelled `krm-fn.dev/managed` and with the runner instance
//! that made it. A runner holds a lock file (`flock`) in its own directory
//! under the socket directory for its whole life, so another runner can tell
//! a live one from a crashed one without guessing from time. Stopping a pod
//! removes its container and directory; a runner's exit removes its tools
//! volume; and at start a runner removes what crashed runners left (their
//! lock is free): containers, volumes, directories.
//!
//! # Kept warm (`eval --keep-warm`)
//! Pods made with a keep-warm duration are not stopped when the runner lets
//! go of them: they stay for a later `eval` to find by label (image and a
//! fingerprint of everything that shaped the container) and reuse, and exit
//! by themselves once unused that long (`wrapper-server --exit-after-idle`),
//! the engine then removing them (AutoRemove). Their tools volume and
//! directory go with the next sweep after they are gone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType, VolumeCreateRequest,
};
use bollard::query_parameters::{
    AttachContainerOptions, EventsOptions, ListContainersOptions, ListVolumesOptions,
};
pub use bollard::Docker;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use runner_core::backend::{
    Backend, BackendError, PodEvent, PodId, PodSpec, ReadyPod, Retire, StopReason,
};

use engine::{
    create_container, engine, image_command, label_filter, list_containers, locked_down, log_tail,
    oom_killed, remove_container, remove_volume, start_container, volume_mount, wait_exit,
};
use options::{container_env, user_mounts};
pub use options::{ContainerOptions, StorageMount};

use host::{
    fingerprint, instance_id, is_instance_name, lock_file, lock_socket_dir, make_socket_dir,
    private_dir, unix_now,
};
use resources::Resources;

mod connect;
mod engine;
mod errors;
mod host;
mod names;
mod options;
mod resources;
mod settings;
pub mod tools;

pub use connect::{connect, engine_host};
pub use errors::{DockerSetupError, StartError};
pub use names::{
    IMAGE_LABEL, KEEP_WARM_LABEL, MANAGED_LABEL, RUNNER_LABEL, SOCKET_DIR_LABEL, SOCKET_ROOT_LABEL,
};
use names::{SOCKET_MOUNT, SOCKET_NAME, TOOLS_DIR};
pub use settings::{DockerSettings, DEFAULT_WRAPPER_IMAGE};
pub use tools::{choose_tools, Tools};

/// Processes and threads a function container may have at once unless its
/// FunctionConfig says (`podExecutor.pidsLimit`): a fork bomb stays in its
/// container. The wrapper's runtime threads count too.
pub const DEFAULT_PIDS_LIMIT: u32 = 1024;
/// Unix socket paths hold at most 107 bytes; under the socket directory
/// come `/<instance>/<pod number>/wrapper.sock` (pod numbers up to 20 digits).
const MAX_SOCKET_PATH: usize = 107;
const SOCKET_PATH_TAIL: usize = 1 + 8 + 1 + 20 + 1 + SOCKET_NAME.len();
/// The most of a starting container's stderr kept for its error.
const START_LOG_BYTES: usize = 4096;
/// After a starting container's output ended: how long its death event may
/// take to arrive, with its exit code.
const DEATH_EVENT_WAIT: Duration = Duration::from_secs(5);
/// How long a closing backend waits for its sweep of gone runners'
/// leftovers; what it does not finish, the next runner's does.
const SWEEP_WAIT: Duration = Duration::from_secs(10);
/// How long a stopping container may drain before the engine kills it.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// kpt's `--user nobody`, by number: scratch images have no /etc/passwd.
const FUNCTION_USER: &str = "65534:65534";
/// A function's scratch space on the read-only root filesystem.
const TMPFS: &str = "size=256m,mode=1777";

/// One pod the backend knows of.
struct PodEntry {
    container: String,
    socket_dir: PathBuf,
    ready: bool,
    /// Kept warm: outlives this runner unless broken.
    kept: bool,
    /// Stopping on request: its exit is no failure.
    stopping: bool,
    /// It died while starting (seen in the events before the start ended).
    died: Option<String>,
    /// Tells the start of its death.
    died_tx: Option<tokio::sync::oneshot::Sender<String>>,
}

struct Inner {
    docker: Docker,
    settings: DockerSettings,
    /// This runner's id on its labels and its directory's name.
    instance: String,
    /// `<socket_dir>/<instance>`, holding `lock` and a directory per pod.
    dir: PathBuf,
    /// `dir`, opened and held locked (flock) while this runner lives.
    _lock: std::fs::File,
    /// Closed: starts still running remove what they made.
    closed: std::sync::atomic::AtomicBool,
    events: std::sync::OnceLock<mpsc::UnboundedSender<PodEvent>>,
    pods: Mutex<HashMap<PodId, PodEntry>>,
    /// Containers of ours the kernel OOM-killed in (from the `oom` event,
    /// which comes before `die`; an auto-removed container cannot be
    /// inspected after).
    oomed: Mutex<std::collections::HashSet<String>>,
    /// Where the containers' tools come from; chosen again at each start
    /// while there are none (an image built after the runner started is
    /// then found).
    tools_from: Mutex<Tools>,
    /// The sweep of what gone runners left ([`DockerBackend::sweep`]), run
    /// in the background: a start that reuses a kept-warm container does not
    /// wait for it; one that creates a container, and the close, do.
    swept: std::sync::OnceLock<futures::future::Shared<BoxFuture<'static, ()>>>,
    /// A start went past reusing a kept-warm container: it may have made a
    /// container, a volume or a socket directory.
    made: std::sync::atomic::AtomicBool,
    /// The tools volume, once installed (from an image).
    tools: AsyncMutex<Option<String>>,
    next: AtomicU64,
}

/// The docker backend. See the module docs.
#[derive(Clone)]
pub struct DockerBackend(Arc<Inner>);

impl DockerBackend {
    /// Sets the backend up on `docker`: takes this runner's directory and
    /// lock, removes what crashed runners left, and follows the engine's
    /// events.
    pub async fn new(
        docker: Docker,
        mut settings: DockerSettings,
    ) -> Result<Self, DockerSetupError> {
        let given = settings.socket_dir.clone();
        let root = &given;
        let setup = |reason: String| DockerSetupError::SocketDir {
            path: given.clone(),
            reason,
        };
        private_dir(root).map_err(setup)?;
        // One spelling of it on the labels, whoever names it how.
        settings.socket_dir = std::fs::canonicalize(root).map_err(|e| setup(e.to_string()))?;
        let root = &settings.socket_dir;
        let limit = root.as_os_str().len() + SOCKET_PATH_TAIL;
        if limit > MAX_SOCKET_PATH {
            return Err(setup(format!(
                "too long for Unix socket paths under it ({limit} of at most {MAX_SOCKET_PATH} bytes): choose a shorter directory"
            )));
        }
        let instance = instance_id();
        let dir = root.join(&instance);
        // Locked before it has its name, so no sweep ever sees it unlocked.
        let fresh = root.join(format!(".new-{instance}"));
        let lock = std::fs::create_dir(&fresh)
            .and_then(|()| lock_file(&fresh))
            .and_then(|lock| std::fs::rename(&fresh, &dir).map(|()| lock))
            .map_err(|err| DockerSetupError::SocketDir {
                path: dir.clone(),
                reason: err.to_string(),
            })?;
        let since = unix_now().saturating_sub(1);
        let tools_from = match settings.tools.clone() {
            Some(tools) => tools,
            None => choose_tools(&docker, &settings).await,
        };
        tracing::info!(tools = %tools_from, "docker: function containers' tools");
        let backend = DockerBackend(Arc::new(Inner {
            docker,
            settings,
            instance,
            dir,
            _lock: lock,
            closed: Default::default(),
            events: Default::default(),
            pods: Default::default(),
            oomed: Default::default(),
            tools_from: Mutex::new(tools_from),
            swept: Default::default(),
            made: Default::default(),
            tools: AsyncMutex::new(None),
            next: AtomicU64::new(1),
        }));
        let sweeper = backend.0.clone();
        let sweep = tokio::spawn(async move { sweeper.sweep().await });
        let sweep: BoxFuture<'static, ()> = Box::pin(async move {
            let _ = sweep.await;
        });
        let _ = backend.0.swept.set(sweep.shared());
        tokio::spawn(follow_events(Arc::downgrade(&backend.0), since));
        Ok(backend)
    }

    async fn stop_pod(&self, id: PodId, reason: StopReason) {
        let inner = &self.0;
        let entry = {
            let mut pods = inner.lock_pods();
            match pods.get_mut(&id) {
                // Kept warm: stays for the next run, unless broken or a
                // single-use pod that served its call.
                Some(entry)
                    if entry.kept
                        && matches!(reason, StopReason::Idle(why) if why != Retire::Used) =>
                {
                    pods.remove(&id);
                    return;
                }
                Some(entry) => {
                    entry.stopping = true;
                    (entry.container.clone(), entry.socket_dir.clone())
                }
                None => return,
            }
        };
        let (container, dir) = entry;
        // SIGTERM drains the wrapper; the engine kills it after the grace.
        let _ = inner
            .docker
            .stop_container(
                &container,
                Some(bollard::query_parameters::StopContainerOptions {
                    t: Some(STOP_GRACE.as_secs() as i32),
                    ..Default::default()
                }),
            )
            .await;
        remove_container(&inner.docker, &container).await;
        let _ = std::fs::remove_dir_all(&dir);
        inner.lock_pods().remove(&id);
    }

    /// Removes this runner's tools volume (once no container uses it: a
    /// kept-warm one keeps it until a later sweep) and its directory, but
    /// the directories of kept-warm containers.
    async fn close_backend(&self) {
        let inner = &self.0;
        inner.closed.store(true, Ordering::SeqCst);
        if tokio::time::timeout(SWEEP_WAIT, inner.swept())
            .await
            .is_err()
        {
            tracing::warn!("docker: the sweep of gone runners' leftovers did not finish");
        }
        if !inner.made.load(Ordering::SeqCst) {
            // Only kept-warm containers were reused (an `eval --keep-warm`
            // that found its container): nothing of this runner's to list.
            let _ = std::fs::remove_dir_all(&inner.dir);
            return;
        }
        // Starts still running (given up by the cache, or cut short by the
        // runner's exit): their containers go now, kept-warm ones excepted.
        let own = format!("{RUNNER_LABEL}={}", inner.instance);
        if let Ok(list) = list_containers(&inner.docker, &[MANAGED_LABEL, &own]).await {
            for c in list {
                let kept = c
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(KEEP_WARM_LABEL));
                if let (false, Some(id)) = (kept, c.id) {
                    remove_container(&inner.docker, &id).await;
                }
            }
        }
        if let Some(volume) = inner.tools.lock().await.take() {
            remove_volume(&inner.docker, &volume).await;
        }
        let kept: Vec<PathBuf> = inner
            .lock_pods()
            .values()
            .map(|p| p.socket_dir.clone())
            .collect();
        let mut left = false;
        for entry in std::fs::read_dir(&inner.dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            if kept.contains(&path) || inner.kept_dir(&path).await {
                left = true;
            } else {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
        if !left {
            let _ = std::fs::remove_dir_all(&inner.dir);
        }
    }
}

impl Inner {
    /// Where the tools come from: as chosen, or chosen again while none
    /// were found.
    async fn tools_from(&self) -> Tools {
        let current = self
            .tools_from
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if !matches!(current, Tools::Missing { .. }) {
            return current;
        }
        let chosen = choose_tools(&self.docker, &self.settings).await;
        if !matches!(chosen, Tools::Missing { .. }) {
            tracing::info!(tools = %chosen, "docker: function containers' tools");
        }
        *self
            .tools_from
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = chosen.clone();
        chosen
    }

    /// Waits for the sweep started with the backend.
    async fn swept(&self) {
        if let Some(sweep) = self.swept.get() {
            sweep.clone().await;
        }
    }

    /// Removes what runners that are gone left behind: their containers
    /// (but kept-warm ones still running), volumes no container uses, and
    /// directories without a container.
    async fn sweep(&self) {
        let root = &self.settings.socket_dir;
        let alive = |instance: &str| -> bool {
            if instance == self.instance {
                return true;
            }
            // A runner that lives holds a lock on its directory; taking it,
            // or finding no directory, means it is gone.
            if !is_instance_name(instance) {
                return false;
            }
            match std::fs::File::open(root.join(instance)) {
                Ok(dir) => {
                    rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                        == Err(rustix::io::Errno::WOULDBLOCK)
                }
                Err(_) => false,
            }
        };
        let root_label = format!("{SOCKET_ROOT_LABEL}={}", root.display());
        let containers = match list_containers(&self.docker, &[MANAGED_LABEL, &root_label]).await {
            Ok(list) => list,
            Err(err) => {
                tracing::warn!(%err, "docker: listing containers to sweep");
                return;
            }
        };
        let mut in_use = std::collections::HashSet::new();
        for c in containers {
            let labels = c.labels.clone().unwrap_or_default();
            let owner = labels.get(RUNNER_LABEL).map(String::as_str).unwrap_or("");
            let running = c.state.as_ref().map(|s| s.to_string()) == Some("running".into());
            let kept = labels.contains_key(KEEP_WARM_LABEL) && running;
            let Some(id) = c.id else { continue };
            if kept || alive(owner) {
                if let Some(dir) = labels.get(SOCKET_DIR_LABEL) {
                    in_use.insert(PathBuf::from(dir));
                }
                continue;
            }
            tracing::info!(container = %id, runner = owner, "docker: removing a container a runner left");
            remove_container(&self.docker, &id).await;
        }
        // Volumes: those of gone runners; one still mounted is refused by the
        // engine (kept-warm containers use theirs) and stays.
        if let Ok(list) = self
            .docker
            .list_volumes(Some(ListVolumesOptions {
                filters: Some(label_filter(&[MANAGED_LABEL, &root_label])),
            }))
            .await
        {
            for v in list.volumes.unwrap_or_default() {
                let owner = v.labels.get(RUNNER_LABEL).map(String::as_str).unwrap_or("");
                if !alive(owner) {
                    remove_volume(&self.docker, &v.name).await;
                }
            }
        }
        // Directories of gone runners, but those a kept container uses.
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            // Only runner directories (eight hex digits): whatever else is
            // in the directory is not ours to remove.
            if !is_instance_name(name)
                || !entry.file_type().is_ok_and(|t| t.is_dir())
                || alive(name)
            {
                continue;
            }
            let mut left = 0;
            for pod in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let p = pod.path();
                // Asked again, not only of the list above: a runner that was
                // alive then may have left a kept-warm container since, and
                // a start of this runner may be reusing it now.
                if in_use.contains(&p) || self.kept_dir(&p).await {
                    left += 1;
                } else if pod.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir_all(&p);
                }
            }
            if left == 0 {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// The function container's mounts of the tools: the tools volume,
    /// installed by the init container on first use, or the host's binaries.
    async fn tool_mounts(&self, timeout: Duration) -> Result<Vec<Mount>, StartError> {
        match &self.tools_from().await {
            Tools::Image(image) => Ok(vec![volume_mount(
                &self.tools_volume(image, timeout).await?,
                TOOLS_DIR,
                true,
            )]),
            Tools::Host { wrapper, probe } => Ok(tools::host_mounts(wrapper, probe)),
            Tools::Missing { image, host } => Err(StartError::NoTools {
                image: image.clone(),
                host: host.clone(),
            }),
        }
    }

    /// The tools volume, installed by the init container of `image` on
    /// first use.
    async fn tools_volume(&self, image: &String, timeout: Duration) -> Result<String, StartError> {
        let mut tools = self.tools.lock().await;
        if let Some(volume) = tools.as_ref() {
            return Ok(volume.clone());
        }
        self.docker
            .inspect_image(image)
            .await
            .map_err(|source| StartError::WrapperImage {
                image: image.clone(),
                source,
            })?;
        let volume = format!("krm-fn-tools-{}", self.instance);
        self.docker
            .create_volume(VolumeCreateRequest {
                name: Some(volume.clone()),
                labels: Some(self.labels(&[])),
                ..Default::default()
            })
            .await
            .map_err(engine("creating the tools volume"))?;
        let name = format!("krm-fn-{}-install", self.instance);
        let config = ContainerCreateBody {
            image: Some(image.clone()),
            labels: Some(self.labels(&[])),
            // Our own image, trusted: root only to write into the fresh
            // volume (owned by root), with nothing else allowed.
            user: Some("0:0".into()),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                mounts: Some(vec![volume_mount(&volume, TOOLS_DIR, false)]),
                ..locked_down()
            }),
            ..Default::default()
        };
        let ran = async {
            create_container(&self.docker, &name, config).await?;
            start_container(&self.docker, &name).await?;
            let code = wait_exit(&self.docker, &name).await;
            if code != Some(0) {
                let log = log_tail(&self.docker, &name).await;
                return Err(StartError::Install {
                    image: image.clone(),
                    code,
                    log,
                });
            }
            Ok(())
        };
        let ran = match tokio::time::timeout(timeout, ran).await {
            Ok(ran) => ran,
            Err(_) => Err(StartError::InstallTimeout { timeout }),
        };
        remove_container(&self.docker, &name).await;
        ran?;
        tracing::info!(%volume, wrapper_image = %image, "docker: tools installed");
        *tools = Some(volume.clone());
        Ok(volume)
    }

    /// The running kept-warm containers of `image`, whatever their
    /// fingerprint (listed while the fingerprint is still being worked out).
    async fn kept_of(&self, image: &str) -> Vec<bollard::models::ContainerSummary> {
        let image_label = format!("{IMAGE_LABEL}={image}");
        let root_label = format!("{SOCKET_ROOT_LABEL}={}", self.settings.socket_dir.display());
        let mut filters =
            label_filter(&[MANAGED_LABEL, &image_label, KEEP_WARM_LABEL, &root_label]);
        filters.insert("status".into(), vec!["running".into()]);
        self.docker
            .list_containers(Some(ListContainersOptions {
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .unwrap_or_default()
    }

    /// Of `kept` (from [`Self::kept_of`]), one of `fingerprint` that serves.
    async fn find_kept(
        &self,
        kept: Vec<bollard::models::ContainerSummary>,
        fingerprint: &str,
    ) -> Option<(String, PathBuf)> {
        for c in kept {
            let (Some(names), Some(labels)) = (c.names, c.labels) else {
                continue;
            };
            if labels.get(KEEP_WARM_LABEL).map(String::as_str) != Some(fingerprint) {
                continue;
            }
            let Some(dir) = labels.get(SOCKET_DIR_LABEL) else {
                continue;
            };
            let Some(name) = names.first() else { continue };
            let dir = PathBuf::from(dir);
            if !dir.starts_with(&self.settings.socket_dir) {
                continue;
            }
            let endpoint = format!("unix:{}", dir.join(SOCKET_NAME).display());
            // A broken one is passed over; one that starts draining (idle)
            // just after this answers UNAVAILABLE, and the call is retried
            // on a new container.
            if tokio::time::timeout(
                Duration::from_secs(2),
                runner_core::backend::serving::wait_serving(&endpoint),
            )
            .await
            .is_ok_and(|r| r.is_ok())
            {
                return Some((name.trim_start_matches('/').to_string(), dir));
            }
        }
        None
    }

    async fn start_pod(&self, spec: PodSpec) -> Result<ReadyPod, BackendError> {
        let failed = |source: StartError| BackendError::StartFailed {
            image: spec.image.clone(),
            source: runner_core::backend::cause(source),
        };
        let started = tokio::time::Instant::now();
        let resources = Resources::from_overrides(spec.overrides.as_deref()).map_err(failed)?;
        // One deadline for the whole start: reading (or pulling) the image,
        // installing the tools, and the container's own start.
        let mut deadline = started + spec.ready_timeout;
        let timed_out = |phase: &str| BackendError::ReadyTimeout {
            image: spec.image.clone(),
            timeout: spec.ready_timeout,
            detail: format!("timed out {phase}"),
        };
        // A kept-warm container is looked for by a fingerprint of the image,
        // the tools and the command: what it takes is asked of the engine at
        // once, not one after the other (a warm `eval --keep-warm` is a few
        // of these round trips and little else).
        let keep_warm = self.settings.keep_warm.is_some();
        let tools_id = async {
            match (&self.tools_from().await, keep_warm) {
                (_, false) | (Tools::Missing { .. }, _) => String::new(),
                (Tools::Image(image), true) => self
                    .docker
                    .inspect_image(image)
                    .await
                    .ok()
                    .and_then(|i| i.id)
                    .unwrap_or_default(),
                (Tools::Host { wrapper, probe }, true) => tools::host_fingerprint(wrapper, probe),
            }
        };
        let kept = async {
            match keep_warm {
                true => self.kept_of(&spec.image).await,
                false => Vec::new(),
            }
        };
        let (command, tools_id, kept) = tokio::join!(
            tokio::time::timeout_at(deadline, image_command(&self.docker, &spec.image)),
            tokio::time::timeout_at(deadline, tools_id),
            tokio::time::timeout_at(deadline, kept),
        );
        // Without them no kept container is found: a new one is made.
        let (tools_id, kept) = (tools_id.unwrap_or_default(), kept.unwrap_or_default());
        let (image_id, argv) = command
            .map_err(|_| timed_out("reading (or pulling) the image"))?
            .map_err(failed)?;
        let mut wrapper_args = vec![
            "--unix-socket".to_string(),
            format!("{SOCKET_MOUNT}/{SOCKET_NAME}"),
            "--print-address".into(),
            "--max-request-body-size".into(),
            self.settings.max_message_bytes.to_string(),
        ];
        wrapper_args.extend(spec.prespawn_args());
        if let Some(idle) = self.settings.keep_warm {
            wrapper_args.push("--exit-after-idle".into());
            wrapper_args.push(format!("{}ms", idle.as_millis()));
        }
        wrapper_args.push("--".into());
        wrapper_args.extend(argv);
        // Only kept-warm containers are looked up by their shape.
        let fingerprint = match self.settings.keep_warm {
            Some(_) => {
                // The image's id, not only its name: an author who rebuilds
                // the image under the same tag gets a container of the new one.
                Some(fingerprint(&[
                    &spec.image,
                    &image_id,
                    &tools_id,
                    &wrapper_args.join("\0"),
                    &format!("{resources:?}"),
                    // Another environment, mount, network or user makes
                    // another container.
                    &format!("{:?}", self.settings.container),
                    // As do another PIDs limit, and a runner that locks
                    // its socket directories (one kept before did not).
                    &format!("pids={:?}; socket dir locked", spec.pids_limit),
                    // A single-use function's kept containers never served
                    // a call: no other function's may stand in for them.
                    if spec.single_use { "single-use" } else { "" },
                ]))
            }
            None => None,
        };
        if let Some(fp) = &fingerprint {
            let kept = self.find_kept(kept, fp).await;
            if let Some((name, dir)) =
                kept.filter(|(_, dir)| lock_socket_dir(dir, SOCKET_NAME).is_ok())
            {
                let id = PodId(name.clone());
                let endpoint = format!("unix:{}", dir.join(SOCKET_NAME).display());
                tracing::info!(pod = %id, image = %spec.image, "docker: reusing a kept-warm container");
                self.lock_pods().insert(
                    id.clone(),
                    PodEntry {
                        container: name,
                        socket_dir: dir,
                        ready: true,
                        kept: true,
                        stopping: false,
                        died: None,
                        died_tx: None,
                    },
                );
                return Ok(ReadyPod { id, endpoint });
            }
        }
        // From here on the start makes things in the engine (the close must
        // look for them). It waits for the sweep first, so that a gone
        // runner's leftovers are gone before a new container adds to the
        // engine's load, as they were when the sweep ran before any start;
        // the wait is the sweep's own, not the start's: the deadline moves
        // by it.
        self.made.store(true, Ordering::SeqCst);
        let waited = tokio::time::Instant::now();
        if tokio::time::timeout(SWEEP_WAIT, self.swept())
            .await
            .is_err()
        {
            tracing::warn!("docker: the sweep of gone runners' leftovers is still running");
        }
        deadline += waited.elapsed();
        let tool_mounts = tokio::time::timeout_at(
            deadline,
            self.tool_mounts(deadline.saturating_duration_since(tokio::time::Instant::now())),
        )
        .await
        .map_err(|_| timed_out("installing the tools (the init container)"))?
        .map_err(failed)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "krm-fn-{}",
            runner_core::backend::pod_name(&spec.image, &format!("{}-{n}", self.instance))
        );
        let id = PodId(name.clone());
        let socket_dir = self.dir.join(n.to_string());
        make_socket_dir(&socket_dir).map_err(|source| {
            failed(StartError::SocketDir {
                path: socket_dir.clone(),
                source,
            })
        })?;
        let endpoint = format!("unix:{}", socket_dir.join(SOCKET_NAME).display());
        let mut labels = self.labels(&[
            (IMAGE_LABEL, spec.image.as_str()),
            (SOCKET_DIR_LABEL, &socket_dir.to_string_lossy()),
        ]);
        if let Some(fp) = &fingerprint {
            labels.insert(KEEP_WARM_LABEL.into(), fp.clone());
        }
        let mut mounts = tool_mounts;
        mounts.push(Mount {
            target: Some(SOCKET_MOUNT.into()),
            source: Some(socket_dir.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            ..Default::default()
        });
        let asked = &self.settings.container;
        mounts.extend(user_mounts(asked).map_err(|reason| failed(StartError::Mount(reason)))?);
        // A mount of the user's at /tmp takes the place of ours.
        let tmpfs = (!asked.mounts.iter().any(|m| m.targets("/tmp")))
            .then(|| HashMap::from([("/tmp".to_string(), TMPFS.to_string())]));
        let env = container_env(&resources.env, &asked.env);
        let config = ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(vec![format!("{TOOLS_DIR}/wrapper-server")]),
            cmd: Some(wrapper_args),
            env: (!env.is_empty()).then_some(env),
            user: Some(asked.user.clone().unwrap_or_else(|| FUNCTION_USER.into())),
            labels: Some(labels),
            network_disabled: Some(!asked.network),
            host_config: Some(HostConfig {
                tmpfs,
                mounts: Some(mounts),
                memory: resources.memory,
                memory_swap: resources.memory,
                pids_limit: Some(i64::from(spec.pids_limit.unwrap_or(DEFAULT_PIDS_LIMIT))),
                memory_reservation: resources.memory_reservation,
                nano_cpus: resources.nano_cpus,
                cpu_shares: resources.cpu_shares,
                auto_remove: Some(self.settings.keep_warm.is_some()),
                // The wrapper logs a line or two per call: bounded, for
                // containers that live for days.
                log_config: Some(HostConfigLogConfig {
                    typ: Some("json-file".into()),
                    config: Some(HashMap::from([
                        ("max-size".to_string(), "1m".to_string()),
                        ("max-file".to_string(), "2".to_string()),
                    ])),
                }),
                init: Some(false),
                // kpt's `--network host`; the wrapper still listens on its
                // socket only.
                network_mode: Some(if asked.network { "host" } else { "none" }.into()),
                ..locked_down()
            }),
            ..Default::default()
        };
        // The start learns of the container's death from the events (which
        // replay from before it was created, so none is missed).
        let (died_tx, mut died_rx) = tokio::sync::oneshot::channel();
        self.lock_pods().insert(
            id.clone(),
            PodEntry {
                container: name.clone(),
                socket_dir: socket_dir.clone(),
                ready: false,
                kept: self.settings.keep_warm.is_some(),
                stopping: false,
                died: None,
                died_tx: Some(died_tx),
            },
        );
        // What the container wrote on stderr while starting: its wrapper's
        // error, if it fails (kept here: an auto-removed container takes its
        // log with it).
        let log = Mutex::new(Vec::new());
        let phase = Mutex::new("creating the container");
        let set_phase = |now| *phase.lock().unwrap_or_else(PoisonError::into_inner) = now;
        let ready = async {
            create_container(&self.docker, &name, config).await?;
            if self.closed.load(Ordering::SeqCst) {
                return Err(StartError::Died("the runner is shutting down".into()));
            }
            // Attached before the start, so no output can be missed.
            let attached = self
                .docker
                .attach_container(
                    &name,
                    Some(AttachContainerOptions {
                        stream: true,
                        stdout: true,
                        stderr: true,
                        logs: true,
                        ..Default::default()
                    }),
                )
                .await
                .map_err(engine("attaching to the container"))?;
            set_phase("starting the container");
            start_container(&self.docker, &name).await?;
            set_phase("waiting for the wrapper to listen (its address on stdout)");
            let mut output = attached.output;
            let mut line = Vec::new();
            while !line.contains(&b'\n') {
                match output.next().await {
                    Some(Ok(bollard::container::LogOutput::StdOut { message })) => {
                        line.extend_from_slice(&message)
                    }
                    Some(Ok(other)) => {
                        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                        log.extend_from_slice(&other.into_bytes());
                        let excess = log.len().saturating_sub(START_LOG_BYTES);
                        log.drain(..excess);
                    }
                    Some(Err(source)) => {
                        return Err(engine("reading the container's output")(source))
                    }
                    None => return Err(StartError::NoAddress),
                }
            }
            drop(output);
            lock_socket_dir(&socket_dir, SOCKET_NAME).map_err(|reason| {
                StartError::Confinement {
                    path: socket_dir.clone(),
                    reason,
                }
            })?;
            set_phase("waiting for its health to say SERVING");
            runner_core::backend::serving::wait_serving(&endpoint)
                .await
                .map_err(|err| StartError::Health(err.to_string()))?;
            Ok(())
        };
        let log_text = || {
            let log = log.lock().unwrap_or_else(PoisonError::into_inner);
            let text = String::from_utf8_lossy(&log).trim().to_string();
            if text.is_empty() {
                "(it wrote nothing)".to_string()
            } else {
                text
            }
        };
        let outcome = tokio::select! {
            res = tokio::time::timeout_at(deadline, ready) => match res {
                // Its output ended: it exited, and the event says how.
                Ok(Err(StartError::NoAddress)) => {
                    match tokio::time::timeout(DEATH_EVENT_WAIT, &mut died_rx).await {
                        Ok(Ok(reason)) => Err(StartError::Exited { reason, log: log_text() }),
                        _ => Err(StartError::Exited {
                            reason: "its output ended".into(),
                            log: log_text(),
                        }),
                    }
                }
                Ok(res) => res,
                Err(_) => Err(StartError::Timeout),
            },
            Ok(reason) = &mut died_rx => Err(StartError::Exited { reason, log: log_text() }),
        };
        let outcome = outcome.and_then(|()| {
            let mut pods = self.lock_pods();
            match pods.get_mut(&id) {
                Some(entry) => match entry.died.take() {
                    Some(reason) => Err(StartError::Died(reason)),
                    None => {
                        entry.ready = true;
                        Ok(())
                    }
                },
                None => Err(StartError::Died("removed while starting".into())),
            }
        });
        if let Err(err) = outcome {
            self.lock_pods().remove(&id);
            remove_container(&self.docker, &name).await;
            let _ = std::fs::remove_dir_all(&socket_dir);
            return Err(match err {
                StartError::Timeout => {
                    timed_out(*phase.lock().unwrap_or_else(PoisonError::into_inner))
                }
                err => failed(err),
            });
        }
        tracing::info!(pod = %id, image = %spec.image, %endpoint, ms = started.elapsed().as_millis() as u64, "pod ready");
        Ok(ReadyPod { id, endpoint })
    }

    /// Whether a kept-warm container still uses `dir`.
    async fn kept_dir(&self, dir: &Path) -> bool {
        let label = format!("{SOCKET_DIR_LABEL}={}", dir.display());
        list_containers(&self.docker, &[MANAGED_LABEL, &label])
            .await
            .is_ok_and(|list| !list.is_empty())
    }
}

impl Inner {
    fn lock_pods(&self) -> std::sync::MutexGuard<'_, HashMap<PodId, PodEntry>> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn labels(&self, extra: &[(&str, &str)]) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (MANAGED_LABEL.to_string(), "true".to_string()),
            (RUNNER_LABEL.to_string(), self.instance.clone()),
            (
                SOCKET_ROOT_LABEL.to_string(),
                self.settings.socket_dir.display().to_string(),
            ),
        ]);
        for (k, v) in extra {
            labels.insert((*k).to_string(), (*v).to_string());
        }
        labels
    }

    /// A container of ours died (an engine event, with the exit code it
    /// names): a ready pod is reported failed and removed; a starting one's
    /// start is told.
    async fn container_died(self: &Arc<Self>, container: &str, code: Option<String>) {
        let id = PodId(container.to_string());
        let known = {
            let pods = self.lock_pods();
            pods.get(&id).map(|e| (e.stopping, e.socket_dir.clone()))
        };
        let Some((stopping, dir)) = known else {
            return;
        };
        if stopping {
            return;
        }
        let oomed = self
            .oomed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(container);
        let oomed = if oomed {
            Some(true)
        } else {
            oom_killed(&self.docker, container).await
        };
        let reason = match oomed {
            Some(true) => "the container was OOM-killed (its memory limit)".to_string(),
            _ => match code {
                Some(code) => format!("the container exited (code {code})"),
                None => "the container exited".to_string(),
            },
        };
        {
            let mut pods = self.lock_pods();
            let Some(entry) = pods.get_mut(&id) else {
                return;
            };
            if entry.stopping {
                return;
            }
            if !entry.ready {
                if let Some(tx) = entry.died_tx.take() {
                    let _ = tx.send(reason.clone());
                }
                entry.died = Some(reason);
                return;
            }
            pods.remove(&id);
        }
        tracing::warn!(pod = %id, %reason, "pod failed");
        if let Some(events) = self.events.get() {
            let _ = events.send(PodEvent::Failed { id, reason });
        }
        remove_container(&self.docker, container).await;
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Follows the engine's events for containers of ours, while the backend
/// lives: `die` events become pod failures. Reconnects after an error,
/// asking again from the last event seen, so none is lost in between.
async fn follow_events(inner: std::sync::Weak<Inner>, mut since: u64) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let docker = strong.docker.clone();
        drop(strong);
        let mut filters = label_filter(&[MANAGED_LABEL]);
        filters.insert("type".into(), vec!["container".into()]);
        filters.insert("event".into(), vec!["oom".into(), "die".into()]);
        let mut stream = docker.events(Some(EventsOptions {
            since: Some(since.to_string()),
            filters: Some(filters),
            ..Default::default()
        }));
        while let Some(event) = stream.next().await {
            let Some(inner) = inner.upgrade() else { return };
            match event {
                Ok(event) => {
                    backoff = Duration::from_millis(100);
                    if let Some(time) = event.time {
                        since = since.max(u64::try_from(time).unwrap_or(0));
                    }
                    let mut attributes = event.actor.and_then(|a| a.attributes).unwrap_or_default();
                    let Some(name) = attributes.remove("name") else {
                        continue;
                    };
                    if event.action.as_deref() == Some("oom") {
                        inner
                            .oomed
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(name);
                    } else {
                        let code = attributes.remove("exitCode");
                        let inner = inner.clone();
                        tokio::spawn(async move { inner.container_died(&name, code).await });
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "docker: the events stream failed; following again");
                    break;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

impl Backend for DockerBackend {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn start(&self, spec: PodSpec) -> BoxFuture<'static, Result<ReadyPod, BackendError>> {
        let this = self.clone();
        Box::pin(async move { this.0.start_pod(spec).await })
    }

    fn stop(&self, id: PodId, reason: StopReason) -> BoxFuture<'static, Result<(), BackendError>> {
        let this = self.clone();
        Box::pin(async move {
            this.stop_pod(id, reason).await;
            Ok(())
        })
    }

    fn set_events(&self, events: mpsc::UnboundedSender<PodEvent>) {
        let _ = self.0.events.set(events);
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let this = self.clone();
        Box::pin(async move { this.close_backend().await })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
