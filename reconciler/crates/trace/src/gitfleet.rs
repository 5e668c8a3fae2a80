//! gitfleet's own trace schema: a CSV file with a header row; columns by
//! name, in any order (docs/simulate.md):
//!
//! | column | required | meaning |
//! | --- | --- | --- |
//! | `submit` | yes | submit time from the trace's origin: seconds (`90`, `1.5`) or a duration (`1h30m`) |
//! | `queue` | yes | the leaf queue |
//! | `replicas` | no (1) | gang size |
//! | `gpus_per_replica` | yes | GPUs per replica |
//! | `model` | no (any) | the GPU model |
//! | `duration` | yes | true run length: seconds or a duration |
//! | `priority_class` | no (default class) | the priority class |
//! | `time_limit` | no (none) | the declared `timeLimit`: seconds or a duration |

use model::spec::limits::{MAX_GPUS_PER_NODE, MAX_REPLICAS};
use model::spec::{Duration, is_dns_label};

use crate::csv::{Row, Table};
use crate::{Source, Trace, TraceError, TraceJob, run_length, seconds};

/// The columns, in the order gitfleet writes them.
pub const COLUMNS: [&str; 8] = [
    "submit",
    "queue",
    "replicas",
    "gpus_per_replica",
    "model",
    "duration",
    "priority_class",
    "time_limit",
];

/// Parses a trace in gitfleet's schema.
pub fn parse(source: Source<'_>) -> Result<Trace, TraceError> {
    let table = Table::read(source, &["submit", "queue", "gpus_per_replica", "duration"])?;
    let mut trace = Trace::default();
    for row in table.rows() {
        let replicas = if table.has("replicas") && row.optional("replicas").is_some() {
            row.count("replicas", 1, u64::from(MAX_REPLICAS))?
        } else {
            1
        };
        let gpus = row.count("gpus_per_replica", 1, u64::from(MAX_GPUS_PER_NODE))?;
        trace.jobs.push(TraceJob {
            line: row.line(),
            submit: time(&row, "submit")?,
            queue: name(&row, "queue")?.unwrap_or_default(),
            // In range: checked against u32 bounds above.
            replicas: replicas as u32,
            gpus_per_replica: gpus as u32,
            model: row.optional("model").map(str::to_string),
            duration: run_length(time(&row, "duration")?),
            priority_class: name(&row, "priority_class")?,
            time_limit: match row.optional("time_limit") {
                Some(_) => Some(time(&row, "time_limit")?).filter(|d| !d.is_zero()),
                None => None,
            },
        });
        if trace.jobs.last().is_some_and(|j| j.queue.is_empty()) {
            return Err(row.error("queue", "empty"));
        }
    }
    Ok(trace)
}

/// A time field: seconds, or a duration string.
fn time(row: &Row<'_>, column: &str) -> Result<Duration, TraceError> {
    let text = row.get(column);
    if text.is_empty() {
        return Err(row.error(column, "empty"));
    }
    match text.parse::<f64>() {
        Ok(secs) => seconds(secs).map_err(|m| row.error(column, m)),
        Err(_) => {
            let d: Duration = text.parse().map_err(|_| {
                row.error(
                    column,
                    format!("`{text}` is neither seconds nor a duration like 1h30m"),
                )
            })?;
            if d.as_secs() as f64 > crate::MAX_SECONDS {
                return Err(row.error(
                    column,
                    format!("{text} is out of range (at most 100 years)"),
                ));
            }
            Ok(d)
        }
    }
}

/// A name field (queue, priority class): a DNS label, or empty.
fn name(row: &Row<'_>, column: &str) -> Result<Option<String>, TraceError> {
    match row.optional(column) {
        None => Ok(None),
        Some(n) if is_dns_label(n) => Ok(Some(n.to_string())),
        Some(n) => Err(row.error(
            column,
            format!("`{n}` is not a name (lowercase letters, digits, `-`, at most 63)"),
        )),
    }
}

/// A trace in gitfleet's schema: the header and one row per job (for
/// `--make-fleet`'s companions and tests).
pub fn write(jobs: &[TraceJob]) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for j in jobs {
        let secs = |d: Duration| {
            let ms = d.as_millis();
            if ms.is_multiple_of(1000) {
                (ms / 1000).to_string()
            } else {
                format!("{}.{:03}", ms / 1000, ms % 1000)
            }
        };
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            secs(j.submit),
            j.queue,
            j.replicas,
            j.gpus_per_replica,
            j.model.as_deref().unwrap_or(""),
            secs(j.duration),
            j.priority_class.as_deref().unwrap_or(""),
            j.time_limit.map(secs).unwrap_or_default(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Trace, TraceError> {
        parse(Source {
            name: "t.csv",
            text,
        })
    }

    #[test]
    fn reads_every_column_and_round_trips() {
        let text = "submit,queue,replicas,gpus_per_replica,model,duration,priority_class,time_limit\n\
                    0,nlp,2,8,H100,1h,high,2h\n90.5,cv,,1,,30,,\n";
        let trace = parse_text(text).unwrap();
        assert_eq!(trace.jobs.len(), 2);
        let a = &trace.jobs[0];
        assert_eq!((a.replicas, a.gpus_per_replica, a.gpus()), (2, 8, 16));
        assert_eq!(a.duration, Duration::from_secs(3600));
        assert_eq!(a.time_limit, Some(Duration::from_secs(7200)));
        assert_eq!(a.priority_class.as_deref(), Some("high"));
        let b = &trace.jobs[1];
        assert_eq!((b.line, b.replicas, b.submit.as_millis()), (3, 1, 90_500));
        assert_eq!((b.model.clone(), b.time_limit), (None, None));
        assert_eq!(parse_text(&write(&trace.jobs)).unwrap().jobs, trace.jobs);
    }

    #[test]
    fn bad_rows_name_line_and_field() {
        let head = "submit,queue,gpus_per_replica,duration\n";
        let cases = [
            (
                "x,q,1,1\n",
                "t.csv:2: field `submit`: `x` is neither seconds nor a duration like 1h30m",
            ),
            ("-1,q,1,1\n", "t.csv:2: field `submit`: -1 is negative"),
            (
                "1e300,q,1,1\n",
                "t.csv:2: field `submit`: 1e300 s is out of range (at most 100 years)",
            ),
            (
                "1,q,0,1\n",
                "t.csv:2: field `gpus_per_replica`: 0 is not within 1..=128",
            ),
            (
                "1,q,99999999999999999999,1\n",
                "t.csv:2: field `gpus_per_replica`: `99999999999999999999` is not a whole number",
            ),
            (
                "1,Q!,1,1\n",
                "t.csv:2: field `queue`: `Q!` is not a name (lowercase letters, digits, `-`, at most 63)",
            ),
            (
                "1,q,1,NaN\n",
                "t.csv:2: field `duration`: NaN is not a number of seconds",
            ),
            ("1,,1,1\n", "t.csv:2: field `queue`: empty"),
        ];
        for (row, want) in cases {
            let e = parse_text(&format!("{head}{row}")).err().unwrap();
            assert_eq!(e.to_string(), want, "{row}");
        }
    }
}
