//! `reconcile --require-signed`: commits signed with throwaway SSH and
//! OpenPGP keys by the real `git`, `ssh-keygen` and `gpg`, verified against
//! keys kept outside the repository; unsigned and unknown-key commits are
//! refused and the last good revision stays applied.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::cli_support::{assert_fails_with, fleet, text};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

/// Whether the tools are here; CI (scripts/test) installs them and
/// requires the test to run.
fn tools_present() -> bool {
    let present = ["ssh-keygen", "gpg", "git"].iter().all(|tool| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !present {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_SIGNING_TOOLS").is_none(),
            "ssh-keygen, gpg or git missing"
        );
        eprintln!("skipped: ssh-keygen, gpg or git missing (scripts/test installs them)");
    }
    present
}

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        Repo {
            dir: crate::cli_support::dir_with_repo(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn git(&self, args: &[&str]) -> String {
        crate::cli_support::git(
            &self.path("repo"),
            args,
            &[("GNUPGHOME", &self.path("gnupg"))],
        )
    }

    /// Commits `jobs` (names of 8-GPU jobs), signed with `sign` (git `-c`
    /// settings) or unsigned; returns the commit id.
    fn commit(&self, jobs: &[&str], sign: &[&str]) -> String {
        let mut yaml = fleet(2);
        for job in jobs {
            yaml += &format!(
                "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {job}}}\nspec: {{queue: a, gpusPerReplica: 8}}\n"
            );
        }
        std::fs::write(self.path("repo/fleet.yaml"), yaml).unwrap();
        self.git(&["add", "-A"]);
        let mut args: Vec<&str> = sign.to_vec();
        args.extend(["commit", "-q", "-m", "change"]);
        if !sign.is_empty() {
            args.push("-S");
        }
        self.git(&args);
        self.git(&["rev-parse", "HEAD"])
    }

    fn reconcile(&self, keys: &[&str]) -> Output {
        let mut args = vec![
            "reconcile",
            "repo",
            "--state",
            "st",
            "--once",
            "--require-signed",
        ];
        if !self.path("st").exists() {
            args.extend(["--now", "2026-11-21T10:00:00Z"]);
        }
        args.extend(keys);
        Command::new(BIN)
            .args(&args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    fn status(&self) -> Value {
        let out = Command::new(BIN)
            .args(["status", "--state", "st", "-o", "json"])
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn running(&self) -> Vec<String> {
        self.status()["job_list"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["phase"] == "running")
            .map(|j| j["job"].as_str().unwrap().to_string())
            .collect()
    }

    /// A refused commit: exit 1, the reason in the output and in
    /// `lastError`, the last good revision still applied.
    fn assert_refused(&self, out: &Output, good: &str, reason: &str) {
        assert_fails_with(out, reason);
        let status = self.status();
        let error = status["revisions"]["lastError"].as_str().unwrap();
        assert!(error.contains("signature verification: "), "{error}");
        assert!(error.contains(reason), "{error}");
        assert_eq!(status["revisions"]["lastApplied"], good);
    }

    /// An SSH key pair `name`/`name.pub`; returns the public key line.
    fn ssh_key(&self, name: &str) -> String {
        let key = self.path(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        std::fs::read_to_string(key.with_extension("pub"))
            .unwrap()
            .trim()
            .to_string()
    }
}

fn ssh_signing(key: &Path) -> Vec<String> {
    vec![
        "-c".into(),
        "gpg.format=ssh".into(),
        "-c".into(),
        format!("user.signingkey={}", key.display()),
    ]
}

#[test]
fn ssh_signed_commits_are_applied_and_others_refused() {
    if !tools_present() {
        return;
    }
    let repo = Repo::new();
    let allowed = repo.ssh_key("allowed");
    repo.ssh_key("stranger");
    std::fs::write(
        repo.path("allowed_signers"),
        format!("test@example.com {allowed}\n"),
    )
    .unwrap();
    let keys = ["--allowed-signers", "allowed_signers"];
    let good_sign = ssh_signing(&repo.path("allowed"));
    let good_sign: Vec<&str> = good_sign.iter().map(String::as_str).collect();
    let stranger = ssh_signing(&repo.path("stranger"));
    let stranger: Vec<&str> = stranger.iter().map(String::as_str).collect();

    let c1 = repo.commit(&["a-1"], &good_sign);
    let out = repo.reconcile(&keys);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(repo.status()["revisions"]["lastApplied"], c1.as_str());
    assert_eq!(repo.running(), ["a-1"]);

    repo.commit(&["a-1", "a-2"], &[]);
    let out = repo.reconcile(&keys);
    repo.assert_refused(&out, &c1, "is not signed");
    assert_eq!(repo.running(), ["a-1"], "nothing of it applied");
    // `apply` checks the same way.
    let applied = Command::new(BIN)
        .args([
            "apply",
            "repo",
            "--state",
            "st",
            "--auto-approve",
            "--require-signed",
        ])
        .args(keys)
        .current_dir(repo.dir.path())
        .output()
        .unwrap();
    assert_fails_with(
        &applied,
        "its commit signature does not verify; nothing applied",
    );
    assert_eq!(repo.running(), ["a-1"]);

    repo.commit(&["a-1", "a-3"], &stranger);
    let out = repo.reconcile(&keys);
    repo.assert_refused(&out, &c1, "signed by a key that is not allowed");
    assert_eq!(repo.running(), ["a-1"]);

    // Only OpenPGP keys given: an SSH signature cannot be checked.
    let c4 = repo.commit(&["a-1", "a-4"], &good_sign);
    std::fs::write(repo.path("empty.asc"), "").unwrap();
    let out = repo.reconcile(&["--gpg-keyring", "empty.asc"]);
    repo.assert_refused(
        &out,
        &c1,
        "has an SSH signature, but no --allowed-signers was given",
    );

    let out = repo.reconcile(&keys);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(repo.status()["revisions"]["lastApplied"], c4.as_str());
    assert_eq!(repo.running(), ["a-1", "a-4"]);

    // The audit keeps every refusal with its reason.
    let store = reconciler::state::Store::open(&repo.path("st")).unwrap();
    let refused: Vec<String> = store
        .audit(0)
        .unwrap()
        .into_iter()
        .filter(|(_, a)| a.what == "refused")
        .map(|(_, a)| a.detail)
        .collect();
    assert_eq!(refused.len(), 4, "{refused:?}: the apply checked once more");
    assert!(
        refused
            .iter()
            .all(|r| r.contains("signature verification: "))
    );
}

#[test]
fn gpg_signed_commits_are_checked_against_a_keyring_outside_the_repository() {
    if !tools_present() {
        return;
    }
    let repo = Repo::new();
    let home = repo.path("gnupg");
    std::fs::create_dir(&home).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let gpg = |args: &[&str]| {
        let out = Command::new("gpg")
            .args(["--batch", "--homedir"])
            .arg(&home)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "gpg {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for who in [
        "Allowed <allowed@example.com>",
        "Stranger <stranger@example.com>",
    ] {
        gpg(&[
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            who,
            "ed25519",
            "sign",
            "never",
        ]);
    }
    let exported = gpg(&["--armor", "--export", "allowed@example.com"]);
    std::fs::write(repo.path("allowed.asc"), exported).unwrap();
    let keys = ["--gpg-keyring", "allowed.asc"];

    let c1 = repo.commit(&["a-1"], &["-c", "user.signingkey=allowed@example.com"]);
    let out = repo.reconcile(&keys);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(repo.status()["revisions"]["lastApplied"], c1.as_str());

    repo.commit(
        &["a-1", "a-2"],
        &["-c", "user.signingkey=stranger@example.com"],
    );
    let out = repo.reconcile(&keys);
    repo.assert_refused(
        &out,
        &c1,
        "signed by a key that is not allowed (OpenPGP: key",
    );
    assert_eq!(repo.running(), ["a-1"]);

    // The agent the key generation started is this test's; stop it.
    let _ = Command::new("gpgconf")
        .arg("--homedir")
        .arg(&home)
        .args(["--kill", "gpg-agent"])
        .output();
}

#[test]
fn require_signed_refuses_what_it_cannot_check_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), fleet(2)).unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    std::fs::write(dir.path().join("signers"), "").unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&[], "--require-signed needs the allowed keys"),
        (
            &["--allowed-signers", "nope"],
            "--allowed-signers nope: no such file",
        ),
        (&["--allowed-signers", "signers"], "is not read from Git"),
    ];
    for (keys, expected) in cases {
        let mut args = vec![
            "reconcile",
            ".",
            "--state",
            "st",
            "--once",
            "--require-signed",
        ];
        args.extend(keys);
        assert_fails_with(&run(&args), expected);
    }
    assert!(!dir.path().join("st").exists(), "nothing written");
}
