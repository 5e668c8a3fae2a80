//! `gitfleet`: the command line. Parsing and printing only; the work is done
//! by the `reconciler` library. Each subcommand's arguments and `run` live
//! in `commands/<name>.rs`; results are printed by `render::emit`.

mod commands;
mod executor;
mod keep_freed;
mod render;

/// mimalloc instead of glibc's malloc: loading a large fleet allocates and
/// frees millions of small YAML nodes and strings, on several threads. Built
/// without transparent huge pages: zeroing 2 MiB pages on first touch cost
/// more than it saved (`plan` on 150k jobs: 2.3 s glibc, 1.6 s mimalloc no-THP).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Reconcile(commands::reconcile::Args),
    /// One reconcile iteration: show the plan, ask, carry it out (or carry
    /// out a saved plan from `plan --out`, exactly, or nothing).
    Apply(commands::apply::Args),
    /// The reconciler's status: revisions, jobs, utilization, pending reasons.
    Status(commands::status::Args),
    /// The reconciler's audit log: every action carried out and every event.
    ///
    /// Each entry has its time, the revision whose plan caused it, what
    /// happened (`place`, `preempt`, `terminate`, `cancel`, `succeeded`,
    /// `stopped`, …), the job, node or pool, and the reason. Filter with
    /// --job, --what, --revision, --last.
    Audit(commands::audit::Args),
    /// Serve the dashboard of a stopped loop's state directory, read only.
    ///
    /// The page the loop serves at `/`: revisions, queues against quota,
    /// pending jobs and their reasons, the fleet map and the action log.
    Serve(commands::serve::Args),
    /// Check a fleet repository: schema, references, quota arithmetic, policies.
    ///
    /// Prints one `FILE:LINE:COL: message` line per problem and a summary.
    /// Exit status: 0 valid, 1 invalid.
    Validate(commands::validate::Args),
    /// Compute the plan: placements, preemptions, scaling, drains, pending reasons.
    ///
    /// Exit status: 0; with --detailed-exitcode 0 no actions, 2 actions, 1 error.
    Plan(commands::plan::Args),
    /// Who changed what, when: `git log` of the fleet as semantic diffs.
    ///
    /// Lists, newest first, every commit that changes the fleet's objects (or
    /// the one named), with author, date, commit id, message and what
    /// changed; objects are followed across files by kind and name.
    History(commands::history::Args),
    /// Explain why a job is pending, placed where it is, or preempted.
    ///
    /// Shows the quota arithmetic along its queue path, the candidate nodes
    /// and why each was rejected, and its position in fair-share order. For
    /// a pending job, also what would let it run now (changes to the specs,
    /// each checked by planning with it) and its expected start (running
    /// jobs ending at their time limits, no new jobs).
    Explain(commands::explain::Args),
    /// Replay a job trace through the engine in virtual time (DESIGN §6a).
    ///
    /// Jobs arrive at their submit time; at each instant the world's
    /// completions come first, then arrivals, then one plan, carried out by
    /// the sim executor's world. Prints wait, JCT, allocation and per-queue
    /// figures; --make-fleet writes the fleet the trace implies.
    Simulate(commands::simulate::Args),
    /// Write a synthetic fleet (repo/ and observed.yaml) for benchmarks.
    Generate(commands::generate::Args),
    /// This host's GPUs through NVML, as an observed-state document.
    ///
    /// Prints DESIGN §3's shape with one node (this host), ready to commit
    /// or upload; `inventory merge` joins per-host snapshots. Without an
    /// NVIDIA driver it fails with one line: use `plan --observed FILE`.
    Inventory(commands::inventory::Args),
    /// Write the JSON Schemas of the document kinds.
    Schema(commands::schema::Args),
    /// The local executor's supervisor of one replica (internal).
    #[command(name = "__supervise", hide = true)]
    Supervise(commands::supervise::Args),
}

fn main() -> ExitCode {
    restore_sigpipe();
    keep_freed::keep_freed_memory();
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Supervise(args) => return commands::supervise::run(args),
        Command::Reconcile(args) => commands::reconcile::run(args),
        Command::Apply(args) => commands::apply::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Validate(args) => commands::validate::run(args),
        Command::Plan(args) => commands::plan::run(args),
        Command::History(args) => commands::history::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Inventory(args) => commands::inventory::run(args),
        Command::Schema(args) => commands::schema::run(args),
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
