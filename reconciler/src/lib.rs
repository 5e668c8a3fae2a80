//! gitfleet's library: the fleet spec model, the loader, validation and
//! (in later modules) the scheduling engine. The binary is a thin CLI over it.

pub mod diag;
pub mod load;
pub mod spec;
pub mod validate;
