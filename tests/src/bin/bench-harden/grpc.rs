//! Calls through tonic: clients, requests, outcomes by code, health checks.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::anyhow;
use bytes::Bytes;
use proto::health::{HealthCheckRequest, HealthClient};
use proto::pb::{EvaluateFunctionRequest, EvaluateFunctionResponse};

use super::Client;

pub(super) async fn connect(endpoint: &str) -> anyhow::Result<Client> {
    tokio::time::timeout(
        Duration::from_secs(10),
        e2e_tests::evaluator_client(endpoint, 64 << 20),
    )
    .await
    .map_err(|_| anyhow!("connecting to {endpoint}: no connection within 10 s"))?
}

pub(super) fn small_rl() -> Bytes {
    Bytes::from(e2e_tests::resource_list(2))
}

pub(super) fn request(rl: &Bytes, image: &str) -> EvaluateFunctionRequest {
    EvaluateFunctionRequest {
        resource_list: rl.clone(),
        image: image.into(),
        tag: String::new(),
    }
}

#[derive(Debug, Clone)]
pub(super) struct Fail {
    pub(super) code: String,
    pub(super) message: String,
}

/// One call with a deadline of `limit` (sent as `grpc-timeout`, and
/// enforced here too).
pub(super) async fn call(
    client: &mut Client,
    req: EvaluateFunctionRequest,
    limit: Duration,
) -> Result<EvaluateFunctionResponse, Fail> {
    let mut r = tonic::Request::new(req);
    r.set_timeout(limit);
    match tokio::time::timeout(limit + Duration::from_secs(2), client.evaluate_function(r)).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(st)) => Err(Fail {
            code: code_name(st.code() as i32),
            message: st.message().to_string(),
        }),
        Err(_) => Err(Fail {
            code: "no answer (client timeout)".into(),
            message: String::new(),
        }),
    }
}

pub(super) fn code_name(c: i32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(c)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("code {c}"), |n| (*n).to_string())
}

/// Counts by label, with the first message seen for each.
#[derive(Debug, Default, Clone)]
pub(super) struct Hist(pub(super) BTreeMap<String, (usize, String)>);

impl Hist {
    pub(super) fn add(&mut self, label: &str, message: &str) {
        let e = self
            .0
            .entry(label.to_string())
            .or_insert_with(|| (0, short(message, 100)));
        e.0 += 1;
    }

    pub(super) fn merge(&mut self, other: Hist) {
        for (k, (n, m)) in other.0 {
            let e = self.0.entry(k).or_insert((0, m));
            e.0 += n;
        }
    }

    pub(super) fn count(&self, label: &str) -> usize {
        self.0.get(label).map_or(0, |e| e.0)
    }

    pub(super) fn total(&self) -> usize {
        self.0.values().map(|e| e.0).sum()
    }

    pub(super) fn show(&self, with_messages: bool) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .iter()
            .map(|(k, (n, m))| {
                if with_messages && !m.is_empty() {
                    format!("{k} ×{n} (first: {m:?})")
                } else {
                    format!("{k} ×{n}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// At most `n` characters of `s`, marked when cut.
pub(super) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// What a health Check on a new connection answers, or why it does not.
pub(super) async fn health_check(endpoint: String) -> String {
    let ep = match tonic::transport::Endpoint::from_shared(endpoint) {
        Ok(ep) => ep
            .connect_timeout(Duration::from_secs(1))
            .timeout(Duration::from_secs(2)),
        Err(err) => return format!("bad endpoint: {err}"),
    };
    let channel = match tokio::time::timeout(Duration::from_secs(3), ep.connect()).await {
        Err(_) => return "connect: no answer within 3 s".into(),
        Ok(Err(err)) => return format!("connect: {}", describe(&err)),
        Ok(Ok(c)) => c,
    };
    let mut health = HealthClient::new(channel);
    let check = health.check(HealthCheckRequest {
        service: String::new(),
    });
    match tokio::time::timeout(Duration::from_secs(3), check).await {
        Err(_) => "Check: no answer within 3 s".into(),
        Ok(Ok(resp)) => match resp.into_inner().status {
            0 => "UNKNOWN".into(),
            1 => "SERVING".into(),
            2 => "NOT_SERVING".into(),
            3 => "SERVICE_UNKNOWN".into(),
            s => format!("status {s}"),
        },
        Ok(Err(st)) => format!(
            "Check: {} {}",
            code_name(st.code() as i32),
            short(st.message(), 80)
        ),
    }
}

/// "connection refused" when an I/O error of that kind is in the chain, else
/// the chain's messages.
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return "connection refused".into();
            }
        }
        parts.push(e.to_string());
        cur = e.source();
    }
    short(&parts.join(": "), 120)
}
