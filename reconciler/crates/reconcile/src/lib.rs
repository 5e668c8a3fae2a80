//! One reconcile iteration: read the desired fleet at its newest revision,
//! observe the fleet through the executor, plan with the engine, carry the
//! plan out, record. The loop around it (timers, webhook, metrics endpoint)
//! is in [`run`]; this module is synchronous and has no clock of its own.
//!
//! Architecture invariants:
//! - A revision that fails validation is never applied: the last valid one
//!   stays in force (as Flux's last applied revision), and the failure is
//!   recorded once per revision.
//! - Every action is recorded as intended before the executor carries it
//!   out (a plan's actions all in one transaction), and as done, with its
//!   effect on the job records, an audit line and the executor values it
//!   changed, in a later transaction that records the outcomes of up to
//!   [`OUTCOME_BATCH`] actions. On start, intents left by a crash are
//!   carried out again; executors make that idempotent. So a crash at any
//!   point neither loses an action (its intent stays until its outcome is
//!   recorded) nor repeats one (its intent goes in the transaction that
//!   records its outcome).
//! - What needs no disk until an action depends on it is committed
//!   deferred ([`Store::commit_deferred`]): the observation's events and
//!   the pending jobs reach the disk with the plan's intents, the last
//!   outcomes with the revision's commit. A crash before then loses them
//!   and nothing else, and the next iteration does that work again.
//! - The job records are read from the store once; afterwards the
//!   reconciler keeps them in memory from one iteration to the next, as it
//!   changes them in step with its own commits. They are used only while
//!   the store's count of job-record commits ([`Store::job_writes`]) is
//!   the one they were kept at (anyone else's write, a failed iteration, or
//!   recovered intents drop them, and the next iteration reads the store).

mod alike;
mod aside;
pub mod charts;
pub mod history_page;
pub mod http_limits;
mod job_index;
pub mod live;
pub mod metrics;
mod noting;
pub mod prune;
pub mod recorded;
pub mod run;
pub mod saved;
pub mod signatures;
pub mod source;
pub mod starts;
pub mod state;
pub mod status;
pub mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::state::{
    AuditEntry, Batch, IntentRef, JobRecord, LastStop, Loading, Phase, Revisions, StateError,
    StopKind, Stopping, Store,
};
use engine::{Horizon, PlanInput, Planner, Unchanged};
use exec::{ActionContext, Event, ExecError, Executor, JobView, Observation, Outcome, StopView};
use load::Loaded;
use load::cache::{DocumentCache, LoadStats};
use model::diag::{Diagnostic, Origin, Pos};
use model::observed::{
    CompletedJob, NodeGpus, ObservedNode, ObservedState, QueuedJob, RunningJob, Timestamp,
};
use model::plan::{Action, Plan};
use model::spec::{Fleet, JobSpec, Object};
use prune::{PrunePolicy, PruneRefusal};
use signatures::SignaturePolicy;

pub use source::{FetchError, FleetSource, Revision};

/// Why an iteration failed as a whole (a refused revision is not a failure).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// The executor failed to observe the fleet.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The desired fleet could not be read.
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

impl ReconcileError {
    /// Whether the failure may go away by itself (an executor's transient
    /// failure, [`ExecError::is_transient`]): the loop then retries sooner.
    pub fn is_transient(&self) -> bool {
        matches!(self, ReconcileError::Exec(e) if e.is_transient())
    }

    /// Whether another replica leads ([`ExecError::NotLeader`]): this one
    /// waits, which is no failure.
    pub fn is_following(&self) -> bool {
        matches!(self, ReconcileError::Exec(ExecError::NotLeader { .. }))
    }

    /// How long the executor asked to wait before the next try, if it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ReconcileError::Exec(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// The most actions whose outcomes one transaction records. The window
/// ([`OUTCOME_WINDOW`]) binds first for any executor slower than about
/// 50 µs an action (all but the sim): this bounds the sim's bursts.
pub const OUTCOME_BATCH: usize = 4096;

/// Outcomes are committed at least this often while actions are carried
/// out (a slow executor's progress is on disk soon, and a crash leaves few
/// actions to carry out again).
pub const OUTCOME_WINDOW: std::time::Duration = std::time::Duration::from_millis(200);

/// How many diagnostics of a refused revision are kept in its error.
const KEPT_DIAGNOSTICS: usize = 5;

/// Why a revision was refused, read back from its message (the state keeps
/// the message, so a refusal found after a restart is told apart the same
/// way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It does not validate.
    Invalid,
    /// Prune protection ([`prune`]).
    Prune,
    /// The process died loading or planning it ([`MAX_INTERRUPTED`] times).
    Crashed,
    /// Its commit signature does not verify (`--require-signed`).
    Signature,
}

/// How a prune-protection refusal's message starts.
const PRUNE_PREFIX: &str = "prune protection: ";
/// How a crash refusal's message starts.
const CRASH_PREFIX: &str = "gitfleet stopped ";
/// How a signature refusal's message starts.
const SIGNATURE_PREFIX: &str = "signature verification: ";

impl Refusal {
    /// The kind of refusal `message` (a diagnostic's, or `lastError`) tells.
    pub fn of(message: &str) -> Refusal {
        if message.contains(PRUNE_PREFIX) {
            Refusal::Prune
        } else if message.contains(SIGNATURE_PREFIX) {
            Refusal::Signature
        } else if message.contains(CRASH_PREFIX) {
            Refusal::Crashed
        } else {
            Refusal::Invalid
        }
    }

    /// `invalid`, `prune`, `crashed`, `signature` (the metric's label).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Invalid => "invalid",
            Refusal::Prune => "prune",
            Refusal::Crashed => "crashed",
            Refusal::Signature => "signature",
        }
    }
}

/// A revision during whose loading or planning the process died this many
/// times is refused (a crash that repeats is not retried forever).
pub const MAX_INTERRUPTED: u32 = 3;

/// An action as carried out.
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    /// The action.
    pub action: Action,
    /// What came of it.
    pub result: ActionResult,
    /// It failed in a way that may go away by itself (the loop retries sooner).
    pub transient: bool,
}

/// What came of one action.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionResult {
    /// Done, or started and under way.
    Applied(Outcome),
    /// The same effect was already under way (not carried out again).
    AlreadyUnderway,
    /// The executor failed; the next plan tries again.
    Failed(String),
}

/// Everything one iteration saw and did.
#[derive(Debug, Clone)]
pub struct Iteration {
    /// The reconciler's clock.
    pub time: Timestamp,
    /// The revision in force (the newest valid one).
    pub revision: Option<Revision>,
    /// The newest revision, when it was refused.
    pub refused: Option<(Revision, Vec<Diagnostic>)>,
    /// The plan (none without any valid revision yet). A re-used plan
    /// ([`Iteration::reused`]) keeps the `time` it was made at.
    pub plan: Option<Arc<Plan>>,
    /// The plan is the last iteration's, re-used: the same revision, an
    /// observation that still stands, the same job records, and a time
    /// before the plan's horizon (docs/semantics.md, "Unchanged
    /// iterations").
    pub reused: bool,
    /// Events the fleet reported.
    pub events: Vec<Event>,
    /// Actions carried out.
    pub executed: Vec<Executed>,
    /// Intents left by an earlier crash that were carried out again.
    pub recovered: usize,
    /// The nodes observed (ready ones).
    pub nodes: Arc<Vec<ObservedNode>>,
    /// Configuration changes the executor made (Slurm accounts and QOS),
    /// one line each.
    pub config: Vec<String>,
    /// Wall time the engine took to plan, in seconds (none without a plan,
    /// and for a re-used one: the engine did not run).
    pub plan_seconds: Option<f64>,
    /// The observed state the plan was made from, less its nodes (they are
    /// `nodes`); empty before the plan is carried out ([`Reconciler::apply`]
    /// moves it here) and without a plan. A re-used plan's is the one it
    /// was made from (its `time` that plan's).
    pub planned_from: Arc<ObservedState>,
    /// Where the time went before the plan.
    pub phases: Phases,
}

/// Where an iteration's time went before the plan (the engine's is
/// [`Iteration::plan_seconds`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phases {
    /// Asking the source for its newest revision (a remote: fetching it).
    pub fetch: Duration,
    /// Loading a new revision (listing, reading, parsing, validating).
    pub load: Duration,
    /// How that load went, when there was one.
    pub loaded: Option<LoadStats>,
    /// Observing the fleet through the executor (the jobs' look-up table
    /// by name included).
    pub observe: Duration,
    /// Prune protection for a new revision.
    pub prune: Duration,
    /// Building the observed state the engine plans from.
    pub observed: Duration,
    /// Noting the plan's pending jobs in the records.
    pub noted: Duration,
    /// Whether the last observation was used again instead of observing
    /// (it still stood: [`Reconciler`]'s `standing_nodes`).
    pub observation_reused: bool,
    /// Whether the plan's pending jobs were those of the last plan, with
    /// the same reasons, already noted (nothing to note again).
    pub pending_already_noted: bool,
    /// Whether the last plan was kept for a new revision whose changes no
    /// plan can see (docs/semantics.md, "Changes no plan can see").
    pub plan_kept_for_revision: bool,
    /// Whether the last plan's observed state was planned from again (built
    /// from the same records and nodes).
    pub observed_state_reused: bool,
    /// Whether the planner was told which jobs changed since it last
    /// planned (it makes its job table from what it kept then).
    pub jobs_kept: bool,
}

/// A plan ready to be carried out (`gitfleet apply` shows it first).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The iteration so far (no actions executed yet).
    pub iteration: Iteration,
    /// The job records as stored after preparing (this reconciler is the
    /// database's only writer).
    records: Records,
    /// The store's [`Store::job_writes`] when `records` were last those
    /// stored.
    writes: u64,
    /// The observed state planned from, less its nodes (they are the
    /// iteration's): what a saved plan is checked against.
    observed: Arc<ObservedState>,
}

/// The last plan made in full and what it was made from, re-used while
/// nothing it depends on changed ([`Reconciler::reusable`]).
#[derive(Debug)]
struct LastPlan {
    /// The revision planned.
    revision: Option<String>,
    /// Where the fleet planned is (the same one: [`Arc::as_ptr`]). Not the
    /// `Arc` itself: the fleet in force must be the only one to hold it, to
    /// be lent to the next load ([`Reconciler::load_lending`]).
    fleet: usize,
    /// The store's [`Store::job_writes`] when the observed state was built
    /// from the records: equal now, no record changed since.
    writes: u64,
    /// The store's [`Store::job_writes`] once its pending jobs were noted.
    noted: u64,
    /// When it was planned.
    time: Timestamp,
    /// When time alone could change it ([`engine::plan_with_horizon`]).
    horizon: Horizon,
    plan: Arc<Plan>,
    /// The observed state planned from, less its nodes.
    observed: Arc<ObservedState>,
    nodes: Arc<Vec<ObservedNode>>,
    /// Whether the fleet ordered a queue by attained service (the observed
    /// state then carries the jobs' attained service).
    attained: bool,
}

/// The nodes of the last observation and the records it holds for: while
/// no job record was written since and the executor says it still stands
/// ([`Executor::observation_stands`]), observing again would report no
/// event and these nodes.
#[derive(Debug)]
struct LastObservation {
    /// The store's [`Store::job_writes`] when the records were last known
    /// to be those the observation was made with (running jobs as the
    /// executor has them; pending jobs noted since do not count).
    writes: u64,
    nodes: Arc<Vec<ObservedNode>>,
}

/// How the fleet in force was made from the fleet of the revision in force
/// before it.
#[derive(Debug)]
struct Derived {
    /// That revision.
    from: String,
    /// Changed in place by the load (the cache holds the files that
    /// changed); otherwise the same fleet (a commit that left the fleet's
    /// files alone).
    in_place: bool,
}

/// The most pending jobs noted one look-up at a time (otherwise every
/// record is hashed by name first). A look-up in the sorted records costs
/// about half a microsecond on 150,000 records, hashing them all a few
/// milliseconds: a queue's change re-noting its few thousand jobs looks
/// them up.
const UNNOTED_LOOKED_UP: usize = 4_000;

/// The record that notes `pending` when `record` (its job's) does not yet:
/// a new one for a job never seen, the record with the plan's reason for a
/// pending job with another; `None` when there is nothing to note.
fn pending_record(
    record: Option<&JobRecord>,
    pending: &model::plan::Pending,
    now: Timestamp,
) -> Option<JobRecord> {
    let mut record = match record {
        Some(r) if r.phase != Phase::Pending => return None,
        Some(r) if r.reason.as_deref() == Some(&*pending.reason) => return None,
        Some(r) => r.clone(),
        None => JobRecord::new_pending(&pending.job, now),
    };
    record.reason = Some(pending.reason.to_string());
    Some(record)
}

/// Forgets, in `records` and in `batch`, the pending jobs no longer in Git
/// (`specs`): they never ran.
fn forget_gone(specs: &Specs<'_>, records: &mut Records, batch: &mut Batch) {
    // Found by walking the records (usually none), then removed: a walk
    // that may remove costs twice as much on 150,000 records.
    let gone: Vec<String> = records
        .iter()
        .filter(|(name, r)| r.phase == Phase::Pending && !specs.contains_key(name.as_str()))
        .map(|(name, _)| name.clone())
        .collect();
    for name in &gone {
        records.remove(name);
    }
    batch.remove_jobs.extend(gone);
}

/// Job records by name.
type Records = BTreeMap<String, JobRecord>;

/// GPUs nominated for pending jobs: (node, GPU index) → job.
type Nominations = BTreeMap<(String, u32), String>;

/// Where the records' pending jobs have GPUs nominated.
fn nominations_of(records: &Records) -> Nominations {
    let mut out = Nominations::new();
    for record in records.values() {
        if record.phase != Phase::Pending {
            continue;
        }
        for part in &record.nominated {
            for gpu in &part.gpus {
                out.insert((part.node.clone(), *gpu), record.job.clone());
            }
        }
    }
    out
}

/// The job records as stored, kept in `mirror` from now on (read from
/// `store` unless those kept are still current).
fn mirrored<'a>(
    mirror: &'a mut Option<(Records, u64)>,
    store: &Store,
) -> Result<&'a Records, StateError> {
    let kept = match mirror.take() {
        Some((records, writes)) if writes == store.job_writes() => (records, writes),
        _ => {
            // The count first: a write after it makes the records read
            // stale in the count's eyes, never the other way round.
            let writes = store.job_writes();
            (store.jobs()?, writes)
        }
    };
    Ok(&mirror.insert(kept).0)
}

use job_index::{JobIndex, Specs};

/// The reconciler: a source, a store, an executor, and the last valid fleet.
pub struct Reconciler<E> {
    source: FleetSource,
    store: Arc<Store>,
    executor: E,
    good: Option<(Revision, Arc<Fleet>)>,
    /// A new revision is being loaded and planned (marked in the state).
    loading: bool,
    /// How much one revision may cancel.
    prune: PrunePolicy,
    /// Whose commit signatures are required (`--require-signed`).
    signatures: Option<SignaturePolicy>,
    /// The last revision whose signature this process checked.
    signature_checked: Option<String>,
    /// The most actions whose outcomes one transaction records.
    outcome_batch: usize,
    /// The parsed files of the last revision loaded (Git sources).
    cache: DocumentCache,
    /// The current iteration's phases so far.
    phases: Phases,
    /// The job records as stored when the store's [`Store::job_writes`]
    /// was the count beside them (kept from the last iteration).
    mirror: Option<(Records, u64)>,
    /// The revision whose fleet was lent to the load of a new revision and
    /// taken ([`Reconciler::load_lending`]): out of `good` until the new one
    /// is adopted or it is taken back ([`Reconciler::take_back`]).
    lent: Option<Revision>,
    /// Whether the records are kept from one iteration to the next.
    keep_records: bool,
    /// The last plan made in full, while it may be re-used.
    last: Option<LastPlan>,
    /// The last observation, while it may be used again (a new revision
    /// whose pools are the same).
    seen: Option<LastObservation>,
    /// The fleet's jobs by name, kept while the names stay the same.
    jobs: JobIndex,
    /// How the fleet in force came from the last revision's, when it was
    /// adopted from it unchanged or changed in place by the load.
    derived: Option<Derived>,
    /// When prune protection last found every running job in the new
    /// fleet: the job index's generation (the fleet's names) and the
    /// store's [`Store::job_writes`] (the running jobs) then.
    none_pruned: Option<(u64, u64)>,
    /// When every pending record's job was in the fleet: the index's
    /// generation and the store's [`Store::job_writes`] then.
    pending_in_fleet: Option<(u64, u64)>,
    /// Whether a plan may be re-used at all (default; off to compare).
    reuse_plans: bool,
    /// The engine's planner: its view of the observed nodes (the cluster)
    /// is kept from one plan to the next while they stay the same, and its
    /// job table while the jobs do (`planned_last` says what it planned).
    planner: Planner,
    /// What the planner last planned, when a whole fleet's revision.
    planned_last: Option<PlannedLast>,
    /// The nodes the planner last planned on (shared with that iteration:
    /// the same nodes while the observation stands).
    planned_nodes: std::sync::Weak<Vec<ObservedNode>>,
}

/// The revision whose fleet has the jobs the planner last planned but for
/// some, and the observed state it planned from (held weakly: while it
/// lives, a state at the same address is the same state).
#[derive(Debug)]
struct PlannedLast {
    revision: String,
    observed: std::sync::Weak<ObservedState>,
    /// The positions of the jobs changed since the planner planned (by
    /// commits whose plan was kept: changes no plan can see).
    changed: Vec<usize>,
}

impl<E: Executor> std::fmt::Debug for Reconciler<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("source", &self.source)
            .field("executor", &self.executor.name())
            .finish()
    }
}

impl<E: Executor> Reconciler<E> {
    /// Where the dashboard reads the fleet's semantic history: the Git
    /// repository (a remote's mirror once fetched); `None` for a directory.
    pub fn history_repo(&self) -> Option<history_page::HistoryRepo> {
        self.source.git().map(history_page::HistoryRepo::of)
    }

    /// A reconciler over `source`, keeping state in `store`, acting through `executor`.
    pub fn new(source: FleetSource, store: Arc<Store>, executor: E) -> Self {
        Reconciler {
            source,
            store,
            executor,
            good: None,
            loading: false,
            prune: PrunePolicy::default(),
            signatures: None,
            signature_checked: None,
            outcome_batch: OUTCOME_BATCH,
            cache: DocumentCache::new(),
            phases: Phases::default(),
            mirror: None,
            keep_records: true,
            lent: None,
            last: None,
            seen: None,
            jobs: JobIndex::default(),
            derived: None,
            none_pruned: None,
            pending_in_fleet: None,
            reuse_plans: true,
            planner: Planner::new(),
            planned_nodes: std::sync::Weak::new(),
            planned_last: None,
        }
    }

    /// Whether an unchanged iteration re-uses the last plan (default) or
    /// plans again every time (to compare; docs/semantics.md, "Unchanged
    /// iterations").
    pub fn with_plans_reused(mut self, reuse: bool) -> Self {
        self.reuse_plans = reuse;
        self
    }

    /// Whether the job records are kept in memory from one iteration to the
    /// next (default) or read from the store every iteration (to compare).
    pub fn with_records_kept(mut self, keep: bool) -> Self {
        self.keep_records = keep;
        self
    }

    /// The job records kept in memory, when they are still those stored
    /// (tests compare them with [`Store::jobs`]).
    pub fn kept_records(&self) -> Option<&BTreeMap<String, JobRecord>> {
        match &self.mirror {
            Some((records, writes)) if *writes == self.store.job_writes() => Some(records),
            _ => None,
        }
    }

    /// Every job record as stored: those kept in memory when they are still
    /// current, else read from the store.
    pub fn job_records(
        &self,
    ) -> Result<std::borrow::Cow<'_, BTreeMap<String, JobRecord>>, ReconcileError> {
        Ok(match self.kept_records() {
            Some(records) => std::borrow::Cow::Borrowed(records),
            None => std::borrow::Cow::Owned(self.store.jobs()?),
        })
    }

    /// The job records as stored, taken out of memory (they come back with
    /// [`Reconciler::keep`] once the iteration has recorded its changes).
    fn take_records(&mut self) -> Result<Records, ReconcileError> {
        match self.mirror.take() {
            Some((records, writes)) if writes == self.store.job_writes() => Ok(records),
            _ => Ok(self.store.jobs()?),
        }
    }

    /// Keeps `records` for the next iteration when they are those stored:
    /// `writes` is the store's [`Store::job_writes`] when they were last,
    /// and every write since was this reconciler's, with them (`own`).
    fn keep(&mut self, records: Records, own: bool) {
        if self.keep_records && own {
            self.mirror = Some((records, self.store.job_writes()));
        }
    }

    /// Records the outcomes of at most `n` actions per transaction (at
    /// least 1; default [`OUTCOME_BATCH`]).
    pub fn with_outcome_batch(mut self, n: usize) -> Self {
        self.outcome_batch = n.max(1);
        self
    }

    /// The state store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The executor's name.
    pub fn executor_name(&self) -> &'static str {
        self.executor.name()
    }

    /// The configuration changes the executor would make for the prepared
    /// fleet ([`Executor::config_changes`]).
    pub fn config_changes(&self) -> Vec<String> {
        self.executor.config_changes()
    }

    /// The desired fleet in force, if any.
    pub fn fleet(&self) -> Option<&Fleet> {
        self.good.as_ref().map(|(_, f)| f.as_ref())
    }

    /// [`Reconciler::fleet`], shared (the expected starts are computed
    /// from it off the loop's thread).
    pub fn fleet_shared(&self) -> Option<&Arc<Fleet>> {
        self.good.as_ref().map(|(_, f)| f)
    }

    /// Lets the executor give up what only one replica may hold (the kube
    /// executor's Lease) when the loop stops; a failure is logged, never
    /// fatal (the Lease then expires by itself).
    pub async fn release(&mut self) {
        if let Err(e) = self.executor.release().await {
            tracing::warn!(executor = self.executor.name(), error = %e, "cannot release on shutdown");
        }
    }

    /// One whole iteration at `now`. What preparing records (the fleet's
    /// events, the pending jobs) is committed deferred and reaches the disk
    /// with the plan's intents, before the first action is carried out.
    pub async fn iterate(&mut self, now: Timestamp) -> Result<Iteration, ReconcileError> {
        let prepared = self.prepare_deferred(now).await?;
        self.apply(prepared).await
    }

    /// Reads the desired fleet, observes, and plans; carries nothing out but
    /// intents left by a crash and the fleet's own events. What it records
    /// is on disk when it returns (`gitfleet apply` may wait for a person).
    pub async fn prepare(&mut self, now: Timestamp) -> Result<Prepared, ReconcileError> {
        let prepared = self.prepare_deferred(now).await?;
        self.store.persist()?;
        Ok(prepared)
    }

    /// [`Reconciler::prepare`], leaving its records deferred
    /// ([`Store::commit_deferred`]).
    async fn prepare_deferred(&mut self, now: Timestamp) -> Result<Prepared, ReconcileError> {
        self.phases = Phases::default();
        if !self.keep_records {
            self.mirror = None;
        }
        // A replica that does not lead carries out and records nothing.
        self.executor.lead(now).await?;
        let recovered = self.recover(now).await?;
        let (revision, refused) = self.desired(now)?;
        let mut records = self.take_records()?;
        let Some((in_force, fleet)) = self.good.clone() else {
            return Ok(Prepared {
                records,
                writes: self.store.job_writes(),
                observed: Arc::default(),
                iteration: Iteration {
                    time: now,
                    revision: None,
                    refused,
                    plan: None,
                    reused: false,
                    events: Vec::new(),
                    executed: Vec::new(),
                    recovered,
                    nodes: Arc::default(),
                    config: Vec::new(),
                    plan_seconds: None,
                    planned_from: Arc::default(),
                    phases: std::mem::take(&mut self.phases),
                },
            });
        };
        self.executor.set_fleet(&fleet).await?;
        let (last, previous) = match self.last.take() {
            Some(l) => match self.reusable(&l, &fleet, revision.as_ref(), now) {
                Some(new_revision) => (Some((l, new_revision)), None),
                // Not re-used: what its plan noted may still spare noting again.
                None => (None, Some(l)),
            },
            None => (None, None),
        };
        if let Some((mut last, new_revision)) = last {
            if new_revision {
                // The same plan, of the new revision (copied when another
                // holds it).
                last.revision = revision.as_ref().map(|r| r.id.clone());
                Arc::make_mut(&mut last.plan).revision = last.revision.clone();
                last.fleet = Arc::as_ptr(&fleet) as usize;
                self.phases.plan_kept_for_revision = true;
                if let Some(r) = &revision {
                    self.planned_last_follows(&r.id);
                }
                // Loaded, and nothing to plan: it cannot be what kills us.
                if self.loading {
                    let mut revisions = self.store.revisions()?;
                    revisions.loading = None;
                    self.store.commit_deferred(&Batch {
                        revisions: Some(revisions),
                        ..Batch::default()
                    })?;
                    self.loading = false;
                }
            }
            let iteration = Iteration {
                time: now,
                revision,
                refused,
                plan: Some(last.plan.clone()),
                reused: true,
                events: Vec::new(),
                executed: Vec::new(),
                recovered,
                nodes: last.nodes.clone(),
                config: Vec::new(),
                plan_seconds: None,
                planned_from: Arc::default(),
                phases: std::mem::take(&mut self.phases),
            };
            let observed = last.observed.clone();
            self.last = Some(last);
            return Ok(Prepared {
                records,
                writes: self.store.job_writes(),
                observed,
                iteration,
            });
        }
        let observing = Instant::now();
        // One look-up table by name for observing and for the observed state
        // (taken out while `self` observes; made again if an error leaves
        // it out).
        let mut index = std::mem::take(&mut self.jobs);
        let specs = index.specs_for(&fleet, &in_force.id);
        // Every pending record's job was in the fleet when the last plan's
        // pending jobs were noted; with the same job names since and no
        // record written, none can have left Git.
        let none_gone =
            self.pending_in_fleet == Some((specs.generation(), self.store.job_writes()));
        let (events, nodes) = match self.standing_nodes(now) {
            Some(nodes) => {
                self.phases.observation_reused = true;
                if !none_gone {
                    let mut batch = Batch::default();
                    forget_gone(&specs, &mut records, &mut batch);
                    self.store.commit_deferred(&batch)?;
                }
                (Vec::new(), nodes)
            }
            None => {
                let Observation { events, nodes } = self
                    .observe(&fleet, &specs, now, &mut records, none_gone)
                    .await?;
                (events, Arc::new(nodes))
            }
        };
        let generation = specs.generation();
        // The records the observed state is built from.
        let observed_writes = self.store.job_writes();
        self.phases.observe = observing.elapsed();
        let building = Instant::now();
        // Pending jobs gone from Git were forgotten while observing: the
        // observed state need not look each one up again.
        debug_assert!(
            records
                .values()
                .all(|r| r.phase != Phase::Pending || specs.contains_key(&r.job)),
            "a pending job not in the fleet"
        );
        // The last plan's observed state when it was built from these
        // records and nodes (no record written since, not even a pending
        // job noted; the same attained-service switch): the same state,
        // its `time` aside, which the engine does not read.
        let attained = fleet.orders_by_attained_service();
        let kept_state = previous
            .as_ref()
            .filter(|p| {
                self.reuse_plans
                    && Arc::ptr_eq(&p.nodes, &nodes)
                    && p.writes == self.store.job_writes()
                    && p.attained == attained
            })
            .map(|p| p.observed.clone());
        let observed = match kept_state {
            Some(state) => {
                self.phases.observed_state_reused = true;
                state
            }
            // The nodes stay apart (shared with the iteration).
            None => Arc::new(self.observed(None, now, &records, Vec::new())),
        };
        self.jobs = index;
        self.phases.observed = building.elapsed();
        let planning = std::time::Instant::now();
        // An executor that does not run Jobs (Slurm's accounting mode) gets
        // a plan without them: nothing to place, stop or keep pending.
        let jobless;
        let runs_jobs = self.executor.capabilities().runs_jobs;
        let planned: &Fleet = if runs_jobs {
            &fleet
        } else {
            jobless = Fleet {
                jobs: Vec::new(),
                ..Fleet::clone(&fleet)
            };
            &jobless
        };
        let jobs_but = revision
            .as_ref()
            .filter(|_| runs_jobs)
            .and_then(|r| self.jobs_changed_since_planned(&r.id));
        let unchanged = Unchanged {
            jobs_but: jobs_but.as_deref(),
            records: self.planned_last.as_ref().is_some_and(|last| {
                last.observed
                    .upgrade()
                    .is_some_and(|o| Arc::ptr_eq(&o, &observed))
            }),
            // The same nodes, shared: the planner need not compare them.
            nodes: self
                .planned_nodes
                .upgrade()
                .is_some_and(|n| Arc::ptr_eq(&n, &nodes)),
        };
        self.phases.jobs_kept = jobs_but.is_some();
        let (plan, horizon) = self.planner.plan_since_last(
            &PlanInput {
                fleet: planned,
                observed: &observed,
                now,
                revision: revision.as_ref().map(|r| r.id.as_str()),
            },
            &nodes,
            unchanged,
        );
        self.planned_nodes = Arc::downgrade(&nodes);
        self.planned_last = revision
            .as_ref()
            .filter(|_| runs_jobs)
            .map(|r| PlannedLast {
                revision: r.id.clone(),
                observed: Arc::downgrade(&observed),
                changed: Vec::new(),
            });
        let plan_seconds = planning.elapsed().as_secs_f64();
        // The revision loaded and planned: it cannot be what kills us
        // (unmarked in the transaction that records the pending jobs).
        let loaded = if self.loading {
            let mut revisions = self.store.revisions()?;
            revisions.loading = None;
            Some(revisions)
        } else {
            None
        };
        let noting = Instant::now();
        // The last plan's pending jobs were noted with their reasons and no
        // record was written since: the same jobs with the same reasons
        // have nothing to note (every one is recorded so, or not pending).
        // Otherwise the jobs it noted that wait for the same reasons at the
        // same place in the list need no look-up (`noted`).
        let noted_when = previous.as_ref().map(|p| p.noted);
        let last_plan = previous.map(|p| p.plan);
        let noted = last_plan
            .as_ref()
            .filter(|_| noted_when == Some(self.store.job_writes()));
        let before_noting = self.store.job_writes();
        let noted = noted.map(|p| p.pending.as_slice());
        let (new_records, already) = self.note_pending(&plan, noted, now, &mut records, loaded)?;
        self.phases.pending_already_noted = already;
        // The last plan, when no one else holds it, freed off the loop.
        if let Some(last) = last_plan {
            aside::drop_last_aside(last);
        }
        self.phases.noted = noting.elapsed();
        // Noting wrote pending records only. Reasons are not part of the
        // observed state (a new record is: a queued job): without new
        // records, the state built before noting is the records' still.
        // Prune protection reads running records only.
        let after_noting = self.store.job_writes();
        let observed_writes = if new_records {
            observed_writes
        } else if observed_writes == before_noting {
            after_noting
        } else {
            observed_writes
        };
        if let Some((names, writes)) = self.none_pruned
            && writes == before_noting
        {
            self.none_pruned = Some((names, after_noting));
        }
        self.loading = false;
        if self.reuse_plans {
            // Noting pending jobs wrote no running job's record: the
            // observation holds for the records as they are now.
            self.seen = Some(LastObservation {
                writes: self.store.job_writes(),
                nodes: nodes.clone(),
            });
            // Pending records are the fleet's: those left were forgotten,
            // those noted are the plan's.
            self.pending_in_fleet = Some((generation, self.store.job_writes()));
        }
        let plan = Arc::new(plan);
        if self.reuse_plans {
            self.last = Some(LastPlan {
                revision: revision.as_ref().map(|r| r.id.clone()),
                fleet: Arc::as_ptr(&fleet) as usize,
                writes: observed_writes,
                noted: self.store.job_writes(),
                time: now,
                horizon,
                plan: plan.clone(),
                observed: observed.clone(),
                nodes: nodes.clone(),
                attained,
            });
        }
        Ok(Prepared {
            records,
            writes: self.store.job_writes(),
            observed,
            iteration: Iteration {
                time: now,
                revision,
                refused,
                plan: Some(plan),
                reused: false,
                events,
                executed: Vec::new(),
                recovered,
                nodes,
                config: Vec::new(),
                plan_seconds: Some(plan_seconds),
                planned_from: Arc::default(),
                phases: std::mem::take(&mut self.phases),
            },
        })
    }

    /// Whether `last` is the plan a full iteration at `now` would make
    /// (its `time` and revision aside): no job record written since its
    /// observed state was built (no event, no outcome, no pending job
    /// noted, nobody else's write), the executor's observation still
    /// stands, `now` is before the plan's horizon, past which time alone
    /// could change it, and the fleet is the same or plans alike. The
    /// engine is a pure function of the fleet, the observed state and
    /// `now`, so the plan is the same. `Some(true)`: for a new revision,
    /// whose fleet plans alike ([`Reconciler::plans_alike`]).
    fn reusable(
        &self,
        last: &LastPlan,
        fleet: &Arc<Fleet>,
        revision: Option<&Revision>,
        now: Timestamp,
    ) -> Option<bool> {
        let same = !self.loading
            && last.revision.as_deref() == revision.map(|r| r.id.as_str())
            && last.fleet == Arc::as_ptr(fleet) as usize;
        let stands = self.reuse_plans
            && last.writes == self.store.job_writes()
            && now >= last.time
            && last.horizon.is_none_or(|h| now < h)
            && self.executor.observation_stands(now);
        if !stands {
            return None;
        }
        if same {
            return Some(false);
        }
        self.plans_alike(last).then_some(true)
    }

    /// When the fleet in force has the jobs of the fleet the planner last
    /// planned but for some (changed in place, each keeping its name):
    /// their positions (none: the same fleet, or one made from it by a
    /// commit that left the fleet's files alone). A fleet's contents are
    /// its revision's.
    fn jobs_changed_since_planned(&self, revision: &str) -> Option<Vec<usize>> {
        let last = self.planned_last.as_ref()?;
        let mut changed = last.changed.clone();
        if last.revision != revision {
            let derived = self.derived.as_ref().filter(|d| d.from == last.revision)?;
            if derived.in_place {
                changed.extend_from_slice(self.cache.jobs_changed_in_place()?);
                changed.sort_unstable();
                changed.dedup();
            }
        }
        Some(changed)
    }

    /// The last plan was kept for `revision`, made from the planner's last
    /// fleet by changes no plan can see: the planner's fleet is now that
    /// one, with the jobs changed since to tell it.
    fn planned_last_follows(&mut self, revision: &str) {
        let changed = self.jobs_changed_since_planned(revision);
        self.planned_last = match (self.planned_last.take(), changed) {
            (Some(last), Some(changed)) => Some(PlannedLast {
                revision: revision.to_string(),
                changed,
                ..last
            }),
            _ => None,
        };
    }

    /// Whether the fleet in force plans as `last`'s did: it was made from
    /// the fleet `last` was planned from, unchanged (a commit that left the
    /// fleet's files alone) or changed in place by changes no plan can see
    /// (`alike`; a fleet's contents are its revision's, so the revision
    /// names the fleet planned).
    fn plans_alike(&self, last: &LastPlan) -> bool {
        let Some(derived) = &self.derived else {
            return false;
        };
        last.revision.as_deref() == Some(derived.from.as_str())
            && (!derived.in_place
                || self.cache.changed_in_place().is_some_and(|changes| {
                    alike::changes_plan_alike(&changes, &last.observed.running)
                }))
    }

    /// Carries out a prepared plan and records the revision as applied.
    pub async fn apply(&mut self, prepared: Prepared) -> Result<Iteration, ReconcileError> {
        let Prepared {
            mut iteration,
            mut records,
            writes,
            observed,
        } = prepared;
        // No one wrote job records since they were prepared: from here on
        // they change with this reconciler's own commits.
        let own = writes == self.store.job_writes();
        iteration.planned_from = observed;
        let now = iteration.time;
        if let (Some(plan), Some(revision), Some((in_force, fleet))) =
            (&iteration.plan, &iteration.revision, self.good.clone())
        {
            // A crash while the configuration changes must not count
            // against the revision (its loading mark is cleared in a
            // deferred commit): what preparing recorded goes to disk first.
            if !self.executor.config_changes().is_empty() {
                self.store.persist()?;
            }
            iteration.config = self.executor.apply_config().await?;
            for change in &iteration.config {
                tracing::info!(executor = self.executor.name(), %change, "configuration changed");
            }
            // Nothing to look up for a plan without actions (an unchanged
            // fleet's): no table of 100,000s of names.
            let results = if plan.actions.is_empty() {
                Vec::new()
            } else {
                let mut index = std::mem::take(&mut self.jobs);
                let specs = index.specs_for(&fleet, &in_force.id);
                let nominations = nominations_of(&records);
                let results = self
                    .carry_out_plan(
                        &fleet,
                        &specs,
                        &mut records,
                        &nominations,
                        &plan.actions,
                        &revision.id,
                        now,
                    )
                    .await?;
                self.jobs = index;
                results
            };
            for (action, (result, transient)) in plan.actions.iter().zip(results) {
                iteration.executed.push(Executed {
                    action: action.clone(),
                    result,
                    transient,
                });
            }
            let stored = self.store.revisions()?;
            let mut revisions = stored.clone();
            revisions.last_applied = Some(revision.id.clone());
            if iteration.refused.is_none() {
                revisions.last_attempted = Some(revision.id.clone());
                revisions.last_error = None;
            }
            let batch = Batch {
                revisions: Some(revisions),
                clock: Some(now),
                ..Batch::default()
            };
            // A re-used plan without actions that leaves the revisions as
            // they are changes nothing but the clock: deferred, a crash
            // loses only that (docs/semantics.md, "Unchanged iterations").
            // Otherwise durable: it puts the plan's last outcomes, deferred,
            // on disk.
            let deferred = iteration.reused
                && plan.actions.is_empty()
                && batch.revisions.as_ref() == Some(&stored);
            self.commit_with_executor(&batch, deferred)?;
        } else {
            self.store.commit(&Batch {
                clock: Some(now),
                ..Batch::default()
            })?;
        }
        self.keep(records, own);
        Ok(iteration)
    }

    /// Commits `batch`, deferred or durable, with what the executor still
    /// keeps in memory ([`Executor::flush`]: a new sim world's nodes, when
    /// no action flushed them).
    fn commit_with_executor(
        &mut self,
        batch: &Batch,
        deferred: bool,
    ) -> Result<(), ReconcileError> {
        self.store.hold_executor_writes();
        let flushed = self.executor.flush();
        let committed = match (&flushed, deferred) {
            (Err(_), _) => Ok(()),
            (Ok(()), true) => self.store.commit_deferred(batch),
            (Ok(()), false) => self.store.commit(batch),
        };
        let released = self.store.release_executor_writes();
        flushed?;
        committed?;
        released?;
        Ok(())
    }

    /// Carries out intents a crash left behind.
    async fn recover(&mut self, now: Timestamp) -> Result<usize, ReconcileError> {
        let intents = self.store.pending_intents()?;
        if intents.is_empty() {
            return Ok(0);
        }
        let fleet = match &self.good {
            Some((_, f)) => f.clone(),
            None => {
                // Recovering before any fleet is loaded: load the newest valid one.
                self.desired(now)?;
                match &self.good {
                    Some((_, f)) => f.clone(),
                    None => Arc::new(Fleet::default()),
                }
            }
        };
        self.executor.set_fleet(&fleet).await?;
        let mut index = JobIndex::default();
        let specs = index.specs(&fleet);
        let mut records = self.store.jobs()?;
        let nominations = nominations_of(&records);
        // Carried out whatever their records say: a crash may have come
        // after the executor acted and before the outcome was recorded.
        let work: Vec<Work<'_>> = intents
            .iter()
            .map(|(id, intent)| Work {
                id: Some(*id),
                revision: &intent.revision,
                action: &intent.action,
                time: intent.time,
                check_underway: false,
            })
            .collect();
        self.carry_out_all(&fleet, &specs, &mut records, &nominations, &work, false)
            .await?;
        Ok(intents.len())
    }

    /// Makes the newest revision the one in force when it is valid; returns
    /// the revision in force and the refused one, if any.
    #[allow(clippy::type_complexity)]
    fn desired(
        &mut self,
        now: Timestamp,
    ) -> Result<(Option<Revision>, Option<(Revision, Vec<Diagnostic>)>), ReconcileError> {
        let fetching = Instant::now();
        let newest = self.source.current()?;
        self.phases.fetch += fetching.elapsed();
        self.derived = None;
        // A commit that leaves the fleet alone is adopted without loading,
        // unless its signature must be checked.
        let same_fleet = rev_content_eq(self.good.as_ref().map(|(r, _)| r), &newest)
            && self.signatures.is_none();
        if let Some((rev, _)) = &self.good
            && (rev.id == newest.id || same_fleet)
        {
            if rev.id != newest.id {
                self.derived = Some(Derived {
                    from: rev.id.clone(),
                    in_place: false,
                });
                self.good = self.good.take().map(|(_, f)| (newest.clone(), f));
            }
            return Ok((Some(newest), None));
        }
        let revisions = self.store.revisions()?;
        // `apply --allow-prune` looks again at a revision the loop refused.
        // A signature refused before is checked once more by a process
        // that has not checked it (its keys may have changed).
        let signature_again = revisions
            .last_error
            .as_deref()
            .is_some_and(|e| Refusal::of(e) == Refusal::Signature)
            && self.signatures.is_some()
            && self.signature_checked.as_deref() != Some(newest.id.as_str());
        let already_refused = revisions.last_attempted.as_deref() == Some(newest.id.as_str())
            && revisions.last_error.is_some()
            && !self.prune.allow
            && !signature_again;
        if !already_refused {
            let mut revisions = revisions;
            // A revision applied before has loaded and planned: it is not
            // what kills the process (a restart reloads it, unmarked).
            let proven = revisions.last_applied.as_deref() == Some(newest.id.as_str());
            let interrupted = match &revisions.loading {
                Some(loading) if loading.revision == newest.id => loading.interrupted + 1,
                _ => 0,
            };
            if !proven && interrupted >= MAX_INTERRUPTED {
                let diagnostic = Diagnostic::new(
                    Origin::new(
                        format!("revision {}", newest.short()).into(),
                        Pos::default(),
                    ),
                    format!(
                        "{CRASH_PREFIX}{interrupted} times while loading or planning this revision (a crash, running out of memory, or killed); it is refused so that it cannot stop the loop again, and the last applied revision stays in force. Push a new commit (a crash is a bug: please report it with this revision)"
                    ),
                );
                let diagnostics = vec![diagnostic];
                revisions.loading = None;
                self.record_refusal(&newest, &diagnostics, revisions, now)?;
                self.restore_last_applied()?;
                let in_force = self.good.as_ref().map(|(r, _)| r.clone());
                return Ok((in_force, Some((newest, diagnostics))));
            }
            let verified = match &self.signatures {
                Some(policy) => {
                    self.signature_checked = Some(newest.id.clone());
                    signatures::verify(policy, self.source.git(), &newest.id).map(Some)
                }
                None => Ok(None),
            };
            if let Ok(Some(signer)) = &verified {
                tracing::info!(revision = %newest.short(), %signer, "commit signature verified");
            }
            if let Err(unverified) = verified {
                let diagnostics = vec![Diagnostic::new(
                    Origin::new(
                        format!("revision {}", newest.short()).into(),
                        Pos::default(),
                    ),
                    format!("{SIGNATURE_PREFIX}{unverified}"),
                )];
                self.record_refusal(&newest, &diagnostics, revisions, now)?;
                self.restore_last_applied()?;
                let in_force = self.good.as_ref().map(|(r, _)| r.clone());
                return Ok((in_force, Some((newest, diagnostics))));
            }
            if !proven {
                // Recorded before the first byte is parsed: if this revision
                // kills the process, the next start knows which one did. A
                // new state's is not synced (a power loss starts it anew).
                revisions.loading = Some(Loading {
                    revision: newest.id.clone(),
                    interrupted,
                });
                self.store.commit_unsynced_if_new(&Batch {
                    revisions: Some(revisions.clone()),
                    ..Batch::default()
                })?;
                self.loading = true;
            }
            let loading = Instant::now();
            let Some((loaded, stats)) = self.load_lending(&newest)? else {
                // The directory changed while it was read (an empty file
                // list would be a valid, empty fleet): next iteration.
                let in_force = self.good.as_ref().map(|(r, _)| r.clone());
                return Ok((in_force, None));
            };
            self.phases.load += loading.elapsed();
            let in_place = stats.in_place;
            self.phases.loaded = Some(stats);
            if loaded.is_valid() {
                let pruning = Instant::now();
                let verdict = self.check_prune(&loaded.fleet, &newest.id);
                self.phases.prune = pruning.elapsed();
                if !matches!(verdict, Ok(Ok(()))) {
                    self.take_back();
                }
                if let Err(refusal) = verdict? {
                    let diagnostics = vec![Diagnostic::new(
                        Origin::new(
                            format!("revision {}", newest.short()).into(),
                            Pos::default(),
                        ),
                        format!("{PRUNE_PREFIX}{refusal}"),
                    )];
                    let revisions = self.store.revisions()?;
                    self.record_refusal(&newest, &diagnostics, revisions, now)?;
                    self.loading = false;
                    self.restore_last_applied()?;
                    let in_force = self.good.as_ref().map(|(r, _)| r.clone());
                    return Ok((in_force, Some((newest, diagnostics))));
                }
                // Changed in place: the fleet lent was the one in force.
                self.derived = self.lent.take().filter(|_| in_place).map(|r| Derived {
                    from: r.id,
                    in_place: true,
                });
                self.good = Some((newest.clone(), Arc::new(loaded.fleet)));
                return Ok((Some(newest), None));
            }
            self.record_refusal(&newest, &loaded.diagnostics, revisions, now)?;
            self.loading = false;
            self.restore_last_applied()?;
            let in_force = self.good.as_ref().map(|(r, _)| r.clone());
            return Ok((in_force, Some((newest, loaded.diagnostics))));
        }
        self.restore_last_applied()?;
        let in_force = self.good.as_ref().map(|(r, _)| r.clone());
        Ok((in_force, Some((newest, Vec::new()))))
    }

    fn record_refusal(
        &self,
        newest: &Revision,
        diagnostics: &[Diagnostic],
        mut revisions: Revisions,
        now: Timestamp,
    ) -> Result<(), ReconcileError> {
        let mut message: Vec<String> = diagnostics
            .iter()
            .take(KEPT_DIAGNOSTICS)
            .map(ToString::to_string)
            .collect();
        if diagnostics.len() > KEPT_DIAGNOSTICS {
            message.push(format!(
                "… and {} more",
                diagnostics.len() - KEPT_DIAGNOSTICS
            ));
        }
        if diagnostics.is_empty() {
            message.push("the fleet's files could not be read".to_string());
        }
        let message = message.join("\n");
        revisions.last_attempted = Some(newest.id.clone());
        revisions.last_error = Some(message.clone());
        revisions.loading = None;
        self.store.commit(&Batch {
            revisions: Some(revisions),
            audit: vec![AuditEntry {
                time: now,
                revision: newest.id.clone(),
                what: "refused".to_string(),
                subject: format!("revision {}", newest.short()),
                detail: message,
            }],
            ..Batch::default()
        })?;
        Ok(())
    }

    /// Requires commits signed by the keys of `policy` (`--require-signed`).
    pub fn with_signature_policy(mut self, policy: SignaturePolicy) -> Self {
        self.signatures = Some(policy);
        self
    }

    /// Sets how much one revision may cancel (`apply --allow-prune`, the
    /// loop's `--max-prune`).
    pub fn with_prune_policy(mut self, policy: PrunePolicy) -> Self {
        self.prune = policy;
        self
    }

    /// Prune protection for `new`, the fleet of `revision`, against the
    /// jobs running now and the fleet in force.
    fn check_prune(
        &mut self,
        new: &Fleet,
        revision: &str,
    ) -> Result<Result<(), PruneRefusal>, ReconcileError> {
        if self.lent.is_none() {
            self.restore_last_applied()?;
        }
        // The same names as a fleet that removed no running job, and the
        // same records: none removed now either (only removed running jobs
        // can be refused). A fleet changed in place from the one lent, each
        // job keeping its name, has that fleet's names.
        let same_names_as = self
            .lent
            .as_ref()
            .filter(|_| self.cache.jobs_changed_in_place().is_some())
            .map(|r| r.id.as_str());
        self.jobs.refresh_for(new, revision, same_names_as);
        let names = (self.jobs.generation(), self.store.job_writes());
        if self.none_pruned == Some(names) {
            return Ok(Ok(()));
        }
        // Kept: preparing takes them (one read an iteration at most).
        let running: Vec<&str> = mirrored(&mut self.mirror, &self.store)?
            .values()
            .filter(|r| r.phase == Phase::Running && r.stopping.is_none())
            .map(|r| r.job.as_str())
            .collect();
        // A fleet in force lent to the load: the jobs `new` may have
        // removed are those of its files that changed or went.
        let current: Box<dyn Iterator<Item = &Object<JobSpec>>> = match &self.good {
            Some((_, fleet)) => Box::new(fleet.jobs.iter()),
            None if self.lent.is_some() => Box::new(self.cache.retired_jobs()),
            None => Box::new(std::iter::empty()),
        };
        let index = &self.jobs;
        let removed_none = running.iter().all(|name| index.contains(name));
        let verdict = prune::check_by(
            &self.prune,
            current,
            new,
            |name| index.contains(name),
            &running,
        );
        self.none_pruned = removed_none.then_some(names);
        Ok(verdict)
    }

    /// Loads `revision` through the cache, lending it the fleet in force
    /// when nothing else holds it: a valid revision's fleet is then made by
    /// moving the documents of the unchanged files out of it rather than
    /// copying them. A fleet taken is out of `good` (its revision in
    /// `lent`) until the new one is adopted or [`Reconciler::take_back`]
    /// puts it back; one not taken (an invalid revision, a failed read) is
    /// back in force when this returns.
    fn load_lending(
        &mut self,
        revision: &Revision,
    ) -> Result<Option<(Loaded, LoadStats)>, ReconcileError> {
        let mut lent = None;
        let mut previous = None;
        if let Some((rev, fleet)) = self.good.take() {
            match Arc::try_unwrap(fleet) {
                Ok(fleet) => {
                    lent = Some(rev);
                    previous = Some(fleet);
                }
                Err(shared) => self.good = Some((rev, shared)),
            }
        }
        let loaded = self
            .source
            .load_reusing(revision, &mut self.cache, &mut previous);
        let adoptable = matches!(&loaded, Ok(Some((l, _))) if l.is_valid());
        match (lent, previous) {
            (Some(rev), Some(fleet)) => self.good = Some((rev, Arc::new(fleet))),
            (Some(rev), None) if adoptable => self.lent = Some(rev),
            // Not lent; or taken by a load that failed, which the cache
            // does not do (the last applied revision would be loaded again).
            _ => {}
        }
        Ok(loaded?)
    }

    /// Puts the fleet lent to the last load and taken back in force (its
    /// new revision is not adopted).
    fn take_back(&mut self) {
        if let Some(rev) = self.lent.take()
            && let Some(fleet) = self.cache.restore_previous()
        {
            self.good = Some((rev, Arc::new(fleet)));
        }
    }

    /// After a restart, the last applied revision is loaded again (Git only).
    fn restore_last_applied(&mut self) -> Result<(), ReconcileError> {
        if self.good.is_some() {
            return Ok(());
        }
        let Some(id) = self.store.revisions()?.last_applied else {
            return Ok(());
        };
        let Some(repo) = self.source.git() else {
            return Ok(());
        };
        let Ok(oid) = repo.resolve_oid(&id) else {
            return Ok(());
        };
        let content = repo
            .fleet_id_at(oid)
            .map_err(FetchError::from)?
            .map(|t| t.to_string())
            .unwrap_or_default();
        let revision = Revision { id, content };
        if let Some((loaded, _)) = self.source.load(&revision, &mut self.cache)?
            && loaded.is_valid()
        {
            self.good = Some((revision, Arc::new(loaded.fleet)));
        }
        Ok(())
    }

    /// The nodes of the last observation when it may stand in for a new
    /// one at `now`: plans may be re-used (the same switch), no job record
    /// was written since it was made, and the executor says it stands —
    /// asked after [`Executor::set_fleet`] with the fleet in force, which
    /// may be a new revision's: the executor answers `false` when the new
    /// fleet could change what it observes (the sim: other pools).
    fn standing_nodes(&self, now: Timestamp) -> Option<Arc<Vec<ObservedNode>>> {
        let seen = self.seen.as_ref()?;
        (self.reuse_plans
            && seen.writes == self.store.job_writes()
            && self.executor.observation_stands(now))
        .then(|| seen.nodes.clone())
    }

    /// Observes the fleet through the executor and records what it did.
    async fn observe(
        &mut self,
        fleet: &Fleet,
        specs: &Specs<'_>,
        now: Timestamp,
        records: &mut Records,
        none_gone: bool,
    ) -> Result<Observation, ReconcileError> {
        let running: Vec<JobView<'_>> = records
            .values()
            .filter(|r| r.phase == Phase::Running)
            .map(|r| {
                let spec = specs.get(r.job.as_str());
                JobView {
                    job: &r.job,
                    placement: &r.placement,
                    started: r.started,
                    stop: r.stopping.as_ref().map(|s| StopView {
                        kind: s.kind,
                        since: s.since,
                    }),
                    spec,
                    grace: fleet.grace_period_of(spec.map(|s| &s.spec)),
                }
            })
            .collect();
        // What the executor writes while observing (the sim's nodes) lands
        // with the records of the events it reports.
        self.store.hold_executor_writes();
        let observation = self.executor.observe(now, &running).await;
        let observation = match observation {
            Ok(observation) => observation,
            Err(e) => {
                self.store.release_executor_writes()?;
                return Err(e.into());
            }
        };
        drop(running);
        let events = &observation.events;
        let mut batch = Batch::default();
        let mut touched = BTreeSet::new();
        for event in events {
            touched.insert(event.job().to_string());
            touched.extend(apply_event(records, event, &mut batch.audit));
        }
        // Pending jobs gone from Git are forgotten, unless none can be
        // (and no event changed a record).
        if !(none_gone && events.is_empty()) {
            forget_gone(specs, records, &mut batch);
        }
        batch.jobs = touched
            .iter()
            .filter_map(|name| records.get(name).cloned())
            .collect();
        // Deferred: lost by a crash before the next durable commit, the
        // events are reported again (the records still say the jobs run).
        let committed = self.store.commit_deferred(&batch);
        self.store.release_executor_writes()?;
        committed?;
        Ok(observation)
    }

    /// The observed state the engine plans from (`specs`: the fleet's jobs).
    /// When the fleet in force has a `least-attained` queue, its `attained`
    /// map holds the recorded service of the runs that ended
    /// ([`JobRecord::attained`]) of every running or pending job.
    fn observed(
        &self,
        specs: Option<&Specs<'_>>,
        now: Timestamp,
        records: &Records,
        nodes: Vec<ObservedNode>,
    ) -> ObservedState {
        // Without `specs`, every pending record's job is in the fleet: the
        // others were just forgotten ([`forget_gone`]).
        let in_fleet = |job: &str| specs.is_none_or(|s| s.contains_key(job));
        let attained = self.fleet().is_some_and(|f| f.orders_by_attained_service());
        let mut state = ObservedState {
            time: Some(now),
            nodes,
            ..ObservedState::default()
        };
        for record in records.values() {
            if attained && record.attained > 0 {
                let active = match record.phase {
                    Phase::Running => true,
                    Phase::Pending => in_fleet(record.job.as_str()),
                    Phase::Succeeded | Phase::Failed | Phase::Stopped => false,
                };
                if active {
                    state.attained.insert(record.job.clone(), record.attained);
                }
            }
            match record.phase {
                Phase::Running => {
                    let preempting = record
                        .stopping
                        .as_ref()
                        .filter(|s| s.kind == StopKind::Preempt);
                    state.running.push(RunningJob {
                        job: record.job.clone(),
                        started: record.started.unwrap_or(record.first_seen),
                        placement: record.placement.clone(),
                        preempting_since: preempting.map(|s| s.since),
                        preempted_for: preempting.and_then(|s| s.for_job.clone()),
                        restart: record.restart.clone(),
                        spec_digest: record.spec_digest.clone(),
                    });
                }
                Phase::Pending if in_fleet(record.job.as_str()) => {
                    state.queued.push(QueuedJob {
                        job: record.job.clone(),
                        since: record.first_seen,
                        nominated: record.nominated.clone(),
                    });
                }
                Phase::Pending => {}
                Phase::Succeeded | Phase::Failed | Phase::Stopped => {
                    state.completed.push(CompletedJob {
                        job: record.job.clone(),
                        finished: record.finished.unwrap_or(now),
                        exit_code: record.exit_code,
                        reason: record.reason.clone(),
                    });
                }
            }
        }
        state
    }

    /// Records pending jobs as first seen now, with their reasons.
    /// `noted`: the pending jobs of a plan noted since the last write to
    /// the records (each recorded pending with that reason, or not pending).
    /// Returns whether it made a new record (a job seen pending the first
    /// time; the others it writes changed only their reason), and whether
    /// `noted` held the same jobs for the same reasons in the same order
    /// (nothing to note: each is recorded so).
    fn note_pending(
        &self,
        plan: &Plan,
        noted: Option<&[model::plan::Pending]>,
        now: Timestamp,
        records: &mut Records,
        revisions: Option<Revisions>,
    ) -> Result<(bool, bool), ReconcileError> {
        let mut batch = Batch {
            revisions,
            ..Batch::default()
        };
        // The jobs not noted so with their reason ([`noting::unnoted`]):
        // when they are few, each is looked up in the records (sorted) alone.
        let unnoted: Vec<&model::plan::Pending> = match noted {
            Some(noted) => noting::unnoted(&plan.pending, noted, UNNOTED_LOOKED_UP),
            None => Vec::new(),
        };
        if let Some(noted) = noted
            && unnoted.len() <= UNNOTED_LOOKED_UP
        {
            // The same jobs for the same reasons: every one is recorded so.
            let already = unnoted.is_empty() && noted.len() == plan.pending.len();
            for pending in unnoted {
                if let Some(record) = pending_record(records.get(&*pending.job), pending, now) {
                    batch.jobs.push(record);
                }
            }
            return Ok((self.commit_noted(batch, records)?, already));
        }
        // One hash look-up per pending job (a sorted map's took about half
        // a microsecond each: 50 ms for 100,000 pending jobs).
        let by_name: rustc_hash::FxHashMap<&str, &JobRecord> =
            records.iter().map(|(name, r)| (name.as_str(), r)).collect();
        for pending in &plan.pending {
            let record = by_name.get(&*pending.job).copied();
            if let Some(record) = pending_record(record, pending, now) {
                batch.jobs.push(record);
            }
        }
        drop(by_name);
        Ok((self.commit_noted(batch, records)?, false))
    }

    /// Commits the pending jobs noted in `batch` and keeps them in
    /// `records`; whether one of them is new.
    fn commit_noted(&self, batch: Batch, records: &mut Records) -> Result<bool, ReconcileError> {
        // Deferred: lost by a crash before the next durable commit (the
        // plan's intents, or the iteration's end), the jobs are noted again.
        self.store.commit_deferred(&batch)?;
        let mut new_records = false;
        for record in batch.jobs {
            new_records |= records.insert(record.job.clone(), record).is_none();
        }
        Ok(new_records)
    }

    /// Carries out a new plan's actions: those whose effect is not already
    /// under way are recorded as intended, all in one transaction, before
    /// the first is carried out ([`Reconciler::carry_out_all`]), unless the
    /// executor acts in the store only: then their intents are written
    /// only if carrying them out fails. Returns each action's result, in
    /// the plan's order.
    #[allow(clippy::too_many_arguments)] // the iteration's context, passed through
    async fn carry_out_plan(
        &mut self,
        fleet: &Fleet,
        specs: &Specs<'_>,
        records: &mut Records,
        nominations: &Nominations,
        actions: &[Action],
        revision: &str,
        now: Timestamp,
    ) -> Result<Vec<(ActionResult, bool)>, ReconcileError> {
        let mut results: Vec<Option<(ActionResult, bool)>> = Vec::with_capacity(actions.len());
        let mut intents = Vec::new();
        for action in actions {
            let record = action.job().and_then(|j| records.get(j));
            if underway(action, record, &self.executor) {
                results.push(Some((ActionResult::AlreadyUnderway, false)));
            } else {
                results.push(None);
                intents.push(IntentRef {
                    revision,
                    time: now,
                    action,
                });
            }
        }
        // Durable before the first action, unless the executor's actions
        // change nothing outside the store: then an action, its outcome and
        // the executor's values it changed land in the same commits (lost
        // together or kept together, the revision's commit at the end
        // puts all on disk), and an intent would be removed with its
        // outcome before any commit reaches the disk. Such intents are
        // written only for actions whose outcomes could not be recorded
        // ([`Reconciler::carry_out_all`]), as they would have been left.
        let ids = if self.executor.acts_in_store_only() {
            Vec::new()
        } else {
            self.store.record_intent_refs(&intents, true)?
        };
        let work: Vec<Work<'_>> = intents
            .iter()
            .enumerate()
            .map(|(k, intent)| Work {
                id: ids.get(k).copied(),
                revision,
                action: intent.action,
                time: now,
                check_underway: true,
            })
            .collect();
        // The last outcomes are deferred: the revision's commit, right
        // after, puts them on disk ([`Reconciler::apply`]).
        let mut done = self
            .carry_out_all(fleet, specs, records, nominations, &work, true)
            .await?
            .into_iter();
        Ok(results
            .into_iter()
            .map(|result| {
                result
                    .or_else(|| done.next())
                    .unwrap_or((ActionResult::AlreadyUnderway, false))
            })
            .collect())
    }

    /// Carries out actions recorded as intended, in order, and records their
    /// outcomes: the job records they changed, their audit lines, their
    /// intents marked done and the executor values they changed (held by
    /// the store until then) land together, [`Reconciler::with_outcome_batch`]
    /// actions (or [`OUTCOME_WINDOW`]) a transaction. With `defer_last`,
    /// the last of those transactions is deferred ([`Store::commit_deferred`]):
    /// the caller's next commit, durable, puts it on disk.
    async fn carry_out_all(
        &mut self,
        fleet: &Fleet,
        specs: &Specs<'_>,
        records: &mut Records,
        nominations: &Nominations,
        work: &[Work<'_>],
        defer_last: bool,
    ) -> Result<Vec<(ActionResult, bool)>, ReconcileError> {
        if work.is_empty() {
            return Ok(Vec::new());
        }
        self.store.hold_executor_writes();
        // Outcome batches before the last are durable, unless the
        // executor acts in the store only (nothing outside to match).
        let in_store = self.executor.acts_in_store_only();
        let mut outcomes = Outcomes::new(self.outcome_batch);
        let mut results = Vec::with_capacity(work.len());
        let mut carried: Result<(), ReconcileError> = Ok(());
        // How many of `work` have their outcomes committed.
        let mut recorded = 0;
        for (k, item) in work.iter().enumerate() {
            results.push(
                self.carry_out(fleet, specs, records, nominations, item, &mut outcomes)
                    .await,
            );
            if outcomes.due() {
                // The executor's values of these actions, with their outcomes.
                carried = self
                    .executor
                    .flush()
                    .map_err(ReconcileError::from)
                    .and_then(|()| Ok(outcomes.commit(&self.store, in_store)?));
                if carried.is_err() {
                    break;
                }
                recorded = k + 1;
            }
        }
        if carried.is_ok() {
            carried = self
                .executor
                .flush()
                .map_err(ReconcileError::from)
                .and_then(|()| Ok(outcomes.commit(&self.store, defer_last)?));
        }
        // Failed: the intents not written up front (an executor acting in
        // the store only) of the actions without a recorded outcome are
        // written now, deferred, as they would have been left.
        let unwritten: Vec<IntentRef<'_>> = work[recorded..]
            .iter()
            .filter(|w| carried.is_err() && w.id.is_none())
            .map(|w| IntentRef {
                revision: w.revision,
                time: w.time,
                action: w.action,
            })
            .collect();
        let intended = self.store.record_intent_refs(&unwritten, false);
        // Whatever the executor wrote and no outcome took along (an
        // iteration that failed) is written now, as it was before batching.
        let flushed = self.executor.flush();
        let released = self.store.release_executor_writes();
        carried?;
        intended?;
        flushed?;
        released?;
        Ok(results)
    }

    /// Carries out one action recorded as intended and adds its outcome to
    /// `outcomes` and to `records`.
    async fn carry_out(
        &mut self,
        fleet: &Fleet,
        specs: &Specs<'_>,
        records: &mut Records,
        nominations: &Nominations,
        work: &Work<'_>,
        outcomes: &mut Outcomes,
    ) -> (ActionResult, bool) {
        let Work {
            id,
            revision,
            action,
            time: now,
            check_underway,
        } = *work;
        let record = action.job().and_then(|j| records.get(j));
        if check_underway && underway(action, record, &self.executor) {
            // An earlier action of the same plan got there first.
            outcomes.add(id);
            return (ActionResult::AlreadyUnderway, false);
        }
        let spec = action.job().and_then(|j| specs.get(j));
        let attempt = record.map(|r| format!("{}#{}", r.first_seen.to_rfc3339(), r.preemptions));
        let ctx = ActionContext {
            spec,
            attempt,
            grace: fleet.grace_period_of(spec.map(|s| &s.spec)),
            revision,
        };
        let outcome = self.executor.execute(action, &ctx, now).await;
        outcomes.add(id);
        let transient = outcome.as_ref().is_err_and(ExecError::is_transient);
        let result = match outcome {
            Ok(outcome) => {
                let changed = record_action(records, nominations, action, outcome, revision, now);
                if let (Action::Place { job, .. }, Some(spec)) = (action, spec)
                    && let Some(record) = records.get_mut(job)
                {
                    record.restart = spec.restart_token().map(str::to_string);
                    record.spec_digest = Some(spec.spec.runtime_digest());
                }
                for name in changed {
                    if let Some(record) = records.get(&name) {
                        outcomes.jobs.insert(name, record.clone());
                    }
                }
                outcomes.audit.push(audit_of(action, revision, now, ""));
                ActionResult::Applied(outcome)
            }
            Err(e) => {
                let message = e.to_string();
                outcomes.audit.push(audit_of(
                    action,
                    revision,
                    now,
                    &format!("failed: {message}"),
                ));
                ActionResult::Failed(message)
            }
        };
        (result, transient)
    }
}

/// An action recorded as intended, to carry out.
#[derive(Debug, Clone, Copy)]
struct Work<'a> {
    /// Its intent's id (`None`: not written, [`Reconciler::carry_out_plan`]).
    id: Option<u64>,
    /// The revision whose plan asked for it.
    revision: &'a str,
    action: &'a Action,
    /// The reconciler's clock when it was planned.
    time: Timestamp,
    /// Skipped when its effect is under way by the time it comes (a new
    /// plan's action); an intent a crash left is carried out regardless.
    check_underway: bool,
}

/// Outcomes of actions carried out and not yet recorded: committed together
/// (with the executor's held writes) when [`Outcomes::due`], and at the end.
#[derive(Debug)]
struct Outcomes {
    /// Job records changed, by name (the newest wins).
    jobs: BTreeMap<String, JobRecord>,
    audit: Vec<AuditEntry>,
    /// Intents to mark done.
    done: Vec<u64>,
    /// Actions carried out since the last commit (with or without an intent).
    actions: usize,
    /// At most this many actions a transaction.
    limit: usize,
    /// The last commit (or the start).
    since: std::time::Instant,
}

impl Outcomes {
    fn new(limit: usize) -> Self {
        Outcomes {
            jobs: BTreeMap::new(),
            audit: Vec::new(),
            done: Vec::new(),
            actions: 0,
            limit,
            since: std::time::Instant::now(),
        }
    }

    /// Whether to commit now: `limit` actions, or [`OUTCOME_WINDOW`] since
    /// the last commit.
    fn due(&self) -> bool {
        self.actions >= self.limit || (self.actions > 0 && self.since.elapsed() >= OUTCOME_WINDOW)
    }

    /// Counts an action carried out, whose intent (if written) is done.
    fn add(&mut self, intent: Option<u64>) {
        self.done.extend(intent);
        self.actions += 1;
    }

    /// Records the outcomes so far in one transaction, durable or deferred.
    fn commit(&mut self, store: &Store, deferred: bool) -> Result<(), StateError> {
        let batch = Batch {
            jobs: std::mem::take(&mut self.jobs).into_values().collect(),
            audit: std::mem::take(&mut self.audit),
            done_intents: std::mem::take(&mut self.done),
            ..Batch::default()
        };
        self.actions = 0;
        if deferred {
            store.commit_deferred(&batch)?;
        } else {
            store.commit(&batch)?;
        }
        self.since = std::time::Instant::now();
        Ok(())
    }
}

/// Whether `newest` has the fleet content of `good` (a non-empty tree id).
fn rev_content_eq(good: Option<&Revision>, newest: &Revision) -> bool {
    good.is_some_and(|r| r.content == newest.content && !r.content.is_empty())
}

/// Whether the action's effect is already under way, so it is not repeated.
fn underway(action: &Action, record: Option<&JobRecord>, executor: &impl Executor) -> bool {
    let stopping = record.and_then(|r| r.stopping.as_ref()).map(|s| s.kind);
    match action {
        Action::Preempt { .. } => stopping.is_some(),
        Action::Terminate { .. } | Action::Cancel { .. } => {
            stopping.is_some() || record.is_some_and(|r| r.phase != Phase::Running)
        }
        Action::Place { .. } => record.is_some_and(|r| r.phase == Phase::Running),
        Action::Scale { .. } | Action::Drain { .. } => executor.already_done(action),
    }
}

fn audit_of(action: &Action, revision: &str, now: Timestamp, extra: &str) -> AuditEntry {
    let subject = action.target().to_string();
    let detail = action.describe(model::plan::Wording::Audit);
    let detail = if extra.is_empty() {
        detail
    } else {
        format!("{detail}; {extra}")
    };
    AuditEntry {
        time: now,
        revision: revision.to_string(),
        what: action.kind().to_string(),
        subject,
        detail,
    }
}

/// Updates the job records for an action carried out; returns the jobs changed.
fn record_action(
    records: &mut Records,
    nominations: &Nominations,
    action: &Action,
    outcome: Outcome,
    revision: &str,
    now: Timestamp,
) -> Vec<String> {
    match action {
        Action::Place { job, placement, .. } => {
            let record = records
                .entry(job.clone())
                .or_insert_with(|| JobRecord::new_pending(job, now));
            record.phase = Phase::Running;
            record.started = Some(now);
            record.placement = placement.clone();
            record.nominated.clear();
            record.stopping = None;
            record.reason = None;
            record.revision = Some(revision.to_string());
            let mut changed = vec![job.clone()];
            // GPUs nominated for another job that the plan gave this one
            // (it could not use them) are no longer nominated for it. (None
            // nominated, as in a burst: no node name copied to look up.)
            for part in placement.iter().filter(|_| !nominations.is_empty()) {
                for gpu in &part.gpus {
                    let Some(other) = nominations.get(&(part.node.clone(), *gpu)) else {
                        continue;
                    };
                    if other == job {
                        continue;
                    }
                    if let Some(r) = records.get_mut(other) {
                        for held in &mut r.nominated {
                            if held.node == part.node {
                                held.gpus.retain(|g| g != gpu);
                            }
                        }
                        r.nominated.retain(|held| !held.gpus.is_empty());
                        if !changed.contains(other) {
                            changed.push(other.clone());
                        }
                    }
                }
            }
            changed
        }
        Action::Preempt {
            job,
            for_job,
            reason,
        } => stop(
            records,
            job,
            LastStop {
                kind: StopKind::Preempt,
                at: now,
                revision: revision.to_string(),
                for_job: Some(for_job.clone()),
                reason: reason.clone(),
            },
            outcome,
        ),
        Action::Terminate { job, reason } | Action::Cancel { job, reason } => stop(
            records,
            job,
            LastStop {
                kind: if matches!(action, Action::Terminate { .. }) {
                    StopKind::Terminate
                } else {
                    StopKind::Cancel
                },
                at: now,
                revision: revision.to_string(),
                for_job: None,
                reason: reason.clone(),
            },
            outcome,
        ),
        Action::Scale { .. } | Action::Drain { .. } => Vec::new(),
    }
}

/// Records a stop the plan asked for (and, when the executor reports it
/// done at once, its end).
fn stop(records: &mut Records, job: &str, story: LastStop, outcome: Outcome) -> Vec<String> {
    let Some(record) = records.get_mut(job) else {
        return Vec::new();
    };
    let now = story.at;
    record.stopping = Some(Stopping {
        kind: story.kind,
        since: now,
        for_job: story.for_job.clone(),
    });
    record.revision = Some(story.revision.clone());
    if story.kind == StopKind::Preempt {
        record.preemptions += 1;
    }
    record.last_stop = Some(story);
    let mut changed = vec![job.to_string()];
    if outcome == Outcome::Done {
        let mut audit = Vec::new();
        let event = Event::Stopped {
            job: job.to_string(),
            at: now,
        };
        changed.extend(apply_event(records, &event, &mut audit));
    }
    changed
}

/// Updates the records for an event; returns the jobs changed (besides the event's own).
fn apply_event(records: &mut Records, event: &Event, audit: &mut Vec<AuditEntry>) -> Vec<String> {
    let mut also = Vec::new();
    let Some(record) = records.get_mut(event.job()) else {
        return also;
    };
    match event {
        Event::Exited { at, exit_code, .. } => {
            record.phase = match exit_code {
                Some(0) => Phase::Succeeded,
                _ => Phase::Failed,
            };
            record.finished = Some(*at);
            record.exit_code = *exit_code;
            record.reason = Some(match exit_code {
                Some(0) => "succeeded".to_string(),
                Some(code) => format!("failed: exit code {code}"),
                None => "failed: exit code unknown".to_string(),
            });
            record.placement.clear();
            record.stopping = None;
            // Ended: its attained service goes with it.
            record.attained = 0;
            audit.push(fleet_event(*at, record.phase.as_str(), record));
        }
        Event::Stopped { at, .. } => {
            let stopping = record.stopping.take();
            let preempted = stopping.as_ref().map(|s| s.kind) == Some(StopKind::Preempt);
            // A preempted job keeps the service it attained; one that
            // ended drops it.
            if preempted {
                record.end_run(*at);
            } else {
                record.attained = 0;
            }
            let freed: Vec<NodeGpus> = std::mem::take(&mut record.placement);
            match stopping.as_ref().map(|s| s.kind) {
                Some(StopKind::Preempt) => {
                    // Pending again, as a job seen now; its GPUs go to the
                    // job it was preempted for.
                    record.phase = Phase::Pending;
                    record.first_seen = *at;
                    record.started = None;
                    let for_job = stopping.and_then(|s| s.for_job);
                    record.reason = for_job.as_ref().map(|f| format!("preempted for {f}"));
                    audit.push(fleet_event(*at, "stopped", record));
                    if let Some(for_job) = for_job
                        && let Some(target) = records.get_mut(&for_job)
                        && target.phase == Phase::Pending
                    {
                        target.nominated.extend(freed);
                        also.push(for_job);
                    }
                }
                kind => {
                    record.phase = Phase::Stopped;
                    record.finished = Some(*at);
                    record.reason = Some(
                        match kind {
                            Some(StopKind::Terminate) => "time limit exceeded",
                            Some(StopKind::Cancel) => "removed from Git",
                            _ => "stopped",
                        }
                        .to_string(),
                    );
                    audit.push(fleet_event(*at, "stopped", record));
                }
            }
        }
    }
    also
}

/// An audit line for something the fleet did (no revision caused it).
fn fleet_event(at: Timestamp, what: &str, record: &JobRecord) -> AuditEntry {
    AuditEntry {
        time: at,
        revision: String::new(),
        what: what.to_string(),
        subject: record.job.clone(),
        detail: record.reason.clone().unwrap_or_default(),
    }
}
