//! Small hand-made traces whose start times are known exactly, per policy:
//! head-of-line blocking, skipping, shortest first, gangs, backfill on
//! declared limits, preemption with a grace period, scale-up. Each case
//! says why its times are right.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use gitfleet_simulate::{JobLife, Limits, Options, Policy, Report, replay};
use load::{SourceFile, load_fleet};
use model::spec::{Duration, Fleet, QueueOrdering};
use trace::{Source, TraceFormat, parse};

fn fleet(yaml: &str) -> Fleet {
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", yaml.as_bytes().to_vec())]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

fn run(fleet: &Fleet, csv: &str, options: &Options) -> (Report, Vec<JobLife>) {
    let source = Source {
        name: "t.csv",
        text: csv,
    };
    let trace = parse(TraceFormat::Gitfleet, source, None).unwrap();
    replay(fleet, &trace.jobs, 0, options, &mut |_| {}).unwrap()
}

fn lives(fleet: &Fleet, csv: &str, policy: Policy, limits: Limits) -> Vec<JobLife> {
    let options = Options {
        policy,
        limits,
        ..Options::default()
    };
    run(fleet, csv, &options).1
}

/// Each job's run starts in seconds, in trace-line order.
fn starts(lives: &[JobLife]) -> Vec<Vec<u64>> {
    let mut by_line: Vec<&JobLife> = lives.iter().collect();
    by_line.sort_by_key(|l| l.line);
    by_line
        .iter()
        .map(|l| l.runs.iter().map(|(s, _)| s.as_secs()).collect())
        .collect()
}

fn pool(name: &str, nodes: u32, max: u32) -> String {
    format!(
        "---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  gpu: {{model: A, count: 8}}\n  size: {{min: {nodes}, max: {max}}}\n"
    )
}

const QUEUE: &str = "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";

const NORMAL: &str = "---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: normal}\nspec: {value: 0, default: true}\n";

/// One 8-GPU node; A holds it for 100 s, B (50 s) and C (10 s) queue
/// behind it. FIFO: B at 100, C at 150. Shortest first: C at 100, B at 110.
#[test]
fn fifo_against_shortest_first() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,q,8,100\n1,q,8,50\n2,q,8,10\n";
    for policy in [Policy::Fifo, Policy::FifoSkip, Policy::Gitfleet] {
        let got = starts(&lives(&f, csv, policy, Limits::Trace));
        assert_eq!(got, [vec![0], vec![100], vec![150]], "{policy:?}");
    }
    let got = starts(&lives(&f, csv, Policy::SjfOracle, Limits::Trace));
    assert_eq!(got, [vec![0], vec![110], vec![100]]);
}

/// The same under gitfleet with `ordering: shortest-first` (issue 19 item
/// 4), from `--ordering` or from the fleet's queue, on declared exact
/// limits: C's rank is 10 s + its arrival at 2 s, B's 50 s + 1 s, so C at
/// 100 and B at 110 (as the oracle, with no future knowledge). A baseline
/// on a fleet that says `shortest-first` keeps its own order. With no
/// limits every job counts 7 days: arrival order (B at 100, C at 150).
#[test]
fn gitfleet_shortest_first_on_declared_limits() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,q,8,100\n1,q,8,50\n2,q,8,10\n";
    let with = |limits, ordering| Options {
        limits,
        ordering,
        ..Options::default()
    };
    let sf = Some(QueueOrdering::ShortestFirst);
    let got = starts(&run(&f, csv, &with(Limits::Exact, sf)).1);
    assert_eq!(got, [vec![0], vec![110], vec![100]]);
    let got = starts(&run(&f, csv, &with(Limits::None, sf)).1);
    assert_eq!(got, [vec![0], vec![100], vec![150]]);
    let own = QUEUE.replace("spec: {}", "spec: {ordering: shortest-first}");
    let f = fleet(&format!("{}{own}{NORMAL}", pool("p", 1, 1)));
    let got = starts(&run(&f, csv, &with(Limits::Exact, None)).1);
    assert_eq!(got, [vec![0], vec![110], vec![100]]);
    let fifo = starts(&lives(&f, csv, Policy::FifoSkip, Limits::Exact));
    assert_eq!(fifo, [vec![0], vec![100], vec![150]]);
    // --ordering fifo overrides the fleet's.
    let got = starts(&run(&f, csv, &with(Limits::Exact, Some(QueueOrdering::Fifo))).1);
    assert_eq!(got, [vec![0], vec![100], vec![150]]);
}

/// `ordering: smallest-first` (declared GPU-time first) against
/// `shortest-first` on exact declared limits, one 8-GPU node held by A
/// (0–100 s). B (8 GPUs, 20 s, at 1 s), C (1 GPU, 50 s, at 2 s), D (2 GPUs,
/// 30 s, at 3 s) wait. Shortest-first ranks (× 24 + arrival) B 481, D 723,
/// C 1202: B at 100, then C and D together at 120. Smallest-first ranks by
/// limit × GPUs: B 160 → 3841, C 50 → 1202, D 60 → 1443: C and D at 100
/// (3 GPUs), B when C ends at 150.
#[test]
fn gitfleet_smallest_first_on_declared_gpu_time() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,q,8,100\n1,q,8,20\n2,q,1,50\n3,q,2,30\n";
    let with = |ordering| Options {
        limits: Limits::Exact,
        ordering: Some(ordering),
        ..Options::default()
    };
    let got = starts(&run(&f, csv, &with(QueueOrdering::ShortestFirst)).1);
    assert_eq!(got, [vec![0], vec![100], vec![120], vec![120]]);
    let got = starts(&run(&f, csv, &with(QueueOrdering::SmallestFirst)).1);
    assert_eq!(got, [vec![0], vec![150], vec![100], vec![100]]);
    // The fleet's own `ordering: smallest-first` does the same.
    let own = QUEUE.replace("spec: {}", "spec: {ordering: smallest-first}");
    let f = fleet(&format!("{}{own}{NORMAL}", pool("p", 1, 1)));
    let options = Options {
        limits: Limits::Exact,
        ..Options::default()
    };
    let got = starts(&run(&f, csv, &options).1);
    assert_eq!(got, [vec![0], vec![150], vec![100], vec![100]]);
}

/// Contention shares (docs/simulate.md): b's job holds the node 0–100 s;
/// a's job (weight 3 of 4) waits 10–100 s, during which b held all the
/// GPU-time: share(a) = 0 against a weight share of 0.75. b never waited:
/// share 1.
#[test]
fn shares_under_contention() {
    let queues = "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: a}\nspec: {weight: 3}\n---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: b}\nspec: {}\n";
    let f = fleet(&format!("{}{queues}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,b,8,100\n10,a,8,50\n";
    let (report, lives) = run(&f, csv, &Options::default());
    assert_eq!(starts(&lives), [vec![0], vec![100]]);
    let (a, b) = (&report.queues["a"], &report.queues["b"]);
    assert_eq!((a.share, a.weight_share), (0.0, 0.75));
    assert_eq!((b.share, b.weight_share), (1.0, 0.25));
    let gate: gitfleet_simulate::Gate = "share(a) < 0.9 * weight_share".parse().unwrap();
    assert_eq!(gate.trips(&report), Ok(true));
    let gate: gitfleet_simulate::Gate = "share(b) < 0.9 * weight_share".parse().unwrap();
    assert_eq!(gate.trips(&report), Ok(false));
}

/// Two 8-GPU nodes. A (8) and B (8) start at 0; C, a gang of 2 × 8, waits
/// for both nodes: A ends at 100. D (1 GPU) fits at 50 when B ends: the
/// greedy policies start it then; strict FIFO keeps it behind C (100–110).
#[test]
fn gang_and_head_of_line_blocking() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 2, 2)));
    let csv = "submit,queue,replicas,gpus_per_replica,duration\n0,q,1,8,100\n0,q,1,8,50\n10,q,2,8,10\n20,q,1,1,5\n";
    let fifo = lives(&f, csv, Policy::Fifo, Limits::Trace);
    assert_eq!(starts(&fifo), [vec![0], vec![0], vec![100], vec![110]]);
    for policy in [Policy::FifoSkip, Policy::SjfOracle, Policy::Gitfleet] {
        let got = starts(&lives(&f, csv, policy, Limits::Trace));
        assert_eq!(got, [vec![0], vec![0], vec![100], vec![50]], "{policy:?}");
    }
}

/// Two 8-GPU nodes. A (8 GPUs, 100 s) runs; B (2 × 8, 10 s) is blocked and,
/// with declared limits, reserves both nodes for t = 100 (when A's limit
/// ends). C (8 GPUs, 200 s) would fit at 20 but its limit ends after the
/// reservation: it waits for B (110). D (8 GPUs, 50 s) ends by 80, before
/// the reservation: it backfills at 30. Greedy FIFO instead starts C at 20,
/// which pushes B to 220 (and D to 100, when A leaves).
#[test]
fn backfill_on_declared_limits() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 2, 2)));
    let csv = "submit,queue,replicas,gpus_per_replica,duration\n0,q,1,8,100\n10,q,2,8,10\n20,q,1,8,200\n30,q,1,8,50\n";
    let gitfleet = lives(&f, csv, Policy::Gitfleet, Limits::Exact);
    assert_eq!(starts(&gitfleet), [vec![0], vec![100], vec![110], vec![30]]);
    let greedy = lives(&f, csv, Policy::FifoSkip, Limits::Exact);
    assert_eq!(starts(&greedy), [vec![0], vec![220], vec![20], vec![100]]);
    // Without declared limits there is nothing to reserve: gitfleet is greedy.
    let none = lives(&f, csv, Policy::Gitfleet, Limits::None);
    assert_eq!(starts(&none), starts(&greedy));
}

/// One 8-GPU node. L (low, preemptible, 30 s grace) runs from 0; H (high)
/// arrives at 10 and preempts it: L stops at 40, H runs 40–90 on L's GPUs,
/// and L starts over at 90 and runs its whole 1000 s again.
#[test]
fn preemption_honours_the_grace_period() {
    let classes = "---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 0, default: true, gracePeriod: 30s}\n\
                   ---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: high}\nspec: {value: 100, preemptible: false}\n";
    let f = fleet(&format!("{}{QUEUE}{classes}", pool("p", 1, 1)));
    let csv =
        "submit,queue,gpus_per_replica,duration,priority_class\n0,q,8,1000,low\n10,q,8,50,high\n";
    let got = lives(&f, csv, Policy::Gitfleet, Limits::Trace);
    assert_eq!(starts(&got), [vec![0, 90], vec![40]]);
    assert_eq!(got.iter().map(|l| l.preemptions).sum::<u32>(), 1);
    let low = got.iter().find(|l| l.line == 2).unwrap();
    assert_eq!(low.runs[0].1, Some(Duration::from_secs(40)));
    assert_eq!(low.end.map(|e| e.as_secs()), Some(1090));
    // The baselines show the engine one class: nobody is preempted.
    let fifo = lives(&f, csv, Policy::FifoSkip, Limits::Trace);
    assert_eq!(starts(&fifo), [vec![0], vec![1000]]);
}

/// A pool of 1 to 3 nodes. A holds the first node; B, a gang of 2 × 8,
/// arrives at 10: the pool grows by two nodes and B starts at 10.
#[test]
fn pools_scale_up_for_waiting_jobs() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 3)));
    let csv = "submit,queue,replicas,gpus_per_replica,duration\n0,q,1,8,100\n10,q,2,8,50\n";
    let got = lives(&f, csv, Policy::Gitfleet, Limits::Trace);
    assert_eq!(starts(&got), [vec![0], vec![10]]);
}

/// `--until 60s`: C (submitted at 500) is not replayed; B never started and
/// its wait counts up to the end (59 s); A has not ended.
#[test]
fn until_cuts_the_replay() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,q,8,100\n1,q,8,50\n500,q,8,10\n";
    let options = Options {
        until: Some(Duration::from_secs(60)),
        ..Options::default()
    };
    let (report, lives) = run(&f, csv, &options);
    assert_eq!(report.jobs, 2);
    assert_eq!(report.metrics.max_wait_s, 59);
    assert_eq!(report.metrics.makespan_s, 60);
    assert_eq!(
        (report.totals.never_started, report.totals.unfinished),
        (1, 2)
    );
    assert_eq!(starts(&lives), [vec![0], vec![]]);
}

/// Strict FIFO, a head that waits for a scale-up (pool of 1 to 2 nodes).
/// A (4 GPUs) holds the first node 0–100. B, a gang of 2 × 8, cannot fit
/// even on a second node until A ends: at 100 the pool grows and B starts
/// at once. C (1 GPU), behind B, would fit beside A at 20 but waits for B
/// to start, then for GPUs: B holds both nodes until 110. The greedy
/// baseline starts C at 20 (and B at 100).
#[test]
fn strict_fifo_head_waits_for_a_scale_up() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 2)));
    let csv =
        "submit,queue,replicas,gpus_per_replica,duration\n0,q,1,4,100\n10,q,2,8,10\n20,q,1,1,5\n";
    let fifo = lives(&f, csv, Policy::Fifo, Limits::Trace);
    assert_eq!(starts(&fifo), [vec![0], vec![100], vec![110]]);
    let greedy = lives(&f, csv, Policy::FifoSkip, Limits::Trace);
    assert_eq!(starts(&greedy), [vec![0], vec![100], vec![20]]);
}

/// Strict FIFO does not preempt for a job that waits behind its queue's
/// head. Two 8-GPU nodes; a (guaranteed 8) borrows both with A (2 × 8,
/// 0–100). b's head B (2 × 8) would borrow too, so nothing is reclaimed
/// for it: it starts when A ends (100–110). C (1 GPU), within b's
/// guarantee, would reclaim A's borrowed GPUs, but it cannot start before
/// B: no preemption, C at 110. Greedy FIFO reclaims for C at 20: A stops
/// at 40 (its 20 s grace period) and C starts on its GPUs.
#[test]
fn strict_fifo_reclaims_only_for_a_head() {
    let queues = "---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: a}\nspec:\n  quota: [{model: A, guaranteed: 8, limit: 16}]\n\
                  ---\napiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: b}\nspec:\n  quota: [{model: A, guaranteed: 8, limit: 16}]\n";
    let class = "---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 0, default: true, gracePeriod: 20s}\n";
    let f = fleet(&format!("{}{queues}{class}", pool("p", 2, 2)));
    let csv =
        "submit,queue,replicas,gpus_per_replica,duration\n0,a,2,8,100\n10,b,2,8,10\n20,b,1,1,5\n";
    let fifo = lives(&f, csv, Policy::Fifo, Limits::Trace);
    assert_eq!(starts(&fifo), [vec![0], vec![100], vec![110]]);
    assert_eq!(fifo.iter().map(|l| l.preemptions).sum::<u32>(), 0);
    let greedy = lives(&f, csv, Policy::FifoSkip, Limits::Trace);
    assert_eq!(greedy[0].preemptions, 1);
    assert_eq!(starts(&greedy)[2], [40]);
}

/// `ordering: least-attained` (Tiresias; docs/semantics.md) on one 8-GPU
/// node, no grace period. A (8 GPUs, 3 h) starts at 0 and reaches tier 1
/// (1 GPU-hour) at 450 s; B (8 GPUs, 100 s, tier 0) arrives at 100 and
/// waits for it (same tier: no preemption), then preempts A at 450 (the
/// replay plans again at the crossing) and runs 450–550; A resumes at 550
/// with its 3,600 GPU-seconds and reaches tier 2 (10 GPU-hours) at 550 +
/// 32,400 / 8 = 4,600; C (8 GPUs, 50 s) arrives at 5,000 and preempts it
/// (5,000–5,050); A resumes at 5,050. With `--checkpoint` A has 450 + 4,450
/// s done and ends at 5,050 + 5,900 = 10,950; without, it runs its 3 h
/// again: 15,850. Under the fifo ordering nothing is preempted.
#[test]
fn gitfleet_least_attained_preempts_at_tier_crossings() {
    let f = fleet(&format!("{}{QUEUE}{NORMAL}", pool("p", 1, 1)));
    let csv = "submit,queue,gpus_per_replica,duration\n0,q,8,10800\n100,q,8,100\n5000,q,8,50\n";
    let with = |ordering, checkpoint| Options {
        ordering: Some(ordering),
        checkpoint,
        ..Options::default()
    };
    let secs = |l: &JobLife| -> Vec<(u64, u64)> {
        l.runs
            .iter()
            .map(|(s, e)| (s.as_secs(), e.map_or(u64::MAX, |e| e.as_secs())))
            .collect()
    };
    for (checkpoint, a_end) in [(true, 10_950), (false, 15_850)] {
        let (report, lives) = run(&f, csv, &with(QueueOrdering::LeastAttained, checkpoint));
        let mut by_line: Vec<&JobLife> = lives.iter().collect();
        by_line.sort_by_key(|l| l.line);
        assert_eq!(
            secs(by_line[0]),
            [(0, 450), (550, 5_000), (5_050, a_end)],
            "checkpoint {checkpoint}"
        );
        assert_eq!(secs(by_line[1]), [(450, 550)]);
        assert_eq!(secs(by_line[2]), [(5_000, 5_050)]);
        assert_eq!(report.metrics.preemptions, 2);
        // Waits 0, 350 and 0 s (mean 116.7); pending 150 (A: 100 + 50),
        // 350 and 0 s (mean 166.7).
        assert_eq!(report.metrics.avg_wait_s, 117);
        assert_eq!(report.metrics.avg_pending_s, 167);
    }
    let (report, lives) = run(&f, csv, &with(QueueOrdering::Fifo, true));
    assert_eq!(starts(&lives), [vec![0], vec![10_800], vec![10_900]]);
    assert_eq!(report.metrics.preemptions, 0);
}
