//! Prometheus metrics of the reconciler, in the text exposition format
//! (`prometheus` crate; checked with `promtool check metrics` in the tests).
//!
//! Gauges describe the fleet after the last iteration; counters add up over
//! the process's life. The per-queue and per-pool gauges are set from the
//! dashboard's view model ([`view`](super::view)), so the page and the
//! metrics agree; docs/dashboard.md lists every series.

use std::collections::{BTreeMap, BTreeSet};

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use super::{ActionResult, Iteration};
use crate::state::{JobRecord, Phase};
use dashboard::FleetView;
use model::observed::ObservedNode;

/// Every action type, so `gitfleet_actions_total` has all of them from 0.
const ACTION_KINDS: [&str; 6] = ["place", "preempt", "scale", "drain", "terminate", "cancel"];

/// The reconciler's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    gpus: IntGaugeVec,
    gpus_allocated: IntGaugeVec,
    gpus_idle: IntGaugeVec,
    gpus_unhealthy: IntGaugeVec,
    utilization: Gauge,
    fragmentation: Gauge,
    queue_info: IntGaugeVec,
    queue_used: IntGaugeVec,
    queue_guaranteed: IntGaugeVec,
    queue_limit: IntGaugeVec,
    queue_borrowed: IntGaugeVec,
    queue_pending_jobs: IntGaugeVec,
    queue_pending_gpus: IntGaugeVec,
    pool_nodes: IntGaugeVec,
    pool_nodes_healthy: IntGaugeVec,
    pool_nodes_drained: IntGaugeVec,
    pool_nodes_allocated: IntGaugeVec,
    gpus_healthy: IntGaugeVec,
    gpus_drained: IntGaugeVec,
    plan_duration: Histogram,
    pending_by_reason: IntGaugeVec,
    jobs: IntGaugeVec,
    actions: IntCounterVec,
    preemptions: IntCounter,
    action_errors: IntCounter,
    reconcile_duration: Histogram,
    reconcile_errors: IntCounter,
    refused: IntCounterVec,
    applied_revision: GaugeVec,
    last_success: IntGauge,
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| unreachable!("metric {name} is well-formed: {e}"));
    let _ = registry.register(Box::new(metric.clone()));
    metric
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics, registered, at zero.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let labels = ["pool", "model"];
        let gpus = gauge_vec(&registry, "gitfleet_gpus", "GPUs on ready nodes.", &labels);
        let gpus_allocated = gauge_vec(
            &registry,
            "gitfleet_gpus_allocated",
            "GPUs held by running jobs.",
            &labels,
        );
        let gpus_idle = gauge_vec(
            &registry,
            "gitfleet_gpus_idle",
            "Healthy GPUs that no job holds.",
            &labels,
        );
        let gpus_unhealthy = gauge_vec(
            &registry,
            "gitfleet_gpus_unhealthy",
            "GPUs reported unhealthy.",
            &labels,
        );
        let gpus_healthy = gauge_vec(
            &registry,
            "gitfleet_gpus_healthy",
            "Healthy GPUs on ready nodes.",
            &labels,
        );
        let gpus_drained = gauge_vec(
            &registry,
            "gitfleet_gpus_drained",
            "GPUs on drained nodes (no new placements).",
            &labels,
        );
        let pool_nodes = gauge_vec(
            &registry,
            "gitfleet_pool_nodes",
            "Ready nodes of the pool.",
            &["pool"],
        );
        let pool_nodes_healthy = gauge_vec(
            &registry,
            "gitfleet_pool_nodes_healthy",
            "Nodes of the pool whose GPUs are all healthy.",
            &["pool"],
        );
        let pool_nodes_drained = gauge_vec(
            &registry,
            "gitfleet_pool_nodes_drained",
            "Nodes of the pool drained (an unhealthy GPU: no new placements).",
            &["pool"],
        );
        let pool_nodes_allocated = gauge_vec(
            &registry,
            "gitfleet_pool_nodes_allocated",
            "Nodes of the pool with at least one GPU held by a running job.",
            &["pool"],
        );
        let queue_labels = ["queue", "model"];
        let queue_info = gauge_vec(
            &registry,
            "gitfleet_queue_info",
            "Every queue with its parent (\"\" for a top-level queue); value 1.",
            &["queue", "parent"],
        );
        let queue_used = gauge_vec(
            &registry,
            "gitfleet_queue_used_gpus",
            "GPUs held by running jobs of the queue's subtree.",
            &queue_labels,
        );
        let queue_guaranteed = gauge_vec(
            &registry,
            "gitfleet_queue_guaranteed_gpus",
            "GPUs guaranteed to the queue (0 when its quota does not list the model).",
            &queue_labels,
        );
        let queue_limit = gauge_vec(
            &registry,
            "gitfleet_queue_limit_gpus",
            "The queue's cap on GPUs (absent: no cap).",
            &queue_labels,
        );
        let queue_borrowed = gauge_vec(
            &registry,
            "gitfleet_queue_borrowed_gpus",
            "GPUs the queue's subtree uses beyond its guarantee.",
            &queue_labels,
        );
        let pending_labels = ["queue", "model", "priority_class"];
        let queue_pending_jobs = gauge_vec(
            &registry,
            "gitfleet_queue_pending_jobs",
            "Pending jobs of the queue's subtree, by the models they accept (a model, any, or several joined by |) and priority class.",
            &pending_labels,
        );
        let queue_pending_gpus = gauge_vec(
            &registry,
            "gitfleet_queue_pending_gpus",
            "GPUs asked for by pending jobs of the queue's subtree, by the models they accept and priority class.",
            &pending_labels,
        );
        let pending_by_reason = gauge_vec(
            &registry,
            "gitfleet_pending_jobs",
            "Pending jobs by what they wait for (quota, resources, preemption, ...).",
            &["reason"],
        );
        let jobs = gauge_vec(&registry, "gitfleet_jobs", "Jobs by phase.", &["phase"]);
        let simple = |name: &str, help: &str| {
            let g = Gauge::new(name, help)
                .unwrap_or_else(|e| unreachable!("metric {name} is well-formed: {e}"));
            let _ = registry.register(Box::new(g.clone()));
            g
        };
        let utilization = simple(
            "gitfleet_gpu_utilization_ratio",
            "Allocated GPUs divided by GPUs on ready nodes.",
        );
        let fragmentation = simple(
            "gitfleet_gpu_fragmentation_ratio",
            "Share of idle healthy GPUs that sit on partly used nodes (unusable for whole-node jobs).",
        );
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help)
                .unwrap_or_else(|e| unreachable!("metric {name} is well-formed: {e}"));
            let _ = registry.register(Box::new(c.clone()));
            c
        };
        let preemptions = counter("gitfleet_preemptions_total", "Preemptions carried out.");
        let action_errors = counter(
            "gitfleet_action_errors_total",
            "Actions the executor failed to carry out.",
        );
        let reconcile_errors = counter(
            "gitfleet_reconcile_errors_total",
            "Iterations that failed (state, executor or source errors).",
        );
        let refused = IntCounterVec::new(
            Opts::new(
                "gitfleet_refused_revisions_total",
                "Revisions refused, by reason: invalid (validation), prune (prune protection), crashed (the process died loading them).",
            ),
            &["reason"],
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(refused.clone()));
        for reason in [
            crate::Refusal::Invalid,
            crate::Refusal::Prune,
            crate::Refusal::Crashed,
            crate::Refusal::Signature,
        ] {
            // Present at 0 from the start, so rates and alerts work.
            let _ = refused.with_label_values(&[reason.as_str()]);
        }
        let actions = IntCounterVec::new(
            Opts::new("gitfleet_actions_total", "Actions carried out, by type."),
            &["type"],
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(actions.clone()));
        for kind in ACTION_KINDS {
            let _ = actions.with_label_values(&[kind]);
        }
        let reconcile_duration = Histogram::with_opts(
            HistogramOpts::new(
                "gitfleet_reconcile_duration_seconds",
                "Wall time of one reconcile iteration.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ]),
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(reconcile_duration.clone()));
        let plan_duration = Histogram::with_opts(
            HistogramOpts::new(
                "gitfleet_plan_duration_seconds",
                "Wall time of the engine's plan in one iteration.",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(plan_duration.clone()));
        let applied_revision = GaugeVec::new(
            Opts::new(
                "gitfleet_applied_revision_info",
                "The last applied revision (value 1).",
            ),
            &["revision"],
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(applied_revision.clone()));
        let last_success = IntGauge::new(
            "gitfleet_last_reconcile_timestamp_seconds",
            "Unix time (reconciler clock) of the last successful iteration.",
        )
        .unwrap_or_else(|e| unreachable!("well-formed: {e}"));
        let _ = registry.register(Box::new(last_success.clone()));
        Metrics {
            registry,
            gpus,
            gpus_allocated,
            gpus_idle,
            gpus_unhealthy,
            utilization,
            fragmentation,
            queue_info,
            queue_used,
            queue_guaranteed,
            queue_limit,
            queue_borrowed,
            queue_pending_jobs,
            queue_pending_gpus,
            pool_nodes,
            pool_nodes_healthy,
            pool_nodes_drained,
            pool_nodes_allocated,
            gpus_healthy,
            gpus_drained,
            plan_duration,
            pending_by_reason,
            jobs,
            actions,
            preemptions,
            action_errors,
            reconcile_duration,
            reconcile_errors,
            refused,
            applied_revision,
            last_success,
        }
    }

    /// Counts an iteration that failed as a whole.
    pub fn record_error(&self) {
        self.reconcile_errors.inc();
    }

    /// Updates everything from an iteration, the job records after it and
    /// the view built from both.
    pub fn record(
        &self,
        iteration: &Iteration,
        records: &BTreeMap<String, JobRecord>,
        view: &FleetView,
        seconds: f64,
    ) {
        self.record_iteration(iteration, seconds);
        self.record_state(iteration, records, view);
    }

    /// What every iteration adds on its own: durations, the time of the
    /// last success, refusals, actions, the applied revision.
    pub fn record_iteration(&self, iteration: &Iteration, seconds: f64) {
        self.reconcile_duration.observe(seconds);
        if let Some(plan) = iteration.plan_seconds {
            self.plan_duration.observe(plan);
        }
        self.last_success.set(iteration.time.timestamp());
        if let Some((_, diagnostics)) = &iteration.refused
            && let Some(first) = diagnostics.first()
        {
            let reason = crate::Refusal::of(&first.message);
            self.refused.with_label_values(&[reason.as_str()]).inc();
        }
        for done in &iteration.executed {
            match &done.result {
                ActionResult::Applied(_) => {
                    self.actions.with_label_values(&[done.action.kind()]).inc();
                    if done.action.kind() == "preempt" {
                        self.preemptions.inc();
                    }
                }
                ActionResult::Failed(_) => self.action_errors.inc(),
                ActionResult::AlreadyUnderway => {}
            }
        }
        if let Some(revision) = &iteration.revision {
            self.applied_revision.reset();
            self.applied_revision
                .with_label_values(&[revision.id.as_str()])
                .set(1.0);
        }
    }

    /// The gauges of the fleet's state after `iteration`: jobs by phase,
    /// GPUs, pending jobs, queues and pools. The same for the same
    /// records, nodes, plan and view (the loop skips it then).
    pub fn record_state(
        &self,
        iteration: &Iteration,
        records: &BTreeMap<String, JobRecord>,
        view: &FleetView,
    ) {
        self.jobs.reset();
        for phase in Phase::ALL {
            let n = records.values().filter(|r| r.phase == phase).count();
            self.jobs.with_label_values(&[phase.as_str()]).set(n as i64);
        }
        self.record_gpus(&iteration.nodes, records);
        self.record_pending(iteration);
        self.record_view(view);
    }

    /// Sets the per-queue and per-pool gauges from the view.
    fn record_view(&self, view: &FleetView) {
        for vec in [
            &self.queue_info,
            &self.queue_used,
            &self.queue_guaranteed,
            &self.queue_limit,
            &self.queue_borrowed,
            &self.queue_pending_jobs,
            &self.queue_pending_gpus,
            &self.pool_nodes,
            &self.pool_nodes_healthy,
            &self.pool_nodes_drained,
            &self.pool_nodes_allocated,
            &self.gpus_healthy,
            &self.gpus_drained,
        ] {
            vec.reset();
        }
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for q in &view.queues {
            let parent = q.parent.as_deref().unwrap_or_default();
            self.queue_info.with_label_values(&[&q.name, parent]).set(1);
            for m in &q.models {
                let labels = [q.name.as_str(), m.model.as_str()];
                self.queue_used.with_label_values(&labels).set(int(m.used));
                self.queue_guaranteed
                    .with_label_values(&labels)
                    .set(int(m.guaranteed));
                if let Some(limit) = m.limit {
                    self.queue_limit.with_label_values(&labels).set(int(limit));
                }
                self.queue_borrowed
                    .with_label_values(&labels)
                    .set(int(m.borrowed));
            }
            for p in &q.pending {
                let labels = [q.name.as_str(), p.model.as_str(), p.priority_class.as_str()];
                self.queue_pending_jobs
                    .with_label_values(&labels)
                    .set(int(p.jobs));
                self.queue_pending_gpus
                    .with_label_values(&labels)
                    .set(int(p.gpus));
            }
        }
        for pool in &view.pools {
            let name = [pool.name.as_str()];
            self.pool_nodes
                .with_label_values(&name)
                .set(int(pool.nodes));
            self.pool_nodes_healthy
                .with_label_values(&name)
                .set(int(pool.healthy_nodes));
            self.pool_nodes_drained
                .with_label_values(&name)
                .set(int(pool.drained_nodes));
            self.pool_nodes_allocated
                .with_label_values(&name)
                .set(int(pool.allocated_nodes));
            for g in &pool.gpus {
                let labels = [pool.name.as_str(), g.model.as_str()];
                self.gpus_healthy
                    .with_label_values(&labels)
                    .set(int(g.healthy));
                self.gpus_drained
                    .with_label_values(&labels)
                    .set(int(g.drained));
            }
        }
    }

    fn record_gpus(&self, nodes: &[ObservedNode], records: &BTreeMap<String, JobRecord>) {
        let mut held: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
        for record in records.values().filter(|r| r.phase == Phase::Running) {
            for p in &record.placement {
                held.entry(p.node.as_str()).or_default().extend(&p.gpus);
            }
        }
        #[derive(Default)]
        struct Tally {
            total: i64,
            allocated: i64,
            idle: i64,
            unhealthy: i64,
        }
        let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
        let (mut idle_all, mut idle_partial) = (0i64, 0i64);
        for node in nodes {
            let pool = node.pool.clone().unwrap_or_default();
            let busy = held.get(node.name.as_str());
            let mut node_idle = 0;
            for gpu in &node.gpus {
                let t = tallies
                    .entry((pool.clone(), gpu.model.clone()))
                    .or_default();
                t.total += 1;
                let taken = busy.is_some_and(|b| b.contains(&gpu.index));
                if taken {
                    t.allocated += 1;
                } else if gpu.healthy {
                    t.idle += 1;
                    node_idle += 1;
                }
                if !gpu.healthy {
                    t.unhealthy += 1;
                }
            }
            idle_all += node_idle;
            if node_idle > 0 && node_idle < node.gpus.len() as i64 {
                idle_partial += node_idle;
            }
        }
        for vec in [
            &self.gpus,
            &self.gpus_allocated,
            &self.gpus_idle,
            &self.gpus_unhealthy,
        ] {
            vec.reset();
        }
        let (mut total, mut allocated) = (0i64, 0i64);
        for ((pool, model), t) in &tallies {
            let labels = [pool.as_str(), model.as_str()];
            self.gpus.with_label_values(&labels).set(t.total);
            self.gpus_allocated
                .with_label_values(&labels)
                .set(t.allocated);
            self.gpus_idle.with_label_values(&labels).set(t.idle);
            self.gpus_unhealthy
                .with_label_values(&labels)
                .set(t.unhealthy);
            total += t.total;
            allocated += t.allocated;
        }
        self.utilization.set(if total == 0 {
            0.0
        } else {
            allocated as f64 / total as f64
        });
        self.fragmentation.set(if idle_all == 0 {
            0.0
        } else {
            idle_partial as f64 / idle_all as f64
        });
    }

    fn record_pending(&self, iteration: &Iteration) {
        self.pending_by_reason.reset();
        let Some(plan) = &iteration.plan else { return };
        for pending in &plan.pending {
            let reason = pending.waiting_for.as_deref().unwrap_or("other");
            self.pending_by_reason.with_label_values(&[reason]).inc();
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut buffer) {
            return format!("# error encoding metrics: {e}\n");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}
