//! Starting a replica: its environment, its program, its supervisor's
//! command line, and the wait for the supervisor's claim.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use model::spec::{EnvSource, EnvValue, InlineValue, ValueFrom};

use super::records::{Claim, read_claim};
use super::supervisor::{SUBCOMMAND, SupervisorArgs};

/// The reconciler's environment variables a replica keeps; every `LC_*`
/// is kept too. Everything else (tokens, cloud credentials, `RUST_LOG`, …)
/// stays with the reconciler: a job that needs a variable names it in its
/// spec's `env`.
pub const INHERITED_ENV: [&str; 9] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];

/// `PATH` when the reconciler has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The variable that names a replica, `<job>/<run>/<rank>`: set for its
/// supervisor and the replica, readable in `/proc/<pid>/environ`.
pub const REPLICA_ENV: &str = "GITFLEET_REPLICA";

/// Whether a variable of the reconciler's environment reaches replicas.
pub fn inherited(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| INHERITED_ENV.contains(&n) || n.starts_with("LC_"))
}

/// What gitfleet tells a replica about itself.
#[derive(Debug, Clone)]
pub(super) struct ReplicaVars<'a> {
    pub job: &'a str,
    /// `<job>/<run>/<rank>`.
    pub identity: String,
    pub rank: u32,
    pub world: usize,
    pub gpus: &'a [u32],
    pub master_port: u16,
}

/// The spec's environment with every value resolved, at launch:
/// `valueFrom` files are read (one trailing newline dropped) and variables
/// looked up with `lookup` (the reconciler's environment). An error names
/// the variable and where its value was to come from, never a value.
pub(super) fn resolve_env(
    spec_env: &BTreeMap<String, EnvValue>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, String> {
    spec_env
        .iter()
        .map(|(name, value)| {
            let resolved = match value {
                EnvValue::Plain(v) | EnvValue::Inline(InlineValue { value: v, .. }) => v.clone(),
                EnvValue::From(ValueFrom {
                    value_from: EnvSource::File(path),
                }) => {
                    let mut text = std::fs::read_to_string(path).map_err(|e| {
                        format!("env {name}: cannot read valueFrom file {path}: {e}")
                    })?;
                    if text.ends_with('\n') {
                        text.pop();
                    }
                    text
                }
                EnvValue::From(ValueFrom {
                    value_from: EnvSource::SecretKeyRef(secret),
                }) => {
                    return Err(format!(
                        "env {name}: valueFrom.secretKeyRef (Secret {}) is a Kubernetes Secret: only the kube executor passes it; use valueFrom.file or valueFrom.env with the local executor",
                        secret.name
                    ));
                }
                EnvValue::From(ValueFrom {
                    value_from: EnvSource::Env(var),
                }) => lookup(var).ok_or_else(|| {
                    format!(
                        "env {name}: the reconciler has no environment variable {var} (valueFrom)"
                    )
                })?,
            };
            Ok((name.clone(), resolved))
        })
        .collect()
}

/// A replica's whole environment: the inherited part of `base` (the
/// reconciler's), then the spec's `env`, then gitfleet's variables, each
/// overriding the one before.
pub(super) fn replica_env(
    base: impl IntoIterator<Item = (OsString, OsString)>,
    spec_env: &BTreeMap<String, String>,
    vars: &ReplicaVars<'_>,
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> =
        base.into_iter().filter(|(k, _)| inherited(k)).collect();
    env.entry("PATH".into())
        .or_insert_with(|| DEFAULT_PATH.into());
    env.extend(spec_env.iter().map(|(k, v)| (k.into(), v.into())));
    let devices: Vec<String> = vars.gpus.iter().map(u32::to_string).collect();
    for (name, value) in [
        ("CUDA_VISIBLE_DEVICES", devices.join(",")),
        ("WORLD_SIZE", vars.world.to_string()),
        ("RANK", vars.rank.to_string()),
        ("LOCAL_RANK", "0".to_string()),
        ("MASTER_ADDR", "127.0.0.1".to_string()),
        ("MASTER_PORT", vars.master_port.to_string()),
        ("GITFLEET_JOB", vars.job.to_string()),
        (REPLICA_ENV, vars.identity.clone()),
    ] {
        env.insert(name.into(), value.into());
    }
    env
}

/// Checks that `program` can be executed as `execvp` would find it with
/// `path` (the replica's `PATH`), so a mistyped command fails the place
/// instead of starting a supervisor.
pub(super) fn check_program(program: &str, path: Option<&OsStr>) -> Result<(), String> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return if executable(Path::new(program)) {
            Ok(())
        } else {
            Err(format!("{program:?} is not an executable file"))
        };
    }
    let path = path.unwrap_or(OsStr::new(DEFAULT_PATH));
    if std::env::split_paths(path).any(|dir| {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        executable(&dir.join(program))
    }) {
        Ok(())
    } else {
        Err(format!(
            "{program:?} is not found in PATH ({})",
            path.to_string_lossy()
        ))
    }
}

/// How the local executor starts a replica's supervisor: a program and the
/// arguments before the supervisor's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorCommand {
    program: PathBuf,
    arg0: OsString,
    args: Vec<OsString>,
}

impl SupervisorCommand {
    /// This binary's `__supervise` subcommand, through `/proc/self/exe` so
    /// that a binary replaced on disk still starts supervisors of its own
    /// version.
    pub fn this_binary() -> Self {
        let arg0 = std::env::current_exe()
            .map(PathBuf::into_os_string)
            .unwrap_or_else(|_| "gitfleet".into());
        SupervisorCommand {
            program: PathBuf::from("/proc/self/exe"),
            arg0,
            args: vec![SUBCOMMAND.into()],
        }
    }

    /// `program` with `args` before the supervisor's arguments (a binary
    /// whose `main` calls [`super::supervisor::main`] takes none).
    pub fn new(program: impl Into<PathBuf>, args: Vec<OsString>) -> Self {
        let program = program.into();
        SupervisorCommand {
            arg0: program.clone().into_os_string(),
            program,
            args,
        }
    }

    /// Starts a supervisor as the leader of a new process group, with `env`
    /// as its whole environment and the replica's, and the rank's logs.
    pub(super) fn spawn(
        &self,
        args: &SupervisorArgs,
        env: &BTreeMap<OsString, OsString>,
        out: File,
        err: File,
    ) -> std::io::Result<Child> {
        Command::new(&self.program)
            .arg0(&self.arg0)
            .args(&self.args)
            .args(args.to_args())
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
    }
}

/// Waits until the replica's claim exists (the supervisor creates it first
/// thing) and returns it: this supervisor's, or another's that started the
/// replica before it (this one then exits without starting anything).
pub(super) fn wait_for_claim(
    claim: &Path,
    supervisor: &mut Child,
    timeout: Duration,
) -> Result<Claim, String> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let exited = supervisor.try_wait().map_err(|e| e.to_string())?;
        match read_claim(claim) {
            Ok(Some(claim)) => return Ok(claim),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot read {}: {e}", claim.display())),
        }
        if let Some(status) = exited {
            return Err(format!(
                "its supervisor ended ({status}) before starting it"
            ));
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "its supervisor did not start it within {} s",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn replicas_keep_only_the_allowed_variables() {
        let base = [
            ("PATH", "/opt/bin:/usr/bin"),
            ("HOME", "/home/ops"),
            ("LC_ALL", "C.UTF-8"),
            ("AWS_SECRET_ACCESS_KEY", "hunter2"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("RUST_LOG", "debug"),
            ("RANK", "99"),
            ("WANDB_PROJECT", "from-the-reconciler"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let spec_env = BTreeMap::from([
            ("WANDB_PROJECT".to_string(), "llama".to_string()),
            ("RANK".to_string(), "7".to_string()),
        ]);
        let vars = ReplicaVars {
            job: "train",
            identity: "train/run-1/1".to_string(),
            rank: 1,
            world: 2,
            gpus: &[4, 5],
            master_port: 20001,
        };
        let env = replica_env(base, &spec_env, &vars);
        let get = |k: &str| env.get(OsStr::new(k)).and_then(|v| v.to_str());
        assert_eq!(get("PATH"), Some("/opt/bin:/usr/bin"));
        assert_eq!(get("HOME"), Some("/home/ops"));
        assert_eq!(get("LC_ALL"), Some("C.UTF-8"));
        assert_eq!(get("AWS_SECRET_ACCESS_KEY"), None);
        assert_eq!(get("GITHUB_TOKEN"), None);
        assert_eq!(get("RUST_LOG"), None);
        assert_eq!(get("WANDB_PROJECT"), Some("llama"), "the spec's env");
        assert_eq!(get("RANK"), Some("1"), "gitfleet's variables win");
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("4,5"));
        assert_eq!(get("GITFLEET_REPLICA"), Some("train/run-1/1"));
        assert_eq!(env.len(), 3 + 1 + 8);
        // No PATH in the reconciler's environment: a default one.
        let env = replica_env([], &BTreeMap::new(), &vars);
        assert_eq!(env.get(OsStr::new("PATH")).unwrap(), DEFAULT_PATH);
    }

    #[test]
    fn a_secret_reference_is_refused_by_the_local_executor() {
        let env: BTreeMap<String, EnvValue> = serde_json::from_value(serde_json::json!({
            "HF_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
        }))
        .unwrap();
        let err = resolve_env(&env, |_| None).unwrap_err();
        assert!(
            err.starts_with("env HF_TOKEN: valueFrom.secretKeyRef (Secret hf)"),
            "{err}"
        );
        assert!(err.contains("only the kube executor"), "{err}");
    }

    #[test]
    fn programs_are_checked_as_exec_finds_them() {
        assert!(check_program("sh", Some(OsStr::new("/nonexistent:/bin:/usr/bin"))).is_ok());
        assert!(check_program("/bin/sh", None).is_ok());
        let err = check_program("sh", Some(OsStr::new("/nonexistent"))).unwrap_err();
        assert!(err.contains("not found in PATH (/nonexistent)"), "{err}");
        let err = check_program("/nonexistent/binary", None).unwrap_err();
        assert!(err.contains("not an executable file"), "{err}");
        // A directory, and a file without execute permission, are not programs.
        assert!(check_program("/tmp", None).is_err());
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(check_program(script.to_str().unwrap(), None).is_err());
    }
}
