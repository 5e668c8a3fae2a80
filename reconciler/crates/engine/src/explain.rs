//! `gitfleet explain JOB`: why a job is pending, placed where it is, or
//! preempted — the quota arithmetic along its queue path, the candidate
//! nodes and why each was rejected, and its position in fair-share order.
//! Captured while the engine considers the job, so it shows the state the
//! decision was made on.

use serde::Serialize;

use model::plan::{Action, Plan};

use super::cluster::{NodeState, Owner};
use super::ids::{JobId, ModelId};
use super::{Engine, PlanInput, Stopping};

/// Everything `explain` shows about one job.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Explanation {
    /// Job name.
    pub job: String,
    /// `pending`, `placed`, `running`, `preempted`, `terminated`, `cancelled` or `unknown`.
    pub status: String,
    /// One sentence.
    pub summary: String,
    /// Leaf queue.
    pub queue: Option<String>,
    /// Priority class and value.
    pub priority: Option<String>,
    /// What it asks for, e.g. `2×8 GPUs of H100-SXM-80GB`.
    pub request: Option<String>,
    /// Where it stood in fair-share order.
    pub order: Option<OrderInfo>,
    /// Quota arithmetic along the queue path, per acceptable model.
    pub quota: Vec<QuotaLine>,
    /// Candidate nodes and verdicts at the time it was considered.
    pub nodes: Vec<NodeLine>,
    /// Nodes left out of `nodes` (only the first ones are listed).
    pub nodes_not_listed: usize,
    /// Plan actions about this job (placed, preempted, preempting others…).
    pub actions: Vec<Action>,
    /// The pending reason, when pending.
    pub pending_reason: Option<String>,
    /// What happened to it before, from a reconciler's state (filled by the
    /// caller, never by the engine): its last stop — by whom, why, at which
    /// revision — and how often it was preempted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<String>,
}

/// Fair-share position.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OrderInfo {
    /// 1-based position among the pending jobs considered.
    pub position: usize,
    /// How many pending jobs were considered in all.
    pub of: usize,
    /// Per level of the tree, root first: each sibling's weighted share.
    pub levels: Vec<Vec<ShareLine>>,
}

/// A queue's share at the time of the pick.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ShareLine {
    /// Queue name.
    pub queue: String,
    /// Dominant share ÷ weight (lower goes first).
    pub weighted_share: f64,
    /// Weight among siblings.
    pub weight: u32,
    /// On the job's path.
    pub on_path: bool,
    /// Pending jobs in its subtree at the time (queues with none are skipped).
    pub pending_jobs: u64,
}

/// One queue × model of the quota path.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QuotaLine {
    /// Queue name.
    pub queue: String,
    /// GPU model.
    pub model: String,
    /// GPUs in use (before this job).
    pub usage: u64,
    /// Guaranteed.
    pub guaranteed: u64,
    /// Limit (`None`: no cap).
    pub limit: Option<u64>,
    /// GPUs the job asks for.
    pub request: u64,
    /// Whether usage + request stays within the limit.
    pub fits: bool,
}

/// A candidate node and why it does or does not fit one replica.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeLine {
    /// Node name.
    pub node: String,
    /// Its GPU model.
    pub model: String,
    /// Free GPUs.
    pub free: u32,
    /// The verdict in words.
    pub verdict: String,
}

const MAX_NODES: usize = 40;

/// Plans and explains `job`.
pub fn explain(input: &PlanInput, job: &str) -> (Plan, Explanation) {
    let mut engine = Engine::new(input);
    let target = engine.job_named(job);
    engine.explain = Some(Capture {
        target,
        ..Capture::default()
    });
    let (plan, capture) = engine.run_explained();
    let explanation = finish(input, job, &plan, capture.unwrap_or_default());
    (plan, explanation)
}

/// What the engine records while it runs.
#[derive(Debug, Clone, Default)]
pub(super) struct Capture {
    pub target: Option<JobId>,
    pub picks: usize,
    pub order: Option<OrderInfo>,
    pub quota: Vec<QuotaLine>,
    pub nodes: Vec<NodeLine>,
    pub nodes_not_listed: usize,
    pub running: Option<String>,
}

/// Called by the engine just before it considers job `j`.
pub(super) fn before_admit(e: &mut Engine, j: JobId, fair: &super::order::FairShare) {
    let Some(capture) = e.explain.as_mut() else {
        return;
    };
    capture.picks += 1;
    if capture.target != Some(j) {
        return;
    }
    let position = capture.picks;
    let order = order_info(e, j, position, fair);
    let quota = quota_lines(e, j);
    let (nodes, not_listed) = node_lines(e, j);
    if let Some(capture) = e.explain.as_mut() {
        capture.order = Some(order);
        capture.quota = quota;
        capture.nodes = nodes;
        capture.nodes_not_listed = not_listed;
    }
}

/// Called once before the scheduling loop: a running job's state.
pub(super) fn describe_running(e: &mut Engine) {
    let Some(target) = e.explain.as_ref().and_then(|c| c.target) else {
        return;
    };
    let Some(run) = e.runs.iter().find(|r| r.job == Some(target)) else {
        return;
    };
    let where_ = model::plan::placement_short(&e.node_gpus(&run.placement));
    let mut text = format!(
        "running on {where_} since {}",
        super::reasons::timestamp(run.started)
    );
    if let Some(end) = run.ends_at.filter(|_| run.stopping == Stopping::No) {
        text.push_str(&format!(
            "; time limit ends {}",
            super::reasons::timestamp(end)
        ));
    }
    let quota = quota_lines(e, target);
    if let Some(capture) = e.explain.as_mut() {
        capture.running = Some(text);
        capture.quota = quota;
    }
}

fn order_info(e: &Engine, j: JobId, position: usize, fair: &super::order::FairShare) -> OrderInfo {
    let mut levels = Vec::new();
    if let Some(leaf) = e.jobs[j as usize].queue {
        let mut path: Vec<_> = e.tree.path(leaf).collect();
        path.reverse();
        for q in path {
            let siblings = match e.tree.get(q).parent {
                Some(p) => e.tree.get(p).children.clone(),
                None => e.tree.roots.clone(),
            };
            levels.push(
                siblings
                    .iter()
                    .map(|s| ShareLine {
                        queue: e.tree.get(*s).name.to_string(),
                        weighted_share: round(e.tree.weighted_share(*s, &e.cluster.healthy_total)),
                        weight: e.tree.get(*s).weight,
                        on_path: *s == q,
                        // The job itself was already handed out.
                        pending_jobs: fair.remaining(*s) + u64::from(*s == q),
                    })
                    .collect(),
            );
        }
    }
    OrderInfo {
        position,
        of: 0,
        levels,
    }
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn quota_lines(e: &Engine, j: JobId) -> Vec<QuotaLine> {
    let job = &e.jobs[j as usize];
    let Some(leaf) = job.queue else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &m in job.models.iter() {
        for q in e.tree.path(leaf) {
            let usage = e.tree.usage(q, m);
            let limit = e.tree.limit(q, m);
            out.push(QuotaLine {
                queue: e.tree.get(q).name.to_string(),
                model: e.models.name(m).to_string(),
                usage,
                guaranteed: e.tree.guaranteed(q, m),
                limit,
                request: job.gpus,
                fits: limit.is_none_or(|l| usage + e.tree.held(q, m) + job.gpus <= l),
            });
        }
    }
    out
}

/// Idle GPUs of a node that are not free, and why: nominated or promised to
/// a pending job, reserved for backfill ("" when there are none), so a node
/// shows them as such rather than as "0 free".
fn held_aside(e: &Engine, node: &NodeState) -> String {
    let mut promised: Vec<&str> = Vec::new();
    let (mut kept, mut reserved) = (0u32, 0u32);
    for g in &node.gpus {
        match g.owner {
            Owner::Promised(p) => {
                kept += 1;
                let name = e.jobs[p as usize].name;
                if !promised.contains(&name) {
                    promised.push(name);
                }
            }
            Owner::Reserved => reserved += 1,
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if kept > 0 {
        parts.push(format!(
            "{kept} idle GPU{} kept for {}",
            plural(kept),
            promised.join(", ")
        ));
    }
    if reserved > 0 {
        parts.push(format!("{reserved} reserved for backfill"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn node_lines(e: &Engine, j: JobId) -> (Vec<NodeLine>, usize) {
    let job = &e.jobs[j as usize];
    let per = job.spec.gpus_per_replica;
    let level = job.required;
    let mut lines = Vec::new();
    for id in e.cluster.real_nodes() {
        let node = e.cluster.node(id);
        let Some(m) = node.model else { continue };
        if !job.models.contains(&m) {
            continue;
        }
        let verdict = if node.pool.is_none() {
            "not in a declared NodePool: gets no jobs".to_string()
        } else if !node.schedulable {
            let bad: Vec<String> = node
                .gpus
                .iter()
                .filter(|g| g.owner == Owner::Unhealthy)
                .map(|g| g.index.to_string())
                .collect();
            format!("drained: unhealthy GPU {}", bad.join(", "))
        } else if level.is_some_and(|l| node.domain_key(l).is_none()) {
            format!(
                "no {} label (topology required)",
                match level {
                    Some(model::spec::TopologyLevel::Zone) => "zone",
                    _ => "rack",
                }
            )
        } else if node.free < per {
            format!(
                "{} free GPU{}; a replica needs {per}{}",
                node.free,
                plural(node.free),
                held_aside(e, node)
            )
        } else {
            let mut taken: Vec<usize> = Vec::new();
            let mut fits = 0;
            while let Some(p) = node.pick_gpus(per, |pos, g| {
                g.owner == Owner::Free && !taken.contains(&pos)
            }) {
                taken.extend(p);
                fits += 1;
            }
            if fits == 0 {
                format!("{} free, but no NVLink domain with {per} free", node.free)
            } else {
                format!("room for {fits} replica{}", plural(fits))
            }
        };
        lines.push(NodeLine {
            node: node.name.clone(),
            model: model_name(e, m),
            free: node.free,
            verdict,
        });
    }
    // Fitting nodes first (they show where it could go), then the rest.
    lines.sort_by(|a, b| {
        let fa = a.verdict.starts_with("room");
        let fb = b.verdict.starts_with("room");
        fb.cmp(&fa).then(a.node.cmp(&b.node))
    });
    let not_listed = lines.len().saturating_sub(MAX_NODES);
    lines.truncate(MAX_NODES);
    (lines, not_listed)
}

fn model_name(e: &Engine, m: ModelId) -> String {
    e.models.name(m).to_string()
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn finish(input: &PlanInput, job: &str, plan: &Plan, capture: Capture) -> Explanation {
    let spec = input.fleet.jobs.iter().find(|j| j.name() == job);
    let actions: Vec<Action> = plan
        .actions
        .iter()
        .filter(|a| {
            a.job() == Some(job) || matches!(a, Action::Preempt { for_job, .. } if for_job == job)
        })
        .cloned()
        .collect();
    let pending = plan.pending.iter().find(|p| *p.job == *job);
    let running = input.observed.running.iter().any(|r| r.job == job);
    let own = actions.iter().find(|a| a.job() == Some(job));
    let (status, summary) = match (own, pending, running) {
        (Some(Action::Place { reason, .. }), _, _) => {
            ("placed", format!("placed by this plan: {reason}"))
        }
        (
            Some(Action::Preempt {
                for_job, reason, ..
            }),
            _,
            _,
        ) => (
            "preempted",
            format!("preempted by this plan for {for_job}: {reason}"),
        ),
        (Some(Action::Terminate { reason, .. }), _, _) => {
            ("terminated", format!("terminated: {reason}"))
        }
        (Some(Action::Cancel { reason, .. }), _, _) => {
            ("cancelled", format!("cancelled: {reason}"))
        }
        (_, Some(p), _) => ("pending", format!("pending: {}", p.reason)),
        (_, None, true) => (
            "running",
            capture
                .running
                .clone()
                .unwrap_or_else(|| "running".to_string()),
        ),
        _ => match input.observed.completed.iter().find(|c| c.job == job) {
            Some(c) => (
                "completed",
                format!(
                    "completed at {}{}; not started again",
                    super::reasons::timestamp(c.finished),
                    c.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            ),
            None => ("unknown", format!("no Job {job:?} in Git and none running")),
        },
    };
    let (queue, priority, request) = match spec {
        Some(s) => {
            let class = s.spec.priority_class.clone().or_else(|| {
                input
                    .fleet
                    .priority_classes
                    .iter()
                    .find(|c| c.spec.default)
                    .map(|c| format!("{} (default)", c.name()))
            });
            let models = match &s.spec.gpu {
                Some(sel) if !sel.models.is_empty() => sel.models.join(" or "),
                _ => "any model".to_string(),
            };
            (
                Some(s.spec.queue.clone()),
                class,
                Some(format!(
                    "{}×{} GPUs of {models}{}",
                    s.spec.replicas,
                    s.spec.gpus_per_replica,
                    s.spec
                        .topology
                        .and_then(|t| t.required)
                        .map(|l| format!(", all in one {}", format!("{l:?}").to_lowercase()))
                        .unwrap_or_default()
                )),
            )
        }
        None => (None, None, None),
    };
    let mut order = capture.order;
    if let Some(o) = order.as_mut() {
        o.of = capture.picks;
    }
    Explanation {
        job: job.to_string(),
        status: status.to_string(),
        summary,
        queue,
        priority,
        request,
        order,
        quota: capture.quota,
        nodes: capture.nodes,
        nodes_not_listed: capture.nodes_not_listed,
        actions,
        pending_reason: pending.map(|p| p.reason.to_string()),
        history: Vec::new(),
    }
}
