//! The `slurm` executor. Accounting mode: the fleet's queue tree and
//! priority classes become Slurm accounts and QOS, applied with the minimal
//! `sacctmgr` commands, and a hand edit in Slurm is reported as drift and
//! reverted. Scheduler mode ([`scheduler`]) also runs the fleet's jobs:
//! gitfleet places them, Slurm runs them pinned there. The pure parts ([`desired`], [`parse`], [`diff`]) do no I/O;
//! [`sacctmgr`] runs commands through the [`Runner`] trait. The mapping and
//! what is not done yet are in docs/slurm.md.

pub mod desired;
pub mod diff;
pub mod executor;
pub mod jobs;
pub mod nodes;
pub mod parse;
pub mod partitions;
pub mod rest;
pub mod sacctmgr;
pub mod scheduler;
pub mod state;

pub use desired::{MapError, Mapping, desired};
pub use diff::{Change, ChangeKind, Diff, FieldChange, ObjectKind, diff};
pub use executor::SlurmExecutor;
pub use jobs::ImageOption;
pub use rest::{Endpoint, RestClient, RestError};
pub use sacctmgr::{ProcessRunner, RunError, Runner, Sacctmgr};
pub use scheduler::Scheduler;
pub use state::{Account, Partition, PreemptMode, Qos, SlurmState};
