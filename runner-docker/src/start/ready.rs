//! A new pod: named, its socket directory made, registered as starting,
//! and its container run until its wrapper serves (created, attached to,
//! started, its address read, its health awaited) while its death, told by
//! the engine's events, ends the wait; then marked ready, or removed with
//! what was made.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::AttachContainerOptions;
use futures::{Stream, StreamExt};
use tokio::sync::oneshot;
use tokio::time::Instant;

use runner_core::backend::{PodId, PodSpec};

use crate::engine::{create_container, engine, remove_container, start_container};
use crate::errors::StartError;
use crate::host::{lock_socket_dir, make_socket_dir};
use crate::names::SOCKET_NAME;
use crate::state::{Inner, PodEntry};

/// The most of a starting container's stderr kept for its error.
const START_LOG_BYTES: usize = 4096;

/// After a starting container's output ended: how long its death event may
/// take to arrive, with its exit code.
const DEATH_EVENT_WAIT: Duration = Duration::from_secs(5);

/// A new pod: its container's name (and so its id), and the socket
/// directory its wrapper listens in.
pub(super) struct NewPod {
    pub(super) id: PodId,
    pub(super) name: String,
    pub(super) socket_dir: PathBuf,
    pub(super) endpoint: String,
}

/// What a start saw of its container: what the container wrote on stderr
/// while starting, its wrapper's error if it fails (kept here: an
/// auto-removed container takes its log with it); and what the start was
/// doing, for a timeout's error.
pub(super) struct Starting {
    log: Mutex<Vec<u8>>,
    phase: Mutex<&'static str>,
}

impl Starting {
    pub(super) fn new() -> Self {
        Starting {
            log: Mutex::new(Vec::new()),
            phase: Mutex::new("creating the container"),
        }
    }

    fn set_phase(&self, now: &'static str) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = now;
    }

    /// What the start was doing last.
    pub(super) fn phase(&self) -> &'static str {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps what the container wrote besides its address: the last
    /// [`START_LOG_BYTES`] of it.
    fn keep_log(&self, output: &[u8]) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.extend_from_slice(output);
        let excess = log.len().saturating_sub(START_LOG_BYTES);
        log.drain(..excess);
    }

    fn log_text(&self) -> String {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&log).trim().to_string();
        if text.is_empty() {
            "(it wrote nothing)".to_string()
        } else {
            text
        }
    }
}

impl Inner {
    /// Names a new pod of `spec` and makes its socket directory.
    pub(super) fn new_pod(&self, spec: &PodSpec) -> Result<NewPod, StartError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "krm-fn-{}",
            runner_core::backend::pod_name(&spec.image, &format!("{}-{n}", self.instance))
        );
        let id = PodId(name.clone());
        let socket_dir = self.dir.join(n.to_string());
        make_socket_dir(&socket_dir).map_err(|source| StartError::SocketDir {
            path: socket_dir.clone(),
            source,
        })?;
        let endpoint = format!("unix:{}", socket_dir.join(SOCKET_NAME).display());
        Ok(NewPod {
            id,
            name,
            socket_dir,
            endpoint,
        })
    }

    /// Registers the pod as starting; the receiver tells the start of its
    /// container's death.
    pub(super) fn register_starting(&self, pod: &NewPod) -> oneshot::Receiver<String> {
        // The start learns of the container's death from the events (which
        // replay from before it was created, so none is missed).
        let (died_tx, died_rx) = oneshot::channel();
        self.lock_pods().insert(
            pod.id.clone(),
            PodEntry {
                container: pod.name.clone(),
                socket_dir: pod.socket_dir.clone(),
                ready: false,
                kept: self.settings.keep_warm.is_some(),
                stopping: false,
                died: None,
                died_tx: Some(died_tx),
            },
        );
        died_rx
    }

    /// Runs the pod's container until its wrapper serves, by `deadline`;
    /// its death while starting (`died`) ends the wait, with its reason and
    /// its log.
    pub(super) async fn until_ready(
        &self,
        pod: &NewPod,
        config: ContainerCreateBody,
        deadline: Instant,
        mut died: oneshot::Receiver<String>,
        starting: &Starting,
    ) -> Result<(), StartError> {
        let ready = self.run_container(pod, config, starting);
        tokio::select! {
            res = tokio::time::timeout_at(deadline, ready) => match res {
                // Its output ended: it exited, and the event says how.
                Ok(Err(StartError::NoAddress)) => {
                    match tokio::time::timeout(DEATH_EVENT_WAIT, &mut died).await {
                        Ok(Ok(reason)) => Err(StartError::Exited { reason, log: starting.log_text() }),
                        _ => Err(StartError::Exited {
                            reason: "its output ended".into(),
                            log: starting.log_text(),
                        }),
                    }
                }
                Ok(res) => res,
                Err(_) => Err(StartError::Timeout),
            },
            Ok(reason) = &mut died => Err(StartError::Exited { reason, log: starting.log_text() }),
        }
    }

    /// Creates the container, attaches to it and starts it; once the
    /// wrapper printed its address, takes the socket directory back and
    /// waits for its health to say SERVING.
    async fn run_container(
        &self,
        pod: &NewPod,
        config: ContainerCreateBody,
        starting: &Starting,
    ) -> Result<(), StartError> {
        create_container(&self.docker, &pod.name, config).await?;
        if self.closed.load(Ordering::SeqCst) {
            return Err(StartError::Died("the runner is shutting down".into()));
        }
        // Attached before the start, so no output can be missed.
        let attached = self
            .docker
            .attach_container(
                &pod.name,
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
        starting.set_phase("starting the container");
        start_container(&self.docker, &pod.name).await?;
        starting.set_phase("waiting for the wrapper to listen (its address on stdout)");
        read_address(attached.output, starting).await?;
        lock_socket_dir(&pod.socket_dir, SOCKET_NAME).map_err(|reason| {
            StartError::Confinement {
                path: pod.socket_dir.clone(),
                reason,
            }
        })?;
        starting.set_phase("waiting for its health to say SERVING");
        runner_core::backend::serving::wait_serving(&pod.endpoint)
            .await
            .map_err(|err| StartError::Health(err.to_string()))?;
        Ok(())
    }

    /// Marks the pod ready, unless it died, or was removed, while starting.
    pub(super) fn mark_ready(&self, id: &PodId) -> Result<(), StartError> {
        let mut pods = self.lock_pods();
        match pods.get_mut(id) {
            Some(entry) => match entry.died.take() {
                Some(reason) => Err(StartError::Died(reason)),
                None => {
                    entry.ready = true;
                    Ok(())
                }
            },
            None => Err(StartError::Died("removed while starting".into())),
        }
    }

    /// Removes what a failed start made: the pod's entry, its container and
    /// its socket directory.
    pub(super) async fn abandon(&self, pod: &NewPod) {
        self.lock_pods().remove(&pod.id);
        remove_container(&self.docker, &pod.name).await;
        let _ = std::fs::remove_dir_all(&pod.socket_dir);
    }
}

/// Reads the container's output until the wrapper's first line on stdout
/// (its address, printed once it listens); what else it writes is kept for
/// the start's error. The output is let go of once the line is read.
async fn read_address(
    mut output: impl Stream<Item = Result<LogOutput, bollard::errors::Error>> + Unpin,
    starting: &Starting,
) -> Result<(), StartError> {
    let mut line = Vec::new();
    while !line.contains(&b'\n') {
        match output.next().await {
            Some(Ok(LogOutput::StdOut { message })) => line.extend_from_slice(&message),
            Some(Ok(other)) => starting.keep_log(&other.into_bytes()),
            Some(Err(source)) => return Err(engine("reading the container's output")(source)),
            None => return Err(StartError::NoAddress),
        }
    }
    Ok(())
}
