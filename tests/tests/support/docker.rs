//! The docker tests' images and socket directories (tests/tests/docker.rs).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use e2e_tests::{
    build_image_with_files, docker, eventually_blocking, output_within, prerequisite,
    remove_images, require_docker, Wrapper,
};

/// The images the tests build, each `FROM scratch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The init image, from `Dockerfile`.
    Wrapper,
    /// The repo's example function.
    Example,
    /// busybox `sh -c`: sleeps 3 s, then `cat`.
    Slow,
    /// busybox with `cat` as its Cmd.
    Cat,
    /// No Entrypoint, no Cmd.
    Empty,
    /// busybox `sh` running [`PROBE`]: says on stderr what the function
    /// sees, then `cat`.
    Probe,
    /// busybox `sh` running [`HOSTILE`]: tries to write on the host through
    /// its socket directory, then `cat`.
    Hostile,
    /// busybox `sh` running [`STATEFUL`]: says whether its container served
    /// a call before, then `cat`.
    Stateful,
}

/// #25: says on stderr its container (the hostname) and whether an earlier
/// call left its mark in the container's `/tmp`, leaves its own, then
/// echoes the input.
const STATEFUL: &str = r#"B=/bin/busybox
if [ -e /tmp/used ]; then S=used; else S=fresh; fi
echo > /tmp/used
echo "pod=$($B hostname) $S" >&2
exec $B cat
"#;

/// A function that tries to leave something on the host through the
/// socket directory mounted at `/krm-fn`: a big file and a directory nobody
/// but root could remove. Says on stderr what it managed.
const HOSTILE: &str = r#"B=/bin/busybox
W=""
$B dd if=/dev/zero of=/krm-fn/big bs=1024 count=1024 2>/dev/null && W="$W file"
$B mkdir -m 555 /krm-fn/locked 2>/dev/null && W="$W dir"
echo "wrote:${W:- nothing}" >&2
exec $B cat
"#;

/// The probe's script: its user, some of its environment (`IMG` is the
/// image's own), whether it has a network interface besides `lo`, and the
/// mount at `/m` (a file read, one written).
const PROBE: &str = r#"B=/bin/busybox
echo "user $($B id -u):$($B id -g)" >&2
echo "A=${A-<unset>} GONE=${KRM_E2E_GONE-<unset>} EMPTY=${EMPTY-<unset>} HOST=${KRM_E2E_HOST-<unset>} IMG=${IMG-<unset>}" >&2
if $B grep -q -v -e '^ *lo:' -e '|' /proc/net/dev; then echo "network: yes" >&2; else echo "network: no" >&2; fi
if [ -d /m ]; then $B cat /m/greeting >&2; $B touch /m/new 2>&1 | $B head -1 >&2; fi
exec $B cat
"#;

const BUSYBOX: &str = "/bin/busybox";

fn require_busybox_static() -> anyhow::Result<()> {
    let out = output_within(
        Command::new("dpkg-query").args(["-W", "-f=${Status}", "busybox-static"]),
        None,
        Duration::from_secs(30),
    )?;
    anyhow::ensure!(
        String::from_utf8_lossy(&out.stdout).contains("install ok installed")
            && Path::new(BUSYBOX).is_file(),
        "needs Debian's busybox-static (a static {BUSYBOX}) for the shell functions' images"
    );
    Ok(())
}

/// One test's images (built on first use, removed at its end) and socket
/// directory.
pub struct Setup {
    pub images: Mutex<HashMap<Kind, String>>,
    /// Images by id (one whose tag went to another), removed at the end.
    pub extra_images: Mutex<Vec<String>>,
    pub sockets: tempfile::TempDir,
}

static NEXT_SETUP: AtomicUsize = AtomicUsize::new(0);

impl Setup {
    pub fn new() -> Option<Setup> {
        prerequisite(require_docker().and_then(|()| require_busybox_static()))?;
        Some(Setup {
            images: Mutex::default(),
            extra_images: Mutex::default(),
            sockets: tempfile::tempdir().unwrap(),
        })
    }

    /// The image of `kind`, built now if this test has not yet.
    pub fn image(&self, kind: Kind) -> String {
        let mut images = self.images.lock().unwrap();
        if let Some(tag) = images.get(&kind) {
            return tag.clone();
        }
        let n = NEXT_SETUP.fetch_add(1, Ordering::Relaxed);
        let tag = format!(
            "krm-e2e/{}:{}-{n}",
            format!("{kind:?}").to_lowercase(),
            std::process::id()
        );
        let passwd = tempfile::NamedTempFile::new().unwrap();
        // For kpt's `docker run --user nobody`.
        std::fs::write(
            passwd.path(),
            "nobody:x:65534:65534:nobody:/:/sbin/nologin\n",
        )
        .unwrap();
        let busybox = |tail: &str| {
            build_image_with_files(
                &tag,
                &format!(
                    "FROM scratch\nCOPY busybox /bin/busybox\nCOPY passwd /etc/passwd\n{tail}"
                ),
                &[],
                &[("busybox", Path::new(BUSYBOX)), ("passwd", passwd.path())],
            )
        };
        match kind {
            Kind::Wrapper => {
                let dockerfile = std::fs::read_to_string(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../Dockerfile"
                ))
                .unwrap();
                build_image_with_files(&tag, &dockerfile, &["wrapper-server", "health-probe"], &[])
            }
            Kind::Example => build_image_with_files(
                &tag,
                "FROM scratch\nCOPY example-fn /example-fn\nCOPY passwd /etc/passwd\nENTRYPOINT [\"/example-fn\"]",
                &["example-fn"],
                &[("passwd", passwd.path())],
            ),
            Kind::Slow => busybox(
                "ENTRYPOINT [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox sleep 3; /bin/busybox cat\"]",
            ),
            Kind::Cat => busybox("ENTRYPOINT [\"/bin/busybox\"]\nCMD [\"cat\"]"),
            Kind::Empty => busybox(""),
            Kind::Probe | Kind::Hostile | Kind::Stateful => {
                let probe = tempfile::NamedTempFile::new().unwrap();
                let script = match kind {
                    Kind::Probe => PROBE,
                    Kind::Hostile => HOSTILE,
                    _ => STATEFUL,
                };
                std::fs::write(probe.path(), script).unwrap();
                // Readable by the function's user (a temporary file is not).
                std::fs::set_permissions(
                    probe.path(),
                    std::os::unix::fs::PermissionsExt::from_mode(0o644),
                )
                .unwrap();
                build_image_with_files(
                    &tag,
                    "FROM scratch\nCOPY busybox /bin/busybox\nCOPY passwd /etc/passwd\nCOPY probe.sh /probe.sh\nENV IMG=from-image\nENTRYPOINT [\"/bin/busybox\", \"sh\", \"/probe.sh\"]",
                    &[],
                    &[
                        ("busybox", Path::new(BUSYBOX)),
                        ("passwd", passwd.path()),
                        ("probe.sh", probe.path()),
                    ],
                )
            }
        }
        .unwrap();
        images.insert(kind, tag.clone());
        tag
    }

    pub fn socket_dir(&self) -> String {
        self.sockets.path().to_string_lossy().into_owned()
    }

    /// `serve --backend docker` on this test's socket directory.
    pub fn runner(&self, extra: &[&str]) -> Wrapper {
        let dir = self.socket_dir();
        let wrapper = self.image(Kind::Wrapper);
        let mut args = vec![
            "--backend",
            "docker",
            "--wrapper-server-image",
            &wrapper,
            "--docker-socket-dir",
            &dir,
            "--metrics-port",
            "0",
        ];
        args.extend_from_slice(extra);
        Wrapper::start_runner(&args).unwrap()
    }

    /// Names of the containers this test's runners made, running or not.
    pub fn containers(&self) -> Vec<String> {
        self.list(&["ps", "-a", "--format", "{{.Names}}"])
    }

    pub fn volumes(&self) -> Vec<String> {
        self.list(&["volume", "ls", "--format", "{{.Name}}"])
    }

    fn list(&self, cmd: &[&str]) -> Vec<String> {
        let root = std::fs::canonicalize(self.sockets.path()).unwrap();
        let filter = format!("label=krm-fn.dev/socket-root={}", root.display());
        let out = docker(&[cmd, &["--filter", &filter]].concat()).unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Asserts nothing of this test's is left in the engine (waiting a
    /// little: the engine removes auto-removed containers after their exit).
    pub fn assert_clean(&self) {
        let mut left = (Vec::new(), Vec::new());
        let clean = eventually_blocking(Duration::from_secs(30), || {
            left = (self.containers(), self.volumes());
            left.0.is_empty() && left.1.is_empty()
        });
        assert!(
            clean,
            "left behind: containers {:?}, volumes {:?}",
            left.0, left.1
        );
    }
}

impl Drop for Setup {
    /// Whatever a failed test left goes too, then its images.
    fn drop(&mut self) {
        for name in self.containers() {
            let _ = docker(&["rm", "-f", "-v", &name]);
        }
        for name in self.volumes() {
            let _ = docker(&["volume", "rm", "-f", &name]);
        }
        let mut images: Vec<String> = self.images.lock().unwrap().values().cloned().collect();
        images.extend(self.extra_images.lock().unwrap().iter().cloned());
        remove_images(&images);
    }
}
