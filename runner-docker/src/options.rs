//! What `eval` (kpt's `-e`, `--mount`, `--network`, `--as-current-user`)
//! and `render` (`--allow-network`) may ask of a function's container
//! beyond the locked-down default, and the `--mount` values as kpt reads
//! them. `serve` asks none of it: the default is the container as it was
//! before these flags.

use std::path::{Component, Path};

use bollard::models::{Mount, MountType};
use krm_yaml::package::go_quote;

use crate::names::{SOCKET_MOUNT, TOOLS_DIR};

/// A function container's environment and privileges beyond the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerOptions {
    /// `-e`: entries of the container's environment as docker's CLI sends
    /// them (`KEY=VALUE`, or `KEY` to unset it); over the FunctionConfig's.
    pub env: Vec<String>,
    /// `--mount`: bound, volume or tmpfs mounts into the container.
    pub mounts: Vec<StorageMount>,
    /// `--network` / `--allow-network`: the host's network (kpt's `docker
    /// run --network host`) instead of none.
    pub network: bool,
    /// `--as-current-user`: `uid:gid` to run as instead of nobody's.
    pub user: Option<String>,
}

/// One `--mount` value as kpt reads it (kyaml's `StringToStorageMount`):
/// comma-separated `key=value` options, `type`, `src` or `source`, `dst` or
/// `target`, `rw=true`; any other option, and one without `=`, is ignored,
/// and a later option wins over an earlier one of the same key. Read-only
/// unless `rw=true`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageMount {
    pub typ: String,
    pub src: String,
    pub dst: String,
    pub rw: bool,
}

impl StorageMount {
    /// Reads a `--mount` value; never fails, as kpt's reading does not
    /// ([`StorageMount::check`] then checks it as docker's CLI does).
    pub fn parse(s: &str) -> Self {
        let mut mount = StorageMount::default();
        for (key, value) in s.split(',').filter_map(|o| o.split_once('=')) {
            match key {
                "type" => mount.typ = value.to_owned(),
                "src" | "source" => mount.src = value.to_owned(),
                "dst" | "target" => mount.dst = value.to_owned(),
                "rw" => mount.rw = value == "true",
                _ => {}
            }
        }
        mount
    }

    /// Checks it as `docker run --mount` would the value kpt passes it (see
    /// [`StorageMount::docker_flag`]), in docker's words: its CLI's (a type
    /// and a target are required), then its engine's for a type it does not
    /// know. The engine checks the rest (paths absolute, a bind's source
    /// there, ...) when the container is created.
    pub fn check(&self) -> Result<(), String> {
        let flag = |reason: &str| {
            format!(
                "invalid argument {} for \"--mount\" flag: {reason}",
                go_quote(&self.docker_flag())
            )
        };
        if self.typ.is_empty() {
            return Err(flag("type is required"));
        }
        if self.dst.is_empty() {
            return Err(flag("target is required"));
        }
        if self.mount_type().is_none() {
            return Err(format!(
                "invalid mount config for type {}: mount type unknown",
                go_quote(&self.typ)
            ));
        }
        Ok(())
    }

    /// The `--mount` value kpt gives `docker run` for it.
    pub fn docker_flag(&self) -> String {
        format!(
            "type={},source={},target={}{}",
            self.typ,
            self.src,
            self.dst,
            if self.rw { "" } else { ",readonly" }
        )
    }

    fn mount_type(&self) -> Option<MountType> {
        // The types a Linux engine mounts.
        match self.typ.as_str() {
            "bind" => Some(MountType::BIND),
            "volume" => Some(MountType::VOLUME),
            "tmpfs" => Some(MountType::TMPFS),
            _ => None,
        }
    }

    /// Whether it mounts at `path` (compared by components: `/tmp/` is
    /// `/tmp`).
    pub(super) fn targets(&self, path: &str) -> bool {
        let parts = |p: &str| -> Vec<String> {
            Path::new(p)
                .components()
                .filter(|c| !matches!(c, Component::CurDir))
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect()
        };
        parts(&self.dst) == parts(path)
    }

    /// The engine's mount, as docker's CLI makes it of the value kpt gives.
    pub(super) fn to_mount(&self) -> Result<Mount, String> {
        self.check()?;
        Ok(Mount {
            typ: self.mount_type(),
            source: (!self.src.is_empty()).then(|| self.src.clone()),
            target: Some(self.dst.clone()),
            read_only: Some(!self.rw),
            ..Default::default()
        })
    }
}

/// The engine's mounts for the user's: refused where the runner mounts
/// its own (the wrapper's tools and socket), which they would hide.
pub(super) fn user_mounts(asked: &ContainerOptions) -> Result<Vec<Mount>, String> {
    asked
        .mounts
        .iter()
        .map(|m| {
            for (ours, what) in [
                (TOOLS_DIR, "the wrapper's tools"),
                (SOCKET_MOUNT, "the wrapper's socket"),
            ] {
                if m.targets(ours) {
                    return Err(format!(
                        "target {} is where the runner mounts {what}: choose another",
                        m.dst
                    ));
                }
            }
            m.to_mount()
        })
        .collect()
}

/// The container's environment: the FunctionConfig's entries but those
/// `-e` sets or unsets, then `-e`'s.
pub(super) fn container_env(config: &[String], asked: &[String]) -> Vec<String> {
    let key = |entry: &str| entry.split_once('=').map_or(entry, |(k, _)| k).to_owned();
    let asked_keys: Vec<String> = asked.iter().map(|e| key(e)).collect();
    config
        .iter()
        .filter(|e| !asked_keys.contains(&key(e)))
        .chain(asked)
        .cloned()
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn read_as_kpt_reads_it() {
        let m = StorageMount::parse("type=bind,src=/a,dst=/b");
        assert_eq!(m.docker_flag(), "type=bind,source=/a,target=/b,readonly");
        let m = StorageMount::parse("source=/a,target=/b,type=volume,rw=true,extra=1,junk");
        assert_eq!(m.docker_flag(), "type=volume,source=/a,target=/b");
        let m = StorageMount::parse("type=tmpfs,dst=/t,rw=true,rw=yes");
        assert!(!m.rw, "the last rw wins, and only `true` is true");
        assert_eq!(StorageMount::parse("garbage"), StorageMount::default());
    }

    #[test]
    fn checked_in_docker_words() {
        let err = |s: &str| StorageMount::parse(s).check().unwrap_err();
        assert_eq!(
            err("src=/a,dst=/b"),
            r#"invalid argument "type=,source=/a,target=/b,readonly" for "--mount" flag: type is required"#
        );
        assert_eq!(
            err("type=bind,src=/a,rw=true"),
            r#"invalid argument "type=bind,source=/a,target=" for "--mount" flag: target is required"#
        );
        assert_eq!(
            err("type=foo,src=/a,dst=/b"),
            r#"invalid mount config for type "foo": mount type unknown"#
        );
        for ok in [
            "type=bind,src=/a,dst=/b",
            "type=volume,dst=/v",
            "type=tmpfs,dst=/t",
        ] {
            StorageMount::parse(ok).check().unwrap();
        }
    }

    #[test]
    fn asked_env_over_the_function_config() {
        let config = ["A=1".to_string(), "B=2".into(), "C".into()];
        let asked = ["B=3".to_string(), "C=4".into(), "D".into()];
        assert_eq!(container_env(&config, &asked), ["A=1", "B=3", "C=4", "D"]);
    }

    #[test]
    fn mounts_over_the_runner_refused() {
        let asked = |dst: &str| ContainerOptions {
            mounts: vec![StorageMount::parse(&format!("type=tmpfs,dst={dst}"))],
            ..Default::default()
        };
        for ours in ["/krm-fn", "/wrapper-server-tools/"] {
            let err = user_mounts(&asked(ours)).unwrap_err();
            assert!(err.contains("where the runner mounts"), "{err}");
        }
        let mounts = user_mounts(&asked("/data")).unwrap();
        assert_eq!(mounts[0].typ, Some(MountType::TMPFS));
        assert_eq!(mounts[0].read_only, Some(true));
    }

    #[test]
    fn targets_compare_by_components() {
        let m = StorageMount::parse("type=tmpfs,dst=/tmp/");
        assert!(m.targets("/tmp") && !m.targets("/tmp/x"));
        let m = StorageMount::parse("type=tmpfs,dst=//krm-fn/./");
        assert!(m.targets("/krm-fn"));
    }
}
