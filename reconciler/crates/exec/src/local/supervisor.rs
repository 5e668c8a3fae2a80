//! The supervisor of one replica: the process the local executor starts,
//! which starts the replica as its child and outlives the reconciler.
//!
//! `SUPERVISOR --claim FILE --exit-file FILE -- PROGRAM [ARG]...`
//! (`gitfleet __supervise …`, or any binary that calls [`main`]):
//! 1. blocks the signals it forwards, so none is lost or acted on early;
//! 2. claims the replica: creates FILE ([`Claim::Process`], its pid and
//!    start time) atomically and only if it does not exist. If it exists,
//!    another supervisor started the replica or the executor gave it up:
//!    it exits with [`NOT_STARTED`] and starts nothing;
//! 3. starts PROGRAM as its child, in its own process group (the executor
//!    starts the supervisor as a group leader), with SIGKILL as the child's
//!    parent-death signal, so the replica never outlives its supervisor;
//! 4. forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to the group
//!    until the child exits;
//! 5. writes the child's exit code (128 + the signal's number for a
//!    signal) atomically to the exit file;
//! 6. SIGKILLs its process group, itself included: nothing the replica left
//!    behind outlives it.
//!
//! A supervisor killed by SIGKILL (or by a signal it does not forward)
//! writes no exit file; its replica dies with it (parent-death signal).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, getppid};

use super::process::proc_stat;
use super::records::{Claim, ExitRecord, create_exclusive, to_json, write_atomic};

/// The `gitfleet` subcommand that runs [`main`] (hidden from `--help`).
pub const SUBCOMMAND: &str = "__supervise";

/// The supervisor's exit status when it did not start the replica (claimed
/// by another supervisor, or given up by the executor).
pub const NOT_STARTED: u8 = 125;

/// The supervisor's exit status when its arguments are wrong.
const USAGE: u8 = 2;

/// The signals forwarded to the replica's process group.
const FORWARDED: [Signal; 5] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// Why a supervisor could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The arguments are not `--claim FILE --exit-file FILE -- PROGRAM [ARG]...`.
    #[error("usage: --claim FILE --exit-file FILE -- PROGRAM [ARG]...")]
    Usage,
    /// Signals could not be blocked or reset.
    #[error("cannot set up signals: {0}")]
    Signals(Errno),
    /// The supervisor's own start time could not be read.
    #[error("cannot read /proc/self/stat")]
    OwnStat,
    /// The claim file could not be created.
    #[error("cannot claim {path}: {source}")]
    Claim {
        /// The claim file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// The exit file could not be written.
    #[error("cannot write {path}: {source}")]
    ExitFile {
        /// The exit file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

/// A supervisor's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorArgs {
    /// The replica's claim file.
    pub claim: PathBuf,
    /// Where its exit code is written.
    pub exit_file: PathBuf,
    /// The replica's argv.
    pub command: Vec<OsString>,
}

impl SupervisorArgs {
    /// Parses `--claim FILE --exit-file FILE -- PROGRAM [ARG]...` (options in any order).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, SupervisorError> {
        let mut args = args.into_iter();
        let (mut claim, mut exit_file) = (None, None);
        loop {
            let arg = args.next().ok_or(SupervisorError::Usage)?;
            match arg.to_str() {
                Some("--claim") => claim = args.next().map(PathBuf::from),
                Some("--exit-file") => exit_file = args.next().map(PathBuf::from),
                Some("--") => break,
                _ => return Err(SupervisorError::Usage),
            }
        }
        let command: Vec<OsString> = args.collect();
        match (claim, exit_file) {
            (Some(claim), Some(exit_file)) if !command.is_empty() => Ok(SupervisorArgs {
                claim,
                exit_file,
                command,
            }),
            _ => Err(SupervisorError::Usage),
        }
    }

    /// The arguments [`SupervisorArgs::parse`] reads back.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--claim".into(),
            self.claim.clone().into(),
            "--exit-file".into(),
            self.exit_file.clone().into(),
            "--".into(),
        ];
        args.extend(self.command.iter().cloned());
        args
    }
}

/// Runs a supervisor on `args` (without the program's name), as
/// [`supervise`] does; a usage error is reported with status 2.
pub fn main(args: impl IntoIterator<Item = OsString>) -> u8 {
    match SupervisorArgs::parse(args) {
        Ok(args) => supervise(&args),
        Err(e) => {
            eprintln!("gitfleet supervisor: {e}");
            USAGE
        }
    }
}

/// Claims the replica, runs it, writes its exit file and SIGKILLs the
/// process group (this process included) when it leads it. Returns the exit
/// status only where it does not end that way: [`NOT_STARTED`] (claimed by
/// another, given up, or a setup error), or the replica's code when this
/// process does not lead its group.
pub fn supervise(args: &SupervisorArgs) -> u8 {
    match run(args) {
        Ok(None) => {
            eprintln!(
                "gitfleet supervisor: {} is already claimed: not started",
                args.claim.display()
            );
            NOT_STARTED
        }
        Ok(Some(record)) => {
            end_group();
            u8::try_from(record.code).unwrap_or(u8::MAX)
        }
        Err(e @ SupervisorError::ExitFile { .. }) => {
            eprintln!("gitfleet supervisor: {e}");
            end_group();
            NOT_STARTED
        }
        Err(e) => {
            eprintln!("gitfleet supervisor: {e}");
            NOT_STARTED
        }
    }
}

/// SIGKILLs this process's group, itself included, when it leads it.
fn end_group() {
    let me = getpid();
    if getpgrp() == me {
        let _ = killpg(me, Signal::SIGKILL);
    }
}

/// Claims the replica, runs it to its end and writes its exit file; `None`
/// when the claim was not this supervisor's (nothing started).
fn run(args: &SupervisorArgs) -> Result<Option<ExitRecord>, SupervisorError> {
    let mut signals = SigSet::empty();
    for signal in FORWARDED.into_iter().chain([Signal::SIGCHLD]) {
        // SAFETY: the default disposition installs no handler; an inherited
        // SIG_IGN would otherwise pass to the replica (or, for SIGCHLD,
        // reap it behind this process's back).
        unsafe { nix::sys::signal::signal(signal, SigHandler::SigDfl) }
            .map_err(SupervisorError::Signals)?;
        signals.add(signal);
    }
    signals.thread_block().map_err(SupervisorError::Signals)?;

    let pid = getpid().as_raw();
    let start_time = proc_stat(pid).ok_or(SupervisorError::OwnStat)?.start_time;
    let claim = Claim::Process { pid, start_time };
    let claim_error = |source| SupervisorError::Claim {
        path: args.claim.clone(),
        source,
    };
    let bytes = to_json(&claim).map_err(claim_error)?;
    if !create_exclusive(&args.claim, &bytes).map_err(claim_error)? {
        return Ok(None);
    }
    let record = run_child(&args.command, &signals);
    let exit_error = |source| SupervisorError::ExitFile {
        path: args.exit_file.clone(),
        source,
    };
    let bytes = to_json(&record).map_err(exit_error)?;
    write_atomic(&args.exit_file, &bytes).map_err(exit_error)?;
    Ok(Some(record))
}

/// Starts `command` and waits for it, forwarding signals; how it ended.
fn run_child(command: &[OsString], signals: &SigSet) -> ExitRecord {
    let Some((program, rest)) = command.split_first() else {
        return ExitRecord {
            code: 127,
            signal: None,
        };
    };
    let me = getpid();
    let mut command = Command::new(program);
    command.args(rest);
    // SAFETY: sigprocmask(2), prctl(2) and getppid(2) are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            // The mask is inherited across exec: the replica starts with none.
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
                .map_err(io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The supervisor may have died before the line above.
            if getppid() != me {
                return Err(io::Error::other("the supervisor is gone"));
            }
            Ok(())
        });
    }
    // Reaped with `waitpid` below, not through `Child` (the signal loop owns SIGCHLD).
    #[allow(clippy::zombie_processes)]
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("gitfleet supervisor: cannot start {program:?}: {e}");
            // As a shell says it: 127 not found, 126 found but not runnable.
            let code = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return ExitRecord { code, signal: None };
        }
    };
    let child = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let leads_group = getpgrp() == me;
    // Copies of a forwarded signal this process sent itself (its group holds it).
    let mut own: Vec<Signal> = Vec::new();
    loop {
        let Ok(signal) = signals.wait() else {
            return wait_blocking(child);
        };
        if signal == Signal::SIGCHLD {
            if let Some(record) = reap(child, true) {
                return record;
            }
        } else if let Some(i) = own.iter().position(|s| *s == signal) {
            own.swap_remove(i);
        } else if leads_group {
            // Pending here as soon as killpg returns: swallowed on the next wait.
            if killpg(me, signal).is_ok() {
                own.push(signal);
            }
        } else {
            let _ = kill(child, signal);
        }
    }
}

/// How `child` ended, if it did.
fn reap(child: Pid, nohang: bool) -> Option<ExitRecord> {
    let flags = nohang.then_some(WaitPidFlag::WNOHANG);
    match waitpid(child, flags) {
        Ok(WaitStatus::Exited(_, code)) => Some(ExitRecord { code, signal: None }),
        Ok(WaitStatus::Signaled(_, signal, _)) => Some(ExitRecord {
            code: 128 + signal as i32,
            signal: Some(signal as i32),
        }),
        Ok(_) | Err(Errno::EINTR) => None,
        // Reaped by someone else: it cannot be known how it ended.
        Err(_) => Some(ExitRecord {
            code: 128 + Signal::SIGKILL as i32,
            signal: None,
        }),
    }
}

fn wait_blocking(child: Pid) -> ExitRecord {
    loop {
        if let Some(record) = reap(child, false) {
            return record;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_read_back() {
        let args = SupervisorArgs {
            claim: "/s/run-1/0.claim".into(),
            exit_file: "/s/run-1/0.exit".into(),
            command: os(&["sh", "-c", "exit 3", "--claim"]),
        };
        assert_eq!(SupervisorArgs::parse(args.to_args()).unwrap(), args);
        let swapped = os(&["--exit-file", "e", "--claim", "c", "--", "true"]);
        assert_eq!(
            SupervisorArgs::parse(swapped).unwrap().claim,
            PathBuf::from("c")
        );
        for bad in [
            &[][..],
            &["--claim", "c", "--", "true"][..],
            &["--claim", "c", "--exit-file", "e", "--"][..],
            &["--claim", "c", "--exit-file", "e", "true"][..],
            &[
                "--verbose",
                "--claim",
                "c",
                "--exit-file",
                "e",
                "--",
                "true",
            ][..],
        ] {
            assert!(SupervisorArgs::parse(os(bad)).is_err(), "{bad:?}");
        }
    }
}
