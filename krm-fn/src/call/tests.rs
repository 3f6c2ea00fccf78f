use bytes::Bytes;
use tonic::{Code, Status};

use super::error::MAX_QUOTED_STDERR;
use super::*;
use crate::exec::ExitStatus;

fn out(code: i32, stdout: &str, stderr: &str) -> Output {
    Output {
        status: ExitStatus::Code(code),
        stdout: Bytes::copy_from_slice(stdout.as_bytes()),
        stderr: Bytes::copy_from_slice(stderr.as_bytes()),
        stderr_truncated: false,
    }
}

fn outcome(image: &str, output: Output, max: usize) -> Result<EvaluateFunctionResponse, CallError> {
    super::outcome(image, output, max)
}

#[test]
fn ok_response_is_stdout_unchanged_and_stderr_as_log() {
    let rl = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
    let resp = outcome("img", out(0, rl, "note\n"), 1 << 20).unwrap();
    assert_eq!(&resp.resource_list[..], rl.as_bytes());
    assert_eq!(&resp.log[..], b"note\n");
}

#[test]
fn log_is_shortened_to_fit_the_message_limit() {
    let rl = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
    let stderr = format!("{}END", "x".repeat(2000));
    let resp = outcome("img", out(0, rl, &stderr), 1000).unwrap();
    assert!(resp.encoded_len() <= 1000);
    assert!(resp.log.ends_with(b"END"));
    assert_eq!(&resp.resource_list[..], rl.as_bytes());
}

#[test]
fn stdout_over_the_message_limit_is_resource_exhausted() {
    let rl = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n# {}\n",
        "x".repeat(2000)
    );
    let err = outcome("img", out(0, &rl, ""), 1000).unwrap_err();
    assert_eq!(err.outcome(), Outcome::OutputTooLarge);
    assert_eq!(Status::from(err).code(), Code::ResourceExhausted);
}

#[test]
fn long_stderr_is_quoted_by_its_tail() {
    let stderr = format!("{}TAIL", "y".repeat(10_000));
    let status = Status::from(outcome("img", out(1, "", &stderr), 1 << 20).unwrap_err());
    assert!(status.message().len() < MAX_QUOTED_STDERR + 200);
    assert!(status.message().ends_with("TAIL"));
}

#[tokio::test]
async fn deadline_answers_deadline_exceeded_naming_the_image() {
    let entrypoint = ExecSpec::from_argv(["/bin/sh", "-c", "sleep 30"]).unwrap();
    let function = Function::new(entrypoint, 1 << 20, 1 << 20, "--max-output-bytes");
    let started = Instant::now();
    let deadline = deadline::deadline(started, Some(std::time::Duration::from_millis(200)));
    let started = std::time::Instant::now();
    let err = function
        .run("img", Bytes::from_static(b"x"), deadline)
        .await
        .unwrap_err();
    let status = Status::from(err);
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("img"), "{}", status.message());
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn a_draining_gate_refuses_with_unavailable() {
    let gate = Gate::new(None);
    gate.drain().drain().await;
    assert!(gate.drain().is_draining());
    let err = gate.admit().err().unwrap();
    assert_eq!(err.outcome(), Outcome::ShuttingDown);
    assert_eq!(Status::from(err).code(), Code::Unavailable);
    assert_eq!(gate.drain().in_flight(), 0);
}

#[test]
fn a_full_gate_is_resource_exhausted() {
    let gate = Gate::new(Some(1));
    let _first = gate.admit().ok().unwrap();
    let err = gate.admit().err().unwrap();
    assert_eq!(err.outcome(), Outcome::Busy);
    assert_eq!(Status::from(err).code(), Code::ResourceExhausted);
}

#[test]
fn names_are_shown_escaped_and_cut() {
    assert!(matches!(
        shown_name("example.com/fn:v1"),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(shown_name("a\nb\u{1b}[31mc"), "a\\nb\\u{1b}[31mc");
    let long = "x".repeat(65536);
    let shown = shown_name(&long);
    assert!(shown.len() < MAX_SHOWN_NAME + 32, "{}", shown.len());
    assert!(shown.ends_with("…(65536 bytes)"), "{shown}");
}
