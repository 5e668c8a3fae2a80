//! The dashboard page: one server-rendered HTML document, its style
//! embedded, no script. Sections: revisions, queues, pending jobs, the
//! fleet map, the action log; a skip link and a table of contents make it
//! keyboard-navigable.

use std::collections::{HashMap, HashSet};

use crate::html::Html;
use crate::view::{FleetView, NodeView, PoolView, QueueModel};

/// Pending jobs and action-log entries shown at most (the rest are counted).
pub const MAX_ROWS: usize = 200;

/// The style sheet, embedded in the page.
const STYLE: &str = include_str!("style.css");

/// Colours for queues (by their order in the tree), chosen to stay apart.
const PALETTE: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#393b79", "#ad494a", "#637939", "#7b4173",
];

/// Where the page is served from (it says so, and refreshes only when live).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The running loop: the page refreshes itself every 15 s.
    Live,
    /// `gitfleet serve`: a stopped loop's state, read only.
    Stopped,
}

/// A chart of `gitfleet simulate --plot`, served next to the page at
/// `charts/FILE` and shown in the page's simulation section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// Its file name (`allocation.svg`, …), also its path under `charts/`.
    pub file: String,
    /// What it shows.
    pub caption: String,
    /// When it was written (RFC 3339), if known.
    pub written: Option<String>,
}

/// What the page shows besides the view, when the server has it.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The `simulate --plot` charts present: a simulation section.
    pub charts: Vec<Chart>,
    /// The server answers `history?rev=ID` (a Git fleet): revisions link
    /// to their semantic history.
    pub history: bool,
}

/// The whole page.
pub fn render(view: &FleetView, source: Source, extras: &Extras) -> String {
    let charts = extras.charts.as_slice();
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<link rel=\"icon\" href=\"data:,\">");
    if source == Source::Live {
        h.raw("<meta http-equiv=\"refresh\" content=\"15\">");
    }
    h.raw("<title>gitfleet dashboard</title><style>")
        .raw(STYLE)
        .raw("</style></head><body>")
        .raw("<a class=\"skip\" href=\"#main\">Skip to content</a>")
        .raw("<header><h1>gitfleet</h1><nav aria-label=\"Sections\"><ul>")
        .raw("<li><a href=\"#revisions\">Revisions</a></li>")
        .raw("<li><a href=\"#queues\">Queues</a></li>")
        .raw("<li><a href=\"#pending\">Pending jobs</a></li>")
        .raw("<li><a href=\"#fleet\">Fleet map</a></li>")
        .raw("<li><a href=\"#actions\">Action log</a></li>");
    if !charts.is_empty() {
        h.raw("<li><a href=\"#simulation\">Simulation</a></li>");
    }
    h.raw("</ul></nav><p class=\"meta\">");
    h.text(&view.time).raw(" · executor ").text(&view.executor);
    if source == Source::Stopped {
        h.raw(" · <strong>read-only view of a stopped loop's state</strong>");
    }
    h.raw("</p></header><main id=\"main\" tabindex=\"-1\">");
    let tree = Queues::new(view);
    revisions(&mut h, view, extras.history);
    queues(&mut h, view, &tree);
    pending(&mut h, view);
    fleet(&mut h, view, &tree);
    actions(&mut h, view, extras.history);
    simulation(&mut h, charts);
    h.raw("</main></body></html>\n");
    h.finish()
}

/// A revision in `<code>`, linked to its semantic history when the server
/// has one and the revision is a commit id (not a directory digest).
fn revision(h: &mut Html, revision: &str, shown: &str, history: bool) {
    let is_commit =
        (4..=64).contains(&revision.len()) && revision.bytes().all(|b| b.is_ascii_hexdigit());
    if history && is_commit {
        h.raw("<a")
            .attr("href", &format!("history?rev={revision}#c-{revision}"))
            .raw(">");
    }
    h.raw("<code")
        .attr("title", revision)
        .raw(">")
        .text(shown)
        .raw("</code>");
    if history && is_commit {
        h.raw("</a>");
    }
}

fn revisions(h: &mut Html, view: &FleetView, history: bool) {
    let r = &view.revisions;
    h.raw("<section id=\"revisions\" aria-labelledby=\"revisions-h\"><h2 id=\"revisions-h\">Revisions</h2><dl>")
        .raw("<dt>Applied</dt><dd>");
    let none = "none".to_string();
    let applied = r.applied.as_ref().unwrap_or(&none);
    revision(h, applied, applied, history);
    h.raw("</dd><dt>Attempted</dt><dd>");
    let attempted = r.attempted.as_ref().unwrap_or(&none);
    revision(h, attempted, attempted, history);
    h.raw("</dd><dt>Last error</dt><dd>");
    match &r.last_error {
        Some(error) => {
            h.raw("<pre class=\"error\">").text(error).raw("</pre>");
        }
        None => {
            h.raw("none");
        }
    }
    h.raw("</dd></dl></section>");
}

/// Leaf queues and their colours, looked up once per page.
struct Queues<'a> {
    parents: HashSet<&'a str>,
    colours: HashMap<&'a str, &'static str>,
}

impl<'a> Queues<'a> {
    fn new(view: &'a FleetView) -> Self {
        let parents: HashSet<&str> = view
            .queues
            .iter()
            .filter_map(|q| q.parent.as_deref())
            .collect();
        let colours = view
            .queues
            .iter()
            .filter(|q| !parents.contains(q.name.as_str()))
            .enumerate()
            .map(|(i, q)| (q.name.as_str(), PALETTE[i % PALETTE.len()]))
            .collect();
        Queues { parents, colours }
    }

    fn is_leaf(&self, queue: &str) -> bool {
        !self.parents.contains(queue)
    }

    /// A leaf queue's colour (a job's queue is always a leaf).
    fn colour(&self, queue: &str) -> &'static str {
        self.colours.get(queue).copied().unwrap_or(PALETTE[0])
    }
}

fn queues(h: &mut Html, view: &FleetView, tree: &Queues<'_>) {
    h.raw("<section id=\"queues\" aria-labelledby=\"queues-h\"><h2 id=\"queues-h\">Queues</h2>")
        .raw("<p class=\"note\">GPUs in use against guaranteed and limit, per model; a parent counts its subtree. The bar's tick marks the guarantee; use above it is borrowed.</p>")
        .raw("<table class=\"queues\"><thead><tr><th scope=\"col\">Queue</th><th scope=\"col\">Model</th><th scope=\"col\">Used</th><th scope=\"col\">Guaranteed</th><th scope=\"col\">Limit</th><th scope=\"col\">Borrowed</th><th scope=\"col\">Usage</th><th scope=\"col\">Pending jobs (GPUs)</th></tr></thead><tbody>");
    for queue in &view.queues {
        let rows: Vec<&QueueModel> = queue
            .models
            .iter()
            .filter(|m| m.used > 0 || m.guaranteed > 0 || m.limit.is_some_and(|l| l > 0))
            .collect();
        let pending_jobs: u64 = queue.pending.iter().map(|p| p.jobs).sum();
        let pending_gpus: u64 = queue.pending.iter().map(|p| p.gpus).sum();
        let span = rows.len().max(1);
        h.raw("<tr><th scope=\"row\" class=\"queue\"");
        if rows.len() > 1 {
            h.raw(" rowspan=\"").int(span as u64).raw("\"");
        }
        h.raw("><span class=\"indent\" style=\"padding-left:")
            .int(u64::from(queue.depth) * 16)
            .raw("px\">");
        if tree.is_leaf(&queue.name) {
            h.raw("<span class=\"swatch\" style=\"background:")
                .raw(tree.colour(&queue.name))
                .raw("\"></span>");
        }
        h.text(&queue.name).raw("</span></th>");
        if rows.is_empty() {
            h.raw("<td colspan=\"6\">no quota, no use</td>");
        }
        for (i, m) in rows.iter().enumerate() {
            if i > 0 {
                h.raw("<tr>");
            }
            h.raw("<td>")
                .text(&m.model)
                .raw("</td><td class=\"n\">")
                .int(m.used);
            h.raw("</td><td class=\"n\">")
                .int(m.guaranteed)
                .raw("</td><td class=\"n\">");
            match m.limit {
                Some(limit) => h.int(limit),
                None => h.raw("none"),
            };
            h.raw("</td><td class=\"n");
            if m.borrowed > 0 {
                h.raw(" borrowing");
            }
            h.raw("\">").int(m.borrowed).raw("</td><td>");
            bar(h, m);
            h.raw("</td>");
            if i == 0 {
                h.raw("<td class=\"n\"");
                if rows.len() > 1 {
                    h.raw(" rowspan=\"").int(span as u64).raw("\"");
                }
                h.raw(">")
                    .int(pending_jobs)
                    .raw(" (")
                    .int(pending_gpus)
                    .raw(")</td>");
            }
            h.raw("</tr>");
        }
        if rows.is_empty() {
            h.raw("<td class=\"n\">")
                .int(pending_jobs)
                .raw(" (")
                .int(pending_gpus)
                .raw(")</td></tr>");
        }
    }
    h.raw("</tbody></table></section>");
}

/// A bar of usage against the scale (limit, else the larger of used and
/// guaranteed), with a tick at the guarantee.
fn bar(h: &mut Html, m: &QueueModel) {
    let scale = m.limit.unwrap_or(0).max(m.used).max(m.guaranteed).max(1);
    let pct = |n: u64| (n.min(scale) * 100 / scale).min(100);
    let own = m.used.min(m.guaranteed);
    h.raw("<span class=\"bar\" role=\"img\" aria-label=\"")
        .int(m.used)
        .raw(" of ")
        .int(scale)
        .raw(" GPUs\"><span class=\"own\" style=\"width:")
        .int(pct(own))
        .raw("%\"></span><span class=\"borrowed\" style=\"width:")
        .int(pct(m.borrowed))
        .raw("%\"></span><span class=\"tick\" style=\"left:")
        .int(pct(m.guaranteed))
        .raw("%\"></span></span>");
}

fn pending(h: &mut Html, view: &FleetView) {
    let total = view.pending_total.max(view.pending.len() as u64);
    h.raw(
        "<section id=\"pending\" aria-labelledby=\"pending-h\"><h2 id=\"pending-h\">Pending jobs (",
    )
    .int(total)
    .raw(")</h2>");
    if view.pending.is_empty() {
        h.raw("<p>No job is pending.</p></section>");
        return;
    }
    h.raw("<table><thead><tr><th scope=\"col\">Job</th><th scope=\"col\">Queue</th><th scope=\"col\">GPUs</th><th scope=\"col\">Model</th><th scope=\"col\">Waiting for</th><th scope=\"col\">Reason</th><th scope=\"col\">Expected start</th></tr></thead><tbody>");
    for p in view.pending.iter().take(MAX_ROWS) {
        h.raw("<tr><td><code>")
            .text(&p.job)
            .raw("</code></td><td>")
            .text(&p.queue)
            .raw("</td><td class=\"n\">")
            .int(p.gpus)
            .raw("</td><td>")
            .text(&p.model)
            .raw("</td><td>")
            .text(&p.waiting_for)
            .raw("</td><td class=\"reason\">")
            .text(&p.reason)
            .raw("</td><td class=\"start\">");
        match &p.expected_start {
            Some(start) => {
                h.text(&start.text);
            }
            None => {
                h.raw("<span class=\"note\">not computed</span>");
            }
        }
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    more(
        h,
        total as usize,
        view.pending.len().min(MAX_ROWS),
        "pending jobs",
    );
    h.raw("</section>");
}

/// "and N more": `total` things of which `shown` are listed.
fn more(h: &mut Html, total: usize, shown: usize, what: &'static str) {
    if total > shown {
        h.raw("<p class=\"note\">and ")
            .int((total - shown) as u64)
            .raw(" more ")
            .raw(what)
            .raw(" (see <code>gitfleet status</code>).</p>");
    }
}

fn fleet(h: &mut Html, view: &FleetView, tree: &Queues<'_>) {
    h.raw("<section id=\"fleet\" aria-labelledby=\"fleet-h\"><h2 id=\"fleet-h\">Fleet map</h2>")
        .raw("<p class=\"note\">Pools, racks, nodes; each square is a GPU, coloured by the queue of the job holding it. Free GPUs are white, unhealthy ones crossed; drained nodes are hatched.</p>")
        .raw("<ul class=\"legend\" aria-label=\"Queue colours\">");
    for queue in view.queues.iter().filter(|q| tree.is_leaf(&q.name)) {
        h.raw("<li><span class=\"swatch\" style=\"background:")
            .raw(tree.colour(&queue.name))
            .raw("\"></span>")
            .text(&queue.name)
            .raw("</li>");
    }
    h.raw("<li><span class=\"swatch free\"></span>free</li><li><span class=\"swatch bad\"></span>unhealthy</li></ul>");
    for pool in &view.pools {
        pool_map(h, tree, pool);
    }
    h.raw("</section>");
}

fn pool_map(h: &mut Html, tree: &Queues<'_>, pool: &PoolView) {
    let (total, allocated, healthy): (u64, u64, u64) = pool.gpus.iter().fold((0, 0, 0), |a, g| {
        (a.0 + g.total, a.1 + g.allocated, a.2 + g.healthy)
    });
    h.raw("<section class=\"pool\"><h3>");
    if pool.name.is_empty() {
        h.raw("Nodes of no declared pool");
    } else {
        h.raw("Pool ").text(&pool.name);
    }
    h.raw("</h3><p class=\"meta\">")
        .int(pool.nodes)
        .raw(" nodes (")
        .int(pool.drained_nodes)
        .raw(" drained) · ")
        .int(allocated)
        .raw("/")
        .int(total)
        .raw(" GPUs allocated · ")
        .int(total - healthy.min(total))
        .raw(" unhealthy</p>");
    for rack in &pool.racks {
        h.raw("<div class=\"rack\"><h4>");
        if rack.name.is_empty() {
            h.raw("no rack label");
        } else {
            h.raw("rack ").text(&rack.name);
        }
        h.raw("</h4><ul class=\"nodes\">");
        for node in &rack.nodes {
            node_map(h, tree, node);
        }
        h.raw("</ul></div>");
    }
    h.raw("</section>");
}

fn node_map(h: &mut Html, tree: &Queues<'_>, node: &NodeView) {
    h.raw("<li class=\"node");
    if node.drained {
        h.raw(" drained");
    }
    h.raw("\"><span class=\"name\">").text(&node.name);
    if node.drained {
        h.raw(" <em>drained</em>");
    }
    h.raw("</span><span class=\"gpus\">");
    for gpu in &node.gpus {
        h.raw("<span class=\"gpu");
        if !gpu.healthy {
            h.raw(" bad");
        }
        h.raw("\"");
        if let Some(queue) = &gpu.queue {
            h.raw(" style=\"background:")
                .raw(tree.colour(queue))
                .raw("\"");
        }
        let mut label = format!("GPU {}", gpu.index);
        if !gpu.healthy {
            label.push_str(" unhealthy");
        }
        if let Some(job) = &gpu.job {
            label.push_str(&format!(": {job}"));
            if let Some(queue) = &gpu.queue {
                label.push_str(&format!(" ({queue})"));
            }
        } else if gpu.healthy {
            label.push_str(": free");
        }
        h.attr("title", &label).raw("></span>");
    }
    h.raw("</span></li>");
}

fn actions(h: &mut Html, view: &FleetView, history: bool) {
    h.raw("<section id=\"actions\" aria-labelledby=\"actions-h\"><h2 id=\"actions-h\">Action log</h2>");
    if view.actions.is_empty() {
        h.raw("<p>Nothing recorded yet.</p></section>");
        return;
    }
    h.raw("<table><thead><tr><th scope=\"col\">Time</th><th scope=\"col\">Revision</th><th scope=\"col\">What</th><th scope=\"col\">Subject</th><th scope=\"col\">Details</th></tr></thead><tbody>");
    for a in view.actions.iter().take(MAX_ROWS) {
        let short: String = a.revision.chars().take(12).collect();
        h.raw("<tr><td>").text(&a.time).raw("</td><td>");
        revision(h, &a.revision, &short, history);
        h.raw("</td><td>")
            .text(&a.what)
            .raw("</td><td><code>")
            .text(&a.subject)
            .raw("</code></td><td class=\"reason\">")
            .text(&a.detail)
            .raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    more(
        h,
        view.actions.len(),
        view.actions.len().min(MAX_ROWS),
        "entries",
    );
    h.raw("</section>");
}

/// The charts of `gitfleet simulate --plot`, as images (an SVG shown by
/// `<img>` runs no script and loads nothing).
fn simulation(h: &mut Html, charts: &[Chart]) {
    if charts.is_empty() {
        return;
    }
    h.raw("<section id=\"simulation\" aria-labelledby=\"simulation-h\">")
        .raw("<h2 id=\"simulation-h\">Simulation</h2>")
        .raw("<p>Charts of <code>gitfleet simulate --plot</code> in the state directory's <code>simulation/</code> folder.</p>");
    for chart in charts {
        h.raw("<figure><img")
            .attr("src", &format!("charts/{}", chart.file))
            .attr("alt", &chart.caption)
            .raw(" width=\"960\" height=\"540\" loading=\"lazy\"><figcaption>")
            .text(&chart.caption);
        if let Some(written) = &chart.written {
            h.raw(" · written ").text(written);
        }
        h.raw(" · <a")
            .attr("href", &format!("charts/{}", chart.file))
            .raw(">")
            .text(&chart.file)
            .raw("</a></figcaption></figure>");
    }
    h.raw("</section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::*;

    fn view() -> FleetView {
        FleetView {
            format_version: FORMAT_VERSION,
            time: "2026-11-21T10:00:00Z".into(),
            executor: "sim".into(),
            revisions: RevisionsView {
                applied: Some("abc".into()),
                attempted: Some("def".into()),
                last_error: Some("fleet.yaml:3:1: <bad> & wrong".into()),
            },
            queues: vec![
                QueueView {
                    name: "org".into(),
                    parent: None,
                    depth: 0,
                    models: vec![QueueModel {
                        model: "H100".into(),
                        used: 12,
                        guaranteed: 8,
                        limit: Some(16),
                        borrowed: 4,
                    }],
                    pending: vec![],
                },
                QueueView {
                    name: "<team>".into(),
                    parent: Some("org".into()),
                    depth: 1,
                    models: vec![QueueModel {
                        model: "H100".into(),
                        used: 12,
                        guaranteed: 8,
                        limit: None,
                        borrowed: 4,
                    }],
                    pending: vec![PendingTally {
                        model: "H100".into(),
                        priority_class: "normal".into(),
                        jobs: 1,
                        gpus: 8,
                    }],
                },
            ],
            pools: vec![PoolView {
                name: "p".into(),
                nodes: 2,
                healthy_nodes: 1,
                drained_nodes: 1,
                allocated_nodes: 1,
                gpus: vec![GpuTally {
                    model: "H100".into(),
                    total: 4,
                    healthy: 3,
                    allocated: 2,
                    drained: 2,
                }],
                racks: vec![RackView {
                    name: "r1".into(),
                    nodes: vec![
                        NodeView {
                            name: "p-0".into(),
                            drained: false,
                            gpus: vec![
                                GpuView {
                                    index: 0,
                                    model: "H100".into(),
                                    healthy: true,
                                    job: Some("j\"1".into()),
                                    queue: Some("<team>".into()),
                                },
                                GpuView {
                                    index: 1,
                                    model: "H100".into(),
                                    healthy: true,
                                    job: None,
                                    queue: None,
                                },
                            ],
                        },
                        NodeView {
                            name: "p-1".into(),
                            drained: true,
                            gpus: vec![GpuView {
                                index: 0,
                                model: "H100".into(),
                                healthy: false,
                                job: None,
                                queue: None,
                            }],
                        },
                    ],
                }],
            }],
            pending_total: 1,
            pending: vec![PendingView {
                job: "<img src=x onerror=alert(1)>".into(),
                queue: "<team>".into(),
                model: "H100".into(),
                gpus: 8,
                waiting_for: "quota".into(),
                reason: "queue <team> is at its limit".into(),
                expected_start: Some(StartView {
                    status: "expected".into(),
                    at: Some("2026-11-21T14:00:00Z".into()),
                    text: "by 2026-11-21T14:00:00Z, when <j1> ends (time limit or grace period)"
                        .into(),
                }),
            }],
            actions: vec![ActionView {
                time: "2026-11-21T10:00:00Z".into(),
                revision: "abcdef0123456789".into(),
                what: "place".into(),
                subject: "j1".into(),
                detail: "on p-0".into(),
            }],
        }
    }

    #[test]
    fn every_section_is_there_with_its_heading_and_link() {
        let page = render(&view(), Source::Live, &Extras::default());
        for id in ["revisions", "queues", "pending", "fleet", "actions"] {
            assert!(page.contains(&format!("<section id=\"{id}\"")), "{id}");
            assert!(page.contains(&format!("href=\"#{id}\"")), "{id}");
        }
        assert!(page.contains("<a class=\"skip\" href=\"#main\">"));
        assert!(page.contains("http-equiv=\"refresh\""));
        assert!(
            !render(&view(), Source::Stopped, &Extras::default())
                .contains("http-equiv=\"refresh\"")
        );
    }

    #[test]
    fn fleet_text_is_escaped_everywhere() {
        let page = render(&view(), Source::Live, &Extras::default());
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<team>"));
        assert!(!page.contains("<bad>"));
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(page.contains("title=\"GPU 0: j&quot;1 (&lt;team&gt;)\""));
    }

    #[test]
    fn borrowing_drained_and_unhealthy_are_marked() {
        let page = render(&view(), Source::Live, &Extras::default());
        assert!(page.contains("<td class=\"n borrowing\">4</td>"));
        assert!(page.contains("<li class=\"node drained\">"));
        assert!(page.contains("title=\"GPU 0 unhealthy\""));
        // The guarantee's tick at 8 of a limit of 16; 8 own, 4 borrowed.
        assert!(page.contains("style=\"left:50%\""));
        assert!(page.contains("class=\"borrowed\" style=\"width:25%\""));
    }

    #[test]
    fn pending_jobs_show_their_expected_start() {
        let mut v = view();
        let page = render(&v, Source::Live, &Extras::default());
        assert!(page.contains("<th scope=\"col\">Expected start</th>"));
        assert!(page.contains(
            "<td class=\"start\">by 2026-11-21T14:00:00Z, when &lt;j1&gt; ends (time limit or grace period)</td>"
        ));
        v.pending[0].expected_start = None;
        let page = render(&v, Source::Live, &Extras::default());
        assert!(page.contains("<td class=\"start\"><span class=\"note\">not computed</span></td>"));
    }

    #[test]
    fn long_lists_are_cut_and_say_how_many_more() {
        let mut v = view();
        v.pending_total = 1000;
        v.pending = vec![v.pending[0].clone(); 300];
        let page = render(&v, Source::Live, &Extras::default());
        assert!(page.contains("<h2 id=\"pending-h\">Pending jobs (1000)</h2>"));
        assert_eq!(
            page.matches("onerror=alert(1)&gt;</code>").count(),
            MAX_ROWS
        );
        assert!(page.contains("and 800 more pending jobs"));
    }

    #[test]
    fn charts_make_a_simulation_section_only_when_present() {
        assert!(!render(&view(), Source::Live, &Extras::default()).contains("id=\"simulation\""));
        let charts = [Chart {
            file: "wait-cdf.svg".to_string(),
            caption: "Queueing delay <per leaf>".to_string(),
            written: Some("2026-11-24T01:00:00Z".to_string()),
        }];
        let extras = Extras {
            charts: charts.to_vec(),
            history: false,
        };
        let page = render(&view(), Source::Stopped, &extras);
        assert!(page.contains("<a href=\"#simulation\">Simulation</a>"));
        assert!(
            page.contains(
                "<img src=\"charts/wait-cdf.svg\" alt=\"Queueing delay &lt;per leaf&gt;\""
            )
        );
        assert!(page.contains("written 2026-11-24T01:00:00Z"));
    }

    #[test]
    fn commit_revisions_link_to_their_history_when_the_server_has_it() {
        let v = view();
        let rev = v.actions[0].revision.clone();
        let link = format!("<a href=\"history?rev={rev}#c-{rev}\"><code title=\"{rev}\">");
        assert!(!render(&v, Source::Live, &Extras::default()).contains(&link));
        let extras = Extras {
            history: true,
            ..Extras::default()
        };
        let page = render(&v, Source::Live, &extras);
        assert!(page.contains(&link), "{page}");
        let mut dir = v.clone();
        dir.revisions.applied = Some("dir:5d8017dcae78958c".into());
        let page = render(&dir, Source::Live, &extras);
        assert!(!page.contains("history?rev=dir:"));
    }

    #[test]
    fn no_external_resource_is_referenced() {
        let page = render(&view(), Source::Live, &Extras::default());
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains("<script"));
    }
}
