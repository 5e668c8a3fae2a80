//! `--fail-on EXPR`: a bound on a report's metric, for CI. An expression is
//! `METRIC OP NUMBER`: METRIC a field of `metrics` (`p95_wait_s`,
//! `gpu_alloc`, …) or `queues.NAME.FIELD` (`queues.nlp.avg_wait_s`), OP one
//! of `>`, `>=`, `<`, `<=`, `==`, `!=`. It fails (the gate trips) when the
//! comparison holds.

use crate::Report;

/// A parsed `--fail-on` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    text: String,
    metric: Vec<String>,
    op: Op,
    bound: f64,
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

/// What is wrong with an expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// It does not have the shape `METRIC OP NUMBER`.
    #[error(
        "--fail-on `{0}`: expected METRIC OP NUMBER, e.g. `p95_wait_s > 3600` or `queues.nlp.avg_wait_s >= 600`"
    )]
    Syntax(String),
    /// It names a metric the report does not have.
    #[error("--fail-on `{expr}`: no metric `{metric}` in the report")]
    Metric {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
    },
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
        let metric = text[..at].trim();
        let bound: f64 = text[at + sym.len()..]
            .trim()
            .parse()
            .map_err(|_| syntax())?;
        if metric.is_empty() || !bound.is_finite() {
            return Err(syntax());
        }
        Ok(Gate {
            text: text.trim().to_string(),
            metric: metric.split('.').map(str::to_string).collect(),
            op,
            bound,
        })
    }
}

impl Gate {
    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the gate trips on `report` (the comparison holds).
    pub fn trips(&self, report: &Report) -> Result<bool, GateError> {
        let value = self.value(report).ok_or_else(|| GateError::Metric {
            expr: self.text.clone(),
            metric: self.metric.join("."),
        })?;
        Ok(match self.op {
            Op::Gt => value > self.bound,
            Op::Ge => value >= self.bound,
            Op::Lt => value < self.bound,
            Op::Le => value <= self.bound,
            Op::Eq => value == self.bound,
            Op::Ne => value != self.bound,
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
                    "p95_wait_s" => q.p95_wait_s as f64,
                    "gpu_hours" => q.gpu_hours,
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
            Some("--fail-on `queues.cv.avg_wait_s > 1`: no metric `queues.cv.avg_wait_s` in the report".to_string())
        );
    }
}
