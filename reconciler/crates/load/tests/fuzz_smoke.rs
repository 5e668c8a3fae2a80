//! The fuzz targets of `fuzz/` (cargo-fuzz, nightly) as a short, seeded
//! mutation run on stable, so CI tries a few thousand hostile inputs on every
//! change: each mutates the corpus (the project's own fleets, observed
//! states and policy rules) the way libFuzzer's mutators do — byte flips,
//! inserts of YAML and CEL punctuation, deletions, duplications, splices
//! between inputs, extreme numbers, deep nesting — and loads the result. A
//! panic fails the test; an abort (stack overflow, out of memory) kills it.
//! `GITFLEET_FUZZ_ITERATIONS` and `GITFLEET_FUZZ_SECONDS` (per target) make a
//! longer run by hand.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gitfleet_load::observed::parse_observed;
use gitfleet_load::{SourceFile, load_fleet};

/// Per target, unless `GITFLEET_FUZZ_ITERATIONS` says otherwise.
const ITERATIONS: usize = 1500;
/// Per target: the run stops early rather than slow CI down.
const BUDGET: Duration = Duration::from_secs(20);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// Every `*.yaml` below `dir` whose path contains `needle`.
fn yaml_files(dir: &Path, needle: &str, out: &mut Vec<Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            yaml_files(&path, needle, out);
        } else if path.extension().is_some_and(|e| e == "yaml")
            && path.to_string_lossy().contains(needle)
        {
            out.push(std::fs::read(&path).unwrap());
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PUNCTUATION: &[u8] = b"{}[]:-,'\"&*!|>#?%@`\n\t ().+<=~_\\";
const EXTREMES: &[&str] = &[
    "9999999999h",
    "-1",
    "0",
    "2147483648",
    "18446744073709551616",
    ".nan",
    "-.inf",
    "1e400",
    "null",
    "~",
    "*a",
    "&a x",
    "<<: *a",
    "!!binary AAAA",
    "''",
    "\"\\u0000\"",
];

/// One libFuzzer-like mutation of `input`, drawing on `corpus` for splices.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let at = rng.below(out.len() + 1);
        match rng.below(8) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => out.insert(at, PUNCTUATION[rng.below(PUNCTUATION.len())]),
            2 if !out.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(256)).min(out.len());
                let piece = out[start..end].to_vec();
                let times = 1 + rng.below(8);
                for _ in 0..times {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let start = rng.below(other.len());
                    let end = (start + 1 + rng.below(512)).min(other.len());
                    out.splice(at..at, other[start..end].iter().copied());
                }
            }
            5 => {
                let word = EXTREMES[rng.below(EXTREMES.len())].as_bytes();
                out.splice(at..at, word.iter().copied());
            }
            6 => {
                // Deep nesting, as hostile inputs try.
                let depth = 1 + rng.below(300);
                let (open, close) = [(b'[', b']'), (b'{', b'}'), (b'(', b')')][rng.below(3)];
                let end = (at + rng.below(32)).min(out.len());
                out.insert(end, b' ');
                for _ in 0..depth {
                    out.insert(end + 1, close);
                    out.insert(at, open);
                }
            }
            _ => {
                // Replace a digit run with an extreme number.
                if let Some(i) = out[at.min(out.len())..].iter().position(u8::is_ascii_digit) {
                    let i = at + i;
                    out.splice(i..=i, b"99999999999999999999".iter().copied());
                }
            }
        }
    }
    out.truncate(1 << 20);
    out
}

fn iterations() -> usize {
    std::env::var("GITFLEET_FUZZ_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ITERATIONS)
}

/// Runs `target` on mutations of `corpus`; returns how many inputs ran.
fn run(name: &str, seed: u64, corpus: &[Vec<u8>], mut target: impl FnMut(&[u8])) -> usize {
    assert!(!corpus.is_empty(), "{name}: empty corpus");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut ran = 0;
    for input in corpus {
        target(input);
        ran += 1;
    }
    let budget = std::env::var("GITFLEET_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(BUDGET, Duration::from_secs);
    while ran < iterations() && started.elapsed() < budget {
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base, corpus);
        // Keep the input for the panic message: a failure names what broke it.
        let shown = String::from_utf8_lossy(&input[..input.len().min(2000)]).into_owned();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)));
        assert!(result.is_ok(), "{name}: panicked on input:\n{shown}");
        ran += 1;
    }
    eprintln!("{name}: {ran} inputs in {:?}", started.elapsed());
    ran
}

#[test]
fn fleets_survive_mutation() {
    let mut corpus = Vec::new();
    yaml_files(&root().join("examples"), "", &mut corpus);
    yaml_files(&root().join("tests/cases/validate"), "/repo/", &mut corpus);
    yaml_files(&root().join("tests/cases/plan"), "fleet", &mut corpus);
    let ran = run("load_fleet", 0x5eed_0001, &corpus, |data| {
        let _ = load_fleet(&[SourceFile::new("f.yaml", data.to_vec())]);
    });
    assert!(ran >= corpus.len());
}

#[test]
fn observed_states_survive_mutation() {
    let mut corpus = Vec::new();
    yaml_files(&root().join("tests/cases/plan"), "observed", &mut corpus);
    yaml_files(&root().join("examples"), "observed", &mut corpus);
    let ran = run("parse_observed", 0x5eed_0002, &corpus, |data| {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = parse_observed("o.yaml", text);
        }
    });
    assert!(ran >= corpus.len());
}

const CEL_FLEET: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p, labels: {team: a}}\nspec: {gpu: {model: H100, count: 8}, size: {min: 1, max: 4}}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {quota: [{model: H100, guaranteed: 8, limit: 16}]}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j, labels: {team: a}}\nspec: {queue: q, replicas: 2, gpusPerReplica: 4, command: [train, --lr, '0.1'], env: {A: b}}\n";

#[test]
fn policy_rules_survive_mutation() {
    let corpus: Vec<Vec<u8>> = [
        "object.spec.replicas * object.spec.gpusPerReplica <= 64",
        "has(object.metadata.labels.team) && object.metadata.labels.team in ['a', 'b']",
        "object.spec.command.all(c, size(c) < 100)",
        "object.spec.command.map(c, c + c).exists(x, x.startsWith('t'))",
        "!(object.spec.queue == 'q') || object.spec.env.A == 'b'",
        "object.metadata.name.matches('^[a-z]+$')",
        "[1, 2, 3].filter(x, x > 1).size() == 2",
        "{'a': 1}.a == 1 ? true : false",
        "double(object.spec.replicas) / 2.0 > 0.5",
        "object.kind == 'Job' && int(object.spec.replicas) >= 1u",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let ran = run("cel_policy", 0x5eed_0003, &corpus, |data| {
        let Ok(expression) = std::str::from_utf8(data) else {
            return;
        };
        let quoted = serde_json::to_string(expression).unwrap();
        let policy = format!(
            "---\napiVersion: gitfleet/v1\nkind: Policy\nmetadata: {{name: fuzz}}\nspec:\n  rules:\n    - expression: {quoted}\n"
        );
        let _ = load_fleet(&[SourceFile::new("f.yaml", format!("{CEL_FLEET}{policy}"))]);
    });
    assert!(ran >= corpus.len());
}
