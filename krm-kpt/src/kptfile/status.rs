//! The render status kpt v1.0.0-beta.67 writes into the root package's
//! Kptfile after an in-place render, passed or failed
//! (`updateRenderStatus`/`setRenderStatus`,
//! `pkg/lib/kptops/render_executor.go@v1.0.0-beta.67:222-300`): the
//! `Rendered` condition (others kept, in order; it goes last) and
//! `renderStatus` (replaced whole; left out when no step ran).
//!
//! kpt reads the Kptfile from disk again (strictly: one it cannot read
//! gets no status, silently), sets the two fields on its Go value and
//! marshals the whole value back with wide sequences
//! (`kptfileutil.WriteKptfileToFS`): comments are gone, fields come in
//! the types' order, map keys sorted, every value as yaml.v3 writes a Go
//! string. The same is done here through the schema ([`super::save`]'s
//! marshalling). Nothing in it changes from one render to the next but
//! what the functions say: no time is recorded.

use std::collections::HashMap;
use std::path::Path;

use krm_results::FnResult;
use krm_yaml::package::{self, kyaml};
use krm_yaml::{Kind, Node};

use super::save::{field_or, marshal, resolve_aliases};
use super::schema::{Ty, KPTFILE};

/// One pipeline step as the status records it (kpt's
/// `PipelineStepResult`).
#[derive(Debug, Clone, Default)]
pub struct StepStatus {
    /// The function's `name:` in the pipeline.
    pub name: String,
    /// The image run: expanded, with its resolved tag (`:latest` if it
    /// had none); empty for an exec function, or when the tag could not be
    /// resolved.
    pub image: String,
    /// The exec command as the pipeline writes it.
    pub exec: String,
    /// Why the step failed before the function gave an answer.
    pub execution_error: String,
    pub stderr: String,
    pub exit_code: i32,
    pub results: std::sync::Arc<[FnResult]>,
}

impl StepStatus {
    /// kpt's `stepName`: the name, else the image, else the command.
    fn shown(&self) -> &str {
        [&self.name, &self.image, &self.exec]
            .into_iter()
            .find(|s| !s.is_empty())
            .map_or("", String::as_str)
    }

    fn node(&self) -> Node {
        let mut m = Vec::new();
        let mut put = |k: &str, v: Node| {
            m.push(Node::scalar(k));
            m.push(v);
        };
        put("name", Node::string(self.name.as_str()));
        put("image", Node::string(self.image.as_str()));
        put("exec", Node::string(self.exec.as_str()));
        put(
            "executionError",
            Node::string(self.execution_error.as_str()),
        );
        put("stderr", Node::string(self.stderr.as_str()));
        put(
            "exitCode",
            Node::scalar(self.exit_code.to_string().as_str()),
        );
        let items = |results: &mut dyn Iterator<Item = &FnResult>| {
            Node::sequence(results.map(result_node).collect())
        };
        put("results", items(&mut self.results.iter()));
        // kpt's `errorResults`: those of severity `error`, again.
        put(
            "errorResults",
            items(
                &mut self
                    .results
                    .iter()
                    .filter(|r| r.severity.as_written() == "error"),
            ),
        );
        Node::mapping(m)
    }
}

/// A result as fnresult's `ResultItem` holds it.
fn result_node(result: &FnResult) -> Node {
    krm_yaml::value::from_value(&crate::eval::result_value(result))
}

/// What a render leaves in the status: how it ended, and its steps.
#[derive(Debug, Clone, Default)]
pub struct RenderReport {
    /// `None`: it passed; else kpt's message of the failure (the root
    /// package's path already written as `.`).
    pub failure: Option<String>,
    pub mutation_steps: Vec<StepStatus>,
    pub validation_steps: Vec<StepStatus>,
}

impl RenderReport {
    /// kpt's `buildRenderStatus`: `None` when no step ran; the error
    /// summary (each failed step: `name: why`) only for a failed render.
    fn render_status(&self) -> Option<Node> {
        if self.mutation_steps.is_empty() && self.validation_steps.is_empty() {
            return None;
        }
        let steps = |s: &[StepStatus]| Node::sequence(s.iter().map(StepStatus::node).collect());
        let mut m = vec![
            Node::scalar("mutationSteps"),
            steps(&self.mutation_steps),
            Node::scalar("validationSteps"),
            steps(&self.validation_steps),
        ];
        if self.failure.is_some() {
            let lines: Vec<String> = self
                .mutation_steps
                .iter()
                .chain(&self.validation_steps)
                .filter_map(|s| {
                    if !s.execution_error.is_empty() {
                        Some(format!("{}: {}", s.shown(), s.execution_error))
                    } else if s.exit_code != 0 {
                        Some(format!("{}: exit code {}", s.shown(), s.exit_code))
                    } else {
                        None
                    }
                })
                .collect();
            m.push(Node::scalar("errorSummary"));
            m.push(Node::string(lines.join("\n").as_str()));
        }
        Some(Node::mapping(m))
    }

    /// The `Rendered` condition.
    fn condition(&self) -> Node {
        let (status, reason, message) = match &self.failure {
            None => ("True", "RenderSuccess", ""),
            Some(message) => ("False", "RenderFailed", message.as_str()),
        };
        let mut m = Vec::new();
        for (k, v) in [
            ("type", "Rendered"),
            ("status", status),
            ("reason", reason),
            ("message", message),
        ] {
            m.push(Node::scalar(k));
            m.push(Node::string(v));
        }
        Node::mapping(m)
    }
}

/// Writes `report` into the Kptfile of the package at `dir` as beta.67's
/// `setRenderStatus` does. Like kpt, a Kptfile that cannot be read
/// strictly or written is left as it is (said at debug level only).
pub fn write_render_status(dir: &Path, report: &RenderReport) {
    if let Err(why) = try_write(dir, report) {
        tracing::debug!(dir = %dir.display(), %why, "render status not written");
    }
}

fn try_write(dir: &Path, report: &RenderReport) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join("Kptfile")).map_err(|e| e.to_string())?;
    let original = krm_yaml::parse::parse(&text)
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no document")?;
    super::read::read(dir, &original)?;
    let mut decoded = kyaml::content(&original).clone();
    resolve_aliases(&mut decoded, &mut HashMap::new());
    let status = field_or(&mut decoded, "status", Node::mapping(Vec::new()));
    let conditions = field_or(status, "conditions", Node::sequence(Vec::new()));
    conditions
        .content
        .retain(|c| kyaml::value_of(kyaml::field(c, "type")) != "Rendered");
    conditions.content.push(report.condition());
    if let Some(i) = kyaml::field_index(status, "renderStatus") {
        status.content.drain(i..i + 2);
    }
    if let Some(rs) = report.render_status() {
        status.content.push(Node::scalar("renderStatus"));
        status.content.push(rs);
    }
    let marshalled = marshal(Some(&decoded), Ty::Obj(&KPTFILE)).ok_or("nothing to write")?;
    debug_assert_eq!(marshalled.kind, Kind::Mapping);
    let out = krm_yaml::emit::encode_node(&marshalled, false);
    package::write_in_package(dir, "Kptfile", out.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
