//! The wire protocol between Porch, the function runner and the function pods.
//!
//! `pb` is the generated code of `evaluator.proto` (package `evaluator`);
//! `health` re-exports the standard `grpc.health.v1` protocol from tonic-health.

#![forbid(unsafe_code)]

/// Generated messages, client and server of the `evaluator` package.
pub mod pb {
    #![allow(clippy::all, missing_docs, rust_2018_idioms)]
    tonic::include_proto!("evaluator");
}

/// The gRPC health checking protocol (`grpc.health.v1.Health`).
pub mod health {
    pub use tonic_health::pb::health_check_response::ServingStatus;
    pub use tonic_health::pb::health_client::HealthClient;
    pub use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
    pub use tonic_health::server::{health_reporter, HealthReporter, HealthService};
}

/// The full name of the evaluator service, as used by health checks.
pub const EVALUATOR_SERVICE: &str = "evaluator.FunctionEvaluator";

/// Porch's default message size limit (6 MiB), for both directions.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 6 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::pb;
    use prost::Message;

    #[test]
    fn field_numbers_match_porch() {
        let req = pb::EvaluateFunctionRequest {
            resource_list: b"rl".to_vec().into(),
            image: "img".into(),
            tag: ">=1".into(),
        };
        // tag 1 (len-delimited) = 0x0a, tag 2 = 0x12, tag 3 = 0x1a
        let bytes = req.encode_to_vec();
        assert_eq!(bytes, b"\x0a\x02rl\x12\x03img\x1a\x03>=1");
    }

    #[test]
    fn unknown_fields_are_ignored() {
        // Field 3 (tag) as known, plus an unknown field 9 (varint) and 10 (bytes).
        let mut bytes = b"\x0a\x02rl\x12\x03img".to_vec();
        bytes.extend_from_slice(b"\x48\x07\x52\x02hi");
        let req = pb::EvaluateFunctionRequest::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(&req.resource_list[..], b"rl");
        assert_eq!(req.image, "img");
        assert_eq!(req.tag, "");
    }

    #[test]
    fn response_field_numbers() {
        let resp = pb::EvaluateFunctionResponse {
            resource_list: b"a".to_vec().into(),
            log: b"b".to_vec().into(),
        };
        assert_eq!(resp.encode_to_vec(), b"\x0a\x01a\x12\x01b");
    }
}
