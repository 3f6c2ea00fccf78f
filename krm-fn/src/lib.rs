//! What the binaries share for running a KRM function call.
//!
//! - [`exec`]: runs one function process per call: stdin in, stdout and
//!   stderr out, every process it started killed when the call ends;
//! - [`call`]: one EvaluateFunction call: admission, deadline, the answer
//!   and its errors, and the one mapping from errors to gRPC statuses;
//! - [`evaluator`]: the [`evaluator::Evaluator`] trait, one strategy for
//!   running a function for a request (the runner chains several; `eval` and
//!   `render` hand one to the package pipeline), and its errors;
//! - [`drain`]: the graceful drain of calls in progress;
//! - [`server`]: `evaluator.FunctionEvaluator` and gRPC health on one port;
//! - [`metrics`]: the Prometheus endpoint;
//! - [`duration`]: Go's `time.Duration` syntax, for flags and configs;
//! - [`error_chain`]: an error and its causes, each said once;
//! - [`cli`]: what both binaries add to clap's errors.
//!
//! All but `duration` need the default `runtime` feature.

// Denied, not forbidden: one `pre_exec` (exec.rs, a pre-spawned process's
// own session) needs it, and says why it is sound.
#![deny(unsafe_code)]

#[cfg(feature = "runtime")]
pub mod call;
#[cfg(feature = "runtime")]
pub mod cli;
#[cfg(feature = "runtime")]
pub mod drain;
pub mod duration;
#[cfg(feature = "runtime")]
pub mod evaluator;
#[cfg(feature = "runtime")]
pub mod exec;
#[cfg(feature = "runtime")]
pub mod metrics;
#[cfg(feature = "runtime")]
pub mod prespawn;
#[cfg(feature = "runtime")]
pub mod server;

/// `err` and its causes joined with `: `, each said once: a cause whose
/// words the message already holds (thiserror messages often quote their
/// source, which is also their `source()`) is not repeated.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !out.contains(&said) {
            out.push_str(": ");
            out.push_str(&said);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod chain_tests {
    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);

    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = E("No such file", None);
        let read = E("reading x: No such file", Some(Box::new(io)));
        let top = E(
            "--process-functions: reading x: No such file",
            Some(Box::new(read)),
        );
        assert_eq!(
            super::error_chain(&top),
            "--process-functions: reading x: No such file"
        );
        let top = E(
            "starting",
            Some(Box::new(E(
                "reading x",
                Some(Box::new(E("No such file", None))),
            ))),
        );
        assert_eq!(
            super::error_chain(&top),
            "starting: reading x: No such file"
        );
    }
}
