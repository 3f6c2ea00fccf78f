//! `serve --backend kube`: the kube backend's flags (Porch's names) and
//! the backend they make, with the cluster's FunctionConfig watch on its
//! client. Built with the `kube` feature (on by default): a build without
//! it never compiles kube-rs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use function_runner::runner::Functions;
use function_runner::tag_resolution::{AuthFor, RegistryTags};
use oci_client::secrets::RegistryAuth;
use runner_core::backend::Backend;
use runner_core::config::FunctionConfigs;
use runner_kube::config_watch::{ConfigWatch, WatchSettings};
use runner_kube::pods::{Dial, KubeSettings};
use runner_kube::registry::{self, RegistrySettings};
use runner_kube::source::TemplateChoice;

/// How long startup waits for the cluster's FunctionConfigs before serving
/// without them (they then apply once listed).
const CLUSTER_CONFIGS_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// What the kube backend takes from `serve`'s other flags.
pub(crate) struct Shared {
    pub(crate) pod_ttl: Duration,
    pub(crate) scan_interval: Duration,
    pub(crate) max_message_bytes: usize,
    /// `--wrapper-server-image` (or `WRAPPER_SERVER_IMAGE`).
    pub(crate) wrapper_image: Option<String>,
    /// `--functions`: relative `binaryExecutor.path`s of the cluster's
    /// FunctionConfigs are resolved against it.
    pub(crate) functions_dir: Option<PathBuf>,
    pub(crate) default_prefix: String,
    /// Started with Porch's command line: FunctionConfigs get Porch's
    /// finalizer, as Porch's runner adds it.
    pub(crate) porch: bool,
    /// The runner's trace settings, for the function pods' wrappers.
    pub(crate) function_env: Vec<(String, String)>,
}

/// The kube backend's flags, named as Porch's function runner's.
#[derive(Debug, clap::Args)]
pub(crate) struct KubeArgs {
    /// kube backend: the namespace of function pods.
    #[arg(long, default_value = runner_kube::DEFAULT_NAMESPACE)]
    pub(crate) pod_namespace: String,
    /// kube backend: how function pods are reached: their Service's DNS
    /// name, or their pod IP.
    #[arg(long, value_enum, default_value_t = Dial::Service)]
    kube_dial: Dial,
    /// kube backend: this runner's identity, on its pods' owner label;
    /// replicas sharing a namespace need distinct ones (in a Deployment, the
    /// pod name in HOSTNAME is).
    #[arg(long, env = "HOSTNAME", default_value = "function-runner")]
    runner_id: String,
    /// kube backend: the function pod template: a ConfigMap of this name in
    /// the runner's namespace (keys `template`, `serviceTemplate`) or a
    /// PodTemplate in the pod namespace. Default: the PodTemplate
    /// `base-pod-template` if the pod namespace has one, else built in.
    #[arg(long)]
    function_pod_template: Option<String>,
    /// kube backend: the runner's own namespace (where the template
    /// ConfigMap is); default: the service account's, else porch-system.
    #[arg(long, env = "POD_NAMESPACE")]
    runner_namespace: Option<String>,
    /// kube backend: also read the FunctionConfig objects in the cluster
    /// (deploy/functionconfig-crd.yaml), and apply their changes live.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    watch_function_configs: bool,
    /// kube backend: the namespace whose FunctionConfig objects are read
    /// (default: --pod-namespace, as Porch's runner; `*`: all namespaces).
    #[arg(long)]
    function_config_namespace: Option<String>,
    /// Registries (`host:port`, comma-separated) whose image configs are
    /// read over plain HTTP.
    #[arg(long, value_delimiter = ',')]
    insecure_registries: Vec<String>,
    /// kube backend: read images that are not from the default registry
    /// with the credentials of --registry-auth-secret-path, and have their
    /// pods pull with them (the pull Secret --registry-auth-secret-name).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    #[arg(value_parser = crate::flags::parse_go_bool)]
    enable_private_registries: bool,
    /// The docker config JSON with the registry credentials.
    #[arg(long, default_value = registry::DEFAULT_AUTH_FILE)]
    registry_auth_secret_path: PathBuf,
    /// The kubernetes.io/dockerconfigjson Secret made from it in the pod
    /// namespace.
    #[arg(long, default_value = registry::DEFAULT_PULL_SECRET_NAME)]
    registry_auth_secret_name: String,
    /// With --enable-private-registries: trust the CA in --tls-secret-path
    /// for registry TLS, besides the system's roots.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    #[arg(value_parser = crate::flags::parse_go_bool)]
    enable_private_registries_tls: bool,
    /// The directory holding that CA: ca.crt, else ca.pem.
    #[arg(long, default_value = registry::DEFAULT_TLS_DIR)]
    tls_secret_path: PathBuf,
    /// kube backend: how long after the start the function pods that
    /// Porch's own runner left (labelled fn.kpt.dev/image, no runner of
    /// ours) are deleted, with their Services (Go duration; 0: never).
    #[arg(long, default_value = "60s", value_parser = crate::flags::parse_duration)]
    collect_porch_pods_after: Duration,
}

/// The registry flags, as Porch reads them: the CA only with private
/// registries.
fn registry_settings(args: &KubeArgs) -> RegistrySettings {
    let private = args.enable_private_registries;
    if args.enable_private_registries_tls && !private {
        tracing::warn!(
            "--enable-private-registries-tls has no effect without --enable-private-registries"
        );
    }
    RegistrySettings {
        insecure: args.insecure_registries.clone(),
        auth_file: private.then(|| args.registry_auth_secret_path.clone()),
        ca_dir: (private && args.enable_private_registries_tls)
            .then(|| args.tls_secret_path.clone()),
        pull_secret_name: args.registry_auth_secret_name.clone(),
    }
}

impl KubeArgs {
    /// The registries' tag lists for `serve`'s request tag constraints,
    /// read as the entrypoint reader reads images: private images (not
    /// the default registry's) with the credentials of
    /// --registry-auth-secret-path when --enable-private-registries, the CA
    /// of --tls-secret-path when --enable-private-registries-tls,
    /// --insecure-registries over plain HTTP. A CA that cannot be read is
    /// said and left out (the kube backend refuses to start on it).
    pub(crate) fn tag_source(&self) -> RegistryTags {
        let private = self.enable_private_registries;
        let ca = match (private && self.enable_private_registries_tls)
            .then(|| registry::load_ca(&self.tls_secret_path))
        {
            Some(Ok((_, certificates))) => certificates.iter().map(|c| c.to_vec()).collect(),
            Some(Err(err)) => {
                tracing::warn!(%err, "listing registry tags without the registry CA");
                Vec::new()
            }
            None => Vec::new(),
        };
        let auth_file = private.then(|| self.registry_auth_secret_path.clone());
        let auth: AuthFor = Arc::new(move |host: &str, repository: &str| match &auth_file {
            // Read at each listing (once per repository and TTL), so a
            // rotated Secret is used without a restart.
            Some(path) if registry::is_private(repository) => registry::DockerConfig::load(path)
                .map(|config| config.auth_for(host))
                .map_err(|err| err.to_string()),
            _ => Ok(RegistryAuth::Anonymous),
        });
        RegistryTags::new(self.insecure_registries.clone(), ca, auth)
    }

    /// The kube backend's settings.
    fn kube_settings(&self, shared: &Shared) -> KubeSettings {
        KubeSettings {
            namespace: self.pod_namespace.clone(),
            wrapper_image: shared.wrapper_image.clone().unwrap_or_default(),
            // clap prefers the flag to the variable.
            wrapper_image_source: if std::env::args_os().any(|a| {
                let a = a.as_encoded_bytes();
                a == b"--wrapper-server-image" || a.starts_with(b"--wrapper-server-image=")
            }) {
                "--wrapper-server-image".into()
            } else {
                "env WRAPPER_SERVER_IMAGE".into()
            },
            max_message_bytes: shared.max_message_bytes,
            dial: self.kube_dial,
            owner: self.runner_id.clone(),
            ttl: shared.pod_ttl,
            scan_interval: shared.scan_interval,
            template: match &self.function_pod_template {
                Some(name) if !name.is_empty() => TemplateChoice::Named(name.clone()),
                _ => TemplateChoice::Default,
            },
            runner_namespace: self
                .runner_namespace
                .clone()
                .unwrap_or_else(runner_namespace),
            // Made from the registry settings when the backend connects.
            pull_secret: None,
            // The downward API's, as deploy/function-runner.yaml sets it
            // (HOSTNAME is the node's under hostNetwork).
            runner_pod: std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()),
            // Found when the backend connects, from the runner's pod.
            deployment: None,
            // Found when the backend connects, from the rights it has.
            features: Default::default(),
            porch_leftovers_after: Some(self.collect_porch_pods_after)
                .filter(|after| !after.is_zero()),
            function_env: shared.function_env.clone(),
        }
    }

    /// What the cluster's FunctionConfig watch reads, if it is on.
    fn watch_settings(&self, shared: &Shared) -> Option<WatchSettings> {
        self.watch_function_configs.then(|| WatchSettings {
            namespace: match self.function_config_namespace.as_deref() {
                Some("*") => None,
                Some(ns) => Some(ns.to_string()),
                None => Some(self.pod_namespace.clone()),
            },
            functions_dir: shared
                .functions_dir
                .as_deref()
                .map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())),
            default_prefix: shared.default_prefix.clone(),
            add_finalizer: shared.porch,
            sync_timeout: CLUSTER_CONFIGS_SYNC_TIMEOUT,
        })
    }

    /// The backend, connected, and the FunctionConfigs it serves: the
    /// cluster's join those read at start (the watch lives as long as the
    /// returned handle).
    pub(crate) async fn backend(
        &self,
        shared: &Shared,
        configs: &FunctionConfigs,
    ) -> anyhow::Result<(Arc<dyn Backend>, Functions, Option<ConfigWatch>)> {
        let connected = runner_kube::connect(self.kube_settings(shared), &registry_settings(self))
            .await
            .context("--backend kube")?;
        let Some(settings) = self.watch_settings(shared) else {
            return Ok((Arc::new(connected.backend), Functions::fixed(configs), None));
        };
        let (publisher, index) = configs.live();
        let watch = runner_kube::config_watch::start(
            connected.client,
            settings,
            configs.configs.clone(),
            publisher,
        )
        .await;
        let functions = Functions {
            index,
            rejected: configs.rejected.clone(),
        };
        Ok((Arc::new(connected.backend), functions, Some(watch)))
    }
}

/// The namespace this runner's pod runs in (its service account's), as
/// Porch finds it; `porch-system` outside a cluster.
fn runner_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "porch-system".to_string())
}
