//! Prune protection: a revision that would cancel much of what runs is
//! refused, as Argo CD's automated sync refuses to delete all of an app's
//! resources without `allowEmpty`, and a job marked
//! [`PREVENT_PRUNE`] cannot be removed by the same commit that would cancel
//! it (Terraform's `prevent_destroy`).
//!
//! The check compares the new fleet with the running jobs (and the fleet in
//! force, for the annotation) before anything is planned; it is a pure
//! function so that the loop, `apply` and pull-request previews say the same.

use model::spec::{Fleet, JobSpec, Object};

/// The annotation that forbids removing a running job from Git: remove the
/// annotation in one commit, the job in a later one.
pub const PREVENT_PRUNE: &str = "gitfleet/prevent-prune";

/// How much a revision may cancel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrunePolicy {
    /// At most this many running jobs cancelled by one revision.
    pub max_jobs: usize,
    /// At most this share (0–1) of the running jobs, when more than one.
    pub max_share: f64,
    /// No limit on counts, and a revision without documents may apply
    /// (`apply --allow-prune`). The annotation still holds.
    pub allow: bool,
}

impl Default for PrunePolicy {
    /// More than 10 jobs, or more than half of the running ones, is refused.
    fn default() -> Self {
        PrunePolicy {
            max_jobs: 10,
            max_share: 0.5,
            allow: false,
        }
    }
}

/// Why a revision is refused by prune protection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PruneRefusal {
    /// The revision has no gitfleet documents at all.
    #[error(
        "the revision has no gitfleet documents (a wrong path or an emptied repository?); applying it would cancel all {running} running job(s). Refused; `gitfleet apply --allow-prune` applies it on purpose"
    )]
    Empty {
        /// Jobs running now.
        running: usize,
    },
    /// Too many running jobs would be cancelled.
    #[error(
        "the revision removes {cancelled} of {running} running jobs from Git ({shown}), more than prune protection allows ({limit}). Refused; `gitfleet apply --allow-prune` applies it on purpose, or remove fewer jobs per commit"
    )]
    TooMany {
        /// Running jobs the revision removes.
        cancelled: usize,
        /// Jobs running now.
        running: usize,
        /// The first few, comma-separated.
        shown: String,
        /// The limit passed, in words.
        limit: String,
    },
    /// Running jobs marked [`PREVENT_PRUNE`] would be cancelled.
    #[error(
        "the revision removes running job(s) {jobs} marked {PREVENT_PRUNE}: remove the annotation in one commit, then the job in another"
    )]
    Prevented {
        /// The protected jobs, comma-separated.
        jobs: String,
    },
}

/// Checks `new` against the jobs running now (`running`, by name) and the
/// fleet in force (`current`, for the annotation).
pub fn check(
    policy: &PrunePolicy,
    current: Option<&Fleet>,
    new: &Fleet,
    running: &[&str],
) -> Result<(), PruneRefusal> {
    let jobs = current.into_iter().flat_map(|fleet| fleet.jobs.iter());
    // Fx-hashed (150,000 names: a third of the time of the default hasher).
    let kept: rustc_hash::FxHashSet<&str> = new.jobs.iter().map(|j| j.name()).collect();
    check_by(policy, jobs, new, |name| kept.contains(name), running)
}

/// [`check`], the fleet in force given by those of its jobs that `new` may
/// have removed (all of them, or at least those not in `new` from the same
/// file), and whether `new` has a job of a name by `in_new`.
pub fn check_by<'a>(
    policy: &PrunePolicy,
    current: impl Iterator<Item = &'a Object<JobSpec>>,
    new: &Fleet,
    in_new: impl Fn(&str) -> bool,
    running: &[&str],
) -> Result<(), PruneRefusal> {
    let mut removed: Vec<&str> = running
        .iter()
        .copied()
        .filter(|name| !in_new(name))
        .collect();
    removed.sort_unstable();
    removed.dedup();
    let mut prevented: Vec<&str> = Vec::new();
    if !removed.is_empty() {
        let marked: std::collections::HashSet<&str> = current
            .filter(|j| {
                j.metadata
                    .annotations
                    .get(PREVENT_PRUNE)
                    .is_some_and(|v| v == "true")
            })
            .map(|j| j.name())
            .collect();
        prevented = removed
            .iter()
            .copied()
            .filter(|name| marked.contains(name))
            .collect();
    }
    if !prevented.is_empty() {
        return Err(PruneRefusal::Prevented {
            jobs: prevented.join(", "),
        });
    }
    if policy.allow || removed.is_empty() {
        return Ok(());
    }
    if is_empty(new) {
        return Err(PruneRefusal::Empty {
            running: running.len(),
        });
    }
    let over_count = removed.len() > policy.max_jobs;
    #[allow(clippy::cast_precision_loss)] // job counts are far below 2^52
    let over_share =
        removed.len() > 1 && removed.len() as f64 > policy.max_share * running.len() as f64;
    if over_count || over_share {
        let mut shown: Vec<&str> = removed.iter().copied().take(5).collect();
        if removed.len() > 5 {
            shown.push("…");
        }
        let limit = if over_count {
            format!("at most {} jobs", policy.max_jobs)
        } else {
            format!(
                "at most {:.0}% of the running jobs",
                policy.max_share * 100.0
            )
        };
        return Err(PruneRefusal::TooMany {
            cancelled: removed.len(),
            running: running.len(),
            shown: shown.join(", "),
            limit,
        });
    }
    Ok(())
}

fn is_empty(fleet: &Fleet) -> bool {
    fleet.pools.is_empty()
        && fleet.queues.is_empty()
        && fleet.priority_classes.is_empty()
        && fleet.jobs.is_empty()
        && fleet.policies.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use load::{SourceFile, load_fleet};

    fn fleet(jobs: &[(&str, bool)]) -> Fleet {
        let mut text =
            String::from("apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n");
        for (name, protected) in jobs {
            let annotations = if *protected {
                "gitfleet/prevent-prune: \"true\""
            } else {
                ""
            };
            text.push_str(&format!(
                "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\nspec: {{queue: q, gpusPerReplica: 1}}\n"
            ));
        }
        let loaded = load_fleet(&[SourceFile::new("f.yaml", text)]);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        loaded.fleet
    }

    #[test]
    fn removing_one_job_or_up_to_half_is_fine() {
        let policy = PrunePolicy::default();
        let running = ["a", "b", "c", "d"];
        assert_eq!(
            check(
                &policy,
                None,
                &fleet(&[("b", false), ("c", false)]),
                &running
            ),
            Ok(())
        );
        assert_eq!(
            check(&policy, None, &fleet(&[]), &["a"]),
            Ok(()),
            "one job is no mass prune"
        );
    }

    #[test]
    fn more_than_half_or_more_than_ten_is_refused_unless_allowed() {
        let policy = PrunePolicy::default();
        let running = ["a", "b", "c", "d"];
        let err = check(&policy, None, &fleet(&[("d", false)]), &running).unwrap_err();
        assert!(
            matches!(&err, PruneRefusal::TooMany { cancelled: 3, running: 4, shown, .. } if shown == "a, b, c"),
            "{err}"
        );
        let names: Vec<String> = (0..30).map(|i| format!("j{i}")).collect();
        let running: Vec<&str> = names.iter().map(String::as_str).collect();
        let kept: Vec<(&str, bool)> = running[11..].iter().map(|n| (*n, false)).collect();
        let err = check(&policy, None, &fleet(&kept), &running).unwrap_err();
        assert!(err.to_string().contains("at most 10 jobs"), "{err}");
        let allow = PrunePolicy {
            allow: true,
            ..policy
        };
        assert_eq!(check(&allow, None, &fleet(&kept), &running), Ok(()));
    }

    #[test]
    fn an_empty_revision_is_refused_while_jobs_run() {
        let empty = Fleet::default();
        let err = check(&PrunePolicy::default(), None, &empty, &["a"]).unwrap_err();
        assert_eq!(err, PruneRefusal::Empty { running: 1 });
        assert_eq!(check(&PrunePolicy::default(), None, &empty, &[]), Ok(()));
    }

    #[test]
    fn a_protected_job_needs_a_commit_that_drops_the_annotation_first() {
        let current = fleet(&[("a", true), ("b", false)]);
        let new = fleet(&[("b", false)]);
        let allow = PrunePolicy {
            allow: true,
            ..PrunePolicy::default()
        };
        let err = check(&allow, Some(&current), &new, &["a", "b"]).unwrap_err();
        assert_eq!(err, PruneRefusal::Prevented { jobs: "a".into() });
        let unmarked = fleet(&[("a", false), ("b", false)]);
        assert_eq!(check(&allow, Some(&unmarked), &new, &["a", "b"]), Ok(()));
    }
}
