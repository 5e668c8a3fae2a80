//! The guardrail policy pack in `policies/` works as its files say.
//!
//! For every `policies/<name>.yaml` there is a directory
//! `tests/cases/policies/<name>/` holding tiny fleet repos *without* the policy:
//!
//! - `pass/`: must validate (exit 0) once the policy is added;
//! - `fail*/` (one or more): must be rejected (exit 1) once the policy is
//!   added, and every error must be a violation of that policy with one of its
//!   rule messages. Across the `fail*` cases every rule's message must appear,
//!   so each rule is shown to bite.
//!
//! Each case is copied into a fresh temporary directory together with the
//! pack's own policy file (so the pack itself is tested, not a copy), and
//! `gitfleet validate` runs there.
//!
//! A last test checks that `examples/fleet` carries the same policies as the pack.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use reconciler::load::fs::read_fleet_dir;
use reconciler::load::load_fleet;
use reconciler::spec::{Object, PolicySpec};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn pack_dir() -> PathBuf {
    root().join("policies")
}

fn cases_dir() -> PathBuf {
    root().join("tests/cases/policies")
}

/// The pack's policy files, sorted by name: (name, path).
fn pack_files() -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(pack_dir())
        .expect("read policies/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, p)
        })
        .collect();
    files.sort();
    files
}

/// The one policy of a pack file, parsed by the library.
fn load_policy(path: &Path) -> Object<PolicySpec> {
    let files = read_fleet_dir(path).expect("read policy file");
    let loaded = load_fleet(&files);
    assert!(
        loaded.is_valid(),
        "{} is not valid on its own: {:#?}",
        path.display(),
        loaded.diagnostics
    );
    let mut policies = loaded.fleet.policies;
    assert_eq!(
        policies.len(),
        1,
        "{} must hold exactly one Policy",
        path.display()
    );
    policies.remove(0)
}

/// A fresh, empty directory under the system temp dir.
fn scratch_dir(label: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "gitfleet-policies-{}-{}-{label}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read case dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Runs `gitfleet validate .` on `case` plus the pack file: (exit code, stdout).
fn validate_with_policy(case: &Path, policy_file: &Path, label: &str) -> (i32, String) {
    let dir = scratch_dir(label);
    copy_tree(case, &dir);
    std::fs::create_dir_all(dir.join("policies")).expect("create policies/");
    std::fs::copy(
        policy_file,
        dir.join("policies").join(policy_file.file_name().unwrap()),
    )
    .expect("copy policy file");
    let output = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["validate", "."])
        .current_dir(&dir)
        .output()
        .expect("run gitfleet");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{label}: gitfleet panicked:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    (output.status.code().unwrap_or(-1), stdout)
}

/// The subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.expect("entry").path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn dir_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_pack_policy_has_cases_and_every_case_dir_has_a_policy() {
    let pack: Vec<String> = pack_files().into_iter().map(|(name, _)| name).collect();
    assert!(!pack.is_empty(), "policies/ holds no policy files");
    let cases: Vec<String> = subdirs(&cases_dir()).iter().map(|p| dir_name(p)).collect();
    assert_eq!(
        pack, cases,
        "policies/*.yaml and tests/cases/policies/*/ must name the same policies"
    );
    for name in &pack {
        let kinds: Vec<String> = subdirs(&cases_dir().join(name))
            .iter()
            .map(|p| dir_name(p))
            .collect();
        assert!(kinds.iter().any(|k| k == "pass"), "{name}: no pass/ case");
        assert!(
            kinds.iter().any(|k| k.starts_with("fail")),
            "{name}: no fail*/ case"
        );
        assert!(
            kinds.iter().all(|k| k == "pass" || k.starts_with("fail")),
            "{name}: case directories must be pass/ or fail*/: {kinds:?}"
        );
    }
}

#[test]
fn pack_policies_are_named_after_their_files() {
    for (name, path) in pack_files() {
        let policy = load_policy(&path);
        assert_eq!(
            policy.metadata.name,
            name,
            "{}: metadata.name must equal the file name",
            path.display()
        );
        for (i, rule) in policy.spec.rules.iter().enumerate() {
            assert!(
                rule.message.as_deref().is_some_and(|m| !m.is_empty()),
                "{name}: rule {i} has no message"
            );
        }
    }
}

#[test]
fn pack_policies_pass_and_fail_their_cases() {
    let mut failures = Vec::new();
    for (name, path) in pack_files() {
        let policy = load_policy(&path);
        let messages: Vec<&str> = policy
            .spec
            .rules
            .iter()
            .filter_map(|r| r.message.as_deref())
            .collect();
        let mut seen = vec![false; messages.len()];
        for case in subdirs(&cases_dir().join(&name)) {
            let kind = dir_name(&case);
            let label = format!("{name}/{kind}");
            let (code, out) = validate_with_policy(&case, &path, &format!("{name}-{kind}"));
            if kind == "pass" {
                if code != 0 || !out.starts_with("valid:") {
                    failures.push(format!(
                        "{label}: expected valid, exit 0; got exit {code}:\n{out}"
                    ));
                }
                continue;
            }
            if code != 1 {
                failures.push(format!("{label}: expected exit 1, got {code}:\n{out}"));
                continue;
            }
            let errors: Vec<&str> = out.lines().filter(|l| !l.starts_with("invalid:")).collect();
            if errors.is_empty() {
                failures.push(format!("{label}: exit 1 but no error lines:\n{out}"));
            }
            let needle = format!("violates Policy {name} (");
            for line in errors {
                match messages.iter().position(|m| line.contains(needle.as_str()) && line.ends_with(m)) {
                    Some(i) => seen[i] = true,
                    None => failures.push(format!(
                        "{label}: error is not a violation of Policy {name} with one of its messages:\n  {line}"
                    )),
                }
            }
        }
        for (message, seen) in messages.iter().zip(&seen) {
            if !seen {
                failures.push(format!(
                    "{name}: no fail*/ case shows the rule with message {message:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn example_fleet_carries_the_policy_pack() {
    let files = read_fleet_dir(&root().join("examples/fleet")).expect("read examples/fleet");
    let loaded = load_fleet(&files);
    assert!(
        loaded.is_valid(),
        "examples/fleet is not valid: {:#?}",
        loaded.diagnostics
    );
    for (name, path) in pack_files() {
        let pack = load_policy(&path);
        let example = loaded
            .fleet
            .policies
            .iter()
            .find(|p| p.metadata.name == name);
        match example {
            Some(example) => assert_eq!(
                (&example.metadata, &example.spec),
                (&pack.metadata, &pack.spec),
                "examples/fleet's Policy {name} differs from {}",
                path.display()
            ),
            None => panic!("examples/fleet lacks Policy {name} of the pack"),
        }
    }
}
