//! The throw-away Slurm cluster of the Slurm tests: started by
//! tests/slurm/start-cluster.sh under a temporary directory, stopped when
//! dropped. Skipped when Slurm cannot be installed here (not root, no
//! apt-get) unless GITFLEET_REQUIRE_SLURM is set (scripts/test sets it).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The cluster; stopped when dropped (also when the test fails).
pub struct Cluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(format!("{ROOT}/tests/slurm/stop-cluster.sh"))
            .arg(&self.dir)
            .status();
    }
}

/// The cluster, or `None` where Slurm cannot be installed.
pub fn start(dir: &Path) -> Option<Cluster> {
    let required = std::env::var_os("GITFLEET_REQUIRE_SLURM").is_some();
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(format!("{ROOT}/tests/slurm/start-cluster.sh"))
        .arg(dir)
        .output()
        .unwrap();
    let cluster = Cluster {
        dir: dir.to_path_buf(),
        conf: dir.join("slurm.conf"),
    };
    match out.status.code() {
        Some(0) => {
            eprintln!("slurm cluster up in {:.1?}", started.elapsed());
            Some(cluster)
        }
        Some(3) if !required => {
            eprintln!(
                "skipping: Slurm is not installed and cannot be here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        }
        _ => panic!(
            "start-cluster.sh failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            logs(dir)
        ),
    }
}

/// The daemons' last log lines.
pub fn logs(dir: &Path) -> String {
    let mut text = String::new();
    for name in ["slurmdbd.log", "slurmctld.log", "mariadb.log"] {
        if let Ok(log) = std::fs::read_to_string(dir.join("log").join(name)) {
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            text += &format!(
                "--- {name}\n{}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
    text
}

/// Runs `sacctmgr ARGS` on the cluster; its output.
pub fn sacctmgr(c: &Cluster, args: &[&str]) -> String {
    let out = Command::new("sacctmgr")
        .env("SLURM_CONF", &c.conf)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sacctmgr {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// stdout and stderr.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
