//! `gitfleet`: the command line. Parsing and printing only; the work is done
//! by the `reconciler` library.

mod commands;

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
    /// Check a fleet repository: schema, references, quota arithmetic, policies.
    ///
    /// Prints one `FILE:LINE:COL: message` line per problem and a summary.
    /// Exit status: 0 valid, 1 invalid.
    Validate {
        /// The fleet repository (a directory or a single YAML file).
        #[arg(default_value = ".")]
        path: PathBuf,
    },
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
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { path } => commands::validate::run(&path),
        Command::Schema { out, check } => commands::schema::run(&out, check),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
