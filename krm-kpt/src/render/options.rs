//! What `render` is asked to do, and how its `image:` functions run.

use std::path::PathBuf;
use std::sync::Arc;

use krm_fn::evaluator::Evaluator;

use crate::eval;

/// What `render` is asked to do.
pub struct RenderOptions {
    /// The root package (it must have a Kptfile).
    pub dir: PathBuf,
    /// Whether `exec:` functions may run (kpt's `--allow-exec`).
    pub allow_exec: bool,
    /// The most stdout a function may write.
    pub max_output_bytes: usize,
    /// Where kpt's `results.yaml` goes (`--results-dir`).
    pub results_dir: Option<PathBuf>,
    /// kpt's `-o`: the rendered resources to stdout (a ResourceList, or
    /// unwrapped) or to a new directory, the package left as it is;
    /// `None` writes the package.
    pub output: Option<eval::Output>,
    /// kpt's `--image-prefix`: where short image names are expanded
    /// ([`crate::image::default_image_prefix`] by default).
    pub image_prefix: String,
}

/// How `image:` functions run: built in where `builtin_for` says, else
/// through `evaluator`.
#[derive(Default)]
pub struct Images {
    /// Runs `image:` functions; `None`: none can run (a step with one
    /// fails, naming why).
    pub evaluator: Option<Arc<dyn Evaluator>>,
    /// Which `image:` functions are built in (run on the package's tree,
    /// without the evaluator); `None`: none are.
    pub builtin_for: Option<BuiltinFor>,
    /// Where a pipeline function's `tag:` constraint finds the tags to
    /// choose from (the local engine's images, the registry's); none: a
    /// constraint matches nothing.
    pub tag_listers: Vec<Arc<dyn crate::tag::TagLister>>,
}

/// The built-in function that runs an image, if one does (the runner's
/// FunctionConfigs and defaults decide); an error says why the image can
/// run neither built in nor otherwise.
pub type BuiltinFor =
    Arc<dyn Fn(&str) -> Result<Option<&'static krm_builtins::Builtin>, String> + Send + Sync>;
