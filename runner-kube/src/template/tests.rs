use super::*;

fn fixture() -> FunctionPod {
    FunctionPod {
        name: "set-namespace-v0-4-1-7".to_string(),
        namespace: "porch-fn-system".to_string(),
        image: "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1".to_string(),
        entrypoint: vec!["function".to_string(), "--verbose".to_string()],
        wrapper_image: "example.com/wrapper-server:v1".to_string(),
        max_message_bytes: 6291456,
        prespawn: None,
        owner: "function-runner-5d8f/abc".to_string(),
        reclaim_after: 1_800_000_000,
        pull_secret: None,
        deployment: None,
        readiness_gate: true,
    }
}

fn inline_pod(fp: &FunctionPod) -> Pod {
    fp.pod(&Template::inline(), None).unwrap()
}

/// A label value as the API server checks it.
fn is_label_value(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && (s.is_empty()
            || (s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.ends_with(|c: char| c.is_ascii_alphanumeric())))
}

#[test]
fn the_function_container_runs_the_entrypoint_behind_the_installed_wrapper() {
    let pod = inline_pod(&fixture());
    let spec = pod.spec.unwrap();
    let function = &spec.containers[0];
    assert_eq!(
        function.image.as_deref(),
        Some("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1")
    );
    assert_eq!(
        function.command.clone().unwrap(),
        ["/wrapper-server-tools/wrapper-server"]
    );
    assert_eq!(
        function.args.clone().unwrap(),
        [
            "--port",
            "9446",
            "--max-request-body-size",
            "6291456",
            "--",
            "function",
            "--verbose"
        ]
    );
    let probe = function.readiness_probe.clone().unwrap().exec.unwrap();
    assert_eq!(
        probe.command.unwrap(),
        [
            "/wrapper-server-tools/grpc-health-probe",
            "-addr",
            "localhost:9446"
        ]
    );
    let init = &spec.init_containers.unwrap()[0];
    assert_eq!(init.image.as_deref(), Some("example.com/wrapper-server:v1"));
    assert_eq!(
        init.command.clone().unwrap(),
        ["/wrapper-server", "install", "/wrapper-server-tools"]
    );
    // Both mount the one emptyDir at the same place.
    let volume = &spec.volumes.unwrap()[0];
    assert_eq!(volume.name, "wrapper-server-tools");
    assert!(volume.empty_dir.is_some());
    for c in [init, function] {
        let mounts = c.volume_mounts.clone().unwrap();
        assert_eq!(mounts[0].name, "wrapper-server-tools");
        assert_eq!(mounts[0].mount_path, "/wrapper-server-tools");
    }
}

/// The Pod Security "restricted" profile's checks that a pod must pass.
#[test]
fn the_pod_passes_the_restricted_profile() {
    let spec = inline_pod(&fixture()).spec.unwrap();
    let pod_sc = spec.security_context.clone().unwrap();
    assert_eq!(pod_sc.run_as_non_root, Some(true));
    assert_ne!(pod_sc.run_as_user, Some(0));
    assert_eq!(pod_sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert!(spec.host_network.is_none() && spec.host_pid.is_none() && spec.host_ipc.is_none());
    let containers = spec
        .init_containers
        .clone()
        .unwrap()
        .into_iter()
        .chain(spec.containers.clone());
    for c in containers {
        let sc = c.security_context.unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(
            sc.capabilities.unwrap().drop.unwrap(),
            ["ALL"],
            "{}",
            c.name
        );
        assert!(
            sc.privileged.is_none() && sc.run_as_user.is_none(),
            "{}",
            c.name
        );
    }
    for v in spec.volumes.unwrap() {
        assert!(v.host_path.is_none());
    }
    assert_eq!(spec.automount_service_account_token, Some(false));
}

#[test]
fn names_labels_and_annotations_are_porchs() {
    let fp = fixture();
    let pod = inline_pod(&fp);
    let meta = pod.metadata;
    assert_eq!(meta.name.as_deref(), Some("set-namespace-v0-4-1-7"));
    assert_eq!(meta.namespace.as_deref(), Some("porch-fn-system"));
    let labels = meta.labels.unwrap();
    assert_eq!(labels["fn.kpt.dev/image"], "set-namespace_v0.4.1");
    assert_eq!(labels["fn.kpt.dev/pod"], "set-namespace-v0-4-1-7");
    assert_eq!(labels["fn.kpt.dev/runner"], "function-runner-5d8f-abc");
    let annotations = meta.annotations.unwrap();
    assert_eq!(annotations["fn.kpt.dev/reclaim-after"], "1800000000");
    assert_eq!(annotations["fn.kpt.dev/template-version"], "inline");
    assert_eq!(
        annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"],
        "true"
    );
    for value in labels.values() {
        assert!(is_label_value(value), "{value}");
    }
}

#[test]
fn the_service_selects_its_pod_alone_on_the_wrapper_port() {
    let fp = fixture();
    let service = fp.service(&Template::inline());
    assert_eq!(
        service.metadata.name.as_deref(),
        Some("set-namespace-v0-4-1-7")
    );
    let spec = service.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let selector = spec.selector.unwrap();
    let pod_labels = inline_pod(&fp).metadata.labels.unwrap();
    for (k, v) in &selector {
        assert_eq!(pod_labels.get(k), Some(v), "{k}");
    }
    assert_eq!(selector["fn.kpt.dev/pod"], "set-namespace-v0-4-1-7");
    assert!(selector.contains_key("fn.kpt.dev/image"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.port, 9446);
    assert_eq!(port.target_port, Some(IntOrString::Int(9446)));
}

#[test]
fn image_label_values_are_valid_for_every_reference() {
    let cases = [
        (
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1",
            "set-namespace_v0.4.1",
        ),
        ("localhost:5000/fns/example-fn", "example-fn"),
        (
            "ghcr.io/kptdev/krm-functions-catalog/apply-setters@sha256:5e0b2b2a1f3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6",
            "apply-setters_5e0b2b2a1f3c",
        ),
        ("example.com/fn:v1@sha256:abcdef0123456789", "fn_v1_abcdef012345"),
        ("My_Func:Latest+build", "My_Func_Latest-build"),
        ("---", ""),
    ];
    for (image, want) in cases {
        let value = image_label_value(image);
        assert_eq!(value, want, "{image}");
        assert!(is_label_value(&value), "{value}");
    }
    let long = format!("example.com/{}:v1", "a".repeat(100));
    let value = image_label_value(&long);
    assert!(is_label_value(&value) && value.len() == 63, "{value}");
}

/// Porch's documented ConfigMap template (its `cp` init container and all):
/// the function container keeps the template's command and gets the image
/// and the wrapper's arguments; the init container keeps its own image.
#[test]
fn a_config_map_template_is_porchs_contract() {
    let map: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kpt-function-eval-pod-template", "namespace": "porch-system", "resourceVersion": "4711"},
        "data": {
            "template": "apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {team: config}\n  annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: 'false'}\nspec:\n  initContainers:\n  - name: copy-wrapper-server\n    image: example.com/porch-wrapper-server:v2\n    command: [cp, -a, /wrapper-server/., /wrapper-server-tools]\n  containers:\n  - name: sidecar\n    image: example.com/sidecar:v1\n  - name: function\n    image: image-replaced-by-kpt-func-image\n    command: [/wrapper-server-tools/wrapper-server]\n    args: [--log-format, json]\n",
            "serviceTemplate": "apiVersion: v1\nkind: Service\nmetadata:\n  labels: {team: config}\nspec:\n  ports:\n  - port: 9446\n    targetPort: 9446\n"
        }
    }))
    .unwrap();
    let template = Template::from_config_map(&map).unwrap();
    assert_eq!(template.version, "4711");
    let fp = fixture();
    let pod = fp.pod(&template, None).unwrap();
    let annotations = pod.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["fn.kpt.dev/template-version"], "4711");
    assert_eq!(
        annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"], "false",
        "the template's own choice stands"
    );
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "config");
    assert_eq!(labels["fn.kpt.dev/pod"], fp.name);
    let spec = pod.spec.unwrap();
    let init = &spec.init_containers.unwrap()[0];
    assert_eq!(
        init.image.as_deref(),
        Some("example.com/porch-wrapper-server:v2")
    );
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("example.com/sidecar:v1")
    );
    let function = &spec.containers[1];
    assert_eq!(function.image.as_deref(), Some(fp.image.as_str()));
    assert_eq!(
        function.command.clone().unwrap(),
        ["/wrapper-server-tools/wrapper-server"]
    );
    assert_eq!(
        function.args.clone().unwrap(),
        [
            "--log-format",
            "json",
            "--port",
            "9446",
            "--max-request-body-size",
            "6291456",
            "--",
            "function",
            "--verbose"
        ]
    );
    // The lifecycle's gate and finalizer, whatever the template says.
    let gates = spec.readiness_gates.unwrap();
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0].condition_type, "fn.kpt.dev/serving");
    assert_eq!(
        pod.metadata.finalizers.unwrap(),
        ["prot.fn.kpt.dev/traffic"]
    );
    let service = fp.service(&template);
    assert_eq!(service.metadata.labels.unwrap()["team"], "config");
    let selector = service.spec.unwrap().selector.unwrap();
    assert_eq!(selector["fn.kpt.dev/pod"], fp.name);
}

#[test]
fn every_template_gets_the_serving_gate_and_the_traffic_finalizer_once() {
    let fp = fixture();
    let mut template = Template::inline();
    // A template that declares them already keeps one of each.
    template.pod.metadata.finalizers = Some(vec!["prot.fn.kpt.dev/traffic".into()]);
    let pod = fp.pod(&template, None).unwrap();
    assert_eq!(
        pod.metadata.finalizers.unwrap(),
        ["prot.fn.kpt.dev/traffic"]
    );
    let pod = fp.pod(&pod_template_with_gate(), None).unwrap();
    let gates = pod.spec.unwrap().readiness_gates.unwrap();
    let types: Vec<&str> = gates.iter().map(|g| g.condition_type.as_str()).collect();
    assert_eq!(types, ["example.com/other", "fn.kpt.dev/serving"]);
    // Where the runner may not set it (Porch's Role), no gate of ours: the
    // pod's traffic follows its containers.
    let fp = FunctionPod {
        readiness_gate: false,
        ..fixture()
    };
    let pod = fp.pod(&pod_template_with_gate(), None).unwrap();
    let gates = pod.spec.unwrap().readiness_gates.unwrap();
    let types: Vec<&str> = gates.iter().map(|g| g.condition_type.as_str()).collect();
    assert_eq!(types, ["example.com/other"]);
}

fn pod_template_with_gate() -> Template {
    let mut template = Template::inline();
    template.pod.spec.as_mut().unwrap().readiness_gates =
        Some(vec![k8s_openapi::api::core::v1::PodReadinessGate {
            condition_type: "example.com/other".into(),
        }]);
    template
}

#[test]
fn a_pod_template_gets_the_wrapper_image_and_bad_templates_are_named() {
    let template: PodTemplate = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "base-pod-template", "namespace": "porch-fn-system", "resourceVersion": "12"},
        "template": {"spec": {
            "initContainers": [{"name": "copy-wrapper-server", "image": "old/wrapper:v1",
                                "command": ["cp", "-a", "/home/nonroot/wrapper-server/.", "/wrapper-server-tools"]}],
            "containers": [{"name": "function", "image": "to-be-replaced",
                            "command": ["/wrapper-server-tools/wrapper-server"]}]
        }}
    }))
    .unwrap();
    let template = Template::from_pod_template(&template).unwrap();
    let spec = fixture().pod(&template, None).unwrap().spec.unwrap();
    assert_eq!(
        spec.init_containers.unwrap()[0].image.as_deref(),
        Some("example.com/wrapper-server:v1")
    );

    let no_function: PodTemplate = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t", "namespace": "ns"},
        "template": {"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "main"}]}}
    }))
    .unwrap();
    assert_eq!(
        Template::from_pod_template(&no_function)
            .unwrap_err()
            .to_string(),
        "PodTemplate ns/t: has no container named `function`"
    );
    let not_a_pod: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t", "namespace": "ns"},
        "data": {"template": "spec: [1, 2]"}
    }))
    .unwrap();
    let err = Template::from_config_map(&not_a_pod)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ConfigMap ns/t: key `template` is not a Pod: "),
        "{err}"
    );
    let no_key: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t", "namespace": "ns"}, "data": {"pod": "x"}
    }))
    .unwrap();
    assert_eq!(
        Template::from_config_map(&no_key).unwrap_err().to_string(),
        "ConfigMap ns/t: has no key `template` (the function pod template)"
    );
}

/// FunctionConfig templateOverrides replace the template's values, as in
/// Porch; a value of the wrong shape is an error naming the field.
#[test]
fn template_overrides_replace_the_templates_values() {
    let overrides: TemplateOverrides = serde_json::from_value(serde_json::json!({
        "serviceAccountName": "fn-runner",
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": true},
        "container": {
            "resources": {"limits": {"memory": "512Mi"}},
            "env": [{"name": "LOG", "value": "debug"}],
            "envFrom": [{"configMapRef": {"name": "fn-env"}}]
        },
        "initContainer": {"resources": {"requests": {"cpu": "10m"}}}
    }))
    .unwrap();
    let mut fp = fixture();
    fp.pull_secret = Some("auth-secret".into());
    let spec = fp
        .pod(&Template::inline(), Some(&overrides))
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("fn-runner"));
    assert_eq!(spec.security_context.unwrap().run_as_user, Some(1000));
    assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "auth-secret");
    let function = &spec.containers[0];
    let limits = function.resources.clone().unwrap().limits.unwrap();
    assert_eq!(limits["memory"].0, "512Mi");
    assert_eq!(function.env.clone().unwrap()[0].name, "LOG");
    assert_eq!(
        function.env_from.clone().unwrap()[0]
            .config_map_ref
            .clone()
            .unwrap()
            .name,
        "fn-env"
    );
    let init = &spec.init_containers.unwrap()[0];
    assert_eq!(
        init.resources.clone().unwrap().requests.unwrap()["cpu"].0,
        "10m"
    );

    let bad: TemplateOverrides = serde_json::from_value(serde_json::json!({
        "container": {"env": [{"name": "X", "value": 5}]}
    }))
    .unwrap();
    let err = fixture()
        .pod(&Template::inline(), Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("FunctionConfig templateOverrides.container.env: "),
        "{err}"
    );
}

#[test]
fn a_function_configs_prespawn_goes_to_the_wrapper() {
    let fp = FunctionPod {
        prespawn: Some(2),
        ..fixture()
    };
    let pod = inline_pod(&fp);
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    assert_eq!(
        args,
        [
            "--port",
            "9446",
            "--max-request-body-size",
            "6291456",
            "--prespawn",
            "2",
            "--",
            "function",
            "--verbose"
        ]
    );
}

/// #31 item 5: a pod of a runner run by a Deployment is labelled with it and,
/// in the Deployment's namespace only, owned by it.
#[test]
fn a_deployments_pods_carry_its_label_and_where_allowed_its_owner_reference() {
    let deployment = crate::owner::OwnerDeployment {
        namespace: "porch-system".into(),
        name: "function-runner".into(),
        uid: "0b5c9f5e-1c1e-4d7a-9a47-9f1f3c7d2e11".into(),
    };
    let mut fp = fixture();
    fp.deployment = Some(deployment.clone());
    let across = inline_pod(&fp);
    assert_eq!(
        across.metadata.labels.as_ref().unwrap()[crate::owner::DEPLOYMENT_LABEL],
        deployment.uid
    );
    assert!(across.metadata.owner_references.is_none());
    fp.namespace = "porch-system".into();
    let same = inline_pod(&fp);
    let owners = same.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].uid, deployment.uid);
    assert_eq!(owners[0].kind, "Deployment");
    assert!(inline_pod(&fixture()).metadata.owner_references.is_none());
}
