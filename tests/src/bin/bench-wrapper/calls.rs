//! Payloads and single calls: the ResourceLists sent, gRPC clients, and one
//! call through wrapper-server or by spawning the program directly.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context};
use bytes::Bytes;
use e2e_tests::evaluator_client;
use proto::pb::function_evaluator_client::FunctionEvaluatorClient;
use proto::pb::EvaluateFunctionRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

/// A ResourceList of ConfigMaps, the last one padded so the whole document is
/// exactly `size` bytes.
pub(super) fn payload(size: usize) -> anyhow::Result<Bytes> {
    let mut s = String::with_capacity(size);
    s.push_str("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let pad_item = |i: usize, pad: usize| {
        format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: pad-{i}\n    namespace: default\n  data:\n    pad: \"{}\"\n",
            "x".repeat(pad)
        )
    };
    let mut i = 0;
    loop {
        let item = format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i}\n    namespace: default\n  data:\n    key: value-{i}\n"
        );
        if s.len() + item.len() + pad_item(i + 1, 0).len() > size {
            break;
        }
        s.push_str(&item);
        i += 1;
    }
    let fixed = pad_item(i, 0).len();
    ensure!(
        s.len() + fixed <= size,
        "{size} bytes is too small for a ResourceList"
    );
    let pad = size - s.len() - fixed;
    s.push_str(&pad_item(i, pad));
    ensure!(s.len() == size, "payload is {} bytes, not {size}", s.len());
    Ok(Bytes::from(s))
}

pub(super) type Client = FunctionEvaluatorClient<Channel>;

pub(super) async fn connect(endpoint: &str) -> anyhow::Result<Client> {
    // Big HTTP/2 windows (16 MiB), nodelay, 64 MiB message limits.
    evaluator_client(endpoint, 64 << 20).await
}

/// Like [`connect`], also advertising 1 MiB HTTP/2 frames, so that the
/// server sends the response in 1 MiB DATA frames rather than 16 KiB ones.
pub(super) async fn connect_big_frames(endpoint: &str) -> anyhow::Result<Client> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())?
        .tcp_nodelay(true)
        .initial_connection_window_size(16 << 20)
        .initial_stream_window_size(16 << 20)
        .max_frame_size(1 << 20)
        .connect()
        .await
        .with_context(|| format!("connecting to {endpoint}"))?;
    Ok(FunctionEvaluatorClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

/// One EvaluateFunction call; the time until the response is decoded.
pub(super) async fn call_wrapper(client: &mut Client, input: &Bytes) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let resp = client
        .evaluate_function(EvaluateFunctionRequest {
            resource_list: input.clone(),
            image: "bench".into(),
            tag: String::new(),
        })
        .await
        .map_err(|s| anyhow!("EvaluateFunction: {:?}: {}", s.code(), s.message()))?
        .into_inner();
    let took = started.elapsed();
    ensure!(resp.resource_list == *input, "wrapper answered other bytes");
    Ok(took)
}

/// The direct baseline, as a plain async program does it: tokio::process,
/// stdin written while stdout and stderr are read, then wait.
pub(super) async fn call_tokio(program: &Path, input: &Bytes) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", program.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let mut stderr = child.stderr.take().context("no stderr")?;
    let write = async move {
        stdin.write_all(input).await
        // dropped here: EOF
    };
    let mut out = Vec::new();
    let mut err = Vec::new();
    let (w, o, e) = tokio::join!(
        write,
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err)
    );
    w.context("writing stdin")?;
    o.context("reading stdout")?;
    e.context("reading stderr")?;
    let status = child.wait().await?;
    let took = started.elapsed();
    ensure!(status.success(), "{} failed: {status}", program.display());
    ensure!(out == input[..], "direct spawn answered other bytes");
    Ok(took)
}

/// The direct baseline, as a plain blocking program does it:
/// std::process::Command, a thread writing stdin, `wait_with_output` reading
/// stdout and stderr (it polls both).
pub(super) fn call_std(program: &Path, input: &[u8]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", program.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let output = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(input));
        let output = child.wait_with_output();
        let written = writer
            .join()
            .map_err(|_| anyhow!("stdin writer panicked"))?;
        written.context("writing stdin")?;
        output.context("waiting for the child")
    })?;
    let took = started.elapsed();
    ensure!(output.status.success(), "{} failed", program.display());
    ensure!(output.stdout == input, "direct spawn answered other bytes");
    Ok(took)
}
