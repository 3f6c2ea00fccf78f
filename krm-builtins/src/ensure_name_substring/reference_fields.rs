//! kustomize's builtin `namereference` field specs (api v0.10.1): which
//! field of which kind names a resource of which kind.

/// A group, version and kind; an empty part matches anything
/// (`Gvk.IsSelected`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Gvk {
    pub(super) group: &'static str,
    pub(super) version: &'static str,
    pub(super) kind: &'static str,
}

const fn gvk(group: &'static str, version: &'static str, kind: &'static str) -> Gvk {
    Gvk {
        group,
        version,
        kind,
    }
}

/// One line of kustomize's `namereference` table: a field of the
/// `referrer`'s kind that names a resource of the `target`'s kind.
pub(super) struct RefField {
    pub(super) target: Gvk,
    pub(super) referrer: Gvk,
    /// The path, split at `/` (`\/` is a `/` inside a key).
    pub(super) path: Vec<String>,
}

fn split_path(path: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'/') => {
                chars.next();
                if let Some(last) = out.last_mut() {
                    last.push('/');
                }
            }
            '/' => out.push(String::new()),
            c => {
                if let Some(last) = out.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    out
}

/// The pod spec's place in the kinds that hold one.
const POD: (Gvk, &str) = (gvk("", "v1", "Pod"), "spec");
const TEMPLATE: &str = "spec/template/spec";
const CRONJOB: (Gvk, &str) = (
    gvk("", "", "CronJob"),
    "spec/jobTemplate/spec/template/spec",
);

/// The holders of a pod spec that the ConfigMap and Secret lines name.
fn config_holders() -> [(Gvk, &'static str); 7] {
    [
        POD,
        (gvk("", "", "Deployment"), TEMPLATE),
        (gvk("", "", "ReplicaSet"), TEMPLATE),
        (gvk("", "", "DaemonSet"), TEMPLATE),
        (gvk("", "", "StatefulSet"), TEMPLATE),
        (gvk("", "", "Job"), TEMPLATE),
        CRONJOB,
    ]
}

/// The holders of a pod spec that the ServiceAccount, claim and
/// PriorityClass lines name (no ReplicaSet, a ReplicationController).
fn other_holders() -> [(Gvk, &'static str); 7] {
    [
        (gvk("", "", "Pod"), "spec"),
        (gvk("", "", "StatefulSet"), TEMPLATE),
        (gvk("", "", "Deployment"), TEMPLATE),
        (gvk("", "", "ReplicationController"), TEMPLATE),
        CRONJOB,
        (gvk("", "", "Job"), TEMPLATE),
        (gvk("", "", "DaemonSet"), TEMPLATE),
    ]
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// kustomize's builtin `namereference` table (api v0.10.1), in its order.
pub(super) fn reference_fields() -> Vec<RefField> {
    let mut out: Vec<RefField> = Vec::new();
    let mut add = |target: Gvk, referrer: Gvk, path: &str| {
        out.push(RefField {
            target,
            referrer,
            path: split_path(path),
        });
    };
    for kind in [
        "Deployment",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
    ] {
        add(
            gvk("", "", kind),
            gvk("", "", "HorizontalPodAutoscaler"),
            "spec/scaleTargetRef/name",
        );
    }
    let cm = gvk("", "v1", "ConfigMap");
    for (holder, at) in config_holders() {
        for tail in [
            "volumes/configMap/name",
            "containers/env/valueFrom/configMapKeyRef/name",
            "initContainers/env/valueFrom/configMapKeyRef/name",
            "containers/envFrom/configMapRef/name",
            "initContainers/envFrom/configMapRef/name",
            "volumes/projected/sources/configMap/name",
        ] {
            add(cm, holder, &format!("{at}/{tail}"));
        }
    }
    add(
        cm,
        gvk("", "", "PodTemplate"),
        "template/spec/volumes/configMap/name",
    );
    add(cm, gvk("", "", "Node"), "spec/configSource/configMap");
    add(cm, gvk("", "", "Role"), "rules/resourceNames");
    add(cm, gvk("", "", "ClusterRole"), "rules/resourceNames");
    add(
        cm,
        gvk("", "", "Ingress"),
        "metadata/annotations/nginx.ingress.kubernetes.io\\/fastcgi-params-configmap",
    );
    let secret = gvk("", "v1", "Secret");
    for (holder, at) in config_holders() {
        for tail in [
            "volumes/secret/secretName",
            "containers/env/valueFrom/secretKeyRef/name",
            "initContainers/env/valueFrom/secretKeyRef/name",
            "containers/envFrom/secretRef/name",
            "initContainers/envFrom/secretRef/name",
            "imagePullSecrets/name",
            "volumes/projected/sources/secret/name",
        ] {
            add(secret, holder, &format!("{at}/{tail}"));
        }
    }
    let ingress = gvk("", "", "Ingress");
    for path in [
        "spec/tls/secretName",
        "metadata/annotations/ingress.kubernetes.io\\/auth-secret",
        "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret",
        "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-tls-secret",
    ] {
        add(secret, ingress, path);
    }
    add(
        secret,
        gvk("", "", "ServiceAccount"),
        "imagePullSecrets/name",
    );
    for key in [
        "secretName",
        "adminSecretName",
        "userSecretName",
        "secretRef",
    ] {
        add(
            secret,
            gvk("", "", "StorageClass"),
            &format!("parameters/{key}"),
        );
    }
    add(secret, gvk("", "", "Role"), "rules/resourceNames");
    add(secret, gvk("", "", "ClusterRole"), "rules/resourceNames");
    add(
        secret,
        gvk("serving.knative.dev", "v1", "Service"),
        "spec/template/spec/containers/env/valueFrom/secretKeyRef/name",
    );
    add(
        secret,
        gvk("", "", "PersistentVolume"),
        "spec/azureFile/secretName",
    );
    let service = gvk("", "v1", "Service");
    add(service, gvk("apps", "", "StatefulSet"), "spec/serviceName");
    for path in [
        "spec/rules/http/paths/backend/serviceName",
        "spec/backend/serviceName",
        "spec/rules/http/paths/backend/service/name",
        "spec/defaultBackend/service/name",
    ] {
        add(service, ingress, path);
    }
    add(
        service,
        gvk("apiregistration.k8s.io", "", "APIService"),
        "spec/service/name",
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        add(
            service,
            gvk("admissionregistration.k8s.io", "", kind),
            "webhooks/clientConfig/service",
        );
    }
    add(
        gvk(RBAC, "", "Role"),
        gvk(RBAC, "", "RoleBinding"),
        "roleRef/name",
    );
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        add(
            gvk(RBAC, "", "ClusterRole"),
            gvk(RBAC, "", kind),
            "roleRef/name",
        );
    }
    let sa = gvk("", "v1", "ServiceAccount");
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        add(sa, gvk(RBAC, "", kind), "subjects");
    }
    for (holder, at) in other_holders() {
        add(sa, holder, &format!("{at}/serviceAccountName"));
    }
    let pvc = gvk("", "v1", "PersistentVolumeClaim");
    for (holder, at) in other_holders() {
        add(
            pvc,
            holder,
            &format!("{at}/volumes/persistentVolumeClaim/claimName"),
        );
    }
    let pv = gvk("", "v1", "PersistentVolume");
    add(pv, gvk("", "", "PersistentVolumeClaim"), "spec/volumeName");
    add(pv, gvk("", "", "ClusterRole"), "rules/resourceNames");
    let sc = gvk("storage.k8s.io", "v1", "StorageClass");
    add(sc, gvk("", "", "PersistentVolume"), "spec/storageClassName");
    add(
        sc,
        gvk("", "", "PersistentVolumeClaim"),
        "spec/storageClassName",
    );
    add(
        sc,
        gvk("", "", "StatefulSet"),
        "spec/volumeClaimTemplates/spec/storageClassName",
    );
    let pc = gvk("scheduling.k8s.io", "v1", "PriorityClass");
    for (holder, at) in other_holders() {
        add(pc, holder, &format!("{at}/priorityClassName"));
    }
    // The table's group for IngressClass is `networking.k8s.io/v1`: no
    // resource's group is that, so the line never matches.
    add(
        gvk("networking.k8s.io/v1", "v1", "IngressClass"),
        ingress,
        "spec/ingressClassName",
    );
    out
}
