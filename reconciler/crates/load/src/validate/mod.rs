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

fn check_view(docs: &DocsView<'_>, diagnostics: &mut Vec<Diagnostic>) {
    semantic::check(docs, diagnostics);
    policy::check(docs, diagnostics);
}
