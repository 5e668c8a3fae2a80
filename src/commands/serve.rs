//! `gitfleet serve --state DIR [--listen ADDR] [--fleet PATH]`: the dashboard of a stopped
//! reconcile loop, read only, from its state directory's `dashboard.json`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Result, miette};
use reconciler::reconcile::history_page::HistoryRepo;
use reconciler::reconcile::run::serve_state;
use reconciler::reconcile::view::VIEW_FILE;

use crate::executor::runtime;

/// Arguments of `gitfleet serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The state directory of a reconcile loop (or `apply`).
    #[arg(long, value_name = "DIR", default_value = ".gitfleet")]
    pub state: PathBuf,
    /// Where to serve the dashboard.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9465")]
    pub listen: String,
    /// The fleet, in a Git repository (a work tree, a directory in one, or
    /// a bare repository): revisions link to their semantic history.
    #[arg(long, value_name = "PATH")]
    pub fleet: Option<PathBuf>,
}

/// Runs `gitfleet serve` until Ctrl-C or SIGTERM.
pub fn run(args: &Args) -> Result<ExitCode> {
    let view = args.state.join(VIEW_FILE);
    if !view.is_file() {
        return Err(miette!(
            "no dashboard in {}: {} is missing (run `gitfleet reconcile` or `gitfleet apply` with --state {} first)",
            args.state.display(),
            view.display(),
            args.state.display()
        ));
    }
    let addr: SocketAddr = args.listen.parse().map_err(|e| {
        miette!(
            "--listen {:?}: not an address like 127.0.0.1:9465 ({e})",
            args.listen
        )
    })?;
    let history = match &args.fleet {
        Some(path) => Some(HistoryRepo::of(&super::git::open(path).map_err(|e| {
            miette!("--fleet {}: not in a Git repository: {e}", path.display())
        })?)),
        None => None,
    };
    let runtime = runtime()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| miette!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().unwrap_or(addr);
        println!(
            "serving http://{local}/ (the dashboard of {}, read only)",
            args.state.display()
        );
        tokio::select! {
            served = serve_state(listener, args.state.clone(), history) => {
                served.map_err(|e| miette!("serving the dashboard: {e}"))
            }
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
