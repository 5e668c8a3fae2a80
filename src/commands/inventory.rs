//! `gitfleet inventory [-o yaml|json] [--pool P] [--labels k=v…] [--model-map F] [--watch [--publish-node NODE]]`
//! and `gitfleet inventory merge A.yaml B.yaml … [-o yaml|json]`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use miette::{IntoDiagnostic, Result, WrapErr, miette};
use reconciler::inventory::model_map::ModelMap;
use reconciler::inventory::nvml::NvmlSource;
use reconciler::inventory::{
    CriticalEvent, DeviceSource, HostInventory, HostOptions, health, merge::merge, watch,
};
use reconciler::observed::{ObservedNode, ObservedState, Timestamp};

/// How an observed-state document is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DocFormat {
    /// YAML, ready to commit.
    Yaml,
    /// JSON.
    Json,
}

/// `gitfleet inventory`: this host through NVML, as an observed-state document.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<InventoryCommand>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub output: DocFormat,
    /// The node name; default: this host's name.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The NodePool this host belongs to.
    #[arg(long, value_name = "NAME")]
    pub pool: Option<String>,
    /// Node labels, e.g. `--labels rack=r3 zone=a` (or comma-separated).
    #[arg(long, value_name = "K=V", num_args = 1.., value_delimiter = ',')]
    pub labels: Vec<String>,
    /// YAML mapping from NVML GPU names to model names, overriding the built-in table.
    #[arg(long, value_name = "FILE")]
    pub model_map: Option<PathBuf>,
    /// The GPU count this node should have (its pool's gpu.count): GPUs NVML
    /// does not find are listed as unhealthy ("missing").
    #[arg(long, value_name = "N")]
    pub expect_gpus: Option<u32>,
    /// Keep running: re-read every --interval and on NVML critical events
    /// (XID, double-bit ECC), printing changes.
    #[arg(long)]
    pub watch: bool,
    /// Time between reads with --watch, e.g. `10s`, `1m`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        requires = "watch"
    )]
    pub interval: String,
    /// With --watch: publish each read on this Kubernetes Node as the
    /// annotation `gitfleet.io/gpus` (the node agent; docs/kubernetes.md).
    #[arg(long, value_name = "NODE", requires = "watch")]
    pub publish_node: Option<String>,
}

/// Where each read goes besides the output (the node agent's Node).
#[cfg(feature = "kube")]
type Publisher = super::agent::Publisher;
/// Without the kube feature nothing is published.
#[cfg(not(feature = "kube"))]
enum Publisher {}

/// Subcommands of `gitfleet inventory`.
#[derive(Debug, clap::Subcommand)]
pub enum InventoryCommand {
    /// Merge per-host snapshots into one observed-state document.
    ///
    /// A node in two files, or a GPU UUID on two nodes, is an error.
    Merge {
        /// Observed-state files (YAML or JSON).
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "yaml")]
        output: DocFormat,
    },
}

pub fn run(args: &Args) -> Result<ExitCode> {
    if let Some(InventoryCommand::Merge { files, output }) = &args.command {
        return run_merge(files, *output);
    }
    let options = host_options(args)?;
    let interval = parse_interval(&args.interval)?;
    let publisher = publisher(args.publish_node.as_deref())?;
    let source = NvmlSource::open().map_err(|e| miette!("{e}"))?;
    let inventory = HostInventory { source, options };
    if args.watch {
        run_watch(&inventory, args.output, interval, publisher)
    } else {
        let host = inventory.node(&[]).map_err(|e| miette!("{e}"))?;
        for w in &host.warnings {
            eprintln!("warning: {w}");
        }
        print_doc(&snapshot(host.node), args.output)?;
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(feature = "kube")]
fn publisher(node: Option<&str>) -> Result<Option<Publisher>> {
    node.map(Publisher::connect).transpose()
}

#[cfg(not(feature = "kube"))]
fn publisher(node: Option<&str>) -> Result<Option<Publisher>> {
    match node {
        Some(_) => Err(miette!(
            "--publish-node: this gitfleet was built without the `kube` feature"
        )),
        None => Ok(None),
    }
}

/// Hands a read to the publisher, if any.
fn offer(publisher: &mut Option<Publisher>, node: &ObservedNode) {
    #[cfg(feature = "kube")]
    if let Some(p) = publisher {
        p.offer(node, now());
    }
    #[cfg(not(feature = "kube"))]
    let _ = (publisher, node);
}

fn host_options(args: &Args) -> Result<HostOptions> {
    let mut labels = BTreeMap::new();
    for pair in &args.labels {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(miette!(
                "--labels {pair:?}: expected KEY=VALUE, like rack=r3"
            ));
        };
        if k.trim().is_empty() {
            return Err(miette!("--labels {pair:?}: the key is empty"));
        }
        labels.insert(k.trim().to_string(), v.trim().to_string());
    }
    let model_map = match &args.model_map {
        None => ModelMap::builtin(),
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .into_diagnostic()
                .wrap_err_with(|| format!("cannot read {}", file.display()))?;
            ModelMap::parse(&file.display().to_string(), &text).map_err(|e| miette!("{e}"))?
        }
    };
    let node = match &args.node {
        Some(n) => n.clone(),
        None => hostname()?,
    };
    Ok(HostOptions {
        node,
        pool: args.pool.clone(),
        labels,
        model_map,
        expected_gpus: args.expect_gpus,
    })
}

fn parse_interval(text: &str) -> Result<Duration> {
    let d: reconciler::spec::Duration = text
        .parse()
        .map_err(|e| miette!("--interval {text:?}: {e}"))?;
    if d.as_millis() == 0 {
        return Err(miette!("--interval {text:?}: must be longer than 0s"));
    }
    Ok(Duration::from_millis(d.as_millis()))
}

/// This host's name, from the kernel.
fn hostname() -> Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes
    // at most that many and we read only up to the first NUL below.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(miette!("cannot read this host's name; pass --node NAME"));
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if name.is_empty() {
        return Err(miette!("this host has no name; pass --node NAME"));
    }
    Ok(name)
}

/// One node as an observed-state document, stamped with the time (whole seconds).
fn snapshot(node: ObservedNode) -> ObservedState {
    ObservedState {
        time: Some(now()),
        nodes: vec![node],
        ..Default::default()
    }
}

fn now() -> Timestamp {
    let now = chrono::Utc::now();
    chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now)
}

fn print_doc(state: &ObservedState, format: DocFormat) -> Result<()> {
    let text = match format {
        DocFormat::Yaml => serde_saphyr::to_string(state).into_diagnostic()?,
        DocFormat::Json => serde_json::to_string_pretty(state).into_diagnostic()? + "\n",
    };
    print!("{text}");
    Ok(())
}

/// Prints the document once, then one line per change (JSON lines with
/// `-o json`), re-reading every `interval` and whenever an event arrives.
fn run_watch<S: DeviceSource + Sync>(
    inventory: &HostInventory<S>,
    format: DocFormat,
    interval: Duration,
    mut publisher: Option<Publisher>,
) -> Result<ExitCode> {
    let mut events: Vec<CriticalEvent> = Vec::new();
    let first = inventory.node(&events).map_err(|e| miette!("{e}"))?;
    for w in &first.warnings {
        eprintln!("warning: {w}");
    }
    print_doc(&snapshot(first.node.clone()), format)?;
    offer(&mut publisher, &first.node);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<CriticalEvent>();
    std::thread::scope(|scope| {
        let stop = &stop;
        scope.spawn(move || {
            let mut sink = |e: CriticalEvent| {
                if tx.send(e).is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
            };
            if let Err(e) = inventory.source.watch_events(stop, &mut sink) {
                eprintln!("warning: {e}; re-reading every interval only");
            }
        });
        let result = watch_loop(
            inventory,
            format,
            interval,
            &rx,
            &mut events,
            first.node,
            &mut publisher,
        );
        stop.store(true, Ordering::Relaxed);
        result
    })
}

fn watch_loop<S: DeviceSource>(
    inventory: &HostInventory<S>,
    format: DocFormat,
    interval: Duration,
    rx: &mpsc::Receiver<CriticalEvent>,
    events: &mut Vec<CriticalEvent>,
    mut last: ObservedNode,
    publisher: &mut Option<Publisher>,
) -> Result<ExitCode> {
    let mut events_open = true;
    loop {
        if events_open {
            match rx.recv_timeout(interval) {
                Ok(e) => {
                    let what = format!("event: {}", health::describe_event(e.kind));
                    print_change(format, &last.name, e.gpu, &what)?;
                    events.push(e);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => events_open = false,
            }
        } else {
            std::thread::sleep(interval);
        }
        let host = inventory.node(events).map_err(|e| miette!("{e}"))?;
        for change in watch::changes(&last, &host.node) {
            print_change(format, &host.node.name, change.gpu, &change.what)?;
        }
        offer(publisher, &host.node);
        last = host.node;
    }
}

/// One change: a YAML comment line (so the output stays a valid document),
/// or a JSON line.
fn print_change(format: DocFormat, node: &str, gpu: Option<u32>, what: &str) -> Result<()> {
    let time = now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match format {
        DocFormat::Yaml => match gpu {
            Some(i) => println!("# {time} {node}: GPU {i}: {what}"),
            None => println!("# {time} {node}: {what}"),
        },
        DocFormat::Json => {
            let value = serde_json::json!({"time": time, "node": node, "gpu": gpu, "change": what});
            println!("{}", serde_json::to_string(&value).into_diagnostic()?);
        }
    }
    Ok(())
}

fn run_merge(files: &[PathBuf], format: DocFormat) -> Result<ExitCode> {
    let mut states = Vec::with_capacity(files.len());
    let mut invalid = false;
    for file in files {
        match super::input::read_observed(file)? {
            Some(state) => states.push((file.display().to_string(), state)),
            None => invalid = true,
        }
    }
    if invalid {
        return Ok(ExitCode::FAILURE);
    }
    let inputs: Vec<(&str, &ObservedState)> = states.iter().map(|(f, s)| (f.as_str(), s)).collect();
    match merge(&inputs) {
        Ok(state) => {
            print_doc(&state, format)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(conflicts) => {
            for c in &conflicts {
                eprintln!("error: {c}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
