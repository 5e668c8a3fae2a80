//! The ordering policies: gitfleet's engine as it is, and the baselines,
//! which change only what the engine is shown.

use model::spec::Duration;
use model::time::{Timestamp, after};

/// Who goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// The engine as configured: fair share across queues; within a leaf,
    /// priority then the queue's ordering (age, or shortest-first by
    /// declared limits); backfill on declared limits; preemption.
    #[default]
    Gitfleet,
    /// Strict FIFO per leaf queue: a job starts only after every earlier
    /// job of its queue has started (head-of-line blocking).
    Fifo,
    /// Greedy FIFO: in submit order within a leaf, skipping what does not
    /// fit (no reservation).
    FifoSkip,
    /// Greedy shortest true duration first within a leaf (uses the future:
    /// a bound, not a policy).
    SjfOracle,
}

impl Policy {
    /// Every policy, in the order reports list them.
    pub const ALL: [Policy; 4] = [
        Policy::Gitfleet,
        Policy::Fifo,
        Policy::FifoSkip,
        Policy::SjfOracle,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Gitfleet => "gitfleet",
            Policy::Fifo => "fifo",
            Policy::FifoSkip => "fifo-skip",
            Policy::SjfOracle => "sjf-oracle",
        }
    }

    /// The priority class the engine is shown: the trace's under gitfleet;
    /// the fleet's default for a baseline (its order is its own).
    pub(crate) fn class(self, declared: Option<&str>) -> Option<String> {
        match self {
            Policy::Gitfleet => declared.map(str::to_string),
            _ => None,
        }
    }

    /// The time limit the engine is shown: the declared one under gitfleet;
    /// none for a baseline (no backfill reservation: greedy).
    pub(crate) fn limit(self, declared: Option<Duration>) -> Option<Duration> {
        match self {
            Policy::Gitfleet => declared,
            _ => None,
        }
    }

    /// The first-seen time the engine orders a pending job by (older
    /// first): its submit time, or when it went back to pending after a
    /// preemption (gitfleet, as the reconciler records it); under
    /// sjf-oracle, the origin plus its true duration (shorter first).
    pub(crate) fn since(
        self,
        submit: Timestamp,
        requeued: Option<Timestamp>,
        duration: Duration,
    ) -> Timestamp {
        match self {
            Policy::Gitfleet => requeued.unwrap_or(submit),
            Policy::Fifo | Policy::FifoSkip => submit,
            Policy::SjfOracle => after(crate::origin(), duration),
        }
    }

    /// Whether a blocked job blocks its queue (strict FIFO).
    pub(crate) fn strict(self) -> bool {
        self == Policy::Fifo
    }
}
