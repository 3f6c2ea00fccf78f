use super::*;
use crate::metrics::Metrics;
use crate::server::{ServerConfig, Wrapper};
use e2e_tests::eventually;
use krm_fn::exec::ExecSpec;
use proto::pb::EvaluateFunctionRequest;
use std::time::Duration;
use tonic::Code;

const RL: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";

/// A 1 MiB limit both ways, no concurrency cap.
fn config(entrypoint: ExecSpec) -> ServerConfig {
    ServerConfig {
        entrypoint,
        max_message_bytes: 1 << 20,
        max_output_bytes: 1 << 20,
        max_concurrent: None,
        shutdown_grace: Duration::from_secs(20),
        request_read_timeout: Duration::from_secs(30),
    }
}

fn inner(script: &str) -> Arc<Service> {
    let entrypoint = ExecSpec::from_argv(["/bin/sh", "-c", script]).unwrap();
    Wrapper::new(config(entrypoint), Arc::new(Metrics::new())).service()
}

/// A gRPC-framed message.
fn framed(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn post(body: Body) -> http::Request<Body> {
    http::Request::builder()
        .method("POST")
        .uri(EVALUATE_PATH)
        .body(body)
        .unwrap()
}

/// A request whose body arrives in DATA frames of `frame` bytes.
fn request(body: Vec<u8>, frame: usize) -> http::Request<Body> {
    let frames: Vec<Result<Frame<Bytes>, Status>> = body
        .chunks(frame)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    post(Body::new(StreamBody::new(futures::stream::iter(frames))))
}

type FrameSender = tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Status>>;

/// A request whose body frames (or error) the test sends when it likes.
fn open_request() -> (FrameSender, http::Request<Body>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let body = tokio_stream::wrappers::ReceiverStream::new(rx);
    (tx, post(Body::new(StreamBody::new(body))))
}

/// The answer: the decoded message, or the status.
async fn answer(resp: http::Response<Body>) -> Result<EvaluateFunctionResponse, Status> {
    if let Some(status) = Status::from_header_map(resp.headers()) {
        if status.code() != Code::Ok {
            return Err(status);
        }
    }
    let collected = resp.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap();
    let status = Status::from_header_map(&trailers).unwrap();
    if status.code() != Code::Ok {
        return Err(status);
    }
    let bytes = collected.to_bytes();
    assert_eq!(bytes[0], 0);
    let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    assert_eq!(bytes.len(), 5 + len);
    Ok(EvaluateFunctionResponse::decode(bytes.slice(5..)).unwrap())
}

async fn call(
    inner: &Service,
    message: &[u8],
    frame: usize,
) -> Result<EvaluateFunctionResponse, Status> {
    answer(evaluate(inner, request(framed(message), frame)).await).await
}

fn key(field: u8, wire: u8) -> u8 {
    (field << 3) | wire
}

/// A length-delimited field (short values only: one-byte length).
fn field(n: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![key(n, 2), u8::try_from(value.len()).unwrap()];
    out.extend_from_slice(value);
    out
}

#[tokio::test]
async fn any_frame_split_streams_the_resource_list_through() {
    let inner = inner("cat");
    let req = EvaluateFunctionRequest {
        resource_list: Bytes::from(format!("{RL}{}", "# padding\n".repeat(200))),
        image: "example.com/fn:v1".into(),
        tag: String::new(),
    };
    for frame in [1, 2, 3, 7, 64, 1 << 20] {
        let resp = call(&inner, &req.encode_to_vec(), frame).await.unwrap();
        assert_eq!(resp.resource_list, req.resource_list, "frames of {frame}");
    }
}

#[tokio::test]
async fn fields_before_and_after_and_unknown_ones_are_read() {
    let inner = inner("cat; echo \"$0\" >&2");
    let mut msg = Vec::new();
    msg.extend(field(9, b"from the future"));
    msg.extend([key(10, 0), 0x96, 0x01]); // varint 150
    msg.extend([key(11, 5), 1, 2, 3, 4]); // fixed32
    msg.extend([key(12, 1), 1, 2, 3, 4, 5, 6, 7, 8]); // fixed64
    msg.extend(field(1, RL.as_bytes()));
    msg.extend(field(2, b"example.com/fn:v1"));
    msg.extend(field(3, b">=1.0"));
    let resp = call(&inner, &msg, 5).await.unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
}

#[tokio::test]
async fn image_before_resource_list_names_the_function_in_errors() {
    let inner = inner("cat >/dev/null; echo broken >&2; exit 3");
    let mut msg = field(2, b"example.com/fn:v1");
    msg.extend(field(1, RL.as_bytes()));
    let err = call(&inner, &msg, 4).await.unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(
        err.message().contains("example.com/fn:v1"),
        "{}",
        err.message()
    );
    assert!(err.message().contains("broken"), "{}", err.message());
}

#[tokio::test]
async fn a_deadline_names_the_image_sent_after_the_resource_list() {
    let inner = inner("cat >/dev/null; sleep 30");
    // The order prost, grpc-go and every other encoder write.
    let req = EvaluateFunctionRequest {
        resource_list: Bytes::from_static(RL.as_bytes()),
        image: "example.com/fn:v1".into(),
        tag: String::new(),
    };
    for frame in [4, 1 << 20] {
        let mut request = request(framed(&req.encode_to_vec()), frame);
        request
            .headers_mut()
            .insert("grpc-timeout", http::HeaderValue::from_static("300m"));
        let err = answer(evaluate(&inner, request).await).await.unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert!(
            err.message().contains("example.com/fn:v1"),
            "frames of {frame}: {}",
            err.message()
        );
    }
}

#[tokio::test]
async fn the_last_resource_list_wins() {
    let inner = inner("cat");
    let first = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [] # first\n";
    let mut msg = field(1, first.as_bytes());
    msg.extend(field(2, b"img"));
    msg.extend(field(1, RL.as_bytes()));
    let resp = call(&inner, &msg, 3).await.unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
    // An empty last occurrence wins too.
    let mut msg = field(1, RL.as_bytes());
    msg.extend(field(1, b""));
    let err = call(&inner, &msg, 3).await.unwrap_err();
    assert!(
        err.message().contains("not a ResourceList"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn a_group_before_resource_list_leaves_the_message_to_prost() {
    let inner = inner("cat");
    // Field 7 as a group (start, a varint inside, end), then the list.
    let mut msg = vec![key(7, 3), key(1, 0), 5, key(7, 4)];
    msg.extend(field(1, RL.as_bytes()));
    let resp = call(&inner, &msg, 2).await.unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
}

#[tokio::test]
async fn no_resource_list_runs_the_function_on_empty_stdin() {
    let inner = inner("wc -c >&2; exit 1");
    let err = call(&inner, &field(2, b"img"), 1).await.unwrap_err();
    assert!(err.message().contains("\n0"), "{}", err.message());
}

#[tokio::test]
async fn malformed_requests_are_refused_with_what_was_wrong() {
    let inner = inner("cat");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // resource_list claims more bytes than the message has.
        (vec![key(1, 2), 100, b'a'], "past the end"),
        // A varint that never ends.
        (
            [key(10, 0)].into_iter().chain([0xff; 11]).collect(),
            "invalid varint",
        ),
        // A varint over 64 bits.
        (
            [key(10, 0)]
                .into_iter()
                .chain([0xff; 9])
                .chain([0x02])
                .collect(),
            "invalid varint",
        ),
        // image is not UTF-8 (prost's own check, after the list ran).
        (
            [field(1, RL.as_bytes()), field(2, &[0xff, 0xfe])].concat(),
            "failed to decode",
        ),
        // resource_list with a wrong wire type.
        (vec![key(1, 0), 5], "failed to decode"),
    ];
    for (msg, want) in cases {
        let err = call(&inner, &msg, 3).await.unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{msg:?}: {err:?}");
        assert!(err.message().contains(want), "{msg:?}: {}", err.message());
    }
}

#[tokio::test]
async fn broken_framing_is_refused() {
    let inner = inner("cat");
    let check = |body: Vec<u8>, code: Code, want: &'static str| {
        let inner = inner.clone();
        async move {
            let err = answer(evaluate(&inner, request(body, 2)).await)
                .await
                .unwrap_err();
            assert_eq!(err.code(), code, "{err:?}");
            assert!(err.message().contains(want), "{}", err.message());
        }
    };
    check(Vec::new(), Code::Internal, "Missing request message").await;
    check(vec![0, 0, 0], Code::Internal, "prefix").await;
    check(vec![1, 0, 0, 0, 1, 0], Code::Internal, "compressed-flag").await;
    // Announced 100 bytes, sent 3.
    check(
        vec![0, 0, 0, 0, 100, key(2, 2), 1, b'x'],
        Code::Internal,
        "ended",
    )
    .await;
    // Over --max-request-body-size (1 MiB here): refused from the prefix.
    check(
        vec![0, 0, 0x20, 0, 0],
        Code::ResourceExhausted,
        "--max-request-body-size",
    )
    .await;
}

#[tokio::test]
async fn a_function_that_ignores_stdin_answers_while_the_body_streams() {
    let inner = inner(&format!("printf '{}'", RL.replace('\n', "\\n")));
    let req = EvaluateFunctionRequest {
        resource_list: Bytes::from(vec![b'#'; 900 * 1024]),
        image: "img".into(),
        tag: String::new(),
    };
    let resp = call(&inner, &req.encode_to_vec(), 16 * 1024).await.unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
}

#[tokio::test]
async fn a_client_that_breaks_off_kills_the_function() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let entrypoint = ExecSpec {
        env: vec![("PIDFILE".into(), pidfile.clone().into())],
        ..ExecSpec::from_argv([
            "/bin/sh",
            "-c",
            "echo $$ > \"$PIDFILE\"; cat >/dev/null; sleep 30",
        ])
        .unwrap()
    };
    let inner = Wrapper::new(config(entrypoint), Arc::new(Metrics::new())).service();
    // The list's header and a few bytes, then the stream fails.
    let (tx, req) = open_request();
    let mut head = vec![0, 0, 0, 0, 110, key(1, 2), 100];
    head.extend_from_slice(b"apiVersion: v1\n");
    tx.send(Ok(Frame::data(Bytes::from(head)))).await.unwrap();
    let call = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    let mut pid = None;
    eventually(Duration::from_secs(10), || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        pid.is_some()
    })
    .await;
    let pid = pid.expect("the function started while the body was still arriving");
    tx.send(Err(Status::cancelled("client went away")))
        .await
        .unwrap();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Cancelled, "{err:?}");
    // The process group is gone (killed, then reaped by a task).
    let proc_dir = format!("/proc/{pid}");
    let gone = eventually(Duration::from_secs(10), || {
        !std::path::Path::new(&proc_dir).exists()
    })
    .await;
    assert!(gone, "function process {pid} survived");
}

#[tokio::test]
async fn a_stalled_upload_holds_no_slot_and_does_not_keep_a_drain_waiting() {
    let config = ServerConfig {
        max_concurrent: Some(1),
        ..config(ExecSpec::from_argv(["cat"]).unwrap())
    };
    let wrapper = Wrapper::new(config, Arc::new(Metrics::new()));
    let inner = wrapper.service();
    let (tx, req) = open_request();
    // Only the message prefix arrives; the ResourceList does not, yet.
    tx.send(Ok(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 4]))))
        .await
        .unwrap();
    let stalled = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    tokio::task::yield_now().await;
    // The one slot is free for another call meanwhile.
    let resp = call(&inner, &field(1, RL.as_bytes()), 64).await.unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
    // A drain does not wait for the stalled call.
    tokio::time::timeout(Duration::from_secs(10), inner.gate.drain().drain())
        .await
        .expect("the drain waited for a call whose function never started");
    // Its ResourceList arriving after the drain began (if the call has
    // not ended already): refused.
    let rest = Bytes::from(vec![key(1, 2), 2, b'a', b'b']);
    let _ = tx.send(Ok(Frame::data(rest))).await;
    drop(tx);
    let err = stalled.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
}

/// Yields until `check` holds (no time passes: for paused-time tests);
/// whether it did within many turns.
async fn after_turns(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..10_000 {
        if check() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    check()
}

#[tokio::test]
async fn a_trickling_upload_gives_its_slot_back_and_runs_on_its_whole_list() {
    let config = ServerConfig {
        max_concurrent: Some(1),
        ..config(ExecSpec::from_argv(["cat"]).unwrap())
    };
    let inner = Wrapper::new(config, Arc::new(Metrics::new())).service();
    let whole = framed(&field(1, RL.as_bytes()));
    let (tx, req) = open_request();
    // The prefix, the list's header and a first byte of it.
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[..8]))))
        .await
        .unwrap();
    tokio::time::pause();
    let trickling = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 1).await,
        "the upload was not admitted"
    );
    assert!(inner.gate.admit().is_err(), "the slot is not taken");
    // A byte every half second for 3 s: the client is never silent for
    // long, but far below RATE_FLOOR, so it earns next to nothing and
    // uses up STALL_BOUND keeping the function waiting.
    let mut sent = 8;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(
            &whole[sent..sent + 1],
        ))))
        .await
        .unwrap();
        sent += 1;
    }
    // The function was stopped and the slot given back.
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 0).await,
        "the trickling upload still holds its slot"
    );
    drop(
        inner
            .gate
            .admit()
            .expect("the slot is free for another call"),
    );
    // The rest comes: the call is admitted again and answered on all of
    // its ResourceList.
    tokio::time::resume();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[sent..]))))
        .await
        .unwrap();
    drop(tx);
    let resp = trickling.await.unwrap().unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
}

/// A ResourceList of about `kib` KiB (comment lines after [`RL`]).
fn long_list(kib: usize) -> Vec<u8> {
    let mut list = RL.as_bytes().to_vec();
    while list.len() < kib * 1024 {
        list.extend_from_slice(b"# padding, padding, padding\n");
    }
    list
}

#[tokio::test]
async fn a_steady_upload_above_the_rate_keeps_its_slot() {
    let config = ServerConfig {
        max_concurrent: Some(1),
        ..config(ExecSpec::from_argv(["cat"]).unwrap())
    };
    let inner = Wrapper::new(config, Arc::new(Metrics::new())).service();
    let list = long_list(900);
    let mut msg = vec![key(1, 2)];
    prost::encoding::encode_varint(list.len() as u64, &mut msg);
    msg.extend_from_slice(&list);
    let whole = framed(&msg);
    // The prefix, the list's header and a first byte of it.
    let mut sent = whole.len() - list.len() + 1;
    let (tx, req) = open_request();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[..sent]))))
        .await
        .unwrap();
    tokio::time::pause();
    let steady = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 1).await,
        "the upload was not admitted"
    );
    // 8 KiB every 100 ms (80 KiB/s, above RATE_FLOOR) for 11 s, far
    // more than STALL_BOUND spent waiting for the client: the call
    // keeps its slot (and its function) all along.
    while whole.len() - sent > 8 * 1024 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(
            &whole[sent..sent + 8 * 1024],
        ))))
        .await
        .unwrap();
        sent += 8 * 1024;
        assert_eq!(
            inner.gate.drain().in_flight(),
            1,
            "the slot was given back with {sent} bytes sent"
        );
    }
    tokio::time::resume();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[sent..]))))
        .await
        .unwrap();
    drop(tx);
    let resp = steady.await.unwrap().unwrap();
    assert!(resp.resource_list == list);
}

#[tokio::test]
async fn after_a_stall_the_function_runs_once_on_the_last_resource_list() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let entrypoint = ExecSpec {
        env: vec![("RUNS".into(), runs.clone().into())],
        ..ExecSpec::from_argv(["/bin/sh", "-c", "cat; echo ran >>\"$RUNS\""]).unwrap()
    };
    let inner = Wrapper::new(config(entrypoint), Arc::new(Metrics::new())).service();
    let first = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [] # first\n";
    let mut msg = field(1, first.as_bytes());
    msg.extend(field(2, b"img"));
    msg.extend(field(1, RL.as_bytes()));
    let whole = framed(&msg);
    let (tx, req) = open_request();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[..8]))))
        .await
        .unwrap();
    tokio::time::pause();
    let stalled = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 1).await,
        "the upload was not admitted"
    );
    tokio::time::sleep(STALL_BOUND + Duration::from_secs(1)).await;
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 0).await,
        "the stalled upload still holds its slot"
    );
    tokio::time::resume();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(&whole[8..]))))
        .await
        .unwrap();
    drop(tx);
    let resp = stalled.await.unwrap().unwrap();
    assert_eq!(&resp.resource_list[..], RL.as_bytes());
    // The stalled run was killed before its end; the first list was
    // not run again.
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "ran\n");
}

#[tokio::test]
async fn a_drain_ends_an_admitted_call_that_waits_for_its_client() {
    let inner = inner("cat");
    let list = long_list(600);
    let mut msg = vec![key(1, 2)];
    prost::encoding::encode_varint(list.len() as u64, &mut msg);
    msg.extend_from_slice(&list);
    let whole = framed(&msg);
    // Half the list at once: the upload earned MOST_CREDIT, so only the
    // drain can end it within STALL_BOUND.
    let (tx, req) = open_request();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(
        &whole[..whole.len() / 2],
    ))))
    .await
    .unwrap();
    tokio::time::pause();
    let call = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 1).await,
        "the call was not admitted"
    );
    tokio::time::timeout(
        STALL_BOUND + Duration::from_secs(1),
        inner.gate.drain().drain(),
    )
    .await
    .expect("the drain waited for a call whose client sent nothing more");
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    drop(tx);
}

#[tokio::test]
async fn a_drain_waits_for_a_call_held_up_by_its_function() {
    // A function that does not read its input for a while, and an input
    // more than the pipe and the queue hold: the client is held back by
    // the wrapper (flow control), it does not stall. Such a call is work
    // in flight: the drain waits for it (the grace ends it).
    let config = ServerConfig {
        max_message_bytes: 16 << 20,
        ..config(ExecSpec::from_argv(["sleep", "30"]).unwrap())
    };
    let inner = Wrapper::new(config, Arc::new(Metrics::new())).service();
    let list = vec![b'#'; 12 << 20];
    let mut msg = vec![key(1, 2)];
    prost::encoding::encode_varint(list.len() as u64, &mut msg);
    msg.extend_from_slice(&list);
    let whole = Bytes::from(framed(&msg));
    let (tx, req) = open_request();
    tokio::time::pause();
    let sender = tokio::spawn(async move {
        for piece in whole.chunks(256 << 10) {
            let piece = whole.slice_ref(piece);
            if tx.send(Ok(Frame::data(piece))).await.is_err() {
                return;
            }
        }
    });
    let blocked = tokio::spawn({
        let inner = inner.clone();
        async move { answer(evaluate(&inner, req).await).await }
    });
    assert!(
        after_turns(|| inner.gate.drain().in_flight() == 1).await,
        "the call was not admitted"
    );
    let draining = tokio::spawn({
        let drain = inner.gate.drain().clone();
        async move { drain.drain().await }
    });
    // Far past STALL_BOUND (paused time: the function still sleeps).
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        !draining.is_finished() && !blocked.is_finished(),
        "the drain cut a call held up by its function"
    );
    // The call ends (its function killed): the drain is done.
    blocked.abort();
    tokio::time::timeout(Duration::from_secs(5), draining)
        .await
        .expect("the drain waited on after the call ended")
        .unwrap();
    sender.abort();
}

#[tokio::test]
async fn grpc_timeout_bounds_a_stalled_upload() {
    let inner = inner("cat");
    let (_tx, mut req) = open_request();
    req.headers_mut()
        .insert("grpc-timeout", http::HeaderValue::from_static("100m"));
    let err = answer(evaluate(&inner, req).await).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
}

#[tokio::test]
async fn ok_response_is_exactly_the_encoded_message() {
    for (rl, log) in [("rl", "log"), ("rl", ""), ("", "log"), ("", "")] {
        let resp = EvaluateFunctionResponse {
            resource_list: Bytes::from(rl.repeat(100)),
            log: Bytes::from(log),
        };
        let body = ok_response(resp.clone())
            .into_body()
            .collect()
            .await
            .unwrap();
        let trailers = body.trailers().cloned().unwrap();
        assert_eq!(trailers.get("grpc-status").unwrap(), "0");
        let mut want = vec![0];
        want.extend_from_slice(&u32::try_from(resp.encoded_len()).unwrap().to_be_bytes());
        want.extend(resp.encode_to_vec());
        assert_eq!(body.to_bytes(), want, "{rl:?} {log:?}");
    }
}

#[test]
fn only_identity_encoding_is_streamed() {
    let mut h = http::HeaderMap::new();
    assert!(identity_encoding(&h));
    h.insert("grpc-encoding", http::HeaderValue::from_static("identity"));
    assert!(identity_encoding(&h));
    h.insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
    assert!(!identity_encoding(&h));
}
