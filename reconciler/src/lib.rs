//! gitfleet's library: the fleet spec model, the loader, validation and
//! (in later modules) the scheduling engine. The binary is a thin CLI over it.

pub mod diag;
pub mod drift;
pub mod engine;
pub mod exec;
pub mod generate;
pub mod inventory;
pub mod load;
pub mod observed;
pub mod plan;
pub mod plan_diff;
pub mod reconcile;
pub mod report;
pub mod sim;
pub mod source;
pub mod spec;
pub mod specdiff;
pub mod state;
pub mod validate;
