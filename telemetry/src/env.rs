//! The `OTEL_*` variables this crate reads itself, as the OpenTelemetry
//! specification's "Environment Variable Specification" defines them. The
//! exporter's own (`OTEL_EXPORTER_OTLP_ENDPOINT`, `_HEADERS`, `_TIMEOUT`,
//! `_COMPRESSION`), the sampler's (`OTEL_TRACES_SAMPLER(_ARG)`), the batch
//! processor's (`OTEL_BSP_*`) and the resource's (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`) are read by the SDK, which implements them.
//!
//! A value the runtime cannot honour is refused at start with the variable
//! named: an exporter silently not exporting is the worse failure.

use std::fmt;

/// What the variables ask for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// Span exporters; empty: tracing is off (the default).
    pub traces: Vec<TracesExporter>,
    /// Metrics exporters; `None`: the variable is unset (each binary keeps
    /// its own default).
    pub metrics: Option<Vec<MetricsExporter>>,
    /// The propagators, in order.
    pub propagators: Vec<Propagator>,
}

/// An `OTEL_TRACES_EXPORTER` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracesExporter {
    Otlp(Protocol),
    /// One line per span on stderr (stdout carries data in every binary
    /// here: the address, a package).
    Console,
}

/// An `OTEL_METRICS_EXPORTER` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsExporter {
    /// A pull endpoint at `OTEL_EXPORTER_PROMETHEUS_HOST`:`_PORT`.
    Prometheus { host: String, port: u16 },
    /// Pushed to the OTLP endpoint every `OTEL_METRIC_EXPORT_INTERVAL`.
    Otlp(Protocol),
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL` (or the signal's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
    HttpJson,
}

/// An `OTEL_PROPAGATORS` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagator {
    TraceContext,
    Baggage,
}

/// A variable whose value is not one this runtime implements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
pub struct EnvError {
    pub var: &'static str,
    pub value: String,
    pub reason: String,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        })
    }
}

/// The default port of a Prometheus exporter (the specification's).
pub const PROMETHEUS_PORT: u16 = 9464;

impl Settings {
    /// Reads the process's environment.
    pub fn from_env() -> Result<Settings, EnvError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `var` (tests pass a map).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Settings, EnvError> {
        // Empty counts as unset, as the specification says.
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let disabled =
            var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let propagators = propagators(var("OTEL_PROPAGATORS"))?;
        if disabled {
            return Ok(Settings {
                traces: Vec::new(),
                metrics: None,
                propagators,
            });
        }
        let traces = match var("OTEL_TRACES_EXPORTER") {
            None => Vec::new(),
            Some(value) => {
                let mut out = Vec::new();
                for name in list(&value) {
                    match name.as_str() {
                        "none" => {}
                        "otlp" => out.push(TracesExporter::Otlp(protocol(
                            &var,
                            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                        )?)),
                        "console" => out.push(TracesExporter::Console),
                        other => {
                            return Err(EnvError {
                                var: "OTEL_TRACES_EXPORTER",
                                value: value.clone(),
                                reason: format!(
                                    "{other:?} is not an exporter this runtime has (otlp, console, none)"
                                ),
                            })
                        }
                    }
                }
                // `none` with others is ignored; listed twice is once.
                out.dedup();
                out
            }
        };
        let metrics = match var("OTEL_METRICS_EXPORTER") {
            None => None,
            Some(value) => {
                let mut out = Vec::new();
                for name in list(&value) {
                    match name.as_str() {
                        "none" => {}
                        "prometheus" => {
                            let host = var("OTEL_EXPORTER_PROMETHEUS_HOST")
                                .unwrap_or_else(|| "localhost".to_string());
                            let port = match var("OTEL_EXPORTER_PROMETHEUS_PORT") {
                                None => PROMETHEUS_PORT,
                                Some(p) => p.trim().parse().map_err(|_| EnvError {
                                    var: "OTEL_EXPORTER_PROMETHEUS_PORT",
                                    value: p.clone(),
                                    reason: "not a port number (0-65535)".to_string(),
                                })?,
                            };
                            out.push(MetricsExporter::Prometheus { host, port });
                        }
                        "otlp" => out.push(MetricsExporter::Otlp(protocol(
                            &var,
                            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
                        )?)),
                        other => {
                            return Err(EnvError {
                                var: "OTEL_METRICS_EXPORTER",
                                value: value.clone(),
                                reason: format!(
                                    "{other:?} is not an exporter this runtime has (prometheus, otlp, none)"
                                ),
                            })
                        }
                    }
                }
                out.dedup();
                Some(out)
            }
        };
        Ok(Settings {
            traces,
            metrics,
            propagators,
        })
    }

    /// The Prometheus endpoint the variables ask for, if any.
    pub fn prometheus(&self) -> Option<(&str, u16)> {
        self.metrics.iter().flatten().find_map(|m| match m {
            MetricsExporter::Prometheus { host, port } => Some((host.as_str(), *port)),
            MetricsExporter::Otlp(_) => None,
        })
    }

    /// The OTLP protocol metrics are pushed with, if they are.
    pub fn metrics_otlp(&self) -> Option<Protocol> {
        self.metrics.iter().flatten().find_map(|m| match m {
            MetricsExporter::Otlp(p) => Some(*p),
            MetricsExporter::Prometheus { .. } => None,
        })
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The signal's protocol variable, else the general one, else the
/// specification's default, `http/protobuf`.
fn protocol(
    var: &impl Fn(&str) -> Option<String>,
    signal: &'static str,
) -> Result<Protocol, EnvError> {
    let (name, value) = match var(signal) {
        Some(v) => (signal, v),
        None => match var("OTEL_EXPORTER_OTLP_PROTOCOL") {
            Some(v) => ("OTEL_EXPORTER_OTLP_PROTOCOL", v),
            None => return Ok(Protocol::HttpProtobuf),
        },
    };
    match value.trim() {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" => Ok(Protocol::HttpProtobuf),
        "http/json" => Ok(Protocol::HttpJson),
        _ => Err(EnvError {
            var: name,
            value,
            reason: "not an OTLP protocol (grpc, http/protobuf, http/json)".to_string(),
        }),
    }
}

fn propagators(value: Option<String>) -> Result<Vec<Propagator>, EnvError> {
    let Some(value) = value else {
        return Ok(vec![Propagator::TraceContext, Propagator::Baggage]);
    };
    let mut out = Vec::new();
    for name in list(&value) {
        match name.as_str() {
            "tracecontext" => out.push(Propagator::TraceContext),
            "baggage" => out.push(Propagator::Baggage),
            "none" => {}
            other => {
                return Err(EnvError {
                    var: "OTEL_PROPAGATORS",
                    value: value.clone(),
                    reason: format!(
                    "{other:?} is not a propagator this runtime has (tracecontext, baggage, none)"
                ),
                })
            }
        }
    }
    out.dedup();
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<Settings, EnvError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn nothing_set_is_tracing_off_metrics_unset_and_w3c_propagation() {
        let s = read(&[]).unwrap();
        assert!(s.traces.is_empty());
        assert_eq!(s.metrics, None);
        assert_eq!(
            s.propagators,
            [Propagator::TraceContext, Propagator::Baggage]
        );
        // Empty is unset.
        assert_eq!(read(&[("OTEL_TRACES_EXPORTER", " ")]).unwrap(), s);
    }

    #[test]
    fn exporters_lists_protocols_and_the_prometheus_endpoint() {
        let s = read(&[
            ("OTEL_TRACES_EXPORTER", "OTLP, console,none"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_METRICS_EXPORTER", "prometheus"),
            ("OTEL_EXPORTER_PROMETHEUS_HOST", "0.0.0.0"),
        ])
        .unwrap();
        assert_eq!(
            s.traces,
            [
                TracesExporter::Otlp(Protocol::Grpc),
                TracesExporter::Console
            ]
        );
        assert_eq!(s.prometheus(), Some(("0.0.0.0", 9464)));
        assert_eq!(s.metrics_otlp(), None);
        // The signal's own protocol wins; the default is http/protobuf.
        let s = read(&[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_METRICS_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ])
        .unwrap();
        assert_eq!(s.traces, [TracesExporter::Otlp(Protocol::HttpJson)]);
        assert_eq!(s.metrics_otlp(), Some(Protocol::Grpc));
        let s = read(&[("OTEL_TRACES_EXPORTER", "otlp")]).unwrap();
        assert_eq!(s.traces, [TracesExporter::Otlp(Protocol::HttpProtobuf)]);
        // Porch's function pods: metrics on, traces off.
        let s = read(&[
            ("OTEL_METRICS_EXPORTER", "prometheus"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])
        .unwrap();
        assert!(s.traces.is_empty());
        assert_eq!(s.prometheus(), Some(("localhost", 9464)));
        assert_eq!(
            read(&[("OTEL_METRICS_EXPORTER", "none")]).unwrap().metrics,
            Some(vec![])
        );
    }

    #[test]
    fn sdk_disabled_turns_tracing_off() {
        let s = read(&[
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "otlp"),
        ])
        .unwrap();
        assert!(s.traces.is_empty());
    }

    #[test]
    fn what_is_not_implemented_is_refused_naming_the_variable() {
        for (vars, var, said) in [
            (
                &[("OTEL_TRACES_EXPORTER", "zipkin")][..],
                "OTEL_TRACES_EXPORTER",
                "\"zipkin\" is not an exporter",
            ),
            (
                &[
                    ("OTEL_TRACES_EXPORTER", "otlp"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http"),
                ],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                "not an OTLP protocol",
            ),
            (
                &[("OTEL_PROPAGATORS", "b3")],
                "OTEL_PROPAGATORS",
                "\"b3\" is not a propagator",
            ),
            (
                &[
                    ("OTEL_METRICS_EXPORTER", "prometheus"),
                    ("OTEL_EXPORTER_PROMETHEUS_PORT", "99999"),
                ],
                "OTEL_EXPORTER_PROMETHEUS_PORT",
                "not a port number",
            ),
        ] {
            let err = read(vars).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.to_string().contains(said), "{err}");
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }
}
