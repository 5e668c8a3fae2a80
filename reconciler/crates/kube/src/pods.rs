//! A placed job as Kubernetes objects: one Pod per replica, a headless
//! Service per multi-replica job (the rendezvous address), a Binding per
//! Pod. Pure functions of the spec and the placement.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Binding, Container, EnvVar, EnvVarSource, ObjectReference, Pod, PodSpec, ResourceRequirements,
    SecretKeySelector, Service, ServiceSpec,
};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, OwnerReference};

use model::observed::NodeGpus;
use model::spec::{Duration, EnvSource, EnvValue, JobSpec, Object, ValueFrom};

use crate::names::{
    ATTEMPT_ANNOTATION, ATTEMPT_LABEL, GPUS_ANNOTATION, JOB_LABEL, MANAGED_BY, MANAGER,
    REPLICA_LABEL, REVISION_ANNOTATION, SCHEDULER_NAME, attempt_id, base_name, hostname, pod_name,
    start_key,
};

/// The extended resource the NVIDIA device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The rendezvous port of `torchrun` (`MASTER_PORT`): each Pod has its own
/// network namespace, so one port serves every job.
pub const MASTER_PORT: u16 = 29500;
/// The name of the one container of a replica's Pod.
pub const CONTAINER: &str = "main";

/// Why a job cannot be made into Pods (trying again does not help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The Job has no `image`.
    #[error("the job has no `image`: the kube executor runs each replica in a container")]
    NoImage,
    /// The placement does not have one entry per replica.
    #[error("the placement has {placed} entries for {replicas} replicas")]
    Placement {
        /// Entries in the placement.
        placed: usize,
        /// Replicas of the job.
        replicas: u32,
    },
    /// An env value that would be readable in the Pod's spec.
    #[error(
        "env {0}: sensitive values and `valueFrom` file or env are not passed to Pods (they would be readable in the Pod spec): put the value in a Secret and use `valueFrom: {{secretKeyRef: {{name, key}}}}`; see docs/kubernetes.md"
    )]
    SensitiveEnv(String),
}

/// One job placement, as the Pods need it.
#[derive(Debug, Clone, Copy)]
pub struct Gang<'a> {
    /// The job.
    pub job: &'a Object<JobSpec>,
    /// One entry per replica, in rank order.
    pub placement: &'a [NodeGpus],
    /// The reconciler's attempt.
    pub attempt: Option<&'a str>,
    /// The revision whose plan placed it.
    pub revision: &'a str,
    /// Its priority class's grace period (`terminationGracePeriodSeconds`).
    pub grace: Duration,
    /// The namespace of its objects.
    pub namespace: &'a str,
}

impl Gang<'_> {
    /// The name shared by this attempt's objects (the Service's).
    pub fn base(&self) -> String {
        base_name(self.job.name(), Some(&self.key()))
    }

    /// This start's key ([`start_key`]): the attempt and the placement.
    fn key(&self) -> String {
        start_key(self.attempt, self.placement)
    }

    /// Whether the gang has a headless Service (more than one replica).
    pub fn has_service(&self) -> bool {
        self.placement.len() > 1
    }

    /// The labels of every object of this attempt.
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY.to_string(), MANAGER.to_string()),
            (JOB_LABEL.to_string(), self.job.name().to_string()),
            (ATTEMPT_LABEL.to_string(), attempt_id(Some(&self.key()))),
        ])
    }

    /// Checks what cannot be carried out, before anything is created.
    pub fn check(&self) -> Result<(), BuildError> {
        let spec = &self.job.spec;
        if spec.image.as_deref().is_none_or(str::is_empty) {
            return Err(BuildError::NoImage);
        }
        if self.placement.len() != spec.replicas as usize {
            return Err(BuildError::Placement {
                placed: self.placement.len(),
                replicas: spec.replicas,
            });
        }
        if let Some((name, _)) = spec
            .env
            .iter()
            .find(|(_, v)| v.is_sensitive() && secret_ref(v).is_none())
        {
            return Err(BuildError::SensitiveEnv(name.clone()));
        }
        Ok(())
    }

    /// The headless Service that names the replicas (`MASTER_ADDR`).
    pub fn service(&self) -> Service {
        let mut selector = self.labels();
        selector.remove(MANAGED_BY);
        Service {
            metadata: ObjectMeta {
                name: Some(self.base()),
                namespace: Some(self.namespace.to_string()),
                labels: Some(self.labels()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".to_string()),
                selector: Some(selector),
                // Rank 0 must resolve before it is ready.
                publish_not_ready_addresses: Some(true),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    /// The Pod of replica `rank`, owned by `owner` (the Service) when given.
    pub fn pod(&self, rank: u32, owner: Option<OwnerReference>) -> Result<Pod, BuildError> {
        self.check()?;
        let spec = &self.job.spec;
        let part = self
            .placement
            .get(rank as usize)
            .ok_or(BuildError::Placement {
                placed: self.placement.len(),
                replicas: spec.replicas,
            })?;
        let base = self.base();
        let mut labels = self.labels();
        labels.insert(REPLICA_LABEL.to_string(), rank.to_string());
        let gpus: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
        let annotations = BTreeMap::from([
            (
                ATTEMPT_ANNOTATION.to_string(),
                self.attempt.unwrap_or("0").to_string(),
            ),
            (GPUS_ANNOTATION.to_string(), gpus.join(",")),
            (REVISION_ANNOTATION.to_string(), self.revision.to_string()),
        ]);
        let (host, subdomain) = if self.has_service() {
            (Some(hostname(rank)), Some(base.clone()))
        } else {
            (None, None)
        };
        let count = Quantity(part.gpus.len().to_string());
        let resources = BTreeMap::from([(GPU_RESOURCE.to_string(), count)]);
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some(pod_name(&base, rank)),
                namespace: Some(self.namespace.to_string()),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: owner.map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                scheduler_name: Some(SCHEDULER_NAME.to_string()),
                restart_policy: Some("Never".to_string()),
                termination_grace_period_seconds: i64::try_from(self.grace.as_secs()).ok(),
                hostname: host,
                subdomain,
                containers: vec![Container {
                    name: CONTAINER.to_string(),
                    image: spec.image.clone(),
                    command: (!spec.command.is_empty()).then(|| spec.command.clone()),
                    env: Some(self.env(rank, &gpus)),
                    resources: Some(ResourceRequirements {
                        limits: Some(resources.clone()),
                        requests: Some(resources),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        if let Some(k8s) = &spec.kubernetes {
            crate::template::merge(&mut pod, k8s);
        }
        Ok(pod)
    }

    /// The spec's env (plain values and Secret references only,
    /// [`Gang::check`]), then what gitfleet sets, which the spec cannot
    /// override.
    fn env(&self, rank: u32, gpus: &[String]) -> Vec<EnvVar> {
        let var = |name: &str, value: String| EnvVar {
            name: name.to_string(),
            value: Some(value),
            value_from: None,
        };
        let master = if self.has_service() {
            format!("{}.{}.{}.svc", hostname(0), self.base(), self.namespace)
        } else {
            "127.0.0.1".to_string()
        };
        let own = [
            ("GITFLEET_JOB", self.job.name().to_string()),
            ("GITFLEET_GPUS", gpus.join(",")),
            // The devices the container runtime exposes: the planned ones.
            ("NVIDIA_VISIBLE_DEVICES", gpus.join(",")),
            // Inside the container the exposed devices count from 0.
            (
                "CUDA_VISIBLE_DEVICES",
                (0..gpus.len())
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("MASTER_ADDR", master),
            ("MASTER_PORT", MASTER_PORT.to_string()),
            ("WORLD_SIZE", self.placement.len().to_string()),
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", "0".to_string()),
        ];
        let mut env: Vec<EnvVar> = self
            .job
            .spec
            .env
            .iter()
            .filter(|(name, _)| !own.iter().any(|(o, _)| o == name))
            .filter_map(|(name, value)| match (value.inline(), secret_ref(value)) {
                (Some(v), _) => Some(var(name, v.to_string())),
                (None, Some(secret)) => Some(EnvVar {
                    name: name.clone(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: secret.name.clone(),
                            key: secret.key.clone(),
                            optional: None,
                        }),
                        ..EnvVarSource::default()
                    }),
                }),
                (None, None) => None,
            })
            .collect();
        env.extend(own.into_iter().map(|(name, value)| var(name, value)));
        env
    }
}

/// The Secret key an env value names (`valueFrom.secretKeyRef`): passed
/// to the Pod as a reference, so its value is never in gitfleet.
fn secret_ref(value: &EnvValue) -> Option<&model::spec::SecretKeyRef> {
    match value {
        EnvValue::From(ValueFrom {
            value_from: EnvSource::SecretKeyRef(secret),
        }) => Some(secret),
        _ => None,
    }
}

/// The Binding that puts Pod `pod` on `node`.
pub fn binding(namespace: &str, pod: &str, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    }
}

/// The policy/v1 Eviction of Pod `pod`, with `grace` seconds to stop.
pub fn eviction(namespace: &str, pod: &str, grace: u32) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            grace_period_seconds: Some(i64::from(grace)),
            ..DeleteOptions::default()
        }),
    }
}

/// An owner reference to the Service `name` with `uid`: deleting the
/// Service deletes its Pods.
pub fn service_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Service".to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        block_owner_deletion: None,
        controller: Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(spec: serde_json::Value) -> Object<JobSpec> {
        Object {
            metadata: model::spec::Metadata {
                name: "llama".to_string(),
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
            },
            spec: serde_json::from_value(spec).unwrap(),
            origin: model::diag::Origin::new(
                "test.yaml".into(),
                model::diag::Pos { line: 1, column: 1 },
            ),
        }
    }

    fn placement() -> Vec<NodeGpus> {
        vec![
            NodeGpus {
                node: "n1".to_string(),
                gpus: vec![4, 5],
            },
            NodeGpus {
                node: "n2".to_string(),
                gpus: vec![0, 1],
            },
        ]
    }

    fn spec2() -> serde_json::Value {
        json!({
            "queue": "research", "replicas": 2, "gpusPerReplica": 2,
            "image": "ghcr.io/x/train:1", "command": ["torchrun", "train.py"],
            "env": {"EPOCHS": "3", "RANK": "99"}
        })
    }

    fn env_of(pod: &Pod) -> BTreeMap<String, String> {
        pod.spec.as_ref().unwrap().containers[0]
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.name.clone(), e.value.clone().unwrap()))
            .collect()
    }

    #[test]
    fn pods_are_pinned_bound_to_gitfleet_and_rendezvous() {
        let job = job(spec2());
        let placement = placement();
        let gang = Gang {
            job: &job,
            placement: &placement,
            attempt: Some("2026-11-21T10:00:00+00:00#0"),
            revision: "abc123",
            grace: Duration::from_secs(90),
            namespace: "ml",
        };
        let base = gang.base();
        let owner = service_owner(&base, "uid-1");
        let pod = gang.pod(0, Some(owner.clone())).unwrap();
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["name"], format!("{base}-0"));
        assert_eq!(v["metadata"]["namespace"], "ml");
        assert_eq!(v["metadata"]["labels"]["gitfleet.io/job"], "llama");
        assert_eq!(v["metadata"]["labels"]["gitfleet.io/replica"], "0");
        assert_eq!(
            v["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "gitfleet"
        );
        assert_eq!(
            v["metadata"]["annotations"]["gitfleet.io/attempt"],
            "2026-11-21T10:00:00+00:00#0"
        );
        assert_eq!(v["metadata"]["annotations"]["gitfleet.io/gpus"], "4,5");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Service");
        let spec = &v["spec"];
        assert_eq!(spec["schedulerName"], "gitfleet");
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["terminationGracePeriodSeconds"], 90);
        assert!(spec.get("nodeName").is_none(), "bound by a Binding");
        assert_eq!(spec["hostname"], "replica-0");
        assert_eq!(spec["subdomain"], base);
        let c = &spec["containers"][0];
        assert_eq!(c["image"], "ghcr.io/x/train:1");
        assert_eq!(c["command"], json!(["torchrun", "train.py"]));
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "2");
        assert_eq!(c["resources"]["requests"]["nvidia.com/gpu"], "2");
        let env = env_of(&pod);
        assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], "4,5");
        assert_eq!(env["GITFLEET_GPUS"], "4,5");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1");
        assert_eq!(env["MASTER_ADDR"], format!("replica-0.{base}.ml.svc"));
        assert_eq!(env["MASTER_PORT"], "29500");
        assert_eq!(env["WORLD_SIZE"], "2");
        assert_eq!(env["EPOCHS"], "3");
        // gitfleet's own variables win over the spec's.
        assert_eq!(env["RANK"], "0");
        // What gitfleet sets is what init containers may not set.
        let own: Vec<&str> = env
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "EPOCHS")
            .collect();
        let mut owned = model::spec::kubernetes::OWNED_ENV.to_vec();
        owned.sort_unstable();
        assert_eq!(own, owned);
        let env1 = env_of(&gang.pod(1, Some(owner)).unwrap());
        assert_eq!(env1["RANK"], "1");
        assert_eq!(env1["NVIDIA_VISIBLE_DEVICES"], "0,1");
    }

    #[test]
    fn the_service_is_headless_and_selects_the_attempt() {
        let job = job(spec2());
        let placement = placement();
        let gang = Gang {
            job: &job,
            placement: &placement,
            attempt: None,
            revision: "r",
            grace: Duration::ZERO,
            namespace: "ml",
        };
        let v = serde_json::to_value(gang.service()).unwrap();
        assert_eq!(v["metadata"]["name"], gang.base());
        assert_eq!(v["spec"]["clusterIP"], "None");
        assert_eq!(v["spec"]["publishNotReadyAddresses"], true);
        assert_eq!(v["spec"]["selector"]["gitfleet.io/job"], "llama");
        assert_eq!(
            v["spec"]["selector"]["gitfleet.io/attempt"],
            attempt_id(Some(&start_key(None, &placement)))
        );
    }

    #[test]
    fn a_single_replica_has_no_service_and_a_local_master() {
        let job = job(json!({"queue": "q", "gpusPerReplica": 1, "image": "busybox"}));
        let placement = vec![NodeGpus {
            node: "n1".to_string(),
            gpus: vec![7],
        }];
        let gang = Gang {
            job: &job,
            placement: &placement,
            attempt: None,
            revision: "r",
            grace: Duration::ZERO,
            namespace: "default",
        };
        assert!(!gang.has_service());
        let pod = gang.pod(0, None).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert!(spec.hostname.is_none() && spec.subdomain.is_none());
        assert!(
            spec.containers[0].command.is_none(),
            "the image's entrypoint"
        );
        assert!(pod.metadata.owner_references.is_none());
        assert_eq!(env_of(&pod)["MASTER_ADDR"], "127.0.0.1");
    }

    #[test]
    fn what_cannot_run_is_refused() {
        let placement = placement();
        let gang = |job| Gang {
            job,
            placement: &placement,
            attempt: None,
            revision: "r",
            grace: Duration::ZERO,
            namespace: "default",
        };
        let no_image = job(json!({"queue": "q", "replicas": 2, "gpusPerReplica": 2}));
        assert_eq!(gang(&no_image).check(), Err(BuildError::NoImage));
        let secret = job(
            json!({"queue": "q", "replicas": 2, "gpusPerReplica": 2, "image": "x",
            "env": {"TOKEN": {"value": "s3cr3t", "sensitive": true}}}),
        );
        assert_eq!(
            gang(&secret).pod(0, None),
            Err(BuildError::SensitiveEnv("TOKEN".to_string()))
        );
        let from = job(
            json!({"queue": "q", "replicas": 2, "gpusPerReplica": 2, "image": "x",
            "env": {"KEY": {"valueFrom": {"env": "HF_TOKEN"}}}}),
        );
        assert!(matches!(
            gang(&from).check(),
            Err(BuildError::SensitiveEnv(_))
        ));
        let three = job(json!({"queue": "q", "replicas": 3, "gpusPerReplica": 2, "image": "x"}));
        assert!(matches!(
            gang(&three).check(),
            Err(BuildError::Placement { .. })
        ));
    }

    #[test]
    fn bindings_target_the_node() {
        let v = serde_json::to_value(binding("ml", "p-0", "n1")).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": "p-0", "namespace": "ml"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
        );
    }
}
