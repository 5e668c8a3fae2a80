//! `gitfleet apply`: one reconcile iteration, the plan shown first and
//! carried out when approved (as `terraform apply`).

use crate::executor::runtime;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use miette::{IntoDiagnostic, Result, miette};
use reconciler::diag::Diagnostic;
use reconciler::reconcile::prune::PrunePolicy;
use reconciler::reconcile::run::{Shared, record};
use reconciler::reconcile::{ActionResult, Prepared, Reconciler, Refusal, Revision};

use crate::executor::AnyExecutor;

use super::args::OutputArgs;
use super::reconcile::{Setup, SourceArgs, setup};
use crate::render::{PlanReport, emit};

/// Arguments of `gitfleet apply`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("output", |a| a.help("How the plan is shown")))]
#[command(mut_arg("path", |a| a.help("The fleet repository (inside a Git repository the committed specs of --branch are applied; elsewhere the directory as it is), or a saved plan written by `plan --state DIR --out FILE`: exactly its actions are carried out, without asking, or none when what it was computed from changed")))]
pub struct Args {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Carry the plan out without asking (required when not on a terminal).
    #[arg(long)]
    pub auto_approve: bool,
    /// Apply a revision that prune protection refuses: one without
    /// documents, or one that removes many running jobs from Git (jobs
    /// annotated gitfleet/prevent-prune stay protected).
    #[arg(long)]
    pub allow_prune: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `gitfleet apply` (with a saved plan file: `apply_saved`).
pub fn run(args: &Args) -> Result<ExitCode> {
    if let Some(saved) = super::apply_saved::read_if_saved(&args.source.path)? {
        return super::apply_saved::run(args, saved);
    }
    let Setup {
        mut reconciler,
        mut clock,
    } = setup(&args.source)?;
    if args.allow_prune {
        reconciler = allow_prune(reconciler);
    }
    let now = clock.now();
    let started = Instant::now();
    let runtime = runtime()?;
    let prepared = runtime
        .block_on(reconciler.prepare(now))
        .into_diagnostic()?;
    let iteration = &prepared.iteration;
    if let Some((revision, diagnostics)) = &iteration.refused {
        runtime.block_on(reconciler.release());
        return Err(refused(&reconciler, revision, diagnostics));
    }
    let Some(plan) = &iteration.plan else {
        runtime.block_on(reconciler.release());
        return Err(miette!("no valid fleet to apply"));
    };
    let source = args.source.path.display().to_string();
    emit(
        &PlanReport {
            plan,
            source: &source,
        },
        args.output.output,
    )?;
    let config = reconciler.config_changes();
    print_config(reconciler.executor_name(), &config);
    let nothing_to_do = plan.actions.is_empty() && config.is_empty();
    if !nothing_to_do && !args.auto_approve && !confirm()? {
        runtime.block_on(reconciler.release());
        println!("Apply cancelled.");
        return Ok(ExitCode::FAILURE);
    }
    carry_out(
        &mut reconciler,
        &runtime,
        prepared,
        started,
        &args.source.state,
    )
}

/// The reconciler with prune protection lifted (`--allow-prune`).
pub(super) fn allow_prune(reconciler: Reconciler<AnyExecutor>) -> Reconciler<AnyExecutor> {
    reconciler.with_prune_policy(PrunePolicy {
        allow: true,
        ..PrunePolicy::default()
    })
}

/// The error for a refused newest revision (its problems printed first).
pub(super) fn refused(
    reconciler: &Reconciler<AnyExecutor>,
    revision: &Revision,
    diagnostics: &[Diagnostic],
) -> miette::Report {
    for d in diagnostics {
        eprintln!("{d}");
    }
    // Refused before (by the loop): the reason is in the state.
    let recorded = if diagnostics.is_empty() {
        let error = reconciler
            .store()
            .revisions()
            .ok()
            .and_then(|r| r.last_error);
        if let Some(error) = &error {
            eprintln!("{error}");
        }
        error.unwrap_or_default()
    } else {
        String::new()
    };
    let reason = diagnostics
        .first()
        .map_or(Refusal::of(&recorded), |d| Refusal::of(&d.message));
    match reason {
        Refusal::Prune => miette!(
            "revision {} is refused by prune protection; nothing applied",
            revision.short()
        ),
        Refusal::Signature => miette!(
            "revision {} is refused: its commit signature does not verify; nothing applied",
            revision.short()
        ),
        Refusal::Invalid | Refusal::Crashed => miette!(
            "revision {} is invalid; nothing applied (run `gitfleet validate`)",
            revision.short()
        ),
    }
}

/// Carries the prepared plan out, records the iteration and sums it up.
pub(super) fn carry_out(
    reconciler: &mut Reconciler<AnyExecutor>,
    runtime: &tokio::runtime::Runtime,
    prepared: Prepared,
    started: Instant,
    state: &std::path::Path,
) -> Result<ExitCode> {
    let nothing_to_do = prepared
        .iteration
        .plan
        .as_ref()
        .is_none_or(|p| p.actions.is_empty())
        && reconciler.config_changes().is_empty();
    // Even with nothing to do, the iteration is recorded (revision, status).
    let applied = runtime.block_on(async {
        let applied = reconciler.apply(prepared).await;
        // The Lease (kube executor) goes to the next replica at once.
        reconciler.release().await;
        applied
    });
    let applied = applied.into_diagnostic()?;
    record(reconciler, &applied, started, &Shared::default(), state).into_diagnostic()?;
    if nothing_to_do {
        println!("Nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    let failed = applied
        .executed
        .iter()
        .filter(|e| matches!(e.result, ActionResult::Failed(_)))
        .count();
    for done in &applied.executed {
        if let ActionResult::Failed(e) = &done.result {
            eprintln!("error: {} failed: {e}", done.action.kind());
        }
    }
    if !applied.config.is_empty() {
        println!(
            "{} configuration: {} change{} made.",
            reconciler.executor_name(),
            applied.config.len(),
            if applied.config.len() == 1 { "" } else { "s" }
        );
    }
    println!(
        "Apply complete! {} action{} carried out, {failed} failed.",
        applied.executed.len() - failed,
        if applied.executed.len() - failed == 1 {
            ""
        } else {
            "s"
        }
    );
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Shows the executor's configuration changes (the Slurm executor's
/// accounts and QOS) after the plan.
pub(super) fn print_config(executor: &str, changes: &[String]) {
    if changes.is_empty() {
        return;
    }
    println!("\n{executor} configuration changes ({}):", changes.len());
    for line in changes {
        println!("  {}", reconciler::text::escape_controls(line));
    }
}

/// Asks on the terminal, as `terraform apply` does.
fn confirm() -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(miette!(
            "not on a terminal: pass --auto-approve to apply without confirmation"
        ));
    }
    print!("\nDo you want to perform these actions? Only 'yes' will be accepted: ");
    std::io::stdout().flush().into_diagnostic()?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .into_diagnostic()?;
    Ok(answer.trim() == "yes")
}
