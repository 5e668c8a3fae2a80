//! Argument groups shared by several commands, flattened into their `Args`
//! with `#[command(flatten)]`. A command whose help says something more
//! precise about an argument rewords it with `mut_arg` on its own `Args`.

use std::path::PathBuf;

use crate::render::OutputFormat;

/// `--rev` is listed after a command's own options (as `plan` always listed
/// it); an option meant to follow it takes [`AFTER_REV`].
const REV_ORDER: usize = 100;

/// The display order of an option listed right after `--rev`.
pub const AFTER_REV: usize = REV_ORDER + 1;

/// The specs: a fleet repository on disk, or its files at a Git revision.
#[derive(Debug, Clone, clap::Args)]
pub struct SpecArgs {
    /// The fleet repository (a directory or a single YAML file).
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Read the specs from this Git revision instead of the files on
    /// disk; PATH may be a subdirectory of the repository, a bare
    /// repository or a worktree.
    #[arg(long, value_name = "REV", display_order = REV_ORDER)]
    pub rev: Option<String>,
    /// Read the specs from this remote repository (a path or file:// URL)
    /// instead, fetched into a temporary mirror: PATH is the fleet's
    /// directory inside it and --rev one of its branches (default `main`),
    /// as `reconcile --repo` reads it.
    #[arg(long, value_name = "URL", display_order = AFTER_REV)]
    pub repo: Option<String>,
}

impl SpecArgs {
    /// The revision to read: `--rev`, or `main` of a `--repo`; `None` reads
    /// the files on disk.
    pub fn revision(&self) -> Option<&str> {
        match (&self.rev, &self.repo) {
            (Some(rev), _) => Some(rev),
            (None, Some(_)) => Some(DEFAULT_BRANCH),
            (None, None) => None,
        }
    }
}

/// The branch of a `--repo` read when no `--rev` (or `--branch`) names one.
pub const DEFAULT_BRANCH: &str = "main";

/// The observed state of the fleet.
#[derive(Debug, Clone, clap::Args)]
pub struct ObservedArgs {
    /// Observed state (YAML or JSON); without it the inventory is derived from the pools.
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
    /// Plan against the live state a reconciler keeps in this state
    /// directory (its `observed.json`: job records and nodes as last observed).
    #[arg(long, value_name = "DIR", conflicts_with = "observed")]
    pub state: Option<PathBuf>,
}

impl ObservedArgs {
    /// The observed-state file to read: `--observed`, or the live state of `--state`.
    pub fn file(&self) -> Option<PathBuf> {
        match (&self.observed, &self.state) {
            (Some(file), _) => Some(file.clone()),
            (None, Some(dir)) => Some(dir.join(reconciler::reconcile::live::OBSERVED_FILE)),
            (None, None) => None,
        }
    }
}

/// The decision time.
#[derive(Debug, Clone, clap::Args)]
pub struct TimeArgs {
    /// Decision time (RFC 3339); default: the observed state's time, else now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
}

/// Everything a plan is computed from: specs, observed state and time (see
/// `input::load`).
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    #[command(flatten)]
    pub specs: SpecArgs,
    #[command(flatten)]
    pub observed: ObservedArgs,
    #[command(flatten)]
    pub time: TimeArgs,
}

/// How the result is printed (see `render::emit`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

/// `-o` of a command without a Markdown form: `text` or `json`, so that
/// `-o markdown` is an error naming the values allowed, never a silent
/// fallback to text (use with `mut_arg("output", text_or_json)`).
pub fn text_or_json(arg: clap::Arg) -> clap::Arg {
    use clap::builder::TypedValueParser as _;
    arg.value_parser(
        clap::builder::PossibleValuesParser::new(["text", "json"])
            .try_map(|value: String| <OutputFormat as clap::ValueEnum>::from_str(&value, false)),
    )
    .help("Output format (text or json)")
}
