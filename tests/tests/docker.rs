//! The docker backend end to end on the real engine (#12): images built
//! here `FROM scratch` (the wrapper's from `Dockerfile`; a function from the
//! repo's example function; shell functions on Debian's busybox-static),
//! `function-runner serve --backend docker` and `eval --image` on them.
//! Each test has its own socket directory, so its runner sweeps only what
//! it and its kind left; every container and volume it made is checked
//! gone at its end. Skipped (failing under CI) where no engine answers.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e_tests::{
    beta67, bin, docker, eventually_async, eventually_blocking, example_request, example_rl,
    output_within, prerequisite, Wrapper,
};
use nix::sys::signal::Signal;
use proto::pb::EvaluateFunctionRequest;

#[path = "support/docker.rs"]
mod setup;

use setup::{Kind, Setup};

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
    // The neighbour sweeps in the background; a call that makes its own
    // container waits for that sweep.
    let neighbour = setup.runner(&[]);
    neighbour
        .client()
        .await
        .unwrap()
        .evaluate_function(request(&setup.image(Kind::Example)))
        .await
        .unwrap();
    let now = setup.containers();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(
        mine.iter().all(|c| now.contains(c)),
        "a live runner's pod is not swept: {mine:?} in {now:?}"
    );
    stop(neighbour).await;
    stop(next).await;
    setup.assert_clean();
}

#[tokio::test]
async fn function_config_resources_limit_the_container() {
    let Some(setup) = Setup::new() else { return };
    let image = setup.image(Kind::Cat);
    let functions = function_config(
        &image,
        "    templateOverrides:\n      container:\n        resources:\n          limits: {memory: 64Mi, cpu: 500m}\n        env:\n        - {name: GREETING, value: hello}\n",
    );
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

/// Everything under `dir` that is not a directory or a socket, and every
/// directory deeper than a pod's (`<instance>/<pod>`).
fn left_on_host(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    use std::os::unix::fs::FileTypeExt;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if depth >= 2 {
                found.push(path.clone());
            }
            left_on_host(&path, depth + 1, found);
        } else if !kind.is_socket() {
            found.push(path);
        }
    }
}

/// #30 item 1 and the PIDs limit: a function container gets no host
/// directory it can write to (its socket directory is the runner's once
/// the socket is there; pre-spawned processes start only then), and a
/// PIDs limit (the default, or its FunctionConfig's).
#[tokio::test]
async fn a_function_writes_nothing_on_the_host_and_has_a_pids_limit() {
    let Some(setup) = Setup::new() else { return };
    let image = setup.image(Kind::Hostile);
    // Pre-spawned: the function's processes start before any call, as
    // early as the wrapper lets them.
    let functions = function_config(&image, "    prespawn: 2\n    pidsLimit: 128\n");
    let runner = setup.runner(&["--functions", functions.path().to_str().unwrap()]);
    let mut client = runner.client().await.unwrap();
    for _ in 0..3 {
        let resp = client
            .evaluate_function(request(&image))
            .await
            .unwrap()
            .into_inner();
        let log = String::from_utf8_lossy(&resp.log);
        assert!(
            !log.contains("wrote: file") && !log.contains(" dir"),
            "{log}"
        );
    }
    // The function without a FunctionConfig: the default limit.
    client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap();
    let mut found = Vec::new();
    left_on_host(setup.sockets.path(), 0, &mut found);
    assert!(
        found.is_empty(),
        "the functions left on the host: {found:?}"
    );
    let mut limits: Vec<String> = setup
        .containers()
        .iter()
        .map(|c| inspect(c, "{{.HostConfig.PidsLimit}}"))
        .collect();
    limits.sort();
    assert_eq!(limits, ["1024", "128"]);
    stop(runner).await;
    setup.assert_clean();
    assert_eq!(std::fs::read_dir(setup.sockets.path()).unwrap().count(), 0);
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
    run_ours(setup, "eval", args)
}

/// `function-runner eval|render` on this test's wrapper image and socket
/// directory (`KRM_E2E_HOST` set in its environment, for `-e`).
fn run_ours(setup: &Setup, command: &str, args: &[&str]) -> std::process::Output {
    let wrapper = setup.image(Kind::Wrapper);
    run_ours_with(
        setup,
        command,
        &[&["--wrapper-server-image", &wrapper], args].concat(),
    )
}

/// [`run_ours`] with no wrapper image but what `args` name (none from the
/// environment either).
fn run_ours_with(setup: &Setup, command: &str, args: &[&str]) -> std::process::Output {
    let dir = setup.socket_dir();
    output_within(
        Command::new(bin("function-runner"))
            .arg(command)
            .env("KRM_E2E_HOST", "from-host")
            .env_remove("WRAPPER_SERVER_IMAGE")
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

/// kpt's lines without what differs by nature: our `[USING]` line and the
/// durations.
fn comparable(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.starts_with("[USING] "))
        .map(|l| match l.rfind(" in ") {
            Some(i) if l.starts_with("[PASS] ") || l.starts_with("[FAIL] ") => {
                format!("{} in <t>", &l[..i])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `kpt fn eval|render DIR ARGS` on the local images, with
/// `KRM_E2E_HOST` as ours has it.
/// Its stderr is given as kpt v1.0.0-beta.67 prints it (ours follows
/// beta.67; [`e2e_tests::beta67`]), kpt run untruncated for it.
fn run_kpt(kpt: &Path, command: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    let mut out = output_within(
        Command::new(kpt)
            .args(["fn", command, dir.to_str().unwrap()])
            .env("KRM_E2E_HOST", "from-host")
            .args(["--image-pull-policy", "never", "--truncate-output=false"])
            .args(args.iter().filter(|a| !a.starts_with("--truncate-output"))),
        None,
        Duration::from_secs(120),
    )
    .unwrap();
    let as_67 = match command {
        "render" => beta67::Command::Render,
        _ => beta67::Command::Eval,
    };
    out.stderr =
        beta67::stderr_as_beta67(&String::from_utf8_lossy(&out.stderr), as_67).into_bytes();
    out
}

/// The two packages hold the same files, as beta.67 would have written
/// kpt's ([`beta67::same_file`]: our render's status in the Kptfile aside).
fn assert_same_package(theirs: &Path, ours: &Path, what: &str) {
    let (k, o) = (read_tree(theirs), read_tree(ours));
    assert_eq!(
        k.iter().map(|f| &f.0).collect::<Vec<_>>(),
        o.iter().map(|f| &f.0).collect::<Vec<_>>(),
        "{what}: files"
    );
    for ((path, kt), (_, ot)) in k.iter().zip(&o) {
        assert!(
            beta67::same_file(&path.to_string_lossy(), kt.as_bytes(), ot.as_bytes()),
            "{what}: {} (left kpt, right ours)\n{kt}\n{ot}",
            path.display()
        );
    }
}

/// #28: kpt's `-e`, `--mount`, `--network` and `--as-current-user` on one
/// image, run by kpt's `docker run` and by the docker backend: the
/// function sees the same environment (pairs, the last value winning; bare
/// keys from the caller's environment, winning over pairs and unsetting
/// when it has none, the image's own value too), user, network and mounts,
/// and the runs print the same lines.
#[test]
fn eval_env_mounts_network_and_user_like_kpt() {
    let Some(setup) = Setup::new() else { return };
    let Some(kpt) = prerequisite(e2e_tests::require_kpt()) else {
        return;
    };
    let image = setup.image(Kind::Probe);
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("greeting"), "hello from the host\n").unwrap();
    // Writable by the function's user, for `rw=true`.
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let bind = format!("type=bind,src={},dst=/m", shared.display());
    let bind_rw = format!("{bind},rw=true");
    let me = format!("user {}:{}", nix::unistd::getuid(), nix::unistd::getgid());
    let env = [
        "-e",
        "A=1",
        "-e",
        "A=2",
        "-e",
        "KRM_E2E_GONE=x",
        "-e",
        "KRM_E2E_GONE",
        "-e",
        "EMPTY=",
        "-e",
        "KRM_E2E_HOST",
        "-e",
        "IMG",
    ];
    let cases: [(&[&str], &[&str]); 7] = [
        (
            &[],
            &[
                "user 65534:65534",
                "A=<unset> GONE=<unset> EMPTY=<unset> HOST=<unset> IMG=from-image",
                "network: no",
            ],
        ),
        (
            &env,
            &["A=2 GONE=<unset> EMPTY= HOST=from-host IMG=<unset>"],
        ),
        (&["--as-current-user"], &[&me, "network: no"]),
        (&["--network"], &["user 65534:65534", "network: yes"]),
        (
            &["--mount", &bind],
            &["hello from the host", "Read-only file system"],
        ),
        (&["--mount", &bind_rw], &["hello from the host"]),
        (&["--mount", "type=tmpfs,dst=/m,rw=true"], &["No such file"]),
    ];
    for (flags, seen) in cases {
        let (theirs, ours) = (work.path().join("kpt"), work.path().join("ours"));
        let _ = std::fs::remove_dir_all(&theirs);
        let _ = std::fs::remove_dir_all(&ours);
        package(&theirs);
        package(&ours);
        let args = [&["--image", &image, "--truncate-output=false"][..], flags].concat();
        let k = run_kpt(&kpt, "eval", &theirs, &args);
        let o = eval(&setup, &[&[ours.to_str().unwrap()][..], &args].concat());
        assert!(
            k.status.success(),
            "kpt {flags:?}: {}",
            String::from_utf8_lossy(&k.stderr)
        );
        assert_eq!(
            comparable(&k.stderr),
            comparable(&o.stderr),
            "{flags:?} (left kpt, right ours)"
        );
        assert_eq!(o.status.code(), Some(0), "{flags:?}");
        let stderr = comparable(&o.stderr);
        for line in seen {
            assert!(stderr.contains(line), "{flags:?}: {line:?} in {stderr}");
        }
        assert_eq!(read_tree(&theirs), read_tree(&ours), "{flags:?}");
    }
    setup.assert_clean();
}

/// #28: bad `-e` and `--mount` values fail as with kpt (exit 1, nothing
/// written) and in docker's words: its CLI's are ours before anything
/// runs; its engine's come from the engine as the container is made.
#[test]
fn eval_bad_env_and_mount_values_fail_like_kpt() {
    let Some(setup) = Setup::new() else { return };
    let Some(kpt) = prerequisite(e2e_tests::require_kpt()) else {
        return;
    };
    let image = setup.image(Kind::Probe);
    let work = tempfile::tempdir().unwrap();
    let cases: [(&[&str], Option<&str>); 6] = [
        (
            &["-e", "=x"],
            Some(r#"invalid argument "=x" for "-e, --env" flag: invalid environment variable: =x"#),
        ),
        (
            &["--mount", "src=/tmp,dst=/m"],
            Some(
                r#"invalid argument "type=,source=/tmp,target=/m,readonly" for "--mount" flag: type is required"#,
            ),
        ),
        (
            &["--mount", "type=bind,src=/tmp,rw=true"],
            Some(
                r#"invalid argument "type=bind,source=/tmp,target=" for "--mount" flag: target is required"#,
            ),
        ),
        (
            &["--mount", "type=foo,src=/tmp,dst=/m"],
            Some(r#"invalid mount config for type "foo": mount type unknown"#),
        ),
        // The engine's words, as kpt shows them.
        (
            &["--mount", "type=bind,src=/krm-e2e-not-there,dst=/m"],
            None,
        ),
        (&["--mount", "type=volume,dst=/m"], None),
    ];
    for (flags, says) in cases {
        let (theirs, ours) = (work.path().join("kpt"), work.path().join("ours"));
        let _ = std::fs::remove_dir_all(&theirs);
        let _ = std::fs::remove_dir_all(&ours);
        package(&theirs);
        package(&ours);
        let before = read_tree(&ours);
        let args = [&["--image", &image][..], flags].concat();
        let k = run_kpt(&kpt, "eval", &theirs, &args);
        let o = eval(&setup, &[&[ours.to_str().unwrap()][..], &args].concat());
        let k_err = String::from_utf8_lossy(&k.stderr).replace("\\\"", "\"");
        let o_err = String::from_utf8_lossy(&o.stderr);
        let says = match says {
            Some(says) => says.to_string(),
            None => {
                let from = "Error response from daemon: ";
                let line = k_err
                    .lines()
                    .find_map(|l| Some(l[l.find(from)? + from.len()..].to_string()))
                    .unwrap_or_else(|| panic!("{flags:?}: no engine error from kpt: {k_err}"));
                // beta.67 prints the container's stderr on one line, its
                // lines joined with `, `.
                let line = line.split(", ").next().unwrap_or_default();
                line.trim_end_matches('"').to_string()
            }
        };
        assert_eq!(
            (k.status.code(), o.status.code()),
            (Some(1), Some(1)),
            "{flags:?}: {k_err}\n{o_err}"
        );
        assert!(
            k_err.contains(&says),
            "{flags:?}: {says:?} in kpt's {k_err}"
        );
        assert!(o_err.contains(&says), "{flags:?}: {says:?} in ours {o_err}");
        assert_eq!(read_tree(&ours), before, "{flags:?}: nothing written");
    }
    setup.assert_clean();
}

/// #28: a kept-warm container serves only a later run that asks the same
/// environment, mounts, network and user (they are in its fingerprint):
/// a run asking other ones gets a container of its own.
#[test]
fn eval_keep_warm_reuses_only_a_container_of_the_same_options() {
    let Some(setup) = Setup::new() else { return };
    let work = tempfile::tempdir().unwrap();
    package(work.path());
    let pkg = work.path().to_str().unwrap();
    let image = setup.image(Kind::Probe);
    let run = |flags: &[&str]| {
        let base = [
            pkg,
            "--image",
            &image,
            "--keep-warm",
            "15s",
            "--truncate-output=false",
        ];
        let out = eval(&setup, &[&base[..], flags].concat());
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{flags:?}: {stderr}");
        stderr
    };
    assert!(run(&["-e", "A=1"]).contains("A=1 "));
    assert_eq!(setup.containers().len(), 1);
    assert!(
        run(&["-e", "A=2"]).contains("A=2 "),
        "not the A=1 container"
    );
    assert_eq!(setup.containers().len(), 2);
    assert!(run(&["-e", "A=2"]).contains("A=2 "));
    assert_eq!(setup.containers().len(), 2, "the same options: reused");
    assert!(run(&["-e", "A=2", "--network"]).contains("network: yes"));
    assert_eq!(setup.containers().len(), 3);
    let me = format!("user {}:{}", nix::unistd::getuid(), nix::unistd::getgid());
    if me != "user 65534:65534" {
        assert!(run(&["-e", "A=2", "--as-current-user"]).contains(&me));
        assert_eq!(setup.containers().len(), 4);
    }
    let tmpfs = run(&["-e", "A=2", "--mount", "type=tmpfs,dst=/m,rw=true"]);
    assert!(tmpfs.contains("/m/greeting"), "{tmpfs}");
    let kept = setup.containers().len();
    assert!(kept >= 4, "{kept}");
    // Unused, they go by themselves; a later run sweeps their volumes.
    let gone = eventually_blocking(Duration::from_secs(60), || setup.containers().is_empty());
    assert!(gone, "{:?}", setup.containers());
    let out = eval(&setup, &[pkg, "--image", &image]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    setup.assert_clean();
}

/// #28: `render --allow-network` gives the pipeline's image functions the
/// host's network, as kpt's does; without it they have none.
#[test]
fn render_allow_network_like_kpt() {
    let Some(setup) = Setup::new() else { return };
    let Some(kpt) = prerequisite(e2e_tests::require_kpt()) else {
        return;
    };
    let image = setup.image(Kind::Probe);
    let work = tempfile::tempdir().unwrap();
    for (flags, network) in [(&[][..], "no"), (&["--allow-network"][..], "yes")] {
        let (theirs, ours) = (work.path().join("kpt"), work.path().join("ours"));
        for dir in [&theirs, &ours] {
            let _ = std::fs::remove_dir_all(dir);
            package(dir);
            std::fs::write(
                dir.join("Kptfile"),
                format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - image: {image}\n"),
            )
            .unwrap();
        }
        let args = [&["--truncate-output=false"][..], flags].concat();
        let k = run_kpt(&kpt, "render", &theirs, &args);
        let o = run_ours(
            &setup,
            "render",
            &[&[ours.to_str().unwrap()][..], &args].concat(),
        );
        assert!(
            k.status.success(),
            "kpt {flags:?}: {}",
            String::from_utf8_lossy(&k.stderr)
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (k_err, o_err) = (comparable(&k.stderr), comparable(&o.stderr));
        // The package's name is its directory's.
        assert_eq!(
            k_err.replace("\"kpt\"", "\"pkg\""),
            o_err.replace("\"ours\"", "\"pkg\""),
            "{flags:?} (left kpt, right ours)"
        );
        assert!(o_err.contains(&format!("network: {network}")), "{o_err}");
        assert_same_package(&theirs, &ours, &format!("{flags:?}"));
    }
    setup.assert_clean();
}

/// A `--functions` directory with one FunctionConfig for `image` whose
/// podExecutor has `executor` (YAML lines, indented by four) besides tags.
fn function_config(image: &str, executor: &str) -> tempfile::TempDir {
    let functions = tempfile::tempdir().unwrap();
    let (name, tag) = image.rsplit_once(':').unwrap();
    std::fs::write(
        functions.path().join("fn.yaml"),
        format!(
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: fn\nspec:\n  image: {name}\n  podExecutor:\n    tags: [\"{tag}\"]\n{executor}"
        ),
    )
    .unwrap();
    functions
}

/// #25: a single-use function with an idle pool of one container: it waits
/// before any call; each call gets a fresh container (seen from inside:
/// nothing an earlier call left in `/tmp`), removed after its call, and the
/// pool is refilled.
#[tokio::test]
async fn single_use_calls_get_fresh_containers_from_an_idle_pool() {
    let Some(setup) = Setup::new() else { return };
    let image = setup.image(Kind::Stateful);
    let functions = function_config(&image, "    idlePods: 1\n    singleUse: true\n");
    let runner = setup.runner(&["--functions", functions.path().to_str().unwrap()]);
    let filled = eventually_blocking(Duration::from_secs(60), || setup.containers().len() == 1);
    assert!(filled, "{:?}\n{}", setup.containers(), runner.logs());
    let mut client = runner.client().await.unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        let resp = client
            .evaluate_function(request(&image))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.resource_list, example_rl().as_bytes());
        let log = String::from_utf8_lossy(&resp.log).trim().to_string();
        assert!(log.ends_with(" fresh"), "a used container served: {log}");
        assert!(seen.insert(log.clone()), "one container, two calls: {log}");
    }
    let refilled = eventually_blocking(Duration::from_secs(60), || setup.containers().len() == 1);
    assert!(refilled, "{:?}", setup.containers());
    stop(runner).await;
    setup.assert_clean();
}

/// #25: `eval --keep-warm` of a single-use function: the used container is
/// removed, never kept for the next run, which gets a fresh one.
#[test]
fn eval_keep_warm_never_keeps_a_used_single_use_container() {
    let Some(setup) = Setup::new() else { return };
    let image = setup.image(Kind::Stateful);
    let functions = function_config(&image, "    singleUse: true\n");
    let work = tempfile::tempdir().unwrap();
    package(work.path());
    let pkg = work.path().to_str().unwrap();
    let fns = functions.path().to_str().unwrap();
    for _ in 0..2 {
        let out = eval(
            &setup,
            &[
                pkg,
                "--image",
                &image,
                "--functions",
                fns,
                "--keep-warm",
                "120s",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains(" fresh"), "{stderr}");
        assert!(!stderr.contains(" used"), "{stderr}");
        let gone = eventually_blocking(Duration::from_secs(30), || setup.containers().is_empty());
        assert!(gone, "a used container was kept: {:?}", setup.containers());
    }
    // Kept-warm runs leave their tools volume; a run without sweeps them.
    let out = eval(&setup, &[pkg, "--image", &image, "--functions", fns]);
    assert!(out.status.success());
    setup.assert_clean();
}

/// #27 item 1: with no wrapper image named and none in the engine, `eval
/// --image` and `serve --backend docker` mount the static wrapper-server
/// and health-probe beside `function-runner` read-only into the function
/// container, and say so; a named image that is missing still fails,
/// naming it.
#[tokio::test]
async fn with_no_wrapper_image_the_binaries_beside_the_runner_are_mounted() {
    let Some(setup) = Setup::new() else { return };
    // A machine with the default init image takes it instead (the way for a
    // runner in a container): what is said names that.
    let default_present =
        docker(&["image", "inspect", "wrapper-server:dev"]).is_ok_and(|out| out.status.success());
    let beside = bin("function-runner").parent().unwrap().to_path_buf();
    let work = tempfile::tempdir().unwrap();
    package(work.path());
    let before = read_tree(work.path());
    let dir = setup.socket_dir();
    let cat = setup.image(Kind::Cat);
    let eval_without_image = |extra: &[&str]| {
        let pkg = work.path().to_str().unwrap();
        run_ours_with(&setup, "eval", &[&[pkg, "--image", &cat], extra].concat())
    };
    let out = eval_without_image(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let using = stderr
        .lines()
        .find(|l| l.starts_with("[USING] docker"))
        .unwrap_or_else(|| panic!("no [USING] docker line: {stderr}"));
    if default_present {
        assert!(
            using.contains("from the image wrapper-server:dev"),
            "{using}"
        );
    } else {
        assert!(
            using.contains(&format!(
                "wrapper-server and health-probe from {} (mounted read-only",
                beside.display()
            )),
            "{using}"
        );
    }
    // `cat` gives the package back as it was.
    assert_eq!(read_tree(work.path()), before);

    // serve: the same choice, and its containers run the mounted binary.
    let mut runner = {
        let mut cmd = Command::new(bin("function-runner"));
        cmd.env_remove("WRAPPER_SERVER_IMAGE")
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(["--backend", "docker", "--docker-socket-dir", &dir])
            .args(["--metrics-port", "0"]);
        Wrapper::spawn(cmd, "function-runner serving").unwrap()
    };
    let mut client = runner.client().await.unwrap();
    let resp = client
        .evaluate_function(request(&setup.image(Kind::Cat)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.resource_list, example_rl().as_bytes());
    if !default_present {
        let containers = setup.containers();
        assert_eq!(containers.len(), 1, "{containers:?}");
        let mounts = inspect(
            &containers[0],
            "{{range .Mounts}}{{.Source}}>{{.Destination}}:{{.RW}} {{end}}",
        );
        for (name, target) in [
            ("wrapper-server", "wrapper-server"),
            ("health-probe", "health-probe"),
            ("health-probe", "grpc-health-probe"),
        ] {
            let want = format!(
                "{}>/wrapper-server-tools/{target}:false",
                beside.join(name).display()
            );
            assert!(mounts.contains(&want), "{want} in {mounts}");
        }
        // No tools volume is made for them.
        assert_eq!(setup.volumes(), Vec::<String>::new());
    }
    runner.signal(Signal::SIGTERM);
    assert!(runner
        .wait_exit(Duration::from_secs(60))
        .await
        .unwrap()
        .success());

    // A named image wins, present or not: a missing one is an error naming it.
    let missing = format!("krm-e2e/no-such-wrapper:{}", std::process::id());
    let out = eval_without_image(&["--wrapper-server-image", &missing]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the wrapper image {missing:?} is not in the Docker engine"
        )),
        "{stderr}"
    );
    assert_eq!(read_tree(work.path()), before);
    setup.assert_clean();
}
