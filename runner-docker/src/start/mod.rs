//! A pod's start: a kept-warm container reused, or a new container made,
//! started and waited for until its wrapper serves.
//!
//! [`Inner::start_pod`] reads as its steps; the new container's spec is in
//! [`container`], the reuse of a kept-warm one in [`warm`], and the run of
//! a new one until it serves in [`ready`].

mod container;
mod ready;
mod warm;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, ContainerSummary, Mount};
use tokio::time::Instant;

use runner_core::backend::{BackendError, PodSpec, ReadyPod};

use crate::engine::image_command;
use crate::errors::StartError;
use crate::names::{IMAGE_LABEL, KEEP_WARM_LABEL, SOCKET_DIR_LABEL};
use crate::resources::Resources;
use crate::state::Inner;
use crate::sweep::SWEEP_WAIT;
pub use container::DEFAULT_PIDS_LIMIT;
use ready::{NewPod, Starting};

/// What a start asks of the engine before it makes anything.
struct Asked {
    /// The image's id and command (Entrypoint then Cmd).
    image_id: String,
    argv: Vec<String>,
    /// The tools' part of a kept-warm container's fingerprint.
    tools_id: String,
    /// The image's running kept-warm containers.
    kept: Vec<ContainerSummary>,
}

impl Inner {
    /// Starts a pod of `spec`: a kept-warm container of the same shape if
    /// one serves, else a new container, ready once its wrapper serves.
    pub(crate) async fn start_pod(&self, spec: PodSpec) -> Result<ReadyPod, BackendError> {
        let started = Instant::now();
        let resources =
            Resources::from_overrides(spec.overrides.as_deref()).map_err(|e| failed(&spec, e))?;
        // One deadline for the whole start: reading (or pulling) the image,
        // installing the tools, and the container's own start.
        let mut deadline = started + spec.ready_timeout;
        let asked = self.ask_engine(&spec, deadline).await?;
        let wrapper_args = container::wrapper_args(&self.settings, &spec, asked.argv);
        let fingerprint = warm::shape_fingerprint(
            &self.settings,
            &spec,
            &asked.image_id,
            &asked.tools_id,
            &wrapper_args,
            &resources,
        );
        if let Some(fp) = &fingerprint {
            if let Some(pod) = self.reuse_kept(&spec, asked.kept, fp).await {
                return Ok(pod);
            }
        }
        // From here on the start makes things in the engine (the close must
        // look for them). It waits for the sweep first; the deadline moves
        // by the wait.
        self.made.store(true, Ordering::SeqCst);
        deadline += self.wait_for_sweep().await;
        let tool_mounts = self.prepare_tools(&spec, deadline).await?;
        let pod = self.new_pod(&spec).map_err(|e| failed(&spec, e))?;
        let config = self
            .container_config(
                &spec,
                &pod,
                &resources,
                wrapper_args,
                tool_mounts,
                fingerprint,
            )
            .map_err(|e| failed(&spec, e))?;
        let died = self.register_starting(&pod);
        let starting = Starting::new();
        let outcome = self
            .until_ready(&pod, config, deadline, died, &starting)
            .await
            .and_then(|()| self.mark_ready(&pod.id));
        if let Err(err) = outcome {
            self.abandon(&pod).await;
            return Err(match err {
                StartError::Timeout => timed_out(&spec, starting.phase()),
                err => failed(&spec, err),
            });
        }
        tracing::info!(pod = %pod.id, image = %spec.image, endpoint = %pod.endpoint, ms = started.elapsed().as_millis() as u64, "pod ready");
        Ok(ReadyPod {
            id: pod.id,
            endpoint: pod.endpoint,
        })
    }

    /// The image's id and command, and for keep-warm the tools' identity
    /// and the image's kept-warm containers.
    async fn ask_engine(&self, spec: &PodSpec, deadline: Instant) -> Result<Asked, BackendError> {
        // A kept-warm container is looked for by a fingerprint of the image,
        // the tools and the command: what it takes is asked of the engine at
        // once, not one after the other (a warm `eval --keep-warm` is a few
        // of these round trips and little else).
        let keep_warm = self.settings.keep_warm.is_some();
        let kept = async {
            match keep_warm {
                true => self.kept_of(&spec.image).await,
                false => Vec::new(),
            }
        };
        let (command, tools_id, kept) = tokio::join!(
            tokio::time::timeout_at(deadline, image_command(&self.docker, &spec.image)),
            tokio::time::timeout_at(deadline, self.tools_id()),
            tokio::time::timeout_at(deadline, kept),
        );
        // Without them no kept container is found: a new one is made.
        let (tools_id, kept) = (tools_id.unwrap_or_default(), kept.unwrap_or_default());
        let (image_id, argv) = command
            .map_err(|_| timed_out(spec, "reading (or pulling) the image"))?
            .map_err(|e| failed(spec, e))?;
        Ok(Asked {
            image_id,
            argv,
            tools_id,
            kept,
        })
    }

    /// Waits for the sweep of gone runners' leftovers, so that they are
    /// gone before a new container adds to the engine's load, as they were
    /// when the sweep ran before any start. The wait is the sweep's own, not
    /// the start's: how long it took is returned, for the deadline to move
    /// by it.
    async fn wait_for_sweep(&self) -> Duration {
        let waited = Instant::now();
        if tokio::time::timeout(SWEEP_WAIT, self.swept())
            .await
            .is_err()
        {
            tracing::warn!("docker: the sweep of gone runners' leftovers is still running");
        }
        waited.elapsed()
    }

    /// The container's mounts of the tools, installed first (the init
    /// container) if need be, by `deadline`.
    async fn prepare_tools(
        &self,
        spec: &PodSpec,
        deadline: Instant,
    ) -> Result<Vec<Mount>, BackendError> {
        tokio::time::timeout_at(
            deadline,
            self.tool_mounts(deadline.saturating_duration_since(Instant::now())),
        )
        .await
        .map_err(|_| timed_out(spec, "installing the tools (the init container)"))?
        .map_err(|e| failed(spec, e))
    }

    /// The new pod's container: labelled as ours (a kept-warm one with its
    /// fingerprint), with the tools, its socket directory and the user's
    /// mounts.
    fn container_config(
        &self,
        spec: &PodSpec,
        pod: &NewPod,
        resources: &Resources,
        wrapper_args: Vec<String>,
        tool_mounts: Vec<Mount>,
        fingerprint: Option<String>,
    ) -> Result<ContainerCreateBody, StartError> {
        let mut labels = self.labels(&[
            (IMAGE_LABEL, spec.image.as_str()),
            (SOCKET_DIR_LABEL, &pod.socket_dir.to_string_lossy()),
        ]);
        if let Some(fp) = fingerprint {
            labels.insert(KEEP_WARM_LABEL.into(), fp);
        }
        let mounts = container::mounts(tool_mounts, &pod.socket_dir, &self.settings.container)?;
        Ok(container::function_container(
            spec,
            &self.settings,
            resources,
            wrapper_args,
            labels,
            mounts,
        ))
    }
}

/// The runner's error for a start of `spec` that failed.
fn failed(spec: &PodSpec, source: StartError) -> BackendError {
    BackendError::StartFailed {
        image: spec.image.clone(),
        source: runner_core::backend::cause(source),
    }
}

/// The runner's error for a start of `spec` that timed out while `phase`.
fn timed_out(spec: &PodSpec, phase: &str) -> BackendError {
    BackendError::ReadyTimeout {
        image: spec.image.clone(),
        timeout: spec.ready_timeout,
        detail: format!("timed out {phase}"),
    }
}
