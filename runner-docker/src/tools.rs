//! Where a function container gets `wrapper-server` and the health probe.
//!
//! Two ways: the init image (`Dockerfile`) installs them into a volume, as
//! a pod's init container does in a cluster; or, when no wrapper image is
//! named and the engine has none, the static binaries that ship beside the
//! running `function-runner` are bind-mounted read-only into the function
//! container. The second is what a user with only the release binaries and
//! a Docker engine has (kpt needs only the function's image, and so do we);
//! it needs the engine to be local, which this backend needs anyway (the
//! containers' sockets are host directories).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::Docker;

use crate::connect::{engine_host, is_local};
use crate::engine::{
    create_container, engine, locked_down, log_tail, remove_container, start_container,
    volume_mount, wait_exit,
};
use crate::errors::StartError;
use crate::names::TOOLS_DIR;
pub use crate::settings::Tools;
use crate::settings::{DockerSettings, DEFAULT_WRAPPER_IMAGE};
use crate::state::Inner;

/// The tools for `settings`: an image named by the user is used whatever
/// the engine holds (a missing one fails the first start, naming it); else
/// the default image if the engine has it (the way for a runner in a
/// container or with a remote engine); else the binaries beside this
/// program.
pub async fn choose_tools(docker: &Docker, settings: &DockerSettings) -> Tools {
    if let Some(image) = &settings.wrapper_image {
        return Tools::Image(image.clone());
    }
    if docker.inspect_image(DEFAULT_WRAPPER_IMAGE).await.is_ok() {
        return Tools::Image(DEFAULT_WRAPPER_IMAGE.into());
    }
    // A bind mount's source is a path on the engine's machine: only a local
    // engine (a Unix socket) sees this host's files.
    let host = engine_host();
    if !is_local(&host) {
        return Tools::Missing {
            image: DEFAULT_WRAPPER_IMAGE.into(),
            host: format!(
                "the engine is not local (DOCKER_HOST={host}): it cannot mount the binaries beside function-runner"
            ),
        };
    }
    match host_tools(&settings.tools_dir) {
        Ok((wrapper, probe)) => Tools::Host { wrapper, probe },
        Err(host) => Tools::Missing {
            image: DEFAULT_WRAPPER_IMAGE.into(),
            host,
        },
    }
}

/// `wrapper-server` and a probe (`health-probe`, else `grpc-health-probe`)
/// in `dir`, each a static executable; else why not, in words.
fn host_tools(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let wrapper = dir.join("wrapper-server");
    usable(&wrapper)?;
    let mut why = Vec::new();
    for name in ["health-probe", "grpc-health-probe"] {
        let probe = dir.join(name);
        if !probe.exists() {
            continue;
        }
        match usable(&probe) {
            Ok(()) => return Ok((wrapper, probe)),
            Err(err) => why.push(err),
        }
    }
    Err(match why.is_empty() {
        true => format!("no health-probe beside it in {}", dir.display()),
        false => why.join("; "),
    })
}

/// A file the function container can run: executable by anyone (it runs
/// as another user) and static, since function images (scratch,
/// distroless) have no dynamic loader or libc to offer it.
fn usable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|err| format!("{shown}: {err}"))?;
    if !meta.is_file() || meta.permissions().mode() & 0o005 != 0o005 {
        return Err(format!(
            "{shown} is not a file that any user may read and run"
        ));
    }
    match elf_interpreter(path) {
        Ok(false) => Ok(()),
        Ok(true) => Err(format!(
            "{shown} is dynamically linked (function images have no libc for it: build it static, as .cargo/config.toml does)"
        )),
        Err(why) => Err(format!("{shown}: {why}")),
    }
}

/// Whether the 64-bit little-endian ELF file at `path`, built for this
/// machine's architecture, asks for a program interpreter (`PT_INTERP`): a
/// dynamically linked executable does, a static or static-pie one does not.
fn elf_interpreter(path: &Path) -> Result<bool, String> {
    const PT_INTERP: u32 = 3;
    /// `e_machine` of the architecture this program was built for.
    const MACHINE: u16 = if cfg!(target_arch = "x86_64") {
        62
    } else if cfg!(target_arch = "aarch64") {
        183
    } else {
        0
    };
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut head))
        .map_err(|err| err.to_string())?;
    let u16_at = |at: usize| {
        head.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        head.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        head.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    // ELFCLASS64, little-endian: the only binaries this build makes.
    if head.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err("not a 64-bit little-endian ELF executable".into());
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return Err("a truncated ELF header".into());
    };
    if MACHINE != 0 && u16_at(0x12) != Some(MACHINE) {
        return Err(format!(
            "built for another architecture (ELF machine {:?}, this one is {MACHINE})",
            u16_at(0x12)
        ));
    }
    let out_of_range = || "program headers out of range".to_string();
    let phoff = usize::try_from(phoff).map_err(|_| out_of_range())?;
    for i in 0..usize::from(phnum) {
        let at = usize::from(phentsize)
            .checked_mul(i)
            .and_then(|off| off.checked_add(phoff))
            .ok_or_else(out_of_range)?;
        match at.checked_add(4).and_then(|_| u32_at(at)) {
            Some(PT_INTERP) => return Ok(true),
            Some(_) => {}
            None => return Err("program headers past the first 64 KiB".into()),
        }
    }
    Ok(false)
}

/// The function container's mounts of host tools: the wrapper and the probe
/// under both names the image's install writes.
fn host_mounts(wrapper: &Path, probe: &Path) -> Vec<Mount> {
    let bind = |source: &Path, name: &str| Mount {
        target: Some(format!("{TOOLS_DIR}/{name}")),
        source: Some(source.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        ..Default::default()
    };
    vec![
        bind(wrapper, "wrapper-server"),
        bind(probe, "health-probe"),
        bind(probe, "grpc-health-probe"),
    ]
}

/// What of the host tools makes a kept-warm container another one: the
/// files' identity and age (a rebuilt binary makes new containers).
pub(super) fn host_fingerprint(wrapper: &Path, probe: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    [wrapper, probe]
        .iter()
        .map(|p| match std::fs::metadata(p) {
            Ok(m) => format!(
                "{}:{}:{}:{}.{}",
                p.display(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec()
            ),
            Err(_) => p.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join("\0")
}

impl Inner {
    /// Where the tools come from: as chosen, or chosen again while none
    /// were found.
    pub(crate) async fn tools_from(&self) -> Tools {
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

    /// The function container's mounts of the tools: the tools volume,
    /// installed by the init container on first use, or the host's binaries.
    pub(crate) async fn tool_mounts(&self, timeout: Duration) -> Result<Vec<Mount>, StartError> {
        match &self.tools_from().await {
            Tools::Image(image) => Ok(vec![volume_mount(
                &self.tools_volume(image, timeout).await?,
                TOOLS_DIR,
                true,
            )]),
            Tools::Host { wrapper, probe } => Ok(host_mounts(wrapper, probe)),
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_binaries_of_this_build_are_static_and_the_system_ones_are_not() {
        // This test binary is built like every binary here (+crt-static).
        let me = std::env::current_exe().unwrap();
        assert_eq!(elf_interpreter(&me), Ok(false));
        // Debian's own programs are dynamically linked.
        assert_eq!(elf_interpreter(Path::new("/bin/ls")), Ok(true));
        let err = usable(Path::new("/bin/ls")).unwrap_err();
        assert!(err.contains("dynamically linked"), "{err}");
        // A static binary of another architecture (aarch64's e_machine).
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("wrapper-server");
        let mut bytes = std::fs::read(&me).unwrap();
        bytes[0x12..0x14].copy_from_slice(&183u16.to_le_bytes());
        std::fs::write(&other, bytes).unwrap();
        let err = elf_interpreter(&other).unwrap_err();
        assert!(err.contains("another architecture"), "{err}");
    }

    #[test]
    fn what_is_missing_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = host_tools(dir.path()).unwrap_err();
        assert!(err.contains("wrapper-server"), "{err}");
        // A wrapper that is no ELF file.
        let wrapper = dir.path().join("wrapper-server");
        std::fs::write(&wrapper, "#!/bin/sh\n").unwrap();
        chmod(&wrapper, 0o755);
        let err = host_tools(dir.path()).unwrap_err();
        assert!(err.contains("not a 64-bit little-endian ELF"), "{err}");
        // A static one, but no probe beside it.
        std::fs::copy(std::env::current_exe().unwrap(), &wrapper).unwrap();
        let err = host_tools(dir.path()).unwrap_err();
        assert!(err.contains("no health-probe"), "{err}");
        // Not runnable by others (the function's user).
        std::fs::copy(&wrapper, dir.path().join("grpc-health-probe")).unwrap();
        chmod(&wrapper, 0o700);
        let err = host_tools(dir.path()).unwrap_err();
        assert!(err.contains("any user may read and run"), "{err}");
        chmod(&wrapper, 0o755);
        let (w, p) = host_tools(dir.path()).unwrap();
        assert_eq!(w, wrapper);
        assert_eq!(p, dir.path().join("grpc-health-probe"));
        // Three read-only binds: the probe under both of its names.
        let mounts = host_mounts(&w, &p);
        let targets: Vec<_> = mounts.iter().map(|m| m.target.clone().unwrap()).collect();
        assert_eq!(
            targets,
            [
                "/wrapper-server-tools/wrapper-server",
                "/wrapper-server-tools/health-probe",
                "/wrapper-server-tools/grpc-health-probe"
            ]
        );
        assert!(mounts.iter().all(|m| m.read_only == Some(true)));
    }
}
