//! From a rule's text to a syntax tree that is safe to evaluate.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use cel_interpreter::{IdedExpr, ParseErrors};

use super::cost::{Shape, estimate};
use super::limits;
use super::patterns::Patterns;
use super::{COST_BUDGET, PolicyError, one_line};

/// A rule that passed every check before evaluation.
pub(super) struct Rule {
    pub(super) tree: IdedExpr,
    pub(super) regexes: Patterns,
}

/// Compiles a CEL expression: checks its text against the limits, parses it,
/// checks the tree and that some document could be within the cost budget.
///
/// The parser of cel-interpreter 0.10 panics on some invalid input (e.g.
/// `a &&`, cel-rust/cel-rust#191) instead of returning an error: the panic is
/// caught, kept off stderr, and reported as a syntax error.
pub(super) fn compile_expression(expression: &str) -> Result<Rule, PolicyError> {
    limits::check_text(expression)?;
    let tree = match quietly(|| cel_parser::Parser::default().parse(expression)) {
        Ok(Ok(tree)) => tree,
        Ok(Err(errors)) => {
            return Err(PolicyError::Compile(describe_parse_errors(
                &errors, expression,
            )));
        }
        Err(_) => {
            return Err(PolicyError::Compile(
                "syntax error (incomplete expression?)".to_string(),
            ));
        }
    };
    let regexes = limits::check_tree(&tree)?;
    let least = estimate(&tree, &Shape::scalar(), &regexes);
    if least > COST_BUDGET {
        return Err(PolicyError::Limit(format!(
            "exceeds the cost budget whatever the document (estimated {} > {COST_BUDGET})",
            shown_cost(least)
        )));
    }
    Ok(Rule { tree, regexes })
}

/// A cost estimate for messages: saturated estimates read as "more than".
pub(super) fn shown_cost(cost: u64) -> String {
    if cost == u64::MAX {
        format!("more than {}", u64::MAX / 2)
    } else {
        cost.to_string()
    }
}

thread_local! {
    /// Set while the CEL library runs, so that its panics are not printed.
    static QUIET_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Runs the CEL library, catching its panics and keeping them off stderr.
/// Panics elsewhere print as before.
pub(super) fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
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
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(false));
    result
}

/// The message of a caught panic, on one line and short.
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string());
    shorten(&one_line(&text), 120)
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub(super) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
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
