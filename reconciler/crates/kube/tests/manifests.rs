//! Every manifest of `deploy/kubernetes/` parses into its Kubernetes API
//! type (k8s-openapi) and writes back as it was read: a field the type does
//! not have (a typo, a field at the wrong level) or a value of the wrong
//! type fails here, in CI, not at `kubectl apply`. The ServiceMonitor (a
//! Prometheus Operator CRD, not in k8s-openapi) and the Kustomization are
//! checked against the fields this repository uses; the kustomization lists
//! every manifest, and only those.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/kubernetes")
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join(file)).unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

/// `doc` read as `T` and written back: the same value, or what differs.
fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    match first_difference(doc, &back, "") {
        None => Ok(()),
        Some(path) => Err(format!("{path}: not a field of the type, or not its type")),
    }
}

/// The first path where `read` has something `written` has not.
fn first_difference(read: &Value, written: &Value, at: &str) -> Option<String> {
    match (read, written) {
        (Value::Object(r), Value::Object(w)) => r.iter().find_map(|(k, v)| match w.get(k) {
            Some(wv) => first_difference(v, wv, &format!("{at}.{k}")),
            None => Some(format!("{at}.{k}")),
        }),
        (Value::Array(r), Value::Array(w)) if r.len() == w.len() => r
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (r, w))| first_difference(r, w, &format!("{at}[{i}]"))),
        (r, w) if r == w => None,
        _ => Some(at.to_string()),
    }
}

/// The CRD's fields this repository uses (monitoring.coreos.com/v1).
mod service_monitor {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ServiceMonitor {
        pub api_version: String,
        pub kind: String,
        pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        pub spec: Spec,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Spec {
        pub selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub namespace_selector: Option<NamespaceSelector>,
        pub endpoints: Vec<Endpoint>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct NamespaceSelector {
        pub match_names: Vec<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Endpoint {
        pub port: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub path: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub interval: Option<String>,
    }
}

#[derive(Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    resources: Vec<String>,
}

/// Checks one document by its kind; the kind's name.
fn check(doc: &Value) -> Result<String, String> {
    let kind = doc["kind"].as_str().ok_or("no kind")?.to_string();
    let api = doc["apiVersion"].as_str().ok_or("no apiVersion")?;
    match (api, kind.as_str()) {
        ("v1", "Namespace") => round_trip::<Namespace>(doc),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(doc),
        ("v1", "Service") => round_trip::<Service>(doc),
        ("v1", "PersistentVolumeClaim") => round_trip::<PersistentVolumeClaim>(doc),
        ("apps/v1", "Deployment") => round_trip::<Deployment>(doc),
        ("apps/v1", "DaemonSet") => round_trip::<DaemonSet>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<ClusterRoleBinding>(doc)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<Role>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<RoleBinding>(doc),
        ("monitoring.coreos.com/v1", "ServiceMonitor") => {
            round_trip::<service_monitor::ServiceMonitor>(doc)
        }
        ("kustomize.config.k8s.io/v1beta1", "Kustomization") => round_trip::<Kustomization>(doc),
        (api, kind) => Err(format!("{api} {kind}: no type to check it against")),
    }
    .map(|()| kind)
}

fn manifests() -> BTreeSet<String> {
    std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect()
}

#[test]
fn every_manifest_is_its_api_type_exactly() {
    let mut kinds = BTreeSet::new();
    for file in manifests()
        .iter()
        .chain(["kustomization.yaml".to_string()].iter())
    {
        for (i, doc) in documents(file).iter().enumerate() {
            match check(doc) {
                Ok(kind) => {
                    kinds.insert(kind);
                }
                Err(e) => panic!("deploy/kubernetes/{file}, document {i}: {e}"),
            }
        }
    }
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Deployment",
        "DaemonSet",
        "Service",
        "ServiceMonitor",
        "Kustomization",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/kubernetes/");
    }
}

#[test]
fn the_kustomization_lists_every_manifest() {
    let listed: BTreeSet<String> = documents("kustomization.yaml")[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, manifests());
}

#[test]
fn a_typo_or_a_misplaced_field_is_caught() {
    let mut doc = documents("agent.yaml").remove(0);
    assert!(check(&doc).is_ok());
    let container = &mut doc["spec"]["template"]["spec"]["containers"][0];
    container["imagePullPolciy"] = Value::from("Always");
    let e = check(&doc).unwrap_err();
    assert!(e.contains("imagePullPolciy"), "{e}");
    let mut doc = documents("service.yaml").remove(0);
    doc["spec"]["ports"][0]["port"] = Value::from("9464x");
    assert!(check(&doc).is_err());
    let mut doc = documents("servicemonitor.yaml").remove(0);
    doc["spec"]["endpoints"][0]["scrapeTimeout"] = Value::from("10s");
    assert!(check(&doc).is_err());
    let mut doc = documents("deployment.yaml").remove(1);
    doc["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimNmae"] =
        Value::from("x");
    assert!(check(&doc).is_err());
}

/// PyPI's `kubernetes-validate` (the Kubernetes OpenAPI schemas of a
/// release, bundled): its path from `GITFLEET_KUBERNETES_VALIDATE`, which
/// `scripts/test` installs and sets. `None` (the test is skipped) without
/// it, unless `GITFLEET_REQUIRE_KUBERNETES_VALIDATE` is set.
fn kubernetes_validate() -> Option<PathBuf> {
    let found = std::env::var_os("GITFLEET_KUBERNETES_VALIDATE").map(PathBuf::from);
    if found.is_none() {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_KUBERNETES_VALIDATE").is_none(),
            "kubernetes-validate is required but GITFLEET_KUBERNETES_VALIDATE is not set"
        );
        eprintln!("kubernetes-validate not installed: skipping the OpenAPI schema check");
    }
    found
}

/// The Kubernetes release the manifests are checked against: the API the
/// executor is built for (k8s-openapi's `v1_33` feature).
const KUBERNETES_VERSION: &str = "1.33.0";

/// Runs `kubernetes-validate --strict` on `files`: its exit status and output.
fn validate(tool: &std::path::Path, files: &[PathBuf]) -> (bool, String) {
    let out = std::process::Command::new(tool)
        .args(["--strict", "-k", KUBERNETES_VERSION])
        .args(files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_manifests_pass_the_kubernetes_openapi_schema() {
    let Some(tool) = kubernetes_validate() else {
        return;
    };
    // The CRD (ServiceMonitor) has no schema in Kubernetes' own OpenAPI; it
    // and the Kustomization are checked above.
    let files: Vec<PathBuf> = manifests()
        .into_iter()
        .filter(|f| f != "servicemonitor.yaml")
        .map(|f| dir().join(f))
        .collect();
    let (ok, text) = validate(&tool, &files);
    assert!(ok, "{text}");
    let documents: usize = files
        .iter()
        .map(|f| documents(f.file_name().unwrap().to_str().unwrap()).len())
        .sum();
    assert_eq!(
        text.matches(" passed for resource ").count(),
        documents,
        "every document checked: {text}"
    );

    // The check is real: a misspelt field fails it.
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("agent.yaml");
    let agent = std::fs::read_to_string(dir().join("agent.yaml")).unwrap();
    let image = "          image: registry.example.com/platform/gitfleet:0.1.0\n";
    assert!(agent.contains(image));
    let misspelt = format!("{image}          imagePullPolciy: Always\n");
    std::fs::write(&typo, agent.replacen(image, &misspelt, 1)).unwrap();
    let (ok, text) = validate(&tool, &[typo]);
    assert!(!ok && text.contains("imagePullPolciy"), "{text}");
}
