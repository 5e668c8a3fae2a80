//! Policies: CEL rules evaluated against matching documents, as Kubernetes
//! ValidatingAdmissionPolicy does. The document is the variable `object`,
//! with defaults filled in (`object.spec.replicas` is 1 when omitted).

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use cel_interpreter::{Context, ExecutionError, ParseErrors, Program, Value as Cel};
use serde::Serialize;

use crate::yaml::PathSegment::{Index, Key};
use crate::{Document, Documents};
use model::diag::{Diagnostic, Origin};
use model::spec::{API_VERSION, Kind, Metadata, PolicySpec};

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
        match compile_expression(&rule.expression) {
            Ok(program) => rules.push((i, program)),
            Err(err) => out.push(Diagnostic::new(
                rule_origin(doc, i),
                format!("Policy {}: spec.rules[{i}].expression: {err}", doc.name()),
            )),
        }
    }
    CompiledPolicy { doc, rules }
}

fn rule_origin(doc: &Document<PolicySpec>, i: usize) -> Origin {
    doc.origin_at(&[Key("spec"), Key("rules"), Index(i), Key("expression")])
}

thread_local! {
    /// Set while the CEL parser runs, so that its panics are not printed.
    static QUIET_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Compiles a CEL expression. The parser of cel-interpreter 0.10 panics on
/// some invalid input (e.g. `a &&`, cel-rust/cel-rust#191) instead of
/// returning an error: the panic is caught, kept off stderr, and reported as
/// a syntax error. Other panics print as before.
fn compile_expression(expression: &str) -> Result<Program, PolicyError> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET_PANICS.with(|q| q.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(|| Program::compile(expression)));
    QUIET_PANICS.with(|q| q.set(false));
    match result {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(errors)) => Err(PolicyError::Compile(describe_parse_errors(
            &errors, expression,
        ))),
        Err(_) => Err(PolicyError::Compile(
            "syntax error (incomplete expression?)".to_string(),
        )),
    }
}

/// The first syntax error, with its place in the expression and without the
/// parser's snippet.
fn describe_parse_errors(errors: &ParseErrors, expression: &str) -> String {
    let first = errors
        .errors
        .iter()
        .find(|e| e.msg.starts_with("Syntax error"))
        .or_else(|| errors.errors.first());
    let Some(err) = first else {
        return "syntax error".to_string();
    };
    let msg = err.msg.trim_start_matches("Syntax error: ");
    let msg = one_line(&msg.replace("'<EOF>'", "end of expression"));
    let (line, column) = err.pos;
    if expression.trim_end().contains('\n') {
        format!("syntax error at line {line}, column {column}: {msg}")
    } else {
        format!("syntax error at column {column}: {msg}")
    }
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
        match serde_json::to_value(&object) {
            Ok(mut json) => {
                fill_empty_fields(kind, &mut json);
                ctx.add_variable_from_value("object", to_cel(&json));
            }
            Err(err) => {
                out.push(Diagnostic::new(
                    doc.object.origin.clone(),
                    format!("{kind} {}: cannot be given to policies: {err}", doc.name()),
                ));
                continue;
            }
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
                let expression = one_line(&rule.expression);
                let problem = match program.execute(&ctx) {
                    Ok(Cel::Bool(true)) => continue,
                    Ok(Cel::Bool(false)) => rule
                        .message
                        .clone()
                        .unwrap_or_else(|| format!("rule failed: {expression}")),
                    Ok(other) => format!(
                        "rule returned {} instead of true or false: {expression}",
                        show(&other)
                    ),
                    Err(err) => {
                        let hint = match err {
                            ExecutionError::NoSuchKey(_) => {
                                " (test optional fields with has() first)"
                            }
                            _ => "",
                        };
                        format!(
                            "rule could not be evaluated: {}{hint}: {expression}",
                            one_line(&err.to_string()),
                        )
                    }
                };
                out.push(Diagnostic::new(
                    violation_origin(doc),
                    format!(
                        "{kind} {}: violates Policy {} ({}): {problem}",
                        doc.name(),
                        policy.doc.name(),
                        rule_origin(policy.doc, *i)
                    ),
                ));
            }
        }
    }
}

fn violation_origin<S>(doc: &Document<S>) -> Origin {
    doc.origin_of(&["metadata", "name"])
}

/// A CEL value as a user would write it, with its type.
fn show(value: &Cel) -> String {
    let kind = value.type_of();
    match value {
        Cel::Int(i) => format!("{kind} {i}"),
        Cel::UInt(u) => format!("{kind} {u}"),
        Cel::Float(f) => format!("{kind} {f}"),
        Cel::String(s) => format!("{kind} {s:?}"),
        Cel::Null => "null".to_string(),
        _ => format!("a {kind}"),
    }
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
}
