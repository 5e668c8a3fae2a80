#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! Hostile policy rules: each is reported as a clear diagnostic naming the
//! policy and rule, never a crash, a hang or a memory blow-up, and the whole
//! load finishes quickly.

use std::time::{Duration, Instant};

use gitfleet_load::validate::{COST_BUDGET, MAX_AST_DEPTH, MAX_EXPRESSION_BYTES, MAX_NESTING};
use gitfleet_load::{SourceFile, load_fleet};

/// Generous for a debug build on a busy machine; each case takes far less.
const QUICK: Duration = Duration::from_secs(5);

const FLEET: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: j}\nspec: {queue: q, replicas: 2, gpusPerReplica: 1, command: [a, b, c]}\n";

/// A policy on jobs with one rule, as a YAML document.
fn policy(expression: &str) -> String {
    format!(
        "---\napiVersion: gitfleet/v1\nkind: Policy\nmetadata: {{name: bomb}}\nspec:\n  match: {{kinds: [Job]}}\n  rules:\n    - expression: |-\n        {expression}\n"
    )
}

/// Loads the fleet with extra documents and returns the diagnostics as
/// `file:line:col: message`, checking that it was quick.
fn load(extra: &str) -> Vec<String> {
    let text = format!("{FLEET}{extra}");
    let start = Instant::now();
    let loaded = load_fleet(&[SourceFile::new("f.yaml", text)]);
    let took = start.elapsed();
    assert!(took < QUICK, "took {took:?}");
    eprintln!("loaded in {took:?}");
    loaded.diagnostics.iter().map(ToString::to_string).collect()
}

/// The one diagnostic of a fleet with `policy(expression)`, which must be
/// an error on the rule's expression (line 18 of the text) containing `want`.
fn rule_error(expression: &str, want: &str) -> String {
    let found = load(&policy(expression));
    assert_eq!(found.len(), 1, "{found:?}");
    let prefix = "f.yaml:18:9: Policy bomb: spec.rules[0].expression: ";
    assert!(
        found[0].starts_with(prefix) && found[0].contains(want),
        "{:.300}",
        found[0]
    );
    found[0].clone()
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

#[test]
fn deeply_nested_parentheses_are_a_nesting_error() {
    let bomb = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
    let err = rule_error(&bomb, "brackets nested too deeply");
    assert!(
        err.contains(&format!("more than {MAX_NESTING} levels at column 33")),
        "{err}"
    );
}

#[test]
fn deeply_nested_lists_and_maps_are_a_nesting_error() {
    rule_error(
        &format!("{}1{}", "[".repeat(3000), "]".repeat(3000)),
        "brackets nested too deeply",
    );
    rule_error(
        &format!("{}1{}", "{1: ".repeat(100), "}".repeat(100)),
        "brackets nested too deeply",
    );
}

#[test]
fn a_long_chain_is_too_long_or_too_deep() {
    // 20,000 terms: beyond the length limit, never parsed.
    let err = rule_error(
        &chain("1", " + ", 20_000),
        "expression too long: 79997 bytes",
    );
    assert!(
        err.contains(&format!("the limit is {MAX_EXPRESSION_BYTES}")),
        "{err}"
    );
    // 5,000 terms within the length limit: parsed (deep, on the policy
    // thread's stack), then refused for its depth before being evaluated.
    let err = rule_error(&chain("1", "+", 5_000), "expression nested too deeply");
    assert!(
        err.contains(&format!("more than {MAX_AST_DEPTH} levels")),
        "{err}"
    );
    rule_error(
        &format!("a{}", ".b".repeat(4_000)),
        "expression nested too deeply",
    );
    rule_error(&chain("1", "==", 3_000), "expression nested too deeply");
    rule_error(
        &format!("{}1", "1 ? 1 : ".repeat(1_200)),
        "expression nested too deeply",
    );
}

#[test]
fn long_and_or_chains_stay_shallow_and_work() {
    // The parser balances && and ||: 1,000 terms are 10 levels deep.
    assert_eq!(
        load(&policy(&chain("object.spec.replicas > 0", " && ", 300))),
        Vec::<String>::new()
    );
    let found = load(&policy(&chain("object.spec.replicas > 5", " || ", 300)));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("violates Policy bomb"), "{found:?}");
}

#[test]
fn repeated_negations_are_refused_before_parsing() {
    // The parser does twice the work under each `!!`: 30 nested ones would
    // take hours.
    let bomb = format!("{}true{}", "!!(".repeat(30), ")".repeat(30));
    rule_error(
        &bomb,
        "`!` or `-` repeated (as in `!!x`) more than 2 times at column 7",
    );
}

#[test]
fn message_literals_are_refused_not_run() {
    // The library parses these and panics (todo!) when evaluating them.
    rule_error(
        "Foo{a: 1} == Foo{a: 1}",
        "not supported: message literals such as `Foo{…}`",
    );
    rule_error(
        "google.protobuf.Int64Value{value: 1} == 1",
        "`google.protobuf.Int64Value{…}`",
    );
}

#[test]
fn nested_comprehensions_over_literals_exceed_the_budget() {
    let list = format!(
        "[{}]",
        (1..=30)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let vars = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let mut bomb = "a + b + c + d + e + f + g + h > 0".to_string();
    for v in vars.iter().rev() {
        bomb = format!("{list}.all({v}, {bomb})");
    }
    let err = rule_error(
        &bomb,
        "exceeds the cost budget whatever the document (estimated ",
    );
    assert!(err.contains(&format!(" > {COST_BUDGET})")), "{err}");
}

#[test]
fn nested_maps_building_lists_of_lists_exceed_the_budget() {
    let list = format!("[{}]", vec!["1"; 30].join(","));
    let bomb =
        format!("{list}.map(a, {list}.map(b, {list}.map(c, {list}.map(d, {list})))).size() > 0");
    rule_error(&bomb, "exceeds the cost budget whatever the document");
}

#[test]
fn doubling_strings_exceed_the_budget() {
    let mut bomb = "size(s24) > 0".to_string();
    for i in (0..24).rev() {
        bomb = format!("[s{i} + s{i}].all(s{}, {bomb})", i + 1);
    }
    let bomb = format!("['{}'].all(s0, {bomb})", "x".repeat(100));
    rule_error(&bomb, "exceeds the cost budget whatever the document");
}

#[test]
fn large_list_literals_are_fine_alone_and_bounded_when_nested() {
    let list = format!("[{}]", vec!["1"; 2_400].join(","));
    assert_eq!(
        load(&policy(&format!("{list}.all(x, x == 1)"))),
        Vec::<String>::new()
    );
    rule_error(
        &format!("{list}.exists(x, {list}.exists(y, x != y))"),
        "exceeds the cost budget whatever the document",
    );
}

#[test]
fn a_rule_too_costly_for_one_document_is_reported_for_it_and_runs_for_others() {
    let args: Vec<String> = (0..5_000).map(|i| format!("arg{i}")).collect();
    let big = format!(
        "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: big}}\nspec: {{queue: q, gpusPerReplica: 1, command: [{}]}}\n",
        args.join(", ")
    );
    // 5,000 steps each copying the growing list: over the budget for `big`;
    // `j` (3 arguments) runs, and fails since "a" + "a" is 2 bytes long.
    let rule = "object.spec.command.map(c, c + c).all(c, c.size() < 2)";
    let found = load(&format!("{big}{}", policy(rule)));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found.iter().any(|f| f.starts_with("f.yaml:13:18: Job big: violates Policy bomb (f.yaml:23:9): rule not evaluated: it exceeds the cost budget for this document (estimated ")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|f| f
            .starts_with("f.yaml:8:18: Job j: violates Policy bomb (f.yaml:23:9): rule failed")),
        "{found:#?}"
    );
}

#[test]
fn library_panics_at_evaluation_become_diagnostics() {
    // cel-interpreter 0.10 hits todo!() for a comprehension over a number.
    let found = load(&policy("object.spec.replicas.all(x, x > 0)"));
    assert_eq!(
        found,
        [
            "f.yaml:8:18: Job j: violates Policy bomb (f.yaml:18:9): rule could not be evaluated: the CEL library failed on it (not yet implemented: Support Int(2)): object.spec.replicas.all(x, x > 0)"
        ]
    );
}

#[test]
fn regular_expressions_are_bounded() {
    assert_eq!(
        load(&policy("object.metadata.name.matches('^[a-z]+$')")),
        Vec::<String>::new()
    );
    rule_error(
        "object.metadata.name.matches(object.spec.queue)",
        "not supported: matches() needs a string literal as its pattern",
    );
    rule_error(
        "'a'.matches('\\\\w{100}')",
        "regular expression too complex",
    );
}

#[test]
fn the_heaviest_accepted_expressions_load_quickly() {
    // Brackets as deep as allowed, as often as the length allows: parsed,
    // checked and evaluated.
    // Inside `size([…])`, two levels down.
    let deep = MAX_NESTING - 2;
    for (open, close, levels) in [("[", "]", 1), ("(", ")", 1), ("[[1].map(x, ", ")]", 2)] {
        let n = deep / levels;
        let nest = format!("{}1{}", open.repeat(n), close.repeat(n));
        let mut bomb = String::new();
        while bomb.len() + 2 * nest.len() + 20 < MAX_EXPRESSION_BYTES {
            bomb.push_str(&nest);
            bomb.push_str(" + ");
        }
        bomb.push_str(&nest);
        let found = load(&policy(&format!("size([{bomb}]) == 1")));
        assert!(
            found.is_empty() || found[0].contains("violates Policy bomb"),
            "{:.300}",
            found[0]
        );
    }
}

#[test]
fn random_token_soup_parses_quickly() {
    // Whatever passes the text checks, the parser handles in bounded time.
    let tokens = [
        "(", ")", "[", "]", "{", "}", "!", "-", "+", "*", "?", ":", ".", ",", "a", "1", "'s'",
        "&&", "||", "==", "in", ".all(x,", "size(", "\"", "r'", "//", "Foo{", "'''",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..6 {
        let (mut text, mut depth, mut last) = (String::new(), 0usize, "");
        while text.len() < MAX_EXPRESSION_BYTES - 10 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let token = tokens[(seed % tokens.len() as u64) as usize];
            let opens = token.ends_with(['(', '[', '{']);
            let repeats = matches!(token, "!" | "-") && matches!(last, "!" | "-");
            if (opens && depth >= MAX_NESTING - 2) || repeats {
                continue;
            }
            if opens {
                depth += 1;
            } else if matches!(token, ")" | "]" | "}") {
                depth = depth.saturating_sub(1);
            }
            text.push_str(token);
            text.push(' ');
            last = token;
        }
        // Whatever the outcome, it is quick and does not crash.
        let found = load(&policy(&text));
        eprintln!("{:.200}", found.first().map_or("", String::as_str));
    }
}
