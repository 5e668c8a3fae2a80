//! `gitfleet generate`: write a synthetic fleet repository and observed state
//! (for benchmarks and trying gitfleet at scale).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr};
use reconciler::generate::{FleetSize, Shape, generate_shaped, settle};

use super::input::resolve_now;

/// Arguments of `gitfleet generate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write into.
    #[arg(long, default_value = "fleet-gen")]
    pub out: PathBuf,
    /// Nodes in all.
    #[arg(long, default_value_t = 100)]
    pub nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Jobs left pending.
    #[arg(long, default_value_t = 1000)]
    pub pending: u32,
    /// Jobs started before the snapshot (those that fit).
    #[arg(long, default_value_t = 500)]
    pub running: u32,
    /// Leaf queues.
    #[arg(long, default_value_t = 60)]
    pub leaves: u32,
    /// Nodes per pool, at most (one pool in four is A100).
    #[arg(long, default_value_t = 1000)]
    pub pool_nodes: u32,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The snapshot's time (RFC 3339).
    #[arg(long)]
    pub now: Option<String>,
    /// Skip settling: every pending job that outranks a running one
    /// preempts in the first plan (a worst case).
    #[arg(long)]
    pub storm: bool,
    /// Percent of the started jobs that have run past their time limit
    /// (default: as the job mix falls, a few percent).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub past_limit: Option<u32>,
    /// Percent of jobs in preemptible priority classes.
    #[arg(long, default_value_t = 95, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub preemptible: u32,
    /// Priority classes.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub priority_classes: u32,
    /// Levels of the queue tree, root and teams included (each level above
    /// departments groups four).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=8))]
    pub queue_levels: u32,
    /// Percent of jobs made gangs of 2 to --gang-nodes whole nodes, besides
    /// the job mix's own.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub gangs: Option<u32>,
    /// The most nodes such a gang spans.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub gang_nodes: u32,
    /// GPU models (2: one pool in four A100; more: pools take them in turn).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub models: u32,
}

/// Runs `gitfleet generate`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let size = FleetSize {
        nodes: args.nodes,
        gpus_per_node: args.gpus_per_node,
        pending: args.pending,
        running: args.running,
        leaves: args.leaves,
        seed: args.seed,
    };
    let now = resolve_now(args.now.as_deref(), &Default::default())?;
    let shape = Shape {
        past_limit_percent: args.past_limit,
        preemptible_percent: args.preemptible,
        priority_classes: args.priority_classes,
        queue_levels: args.queue_levels,
        gang_percent: args.gangs,
        gang_nodes: args.gang_nodes,
        models: args.models,
    };
    let mut generated = generate_shaped(size, shape, args.pool_nodes, now);
    if !args.storm {
        settle(&mut generated, 2, now);
    }
    let out: &Path = &args.out;
    let repo = out.join("repo");
    for (path, text) in &generated.files {
        let file = repo.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .into_diagnostic()
                .wrap_err_with(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&file, text)
            .into_diagnostic()
            .wrap_err_with(|| format!("cannot write {}", file.display()))?;
    }
    let observed = out.join("observed.yaml");
    let text = serde_saphyr::to_string(&generated.observed).into_diagnostic()?;
    std::fs::write(&observed, text)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot write {}", observed.display()))?;
    let json = out.join("observed.json");
    let text = serde_json::to_string(&generated.observed).into_diagnostic()?;
    std::fs::write(&json, text)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot write {}", json.display()))?;
    println!(
        "wrote {} ({} files: {} nodes, {} jobs, {} running) and {} (also as JSON)",
        repo.display(),
        generated.files.len(),
        size.nodes,
        size.pending + size.running,
        generated.running,
        observed.display()
    );
    Ok(ExitCode::SUCCESS)
}
