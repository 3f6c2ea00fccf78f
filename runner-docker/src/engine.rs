//! Calls on the Docker engine: an image's command (pulled if missing),
//! containers created, started, awaited, logged and removed, volumes
//! removed, listings by label, and the locked-down host config and mounts
//! the function containers get.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, InspectContainerOptions, ListContainersOptions,
    LogsOptions, RemoveContainerOptions, RemoveVolumeOptions, WaitContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;

use crate::errors::StartError;

/// The image's id and command (Entrypoint then Cmd, as `docker run` puts
/// them together). Pulled first if the engine does not have it.
pub(super) async fn image_command(
    docker: &Docker,
    image: &str,
) -> Result<(String, Vec<String>), StartError> {
    let inspect = match docker.inspect_image(image).await {
        Ok(inspect) => inspect,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {
            // Without a tag or digest the engine pulls every tag: `latest`,
            // as `docker pull` takes.
            let parts = runner_core::image::ImageRef::split(image);
            let tag = (parts.tag.is_none() && parts.digest.is_none()).then(|| "latest".to_string());
            let mut pull = docker.create_image(
                Some(CreateImageOptions {
                    from_image: Some(image.to_string()),
                    tag,
                    ..Default::default()
                }),
                None,
                None,
            );
            while let Some(progress) = pull.next().await {
                progress.map_err(StartError::Pull)?;
            }
            docker
                .inspect_image(image)
                .await
                .map_err(StartError::Inspect)?
        }
        Err(err) => return Err(StartError::Inspect(err)),
    };
    let id = inspect.id.unwrap_or_default();
    let config = inspect.config.unwrap_or_default();
    let mut argv = config.entrypoint.unwrap_or_default();
    argv.extend(config.cmd.unwrap_or_default());
    if argv.is_empty() {
        return Err(StartError::NoCommand);
    }
    Ok((id, argv))
}

/// An engine error, saying what was being done.
pub(super) fn engine(what: &'static str) -> impl FnOnce(bollard::errors::Error) -> StartError {
    move |source| StartError::Engine { what, source }
}

pub(super) async fn create_container(
    docker: &Docker,
    name: &str,
    config: ContainerCreateBody,
) -> Result<(), StartError> {
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.to_string()),
                ..Default::default()
            }),
            config,
        )
        .await
        .map(|_| ())
        .map_err(engine("creating the container"))
}

pub(super) async fn start_container(docker: &Docker, name: &str) -> Result<(), StartError> {
    docker
        .start_container(name, None)
        .await
        .map_err(engine("starting the container"))
}

/// Waits (the engine answers when it happens) until the container is not
/// running; its exit code if the engine says.
pub(super) async fn wait_exit(docker: &Docker, name: &str) -> Option<i64> {
    let mut wait = docker.wait_container(
        name,
        Some(WaitContainerOptions {
            condition: "not-running".into(),
        }),
    );
    match wait.next().await {
        Some(Ok(res)) => Some(res.status_code),
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Some(code),
        _ => None,
    }
}

pub(super) async fn oom_killed(docker: &Docker, name: &str) -> Option<bool> {
    docker
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
        .ok()?
        .state?
        .oom_killed
}

/// The last lines the container wrote (its wrapper's error, mostly).
pub(super) async fn log_tail(docker: &Docker, name: &str) -> String {
    let mut logs = docker.logs(
        name,
        Some(LogsOptions {
            stdout: true,
            stderr: true,
            tail: "20".into(),
            ..Default::default()
        }),
    );
    let mut text = Vec::new();
    while let Some(Ok(chunk)) = logs.next().await {
        text.extend_from_slice(&chunk.into_bytes());
    }
    let text = String::from_utf8_lossy(&text).trim().to_string();
    if text.is_empty() {
        "(it wrote nothing)".into()
    } else {
        text
    }
}

/// Removes a container, whatever its state; one already gone is fine.
pub(super) async fn remove_container(docker: &Docker, name: &str) {
    if let Err(err) = docker
        .remove_container(
            name,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            }),
        )
        .await
    {
        if !is_not_found(&err) && !is_conflict(&err) {
            tracing::warn!(container = name, %err, "docker: removing a container");
        }
    }
}

/// Removes a volume; one in use (409) or gone (404) stays as it is.
pub(super) async fn remove_volume(docker: &Docker, name: &str) {
    if let Err(err) = docker
        .remove_volume(name, None::<RemoveVolumeOptions>)
        .await
    {
        if !is_not_found(&err) && !is_conflict(&err) {
            tracing::warn!(volume = name, %err, "docker: removing a volume");
        }
    }
}

fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// 409: a volume in use, or a removal already in progress.
fn is_conflict(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            ..
        }
    )
}

/// What every container of ours gets, the init container too: no network,
/// a read-only root filesystem, no capabilities, no new privileges.
pub(super) fn locked_down() -> HostConfig {
    HostConfig {
        network_mode: Some("none".into()),
        readonly_rootfs: Some(true),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        ..Default::default()
    }
}

pub(super) fn volume_mount(volume: &str, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.into()),
        source: Some(volume.into()),
        typ: Some(MountType::VOLUME),
        read_only: Some(read_only),
        ..Default::default()
    }
}

/// Every container (running or not) with all of `labels` (`key` or
/// `key=value`).
pub(super) async fn list_containers(
    docker: &Docker,
    labels: &[&str],
) -> Result<Vec<bollard::models::ContainerSummary>, bollard::errors::Error> {
    docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(label_filter(labels)),
            ..Default::default()
        }))
        .await
}

/// `label` filters: each entry `key` or `key=value`.
pub(super) fn label_filter(labels: &[&str]) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        labels.iter().map(|l| (*l).to_string()).collect(),
    )])
}
