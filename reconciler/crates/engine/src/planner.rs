//! [`Planner`]: plans call after call on a fleet whose nodes rarely change
//! (a replay), keeping the engine's view of the nodes between calls.

use model::observed::ObservedNode;
use model::plan::Plan;
use model::spec::NvLink;

use super::cluster::Cluster;
use super::drift::CleanNodes;
use super::ids::{Models, PoolId};
use super::jobs::{KeptJobs, Unchanged};
use super::{Engine, PlanInput};

/// Plans again and again, keeping what the engine builds from the observed
/// nodes (its cluster: nodes, GPU slots, NVLink domains, name lookup; and
/// which nodes have no drift) between calls instead of building it at
/// every plan. Each call's plan is
/// the one [`crate::plan`] gives on the same input: the nodes kept are
/// checked against the input's at every call and built again when they
/// differ (a node's `idleSince` alone is taken as it is). It keeps the job
/// table too (each job's queue, class, models, sizes; the name index; the
/// runtime hashes drift compares), made again from what was kept when the
/// caller vouches for what did not change ([`Planner::plan_since_last`]).
/// Pure, as [`crate::plan`]: no I/O, no clock.
#[derive(Debug, Default)]
pub struct Planner {
    kept: KeptNodes,
    jobs: KeptJobs,
}

/// What a plan's engine takes from its planner.
pub(crate) struct Kept<'k, 'c> {
    pub(crate) nodes: &'k mut KeptNodes,
    pub(crate) jobs: &'k mut KeptJobs,
    pub(crate) unchanged: Unchanged<'c>,
}

impl Planner {
    /// A planner that keeps nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan for `input`: [`crate::plan`]'s, byte for byte.
    pub fn plan(&mut self, input: &PlanInput) -> Plan {
        self.plan_kept(input, &input.observed.nodes, false, Unchanged::default())
    }

    /// [`Planner::plan`] for a caller that knows `input`'s observed nodes
    /// are, `idleSince` aside, those of its previous call to this planner
    /// (a replay while its node set stands still): they are not compared
    /// with the kept ones, which costs about as much as building them
    /// (debug builds compare them and panic when they differ). The pools
    /// and GPU models are still checked.
    pub fn plan_same_nodes(&mut self, input: &PlanInput) -> Plan {
        self.plan_kept(input, &input.observed.nodes, true, Unchanged::default())
    }

    /// The plan for `input` and its horizon: [`crate::plan_with_horizon`]'s,
    /// byte for byte (the reconcile loop's planner).
    pub fn plan_with_horizon(&mut self, input: &PlanInput) -> (Plan, crate::Horizon) {
        self.plan_with_nodes(input, &input.observed.nodes)
    }

    /// [`Planner::plan_with_horizon`] for the observed state
    /// `input.observed` with `nodes` in place of its own (which are not
    /// read): a caller that keeps the nodes apart from the rest of the
    /// state (the reconcile loop, which shares both between iterations)
    /// plans without putting them together.
    pub fn plan_with_nodes(
        &mut self,
        input: &PlanInput,
        nodes: &[ObservedNode],
    ) -> (Plan, crate::Horizon) {
        self.plan_since_last(input, nodes, Unchanged::default())
    }

    /// [`Planner::plan_with_nodes`] for a caller that vouches for what did
    /// not change since its previous call to this planner (`unchanged`):
    /// the job table is made from what was kept then, but for the jobs
    /// that changed. The plan is the same (debug builds make the table
    /// anew too and panic when the two differ); what the planner can check
    /// itself (the pools, queues and priority classes, the models) it does.
    pub fn plan_since_last(
        &mut self,
        input: &PlanInput,
        nodes: &[ObservedNode],
        unchanged: Unchanged<'_>,
    ) -> (Plan, crate::Horizon) {
        crate::horizon::collect(input, || self.plan_kept(input, nodes, false, unchanged))
    }

    fn plan_kept(
        &mut self,
        input: &PlanInput,
        nodes: &[ObservedNode],
        same_nodes: bool,
        unchanged: Unchanged<'_>,
    ) -> Plan {
        self.kept.same_nodes = same_nodes || unchanged.nodes;
        let kept = Kept {
            nodes: &mut self.kept,
            jobs: &mut self.jobs,
            unchanged,
        };
        let (mut plan, _, cluster, mut names) =
            Engine::build(input, nodes, Some(kept)).run_keeping();
        self.kept.spare = Some(cluster);
        plan.drift = crate::drift::detect_kept(
            input.fleet,
            input.observed,
            nodes,
            &plan.actions,
            Some(&mut self.kept.clean),
            Some((&mut names, &mut self.jobs.runtime)),
        );
        self.jobs.give_back(names.into_returned());
        plan
    }
}

/// The cluster built from some observed nodes, as built (no job on it), and
/// the last plan's copy, reset to it for the next plan (its allocations kept).
#[derive(Debug, Default)]
pub(crate) struct KeptNodes {
    /// What `base` was built from.
    from: Option<Source>,
    base: Cluster,
    spare: Option<Cluster>,
    /// The nodes without drift of their own (drift detection's, of the
    /// same nodes: dropped when they change).
    clean: Option<CleanNodes>,
    /// The caller vouches that the nodes are the kept ones
    /// ([`Planner::plan_same_nodes`]).
    same_nodes: bool,
    /// Whether the last [`KeptNodes::cluster`] was the kept one (the same
    /// nodes as the plan before: node ids found then hold).
    pub(crate) reused: bool,
}

/// The input a kept cluster was built from.
#[derive(Debug)]
struct Source {
    observed: Vec<ObservedNode>,
    /// Cluster node `k` is `observed[order[k]]` (real nodes are by name).
    order: Vec<u32>,
    /// The declared pools' names and NVLink layouts, in pool id order.
    layouts: Vec<(String, NvLink)>,
    /// The GPU models known before the nodes were read (ids follow first
    /// use), and those the nodes added, in order.
    models_before: Vec<String>,
    node_models: Vec<String>,
}

impl Source {
    /// `same_nodes`: the caller vouches that the nodes are `observed`.
    fn matches(
        &self,
        observed: &[ObservedNode],
        same_nodes: bool,
        layouts: &[(&str, NvLink)],
        models: &Models,
    ) -> bool {
        let nodes = || {
            self.observed.len() == observed.len()
                && self
                    .observed
                    .iter()
                    .zip(observed)
                    .all(|(a, b)| same_node(a, b))
        };
        debug_assert!(!same_nodes || nodes(), "plan_same_nodes: the nodes changed");
        self.layouts.len() == layouts.len()
            && self
                .layouts
                .iter()
                .zip(layouts)
                .all(|((n, l), (m, k))| n == m && l == k)
            && self.models_before == models.names()
            && (same_nodes || nodes())
    }
}

/// Whether two observed nodes are the same but for `idleSince` (every other
/// field named, so a new field is not forgotten here).
fn same_node(a: &ObservedNode, b: &ObservedNode) -> bool {
    let ObservedNode {
        name,
        pool,
        labels,
        idle_since: _,
        gpus,
    } = a;
    *name == b.name && *pool == b.pool && *labels == b.labels && *gpus == b.gpus
}

impl KeptNodes {
    /// The cluster [`Cluster::unindexed`] builds from `observed` (interning
    /// the nodes' models into `models` as it does): the kept one when it was
    /// built from the same nodes, pool layouts and models.
    pub(crate) fn cluster(
        &mut self,
        observed: &[ObservedNode],
        layouts: &[(&str, NvLink)],
        models: &mut Models,
        pool_of: impl Fn(&str) -> Option<(PoolId, NvLink)>,
    ) -> Cluster {
        if let Some(from) = self
            .from
            .as_ref()
            .filter(|f| f.matches(observed, self.same_nodes, layouts, models))
        {
            for m in &from.node_models {
                models.intern(m);
            }
            let mut cluster = match self.spare.take() {
                Some(mut spare) => {
                    spare.reset_to(&self.base);
                    spare
                }
                None => self.base.clone(),
            };
            for (node, &k) in cluster.nodes.iter_mut().zip(&from.order) {
                node.idle_since = observed[k as usize].idle_since;
            }
            self.reused = true;
            return cluster;
        }
        self.reused = false;
        let models_before = models.names().to_vec();
        let cluster = Cluster::unindexed(observed, models, pool_of);
        let node_models = models.names()[models_before.len()..].to_vec();
        // As `Cluster::unindexed` orders them: by name, stable.
        let mut order: Vec<u32> = (0..observed.len() as u32).collect();
        order.sort_by(|a, b| observed[*a as usize].name.cmp(&observed[*b as usize].name));
        self.from = Some(Source {
            observed: observed.to_vec(),
            order,
            layouts: layouts.iter().map(|(n, l)| (n.to_string(), *l)).collect(),
            models_before,
            node_models,
        });
        self.base = cluster.clone();
        self.spare = None;
        self.clean = None;
        cluster
    }
}
