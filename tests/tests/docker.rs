//! The docker backend end to end on the real engine (#12): images built
//! here `FROM scratch` (the wrapper's from `Dockerfile`; a function from the
//! repo's example function; shell functions on Debian's busybox-static),
//! `function-runner serve --backend docker` and `eval --image` on them.
//! Each test has its own socket directory, so its runner sweeps only what
//! it and its kind left; every container and volume it made is checked
//! gone at its end. Skipped (failing under CI) where no engine answers.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use e2e_tests::{
    bin, build_image_with_files, docker, eventually_async, eventually_blocking, example_request,
    example_rl, output_within, prerequisite, remove_images, require_docker, Wrapper,
};
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;

/// The images the tests build, each `FROM scratch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
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
}

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
struct Setup {
    images: Mutex<HashMap<Kind, String>>,
    /// Images by id (one whose tag went to another), removed at the end.
    extra_images: Mutex<Vec<String>>,
    sockets: tempfile::TempDir,
}

static NEXT_SETUP: AtomicUsize = AtomicUsize::new(0);

impl Setup {
    fn new() -> Option<Setup> {
        prerequisite(require_docker().and_then(|()| require_busybox_static()))?;
        Some(Setup {
            images: Mutex::default(),
            extra_images: Mutex::default(),
            sockets: tempfile::tempdir().unwrap(),
        })
    }

    /// The image of `kind`, built now if this test has not yet.
    fn image(&self, kind: Kind) -> String {
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
        }
        .unwrap();
        images.insert(kind, tag.clone());
        tag
    }

    fn socket_dir(&self) -> String {
        self.sockets.path().to_string_lossy().into_owned()
    }

    /// `serve --backend docker` on this test's socket directory.
    fn runner(&self, extra: &[&str]) -> Wrapper {
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
    fn containers(&self) -> Vec<String> {
        self.list(&["ps", "-a", "--format", "{{.Names}}"])
    }

    fn volumes(&self) -> Vec<String> {
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
    fn assert_clean(&self) {
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

fn request(image: &str) -> EvaluateFunctionRequest {
    example_request(image)
}

fn inspect(container: &str, format: &str) -> String {
    let out = docker(&["inspect", "--format", format, container]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Stops the runner as Kubernetes would (SIGTERM) and waits for its exit.
async fn stop(mut runner: Wrapper) {
    runner.signal(Signal::SIGTERM);
    let status = runner.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert!(
        status.success(),
        "runner exit: {status:?}\n{}",
        runner.logs()
    );
}

#[tokio::test]
async fn serves_functions_from_their_images_in_locked_down_containers() {
    let Some(setup) = Setup::new() else { return };
    let runner = setup.runner(&[]);
    let mut client = runner.client().await.unwrap();

    let resp = client
        .evaluate_function(request(&setup.image(Kind::Example)))
        .await
        .unwrap()
        .into_inner();
    let out = String::from_utf8_lossy(&resp.resource_list);
    assert!(out.contains("kind: ResourceList"), "{out}");
    assert!(
        String::from_utf8_lossy(&resp.log).contains("example-fn: processed ResourceList"),
        "{:?}",
        resp.log
    );
    // The image's Cmd (busybox `cat`) runs after the wrapper's `--`.
    let resp = client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());

    let containers = setup.containers();
    assert_eq!(containers.len(), 2, "one pod per image: {containers:?}");
    for c in &containers {
        // Stricter than kpt's `docker run`.
        assert_eq!(inspect(c, "{{.Config.User}}"), "65534:65534", "{c}");
        assert_eq!(inspect(c, "{{.HostConfig.NetworkMode}}"), "none");
        assert_eq!(inspect(c, "{{.HostConfig.ReadonlyRootfs}}"), "true");
        assert_eq!(
            inspect(c, "{{.HostConfig.SecurityOpt}}"),
            "[no-new-privileges]"
        );
        assert_eq!(inspect(c, "{{.HostConfig.CapDrop}}"), "[ALL]");
        assert_eq!(
            inspect(c, "{{index .Config.Entrypoint 0}}"),
            "/wrapper-server-tools/wrapper-server"
        );
    }
    // Warm: the next calls use the same containers.
    for _ in 0..3 {
        client
            .evaluate_function(request(&setup.image(Kind::Example)))
            .await
            .unwrap();
    }
    assert_eq!(setup.containers().len(), 2);

    // An image with nothing to run: a clear error, and nothing left of it.
    let err = client
        .evaluate_function(request(&setup.image(Kind::Empty)))
        .await
        .unwrap_err();
    assert!(
        err.message().contains("no Entrypoint and no Cmd"),
        "{}",
        err.message()
    );
    assert_eq!(setup.containers().len(), 2);

    stop(runner).await;
    setup.assert_clean();
    // The runner's own directory went with it.
    assert_eq!(std::fs::read_dir(setup.sockets.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_killed_mid_call_is_replaced_and_the_call_retried() {
    let Some(setup) = Setup::new() else { return };
    let runner = setup.runner(&[]);
    let mut client = runner.client().await.unwrap();
    // Warm up a pod, then kill its container while a call runs in it.
    client
        .evaluate_function(request(&setup.image(Kind::Slow)))
        .await
        .unwrap();
    let first = setup.containers();
    assert_eq!(first.len(), 1);
    let call = tokio::spawn({
        let mut client = client.clone();
        let req = request(&setup.image(Kind::Slow));
        async move { client.evaluate_function(req).await }
    });
    // The function sleeps: the call is inside the container.
    let started = eventually_blocking(Duration::from_secs(20), || {
        let out = docker(&["top", &first[0]]).unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.contains("busybox sleep") && !l.contains("wrapper-server"))
    });
    assert!(started, "{}", runner.logs());
    docker(&["kill", &first[0]]).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());
    let now = setup.containers();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, first, "the call ran again in a new container");

    // A container that exits between calls: the engine's event evicts it
    // before any call finds it dead.
    docker(&["kill", &now[0]]).unwrap();
    let logs = &runner;
    let evicted = eventually_async(Duration::from_secs(30), async || {
        logs.logs().contains(&format!("pod failed pod={}", now[0]))
    })
    .await;
    assert!(evicted, "{}", runner.logs());
    client
        .evaluate_function(request(&setup.image(Kind::Slow)))
        .await
        .unwrap();
    let third = setup.containers();
    assert_eq!(third.len(), 1);
    assert!(!third.contains(&now[0]));
    stop(runner).await;
    setup.assert_clean();
}

#[tokio::test]
async fn what_a_crashed_runner_left_is_swept_by_the_next() {
    let Some(setup) = Setup::new() else { return };
    let mut crashed = setup.runner(&[]);
    let mut client = crashed.client().await.unwrap();
    client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap();
    assert_eq!(setup.containers().len(), 1);
    assert_eq!(setup.volumes().len(), 1, "the tools volume");
    crashed.signal(Signal::SIGKILL);
    crashed.wait_exit(Duration::from_secs(30)).await.unwrap();
    // Still there: nobody removed them.
    assert_eq!(setup.containers().len(), 1);

    // A runner beside it on the same socket directory leaves a live
    // neighbour's pods alone, and sweeps the dead one's.
    let next = setup.runner(&[]);
    let mut client = next.client().await.unwrap();
    client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap();
    let mine = setup.containers();
    assert_eq!(mine.len(), 1, "only the new runner's pod: {mine:?}");
    let neighbour = setup.runner(&[]);
    assert_eq!(setup.containers(), mine, "a live runner's pod is not swept");
    stop(neighbour).await;
    stop(next).await;
    setup.assert_clean();
}

#[tokio::test]
async fn function_config_resources_limit_the_container() {
    let Some(setup) = Setup::new() else { return };
    let functions = tempfile::tempdir().unwrap();
    let image = setup.image(Kind::Cat);
    let (name, tag) = image.rsplit_once(':').unwrap();
    std::fs::write(
        functions.path().join("cat.yaml"),
        format!(
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: cat\nspec:\n  image: {name}\n  podExecutor:\n    tags: [\"{tag}\"]\n    templateOverrides:\n      container:\n        resources:\n          limits: {{memory: 64Mi, cpu: 500m}}\n        env:\n        - {{name: GREETING, value: hello}}\n"
        ),
    )
    .unwrap();
    let runner = setup.runner(&["--functions", functions.path().to_str().unwrap()]);
    let mut client = runner.client().await.unwrap();
    client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap();
    let c = &setup.containers()[0];
    assert_eq!(
        inspect(c, "{{.HostConfig.Memory}}"),
        (64u64 << 20).to_string()
    );
    assert_eq!(inspect(c, "{{.HostConfig.NanoCpus}}"), "500000000");
    assert!(inspect(c, "{{.Config.Env}}").contains("GREETING=hello"));
    stop(runner).await;
    setup.assert_clean();
}

fn package(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("app.yaml"),
        "# the app\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # inline\nspec:\n  replicas: 1\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n",
    )
    .unwrap();
}

fn eval(setup: &Setup, args: &[&str]) -> std::process::Output {
    let dir = setup.socket_dir();
    output_within(
        Command::new(bin("function-runner"))
            .arg("eval")
            .args(["--wrapper-server-image", &setup.image(Kind::Wrapper)])
            .args(["--docker-socket-dir", &dir])
            .args(args),
        None,
        Duration::from_secs(120),
    )
    .unwrap()
}

fn read_tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files: Vec<(PathBuf, String)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().to_path_buf(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// #12 item 4: the same package from `kpt fn eval --image` (its `docker
/// run`) and ours, on the same locally built images.
#[test]
fn eval_image_gives_the_package_kpt_gives() {
    let Some(setup) = Setup::new() else { return };
    let Some(kpt) = prerequisite(e2e_tests::require_kpt()) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    for (image, args) in [
        (&setup.image(Kind::Example), &["owner=me"][..]),
        (&setup.image(Kind::Cat), &[][..]),
    ] {
        let (theirs, ours) = (work.path().join("kpt"), work.path().join("ours"));
        let _ = std::fs::remove_dir_all(&theirs);
        let _ = std::fs::remove_dir_all(&ours);
        package(&theirs);
        package(&ours);
        let out = output_within(
            Command::new(&kpt)
                .args(["fn", "eval", theirs.to_str().unwrap(), "--image", image])
                .args(["--image-pull-policy", "never", "--"])
                .args(args),
            None,
            Duration::from_secs(120),
        )
        .unwrap();
        assert!(
            out.status.success(),
            "kpt: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = eval(
            &setup,
            &[&[ours.to_str().unwrap(), "--image", image, "--"][..], args].concat(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ours: {stderr}");
        assert!(
            stderr.contains("[USING] docker"),
            "says which backend: {stderr}"
        );
        assert_eq!(read_tree(&theirs), read_tree(&ours), "{image}");
    }
    let changed = std::fs::read_to_string(work.path().join("ours/app.yaml")).unwrap();
    assert!(changed.contains("# the app"), "{changed}");
    setup.assert_clean();
}

/// `--keep-warm`: the second run finds the first run's container and pays
/// no start; unused, it goes by itself, and the next run sweeps its volume.
#[test]
fn eval_keep_warm_reuses_the_container_until_it_idles_out() {
    let Some(setup) = Setup::new() else { return };
    let work = tempfile::tempdir().unwrap();
    package(work.path());
    let pkg = work.path().to_str().unwrap();
    let run = |owner: &str| {
        let out = eval(
            &setup,
            &[
                pkg,
                "--image",
                &setup.image(Kind::Example),
                "--keep-warm",
                "15s",
                "--",
                owner,
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let _ = run("owner=one");
    let first = setup.containers();
    assert_eq!(first.len(), 1, "left running: {first:?}");
    run("owner=two");
    assert_eq!(setup.containers(), first, "reused, not a second one");
    let app = std::fs::read_to_string(work.path().join("app.yaml")).unwrap();
    assert!(app.contains("owner: two"), "{app}");
    // The author rebuilds the image under the same tag (here: another
    // image, `cat`, tagged so): the next run gets a container of the new
    // one, not the kept one of the old.
    let example = setup.image(Kind::Example);
    let old_id = docker(&["image", "inspect", "--format", "{{.Id}}", &example]).unwrap();
    let old_id = String::from_utf8_lossy(&old_id.stdout).trim().to_string();
    setup.extra_images.lock().unwrap().push(old_id);
    docker(&["tag", &setup.image(Kind::Cat), &example]).unwrap();
    run("owner=three");
    let app = std::fs::read_to_string(work.path().join("app.yaml")).unwrap();
    assert!(
        app.contains("owner: two") && !app.contains("owner: three"),
        "ran the new image (cat): {app}"
    );
    assert_eq!(
        setup.containers().len(),
        2,
        "a container of the new image beside the old"
    );
    // Nobody calls it: it exits and the engine removes it.
    let gone = eventually_blocking(Duration::from_secs(60), || setup.containers().is_empty());
    assert!(gone, "{:?}", setup.containers());
    // Their tools volumes (one per run that made a container) outlived
    // them; a later run (without keep-warm) sweeps them.
    assert_eq!(setup.volumes().len(), 2);
    let out = eval(
        &setup,
        &[
            pkg,
            "--image",
            &setup.image(Kind::Example),
            "--",
            "owner=three",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    setup.assert_clean();
}
