//! `bench-kube`: `function-runner serve --backend kube --kube-dial pod-ip`
//! against the cluster `KUBECONFIG` names: cold calls (a new function image
//! each: entrypoint from the registry, Pod and Service created, the wrapper
//! answering on the pod's IP) beside warm
//! calls on the same pods, and, with the API server's audit log, the API
//! requests the runner made in each phase. Printed as markdown. With
//! `--runner PATH` given more than once, those builds are measured side by
//! side in one run: their cold calls alternate, each on its own image, and
//! each round of them is followed by a plain pod, the anchor.
//!
//! ```sh
//! KAS_AUDIT_LOG=/tmp/audit.json ../shared/tools/kube-cluster start /tmp/kube
//! cargo build --release --workspace --bins
//! KUBECONFIG=/tmp/kube/kubeconfig \
//!   target/x86_64-unknown-linux-gnu/release/bench-kube --cold 5 --warm 200 --audit-log /tmp/audit.json
//! ```
//!
//! The images are built here (`FROM scratch`, as the tests do) into the
//! Docker engine the kubelet uses, and the function images pushed to a
//! `docker-registry` started on loopback. The runner and the wrapper are the
//! binaries next to this one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use clap::Parser;
use e2e_tests::{build_image, docker, remove_images, resource_list, start_registry, Wrapper};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use proto::pb::EvaluateFunctionRequest;

#[derive(Debug, Parser)]
#[command(name = "bench-kube", about = "Benchmarks: serve --backend kube")]
struct Cli {
    /// Cold calls, each to a function image not called before.
    #[arg(long, default_value_t = 5)]
    cold: usize,
    /// Warm calls after each cold one, one at a time.
    #[arg(long, default_value_t = 200)]
    warm: usize,
    /// The API server's audit log (`KAS_AUDIT_LOG`): count the runner's
    /// requests per phase.
    #[arg(long)]
    audit_log: Option<std::path::PathBuf>,
    /// A `function-runner` to measure (repeatable: builds side by side in
    /// one run, their cold calls alternating); default: the one next to
    /// this binary.
    #[arg(long = "runner")]
    runners: Vec<std::path::PathBuf>,
}

const FN_DOCKERFILE: &str =
    "FROM scratch\nCOPY example-fn /example-fn\nUSER 65532:65532\nENTRYPOINT [\"/example-fn\"]\n";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let client = Client::try_default().await.context("KUBECONFIG")?;
    let id = std::process::id();
    let namespace = format!("bench-kube-{id}");
    let (mut registry, addr) = start_registry()?;
    let wrapper_image = format!("localhost/krm-bench/wrapper-server:{id}");
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile"))?;
    build_image(
        &wrapper_image,
        &dockerfile,
        &["wrapper-server", "health-probe"],
    )?;
    let runners = if cli.runners.is_empty() {
        vec![e2e_tests::bin("function-runner")]
    } else {
        cli.runners.clone()
    };
    let images: Vec<String> = (0..cli.cold * runners.len())
        .map(|i| format!("{addr}/fns/example-fn:{id}-{i}"))
        .collect();
    for image in &images {
        build_image(image, FN_DOCKERFILE, &["example-fn"])?;
        docker(&["push", "-q", image])?;
    }
    // The plain pod's image: the wrapper's, from the same registry as the
    // functions' (present in the engine, as theirs are).
    let plain_image = format!("{addr}/fns/plain:{id}");
    build_image(
        &plain_image,
        &dockerfile,
        &["wrapper-server", "health-probe"],
    )?;
    docker(&["push", "-q", &plain_image])?;
    registry.images = images.iter().chain([&plain_image]).cloned().collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.clone());
    namespaces.create(&PostParams::default(), &ns).await?;

    let milestones = Milestones::default();
    let watches = milestones.watch(&client, &namespace);
    let result = run(
        &cli,
        &client,
        &namespace,
        &wrapper_image,
        &plain_image,
        &addr,
        &runners,
        &images,
        &milestones,
    )
    .await;
    for watch in watches {
        watch.abort();
    }

    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    remove_images(&[wrapper_image]);
    result
}

struct Phase {
    name: String,
    from: SystemTime,
    to: SystemTime,
}

#[allow(clippy::too_many_arguments)]
async fn run(
    cli: &Cli,
    client: &Client,
    namespace: &str,
    wrapper_image: &str,
    plain_image: &str,
    registry: &str,
    binaries: &[std::path::PathBuf],
    images: &[String],
    milestones: &Milestones,
) -> anyhow::Result<()> {
    let mut runners = Vec::new();
    for (r, binary) in binaries.iter().enumerate() {
        let mut cmd = std::process::Command::new(binary);
        cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"]);
        cmd.args([
            "--metrics-port",
            "0",
            "--backend",
            "kube",
            "--pod-namespace",
            namespace,
            "--runner-namespace",
            namespace,
            "--kube-dial",
            "pod-ip",
            "--wrapper-server-image",
            wrapper_image,
            "--insecure-registries",
            registry,
            "--runner-id",
            &format!("bench-{r}"),
        ]);
        let runner = Wrapper::spawn(cmd, "function-runner serving")?;
        let fns = runner.client().await?;
        runners.push((runner, fns));
    }
    let rl = resource_list(1);
    let call = |r: usize, image: &str| {
        let mut request = tonic::Request::new(EvaluateFunctionRequest {
            resource_list: rl.clone().into(),
            image: image.to_string(),
            tag: String::new(),
        });
        request.set_timeout(Duration::from_secs(120));
        let mut fns = runners[r].1.clone();
        async move { fns.evaluate_function(request).await }
    };
    // Let the runners' watches settle, so that their start is no phase's.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut cold = vec![Vec::new(); runners.len()];
    let mut warm = vec![Vec::new(); runners.len()];
    let mut phases = Vec::new();
    let mut breakdown: Vec<BTreeMap<&'static str, Vec<Duration>>> =
        vec![BTreeMap::new(); runners.len()];
    let mut plain = Vec::new();
    let mut shaped = Vec::new();
    for (i, image) in images.iter().enumerate() {
        let r = i % runners.len();
        // The kubelet looks at its containers once a second (its relist):
        // every start waits for the next look, so one begun at a fixed
        // phase of that second would measure the phase. Each begins at a
        // random one.
        random_phase().await;
        let from = SystemTime::now();
        let started = Instant::now();
        call(r, image)
            .await
            .with_context(|| format!("cold call\n{}", runners[r].0.logs()))?;
        let answered = started.elapsed();
        cold[r].push(answered);
        // The watch events may trail the answer by a moment.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for (milestone, at) in milestones.of_pod_created_after(started) {
            breakdown[r]
                .entry(milestone)
                .or_default()
                .push(at - started);
        }
        breakdown[r].entry("9 answered").or_default().push(answered);
        phases.push(Phase {
            name: format!("cold call (runner {r})"),
            from,
            to: SystemTime::now(),
        });
        let from = SystemTime::now();
        for _ in 0..cli.warm {
            let started = Instant::now();
            call(r, image).await.context("warm call")?;
            warm[r].push(started.elapsed());
        }
        phases.push(Phase {
            name: format!("{} warm calls (runner {r})", cli.warm),
            from,
            to: SystemTime::now(),
        });
        // One plain pod and one shaped like a function pod per round of
        // cold calls (one per runner).
        if r == runners.len() - 1 {
            random_phase().await;
            plain.push(plain_pod(client, namespace, plain_image, i, milestones).await?);
            random_phase().await;
            shaped.push(shaped_pod(client, namespace, wrapper_image, plain_image, i).await?);
        }
    }
    // The pods' ends: each runner lets go of its pods at shutdown (drain,
    // delete, finalizer), which completes before it exits.
    for (r, (runner, _)) in runners.iter_mut().enumerate() {
        let from = SystemTime::now();
        runner.signal(nix::sys::signal::Signal::SIGTERM);
        runner.wait_exit(Duration::from_secs(60)).await?;
        phases.push(Phase {
            name: format!("shutdown, {} pods (runner {r})", cold[r].len()),
            from,
            to: SystemTime::now(),
        });
    }

    plain.sort();
    shaped.sort();
    let plain_p50 = plain[plain.len() / 2];
    let shaped_p50 = shaped[shaped.len() / 2];
    println!(
        "| runner | | n | p50 | min | max | p50 / plain pod's p50 | p50 / same-shaped pod's p50 |\n\
         |---|---|---|---|---|---|---|---|"
    );
    for (r, binary) in binaries.iter().enumerate() {
        for (name, samples) in [("cold call", &mut cold[r]), ("warm call", &mut warm[r])] {
            samples.sort();
            if samples.is_empty() {
                continue;
            }
            let p50 = samples[samples.len() / 2];
            let ratio = |anchor: Duration| {
                if name == "cold call" {
                    format!("{:.2}", p50.as_secs_f64() / anchor.as_secs_f64())
                } else {
                    String::new()
                }
            };
            println!(
                "| {r}: {} | {name} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} |",
                binary.display(),
                samples.len(),
                ms(p50),
                ms(samples[0]),
                ms(samples[samples.len() - 1]),
                ratio(plain_p50),
                ratio(shaped_p50),
            );
        }
    }
    println!(
        "\nAnd a pod of a function pod's shape made by the bench (an emptyDir, the \
         wrapper installed into it by an init container, the wrapper serving from it; no \
         probe, no runner), create → its wrapper answers on the pod's IP (asked every \
         25 ms): p50 {:.0} ms, min {:.0} ms, max {:.0} ms (n = {}): the kubelet's own \
         part of a cold call.",
        ms(shaped_p50),
        ms(shaped[0]),
        ms(shaped[shaped.len() - 1]),
        shaped.len()
    );
    println!(
        "\nBeside them, after each round of cold calls: a plain pod (one container, \
         the wrapper's image from the functions' registry, serving; no init container, \
         no probe) made by the bench, create → Ready (its watch): p50 {:.0} ms, min {:.0} ms, \
         max {:.0} ms (n = {}).",
        ms(plain_p50),
        ms(plain[0]),
        ms(plain[plain.len() - 1]),
        plain.len()
    );
    println!(
        "\nCold calls, step by step: when the bench's own watch saw the new pod reach \
         each point, from the call's start (p50, min, max; a point the kubelet \
         passed between two status writes is not seen):\n"
    );
    println!("| runner | point | seen | p50 | min | max |\n|---|---|---|---|---|---|");
    for (r, breakdown) in breakdown.iter_mut().enumerate() {
        for (point, samples) in breakdown {
            samples.sort();
            println!(
                "| {r} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
                &point[2..],
                samples.len(),
                ms(samples[samples.len() / 2]),
                ms(samples[0]),
                ms(samples[samples.len() - 1]),
            );
        }
    }
    if let Some(path) = &cli.audit_log {
        // The log is written as the server answers: give it a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let events: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        println!(
            "\nAPI requests by the runner (audit log, User-Agent function-runner/...), per phase:\n"
        );
        println!("| phase | requests | which |\n|---|---|---|");
        for phase in &phases {
            let mut which = std::collections::BTreeMap::<String, usize>::new();
            let mut ids = std::collections::HashSet::new();
            for e in &events {
                let agent = e["userAgent"].as_str().unwrap_or("");
                let received = e["requestReceivedTimestamp"].as_str().unwrap_or("");
                let Ok(at) = humantime_rfc3339(received) else {
                    continue;
                };
                if !agent.starts_with("function-runner/") || at < phase.from || at > phase.to {
                    continue;
                }
                if !ids.insert(e["auditID"].as_str().unwrap_or("").to_string()) {
                    continue;
                }
                let resource = e["objectRef"]["resource"].as_str().unwrap_or("?");
                let sub = e["objectRef"]["subresource"]
                    .as_str()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default();
                *which
                    .entry(format!(
                        "{} {resource}{sub}",
                        e["verb"].as_str().unwrap_or("?")
                    ))
                    .or_default() += 1;
            }
            let total: usize = which.values().sum();
            if total == 0 && phase.name.starts_with("cold call") {
                // A cold call creates a pod: none seen means the log
                // (or this filter) missed the runner's requests.
                bail!(
                    "no request by the runner in a cold call: is {} the API server's audit log?",
                    path.display()
                );
            }
            let list: Vec<String> = which.iter().map(|(k, n)| format!("{n}× {k}")).collect();
            println!("| {} | {total} | {} |", phase.name, list.join(", "));
        }
    }
    if cold.iter().any(Vec::is_empty) {
        bail!("no calls");
    }
    Ok(())
}

/// Sleeps 0 to 999 ms, as the clock's nanoseconds say.
async fn random_phase() {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    tokio::time::sleep(Duration::from_millis(u64::from(nanos % 1000))).await;
}

/// Creates a pod with one container and nothing else (no init container,
/// no readiness probe), the wrapper image serving; how long until the
/// bench's watch sees it Ready. What the kubelet takes for any pod.
async fn plain_pod(
    client: &Client,
    namespace: &str,
    image: &str,
    i: usize,
    milestones: &Milestones,
) -> anyhow::Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = format!("plain-{i}");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "plain",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/wrapper-server", "--port", "9446", "--", "/wrapper-server"],
            }],
        },
    }))?;
    let started = Instant::now();
    pods.create(&PostParams::default(), &pod).await?;
    let deadline = started + Duration::from_secs(60);
    let ready = loop {
        if let Some(at) = milestones.at(&name, "6 Ready") {
            break at - started;
        }
        if Instant::now() > deadline {
            bail!("the plain pod {name} was not Ready within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(ready)
}

/// Creates a pod of a function pod's shape (the wrapper installed into an
/// emptyDir by an init container, and serving from there in the image
/// `image`; no probe) and asks its wrapper on the pod's IP every 25 ms
/// until it answers: how long from the create. What the kubelet takes for
/// a cold call's pod, without the runner.
async fn shaped_pod(
    client: &Client,
    namespace: &str,
    wrapper_image: &str,
    image: &str,
    i: usize,
) -> anyhow::Result<Duration> {
    use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = format!("shaped-{i}");
    let tools = "/wrapper-server-tools";
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "volumes": [{"name": "tools", "emptyDir": {}}],
            "initContainers": [{
                "name": "copy-wrapper-server",
                "image": wrapper_image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/wrapper-server", "install", tools],
                "volumeMounts": [{"name": "tools", "mountPath": tools}],
            }],
            "containers": [{
                "name": "function",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": [format!("{tools}/wrapper-server"), "--port", "9446", "--", "/wrapper-server"],
                "volumeMounts": [{"name": "tools", "mountPath": tools}],
            }],
        },
    }))?;
    let started = Instant::now();
    pods.create(&PostParams::default(), &pod).await?;
    let deadline = started + Duration::from_secs(60);
    let answered = loop {
        if Instant::now() > deadline {
            bail!("the shaped pod {name}'s wrapper did not answer within 60 s");
        }
        let ip = pods.get(&name).await?.status.and_then(|s| s.pod_ip);
        if let Some(ip) = ip {
            let check = async {
                let channel = tonic::transport::Endpoint::from_shared(format!("http://{ip}:9446"))
                    .ok()?
                    .connect()
                    .await
                    .ok()?;
                let answer = HealthClient::new(channel)
                    .check(HealthCheckRequest::default())
                    .await
                    .ok()?;
                Some(answer.get_ref().status == ServingStatus::Serving as i32)
            };
            let serving = tokio::time::timeout(Duration::from_millis(500), check).await;
            if let Ok(Some(true)) = serving {
                break started.elapsed();
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(answered)
}

/// When the bench's own watches first saw each function pod reach each
/// point of its start, by pod name. The points sort in the order a pod
/// passes them (their first two characters are that order).
#[derive(Clone, Default)]
struct Milestones(Arc<Mutex<HashMap<String, BTreeMap<&'static str, Instant>>>>);

impl Milestones {
    fn record(&self, name: &str, points: impl IntoIterator<Item = &'static str>) {
        let now = Instant::now();
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pod = seen.entry(name.to_string()).or_default();
        for point in points {
            pod.entry(point).or_insert(now);
        }
    }

    /// When the pod `name` was first seen at `point`.
    fn at(&self, name: &str, point: &str) -> Option<Instant> {
        let seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.get(name).and_then(|points| points.get(point).copied())
    }

    /// The points of the pod first seen after `started`.
    fn of_pod_created_after(&self, started: Instant) -> Vec<(&'static str, Instant)> {
        let seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.values()
            .filter(|points| points.get("1 created").is_some_and(|at| *at >= started))
            .min_by_key(|points| points["1 created"])
            .map(|points| points.iter().map(|(p, at)| (*p, *at)).collect())
            .unwrap_or_default()
    }

    fn watch(&self, client: &Client, namespace: &str) -> [tokio::task::JoinHandle<()>; 2] {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
        let this = self.clone();
        let pods = tokio::spawn(async move {
            let mut events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(pod) = event else { continue };
                let name = pod.metadata.name.clone().unwrap_or_default();
                this.record(&name, pod_points(&pod));
            }
        });
        let this = self.clone();
        let endpoints = tokio::spawn(async move {
            let mut events = watcher(endpoints, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(endpoints) = event else { continue };
                let listed = endpoints
                    .subsets
                    .iter()
                    .flatten()
                    .any(|s| s.addresses.as_ref().is_some_and(|a| !a.is_empty()));
                if listed {
                    let name = endpoints.metadata.name.clone().unwrap_or_default();
                    this.record(&name, ["7 in its Service's Endpoints"]);
                }
            }
        });
        [pods, endpoints]
    }
}

/// The points of its start that a pod's object shows it has passed.
fn pod_points(pod: &Pod) -> Vec<&'static str> {
    let mut points = vec!["1 created"];
    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        points.push("2 scheduled");
    }
    let Some(status) = &pod.status else {
        return points;
    };
    for init in status.init_container_statuses.iter().flatten() {
        if let Some(state) = &init.state {
            if state.running.is_some() || state.terminated.is_some() {
                points.push("3 init container running");
            }
            if state.terminated.is_some() {
                points.push("4 init container done");
            }
        }
    }
    for container in status.container_statuses.iter().flatten() {
        if container
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_some())
        {
            points.push("5 function container running");
        }
    }
    if status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
    {
        points.push("6 Ready");
    }
    points
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// RFC 3339 with fractional seconds, as the audit log writes
/// (`2026-11-23T10:00:00.123456Z`), to a `SystemTime`.
fn humantime_rfc3339(text: &str) -> anyhow::Result<SystemTime> {
    let (date, time) = text.split_once('T').context("no T")?;
    let mut d = date.split('-').map(str::parse::<i64>);
    let (y, m, day) = (
        d.next().context("year")??,
        d.next().context("month")??,
        d.next().context("day")??,
    );
    let time = time.trim_end_matches('Z');
    let mut t = time.split(':');
    let (h, min) = (
        t.next().context("hour")?.parse::<i64>()?,
        t.next().context("minute")?.parse::<i64>()?,
    );
    let secs: f64 = t.next().context("second")?.parse()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let whole = days * 86_400 + h * 3600 + min * 60;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(whole as u64) + Duration::from_secs_f64(secs))
}
