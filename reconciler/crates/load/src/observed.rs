//! Reading an observed-state file (DESIGN.md §3, YAML or JSON) into
//! [`ObservedState`], with `FILE:LINE:COL` for every problem.

use std::collections::BTreeSet;
use std::sync::Arc;

use model::diag::{Diagnostic, Origin, Pos, sort_diagnostics};
use model::observed::ObservedState;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::yaml::{self, Node, PathSegment};

/// Parses and checks an observed-state file (YAML or JSON). Every problem is
/// returned with `FILE:LINE:COL`.
pub fn parse_observed(file: &str, text: &str) -> Result<ObservedState, Vec<Diagnostic>> {
    // Fast path: straight to the types (JSON with serde_json, YAML with
    // serde-saphyr), no position tree. Any problem, and the positioned path
    // below runs again to say where.
    let fast: Option<ObservedState> = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).ok()
    } else {
        serde_saphyr::from_str_with_options(text, fast_options(text)).ok()
    };
    if let Some(state) = fast {
        let none = Node {
            pos: Pos::default(),
            value: yaml::Value::Null,
        };
        if consistency(&state, &none, &Arc::from(file)).is_empty() {
            return Ok(state);
        }
    }
    parse_observed_with_positions(file, text)
}

/// serde-saphyr's options for the fast path: its default budget (250,000
/// nodes, 1,000,000 events) refuses a 10,000-node fleet's snapshot, which
/// then paid for two parses. The budget grows with the input instead (the
/// file itself is bounded by `fs::MAX_FILE_BYTES`); nesting, aliases and
/// documents keep serde-saphyr's limits (beyond them the positioned path
/// parses with its own).
fn fast_options(text: &str) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(text.len());
    budget.max_events = budget.max_events.max(2 * text.len());
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(text.len());
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// The slow path of [`parse_observed`]: a position tree, then the types, so
/// that every problem names its line and column.
fn parse_observed_with_positions(file: &str, text: &str) -> Result<ObservedState, Vec<Diagnostic>> {
    let file: Arc<str> = Arc::from(file);
    let at = |pos: Pos| Origin::new(file.clone(), pos);
    let mut docs = yaml::parse_documents(text).map_err(|err| {
        vec![Diagnostic::new(
            at(err.pos),
            format!("YAML syntax error: {}", err.message),
        )]
    })?;
    let node = match docs.len() {
        0 => return Ok(ObservedState::default()),
        1 => docs.remove(0),
        _ => {
            return Err(vec![Diagnostic::new(
                at(docs[1].pos),
                "observed state must be a single document",
            )]);
        }
    };
    let state: ObservedState = serde_path_to_error::deserialize(node.to_json()).map_err(|err| {
        let path = to_path(err.path());
        let target = node.locate(path.iter().cloned());
        let mut message = err.inner().to_string();
        // JSON has no NaN or infinity: such a number arrives as null.
        if let yaml::Value::Float(f) = target.value
            && !f.is_finite()
        {
            message = message.replace(
                "invalid type: null",
                &format!("invalid value: {}", crate::schema_check::non_finite(f)),
            );
        }
        vec![Diagnostic::new(
            at(target.pos),
            format!("observed state: {}: {message}", crate::render_path(&path)),
        )]
    })?;
    let mut problems = consistency(&state, &node, &file);
    if problems.is_empty() {
        Ok(state)
    } else {
        sort_diagnostics(&mut problems);
        Err(problems)
    }
}

fn to_path(path: &serde_path_to_error::Path) -> Vec<PathSegment<String>> {
    path.iter()
        .filter_map(|seg| match seg {
            serde_path_to_error::Segment::Map { key } => Some(PathSegment::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
            _ => None,
        })
        .collect()
}

/// Checks that cannot be expressed in types: unique names, placements on
/// existing GPUs, no GPU held twice.
fn consistency(state: &ObservedState, node: &Node, file: &Arc<str>) -> Vec<Diagnostic> {
    use PathSegment::{Index, Key};
    let at = |path: &[PathSegment<&str>]| {
        Origin::new(file.clone(), node.locate(path.iter().cloned()).pos)
    };
    let mut out = Vec::new();
    // Hashed look-ups (a 10,000-node fleet's snapshot holds 150,000 jobs):
    // messages follow the file's order, never a map's.
    let mut gpus: FxHashMap<&str, BTreeSet<u32>> = FxHashMap::default();
    for (i, n) in state.nodes.iter().enumerate() {
        if n.name.is_empty() || n.name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            out.push(Diagnostic::new(
                at(&[Key("nodes"), Index(i), Key("name")]),
                format!(
                    "observed state: node name {:?} is empty or holds spaces or control characters",
                    n.name
                ),
            ));
        }
        if gpus.contains_key(n.name.as_str()) {
            out.push(Diagnostic::new(
                at(&[Key("nodes"), Index(i), Key("name")]),
                format!("observed state: node {:?} is listed twice", n.name),
            ));
            continue;
        }
        let mut indices = BTreeSet::new();
        for (j, gpu) in n.gpus.iter().enumerate() {
            if !indices.insert(gpu.index) {
                out.push(Diagnostic::new(
                    at(&[Key("nodes"), Index(i), Key("gpus"), Index(j), Key("index")]),
                    format!(
                        "observed state: node {}: GPU {} is listed twice",
                        n.name, gpu.index
                    ),
                ));
            }
        }
        gpus.insert(&n.name, indices);
    }
    let mut jobs = FxHashSet::default();
    let mut held: FxHashMap<(&str, u32), &str> = FxHashMap::default();
    for (i, run) in state.running.iter().enumerate() {
        if !jobs.insert(run.job.as_str()) {
            out.push(Diagnostic::new(
                at(&[Key("running"), Index(i), Key("job")]),
                format!("observed state: job {:?} is running twice", run.job),
            ));
        }
        for (j, part) in run.placement.iter().enumerate() {
            let Some(indices) = gpus.get(part.node.as_str()) else {
                out.push(Diagnostic::new(
                    at(&[
                        Key("running"),
                        Index(i),
                        Key("placement"),
                        Index(j),
                        Key("node"),
                    ]),
                    format!(
                        "observed state: job {} runs on unknown node {:?}",
                        run.job, part.node
                    ),
                ));
                continue;
            };
            for gpu in &part.gpus {
                let origin = || {
                    at(&[
                        Key("running"),
                        Index(i),
                        Key("placement"),
                        Index(j),
                        Key("gpus"),
                    ])
                };
                if !indices.contains(gpu) {
                    out.push(Diagnostic::new(
                        origin(),
                        format!(
                            "observed state: job {} holds GPU {gpu} of node {}, which has no such GPU",
                            run.job, part.node
                        ),
                    ));
                } else if let Some(other) =
                    held.insert((part.node.as_str(), *gpu), run.job.as_str())
                {
                    out.push(Diagnostic::new(
                        origin(),
                        format!(
                            "observed state: GPU {gpu} of node {} is held by both {other} and {}",
                            part.node, run.job
                        ),
                    ));
                }
            }
        }
    }
    // A job is in one state at a time.
    let mut queued = FxHashSet::default();
    let mut nominated: FxHashMap<(&str, u32), &str> = FxHashMap::default();
    for (i, q) in state.queued.iter().enumerate() {
        let origin = at(&[Key("queued"), Index(i), Key("job")]);
        if jobs.contains(q.job.as_str()) {
            out.push(Diagnostic::new(
                origin,
                format!("observed state: job {:?} is both queued and running", q.job),
            ));
        } else if !queued.insert(q.job.as_str()) {
            out.push(Diagnostic::new(
                origin,
                format!("observed state: job {:?} is queued twice", q.job),
            ));
        }
        for (j, part) in q.nominated.iter().enumerate() {
            let origin = || at(&[Key("queued"), Index(i), Key("nominated"), Index(j)]);
            let Some(indices) = gpus.get(part.node.as_str()) else {
                out.push(Diagnostic::new(
                    origin(),
                    format!(
                        "observed state: job {} is nominated for unknown node {:?}",
                        q.job, part.node
                    ),
                ));
                continue;
            };
            for gpu in &part.gpus {
                if !indices.contains(gpu) {
                    out.push(Diagnostic::new(
                        origin(),
                        format!(
                            "observed state: job {} is nominated for GPU {gpu} of node {}, which has no such GPU",
                            q.job, part.node
                        ),
                    ));
                } else if let Some(other) =
                    nominated.insert((part.node.as_str(), *gpu), q.job.as_str())
                    && other != q.job
                {
                    out.push(Diagnostic::new(
                        origin(),
                        format!(
                            "observed state: GPU {gpu} of node {} is nominated for both {other} and {}",
                            part.node, q.job
                        ),
                    ));
                }
            }
        }
    }
    let mut completed = FxHashSet::default();
    for (i, c) in state.completed.iter().enumerate() {
        let origin = at(&[Key("completed"), Index(i), Key("job")]);
        let other = if jobs.contains(c.job.as_str()) {
            Some("running")
        } else if queued.contains(c.job.as_str()) {
            Some("queued")
        } else if !completed.insert(c.job.as_str()) {
            Some("completed")
        } else {
            None
        };
        if let Some(other) = other {
            out.push(Diagnostic::new(
                origin,
                match other {
                    "completed" => format!("observed state: job {:?} is completed twice", c.job),
                    _ => format!(
                        "observed state: job {:?} is both completed and {other}",
                        c.job
                    ),
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod contradiction_tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        parse_observed("o.yaml", text)
            .err()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const NODES: &str =
        "nodes:\n  - name: n0\n    gpus: [{index: 0, model: A}, {index: 1, model: A}]\n";

    #[test]
    fn a_job_is_in_one_state_at_a_time() {
        let text = format!(
            "{NODES}running:\n  - {{job: a, started: 2026-11-21T08:00:00Z, placement: [{{node: n0, gpus: [0]}}]}}\nqueued:\n  - {{job: a, since: 2026-11-21T08:00:00Z}}\n  - {{job: b, since: 2026-11-21T08:00:00Z}}\n  - {{job: b, since: 2026-11-21T09:00:00Z}}\ncompleted:\n  - {{job: a, finished: 2026-11-21T08:00:00Z}}\n  - {{job: b, finished: 2026-11-21T08:00:00Z}}\n  - {{job: c, finished: 2026-11-21T08:00:00Z}}\n  - {{job: c, finished: 2026-11-21T08:00:00Z}}\n"
        );
        assert_eq!(
            problems(&text),
            [
                "o.yaml:7:11: observed state: job \"a\" is both queued and running",
                "o.yaml:9:11: observed state: job \"b\" is queued twice",
                "o.yaml:11:11: observed state: job \"a\" is both completed and running",
                "o.yaml:12:11: observed state: job \"b\" is both completed and queued",
                "o.yaml:14:11: observed state: job \"c\" is completed twice",
            ]
        );
    }

    #[test]
    fn nominations_name_existing_gpus_once() {
        let text = format!(
            "{NODES}queued:\n  - {{job: a, since: 2026-11-21T08:00:00Z, nominated: [{{node: n0, gpus: [0, 1]}}]}}\n  - {{job: b, since: 2026-11-21T08:00:00Z, nominated: [{{node: n0, gpus: [1, 7]}}, {{node: n9, gpus: [0]}}]}}\n"
        );
        assert_eq!(
            problems(&text),
            [
                "o.yaml:6:55: observed state: GPU 1 of node n0 is nominated for both a and b",
                "o.yaml:6:55: observed state: job b is nominated for GPU 7 of node n0, which has no such GPU",
                "o.yaml:6:81: observed state: job b is nominated for unknown node \"n9\"",
            ]
        );
    }

    #[test]
    fn node_names_hold_no_control_characters() {
        let text = "nodes:\n  - name: \"n0\\n::error::x\"\n    gpus: [{index: 0, model: A}]\n";
        assert_eq!(
            problems(text),
            [
                "o.yaml:2:11: observed state: node name \"n0\\n::error::x\" is empty or holds spaces or control characters"
            ]
        );
    }

    #[test]
    fn nan_and_huge_numbers_are_named_not_null() {
        let text = "nodes:\n  - name: n0\n    gpus: [{index: .nan, model: A}]\n";
        assert_eq!(
            problems(text),
            [
                "o.yaml:3:20: observed state: nodes[0].gpus[0].index: invalid value: NaN (not a number), expected u32"
            ]
        );
        let text = format!(
            "nodes:\n  - name: n0\n    gpus: [{{index: {}, model: A}}]\n",
            "9".repeat(100_000)
        );
        assert!(
            problems(&text)[0].contains("invalid value: infinity"),
            "{:?}",
            problems(&text)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_example() {
        let text = "time: 2026-11-21T10:00:00Z\nnodes:\n  - name: n0\n    pool: p\n    labels: {rack: r0}\n    gpus:\n      - {index: 0, model: H100, healthy: true}\n      - {index: 1, model: H100, healthy: false}\nrunning:\n  - job: a\n    started: 2026-11-21T08:00:00Z\n    placement: [{node: n0, gpus: [0]}]\n    preemptingSince: null\nqueued:\n  - {job: b, since: 2026-11-21T09:30:00Z}\n";
        let state = parse_observed("o.yaml", text).unwrap();
        assert_eq!(state.nodes[0].gpus.len(), 2);
        assert!(!state.nodes[0].gpus[1].healthy);
        assert_eq!(state.running[0].placement[0].gpus, vec![0]);
        assert_eq!(state.queued[0].job, "b");
    }

    #[test]
    fn fast_and_positioned_paths_agree() {
        let text = "time: 2026-11-21T10:00:00Z\nnodes:\n  - name: n0\n    pool: p\n    gpus: [{index: 0, model: A}, {index: 1, model: A, healthy: false}]\nrunning:\n  - {job: a, started: 2026-11-21T08:00:00Z, placement: [{node: n0, gpus: [0]}], preemptedFor: b}\nqueued:\n  - {job: b, since: 2026-11-21T09:00:00Z, nominated: [{node: n0, gpus: [0]}]}\ncompleted:\n  - {job: c, finished: 2026-11-21T09:10:00Z, exitCode: 0}\n";
        let fast = parse_observed("o.yaml", text).unwrap();
        let slow = parse_observed_with_positions("o.yaml", text).unwrap();
        assert_eq!(fast, slow);
        let json = serde_json::to_string(&fast).unwrap();
        assert_eq!(parse_observed("o.json", &json).unwrap(), fast);
    }

    #[test]
    fn json_is_accepted() {
        let text =
            r#"{"nodes": [{"name": "n0", "gpus": [{"index": 0, "model": "A"}]}], "running": []}"#;
        let state = parse_observed("o.json", text).unwrap();
        assert!(state.nodes[0].gpus[0].healthy);
    }

    #[test]
    fn type_errors_have_positions() {
        let text = "nodes:\n  - name: n0\n    gpus:\n      - {index: zero, model: A}\n";
        let errs = parse_observed("o.yaml", text).unwrap_err();
        assert_eq!(errs[0].origin.pos.line, 4, "{errs:?}");
        assert!(
            errs[0].message.contains("nodes[0].gpus[0].index"),
            "{errs:?}"
        );
    }

    #[test]
    fn double_booked_gpus_are_rejected() {
        let text = "nodes:\n  - name: n0\n    gpus: [{index: 0, model: A}]\nrunning:\n  - {job: a, started: 2026-11-21T08:00:00Z, placement: [{node: n0, gpus: [0]}]}\n  - {job: b, started: 2026-11-21T08:00:00Z, placement: [{node: n0, gpus: [0]}]}\n  - {job: c, started: 2026-11-21T08:00:00Z, placement: [{node: n9, gpus: [0]}]}\n";
        let errs = parse_observed("o.yaml", text).unwrap_err();
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 2, "{text:?}");
        assert!(text[0].contains("held by both a and b"), "{text:?}");
        assert!(text[1].contains("unknown node \"n9\""), "{text:?}");
    }
}
