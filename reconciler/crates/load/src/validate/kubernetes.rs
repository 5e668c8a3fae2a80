//! A Job's `kubernetes:` section: what its JSON Schema cannot say
//! (docs/kubernetes.md). Keys gitfleet sets on Pods are refused, each
//! volume names exactly one source, volume names and mount paths are
//! unique, and `/dev/shm` belongs to `sharedMemory` when it is given; init
//! containers have their own names and set no env gitfleet sets; a
//! `Localhost` seccomp profile names its file, and only it does.

use std::collections::BTreeSet;

use crate::doc_view::DocRef;
use crate::yaml::PathSegment::{self, Index, Key};
use model::diag::Diagnostic;
use model::spec::JobSpec;
use model::spec::kubernetes::{
    KubernetesSpec, MAIN_CONTAINER, OWNED_ENV, RESERVED_VOLUME_PREFIX, SHM_PATH, SeccompType,
};

/// Label and annotation keys gitfleet owns on its Pods.
fn reserved_key(key: &str) -> bool {
    key.starts_with("gitfleet.io/") || key == "app.kubernetes.io/managed-by"
}

/// Checks the section of `job`, if it has one.
pub fn check(job: DocRef<'_, JobSpec>, out: &mut Vec<Diagnostic>) {
    let Some(k8s) = &job.object.spec.kubernetes else {
        return;
    };
    let name = job.name();
    for (field, map) in [("labels", &k8s.labels), ("annotations", &k8s.annotations)] {
        for key in map.keys().filter(|k| reserved_key(k)) {
            out.push(Diagnostic::new(
                job.origin_at(&[Key("spec"), Key("kubernetes"), Key(field), Key(key)]),
                format!(
                    "Job {name}: spec.kubernetes.{field}: {key:?} is set by gitfleet (keys under gitfleet.io/ and app.kubernetes.io/managed-by are its own)"
                ),
            ));
        }
    }
    init_containers(job, k8s, out);
    seccomp(job, k8s, out);
    let mut names = BTreeSet::new();
    let mut paths = BTreeSet::new();
    for (i, volume) in k8s.volumes.iter().enumerate() {
        let at = |field: &'static str| {
            let mut path = vec![Key("spec"), Key("kubernetes"), Key("volumes"), Index(i)];
            if !field.is_empty() {
                path.push(Key(field));
            }
            job.origin_at(&path)
        };
        let here = format!("Job {name}: spec.kubernetes.volumes[{i}]");
        if volume.sources() != 1 {
            out.push(Diagnostic::new(
                at(""),
                format!(
                    "{here}: give exactly one of persistentVolumeClaim, configMap, secret or emptyDir ({} given)",
                    volume.sources()
                ),
            ));
        }
        if volume.name.starts_with(RESERVED_VOLUME_PREFIX) {
            out.push(Diagnostic::new(
                at("name"),
                format!(
                    "{here}.name: {:?}: names beginning with {RESERVED_VOLUME_PREFIX} are gitfleet's",
                    volume.name
                ),
            ));
        } else if !names.insert(volume.name.as_str()) {
            out.push(Diagnostic::new(
                at("name"),
                format!("{here}.name: {:?} is given twice", volume.name),
            ));
        }
        let path = volume.mount_path.trim_end_matches('/');
        if k8s.shared_memory.is_some() && path == SHM_PATH {
            out.push(Diagnostic::new(
                at("mountPath"),
                format!("{here}.mountPath: {SHM_PATH} is the sharedMemory volume's"),
            ));
        } else if !paths.insert(path) {
            out.push(Diagnostic::new(
                at("mountPath"),
                format!("{here}.mountPath: {:?} is mounted twice", volume.mount_path),
            ));
        }
    }
}

/// Init containers: not named as the main container or as gitfleet's, each
/// name once, and no env gitfleet sets (the GPUs, the rendezvous).
fn init_containers(job: DocRef<'_, JobSpec>, k8s: &KubernetesSpec, out: &mut Vec<Diagnostic>) {
    let name = job.name();
    let mut names = BTreeSet::new();
    for (i, c) in k8s.init_containers.iter().enumerate() {
        let here = format!("Job {name}: spec.kubernetes.initContainers[{i}]");
        let at = |tail: &[PathSegment<&str>]| {
            let mut path = vec![
                Key("spec"),
                Key("kubernetes"),
                Key("initContainers"),
                Index(i),
            ];
            path.extend_from_slice(tail);
            job.origin_at(&path)
        };
        if c.name == MAIN_CONTAINER {
            out.push(Diagnostic::new(
                at(&[Key("name")]),
                format!("{here}.name: {MAIN_CONTAINER:?} is the job's own container"),
            ));
        } else if c.name.starts_with(RESERVED_VOLUME_PREFIX) {
            out.push(Diagnostic::new(
                at(&[Key("name")]),
                format!(
                    "{here}.name: {:?}: names beginning with {RESERVED_VOLUME_PREFIX} are gitfleet's",
                    c.name
                ),
            ));
        } else if !names.insert(c.name.as_str()) {
            out.push(Diagnostic::new(
                at(&[Key("name")]),
                format!("{here}.name: {:?} is given twice", c.name),
            ));
        }
        for key in c.env.keys().filter(|k| OWNED_ENV.contains(&k.as_str())) {
            out.push(Diagnostic::new(
                at(&[Key("env"), Key(key)]),
                format!(
                    "{here}.env: {key:?} is set by gitfleet (the GPUs and the rendezvous are its own; init containers get no GPU)"
                ),
            ));
        }
    }
}

/// A `Localhost` seccomp profile names its file; other types name none.
fn seccomp(job: DocRef<'_, JobSpec>, k8s: &KubernetesSpec, out: &mut Vec<Diagnostic>) {
    let Some(profile) = k8s
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref())
    else {
        return;
    };
    let message = match (profile.kind, &profile.localhost_profile) {
        (SeccompType::Localhost, None) => "type Localhost needs localhostProfile",
        (SeccompType::RuntimeDefault | SeccompType::Unconfined, Some(_)) => {
            "localhostProfile is for type Localhost only"
        }
        _ => return,
    };
    out.push(Diagnostic::new(
        job.origin_at(&[
            Key("spec"),
            Key("kubernetes"),
            Key("securityContext"),
            Key("seccompProfile"),
        ]),
        format!(
            "Job {}: spec.kubernetes.securityContext.seccompProfile: {message}",
            job.name()
        ),
    ));
}
