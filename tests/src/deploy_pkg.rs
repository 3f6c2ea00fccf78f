//! `deploy/` as the kpt package an operator customises: copied, its
//! Kptfile's setters changed, and rendered in place by the built
//! `function-runner render`, as docs/deploy.md tells the operator to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_yaml_ng::Value;

use crate::{bin, output_within};

/// How long one render of the package may take (it runs one built-in
/// function over a few files: well under a second).
const RENDER_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository's `deploy/`.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The files of `dir` (the package is flat), by name, sorted.
pub fn package_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        anyhow::ensure!(
            entry.file_type()?.is_file(),
            "{} is not a file: the package is expected flat",
            entry.path().display()
        );
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Copies `deploy/` to `dir` (which must not exist), sets the named
/// setters of its Kptfile's apply-setters step (each must be one the
/// Kptfile has: a misspelt name would otherwise render the defaults), and
/// renders the copy in place ([`render`]).
pub fn render_deploy_package(dir: &Path, setters: &[(&str, &str)]) -> anyhow::Result<Output> {
    std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    let source = deploy_dir();
    for name in package_files(&source)? {
        std::fs::copy(source.join(&name), dir.join(&name))
            .with_context(|| format!("copying deploy/{name}"))?;
    }
    if !setters.is_empty() {
        let path = dir.join("Kptfile");
        let mut kptfile: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path)?)?;
        let config = setters_config(&mut kptfile)?;
        for (name, value) in setters {
            let Some(slot) = config.get_mut(*name) else {
                bail!("the Kptfile has no setter {name:?}");
            };
            *slot = Value::String((*value).to_string());
        }
        std::fs::write(&path, serde_yaml_ng::to_string(&kptfile)?)?;
    }
    render(dir)
}

/// Renders the package `dir` in place with `function-runner render`. Its
/// output; a failed render is an error carrying it.
pub fn render(dir: &Path) -> anyhow::Result<Output> {
    let mut cmd = Command::new(bin("function-runner"));
    // The pipeline's apply-setters is one that runs built in: no Docker
    // engine may be needed (an operator rendering on a laptop or in CI has
    // none), so none is reachable here and a step that wanted one fails.
    cmd.arg("render")
        .arg(dir)
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let out = output_within(&mut cmd, None, RENDER_TIMEOUT)?;
    if !out.status.success() {
        bail!(
            "function-runner render {} failed ({}):\n{}{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

/// The `configMap` of the Kptfile's apply-setters mutator.
fn setters_config(kptfile: &mut Value) -> anyhow::Result<&mut serde_yaml_ng::Mapping> {
    kptfile["pipeline"]["mutators"]
        .as_sequence_mut()
        .into_iter()
        .flatten()
        .find(|step| {
            step["image"]
                .as_str()
                .is_some_and(|image| image.contains("/apply-setters:"))
        })
        .and_then(|step| step["configMap"].as_mapping_mut())
        .context("the Kptfile has no apply-setters mutator with a configMap")
}
