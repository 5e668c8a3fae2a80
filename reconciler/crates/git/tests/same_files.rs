//! Directory mode and Git mode read exactly the same files of a fleet
//! repository: dot-entries, non-YAML files and symbolic links are skipped
//! alike, odd names are read alike; a link out of the repository or a
//! `*.yaml` that is not a regular file is an error naming it, never read.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use gitfleet_git::GitSource;
use load::fs::{ReadError, read_fleet_dir};

const DOC: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The paths read, relative to the repository, sorted.
fn directory_paths(root: &Path) -> Vec<String> {
    let prefix = format!("{}/", root.display());
    read_fleet_dir(root)
        .unwrap()
        .iter()
        .map(|f| f.path.strip_prefix(prefix.as_str()).unwrap().to_string())
        .collect()
}

fn git_paths(root: &Path) -> Vec<String> {
    let source = GitSource::discover(root).unwrap();
    let mut paths: Vec<String> = source
        .read_files("HEAD")
        .unwrap()
        .iter()
        .map(|f| f.path.strip_prefix("HEAD:").unwrap().to_string())
        .collect();
    paths.sort();
    paths
}

#[test]
fn both_modes_read_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join("jobs/team a")).unwrap();
    std::fs::create_dir_all(root.join(".github")).unwrap();
    std::fs::create_dir_all(root.join("dir.yaml")).unwrap();
    for file in [
        "fleet.yaml",
        "queues.yml",
        "jobs/team a/ü job.yaml",
        "dir.yaml/inside.yaml",
        ".github/ci.yaml",
        ".hidden.yaml",
    ] {
        std::fs::write(root.join(file), DOC).unwrap();
    }
    std::fs::write(root.join("notes.txt"), "apiVersion: gitfleet/v1\n").unwrap();
    std::fs::write(root.join("README.md"), "# fleet\n").unwrap();
    // Links inside the repository: to a file, to a directory named *.yaml.
    symlink("fleet.yaml", root.join("again.yaml")).unwrap();
    symlink("jobs", root.join("linked.yaml")).unwrap();
    symlink("missing.yaml", root.join("dangling.yaml")).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "-A", "."]);
    git(&root, &["commit", "-q", "-m", "fleet"]);

    let expected = [
        "dir.yaml/inside.yaml",
        "fleet.yaml",
        "jobs/team a/ü job.yaml",
        "queues.yml",
    ];
    assert_eq!(directory_paths(&root), expected);
    assert_eq!(git_paths(&root), expected);
}

#[test]
fn a_link_out_of_the_repository_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("fleet.yaml"), DOC).unwrap();
    std::fs::write(dir.path().join("secret.yaml"), DOC).unwrap();
    symlink(dir.path().join("secret.yaml"), root.join("host.yaml")).unwrap();
    match read_fleet_dir(&root) {
        Err(ReadError::LinkOutside { link, .. }) => {
            assert!(link.ends_with("repo/host.yaml"), "{link}")
        }
        other => panic!("expected a link error, got {other:?}"),
    }

    // A link to a directory out of the repository, whatever its name.
    std::fs::remove_file(root.join("host.yaml")).unwrap();
    symlink(dir.path(), root.join("up")).unwrap();
    let err = read_fleet_dir(&root).unwrap_err();
    assert!(
        err.to_string()
            .contains("repo/up: a symbolic link out of the repository"),
        "{err}"
    );
}

#[test]
fn a_fifo_named_yaml_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), DOC).unwrap();
    let fifo = dir.path().join("pipe.yaml");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let err = read_fleet_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("pipe.yaml: not a regular file"),
        "{err}"
    );
}

#[test]
fn a_file_too_large_for_a_fleet_is_an_error_not_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), DOC).unwrap();
    // A sparse file: its size is what counts, nothing is written.
    let big = std::fs::File::create(dir.path().join("huge.yaml")).unwrap();
    big.set_len(load::fs::MAX_FILE_BYTES + 1).unwrap();
    let err = read_fleet_dir(dir.path()).unwrap_err();
    assert!(
        matches!(err, ReadError::TooLarge { size, .. } if size == load::fs::MAX_FILE_BYTES + 1),
        "{err}"
    );
    assert!(
        err.to_string().contains("huge.yaml: 268435457 bytes"),
        "{err}"
    );
}

#[test]
fn a_committed_blob_too_large_for_a_fleet_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("fleet.yaml"), DOC).unwrap();
    // Sparse on disk, zeros compress to almost nothing in Git: only the
    // size recorded in the object's header is large.
    let big = std::fs::File::create(root.join("huge.yaml")).unwrap();
    big.set_len(load::fs::MAX_FILE_BYTES + 1).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "huge"]);
    std::fs::remove_file(root.join("huge.yaml")).unwrap();

    let source = GitSource::discover(root).unwrap();
    let err = source.read_files("HEAD").unwrap_err();
    assert_eq!(
        err.to_string(),
        "HEAD:huge.yaml: 268435457 bytes, more than the 268435456 allowed; not read"
    );
}

#[test]
fn sizes_known_from_an_earlier_listing_refuse_a_blob_too_large_alike() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("fleet.yaml"), DOC).unwrap();
    std::fs::write(root.join("jobs.yaml"), DOC.replace("name: q", "name: r")).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "small"]);
    let big = std::fs::File::create(root.join("jobs.yaml")).unwrap();
    big.set_len(load::fs::MAX_FILE_BYTES + 1).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "huge"]);

    // One source for every listing: the sizes of the blobs it read before
    // are taken as read, new blobs' are read.
    let source = GitSource::discover(root).unwrap();
    let refused = "HEAD:jobs.yaml: 268435457 bytes, more than the 268435456 allowed; not read";
    for _ in 0..2 {
        let small = source.read_files("HEAD~1").unwrap();
        assert_eq!(small.len(), 2);
        assert_eq!(source.read_files("HEAD").unwrap_err().to_string(), refused);
    }
}
