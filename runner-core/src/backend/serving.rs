//! Whether a started pod serves: its wrapper's gRPC health service, watched
//! until it says SERVING. Every backend waits on this before it hands a pod
//! out.

use futures::StreamExt;

/// Why a pod's health service did not say SERVING.
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error("bad endpoint {endpoint}: {source}")]
    BadEndpoint {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("connecting to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("health watch on {endpoint}: {source}")]
    Watch {
        endpoint: String,
        #[source]
        source: tonic::Status,
    },
    #[error("health watch on {endpoint} ended before SERVING")]
    WatchEnded { endpoint: String },
}

/// Waits until the health service at `endpoint` says SERVING for `""`, with
/// a Watch stream (the server pushes the change; nothing polls).
pub async fn wait_serving(endpoint: &str) -> Result<(), ServingError> {
    use proto::health::{HealthCheckRequest, HealthClient, ServingStatus};
    let watch_failed = |source| ServingError::Watch {
        endpoint: endpoint.to_string(),
        source,
    };
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|source| ServingError::BadEndpoint {
            endpoint: endpoint.to_string(),
            source,
        })?
        .connect()
        .await
        .map_err(|source| ServingError::Connect {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let mut stream = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map_err(watch_failed)?
        .into_inner();
    while let Some(msg) = stream.next().await {
        let msg = msg.map_err(watch_failed)?;
        if msg.status == ServingStatus::Serving as i32 {
            return Ok(());
        }
    }
    Err(ServingError::WatchEnded {
        endpoint: endpoint.to_string(),
    })
}
