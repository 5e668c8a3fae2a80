//! A Job's `kubernetes:` section merged into each of its Pods. What
//! gitfleet sets (its labels and annotations, the scheduler, the GPUs, the
//! env it owns) stays as it is: validation refuses the keys gitfleet owns,
//! and a key set both ways keeps gitfleet's value.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    LocalObjectReference, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use model::spec::KubernetesSpec;
use model::spec::kubernetes::{InitContainer, Resources, SHM_PATH, StorageMedium};

/// The name of the shared-memory volume (`sharedMemory`).
pub const SHM_VOLUME: &str = "gitfleet-shm";
/// `NVIDIA_VISIBLE_DEVICES` of an init container: the NVIDIA container
/// runtime exposes no GPU (and no driver), even when the image asks for
/// `all`.
pub const NO_GPU: &str = "void";

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
    if let Some(sc) = &k8s.security_context {
        spec.security_context = Some(pod_security_context(sc));
    }
    let security = k8s
        .container_security_context
        .as_ref()
        .map(container_security_context);
    if !k8s.init_containers.is_empty() {
        spec.init_containers = Some(
            k8s.init_containers
                .iter()
                .map(|c| init_container(c, &mounts, security.as_ref()))
                .collect(),
        );
    }
    for container in &mut spec.containers {
        if !mounts.is_empty() {
            container.volume_mounts = Some(mounts.clone());
        }
        if let Some(security) = &security {
            container.security_context = Some(security.clone());
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

/// The Pod's security context from the section's.
fn pod_security_context(sc: &model::spec::kubernetes::PodSecurityContext) -> PodSecurityContext {
    PodSecurityContext {
        run_as_user: sc.run_as_user,
        run_as_group: sc.run_as_group,
        run_as_non_root: sc.run_as_non_root,
        fs_group: sc.fs_group,
        supplemental_groups: (!sc.supplemental_groups.is_empty())
            .then(|| sc.supplemental_groups.clone()),
        seccomp_profile: sc.seccomp_profile.as_ref().map(|p| SeccompProfile {
            type_: p.kind.as_str().to_string(),
            localhost_profile: p.localhost_profile.clone(),
        }),
        ..PodSecurityContext::default()
    }
}

/// A container's security context from the section's.
fn container_security_context(
    sc: &model::spec::kubernetes::ContainerSecurityContext,
) -> SecurityContext {
    let names = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    SecurityContext {
        run_as_user: sc.run_as_user,
        run_as_group: sc.run_as_group,
        run_as_non_root: sc.run_as_non_root,
        allow_privilege_escalation: sc.allow_privilege_escalation,
        read_only_root_filesystem: sc.read_only_root_filesystem,
        capabilities: sc.capabilities.as_ref().map(|c| Capabilities {
            add: names(&c.add),
            drop: names(&c.drop),
        }),
        ..SecurityContext::default()
    }
}

/// The requests and limits of `resources` (CPU, memory, ephemeral
/// storage), none when it gives none.
fn requirements(resources: &Resources) -> Option<ResourceRequirements> {
    let list = |given: &Option<model::spec::kubernetes::ResourceList>| {
        let entries: BTreeMap<String, Quantity> = given
            .iter()
            .flat_map(|g| g.entries())
            .map(|(name, q)| (name.to_string(), Quantity(q.to_string())))
            .collect();
        (!entries.is_empty()).then_some(entries)
    };
    let (requests, limits) = (list(&resources.requests), list(&resources.limits));
    (requests.is_some() || limits.is_some()).then(|| ResourceRequirements {
        requests,
        limits,
        ..ResourceRequirements::default()
    })
}

/// An init container: the section's volumes mounted, no GPU
/// (`NVIDIA_VISIBLE_DEVICES=void`, after its own env, which may not set it).
fn init_container(
    c: &InitContainer,
    mounts: &[VolumeMount],
    security: Option<&SecurityContext>,
) -> Container {
    let mut env: Vec<EnvVar> = c
        .env
        .iter()
        .map(|(name, value)| EnvVar {
            name: name.clone(),
            value: Some(value.clone()),
            value_from: None,
        })
        .collect();
    env.push(EnvVar {
        name: "NVIDIA_VISIBLE_DEVICES".to_string(),
        value: Some(NO_GPU.to_string()),
        value_from: None,
    });
    Container {
        name: c.name.clone(),
        image: Some(c.image.clone()),
        command: (!c.command.is_empty()).then(|| c.command.clone()),
        env: Some(env),
        resources: c.resources.as_ref().and_then(requirements),
        volume_mounts: (!mounts.is_empty()).then(|| mounts.to_vec()),
        security_context: security.cloned(),
        ..Container::default()
    }
}
