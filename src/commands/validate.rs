//! `gitfleet validate [PATH] [--rev REV]`

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result};
use reconciler::load::{fs::read_fleet_dir, load_fleet};
use reconciler::spec::Kind;

pub fn run(path: &Path, rev: Option<&str>) -> Result<ExitCode> {
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
