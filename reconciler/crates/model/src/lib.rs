//! The spec model shared by every gitfleet crate: the five document kinds
//! ([`spec`]), the observed state of the live fleet ([`observed`]), the plan's
//! JSON types ([`plan`]), positioned diagnostics ([`diag`]) and NVLink domain
//! arithmetic ([`nvlink`]), and user text made safe to print ([`text`]). Plain data and pure functions; no I/O.

pub mod diag;
pub mod nvlink;
pub mod observed;
pub mod plan;
pub mod spec;
pub mod text;
pub mod time;
