//! The executor's side of leader election: the elector it shares with
//! the task that renews the Lease between iterations.

use std::sync::Arc;

use kube::Client;

use model::observed::Timestamp;

use crate::lease::Elector;

/// The clock leader election reads: the wall clock, or a test's. Not the
/// loop's `now`, which is when the iteration started, not when each write
/// is made.
pub type LeaseClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The elector and the client its renewal task uses: held here, the task
/// holding only a weak reference, so that dropping the executor ends the
/// task and closes the connection.
pub(crate) struct LeaseSlot {
    pub(crate) elector: Elector,
    pub(crate) client: Option<Client>,
    /// Which renewal task is the current one (older ones end).
    pub(crate) generation: u64,
}

pub(crate) type SharedLease = Arc<tokio::sync::Mutex<LeaseSlot>>;

/// Renews the Lease while this replica leads, between iterations too (the
/// loop's interval may be longer than the Lease lasts): wakes every
/// [`crate::lease::LeaseConfig::renew_every`], renews when due, and ends when the
/// executor is gone, the Lease is lost, or a newer task took over.
pub(crate) fn spawn_renewal(
    slot: &SharedLease,
    generation: u64,
    every: std::time::Duration,
    clock: LeaseClock,
) {
    let weak = Arc::downgrade(slot);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(slot) = weak.upgrade() else {
                return;
            };
            let mut slot = slot.lock().await;
            let Some(client) = slot.client.clone() else {
                return;
            };
            if slot.generation != generation || !slot.elector.is_leading() {
                return;
            }
            match slot.elector.may_write(&client, clock()).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!("lost the Lease between iterations: writing nothing");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the Lease: writing nothing");
                    return;
                }
            }
        }
    });
}
