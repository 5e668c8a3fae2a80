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

fn check_view(docs: &DocsView<'_>, diagnostics: &mut Vec<Diagnostic>) {
    semantic::check(docs, diagnostics);
    policy::check(docs, diagnostics);
}
