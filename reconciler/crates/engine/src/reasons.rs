//! Words for decisions: why a job was placed, why it waits, what binds.

use model::observed::Timestamp;
use model::time::after;

use super::backfill::Reservation;
use super::cluster::Owner;
use super::ids::{JobId, ModelId, RunId};
use super::jobs::JobInfo;
use super::placement;
use super::{Blocked, Engine, Stopping};

/// RFC 3339, seconds, `Z`.
pub fn timestamp(t: Timestamp) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A short clock time for messages (`10:05`, or the date too when not today).
pub fn clock(t: Timestamp) -> String {
    use chrono::Datelike;
    let year = t.year();
    if !(0..=9999).contains(&year) {
        return t.format("%Y-%m-%d %H:%M").to_string();
    }
    // Written digit by digit: a reason may carry several clock times and
    // a plan has thousands of reasons (strftime parses its pattern each
    // time).
    let mut out = String::with_capacity(16);
    push_digits(&mut out, year as u32, 4);
    out.push('-');
    push_digits(&mut out, t.month(), 2);
    out.push('-');
    push_digits(&mut out, t.day(), 2);
    out.push(' ');
    push_hour_minute(&mut out, t);
    out
}

/// `t` as `HH:MM` when it is on `now`'s date, else with its date; `moves`:
/// `t` moves with `now` (`now + limit`), for the plan's horizon.
fn clock_near(t: Timestamp, now: Timestamp, moves: bool) -> String {
    super::horizon::note_clock(t, now, moves);
    if t.date_naive() == now.date_naive() {
        let mut out = String::with_capacity(5);
        push_hour_minute(&mut out, t);
        out
    } else {
        clock(t)
    }
}

/// `HH:MM` of `t`.
fn push_hour_minute(out: &mut String, t: Timestamp) {
    use chrono::Timelike;
    push_digits(out, t.hour(), 2);
    out.push(':');
    push_digits(out, t.minute(), 2);
}

/// `n` in decimal, zero-padded to `width` digits (`n` has at most `width`).
fn push_digits(out: &mut String, n: u32, width: u32) {
    for k in (0..width).rev() {
        let digit = (n / 10u32.pow(k)) % 10;
        out.push(char::from(b'0' + digit as u8));
    }
}

/// `name (class value)` appended to `out`, e.g. `train-7 (high 500)`.
pub fn push_named(out: &mut String, job: &JobInfo) {
    out.push_str(job.name);
    out.push_str(" (");
    push_class(out, job);
    out.push(')');
}

/// `class value` appended to `out`, e.g. `high 500`.
fn push_class(out: &mut String, job: &JobInfo) {
    use std::fmt::Write;
    match job.class {
        Some(c) => {
            out.push_str(c);
            let _ = write!(out, " {}", job.priority);
        }
        None => {
            let _ = write!(out, "priority {}", job.priority);
        }
    }
}

/// Up to `max` names, then `and N more`.
pub fn list(names: &[&str], max: usize) -> String {
    if names.len() <= max {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..max].join(", "), names.len() - max)
    }
}

/// Why a job was placed: its queue's quota state after admission.
pub fn placed(e: &Engine, j: JobId, m: ModelId, how: Option<&str>) -> String {
    let job = &e.jobs[j as usize];
    let model = e.models.name(m);
    let Some(q) = job.queue else {
        return String::new();
    };
    let usage = e.tree.usage(q, m);
    let guaranteed = e.tree.guaranteed(q, m);
    let queue = &e.tree.get(q).name;
    let mut text = if usage <= guaranteed {
        format!(
            "queue {queue}: {} {model} within guarantee ({usage} of {guaranteed} in use)",
            job.gpus
        )
    } else {
        let limit = e
            .tree
            .limit(q, m)
            .map_or("no limit".to_string(), |l| format!("limit {l}"));
        format!(
            "queue {queue}: {} {model}, borrowing {} above guarantee {guaranteed} ({limit})",
            job.gpus,
            usage - guaranteed
        )
    };
    if how == Some("backfill")
        && let Some(res) = &e.reservation
    {
        text.push_str(&format!(
            "; backfill: its time limit ends before the reservation for {} at {}",
            e.jobs[res.job as usize].name,
            clock_near(res.start, e.now, false)
        ));
    }
    text
}

/// Why a job stays pending, and what it waits for.
pub fn blocked(e: &Engine, job: &JobInfo, blocked: &[Blocked]) -> (String, &'static str) {
    if blocked.is_empty() {
        return (
            "no NodePool provides an acceptable GPU model".to_string(),
            "unschedulable",
        );
    }
    // A job no quota or placement change short of editing Git can start
    // says so, with the number to change (issue 15: impossible jobs).
    let never: Vec<Option<String>> = blocked.iter().map(|b| never(e, b)).collect();
    if never.iter().all(Option::is_some) {
        let text: Vec<String> = never.into_iter().flatten().collect();
        let waiting = if blocked.iter().all(|b| matches!(b, Blocked::Quota(..))) {
            "quota"
        } else {
            "unschedulable"
        };
        return (format!("can never run: {}", text.join("; ")), waiting);
    }
    let parts: Vec<(String, &'static str)> = blocked.iter().map(|b| one(e, job, b)).collect();
    // Placement problems are more actionable than quota or missing nodes.
    let waiting = ["reservation", "resources", "quota"]
        .into_iter()
        .find(|w| parts.iter().any(|(_, p)| p == w))
        .unwrap_or("unschedulable");
    let text: Vec<String> = parts.into_iter().map(|(t, _)| t).collect();
    (text.join("; "), waiting)
}

/// The end of a reason for a job kept off reserved GPUs: what its time
/// limit does (the rest is the same for every job of its shape).
pub fn reserved_limit(e: &Engine, job: &JobInfo) -> String {
    match job.time_limit {
        Some(l) => format!(
            "its time limit {l} would end at {}, after that",
            clock_near(after(e.now, l), e.now, true)
        ),
        None => "a job without a time limit cannot use them".to_string(),
    }
}

/// Why a blocked attempt can never succeed as the fleet is declared: a
/// limit below the request, a replica larger than any node of the model, or
/// more GPUs than the model's pools hold at their maximum size.
fn never(e: &Engine, b: &Blocked) -> Option<String> {
    match b {
        Blocked::NoNodes(_) => None,
        Blocked::Quota(m, block) if block.limit < block.requested => Some(format!(
            "queue {}'s limit on {} is {}, below the {} requested (raise it to at least {})",
            e.tree.get(block.queue).name,
            e.models.name(*m),
            block.limit,
            block.requested,
            block.requested
        )),
        Blocked::Quota(..) => None,
        Blocked::Placement(req) | Blocked::Reserved(req) => {
            let model = e.models.name(req.model);
            let (largest, total) = e.node_sizes(req.model);
            if u64::from(req.per_replica) > largest {
                Some(format!(
                    "a replica needs {} {model} GPUs on one node, and the largest {model} node (at a pool's size.max) has {largest}",
                    req.per_replica
                ))
            } else if req.total() > total {
                Some(format!(
                    "needs {} {model} GPUs, and the {model} pools hold {total} at their size.max (raise a pool's size.max)",
                    req.total()
                ))
            } else if let Some((level, most)) = largest_required_domain(e, req)
                && most < u64::from(req.replicas)
            {
                let word = level_word(level);
                Some(format!(
                    "needs {} replicas of {} {model} GPUs in one {word} (topology.required), and the largest {word} holds {most} at the pools' size.max (relax the topology or add nodes to a {word})",
                    req.replicas, req.per_replica
                ))
            } else {
                None
            }
        }
    }
}

fn one(e: &Engine, job: &JobInfo, b: &Blocked) -> (String, &'static str) {
    match b {
        Blocked::NoNodes(m) => (
            format!("no schedulable node has {} GPUs", e.models.name(*m)),
            "unschedulable",
        ),
        Blocked::Quota(m, block) => {
            let mut text = format!(
                "queue {}: {} {} requested, {} left under limit {}",
                e.tree.get(block.queue).name,
                block.requested,
                e.models.name(*m),
                block.left,
                block.limit
            );
            let held = e.tree.held(block.queue, *m);
            if held > 0 {
                text.push_str(&format!(
                    " ({held} held by stopping jobs until they are gone)"
                ));
            }
            (text, "quota")
        }
        Blocked::Reserved(req) => {
            let (text, _) = one(e, job, &Blocked::Placement(*req));
            let Some(res) = &e.reservation else {
                return (text, "resources");
            };
            let (reserved, names) = reserved_gpus(e, res);
            (
                format!(
                    "{text}; {reserved} free GPUs on {} are reserved for {} from {} (backfill) and {}",
                    list(&names, 4),
                    e.jobs[res.job as usize].name,
                    clock_near(res.start, e.now, false),
                    reserved_limit(e, job)
                ),
                "reservation",
            )
        }
        Blocked::Placement(req) => {
            let model = e.models.name(req.model);
            let shape = format!("{}×{}", req.replicas, req.per_replica);
            if let Some(level) = req.required {
                let level_name = level_word(level);
                let best =
                    placement::largest_block(&e.cluster, req.model, req.per_replica, Some(level));
                (
                    format!(
                        "needs {shape} {model} in one {level_name}; largest free {level_name} block is {best}×{}{}",
                        req.per_replica,
                        pools_at_max(e, req.model)
                    ),
                    "resources",
                )
            } else {
                let free = e
                    .cluster
                    .free_total
                    .get(req.model as usize)
                    .copied()
                    .unwrap_or(0);
                let fit = total_fitting(e, req);
                (
                    format!(
                        "needs {shape} {model}; free GPUs fit {fit}×{} ({free} free on schedulable nodes){}",
                        req.per_replica,
                        pools_at_max(e, req.model)
                    ),
                    "resources",
                )
            }
        }
    }
}

/// "; pool cloud is at its maximum size 2" for elastic pools of `model`
/// that cannot grow any more.
fn pools_at_max(e: &Engine, model: ModelId) -> String {
    e.pools
        .iter()
        .filter(|p| p.model == model && p.spec.size.max > p.spec.size.min)
        .filter(|p| {
            p.virtual_nodes
                .iter()
                .all(|id| !e.cluster.node(*id).is_idle() || e.cluster.node(*id).planned)
        })
        .map(|p| {
            format!(
                "; pool {} is at its maximum size {}",
                p.name, p.spec.size.max
            )
        })
        .collect()
}

/// Under a required topology: the level and how many replicas of the
/// request the largest domain of it holds, all nodes (virtual ones at the
/// pools' size.max included) empty.
fn largest_required_domain(
    e: &Engine,
    req: &placement::Request,
) -> Option<(model::spec::TopologyLevel, u64)> {
    let level = req.required?;
    let key = (req.model, level as u8, req.per_replica);
    if let Some(&most) = e.domain_memo.borrow().get(&key) {
        return Some((level, most));
    }
    let mut domains: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for node in e
        .cluster
        .nodes
        .iter()
        .filter(|n| n.model == Some(req.model))
    {
        if let Some(key) = node.domain_key(level) {
            *domains.entry(key).or_default() +=
                node.gpus.len() as u64 / u64::from(req.per_replica.max(1));
        }
    }
    let most = domains.into_values().max().unwrap_or(0);
    e.domain_memo.borrow_mut().insert(key, most);
    Some((level, most))
}

fn level_word(level: model::spec::TopologyLevel) -> &'static str {
    use model::spec::TopologyLevel as L;
    match level {
        L::None => "fleet",
        L::Node => "node",
        L::Rack => "rack",
        L::Zone => "zone",
    }
}

/// Replicas of the request's size that fit on free GPUs, over all nodes.
fn total_fitting(e: &Engine, req: &placement::Request) -> u64 {
    placement::largest_block(
        &e.cluster,
        req.model,
        req.per_replica,
        Some(model::spec::TopologyLevel::None),
    )
}

/// "waiting for preemption of a, b (grace 5m, ends 10:05)" or for stopping jobs.
pub fn waiting_for_runs(e: &Engine, runs: &[RunId]) -> String {
    let preempted: Vec<&super::Run> = runs
        .iter()
        .map(|r| &e.runs[*r as usize])
        .filter(|r| r.stopping == Stopping::Preempted)
        .collect();
    let others: Vec<String> = runs
        .iter()
        .map(|r| &e.runs[*r as usize])
        .filter(|r| r.stopping != Stopping::Preempted)
        .map(|r| {
            let why = match r.stopping {
                Stopping::Cancelled => "cancelled",
                Stopping::Terminated => "terminated",
                _ => "stopping",
            };
            format!("{} ({why})", r.name)
        })
        .collect();
    let mut parts = Vec::new();
    if !preempted.is_empty() {
        let names: Vec<&str> = preempted.iter().map(|r| r.name).collect();
        let grace = preempted
            .iter()
            .filter_map(|r| r.job)
            .map(|j| e.jobs[j as usize].grace)
            .max()
            .unwrap_or_default();
        let ends = preempted
            .iter()
            .filter_map(|r| r.ends_at)
            .max()
            .unwrap_or(e.now);
        parts.push(format!(
            "waiting for preemption of {} (grace {grace}, ends {})",
            list(&names, 5),
            clock_near(ends, e.now, true)
        ));
    }
    if !others.is_empty() {
        let names: Vec<&str> = others.iter().map(String::as_str).collect();
        parts.push(format!(
            "waiting for GPUs of stopping jobs: {}",
            list(&names, 5)
        ));
    }
    parts.join("; ")
}

/// "; backfill reservation from 12:30 on n1, n2 …"
pub fn reservation(e: &Engine, res: &Reservation) -> String {
    let (reserved, names) = reserved_gpus(e, res);
    format!(
        "; backfill reservation: expected to start by {} on {} ({reserved} free GPUs held; jobs whose time limit ends sooner may use them)",
        clock_near(res.start, e.now, false),
        list(&names, 4)
    )
}

/// How many free GPUs a reservation holds, and on which nodes.
fn reserved_gpus<'e>(e: &'e Engine, res: &Reservation) -> (usize, Vec<&'e str>) {
    let held = res
        .nodes
        .iter()
        .map(|n| {
            e.cluster
                .node(*n)
                .gpus
                .iter()
                .filter(|g| g.owner == Owner::Reserved)
                .count()
        })
        .sum();
    let names = res
        .nodes
        .iter()
        .map(|n| e.cluster.node(*n).name.as_str())
        .collect();
    (held, names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The clock texts are strftime's, byte for byte.
        #[test]
        fn clock_texts_are_strftimes(secs in -70_000_000_000i64..300_000_000_000i64, day in -3i64..3) {
            let t = chrono::DateTime::from_timestamp(secs, 0).expect("in range");
            let now = t + chrono::Duration::hours(day * 13);
            prop_assert_eq!(clock(t), t.format("%Y-%m-%d %H:%M").to_string());
            let near = if t.date_naive() == now.date_naive() {
                t.format("%H:%M").to_string()
            } else {
                t.format("%Y-%m-%d %H:%M").to_string()
            };
            prop_assert_eq!(clock_near(t, now, false), near);
        }
    }
}
