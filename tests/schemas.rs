//! The committed JSON Schemas must equal the ones generated from the Rust types.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::process::Command;

#[test]
fn committed_schemas_are_up_to_date() {
    let output = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["schema", "--check", "--out", "schemas"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run gitfleet schema --check");
    assert!(
        output.status.success(),
        "schemas/ is stale; run `cargo run -- schema`:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
