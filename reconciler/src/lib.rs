//! gitfleet's library under one name. The work is done by the crates in
//! `reconciler/crates/` (see ARCHITECTURE.md); this crate re-exports each of
//! them under the module path the binary, the benches and the tests use.

pub use diff::{plan_diff, queue_totals, specdiff};
pub use engine::drift;
#[cfg(feature = "kube")]
pub use exec_kube as kube;
pub use model::{diag, nvlink, observed, plan, spec, text, time};
pub use reconcile::state;
pub use sim::generate;
pub use {
    dashboard, diff, engine, exec, git as source, inventory, load, model, reconcile, report, sim,
    simulate, slurm, trace, whatif,
};

pub use load::validate;
