//! A Job's `slurm:` section: what its JSON Schema cannot say
//! (docs/slurm.md). Slurm takes one of `--mem`, `--mem-per-cpu` and
//! `--mem-per-gpu`; a second one is refused where it is written.

use crate::doc_view::DocRef;
use crate::yaml::PathSegment::Key;
use model::diag::Diagnostic;
use model::spec::JobSpec;

/// Checks the section of `job`, if it has one.
pub fn check(job: DocRef<'_, JobSpec>, out: &mut Vec<Diagnostic>) {
    let Some(slurm) = &job.object.spec.slurm else {
        return;
    };
    let name = job.name();
    let memory = slurm.memory();
    let Some((first, _, _)) = memory.first() else {
        return;
    };
    for (field, _, _) in memory.iter().skip(1) {
        out.push(Diagnostic::new(
            job.origin_at(&[Key("spec"), Key("slurm"), Key(field)]),
            format!(
                "Job {name}: spec.slurm.{field}: give one of mem, memPerCpu or memPerGpu ({first} is given too; Slurm takes only one)"
            ),
        ));
    }
}
