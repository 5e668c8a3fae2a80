//! Whether a new revision's fleet plans as the last one did: the changes a
//! load made in place are all of a kind no plan can see
//! ([`engine::job_plans_alike`]), so the last plan stands for the new
//! revision (docs/semantics.md, "Changes no plan can see").

use load::Documents;
use model::observed::RunningJob;
use model::spec::Object;

/// Whether replacing each changed file's documents `before` by `after`
/// leaves every plan as it is, given the jobs running (the observed
/// state's records): the same documents in the same order, those other
/// than jobs equal (name, labels, annotations, spec), and each job's change
/// one the engine does not read.
pub(crate) fn changes_plan_alike(
    changes: &[(&Documents, &Documents)],
    running: &[RunningJob],
) -> bool {
    changes
        .iter()
        .all(|(before, after)| documents_plan_alike(before, after, running))
}

fn documents_plan_alike(before: &Documents, after: &Documents, running: &[RunningJob]) -> bool {
    let runs = |name: &str| running.iter().any(|r| r.job == name);
    same_objects(&before.pools, &after.pools)
        && same_objects(&before.queues, &after.queues)
        && same_objects(&before.priority_classes, &after.priority_classes)
        && same_objects(&before.policies, &after.policies)
        && before.jobs.len() == after.jobs.len()
        && before.jobs.iter().zip(&after.jobs).all(|(a, b)| {
            let (a, b) = (&a.object, &b.object);
            same_object(a, b) || (!runs(a.name()) && engine::job_plans_alike(a, b, false))
        })
}

/// Equal lists of documents, where they were read from aside.
fn same_objects<S: PartialEq>(a: &[load::Document<S>], b: &[load::Document<S>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| same_object(&a.object, &b.object))
}

fn same_object<S: PartialEq>(a: &Object<S>, b: &Object<S>) -> bool {
    a.metadata == b.metadata && a.spec == b.spec
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use load::SourceFile;

    fn documents(text: &str) -> Documents {
        let file = SourceFile::new("jobs.yaml", text.as_bytes().to_vec());
        let mut diagnostics = Vec::new();
        let docs = load::parse_files(&[file], &mut diagnostics);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        docs
    }

    fn job(name: &str, rest: &str) -> String {
        format!(
            "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {{queue: q, gpusPerReplica: 1{rest}}}\n---\n"
        )
    }

    fn running(name: &str) -> RunningJob {
        RunningJob {
            job: name.to_string(),
            started: Default::default(),
            placement: Vec::new(),
            preempting_since: None,
            preempted_for: None,
            restart: None,
            spec_digest: None,
        }
    }

    #[test]
    fn a_pending_jobs_command_is_alike_a_running_ones_is_not() {
        let before = documents(&(job("a", ", command: [x]") + &job("b", "")));
        let after = documents(&(job("a", ", command: [y]") + &job("b", "")));
        assert!(changes_plan_alike(&[(&before, &after)], &[running("b")]));
        assert!(!changes_plan_alike(&[(&before, &after)], &[running("a")]));
    }

    #[test]
    fn scheduling_fields_documents_added_and_other_kinds_are_not_alike() {
        let before = documents(&job("a", ""));
        for after in [
            job("a", ", replicas: 2"),
            job("a", ", timeLimit: 1h"),
            job("b", ""),
            job("a", "") + &job("b", ""),
            String::new(),
            job("a", "")
                + "apiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: p}\nspec: {value: 1}\n",
        ] {
            let after = documents(&after);
            assert!(!changes_plan_alike(&[(&before, &after)], &[]), "{after:?}");
        }
        let same = documents(&job("a", ""));
        assert!(changes_plan_alike(&[(&before, &same)], &[running("a")]));
    }
}
