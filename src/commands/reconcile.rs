//! `gitfleet reconcile` (the loop), and the setup it shares with `apply`:
//! the fleet source, the state, the executor and the clock.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::plan::Wording;
use reconciler::reconcile::prune::PrunePolicy;
use reconciler::reconcile::run::{Clock, LoopEvent, LoopOptions, ShutdownSignals, run_loop};
use reconciler::reconcile::signatures::SignaturePolicy;
use reconciler::reconcile::status::Status;
use reconciler::reconcile::{ActionResult, FleetSource, Iteration, Reconciler};
use reconciler::spec::Duration;
use reconciler::state::Store;

use super::args::DEFAULT_BRANCH;
use crate::executor::{AnyExecutor, ExecutorArgs, runtime};

/// Options shared by `reconcile` and `apply`.
#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// The fleet repository. Inside a Git repository the committed specs of
    /// --branch are applied (GitOps); elsewhere the directory as it is.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Follow this branch or revision (default: the repository's HEAD; `main`
    /// for --repo).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// Fetch the fleet from this remote repository (a path or file:// URL)
    /// into <state>/repo.git before every iteration; PATH is then the fleet's
    /// directory inside it.
    #[arg(long, value_name = "URL")]
    pub repo: Option<String>,
    /// Read PATH as a plain directory even inside a Git repository
    /// (uncommitted changes included).
    #[arg(long)]
    pub no_git: bool,
    /// The state directory (embedded database, status.json, logs).
    #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
    pub state: PathBuf,
    /// Prune protection: refuse a revision that removes more running jobs
    /// than this from Git.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_prune: usize,
    /// Prune protection: refuse a revision that removes more than this
    /// percentage of the running jobs (when more than one).
    #[arg(long, value_name = "PERCENT", default_value_t = 50.0)]
    pub max_prune_percent: f64,
    /// Apply only commits whose signature verifies (SSH against
    /// --allowed-signers, OpenPGP against --gpg-keyring), as Flux verifies
    /// commits; any other commit is refused as an invalid one is.
    #[arg(long)]
    pub require_signed: bool,
    /// The SSH keys allowed to sign (ssh-keygen's allowed-signers file:
    /// `principal key-type key` per line), kept outside the repository.
    #[arg(long, value_name = "FILE", requires = "require_signed")]
    pub allowed_signers: Option<PathBuf>,
    /// The OpenPGP keys allowed to sign: a file of exported public keys
    /// (`gpg --export`), or a GnuPG home directory; kept outside the repository.
    #[arg(long, value_name = "FILE|DIR", requires = "require_signed")]
    pub gpg_keyring: Option<PathBuf>,
    /// The executor and its own arguments.
    #[command(flatten)]
    pub exec: ExecutorArgs,
}

impl SourceArgs {
    /// The keys `--require-signed` accepts; `None` without it. Refused
    /// before anything is written: no keys, a key file that is missing, or
    /// specs that do not come from Git.
    fn signature_policy(&self, source: &FleetSource) -> Result<Option<SignaturePolicy>> {
        if !self.require_signed {
            return Ok(None);
        }
        if self.allowed_signers.is_none() && self.gpg_keyring.is_none() {
            return Err(miette!(
                "--require-signed needs the allowed keys: --allowed-signers FILE (SSH) and/or --gpg-keyring FILE|DIR (OpenPGP)"
            ));
        }
        for (flag, path) in [
            ("--allowed-signers", &self.allowed_signers),
            ("--gpg-keyring", &self.gpg_keyring),
        ] {
            if let Some(path) = path
                && !path.exists()
            {
                return Err(miette!(
                    "{flag} {}: no such file or directory",
                    path.display()
                ));
            }
        }
        if matches!(source, FleetSource::Dir { .. }) {
            return Err(miette!(
                "--require-signed: {} is not read from Git, so there is no commit signature to verify",
                self.path.display()
            ));
        }
        Ok(Some(SignaturePolicy {
            allowed_signers: self.allowed_signers.clone(),
            gpg_keyring: self.gpg_keyring.clone(),
        }))
    }
}

/// Arguments of `gitfleet reconcile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Time between iterations.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub interval: Duration,
    /// One iteration, then exit.
    #[arg(long, conflicts_with = "iterations")]
    pub once: bool,
    /// Exit after N iterations.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u32>,
    /// An iteration running longer than this makes /healthz fail (503).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub iteration_deadline: Duration,
    /// After SIGTERM/Ctrl-C, how long an iteration under way may finish
    /// before the process exits anyway (with 143; safe as a crash is).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub shutdown_timeout: Duration,
    /// A file holding the webhook's secret: POST /hooks/git then needs its
    /// HMAC in X-Hub-Signature-256, as GitHub and Gitea send it.
    #[arg(long, value_name = "FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Address for the dashboard (/), /metrics, /healthz, /status and POST
    /// /hooks/git; `off` for none.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// Log format on stderr (level from RUST_LOG; default warn for text,
    /// info for json: one `reconciled` record per iteration).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Logs go to stderr. Text logs default to `warn` (stdout already has a line
/// per iteration); JSON logs, meant for a log pipeline, to `info`.
fn init_logging(format: LogFormat) {
    let default = match format {
        LogFormat::Text => "warn",
        LogFormat::Json => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Everything an iteration needs, built from the arguments.
pub(super) struct Setup {
    pub(super) reconciler: Reconciler<AnyExecutor>,
    pub(super) clock: Box<dyn Clock>,
}

/// Builds the fleet source, the state, the executor and the clock.
pub(super) fn setup(args: &SourceArgs) -> Result<Setup> {
    let source = source_of(args)?;
    setup_from(args, source)
}

/// The bare mirror of a `--repo` inside the state directory.
pub const MIRROR_DIR: &str = "repo.git";

/// The fleet source the arguments name.
fn source_of(args: &SourceArgs) -> Result<FleetSource> {
    if args.repo.is_none() && !args.path.exists() {
        return Err(miette!(
            "{}: no such file or directory",
            args.path.display()
        ));
    }
    let source = if let Some(url) = &args.repo {
        FleetSource::Remote {
            url: url.clone(),
            mirror: args.state.join(MIRROR_DIR),
            branch: args
                .branch
                .clone()
                .unwrap_or_else(|| DEFAULT_BRANCH.to_string()),
            subdir: super::git::subdir_of(&args.path),
            repo: None,
        }
    } else if args.no_git {
        FleetSource::Dir {
            path: args.path.clone(),
        }
    } else {
        FleetSource::detect(&args.path, args.branch.as_deref())
    };
    if args.branch.is_some() && matches!(source, FleetSource::Dir { .. }) {
        return Err(miette!(
            "--branch: {} is not inside a Git repository",
            args.path.display()
        ));
    }
    Ok(source)
}

/// Opens the state and the executor for `source`.
pub(super) fn setup_from(args: &SourceArgs, source: FleetSource) -> Result<Setup> {
    // Refused before the state directory is created.
    args.exec.check()?;
    let signatures = args.signature_policy(&source)?;
    let store = Arc::new(
        Store::open(&args.state)
            .into_diagnostic()
            .wrap_err("cannot open the state")?,
    );
    let (executor, clock) = args.exec.open(&args.state, &store)?;
    let mut reconciler = Reconciler::new(source, store, executor).with_prune_policy(PrunePolicy {
        max_jobs: args.max_prune,
        max_share: (args.max_prune_percent / 100.0).clamp(0.0, 1.0),
        allow: false,
    });
    if let Some(policy) = signatures {
        reconciler = reconciler.with_signature_policy(policy);
    }
    Ok(Setup { reconciler, clock })
}

/// Runs `gitfleet reconcile`.
pub fn run(args: &Args) -> Result<ExitCode> {
    init_logging(args.log_format);
    let listen: Option<SocketAddr> =
        match args.listen.as_str() {
            "off" | "none" | "" => None,
            text => Some(text.parse().map_err(|e| {
                miette!("--listen {text:?}: not an address like 127.0.0.1:9464 ({e})")
            })?),
        };
    // Signals are caught from here on: a SIGTERM while the state opens is
    // a clean stop too.
    let runtime = runtime()?;
    let signals = {
        let _entered = runtime.enter();
        ShutdownSignals::listen()
    };
    let Setup { reconciler, clock } = setup(&args.source)?;
    let options = LoopOptions {
        interval: std::time::Duration::from_millis(args.interval.as_millis().max(100)),
        iterations: if args.once { Some(1) } else { args.iterations },
        deadline: std::time::Duration::from_millis(args.iteration_deadline.as_millis().max(1000)),
        shutdown_timeout: std::time::Duration::from_millis(args.shutdown_timeout.as_millis()),
        webhook_secret: match &args.webhook_secret_file {
            Some(path) => Some(read_secret(path)?),
            None => None,
        },
        listen,
        state_dir: args.source.state.clone(),
    };
    let terminal = std::io::stdout().is_terminal();
    // On a terminal a spinner says what the loop is doing between
    // iterations; elsewhere (CI, logs) only the lines are printed.
    let spinner = if terminal && !args.once {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed} since the last iteration)")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut failed = false;
    let mut standing_by = false;
    let result = runtime.block_on(run_loop(reconciler, clock, options, signals, |event| {
        spinner.suspend(|| match &event {
            LoopEvent::Listening(addr) => {
                println!("serving http://{addr}/ (dashboard), /metrics, /healthz, /status; POST /hooks/git to reconcile now");
            }
            LoopEvent::NotListening(addr, e) => {
                eprintln!("warning: no metrics endpoint: cannot listen on {addr} ({e}); use --listen ADDR");
            }
            LoopEvent::Iterated { iteration, status } => {
                print_iteration(iteration, status);
                failed = iteration.refused.is_some();
                standing_by = false;
            }
            // Another replica leads: said once, not at every try.
            LoopEvent::Failed(error) if error.is_following() => {
                if !standing_by {
                    eprintln!("standing by: {error}");
                }
                standing_by = true;
            }
            LoopEvent::Failed(error) => eprintln!("error: {error}"),
            LoopEvent::Woken => tracing::info!("webhook: reconciling now"),
        });
        if let LoopEvent::Iterated { status, .. } = &event {
            spinner.set_message(format!(
                "watching {}: {} running, {} pending",
                args.source.path.display(),
                status.jobs.get("running").copied().unwrap_or(0),
                status.jobs.get("pending").copied().unwrap_or(0)
            ));
            spinner.reset_elapsed();
        }
    }));
    spinner.finish_and_clear();
    result.into_diagnostic()?;
    // `--once` on a refused revision exits 1, so CI notices.
    Ok(if args.once && failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// One line per iteration (every iteration, on a terminal or not: a
/// quiet iteration's line is what says the loop is alive), after a line per
/// action and event.
fn print_iteration(iteration: &Iteration, status: &Status) {
    let time = iteration
        .time
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if let Some((revision, diagnostics)) = &iteration.refused {
        if diagnostics.is_empty() {
            println!(
                "{time} revision {} still refused; keeping the last applied revision",
                revision.short()
            );
        } else {
            println!(
                "{time} revision {} refused: {} error{}; keeping the last applied revision",
                revision.short(),
                diagnostics.len(),
                if diagnostics.len() == 1 { "" } else { "s" }
            );
            for d in diagnostics.iter().take(10) {
                println!("  {d}");
            }
        }
    }
    for event in &iteration.events {
        match event {
            reconciler::exec::Event::Exited { job, exit_code, .. } => match exit_code {
                Some(0) => println!("{time}   {job} succeeded"),
                Some(code) => println!("{time}   {job} failed (exit code {code})"),
                None => println!("{time}   {job} ended (exit code unknown)"),
            },
            reconciler::exec::Event::Stopped { job, .. } => println!("{time}   {job} stopped"),
        }
    }
    for done in &iteration.executed {
        let subject = done.action.describe(Wording::Subject);
        match &done.result {
            ActionResult::Applied(_) => println!("{time}   {} {subject}", done.action.kind()),
            ActionResult::Failed(e) => {
                println!("{time}   {} {subject} FAILED: {e}", done.action.kind())
            }
            ActionResult::AlreadyUnderway => {}
        }
    }
    let revision = iteration
        .revision
        .as_ref()
        .map(|r| r.short().to_string())
        .unwrap_or_else(|| "none".to_string());
    let pending = status.jobs.get("pending").copied().unwrap_or(0);
    let running = status.jobs.get("running").copied().unwrap_or(0);
    let done = status.jobs.get("succeeded").copied().unwrap_or(0);
    let line = format!(
        "{time} rev {revision} · {running} running, {pending} pending, {done} done · {}/{} GPUs ({}%) · {} ms",
        status.gpus.allocated,
        status.gpus.total,
        status.gpus.utilization_percent,
        status.last_iteration.duration_ms
    );
    println!("{line}");
}

/// The webhook secret in `path`, without a trailing newline; an empty or
/// unreadable file is an error (an empty secret would verify anything).
fn read_secret(path: &std::path::Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path)
        .into_diagnostic()
        .wrap_err_with(|| format!("--webhook-secret-file {}", path.display()))?;
    let secret = bytes.trim_ascii_end().to_vec();
    if secret.is_empty() {
        return Err(miette!(
            "--webhook-secret-file {}: the file is empty",
            path.display()
        ));
    }
    Ok(secret)
}
