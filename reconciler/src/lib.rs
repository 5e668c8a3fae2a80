//! gitfleet's library: the fleet spec model, the loader, validation and
//! (in later modules) the scheduling engine. The binary is a thin CLI over it.

pub mod diag;
pub mod engine;
pub mod generate;
pub mod load;
pub mod observed;
pub mod plan;
pub mod report;
pub mod sim;
pub mod spec;
pub mod validate;
