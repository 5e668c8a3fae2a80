//! The one input loader of `plan`, `plan --base` and `explain`: the specs
//! from a path or a Git revision (validated, problems printed as
//! `FILE:LINE:COL: message`), the observed state (a file, or the inventory
//! derived from the pools) and the decision time.

use std::path::Path;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::diag::Diagnostic;
use reconciler::load::{fs::read_fleet_dir, load_fleet, parse_observed};
use reconciler::observed::{ObservedState, Timestamp, derive_inventory};
use reconciler::reconcile::live::OBSERVED_FILE;
use reconciler::spec::Fleet;

use super::args::{InputArgs, ObservedArgs, SpecArgs, TimeArgs};

/// What a plan is computed from.
pub struct Input {
    /// The valid fleet.
    pub fleet: Fleet,
    /// The observed state, or the inventory derived from the fleet's pools.
    pub observed: ObservedState,
    /// The decision time.
    pub now: Timestamp,
    /// The commit the specs were read at: with `--rev`, or the work tree's
    /// `HEAD` when the fleet's files on disk are that commit's.
    pub revision: Option<String>,
}

/// Loads specs, observed state and time; `None` when the specs or the
/// observed state are invalid (their problems are printed to stderr).
///
/// The observed file is parsed on its own thread while the fleet loads: the
/// load's single-threaded stretches leave a core free for it.
pub fn load(args: &InputArgs) -> Result<Option<Input>> {
    check_state(&args.observed)?;
    let file = args.observed.file();
    std::thread::scope(|scope| {
        // No thread to be had: parsed here after the fleet.
        let observed_job = file.as_deref().map(|file| {
            std::thread::Builder::new()
                .spawn_scoped(scope, move || parse_observed_file(file))
                .map_err(|_| file)
        });
        let loaded = load_specs(&args.specs)?;
        let observed = observed_job
            .map(|job| match job {
                Ok(job) => job
                    .join()
                    .map_err(|_| miette!("reading the observed state failed")),
                Err(file) => Ok(parse_observed_file(file)),
            })
            .transpose()?;
        let Some((fleet, revision)) = loaded else {
            return Ok(None);
        };
        let observed = match observed.transpose()? {
            Some(Ok(state)) => state,
            Some(Err(diags)) => {
                print_diagnostics(&diags);
                return Ok(None);
            }
            None => derive_inventory(&fleet),
        };
        let now = now(&args.time, &observed)?;
        Ok(Some(Input {
            fleet,
            observed,
            now,
            revision,
        }))
    })
}

/// The valid fleet (and its commit with `--rev`); `None` when invalid (its
/// problems are printed).
pub fn load_specs(args: &SpecArgs) -> Result<Option<(Fleet, Option<String>)>> {
    Ok(match args.revision() {
        Some(rev) => {
            let source = super::git::open_specs(args)?;
            let specs = super::git::read_at(&source, rev)?;
            let loaded = super::git::load_reporting(&specs, &args.path);
            if !loaded.is_valid() {
                return Ok(None);
            }
            Some((loaded.fleet, Some(specs.commit)))
        }
        None => load_valid_fleet(&args.path)?.map(|fleet| (fleet, work_tree_commit(&args.path))),
    })
}

/// The commit of the files on disk when PATH lies in a Git work tree whose
/// fleet files have no changes (`GitSource::work_tree_commit`); `None`
/// outside Git or with changes.
fn work_tree_commit(path: &Path) -> Option<String> {
    reconciler::source::GitSource::discover(path)
        .ok()?
        .work_tree_commit()
}

/// Loads a fleet repository from disk; prints its problems to stderr and
/// returns `None` when it is invalid.
fn load_valid_fleet(path: &Path) -> Result<Option<Fleet>> {
    let files = read_fleet_dir(path).into_diagnostic()?;
    let loaded = load_fleet(&files);
    if loaded.is_valid() {
        return Ok(Some(loaded.fleet));
    }
    print_diagnostics(&loaded.diagnostics);
    eprintln!(
        "invalid fleet: {} error{}; run `gitfleet validate {}`",
        loaded.diagnostics.len(),
        if loaded.diagnostics.len() == 1 {
            ""
        } else {
            "s"
        },
        path.display()
    );
    Ok(None)
}

/// The observed state of `--observed` or `--state`, else `derive()`; `None`
/// when the file is invalid (its problems are printed).
pub fn observed_or(
    args: &ObservedArgs,
    derive: impl FnOnce() -> ObservedState,
) -> Result<Option<ObservedState>> {
    check_state(args)?;
    match args.file() {
        Some(file) => read_observed(&file),
        None => Ok(Some(derive())),
    }
}

/// `--state DIR` needs a live state recorded there.
fn check_state(args: &ObservedArgs) -> Result<()> {
    if let (None, Some(dir)) = (&args.observed, &args.state)
        && !dir.join(OBSERVED_FILE).is_file()
    {
        return Err(miette!(
            "--state {}: no live state recorded there ({OBSERVED_FILE} is missing): run `gitfleet reconcile` or `gitfleet apply` with --state {} first",
            dir.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Reads an observed-state file; prints its problems and returns `None` when invalid.
pub fn read_observed(file: &Path) -> Result<Option<ObservedState>> {
    Ok(match parse_observed_file(file)? {
        Ok(state) => Some(state),
        Err(diags) => {
            print_diagnostics(&diags);
            None
        }
    })
}

/// Reads and parses an observed-state file without printing: the inner
/// `Err` holds its problems.
fn parse_observed_file(file: &Path) -> Result<Result<ObservedState, Vec<Diagnostic>>> {
    let text = std::fs::read_to_string(file)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot read {}", file.display()))?;
    Ok(parse_observed(&file.display().to_string(), &text))
}

/// The decision time of `--now`, else the observed state's time, else the clock.
pub fn now(args: &TimeArgs, observed: &ObservedState) -> Result<Timestamp> {
    resolve_now(args.now.as_deref(), observed)
}

/// `now` (RFC 3339), else the observed state's time, else the clock (whole seconds).
pub fn resolve_now(now: Option<&str>, observed: &ObservedState) -> Result<Timestamp> {
    if let Some(text) = now {
        return chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| {
                miette!("--now {text:?}: not an RFC 3339 time like 2026-11-21T10:00:00Z ({e})")
            });
    }
    if let Some(t) = observed.time {
        return Ok(t);
    }
    let now = chrono::Utc::now();
    Ok(chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now))
}

fn print_diagnostics(diags: &[Diagnostic]) {
    for d in diags {
        eprintln!("{d}");
    }
}
