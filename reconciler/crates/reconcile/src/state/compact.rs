//! The `jobs` table's compact values: a job record with no stop, no
//! nomination and no end (a pending job, a running one: nearly every record
//! a burst writes) as one line of fields, which costs a fraction of its JSON
//! to write and to read and takes less room. Any other record, or one whose
//! text holds a separator, is JSON as before; JSON values (every value of an
//! older state) read as they always did.
//!
//! The form, fields separated by U+001F: `~1`, the job, its phase (`p`,
//! `r`, `s`, `f`, `x`), first seen, started (empty: none), the placement
//! (nodes separated by U+001D, each its name, U+001E and its GPUs joined by
//! `,`), the reason, the revision, preemptions, the restart annotation, the
//! spec digest, the attained GPU-seconds. An optional text is empty for none
//! and `+` then the text for some; a time is whole seconds since the epoch
//! and, when not whole, `.` and nine digits of nanoseconds.

use model::observed::{NodeGpus, Timestamp};

use super::records::{JobRecord, Phase};

/// Opens every compact value (JSON values open with `{`).
const MARK: &str = "~1";
const FIELD: char = '\u{1f}';
const NODE: char = '\u{1d}';
const GPUS: char = '\u{1e}';
const FIELDS: usize = 12;

/// The record's value: compact when it can be, else JSON.
pub(super) fn encode(record: &JobRecord, out: &mut String) {
    out.clear();
    if !compact(record, out) {
        out.clear();
        out.push_str(&super::to_json(record));
    }
}

/// Reads a value of the `jobs` table, compact or JSON.
pub(super) fn decode(text: &str) -> Result<JobRecord, String> {
    if text.starts_with(MARK) {
        decode_compact(text).ok_or_else(|| "not a compact job record".to_string())
    } else {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }
}

/// Writes the compact form into `out`; `false` when the record has no
/// compact form (`out` then holds a part of it).
fn compact(r: &JobRecord, out: &mut String) -> bool {
    if r.stopping.is_some()
        || !r.nominated.is_empty()
        || r.finished.is_some()
        || r.exit_code.is_some()
        || r.last_stop.is_some()
    {
        return false;
    }
    // The separators are ASCII: a byte scan finds them.
    let plain = |s: &str| !s.bytes().any(|b| matches!(b, 0x1d..=0x1f));
    let texts = [&r.reason, &r.revision, &r.restart, &r.spec_digest];
    if !plain(&r.job)
        || texts
            .iter()
            .any(|t| t.as_deref().is_some_and(|s| !plain(s)))
        || r.placement.iter().any(|p| !plain(&p.node))
    {
        return false;
    }
    out.push_str(MARK);
    out.push(FIELD);
    out.push_str(&r.job);
    out.push(FIELD);
    out.push(match r.phase {
        Phase::Pending => 'p',
        Phase::Running => 'r',
        Phase::Succeeded => 's',
        Phase::Failed => 'f',
        Phase::Stopped => 'x',
    });
    out.push(FIELD);
    if !time(r.first_seen, out) {
        return false;
    }
    out.push(FIELD);
    if let Some(started) = r.started
        && !time(started, out)
    {
        return false;
    }
    out.push(FIELD);
    for (i, part) in r.placement.iter().enumerate() {
        if i > 0 {
            out.push(NODE);
        }
        out.push_str(&part.node);
        out.push(GPUS);
        for (j, gpu) in part.gpus.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            number(u64::from(*gpu), out);
        }
    }
    out.push(FIELD);
    optional(r.reason.as_deref(), out);
    out.push(FIELD);
    optional(r.revision.as_deref(), out);
    out.push(FIELD);
    number(u64::from(r.preemptions), out);
    out.push(FIELD);
    optional(r.restart.as_deref(), out);
    out.push(FIELD);
    optional(r.spec_digest.as_deref(), out);
    out.push(FIELD);
    number(r.attained, out);
    true
}

/// `n` in decimal (what `write!` gives, without its formatting machinery:
/// a burst writes thousands of these; the hand-written JSON's writer).
pub(super) use exec::json::push_u64 as number;

fn optional(text: Option<&str>, out: &mut String) {
    if let Some(text) = text {
        out.push('+');
        out.push_str(text);
    }
}

/// Seconds and nanoseconds; `false` for a leap second's (not written so).
fn time(t: Timestamp, out: &mut String) -> bool {
    let nanos = t.timestamp_subsec_nanos();
    if nanos >= 1_000_000_000 {
        return false;
    }
    let secs = t.timestamp();
    if secs < 0 {
        out.push('-');
    }
    number(secs.unsigned_abs(), out);
    if nanos > 0 {
        out.push('.');
        // Nine digits: 1e9 + nanos, less its leading 1.
        let at = out.len();
        number(1_000_000_000 + u64::from(nanos), out);
        out.remove(at);
    }
    true
}

fn read_time(text: &str) -> Option<Timestamp> {
    let (secs, nanos) = match text.split_once('.') {
        Some((secs, nanos)) if nanos.len() == 9 => (secs, nanos.parse().ok()?),
        Some(_) => return None,
        None => (text, 0),
    };
    Timestamp::from_timestamp(secs.parse().ok()?, nanos)
}

fn read_optional(text: &str) -> Option<Option<String>> {
    match text {
        "" => Some(None),
        _ => text.strip_prefix('+').map(|t| Some(t.to_string())),
    }
}

fn decode_compact(text: &str) -> Option<JobRecord> {
    let fields: Vec<&str> = text.split(FIELD).collect();
    let [
        mark,
        job,
        phase,
        first_seen,
        started,
        placement,
        reason,
        revision,
        preemptions,
        restart,
        spec_digest,
        attained,
    ] = <[&str; FIELDS]>::try_from(fields).ok()?;
    if mark != MARK {
        return None;
    }
    let phase = match phase {
        "p" => Phase::Pending,
        "r" => Phase::Running,
        "s" => Phase::Succeeded,
        "f" => Phase::Failed,
        "x" => Phase::Stopped,
        _ => return None,
    };
    let started = match started {
        "" => None,
        t => Some(read_time(t)?),
    };
    let mut parts = Vec::new();
    for part in placement.split(NODE).filter(|p| !p.is_empty()) {
        let (node, gpus) = part.split_once(GPUS)?;
        let gpus = gpus
            .split(',')
            .filter(|g| !g.is_empty())
            .map(|g| g.parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        parts.push(NodeGpus {
            node: node.to_string(),
            gpus,
        });
    }
    Some(JobRecord {
        job: job.to_string(),
        phase,
        first_seen: read_time(first_seen)?,
        started,
        placement: parts,
        stopping: None,
        nominated: Vec::new(),
        finished: None,
        exit_code: None,
        reason: read_optional(reason)?,
        revision: read_optional(revision)?,
        preemptions: preemptions.parse().ok()?,
        restart: read_optional(restart)?,
        spec_digest: read_optional(spec_digest)?,
        last_stop: None,
        attained: attained.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{LastStop, StopKind, Stopping};
    use proptest::prelude::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn running() -> JobRecord {
        let mut r = JobRecord::new_pending("train-1", t("2026-11-21T10:00:00Z"));
        r.phase = Phase::Running;
        r.started = Some(t("2026-11-21T10:05:00.123456789Z"));
        r.placement = vec![
            NodeGpus {
                node: "p-0".into(),
                gpus: vec![0, 1, 2],
            },
            NodeGpus {
                node: "p-1".into(),
                gpus: vec![7],
            },
        ];
        r.revision = Some("3f2c1a9b".into());
        r.spec_digest = Some("00ff00ff00ff00ff".into());
        r.restart = Some(String::new());
        r.preemptions = 2;
        r.attained = 3600;
        r
    }

    fn round_trip(record: &JobRecord) -> String {
        let mut text = String::new();
        encode(record, &mut text);
        assert_eq!(decode(&text).as_ref(), Ok(record), "{text:?}");
        text
    }

    #[test]
    fn pending_and_running_records_are_compact_and_read_back() {
        let mut pending = JobRecord::new_pending("a", t("2026-11-21T10:00:00Z"));
        pending.reason = Some("queue q: at its limit".into());
        let text = round_trip(&pending);
        assert!(text.starts_with(MARK), "{text:?}");
        assert!(text.len() < super::super::to_json(&pending).len());
        let text = round_trip(&running());
        assert!(text.starts_with(MARK), "{text:?}");
    }

    #[test]
    fn other_records_stay_json() {
        let mut stopping = running();
        stopping.stopping = Some(Stopping {
            kind: StopKind::Preempt,
            since: t("2026-11-21T11:00:00Z"),
            for_job: Some("b".into()),
        });
        let mut ended = running();
        ended.phase = Phase::Succeeded;
        ended.finished = Some(t("2026-11-21T12:00:00Z"));
        ended.exit_code = Some(0);
        let mut stopped_before = JobRecord::new_pending("c", t("2026-11-21T10:00:00Z"));
        stopped_before.last_stop = Some(LastStop {
            kind: StopKind::Cancel,
            at: t("2026-11-21T10:00:00Z"),
            revision: "r".into(),
            for_job: None,
            reason: "removed".into(),
        });
        let mut nominated = JobRecord::new_pending("d", t("2026-11-21T10:00:00Z"));
        nominated.nominated = running().placement;
        let mut odd = running();
        odd.reason = Some(format!("a{FIELD}b"));
        let mut odd_node = running();
        odd_node.placement[0].node = format!("n{GPUS}1");
        for record in [stopping, ended, stopped_before, nominated, odd, odd_node] {
            let text = round_trip(&record);
            assert!(text.starts_with('{'), "{text:?}");
        }
    }

    #[test]
    fn numbers_and_times_are_written_as_format_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::new();
            number(n, &mut out);
            assert_eq!(out, n.to_string());
        }
        for (text, written) in [
            ("2026-11-21T10:00:00Z", "1795255200"),
            ("2026-11-21T10:00:00.000000001Z", "1795255200.000000001"),
            ("2026-11-21T10:00:00.5Z", "1795255200.500000000"),
            ("1969-12-31T23:59:59.25Z", "-1.250000000"),
        ] {
            let mut out = String::new();
            assert!(time(t(text), &mut out));
            assert_eq!(out, written);
            assert_eq!(read_time(&out), Some(t(text)), "{text}");
        }
    }

    #[test]
    fn json_values_of_older_states_read() {
        let json = r#"{"job":"a","phase":"running","firstSeen":"2026-11-21T10:00:00Z","started":"2026-11-21T10:01:00Z","placement":[{"node":"n","gpus":[0]}],"revision":"r"}"#;
        let record = decode(json).unwrap();
        assert_eq!(record.phase, Phase::Running);
        assert_eq!(record.placement[0].gpus, [0]);
        assert_eq!(record, serde_json::from_str::<JobRecord>(json).unwrap());
    }

    #[test]
    fn damaged_compact_values_are_errors() {
        let mut text = String::new();
        encode(&running(), &mut text);
        for bad in [
            text.replacen("\u{1f}r\u{1f}", "\u{1f}q\u{1f}", 1),
            text[..text.len() - 3].to_string() + "\u{1f}x",
            format!("{text}\u{1f}"),
            text.replacen("+3f2c", "3f2c", 1),
            "~1".to_string(),
        ] {
            assert!(decode(&bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Whatever the record, its value reads back as the same record.
        #[test]
        fn any_record_reads_back(
            job in "[a-z0-9\u{1e}-]{1,12}",
            phase in 0usize..5,
            secs in 0i64..4_000_000_000,
            nanos in prop_oneof![Just(0u32), 0u32..1_000_000_000],
            started in proptest::option::of(0i64..4_000_000_000),
            nodes in proptest::collection::vec(("[a-z0-9.\u{1d}-]{1,8}", proptest::collection::vec(0u32..16, 0..4)), 0..3),
            reason in proptest::option::of("[ -~\u{1f}]{0,20}"),
            revision in proptest::option::of("[0-9a-f]{0,12}"),
            preemptions in 0u32..5,
            attained in 0u64..1_000_000,
            ended in any::<bool>(),
        ) {
            let mut r = JobRecord::new_pending(&job, Timestamp::from_timestamp(secs, nanos).unwrap());
            r.phase = Phase::ALL[phase];
            r.started = started.and_then(|s| Timestamp::from_timestamp(s, 0));
            r.placement = nodes.into_iter().map(|(node, gpus)| NodeGpus { node, gpus }).collect();
            r.reason = reason;
            r.revision = revision;
            r.restart = r.revision.clone();
            r.spec_digest = r.reason.clone();
            r.preemptions = preemptions;
            r.attained = attained;
            if ended {
                r.finished = Some(Timestamp::from_timestamp(secs, 0).unwrap());
            }
            let mut text = String::new();
            encode(&r, &mut text);
            prop_assert_eq!(decode(&text), Ok(r));
        }
    }
}
