//! What varies a generated fleet's workload besides its size: how many jobs
//! run past their time limit, how much work is preemptible, the priority
//! classes, the queue tree's depth, multi-node gangs and GPU models. The
//! default is the benchmarks' original mix, drawn exactly as before.

use std::fmt::Write;

/// A workload's shape ([`super::generate_shaped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Percent of the jobs started before the snapshot that have run past
    /// their time limit (each given one); the others stay within theirs.
    /// `None`: as the job mix falls (a few percent).
    pub past_limit_percent: Option<u32>,
    /// Percent of jobs in preemptible priority classes (the rest in one
    /// class that is not).
    pub preemptible_percent: u32,
    /// Priority classes, at least 1.
    pub priority_classes: u32,
    /// Levels of the queue tree, the root and the leaves included (2: teams
    /// under the root; 3: departments of ten teams; each level more groups
    /// four of the level below).
    pub queue_levels: u32,
    /// Percent of jobs made gangs of 2 to [`Shape::gang_nodes`] whole nodes,
    /// besides the trace-like mix's own; `None`: the mix alone.
    pub gang_percent: Option<u32>,
    /// The most nodes a gang of [`Shape::gang_percent`] spans (at least 2).
    pub gang_nodes: u32,
    /// GPU models, 1 to [`MODELS`]'s length (2: one pool in four A100).
    pub models: u32,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            past_limit_percent: None,
            preemptible_percent: 95,
            priority_classes: 4,
            queue_levels: 3,
            gang_percent: None,
            gang_nodes: 4,
            models: 2,
        }
    }
}

/// The GPU models pools are made of, with their NVLink layout.
pub const MODELS: [(&str, &str); 4] = [
    ("H100-SXM-80GB", "full"),
    ("A100-SXM4-80GB", "pairs"),
    ("L40S-48GB", "none"),
    ("MI300X-192GB", "full"),
];

impl Shape {
    /// The models in use (at least one, at most all of [`MODELS`]).
    pub fn models(&self) -> &'static [(&'static str, &'static str)] {
        &MODELS[..(self.models.clamp(1, MODELS.len() as u32) as usize)]
    }

    /// The model of pool `p` (as an index into [`Shape::models`]): with two
    /// models one pool in four is the second.
    pub fn pool_model(&self, p: u32) -> usize {
        match self.models().len() {
            1 => 0,
            2 => usize::from(p % 4 == 3),
            n => p as usize % n,
        }
    }

    /// The priority classes, highest first, each with the percent of jobs
    /// that fall in it.
    pub fn classes(&self) -> Vec<Class> {
        let preemptible = self.preemptible_percent.min(100);
        let class = |name: String, value: i32, preemptible: bool, share: u32| Class {
            name,
            value,
            preemptible,
            default: false,
            share,
        };
        let mut classes = match self.priority_classes.max(1) {
            1 => vec![class("normal".into(), 100, true, 100)],
            4 => {
                // The original mix: 5 / 20 / 55 / 20 at 95 % preemptible.
                let high = preemptible * 20 / 95;
                let low = preemptible * 20 / 95;
                vec![
                    class("critical".into(), 1000, false, 100 - preemptible),
                    class("high".into(), 500, true, high),
                    class("normal".into(), 100, true, preemptible - high - low),
                    class("low".into(), 10, true, low),
                ]
            }
            n => {
                let lower = n - 1;
                let mut out = vec![class("critical".into(), 1000, false, 100 - preemptible)];
                for i in 0..lower {
                    let share = preemptible / lower + u32::from(i < preemptible % lower);
                    let value = (900 * (lower - i) / lower) as i32;
                    out.push(class(format!("prio-{i}"), value, true, share));
                }
                out
            }
        };
        // The default class: the one in the middle of the preemptible ones
        // (the original "normal").
        let middle = match classes.len() {
            1 => 0,
            4 => 2,
            n => 1 + (n - 1) / 2,
        };
        let last = classes.len() - 1;
        classes[middle.min(last)].default = true;
        classes
    }

    /// Which class a roll in 0..100 falls in.
    pub fn class_of(classes: &[Class], roll: u64) -> &Class {
        let mut upto = 0u64;
        for c in classes {
            upto += u64::from(c.share);
            if roll < upto {
                return c;
            }
        }
        &classes[classes.len() - 1]
    }

    /// The queue tree's documents: `org` at the root, the leaves
    /// `team-{d}-{t}` (leaf `l` is `team-{l / 10}-{l % 10}`), with
    /// guarantees of `per_model[i]` GPUs of model `i` split evenly down the
    /// tree and limits above them (150 % for departments, 200 % for teams).
    pub fn queues(&self, leaves: u32, per_model: &[u64]) -> String {
        let quota = |share: u64, slack: u64| -> String {
            let mut q = String::new();
            for (i, (model, _)) in self.models().iter().enumerate() {
                if per_model.get(i).copied().unwrap_or(0) > 0 {
                    let guaranteed = share * per_model[i] / 1000;
                    let _ = write!(
                        q,
                        "\n    - {{model: {model}, guaranteed: {guaranteed}, limit: {}}}",
                        guaranteed * slack / 100
                    );
                }
            }
            q
        };
        let doc =
            |out: &mut String, name: &str, parent: Option<&str>, weight: u64, quota: String| {
                let parent = parent.map(|p| format!("  parent: {p}\n  weight: {weight}\n"));
                let _ = write!(
                    out,
                    "{}kind: Queue\nmetadata: {{name: {name}}}\nspec:\n{}  quota:{quota}\n---\n",
                    super::HEADER,
                    parent.unwrap_or_default()
                );
            };
        let mut out = String::new();
        doc(&mut out, "org", None, 1, quota(1000, 100));
        let leaves = leaves.max(1);
        if self.queue_levels <= 2 {
            for l in 0..leaves {
                let (d, t) = (l / 10, l % 10);
                let share = 1000 / u64::from(leaves);
                doc(
                    &mut out,
                    &format!("team-{d}-{t}"),
                    Some("org"),
                    1 + u64::from(t % 4),
                    quota(share, 200),
                );
            }
            return out;
        }
        // Departments of ten teams, then groups of four of the level below
        // up to the root's children: `group-{level}-{k}`, level 0 the
        // highest.
        let depts = leaves.div_ceil(10);
        let mut counts = vec![depts];
        for _ in 3..self.queue_levels {
            let above = counts[counts.len() - 1].div_ceil(4);
            counts.push(above);
        }
        // counts[0] = departments, counts[k] = groups k levels above them.
        let groups = counts.len() - 1;
        let name_of = |k: usize, i: u32| -> String {
            if k == 0 {
                format!("dept-{i}")
            } else {
                format!("group-{}-{i}", groups - k)
            }
        };
        // Shares top-down: each queue's is its parent's over its siblings.
        let mut share_of: Vec<Vec<u64>> = vec![Vec::new(); counts.len()];
        for k in (0..counts.len()).rev() {
            for i in 0..counts[k] {
                let (parent_share, siblings) = if k == groups {
                    (1000, counts[k])
                } else {
                    let parent = i / 4;
                    let siblings = (counts[k] - parent * 4).min(4);
                    (share_of[k + 1][parent as usize], siblings)
                };
                share_of[k].push(parent_share / u64::from(siblings));
            }
        }
        for k in (1..counts.len()).rev() {
            for i in 0..counts[k] {
                let parent = if k == groups {
                    "org".to_string()
                } else {
                    name_of(k + 1, i / 4)
                };
                doc(
                    &mut out,
                    &name_of(k, i),
                    Some(&parent),
                    1 + u64::from(i % 3),
                    quota(share_of[k][i as usize], 125),
                );
            }
        }
        for d in 0..depts {
            let parent = if groups == 0 {
                "org".to_string()
            } else {
                name_of(1, d / 4)
            };
            let dept_share = share_of[0][d as usize];
            doc(
                &mut out,
                &format!("dept-{d}"),
                Some(&parent),
                1 + u64::from(d % 3),
                quota(dept_share, 150),
            );
            let teams = (leaves - d * 10).min(10);
            for t in 0..teams {
                doc(
                    &mut out,
                    &format!("team-{d}-{t}"),
                    Some(&format!("dept-{d}")),
                    1 + u64::from(t % 4),
                    quota(dept_share / u64::from(teams), 200),
                );
            }
        }
        out
    }
}

/// A priority class of a generated fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// Its name.
    pub name: String,
    /// Its priority value.
    pub value: i32,
    /// Whether its jobs may be preempted.
    pub preemptible: bool,
    /// Whether jobs that name no class fall in it.
    pub default: bool,
    /// Percent of generated jobs in it.
    pub share: u32,
}
