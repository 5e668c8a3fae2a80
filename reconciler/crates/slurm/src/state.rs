//! The part of Slurm's accounting database gitfleet owns, in one shape for
//! both sides of a diff: what the fleet asks for ([`crate::desired`]) and
//! what `sacctmgr show` reports ([`crate::parse`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The `Organization` gitfleet writes on the accounts it manages: only
/// accounts carrying it are ever deleted.
pub const MANAGED_ORGANIZATION: &str = "gitfleet";

/// The start of the `Description` gitfleet writes on the QOS it manages:
/// only QOS carrying it are ever deleted.
pub const MANAGED_QOS_PREFIX: &str = "gitfleet priority class";

/// The TRES names gitfleet owns in a `GrpTRES` (`gres/gpu` and its typed
/// forms); other limits an administrator set are left alone.
pub fn owned_tres(name: &str) -> bool {
    name == "gres/gpu" || name.starts_with("gres/gpu:")
}

/// A Slurm account (its account association on the cluster).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The account's name (the queue's).
    pub name: String,
    /// The parent account (`root` for a top-level queue).
    pub parent: String,
    /// `Fairshare` as sacctmgr prints it (a number, or `parent`).
    pub fairshare: String,
    /// `GrpTRES` limits gitfleet owns (`gres/gpu:<type>` → GPUs).
    pub grp_tres: BTreeMap<String, u64>,
    /// The QOS its jobs may use.
    pub qos: BTreeSet<String>,
    /// The QOS of jobs that name none (empty: none).
    pub default_qos: String,
    /// `Organization`: [`MANAGED_ORGANIZATION`] on accounts gitfleet made.
    pub organization: String,
}

impl Account {
    /// Whether gitfleet manages it.
    pub fn managed(&self) -> bool {
        self.organization == MANAGED_ORGANIZATION
    }
}

/// How a QOS's jobs are preempted (`PreemptMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PreemptMode {
    /// Ended; gitfleet's preempted jobs become pending again, so requeue
    /// is the faithful mapping and the default.
    #[default]
    Requeue,
    /// Cancelled.
    Cancel,
}

impl PreemptMode {
    /// As sacctmgr writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptMode::Requeue => "requeue",
            PreemptMode::Cancel => "cancel",
        }
    }
}

/// A Slurm QOS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qos {
    /// The QOS's name (the priority class's).
    pub name: String,
    /// `Priority`.
    pub priority: u32,
    /// `Preempt`: the QOS whose jobs this one's may preempt.
    pub preempt: BTreeSet<String>,
    /// `PreemptMode` as sacctmgr prints it (`requeue`, `cancel`, `cluster`, …).
    pub preempt_mode: String,
    /// `GraceTime` in seconds.
    pub grace_secs: u64,
    /// `Description`: starts with [`MANAGED_QOS_PREFIX`] on QOS gitfleet manages.
    pub description: String,
}

impl Qos {
    /// Whether gitfleet manages it.
    pub fn managed(&self) -> bool {
        self.description.starts_with(MANAGED_QOS_PREFIX)
    }
}

/// A Slurm partition (a pool's, with `Mapping::partitions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// The partition's name (the pool's).
    pub name: String,
    /// Its nodes, in natural order.
    pub nodes: Vec<String>,
}

/// Accounts, QOS and (with `Mapping::partitions`) partitions by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmState {
    /// Accounts by name (`root` is never one of them).
    pub accounts: BTreeMap<String, Account>,
    /// QOS by name.
    pub qos: BTreeMap<String, Qos>,
    /// Partitions by name: the pools' (desired, applied) or all of Slurm's
    /// (current); empty unless pools are mapped to partitions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partitions: BTreeMap<String, Partition>,
}
