//! The live state: the observed state a reconciler plans its next iteration
//! from (its job records and the nodes its executor last reported), kept as
//! `observed.json` in the state directory after every iteration, in the
//! observed-state shape (DESIGN.md §3). `plan --state DIR` plans against it
//! and `status --export-observed` copies it (the database is locked while
//! the loop runs; the file can be read at any time).

use std::path::Path;

use model::observed::{ObservedNode, ObservedState, Timestamp};
use sha2::{Digest, Sha256};

use crate::Reconciler;
use crate::state::JobRecord;
use exec::Executor;
use std::collections::{BTreeMap, BTreeSet};

/// The file the loop writes in the state directory.
pub const OBSERVED_FILE: &str = "observed.json";

impl<E: Executor> Reconciler<E> {
    /// The observed state the next iteration would plan from if nothing
    /// changed: the job records as stored (`records`) and `nodes` (the last
    /// ones observed), at `now`. `None` before any valid revision.
    pub fn live_observed(
        &self,
        now: Timestamp,
        records: &BTreeMap<String, JobRecord>,
        nodes: Vec<ObservedNode>,
    ) -> Option<ObservedState> {
        let (revision, fleet) = self.good.as_ref()?;
        // The loop's index of the fleet's jobs when it holds (it does after
        // an iteration), else one made for this.
        let mut made = crate::JobIndex::default();
        let specs = match self.jobs.specs_held(fleet, &revision.id) {
            Some(specs) => specs,
            None => made.specs(fleet),
        };
        let mut state = self.observed(Some(&specs), now, records, nodes);
        forget_idle_of_busy(&mut state);
        Some(state)
    }
}

/// Writes `state` to `dir/observed.json` atomically (write, then rename).
pub fn write(dir: &Path, state: &ObservedState) -> std::io::Result<()> {
    crate::recorded::write_pieces(dir, OBSERVED_FILE, &[&to_json(state)?, "\n"])
}

/// The text of `observed.json` (without its final newline).
pub fn to_json(state: &ObservedState) -> std::io::Result<String> {
    serde_json::to_string_pretty(state).map_err(std::io::Error::other)
}

/// What identifies an observed state for a saved plan: `sha256:` and the
/// hex SHA-256 of its compact JSON without its `time` (the decision time is
/// recorded on its own; the same fleet seen a second later is the same).
/// An idle time of a node that runs jobs means nothing (the nodes are those
/// observed before the iteration's placements) and is left out.
pub fn digest(state: &ObservedState) -> String {
    let mut timeless = ObservedState {
        time: None,
        ..state.clone()
    };
    forget_idle_of_busy(&mut timeless);
    sha256_hex(&serde_json::to_vec(&timeless).unwrap_or_default())
}

/// Clears `idleSince` of the nodes that running jobs occupy.
fn forget_idle_of_busy(state: &mut ObservedState) {
    let busy: BTreeSet<&str> = state
        .running
        .iter()
        .flat_map(|r| r.placement.iter().map(|p| p.node.as_str()))
        .collect();
    for node in &mut state.nodes {
        if busy.contains(node.name.as_str()) {
            node.idle_since = None;
        }
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_time_but_not_content() {
        let mut a = ObservedState::default();
        let first = digest(&a);
        a.time = Some(Timestamp::default());
        assert_eq!(digest(&a), first);
        a.queued.push(model::observed::QueuedJob {
            job: "x".into(),
            since: Timestamp::default(),
            nominated: Vec::new(),
        });
        assert_ne!(digest(&a), first);
        assert!(first.starts_with("sha256:") && first.len() == 71);
    }
}
