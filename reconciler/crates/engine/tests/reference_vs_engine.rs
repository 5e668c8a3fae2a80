#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! The engine against a reference scheduler (issue 16, "a reference
//! scheduler for small fleets"): random small fleets (`support`) are
//! planned by both, and the plans must agree on the jobs placed, the
//! victims preempted (and for whom), the jobs terminated and cancelled.
//! `reference` is written from DESIGN.md, `docs/semantics.md` and issue
//! 16, with exhaustive search where the rules ask for a minimum.
//!
//! Where the engine differs in a way issue 16 (or this test) names, the
//! case is counted under a named predicate (`known_divergence_…`) and not
//! failed; `docs/reference-divergences.md` has a minimal example of each.
//! Fix the engine, then delete the predicate: its cases must then agree.
//! A divergence no predicate explains fails the test with a shrunk case.
//!
//! - `GITFLEET_REFERENCE_CASES=N`: cases per run (default [`CASES`]);
//! - `GITFLEET_REFERENCE_SEED=N`: another fixed seed (default 1);
//! - `GITFLEET_REFERENCE_SHOW=N`: print a shrunk example of up to N cases
//!   of each known class (slow: shrinking plans thousands of fleets);
//!   `GITFLEET_REFERENCE_ONLY=TEXT`: only of the classes whose name holds it;
//! - `GITFLEET_REFERENCE_FILE=PATH`: print, for each example of a markdown
//!   file written like docs/reference-divergences.md, both plans and the
//!   closest variant of the reference (`GITFLEET_REFERENCE_ITEMS=1,5`: also
//!   the reference with those items as today).

mod known;
mod reference;
mod support;

use std::collections::BTreeMap;

use known::{
    Verdict, differences, known_divergences_together, predicates, preferred_domains_excess, report,
    shrink, verdict,
};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngSeed, TestRunner};
use reference::{Rules, reference};
use support::{build, case_raw};

/// Random cases per run when `GITFLEET_REFERENCE_CASES` is not set: about
/// 20 s in a debug build on two cores.
const CASES: u32 = 3000;

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn engine_agrees_with_the_reference_on_small_fleets() {
    let cases = env_u32("GITFLEET_REFERENCE_CASES", CASES);
    let show = env_u32("GITFLEET_REFERENCE_SHOW", 0);
    let only = std::env::var("GITFLEET_REFERENCE_ONLY").unwrap_or_default();
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(env_u32("GITFLEET_REFERENCE_SEED", 1).into()),
        failure_persistence: None,
        ..Config::default()
    });
    let mut tally: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..cases {
        let mut tree = case_raw().new_tree(&mut runner).unwrap();
        let case = build(&tree.current());
        match verdict(&case) {
            Verdict::Agree => *tally.entry("agree".to_string()).or_default() += 1,
            Verdict::Known(class) => {
                let seen = tally.entry(class.clone()).or_default();
                *seen += 1;
                if *seen <= show && !class.starts_with("together") && class.contains(&only) {
                    let small = shrink(&mut tree, |c| verdict(c) == Verdict::Known(class.clone()));
                    eprintln!("=== known divergence: {class}\n{}", report(&small));
                }
            }
            Verdict::Unexplained => {
                let small = shrink(&mut tree, |c| verdict(c) == Verdict::Unexplained);
                panic!(
                    "the engine and the reference differ, and no known divergence explains it \
                     (a bug in one of them, or a new class for docs/reference-divergences.md):\n{}",
                    report(&small)
                );
            }
        }
    }
    eprintln!("{cases} random fleets: {tally:#?}");
    let agree = tally.get("agree").copied().unwrap_or(0);
    assert!(
        agree * 10 >= cases * 7,
        "the reference agrees with the engine on only {agree} of {cases} fleets"
    );
}

#[test]
fn generated_fleets_exercise_the_rules() {
    // The generator must keep producing the situations the reference is
    // there to check: preemptions, stopping jobs, gangs, topology, models.
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(2),
        ..Config::default()
    });
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    for _ in 0..300 {
        let case = build(&case_raw().new_tree(&mut runner).unwrap().current());
        let plan = case.plan();
        let mut count = |k: &'static str, yes: bool| *seen.entry(k).or_default() += u32::from(yes);
        count("preempt", !support::preempted(&plan).is_empty());
        count("place", !support::placed(&plan).is_empty());
        count("terminate", !support::terminated(&plan).is_empty());
        count("cancel", !support::cancelled(&plan).is_empty());
        count(
            "stopping",
            case.observed
                .running
                .iter()
                .any(|r| r.preempting_since.is_some()),
        );
        count(
            "nominated",
            case.observed.queued.iter().any(|q| !q.nominated.is_empty()),
        );
        count("gang", case.fleet.jobs.iter().any(|j| j.spec.replicas > 1));
        count(
            "three levels",
            case.fleet.queues.iter().any(|q| {
                q.spec.parent.as_ref().is_some_and(|p| {
                    case.fleet
                        .queues
                        .iter()
                        .any(|x| x.name() == p && x.spec.parent.is_some())
                })
            }),
        );
        count(
            "waiting",
            plan.pending
                .iter()
                .any(|p| matches!(p.waiting_for.as_deref(), Some("preemption" | "freeing"))),
        );
    }
    for (what, n) in &seen {
        assert!(*n >= 10, "only {n} of 300 fleets have {what}: {seen:?}");
    }
}

/// The examples of `docs/reference-divergences.md` (or of the file named by
/// `GITFLEET_REFERENCE_FILE`, whose examples are only printed): each must
/// still make the engine and the reference differ, explained by the
/// predicates its `Predicate:` line names. When the engine is fixed, this
/// fails: delete the example and its predicate.
#[test]
fn documented_divergences_still_diverge() {
    let (path, check) = match std::env::var("GITFLEET_REFERENCE_FILE") {
        Ok(p) => (std::path::PathBuf::from(p), false),
        Err(_) => (
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../docs/reference-divergences.md"),
            true,
        ),
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let examples = support::examples(&text);
    assert!(
        !examples.is_empty() || !check,
        "no examples in {}",
        path.display()
    );
    for ex in examples {
        if ex.predicates.is_empty() && !ex.invariant_predicates.is_empty() && check {
            continue; // checked by invariants.rs
        }
        let plan = ex.case.plan();
        if !check {
            if let Ok(items) = std::env::var("GITFLEET_REFERENCE_ITEMS") {
                let items: Vec<u8> = items.split(',').filter_map(|i| i.parse().ok()).collect();
                let o = reference(&ex.case.input(), &Rules::with_today(&items));
                eprintln!(
                    "=== items {items:?}\n{}\n{}",
                    o.log.join("\n"),
                    differences(&plan, &o).join("\n")
                );
            }
            eprintln!("=== {}\n{}", ex.title, report(&ex.case));
            continue;
        }
        let r = reference(&ex.case.input(), &Rules::contract());
        assert!(
            !differences(&plan, &r).is_empty()
                || !preferred_domains_excess(&ex.case, &plan).is_empty(),
            "{}: the engine now agrees with the reference; delete this example and its predicate",
            ex.title
        );
        assert!(
            !ex.predicates.is_empty(),
            "{}: no `Predicate:` line",
            ex.title
        );
        let all = predicates();
        for name in &ex.predicates {
            if name == "known_divergences_together" {
                assert!(
                    known_divergences_together(&ex.case, &plan).is_some(),
                    "{}: not explained by several items together:\n{}",
                    ex.title,
                    report(&ex.case)
                );
                continue;
            }
            let (_, _, known) = all
                .iter()
                .find(|(n, _, _)| n == name)
                .unwrap_or_else(|| panic!("{}: no predicate {name}", ex.title));
            assert!(
                known(&ex.case, &plan),
                "{}: {name} does not explain it:\n{}",
                ex.title,
                report(&ex.case)
            );
        }
    }
}
