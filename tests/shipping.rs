//! Shipping gitfleet: the Containerfile, the Kubernetes manifests that run
//! its image, the release workflow and the CI example that installs a
//! released binary. No container runtime is here to build the image, so
//! these tests check what the files name against each other and the
//! repository; the CI example's install step runs for real against a
//! release served from a directory (`file://`), checksum check included.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The value of `key = "…"` in Cargo.toml's `[workspace.package]`.
fn workspace_package(key: &str) -> String {
    let toml = read("Cargo.toml");
    let section = toml.split("[workspace.package]").nth(1).unwrap();
    let line = section
        .lines()
        .find(|l| l.starts_with(&format!("{key} =")))
        .unwrap_or_else(|| panic!("no {key} in [workspace.package]"));
    line.split('"').nth(1).unwrap().to_string()
}

/// Every YAML document of a file, as JSON values.
fn yaml_documents(path: &str) -> Vec<serde_json::Value> {
    read(path)
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<serde_json::Value>(doc).unwrap())
        .collect()
}

/// Containerfile instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let (op, args) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((op.to_uppercase(), args.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

#[test]
fn the_containerfile_builds_the_binary_the_manifests_run() {
    let steps = instructions(&read("Containerfile"));
    let arg = |name: &str| {
        steps
            .iter()
            .find_map(|(op, a)| {
                (op == "ARG")
                    .then(|| a.strip_prefix(&format!("{name}=")))
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no ARG {name}"))
            .to_string()
    };
    // the toolchain the workspace declares
    assert_eq!(arg("RUST_VERSION"), workspace_package("rust-version"));
    // two stages: a build stage, then distroless/cc
    let froms: Vec<&String> = steps
        .iter()
        .filter(|(op, _)| op == "FROM")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].ends_with(" AS build"), "{}", froms[0]);
    assert!(
        froms[1].starts_with("gcr.io/distroless/cc-debian12:nonroot"),
        "{}",
        froms[1]
    );
    // everything copied from the context exists and is not ignored
    let ignored: Vec<String> = read(".dockerignore")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().trim_end_matches('/').to_string())
        .collect();
    let copies: Vec<&String> = steps
        .iter()
        .filter(|(op, a)| op == "COPY" && !a.starts_with("--from"))
        .map(|(_, a)| a)
        .collect();
    assert!(copies.len() >= 3, "{copies:?}");
    for copy in &copies {
        let parts: Vec<&str> = copy.split_whitespace().collect();
        for source in &parts[..parts.len() - 1] {
            assert!(
                root().join(source).exists(),
                "COPY {source}: not in the repository"
            );
            assert!(
                !ignored.iter().any(|i| i == source),
                "COPY {source}: left out by .dockerignore"
            );
        }
    }
    for needed in ["Cargo.toml", "Cargo.lock", "src", "reconciler", "benches"] {
        assert!(
            copies.iter().any(|c| {
                let parts: Vec<&str> = c.split_whitespace().collect();
                parts[..parts.len() - 1].contains(&needed)
            }),
            "{needed} is not copied: the workspace does not build without it"
        );
    }
    // the binary built is the package's [[bin]], and is what the image runs
    let run = steps
        .iter()
        .find(|(op, a)| op == "RUN" && a.contains("cargo build"))
        .map(|(_, a)| a)
        .unwrap();
    assert!(run.contains("--release --locked --bin gitfleet"), "{run}");
    assert!(read("Cargo.toml").contains("[[bin]]\nname = \"gitfleet\"\n"));
    let copied_binary = steps
        .iter()
        .find_map(|(op, a)| (op == "COPY" && a.starts_with("--from=build")).then_some(a))
        .unwrap();
    let entrypoint = steps
        .iter()
        .find_map(|(op, a)| (op == "ENTRYPOINT").then_some(a))
        .unwrap();
    let entry: Vec<String> = serde_json::from_str(entrypoint).unwrap();
    assert!(
        copied_binary.ends_with(&format!(" {}", entry[0])),
        "{copied_binary} / {entrypoint}"
    );
    let user = steps.iter().find(|(op, _)| op == "USER").unwrap().1.clone();
    let port: u64 = steps
        .iter()
        .find(|(op, _)| op == "EXPOSE")
        .unwrap()
        .1
        .parse()
        .unwrap();

    // the Deployment runs this image, as that user, on that port
    let deployment = yaml_documents("deploy/kubernetes/deployment.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let image = container["image"].as_str().unwrap();
    let version = workspace_package("version");
    assert!(
        image.ends_with(&format!("/gitfleet:{version}")),
        "{image}: not the image of this release ({version})"
    );
    assert_eq!(
        format!(
            "{}:{}",
            pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
        ),
        user
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["ports"][0]["containerPort"], port);
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "reconcile");
    assert!(
        args.contains(&format!("0.0.0.0:{port}").as_str()),
        "{args:?}"
    );
    // the docs say where the image comes from, and that CI does not build it
    let docs = read("docs/ci.md");
    assert!(
        docs.contains("Containerfile") && docs.contains(image),
        "docs/ci.md"
    );
    assert!(
        docs.contains("not built"),
        "docs/ci.md must say the image is not built in CI"
    );
    assert!(read("docs/kubernetes.md").contains(image));
}

/// The `run` script of the step named `name` in a workflow's job `job`.
fn step_script(workflow: &serde_json::Value, job: &str, name: &str) -> String {
    workflow["jobs"][job]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name:?} in job {job}"))["run"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn ci_installs_the_assets_the_release_publishes_and_never_compiles() {
    let ci = &yaml_documents("examples/ci/gitfleet.yml")[0];
    let release = &yaml_documents("deploy/ci/release.yml")[0];
    let install = step_script(ci, "preview", "Install gitfleet");
    let package = step_script(release, "binary", "Package");
    // one name for the archive, and the checksum file beside it
    assert!(package.contains(r#"name="gitfleet-${version}-x86_64-unknown-linux-gnu""#));
    assert!(package.contains(r#"sha256sum "$name.tar.gz" > SHA256SUMS"#));
    assert!(install.contains(r#"asset="gitfleet-${GITFLEET_VERSION}-x86_64-unknown-linux-gnu""#));
    assert!(install.contains("sha256sum --check"));
    // no step of the pull-request workflow compiles gitfleet
    for step in ci["jobs"]["preview"]["steps"].as_array().unwrap() {
        let run = step["run"].as_str().unwrap_or("");
        assert!(
            !run.contains("cargo "),
            "step {} compiles: {run}",
            step["name"]
        );
    }
    // the preview step posts `plan --base … -o markdown`
    let preview = step_script(ci, "preview", "Preview");
    assert!(preview.contains("gitfleet plan --base \"$BASE\" --rev HEAD"));
    assert!(preview.contains("-o markdown"));
    // the version CI installs is a release of this workspace's line
    assert_eq!(ci["env"]["GITFLEET_VERSION"], workspace_package("version"));
}

/// What a run of the install step left.
struct Install {
    _runner: tempfile::TempDir,
    ok: bool,
    stderr: String,
    installed: PathBuf,
    github_path: String,
}

fn run_install(script: &str, download: &Path, version: &str) -> Install {
    let dir = tempfile::tempdir().unwrap();
    let runner = dir.path().to_path_buf();
    let github_path = runner.join("github_path");
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .env(
            "GITFLEET_DOWNLOAD",
            format!("file://{}", download.display()),
        )
        .env("GITFLEET_VERSION", version)
        .env("RUNNER_TEMP", &runner)
        .env("GITHUB_PATH", &github_path)
        .output()
        .unwrap();
    Install {
        _runner: dir,
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        installed: runner.join("bin/gitfleet"),
        github_path: std::fs::read_to_string(&github_path).unwrap_or_default(),
    }
}

/// A release directory as the release workflow lays it out: `vVERSION/`
/// with the archive (a stand-in `gitfleet` that prints its version) and
/// `SHA256SUMS`.
fn fake_release(version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join(format!("v{version}"));
    let name = format!("gitfleet-{version}-x86_64-unknown-linux-gnu");
    let staging = release.join(&name);
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(
        staging.join("gitfleet"),
        format!("#!/bin/sh\necho gitfleet {version}\n"),
    )
    .unwrap();
    let sh = |cmd: &str| {
        let out = Command::new("bash")
            .args(["-eo", "pipefail", "-c", cmd])
            .current_dir(&release)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(&format!(
        "chmod +x {name}/gitfleet && tar -czf {name}.tar.gz {name} && rm -r {name} \
         && sha256sum {name}.tar.gz > SHA256SUMS"
    ));
    dir
}

#[test]
fn the_ci_install_step_verifies_the_checksum_before_installing() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_CURL").is_none(),
            "curl is required (GITFLEET_REQUIRE_CURL is set) but missing"
        );
        eprintln!("skipped: no curl (scripts/test installs it)");
        return;
    }
    let ci = &yaml_documents("examples/ci/gitfleet.yml")[0];
    let script = step_script(ci, "preview", "Install gitfleet");
    let version = "9.8.7";

    // a good release installs, and the binary is put on the PATH
    let good = fake_release(version);
    let run = run_install(&script, good.path(), version);
    assert!(run.ok, "{}", run.stderr);
    let out = Command::new(&run.installed).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("gitfleet {version}\n")
    );
    assert!(run.github_path.ends_with("/bin\n"), "{:?}", run.github_path);

    // an archive that does not match its checksum is refused, nothing installed
    let tampered = fake_release(version);
    let archive = tampered.path().join(format!(
        "v{version}/gitfleet-{version}-x86_64-unknown-linux-gnu.tar.gz"
    ));
    let mut bytes = std::fs::read(&archive).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&archive, bytes).unwrap();
    let run = run_install(&script, tampered.path(), version);
    assert!(!run.ok);
    assert!(run.stderr.contains("did NOT match"), "{}", run.stderr);
    assert!(!run.installed.exists());

    // an archive SHA256SUMS does not list is refused too
    let unlisted = fake_release(version);
    std::fs::write(
        unlisted.path().join(format!("v{version}/SHA256SUMS")),
        format!("{}  something-else.tar.gz\n", "0".repeat(64)),
    )
    .unwrap();
    let run = run_install(&script, unlisted.path(), version);
    assert!(!run.ok);
    assert!(!run.installed.exists());

    // a release that is not there fails on the download
    let run = run_install(&script, good.path(), "0.0.0");
    assert!(!run.ok);
    assert!(!run.installed.exists());
}
