//! The names and labels gitfleet gives the objects it creates. Every name
//! is derived from the job and its attempt only, so an action carried out
//! again after a crash finds the objects of the first try (409
//! AlreadyExists) instead of creating others.

/// The label every object gitfleet creates carries; objects without it
/// are never touched.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// [`MANAGED_BY`]'s value.
pub const MANAGER: &str = "gitfleet";
/// The job's name (`kubectl get pods -l gitfleet.io/job=NAME`).
pub const JOB_LABEL: &str = "gitfleet.io/job";
/// The replica's rank.
pub const REPLICA_LABEL: &str = "gitfleet.io/replica";
/// The attempt, as [`attempt_id`] writes it.
pub const ATTEMPT_LABEL: &str = "gitfleet.io/attempt";
/// The attempt as the reconciler names it (an annotation: it is not a
/// valid label value).
pub const ATTEMPT_ANNOTATION: &str = "gitfleet.io/attempt";
/// The planned GPU indices on the node, comma-separated.
pub const GPUS_ANNOTATION: &str = "gitfleet.io/gpus";
/// The revision whose plan placed the job.
pub const REVISION_ANNOTATION: &str = "gitfleet.io/revision";
/// The scheduler name of gitfleet's Pods, so that the default scheduler
/// leaves them alone.
pub const SCHEDULER_NAME: &str = "gitfleet";
/// The selector of every object gitfleet manages.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=gitfleet";

/// The longest DNS-1123 label (a Service's name, a Pod's hostname).
const MAX_LABEL: usize = 63;

/// FNV-1a, 32 bits: short, stable identifiers (not a security measure).
fn fnv32(parts: &[&str]) -> u32 {
    let mut hash = 0x811c_9dc5_u32;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // A separator no name contains.
            hash = (hash ^ 0xff).wrapping_mul(0x0100_0193);
        }
        for b in part.bytes() {
            hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    hash
}

/// What identifies one start of a job: the reconciler's attempt and the
/// placement. A start given up transiently and planned again elsewhere
/// gets other names, so it never meets the Pods of the first plan (whose
/// env names other GPUs); the same action carried out again meets its own.
pub fn start_key(attempt: Option<&str>, placement: &[model::observed::NodeGpus]) -> String {
    let mut key = attempt.unwrap_or("0").to_string();
    for part in placement {
        let gpus: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
        key.push_str(&format!("|{}:{}", part.node, gpus.join(",")));
    }
    key
}

/// The attempt as 8 hex digits, a valid label value (`None`: a job the
/// reconciler has no record of, attempt `0`).
pub fn attempt_id(attempt: Option<&str>) -> String {
    format!("{:08x}", fnv32(&[attempt.unwrap_or("0")]))
}

/// The name shared by an attempt's objects: `gf-<job>-<attempt id>`, a
/// DNS-1035 label (a Service's name must start with a letter; a job's may
/// not). A job name too long for it is cut, and the id then hashes the
/// whole name too, so two long names that share a prefix still differ.
pub fn base_name(job: &str, attempt: Option<&str>) -> String {
    let id = attempt_id(attempt);
    let room = MAX_LABEL - "gf-".len() - 1 - id.len();
    if job.len() <= room {
        return format!("gf-{job}-{id}");
    }
    let cut = job[..room].trim_end_matches('-');
    format!("gf-{cut}-{:08x}", fnv32(&[job, attempt.unwrap_or("0")]))
}

/// The Pod of replica `rank`: `<base>-<rank>`.
pub fn pod_name(base: &str, rank: u32) -> String {
    format!("{base}-{rank}")
}

/// A replica's hostname under the job's headless Service.
pub fn hostname(rank: u32) -> String {
    format!("replica-{rank}")
}

/// The selector of one job's objects.
pub fn job_selector(job: &str) -> String {
    format!("{MANAGED_SELECTOR},{JOB_LABEL}={job}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_labels() {
        let a = base_name("llama-70b", Some("2026-11-21T10:00:00+00:00#0"));
        assert_eq!(
            a,
            base_name("llama-70b", Some("2026-11-21T10:00:00+00:00#0"))
        );
        assert!(a.starts_with("gf-llama-70b-"), "{a}");
        assert!(model::spec::is_dns_label(&a));
        // Another attempt, another name.
        assert_ne!(
            a,
            base_name("llama-70b", Some("2026-11-21T10:00:00+00:00#1"))
        );
        assert_eq!(pod_name(&a, 3), format!("{a}-3"));
    }

    #[test]
    fn long_job_names_are_cut_and_still_differ() {
        let long1 = format!("{}x", "a".repeat(62));
        let long2 = format!("{}y", "a".repeat(62));
        let (n1, n2) = (base_name(&long1, None), base_name(&long2, None));
        assert!(n1.len() <= 63 && n2.len() <= 63, "{n1} {n2}");
        assert!(model::spec::is_dns_label(&n1));
        assert_ne!(n1, n2);
        // A name starting with a digit still makes a DNS-1035 label.
        assert!(base_name("7b-sft", None).starts_with("gf-7b-sft-"));
    }

    #[test]
    fn another_placement_is_another_start() {
        let at = |node: &str, gpus: Vec<u32>| model::observed::NodeGpus {
            node: node.to_string(),
            gpus,
        };
        let a = start_key(Some("t#0"), &[at("n1", vec![0, 1])]);
        assert_eq!(a, start_key(Some("t#0"), &[at("n1", vec![0, 1])]));
        assert_ne!(a, start_key(Some("t#0"), &[at("n2", vec![0, 1])]));
        assert_ne!(a, start_key(Some("t#0"), &[at("n1", vec![2, 3])]));
        assert_ne!(
            base_name("j", Some(&a)),
            base_name("j", Some(&start_key(Some("t#0"), &[at("n2", vec![0, 1])])))
        );
    }

    #[test]
    fn attempt_ids_are_label_values() {
        let id = attempt_id(Some("2026-11-21T10:00:00+00:00#2"));
        assert_eq!(id.len(), 8);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, attempt_id(None));
    }
}
