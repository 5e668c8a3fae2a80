//! Policies: CEL rules evaluated against matching documents, as Kubernetes
//! ValidatingAdmissionPolicy does. The document is the variable `object`,
//! with defaults filled in (`object.spec.replicas` is 1 when omitted).

use cel_interpreter::{Context, Program, Value as Cel};
use serde::Serialize;

use crate::diag::{Diagnostic, Origin};
use crate::load::yaml::PathSegment::{Index, Key};
use crate::load::{Document, Documents};
use crate::spec::{API_VERSION, Kind, Metadata, PolicySpec};

/// Why a policy rule could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The expression is not valid CEL.
    #[error("invalid CEL expression: {0}")]
    Compile(String),
}

/// A policy whose rules compiled.
pub struct CompiledPolicy<'a> {
    doc: &'a Document<PolicySpec>,
    rules: Vec<(usize, Program)>,
}

pub fn check(docs: &Documents, out: &mut Vec<Diagnostic>) {
    let compiled: Vec<CompiledPolicy> = docs.policies.iter().map(|p| compile(p, out)).collect();
    if compiled.iter().all(|p| p.rules.is_empty()) {
        return;
    }
    let root = Context::default();
    evaluate_kind(&compiled, Kind::NodePool, &docs.pools, &root, out);
    evaluate_kind(&compiled, Kind::Queue, &docs.queues, &root, out);
    evaluate_kind(
        &compiled,
        Kind::PriorityClass,
        &docs.priority_classes,
        &root,
        out,
    );
    evaluate_kind(&compiled, Kind::Job, &docs.jobs, &root, out);
    evaluate_kind(&compiled, Kind::Policy, &docs.policies, &root, out);
}

fn compile<'a>(doc: &'a Document<PolicySpec>, out: &mut Vec<Diagnostic>) -> CompiledPolicy<'a> {
    let mut rules = Vec::new();
    for (i, rule) in doc.object.spec.rules.iter().enumerate() {
        match Program::compile(&rule.expression) {
            Ok(program) => rules.push((i, program)),
            Err(err) => out.push(Diagnostic::new(
                doc.origin_at(&[Key("spec"), Key("rules"), Index(i), Key("expression")]),
                format!(
                    "Policy {}: spec.rules[{i}].expression: {}",
                    doc.name(),
                    PolicyError::Compile(one_line(&err.to_string()))
                ),
            )),
        }
    }
    CompiledPolicy { doc, rules }
}

/// The document as CEL sees it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a, S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a Metadata,
    spec: &'a S,
}

fn evaluate_kind<S: Serialize>(
    policies: &[CompiledPolicy],
    kind: Kind,
    docs: &[Document<S>],
    root: &Context,
    out: &mut Vec<Diagnostic>,
) {
    let relevant: Vec<&CompiledPolicy> = policies
        .iter()
        .filter(|p| {
            let kinds = &p.doc.object.spec.matches.kinds;
            !p.rules.is_empty() && (kinds.is_empty() || kinds.contains(&kind))
        })
        .collect();
    if relevant.is_empty() {
        return;
    }
    for doc in docs {
        let object = Object {
            api_version: API_VERSION,
            kind: kind.as_str(),
            metadata: &doc.object.metadata,
            spec: &doc.object.spec,
        };
        let mut ctx = root.new_inner_scope();
        if let Err(err) = ctx.add_variable("object", &object) {
            out.push(Diagnostic::new(
                doc.object.origin.clone(),
                format!("{kind} {}: cannot be given to policies: {err}", doc.name()),
            ));
            continue;
        }
        for policy in &relevant {
            let labels = &policy.doc.object.spec.matches.labels;
            if !labels
                .iter()
                .all(|(k, v)| doc.object.metadata.labels.get(k) == Some(v))
            {
                continue;
            }
            for (i, program) in &policy.rules {
                let rule = &policy.doc.object.spec.rules[*i];
                let problem = match program.execute(&ctx) {
                    Ok(Cel::Bool(true)) => continue,
                    Ok(Cel::Bool(false)) => rule
                        .message
                        .clone()
                        .unwrap_or_else(|| format!("rule failed: {}", rule.expression)),
                    Ok(other) => format!(
                        "rule {i} returned {other:?} instead of true or false: {}",
                        rule.expression
                    ),
                    Err(err) => format!(
                        "rule {i} could not be evaluated ({}): {}",
                        one_line(&err.to_string()),
                        rule.expression
                    ),
                };
                out.push(Diagnostic::new(
                    violation_origin(doc),
                    format!(
                        "{kind} {}: violates Policy {} ({}): {problem}",
                        doc.name(),
                        policy.doc.name(),
                        policy.doc.object.origin
                    ),
                ));
            }
        }
    }
}

fn violation_origin<S>(doc: &Document<S>) -> Origin {
    doc.origin_of(&["metadata", "name"])
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
