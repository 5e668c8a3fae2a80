//! Commit signature verification (`--require-signed`), as Flux verifies a
//! GitRepository's HEAD: the commit to apply must carry an SSH signature by
//! a key of an allowed-signers file (`ssh-keygen -Y verify`, as `git
//! verify-commit` with `gpg.ssh.allowedSignersFile`), or an OpenPGP
//! signature by a key of a keyring kept outside the repository (`gpg
//! --verify`). Anything else is refused like an invalid revision.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git::{GitSource, SignedData, short_id};

/// Which keys may sign the commits that are applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignaturePolicy {
    /// An `ssh-keygen` allowed-signers file (`principal key-type key`).
    pub allowed_signers: Option<PathBuf>,
    /// OpenPGP public keys: an exported key file (armored or binary), or a
    /// GnuPG home directory.
    pub gpg_keyring: Option<PathBuf>,
}

/// Why a commit's signature is not accepted.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Unverified {
    /// No signature at all.
    #[error("commit {0} is not signed")]
    Unsigned(String),
    /// Signed, but with a kind of key no keys were given for.
    #[error("commit {commit} has an {kind} signature, but no {flag} was given")]
    NoKeys {
        /// The commit (short).
        commit: String,
        /// `SSH` or `OpenPGP`.
        kind: &'static str,
        /// The flag that would give the keys.
        flag: &'static str,
    },
    /// Signed by a key that is not allowed.
    #[error("commit {commit} is signed by a key that is not allowed ({kind}: {detail})")]
    UnknownKey {
        /// The commit (short).
        commit: String,
        /// `SSH` or `OpenPGP`.
        kind: &'static str,
        /// What the tool said.
        detail: String,
    },
    /// The signature does not match the commit, or the key is expired or revoked.
    #[error("commit {commit}: the {kind} signature does not verify ({detail})")]
    Bad {
        /// The commit (short).
        commit: String,
        /// `SSH` or `OpenPGP`.
        kind: &'static str,
        /// What the tool said.
        detail: String,
    },
    /// A signature of another kind (X.509).
    #[error("commit {0} has a signature that is neither SSH nor OpenPGP")]
    Unsupported(String),
    /// The specs do not come from Git.
    #[error("the specs are not read from Git, so there is no commit signature to verify")]
    NotGit,
    /// The check itself failed (a tool missing, the repository unreadable).
    #[error("commit {commit}: cannot verify its signature: {detail}")]
    Failed {
        /// The commit (short).
        commit: String,
        /// What failed.
        detail: String,
    },
}

/// Verifies the signature of `commit` in `repo` under `policy`; returns who
/// signed it (the principal, or the OpenPGP key's fingerprint).
pub fn verify(
    policy: &SignaturePolicy,
    repo: Option<&GitSource>,
    commit: &str,
) -> Result<String, Unverified> {
    let short = short_id(commit).to_string();
    let repo = repo.ok_or(Unverified::NotGit)?;
    let failed = |detail: String| failure(&short, detail);
    let signed = repo
        .commit_signature(commit)
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| Unverified::Unsigned(short.clone()))?;
    let scratch = tempfile::tempdir().map_err(|e| failed(format!("a temporary directory: {e}")))?;
    let keys = |given: &Option<PathBuf>, kind, flag| {
        given.clone().ok_or_else(|| Unverified::NoKeys {
            commit: short.clone(),
            kind,
            flag,
        })
    };
    if signed
        .signature
        .starts_with(b"-----BEGIN SSH SIGNATURE-----")
    {
        let allowed = keys(&policy.allowed_signers, "SSH", "--allowed-signers")?;
        verify_ssh(&allowed, &signed, scratch.path(), &short)
    } else if signed
        .signature
        .starts_with(b"-----BEGIN PGP SIGNATURE-----")
    {
        let keyring = keys(&policy.gpg_keyring, "OpenPGP", "--gpg-keyring")?;
        verify_gpg(&keyring, &signed, scratch.path(), &short)
    } else {
        Err(Unverified::Unsupported(short))
    }
}

/// `ssh-keygen -Y find-principals`, then `-Y verify` as that principal in
/// the `git` namespace.
fn verify_ssh(
    allowed: &Path,
    signed: &SignedData,
    scratch: &Path,
    commit: &str,
) -> Result<String, Unverified> {
    let failed = |detail: String| failure(commit, detail);
    let signature = scratch.join("commit.sig");
    std::fs::write(&signature, &signed.signature).map_err(|e| failed(e.to_string()))?;
    let found = run(
        Command::new("ssh-keygen")
            .args(["-Y", "find-principals", "-f"])
            .arg(allowed)
            .arg("-s")
            .arg(&signature),
        None,
    )
    .map_err(|e| failed(format!("ssh-keygen: {e}")))?;
    let Some(principal) = found
        .stdout
        .lines()
        .next()
        .filter(|p| found.ok && !p.trim().is_empty())
    else {
        return Err(Unverified::UnknownKey {
            commit: commit.to_string(),
            kind: "SSH",
            detail: format!("no principal in {} has its key", allowed.display()),
        });
    };
    let verified = run(
        Command::new("ssh-keygen")
            .args(["-Y", "verify", "-n", "git", "-f"])
            .arg(allowed)
            .arg("-I")
            .arg(principal.trim())
            .arg("-s")
            .arg(&signature),
        Some(&signed.data),
    )
    .map_err(|e| failed(format!("ssh-keygen: {e}")))?;
    if verified.ok {
        Ok(principal.trim().to_string())
    } else {
        Err(Unverified::Bad {
            commit: commit.to_string(),
            kind: "SSH",
            detail: first_line(&verified.stderr),
        })
    }
}

/// `gpg --verify` with only the given keys (a key file is imported into a
/// throwaway home first); the verdict is read from `--status-fd`.
fn verify_gpg(
    keyring: &Path,
    signed: &SignedData,
    scratch: &Path,
    commit: &str,
) -> Result<String, Unverified> {
    let failed = |detail: String| failure(commit, detail);
    let home = if keyring.is_dir() {
        keyring.to_path_buf()
    } else {
        let home = scratch.join("gnupg");
        std::fs::create_dir(&home).map_err(|e| failed(e.to_string()))?;
        set_private(&home);
        let imported = run(gpg(&home).arg("--import").arg(keyring), None)
            .map_err(|e| failed(format!("gpg: {e}")))?;
        if !imported.ok {
            return Err(failed(format!(
                "gpg --import {}: {}",
                keyring.display(),
                first_line(&imported.stderr)
            )));
        }
        home
    };
    let signature = scratch.join("commit.sig");
    let data = scratch.join("commit.data");
    std::fs::write(&signature, &signed.signature).map_err(|e| failed(e.to_string()))?;
    std::fs::write(&data, &signed.data).map_err(|e| failed(e.to_string()))?;
    let verified = run(
        gpg(&home)
            .args(["--status-fd", "1", "--verify"])
            .arg(&signature)
            .arg(&data),
        None,
    )
    .map_err(|e| failed(format!("gpg: {e}")))?;
    let status = |key: &str| {
        verified.stdout.lines().find_map(|l| {
            l.strip_prefix(&format!("[GNUPG:] {key} "))
                .map(str::to_string)
        })
    };
    let kind = "OpenPGP";
    if let Some(fingerprint) = status("VALIDSIG").filter(|_| verified.ok) {
        return Ok(fingerprint
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string());
    }
    let (unknown, detail) = if let Some(key) = status("NO_PUBKEY") {
        (true, format!("key {key} is not in {}", keyring.display()))
    } else if let Some(who) = status("BADSIG") {
        (false, format!("bad signature by {who}"))
    } else if let Some(who) = status("EXPKEYSIG") {
        (false, format!("the key of {who} has expired"))
    } else if let Some(who) = status("REVKEYSIG") {
        (false, format!("the key of {who} is revoked"))
    } else {
        (false, first_line(&verified.stderr))
    };
    Err(if unknown {
        Unverified::UnknownKey {
            commit: commit.to_string(),
            kind,
            detail,
        }
    } else {
        Unverified::Bad {
            commit: commit.to_string(),
            kind,
            detail,
        }
    })
}

/// The check itself failed.
fn failure(commit: &str, detail: String) -> Unverified {
    Unverified::Failed {
        commit: commit.to_string(),
        detail,
    }
}

fn gpg(home: &Path) -> Command {
    let mut command = Command::new("gpg");
    command
        .args(["--batch", "--no-tty", "--quiet", "--homedir"])
        .arg(home);
    command
}

/// GnuPG warns about a home directory others can read.
fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

/// What a tool said.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn run(command: &mut Command, stdin: Option<&[u8]>) -> std::io::Result<Ran> {
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)?;
    }
    let output = child.wait_with_output()?;
    Ok(Ran {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Refusal;

    #[test]
    fn a_signature_refusal_has_its_own_metric_label() {
        let message = format!(
            "revision abc: {}{}",
            crate::SIGNATURE_PREFIX,
            Unverified::Unsigned("abc".into())
        );
        assert_eq!(Refusal::of(&message), Refusal::Signature);
        assert_eq!(Refusal::Signature.as_str(), "signature");
    }

    #[test]
    fn a_directory_has_no_signature() {
        let policy = SignaturePolicy::default();
        assert_eq!(verify(&policy, None, "abc"), Err(Unverified::NotGit));
    }
}
