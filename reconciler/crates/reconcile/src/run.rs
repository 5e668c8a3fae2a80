//! The reconcile loop: iterate, write `status.json`, update the metrics,
//! then wait for the interval, a webhook (`POST /hooks/git`) or a signal.
//! An HTTP endpoint serves the dashboard (`/`), `/metrics` (Prometheus),
//! `/healthz` and `/status`.
//!
//! The loop is `async` and runs on the caller's tokio runtime (the binary
//! owns it); the HTTP server is a task beside it. An iteration that fails
//! transiently (an executor's fleet busy or unreachable) is tried again
//! after a backoff that doubles from one second up to the interval, as
//! kube-rs controllers requeue on error.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path as AxumPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::history_page::{HistoryPageError, HistoryRepo, history_view, is_commit_id};
use super::http_limits::{
    IDLE_TIMEOUT, LimitedListener, MAX_CONNECTIONS, MAX_WEBHOOK_BODY, RateLimit,
    webhook_signature_ok,
};
use super::metrics::Metrics;
use super::status::{IterationSummary, Status};
use super::view::{AUDIT_TAIL, ViewInput, fleet_view};
use super::{Iteration, ReconcileError, Reconciler};
use crate::recorded::{RecordKey, Written};
use exec::Executor;
use model::observed::Timestamp;
use model::spec::Duration;
use model::time::after;

/// Where the reconciler's time comes from.
pub trait Clock: Send {
    /// The time of the next iteration.
    fn now(&mut self) -> Timestamp;
}

/// The wall clock, in whole seconds.
#[derive(Debug, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&mut self) -> Timestamp {
        whole_seconds(chrono::Utc::now())
    }
}

fn whole_seconds(t: Timestamp) -> Timestamp {
    chrono::DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t)
}

/// The simulator's clock: starts at `start` and runs `speed` times faster
/// than the wall clock, or moves by a fixed `step` per iteration.
#[derive(Debug)]
pub struct SimClock {
    start: Timestamp,
    started: Instant,
    speed: f64,
    step: Option<Duration>,
    ticks: u32,
}

impl SimClock {
    /// A clock that reads `start` at its first iteration.
    pub fn new(start: Timestamp, speed: f64, step: Option<Duration>) -> Self {
        SimClock {
            start,
            started: Instant::now(),
            speed,
            step,
            ticks: 0,
        }
    }
}

impl Clock for SimClock {
    fn now(&mut self) -> Timestamp {
        let ticks = self.ticks;
        self.ticks += 1;
        let elapsed_ms = match self.step {
            Some(step) => step.as_millis() as f64 * f64::from(ticks),
            None => self.started.elapsed().as_secs_f64() * 1000.0 * self.speed,
        };
        whole_seconds(after(self.start, Duration::from_millis(elapsed_ms as u64)))
    }
}

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct LoopOptions {
    /// Time between iterations when nothing wakes the loop.
    pub interval: std::time::Duration,
    /// Return after this many iterations (`--once` is 1); `None`: until a signal.
    pub iterations: Option<u32>,
    /// Where to serve metrics, health and the webhook (`None`: nowhere).
    pub listen: Option<SocketAddr>,
    /// The state directory (for `status.json`).
    pub state_dir: PathBuf,
    /// An iteration running longer than this is stuck: `/healthz` fails.
    pub deadline: std::time::Duration,
    /// After SIGTERM or Ctrl-C, how long an iteration under way may go on
    /// before the process exits anyway (as safe as a crash: see the state).
    pub shutdown_timeout: std::time::Duration,
    /// The webhook's HMAC secret (`X-Hub-Signature-256`); `None`: any call
    /// wakes the loop.
    pub webhook_secret: Option<Vec<u8>>,
}

/// The exit code of a process ended by SIGTERM, used when the shutdown
/// timeout passes with an iteration still running.
pub const EXIT_TERMINATED: i32 = 143;

/// What the loop tells its caller.
#[derive(Debug)]
pub enum LoopEvent<'a> {
    /// The HTTP endpoint is up.
    Listening(SocketAddr),
    /// The HTTP endpoint could not start (the loop runs without it).
    NotListening(SocketAddr, std::io::Error),
    /// An iteration finished.
    Iterated {
        /// What it did.
        iteration: &'a Iteration,
        /// The status after it.
        status: &'a Status,
    },
    /// An iteration failed as a whole; the loop goes on.
    Failed(&'a ReconcileError),
    /// A webhook woke the loop.
    Woken,
}

/// Why the loop could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The only iteration of `--once` failed.
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
}

/// The first wait after a transient failure; it doubles up to the interval.
const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the loop waits after an iteration: the interval, or a backoff
/// after a transient failure (`failures` in a row).
pub fn next_wait(
    interval: std::time::Duration,
    failures: u32,
    retry_after: Option<std::time::Duration>,
) -> std::time::Duration {
    if failures == 0 {
        return interval;
    }
    let backoff = FIRST_BACKOFF.saturating_mul(1u32 << (failures - 1).min(16));
    retry_after.unwrap_or(backoff).min(interval)
}

/// What the HTTP handlers share with the loop.
#[derive(Debug, Default)]
pub struct Shared {
    /// The metrics.
    pub metrics: Metrics,
    /// The status after the last iteration.
    pub status: Mutex<Option<Status>>,
    /// The dashboard's view after the last iteration that changed it (its
    /// time: [`Shared::view_time`]; see [`Shared::current_view`]).
    pub view: Mutex<Option<Arc<dashboard::FleetView>>>,
    /// The time of the last iteration as the view shows it, when it is not
    /// that of [`Shared::view`].
    pub view_time: Mutex<Option<String>>,
    /// What the loop wrote after the last iteration, for the next one to
    /// rewrite only its times when nothing else changed.
    pub recorded: crate::recorded::Recorded,
    /// Wakes the loop (webhook).
    pub wake: Notify,
    /// When the iteration under way started (`None` between iterations).
    pub iteration_started: Mutex<Option<Instant>>,
    /// The loop's iteration deadline ([`LoopOptions::deadline`]).
    pub deadline: Mutex<Option<std::time::Duration>>,
    /// A shutdown was asked for; the loop stops after the iteration.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Wakes the loop to stop.
    pub stop: Notify,
    /// How often the webhook may wake the loop.
    pub webhook_limit: RateLimit,
    /// The webhook's HMAC secret; `None`: calls are not authenticated.
    pub webhook_secret: Mutex<Option<Vec<u8>>>,
    /// The dashboard's expected starts, kept while nothing they depend on
    /// changes.
    pub starts: crate::starts::StartsCache,
    /// The loop's state directory: the dashboard shows the charts in its
    /// `simulation/` folder ([`crate::charts`]).
    pub state_dir: Option<PathBuf>,
    /// The history pages of a Git fleet (set after each iteration).
    pub history: HistoryPages,
}

/// The dashboard's history pages: where commits are read (a Git fleet
/// only) and the last page shown (a commit's history never changes).
#[derive(Debug, Default)]
pub struct HistoryPages {
    /// The repository; `None`: not a Git fleet, no history links.
    pub repo: Mutex<Option<HistoryRepo>>,
    last: Mutex<Option<(String, Arc<String>)>>,
    /// One walk at a time: a burst of requests waits instead of walking
    /// the repository once each.
    walking: tokio::sync::Mutex<()>,
}

impl HistoryPages {
    /// History pages read from `repo`.
    pub fn new(repo: Option<HistoryRepo>) -> Self {
        Self {
            repo: Mutex::new(repo),
            ..Self::default()
        }
    }

    /// Whether the pages exist (the dashboard links to them).
    pub fn available(&self) -> bool {
        self.repo.lock().ok().is_some_and(|r| r.is_some())
    }

    /// `/history?rev=ID`: the page, 400 for a revision that is not a
    /// commit id, 404 without a Git fleet or for an unknown commit.
    async fn respond(&self, uri: &axum::http::Uri) -> Response {
        let Some(repo) = self.repo.lock().ok().and_then(|r| r.clone()) else {
            return (
                StatusCode::NOT_FOUND,
                "no history: the fleet is not a Git repository\n",
            )
                .into_response();
        };
        let rev = uri
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("rev="))
            .unwrap_or("")
            .to_string();
        if !is_commit_id(&rev) {
            return (
                StatusCode::BAD_REQUEST,
                format!("{}\n", HistoryPageError::NotACommit(rev)),
            )
                .into_response();
        }
        let _walking = self.walking.lock().await;
        let cached = self.last.lock().ok().and_then(|l| {
            l.as_ref()
                .filter(|(r, _)| *r == rev)
                .map(|(_, p)| p.clone())
        });
        let page = match cached {
            Some(page) => page,
            None => {
                let asked = rev.clone();
                let walked = tokio::task::spawn_blocking(move || history_view(&repo, &asked)).await;
                match walked {
                    Ok(Ok(view)) => {
                        let page = Arc::new(dashboard::render_history(&view));
                        if let Ok(mut last) = self.last.lock() {
                            *last = Some((rev, page.clone()));
                        }
                        page
                    }
                    Ok(Err(e)) => {
                        return (StatusCode::NOT_FOUND, format!("{e}\n")).into_response();
                    }
                    Err(e) => {
                        return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"))
                            .into_response();
                    }
                }
            }
        };
        (html_headers(), page.as_str().to_string()).into_response()
    }
}

impl Shared {
    /// The dashboard's view after the last iteration, with its time.
    pub fn current_view(&self) -> Option<Arc<dashboard::FleetView>> {
        let view = self.view.lock().ok().and_then(|v| v.clone())?;
        let time = self.view_time.lock().ok().and_then(|t| t.clone());
        Some(match time {
            Some(time) if time != view.time => Arc::new(dashboard::FleetView {
                time,
                ..dashboard::FleetView::clone(&view)
            }),
            _ => view,
        })
    }

    /// How long the iteration under way has run, if one is.
    pub fn running_for(&self) -> Option<std::time::Duration> {
        self.iteration_started
            .lock()
            .ok()
            .and_then(|started| started.map(|s| s.elapsed()))
    }

    /// The iteration under way has run past the deadline: by how much time.
    pub fn stuck_for(&self) -> Option<(std::time::Duration, std::time::Duration)> {
        let deadline = self.deadline.lock().ok().and_then(|d| *d)?;
        let running = self.running_for()?;
        (running > deadline).then_some((running, deadline))
    }

    fn set_running(&self, started: Option<Instant>) {
        if let Ok(mut slot) = self.iteration_started.lock() {
            *slot = started;
        }
    }
}

/// Runs one iteration and records its status (file, metrics).
pub async fn iterate_and_record<E: Executor>(
    reconciler: &mut Reconciler<E>,
    now: Timestamp,
    shared: &Shared,
    state_dir: &std::path::Path,
) -> Result<(Iteration, Status), ReconcileError> {
    let started = Instant::now();
    let result = reconciler.iterate(now).await;
    let iteration = match result {
        Ok(iteration) => iteration,
        Err(e) => {
            if !e.is_following() {
                shared.metrics.record_error();
            }
            return Err(e);
        }
    };
    let status = record(reconciler, &iteration, started, shared, state_dir)?;
    tracing::info!(
        revision = iteration
            .revision
            .as_ref()
            .map(|r| r.id.as_str())
            .unwrap_or(""),
        refused = iteration
            .refused
            .as_ref()
            .map(|(r, _)| r.id.as_str())
            .unwrap_or(""),
        actions = iteration.executed.len(),
        events = iteration.events.len(),
        recovered = iteration.recovered,
        running = status.jobs.get("running").copied().unwrap_or(0),
        pending = status.jobs.get("pending").copied().unwrap_or(0),
        gpus_allocated = status.gpus.allocated,
        gpus_total = status.gpus.total,
        duration_ms = status.last_iteration.duration_ms,
        "reconciled"
    );
    Ok((iteration, status))
}

/// Writes the status and the dashboard's view after `iteration` and
/// updates the metrics. After an iteration that changed nothing they are
/// built from ([`crate::recorded`]), only what depends on its time is
/// written again.
pub fn record<E: Executor>(
    reconciler: &Reconciler<E>,
    iteration: &Iteration,
    started: Instant,
    shared: &Shared,
    state_dir: &std::path::Path,
) -> Result<Status, ReconcileError> {
    let seconds = started.elapsed().as_secs_f64();
    let revisions = reconciler.store().revisions()?;
    let audit: Vec<_> = reconciler
        .store()
        .audit_tail(AUDIT_TAIL)?
        .into_iter()
        .map(|(_, entry)| entry)
        .collect();
    let key = RecordKey {
        executor: reconciler.executor_name().to_string(),
        revision: iteration.revision.as_ref().map(|r| r.id.clone()),
        fleet: reconciler.fleet().map(|f| std::ptr::from_ref(f) as usize),
        plan: iteration.plan.as_ref().map(Arc::downgrade),
        planned_from: iteration.planned_from.clone(),
        nodes: iteration.nodes.clone(),
        job_writes: reconciler.store().job_writes(),
        revisions,
        audit,
        starts: shared.starts.ready(),
    };
    shared.metrics.record_iteration(iteration, seconds);
    if shared.recorded.starts_since(&key) {
        // Expected starts computed off the loop since: the last view with
        // them, if they are this iteration's.
        let view = shared.view.lock().ok().and_then(|v| v.clone());
        let with = view
            .zip(expected_starts(reconciler, iteration, shared))
            .map(|(view, starts)| {
                let mut view = dashboard::FleetView::clone(&view);
                view.time = crate::view::view_time(iteration.time);
                for pending in &mut view.pending {
                    pending.expected_start = starts.get(&pending.job).cloned();
                }
                view
            });
        shared.recorded.set_starts(&key, with.as_ref());
        if let Some(view) = with {
            publish_view(shared, Arc::new(view));
        }
    }
    let summary = IterationSummary::of(iteration, seconds * 1000.0);
    if let Some(again) = shared
        .recorded
        .again(&key, iteration.time, summary, state_dir)
    {
        if again.observed_to_build {
            let records = reconciler.job_records()?;
            write_observed(reconciler, iteration, &records, state_dir);
        }
        let time = crate::view::view_time(iteration.time);
        publish(shared, &again.status, None, Some(time));
        return Ok(again.status);
    }
    let status = record_all(reconciler, iteration, key, seconds, shared, state_dir)?;
    Ok(status)
}

/// [`record`] of everything: builds the view, the status, `observed.json`
/// and the fleet's gauges, writes them and keeps them for the next
/// iteration.
fn record_all<E: Executor>(
    reconciler: &Reconciler<E>,
    iteration: &Iteration,
    key: RecordKey,
    seconds: f64,
    shared: &Shared,
    state_dir: &std::path::Path,
) -> Result<Status, ReconcileError> {
    // The files of the last iterations first: these replace them.
    shared.recorded.flush();
    // Those the reconciler keeps in memory: no read of every record.
    let records = reconciler.job_records()?;
    let starts = expected_starts(reconciler, iteration, shared).unwrap_or_default();
    let input = ViewInput {
        time: iteration.time,
        executor: reconciler.executor_name(),
        fleet: reconciler.fleet(),
        plan: iteration.plan.as_deref(),
        nodes: &iteration.nodes,
        records: &records,
        revisions: &key.revisions,
        audit: &key.audit,
        starts: &starts,
    };
    // The view on a thread of its own beside the status and
    // `observed.json` (each built and written as in the loop; on a large
    // fleet each takes tenths of a second).
    let view_part = || {
        let view = fleet_view(&input);
        let text = written(
            crate::view::to_json(&view),
            state_dir,
            crate::view::VIEW_FILE,
        );
        (view, text)
    };
    let rest = || {
        let status = Status::new(
            iteration,
            reconciler.executor_name(),
            key.revisions.clone(),
            &records,
            seconds * 1000.0,
        );
        let status_text = written(status.to_json(), state_dir, crate::status::STATUS_FILE);
        let observed_text = write_observed(reconciler, iteration, &records, state_dir);
        (status, status_text, observed_text)
    };
    let ((view, view_text), (status, status_text, observed_text)) = std::thread::scope(|s| {
        match std::thread::Builder::new().spawn_scoped(s, view_part) {
            Ok(viewing) => {
                let rest = rest();
                match viewing.join() {
                    Ok(view) => (view, rest),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            // No thread to be had: one after the other.
            Err(_) => (view_part(), rest()),
        }
    });
    // A finished job recorded without an end time ends "now" in it.
    let observed_timeless = records
        .values()
        .all(|r| !r.phase.is_final() || r.finished.is_some());
    shared.metrics.record_state(iteration, &records, &view);
    shared.recorded.keep(
        key,
        &view,
        &status,
        Written {
            view: view_text.as_deref(),
            status: status_text.as_deref(),
            observed: observed_text.as_deref(),
            observed_timeless,
        },
    );
    publish(shared, &status, Some(Arc::new(view)), None);
    Ok(status)
}

/// The expected starts of the iteration's pending jobs; `None` while a
/// thread computes them ([`crate::starts::StartsCache::starts_or_later`]).
fn expected_starts<E: Executor>(
    reconciler: &Reconciler<E>,
    iteration: &Iteration,
    shared: &Shared,
) -> Option<BTreeMap<String, dashboard::view::StartView>> {
    match (reconciler.fleet_shared(), &iteration.plan) {
        (Some(fleet), Some(plan)) if !plan.pending.is_empty() => shared.starts.starts_or_later(
            fleet,
            &iteration.planned_from,
            &iteration.nodes,
            plan,
            iteration.time,
            iteration.revision.as_ref().map(|r| r.id.as_str()),
            iteration.plan_seconds,
        ),
        _ => Some(BTreeMap::new()),
    }
}

/// Writes `text` (and a newline) to `dir/file`; the text when written.
fn written(text: std::io::Result<String>, dir: &std::path::Path, file: &str) -> Option<String> {
    let written = text.and_then(|text| {
        crate::recorded::write_pieces(dir, file, &[&text, "\n"])?;
        Ok(text)
    });
    match written {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::warn!(error = %e, "cannot write {file}");
            None
        }
    }
}

/// Builds and writes `observed.json` (none before a fleet is in force);
/// its text when written.
fn write_observed<E: Executor>(
    reconciler: &Reconciler<E>,
    iteration: &Iteration,
    records: &BTreeMap<String, crate::state::JobRecord>,
    state_dir: &std::path::Path,
) -> Option<String> {
    let live = reconciler.live_observed(iteration.time, records, iteration.nodes.to_vec())?;
    written(
        crate::live::to_json(&live),
        state_dir,
        crate::live::OBSERVED_FILE,
    )
}

/// Shows `status`, and `view` or the view's new time, to the HTTP handlers.
fn publish(
    shared: &Shared,
    status: &Status,
    view: Option<Arc<dashboard::FleetView>>,
    time: Option<String>,
) {
    if let Ok(mut slot) = shared.status.lock() {
        *slot = Some(status.clone());
    }
    if let Some(view) = view {
        publish_view(shared, view);
    }
    if let Ok(mut slot) = shared.view_time.lock() {
        *slot = time;
    }
}

/// Shows `view` to the HTTP handlers.
fn publish_view(shared: &Shared, view: Arc<dashboard::FleetView>) {
    if let Ok(mut slot) = shared.view.lock() {
        *slot = Some(view);
    }
}

/// SIGTERM and SIGINT (Ctrl-C), caught from the moment this is created:
/// create it before anything slow happens (opening the state, the first
/// observation), so a signal during start-up is a clean shutdown, not a
/// death by the default handler.
#[derive(Debug)]
pub struct ShutdownSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    /// Starts catching the signals; call it inside the runtime
    /// (`Runtime::enter` or `block_on`).
    pub fn listen() -> ShutdownSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            ShutdownSignals {
                term: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            ShutdownSignals {}
        }
    }

    /// Waits for the first signal caught since [`ShutdownSignals::listen`].
    async fn recv(mut self) {
        #[cfg(unix)]
        {
            let term = async {
                match self.term.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let interrupt = async {
                match self.interrupt.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = term => {}
                _ = interrupt => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Runs the loop until a signal (or after one iteration with `once`);
/// however it stops, the executor then releases what it holds
/// ([`Reconciler::release`]: the kube executor's Lease).
pub async fn run_loop<E: Executor>(
    mut reconciler: Reconciler<E>,
    clock: Box<dyn Clock>,
    options: LoopOptions,
    signals: ShutdownSignals,
    observer: impl FnMut(LoopEvent<'_>),
) -> Result<(), RunError> {
    let result = loop_until_stopped(&mut reconciler, clock, options, signals, observer).await;
    reconciler.release().await;
    result
}

async fn loop_until_stopped<E: Executor>(
    reconciler: &mut Reconciler<E>,
    mut clock: Box<dyn Clock>,
    options: LoopOptions,
    signals: ShutdownSignals,
    mut observer: impl FnMut(LoopEvent<'_>),
) -> Result<(), RunError> {
    let shared = Arc::new(Shared {
        state_dir: Some(options.state_dir.clone()),
        ..Shared::default()
    });
    if let Ok(mut deadline) = shared.deadline.lock() {
        *deadline = Some(options.deadline);
    }
    // A bounded run (`--once`, `--iterations N`) ends with complete files:
    // its expected starts are computed in the loop, not left to a thread
    // whose answer would come after the last iteration.
    if options.iterations.is_some() {
        shared.starts.compute_inline();
    }
    if let Ok(mut secret) = shared.webhook_secret.lock() {
        secret.clone_from(&options.webhook_secret);
    }
    tokio::spawn(watch_shutdown(
        signals,
        shared.clone(),
        options.shutdown_timeout,
    ));
    let once = options.iterations == Some(1);
    if let (Some(addr), false) = (options.listen, once) {
        // The endpoint is an aid, not the job: without it the loop goes on.
        match TcpListener::bind(addr).await {
            Ok(listener) => {
                let local = listener.local_addr().unwrap_or(addr);
                observer(LoopEvent::Listening(local));
                tokio::spawn(serve(listener, shared.clone()));
            }
            Err(e) => observer(LoopEvent::NotListening(addr, e)),
        }
    }
    let mut count = 0;
    let mut failures = 0u32;
    // A signal caught while the process started stops it before the first
    // iteration (the watcher runs on the other worker thread).
    tokio::task::yield_now().await;
    let result = async {
        loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        count += 1;
        let now = clock.now();
        shared.set_running(Some(Instant::now()));
        let result = iterate_and_record(reconciler, now, &shared, &options.state_dir).await;
        shared.set_running(None);
        if let Ok(mut repo) = shared.history.repo.lock() {
            *repo = reconciler.history_repo();
        }
        let mut retry_after = None;
        match &result {
            Ok((iteration, status)) => {
                let transient = iteration.executed.iter().any(|e| e.transient);
                failures = if transient { failures + 1 } else { 0 };
                observer(LoopEvent::Iterated { iteration, status });
            }
            Err(e) if e.is_following() => {
                // A standby replica: it waits for the Lease, no backoff.
                tracing::info!(reason = %e, "standing by");
                failures = 1;
                retry_after = e.retry_after();
                observer(LoopEvent::Failed(e));
            }
            Err(e) => {
                tracing::error!(error = %e, transient = e.is_transient(), "reconcile iteration failed");
                failures = if e.is_transient() { failures + 1 } else { 0 };
                retry_after = e.retry_after();
                observer(LoopEvent::Failed(e));
            }
        }
        if once {
            return result.map(|_| ()).map_err(RunError::from);
        }
        if options.iterations.is_some_and(|n| count >= n) || shared.stopping.load(Ordering::SeqCst)
        {
            return Ok(());
        }
        let wait = next_wait(options.interval, failures, retry_after);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.wake.notified() => observer(LoopEvent::Woken),
            _ = shared.stop.notified() => return Ok(()),
        }
        }
    }
    .await;
    // The last files written before the loop returns.
    shared.recorded.flush();
    result
}

/// Waits for SIGTERM or Ctrl-C: stops the loop between iterations at once;
/// an iteration under way may finish within `timeout`, after which the
/// process exits with [`EXIT_TERMINATED`]. That is as safe as a crash:
/// every action is an intent in the state before it is carried out, and is
/// carried out again on the next start.
async fn watch_shutdown(
    signals: ShutdownSignals,
    shared: Arc<Shared>,
    timeout: std::time::Duration,
) {
    signals.recv().await;
    shared.stopping.store(true, Ordering::SeqCst);
    // `notify_one` keeps a permit, so a loop not yet waiting still sees it.
    shared.stop.notify_one();
    if shared.running_for().is_none() {
        return;
    }
    tracing::info!(
        timeout_s = timeout.as_secs_f64(),
        "shutting down after the iteration under way"
    );
    tokio::time::sleep(timeout).await;
    if let Some(running) = shared.running_for() {
        tracing::error!(
            running_s = running.as_secs_f64(),
            "the iteration did not finish within the shutdown timeout; exiting"
        );
        std::process::exit(EXIT_TERMINATED);
    }
}

/// The HTTP endpoint's routes.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/charts/{file}", get(live_chart))
        .route("/history", get(live_history))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/status", get(status))
        .route("/hooks/git", post(hook))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_WEBHOOK_BODY))
        .with_state(shared)
}

/// Serves the routes on `listener` until the process ends, within the
/// limits of [`http_limits`](super::http_limits).
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let listener = LimitedListener::new(listener, MAX_CONNECTIONS, IDLE_TIMEOUT);
    if let Err(e) = axum::serve(listener, router(shared)).await {
        tracing::error!(error = %e, "HTTP endpoint stopped");
    }
}

/// The dashboard page (503 before the first iteration).
async fn page(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let view = shared.current_view();
    let extras = dashboard::Extras {
        charts: shared
            .state_dir
            .as_deref()
            .map(crate::charts::present)
            .unwrap_or_default(),
        history: shared.history.available(),
    };
    html_page(view.as_deref(), dashboard::Source::Live, &extras)
}

async fn live_history(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    shared.history.respond(&uri).await
}

/// A chart of the state directory's `simulation/` folder (404 otherwise).
async fn live_chart(
    State(shared): State<Arc<Shared>>,
    AxumPath(file): AxumPath<String>,
) -> Response {
    match &shared.state_dir {
        Some(dir) => chart(dir, &file),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Chart `file` of `state_dir` as an SVG response, or 404. The policy
/// keeps an SVG opened on its own from running a script.
fn chart(state_dir: &std::path::Path, file: &str) -> Response {
    match crate::charts::read(state_dir, file) {
        Some(svg) => (
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; sandbox",
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            svg,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such chart\n").into_response(),
    }
}

/// A dashboard page as a response: the page, or 503 with a short page
/// saying there is nothing to show yet. The page has no script and loads
/// nothing: the policy says so to the browser too.
pub fn html_page(
    view: Option<&dashboard::FleetView>,
    source: dashboard::Source,
    extras: &dashboard::Extras,
) -> impl IntoResponse + use<> {
    let headers = html_headers();
    match view {
        Some(view) => (StatusCode::OK, headers, dashboard::render(view, source, extras)),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            headers,
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gitfleet dashboard</title></head><body><main><h1>gitfleet</h1><p>No iteration yet: the dashboard appears after the first one.</p></main></body></html>\n".to_string(),
        ),
    }
}

/// The headers of the dashboard's pages: HTML that runs no script and
/// loads nothing but its own charts.
fn html_headers() -> [(header::HeaderName, &'static str); 3] {
    [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data: 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
        (header::CACHE_CONTROL, "no-store"),
    ]
}

/// Serves the dashboard of a stopped loop's state directory, read only
/// (`gitfleet serve`): `/` renders `dashboard.json` as it is at each
/// request, within the same connection limits as the loop's endpoint.
/// With `history` (a Git fleet's repository), revisions link to their
/// semantic history.
pub async fn serve_state(
    listener: TcpListener,
    state_dir: PathBuf,
    history: Option<HistoryRepo>,
) -> std::io::Result<()> {
    let listener = LimitedListener::new(listener, MAX_CONNECTIONS, IDLE_TIMEOUT);
    let app = Router::new()
        .route("/", get(state_page))
        .route("/charts/{file}", get(state_chart))
        .route("/history", get(state_history))
        .with_state(Arc::new(StoppedLoop {
            dir: state_dir,
            history: HistoryPages::new(history),
        }));
    axum::serve(listener, app).await
}

/// What `gitfleet serve` serves from.
struct StoppedLoop {
    dir: PathBuf,
    history: HistoryPages,
}

async fn state_page(State(stopped): State<Arc<StoppedLoop>>) -> impl IntoResponse {
    let view = crate::view::read(&stopped.dir).ok();
    let extras = dashboard::Extras {
        charts: crate::charts::present(&stopped.dir),
        history: stopped.history.available(),
    };
    html_page(view.as_ref(), dashboard::Source::Stopped, &extras)
}

async fn state_chart(
    State(stopped): State<Arc<StoppedLoop>>,
    AxumPath(file): AxumPath<String>,
) -> Response {
    chart(&stopped.dir, &file)
}

async fn state_history(State(stopped): State<Arc<StoppedLoop>>, uri: axum::http::Uri) -> Response {
    stopped.history.respond(&uri).await
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        shared.metrics.render(),
    )
}

/// `ok`, or 503 while an iteration has run past the loop's deadline (a
/// liveness probe then restarts the process; the revision that hangs it is
/// refused after three such restarts).
async fn healthz(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    match shared.stuck_for() {
        Some((running, deadline)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stuck: the iteration under way has run {}s, past the deadline of {}s\n",
                running.as_secs(),
                deadline.as_secs()
            ),
        ),
        None => (StatusCode::OK, "ok\n".to_string()),
    }
}

async fn status(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let body = shared.status.lock().ok().and_then(|s| {
        s.as_ref()
            .and_then(|s| serde_json::to_string_pretty(s).ok())
    });
    match body {
        Some(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text,
        ),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"error\":\"no iteration yet\"}".to_string(),
        ),
    }
}

/// Wakes the loop. With a secret, only a call signed with it
/// (`X-Hub-Signature-256`) does (401 otherwise); beyond the rate limit
/// (bursts of 5, then one a second) 429 with `Retry-After`, so a flood of
/// pushes cannot keep the loop busy.
async fn hook(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> impl IntoResponse {
    let secret = shared.webhook_secret.lock().ok().and_then(|s| s.clone());
    if let Some(secret) = secret {
        let signature = headers
            .get("x-hub-signature-256")
            .and_then(|v| v.to_str().ok());
        if !webhook_signature_ok(&secret, &body, signature) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::RETRY_AFTER, "0")],
                "missing or wrong X-Hub-Signature-256\n",
            );
        }
    }
    if !shared.webhook_limit.allow() {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "too many webhook calls; a reconcile is already scheduled\n",
        );
    }
    shared.wake.notify_one();
    (
        StatusCode::ACCEPTED,
        [(header::RETRY_AFTER, "0")],
        "reconcile scheduled\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

    #[tokio::test]
    async fn healthz_fails_while_an_iteration_runs_past_its_deadline() {
        let shared = Arc::new(Shared::default());
        *shared.deadline.lock().unwrap() = Some(std::time::Duration::from_secs(60));
        assert_eq!(healthz(State(shared.clone())).await.0, StatusCode::OK);

        let long_ago = Instant::now() - std::time::Duration::from_secs(90);
        shared.set_running(Some(long_ago));
        let (code, body) = healthz(State(shared.clone())).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.starts_with(
                "stuck: the iteration under way has run 90s, past the deadline of 60s"
            ),
            "{body}"
        );

        shared.set_running(Some(Instant::now()));
        assert_eq!(healthz(State(shared.clone())).await.0, StatusCode::OK);
        shared.set_running(None);
        assert_eq!(healthz(State(shared)).await.0, StatusCode::OK);
    }

    #[test]
    fn waits_the_interval_without_failures() {
        assert_eq!(next_wait(MINUTE, 0, None), MINUTE);
    }

    #[test]
    fn backs_off_doubling_up_to_the_interval() {
        let waits: Vec<u64> = (1..=8)
            .map(|n| next_wait(MINUTE, n, None).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(next_wait(MINUTE, u32::MAX, None), MINUTE);
    }

    #[test]
    fn a_retry_after_from_the_fleet_wins_below_the_interval() {
        let five = std::time::Duration::from_secs(5);
        assert_eq!(next_wait(MINUTE, 1, Some(five)), five);
        assert_eq!(next_wait(MINUTE, 1, Some(MINUTE * 2)), MINUTE);
    }
}
