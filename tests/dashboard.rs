//! The web dashboard in a real browser: `gitfleet reconcile` runs the
//! example fleet for a few simulated iterations, `gitfleet serve` serves
//! its state read only, and Debian's headless `chromium` loads the page:
//! DOM assertions on what it rendered, and a 1280×800 screenshot written to
//! `target/tmp/dashboard-1280x800.png` (a test artifact to look at).
//!
//! Skipped when chromium is missing, unless GITFLEET_REQUIRE_CHROMIUM is
//! set (scripts/test installs it and sets it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod git_support;

const BIN: &str = env!("CARGO_BIN_EXE_gitfleet");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()
            .filter(|s| s.success())
            .map(|_| PathBuf::from(name))
    });
    if found.is_none() {
        assert!(
            std::env::var_os("GITFLEET_REQUIRE_CHROMIUM").is_none(),
            "chromium is required (GITFLEET_REQUIRE_CHROMIUM) but not installed"
        );
        eprintln!("chromium not installed: skipping the browser test");
    }
    found
}

/// Runs headless chromium on `url` with `extra` arguments; its stdout.
fn browse(chromium: &Path, profile: &Path, url: &str, extra: &[&str]) -> String {
    let mut child = Killed(
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--window-size=1280,800",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdout = child.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "chromium {extra:?} failed: {status}");
            break;
        }
        assert!(Instant::now() < deadline, "chromium {extra:?} timed out");
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
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

#[test]
fn the_dashboard_renders_in_a_real_browser() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let fleet = example_fleet_with_waiting_jobs(dir.path());
    let out = Command::new(BIN)
        .arg("reconcile")
        .arg(&fleet)
        .args(["--no-git", "--listen", "off", "--state"])
        .arg(&state)
        .args(["--now", "2026-11-21T10:00:00Z", "--sim-step", "30m"])
        .args(["--interval", "10ms", "--iterations", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("dashboard.json")).unwrap())
            .unwrap();
    // A simulation's charts in the state's `simulation/` folder.
    let trace = dir.path().join("trace.csv");
    std::fs::write(
        &trace,
        "submit,queue,replicas,gpus_per_replica,duration\n0,nlp,2,8,3600\n60,vision,1,8,1800\n120,inference,1,1,600\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("simulate")
        .arg(&fleet)
        .arg("--trace")
        .arg(&trace)
        .arg("--plot")
        .arg(state.join("simulation"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (_served, url) = serve(&["--state".as_ref(), state.as_os_str()]);

    let dom = browse(
        &chromium,
        &dir.path().join("profile"),
        &url,
        &["--dump-dom"],
    );
    // Every section, reachable from the skip link and the contents.
    assert!(
        dom.contains("<a class=\"skip\" href=\"#main\">Skip to content</a>"),
        "{dom}"
    );
    assert!(dom.contains("<main id=\"main\""));
    for (id, heading) in [
        ("revisions", "Revisions"),
        ("queues", "Queues"),
        ("fleet", "Fleet map"),
        ("actions", "Action log"),
        ("simulation", "Simulation"),
    ] {
        assert!(dom.contains(&format!("href=\"#{id}\"")), "{id}");
        assert!(
            dom.contains(&format!("<h2 id=\"{id}-h\">{heading}</h2>")),
            "{heading}"
        );
    }
    assert!(dom.contains("<h2 id=\"pending-h\">Pending jobs ("));
    // The queue tree, the pools and their nodes, with colours for queues.
    for queue in ["org", "research", "nlp", "inference", "exploration"] {
        assert!(dom.contains(&format!("{queue}</span></th>")), "{queue}");
    }
    for pool in ["h100-zone-a", "h100-zone-b", "a100-infer", "h100-cloud"] {
        assert!(dom.contains(&format!("<h3>Pool {pool}</h3>")), "{pool}");
    }
    let pool = view["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "h100-zone-a")
        .unwrap();
    let node = pool["racks"][0]["nodes"][0]["name"].as_str().unwrap();
    assert!(
        dom.contains(&format!("<span class=\"name\">{node}</span>")),
        "{node}"
    );
    assert!(dom.contains("class=\"gpu\" style=\"background:"));
    // A pending job with its reason, as the view has it (HTML-escaped).
    let pending = &view["pending"][0];
    let reason = pending["reason"]
        .as_str()
        .expect("the example has pending jobs");
    let escaped = reason
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(dom.contains(&escaped), "no {escaped:?} in the page");
    assert!(dom.contains(pending["job"].as_str().unwrap()));
    // Its expected start (the whatif crate's, as `explain` words it).
    assert!(dom.contains("<th scope=\"col\">Expected start</th>"));
    let start = pending["expectedStart"]["text"]
        .as_str()
        .expect("the first pending job has an expected start");
    let escaped = start
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        dom.contains(&format!("<td class=\"start\">{escaped}</td>")),
        "no {escaped:?} in the page"
    );
    // Revisions and the action log.
    let applied = view["revisions"]["applied"].as_str().unwrap();
    assert!(dom.contains(applied));
    assert!(dom.contains("<td>place</td>"));
    // The simulation's charts, served next to the page as SVG images.
    for chart in ["allocation.svg", "queue-depth.svg", "wait-cdf.svg"] {
        assert!(
            dom.contains(&format!("<img src=\"charts/{chart}\"")),
            "{chart}"
        );
        let (head, body) = http_get(&format!("{url}charts/{chart}"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: image/svg+xml"),
            "{head}"
        );
        assert!(body.contains("<svg"), "{chart}: {body:.200}");
    }
    let (head, _) = http_get(&format!("{url}charts/..%2Fdashboard.json"));
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    // Nothing from elsewhere: no external URL, no script.
    assert!(!dom.contains("http://") && !dom.contains("https://"));
    assert!(!dom.contains("<script"));

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-1280x800.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &chromium,
        &dir.path().join("profile"),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1280, 800));
    assert!(
        png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}

/// `gitfleet serve ARGS` until dropped, and the URL it serves.
fn serve(args: &[&std::ffi::OsStr]) -> (Killed, String) {
    let mut serve = Killed(
        Command::new(BIN)
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let line = BufReader::new(serve.0.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let url = line
        .strip_prefix("serving ")
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    (serve, url)
}

#[test]
fn revisions_link_to_the_semantic_history_of_a_git_fleet() {
    let mut repo = git_support::TestRepo::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in walk(&root.join("examples/fleet")) {
        let relative = entry.strip_prefix(root.join("examples")).unwrap();
        repo.write(
            relative.to_str().unwrap(),
            &std::fs::read_to_string(&entry).unwrap(),
        );
    }
    repo.commit("Ada", "add the fleet");
    let queues = std::fs::read_to_string(repo.path().join("fleet/queues.yaml")).unwrap();
    repo.write(
        "fleet/queues.yaml",
        &queues.replace(
            "{model: H100-SXM-80GB, guaranteed: 200, limit: 320}",
            "{model: H100-SXM-80GB, guaranteed: 200, limit: 400}",
        ),
    );
    let head = repo.commit("Grace", "raise nlp's H100 limit <for the sprint>");
    let state = repo.path().join("state");
    let fleet = repo.path().join("fleet");
    let out = Command::new(BIN)
        .arg("reconcile")
        .arg(&fleet)
        .args(["--listen", "off", "--state"])
        .arg(&state)
        .args(["--now", "2026-11-21T10:00:00Z", "--iterations", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (_served, url) = serve(&[
        "--state".as_ref(),
        state.as_os_str(),
        "--fleet".as_ref(),
        fleet.as_os_str(),
    ]);
    let (_, page) = http_get(&url);
    assert!(
        page.contains(&format!("<a href=\"history?rev={head}#c-{head}\">")),
        "no history link in the page"
    );
    let (head_line, history) = http_get(&format!("{url}history?rev={head}"));
    assert!(head_line.starts_with("HTTP/1.1 200"), "{head_line}");
    assert!(history.contains(&format!("id=\"c-{head}\"")));
    assert!(history.contains("raise nlp&#39;s H100 limit &lt;for the sprint&gt;"));
    assert!(history.contains("Grace &lt;grace@example.com&gt;"));
    assert!(history.contains("320 → 400"), "{history}");
    assert!(history.contains("add the fleet"));
    for (rev, status) in [("HEAD", "400"), ("main~1", "400"), ("00000000", "404")] {
        let (head_line, _) = http_get(&format!("{url}history?rev={rev}"));
        assert!(
            head_line.starts_with(&format!("HTTP/1.1 {status}")),
            "{rev}: {head_line}"
        );
    }

    // Without the fleet, no links and no history.
    let (_served, url) = serve(&["--state".as_ref(), state.as_os_str()]);
    let (_, page) = http_get(&url);
    assert!(!page.contains("history?rev="));
    let (head_line, _) = http_get(&format!("{url}history?rev={head}"));
    assert!(head_line.starts_with("HTTP/1.1 404"), "{head_line}");
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A plain HTTP/1.1 GET of `url` (`http://HOST:PORT/PATH`): the response's
/// head and body.
fn http_get(url: &str) -> (String, String) {
    use std::io::Write;
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

#[test]
fn serve_needs_a_state_with_a_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("dashboard.json is missing"), "{stderr}");
    assert!(stderr.contains("gitfleet reconcile"), "{stderr}");
}
