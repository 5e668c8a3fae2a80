//! A synthetic fleet generator for benchmarks and soak tests: node pools, a
//! queue tree of ~`leaves` teams, four priority classes, and a job mix
//! shaped like public GPU-cluster traces (most jobs 1 GPU, a tail of
//! multi-node gangs). Deterministic for a given seed.

use std::fmt::Write;

use engine::{PlanInput, plan};
use load::{SourceFile, load_fleet};
use model::observed::{ObservedState, QueuedJob, RunningJob, Timestamp, derive_inventory};
use model::plan::Action;

/// How big a fleet to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetSize {
    /// Nodes in all (split into pools of up to 1,000).
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Jobs to leave pending.
    pub pending: u32,
    /// Jobs to try to start (those that fit run; see [`Generated::running`]).
    pub running: u32,
    /// Leaf queues (teams).
    pub leaves: u32,
    /// Seed of the deterministic generator.
    pub seed: u64,
}

/// A generated fleet repository and its observed state.
#[derive(Debug, Clone)]
pub struct Generated {
    /// `(relative path, YAML)` files of the repository.
    pub files: Vec<(String, String)>,
    /// The live fleet: nodes, running jobs, first-seen times.
    pub observed: ObservedState,
    /// Jobs that ended up running.
    pub running: usize,
}

/// splitmix64: small, fast, and stable across versions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const H100: &str = "H100-SXM-80GB";
const A100: &str = "A100-SXM4-80GB";
const HEADER: &str = "apiVersion: gitfleet/v1\n";

/// Generates a fleet at `now`.
pub fn generate(size: FleetSize, now: Timestamp) -> Generated {
    generate_in_pools(size, 1000, now)
}

/// [`generate`] with pools of up to `pool_nodes` nodes (at least 1) instead
/// of 1,000: a small fleet in pools of 200 has the model mix of a large one
/// in pools of 1,000 (one pool in four, so a fifth of 5 or 10 pools, A100).
pub fn generate_in_pools(size: FleetSize, pool_nodes: u32, now: Timestamp) -> Generated {
    let mut rng = Rng(size.seed);
    let mut files = Vec::new();

    // Pools of up to `pool_nodes` nodes; one in four is A100 with NVLink pairs.
    let pool_nodes = pool_nodes.max(1);
    let pool_count = size.nodes.div_ceil(pool_nodes).max(1);
    let mut pools = String::new();
    let mut model_gpus = [0u64; 2];
    for p in 0..pool_count {
        let nodes = (size.nodes - p * pool_nodes).min(pool_nodes);
        let a100 = p % 4 == 3;
        let (model, nvlink) = if a100 {
            (A100, "pairs")
        } else {
            (H100, "full")
        };
        model_gpus[usize::from(a100)] += u64::from(nodes) * u64::from(size.gpus_per_node);
        let zone = ["a", "b", "c"][p as usize % 3];
        let _ = write!(
            pools,
            "{HEADER}kind: NodePool\nmetadata: {{name: pool-{p}}}\nspec:\n  gpu: {{model: {model}, count: {}}}\n  nvlink: {nvlink}\n  size: {{min: {nodes}, max: {nodes}}}\n  nodesPerRack: 8\n  labels: {{zone: {zone}}}\n---\n",
            size.gpus_per_node
        );
    }
    files.push(("pools.yaml".to_string(), pools));

    // org → departments (10 teams each) → teams.
    let leaves = size.leaves.max(1);
    let depts = leaves.div_ceil(10);
    let mut queues = String::new();
    let quota = |g: u64, slack: u64| -> String {
        let mut q = String::new();
        for (i, model) in [H100, A100].iter().enumerate() {
            if model_gpus[i] > 0 {
                let share = g * model_gpus[i] / 1000;
                let _ = write!(
                    q,
                    "\n    - {{model: {model}, guaranteed: {share}, limit: {}}}",
                    share * slack / 100
                );
            }
        }
        q
    };
    let _ = write!(
        queues,
        "{HEADER}kind: Queue\nmetadata: {{name: org}}\nspec:\n  quota:{}\n---\n",
        quota(1000, 100)
    );
    for d in 0..depts {
        let teams = (leaves - d * 10).min(10);
        let dept_share = 1000 / u64::from(depts);
        let _ = write!(
            queues,
            "{HEADER}kind: Queue\nmetadata: {{name: dept-{d}}}\nspec:\n  parent: org\n  weight: {}\n  quota:{}\n---\n",
            1 + d % 3,
            quota(dept_share, 150)
        );
        for t in 0..teams {
            let _ = write!(
                queues,
                "{HEADER}kind: Queue\nmetadata: {{name: team-{d}-{t}}}\nspec:\n  parent: dept-{d}\n  weight: {}\n  quota:{}\n---\n",
                1 + t % 4,
                quota(dept_share / u64::from(teams), 200)
            );
        }
    }
    files.push(("queues.yaml".to_string(), queues));
    files.push((
        "priority-classes.yaml".to_string(),
        [("critical", 1000, false, false), ("high", 500, true, false), ("normal", 100, true, true), ("low", 10, true, false)]
            .iter()
            .map(|(name, value, preemptible, default)| {
                format!(
                    "{HEADER}kind: PriorityClass\nmetadata: {{name: {name}}}\nspec: {{value: {value}, preemptible: {preemptible}, gracePeriod: 5m, default: {default}}}\n---\n"
                )
            })
            .collect(),
    ));

    // Jobs: the first `running` are started by planning them on the empty fleet.
    let total = size.running + size.pending;
    let mut job_files: Vec<String> = Vec::new();
    let mut names = Vec::with_capacity(total as usize);
    for i in 0..total {
        let d = (i % leaves) / 10;
        let t = (i % leaves) % 10;
        let starting = i < size.running;
        let (replicas, per) = job_shape(&mut rng, starting, size.gpus_per_node);
        let class = match rng.below(100) {
            0..=4 => "critical",
            5..=24 => "high",
            25..=79 => "normal",
            _ => "low",
        };
        let name = format!("job-{i}");
        let mut doc = format!(
            "{HEADER}kind: Job\nmetadata: {{name: {name}}}\nspec:\n  queue: team-{d}-{t}\n  priorityClass: {class}\n  replicas: {replicas}\n  gpusPerReplica: {per}\n"
        );
        if rng.chance(30) {
            doc.push_str(&format!("  gpu: {{models: [{H100}]}}\n"));
        }
        if replicas > 1 && rng.chance(30) {
            doc.push_str("  topology: {required: rack}\n");
        }
        if rng.chance(80) {
            doc.push_str(&format!("  timeLimit: {}h\n", 1 + rng.below(72)));
        }
        doc.push_str("  command: [python, train.py]\n---\n");
        let file = (i / 1000) as usize;
        if job_files.len() <= file {
            job_files.push(String::new());
        }
        job_files[file].push_str(&doc);
        names.push(name);
    }
    for (k, text) in job_files.into_iter().enumerate() {
        files.push((format!("jobs/jobs-{k:04}.yaml"), text));
    }

    // Observed state: the derived inventory, then the starting jobs placed.
    let sources: Vec<SourceFile> = files
        .iter()
        .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
        .collect();
    let mut fleet = load_fleet(&sources).fleet;
    let mut observed = derive_inventory(&fleet);
    let all_jobs = std::mem::take(&mut fleet.jobs);
    fleet.jobs = all_jobs
        .iter()
        .take(size.running as usize)
        .cloned()
        .collect();
    let start_plan = plan(&PlanInput {
        fleet: &fleet,
        observed: &observed,
        now,
        revision: None,
    });
    for action in start_plan.actions {
        if let Action::Place { job, placement, .. } = action {
            let age = chrono::Duration::minutes(rng.below(600) as i64);
            observed.running.push(RunningJob {
                job,
                started: now - age,
                placement,
                preempting_since: None,
                preempted_for: None,
                restart: None,
                spec_digest: None,
            });
        }
    }
    let running = observed.running.len();
    for name in names.iter().skip(size.running as usize) {
        if rng.chance(50) {
            observed.queued.push(QueuedJob {
                job: name.clone(),
                since: now - chrono::Duration::minutes(rng.below(600) as i64),
                nominated: Vec::new(),
            });
        }
    }
    observed.time = Some(now);
    Generated {
        files,
        observed,
        running,
    }
}

/// Brings a generated snapshot to what a live fleet would look like: all but
/// the newest `fresh_percent` % of the jobs go through a few reconcile rounds
/// (plan, carry it out, let grace periods pass) so that the preemptions
/// they call for have happened; the newest jobs arrive as a fresh commit.
/// Without this, the snapshot is a "preemption storm": every pending job that
/// outranks a running one preempts in the same plan.
pub fn settle(generated: &mut Generated, fresh_percent: u64, now: Timestamp) {
    let sources: Vec<SourceFile> = generated
        .files
        .iter()
        .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
        .collect();
    let mut fleet = load_fleet(&sources).fleet;
    let keep = fleet.jobs.len() - fleet.jobs.len() * fresh_percent.min(100) as usize / 100;
    fleet.jobs.truncate(keep);
    const ROUNDS: i64 = 6;
    let mut observed = generated.observed.clone();
    for k in 0..ROUNDS {
        let t = now - chrono::Duration::minutes((ROUNDS - k) * 6);
        observed = crate::advance(&fleet, &observed, t);
        let p = plan(&PlanInput {
            fleet: &fleet,
            observed: &observed,
            now: t,
            revision: None,
        });
        let preempting = p
            .actions
            .iter()
            .any(|a| matches!(a, Action::Preempt { .. }));
        observed = crate::apply_plan(&fleet, &observed, &p, t);
        if !preempting && k > 0 {
            break;
        }
    }
    observed = crate::advance(&fleet, &observed, now);
    observed.time = Some(now);
    generated.running = observed.running.len();
    generated.observed = observed;
}

/// Replicas × GPUs per replica, shaped like public traces: most jobs take
/// one GPU; running jobs are a little smaller so that many fit.
fn job_shape(rng: &mut Rng, starting: bool, per_node: u32) -> (u32, u32) {
    let roll = rng.below(100);
    let shape = if starting {
        match roll {
            0..=84 => (1, 1),
            85..=91 => (1, 2),
            92..=95 => (1, 4),
            _ => (1, 8),
        }
    } else {
        match roll {
            0..=69 => (1, 1),
            70..=79 => (1, 2),
            80..=87 => (1, 4),
            88..=95 => (1, 8),
            96..=98 => (2, 8),
            _ => (4, 8),
        }
    };
    (shape.0, shape.1.min(per_node))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn generated_fleets_are_valid_and_deterministic() {
        let size = FleetSize {
            nodes: 40,
            gpus_per_node: 8,
            pending: 200,
            running: 150,
            leaves: 12,
            seed: 7,
        };
        let a = generate(size, now());
        let sources: Vec<SourceFile> = a
            .files
            .iter()
            .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
            .collect();
        let loaded = load_fleet(&sources);
        assert!(
            loaded.is_valid(),
            "{:?}",
            &loaded.diagnostics[..3.min(loaded.diagnostics.len())]
        );
        assert_eq!(loaded.fleet.jobs.len(), 350);
        assert_eq!(loaded.fleet.queues.len(), 1 + 2 + 12);
        assert!(a.running > 100, "only {} running", a.running);
        let b = generate(size, now());
        assert_eq!(a.files, b.files);
        assert_eq!(a.observed, b.observed);
    }

    #[test]
    fn smaller_pools_keep_a_large_fleets_model_mix() {
        let size = FleetSize {
            nodes: 50,
            gpus_per_node: 8,
            pending: 60,
            running: 40,
            leaves: 12,
            seed: 5,
        };
        // 50 nodes in pools of 10: five pools, one of them A100 (pool-3),
        // as 10,000 nodes in pools of 1,000 have two in ten.
        let g = generate_in_pools(size, 10, now());
        let pools = &g.files[0].1;
        assert_eq!(pools.matches("kind: NodePool").count(), 5);
        assert_eq!(pools.matches(A100).count(), 1);
        let sources: Vec<SourceFile> = g
            .files
            .iter()
            .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
            .collect();
        assert!(load_fleet(&sources).is_valid());
        // Pools of 1,000 are what `generate` makes.
        assert_eq!(
            generate_in_pools(size, 1000, now()).files,
            generate(size, now()).files
        );
    }

    #[test]
    fn settled_snapshots_leave_few_preemptions() {
        let size = FleetSize {
            nodes: 40,
            gpus_per_node: 8,
            pending: 300,
            running: 200,
            leaves: 12,
            seed: 3,
        };
        let count = |g: &Generated| {
            let sources: Vec<SourceFile> = g
                .files
                .iter()
                .map(|(p, t)| SourceFile::new(p.as_str(), t.as_bytes().to_vec()))
                .collect();
            let fleet = load_fleet(&sources).fleet;
            let p = plan(&PlanInput {
                fleet: &fleet,
                observed: &g.observed,
                now: now(),
                revision: None,
            });
            p.actions
                .iter()
                .filter(|a| matches!(a, Action::Preempt { .. }))
                .count()
        };
        let mut g = generate(size, now());
        let storm = count(&g);
        settle(&mut g, 2, now());
        let settled = count(&g);
        assert!(settled < storm, "settled {settled}, storm {storm}");
    }
}
