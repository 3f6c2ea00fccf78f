//! OpenTelemetry end to end: a real OTLP receiver (tests/src/otlp.rs), the
//! real binaries with the `OTEL_*` variables, calls carrying a W3C
//! `traceparent`; the spans must arrive in that trace with the right
//! parents.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use e2e_tests::otlp::{ReceivedPoint, ReceivedSpan, Receiver};
use e2e_tests::{bin, example_request, Wrapper};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const WAIT: Duration = Duration::from_secs(20);
const CALL: &str = "evaluator.FunctionEvaluator/EvaluateFunction";

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// `cmd` with the variables that export spans to `receiver` over
/// `protocol`, quickly (a 100 ms batch delay).
fn exporting(mut cmd: Command, receiver: &Receiver, protocol: &str) -> Command {
    cmd.env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    cmd
}

async fn call_with_traceparent(server: &Wrapper, image: &str) -> tonic::Result<()> {
    let mut client = server
        .client()
        .await
        .map_err(|e| tonic::Status::unknown(e.to_string()))?;
    let mut request = tonic::Request::new(example_request(image));
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{CALLER_SPAN}-01")
            .parse()
            .expect("a valid header"),
    );
    client.evaluate_function(request).await.map(|_| ())
}

fn named<'a>(spans: &'a [ReceivedSpan], service: &str, name: &str) -> Option<&'a ReceivedSpan> {
    spans
        .iter()
        .find(|s| s.service == service && s.name == name)
}

fn show(spans: &[ReceivedSpan]) -> String {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} {} {} parent={} {:?}\n",
                s.service, s.name, s.span_id, s.parent_id, s.attributes
            )
        })
        .collect()
}

/// The wrapper alone, over both OTLP transports: its call span continues the
/// caller's trace; admission and the function's run are its children, the
/// run with its exit code and sizes.
#[tokio::test]
async fn the_wrappers_spans_continue_the_callers_trace() {
    for protocol in ["grpc", "http/protobuf"] {
        let receiver = match protocol {
            "grpc" => Receiver::grpc(loopback()).await,
            _ => Receiver::http(loopback()).await,
        }
        .expect("receiver");
        let mut cmd = Command::new(bin("wrapper-server"));
        cmd.args(["--host", "127.0.0.1", "--port", "0"]);
        let cmd = exporting(cmd, &receiver, protocol);
        let wrapper =
            Wrapper::start_command(cmd, &[], &[bin("example-fn").to_str().expect("utf-8")])
                .expect("wrapper-server starts");
        call_with_traceparent(&wrapper, "example:v1")
            .await
            .expect("the call succeeds");
        let spans = receiver
            .wait_for(WAIT, |s| {
                named(s, "wrapper-server", "function").is_some()
                    && named(s, "wrapper-server", CALL).is_some()
            })
            .await;
        let call = named(&spans, "wrapper-server", CALL).unwrap_or_else(|| {
            panic!(
                "{protocol}: no call span in\n{}\nlogs:\n{}",
                show(&spans),
                wrapper.logs()
            )
        });
        assert_eq!(call.trace_id, TRACE_ID, "{protocol}");
        assert_eq!(call.parent_id, CALLER_SPAN, "{protocol}");
        assert_eq!(call.kind, 2, "{protocol}: a server span");
        assert_eq!(call.attribute("image"), Some("example:v1"));
        assert_eq!(call.attribute("rpc.grpc.status_code"), Some("0"));
        for child in ["admission", "function"] {
            let span = named(&spans, "wrapper-server", child)
                .unwrap_or_else(|| panic!("{protocol}: no {child} span in\n{}", show(&spans)));
            assert_eq!(span.trace_id, TRACE_ID);
            assert_eq!(span.parent_id, call.span_id, "{protocol}: {child}'s parent");
        }
        let function = named(&spans, "wrapper-server", "function").expect("checked");
        assert_eq!(function.attribute("exit_code"), Some("0"));
        let input: usize = function
            .attribute("input_bytes")
            .and_then(|v| v.parse().ok())
            .expect("input_bytes");
        assert_eq!(input, e2e_tests::example_rl().len());
        assert!(function.attribute("output_bytes").is_some_and(|v| v != "0"));
    }
}

/// A call without a traceparent starts a trace of its own; a failed call's
/// span says ERROR with the gRPC code.
#[tokio::test]
async fn a_failed_call_is_an_error_span_in_a_trace_of_its_own() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let cmd = exporting(cmd, &receiver, "grpc");
    let wrapper = Wrapper::start_command(cmd, &[], &["/bin/sh", "-c", "cat >/dev/null; exit 3"])
        .expect("wrapper-server starts");
    let mut client = wrapper.client().await.expect("client");
    let err = client
        .evaluate_function(example_request("failing:v1"))
        .await
        .expect_err("the function fails");
    let spans = receiver
        .wait_for(WAIT, |s| named(s, "wrapper-server", CALL).is_some())
        .await;
    let call = named(&spans, "wrapper-server", CALL).unwrap_or_else(|| panic!("{}", show(&spans)));
    assert_eq!(call.parent_id, "", "a root span");
    assert_ne!(call.trace_id, TRACE_ID);
    assert_eq!(call.status, 2, "STATUS_CODE_ERROR");
    assert_eq!(
        call.attribute("rpc.grpc.status_code"),
        Some((err.code() as i32).to_string().as_str())
    );
    let function = named(&spans, "wrapper-server", "function").expect("function span");
    assert_eq!(function.attribute("exit_code"), Some("3"));
}

/// A process-functions directory holding `example-fn`.
fn process_functions() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(bin("example-fn"), dir.path().join("example-fn")).expect("copy example-fn");
    dir
}

fn runner_command(pods: &tempfile::TempDir, metrics_port: u16) -> Command {
    let mut cmd = Command::new(bin("function-runner"));
    cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .args(["--metrics-port", &metrics_port.to_string()])
        .arg("--process-functions")
        .arg(pods.path());
    cmd
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(loopback())
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn child_of<'a>(
    spans: &'a [ReceivedSpan],
    parent: &ReceivedSpan,
    name: &str,
) -> Option<&'a ReceivedSpan> {
    spans
        .iter()
        .find(|s| s.name == name && s.parent_id == parent.span_id && s.trace_id == parent.trace_id)
}

/// Through `serve` on the process backend: the runner's call span continues
/// the caller's trace; the wait in the pod cache (the pod's start, with the
/// backend's steps, under it) and the call to the wrapper are its children; the
/// wrapper's call span is the child of the runner's client span, its run
/// of the function the wrapper's child. A second call, on the warm pod,
/// starts no pod.
#[tokio::test]
async fn a_call_through_serve_is_one_trace_from_the_caller_to_the_function() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let pods = process_functions();
    let cmd = exporting(runner_command(&pods, free_port()), &receiver, "grpc");
    let runner = Wrapper::spawn(cmd, "function-runner serving").expect("runner starts");
    call_with_traceparent(&runner, "example-fn")
        .await
        .expect("first call");
    let spans = receiver
        .wait_for(WAIT, |s| {
            named(s, "wrapper-server", "function").is_some()
                && named(s, "function-runner", "pod.start").is_some()
        })
        .await;
    let shown = show(&spans);
    let call = spans
        .iter()
        .find(|s| s.service == "function-runner" && s.name == CALL && s.kind == 2)
        .unwrap_or_else(|| panic!("no runner call span in\n{shown}\nlogs:\n{}", runner.logs()));
    assert_eq!(call.trace_id, TRACE_ID, "{shown}");
    assert_eq!(call.parent_id, CALLER_SPAN, "{shown}");
    assert_eq!(call.attribute("evaluator"), Some("pod"), "{shown}");
    assert_eq!(call.attribute("image"), Some("example-fn"));
    let wait = child_of(&spans, call, "pod_cache.get")
        .unwrap_or_else(|| panic!("no pod_cache.get under the call:\n{shown}"));
    assert!(wait.attribute("pod").is_some(), "{shown}");
    // The pod started for this call, while it waited for one.
    let start = child_of(&spans, wait, "pod.start")
        .unwrap_or_else(|| panic!("no pod.start under the wait:\n{shown}"));
    assert_eq!(start.attribute("backend"), Some("process"));
    for step in ["wrapper.spawn", "wrapper.ready"] {
        child_of(&spans, start, step)
            .unwrap_or_else(|| panic!("no {step} under pod.start:\n{shown}"));
    }
    let client = spans
        .iter()
        .find(|s| s.service == "function-runner" && s.name == CALL && s.kind == 3)
        .unwrap_or_else(|| panic!("no client span:\n{shown}"));
    assert_eq!(client.parent_id, call.span_id, "{shown}");
    assert_eq!(client.attribute("rpc.grpc.status_code"), Some("0"));
    let served = spans
        .iter()
        .find(|s| s.service == "wrapper-server" && s.name == CALL)
        .unwrap_or_else(|| panic!("no wrapper span:\n{shown}"));
    assert_eq!(served.trace_id, TRACE_ID, "{shown}");
    assert_eq!(
        served.parent_id, client.span_id,
        "the wrapper's call is the runner's client span's child:\n{shown}"
    );
    let function = child_of(&spans, served, "function")
        .unwrap_or_else(|| panic!("no function under the wrapper's call:\n{shown}"));
    assert_eq!(function.attribute("exit_code"), Some("0"));

    // The warm pod: a second trace with no pod start in it.
    let before = spans.len();
    let mut client = runner.client().await.expect("client");
    let mut request = tonic::Request::new(example_request("example-fn"));
    let second_trace = "0af7651916cd43dd8448eb211c80319c";
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{second_trace}-b7ad6b7169203331-01")
            .parse()
            .expect("header"),
    );
    client
        .evaluate_function(request)
        .await
        .expect("second call");
    let spans = receiver
        .wait_for(WAIT, |s| {
            s.len() > before
                && s.iter()
                    .any(|x| x.trace_id == second_trace && x.name == "function")
        })
        .await;
    let second: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == second_trace)
        .collect();
    assert!(
        second.iter().any(|s| s.name == "pod_cache.get"),
        "{}",
        show(&spans)
    );
    assert!(
        !second.iter().any(|s| s.name == "pod.start"),
        "a warm call starts no pod:\n{}",
        show(&spans)
    );
}

/// A counter's value in a metrics page (0 if absent).
fn counter(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// A collector that is down costs the calls nothing: they succeed, the
/// spans are counted as dropped, and the failure is said once, not per
/// export.
#[tokio::test]
async fn a_dead_collector_fails_no_call_and_is_said_once() {
    let dead = std::net::TcpListener::bind(loopback()).expect("port");
    let endpoint = format!("http://{}", dead.local_addr().expect("addr"));
    drop(dead);
    let pods = process_functions();
    let metrics_port = free_port();
    let mut cmd = runner_command(&pods, metrics_port);
    cmd.env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    let runner = Wrapper::spawn(cmd, "function-runner serving").expect("runner starts");
    let mut client = runner.client().await.expect("client");
    for _ in 0..5 {
        client
            .evaluate_function(example_request("example-fn"))
            .await
            .expect("a call succeeds whatever the collector does");
    }
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let series = "function_runner_otel_spans_dropped_total{reason=\"export_failed\"}";
    let mut page = String::new();
    let counted = e2e_tests::eventually_async(WAIT, async || {
        page = e2e_tests::http_get(&metrics_addr, "/metrics")
            .await
            .unwrap_or_default();
        counter(&page, series) > 0.0
    })
    .await;
    assert!(
        counted,
        "no dropped spans counted:\n{page}\nlogs:\n{}",
        runner.logs()
    );
    let exported = "function_runner_otel_spans_exported_total";
    assert!(
        page.lines().any(|l| l.starts_with(exported)),
        "{exported} is served:\n{page}"
    );
    assert_eq!(counter(&page, exported), 0.0);
    let said = runner.logs().matches("exporting spans failed").count();
    assert_eq!(said, 1, "said once:\n{}", runner.logs());
}

/// A collector slower than spans end: the queue is bounded, what does not
/// fit is dropped and counted, and the calls do not wait.
#[tokio::test]
async fn a_slow_collector_costs_a_bounded_queue() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    receiver.delay(Duration::from_secs(10));
    let metrics_port = free_port();
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")]);
    let mut cmd = exporting(cmd, &receiver, "grpc");
    cmd.env("OTEL_BSP_MAX_QUEUE_SIZE", "4")
        .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2");
    let wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    let mut client = wrapper.client().await.expect("client");
    let started = std::time::Instant::now();
    for _ in 0..10 {
        client
            .evaluate_function(example_request("cat"))
            .await
            .expect("a call succeeds");
    }
    // Ten calls' spans (30) through a 4-span queue whose exporter takes 10 s
    // a batch: had the calls waited for it, this would take minutes.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the calls waited for the collector: {:?}",
        started.elapsed()
    );
    let page = e2e_tests::http_get(&format!("127.0.0.1:{metrics_port}"), "/metrics")
        .await
        .expect("metrics");
    let dropped = counter(
        &page,
        "wrapper_server_otel_spans_dropped_total{reason=\"queue_full\"}",
    );
    assert!(dropped >= 20.0, "dropped {dropped}:\n{page}");
    assert_eq!(
        wrapper.logs().matches("the span queue is full").count(),
        1,
        "{}",
        wrapper.logs()
    );
}

/// SIGTERM exports what is queued before the exit: with a batch delay of a
/// minute, only the flush at exit can have sent the call's spans.
#[tokio::test]
async fn sigterm_flushes_the_queued_spans() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let mut cmd = exporting(cmd, &receiver, "grpc");
    cmd.env("OTEL_BSP_SCHEDULE_DELAY", "60000");
    let mut wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    call_with_traceparent(&wrapper, "cat")
        .await
        .expect("the call succeeds");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        receiver.spans().is_empty(),
        "exported before the exit: the test proves nothing"
    );
    wrapper.signal(nix::sys::signal::Signal::SIGTERM);
    let status = wrapper.wait_exit(WAIT).await.expect("exits");
    assert!(status.success(), "{status:?}\n{}", wrapper.logs());
    let spans = receiver.spans();
    assert!(
        named(&spans, "wrapper-server", CALL).is_some_and(|s| s.trace_id == TRACE_ID),
        "{}",
        show(&spans)
    );
    assert!(
        named(&spans, "wrapper-server", "function").is_some(),
        "{}",
        show(&spans)
    );
}

/// `render` exports a span per function step, children of the render's,
/// when the variables ask for it (and `eval` one for its function). (Multi-
/// threaded: the receiver answers while the test waits for the commands.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_and_eval_export_a_span_per_function_step() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = dir.path().join("pkg");
    std::fs::create_dir(&pkg).expect("mkdir");
    let function = bin("example-fn");
    let function = function.to_str().expect("utf-8");
    std::fs::write(
        pkg.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - exec: {function}\n    - exec: {function}\n"
        ),
    )
    .expect("Kptfile");
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n",
    )
    .expect("cm.yaml");
    let run = |args: &[&str]| {
        let mut cmd = exporting(Command::new(bin("function-runner")), &receiver, "grpc");
        cmd.args(args).arg(&pkg);
        let out = e2e_tests::output_within(&mut cmd, None, Duration::from_secs(60))
            .expect("function-runner runs within a minute");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["render", "--allow-exec"]);
    run(&["eval", "--exec", function]);
    // Both exited: what they exported is all there is.
    let spans = receiver.spans();
    let steps: Vec<_> = spans
        .iter()
        .filter(|s| s.service == "function-runner-render" && s.name == "render.step")
        .collect();
    assert_eq!(steps.len(), 2, "{}", show(&spans));
    let render = spans
        .iter()
        .find(|s| s.service == "function-runner-render" && s.name == "render")
        .unwrap_or_else(|| panic!("{}", show(&spans)));
    assert_eq!(render.parent_id, "", "a root");
    for step in &steps {
        assert_eq!(step.attribute("exit_code"), Some("0"));
        assert_eq!(step.attribute("function"), Some(function));
        assert_eq!(
            (&step.trace_id, &step.parent_id),
            (&render.trace_id, &render.span_id)
        );
    }
    let eval = spans
        .iter()
        .find(|s| s.service == "function-runner-eval" && s.name == "eval.function")
        .unwrap_or_else(|| panic!("{}", show(&spans)));
    assert_eq!(eval.attribute("exit_code"), Some("0"));
}

/// `cmd` with the variables that push metrics to `receiver` over gRPC
/// every 200 ms.
fn pushing_metrics(mut cmd: Command, endpoint: &str) -> Command {
    cmd.env("OTEL_METRICS_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200");
    cmd
}

fn show_points(points: &[ReceivedPoint]) -> String {
    points
        .iter()
        .map(|p| {
            format!(
                "{} {} {} {:?} {}\n",
                p.service, p.metric, p.kind, p.attributes, p.value
            )
        })
        .collect()
}

fn point<'a>(
    points: &'a [ReceivedPoint],
    service: &str,
    metric: &str,
    attribute: (&str, &str),
) -> Option<&'a ReceivedPoint> {
    // The last push's.
    points.iter().rev().find(|p| {
        p.service == service && p.metric == metric && p.attribute(attribute.0) == Some(attribute.1)
    })
}

/// OTEL_METRICS_EXPORTER=otlp: the wrapper's Prometheus metrics are pushed
/// under their Prometheus names (a counter without `_total`), labels as
/// attributes; a histogram as its cumulative `_bucket`/`_sum`/`_count`.
#[tokio::test]
async fn the_wrappers_metrics_are_pushed_over_otlp() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let cmd = pushing_metrics(cmd, &receiver.endpoint());
    let mut wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    let mut client = wrapper.client().await.expect("client");
    client
        .evaluate_function(example_request("cat"))
        .await
        .expect("the call succeeds");
    let metric = "wrapper_server_evaluations";
    let points = receiver
        .wait_for_points(WAIT, |p| {
            point(p, "wrapper-server", metric, ("outcome", "ok")).is_some_and(|p| p.value >= 1.0)
        })
        .await;
    let calls = point(&points, "wrapper-server", metric, ("outcome", "ok")).unwrap_or_else(|| {
        panic!(
            "no {metric}{{outcome=ok}} in\n{}\nlogs:\n{}",
            show_points(&points),
            wrapper.logs()
        )
    });
    assert_eq!(calls.kind, "sum", "a counter is a sum");
    assert!(calls.value >= 1.0, "{}", show_points(&points));
    let count = points
        .iter()
        .rev()
        .find(|p| p.metric == "wrapper_server_evaluation_duration_seconds_count")
        .unwrap_or_else(|| panic!("no histogram count in\n{}", show_points(&points)));
    assert!(count.value >= 1.0, "{}", show_points(&points));
    assert!(
        point(
            &points,
            "wrapper-server",
            "wrapper_server_evaluation_duration_seconds_bucket",
            ("le", "+Inf")
        )
        .is_some(),
        "{}",
        show_points(&points)
    );
    assert!(
        points
            .iter()
            .any(|p| p.metric == "wrapper_server_evaluations_in_flight" && p.kind == "gauge"),
        "{}",
        show_points(&points)
    );
    // SIGTERM: a last push, and a clean exit.
    wrapper.signal(nix::sys::signal::Signal::SIGTERM);
    let status = wrapper.wait_exit(WAIT).await.expect("exits");
    assert!(status.success(), "{status:?}\n{}", wrapper.logs());
}

/// Through `function-runner serve` (process backend): the runner's metrics
/// are pushed too, the pod cache's figures with them.
#[tokio::test]
async fn the_runners_metrics_are_pushed_over_otlp() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let pods = process_functions();
    let cmd = pushing_metrics(runner_command(&pods, free_port()), &receiver.endpoint());
    let runner = Wrapper::spawn(cmd, "function-runner serving").expect("runner starts");
    let mut client = runner.client().await.expect("client");
    client
        .evaluate_function(example_request("example-fn"))
        .await
        .expect("the call succeeds");
    let points = receiver
        .wait_for_points(WAIT, |p| {
            p.iter().any(|p| {
                p.service == "function-runner"
                    && p.metric.starts_with("function_runner_evaluations")
                    && p.value >= 1.0
            })
        })
        .await;
    assert!(
        points.iter().any(|p| p.service == "function-runner"
            && p.metric.starts_with("function_runner_evaluations")
            && p.value >= 1.0),
        "no function_runner_evaluations in\n{}\nlogs:\n{}",
        show_points(&points),
        runner.logs()
    );
    assert!(
        !points.iter().any(|p| p.metric.ends_with("_total")),
        "{}",
        show_points(&points)
    );
}

/// A collector that refuses costs the calls nothing, and the failure is
/// said once, not per push; when it accepts again, that is said too.
#[tokio::test]
async fn a_refusing_collector_fails_no_call_and_is_said_once() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    receiver.refuse(true);
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let mut cmd = pushing_metrics(cmd, &receiver.endpoint());
    // No retries to speak of: each push fails within a second.
    cmd.env("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    let wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    let mut client = wrapper.client().await.expect("client");
    for _ in 0..3 {
        client
            .evaluate_function(example_request("cat"))
            .await
            .expect("a call succeeds whatever the collector does");
    }
    let refused = e2e_tests::eventually_async(WAIT, async || receiver.metric_requests() >= 3).await;
    assert!(refused, "pushes: {}", receiver.metric_requests());
    let said = e2e_tests::eventually_async(WAIT, async || {
        wrapper.logs().contains("pushing metrics failed")
    })
    .await;
    assert!(said, "{}", wrapper.logs());
    // Several pushes later, still said once.
    let seen = receiver.metric_requests();
    let more =
        e2e_tests::eventually_async(WAIT, async || receiver.metric_requests() >= seen + 3).await;
    assert!(more, "pushes: {}", receiver.metric_requests());
    assert_eq!(
        wrapper.logs().matches("pushing metrics failed").count(),
        1,
        "{}",
        wrapper.logs()
    );
    assert!(receiver.points().is_empty());
    receiver.refuse(false);
    let back = e2e_tests::eventually_async(WAIT, async || {
        wrapper.logs().contains("pushing metrics works again")
    })
    .await;
    assert!(back, "{}", wrapper.logs());
    assert!(!receiver.points().is_empty());
}

/// SIGTERM pushes the last values: with a push interval of a minute, only
/// the push at exit can have sent the call's count (its family, empty at
/// the start, included).
#[tokio::test]
async fn sigterm_pushes_the_last_metrics() {
    let receiver = Receiver::grpc(loopback()).await.expect("receiver");
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let mut cmd = pushing_metrics(cmd, &receiver.endpoint());
    cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "60000");
    let mut wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    let mut client = wrapper.client().await.expect("client");
    client
        .evaluate_function(example_request("cat"))
        .await
        .expect("the call succeeds");
    assert!(
        receiver.points().is_empty(),
        "pushed before the exit: the test proves nothing"
    );
    wrapper.signal(nix::sys::signal::Signal::SIGTERM);
    let status = wrapper.wait_exit(WAIT).await.expect("exits");
    assert!(status.success(), "{status:?}\n{}", wrapper.logs());
    let points = receiver.points();
    let calls = point(
        &points,
        "wrapper-server",
        "wrapper_server_evaluations",
        ("outcome", "ok"),
    );
    assert!(
        calls.is_some_and(|p| p.value == 1.0),
        "{}\nlogs:\n{}",
        show_points(&points),
        wrapper.logs()
    );
}

/// An `https` collector with a certificate of its own CA, named by
/// OTEL_EXPORTER_OTLP_CERTIFICATE: the spans arrive over TLS.
#[tokio::test]
async fn spans_reach_a_collector_over_tls() {
    let (receiver, ca) = Receiver::grpc_tls(loopback()).await.expect("receiver");
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).expect("ca");
    let mut cmd = Command::new(bin("wrapper-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"])
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.https_endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca_file)
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let wrapper = Wrapper::start_command(cmd, &[], &["cat"]).expect("wrapper-server starts");
    call_with_traceparent(&wrapper, "cat")
        .await
        .expect("the call succeeds");
    let spans = receiver
        .wait_for(WAIT, |s| named(s, "wrapper-server", CALL).is_some())
        .await;
    let call = named(&spans, "wrapper-server", CALL).unwrap_or_else(|| {
        panic!(
            "no span over TLS:\n{}\nlogs:\n{}",
            show(&spans),
            wrapper.logs()
        )
    });
    assert_eq!(call.trace_id, TRACE_ID);
}
