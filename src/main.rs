//! `gitfleet`: the command line. Parsing and printing only; the work is done
//! by the `reconciler` library.

mod commands;
mod executor;

/// mimalloc instead of glibc's malloc: loading a large fleet allocates and
/// frees millions of small YAML nodes and strings, on several threads. Built
/// without transparent huge pages: zeroing 2 MiB pages on first touch cost
/// more than it saved (`plan` on 150k jobs: 2.3 s glibc, 1.6 s mimalloc no-THP).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Declarative GitOps reconciler for GPU fleets.
#[derive(Debug, Parser)]
#[command(name = "gitfleet", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Keep the fleet converged on Git: watch, observe, plan, apply, record.
    ///
    /// Reads the committed specs of --branch (or a plain directory), plans
    /// with the engine and carries the plan out through the executor, every
    /// --interval or when POST /hooks/git arrives. A revision that fails
    /// validation is never applied; the last valid one stays in force.
    Reconcile(commands::reconcile::ReconcileArgs),
    /// One reconcile iteration: show the plan, ask, carry it out.
    Apply(commands::reconcile::ApplyArgs),
    /// The reconciler's status: revisions, jobs, utilization, pending reasons.
    Status {
        /// The state directory.
        #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
        state: PathBuf,
        /// Output format (text or json).
        #[arg(short, long, value_enum, default_value = "text")]
        output: commands::OutputFormat,
    },
    /// Check a fleet repository: schema, references, quota arithmetic, policies.
    ///
    /// Prints one `FILE:LINE:COL: message` line per problem and a summary.
    /// Exit status: 0 valid, 1 invalid.
    Validate {
        /// The fleet repository (a directory or a single YAML file).
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Read the specs from this Git revision (a branch, tag, commit or
        /// `HEAD~1`) instead of the files on disk; PATH may be a
        /// subdirectory of the repository, a bare repository or a worktree.
        #[arg(long, value_name = "REV")]
        rev: Option<String>,
    },
    /// Compute the plan: placements, preemptions, scaling, drains, pending reasons.
    ///
    /// Exit status: 0; with --detailed-exitcode 0 no actions, 2 actions, 1 error.
    Plan {
        /// The fleet repository (a directory or a single YAML file).
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Observed state (YAML or JSON); without it the inventory is derived from the pools.
        #[arg(long, value_name = "FILE")]
        observed: Option<PathBuf>,
        /// Decision time (RFC 3339); default: the observed state's time, else now.
        #[arg(long, value_name = "TIME")]
        now: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "text")]
        output: commands::OutputFormat,
        /// Exit 2 when the plan has actions, 0 when it has none (with
        /// --base: 2 when the change changes specs or plan).
        #[arg(long)]
        detailed_exitcode: bool,
        /// Read the specs from this Git revision instead of the files on
        /// disk; PATH may be a subdirectory of the repository, a bare
        /// repository or a worktree.
        #[arg(long, value_name = "REV")]
        rev: Option<String>,
        /// Preview a change: the spec diff BASE → REV (default HEAD), object
        /// by object, and how the plan changes against the same observed state.
        #[arg(long, value_name = "BASE")]
        base: Option<String>,
    },
    /// Who changed what, when: `git log` of the fleet as semantic diffs.
    ///
    /// Lists, newest first, every commit that changes the fleet's objects (or
    /// the one named), with author, date, commit id, message and what
    /// changed; objects are followed across files by kind and name.
    History(commands::history::HistoryArgs),
    /// Explain why a job is pending, placed where it is, or preempted.
    ///
    /// Shows the quota arithmetic along its queue path, the candidate nodes
    /// and why each was rejected, and its position in fair-share order.
    Explain {
        /// The job's name.
        job: String,
        /// The fleet repository.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Observed state (YAML or JSON).
        #[arg(long, value_name = "FILE")]
        observed: Option<PathBuf>,
        /// Decision time (RFC 3339).
        #[arg(long, value_name = "TIME")]
        now: Option<String>,
        /// Output format (text or json).
        #[arg(short, long, value_enum, default_value = "text")]
        output: commands::OutputFormat,
    },
    /// Write a synthetic fleet (repo/ and observed.yaml) for benchmarks.
    Generate {
        /// Directory to write into.
        #[arg(long, default_value = "fleet-gen")]
        out: PathBuf,
        /// Nodes in all.
        #[arg(long, default_value_t = 100)]
        nodes: u32,
        /// GPUs per node.
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u32,
        /// Jobs left pending.
        #[arg(long, default_value_t = 1000)]
        pending: u32,
        /// Jobs started before the snapshot (those that fit).
        #[arg(long, default_value_t = 500)]
        running: u32,
        /// Leaf queues.
        #[arg(long, default_value_t = 60)]
        leaves: u32,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The snapshot's time (RFC 3339).
        #[arg(long)]
        now: Option<String>,
        /// Skip settling: every pending job that outranks a running one
        /// preempts in the first plan (a worst case).
        #[arg(long)]
        storm: bool,
    },
    /// This host's GPUs through NVML, as an observed-state document.
    ///
    /// Prints DESIGN §3's shape with one node (this host), ready to commit
    /// or upload; `inventory merge` joins per-host snapshots. Without an
    /// NVIDIA driver it fails with one line: use `plan --observed FILE`.
    Inventory(commands::inventory::InventoryArgs),
    /// Write the JSON Schemas of the document kinds.
    Schema {
        /// Directory to write `<kind>.schema.json` files into.
        #[arg(long, default_value = "schemas")]
        out: PathBuf,
        /// Only compare with the files in `--out`; exit 1 when they differ.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { path, rev } => commands::validate::run(&path, rev.as_deref()),
        Command::Plan {
            path,
            observed,
            now,
            output,
            detailed_exitcode,
            rev,
            base,
        } => commands::plan::run(&commands::plan::PlanArgs {
            path: &path,
            observed: observed.as_deref(),
            now: now.as_deref(),
            output,
            detailed_exitcode,
            rev: rev.as_deref(),
            base: base.as_deref(),
        }),
        Command::Explain {
            job,
            path,
            observed,
            now,
            output,
        } => commands::explain::run(&job, &path, observed.as_deref(), now.as_deref(), output),
        Command::Generate {
            out,
            nodes,
            gpus_per_node,
            pending,
            running,
            leaves,
            seed,
            now,
            storm,
        } => commands::generate::run(
            reconciler::generate::FleetSize {
                nodes,
                gpus_per_node,
                pending,
                running,
                leaves,
                seed,
            },
            &out,
            now.as_deref(),
            !storm,
        ),
        Command::Schema { out, check } => commands::schema::run(&out, check),
        Command::History(args) => commands::history::run(&args),
        Command::Inventory(args) => commands::inventory::run(&args),
        Command::Reconcile(args) => commands::reconcile::run_reconcile(&args),
        Command::Apply(args) => commands::reconcile::run_apply(&args),
        Command::Status { state, output } => commands::reconcile::run_status(&state, output),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Rust ignores SIGPIPE, so `gitfleet plan | head` would panic on a closed
/// pipe; a command-line tool should just stop, as `cat` does.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; setting
    // the default disposition of SIGPIPE has no other effect on the program.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
