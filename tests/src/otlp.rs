//! A real OTLP receiver for the tests: the collector's gRPC trace and
//! metrics services (`opentelemetry.proto.collector.trace.v1.TraceService/
//! Export`, `…metrics.v1.MetricsService/Export`), served by tonic on a TCP
//! port, and the traces' HTTP twin (`POST /v1/traces`, protobuf), keeping
//! every span and metric data point it is sent. It can be told to refuse
//! (as a collector that is overloaded) or to answer slowly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

/// One span as received, flattened with its resource's service name.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_id: String,
    /// SPAN_KIND_* as the proto numbers it (2 server, 3 client).
    pub kind: i32,
    pub attributes: Vec<(String, String)>,
    /// STATUS_CODE_* (2 error).
    pub status: i32,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One metric data point as received, flattened with its metric's name
/// and its resource's service name.
#[derive(Debug, Clone)]
pub struct ReceivedPoint {
    pub service: String,
    pub metric: String,
    /// `sum` (monotonic or not), `gauge`, `histogram`, or another kind.
    pub kind: &'static str,
    pub attributes: Vec<(String, String)>,
    /// The number (a histogram's: its count).
    pub value: f64,
}

impl ReceivedPoint {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    spans: Mutex<Vec<ReceivedSpan>>,
    points: Mutex<Vec<ReceivedPoint>>,
    metric_requests: AtomicU64,
    refuse: AtomicBool,
    delay_ms: AtomicU64,
    requests: AtomicU64,
}

/// A receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Service(Arc<State>);

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.receive(request.into_inner()).await?;
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.receive_metrics(request.into_inner()).await?;
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

fn attributes(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Vec<(String, String)> {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(show).unwrap_or_default(),
            )
        })
        .collect()
}

fn number(point: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint) -> f64 {
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as N;
    match point.value {
        Some(N::AsDouble(d)) => d,
        Some(N::AsInt(i)) => i as f64,
        None => f64::NAN,
    }
}

impl State {
    /// After the delay it was told, the refusal it was told (if any).
    async fn answer_as_told(&self) -> Result<(), tonic::Status> {
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if self.refuse.load(Ordering::SeqCst) {
            return Err(tonic::Status::unavailable("the test receiver refuses"));
        }
        Ok(())
    }

    async fn receive_metrics(
        &self,
        request: ExportMetricsServiceRequest,
    ) -> Result<(), tonic::Status> {
        use opentelemetry_proto::tonic::metrics::v1::metric::Data;
        self.metric_requests.fetch_add(1, Ordering::SeqCst);
        self.answer_as_told().await?;
        let mut out = Vec::new();
        for resource in request.resource_metrics {
            let service = service_of(resource.resource.as_ref());
            for scope in resource.scope_metrics {
                for metric in scope.metrics {
                    let point = |kind: &'static str,
                                 attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
                                 value: f64| ReceivedPoint {
                        service: service.clone(),
                        metric: metric.name.clone(),
                        kind,
                        attributes: attributes(attrs),
                        value,
                    };
                    match &metric.data {
                        Some(Data::Sum(sum)) => out.extend(
                            sum.data_points
                                .iter()
                                .map(|p| point("sum", &p.attributes, number(p))),
                        ),
                        Some(Data::Gauge(gauge)) => out.extend(
                            gauge
                                .data_points
                                .iter()
                                .map(|p| point("gauge", &p.attributes, number(p))),
                        ),
                        Some(Data::Histogram(h)) => out.extend(
                            h.data_points
                                .iter()
                                .map(|p| point("histogram", &p.attributes, p.count as f64)),
                        ),
                        Some(_) | None => out.push(point("other", &[], f64::NAN)),
                    }
                }
            }
        }
        if let Ok(mut points) = self.points.lock() {
            points.extend(out);
        }
        Ok(())
    }

    async fn receive(&self, request: ExportTraceServiceRequest) -> Result<(), tonic::Status> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.answer_as_told().await?;
        let mut out = Vec::new();
        for resource in request.resource_spans {
            let service = service_of(resource.resource.as_ref());
            for scope in resource.scope_spans {
                for span in scope.spans {
                    out.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_id: hex(&span.parent_span_id),
                        kind: span.kind,
                        attributes: span
                            .attributes
                            .iter()
                            .map(|kv| {
                                (
                                    kv.key.clone(),
                                    kv.value.as_ref().map(show).unwrap_or_default(),
                                )
                            })
                            .collect(),
                        status: span.status.map_or(0, |s| s.code),
                    });
                }
            }
        }
        if let Ok(mut spans) = self.spans.lock() {
            spans.extend(out);
        }
        Ok(())
    }
}

fn show(value: &opentelemetry_proto::tonic::common::v1::AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// A resource's `service.name`.
fn service_of(resource: Option<&opentelemetry_proto::tonic::resource::v1::Resource>) -> String {
    resource
        .iter()
        .flat_map(|r| r.attributes.iter())
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.as_ref())
        .map(show)
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Receiver {
    /// Serves OTLP/gRPC on `bind` (port 0: any).
    pub async fn grpc(bind: SocketAddr) -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let service = TraceServiceServer::new(Service(state.clone()));
        let metrics = MetricsServiceServer::new(Service(state.clone()));
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .add_service(metrics)
                .serve_with_incoming(incoming)
                .await;
        });
        Ok(Receiver { addr, state, task })
    }

    /// Serves OTLP/gRPC over TLS on `bind`, with a server certificate for
    /// `127.0.0.1` and `localhost` from a CA made here; the CA's PEM, for
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`.
    pub async fn grpc_tls(bind: SocketAddr) -> anyhow::Result<(Receiver, String)> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
            .signed_by(&key, &issuer)?;
        let identity = tonic::transport::Identity::from_pem(cert.pem(), key.serialize_pem());
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        // As a collector: gzip accepted (OTEL_EXPORTER_OTLP_COMPRESSION).
        let service = TraceServiceServer::new(Service(state.clone()))
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
        let mut server = tonic::transport::Server::builder()
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = server
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        Ok((Receiver { addr, state, task }, ca.pem()))
    }

    /// `https://ADDR`, for a receiver made by [`Receiver::grpc_tls`].
    pub fn https_endpoint(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Serves OTLP/HTTP with protobuf bodies (`POST /v1/traces`) on `bind`.
    pub async fn http(bind: SocketAddr) -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let serving = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = serving.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let state = state.clone();
                            async move {
                                use http_body_util::BodyExt as _;
                                let path_ok = req.uri().path() == "/v1/traces";
                                let body = req.into_body().collect().await?.to_bytes();
                                let status = match ExportTraceServiceRequest::decode(body) {
                                    Ok(request) if path_ok => match state.receive(request).await {
                                        Ok(()) => 200,
                                        Err(_) => 503,
                                    },
                                    _ => 400,
                                };
                                let reply = ExportTraceServiceResponse::default().encode_to_vec();
                                let mut resp = hyper::Response::new(http_body_util::Full::new(
                                    bytes::Bytes::from(reply),
                                ));
                                *resp.status_mut() =
                                    hyper::StatusCode::from_u16(status).unwrap_or_default();
                                resp.headers_mut().insert(
                                    "content-type",
                                    http::HeaderValue::from_static("application/x-protobuf"),
                                );
                                Ok::<_, hyper::Error>(resp)
                            }
                        },
                    );
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Ok(Receiver { addr, state, task })
    }

    /// `http://ADDR`, for OTEL_EXPORTER_OTLP_ENDPOINT.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.state
            .spans
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Span export requests received (refused ones included).
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Every metric data point received so far (gRPC only).
    pub fn points(&self) -> Vec<ReceivedPoint> {
        self.state
            .points
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Metrics export requests received (refused ones included).
    pub fn metric_requests(&self) -> u64 {
        self.state.metric_requests.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until the data points received satisfy `done`;
    /// returns them.
    pub async fn wait_for_points(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&[ReceivedPoint]) -> bool,
    ) -> Vec<ReceivedPoint> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let points = self.points();
            if done(&points) || tokio::time::Instant::now() >= deadline {
                return points;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Refuse every export from now (UNAVAILABLE / 503), or accept again.
    pub fn refuse(&self, refuse: bool) {
        self.state.refuse.store(refuse, Ordering::SeqCst);
    }

    /// Answer each export only after `delay`.
    pub fn delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Waits (bounded) until the spans received satisfy `done`; returns them.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || tokio::time::Instant::now() >= deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
