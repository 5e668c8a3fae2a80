//! Policies: CEL rules evaluated against matching documents, as Kubernetes
//! ValidatingAdmissionPolicy does. The document is the variable `object`,
//! with defaults filled in (`object.spec.replicas` is 1 when omitted).
//!
//! A rule can never crash, hang or exhaust memory: its text and syntax tree
//! are bounded ([`limits`]), its cost is estimated against each document and
//! must be within [`COST_BUDGET`] ([`cost`]), and everything runs on one
//! thread with a large stack, library panics caught, within [`DEADLINE`]
//! ([`worker`]). See "Policy limits" in docs/semantics.md.

mod compile;
mod cost;
mod limits;
mod patterns;
mod worker;

use std::time::Duration;

use cel_interpreter::Value as Cel;
use serde::Serialize;

use crate::doc_view::{DocRef, DocSlice, DocsView};
use crate::yaml::PathSegment::{Index, Key};
use model::diag::{Diagnostic, Origin};
use model::spec::{API_VERSION, Kind, Metadata, PolicySpec};

#[cfg(test)]
use compile::compile_expression;
pub use limits::{
    MAX_AST_DEPTH, MAX_EXPRESSION_BYTES, MAX_NESTING, MAX_REGEX_BYTES, MAX_REPEATED_UNARY,
};
use worker::{DocumentInput, Job, PolicyInput, RuleInput};

/// The most a rule may cost against one document, in the estimate's units
/// (about one evaluation step each): Kubernetes' per-expression limit for
/// CEL validation rules (`PerCallLimit`, "roughly 0.1 second").
pub const COST_BUDGET: u64 = 1_000_000;

/// How long the whole policy check may take; rules not evaluated by then
/// are reported as such.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The policy thread's stack. The worst expressions the limits accept need
/// less than 8 MiB in a debug build (parsing takes about 11 KiB per nested
/// bracket, evaluation about 29 KiB per tree level) and far less optimized;
/// even 10,000 bytes of nested brackets, were the bracket count fooled,
/// parse in 53 MiB. Only the pages used are ever committed.
const STACK_BYTES: usize = 256 << 20;

/// Why a policy rule could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The expression is not valid CEL.
    #[error("invalid CEL expression: {0}")]
    Compile(String),
    /// The expression is beyond one of the limits.
    #[error("{0}")]
    Limit(String),
    /// The expression uses what policies cannot evaluate.
    #[error("not supported: {0}")]
    Unsupported(String),
}

/// Compiles every policy's rules and evaluates them against every matching
/// document, appending what is wrong to `out`.
pub fn check(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>) {
    check_within(docs, out, DEADLINE);
}

fn check_within(docs: &DocsView<'_>, out: &mut Vec<Diagnostic>, deadline: Duration) {
    if docs.policies.iter().all(|p| p.object.spec.rules.is_empty()) {
        return;
    }
    let policies: Vec<PolicyInput> = docs
        .policies
        .iter()
        .map(|p| PolicyInput {
            name: p.name().to_string(),
            rules: (p.object.spec.rules.iter().enumerate())
                .map(|(i, rule)| RuleInput {
                    expression: rule.expression.clone(),
                    message: rule.message.clone(),
                    origin: rule_origin(p, i),
                })
                .collect(),
        })
        .collect();
    let mut documents = Vec::new();
    let policy_docs = docs.policies;
    add_kind(policy_docs, Kind::NodePool, docs.pools, &mut documents, out);
    add_kind(policy_docs, Kind::Queue, docs.queues, &mut documents, out);
    add_kind(
        policy_docs,
        Kind::PriorityClass,
        docs.priority_classes,
        &mut documents,
        out,
    );
    add_kind(policy_docs, Kind::Job, docs.jobs, &mut documents, out);
    add_kind(
        policy_docs,
        Kind::Policy,
        docs.policies,
        &mut documents,
        out,
    );
    out.extend(worker::run(
        Job {
            policies,
            documents,
        },
        deadline,
    ));
}

fn rule_origin(doc: DocRef<'_, PolicySpec>, i: usize) -> Origin {
    doc.origin_at(&[Key("spec"), Key("rules"), Index(i), Key("expression")])
}

/// Fields that serialization leaves out when empty are present (and empty)
/// in what CEL sees, as Kubernetes defaulting would have them: rules can say
/// `object.metadata.labels.team == "nlp"` style checks after `has()` on the
/// key alone, and `size(object.spec.command)` works without a guard.
fn fill_empty_fields(kind: Kind, json: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let fields: &[(&str, &str, Value)] = &[
        ("metadata", "labels", json!({})),
        ("metadata", "annotations", json!({})),
    ];
    let spec_fields: Vec<(&str, Value)> = match kind {
        Kind::NodePool => vec![("labels", json!({}))],
        Kind::Queue => vec![("quota", json!([]))],
        Kind::Job => vec![("command", json!([])), ("env", json!({}))],
        Kind::PriorityClass | Kind::Policy => vec![],
    };
    for (parent, key, empty) in fields {
        if let Some(obj) = json.get_mut(*parent).and_then(Value::as_object_mut) {
            obj.entry(key.to_string()).or_insert_with(|| empty.clone());
        }
    }
    if let Some(spec) = json.get_mut("spec").and_then(Value::as_object_mut) {
        for (key, empty) in spec_fields {
            spec.entry(key.to_string()).or_insert(empty);
        }
    }
}

/// JSON to CEL with every integer as a signed `int`, as Kubernetes CEL types
/// integer fields, so `object.spec.replicas * 8` and `max - min` just work.
fn to_cel(json: &serde_json::Value) -> Cel {
    use serde_json::Value;
    match json {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(std::sync::Arc::new(s.clone())),
        Value::Array(items) => Cel::List(std::sync::Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: std::collections::HashMap<String, Cel> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(entries)
        }
    }
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

/// The documents of one kind that some policy with rules matches, as
/// policies see them.
fn add_kind<S: Serialize>(
    policies: DocSlice<'_, PolicySpec>,
    kind: Kind,
    docs: DocSlice<'_, S>,
    documents: &mut Vec<DocumentInput>,
    out: &mut Vec<Diagnostic>,
) {
    for doc in docs.iter() {
        let matching: Vec<usize> = (policies.iter().enumerate())
            .filter(|(_, p)| {
                let spec = &p.object.spec;
                !spec.rules.is_empty()
                    && (spec.matches.kinds.is_empty() || spec.matches.kinds.contains(&kind))
                    && (spec.matches.labels.iter())
                        .all(|(k, v)| doc.object.metadata.labels.get(k) == Some(v))
            })
            .map(|(i, _)| i)
            .collect();
        if matching.is_empty() {
            continue;
        }
        let object = Object {
            api_version: API_VERSION,
            kind: kind.as_str(),
            metadata: &doc.object.metadata,
            spec: &doc.object.spec,
        };
        match serde_json::to_value(&object) {
            Ok(mut json) => {
                fill_empty_fields(kind, &mut json);
                documents.push(DocumentInput {
                    kind,
                    name: doc.name().to_string(),
                    origin: violation_origin(doc),
                    object: to_cel(&json),
                    policies: matching,
                });
            }
            Err(err) => out.push(Diagnostic::new(
                doc.object.origin.clone(),
                format!("{kind} {}: cannot be given to policies: {err}", doc.name()),
            )),
        }
    }
}

fn violation_origin<S>(doc: DocRef<'_, S>) -> Origin {
    doc.origin_of(&["metadata", "name"])
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SourceFile, load_fleet};

    fn violations(yaml: &str) -> Vec<String> {
        let loaded = load_fleet(&[SourceFile::new("f.yaml", yaml)]);
        loaded
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect()
    }

    const FLEET: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, replicas: 9, gpusPerReplica: 1}\n---\n";

    #[test]
    fn integers_are_signed_as_in_kubernetes_cel() {
        let policy = "apiVersion: gitfleet/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  match: {kinds: [Job]}\n  rules:\n    - {expression: 'object.spec.replicas * 8 <= 64', message: too big}\n    - {expression: 'object.spec.gpusPerReplica - 2 < 0', message: negative works}\n";
        let found = violations(&format!("{FLEET}{policy}"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("too big"), "{found:?}");
    }

    #[test]
    fn empty_maps_and_lists_are_present() {
        let policy = "apiVersion: gitfleet/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  match: {kinds: [Job]}\n  rules:\n    - {expression: '!has(object.metadata.labels.team)', message: no team}\n    - {expression: 'size(object.spec.command) == 0 && size(object.spec.env) == 0', message: empty}\n";
        assert_eq!(
            violations(&format!("{FLEET}{policy}")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn parser_panics_become_syntax_errors() {
        for bad in ["object.spec.replicas &&", "1 +", "!", "\"abc"] {
            let err = compile_expression(bad).err();
            assert!(
                matches!(&err, Some(PolicyError::Compile(m)) if m.starts_with("syntax error")),
                "{bad}: {err:?}"
            );
        }
        // Panics elsewhere still reach the previous hook and unwind as usual.
        assert!(std::panic::catch_unwind(|| panic!("other")).is_err());
    }

    #[test]
    fn syntax_errors_name_the_column_without_the_snippet() {
        let err = compile_expression("object.spec.replicas <= (8").err();
        assert_eq!(
            err,
            Some(PolicyError::Compile(
                "syntax error at column 27: missing ')' at end of expression".to_string()
            ))
        );
    }

    #[test]
    fn non_boolean_results_and_missing_fields_are_reported_per_rule() {
        let text = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n---\napiVersion: gitfleet/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  match: {kinds: [Queue]}\n  rules:\n    - expression: object.spec.weight\n    - expression: object.spec.parent == 'x'\n";
        let got: Vec<String> = load_fleet(&[SourceFile::new("a.yaml", text)])
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "a.yaml:3:18: Queue q: violates Policy p (a.yaml:12:19): rule returned int 1 instead of true or false: object.spec.weight",
                "a.yaml:3:18: Queue q: violates Policy p (a.yaml:13:19): rule could not be evaluated: No such key: parent (test optional fields with has() first): object.spec.parent == 'x'",
            ]
        );
    }

    #[test]
    fn rules_not_evaluated_by_the_deadline_are_reported() {
        let mut text = String::from(FLEET);
        for i in 0..2_000 {
            text.push_str(&format!("apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: j{i}}}\nspec: {{queue: q, gpusPerReplica: 1, command: [a, b, c, d, e, f, g, h]}}\n---\n"));
        }
        text.push_str("apiVersion: gitfleet/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  match: {kinds: [Job]}\n  rules:\n    - expression: object.spec.command.all(c, [c, c, c].exists(d, d == 'x') == false)\n");
        let mut diagnostics = Vec::new();
        let docs = crate::parse_files(&[SourceFile::new("f.yaml", text)], &mut diagnostics);
        assert_eq!(diagnostics.len(), 0, "{diagnostics:?}");
        let start = std::time::Instant::now();
        check_within(
            &DocsView::of_documents(&docs),
            &mut diagnostics,
            Duration::from_millis(1),
        );
        let took = start.elapsed();
        assert!(took < Duration::from_millis(500), "{took:?}");
        let [late] = diagnostics.as_slice() else {
            panic!("{diagnostics:#?}");
        };
        assert!(
            late.message
                .starts_with("Policy p: spec.rules[0].expression: not evaluated for Job ")
                && late.message.ends_with(
                    " other documents: the policy check ran past its deadline of 0.001 s"
                ),
            "{}",
            late.message
        );
    }

    /// The heaviest expressions the limits let through need a small part of
    /// the policy thread's stack: here they run on an eighth of it.
    #[test]
    fn the_worst_accepted_expressions_use_little_stack() {
        let nest = |open: &str, close: &str, inner: &str| {
            format!(
                "{}{inner}{}",
                open.repeat(MAX_NESTING),
                close.repeat(MAX_NESTING)
            )
        };
        let deepest_sum = vec!["1"; MAX_AST_DEPTH - 1].join("+");
        let heavy = [
            // Brackets as deep as allowed, as often as the length allows.
            vec![nest("[", "]", "1"); 140]
                .join(" + ")
                .replace("+ ", "+"),
            vec![nest("(", ")", "1"); 140].join("+"),
            nest("size(", ")", &deepest_sum[..deepest_sum.len() - 64]),
            // The deepest tree allowed, evaluated.
            format!("{deepest_sum} > 0"),
            // Deep trees the parser builds and the depth limit refuses.
            vec!["1"; 4_999].join("+"),
            format!("{}1", "1 ? 1 : ".repeat(1_249)),
            format!("a{}", ".b".repeat(4_999)),
        ];
        std::thread::Builder::new()
            .stack_size(STACK_BYTES / 8)
            .spawn(move || {
                let root = cel_interpreter::Context::default();
                let mut accepted = 0;
                for expression in &heavy {
                    assert!(
                        expression.len() <= MAX_EXPRESSION_BYTES,
                        "{}",
                        expression.len()
                    );
                    if let Ok(rule) = compile_expression(expression) {
                        accepted += 1;
                        let _ = cel_interpreter::Value::resolve(&rule.tree, &root);
                    }
                }
                assert_eq!(accepted, 4);
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
    }
}
