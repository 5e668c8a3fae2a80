//! Validation beyond the schema: names, references, the queue tree's quota
//! arithmetic, priority classes, jobs against pools, and policies.

mod kubernetes;
mod policy;
mod semantic;
mod slurm;
mod suggest;

use crate::Documents;
use model::diag::Diagnostic;

pub use policy::{
    COST_BUDGET, DEADLINE, MAX_AST_DEPTH, MAX_EXPRESSION_BYTES, MAX_NESTING, MAX_REGEX_BYTES,
    MAX_REPEATED_UNARY, PolicyError,
};
pub use suggest::closest;

/// Runs every cross-document check and every policy, appending to `diagnostics`.
pub fn check_documents(docs: &Documents, diagnostics: &mut Vec<Diagnostic>) {
    semantic::check(docs, diagnostics);
    policy::check(docs, diagnostics);
}
