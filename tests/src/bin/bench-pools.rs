//! `bench-pools`: single-use function calls with and without an idle pool
//! (#25), on the process backend and, with `KUBECONFIG`, on the cluster:
//! sequential calls a set time apart, then a burst of concurrent calls.
//! Every call's function says which pod served it and whether that pod
//! served a call before; a pod serving two calls fails the run. Printed as
//! markdown.
//!
//! ```sh
//! ../shared/tools/kube-cluster start /tmp/kube
//! cargo build --release --workspace --bins
//! KUBECONFIG=/tmp/kube/kubeconfig \
//!   target/x86_64-unknown-linux-gnu/release/bench-pools --calls 10 --apart-ms 1000 --pools 2,4
//! ```
//!
//! The cluster's images are built here (`FROM scratch`, busybox-static for
//! the function's shell) into the Docker engine the kubelet uses, the
//! function's pushed to a `docker-registry` started on loopback.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use e2e_tests::{
    build_image, build_image_with_files, docker, example_request, remove_images, start_registry,
    stateful, Wrapper,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

#[derive(Debug, Parser)]
#[command(
    name = "bench-pools",
    about = "Benchmarks: single-use calls with and without an idle pool"
)]
struct Cli {
    /// Sequential calls per configuration.
    #[arg(long, default_value_t = 10)]
    calls: usize,
    /// Milliseconds between the starts of two sequential calls.
    #[arg(long, default_value_t = 1000)]
    apart_ms: u64,
    /// The pools' `idlePods` to measure (besides none), comma-separated;
    /// each gets a burst of twice its size.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pools: Vec<u32>,
    /// Skip the cluster even if `KUBECONFIG` is set.
    #[arg(long)]
    no_kube: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    println!(
        "| backend | pool | sequential calls ({} ms apart): p50 | max | burst of twice the pool (none: 4), after the pool refilled: each call, sorted | distinct pods |",
        cli.apart_ms
    );
    println!("|---|---|---|---|---|---|");
    let dir = tempfile::tempdir()?;
    process(&cli, dir.path()).await?;
    if !cli.no_kube && std::env::var_os("KUBECONFIG").is_some() {
        kube(&cli, dir.path()).await?;
    }
    Ok(())
}

/// A FunctionConfig directory for `image` (`name:tag`): single-use, with a
/// pool of `pool` (none if 0).
fn functions(dir: &Path, image: &str, pool: u32) -> anyhow::Result<PathBuf> {
    let (name, tag) = image.rsplit_once(':').context("a tag")?;
    let functions = dir.join(format!("functions-{pool}"));
    std::fs::create_dir_all(&functions)?;
    std::fs::write(
        functions.join("fn.yaml"),
        format!(
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: fn\nspec:\n  image: {name}\n  podExecutor:\n    tags: [\"{tag}\"]\n    singleUse: true\n    idlePods: {pool}\n"
        ),
    )?;
    Ok(functions)
}

async fn process(cli: &Cli, dir: &Path) -> anyhow::Result<()> {
    let pods = dir.join("pods");
    std::fs::create_dir_all(&pods)?;
    let script = pods.join("state-fn");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nSTATE={}\n{}\n",
            dir.join("state").display(),
            stateful::PROCESS_SCRIPT
        ),
    )?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let image = "example.com/fns/state-fn:v1";
    for pool in std::iter::once(0).chain(cli.pools.iter().copied()) {
        let functions = functions(dir, image, pool)?;
        let runner = Wrapper::start_runner(&[
            "--process-functions",
            pods.to_str().context("path")?,
            "--functions",
            functions.to_str().context("path")?,
            "--metrics-port",
            "0",
        ])?;
        // The pool fills.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let row = measure(cli, pool, Duration::from_secs(2), &runner, image).await;
        report("process", pool, row?);
        drop(runner);
    }
    Ok(())
}

async fn kube(cli: &Cli, dir: &Path) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("KUBECONFIG")?;
    let id = std::process::id();
    let namespace = format!("bench-pools-{id}");
    let (mut registry, addr) = start_registry()?;
    let wrapper_image = format!("localhost/krm-bench/wrapper-server:{id}");
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile"))?;
    build_image(
        &wrapper_image,
        &dockerfile,
        &["wrapper-server", "health-probe"],
    )?;
    let image = format!("{addr}/fns/state-fn:{id}");
    let script = dir.join("state.sh");
    std::fs::write(&script, stateful::CONTAINER_SCRIPT)?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    build_image_with_files(
        &image,
        stateful::DOCKERFILE,
        &[],
        &[
            ("busybox", Path::new("/bin/busybox")),
            ("state.sh", &script),
        ],
    )?;
    docker(&["push", "-q", &image])?;
    registry.images = vec![image.clone()];
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.clone());
    namespaces.create(&PostParams::default(), &ns).await?;
    let result = async {
        for pool in std::iter::once(0).chain(cli.pools.iter().copied()) {
            let functions = functions(dir, &image, pool)?;
            let runner = Wrapper::start_runner(&[
                "--backend",
                "kube",
                "--pod-namespace",
                &namespace,
                "--runner-namespace",
                &namespace,
                "--kube-dial",
                "pod-ip",
                "--insecure-registries",
                &addr,
                "--wrapper-server-image",
                &wrapper_image,
                "--runner-id",
                &format!("bench-{pool}"),
                "--functions",
                functions.to_str().context("path")?,
                "--metrics-port",
                "0",
            ])?;
            // The pool fills (the kubelet starts its pods).
            tokio::time::sleep(Duration::from_secs(if pool > 0 { 20 } else { 2 })).await;
            let row = measure(cli, pool, Duration::from_secs(20), &runner, &image).await;
            report("kube", pool, row?);
            runner.signal(nix::sys::signal::Signal::SIGTERM);
            let mut runner = runner;
            runner.wait_exit(Duration::from_secs(60)).await?;
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    remove_images(&[wrapper_image]);
    result
}

struct Row {
    sequential: Vec<Duration>,
    burst: Vec<Duration>,
    pods: usize,
}

/// Sequential calls `apart`, then (after `refill`) a burst of twice the
/// pool at once; every pod must be fresh.
async fn measure(
    cli: &Cli,
    pool: u32,
    refill: Duration,
    runner: &Wrapper,
    image: &str,
) -> anyhow::Result<Row> {
    let burst = if pool == 0 { 4 } else { 2 * pool as usize };
    let mut pods = HashSet::new();
    let mut sequential = Vec::new();
    for _ in 0..cli.calls {
        let began = Instant::now();
        let pod = call(runner, image).await?;
        sequential.push(began.elapsed());
        if !pods.insert(pod.clone()) {
            bail!("pod {pod} served two calls");
        }
        tokio::time::sleep(Duration::from_millis(cli.apart_ms).saturating_sub(began.elapsed()))
            .await;
    }
    tokio::time::sleep(refill).await;
    let calls: Vec<_> = (0..burst)
        .map(|_| async {
            let began = Instant::now();
            call(runner, image).await.map(|pod| (pod, began.elapsed()))
        })
        .collect();
    let mut times = Vec::new();
    for answer in futures::future::join_all(calls).await {
        let (pod, took) = answer?;
        if !pods.insert(pod.clone()) {
            bail!("pod {pod} served two calls");
        }
        times.push(took);
    }
    Ok(Row {
        sequential,
        burst: times,
        pods: pods.len(),
    })
}

async fn call(runner: &Wrapper, image: &str) -> anyhow::Result<String> {
    let mut client = runner.client().await?;
    let resp = client
        .evaluate_function(example_request(image))
        .await
        .with_context(|| format!("call\n{}", runner.logs()))?
        .into_inner();
    let log = String::from_utf8_lossy(&resp.log).trim().to_string();
    let Some(pod) = log.strip_suffix(" fresh") else {
        bail!("a used pod served a call: {log}");
    };
    Ok(pod.to_string())
}

fn report(backend: &str, pool: u32, row: Row) {
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let p50 = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort();
        v.get(v.len() / 2).copied().unwrap_or_default()
    };
    let max = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    let mut burst = row.burst.clone();
    burst.sort();
    let burst: Vec<String> = burst.into_iter().map(ms).collect();
    println!(
        "| {backend} | {pool} | {} | {} | {} | {} |",
        ms(p50(&row.sequential)),
        ms(max(&row.sequential)),
        burst.join(", "),
        row.pods
    );
}
