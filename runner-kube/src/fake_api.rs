//! A fake Kubernetes API server for the kube backend's fault tests: kube-rs's
//! `tower_test` mock service behind a real [`kube::Client`], so that a test
//! sees the backend's requests one by one and answers them with the faults a
//! real API server does not produce on demand (lost create races, 5xx, 410
//! Gone, answers that never come).
//!
//! What the tests do not look at is answered here, as a real server would:
//! the template watch (no PodTemplate, so the built-in template), the
//! Endpoints waits of the Service dial (every Service lists [`POD_IP`]; the
//! fault tests dial by IP) and the pod watch, whose
//! contents and faults the test drives ([`FakeApi::apply_pod`],
//! [`FakeApi::expire_pod_watch`]). Every other request (creates, reads,
//! patches and deletes of Pods and Services) goes to the test
//! ([`FakeApi::expect`]), which asserts it and answers it.
//!
//! The client carries the retry layer of the client the runner builds from
//! its kubeconfig (429, 503 and 504 are retried), so a test sees what the
//! runner would send.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::retry::RetryPolicy;
use kube::client::Body;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tower_test::mock::{self, SendResponse};

/// The body of the fake's answers: whole, or a watch stream.
pub(crate) type FakeBody = UnsyncBoxBody<Bytes, Infallible>;
type Frames = mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>;

/// The address every Endpoints object lists: the tests' pods have it.
pub(crate) const POD_IP: &str = "10.1.2.3";

/// How long a test waits for a request it expects. The tests run on
/// tokio's paused clock, which moves only once every task is idle, so this
/// passes (at once, in real time) only when the backend sends nothing more.
const EXPECT_WITHIN: Duration = Duration::from_secs(30);
/// How long nothing must come for [`FakeApi::quiet`].
const QUIET_FOR: Duration = Duration::from_secs(5);

/// A request the test answers.
pub(crate) struct Call {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The JSON body; `Null` when empty.
    pub body: Value,
    reply: SendResponse<Response<FakeBody>>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}?{} {}",
            self.method, self.path, self.query, self.body
        )
    }
}

impl Call {
    /// Answers with `code` and the JSON `body`.
    pub fn answer(self, code: u16, body: Value) {
        self.reply.send_response(json_response(code, &body));
    }

    /// Answers with a failure `Status`, as the API server does.
    pub fn fail(self, code: u16, reason: &str, message: &str) {
        self.reply.send_response(failure(code, reason, message));
    }

    /// Never answers while the returned value is kept.
    pub fn hold(self) -> SendResponse<Response<FakeBody>> {
        self.reply
    }
}

/// An answer with a failure `Status`.
pub(crate) fn failure(code: u16, reason: &str, message: &str) -> Response<FakeBody> {
    json_response(code, &status(code, reason, message))
}

/// A failure `Status` object.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": reason, "message": message, "code": code,
    })
}

/// How the pod watch's resourceVersion expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// As the API server does: the open watch gets an ERROR event with a
    /// 410 Status and ends, and so does a new watch from that version.
    ErrorEvent,
    /// The open watch ends, and a new watch from that version is answered
    /// with HTTP 410 (some proxies and aggregated servers).
    HttpGone,
}

/// The pod watch as the server keeps it.
#[derive(Default)]
struct PodWatch {
    /// What a list answers.
    pods: BTreeMap<String, Value>,
    /// The last resourceVersion given out.
    version: u64,
    /// Every event (version, line), replayed to a watch that starts from
    /// an earlier version.
    history: Vec<(u64, String)>,
    /// The open watch.
    stream: Option<Frames>,
    /// Watches from a version below this are expired, and how.
    expired: Option<(u64, Expiry)>,
}

impl PodWatch {
    fn send(&mut self, line: &str) {
        if let Some(stream) = &self.stream {
            let frame = Frame::data(Bytes::from(format!("{line}\n")));
            if stream.send(Ok(frame)).is_err() {
                self.stream = None;
            }
        }
    }
}

struct Shared {
    pods: Mutex<PodWatch>,
    /// Every request, `METHOD path?query`, in arrival order.
    log: Mutex<Vec<String>>,
    /// How many times the pods were listed.
    pod_lists: watch::Sender<u32>,
    /// The Events published, as sent.
    events: Mutex<Vec<Value>>,
}

impl Shared {
    fn pods(&self) -> MutexGuard<'_, PodWatch> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The test's side of the fake.
pub(crate) struct FakeApi {
    calls: mpsc::UnboundedReceiver<Call>,
    shared: Arc<Shared>,
    pod_lists: watch::Receiver<u32>,
}

/// A client talking to a new fake, and the fake.
pub(crate) fn fake_api() -> (kube::Client, FakeApi) {
    let (service, handle) = mock::pair::<Request<Body>, Response<FakeBody>>();
    let service = tower::ServiceBuilder::new()
        .layer(tower::retry::RetryLayer::new(RetryPolicy::server_retry()))
        .service(service);
    let client = kube::Client::new(service, "default");
    let (calls_tx, calls) = mpsc::unbounded_channel();
    let (lists_tx, pod_lists) = watch::channel(0);
    let shared = Arc::new(Shared {
        pods: Mutex::new(PodWatch::default()),
        log: Mutex::new(Vec::new()),
        pod_lists: lists_tx,
        events: Mutex::new(Vec::new()),
    });
    tokio::spawn(serve(handle, Arc::clone(&shared), calls_tx));
    let api = FakeApi {
        calls,
        shared,
        pod_lists,
    };
    (client, api)
}

impl FakeApi {
    /// The reasons of the Events published so far, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.shared
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The next request for the test; `what` names the one expected.
    pub async fn next(&mut self, what: &str) -> Call {
        match tokio::time::timeout(EXPECT_WITHIN, self.calls.recv()).await {
            Ok(Some(call)) => call,
            Ok(None) => panic!("expected {what}, but the client is gone"),
            Err(_) => panic!(
                "expected {what}, but the backend sent nothing more; requests so far:\n{}",
                self.log().join("\n")
            ),
        }
    }

    /// The next request, if the client is still there.
    pub async fn next_opt(&mut self) -> Option<Call> {
        self.calls.recv().await
    }

    /// The next request, which must be `method path`.
    pub async fn expect(&mut self, method: &str, path: &str) -> Call {
        let call = self.next(&format!("{method} {path}")).await;
        assert_eq!(
            (call.method.as_str(), call.path.as_str()),
            (method, path),
            "expected {method} {path}, got {call:?}"
        );
        call
    }

    /// The next requests, in any order (the backend sends some from
    /// background tasks): one per `(method, path)`, in that order.
    pub async fn expect_each(&mut self, wanted: &[(&str, &str)]) -> Vec<Call> {
        let mut found: Vec<Option<Call>> = wanted.iter().map(|_| None).collect();
        for _ in wanted {
            let missing: Vec<String> = wanted
                .iter()
                .zip(&found)
                .filter(|(_, f)| f.is_none())
                .map(|((m, p), _)| format!("{m} {p}"))
                .collect();
            let call = self.next(&missing.join(" and ")).await;
            let slot = wanted.iter().zip(&found).position(|((m, p), f)| {
                f.is_none() && call.method.as_str() == *m && call.path == *p
            });
            let Some(slot) = slot else {
                panic!("expected {}, got {call:?}", missing.join(" and "));
            };
            found[slot] = Some(call);
        }
        found.into_iter().flatten().collect()
    }

    /// Asserts that the backend sends no request the test would answer
    /// (until every task is idle; see [`EXPECT_WITHIN`]).
    pub async fn quiet(&mut self) {
        if let Ok(Some(call)) = tokio::time::timeout(QUIET_FOR, self.calls.recv()).await {
            panic!("expected no more requests, got {call:?}");
        }
    }

    /// Every request so far, `METHOD path?query`.
    pub fn log(&self) -> Vec<String> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds or changes a pod (`ADDED` or `MODIFIED`): in the list, and as
    /// an event on the pod watch. Gives it a resourceVersion; returns it
    /// as stored.
    pub fn apply_pod(&self, kind: &str, mut pod: Value) -> Value {
        let mut pods = self.shared.pods();
        pods.version += 1;
        let version = pods.version;
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pods.pods.insert(name, pod.clone());
        let line = json!({"type": kind, "object": pod}).to_string();
        pods.history.push((version, line.clone()));
        pods.send(&line);
        pod
    }

    /// The pod `name` as last applied.
    pub fn pod(&self, name: &str) -> Option<Value> {
        self.shared.pods().pods.get(name).cloned()
    }

    /// Removes a pod without any event: deleted while the watch was down.
    pub fn forget_pod(&self, name: &str) {
        let mut pods = self.shared.pods();
        pods.version += 1;
        pods.pods.remove(name);
    }

    /// Expires every resourceVersion given out so far (etcd compacted):
    /// the open watch ends, and the watcher must list again.
    pub fn expire_pod_watch(&self, how: Expiry) {
        let mut pods = self.shared.pods();
        pods.version += 1;
        pods.expired = Some((pods.version, how));
        if how == Expiry::ErrorEvent {
            pods.send(&expired_event());
        }
        pods.stream = None;
    }

    /// Waits until the pods were listed `count` times in all.
    pub async fn pod_lists(&mut self, count: u32) {
        let listed = self.pod_lists.wait_for(|n| *n >= count);
        let listed = matches!(tokio::time::timeout(EXPECT_WITHIN, listed).await, Ok(Ok(_)));
        if !listed {
            panic!(
                "expected list number {count} of the pods; requests so far:\n{}",
                self.log().join("\n")
            );
        }
    }
}

fn expired_event() -> String {
    let gone = status(
        410,
        "Expired",
        "The resourceVersion for the provided watch is too old.",
    );
    json!({"type": "ERROR", "object": gone}).to_string()
}

fn json_response(code: u16, body: &Value) -> Response<FakeBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed_unsync());
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT);
    response
}

/// A watch that stays open and quiet.
fn quiet_watch() -> Response<FakeBody> {
    let stream = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
    Response::new(StreamBody::new(stream).boxed_unsync())
}

fn list(kind: &str, version: u64, items: Vec<Value>) -> Response<FakeBody> {
    json_response(
        200,
        &json!({
            "kind": kind, "apiVersion": "v1",
            "metadata": {"resourceVersion": version.to_string()},
            "items": items,
        }),
    )
}

/// A query parameter, percent-decoded.
fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| decode(v))
    })
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Answers the plumbing, hands the rest to the test; ends with the client.
async fn serve(
    mut handle: mock::Handle<Request<Body>, Response<FakeBody>>,
    shared: Arc<Shared>,
    calls: mpsc::UnboundedSender<Call>,
) {
    while let Some((request, reply)) = handle.next_request().await {
        let (parts, body) = request.into_parts();
        let body = body.collect_bytes().await.unwrap_or_default();
        let path = parts.uri.path().to_string();
        let query = parts.uri.query().unwrap_or_default().to_string();
        shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("{} {path}?{query}", parts.method));
        // /api/v1/namespaces/NS/KIND[/NAME]
        let segments: Vec<&str> = path.split('/').collect();
        let collection = segments.len() == 6;
        let kind = segments.get(5).copied().unwrap_or_default();
        let watching = param(&query, "watch").as_deref() == Some("true");
        // Events: published in the background, never awaited by a pod's
        // life; answered as stored, and counted for the tests that ask.
        if path.starts_with("/apis/events.k8s.io/") {
            shared
                .events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            reply.send_response(json_response(
                201,
                &serde_json::from_slice(&body).unwrap_or(Value::Null),
            ));
            continue;
        }
        // Porch's ServiceTemplate (the template's optional Service): none
        // here.
        if parts.method == Method::GET && path.ends_with("/servicetemplates") {
            reply.send_response(if watching {
                quiet_watch()
            } else {
                list("ServiceTemplateList", 1, Vec::new())
            });
            continue;
        }
        // Idle pools' pods (the backend's second pod watch): none here.
        let pools =
            param(&query, "labelSelector").is_some_and(|s| s.starts_with("fn.kpt.dev/pool"));
        if parts.method == Method::GET && collection && kind == "pods" && pools {
            reply.send_response(if watching {
                quiet_watch()
            } else {
                list("PodList", 1, Vec::new())
            });
            continue;
        }
        if parts.method == Method::GET && collection {
            match (kind, watching) {
                ("podtemplates", false) => {
                    reply.send_response(list("PodTemplateList", 1, Vec::new()));
                    continue;
                }
                ("podtemplates" | "endpoints", true) => {
                    reply.send_response(quiet_watch());
                    continue;
                }
                ("endpoints", false) => {
                    let selector = param(&query, "fieldSelector").unwrap_or_default();
                    let name = selector.strip_prefix("metadata.name=").unwrap_or_default();
                    let endpoints = json!({
                        "metadata": {"name": name, "resourceVersion": "1"},
                        "subsets": [{"addresses": [{"ip": POD_IP}]}],
                    });
                    reply.send_response(list("EndpointsList", 1, vec![endpoints]));
                    continue;
                }
                ("pods", false) => {
                    let answer = {
                        let pods = shared.pods();
                        list(
                            "PodList",
                            pods.version,
                            pods.pods.values().cloned().collect(),
                        )
                    };
                    shared.pod_lists.send_modify(|n| *n += 1);
                    reply.send_response(answer);
                    continue;
                }
                ("pods", true) => {
                    let from: u64 = param(&query, "resourceVersion")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    reply.send_response(pod_watch(&mut shared.pods(), from));
                    continue;
                }
                _ => {}
            }
        }
        let call = Call {
            method: parts.method,
            path,
            query,
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            reply,
        };
        // A test that has ended dropped its receiver: nothing to answer.
        let _ = calls.send(call);
    }
}

/// A pod watch from resourceVersion `from`: the events since, then live
/// ones; or the expiry.
fn pod_watch(pods: &mut PodWatch, from: u64) -> Response<FakeBody> {
    if let Some((below, how)) = pods.expired {
        if from < below {
            return match how {
                Expiry::HttpGone => {
                    json_response(410, &status(410, "Expired", "too old resource version"))
                }
                Expiry::ErrorEvent => {
                    let line = format!("{}\n", expired_event());
                    json_response_lines(line)
                }
            };
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    for (_, line) in pods.history.iter().filter(|(v, _)| *v > from) {
        let _ = tx.send(Ok(Frame::data(Bytes::from(format!("{line}\n")))));
    }
    pods.stream = Some(tx);
    Response::new(StreamBody::new(UnboundedReceiverStream::new(rx)).boxed_unsync())
}

/// A watch answer that is these lines, then ends.
fn json_response_lines(lines: String) -> Response<FakeBody> {
    Response::new(Full::new(Bytes::from(lines)).boxed_unsync())
}
