//! `--fail-on EXPR`: a bound on a report's metric, for CI. An expression is
//! `METRIC OP BOUND`: METRIC a field of `metrics` (`p95_wait_s`,
//! `gpu_alloc`, …) or of a queue, `queues.NAME.FIELD`
//! (`queues.nlp.avg_wait_s`), also written `FIELD(queue=NAME)` or
//! `FIELD(NAME)`, where a field's `_s` may be left out (`p95_wait(queue=nlp)`);
//! OP one of `>`, `>=`, `<`, `<=`, `==`, `!=`; BOUND a number, or under
//! `plan --simulate` the same metric in the base revision's replay: `base`,
//! `F * base`, `base * F`, each optionally `+ N` or `- N`
//! (`p95_wait(queue=nlp) > 1.2 * base`); or, for a queue's metric, that
//! queue's weight share among its siblings in the same forms with
//! `weight_share` (`share(research) < 0.9 * weight_share`). It fails (the
//! gate trips) when the comparison holds.

use crate::Report;

/// A parsed `--fail-on` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    text: String,
    metric: Vec<String>,
    op: Op,
    bound: Bound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// The right-hand side: a number, `factor × base + offset`, or `factor ×
/// weight_share + offset` (the left-hand queue's weight share).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Number(f64),
    Base { factor: f64, offset: f64 },
    WeightShare { factor: f64, offset: f64 },
}

/// Queue fields a gate may name (with or without their `_s`).
const QUEUE_FIELDS: [&str; 9] = [
    "jobs",
    "avg_wait_s",
    "p50_wait_s",
    "p95_wait_s",
    "gpu_hours",
    "gpu_share",
    "preemptions",
    "share",
    "weight_share",
];

/// What is wrong with an expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// It does not have the shape `METRIC OP BOUND`.
    #[error(
        "--fail-on `{0}`: expected METRIC OP BOUND, e.g. `p95_wait_s > 3600`, `queues.nlp.avg_wait_s >= 600` or (plan --simulate) `p95_wait(queue=nlp) > 1.2 * base`"
    )]
    Syntax(String),
    /// It names a metric the report does not have.
    #[error("--fail-on `{expr}`: no metric `{metric}` in the {side} report")]
    Metric {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
        /// `head` (or the only one) or `base`.
        side: &'static str,
    },
    /// It compares with `base` where there is no base revision.
    #[error(
        "--fail-on `{0}`: `base` is the base revision's replay, which only `gitfleet plan --base B --simulate TRACE` has"
    )]
    NoBase(String),
    /// It compares with `weight_share` but its metric is not a queue's.
    #[error(
        "--fail-on `{0}`: `weight_share` is the left-hand queue's weight share; name a queue's metric, e.g. `share(research) < 0.9 * weight_share`"
    )]
    NoQueue(String),
}

impl std::str::FromStr for Gate {
    type Err = GateError;

    fn from_str(text: &str) -> Result<Gate, GateError> {
        let syntax = || GateError::Syntax(text.to_string());
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let (at, sym, op) = ops
            .iter()
            .filter_map(|(sym, op)| text.find(sym).map(|at| (at, *sym, *op)))
            .min_by_key(|(at, sym, _)| (*at, std::cmp::Reverse(sym.len())))
            .ok_or_else(syntax)?;
        let metric = metric_path(text[..at].trim()).ok_or_else(syntax)?;
        let bound = parse_bound(&text[at + sym.len()..]).ok_or_else(syntax)?;
        if matches!(bound, Bound::WeightShare { .. }) && metric.len() != 3 {
            return Err(GateError::NoQueue(text.trim().to_string()));
        }
        Ok(Gate {
            text: text.trim().to_string(),
            metric,
            op,
            bound,
        })
    }
}

/// `p95_wait_s`, `queues.nlp.p95_wait_s`, `p95_wait(queue=nlp)` or
/// `p95_wait(nlp)` as a path into the report.
fn metric_path(metric: &str) -> Option<Vec<String>> {
    if metric.is_empty() {
        return None;
    }
    let Some((field, rest)) = metric.split_once('(') else {
        return Some(metric.split('.').map(str::to_string).collect());
    };
    let arg = rest.strip_suffix(')')?.trim();
    let queue = arg.split_once('=').map_or(Some(arg), |(key, value)| {
        (key.trim() == "queue").then_some(value.trim())
    })?;
    let field = field.trim();
    if queue.is_empty() || field.is_empty() {
        return None;
    }
    let with_s = format!("{field}_s");
    let field = if QUEUE_FIELDS.contains(&with_s.as_str()) {
        with_s
    } else {
        field.to_string()
    };
    Some(vec!["queues".to_string(), queue.to_string(), field])
}

/// `NUMBER`, or `[F *] REF [* F] [+|- N]` where REF is `base` or
/// `weight_share`.
fn parse_bound(text: &str) -> Option<Bound> {
    let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    for (word, make) in [
        (
            "base",
            (|factor, offset| Bound::Base { factor, offset }) as fn(f64, f64) -> Bound,
        ),
        ("weight_share", |factor, offset| Bound::WeightShare {
            factor,
            offset,
        }),
    ] {
        if let Some((factor, offset)) = scaled(&s, word) {
            return Some(make(factor, offset));
        }
    }
    number(&s).map(Bound::Number)
}

fn number(t: &str) -> Option<f64> {
    t.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// `(F, N)` of `[F *] word [* F] [+|- N]` (spaces removed), if `s` has that
/// shape.
fn scaled(s: &str, word: &str) -> Option<(f64, f64)> {
    let offset = |t: &str| if t.is_empty() { Some(0.0) } else { number(t) };
    if let Some(rest) = s.strip_prefix(word) {
        let Some(rest) = rest.strip_prefix('*') else {
            return Some((1.0, offset(rest)?));
        };
        // The factor ends at a sign that is not an exponent's.
        let bytes = rest.as_bytes();
        let split = (1..bytes.len())
            .find(|&i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'))
            .unwrap_or(bytes.len());
        return Some((number(&rest[..split])?, offset(&rest[split..])?));
    }
    let at = s.find(&format!("*{word}"))?;
    Some((number(&s[..at])?, offset(&s[at + 1 + word.len()..])?))
}

impl Gate {
    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it compares with the base revision's replay.
    pub fn uses_base(&self) -> bool {
        matches!(self.bound, Bound::Base { .. })
    }

    /// Whether the gate trips on `report` (the comparison holds); an error
    /// if it compares with `base`.
    pub fn trips(&self, report: &Report) -> Result<bool, GateError> {
        self.trips_against(report, None)
    }

    /// Whether the gate trips on `head`, `base` being the base revision's
    /// replay (`plan --simulate`).
    pub fn trips_against(&self, head: &Report, base: Option<&Report>) -> Result<bool, GateError> {
        let missing = |side| GateError::Metric {
            expr: self.text.clone(),
            metric: self.metric.join("."),
            side,
        };
        let value = self.value(head).ok_or_else(|| missing("head"))?;
        let bound = match self.bound {
            Bound::Number(n) => n,
            Bound::Base { factor, offset } => {
                let base = base.ok_or_else(|| GateError::NoBase(self.text.clone()))?;
                factor * self.value(base).ok_or_else(|| missing("base"))? + offset
            }
            Bound::WeightShare { factor, offset } => {
                let queue = self.metric.get(1).map(String::as_str).unwrap_or_default();
                let q = head.queues.get(queue).ok_or_else(|| missing("head"))?;
                factor * q.weight_share + offset
            }
        };
        Ok(match self.op {
            Op::Gt => value > bound,
            Op::Ge => value >= bound,
            Op::Lt => value < bound,
            Op::Le => value <= bound,
            Op::Eq => value == bound,
            Op::Ne => value != bound,
        })
    }

    fn value(&self, r: &Report) -> Option<f64> {
        let m = &r.metrics;
        let path: Vec<&str> = self.metric.iter().map(String::as_str).collect();
        Some(match path.as_slice() {
            ["jobs"] => r.jobs as f64,
            ["dropped"] => r.dropped as f64,
            ["avg_wait_s"] => m.avg_wait_s as f64,
            ["p50_wait_s"] => m.p50_wait_s as f64,
            ["p95_wait_s"] => m.p95_wait_s as f64,
            ["max_wait_s"] => m.max_wait_s as f64,
            ["avg_pending_s"] => m.avg_pending_s as f64,
            ["avg_jct_s"] => m.avg_jct_s as f64,
            ["makespan_s"] => m.makespan_s as f64,
            ["gpu_alloc"] => m.gpu_alloc,
            ["gpu_alloc_backlog"] => m.gpu_alloc_backlog,
            ["preemptions"] => m.preemptions as f64,
            ["queues", name, field] => {
                let q = r.queues.get(*name)?;
                match *field {
                    "jobs" => q.jobs as f64,
                    "avg_wait_s" => q.avg_wait_s as f64,
                    "p50_wait_s" => q.p50_wait_s as f64,
                    "p95_wait_s" => q.p95_wait_s as f64,
                    "gpu_hours" => q.gpu_hours,
                    "gpu_share" => {
                        let total: f64 = r.queues.values().map(|q| q.gpu_hours).sum();
                        if total > 0.0 {
                            q.gpu_hours / total
                        } else {
                            0.0
                        }
                    }
                    "preemptions" => q.preemptions as f64,
                    "share" => q.share,
                    "weight_share" => q.weight_share,
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Metrics, QueueMetrics, Totals};

    fn report() -> Report {
        Report {
            format_version: 1,
            policy: "gitfleet".to_string(),
            jobs: 10,
            dropped: 0,
            metrics: Metrics {
                p95_wait_s: 4000,
                gpu_alloc: 0.5,
                ..Metrics::default()
            },
            queues: [(
                "nlp".to_string(),
                QueueMetrics {
                    avg_wait_s: 600,
                    ..QueueMetrics::default()
                },
            )]
            .into_iter()
            .collect(),
            totals: Totals::default(),
        }
    }

    #[test]
    fn gates_compare_metrics() {
        let trips = |e: &str| e.parse::<Gate>().unwrap().trips(&report()).unwrap();
        assert!(trips("p95_wait_s > 3600"));
        assert!(!trips("p95_wait_s>4000"));
        assert!(trips("p95_wait_s >= 4000"));
        assert!(trips("gpu_alloc < 0.6"));
        assert!(trips("queues.nlp.avg_wait_s == 600"));
        assert!(!trips("queues.nlp.avg_wait_s != 600"));
    }

    #[test]
    fn shares_against_weight_shares() {
        let mut r = report();
        for (name, share, weight_share) in [("research", 0.2, 0.25), ("nlp", 0.3, 0.25)] {
            let q = r.queues.entry(name.to_string()).or_default();
            q.share = share;
            q.weight_share = weight_share;
        }
        let trips = |e: &str| e.parse::<Gate>().unwrap().trips(&r).unwrap();
        // research: 0.2 < 0.9 × 0.25 = 0.225 (fails the gate); nlp: 0.3 does not.
        assert!(trips("share(research) < 0.9 * weight_share"));
        assert!(!trips("share(nlp) < 0.9 * weight_share"));
        assert!(!trips("share(queue=research) < weight_share*0.75"));
        assert!(trips("queues.research.share < weight_share - 0.01"));
        assert!(trips("weight_share(research) == 0.25"));
        assert_eq!(
            "share_s > 0.9 * weight_share"
                .parse::<Gate>()
                .err()
                .map(|e| e.to_string()),
            Some("--fail-on `share_s > 0.9 * weight_share`: `weight_share` is the left-hand queue's weight share; name a queue's metric, e.g. `share(research) < 0.9 * weight_share`".to_string())
        );
        let gate: Gate = "share(cv) < 0.9 * weight_share".parse().unwrap();
        assert!(matches!(
            gate.trips(&r),
            Err(GateError::Metric { side: "head", .. })
        ));
    }

    #[test]
    fn bad_gates_are_named() {
        assert!("p95_wait_s".parse::<Gate>().is_err());
        assert!("> 3".parse::<Gate>().is_err());
        assert!("p95_wait_s > x".parse::<Gate>().is_err());
        let e = "queues.cv.avg_wait_s > 1"
            .parse::<Gate>()
            .unwrap()
            .trips(&report());
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("--fail-on `queues.cv.avg_wait_s > 1`: no metric `queues.cv.avg_wait_s` in the head report".to_string())
        );
    }

    #[test]
    fn queue_functions_and_base_bounds() {
        let head = report();
        let mut base = report();
        base.queues.get_mut("nlp").unwrap().avg_wait_s = 400;
        base.metrics.p95_wait_s = 3000;
        let trips = |e: &str| {
            e.parse::<Gate>()
                .unwrap()
                .trips_against(&head, Some(&base))
                .unwrap()
        };
        // nlp: 600 at head, 400 at base
        assert!(trips("avg_wait(queue=nlp) > 1.2 * base"));
        assert!(!trips("avg_wait(queue=nlp) > 1.5 * base"));
        assert!(trips("avg_wait(nlp) >= base*1.5"));
        assert!(!trips("queues.nlp.avg_wait_s > base + 200"));
        assert!(trips("queues.nlp.avg_wait_s > base + 199.5"));
        assert!(trips("avg_wait(queue=nlp) != base"));
        // p95: 4000 at head, 3000 at base
        assert!(trips("p95_wait_s > 1.3e0*base-1e2"));
        assert!(!trips("p95_wait_s < 2 * base - 2000"));
        assert_eq!(
            "queues.nlp.gpu_share == 0"
                .parse::<Gate>()
                .unwrap()
                .trips(&head),
            Ok(true)
        );
        let gate: Gate = "p95_wait(queue=nlp) > 1.2 * base".parse().unwrap();
        assert!(gate.uses_base());
        assert_eq!(
            gate.trips(&head).err().map(|e| e.to_string()),
            Some("--fail-on `p95_wait(queue=nlp) > 1.2 * base`: `base` is the base revision's replay, which only `gitfleet plan --base B --simulate TRACE` has".to_string())
        );
        let mut no_nlp = report();
        no_nlp.queues.clear();
        assert!(matches!(
            gate.trips_against(&head, Some(&no_nlp)),
            Err(GateError::Metric { side: "base", .. })
        ));
        for bad in [
            "p95_wait(team=nlp) > 1",
            "p95_wait() > 1",
            "p95_wait_s > 2 * bas",
            "x > base * y",
        ] {
            assert!(bad.parse::<Gate>().is_err(), "{bad}");
        }
    }
}
