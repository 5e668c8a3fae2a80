//! The queue tree: guarantees, limits, usage per model, and fair shares.

use rustc_hash::FxHashMap as HashMap;

use model::spec::{Object, QueueOrdering, QueueSpec};

use super::ids::{ModelId, Models, QueueId};

/// One queue of the tree.
#[derive(Debug, Clone)]
pub struct QueueNode {
    /// Queue name.
    /// (Shared: every pending job of the queue names it in the plan.)
    pub name: std::sync::Arc<str>,
    /// Parent queue.
    pub parent: Option<QueueId>,
    /// Child queues, by name.
    pub children: Vec<QueueId>,
    /// Fair-share weight among siblings.
    pub weight: u32,
    /// Guaranteed GPUs per model.
    pub guaranteed: Vec<u64>,
    /// Cap per model (`None`: no cap).
    pub limit: Vec<Option<u64>>,
    /// GPUs charged now per model (this queue and its descendants): running
    /// jobs plus jobs this plan places or lets wait.
    pub usage: Vec<u64>,
    /// GPUs held by running jobs per model (this queue and its descendants):
    /// what decides whether a queue is borrowing when choosing victims.
    pub running: Vec<u64>,
    /// GPUs held by stopping jobs per model (this queue and its
    /// descendants) that still count against `limit`: a job in its grace
    /// period holds its GPUs until the executor reports it gone.
    pub held: Vec<u64>,
    /// The order of its pending jobs: its own `ordering`, else its
    /// nearest ancestor's, else fifo.
    pub ordering: QueueOrdering,
}

/// The binding quota constraint for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaBlock {
    /// The queue whose limit binds.
    pub queue: QueueId,
    /// GPUs requested.
    pub requested: u64,
    /// GPUs left under the limit.
    pub left: u64,
    /// The limit.
    pub limit: u64,
}

/// All queues, sorted by name, with roots listed separately.
#[derive(Debug, Clone, Default)]
pub struct QueueTree {
    /// Queues by id (name order).
    pub queues: Vec<QueueNode>,
    /// Top-level queues, by name.
    pub roots: Vec<QueueId>,
    by_name: HashMap<String, QueueId>,
    /// Bumped on every change of usage: answers computed at the same epoch
    /// still hold.
    pub epoch: u64,
}

impl QueueTree {
    /// Builds the tree. Specs are assumed valid (no cycles, parents exist);
    /// a queue with an unknown parent is treated as a root.
    pub fn new(specs: &[Object<QueueSpec>], models: &mut Models) -> Self {
        let mut sorted: Vec<&Object<QueueSpec>> = specs.iter().collect();
        sorted.sort_by(|a, b| a.name().cmp(b.name()));
        sorted.dedup_by(|a, b| a.name() == b.name());
        for q in &sorted {
            for quota in &q.spec.quota {
                models.intern(&quota.model);
            }
        }
        let model_count = models.len();
        let by_name: HashMap<String, QueueId> = sorted
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name().to_string(), i as QueueId))
            .collect();
        let mut queues: Vec<QueueNode> = sorted
            .iter()
            .map(|q| {
                let mut guaranteed = vec![0; model_count];
                let mut limit = vec![None; model_count];
                for quota in &q.spec.quota {
                    if let Some(m) = models.get(&quota.model) {
                        guaranteed[m as usize] = u64::from(quota.guaranteed);
                        limit[m as usize] = quota.limit.map(u64::from);
                    }
                }
                QueueNode {
                    name: q.name().into(),
                    parent: q
                        .spec
                        .parent
                        .as_deref()
                        .and_then(|p| by_name.get(p).copied()),
                    children: Vec::new(),
                    weight: q.spec.weight.max(1),
                    guaranteed,
                    limit,
                    usage: vec![0; model_count],
                    running: vec![0; model_count],
                    held: vec![0; model_count],
                    ordering: QueueOrdering::Fifo,
                }
            })
            .collect();
        // Break cycles defensively: a queue on a cycle becomes a root.
        for id in 0..queues.len() {
            let mut seen = 0;
            let mut cur = queues[id].parent;
            while let Some(p) = cur {
                seen += 1;
                if p as usize == id || seen > queues.len() {
                    queues[id].parent = None;
                    break;
                }
                cur = queues[p as usize].parent;
            }
        }
        // Ordering is inherited down the tree (parents are acyclic now).
        for id in 0..queues.len() {
            let mut cur = Some(id as QueueId);
            while let Some(q) = cur {
                if let Some(ordering) = sorted[q as usize].spec.ordering {
                    queues[id].ordering = ordering;
                    break;
                }
                cur = queues[q as usize].parent;
            }
        }
        let mut roots = Vec::new();
        for id in 0..queues.len() {
            match queues[id].parent {
                Some(p) => queues[p as usize].children.push(id as QueueId),
                None => roots.push(id as QueueId),
            }
        }
        QueueTree {
            queues,
            roots,
            by_name,
            epoch: 0,
        }
    }

    /// The queue called `name`.
    pub fn id(&self, name: &str) -> Option<QueueId> {
        self.by_name.get(name).copied()
    }

    /// The queue with id `id`.
    pub fn get(&self, id: QueueId) -> &QueueNode {
        &self.queues[id as usize]
    }

    /// Whether `id` has no children.
    pub fn is_leaf(&self, id: QueueId) -> bool {
        self.queues[id as usize].children.is_empty()
    }

    /// `leaf` and its ancestors, leaf first.
    pub fn path(&self, leaf: QueueId) -> impl Iterator<Item = QueueId> + '_ {
        std::iter::successors(Some(leaf), |q| self.queues[*q as usize].parent)
    }

    /// Whether `gpus` more of `model` fit every limit on the path of `leaf`;
    /// otherwise the tightest limit.
    pub fn fits(&self, leaf: QueueId, model: ModelId, gpus: u64) -> Result<(), QuotaBlock> {
        let m = model as usize;
        let mut worst: Option<QuotaBlock> = None;
        for q in self.path(leaf) {
            let node = &self.queues[q as usize];
            let Some(limit) = node.limit.get(m).copied().flatten() else {
                continue;
            };
            let used =
                node.usage.get(m).copied().unwrap_or(0) + node.held.get(m).copied().unwrap_or(0);
            if used + gpus > limit {
                let left = limit.saturating_sub(used);
                if worst.as_ref().is_none_or(|w| left < w.left) {
                    worst = Some(QuotaBlock {
                        queue: q,
                        requested: gpus,
                        left,
                        limit,
                    });
                }
            }
        }
        worst.map_or(Ok(()), Err)
    }

    /// Whether `gpus` more of `model` fit every limit on the path of `leaf`
    /// with `released[i]` GPUs of usage taken off the path's `i`-th queue
    /// (the leaf is 0) and every queue above it: the usage of running jobs
    /// whose queues meet the path there. The tree is left as it is.
    pub fn fits_releasing(
        &self,
        leaf: QueueId,
        model: ModelId,
        gpus: u64,
        released: &[u64],
    ) -> bool {
        let m = model as usize;
        let mut off = 0;
        for (i, q) in self.path(leaf).enumerate() {
            off += released.get(i).copied().unwrap_or(0);
            let node = &self.queues[q as usize];
            let Some(limit) = node.limit.get(m).copied().flatten() else {
                continue;
            };
            let usage = node.usage.get(m).copied().unwrap_or(0).saturating_sub(off);
            if usage + node.held.get(m).copied().unwrap_or(0) + gpus > limit {
                return false;
            }
        }
        true
    }

    /// Charges (`add`) or releases usage along the path of `leaf`.
    pub fn charge(&mut self, leaf: QueueId, model: ModelId, gpus: u64, add: bool) {
        self.along_path(leaf, model, gpus, add, |node| &mut node.usage);
    }

    /// Charges (`add`) or releases GPUs held by running jobs along the path
    /// of `leaf`; the caller charges `usage` separately.
    pub fn charge_running(&mut self, leaf: QueueId, model: ModelId, gpus: u64, add: bool) {
        self.along_path(leaf, model, gpus, add, |node| &mut node.running);
    }

    /// Charges (`add`) or releases GPUs of stopping jobs that count against
    /// the limits along the path of `leaf` (not usage: they are not shares,
    /// guarantees or victims any more).
    pub fn charge_held(&mut self, leaf: QueueId, model: ModelId, gpus: u64, add: bool) {
        self.along_path(leaf, model, gpus, add, |node| &mut node.held);
    }

    /// GPUs of `model` held by stopping jobs of queue `q` that count against its limit.
    pub fn held(&self, q: QueueId, model: ModelId) -> u64 {
        self.queues[q as usize]
            .held
            .get(model as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Adds or removes `gpus` of `model` in one per-model counter of `leaf`
    /// and every ancestor.
    fn along_path(
        &mut self,
        leaf: QueueId,
        model: ModelId,
        gpus: u64,
        add: bool,
        counter: impl Fn(&mut QueueNode) -> &mut Vec<u64>,
    ) {
        self.epoch += 1;
        let m = model as usize;
        let mut cur = Some(leaf);
        while let Some(q) = cur {
            let node = &mut self.queues[q as usize];
            cur = node.parent;
            let values = counter(node);
            if values.len() <= m {
                values.resize(m + 1, 0);
            }
            values[m] = if add {
                values[m] + gpus
            } else {
                values[m].saturating_sub(gpus)
            };
        }
    }

    /// GPUs of `model` held by running jobs in queue `q`.
    pub fn running(&self, q: QueueId, model: ModelId) -> u64 {
        self.queues[q as usize]
            .running
            .get(model as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Usage of `model` in queue `q`.
    pub fn usage(&self, q: QueueId, model: ModelId) -> u64 {
        self.queues[q as usize]
            .usage
            .get(model as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Guaranteed GPUs of `model` for queue `q`.
    pub fn guaranteed(&self, q: QueueId, model: ModelId) -> u64 {
        self.queues[q as usize]
            .guaranteed
            .get(model as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The limit of `model` for queue `q`.
    pub fn limit(&self, q: QueueId, model: ModelId) -> Option<u64> {
        self.queues[q as usize]
            .limit
            .get(model as usize)
            .copied()
            .flatten()
    }

    /// [`QueueTree::weighted_share`] as an exact fraction (numerator,
    /// denominator), so equal shares compare equal.
    pub fn weighted_share_exact(&self, q: QueueId, capacity: &[u64]) -> (u128, u128) {
        let node = &self.queues[q as usize];
        let mut best: (u128, u128) = (0, 1);
        for (used, cap) in node.usage.iter().zip(capacity) {
            if *cap == 0 {
                continue;
            }
            let f = (u128::from(*used), u128::from(*cap));
            if f.0 * best.1 > best.0 * f.1 {
                best = f;
            }
        }
        (best.0, best.1 * u128::from(node.weight.max(1)))
    }

    /// Dominant share of `q` divided by its weight: the largest
    /// usage ÷ capacity over models. Lower goes first.
    pub fn weighted_share(&self, q: QueueId, capacity: &[u64]) -> f64 {
        let node = &self.queues[q as usize];
        let dominant = node
            .usage
            .iter()
            .zip(capacity)
            .filter(|(_, cap)| **cap > 0)
            .map(|(used, cap)| *used as f64 / *cap as f64)
            .fold(0.0, f64::max);
        dominant / f64::from(node.weight)
    }
}
