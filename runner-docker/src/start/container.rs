//! The function container's spec: the wrapper's command line, its mounts,
//! and the container the engine is asked to create (the function's image,
//! locked down, with the FunctionConfig's resources and `eval`'s options).

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType};

use runner_core::backend::PodSpec;

use crate::engine::locked_down;
use crate::errors::StartError;
use crate::names::{SOCKET_MOUNT, SOCKET_NAME, TOOLS_DIR};
use crate::options::{container_env, user_mounts, ContainerOptions};
use crate::resources::Resources;
use crate::settings::DockerSettings;

/// Processes and threads a function container may have at once unless its
/// FunctionConfig says (`podExecutor.pidsLimit`): a fork bomb stays in its
/// container. The wrapper's runtime threads count too.
pub const DEFAULT_PIDS_LIMIT: u32 = 1024;

/// kpt's `--user nobody`, by number: scratch images have no /etc/passwd.
const FUNCTION_USER: &str = "65534:65534";

/// A function's scratch space on the read-only root filesystem.
const TMPFS: &str = "size=256m,mode=1777";

/// The wrapper's arguments: its socket, its flags, and after `--` the
/// image's own command (`argv`).
pub(super) fn wrapper_args(
    settings: &DockerSettings,
    spec: &PodSpec,
    argv: Vec<String>,
) -> Vec<String> {
    let mut wrapper_args = vec![
        "--unix-socket".to_string(),
        format!("{SOCKET_MOUNT}/{SOCKET_NAME}"),
        "--print-address".into(),
        "--max-request-body-size".into(),
        settings.max_message_bytes.to_string(),
    ];
    wrapper_args.extend(spec.prespawn_args());
    if let Some(idle) = settings.keep_warm {
        wrapper_args.push("--exit-after-idle".into());
        wrapper_args.push(format!("{}ms", idle.as_millis()));
    }
    wrapper_args.push("--".into());
    wrapper_args.extend(argv);
    wrapper_args
}

/// The container's mounts: the tools, the pod's socket directory, and the
/// user's (`--mount`).
pub(super) fn mounts(
    tool_mounts: Vec<Mount>,
    socket_dir: &Path,
    asked: &ContainerOptions,
) -> Result<Vec<Mount>, StartError> {
    let mut mounts = tool_mounts;
    mounts.push(Mount {
        target: Some(SOCKET_MOUNT.into()),
        source: Some(socket_dir.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        ..Default::default()
    });
    mounts.extend(user_mounts(asked).map_err(StartError::Mount)?);
    Ok(mounts)
}

/// The function container: the function's image with the wrapper as its
/// entrypoint, locked down but for what the settings ask, and limited to
/// the FunctionConfig's resources.
pub(super) fn function_container(
    spec: &PodSpec,
    settings: &DockerSettings,
    resources: &Resources,
    wrapper_args: Vec<String>,
    labels: HashMap<String, String>,
    mounts: Vec<Mount>,
) -> ContainerCreateBody {
    let asked = &settings.container;
    // A mount of the user's at /tmp takes the place of ours.
    let tmpfs = (!asked.mounts.iter().any(|m| m.targets("/tmp")))
        .then(|| HashMap::from([("/tmp".to_string(), TMPFS.to_string())]));
    let env = container_env(&resources.env, &asked.env);
    ContainerCreateBody {
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
            auto_remove: Some(settings.keep_warm.is_some()),
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
    }
}
