//! A pod's start: a kept-warm container reused, or a new container made,
//! started and waited for until its wrapper serves.

mod warm;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType};
use bollard::query_parameters::AttachContainerOptions;
use futures::StreamExt;

use runner_core::backend::{BackendError, PodId, PodSpec, ReadyPod};

use crate::engine::{
    create_container, engine, image_command, locked_down, remove_container, start_container,
};
use crate::errors::StartError;
use crate::host::{fingerprint, lock_socket_dir, make_socket_dir};
use crate::names::{
    IMAGE_LABEL, KEEP_WARM_LABEL, SOCKET_DIR_LABEL, SOCKET_MOUNT, SOCKET_NAME, TOOLS_DIR,
};
use crate::options::{container_env, user_mounts};
use crate::resources::Resources;
use crate::settings::Tools;
use crate::state::{Inner, PodEntry};
use crate::sweep::SWEEP_WAIT;
use crate::tools;

/// Processes and threads a function container may have at once unless its
/// FunctionConfig says (`podExecutor.pidsLimit`): a fork bomb stays in its
/// container. The wrapper's runtime threads count too.
pub const DEFAULT_PIDS_LIMIT: u32 = 1024;

/// The most of a starting container's stderr kept for its error.
const START_LOG_BYTES: usize = 4096;

/// After a starting container's output ended: how long its death event may
/// take to arrive, with its exit code.
const DEATH_EVENT_WAIT: Duration = Duration::from_secs(5);

/// kpt's `--user nobody`, by number: scratch images have no /etc/passwd.
const FUNCTION_USER: &str = "65534:65534";

/// A function's scratch space on the read-only root filesystem.
const TMPFS: &str = "size=256m,mode=1777";

impl Inner {
    pub(crate) async fn start_pod(&self, spec: PodSpec) -> Result<ReadyPod, BackendError> {
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
}
