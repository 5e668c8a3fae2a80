//! Restarting a running job: the fields that take effect only when a job
//! starts, a digest of them (recorded at placement, so a later plan can tell
//! that a running job runs an older spec), and the annotation that asks for
//! a restart (`kubectl rollout restart` sets one the same way).

use serde::Serialize;

use super::{JobSpec, Object};
use crate::observed::RunningJob;

/// The annotation whose new value restarts a running job: when it differs
/// from the value the job started with (none counts as a value), the plan
/// preempts the job for itself and places it again with the current spec.
pub const RESTART_ANNOTATION: &str = "gitfleet/restart";

/// The Job fields (camelCase, as written in YAML) that a running job reads
/// only when it starts: a change to them takes effect on the next start.
pub const RUNTIME_FIELDS: &[&str] = &[
    "image",
    "command",
    "env",
    "replicas",
    "gpusPerReplica",
    "gpu",
    "topology",
];

/// The executors' sections of a Job (`kubernetes:`, the Pod template; `slurm:`,
/// the `sbatch` options): read when the job starts, like [`RUNTIME_FIELDS`],
/// and in the runtime digest only when the job has them (not empty), so a
/// job without them keeps the digest it had before they were counted.
pub const EXECUTOR_SECTIONS: &[&str] = &["kubernetes", "slurm"];

/// The fields of [`RUNTIME_FIELDS`], borrowed for hashing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeFields<'a> {
    image: &'a Option<String>,
    command: &'a [String],
    env: std::collections::BTreeMap<&'a str, EnvShown<'a>>,
    replicas: u32,
    gpus_per_replica: u32,
    gpu: &'a Option<super::GpuSelector>,
    topology: &'a Option<super::Topology>,
    /// Left out when absent or empty: older digests stay the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    kubernetes: Option<&'a super::KubernetesSpec>,
    /// Left out when absent or empty, as `kubernetes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    slurm: Option<&'a super::SlurmSpec>,
}

/// An env value as the digest sees it: sensitive values masked, so the
/// digest (kept in the state and shown in observed files) says nothing of
/// them; changing only a sensitive value is therefore not spec drift.
struct EnvShown<'a>(&'a super::EnvValue);

impl Serialize for EnvShown<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            super::EnvValue::Inline(v) if v.sensitive => serializer.serialize_str(super::MASK),
            other => other.serialize(serializer),
        }
    }
}

impl JobSpec {
    /// A digest of the fields a job reads when it starts ([`RUNTIME_FIELDS`],
    /// and the [`EXECUTOR_SECTIONS`] it has): 16 hex digits of FNV-1a over
    /// their canonical JSON. Not a secret and not a signature; it only tells
    /// "the same spec" from "another spec". A job without executor sections
    /// (or with empty ones) has the digest it had before they were counted.
    pub fn runtime_digest(&self) -> String {
        format!("{:016x}", self.runtime_hash())
    }

    /// The number [`runtime_digest`](Self::runtime_digest) shows in hex:
    /// FNV-1a of the canonical JSON, hashed as it is written (no buffer).
    pub fn runtime_hash(&self) -> u64 {
        let fields = RuntimeFields {
            image: &self.image,
            command: &self.command,
            env: self
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), EnvShown(v)))
                .collect(),
            replicas: self.replicas,
            gpus_per_replica: self.gpus_per_replica,
            gpu: &self.gpu,
            topology: &self.topology,
            kubernetes: self
                .kubernetes
                .as_deref()
                .filter(|k| **k != super::KubernetesSpec::default()),
            slurm: self
                .slurm
                .as_deref()
                .filter(|s| **s != super::SlurmSpec::default()),
        };
        // Serialising plain data cannot fail; a failure part-way would only
        // make digests equal, never a wrong restart.
        let mut hasher = Fnv1a::default();
        let _ = serde_json::to_writer(&mut hasher, &fields);
        hasher.0
    }

    /// The fields whose change a [`runtime_digest`](Self::runtime_digest)
    /// tells, as a person reads them: [`RUNTIME_FIELDS`], then the
    /// [`EXECUTOR_SECTIONS`] this job has (`image, …, gpu or topology`).
    pub fn runtime_fields_text(&self) -> String {
        let mut fields: Vec<&str> = RUNTIME_FIELDS.to_vec();
        if self.kubernetes.is_some() {
            fields.push("kubernetes");
        }
        if self.slurm.is_some() {
            fields.push("slurm");
        }
        match fields.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => fields.join(""),
        }
    }
}

impl Object<JobSpec> {
    /// The value of [`RESTART_ANNOTATION`], when set.
    pub fn restart_token(&self) -> Option<&str> {
        self.metadata
            .annotations
            .get(RESTART_ANNOTATION)
            .map(String::as_str)
    }

    /// Why `running` (this job, observed running) must restart, when its
    /// restart annotation differs from the one it started with.
    pub fn restart_requested(&self, running: &RunningJob) -> Option<String> {
        let now = self.restart_token();
        if now == running.restart.as_deref() {
            return None;
        }
        Some(match (now, running.restart.as_deref()) {
            (Some(now), Some(was)) => format!(
                "restart: annotation {RESTART_ANNOTATION} is {now:?} (it started with {was:?})"
            ),
            (Some(now), None) => format!(
                "restart: annotation {RESTART_ANNOTATION} is {now:?} (it started without one)"
            ),
            (None, _) => format!("restart: annotation {RESTART_ANNOTATION} was removed"),
        })
    }

    /// Whether `running` runs another spec than this one (by the digest
    /// recorded when it started; unknown digests never count).
    pub fn runs_older_spec(&self, running: &RunningJob) -> bool {
        self.runs_older_spec_with(running, || self.spec.runtime_hash())
    }

    /// [`Object::runs_older_spec`] with this spec's
    /// [`runtime_hash`](JobSpec::runtime_hash) from `hash` (which a caller
    /// may have kept).
    pub fn runs_older_spec_with(&self, running: &RunningJob, hash: impl FnOnce() -> u64) -> bool {
        running.spec_digest.as_deref().is_some_and(|was| {
            // A recorded digest is 16 hex digits; anything else is
            // compared as text.
            let digits = was.len() == 16
                && was
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            match u64::from_str_radix(was, 16) {
                Ok(n) if digits => n != hash(),
                _ => was != self.spec.runtime_digest(),
            }
        })
    }
}

/// 64-bit FNV-1a over what is written into it.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::io::Write for Fnv1a {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(yaml_env: &[(&str, &str)], image: Option<&str>) -> JobSpec {
        JobSpec {
            queue: "q".into(),
            priority_class: None,
            replicas: 1,
            gpus_per_replica: 2,
            gpu: None,
            topology: None,
            time_limit: None,
            command: vec!["train".into()],
            image: image.map(str::to_string),
            env: yaml_env
                .iter()
                .map(|(k, v)| (k.to_string(), super::super::EnvValue::Plain(v.to_string())))
                .collect(),
            kubernetes: None,
            slurm: None,
        }
    }

    #[test]
    fn the_digest_changes_with_runtime_fields_only() {
        let a = job(&[("A", "1")], Some("img:1"));
        assert_eq!(a.runtime_digest(), a.clone().runtime_digest());
        assert_eq!(a.runtime_digest().len(), 16);
        let mut queue = a.clone();
        queue.queue = "other".into();
        queue.priority_class = Some("high".into());
        queue.time_limit = Some(super::super::Duration::from_secs(60));
        assert_eq!(a.runtime_digest(), queue.runtime_digest());
        for changed in [
            job(&[("A", "2")], Some("img:1")),
            job(&[("A", "1")], Some("img:2")),
            job(&[("A", "1")], None),
            {
                let mut j = a.clone();
                j.replicas = 2;
                j
            },
            {
                let mut j = a.clone();
                j.command.push("--resume".into());
                j
            },
        ] {
            assert_ne!(a.runtime_digest(), changed.runtime_digest(), "{changed:?}");
        }
    }

    #[test]
    fn a_job_without_executor_sections_keeps_its_digest() {
        // The digest of this job before the sections were counted (FNV-1a of
        // `{"image":"img:1","command":["train"],"env":{"A":"1"},"replicas":1,
        // "gpusPerReplica":2,"gpu":null,"topology":null}`): jobs placed by
        // an older gitfleet do not all report drift after an upgrade.
        let plain = job(&[("A", "1")], Some("img:1"));
        assert_eq!(plain.runtime_digest(), "602631f2d892de69");
        // Empty sections count as none.
        let mut empty = plain.clone();
        empty.kubernetes = Some(Box::new(super::super::KubernetesSpec::default()));
        empty.slurm = Some(Box::new(super::super::SlurmSpec::default()));
        assert_eq!(empty.runtime_digest(), "602631f2d892de69");
    }

    #[test]
    fn the_executor_sections_are_in_the_digest() {
        let plain = job(&[("A", "1")], Some("img:1"));
        let with_k8s = |account: &str| {
            let mut j = plain.clone();
            j.kubernetes = Some(Box::new(super::super::KubernetesSpec {
                service_account_name: Some(account.into()),
                ..Default::default()
            }));
            j
        };
        let with_slurm = |cpus: u32| {
            let mut j = plain.clone();
            j.slurm = Some(Box::new(super::super::SlurmSpec {
                cpus_per_task: Some(cpus),
                ..Default::default()
            }));
            j
        };
        let digests = [
            plain.runtime_digest(),
            with_k8s("trainer").runtime_digest(),
            with_k8s("trainer-v2").runtime_digest(),
            with_slurm(8).runtime_digest(),
            with_slurm(16).runtime_digest(),
        ];
        let distinct: std::collections::BTreeSet<&String> = digests.iter().collect();
        assert_eq!(distinct.len(), digests.len(), "{digests:?}");
        assert_eq!(
            with_k8s("trainer").runtime_digest(),
            with_k8s("trainer").runtime_digest()
        );
    }

    #[test]
    fn the_fields_text_names_the_sections_a_job_has() {
        let mut j = job(&[], None);
        assert_eq!(
            j.runtime_fields_text(),
            "image, command, env, replicas, gpusPerReplica, gpu or topology"
        );
        j.kubernetes = Some(Box::new(super::super::KubernetesSpec::default()));
        assert_eq!(
            j.runtime_fields_text(),
            "image, command, env, replicas, gpusPerReplica, gpu, topology or kubernetes"
        );
        j.slurm = Some(Box::new(super::super::SlurmSpec::default()));
        assert!(
            j.runtime_fields_text()
                .ends_with("gpu, topology, kubernetes or slurm"),
            "{}",
            j.runtime_fields_text()
        );
    }

    #[test]
    fn sensitive_values_do_not_reach_the_digest() {
        let secret = |value: &str| {
            let mut j = job(&[], Some("img:1"));
            j.env.insert(
                "TOKEN".into(),
                super::super::EnvValue::Inline(super::super::InlineValue {
                    value: value.into(),
                    sensitive: true,
                }),
            );
            j
        };
        assert_eq!(secret("a").runtime_digest(), secret("b").runtime_digest());
        assert_ne!(
            secret("a").runtime_digest(),
            job(&[], Some("img:1")).runtime_digest()
        );
    }

    fn fnv1a(bytes: &[u8]) -> u64 {
        use std::io::Write;
        let mut hasher = Fnv1a::default();
        hasher.write_all(bytes).unwrap();
        hasher.0
    }

    #[test]
    fn runs_older_spec_compares_the_recorded_digest() {
        let a = job(&[("A", "1")], Some("img:1"));
        let object = |spec: JobSpec| crate::spec::Object {
            metadata: crate::spec::meta::Metadata {
                name: "j".into(),
                labels: Default::default(),
                annotations: Default::default(),
            },
            spec,
            origin: crate::diag::Origin::new("jobs.yaml".into(), Default::default()),
        };
        let running = |digest: &str| RunningJob {
            job: "j".into(),
            started: Default::default(),
            placement: Vec::new(),
            preempting_since: None,
            preempted_for: None,
            restart: None,
            spec_digest: Some(digest.into()),
        };
        let same = a.runtime_digest();
        assert!(!object(a.clone()).runs_older_spec(&running(&same)));
        assert!(object(a.clone()).runs_older_spec(&running(&same.to_uppercase())));
        assert!(object(a.clone()).runs_older_spec(&running(&format!("+{}", &same[1..]))));
        assert!(object(a.clone()).runs_older_spec(&running("0000000000000000")));
        assert!(object(a).runs_older_spec(&running("not a digest")));
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
