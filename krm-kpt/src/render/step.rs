//! A Kptfile pipeline's steps, as kpt reads them: the function (an
//! `exec:` command, an `image:` built in or run by the evaluator), its
//! config (`configPath`, `configMap`) and its `selectors` and `exclude`.

use krm_yaml::package::{go_quote, kyaml};
use krm_yaml::{Kind, Node};

use super::options::Images;
use crate::eval::{Error, Function};
use crate::image::{kpt_image_name, with_prefix, CATALOG_IMAGE_PREFIX};
use crate::select::Selector;

/// A package's pipeline step.
pub(super) struct Step {
    pub(super) function: Function,
    pub(super) name: String,
    /// `exec` or `image`, as the results file names it.
    pub(super) key: &'static str,
    pub(super) fn_config: StepConfig,
    pub(super) selectors: Vec<Selector>,
    pub(super) exclusions: Vec<Selector>,
}

/// Where a step's function config comes from.
pub(super) enum StepConfig {
    None,
    /// `configPath`, relative to the package.
    Path(String),
    /// `configMap`'s data.
    Map(Vec<(String, String)>),
}

/// A pipeline step's `configMap`, as kpt's `NewConfigMap` builds it: a
/// parsed ConfigMap skeleton whose `data: {}` (flow style, kept) takes the
/// entries, keys sorted, values tagged as strings.
pub(super) fn config_map(data: &[(String, String)]) -> Result<Node, Error> {
    let skeleton = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n";
    let mut doc = krm_yaml::parse::parse(skeleton)
        .ok()
        .and_then(|d| d.into_iter().next())
        .ok_or_else(|| Error::Input("the function-input skeleton".into()))?;
    let mut sorted: Vec<&(String, String)> = data.iter().collect();
    sorted.sort();
    let mut map = Node::mapping(
        sorted
            .iter()
            .flat_map(|(k, v)| {
                [
                    Node {
                        kind: Kind::Scalar,
                        value: k.as_str().into(),
                        ..Node::default()
                    },
                    Node::string(v.as_str()),
                ]
            })
            .collect(),
    );
    map.tag = Default::default();
    let root = kyaml::content_mut(&mut doc);
    kyaml::set_field(root, "data", map).map_err(|e| Error::Input(e.to_string()))?;
    Ok(doc)
}

/// The Kptfile's mutators and validators, made when their package's turn
/// comes (kpt refuses a bad step then, after the subpackages ran).
pub(super) fn pipeline(
    kptfile: &Node,
    allow_exec: bool,
    images: &Images,
) -> Result<(Vec<Step>, Vec<Step>), Error> {
    let Some(p) = kyaml::field(kptfile, "pipeline") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let steps = |key: &str| -> Result<Vec<Step>, Error> {
        let Some(list) = kyaml::field(p, key) else {
            return Ok(Vec::new());
        };
        if list.kind != Kind::Sequence {
            return Ok(Vec::new());
        }
        list.content
            .iter()
            .map(|f| Step::parse(f, allow_exec, images))
            .collect()
    };
    Ok((steps("mutators")?, steps("validators")?))
}

impl Step {
    /// One function of a pipeline, as kpt reads it.
    fn parse(f: &Node, allow_exec: bool, images: &Images) -> Result<Step, Error> {
        let text = |k: &str| kyaml::value_of(kyaml::field(f, k)).to_owned();
        let (image, exec) = (text("image"), text("exec"));
        let selectors = |key: &str| -> Result<Vec<Selector>, Error> {
            let Some(list) = kyaml::field(f, key) else {
                return Ok(Vec::new());
            };
            let bad = |why: String| {
                Error::Input(format!(
                    "{}: `{key}`: {why}",
                    go_quote(if image.is_empty() { &exec } else { &image })
                ))
            };
            match list.kind {
                Kind::Sequence => list
                    .content
                    .iter()
                    .map(|s| Selector::from_node(s).map_err(bad))
                    .collect(),
                _ if list.tag == kyaml::NULL_TAG => Ok(Vec::new()),
                k => Err(bad(format!(
                    "a list of selectors, not a {}",
                    kyaml::kind_name(k)
                ))),
            }
        };
        let (selectors, exclusions) = (selectors("selectors")?, selectors("exclude")?);
        let key = if image.is_empty() { "exec" } else { "image" };
        let builtin = if image.is_empty() {
            None
        } else {
            builtin_for(&image, images)?
        };
        let (function, name) = match (image.is_empty(), exec.is_empty()) {
            (false, _) if builtin.is_some() => {
                let name = kpt_image_name(&image);
                let builtin = builtin.ok_or(Error::NoImageEvaluator)?;
                (
                    Function::Builtin {
                        image: name.clone(),
                        builtin,
                    },
                    name,
                )
            }
            (false, _) => {
                let evaluator = images.evaluator.clone().ok_or(Error::NoImageEvaluator)?;
                let image = with_prefix(&image, CATALOG_IMAGE_PREFIX);
                (
                    Function::Image {
                        image: image.clone(),
                        evaluator,
                    },
                    image,
                )
            }
            (true, false) => {
                if !allow_exec {
                    return Err(Error::Input(
                        "must run with `--allow-exec` option to allow running function binaries"
                            .into(),
                    ));
                }
                (Function::Exec(exec.clone()), exec)
            }
            (true, true) => {
                return Err(Error::Input(
                    "a pipeline function needs `image` or `exec`".into(),
                ))
            }
        };
        let fn_config = if let Some(path) =
            kyaml::field(f, "configPath").filter(|v| !v.value.is_empty())
        {
            StepConfig::Path(path.value.to_string())
        } else if let Some(map) = kyaml::field(f, "configMap").filter(|m| m.kind == Kind::Mapping) {
            StepConfig::Map(
                map.content
                    .chunks_exact(2)
                    .map(|kv| (kv[0].value.to_string(), kv[1].value.to_string()))
                    .collect(),
            )
        } else {
            StepConfig::None
        };
        Ok(Step {
            function,
            name,
            key,
            fn_config,
            selectors,
            exclusions,
        })
    }
}

/// The built-in function that runs `image`, if one does.
fn builtin_for(
    image: &str,
    images: &Images,
) -> Result<Option<&'static krm_builtins::Builtin>, Error> {
    match &images.builtin_for {
        Some(builtin_for) => builtin_for(image).map_err(Error::Evaluator),
        None => Ok(None),
    }
}
