//! A Kptfile pipeline's steps, as kpt reads them: the function (an
//! `exec:` command, an `image:` built in or run by the evaluator), its
//! config (`configPath`, `configMap`) and its `selectors` and `exclude`.

use krm_yaml::package::{go_quote, kyaml};
use krm_yaml::{Kind, Node};

use super::options::Images;
use crate::eval::{Error, Function};
use crate::image::{render_image, resolve_to_image};
use crate::select::Selector;
use crate::tag;

/// A package's pipeline step.
pub(super) struct Step {
    pub(super) function: Function,
    /// The name kpt's lines give it: the image run, or the command.
    pub(super) name: String,
    /// `exec` or `image`, as the results file names it.
    pub(super) key: &'static str,
    /// The pipeline's `name:` of the function.
    pub(super) fn_name: String,
    /// The image run (resolved); empty for an exec function.
    pub(super) image: String,
    /// The command, as the pipeline writes it.
    pub(super) exec: String,
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

/// The Kptfile pipeline's mutators and validators, as written (kpt makes
/// each step when its turn comes: [`Step::prepare`]).
pub(super) fn pipeline(kptfile: &Node) -> (Vec<&Node>, Vec<&Node>) {
    let Some(p) = kyaml::field(kptfile, "pipeline") else {
        return (Vec::new(), Vec::new());
    };
    let steps = |key: &str| -> Vec<&Node> {
        match kyaml::field(p, key) {
            Some(list) if list.kind == Kind::Sequence => list.content.iter().collect(),
            _ => Vec::new(),
        }
    };
    (steps("mutators"), steps("validators"))
}

/// A step that could not be made: what kpt records of it
/// (`preExecFailureStep`: the function's name, the image as far as it was
/// resolved, the command) and why.
pub(super) struct NotMade {
    pub(super) name: String,
    pub(super) image: String,
    pub(super) exec: String,
    pub(super) error: Error,
}

/// How render makes steps: the image prefix, whether `exec:` may run,
/// the image functions, and the tag listers.
pub(super) struct Maker<'a> {
    pub(super) prefix: &'a str,
    pub(super) allow_exec: bool,
    pub(super) images: &'a Images,
    pub(super) stderr_warnings: Vec<String>,
}

impl Maker<'_> {
    /// One function of a pipeline, made as kpt's `fnChain` and `NewRunner`
    /// make it: `exec:` refused without `--allow-exec`; an image expanded
    /// under the prefix, then its `tag:` resolved (kpt's
    /// `TagResolver`), else `:latest` added where it has no tag or digest.
    pub(super) async fn prepare(&mut self, f: &Node) -> Result<Step, NotMade> {
        let text = |k: &str| kyaml::value_of(kyaml::field(f, k)).to_owned();
        let (image, exec, fn_name, tag) = (text("image"), text("exec"), text("name"), text("tag"));
        let not_made = |image: String, error: Error| NotMade {
            name: fn_name.clone(),
            image,
            exec: exec.clone(),
            error,
        };
        if image.is_empty() && !exec.is_empty() && !self.allow_exec {
            return Err(not_made(
                String::new(),
                Error::Input(
                    "must run with `--allow-exec` option to allow running function binaries".into(),
                ),
            ));
        }
        let image = if image.is_empty() {
            image
        } else if tag.is_empty() {
            render_image(&image, self.prefix)
        } else {
            let expanded = resolve_to_image(&image, self.prefix);
            match tag::resolve_function_image(&expanded, &tag, &self.images.tag_listers).await {
                Ok(resolved) => {
                    self.stderr_warnings.extend(resolved.warning);
                    resolved.image
                }
                Err(why) => {
                    // kpt warns about a tag it could not read before it
                    // says that it is not a valid image tag either.
                    if why.starts_with("`function.tag`") {
                        self.stderr_warnings.extend(tag::tag_warning(&tag));
                    }
                    // kpt's `NewRunner` leaves the image empty.
                    return Err(not_made(String::new(), Error::Input(why)));
                }
            }
        };
        Step::parse(f, image.clone(), exec.clone(), fn_name.clone(), self.images)
            .map_err(|error| not_made(image, error))
    }
}

impl Step {
    /// One function of a pipeline, its image (if any) resolved.
    fn parse(
        f: &Node,
        image: String,
        exec: String,
        fn_name: String,
        images: &Images,
    ) -> Result<Step, Error> {
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
        let function = match (image.is_empty(), exec.is_empty()) {
            (false, _) => match builtin {
                Some(builtin) => Function::Builtin {
                    image: image.clone(),
                    builtin,
                },
                None => Function::Image {
                    image: image.clone(),
                    evaluator: images.evaluator.clone().ok_or(Error::NoImageEvaluator)?,
                },
            },
            (true, false) => Function::Exec(exec.clone()),
            (true, true) => {
                return Err(Error::Input(
                    "a pipeline function needs `image` or `exec`".into(),
                ))
            }
        };
        let name = if image.is_empty() {
            exec.clone()
        } else {
            image.clone()
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
            fn_name,
            image,
            exec,
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
