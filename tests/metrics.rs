//! The loop's HTTP endpoint: /metrics (checked by Prometheus's own
//! `promtool check metrics` when installed; CI installs it), /healthz,
//! /status, and POST /hooks/git waking the loop for a new commit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benches may stop at the first surprise

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

const FLEET: &str = r#"apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: p}
spec:
  gpu: {model: H100, count: 8}
  nvlink: full
  size: {min: 2, max: 2}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: normal}
spec: {value: 100, default: true}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: a}
spec: {quota: [{model: H100, guaranteed: 8, limit: 8}]}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a-1}
spec: {queue: a, gpusPerReplica: 6}
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: a-2}
spec: {queue: a, gpusPerReplica: 6}
"#;

fn git(args: &[&str], cwd: &Path) {
    let status = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    http_with(addr, method, path, "", "")
}

/// A request with extra header lines (each ending in `\r\n`) and a body.
fn http_with(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    if write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .is_err()
    {
        return (0, String::new());
    }
    let mut response = String::new();
    // A connection closed unanswered (over the connection cap) reads as code 0.
    let _ = stream.read_to_string(&mut response);
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

struct Loop {
    child: Child,
    addr: String,
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(repo: &Path, state: &Path) -> Loop {
    start_every(repo, state, "1h")
}

fn start_every(repo: &Path, state: &Path, interval: &str) -> Loop {
    start_with(repo, state, &["--interval", interval])
}

fn start_with(repo: &Path, state: &Path, extra: &[&str]) -> Loop {
    let mut child = Command::new(BIN)
        .args([
            "reconcile",
            repo.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .args(["--listen", "127.0.0.1:0", "--now", "2026-11-21T10:00:00Z"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next().expect("the loop prints its address").unwrap();
        if let Some(rest) = line.strip_prefix("serving http://") {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Loop { child, addr }
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_health_status_and_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    std::fs::write(repo.join("fleet.yaml"), FLEET).unwrap();
    git(&["add", "."], &repo);
    git(&["commit", "-q", "-m", "first"], &repo);
    let running = start(&repo, &dir.path().join("state"));
    let addr = running.addr.clone();

    assert_eq!(http(&addr, "GET", "/healthz"), (200, "ok\n".to_string()));
    wait_for("the first iteration", || {
        http(&addr, "GET", "/status").0 == 200
    });

    let (code, metrics) = http(&addr, "GET", "/metrics");
    assert_eq!(code, 200);
    for line in [
        "gitfleet_gpus{model=\"H100\",pool=\"p\"} 16",
        "gitfleet_gpus_allocated{model=\"H100\",pool=\"p\"} 6",
        "gitfleet_gpus_idle{model=\"H100\",pool=\"p\"} 10",
        "gitfleet_queue_pending_jobs{model=\"any\",priority_class=\"normal\",queue=\"a\"} 1",
        "gitfleet_queue_pending_gpus{model=\"any\",priority_class=\"normal\",queue=\"a\"} 6",
        "gitfleet_queue_used_gpus{model=\"H100\",queue=\"a\"} 6",
        "gitfleet_queue_limit_gpus{model=\"H100\",queue=\"a\"} 8",
        "gitfleet_pool_nodes{pool=\"p\"} 2",
        "gitfleet_plan_duration_seconds_count 1",
        "gitfleet_pending_jobs{reason=\"quota\"} 1",
        "gitfleet_jobs{phase=\"running\"} 1",
        "gitfleet_actions_total{type=\"place\"} 1",
        "gitfleet_gpu_fragmentation_ratio 0.2",
        "gitfleet_reconcile_duration_seconds_count 1",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    assert!(metrics.contains("gitfleet_applied_revision_info{revision=\""));
    promtool_check(&metrics);

    // A new commit, then the webhook: applied at once, not after the 1h interval.
    let more = FLEET.replace("guaranteed: 8, limit: 8", "guaranteed: 8, limit: 16");
    std::fs::write(repo.join("fleet.yaml"), more).unwrap();
    git(&["commit", "-q", "-am", "raise the limit"], &repo);
    assert_eq!(http(&addr, "POST", "/hooks/git").0, 202);
    wait_for("the webhook's iteration", || {
        http(&addr, "GET", "/metrics")
            .1
            .contains("gitfleet_jobs{phase=\"running\"} 2")
    });
    assert_eq!(http(&addr, "GET", "/nope").0, 404);
}

/// Runs `promtool check metrics` on the exposition; CI sets
/// GITFLEET_REQUIRE_PROMTOOL=1 after installing Debian's prometheus package.
fn promtool_check(metrics: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_PROMTOOL").is_none(),
            "promtool is required but not installed"
        );
        eprintln!("promtool not installed: skipping the exposition-format check");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn repo_with_fleet(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q", "-b", "main"], &repo);
    std::fs::write(repo.join("fleet.yaml"), FLEET).unwrap();
    git(&["add", "."], &repo);
    git(&["commit", "-q", "-m", "first"], &repo);
    repo
}

fn iterations(addr: &str) -> u64 {
    http(addr, "GET", "/metrics")
        .1
        .lines()
        .find_map(|l| l.strip_prefix("gitfleet_reconcile_duration_seconds_count "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn idle_connections_cannot_starve_the_endpoint_or_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_fleet(dir.path());
    let running = start_every(&repo, &dir.path().join("state"), "200ms");
    let addr = running.addr.clone();
    wait_for("the first iterations", || iterations(&addr) >= 2);
    let before = iterations(&addr);
    let saturated = Instant::now();

    // Far more idle connections than the cap: the ones beyond it are closed
    // at once, the others after the idle timeout.
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(idle.len() > 64, "only {} connections", idle.len());
    // Beyond the cap: closed at once, unanswered.
    let closed = |mut stream: &TcpStream, wait: Duration| {
        stream.set_read_timeout(Some(wait)).unwrap();
        match stream.read(&mut [0u8; 1]) {
            Ok(n) => n == 0,
            // A read timeout is not a close; a reset is.
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    };
    assert!(closed(idle.last().unwrap(), Duration::from_secs(5)));
    wait_for("the endpoint to answer again", || {
        http(&addr, "GET", "/healthz") == (200, "ok\n".to_string())
    });
    // The loop went on iterating (every 200 ms) while connections were held.
    let held = saturated.elapsed();
    let after = iterations(&addr);
    assert!(
        after >= before + (held.as_millis() / 1000) as u64,
        "{before} → {after} iterations in {held:?}"
    );
    // Within the cap, but idle: closed by the idle timeout.
    assert!(closed(&idle[0], Duration::from_secs(5)));
    drop(idle);
}

#[test]
fn the_webhook_is_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_fleet(dir.path());
    let running = start(&repo, &dir.path().join("state"));
    let codes: Vec<u16> = (0..20)
        .map(|_| http(&running.addr, "POST", "/hooks/git").0)
        .collect();
    assert_eq!(codes[..5], [202; 5], "{codes:?}");
    assert!(codes.contains(&429), "{codes:?}");
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(http(&running.addr, "POST", "/hooks/git").0, 202);
}

#[test]
fn a_webhook_secret_admits_only_signed_calls() {
    use hmac::{Hmac, Mac};
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_fleet(dir.path());
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let running = start_with(
        &repo,
        &dir.path().join("state"),
        &[
            "--interval",
            "1h",
            "--webhook-secret-file",
            secret.to_str().unwrap(),
        ],
    );
    let body = r#"{"ref":"refs/heads/main"}"#;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
    mac.update(body.as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let post = |headers: &str| http_with(&running.addr, "POST", "/hooks/git", headers, body).0;
    assert_eq!(post(""), 401, "unsigned");
    assert_eq!(post("X-Hub-Signature-256: sha256=00\r\n"), 401, "wrong");
    let wrong_key = format!("X-Hub-Signature-256: sha256={}\r\n", "ab".repeat(32));
    assert_eq!(post(&wrong_key), 401, "wrong key");
    assert_eq!(post(&format!("X-Hub-Signature-256: sha256={hex}\r\n")), 202);
}

#[test]
fn the_endpoint_listens_on_loopback_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_fleet(dir.path());
    let help = Command::new(BIN)
        .args(["reconcile", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1:9464]"), "{help}");
    // Without --listen: 127.0.0.1:9464, served or (when taken) named.
    let out = Command::new(BIN)
        .args(["reconcile", repo.to_str().unwrap(), "--state"])
        .arg(dir.path().join("state"))
        .args(["--iterations", "2", "--interval", "100ms"])
        .args(["--now", "2026-11-21T10:00:00Z"])
        .output()
        .unwrap();
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("serving http://127.0.0.1:9464/")
            || shown.contains("cannot listen on 127.0.0.1:9464"),
        "{shown}"
    );
    assert!(!shown.contains("0.0.0.0"), "{shown}");
}

/// A copy of examples/fleet in `dir` with tests/fixtures/waiting-jobs.yaml
/// added, so that more jobs wait (one of them accepting two models).
fn example_fleet_with_waiting_jobs(dir: &Path) -> std::path::PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fleet = dir.join("fleet");
    copy(&root.join("examples/fleet"), &fleet);
    std::fs::copy(
        root.join("tests/fixtures/waiting-jobs.yaml"),
        fleet.join("jobs/waiting.yaml"),
    )
    .unwrap();
    fleet
}

/// One run of the loop on the example fleet with waiting jobs (sim
/// executor, one iteration served), shared by the tests below: its
/// `/metrics` and its `/` page.
fn example_scrape() -> &'static (String, String) {
    static SCRAPE: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    SCRAPE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let fleet = example_fleet_with_waiting_jobs(dir.path());
        let running = start_with(
            &fleet,
            &dir.path().join("state"),
            &["--interval", "1h", "--no-git"],
        );
        let addr = running.addr.clone();
        wait_for("the first iteration", || {
            http(&addr, "GET", "/status").0 == 200
        });
        let (code, metrics) = http(&addr, "GET", "/metrics");
        assert_eq!(code, 200);
        let (code, page) = http(&addr, "GET", "/");
        assert_eq!(code, 200, "{page}");
        (metrics, page)
    })
}

/// The value of the sample `series` (name and labels as exposed).
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_example_fleet_has_per_queue_and_per_pool_series() {
    let (metrics, _) = example_scrape();
    promtool_check(metrics);
    // Quotas as examples/fleet/queues.yaml declares them.
    let h100 = "model=\"H100-SXM-80GB\"";
    assert_eq!(
        sample(
            metrics,
            &format!("gitfleet_queue_guaranteed_gpus{{{h100},queue=\"org\"}}")
        ),
        768.0
    );
    assert_eq!(
        sample(
            metrics,
            &format!("gitfleet_queue_limit_gpus{{{h100},queue=\"org\"}}")
        ),
        832.0
    );
    assert_eq!(
        sample(
            metrics,
            &format!("gitfleet_queue_guaranteed_gpus{{{h100},queue=\"nlp\"}}")
        ),
        200.0
    );
    // A parent's use is its children's; borrowed is use above guaranteed.
    let used = |queue: &str| {
        sample(
            metrics,
            &format!("gitfleet_queue_used_gpus{{{h100},queue=\"{queue}\"}}"),
        )
    };
    let research = used("research");
    assert!(research > 0.0, "{metrics}");
    assert_eq!(research, used("nlp") + used("vision") + used("speech"));
    for queue in ["nlp", "vision", "speech", "research", "org"] {
        let guaranteed = sample(
            metrics,
            &format!("gitfleet_queue_guaranteed_gpus{{{h100},queue=\"{queue}\"}}"),
        );
        let borrowed = sample(
            metrics,
            &format!("gitfleet_queue_borrowed_gpus{{{h100},queue=\"{queue}\"}}"),
        );
        assert_eq!(borrowed, (used(queue) - guaranteed).max(0.0), "{queue}");
    }
    // Pending jobs and GPUs per queue add up to the plan's pending jobs.
    let total_of = |name: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter(|l| l.contains("queue=\"org\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let by_reason: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("gitfleet_pending_jobs{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(by_reason > 0.0, "the example fleet has pending jobs");
    assert_eq!(total_of("gitfleet_queue_pending_jobs"), by_reason);
    assert!(total_of("gitfleet_queue_pending_gpus") >= by_reason);
    // Pools: nodes and GPUs, the cloud pool present at zero.
    assert_eq!(
        sample(metrics, "gitfleet_pool_nodes{pool=\"h100-zone-a\"}"),
        48.0
    );
    assert_eq!(
        sample(metrics, "gitfleet_pool_nodes{pool=\"h100-cloud\"}"),
        0.0
    );
    assert_eq!(
        sample(metrics, "gitfleet_pool_nodes_healthy{pool=\"a100-infer\"}")
            + sample(metrics, "gitfleet_pool_nodes_drained{pool=\"a100-infer\"}"),
        29.0
    );
    assert_eq!(
        sample(
            metrics,
            "gitfleet_gpus_healthy{model=\"H100-SXM-80GB\",pool=\"h100-zone-b\"}"
        ) + sample(
            metrics,
            "gitfleet_gpus_unhealthy{model=\"H100-SXM-80GB\",pool=\"h100-zone-b\"}"
        ),
        384.0
    );
    // The engine's time, every action type from zero, every refusal reason.
    assert_eq!(sample(metrics, "gitfleet_plan_duration_seconds_count"), 1.0);
    assert!(sample(metrics, "gitfleet_actions_total{type=\"place\"}") > 0.0);
    assert_eq!(
        sample(metrics, "gitfleet_actions_total{type=\"cancel\"}"),
        0.0
    );
    for reason in ["invalid", "prune", "crashed", "signature"] {
        let series = format!("gitfleet_refused_revisions_total{{reason=\"{reason}\"}}");
        assert_eq!(sample(metrics, &series), 0.0);
    }
}

#[test]
fn the_loop_serves_the_dashboard_at_the_root() {
    let (_, page) = example_scrape();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    // Live: it refreshes itself; the waiting jobs with their reasons (the
    // example's speech-lm-pretrain and the fixture's three sweeps).
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"15\">"));
    assert!(page.contains("<h2 id=\"pending-h\">Pending jobs (4)</h2>"));
    for job in [
        "speech-lm-pretrain",
        "speech-sweep-a",
        "speech-sweep-b",
        "speech-sweep-c",
    ] {
        assert!(
            page.contains(&format!("<td><code>{job}</code></td>")),
            "{job}"
        );
    }
    assert!(page.contains("left under limit 128"));
    assert!(page.contains("<td>A100-SXM4-80GB|H100-SXM-80GB</td>"));
}

/// Metric names the exposition holds, with a histogram's `_bucket`,
/// `_sum` and `_count` series.
fn exposed_names(metrics: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        names.insert(name.to_string());
        if kind == "histogram" || kind == "summary" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
    }
    names
}

/// Every PromQL expression of the Grafana dashboard: panels' targets (rows
/// nest panels) and query variables.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    fn panels(list: &serde_json::Value, out: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.push(
                    target["expr"]
                        .as_str()
                        .expect("a target has expr")
                        .to_string(),
                );
            }
            panels(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            let query = var["query"]["query"].as_str().unwrap();
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map(|(metric, _)| metric)
                .expect("variables are label_values(METRIC, LABEL)");
            out.push(inner.to_string());
        }
    }
    out
}

/// The identifiers of `expr` outside quoted strings that name gitfleet metrics.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in expr.chars().chain([' ']) {
        if c == '"' {
            quoted = !quoted;
        }
        if !quoted && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            word.push(c);
        } else {
            if word.starts_with("gitfleet_") {
                names.push(std::mem::take(&mut word));
            }
            word.clear();
        }
    }
    names
}

#[test]
fn the_grafana_dashboard_queries_only_exposed_metrics() {
    let (metrics, _) = example_scrape();
    let exposed = exposed_names(metrics);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/gitfleet.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() > 20, "{queries:?}");
    let mut used = std::collections::BTreeSet::new();
    for expr in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{expr:?} names no gitfleet metric");
        for name in names {
            assert!(exposed.contains(&name), "{expr:?}: {name} is not exposed");
            used.insert(name);
        }
    }
    // The issue's panels: queues, pending, pools, plan time, actions, refusals.
    for name in [
        "gitfleet_queue_used_gpus",
        "gitfleet_queue_guaranteed_gpus",
        "gitfleet_queue_limit_gpus",
        "gitfleet_queue_borrowed_gpus",
        "gitfleet_queue_pending_jobs",
        "gitfleet_queue_pending_gpus",
        "gitfleet_pool_nodes",
        "gitfleet_gpus_healthy",
        "gitfleet_gpus_drained",
        "gitfleet_plan_duration_seconds_bucket",
        "gitfleet_actions_total",
        "gitfleet_refused_revisions_total",
    ] {
        assert!(used.contains(name), "no panel shows {name}");
    }
    promtool_check_queries(&queries);
}

/// Parses the dashboard's expressions with Prometheus's own parser
/// (`promtool check rules` on a rules file of them), Grafana's variables
/// replaced by what they stand for.
fn promtool_check_queries(queries: &[String]) {
    let mut rules = String::from("groups:\n  - name: grafana\n    rules:\n");
    for (i, expr) in queries.iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("\"$queue\"", "\".*\"")
            .replace("\"$model\"", "\".*\"")
            .replace("\"$pool\"", "\".*\"");
        assert!(!expr.contains('$'), "an unknown variable in {expr:?}");
        rules.push_str(&format!(
            "      - record: grafana:query{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, rules).unwrap();
    let out = match Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
    {
        Ok(out) => out,
        Err(_) => {
            assert!(
                std::env::var_os("GITFLEET_REQUIRE_PROMTOOL").is_none(),
                "promtool is required but not installed"
            );
            eprintln!("promtool not installed: skipping the PromQL syntax check");
            return;
        }
    };
    assert!(
        out.status.success(),
        "promtool check rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
