//! A Job's `kubernetes:` section merged into each of its Pods. What
//! gitfleet sets (its labels and annotations, the scheduler, the GPUs, the
//! env it owns) stays as it is: validation refuses the keys gitfleet owns,
//! and a key set both ways keeps gitfleet's value.

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EmptyDirVolumeSource, LocalObjectReference,
    PersistentVolumeClaimVolumeSource, Pod, SecretVolumeSource, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use model::spec::KubernetesSpec;
use model::spec::kubernetes::{SHM_PATH, StorageMedium};

/// The name of the shared-memory volume (`sharedMemory`).
pub const SHM_VOLUME: &str = "gitfleet-shm";

/// Adds `k8s` to `pod` (one container, as [`crate::pods::Gang::pod`]
/// makes it).
pub fn merge(pod: &mut Pod, k8s: &KubernetesSpec) {
    let meta = &mut pod.metadata;
    for (key, value) in &k8s.labels {
        let labels = meta.labels.get_or_insert_with(Default::default);
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    for (key, value) in &k8s.annotations {
        let annotations = meta.annotations.get_or_insert_with(Default::default);
        annotations
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if let Some(account) = &k8s.service_account_name {
        spec.service_account_name = Some(account.clone());
    }
    if !k8s.image_pull_secrets.is_empty() {
        spec.image_pull_secrets = Some(
            k8s.image_pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect(),
        );
    }
    if !k8s.tolerations.is_empty() {
        spec.tolerations = Some(
            k8s.tolerations
                .iter()
                .map(|t| Toleration {
                    key: t.key.clone(),
                    operator: t.operator.map(|o| o.as_str().to_string()),
                    value: t.value.clone(),
                    effect: t.effect.map(|e| e.as_str().to_string()),
                    toleration_seconds: t.toleration_seconds,
                })
                .collect(),
        );
    }
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if let Some(size) = &k8s.shared_memory {
        volumes.push(Volume {
            name: SHM_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_string()),
                size_limit: Some(Quantity(size.clone())),
            }),
            ..Volume::default()
        });
        mounts.push(VolumeMount {
            name: SHM_VOLUME.to_string(),
            mount_path: SHM_PATH.to_string(),
            ..VolumeMount::default()
        });
    }
    for v in &k8s.volumes {
        volumes.push(Volume {
            name: v.name.clone(),
            persistent_volume_claim: v.persistent_volume_claim.as_ref().map(|c| {
                PersistentVolumeClaimVolumeSource {
                    claim_name: c.claim_name.clone(),
                    read_only: v.read_only.then_some(true),
                }
            }),
            config_map: v.config_map.as_ref().map(|c| ConfigMapVolumeSource {
                name: c.name.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            secret: v.secret.as_ref().map(|s| SecretVolumeSource {
                secret_name: Some(s.secret_name.clone()),
                ..SecretVolumeSource::default()
            }),
            empty_dir: v.empty_dir.as_ref().map(|e| EmptyDirVolumeSource {
                medium: e.medium.map(|StorageMedium::Memory| "Memory".to_string()),
                size_limit: e.size_limit.clone().map(Quantity),
            }),
            ..Volume::default()
        });
        mounts.push(VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only.then_some(true),
            ..VolumeMount::default()
        });
    }
    if !volumes.is_empty() {
        spec.volumes = Some(volumes);
    }
    for container in &mut spec.containers {
        if !mounts.is_empty() {
            container.volume_mounts = Some(mounts.clone());
        }
        let Some(resources) = &k8s.resources else {
            continue;
        };
        let own = container.resources.get_or_insert_with(Default::default);
        for (given, list) in [
            (&resources.requests, &mut own.requests),
            (&resources.limits, &mut own.limits),
        ] {
            for (name, quantity) in given.iter().flat_map(|g| g.entries()) {
                list.get_or_insert_with(Default::default)
                    .entry(name.to_string())
                    .or_insert_with(|| Quantity(quantity.to_string()));
            }
        }
    }
}
