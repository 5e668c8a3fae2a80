//! Which stopping runs' GPUs one job may take ([`Engine::claimable`]),
//! asked for many runs at once.

use rustc_hash::FxHashMap as HashMap;

use super::Engine;
use super::ids::{JobId, ModelId, QueueId, RunId};

/// [`Engine::claimable`] for job `j` and the kept runs of one model: what
/// `j`'s own stopping runs hold is found once, and whether a preemptor
/// keeps its GPUs from `j` once per preemptor (its runs' answers depend on
/// nothing else).
pub(crate) struct Claims {
    j: JobId,
    m: ModelId,
    asking_held: Vec<(QueueId, u64)>,
    kept_from: HashMap<JobId, bool>,
}

impl Claims {
    /// Claims of job `j` on the runs of model `m`.
    pub(crate) fn new(e: &Engine, j: JobId, m: ModelId) -> Self {
        Self {
            j,
            m,
            asking_held: e.held_by(j, m),
            kept_from: HashMap::default(),
        }
    }

    /// Whether run `r` (of model `m`) may give its GPUs to `j` once free.
    pub(crate) fn may(&mut self, e: &Engine, r: RunId) -> bool {
        let j = self.j;
        let run = &e.runs[r as usize];
        debug_assert_eq!(run.model, Some(self.m));
        let may = match (run.restarting(), run.kept_for, run.model) {
            (true, _, _) => run.job == Some(j),
            (false, Some(p), Some(m)) => {
                p == j
                    || e.decided[p as usize]
                    || !e.pending_now[p as usize]
                    || !*self
                        .kept_from
                        .entry(p)
                        .or_insert_with(|| e.keeps_from(p, m, j, false, &self.asking_held))
            }
            (false, _, _) => true,
        };
        debug_assert_eq!(may, e.claimable(r, j), "a kept run's claim differs");
        may
    }
}

/// What [`Claims`] of a job on model `m` depend on: the job itself when it
/// has stopping runs of its own (kept for it, restarting for it or held
/// for it), otherwise only whether it is within its queue's guarantee
/// ([`Engine::keeps`]); and the epochs of the cluster, of the queue tree
/// and of the claims ([`Engine::claims_epoch`]). Answers found at one key
/// hold for every job with that key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharedKey {
    m: ModelId,
    who: Who,
    epochs: (u64, u64, u64),
}

/// Whose claims a [`SharedKey`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// One job's, with stopping runs of its own.
    Own(JobId),
    /// Any job's with none, within its guarantee or not.
    Shared { within: bool },
}

impl SharedKey {
    /// The key of job `j` on model `m`.
    pub(crate) fn of(e: &Engine, j: JobId, m: ModelId) -> Self {
        let own =
            e.claim_owners.get(j as usize).copied().unwrap_or(true) || e.held_for.contains_key(&j);
        let who = if own {
            Who::Own(j)
        } else {
            let job = &e.jobs[j as usize];
            let within = job
                .queue
                .is_some_and(|q| e.tree.usage(q, m) + job.gpus <= e.tree.guaranteed(q, m));
            Who::Shared { within }
        };
        Self {
            m,
            who,
            epochs: (e.cluster.epoch, e.tree.epoch, e.claims_epoch),
        }
    }

    /// Whether answers found at `other` may still be kept beside this one's:
    /// found at the same epochs.
    pub(crate) fn same_epochs(&self, other: &Self) -> bool {
        self.epochs == other.epochs
    }
}

/// Answers found per [`SharedKey`], those of the latest epochs only.
#[derive(Debug)]
pub(crate) struct SharedMemo<T>(Vec<(SharedKey, T)>);

impl<T> Default for SharedMemo<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> SharedMemo<T> {
    /// The answer found at `key`, if any.
    pub(crate) fn get(&self, key: &SharedKey) -> Option<&T> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Keeps `value` for `key`, dropping answers of older epochs.
    pub(crate) fn insert(&mut self, key: SharedKey, value: T) {
        self.0.retain(|(k, _)| k.same_epochs(&key) && *k != key);
        self.0.push((key, value));
    }
}
