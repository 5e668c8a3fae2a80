//! What a change does: the semantic difference between two sets of fleet
//! documents ([`specdiff`]) and between the plans they lead to
//! ([`plan_diff`]). Pure.

pub mod plan_diff;
pub mod specdiff;
