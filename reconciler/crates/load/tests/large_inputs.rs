//! Inputs whose size once made validation quadratic or cubic: each must load
//! in time linear in its size (here: well inside the test's patience; the
//! old code took minutes on the same inputs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write;
use std::time::{Duration, Instant};

use gitfleet_load::{SourceFile, load_fleet};

/// Far above what linear code needs for these inputs, far below what the
/// quadratic code took (23 s for 100k keys, 10 s for a 3,000-level chain).
const PATIENCE: Duration = Duration::from_secs(15);

fn messages(text: String) -> (Vec<String>, Duration) {
    let started = Instant::now();
    let loaded = load_fleet(&[SourceFile::new("f.yaml", text)]);
    let took = started.elapsed();
    (
        loaded.diagnostics.iter().map(ToString::to_string).collect(),
        took,
    )
}

#[test]
fn a_300k_key_mapping_loads_and_a_late_duplicate_is_still_found() {
    let mut text =
        String::from("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n");
    for i in 0..300_000 {
        writeln!(text, "    k{i}: v").unwrap();
    }
    let (found, took) = messages(format!("{text}spec: {{}}\n"));
    assert_eq!(found, Vec::<String>::new());
    assert!(took < PATIENCE, "took {took:?}");

    text.push_str("    k17: again\nspec: {}\n");
    let (found, took) = messages(text);
    assert_eq!(
        found,
        ["f.yaml:300006:5: YAML syntax error: duplicate key \"k17\" (first at line 23, column 5)"]
    );
    assert!(took < PATIENCE, "took {took:?}");
}

#[test]
fn merge_keys_of_large_mappings_stay_linear_and_keep_their_precedence() {
    let mut text = String::from("base: &base\n");
    for i in 0..100_000 {
        writeln!(text, "  k{i}: base").unwrap();
    }
    text.push_str("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n    <<: *base\n    k5: own\n");
    text.push_str("spec: {}\n");
    // The top-level `base` key is not a gitfleet field.
    let (found, took) = messages(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("base"), "{found:?}");
    assert!(took < PATIENCE, "took {took:?}");
}

fn queue(text: &mut String, name: &str, parent: Option<&str>) {
    text.push_str("---\napiVersion: gitfleet/v1\nkind: Queue\n");
    match parent {
        Some(parent) => writeln!(
            text,
            "metadata: {{name: {name}}}\nspec: {{parent: {parent}}}"
        ),
        None => writeln!(text, "metadata: {{name: {name}}}\nspec: {{}}"),
    }
    .unwrap();
}

#[test]
fn a_queue_chain_thousands_deep_validates_in_linear_time() {
    let mut text = String::new();
    queue(&mut text, "q0", None);
    for i in 1..20_000 {
        queue(&mut text, &format!("q{i}"), Some(&format!("q{}", i - 1)));
    }
    let (found, took) = messages(text);
    assert_eq!(found, Vec::<String>::new());
    assert!(took < PATIENCE, "took {took:?}");
}

#[test]
fn a_long_cycle_is_reported_once_per_queue_abbreviated() {
    let n = 5_000;
    let mut text = String::new();
    for i in 0..n {
        queue(
            &mut text,
            &format!("q{i}"),
            Some(&format!("q{}", (i + 1) % n)),
        );
    }
    // A tail hanging off the cycle is not on it.
    queue(&mut text, "tail", Some("q7"));
    let (found, took) = messages(text);
    assert!(took < PATIENCE, "took {took:?}");
    assert_eq!(found.len(), n, "one error per queue on the cycle");
    assert_eq!(
        found[0],
        "f.yaml:5:16: Queue q0: spec.parent: cycle in the queue tree: q0 → q1 → q2 → q3 → q4 → q5 → q6 → q7 → q8 → q9 → q10 → q11 → … → q0 (5000 queues)"
    );
    assert!(found.iter().all(|m| !m.contains("Queue tail")));
}

#[test]
fn short_cycles_are_shown_whole_from_each_member() {
    let mut text = String::new();
    queue(&mut text, "a", Some("b"));
    queue(&mut text, "b", Some("a"));
    queue(&mut text, "c", Some("c"));
    let (found, _) = messages(text);
    assert_eq!(
        found,
        [
            "f.yaml:5:16: Queue a: spec.parent: cycle in the queue tree: a → b → a",
            "f.yaml:10:16: Queue b: spec.parent: cycle in the queue tree: b → a → b",
            "f.yaml:15:16: Queue c: spec.parent: cycle in the queue tree: c → c",
        ]
    );
}

/// A Queue whose `metadata.labels` has `n` keys, each value written by
/// `value(i)`.
fn labels(n: usize, value: impl Fn(usize) -> String) -> String {
    let mut text =
        String::from("apiVersion: gitfleet/v1\nkind: Queue\nmetadata:\n  name: q\n  labels:\n");
    for i in 0..n {
        writeln!(text, "    k{i}: {}", value(i)).unwrap();
    }
    text.push_str("spec: {}\n");
    text
}

/// The fastest of three loads of `small` and of `large`, interleaved (a
/// busy stretch of a shared CI machine slows both alike), and the
/// diagnostics of the large one.
fn fastest_pair(small: &str, large: &str) -> (Duration, Duration, Vec<String>) {
    let (mut best_small, mut best_large) = (Duration::MAX, Duration::MAX);
    let mut found = Vec::new();
    for _ in 0..3 {
        best_small = best_small.min(messages(small.to_string()).1);
        let (large_found, took) = messages(large.to_string());
        best_large = best_large.min(took);
        found = large_found;
    }
    (best_small, best_large, found)
}

/// Ten times the keys may take ten times as long (a linear loader), with
/// room for noise; a quadratic one takes a hundred times as long. The
/// ratio holds in debug and release builds alike, on any machine.
const MAX_GROWTH: f64 = 35.0;

#[test]
fn a_200k_key_mapping_loads_in_linear_time() {
    let small = labels(20_000, |_| "v".to_string());
    let large = labels(200_000, |_| "v".to_string());
    let (t_small, t_large, found) = fastest_pair(&small, &large);
    assert_eq!(found, Vec::<String>::new());
    let growth = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-6);
    assert!(
        growth < MAX_GROWTH,
        "20k keys {t_small:?}, 200k keys {t_large:?}: {growth:.1}x"
    );
    assert!(t_large < PATIENCE, "took {t_large:?}");
}

#[test]
fn a_schema_error_per_key_of_a_200k_key_mapping_stays_linear() {
    // Each value is an integer where labels take strings: one error per
    // key, each located in the same mapping (once a scan of it per error).
    let small = labels(20_000, |i| i.to_string());
    let large = labels(200_000, |i| i.to_string());
    let (t_small, t_large, found) = fastest_pair(&small, &large);
    assert_eq!(found.len(), 200_000);
    assert_eq!(
        found[199_999],
        "f.yaml:200005:14: Queue q: metadata.labels.k199999: expected string, found integer 199999 (put the value in quotes to make it a string)"
    );
    let growth = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-6);
    assert!(
        growth < MAX_GROWTH,
        "20k keys {t_small:?}, 200k keys {t_large:?}: {growth:.1}x"
    );
    assert!(t_large < PATIENCE, "took {t_large:?}");
}
