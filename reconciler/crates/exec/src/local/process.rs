//! Processes as `/proc` shows them: start times (so a reused pid is never
//! taken for a replica), reaping, signals, and the search for a replica's
//! supervisor by the identity in its environment.

use std::fs;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The fields of `/proc/<pid>/stat` this executor needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProcStat {
    /// `R`, `S`, `Z`, …
    pub state: char,
    /// The process group.
    pub pgrp: i32,
    /// Clock ticks since boot.
    pub start_time: u64,
}

pub(super) fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // `rest` starts at field 3: pgrp is field 5, starttime field 22.
    let pgrp = fields.get(5 - 3)?.parse().ok()?;
    let start_time = fields.get(22 - 3)?.parse().ok()?;
    Some(ProcStat {
        state,
        pgrp,
        start_time,
    })
}

/// What became of a recorded process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Running,
    /// Gone. `group_safe`: its pid was still its own when seen (reaped just
    /// now, or a zombie), so its process group may be signalled. `waited`:
    /// its exit code (128 + signal), when this process reaped it.
    Exited {
        waited: Option<i32>,
        group_safe: bool,
    },
}

/// Looks at a recorded process without blocking; reaps it if it is a child.
pub(super) fn status(pid: i32, start_time: u64) -> Status {
    let gone = Status::Exited {
        waited: None,
        group_safe: false,
    };
    let Some(stat) = proc_stat(pid) else {
        return gone;
    };
    if stat.start_time != start_time {
        return gone; // the pid was reused
    }
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Status::Exited {
            waited: Some(code),
            group_safe: true,
        },
        Ok(WaitStatus::Signaled(_, signal, _)) => Status::Exited {
            waited: Some(128 + signal as i32),
            group_safe: true,
        },
        // Not this process's child (adopted after a restart): its parent reaps it.
        Err(Errno::ECHILD) if matches!(stat.state, 'Z' | 'X') => Status::Exited {
            waited: None,
            group_safe: true,
        },
        _ => Status::Running,
    }
}

/// Sends `signal` to a process group; a group already gone is fine.
pub(super) fn signal_group(pid: i32, signal: Signal) {
    if let Err(e) = killpg(Pid::from_raw(pid), signal)
        && e != Errno::ESRCH
    {
        tracing::warn!(pid, %signal, error = %e, "cannot signal process group");
    }
}

/// Sends `signal` to one process; a process already gone is fine.
pub(super) fn signal_process(pid: i32, signal: Signal) {
    if let Err(e) = kill(Pid::from_raw(pid), signal)
        && e != Errno::ESRCH
    {
        tracing::warn!(pid, %signal, error = %e, "cannot signal process");
    }
}

/// The live process-group leader whose environment holds `entry` (e.g.
/// `GITFLEET_REPLICA=job/run/0`): a replica's supervisor. Processes of
/// other users, and of this user that cannot be read, are not seen.
pub(super) fn find_by_environment(entry: &str) -> Option<(i32, u64)> {
    let entry = entry.as_bytes();
    fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find_map(|pid| {
            let stat = proc_stat(pid)?;
            if stat.pgrp != pid || matches!(stat.state, 'Z' | 'X') {
                return None;
            }
            let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|e| e == entry)
                .then_some((pid, stat.start_time))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn a_group_leader_is_found_by_its_environment() {
        let marker = format!("GITFLEET_TEST_MARKER={}", std::process::id());
        let (name, value) = marker.split_once('=').unwrap();
        let mut child = Command::new("sleep")
            .arg("30")
            .env(name, value)
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let start = proc_stat(pid).unwrap().start_time;
        // The environment is set at exec: wait for it to show.
        let mut found = None;
        for _ in 0..500 {
            found = find_by_environment(&marker);
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found, Some((pid, start)));
        assert_eq!(status(pid, start), Status::Running);
        assert_eq!(
            status(pid, start + 1),
            Status::Exited {
                waited: None,
                group_safe: false
            },
            "a reused pid"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(find_by_environment(&marker), None);
    }
}
