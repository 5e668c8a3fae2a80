//! `gitfleet validate [PATH] [--rev REV]`

use std::collections::BTreeSet;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result};
use reconciler::load::{fs::read_fleet_dir, load_fleet};
use reconciler::spec::Kind;

use super::args::SpecArgs;

/// Arguments of `gitfleet validate`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("rev", |a| a.help(
    "Read the specs from this Git revision (a branch, tag, commit or `HEAD~1`) \
     instead of the files on disk; PATH may be a subdirectory of the repository, \
     a bare repository or a worktree"
)))]
pub struct Args {
    #[command(flatten)]
    pub specs: SpecArgs,
}

/// Runs `gitfleet validate`: every problem as `FILE:LINE:COL: message` and a
/// summary line on stdout; exits 1 when the fleet is invalid.
pub fn run(args: &Args) -> Result<ExitCode> {
    let SpecArgs { path, rev } = &args.specs;
    let (files, at) = match rev {
        Some(rev) => {
            let source = super::git::open(path)?;
            let specs = super::git::read_at(&source, rev)?;
            let at = format!(
                " at {rev} ({})",
                reconciler::source::short_id(&specs.commit)
            );
            (specs.files, at)
        }
        None => (read_fleet_dir(path).into_diagnostic()?, String::new()),
    };
    let loaded = load_fleet(&files);
    if loaded.is_valid() {
        let counts: Vec<String> = Kind::ALL
            .iter()
            .map(|&k| format!("{} {k}", loaded.fleet.count(k)))
            .collect();
        let total: usize = Kind::ALL.iter().map(|&k| loaded.fleet.count(k)).sum();
        if total == 0 {
            println!(
                "valid: no {} documents found ({} YAML file{} read){at}",
                reconciler::spec::API_VERSION,
                files.len(),
                plural(files.len())
            );
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "valid: {total} document{} in {} file{} ({}){at}",
            plural(total),
            files.len(),
            plural(files.len()),
            counts.join(", ")
        );
        return Ok(ExitCode::SUCCESS);
    }
    for diag in &loaded.diagnostics {
        println!("{diag}");
    }
    let errors = loaded.diagnostics.len();
    let bad_files: BTreeSet<&str> = loaded.diagnostics.iter().map(|d| &*d.origin.file).collect();
    println!(
        "invalid: {errors} error{} in {} file{}{at}",
        plural(errors),
        bad_files.len(),
        plural(bad_files.len())
    );
    Ok(ExitCode::FAILURE)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
