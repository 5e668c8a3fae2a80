//! `cargo bench -p gitfleet-load --bench yaml [-- SHAPE…]`: loading one YAML
//! file of a given shape at three sizes (20k, 80k and 200k keys or items),
//! medians of several runs, and how the time grows (a linear loader takes
//! about 10× the time for 10× the input; a quadratic one 100×).
//!
//! Shapes: `labels` (a Queue whose `metadata.labels` has N keys), `foreign`
//! (another tool's document: a top-level mapping of N keys), `flow` (one
//! flow mapping `{k0: v, …}` on a single line), `long` (N keys with
//! 200-byte values, as a 50 MB document of 240k keys), `seq` (a sequence of
//! N items), `observed` (an observed-state file with N nodes, YAML), and
//! hostile ones: `errors` (N labels whose values are not strings: N schema
//! errors in one mapping), `unknown` (N unknown fields in one `spec`),
//! `scalar` (one plain scalar of N × 20 bytes over N lines), `docs` (N
//! small documents).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::fmt::Write;
use std::time::{Duration, Instant};

use gitfleet_load::observed::parse_observed;
use gitfleet_load::{SourceFile, load_fleet};

const RUNS: usize = 5;
const SIZES: [usize; 3] = [20_000, 80_000, 200_000];
const SHAPES: [&str; 10] = [
    "labels", "foreign", "flow", "long", "seq", "observed", "errors", "unknown", "scalar", "docs",
];

/// The file of `shape` with `n` keys (or items).
fn text(shape: &str, n: usize) -> String {
    let mut t = String::new();
    match shape {
        "labels" => {
            t.push_str("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n");
            for i in 0..n {
                writeln!(t, "    k{i}: v").unwrap();
            }
            t.push_str("spec: {}\n");
        }
        "foreign" => {
            for i in 0..n {
                writeln!(t, "key-{i}: value {i}").unwrap();
            }
        }
        "flow" => {
            t.push_str("data: {");
            for i in 0..n {
                write!(t, "k{i}: v, ").unwrap();
            }
            t.push_str("}\n");
        }
        "long" => {
            let value = "x".repeat(200);
            for i in 0..n {
                writeln!(t, "k{i}: {value}").unwrap();
            }
        }
        "seq" => {
            t.push_str("items:\n");
            for i in 0..n {
                writeln!(t, "  - item {i}").unwrap();
            }
        }
        "observed" => {
            t.push_str("time: 2026-11-21T10:00:00Z\nnodes:\n");
            for i in 0..n {
                writeln!(
                    t,
                    "  - {{name: n{i}, pool: p, gpus: [{{index: 0, model: H100}}]}}"
                )
                .unwrap();
            }
            t.push_str("running: []\n");
        }
        "errors" => {
            t.push_str("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n");
            for i in 0..n {
                writeln!(t, "    k{i}: {i}").unwrap();
            }
            t.push_str("spec: {}\n");
        }
        "unknown" => {
            t.push_str("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\nspec:\n");
            for i in 0..n {
                writeln!(t, "  field{i}: v").unwrap();
            }
        }
        "scalar" => {
            t.push_str("text: first\n");
            for _ in 0..n {
                t.push_str("  and then a word\n");
            }
        }
        "docs" => {
            for i in 0..n {
                writeln!(t, "---\nkind: ConfigMap\nmetadata: {{name: c{i}}}").unwrap();
            }
        }
        other => panic!("unknown shape {other}"),
    }
    t
}

/// One load of `text` as `shape` is read, and how long it took.
fn load_once(shape: &str, n: usize, text: &str) -> Duration {
    let started = Instant::now();
    if shape == "observed" {
        let parsed = parse_observed("observed.yaml", text);
        assert!(parsed.is_ok(), "{shape}: {:?}", parsed.err());
    } else {
        let loaded = load_fleet(&[SourceFile::new("f.yaml", text)]);
        // The hostile shapes have one error per key; the others none.
        let expected = if matches!(shape, "errors" | "unknown") {
            n
        } else {
            0
        };
        assert_eq!(
            loaded.diagnostics.len(),
            expected,
            "{shape}: first {:?}",
            loaded.diagnostics.first()
        );
    }
    started.elapsed()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let shapes: Vec<&str> = if args.is_empty() {
        SHAPES.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for shape in shapes {
        let mut medians = Vec::new();
        for n in SIZES {
            let text = text(shape, n);
            let times: Vec<Duration> = (0..RUNS).map(|_| load_once(shape, n, &text)).collect();
            medians.push((n, text.len(), median(times)));
        }
        let line: Vec<String> = medians
            .iter()
            .map(|(n, bytes, t)| format!("{n:>7} ({:>5.1} MB) {t:>9.1?}", *bytes as f64 / 1e6))
            .collect();
        let (first, last) = (medians[0], medians[medians.len() - 1]);
        println!(
            "{shape:>8}: {} | {}x input: {:.1}x time",
            line.join(" | "),
            last.0 / first.0,
            last.2.as_secs_f64() / first.2.as_secs_f64().max(1e-9)
        );
    }
}
