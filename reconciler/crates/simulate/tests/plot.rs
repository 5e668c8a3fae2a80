//! `--plot`: the time series a replay records (at most 2,000 samples, the
//! largest values kept where instants are merged) and the SVG charts drawn
//! from it, parsed back as XML.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use gitfleet_simulate::{Options, PlotError, simulate, simulate_series, write_charts};
use load::{SourceFile, load_fleet};
use model::spec::{Duration, Fleet};
use trace::TraceJob;

/// Two top-level queues: `org` (leaves `nlp`, `cv`) and `ops`.
const FLEET: &str = "\
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: A, count: 8}
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: org}
spec:
  quota: [{model: A, guaranteed: 12}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: nlp}
spec:
  parent: org
  quota: [{model: A, guaranteed: 8, limit: 16}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: cv}
spec:
  parent: org
  quota: [{model: A, guaranteed: 4, limit: 16}]
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: ops}
spec:
  quota: [{model: A, guaranteed: 4, limit: 16}]
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 0, default: true, preemptible: false}
";

fn fleet() -> Fleet {
    let loaded = load_fleet(&[SourceFile::new("fleet.yaml", FLEET.as_bytes().to_vec())]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

fn job(i: u64, submit: u64, queue: &str, gpus: u32, duration: u64) -> TraceJob {
    TraceJob {
        line: i + 2,
        submit: Duration::from_secs(submit),
        queue: queue.to_string(),
        replicas: 1,
        gpus_per_replica: gpus,
        model: None,
        duration: Duration::from_secs(duration),
        priority_class: None,
        time_limit: None,
    }
}

#[test]
fn the_series_follows_allocation_and_pending_jobs() {
    // t=0: nlp takes all 16 GPUs for 100 s; t=10: cv and ops wait for them.
    let jobs = [
        job(0, 0, "nlp", 8, 100),
        job(1, 0, "nlp", 8, 100),
        job(2, 10, "cv", 8, 50),
        job(3, 10, "ops", 8, 50),
    ];
    let options = Options::default();
    let (report, series) = simulate_series(&fleet(), &jobs, 0, &options, &mut |_| {}).unwrap();
    // Recording changes nothing of the report.
    assert_eq!(
        report,
        simulate(&fleet(), &jobs, 0, &options, &mut |_| {}).unwrap()
    );
    assert_eq!(series.at_s, [0.0, 10.0, 100.0, 150.0]);
    assert_eq!(series.allocated, [16, 16, 16, 0]);
    assert_eq!(series.capacity, [16, 16, 16, 16]);
    assert_eq!(
        series.depth.keys().collect::<Vec<_>>(),
        ["ops", "org"].iter().collect::<Vec<_>>()
    );
    assert_eq!(series.depth["org"], [0, 1, 0, 0]);
    assert_eq!(series.depth["ops"], [0, 1, 0, 0]);
    assert_eq!(series.waits["nlp"], [0.0, 0.0]);
    assert_eq!(series.waits["cv"], [90.0]);
}

#[test]
fn long_replays_keep_at_most_2000_samples_and_their_peaks() {
    // 10,000 instants: a 1-GPU job every 2 s, each running 1 s; a 16-GPU
    // gang at the end.
    let mut jobs: Vec<TraceJob> = (0..5_000)
        .map(|i| {
            job(
                i,
                i * 2,
                if i.is_multiple_of(2) { "nlp" } else { "ops" },
                1,
                1,
            )
        })
        .collect();
    let mut gang = job(5_000, 10_000, "cv", 8, 5);
    gang.replicas = 2;
    jobs.push(gang);
    let (_, series) =
        simulate_series(&fleet(), &jobs, 0, &Options::default(), &mut |_| {}).unwrap();
    let n = series.at_s.len();
    assert!((1_000..=2_000).contains(&n), "{n} samples");
    assert_eq!(series.allocated.len(), n);
    assert!(series.depth.values().all(|d| d.len() == n));
    assert!(series.at_s.windows(2).all(|w| w[0] < w[1]));
    // Merged samples keep their peaks: the 1-GPU jobs' and the gang's.
    assert!(series.allocated.iter().all(|a| [0, 1, 16].contains(a)));
    assert!(series.allocated.iter().filter(|a| **a == 1).count() >= n - 2);
    assert_eq!(series.allocated.iter().max(), Some(&16));
    assert_eq!(series.waits["nlp"].len(), 2_500);
}

#[test]
fn charts_are_svg_documents_with_one_line_per_series() {
    let jobs = [
        job(0, 0, "nlp", 8, 100),
        job(1, 0, "nlp", 8, 100),
        job(2, 10, "cv", 8, 50),
        job(3, 10, "ops", 8, 50),
    ];
    let (_, series) =
        simulate_series(&fleet(), &jobs, 0, &Options::default(), &mut |_| {}).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    let files = write_charts(&out, &series).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["allocation.svg", "queue-depth.svg", "wait-cdf.svg"]);
    let expect: [(&str, &[&str]); 3] = [
        ("allocation.svg", &["GPUs of ready nodes", "allocated GPUs"]),
        ("queue-depth.svg", &["ops", "org"]),
        ("wait-cdf.svg", &["cv", "nlp", "ops"]),
    ];
    for (name, labels) in expect {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{name}");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for label in labels {
            assert!(
                texts.contains(label),
                "{name}: no legend {label} in {texts:?}"
            );
        }
        // One polyline per series and one per legend sample at least.
        let lines = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "polyline")
            .count();
        assert!(lines >= 2 * labels.len(), "{name}: {lines} polylines");
    }
}

#[test]
fn an_unwritable_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = write_charts(&file.join("plots"), &gitfleet_simulate::Series::default()).unwrap_err();
    assert!(matches!(err, PlotError::Dir { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "--plot {}: cannot create the directory: ",
            file.join("plots").display()
        )),
        "{msg}"
    );
}
