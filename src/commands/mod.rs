//! One module per subcommand, each owning its `Args` and its `run`: read
//! the arguments, call the library, print through `render::emit`. Shared
//! argument groups are in `args`, the input loader of `plan`, `plan --base`
//! and `explain` in `input`, specs read from Git in `git`.

#[cfg(feature = "kube")]
pub mod agent;
pub mod apply;
pub mod apply_saved;
pub mod args;
pub mod audit;
pub mod explain;
pub mod generate;
pub mod git;
pub mod history;
pub mod input;
pub mod inventory;
pub mod plan;
pub mod plan_out;
pub mod preview;
pub mod reconcile;
pub mod schema;
pub mod serve;
pub mod simulate;
pub mod status;
pub mod supervise;
pub mod validate;
