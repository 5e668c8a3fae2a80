//! Running Slurm's commands: the [`Runner`] trait (a real process, or
//! recorded outputs in tests) and the `sacctmgr` client that reads the
//! accounting state and applies a [`Diff`].

use std::path::PathBuf;
use std::process::Command;

use crate::diff::Diff;
use crate::parse::{ACCOUNT_FORMAT, ASSOC_FORMAT, ParseError, QOS_FORMAT, parse_state};
use crate::state::SlurmState;

/// Why a Slurm command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The program could not be started (not installed?).
    #[error("cannot run {program}: {message}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        message: String,
    },
    /// It ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr (or stdout when stderr was empty).
        stderr: String,
    },
    /// Its output was not what was asked for.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// slurmrestd failed (`--slurm-rest`).
    #[error(transparent)]
    Rest(#[from] crate::rest::RestError),
    /// Several clusters and none chosen.
    #[error("the accounting database has clusters {0}: choose one with --slurm-cluster")]
    Cluster(String),
}

impl RunError {
    /// Whether Slurm could not be reached (the database or controller
    /// down): trying again later may help.
    pub fn is_unreachable(&self) -> bool {
        match self {
            RunError::Failed { stderr, .. } => [
                "Connection refused",
                "Unable to contact",
                "Problem talking to the database",
                "Socket timed out",
            ]
            .iter()
            .any(|m| stderr.contains(m)),
            RunError::Rest(e) => e.is_unreachable(),
            _ => false,
        }
    }
}

/// Runs a Slurm program with arguments and returns its standard output.
pub trait Runner: Send + Sync + std::fmt::Debug {
    /// Runs `program args…`.
    fn run(&self, program: &str, args: &[String]) -> Result<String, RunError>;
}

/// Runs the real programs (from `bin_dir` when given, else `PATH`).
#[derive(Debug, Clone, Default)]
pub struct ProcessRunner {
    /// Where the Slurm commands are.
    pub bin_dir: Option<PathBuf>,
    /// The cluster's `slurm.conf` (`SLURM_CONF`); default: the
    /// environment's, else Slurm's own default.
    pub conf: Option<PathBuf>,
}

impl Runner for ProcessRunner {
    fn run(&self, program: &str, args: &[String]) -> Result<String, RunError> {
        let path = match &self.bin_dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        };
        let mut command = Command::new(&path);
        command.args(args);
        if let Some(conf) = &self.conf {
            command.env("SLURM_CONF", conf);
        }
        let output = command.output().map_err(|e| RunError::Spawn {
            program: path.display().to_string(),
            message: e.to_string(),
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        Err(RunError::Failed {
            command: format!("{program} {}", args.join(" ")),
            status: output.status.to_string(),
            stderr: if stderr.is_empty() {
                stdout.trim().to_string()
            } else {
                stderr
            },
        })
    }
}

/// The `sacctmgr` client of one cluster.
#[derive(Debug)]
pub struct Sacctmgr<R> {
    runner: R,
    cluster: String,
    root: String,
}

impl<R: Runner> Sacctmgr<R> {
    /// A client for `cluster`, or for the only cluster the database has.
    pub fn connect(runner: R, cluster: Option<&str>, root: &str) -> Result<Self, RunError> {
        let cluster = match cluster {
            Some(c) => c.to_string(),
            None => {
                let out = runner.run(
                    "sacctmgr",
                    &args(&["-P", "-n", "show", "cluster", "format=Cluster"]),
                )?;
                let names: Vec<&str> = out
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                match names.as_slice() {
                    [one] => one.to_string(),
                    _ => return Err(RunError::Cluster(names.join(", "))),
                }
            }
        };
        Ok(Sacctmgr {
            runner,
            cluster,
            root: root.to_string(),
        })
    }

    /// The cluster it works on.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The accounts and QOS as Slurm has them now.
    pub fn read(&self) -> Result<SlurmState, RunError> {
        let cluster = format!("cluster={}", self.cluster);
        let assoc = self.runner.run(
            "sacctmgr",
            &args(&[
                "-P",
                "-n",
                "show",
                "assoc",
                "where",
                &cluster,
                &format!("format={ASSOC_FORMAT}"),
            ]),
        )?;
        let accounts = self.runner.run(
            "sacctmgr",
            &args(&[
                "-P",
                "-n",
                "show",
                "account",
                &format!("format={ACCOUNT_FORMAT}"),
            ]),
        )?;
        let qos = self.runner.run(
            "sacctmgr",
            &args(&["-P", "-n", "show", "qos", &format!("format={QOS_FORMAT}")]),
        )?;
        Ok(parse_state(&assoc, &accounts, &qos, &self.root)?)
    }

    /// The runner its commands go through.
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// Runs a diff's commands in order (`sacctmgr -i`, committed one by
    /// one, then the partitions' `scontrol`); stops at the first failure.
    /// Returns how many ran.
    pub fn apply(&self, diff: &Diff) -> Result<usize, RunError> {
        for (done, command) in diff.commands.iter().enumerate() {
            let mut argv = vec!["-i".to_string()];
            argv.extend(command.iter().cloned());
            tracing::info!(command = %command.join(" "), "sacctmgr");
            if let Err(e) = self.runner.run("sacctmgr", &argv) {
                tracing::warn!(done, error = %e, "sacctmgr command failed");
                return Err(e);
            }
        }
        for (done, command) in diff.scontrol.iter().enumerate() {
            tracing::info!(command = %command.join(" "), "scontrol");
            if let Err(e) = self.runner.run("scontrol", command) {
                tracing::warn!(done, error = %e, "scontrol command failed");
                return Err(e);
            }
        }
        Ok(diff.commands.len() + diff.scontrol.len())
    }
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
