//! Helpers shared by the end-to-end tests in `tests/tests/` (and the test
//! suites of `function-runner` and `wrapper-server`) and the demo: locating
//! the built binaries, starting `wrapper-server` on a free loopback port, gRPC
//! clients for it, bounded waits on processes, one polling helper, and the
//! prerequisite checks of tests that need root, Docker or kpt.

pub mod beta67;
pub mod deploy_pkg;
pub mod otlp;
pub mod yamldiff;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use tonic::transport::Channel;

/// The directory holding the workspace's binaries for this build profile
/// (`target/<triple>/debug`), found from the running executable, which is
/// either there or in its `deps/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Path of a workspace binary (`wrapper-server`, `health-probe`, `example-fn`).
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built; `cargo test --workspace` builds it (or run `cargo build --workspace --bins`)",
        path.display()
    );
    path
}

/// How long a server may take to log that it serves.
const SERVE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Wrapper`]'s drop waits for the killed server to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server child process (`wrapper-server` or `function-runner
/// serve`), killed on drop.
pub struct Wrapper {
    pub child: Child,
    pub addr: SocketAddr,
    /// Everything the wrapper wrote on stderr so far (its logs).
    pub logs: Arc<Mutex<String>>,
}

impl Wrapper {
    /// Starts `wrapper-server --host 127.0.0.1 --port 0 EXTRA... -- ENTRYPOINT...`
    /// and returns once it listens.
    pub fn start(extra: &[&str], entrypoint: &[&str]) -> anyhow::Result<Wrapper> {
        let mut cmd = Command::new(bin("wrapper-server"));
        cmd.args(["--host", "127.0.0.1", "--port", "0"]);
        Self::start_command(cmd, extra, entrypoint)
    }

    /// Like [`Wrapper::start`], with `prefix` run first (e.g. `unshare ...`)
    /// and the wrapper's path as its last argument.
    pub fn start_command(
        mut cmd: Command,
        extra: &[&str],
        entrypoint: &[&str],
    ) -> anyhow::Result<Wrapper> {
        cmd.args(extra).arg("--").args(entrypoint);
        Self::spawn(cmd, "wrapper-server serving")
    }

    /// Starts `function-runner serve --host 127.0.0.1 --port 0 ARGS...` and
    /// returns once it listens.
    pub fn start_runner(args: &[&str]) -> anyhow::Result<Wrapper> {
        let mut cmd = Command::new(bin("function-runner"));
        cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(args);
        Self::spawn(cmd, "function-runner serving")
    }

    /// Spawns `cmd` and waits for the log line containing `marker`, which
    /// names the address it listens on.
    pub fn spawn(mut cmd: Command, marker: &'static str) -> anyhow::Result<Wrapper> {
        cmd.env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?;
        let stderr = child.stderr.take().context("no stderr")?;
        let logs = Arc::new(Mutex::new(String::new()));
        let addr = match read_listen_addr(stderr, logs.clone(), marker) {
            Ok(addr) => addr,
            Err(err) => {
                kill_and_reap(&mut child);
                return Err(err);
            }
        };
        Ok(Wrapper { child, addr, logs })
    }

    /// Waits until the server exits by itself; an error (and the server is
    /// killed on drop) if it still runs after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.child;
        let mut status = None;
        eventually(timeout, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        })
        .await;
        status.ok_or_else(|| anyhow!("still running after {timeout:?}; logs:\n{}", self.logs()))
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn client(&self) -> anyhow::Result<FunctionEvaluatorClient<Channel>> {
        evaluator_client(&self.endpoint(), 64 << 20).await
    }

    pub fn logs(&self) -> String {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Sends a signal to the wrapper process.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, sig);
    }
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// SIGKILLs `child` and reaps it, waiting [`REAP_TIMEOUT`] at most.
fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    eventually_blocking(REAP_TIMEOUT, || !matches!(child.try_wait(), Ok(None)));
}

/// Reads the wrapper's log lines until the "serving" line names its address;
/// keeps collecting the rest in the background.
fn read_listen_addr(
    stderr: ChildStderr,
    logs: Arc<Mutex<String>>,
    marker: &'static str,
) -> anyhow::Result<SocketAddr> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut l) = logs.lock() {
                l.push_str(&line);
                l.push('\n');
            }
            if line.contains(marker) {
                let addr = field(&line, "addr=").or_else(|| json_field(&line, "\"addr\":\""));
                if let (Some(tx), Some(addr)) = (tx.take(), addr) {
                    let _ = tx.send(addr);
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(SERVE_TIMEOUT)
        .map_err(|_| anyhow!("no {marker:?} log line with the address within {SERVE_TIMEOUT:?}"))?;
    addr.parse()
        .with_context(|| format!("bad address {addr:?}"))
}

fn json_field(line: &str, key: &str) -> Option<String> {
    let start = line.find(key)? + key.len();
    let rest = &line[start..];
    Some(rest[..rest.find('"')?].to_string())
}

fn field(line: &str, key: &str) -> Option<String> {
    let start = line.find(key)? + key.len();
    let rest = &line[start..];
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// An evaluator client with generous message limits and big HTTP/2 windows.
pub async fn evaluator_client(
    endpoint: &str,
    max_message: usize,
) -> anyhow::Result<FunctionEvaluatorClient<Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())?
        .tcp_nodelay(true)
        .initial_connection_window_size(16 << 20)
        .initial_stream_window_size(16 << 20)
        .max_frame_size(1 << 20)
        .connect()
        .await
        .with_context(|| format!("connecting to {endpoint}"))?;
    Ok(FunctionEvaluatorClient::new(channel)
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message))
}

/// `GET path` over HTTP/1.1 from `addr` (host:port), the whole answer
/// (status line, headers, body), within 30 s.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let get = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        conn.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut text = String::new();
        conn.read_to_string(&mut text).await?;
        Ok(text)
    };
    tokio::time::timeout(Duration::from_secs(30), get)
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::other(format!(
                "GET {addr}{path}: no answer in 30 s"
            )))
        })
}

/// The health status the server reports for `service`.
pub async fn health_status(endpoint: &str, service: &str) -> anyhow::Result<i32> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())?
        .connect()
        .await?;
    let mut client = proto::health::HealthClient::new(channel);
    let resp = client
        .check(proto::health::HealthCheckRequest {
            service: service.to_string(),
        })
        .await?;
    Ok(resp.into_inner().status)
}

/// Alive and not a zombie (reads /proc).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Children of `pid` as `(pid, state)` pairs, read from /proc.
pub fn children_of(pid: u32) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push((child, state));
        }
    }
    out
}

/// How often the `eventually` helpers check.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Polls `check` every 10 ms until it holds or `timeout` passes. For waiting
/// on other processes (which `tokio::time::pause` cannot speed up).
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    eventually_async(timeout, async || check()).await
}

/// [`eventually`] for a check that is itself async (a gRPC call, say): each
/// check runs to its end before the next one starts.
pub async fn eventually_async(timeout: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// [`eventually`] for code outside an async runtime (it blocks the thread).
pub fn eventually_blocking(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// [`Command::output`] with a bound: runs `cmd` in its own process group with
/// `stdin` (or nothing) as its input, collects stdout and stderr, and fails
/// once `timeout` passes, killing the whole group. Also fails, rather than
/// hanging, when the program exited but something it started still holds its
/// stdout or stderr open after the timeout.
pub fn output_within(
    cmd: &mut Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> anyhow::Result<Output> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A thread of its own: a program that does not read its input must
        // not block us on a full pipe.
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.with_context(|| format!("waiting for {cmd:?}")),
        Err(_) => {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            // Reaped by the thread, now that the group is dead.
            let _ = rx.recv_timeout(REAP_TIMEOUT);
            bail!("{cmd:?} did not finish within {timeout:?}: killed")
        }
    }
}

/// `examples/resourcelist.yaml`, the ResourceList the demo sends.
pub fn example_rl() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/resourcelist.yaml"
    ))
    .expect("examples/resourcelist.yaml is in the repository")
}

/// An EvaluateFunction request of [`example_rl`] for `image`.
pub fn example_request(image: &str) -> proto::pb::EvaluateFunctionRequest {
    proto::pb::EvaluateFunctionRequest {
        resource_list: example_rl().into(),
        image: image.into(),
        tag: String::new(),
    }
}

/// A ResourceList of `n` ConfigMaps, about `n * 150` bytes.
pub fn resource_list(n: usize) -> String {
    let mut s = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i}\n    namespace: default\n  data:\n    key: value-{i}\n"
        ));
    }
    s
}

/// Whether this run is CI's (the `CI` environment variable is set and not
/// empty), where every test must run: a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Gate for a test that needs something this machine may lack (root,
/// util-linux `unshare`, `chroot`, a Docker engine, kpt): `Some` when the
/// check passed; otherwise, locally, prints `SKIPPED: why` and returns `None`
/// (the test returns and passes), and in CI ([`in_ci`]) panics with the same
/// reason. Use as `let Some(x) = prerequisite(require_kpt()) else { return };`.
#[track_caller]
pub fn prerequisite<T>(check: anyhow::Result<T>) -> Option<T> {
    match check {
        Ok(found) => Some(found),
        Err(why) if in_ci() => {
            panic!("{why:#} (CI is set: CI must provide what this test needs, see .ci/run)")
        }
        Err(why) => {
            eprintln!("SKIPPED: {why:#}");
            None
        }
    }
}

/// Fails unless running as root (for `unshare` and `chroot` tests).
pub fn require_root() -> anyhow::Result<()> {
    if !nix::unistd::Uid::effective().is_root() {
        bail!("needs root");
    }
    Ok(())
}

/// Fails unless `program ARGS` runs and exits 0 (e.g. `unshare --version`).
pub fn require_command(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = output_within(
        Command::new(program).args(args),
        None,
        Duration::from_secs(30),
    )
    .with_context(|| format!("needs {program}"))?;
    if !out.status.success() {
        bail!(
            "needs {program}: `{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Fails unless a Docker engine answers the `docker` command.
pub fn require_docker() -> anyhow::Result<()> {
    require_command("docker", &["version", "--format", "{{.Server.Version}}"])
        .context("no Docker engine answers")
}

/// One `docker` command, bounded (a build on a busy machine takes a while,
/// but a hung engine fails the test instead of hanging it); an error says
/// what docker said.
pub fn docker(args: &[&str]) -> anyhow::Result<Output> {
    let out = output_within(
        Command::new("docker").args(args),
        None,
        Duration::from_secs(300),
    )?;
    if !out.status.success() {
        bail!(
            "docker {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Builds `tag` from a Dockerfile given as text, with the named workspace
/// binaries as its context; debug information is stripped where `strip` is
/// there (debug builds run to ~100 MB, which makes builds slow).
pub fn build_image(tag: &str, dockerfile: &str, binaries: &[&str]) -> anyhow::Result<()> {
    build_image_with_files(tag, dockerfile, binaries, &[])
}

/// The runner image from the repository's `Dockerfile.runner`, as
/// `build-images.sh` builds it: `function-runner`, `health-probe`, the CA
/// bundle at `ca_bundle`, and Porch's layout (`home/nonroot/` links).
pub fn build_runner_image(tag: &str, ca_bundle: &std::path::Path) -> anyhow::Result<()> {
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile.runner"))?;
    let links = tempfile::tempdir()?;
    let home = links.path().join("home/nonroot");
    std::fs::create_dir_all(&home)?;
    std::os::unix::fs::symlink("/function-runner", home.join("server"))?;
    std::os::unix::fs::symlink("/health-probe", home.join("grpc-health-probe"))?;
    build_image_with_files(
        tag,
        &dockerfile,
        &["function-runner", "health-probe"],
        &[
            ("ca-certificates.crt", ca_bundle),
            ("home", &links.path().join("home")),
        ],
    )
}

/// [`build_image`] with more files in the context: `(name in the context,
/// file or directory to copy)` pairs (e.g. the CA bundle of
/// `Dockerfile.runner`); a directory is copied with `cp -a` (its symbolic
/// links stay links).
pub fn build_image_with_files(
    tag: &str,
    dockerfile: &str,
    binaries: &[&str],
    files: &[(&str, &std::path::Path)],
) -> anyhow::Result<()> {
    let ctx = tempfile::tempdir()?;
    for (name, from) in files {
        if from.is_dir() {
            let out = output_within(
                Command::new("cp")
                    .arg("-a")
                    .arg(from)
                    .arg(ctx.path().join(name)),
                None,
                Duration::from_secs(60),
            )?;
            anyhow::ensure!(
                out.status.success(),
                "copying {} into the image context",
                from.display()
            );
            continue;
        }
        std::fs::copy(from, ctx.path().join(name))
            .with_context(|| format!("copying {} into the image context", from.display()))?;
    }
    for name in binaries {
        let to = ctx.path().join(name);
        let stripped = output_within(
            Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(&to)
                .arg(bin(name)),
            None,
            Duration::from_secs(60),
        )
        .is_ok_and(|out| out.status.success());
        if !stripped {
            std::fs::copy(bin(name), &to)?;
        }
    }
    let file = ctx.path().join("Dockerfile.test");
    // Nothing shared between two tests' builds: with the build cache, two
    // builds of like Dockerfiles share intermediate images (and identical
    // ones the final image), and one test's `docker rmi` (which prunes a
    // removed image's untagged parents) deleted them under another test's
    // build ("failed to get digest ... no such file or directory"). Hence
    // `--no-cache`, and a label unique to the tag for a final image id of
    // its own.
    let dockerfile = format!(
        "{}\nLABEL org.krm-tests.tag=\"{tag}\"\n",
        dockerfile.trim_end()
    );
    std::fs::write(&file, dockerfile)?;
    let context = ctx.path().to_string_lossy();
    docker(&[
        "build",
        "--no-cache",
        "-q",
        "-t",
        tag,
        "-f",
        &file.to_string_lossy(),
        &context,
    ])?;
    Ok(())
}

/// Fails unless a Docker engine answers and Debian's `docker-registry` is
/// installed (see [`start_registry`]).
pub fn require_registry() -> anyhow::Result<()> {
    require_docker()?;
    require_command("docker-registry", &["--version"])
}

/// Removes images from the engine, ignoring the ones already gone.
///
/// An image that a running container uses (a pod the kubelet is still
/// stopping) only loses its tag to `rmi -f`, and would stay behind
/// untagged: its id is removed again until it is gone (bounded).
pub fn remove_images(images: &[String]) {
    if images.is_empty() {
        return;
    }
    let ids: Vec<String> = output_within(
        Command::new("docker")
            .args(["image", "inspect", "--format", "{{.Id}}"])
            .args(images),
        None,
        Duration::from_secs(60),
    )
    .map(|out| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default();
    let _ = output_within(
        Command::new("docker").arg("rmi").arg("-f").args(images),
        None,
        Duration::from_secs(60),
    );
    let present = |id: &String| {
        output_within(
            Command::new("docker").args(["image", "inspect", id]),
            None,
            Duration::from_secs(30),
        )
        .is_ok_and(|out| out.status.success())
    };
    let _ = eventually_blocking(Duration::from_secs(60), || {
        let left: Vec<&String> = ids.iter().filter(|id| present(id)).collect();
        if left.is_empty() {
            return true;
        }
        let _ = output_within(
            Command::new("docker").arg("rmi").arg("-f").args(left),
            None,
            Duration::from_secs(60),
        );
        false
    });
}

/// The cluster of `KUBECONFIG` (`.ci/run` starts one with
/// `../shared/tools/kube-cluster start DIR`); whether it answers is the
/// test's to find out, as a failure.
pub fn require_kubeconfig() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("KUBECONFIG")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .context("no Kubernetes cluster: set KUBECONFIG (../shared/tools/kube-cluster start DIR prints one)")?;
    if !path.is_file() {
        bail!("KUBECONFIG names {}, which is not a file", path.display());
    }
    Ok(path)
}

/// The kpt binary: `/usr/bin/kpt`, else the first `kpt` on `PATH`.
pub fn require_kpt() -> anyhow::Result<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/kpt");
    if fixed.is_file() {
        return Ok(fixed);
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kpt"))
                .find(|k| k.is_file())
        })
        .context("kpt not found")
}

/// A gate for a test function: the function's script marks that it started,
/// then waits until the test opens the gate, then runs the rest.
pub struct Gate {
    dir: tempfile::TempDir,
}

impl Gate {
    pub fn new() -> anyhow::Result<Gate> {
        Ok(Gate {
            dir: tempfile::tempdir()?,
        })
    }

    fn started_path(&self) -> PathBuf {
        self.dir.path().join("started")
    }

    fn gate_path(&self) -> PathBuf {
        self.dir.path().join("gate")
    }

    /// A shell script that signals its start, waits for the gate, then runs
    /// `then`. Dropping the gate (its directory goes) also ends the wait, so a
    /// test that fails before opening it leaves no script polling forever.
    pub fn script(&self, then: &str) -> String {
        format!(
            "touch {s}; while [ -d {d} ] && [ ! -e {g} ]; do sleep 0.01; done; {then}",
            s = self.started_path().display(),
            d = self.dir.path().display(),
            g = self.gate_path().display()
        )
    }

    /// Waits until the function started (false after 20 s).
    pub async fn wait_started(&self) -> bool {
        let started = self.started_path();
        eventually(Duration::from_secs(20), || started.exists()).await
    }

    /// Lets the function go on.
    pub fn open(&self) -> anyhow::Result<()> {
        std::fs::write(self.gate_path(), b"")?;
        Ok(())
    }
}

/// The registry process and the images pushed to it, removed however the
/// test ends.
pub struct Registry {
    pub child: Child,
    /// Pushed images, removed from the engine on drop.
    pub images: Vec<String>,
    _storage: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_images(&self.images);
    }
}

/// Starts Debian's `docker-registry` on a free loopback port, storing in a
/// temporary directory; returns it and its `host:port` once it listens.
pub fn start_registry() -> anyhow::Result<(Registry, String)> {
    start_registry_with(IpAddr::from([127, 0, 0, 1]), "")
}

/// The user and password that [`start_private_registry`] accepts.
pub const REGISTRY_USER: &str = "krm-test";
pub const REGISTRY_PASSWORD: &str = "krm-test-password";
/// bcrypt (cost 4: checked at every request) of [`REGISTRY_PASSWORD`], the
/// only hash docker-registry's htpasswd takes. Made once with Python's
/// `bcrypt.hashpw`: a fixed hash spares the tests a bcrypt implementation.
const REGISTRY_PASSWORD_BCRYPT: &str =
    "$2b$04$BVMqZC6DhD0uN1dXtPNpsOPhy3YlQPA6kFycvpPX5WTh0cJV2iOtq";

/// A registry that speaks TLS only, with a certificate from a CA made for
/// it, and serves only [`REGISTRY_USER`]: Porch's private registry.
pub struct PrivateRegistry {
    pub registry: Registry,
    /// `host:port`.
    pub addr: String,
    /// A directory holding the CA as `ca.crt` (a `--tls-secret-path`).
    pub tls_dir: PathBuf,
    /// A docker config JSON with the credentials for `addr` (a
    /// `--registry-auth-secret-path`), in a Docker client configuration
    /// directory as its `config.json`, for pushes.
    pub auth_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl PrivateRegistry {
    /// The CA, PEM.
    pub fn ca_pem(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.tls_dir.join("ca.crt"))?)
    }

    /// Pushes `image` (tagged `ADDR/...` in the engine) with the
    /// credentials. The engine must trust the registry's certificate: it
    /// does not check the certificates of registries on loopback (Docker
    /// treats 127.0.0.0/8 as insecure), and trusts the CA in
    /// `/etc/docker/certs.d/ADDR/ca.crt` for the others.
    pub fn push(&self, image: &str) -> anyhow::Result<()> {
        let config = self.auth_file.parent().context("no config directory")?;
        docker(&["--config", &config.to_string_lossy(), "push", "-q", image])?;
        Ok(())
    }
}

/// Starts Debian's `docker-registry` on a free port of `host`, with TLS (a
/// server certificate for `host`, `127.0.0.1` and `localhost` from a CA made
/// here) and htpasswd authentication.
pub fn start_private_registry(host: IpAddr) -> anyhow::Result<PrivateRegistry> {
    use base64::Engine as _;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    let dir = tempfile::tempdir()?;
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir(&tls_dir)?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "krm-runtime test registry CA");
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let mut names = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        host.to_string(),
    ];
    names.dedup();
    let server_key = KeyPair::generate()?;
    let server = CertificateParams::new(names)?.signed_by(&server_key, &issuer)?;
    std::fs::write(tls_dir.join("ca.crt"), ca.pem())?;
    let cert = dir.path().join("server.crt");
    let key = dir.path().join("server.key");
    std::fs::write(&cert, server.pem())?;
    std::fs::write(&key, server_key.serialize_pem())?;
    let htpasswd = dir.path().join("htpasswd");
    std::fs::write(
        &htpasswd,
        format!("{REGISTRY_USER}:{REGISTRY_PASSWORD_BCRYPT}\n"),
    )?;
    let tls_and_auth = format!(
        "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: krm-test\n    path: {}\n",
        cert.display(),
        key.display(),
        htpasswd.display()
    );
    let (registry, addr) = start_registry_with(host, &tls_and_auth)?;
    let docker_config = dir.path().join("docker");
    std::fs::create_dir(&docker_config)?;
    let auth_file = docker_config.join("config.json");
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}"));
    std::fs::write(
        &auth_file,
        format!("{{\"auths\": {{\"{addr}\": {{\"auth\": \"{auth}\"}}}}}}\n"),
    )?;
    Ok(PrivateRegistry {
        registry,
        addr,
        tls_dir,
        auth_file,
        _dir: dir,
    })
}

/// Starts `docker-registry` on a free port of `host`; `more` is what its
/// configuration has after `http: addr:` (more `http` keys, then other
/// sections).
fn start_registry_with(host: IpAddr, more: &str) -> anyhow::Result<(Registry, String)> {
    // The free port is found by binding and releasing it, so another process
    // can take it first: then the registry exits, and another port is tried.
    let mut failure = None;
    for _ in 0..3 {
        match try_start_registry(host, more) {
            Ok(started) => return Ok(started),
            Err(err) => failure = Some(err),
        }
    }
    Err(failure.unwrap_or_else(|| anyhow!("docker-registry did not start")))
}

fn try_start_registry(host: IpAddr, more: &str) -> anyhow::Result<(Registry, String)> {
    let port = std::net::TcpListener::bind((host, 0))?.local_addr()?.port();
    let addr = SocketAddr::new(host, port).to_string();
    let storage = tempfile::tempdir()?;
    let config = storage.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n{}",
            storage.path().join("data").display(),
            more
        ),
    )?;
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(storage.path().join("registry.log"))?)
        .spawn()
        .context("starting docker-registry")?;
    let mut registry = Registry {
        child,
        images: Vec::new(),
        _storage: storage,
    };
    let listening = eventually_blocking(Duration::from_secs(30), || {
        std::net::TcpStream::connect(&addr).is_ok()
            || matches!(registry.child.try_wait(), Ok(Some(_)))
    });
    if !listening || matches!(registry.child.try_wait(), Ok(Some(_))) {
        let log = std::fs::read_to_string(registry._storage.path().join("registry.log"))
            .unwrap_or_default();
        bail!("the registry did not listen on {addr}: {}", log.trim());
    }
    Ok((registry, addr))
}

/// #25: functions whose pods keep what a call left, to see from inside a
/// pod whether an earlier call used it. Each says on stderr
/// `pod=<its pod> fresh|used`, leaves its mark, then echoes its input.
pub mod stateful {
    /// A busybox function image's script: its pod is the hostname, its mark a
    /// file in the pod's emptyDir (the wrapper's tools directory).
    pub const CONTAINER_SCRIPT: &str = r#"B=/bin/busybox
M=/wrapper-server-tools/used-by-a-call
if [ -e $M ]; then S=used; else S=fresh; fi
echo > $M
echo "pod=$($B hostname) $S" >&2
exec $B cat
"#;

    /// The image of [`CONTAINER_SCRIPT`] (as `state.sh`, beside a static
    /// `busybox`), run as a non-root user.
    pub const DOCKERFILE: &str = "FROM scratch\nCOPY busybox /bin/busybox\nCOPY state.sh /state.sh\nUSER 65532:65532\nENTRYPOINT [\"/bin/busybox\", \"sh\", \"/state.sh\"]\n";

    /// A process pod's function: its pod is the wrapper (its parent), its
    /// mark a directory per wrapper under `$STATE`.
    pub const PROCESS_SCRIPT: &str = r#"d="$STATE/$PPID"
if [ -e "$d" ]; then S=used; else S=fresh; fi
mkdir -p "$d"
echo "pod=$PPID $S" >&2
exec cat"#;
}

/// The resident set of process `pid` in KiB (`VmRSS` of /proc/PID/status);
/// `None` if the process is gone.
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
