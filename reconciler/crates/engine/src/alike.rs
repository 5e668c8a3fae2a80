//! Which changes to a job's document no plan can see: a caller holding the
//! plan of one fleet may keep it for a fleet that differs only so
//! ([`job_plans_alike`]).

use model::spec::{JobSpec, Object};

/// Whether every plan made with job document `new` in place of `old` (same
/// place in the fleet, the rest of the input the same) is the plan made
/// with `old`. `runs`: whether the observed state has a running record of
/// the job (started, stopping or not).
///
/// Of a job that does not run the engine reads its name and what decides
/// where and when it may run: queue, priority class, replicas, GPUs per
/// replica, GPU models, topology and time limit. Its command, image,
/// environment, Kubernetes and Slurm settings, labels and annotations are
/// the executor's, read when it starts. Of a running job it reads the whole
/// document (drift compares the spec with the one it started with; the
/// restart annotation restarts it), so any change counts.
pub fn job_plans_alike(old: &Object<JobSpec>, new: &Object<JobSpec>, runs: bool) -> bool {
    if runs {
        return old.metadata == new.metadata && old.spec == new.spec;
    }
    // Every field named, so a new one is not forgotten here.
    let JobSpec {
        queue,
        priority_class,
        replicas,
        gpus_per_replica,
        gpu,
        topology,
        time_limit,
        command: _,
        image: _,
        env: _,
        kubernetes: _,
        slurm: _,
    } = &old.spec;
    let b = &new.spec;
    old.metadata.name == new.metadata.name
        && *queue == b.queue
        && *priority_class == b.priority_class
        && *replicas == b.replicas
        && *gpus_per_replica == b.gpus_per_replica
        && *gpu == b.gpu
        && *topology == b.topology
        && *time_limit == b.time_limit
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use model::observed::ObservedState;
    use model::spec::{Duration, Fleet, Metadata};

    use crate::{PlanInput, plan};

    fn job(name: &str) -> Object<JobSpec> {
        Object {
            metadata: Metadata {
                name: name.to_string(),
                labels: Default::default(),
                annotations: Default::default(),
            },
            spec: JobSpec {
                queue: "q".to_string(),
                priority_class: None,
                replicas: 1,
                gpus_per_replica: 1,
                gpu: None,
                topology: None,
                time_limit: None,
                command: vec!["train".to_string()],
                image: None,
                env: Default::default(),
                kubernetes: None,
                slurm: None,
            },
            origin: model::diag::Origin::new("jobs.yaml".into(), Default::default()),
        }
    }

    #[test]
    fn what_the_executor_reads_is_alike_unless_the_job_runs() {
        let old = job("a");
        let mut new = old.clone();
        new.spec.command = vec!["eval".to_string()];
        new.spec.image = Some("img:2".to_string());
        new.metadata
            .annotations
            .insert("gitfleet/restart".to_string(), "1".to_string());
        assert!(job_plans_alike(&old, &new, false));
        assert!(!job_plans_alike(&old, &new, true));
        assert!(job_plans_alike(&old, &old.clone(), true));
    }

    #[test]
    fn what_decides_scheduling_is_never_alike() {
        let old = job("a");
        let changes: Vec<fn(&mut Object<JobSpec>)> = vec![
            |j| j.metadata.name = "b".to_string(),
            |j| j.spec.queue = "r".to_string(),
            |j| j.spec.priority_class = Some("high".to_string()),
            |j| j.spec.replicas = 2,
            |j| j.spec.gpus_per_replica = 2,
            |j| j.spec.time_limit = Some(Duration::from_secs(60)),
            |j| {
                j.spec.gpu = Some(model::spec::GpuSelector {
                    models: vec!["H100".to_string()],
                })
            },
            |j| j.spec.topology = Some(Default::default()),
        ];
        for change in changes {
            let mut new = old.clone();
            change(&mut new);
            assert!(!job_plans_alike(&old, &new, false), "{new:?}");
            assert!(!job_plans_alike(&old, &new, true), "{new:?}");
        }
    }

    /// A plan with an alike change is the same plan (the engine's own
    /// check of the claim, on a fleet whose job is pending).
    #[test]
    fn an_alike_change_plans_the_same() {
        let fleet = Fleet {
            jobs: vec![job("a")],
            ..Fleet::default()
        };
        let mut changed = fleet.clone();
        changed.jobs[0].spec.command = vec!["other".to_string()];
        assert!(job_plans_alike(&fleet.jobs[0], &changed.jobs[0], false));
        let observed = ObservedState::default();
        let input = |fleet| PlanInput {
            fleet,
            observed: &observed,
            now: Default::default(),
            revision: None,
        };
        let a = serde_json::to_string(&plan(&input(&fleet))).unwrap();
        let b = serde_json::to_string(&plan(&input(&changed))).unwrap();
        assert_eq!(a, b);
    }
}
