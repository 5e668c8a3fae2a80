//! What the loop recorded after its last iteration ([`crate::run::record`]),
//! kept so that an iteration which changed nothing they are built from
//! rewrites only what depends on its time.
//!
//! The dashboard's view, the status, `observed.json` and the fleet's gauges
//! are functions of the revision, the fleet in force, the plan, the nodes
//! observed, the job records, the revisions' bookkeeping and the audit
//! log's tail ([`RecordKey`]). While those are the very same (the plan and
//! nodes shared, no job record written since), only their times change:
//! the view's and the status's `time`, `observed.json`'s `time` (and the
//! end time it gives a finished job recorded without one, in which case it
//! is built again), and the status's `last_iteration`. The files are then
//! written from the last texts with those pieces put in, byte for byte
//! what serialising them again gives; the view is served with the new
//! time ([`crate::run::Shared::current_view`]).

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use dashboard::FleetView;
use model::observed::{ObservedNode, ObservedState, Timestamp};
use model::plan::Plan;

use crate::state::{AuditEntry, Revisions};
use crate::status::{IterationSummary, STATUS_FILE, Status};

/// Writes `pieces` one after the other to `dir/file` atomically (to
/// `file.tmp`, then renamed).
pub fn write_pieces(dir: &Path, file: &str, pieces: &[&str]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{file}.tmp"));
    let mut out = std::fs::File::create(&tmp)?;
    for piece in pieces {
        out.write_all(piece.as_bytes())?;
    }
    drop(out);
    std::fs::rename(&tmp, dir.join(file))
}

/// What the recorded outputs are built from, but the iteration's time.
#[derive(Debug, Clone)]
pub struct RecordKey {
    /// The executor's name.
    pub executor: String,
    /// The iteration's revision.
    pub revision: Option<String>,
    /// The address of the fleet in force (with the plan's, which holds it
    /// as planned, the same fleet).
    pub fleet: Option<usize>,
    /// The plan (compared by address: a re-used plan is the same). Not
    /// held: the loop may change its revision in place when it keeps it for
    /// a new revision (which this key holds apart).
    pub plan: Option<std::sync::Weak<Plan>>,
    /// The observed state it was planned from (by address).
    pub planned_from: Arc<ObservedState>,
    /// The nodes observed (by address).
    pub nodes: Arc<Vec<ObservedNode>>,
    /// The store's job-record commits ([`crate::state::Store::job_writes`]):
    /// equal, no record was written in between.
    pub job_writes: u64,
    /// The revisions' bookkeeping.
    pub revisions: Revisions,
    /// The audit log's tail the view shows.
    pub audit: Vec<AuditEntry>,
    /// The expected starts computed off the loop so far
    /// ([`crate::starts::StartsCache::ready`]): one more, the view may
    /// show them ([`Recorded::set_starts`]).
    pub starts: u64,
}

impl RecordKey {
    /// Whether everything the outputs are built from is the same.
    fn same(&self, other: &RecordKey) -> bool {
        let same_plan = match (&self.plan, &other.plan) {
            (Some(a), Some(b)) => std::sync::Weak::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_plan
            && Arc::ptr_eq(&self.planned_from, &other.planned_from)
            && Arc::ptr_eq(&self.nodes, &other.nodes)
            && self.job_writes == other.job_writes
            && self.fleet == other.fleet
            && self.revision == other.revision
            && self.executor == other.executor
            && self.revisions == other.revisions
            && self.audit == other.audit
    }
}

/// A JSON text around the value of its first `"time"` field.
#[derive(Clone, PartialEq)]
struct Around {
    head: Arc<str>,
    tail: Arc<str>,
}

/// Lengths, not megabytes of text.
impl std::fmt::Debug for Around {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Around")
            .field("head", &self.head.len())
            .field("tail", &self.tail.len())
            .finish()
    }
}

impl Around {
    /// `text` split around `value` (a JSON string), the value of the first
    /// `"time"` field; `None` when that is not where it is.
    fn new(text: &str, value: &str) -> Option<Around> {
        let field = text.find("\"time\":")? + "\"time\":".len();
        let at = if text[field..].starts_with(' ') {
            field + 1
        } else {
            field
        };
        text[at..].starts_with(value).then(|| Around {
            head: Arc::from(&text[..at]),
            tail: Arc::from(&text[at + value.len()..]),
        })
    }
}

/// `status.json` in pieces: before the time, between the time and the last
/// iteration's summary.
#[derive(Clone, PartialEq)]
struct StatusText {
    head: Arc<str>,
    middle: Arc<str>,
}

/// Lengths, not megabytes of text.
impl std::fmt::Debug for StatusText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusText")
            .field("head", &self.head.len())
            .field("middle", &self.middle.len())
            .finish()
    }
}

/// How `last_iteration` follows the rest of `status.json`.
const LAST_ITERATION: &str = ",\n  \"last_iteration\": ";

/// `summary` as it reads inside `status.json` (one level indented).
fn summary_text(summary: &IterationSummary) -> Option<String> {
    let text = serde_json::to_string_pretty(summary).ok()?;
    Some(text.replace('\n', "\n  "))
}

impl StatusText {
    /// The pieces of `text`, the text of `status`; `None` when `text` is
    /// not made of them.
    fn new(text: &str, status: &Status) -> Option<StatusText> {
        let time = serde_json::to_string(&status.time).ok()?;
        let around = Around::new(text, &time)?;
        let cut = around.tail.rfind(LAST_ITERATION)?;
        let summary = summary_text(&status.last_iteration)?;
        (around.tail[cut + LAST_ITERATION.len()..] == format!("{summary}\n}}")).then(|| {
            StatusText {
                head: around.head,
                middle: Arc::from(&around.tail[..cut]),
            }
        })
    }

    /// The pieces of `status.json` for `status`.
    fn pieces(&self, status: &Status) -> Option<Vec<Arc<str>>> {
        let time = serde_json::to_string(&status.time).ok()?;
        let summary = summary_text(&status.last_iteration)?;
        Some(vec![
            self.head.clone(),
            time.into(),
            self.middle.clone(),
            LAST_ITERATION.into(),
            summary.into(),
            "\n}\n".into(),
        ])
    }
}

/// What was written for `observed.json`.
#[derive(Debug, Clone, PartialEq)]
enum Observed {
    /// Nothing (no fleet in force yet).
    None,
    /// This text, whose only time is its `time`.
    Text(Around),
    /// A text that depends on the time beyond its `time` (or could not be
    /// split): built again each time.
    Rebuild,
}

/// The last iteration's outputs.
#[derive(Debug)]
struct Last {
    key: RecordKey,
    view_text: Option<Around>,
    status: Status,
    status_text: Option<StatusText>,
    observed: Observed,
}

/// The texts of an iteration's outputs, as [`crate::run::record`] wrote
/// them.
#[derive(Debug)]
pub struct Written<'a> {
    /// `dashboard.json` less its final newline.
    pub view: Option<&'a str>,
    /// `status.json` less its final newline.
    pub status: Option<&'a str>,
    /// `observed.json` less its final newline (`None`: not written).
    pub observed: Option<&'a str>,
    /// Whether `observed.json` depends on the time only through its `time`.
    pub observed_timeless: bool,
}

/// What [`Recorded::again`] did.
#[derive(Debug)]
pub struct Again {
    /// The status of the iteration.
    pub status: Status,
    /// `observed.json` is still to be built and written.
    pub observed_to_build: bool,
}

/// The loop's last outputs ([`crate::run::Shared::recorded`]).
#[derive(Debug, Default)]
pub struct Recorded {
    last: Mutex<Option<Last>>,
    again: std::sync::atomic::AtomicU64,
    writer: Writer,
}

impl Recorded {
    /// Keeps the outputs of an iteration built from `key`.
    pub fn keep(&self, key: RecordKey, view: &FleetView, status: &Status, written: Written<'_>) {
        let view_text = written
            .view
            .and_then(|text| Around::new(text, &serde_json::to_string(&view.time).ok()?));
        let status_text = written
            .status
            .and_then(|text| StatusText::new(text, status));
        let observed = match written.observed {
            None => Observed::None,
            Some(_) if !written.observed_timeless => Observed::Rebuild,
            Some(text) => serde_json::to_string(&status.time)
                .ok()
                .and_then(|time| Around::new(text, &time))
                .map_or(Observed::Rebuild, Observed::Text),
        };
        let last = Last {
            key,
            view_text,
            status: status.clone(),
            status_text,
            observed,
        };
        if let Ok(mut slot) = self.last.lock() {
            *slot = Some(last);
        }
    }

    /// How many iterations were recorded from the last outputs.
    pub fn times_again(&self) -> u64 {
        self.again.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the last outputs were built from `key` but for expected
    /// starts computed since.
    pub fn starts_since(&self, key: &RecordKey) -> bool {
        self.last.lock().ok().is_some_and(|last| {
            last.as_ref()
                .is_some_and(|l| l.key.same(key) && l.key.starts != key.starts)
        })
    }

    /// After [`Recorded::starts_since`]: the last outputs are those of
    /// `key`, with `view` (the last one with the expected starts now
    /// known; `None`: the same).
    pub fn set_starts(&self, key: &RecordKey, view: Option<&FleetView>) {
        let Ok(mut slot) = self.last.lock() else {
            return;
        };
        let Some(last) = slot.as_mut().filter(|l| l.key.same(key)) else {
            return;
        };
        if let Some(view) = view {
            let time = serde_json::to_string(&view.time).ok();
            last.view_text = crate::view::to_json(view)
                .ok()
                .zip(time)
                .and_then(|(text, time)| Around::new(&text, &time));
        }
        last.key.starts = key.starts;
    }

    /// Waits until the files handed to the writer are written.
    pub fn flush(&self) {
        self.writer.flush();
    }

    /// Forgets the last outputs (the next iteration builds them all).
    pub fn forget(&self) {
        if let Ok(mut slot) = self.last.lock() {
            *slot = None;
        }
    }

    /// When `key` is that of the last outputs: has the view, the status
    /// and `observed.json` of an iteration at `time` that did `summary`
    /// written into `dir` from the last texts, by the writer thread (the
    /// loop does not wait; [`Recorded::flush`] does), and gives the status (the view is
    /// the last one with the new time). `None`: everything is to be built.
    pub fn again(
        &self,
        key: &RecordKey,
        time: Timestamp,
        summary: IterationSummary,
        dir: &Path,
    ) -> Option<Again> {
        let slot = self.last.lock().ok()?;
        let last = slot.as_ref()?;
        if !last.key.same(key) || last.key.starts != key.starts {
            return None;
        }
        let (Some(view_text), Some(status_text)) = (&last.view_text, &last.status_text) else {
            return None;
        };
        let status = Status {
            time,
            last_iteration: summary,
            ..last.status.clone()
        };
        let view_time = serde_json::to_string(&crate::view::view_time(time)).ok()?;
        let stamp: Arc<str> = serde_json::to_string(&time).ok()?.into();
        let mut files = vec![
            (
                crate::view::VIEW_FILE,
                vec![
                    view_text.head.clone(),
                    view_time.into(),
                    view_text.tail.clone(),
                    "\n".into(),
                ],
            ),
            (STATUS_FILE, status_text.pieces(&status)?),
        ];
        let observed_to_build = match &last.observed {
            Observed::None => false,
            Observed::Rebuild => true,
            Observed::Text(text) => {
                files.push((
                    crate::live::OBSERVED_FILE,
                    vec![text.head.clone(), stamp, text.tail.clone(), "\n".into()],
                ));
                false
            }
        };
        self.writer.send(dir, files);
        self.again
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Again {
            status,
            observed_to_build,
        })
    }
}

/// Files to write: (name, pieces) in a directory.
type Files = Vec<(&'static str, Vec<Arc<str>>)>;

/// A thread that writes files handed to it, in order; of files handed
/// again before they were written, the last version only.
#[derive(Debug, Default)]
struct Writer {
    inner: Arc<WriterInner>,
    started: std::sync::OnceLock<()>,
}

#[derive(Debug, Default)]
struct WriterInner {
    /// Files waiting, by path, and whether a write is under way.
    queue: Mutex<Queue>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(std::path::PathBuf, &'static str, Vec<Arc<str>>)>,
    busy: bool,
    closed: bool,
}

/// The files waiting by name, not their text.
impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting: Vec<_> = self
            .waiting
            .iter()
            .map(|(dir, file, _)| dir.join(file))
            .collect();
        f.debug_struct("Queue")
            .field("waiting", &waiting)
            .field("busy", &self.busy)
            .field("closed", &self.closed)
            .finish()
    }
}

impl Writer {
    fn send(&self, dir: &Path, files: Files) {
        self.started.get_or_init(|| {
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("gitfleet-record-writer".into())
                .spawn(move || inner.run());
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "no writer thread: files are written in the loop");
            }
        });
        let Ok(mut queue) = self.inner.queue.lock() else {
            return;
        };
        for (file, pieces) in files {
            queue.waiting.retain(|(d, f, _)| !(d == dir && *f == file));
            queue.waiting.push((dir.to_path_buf(), file, pieces));
        }
        self.inner.changed.notify_all();
        // Without a thread (it could not start or has stopped), here.
        if Arc::strong_count(&self.inner) == 1 {
            let waiting = std::mem::take(&mut queue.waiting);
            drop(queue);
            WriterInner::write(waiting);
        }
    }

    fn flush(&self) {
        let Ok(mut queue) = self.inner.queue.lock() else {
            return;
        };
        while (!queue.waiting.is_empty() || queue.busy) && Arc::strong_count(&self.inner) > 1 {
            queue = match self.inner.changed.wait(queue) {
                Ok(queue) => queue,
                Err(_) => return,
            };
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Ok(mut queue) = self.inner.queue.lock() {
            queue.closed = true;
        }
        self.inner.changed.notify_all();
        self.flush();
    }
}

impl WriterInner {
    fn run(&self) {
        loop {
            let Ok(mut queue) = self.queue.lock() else {
                return;
            };
            while queue.waiting.is_empty() && !queue.closed {
                queue = match self.changed.wait(queue) {
                    Ok(queue) => queue,
                    Err(_) => return,
                };
            }
            if queue.waiting.is_empty() {
                return;
            }
            let waiting = std::mem::take(&mut queue.waiting);
            queue.busy = true;
            drop(queue);
            Self::write(waiting);
            if let Ok(mut queue) = self.queue.lock() {
                queue.busy = false;
            }
            self.changed.notify_all();
        }
    }

    fn write(files: Vec<(std::path::PathBuf, &'static str, Vec<Arc<str>>)>) {
        for (dir, file, pieces) in files {
            let pieces: Vec<&str> = pieces.iter().map(|p| &**p).collect();
            if let Err(e) = write_pieces(&dir, file, &pieces) {
                tracing::warn!(error = %e, "cannot write {file}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_split_around_its_first_time() {
        let text = r#"{"formatVersion":1,"time":"2026-11-21T10:00:00Z","x":{"time":"a"}}"#;
        let around = Around::new(text, "\"2026-11-21T10:00:00Z\"").unwrap();
        assert_eq!(&*around.head, r#"{"formatVersion":1,"time":"#);
        assert_eq!(&*around.tail, r#","x":{"time":"a"}}"#);
        let pretty = "{\n  \"time\": \"t\",\n  \"a\": 1\n}";
        let around = Around::new(pretty, "\"t\"").unwrap();
        assert_eq!(&*around.head, "{\n  \"time\": ");
        // Another value where the time is: no split.
        assert!(Around::new(pretty, "\"u\"").is_none());
        assert!(Around::new("{}", "\"t\"").is_none());
    }
}
