//! `gitfleet generate`: write a synthetic fleet repository and observed state
//! (for benchmarks and trying gitfleet at scale).

use std::path::Path;
use std::process::ExitCode;

use miette::{IntoDiagnostic, Result, WrapErr};
use reconciler::generate::{FleetSize, generate, settle};

use super::plan::resolve_now;

pub fn run(size: FleetSize, out: &Path, now: Option<&str>, settled: bool) -> Result<ExitCode> {
    let now = resolve_now(now, &Default::default())?;
    let mut generated = generate(size, now);
    if settled {
        settle(&mut generated, 2, now);
    }
    let repo = out.join("repo");
    for (path, text) in &generated.files {
        let file = repo.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .into_diagnostic()
                .wrap_err_with(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&file, text)
            .into_diagnostic()
            .wrap_err_with(|| format!("cannot write {}", file.display()))?;
    }
    let observed = out.join("observed.yaml");
    let text = serde_saphyr::to_string(&generated.observed).into_diagnostic()?;
    std::fs::write(&observed, text)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot write {}", observed.display()))?;
    let json = out.join("observed.json");
    let text = serde_json::to_string(&generated.observed).into_diagnostic()?;
    std::fs::write(&json, text)
        .into_diagnostic()
        .wrap_err_with(|| format!("cannot write {}", json.display()))?;
    println!(
        "wrote {} ({} files: {} nodes, {} jobs, {} running) and {} (also as JSON)",
        repo.display(),
        generated.files.len(),
        size.nodes,
        size.pending + size.running,
        generated.running,
        observed.display()
    );
    Ok(ExitCode::SUCCESS)
}
