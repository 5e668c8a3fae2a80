//! What the engine's plan and the reference's outcome are compared on,
//! and the named predicates that recognise a known divergence (issue 16's
//! items, and classes this comparison found). Shared by
//! `reference_vs_engine.rs` and `invariants.rs`. Fix the engine, then
//! delete the predicate (and its `reference::Rules` item): its cases must
//! then agree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, BTreeSet};

use model::observed::NodeGpus;
use model::plan::Plan;
use model::spec::TopologyLevel;
use proptest::strategy::ValueTree;

use crate::reference::{
    ITEMS, NEW_LENT_PROMISE_KEEPS_TURN, NEW_RECLAIM_BEFORE_OWN_VICTIMS, Outcome, Rules, Wait,
    fewest_domains, reference, would_fit,
};
use crate::support::{self, Case, CaseRaw, build, describe, describe_plan};

// ---------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------

/// How the engine's plan differs from the reference's outcome.
pub fn differences(plan: &Plan, r: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    let placed: BTreeSet<String> = support::placed(plan).into_keys().collect();
    let want: BTreeSet<String> = r.placed.keys().cloned().collect();
    if placed != want {
        out.push(format!("placed: engine {placed:?}, reference {want:?}"));
    }
    let victims = support::preempted(plan);
    if victims != r.preempted {
        out.push(format!(
            "preempted (victim → for): engine {victims:?}, reference {:?}",
            r.preempted
        ));
    }
    if support::terminated(plan) != r.terminated {
        out.push(format!(
            "terminated: engine {:?}, reference {:?}",
            support::terminated(plan),
            r.terminated
        ));
    }
    if support::cancelled(plan) != r.cancelled {
        out.push(format!(
            "cancelled: engine {:?}, reference {:?}",
            support::cancelled(plan),
            r.cancelled
        ));
    }
    out
}

/// Whether the reference, with the given items behaving as documented
/// today, agrees with the engine.
pub fn agrees_with_today(case: &Case, plan: &Plan, items: &[u8]) -> bool {
    differences(plan, &reference(&case.input(), &Rules::with_today(items))).is_empty()
}

// ---------------------------------------------------------------------------
// Known divergences: delete a predicate once the engine is fixed
// ---------------------------------------------------------------------------

/// Not in issue 16 (found by this test; rules 5a and 5b together, a
/// decision for docs/semantics.md): whether the preemptor's queue stays
/// within its guarantee (reclaim) is judged before its own leaf's
/// lower-priority victims are removed.
pub fn known_divergence_reclaim_before_own_victims(case: &Case, plan: &Plan) -> bool {
    agrees_with_today(case, plan, &[NEW_RECLAIM_BEFORE_OWN_VICTIMS])
}

/// Tension T6 (docs/reference-divergences.md): a preemptor whose promised
/// GPUs were lent to a job within its guarantee keeps its leaf's early turn
/// in the second pass.
pub fn known_tension_lent_promise_keeps_turn(case: &Case, plan: &Plan) -> bool {
    agrees_with_today(case, plan, &[NEW_LENT_PROMISE_KEEPS_TURN])
}

/// Not in issue 16 (found by this test; rule 5 "no more than needed", next
/// to item 5's "no victim preempted that frees nothing it needs"): the
/// engine preempts, for one preemptor, a victim it would fit without.
/// Checked on the engine's plan alone (`reference::would_fit`), so it also
/// covers whatever else differs in such a case.
pub fn known_divergence_superfluous_victims(case: &Case, plan: &Plan) -> bool {
    !superfluous_victims(case, plan).is_empty()
}

/// How far the reference's outcome is from the engine's plan: jobs placed
/// by one only, victims of one only or for another job, pending jobs that
/// wait (for victims or stopping jobs) in one only, pending jobs in another
/// order.
pub fn distance(plan: &Plan, r: &Outcome) -> usize {
    let placed: BTreeSet<String> = support::placed(plan).into_keys().collect();
    let want: BTreeSet<String> = r.placed.keys().cloned().collect();
    let victims = support::preempted(plan);
    let mut d = placed.symmetric_difference(&want).count();
    d += victims
        .iter()
        .filter(|(v, p)| r.preempted.get(*v) != Some(p))
        .count();
    d += r
        .preempted
        .keys()
        .filter(|v| !victims.contains_key(*v))
        .count();
    for p in &plan.pending {
        let engine = matches!(p.waiting_for.as_deref(), Some("preemption" | "freeing"));
        let mine = matches!(
            r.pending.get(&*p.job),
            Some(Wait::Preemption | Wait::Freeing)
        );
        d += usize::from(engine != mine);
    }
    // The engine lists pending jobs in the order it considered them.
    let engine: Vec<&str> = plan.pending.iter().map(|p| &*p.job).collect();
    let mine: Vec<&str> = r
        .order
        .iter()
        .filter(|j| r.pending.contains_key(*j))
        .map(String::as_str)
        .collect();
    d += engine.iter().zip(&mine).filter(|(a, b)| a != b).count();
    d + support::terminated(plan)
        .symmetric_difference(&r.terminated)
        .count()
        + support::cancelled(plan)
            .symmetric_difference(&r.cancelled)
            .count()
}

/// Several of the known divergences at once: the reference agrees with
/// the engine once some of the items above behave as today. Every set of
/// two or three items is tried; beyond, a beam search adds one item at a
/// time to the [`TOGETHER_BEAM`] sets closest to the engine's plan
/// ([`distance`]), up to [`TOGETHER_DEPTH`] items.
pub fn known_divergences_together(case: &Case, plan: &Plan) -> Option<Vec<u8>> {
    let mut scored: Vec<(usize, Vec<u8>)> = Vec::new();
    for mask in 0u32..(1 << ITEMS.len()) {
        if !(2..=3).contains(&mask.count_ones()) {
            continue;
        }
        let set: Vec<u8> = (0..ITEMS.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ITEMS[i])
            .collect();
        let o = reference(&case.input(), &Rules::with_today(&set));
        if differences(plan, &o).is_empty() {
            return Some(set);
        }
        scored.push((distance(plan, &o), set));
    }
    let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
    scored.sort();
    let mut beam: Vec<Vec<u8>> = scored
        .into_iter()
        .take(TOGETHER_BEAM)
        .map(|(_, s)| s)
        .collect();
    for _ in 3..TOGETHER_DEPTH {
        let mut next: Vec<(usize, Vec<u8>)> = Vec::new();
        for set in &beam {
            for &item in ITEMS {
                if set.contains(&item) {
                    continue;
                }
                let mut with = set.clone();
                with.push(item);
                with.sort_unstable();
                if !seen.insert(with.clone()) {
                    continue;
                }
                let o = reference(&case.input(), &Rules::with_today(&with));
                if differences(plan, &o).is_empty() {
                    return Some(with);
                }
                next.push((distance(plan, &o), with));
            }
        }
        next.sort();
        beam = next
            .into_iter()
            .take(TOGETHER_BEAM)
            .map(|(_, s)| s)
            .collect();
    }
    None
}

/// Sets kept at each step of [`known_divergences_together`].
pub const TOGETHER_BEAM: usize = 24;

/// The most items [`known_divergences_together`] switches to today's
/// behaviour at once.
pub const TOGETHER_DEPTH: usize = 5;

pub type Predicate = fn(&Case, &Plan) -> bool;

/// Every named predicate: its function's name, the class it counts, itself.
pub fn predicates() -> Vec<(&'static str, &'static str, Predicate)> {
    vec![
        (
            "known_divergence_reclaim_before_own_victims",
            "new: reclaim judged before own victims",
            known_divergence_reclaim_before_own_victims,
        ),
        (
            "known_tension_lent_promise_keeps_turn",
            "tension: lent promise keeps its turn",
            known_tension_lent_promise_keeps_turn,
        ),
    ]
}

/// The class of a divergence, by the first predicate that explains it.
pub fn known_divergence(case: &Case, plan: &Plan) -> Option<String> {
    for (_, class, known) in predicates() {
        if known(case, plan) {
            return Some(class.to_string());
        }
    }
    known_divergences_together(case, plan).map(|s| format!("together {s:?}"))
}

// ---------------------------------------------------------------------------
// Checks on the engine's plan alone
// ---------------------------------------------------------------------------

/// Victims the engine preempted that their preemptor would fit without.
pub fn superfluous_victims(case: &Case, plan: &Plan) -> Vec<String> {
    let placed = support::placed(plan);
    let mut by_preemptor: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (victim, preemptor) in support::preempted(plan) {
        by_preemptor.entry(preemptor).or_default().insert(victim);
    }
    let mut out = Vec::new();
    for (preemptor, victims) in &by_preemptor {
        if victims.len() < 2 {
            continue;
        }
        for v in victims {
            let mut rest = victims.clone();
            rest.remove(v);
            if would_fit(
                &case.input(),
                &Rules::with_today(&[5, 6]),
                preemptor,
                &rest,
                &placed,
            ) {
                out.push(format!("{preemptor} fits without preempting {v}"));
            }
        }
    }
    out
}

/// Jobs with `topology.preferred` that the engine placed across more
/// domains than the GPUs it had allowed (its own GPUs plus those still free
/// after the plan). Only on plans where nobody waits for GPUs and nothing
/// is nominated, so that "free after the plan" was free when it was placed.
pub fn preferred_domains_excess(case: &Case, plan: &Plan) -> Vec<String> {
    let waits = plan.pending.iter().any(|p| {
        matches!(
            p.waiting_for.as_deref(),
            Some("preemption" | "freeing" | "reservation")
        )
    });
    if waits || case.observed.queued.iter().any(|q| !q.nominated.is_empty()) {
        return Vec::new();
    }
    let placed = support::placed(plan);
    let mut held: BTreeSet<(String, u32)> = BTreeSet::new();
    for r in &case.observed.running {
        for p in &r.placement {
            held.extend(p.gpus.iter().map(|g| (p.node.clone(), *g)));
        }
    }
    for p in placed.values().flatten() {
        held.extend(p.gpus.iter().map(|g| (p.node.clone(), *g)));
    }
    let mut out = Vec::new();
    for (job, placement) in &placed {
        let Some(spec) = case.fleet.jobs.iter().find(|j| j.name() == job) else {
            continue;
        };
        let Some(level) = spec.spec.topology.and_then(|t| t.preferred) else {
            continue;
        };
        if spec.spec.topology.and_then(|t| t.required).is_some() {
            continue;
        }
        let node = |name: &str| case.observed.nodes.iter().find(|n| n.name == name);
        let Some(model) = placement
            .first()
            .and_then(|p| node(&p.node))
            .and_then(|n| n.gpus.first())
            .map(|g| g.model.clone())
        else {
            continue;
        };
        let mut gpus: BTreeSet<(String, u32)> = placement
            .iter()
            .flat_map(|p| p.gpus.iter().map(|g| (p.node.clone(), *g)))
            .collect();
        for n in &case.observed.nodes {
            if n.gpus.iter().all(|g| g.healthy) && n.gpus.first().is_some_and(|g| g.model == model)
            {
                gpus.extend(
                    n.gpus
                        .iter()
                        .map(|g| (n.name.clone(), g.index))
                        .filter(|g| !held.contains(g)),
                );
            }
        }
        let used = domains(case, placement, level);
        if let Some(best) = fewest_domains(&case.input(), job, &model, level, &gpus)
            && best < used
        {
            out.push(format!(
                "{job} (preferred {level:?}) spans {used} domains where {best} would do"
            ));
        }
    }
    out
}

pub fn domains(case: &Case, placement: &[NodeGpus], level: TopologyLevel) -> usize {
    let key = match level {
        TopologyLevel::Rack => "rack",
        _ => "zone",
    };
    placement
        .iter()
        .filter_map(|p| case.observed.nodes.iter().find(|n| n.name == p.node))
        .map(|n| n.labels.get(key).cloned().unwrap_or_else(|| n.name.clone()))
        .collect::<BTreeSet<String>>()
        .len()
}

// ---------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------

/// Agreement, a known divergence, or an unexplained one.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Agree,
    Known(String),
    Unexplained,
}

pub fn verdict(case: &Case) -> Verdict {
    let plan = case.plan();
    let r = reference(&case.input(), &Rules::contract());
    if differences(&plan, &r).is_empty() && preferred_domains_excess(case, &plan).is_empty() {
        return Verdict::Agree;
    }
    match known_divergence(case, &plan) {
        Some(class) => Verdict::Known(class),
        None => Verdict::Unexplained,
    }
}

/// Shrinks a case while `keep` holds (proptest's simplify/complicate walk),
/// for at most two minutes.
pub fn shrink(tree: &mut impl ValueTree<Value = CaseRaw>, keep: impl Fn(&Case) -> bool) -> Case {
    let mut best = build(&tree.current());
    if !tree.simplify() {
        return best;
    }
    let start = std::time::Instant::now();
    for _ in 0..20_000 {
        if start.elapsed() > std::time::Duration::from_secs(120) {
            break;
        }
        let case = build(&tree.current());
        if keep(&case) {
            best = case;
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    best
}

/// The case, both plans and how they differ.
pub fn report(case: &Case) -> String {
    let plan = case.plan();
    let r = reference(&case.input(), &Rules::contract());
    let mut diff = differences(&plan, &r);
    diff.extend(preferred_domains_excess(case, &plan));
    diff.extend(superfluous_victims(case, &plan));
    // The closest variant with some items as today, to help a diagnosis.
    let mut closest: Option<(usize, Vec<u8>, Outcome)> = None;
    for mask in 1u32..(1 << ITEMS.len()) {
        let s: Vec<u8> = (0..ITEMS.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ITEMS[i])
            .collect();
        if s.len() > 3 {
            continue;
        }
        let o = reference(&case.input(), &Rules::with_today(&s));
        let n = differences(&plan, &o).len();
        if closest
            .as_ref()
            .is_none_or(|(m, c, _)| (n, s.len()) < (*m, c.len()))
        {
            closest = Some((n, s, o));
        }
    }
    let closest = closest.map_or(String::new(), |(_, s, o)| {
        format!(
            "\n# closest: the reference with items {s:?} as today\n{}\n{}\n",
            o.log.join("\n"),
            differences(&plan, &o).join("\n")
        )
    });
    format!(
        "{}\n# engine\n{}\n# reference\n{}\n\n# differences\n{}\n{closest}",
        describe(case),
        describe_plan(&plan),
        r.log.join("\n"),
        diff.join("\n")
    )
}
