//! The flags of `function-runner eval`: kpt's `fn eval`'s, as kpt names
//! and reads them.

use std::path::PathBuf;

use krm_kpt::eval;
use krm_kpt::select::Selector;
use runner_docker::{ContainerOptions, StorageMount};

use crate::pods::FunctionPrivileges;

/// Arguments of `function-runner eval`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  function-runner eval DIR --exec ./my-fn -- key=value\n  function-runner eval - --exec \"./my-fn arg\" < resourcelist.yaml\n  function-runner eval DIR --image set-labels:v0.2 --results-dir /tmp/results -o stdout"
)]
pub struct EvalArgs {
    /// Package directory, or `-` to read a ResourceList (or YAML documents)
    /// from stdin and write to stdout.
    #[arg(value_name = "DIR|-", default_value = ".")]
    pub dir: String,
    /// Run this local command as the function (quoted if it has arguments).
    #[arg(long, value_name = "CMD", conflicts_with = "image")]
    pub exec: Option<String>,
    /// Run this image as the function (short names get the default prefix).
    #[arg(short = 'i', long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// semantic version constraint for the image tag or exact tag
    /// replacement. As in kpt v1.0.0-beta.67, only `--save` uses it
    /// (written as the saved function's `tag:`, which `render` resolves);
    /// the run itself runs `--image` as given.
    #[arg(long, value_name = "TAG")]
    pub tag: Option<String>,
    /// File holding the function's `functionConfig`.
    #[arg(long, value_name = "FILE")]
    pub fn_config: Option<PathBuf>,
    /// Where the output goes: `stdout` (a ResourceList), `unwrap` (YAML
    /// documents) or a new directory. Default: back into DIR (stdout for `-`).
    #[arg(short = 'o', long, value_name = "stdout|unwrap|DIR")]
    pub output: Option<String>,
    /// Write the function's structured results to DIR/results.yaml
    /// (also `--results_dir`, kpt's spelling).
    #[arg(long, value_name = "DIR", alias = "results_dir")]
    pub results_dir: Option<PathBuf>,
    /// Accepted as kpt takes it, and without effect: kpt v1.0.0-beta.67
    /// prints every result and stderr line, on one line each.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub truncate_output: bool,
    /// The most bytes the function may write to stdout.
    #[arg(long, default_value_t = eval::DEFAULT_MAX_OUTPUT_BYTES, value_name = "BYTES")]
    pub max_output_bytes: usize,
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// kpt's image pull policy: Always, IfNotPresent or Never (any case).
    /// Checked as kpt checks it, and otherwise not acted on: the docker
    /// backend pulls an image only when the engine lacks it (IfNotPresent),
    /// and the process backend pulls nothing.
    #[arg(long, default_value = "IfNotPresent", value_name = "POLICY")]
    pub image_pull_policy: String,
    // kpt's flags for the function's environment and container (#28).
    /// Set KEY in the function's environment, to VALUE or to this
    /// process's value (repeatable); exec, process and container functions
    /// alike.
    #[arg(short = 'e', long = "env", value_name = "KEY[=VALUE]")]
    pub env: Vec<String>,
    /// docker: mount into the function's container (repeatable):
    /// `type=bind|volume|tmpfs,src=SRC,dst=DST`, read-only unless `rw=true`.
    #[arg(long = "mount", value_name = "type=TYPE,src=SRC,dst=DST[,rw=true]")]
    pub mounts: Vec<String>,
    /// docker: the function's container gets the host's network (else none).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub network: bool,
    /// docker: the function runs as this process's uid:gid (else nobody).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub as_current_user: bool,
    /// After a run that passes, add the function (its image or command,
    /// arguments or `--fn-config`, `--match-*`/`--exclude-*`) to the
    /// package's Kptfile pipeline, as kpt does; needs `--type`.
    #[arg(short = 's', long)]
    pub save: bool,
    /// `mutator` or `validator`: the pipeline list `--save` adds to.
    #[arg(short = 't', long = "type", value_name = "mutator|validator")]
    pub fn_type: Option<String>,
    /// Function arguments `key=value` (a ConfigMap named `function-input`).
    #[arg(last = true, value_name = "KEY=VALUE")]
    pub fn_args: Vec<String>,
}

/// kpt's `--match-*` and `--exclude-*`: the function sees the resources
/// that match every `--match-*` given and none of the `--exclude-*` ones
/// (all of them when none is given); its output is merged back among the
/// others.
#[derive(Debug, Default, clap::Args)]
pub struct SelectionArgs {
    /// Select resources of this apiVersion (whole: `apps/v1`).
    #[arg(long, value_name = "API_VERSION")]
    pub match_api_version: Option<String>,
    /// Select resources of this kind.
    #[arg(long, value_name = "KIND")]
    pub match_kind: Option<String>,
    /// Select resources of this name.
    #[arg(long, value_name = "NAME")]
    pub match_name: Option<String>,
    /// Select resources of this namespace (`metadata.namespace` as written).
    #[arg(long, value_name = "NAMESPACE")]
    pub match_namespace: Option<String>,
    /// Select resources with this annotation (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub match_annotations: Vec<String>,
    /// Select resources with this label (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub match_labels: Vec<String>,
    /// Leave out resources of this apiVersion.
    #[arg(long, value_name = "API_VERSION")]
    pub exclude_api_version: Option<String>,
    /// Leave out resources of this kind.
    #[arg(long, value_name = "KIND")]
    pub exclude_kind: Option<String>,
    /// Leave out resources of this name.
    #[arg(long, value_name = "NAME")]
    pub exclude_name: Option<String>,
    /// Leave out resources of this namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub exclude_namespace: Option<String>,
    /// Leave out resources with this annotation (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub exclude_annotations: Vec<String>,
    /// Leave out resources with this label (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub exclude_labels: Vec<String>,
}

impl SelectionArgs {
    /// The selector and the exclusion.
    pub(crate) fn selectors(&self) -> Result<(Selector, Selector), eval::Error> {
        let pairs =
            |flag: &str, v: &[String]| Selector::parse_pairs(flag, v).map_err(eval::Error::Input);
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let selector = Selector {
            api_version: text(&self.match_api_version),
            kind: text(&self.match_kind),
            name: text(&self.match_name),
            namespace: text(&self.match_namespace),
            labels: pairs("--match-labels", &self.match_labels)?,
            annotations: pairs("--match-annotations", &self.match_annotations)?,
        };
        let exclusion = Selector {
            api_version: text(&self.exclude_api_version),
            kind: text(&self.exclude_kind),
            name: text(&self.exclude_name),
            namespace: text(&self.exclude_namespace),
            labels: pairs("--exclude-labels", &self.exclude_labels)?,
            annotations: pairs("--exclude-annotations", &self.exclude_annotations)?,
        };
        Ok((selector, exclusion))
    }
}

impl EvalArgs {
    /// What the function gets beyond its image (`-e`, `--mount`,
    /// `--network`, `--as-current-user`), checked as kpt and its `docker
    /// run` check them, in their words.
    pub(crate) fn privileges(&self) -> Result<FunctionPrivileges, eval::Error> {
        let args = self;
        let docker_only: Vec<&'static str> = [
            ("--mount", !args.mounts.is_empty()),
            ("--network", args.network),
            ("--as-current-user", args.as_current_user),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        if args.exec.is_some() && !docker_only.is_empty() {
            // kpt refuses `--env` with `--exec` too (its message names it);
            // here an exec function gets its environment.
            return Err(eval::Error::Input(
                "--mount, --as-current-user and --network can only be used with container functions"
                    .into(),
            ));
        }
        let env = eval::FunctionEnv::parse(&args.env)?;
        let mounts = args
            .mounts
            .iter()
            .map(|m| {
                let mount = StorageMount::parse(m);
                mount.check().map(|()| mount)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(eval::Error::Input)?;
        // kpt's `user.Current()`: the real ids, not the effective ones.
        let user = args.as_current_user.then(|| {
            format!(
                "{}:{}",
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw()
            )
        });
        Ok(FunctionPrivileges {
            env: env.process_env(),
            container: ContainerOptions {
                env: env.container_env(),
                mounts,
                network: args.network,
                user,
            },
            docker_only,
        })
    }
}
