//! `gitfleet schema [--out DIR] [--check]`

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr};
use reconciler::spec::schema::all_schema_files;

/// Arguments of `gitfleet schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write `<kind>.schema.json` files into.
    #[arg(long, default_value = "schemas")]
    pub out: PathBuf,
    /// Only compare with the files in `--out`; exit 1 when they differ.
    #[arg(long)]
    pub check: bool,
}

/// Runs `gitfleet schema`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let out = &args.out;
    let files = all_schema_files();
    if args.check {
        let stale: Vec<String> = files
            .iter()
            .filter(|(name, text)| {
                std::fs::read_to_string(out.join(name)).ok().as_deref() != Some(text)
            })
            .map(|(name, _)| out.join(name).display().to_string())
            .collect();
        if stale.is_empty() {
            println!("{}: {} schemas up to date", out.display(), files.len());
            return Ok(ExitCode::SUCCESS);
        }
        for path in &stale {
            println!(
                "{path}: stale; run `gitfleet schema --out {}`",
                out.display()
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    std::fs::create_dir_all(out)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot create {}", out.display()))?;
    for (name, text) in &files {
        let path = out.join(name);
        std::fs::write(&path, text)
            .into_diagnostic()
            .wrap_err_with(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
