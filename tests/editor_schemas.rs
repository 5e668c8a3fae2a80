//! The committed JSON Schemas work in editors: `tests/editor/check.mjs` drives the
//! real `yaml-language-server` (the engine of VS Code's YAML extension) over LSP and
//! checks diagnostics, per-document schema association (modelines), hover and
//! completion on the fixtures in `tests/editor/fixtures/` and on every YAML file under
//! `examples/` and `policies/`.
//!
//! Needs Node and `npm ci --prefix tests/editor`. Without `tests/editor/node_modules`
//! the test is skipped, unless `GITFLEET_REQUIRE_EDITOR_TEST=1` (CI) makes that a
//! failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::path::Path;
use std::process::Command;

#[test]
fn schemas_work_in_yaml_language_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let required = std::env::var("GITFLEET_REQUIRE_EDITOR_TEST").is_ok_and(|v| v == "1");
    let server = root.join("tests/editor/node_modules/yaml-language-server");
    if !server.is_dir() {
        assert!(
            !required,
            "GITFLEET_REQUIRE_EDITOR_TEST=1 but {} is missing: run npm ci --prefix tests/editor",
            server.display()
        );
        eprintln!(
            "skipped: yaml-language-server is not installed; run npm ci --prefix tests/editor \
             (set GITFLEET_REQUIRE_EDITOR_TEST=1 to make this a failure)"
        );
        return;
    }

    let output = match Command::new("node")
        .arg("tests/editor/check.mjs")
        .current_dir(root)
        .output()
    {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && !required => {
            eprintln!("skipped: `node` is not on PATH ({err})");
            return;
        }
        Err(err) => panic!("cannot run `node tests/editor/check.mjs`: {err}"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by `cargo test` on failure, or always with `-- --nocapture`.
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "node tests/editor/check.mjs failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
