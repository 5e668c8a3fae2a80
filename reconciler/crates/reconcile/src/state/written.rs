//! The `intents` and `audit` values of a plan's actions written by hand
//! ([`groups::encode`](super::groups::encode)'s bytes: `serde_json`'s
//! compact form, an object for one, an array for more), without the
//! serializer's cost per field; a burst writes thousands of each. Tests
//! compare both with `serde_json`.

use exec::json::{push_str, push_u64};
use model::observed::Timestamp;
use model::plan::Action;

use super::records::{AuditEntry, IntentRef};

/// A time as the records write it ([`model::time::fast`]), with its quotes.
#[derive(serde::Serialize)]
struct Time(#[serde(serialize_with = "model::time::fast::serialize")] Timestamp);

/// The last time written and its text (a plan's lines share one time).
#[derive(Default)]
struct Times(Option<(Timestamp, String)>);

impl Times {
    fn push(&mut self, time: Timestamp, out: &mut String) {
        if self.0.as_ref().is_none_or(|(t, _)| *t != time) {
            self.0 = Some((time, super::to_json(&Time(time))));
        }
        if let Some((_, text)) = &self.0 {
            out.push_str(text);
        }
    }
}

/// Writes `items` as one group's value, each by `item`.
fn group<T>(items: &[T], per: usize, mut item: impl FnMut(&T, &mut String)) -> String {
    let mut out = String::with_capacity(items.len() * per + 2);
    let many = items.len() != 1;
    if many {
        out.push('[');
    }
    for (i, one) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        item(one, &mut out);
    }
    if many {
        out.push(']');
    }
    out
}

/// The audit table's value for `lines`.
pub(super) fn audit_value(lines: &[AuditEntry]) -> String {
    let mut times = Times::default();
    group(lines, 160, |line, out| {
        out.push_str("{\"time\":");
        times.push(line.time, out);
        for (key, text) in [
            (",\"revision\":", &line.revision),
            (",\"what\":", &line.what),
            (",\"subject\":", &line.subject),
            (",\"detail\":", &line.detail),
        ] {
            out.push_str(key);
            push_str(text, out);
        }
        out.push('}');
    })
}

/// The intents table's value for `intents`.
pub(super) fn intents_value(intents: &[IntentRef<'_>]) -> String {
    let mut times = Times::default();
    group(intents, 200, |intent, out| {
        out.push_str("{\"revision\":");
        push_str(intent.revision, out);
        out.push_str(",\"time\":");
        times.push(intent.time, out);
        out.push_str(",\"action\":");
        action(intent.action, out);
        out.push('}');
    })
}

/// `"key":"text"` after a comma.
fn field(key: &str, text: &str, out: &mut String) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    push_str(text, out);
}

/// An action as its derived `Serialize` writes it (tagged by `type`).
fn action(action: &Action, out: &mut String) {
    out.push_str("{\"type\":\"");
    out.push_str(action.kind());
    out.push('"');
    match action {
        Action::Place {
            job,
            placement,
            reason,
        } => {
            field("job", job, out);
            out.push_str(",\"placement\":[");
            for (i, part) in placement.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"node\":");
                push_str(&part.node, out);
                out.push_str(",\"gpus\":[");
                for (k, gpu) in part.gpus.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    push_u64(u64::from(*gpu), out);
                }
                out.push_str("]}");
            }
            out.push(']');
            field("reason", reason, out);
        }
        Action::Preempt {
            job,
            for_job,
            reason,
        } => {
            field("job", job, out);
            field("for", for_job, out);
            field("reason", reason, out);
        }
        Action::Scale {
            pool,
            from,
            to,
            reason,
            nodes,
        } => {
            field("pool", pool, out);
            out.push_str(",\"from\":");
            push_u64(u64::from(*from), out);
            out.push_str(",\"to\":");
            push_u64(u64::from(*to), out);
            field("reason", reason, out);
            if !nodes.is_empty() {
                out.push_str(",\"nodes\":[");
                for (i, node) in nodes.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_str(node, out);
                }
                out.push(']');
            }
        }
        Action::Drain { node, reason } => {
            field("node", node, out);
            field("reason", reason, out);
        }
        Action::Terminate { job, reason } | Action::Cancel { job, reason } => {
            field("job", job, out);
            field("reason", reason, out);
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::NodeGpus;

    fn texts() -> Vec<String> {
        let mut texts: Vec<String> = (0u8..128).map(|b| format!("x{}y", char::from(b))).collect();
        texts.extend(["", "job-1", "é 日本 🚀 \u{2028}"].map(String::from));
        texts
    }

    fn times() -> Vec<Timestamp> {
        [
            "2026-11-21T10:00:00Z",
            "2026-11-21T10:00:00.25Z",
            "2026-11-21T10:00:00.123456789Z",
            "1970-01-01T00:00:00Z",
        ]
        .iter()
        .map(|t| t.parse().unwrap())
        .collect()
    }

    fn actions() -> Vec<Action> {
        let mut out = Vec::new();
        for (k, text) in texts().into_iter().enumerate() {
            let placement = (0..k % 4)
                .map(|i| NodeGpus {
                    node: format!("{text}-{i}"),
                    gpus: (0..i as u32 * 3).collect(),
                })
                .collect();
            out.push(Action::Place {
                job: text.clone(),
                placement,
                reason: format!("queue {text}"),
            });
            out.push(Action::Preempt {
                job: text.clone(),
                for_job: "other".into(),
                reason: text.clone(),
            });
            out.push(Action::Scale {
                pool: text.clone(),
                from: k as u32,
                to: u32::MAX - k as u32,
                reason: text.clone(),
                nodes: (0..k % 3).map(|i| format!("{text}{i}")).collect(),
            });
            out.push(Action::Drain {
                node: text.clone(),
                reason: text.clone(),
            });
            out.push(Action::Terminate {
                job: text.clone(),
                reason: "limit".into(),
            });
            out.push(Action::Cancel {
                job: "gone".into(),
                reason: text,
            });
        }
        out
    }

    #[test]
    fn intents_are_written_as_serde_json_writes_them() {
        let actions = actions();
        let times = times();
        let intents: Vec<IntentRef<'_>> = actions
            .iter()
            .enumerate()
            .map(|(k, action)| IntentRef {
                revision: if k % 5 == 0 { "rev\"1" } else { "abc123" },
                time: times[(k / 7) % times.len()],
                action,
            })
            .collect();
        for group in [&intents[..0], &intents[..1], &intents[3..4], &intents[..]] {
            assert_eq!(intents_value(group), super::super::groups::encode(group));
        }
    }

    #[test]
    fn audit_lines_are_written_as_serde_json_writes_them() {
        let times = times();
        let lines: Vec<AuditEntry> = texts()
            .into_iter()
            .enumerate()
            .map(|(k, text)| AuditEntry {
                time: times[(k / 3) % times.len()],
                revision: if k % 2 == 0 {
                    String::new()
                } else {
                    text.clone()
                },
                what: "place".into(),
                subject: text.clone(),
                detail: format!("on {text}; failed: {text}"),
            })
            .collect();
        for group in [&lines[..0], &lines[..1], &lines[7..8], &lines[..]] {
            assert_eq!(audit_value(group), super::super::groups::encode(group));
        }
    }
}
