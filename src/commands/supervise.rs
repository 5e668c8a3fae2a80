//! `gitfleet __supervise` (hidden): the supervisor of one replica of the
//! local executor, which starts it as `gitfleet __supervise --claim FILE
//! --exit-file FILE -- PROGRAM [ARG]...` (see `exec::local::supervisor`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use reconciler::exec::local::supervisor::{self, SupervisorArgs};

/// Arguments of `gitfleet __supervise`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The replica's claim file, created before it starts.
    #[arg(long, value_name = "FILE")]
    pub claim: PathBuf,
    /// Where the replica's exit code is written.
    #[arg(long, value_name = "FILE")]
    pub exit_file: PathBuf,
    /// The replica's argv, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Supervises the replica to its end.
pub fn run(args: &Args) -> ExitCode {
    ExitCode::from(supervisor::supervise(&SupervisorArgs {
        claim: args.claim.clone(),
        exit_file: args.exit_file.clone(),
        command: args.command.clone(),
    }))
}
