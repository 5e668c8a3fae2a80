//! Which stopping runs' GPUs one job may take ([`Engine::claimable`]),
//! asked for many runs at once.

use super::Engine;
use super::ids::{JobId, ModelId, QueueId, RunId};

/// The kept runs of one model (`Engine::kept_runs`) grouped by whose they
/// are: every run of a group gets the same answer from
/// [`Engine::claimable`] for a given job (built once per plan, when the
/// stopping runs are indexed: who a kept run is kept for does not change
/// during the plan).
#[derive(Debug, Default)]
pub(crate) struct KeptGroups {
    groups: Vec<Group>,
    /// The queues some group's preemptor has a limit in (each group's
    /// `limited` points here): the only ones [`Keeps`] reads.
    queues: Vec<QueueId>,
    /// How many preemptor classes the groups fall in ([`Group::class`]:
    /// leaf queue, GPUs and, while held, the GPUs held per limited queue).
    classes: usize,
}

/// Kept runs of one owner: each run's place in its model's kept runs, and
/// the run; for a preemptor, what [`Keeps::keeps`] reads of it (fixed for
/// the plan).
#[derive(Debug)]
struct Group {
    owner: Kept,
    runs: Vec<(u32, RunId)>,
    /// The preemptor's leaf queue and GPUs.
    leaf: Option<QueueId>,
    gpus: u64,
    /// The queues with a limit on the model on the path of its leaf (by
    /// their place in [`KeptGroups::queues`]), each with what its stopping
    /// runs held for it hold there ([`Engine::held_by`]: counted while they
    /// are held for it).
    limited: Vec<(u32, u64)>,
    /// Whether stopping runs are held for it at all.
    holds: bool,
    /// Its preemptor's classes, while none of its runs are held for it and
    /// while they are: groups of one leaf queue and GPU count (and, while
    /// held, the same GPUs held in each queue of `limited`) get the same
    /// [`Keeps::keeps`].
    class: [u32; 2],
}

/// Whom a group's runs are kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kept {
    /// Restarting: for its own job (if any) alone.
    Restart(Option<JobId>),
    /// For their preemptor.
    For(JobId),
}

impl KeptGroups {
    /// The groups of `kept` (one model's kept runs, in their order).
    pub(crate) fn of(e: &Engine, kept: &[RunId]) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        let mut at: rustc_hash::FxHashMap<Kept, usize> = rustc_hash::FxHashMap::default();
        for (k, &r) in kept.iter().enumerate() {
            let run = &e.runs[r as usize];
            let owner = if run.restarting() {
                Kept::Restart(run.job)
            } else {
                match run.kept_for {
                    Some(p) => Kept::For(p),
                    // Not a kept run: never listed (kept runs restart or
                    // have a preemptor).
                    None => continue,
                }
            };
            let g = *at.entry(owner).or_insert_with(|| {
                groups.push(Group {
                    owner,
                    runs: Vec::new(),
                    leaf: None,
                    gpus: 0,
                    limited: Vec::new(),
                    holds: false,
                    class: [0, 0],
                });
                groups.len() - 1
            });
            groups[g].runs.push((k as u32, r));
        }
        let mut limited: Vec<Vec<(QueueId, u64)>> = Vec::with_capacity(groups.len());
        for g in &mut groups {
            let mut on_path = Vec::new();
            if let Kept::For(p) = g.owner
                && let Some(m) = g.runs.first().and_then(|(_, r)| e.runs[*r as usize].model)
            {
                let job = &e.jobs[p as usize];
                let own = e.held_by_kept(p, m);
                g.leaf = job.queue;
                g.gpus = job.gpus;
                g.holds = own.is_some();
                on_path = job.queue.map_or_else(Vec::new, |leaf| {
                    e.tree
                        .path(leaf)
                        .filter(|q| e.tree.limit(*q, m).is_some())
                        .map(|q| {
                            let held = own
                                .as_deref()
                                .and_then(|h| h.iter().find(|(k, _)| *k == q))
                                .map_or(0, |(_, n)| *n);
                            (q, held)
                        })
                        .collect()
                });
            }
            limited.push(on_path);
        }
        let mut queues: Vec<QueueId> = limited.iter().flatten().map(|(q, _)| *q).collect();
        queues.sort_unstable();
        queues.dedup();
        type ClassKey = (Option<QueueId>, u64, Vec<u64>);
        let mut classes: rustc_hash::FxHashMap<ClassKey, u32> = rustc_hash::FxHashMap::default();
        for (g, on_path) in groups.iter_mut().zip(limited) {
            let mut class_of = |owns: Vec<u64>| {
                let next = classes.len() as u32;
                *classes.entry((g.leaf, g.gpus, owns)).or_insert(next)
            };
            let unheld = class_of(vec![0; on_path.len()]);
            let held = class_of(on_path.iter().map(|(_, held)| *held).collect());
            g.class = [unheld, held];
            g.limited = on_path
                .into_iter()
                .filter_map(|(q, held)| {
                    let at = queues.binary_search(&q).ok()?;
                    Some((at as u32, held))
                })
                .collect();
        }
        KeptGroups {
            groups,
            queues,
            classes: classes.len(),
        }
    }

    /// Per run of `kept` (the runs these groups were made of, in order):
    /// whether job `j` may claim it once free and it still holds GPUs on a
    /// schedulable node ([`Engine::still_stopping`] and
    /// [`Engine::claimable`]), each group's owner asked once.
    pub(crate) fn claims(
        &self,
        e: &Engine,
        j: JobId,
        m: ModelId,
        kept: &[RunId],
    ) -> Vec<(RunId, bool)> {
        let mut runs: Vec<(RunId, bool)> = kept.iter().map(|&r| (r, false)).collect();
        let keeps = Keeps::new(e, j, m, &self.queues);
        // Per class: unknown (0), keeps (1), does not (2).
        let mut by_class = vec![0u8; self.classes];
        let mut keeps_of = |p: JobId, g: &Group| -> bool {
            let held = g.holds && e.held_for.contains_key(&p);
            let known = &mut by_class[g.class[usize::from(held)] as usize];
            if *known == 0 {
                *known = if keeps.keeps(e, g, held) { 1 } else { 2 };
            }
            keeps.check(e, p, *known == 1)
        };
        for g in &self.groups {
            let may = match g.owner {
                Kept::Restart(job) => job == Some(j),
                Kept::For(p) => {
                    p == j || e.decided[p as usize] || !e.pending_now[p as usize] || !keeps_of(p, g)
                }
            };
            if may {
                for &(k, r) in &g.runs {
                    if e.still_stopping(r) {
                        runs[k as usize].1 = true;
                    }
                }
            }
        }
        runs
    }
}

/// [`Engine::keeps_from`] of job `j` on model `m` (not `free`), for many
/// pending jobs `p`: what it reads of the queue tree and of `j`, found
/// once.
struct Keeps {
    #[cfg(debug_assertions)]
    j: JobId,
    m: ModelId,
    /// Per queue of [`KeptGroups::queues`]: its limit on `m`, and the GPUs
    /// counted against it (usage, held, and what `j`'s stopping runs hold
    /// in it).
    limits: Vec<Option<(u64, u64)>>,
    /// Whether `j` is within its queue's guarantee.
    asking_within: bool,
    #[cfg(debug_assertions)]
    asking_held: Vec<(QueueId, u64)>,
}

impl Keeps {
    /// What job `j` on model `m` reads of `queues` (those the groups'
    /// preemptors have limits in: a few, where the tree may have
    /// hundreds).
    fn new(e: &Engine, j: JobId, m: ModelId, queues: &[QueueId]) -> Self {
        let asking_held = e.held_by(j, m);
        let tree = &e.tree;
        let limits = queues
            .iter()
            .map(|&q| {
                let limit = tree.limit(q, m)?;
                let asking = asking_held
                    .iter()
                    .find(|(k, _)| *k == q)
                    .map_or(0, |(_, n)| *n);
                Some((limit, tree.usage(q, m) + tree.held(q, m) + asking))
            })
            .collect();
        let aj = &e.jobs[j as usize];
        let asking_within = aj
            .queue
            .is_some_and(|aq| tree.usage(aq, m) + aj.gpus <= tree.guaranteed(aq, m));
        Self {
            #[cfg(debug_assertions)]
            j,
            m,
            limits,
            asking_within,
            #[cfg(debug_assertions)]
            asking_held,
        }
    }

    /// Whether the pending preemptor of group `g` keeps its runs from the
    /// asking job: it fits the limits on its path, not counting its own
    /// stopping runs while they are `held` for it, and does not borrow
    /// against the asking job's guarantee. The same for every group of
    /// `g`'s class (`held` or not).
    fn keeps(&self, e: &Engine, g: &Group, held: bool) -> bool {
        let Some(pq) = g.leaf else {
            return false;
        };
        let fits = g.limited.iter().all(|&(at, own)| {
            let Some((limit, used)) = self.limits[at as usize] else {
                return true;
            };
            used.saturating_sub(if held { own } else { 0 }) + g.gpus <= limit
        });
        let m = self.m;
        fits && !(self.asking_within && e.tree.usage(pq, m) + g.gpus > e.tree.guaranteed(pq, m))
    }

    /// `keeps`, which debug builds check is `e.keeps_from(p, m, j, false, ..)`.
    fn check(&self, e: &Engine, p: JobId, keeps: bool) -> bool {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            keeps,
            e.keeps_from(p, self.m, self.j, false, &self.asking_held),
            "a grouped keeps differs"
        );
        let _ = (e, p);
        keeps
    }
}

/// What a job's claims on the kept runs of model `m` depend on: the job itself when it
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
