//! A synthetic fleet generator for benchmarks and soak tests: node pools, a
//! queue tree of ~`leaves` teams, priority classes, and a job mix shaped
//! like public GPU-cluster traces (most jobs 1 GPU, a tail of multi-node
//! gangs), varied by a [`Shape`]. Deterministic for a given seed.

use std::fmt::Write;

use engine::{PlanInput, plan};
use load::{SourceFile, load_fleet};
use model::observed::{ObservedState, QueuedJob, RunningJob, Timestamp, derive_inventory};
use model::plan::Action;

mod shape;

pub use shape::{Class, MODELS, Shape};

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

const H100: &str = MODELS[0].0;
const HEADER: &str = "apiVersion: gitfleet/v1\n";

/// Generates a fleet at `now`.
pub fn generate(size: FleetSize, now: Timestamp) -> Generated {
    generate_in_pools(size, 1000, now)
}

/// [`generate`] with pools of up to `pool_nodes` nodes (at least 1) instead
/// of 1,000: a small fleet in pools of 200 has the model mix of a large one
/// in pools of 1,000 (one pool in four, so a fifth of 5 or 10 pools, A100).
pub fn generate_in_pools(size: FleetSize, pool_nodes: u32, now: Timestamp) -> Generated {
    generate_shaped(size, Shape::default(), pool_nodes, now)
}

/// [`generate_in_pools`] with a workload of the given [`Shape`]. What the
/// shape changes is drawn from a second random stream, so the default shape
/// makes exactly the fleet [`generate_in_pools`] always made.
pub fn generate_shaped(
    size: FleetSize,
    shape: Shape,
    pool_nodes: u32,
    now: Timestamp,
) -> Generated {
    let mut rng = Rng(size.seed);
    let mut knob = Rng(size.seed ^ 0x5EED_0F5A_AE00_0001);
    let mut files = Vec::new();
    let models = shape.models();

    // Pools of up to `pool_nodes` nodes, each of one model.
    let pool_nodes = pool_nodes.max(1);
    let pool_count = size.nodes.div_ceil(pool_nodes).max(1);
    let mut pools = String::new();
    let mut model_gpus = vec![0u64; models.len()];
    for p in 0..pool_count {
        let nodes = (size.nodes - p * pool_nodes).min(pool_nodes);
        let m = shape.pool_model(p);
        let (model, nvlink) = models[m];
        model_gpus[m] += u64::from(nodes) * u64::from(size.gpus_per_node);
        let zone = ["a", "b", "c"][p as usize % 3];
        let _ = write!(
            pools,
            "{HEADER}kind: NodePool\nmetadata: {{name: pool-{p}}}\nspec:\n  gpu: {{model: {model}, count: {}}}\n  nvlink: {nvlink}\n  size: {{min: {nodes}, max: {nodes}}}\n  nodesPerRack: 8\n  labels: {{zone: {zone}}}\n---\n",
            size.gpus_per_node
        );
    }
    files.push(("pools.yaml".to_string(), pools));

    let leaves = size.leaves.max(1);
    files.push(("queues.yaml".to_string(), shape.queues(leaves, &model_gpus)));
    let classes = shape.classes();
    files.push((
        "priority-classes.yaml".to_string(),
        classes
            .iter()
            .map(|c| {
                format!(
                    "{HEADER}kind: PriorityClass\nmetadata: {{name: {}}}\nspec: {{value: {}, preemptible: {}, gracePeriod: 5m, default: {}}}\n---\n",
                    c.name, c.value, c.preemptible, c.default
                )
            })
            .collect(),
    ));

    // Jobs: the first `running` are started by planning them on the empty
    // fleet. `limits`: per starting job with a time limit, when the shape
    // sets how many run past theirs, the limit in minutes and whether it
    // runs past it.
    let total = size.running + size.pending;
    let mut job_files: Vec<String> = Vec::new();
    let mut names = Vec::with_capacity(total as usize);
    let mut limits: std::collections::HashMap<String, (u64, bool)> =
        std::collections::HashMap::new();
    for i in 0..total {
        let d = (i % leaves) / 10;
        let t = (i % leaves) % 10;
        let starting = i < size.running;
        let (mix_replicas, mix_per) = job_shape(&mut rng, starting, size.gpus_per_node);
        let gang = shape
            .gang_percent
            .is_some_and(|percent| knob.chance(u64::from(percent)));
        let (replicas, per) = if gang {
            let most = u64::from(shape.gang_nodes.max(2));
            (2 + knob.below(most - 1) as u32, size.gpus_per_node)
        } else {
            (mix_replicas, mix_per)
        };
        let class = &Shape::class_of(&classes, rng.below(100)).name;
        let name = format!("job-{i}");
        let mut doc = format!(
            "{HEADER}kind: Job\nmetadata: {{name: {name}}}\nspec:\n  queue: team-{d}-{t}\n  priorityClass: {class}\n  replicas: {replicas}\n  gpusPerReplica: {per}\n"
        );
        if rng.chance(30) {
            let only = if models.len() <= 2 {
                H100
            } else {
                // One of the models some pool has.
                let present: Vec<&str> = models
                    .iter()
                    .zip(&model_gpus)
                    .filter(|(_, gpus)| **gpus > 0)
                    .map(|((model, _), _)| *model)
                    .collect();
                let pick = knob.below(present.len() as u64) as usize;
                present.get(pick).copied().unwrap_or(H100)
            };
            doc.push_str(&format!("  gpu: {{models: [{only}]}}\n"));
        }
        let mix_rack = mix_replicas > 1 && rng.chance(30);
        if (gang && knob.chance(30)) || (!gang && mix_rack) {
            doc.push_str("  topology: {required: rack}\n");
        }
        let mut limit = rng.chance(80).then(|| 1 + rng.below(72));
        if starting && let Some(percent) = shape.past_limit_percent {
            let past = knob.chance(u64::from(percent));
            if past && limit.is_none() {
                limit = Some(1 + knob.below(72));
            }
            if let Some(hours) = limit {
                limits.insert(name.clone(), (hours * 60, past));
            }
        }
        if let Some(hours) = limit {
            doc.push_str(&format!("  timeLimit: {hours}h\n"));
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
            let mut age = rng.below(600);
            // A job past its limit started up to two hours before it ran
            // out; the others within theirs.
            match limits.get(&job) {
                Some(&(limit, true)) => age = limit + 1 + knob.below(120),
                Some(&(limit, false)) => age = age.min(limit.saturating_sub(1)),
                None => {}
            }
            observed.running.push(RunningJob {
                job,
                started: now - chrono::Duration::minutes(age as i64),
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
        let fleet = load(&a);
        assert_eq!(fleet.jobs.len(), 350);
        assert_eq!(fleet.queues.len(), 1 + 2 + 12);
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
        assert_eq!(pools.matches(MODELS[1].0).count(), 1);
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

    fn load(g: &Generated) -> model::spec::Fleet {
        let sources: Vec<SourceFile> = g
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
        loaded.fleet
    }

    fn small() -> FleetSize {
        FleetSize {
            nodes: 64,
            gpus_per_node: 8,
            pending: 600,
            running: 400,
            leaves: 40,
            seed: 11,
        }
    }

    #[test]
    fn the_default_shape_is_the_original_fleet() {
        let size = small();
        assert_eq!(
            generate_shaped(size, Shape::default(), 16, now()).files,
            generate_in_pools(size, 16, now()).files
        );
        // The original class mix: 5 / 20 / 55 / 20, "normal" the default.
        let classes = Shape::default().classes();
        let shares: Vec<u32> = classes.iter().map(|c| c.share).collect();
        assert_eq!(shares, [5, 20, 55, 20]);
        assert_eq!(
            classes.iter().find(|c| c.default).map(|c| c.name.as_str()),
            Some("normal")
        );
    }

    #[test]
    fn a_share_of_jobs_past_their_limit_is_what_the_shape_asks() {
        let past_share = |percent: Option<u32>| {
            let shape = Shape {
                past_limit_percent: percent,
                ..Shape::default()
            };
            let g = generate_shaped(small(), shape, 1000, now());
            let fleet = load(&g);
            let past = g
                .observed
                .running
                .iter()
                .filter(|r| {
                    let job = fleet.jobs.iter().find(|j| j.metadata.name == r.job);
                    job.and_then(|j| j.spec.time_limit)
                        .is_some_and(|limit| model::time::after(r.started, limit) < now())
                })
                .count();
            past as f64 / g.observed.running.len() as f64
        };
        let third = past_share(Some(33));
        assert!((0.25..0.42).contains(&third), "{third}");
        assert_eq!(past_share(Some(0)), 0.0);
        assert_eq!(past_share(Some(100)), 1.0);
        assert!(past_share(None) < 0.15);
    }

    #[test]
    fn classes_queue_levels_gangs_and_models_are_as_asked() {
        for classes in [1, 2, 4, 8] {
            for preemptible in [50, 95, 100] {
                let shape = Shape {
                    priority_classes: classes,
                    preemptible_percent: preemptible,
                    ..Shape::default()
                };
                let table = shape.classes();
                assert_eq!(table.len(), classes as usize);
                assert_eq!(table.iter().map(|c| c.share).sum::<u32>(), 100);
                assert_eq!(table.iter().filter(|c| c.default).count(), 1);
                let fleet = load(&generate_shaped(small(), shape, 1000, now()));
                assert_eq!(fleet.priority_classes.len(), classes as usize);
                if classes > 1 {
                    let fixed: u32 = table
                        .iter()
                        .filter(|c| !c.preemptible)
                        .map(|c| c.share)
                        .sum();
                    assert_eq!(fixed, 100 - preemptible);
                }
            }
        }
        for levels in 2..=5 {
            let shape = Shape {
                queue_levels: levels,
                ..Shape::default()
            };
            let fleet = load(&generate_shaped(small(), shape, 1000, now()));
            let parent = |name: &str| {
                fleet
                    .queues
                    .iter()
                    .find(|q| q.metadata.name == name)
                    .and_then(|q| q.spec.parent.clone())
            };
            let depth = |leaf: &str| {
                let mut n = 1;
                let mut at = leaf.to_string();
                while let Some(p) = parent(&at) {
                    n += 1;
                    at = p;
                }
                n
            };
            let leaves: Vec<&str> = fleet
                .queues
                .iter()
                .map(|q| q.metadata.name.as_str())
                .filter(|n| n.starts_with("team-"))
                .collect();
            assert_eq!(leaves.len(), 40);
            assert!(leaves.iter().all(|l| depth(l) == levels), "levels {levels}");
        }
        let gangs = Shape {
            gang_percent: Some(30),
            gang_nodes: 6,
            ..Shape::default()
        };
        let fleet = load(&generate_shaped(small(), gangs, 1000, now()));
        let big = fleet
            .jobs
            .iter()
            .filter(|j| j.spec.replicas >= 2 && j.spec.gpus_per_replica == 8)
            .count();
        assert!((200..=400).contains(&big), "{big} gangs of 1,000 jobs");
        assert!(fleet.jobs.iter().all(|j| j.spec.replicas <= 6));
        for models in 1..=4 {
            let shape = Shape {
                models,
                ..Shape::default()
            };
            let fleet = load(&generate_shaped(small(), shape, 8, now()));
            let mut seen: Vec<&str> = fleet
                .pools
                .iter()
                .map(|p| p.spec.gpu.model.as_str())
                .collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), models as usize, "models {models}");
        }
    }
}
