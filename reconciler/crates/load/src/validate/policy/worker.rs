//! The policy thread: compiles every rule and evaluates it against every
//! matching document on one thread with a large stack, within a deadline.
//!
//! The caller waits for the thread until the deadline. Past it, the thread is
//! told to stop after its current rule and left behind (it cannot be killed);
//! the rules it had not evaluated are reported as such.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use cel_interpreter::{Context, ExecutionError, Value as Cel};
use model::diag::{Diagnostic, Origin};
use model::spec::Kind;

use super::compile::{Rule, compile_expression, panic_message, quietly, shorten, shown_cost};
use super::cost::{Shape, estimate};
use super::{COST_BUDGET, STACK_BYTES, one_line};

/// Everything the thread needs, owned.
pub(super) struct Job {
    pub(super) policies: Vec<PolicyInput>,
    pub(super) documents: Vec<DocumentInput>,
}

/// A policy's name and rules.
pub(super) struct PolicyInput {
    pub(super) name: String,
    pub(super) rules: Vec<RuleInput>,
}

/// A rule as written.
pub(super) struct RuleInput {
    pub(super) expression: String,
    pub(super) message: Option<String>,
    /// Where the expression is.
    pub(super) origin: Origin,
}

/// A document as policies see it.
pub(super) struct DocumentInput {
    pub(super) kind: Kind,
    pub(super) name: String,
    /// Where violations are reported.
    pub(super) origin: Origin,
    /// The document as the CEL variable `object`.
    pub(super) object: Cel,
    /// The policies that match it, by index.
    pub(super) policies: Vec<usize>,
}

/// What the thread has finished: tasks are the policies' compilations, then
/// the documents' evaluations, in order.
#[derive(Default)]
struct Progress {
    diagnostics: Vec<Diagnostic>,
    done: usize,
    /// Whether each rule compiled, per policy compiled so far.
    compiled: Vec<Vec<bool>>,
}

struct Shared {
    progress: Mutex<Progress>,
    stop: AtomicBool,
}

impl Shared {
    fn finish_task(&self, diagnostics: Vec<Diagnostic>, compiled: Option<Vec<bool>>) {
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        progress.diagnostics.extend(diagnostics);
        progress.done += 1;
        if let Some(compiled) = compiled {
            progress.compiled.push(compiled);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `job` on the policy thread and returns its diagnostics, with the
/// rules left unevaluated at `deadline` (or by a failure) reported.
pub(super) fn run(job: Job, deadline: Duration) -> Vec<Diagnostic> {
    let job = Arc::new(job);
    let shared = Arc::new(Shared {
        progress: Mutex::new(Progress::default()),
        stop: AtomicBool::new(false),
    });
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let spawned = thread::Builder::new()
        .name("gitfleet-policies".to_string())
        .stack_size(STACK_BYTES)
        .spawn({
            let (job, shared) = (Arc::clone(&job), Arc::clone(&shared));
            move || {
                work(&job, &shared);
                // The caller may have gone at its deadline: nothing to tell.
                let _ = done_tx.send(());
            }
        });
    let why = match spawned {
        Err(err) => Some(format!("the policy thread could not start: {err}")),
        Ok(handle) => match done_rx.recv_timeout(deadline) {
            Ok(()) => {
                // It has finished; only its exit remains.
                let _ = handle.join();
                None
            }
            Err(RecvTimeoutError::Timeout) => Some(format!(
                "the policy check ran past its deadline of {} s",
                deadline.as_secs_f64()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Some("the policy check stopped unexpectedly".to_string())
            }
        },
    };
    shared.stop.store(true, Ordering::Relaxed);
    let mut progress = shared
        .progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut out = std::mem::take(&mut progress.diagnostics);
    if let Some(why) = why {
        out.extend(unfinished(&job, &progress, &why));
    }
    out
}

/// One diagnostic per rule with evaluations left undone.
fn unfinished(job: &Job, progress: &Progress, why: &str) -> Vec<Diagnostic> {
    let compiled_policies = progress.done.min(job.policies.len());
    let first_document = progress.done.saturating_sub(job.policies.len());
    // (policy, rule) -> the documents it was not evaluated for.
    let mut left: BTreeMap<(usize, usize), Vec<&DocumentInput>> = BTreeMap::new();
    for (p, policy) in job.policies.iter().enumerate().skip(compiled_policies) {
        for i in 0..policy.rules.len() {
            left.insert((p, i), Vec::new());
        }
    }
    for doc in job.documents.iter().skip(first_document) {
        for &p in &doc.policies {
            let Some(policy) = job.policies.get(p) else {
                continue;
            };
            for i in 0..policy.rules.len() {
                let compiled = progress
                    .compiled
                    .get(p)
                    .is_none_or(|c| c.get(i) == Some(&true));
                if compiled {
                    left.entry((p, i)).or_default().push(doc);
                }
            }
        }
    }
    left.into_iter()
        .filter_map(|((p, i), docs)| {
            let policy = job.policies.get(p)?;
            let rule = policy.rules.get(i)?;
            let which = match docs.as_slice() {
                [] => String::new(),
                [d] => format!(" for {} {}", d.kind, d.name),
                [d, rest @ ..] => format!(
                    " for {} {} and {} other document{}",
                    d.kind,
                    d.name,
                    rest.len(),
                    if rest.len() == 1 { "" } else { "s" }
                ),
            };
            Some(Diagnostic::new(
                rule.origin.clone(),
                format!(
                    "Policy {}: spec.rules[{i}].expression: not evaluated{which}: {why}",
                    policy.name
                ),
            ))
        })
        .collect()
}

/// The thread's work: compile, then evaluate document by document.
fn work(job: &Job, shared: &Shared) {
    let mut rules: Vec<Vec<Option<Rule>>> = Vec::with_capacity(job.policies.len());
    for policy in &job.policies {
        if shared.stopped() {
            return;
        }
        let mut diagnostics = Vec::new();
        let compiled: Vec<Option<Rule>> = policy
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| match compile_expression(&rule.expression) {
                Ok(compiled) => Some(compiled),
                Err(err) => {
                    diagnostics.push(Diagnostic::new(
                        rule.origin.clone(),
                        format!("Policy {}: spec.rules[{i}].expression: {err}", policy.name),
                    ));
                    None
                }
            })
            .collect();
        shared.finish_task(
            diagnostics,
            Some(compiled.iter().map(Option::is_some).collect()),
        );
        rules.push(compiled);
    }
    let shapes: Vec<Shape> = job.documents.iter().map(|d| Shape::of(&d.object)).collect();
    let largest = shapes.iter().fold(Shape::scalar(), |a, s| a.join(s));
    // A rule within the budget for the join of all documents is within it
    // for each: the estimate only grows with the sizes.
    let always_within: Vec<Vec<bool>> = rules
        .iter()
        .map(|policy| {
            policy
                .iter()
                .map(|r| {
                    r.as_ref()
                        .is_some_and(|r| estimate(&r.tree, &largest, &r.regexes) <= COST_BUDGET)
                })
                .collect()
        })
        .collect();
    let mut root = Context::default();
    root.add_function("matches", super::patterns::matches);
    for (doc, shape) in job.documents.iter().zip(&shapes) {
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("object", doc.object.clone());
        let mut diagnostics = Vec::new();
        for &p in &doc.policies {
            let (Some(policy), Some(compiled)) = (job.policies.get(p), rules.get(p)) else {
                continue;
            };
            for (i, rule) in compiled.iter().enumerate() {
                if shared.stopped() {
                    return;
                }
                let (Some(rule), Some(input)) = (rule, policy.rules.get(i)) else {
                    continue;
                };
                let within = always_within
                    .get(p)
                    .and_then(|w| w.get(i))
                    .copied()
                    .unwrap_or(false);
                let problem = evaluate(rule, input, within, shape, &ctx);
                if let Some(problem) = problem {
                    diagnostics.push(Diagnostic::new(
                        doc.origin.clone(),
                        format!(
                            "{} {}: violates Policy {} ({}): {problem}",
                            doc.kind, doc.name, policy.name, input.origin
                        ),
                    ));
                }
            }
        }
        shared.finish_task(diagnostics, None);
    }
}

/// What is wrong with a document under one rule, if anything.
fn evaluate(
    rule: &Rule,
    input: &RuleInput,
    within: bool,
    shape: &Shape,
    ctx: &Context,
) -> Option<String> {
    let expression = one_line(&input.expression);
    if !within {
        let cost = estimate(&rule.tree, shape, &rule.regexes);
        if cost > COST_BUDGET {
            return Some(format!(
                "rule not evaluated: it exceeds the cost budget for this document (estimated {} > {COST_BUDGET}): {expression}",
                shown_cost(cost)
            ));
        }
    }
    let problem = match quietly(|| cel_interpreter::Value::resolve(&rule.tree, ctx)) {
        Ok(Ok(Cel::Bool(true))) => return None,
        Ok(Ok(Cel::Bool(false))) => input
            .message
            .clone()
            .unwrap_or_else(|| format!("rule failed: {expression}")),
        Ok(Ok(other)) => format!(
            "rule returned {} instead of true or false: {expression}",
            show(&other)
        ),
        Ok(Err(err)) => {
            let hint = match err {
                ExecutionError::NoSuchKey(_) => " (test optional fields with has() first)",
                _ => "",
            };
            format!(
                "rule could not be evaluated: {}{hint}: {expression}",
                shorten(&one_line(&err.to_string()), 300),
            )
        }
        Err(payload) => format!(
            "rule could not be evaluated: the CEL library failed on it ({}): {expression}",
            panic_message(payload.as_ref())
        ),
    };
    Some(problem)
}

/// A CEL value as a user would write it, with its type.
fn show(value: &Cel) -> String {
    let kind = value.type_of();
    match value {
        Cel::Int(i) => format!("{kind} {i}"),
        Cel::UInt(u) => format!("{kind} {u}"),
        Cel::Float(f) => format!("{kind} {f}"),
        Cel::String(s) => format!("{kind} {:?}", shorten(s, 100)),
        Cel::Null => "null".to_string(),
        _ => format!("a {kind}"),
    }
}
