//! What a change does: the semantic difference between two sets of fleet
//! documents ([`specdiff`]) and between the plans they lead to
//! ([`plan_diff`]), with each queue's GPUs and pending jobs in both
//! ([`queue_totals`]). Pure.

pub mod plan_diff;
pub mod queue_totals;
pub mod specdiff;
