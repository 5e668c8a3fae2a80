//! Validation beyond the schema: names, references, the queue tree's quota
//! arithmetic, priority classes, jobs against pools, and policies.

mod kubernetes;
mod policy;
mod semantic;
mod slurm;
mod suggest;

use crate::doc_view::DocsView;
use crate::{Documents, Rejected};
use model::diag::Diagnostic;
use model::spec::Fleet;

pub use policy::{
    COST_BUDGET, DEADLINE, MAX_AST_DEPTH, MAX_EXPRESSION_BYTES, MAX_NESTING, MAX_REGEX_BYTES,
    MAX_REPEATED_UNARY, PolicyError,
};
pub use suggest::closest;

/// Runs every cross-document check and every policy, appending to `diagnostics`.
pub fn check_documents(docs: &Documents, diagnostics: &mut Vec<Diagnostic>) {
    check_view(&DocsView::of_documents(docs), diagnostics);
}

/// [`check_documents`] of a fleet's objects, as documents loaded without
/// their YAML trees (every document loaded: none rejected). Whether
/// anything is reported is what [`check_documents`] says of the documents
/// the fleet was made of; the positions are the documents' own.
pub fn check_fleet(fleet: &Fleet, diagnostics: &mut Vec<Diagnostic>) {
    let none = Rejected::default();
    check_view(&DocsView::of_fleet(fleet, &none), diagnostics);
}

/// Whether [`check_fleet`] finds nothing in `fleet`, known to differ from
/// a fleet it found nothing in only in the jobs at `positions` (the same
/// names in the same places; every other document, and every other job,
/// the same): only those jobs' own checks can find anything then, as
/// nothing they read changed. `false` also when policies have rules (they
/// are not checked here): the caller runs [`check_fleet`].
pub(crate) fn changed_jobs_clean(fleet: &Fleet, positions: &[usize]) -> bool {
    if fleet.policies.iter().any(|p| !p.spec.rules.is_empty()) {
        return false;
    }
    let none = Rejected::default();
    let mut diagnostics = Vec::new();
    semantic::jobs_at(
        &DocsView::of_fleet(fleet, &none),
        positions,
        &mut diagnostics,
    );
    diagnostics.is_empty()
}

/// What a job's own checks read of the other documents: the queues (each
/// name, and whether it has children), the priority classes' names, and
/// each pool's GPU model and count. While it stays the same, a job that
/// passed its checks passes them again.
#[derive(Debug, PartialEq)]
pub(crate) struct JobFacing {
    queues: std::collections::BTreeMap<String, bool>,
    classes: std::collections::BTreeSet<String>,
    pools: std::collections::BTreeSet<(String, u32)>,
}

impl JobFacing {
    /// What the jobs of `fleet` read of its other documents.
    pub(crate) fn of(fleet: &Fleet) -> Self {
        let mut queues: std::collections::BTreeMap<String, bool> = fleet
            .queues
            .iter()
            .map(|q| (q.name().to_string(), false))
            .collect();
        for q in &fleet.queues {
            if let Some(parent) = q.spec.parent.as_deref()
                && let Some(has_children) = queues.get_mut(parent)
            {
                *has_children = true;
            }
        }
        JobFacing {
            queues,
            classes: fleet
                .priority_classes
                .iter()
                .map(|c| c.name().to_string())
                .collect(),
            pools: fleet
                .pools
                .iter()
                .map(|p| (p.spec.gpu.model.clone(), p.spec.gpu.count))
                .collect(),
        }
    }
}

/// Whether [`check_fleet`] finds nothing in `fleet`, known to differ from
/// a fleet it found nothing in (whose jobs read `before` of the other
/// documents) in documents of other kinds and in the jobs at `positions`
/// (the same names in the same places; every other job the same): the
/// other kinds' checks and those jobs' own checks, when the other jobs
/// read the same of the other documents (they pass theirs again). `false`
/// also when they read something else, or when policies have rules: the
/// caller runs [`check_fleet`].
pub(crate) fn changed_others_clean(fleet: &Fleet, before: &JobFacing, positions: &[usize]) -> bool {
    if fleet.policies.iter().any(|p| !p.spec.rules.is_empty()) || JobFacing::of(fleet) != *before {
        return false;
    }
    let none = Rejected::default();
    let docs = DocsView::of_fleet(fleet, &none);
    let mut diagnostics = Vec::new();
    semantic::check_but_jobs(&docs, &mut diagnostics);
    semantic::jobs_at(&docs, positions, &mut diagnostics);
    diagnostics.is_empty()
}

fn check_view(docs: &DocsView<'_>, diagnostics: &mut Vec<Diagnostic>) {
    semantic::check(docs, diagnostics);
    policy::check(docs, diagnostics);
}
