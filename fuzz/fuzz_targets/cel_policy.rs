//! Any text as a policy rule over a small fleet: compiling, bounding and
//! evaluating it never panics, hangs or exhausts memory.
#![no_main]

use gitfleet_load::{SourceFile, load_fleet};
use libfuzzer_sys::fuzz_target;

const FLEET: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p, labels: {team: a}}\nspec: {gpu: {model: H100, count: 8}, size: {min: 1, max: 4}}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {quota: [{model: H100, guaranteed: 8, limit: 16}]}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j, labels: {team: a}}\nspec: {queue: q, replicas: 2, gpusPerReplica: 4, command: [train, --lr, '0.1'], env: {A: b}}\n";

fuzz_target!(|data: &[u8]| {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(quoted) = serde_json_string(expression) else {
        return;
    };
    let policy = format!(
        "---\napiVersion: gitfleet/v1\nkind: Policy\nmetadata: {{name: fuzz}}\nspec:\n  rules:\n    - expression: {quoted}\n"
    );
    let _ = load_fleet(&[SourceFile::new("f.yaml", format!("{FLEET}{policy}"))]);
});

/// A YAML double-quoted scalar holding `text` (JSON string syntax is valid YAML).
fn serde_json_string(text: &str) -> Result<String, std::fmt::Error> {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                use std::fmt::Write;
                write!(out, "\\u{:04x}", c as u32)?;
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}
