//! The cost of evaluating a rule against one document, estimated before the
//! rule runs, as Kubernetes' CEL cost estimator does but with the document's
//! actual sizes instead of schema bounds.
//!
//! A cost unit is one step of the library's evaluator: visiting a node,
//! copying or comparing one element or one byte, inserting a variable. The
//! estimate follows what cel-interpreter 0.10 actually does and is an upper
//! bound of it: a comprehension (`all`, `exists`, `exists_one`, `map`,
//! `filter`) costs its range's size bound times its body's cost, plus the
//! accumulator that `map` and `filter` copy at every step (quadratic in this
//! library); `+` costs the sizes it copies; `==` the smaller side's size; a
//! function call its arguments (which the library clones) and its own work.
//! Sizes come from literals, from the document (level by level, see
//! [`Shape`]) and from the operations that build values. Since every unit of
//! work allocates at most a few words, the budget bounds memory too.

use cel_interpreter::{IdedExpr, Value as Cel};
use cel_parser::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, operators as op};
use cel_parser::reference::Val;

use super::patterns::{Pattern, Patterns};

/// Bounds on a value, level by level: `levels[0]` bounds the value itself,
/// `levels[1]` its elements, map keys and map values, and so on. Values
/// deeper than the last level are scalars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shape(Vec<Level>);

/// Bounds on the values at one level of a [`Shape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Level {
    /// Elements of a list, entries of a map.
    items: u64,
    /// Bytes of a string or bytes value.
    bytes: u64,
    /// Total size: one per value, plus the bytes of its strings and keys.
    weight: u64,
}

const SCALAR: Level = Level {
    items: 0,
    bytes: 0,
    weight: 1,
};

/// The longest string a conversion (`string(1e300)`, a duration) yields.
const CONVERTED_BYTES: u64 = 400;

/// Functions of the library's default context: a field selection with one of
/// these names yields the function bound to the whole operand when the field
/// is missing.
const FUNCTIONS: [&str; 24] = [
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

impl Shape {
    /// A number, boolean, null, duration or timestamp.
    pub(super) fn scalar() -> Self {
        Shape(vec![SCALAR])
    }

    fn string(bytes: u64) -> Self {
        Shape(vec![Level {
            items: 0,
            bytes,
            weight: bytes.saturating_add(1),
        }])
    }

    fn container(top: Level, elements: Shape) -> Self {
        let mut levels = Vec::with_capacity(elements.0.len() + 1);
        levels.push(top);
        levels.extend(elements.0);
        Shape(levels)
    }

    fn top(&self) -> Level {
        self.0.first().copied().unwrap_or(SCALAR)
    }

    /// Bounds on the elements, keys and values of the value.
    fn elements(&self) -> Shape {
        if self.0.len() > 1 {
            Shape(self.0[1..].to_vec())
        } else {
            Shape::scalar()
        }
    }

    /// The longest string or bytes value at any level.
    fn longest_string(&self) -> u64 {
        self.0.iter().map(|l| l.bytes).max().unwrap_or(0)
    }

    /// Bounds holding for a value of either shape.
    pub(super) fn join(&self, other: &Shape) -> Shape {
        let n = self.0.len().max(other.0.len());
        Shape(
            (0..n)
                .map(|i| {
                    let a = self.0.get(i).copied().unwrap_or(SCALAR);
                    let b = other.0.get(i).copied().unwrap_or(SCALAR);
                    Level {
                        items: a.items.max(b.items),
                        bytes: a.bytes.max(b.bytes),
                        weight: a.weight.max(b.weight),
                    }
                })
                .collect(),
        )
    }

    /// The exact bounds of a value, as the document given to policies.
    pub(super) fn of(value: &Cel) -> Shape {
        let mut levels = Vec::new();
        measure(value, 0, &mut levels);
        Shape(levels)
    }
}

/// Records `value` at `depth` and returns its weight.
fn measure(value: &Cel, depth: usize, levels: &mut Vec<Level>) -> u64 {
    let mut level = match value {
        Cel::List(items) => Level {
            items: items.len() as u64,
            bytes: 0,
            weight: items.iter().fold(1u64, |w, item| {
                w.saturating_add(measure(item, depth + 1, levels))
            }),
        },
        Cel::Map(map) => {
            let mut weight = 1u64;
            for (key, item) in map.map.iter() {
                let key = match key {
                    cel_interpreter::objects::Key::String(s) => Shape::string(s.len() as u64),
                    _ => Shape::scalar(),
                };
                record(levels, depth + 1, key.top());
                weight = weight
                    .saturating_add(key.top().weight)
                    .saturating_add(measure(item, depth + 1, levels));
            }
            Level {
                items: map.map.len() as u64,
                bytes: 0,
                weight,
            }
        }
        Cel::String(s) => Shape::string(s.len() as u64).top(),
        Cel::Bytes(b) => Shape::string(b.len() as u64).top(),
        _ => SCALAR,
    };
    level.weight = level.weight.max(1);
    record(levels, depth, level);
    level.weight
}

fn record(levels: &mut Vec<Level>, depth: usize, level: Level) {
    if levels.len() <= depth {
        levels.resize(depth + 1, SCALAR);
    }
    let l = &mut levels[depth];
    l.items = l.items.max(level.items);
    l.bytes = l.bytes.max(level.bytes);
    l.weight = l.weight.max(level.weight);
}

/// The estimated cost of evaluating `expr` with `object` bound to a value of
/// shape `object`; `u64::MAX` when it cannot be bounded.
pub(super) fn estimate(expr: &IdedExpr, object: &Shape, regexes: &Patterns) -> u64 {
    Estimator {
        object,
        regexes,
        scopes: Vec::new(),
    }
    .expr(expr)
    .cost
}

/// What the estimate knows of a subexpression.
struct Est {
    cost: u64,
    shape: Shape,
    /// The size of its syntax tree (nodes and literal bytes), which the
    /// library clones when the subexpression is a function argument.
    tree: u64,
}

impl Est {
    fn new(cost: u64, shape: Shape, tree: u64) -> Self {
        Est { cost, shape, tree }
    }
}

struct Estimator<'a> {
    object: &'a Shape,
    regexes: &'a Patterns,
    /// Comprehension variables, innermost last.
    scopes: Vec<(&'a str, Shape)>,
}

fn add(values: &[u64]) -> u64 {
    sum(values.iter().copied())
}

fn sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

impl<'a> Estimator<'a> {
    fn expr(&mut self, e: &'a IdedExpr) -> Est {
        match &e.expr {
            Expr::Literal(val) => {
                let shape = match val {
                    Val::String(s) => Shape::string(s.len() as u64),
                    Val::Bytes(b) => Shape::string(b.len() as u64),
                    _ => Shape::scalar(),
                };
                let bytes = shape.top().bytes;
                Est::new(add(&[1, bytes]), shape, add(&[1, bytes]))
            }
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                let field = select.field.len() as u64;
                let tree = add(&[operand.tree, 1, field]);
                if select.test {
                    // has(): every key of the operand is turned into a string.
                    let top = operand.shape.top();
                    let keys = mul(top.items, add(&[operand.shape.elements().top().bytes, 2]));
                    let cost = add(&[operand.cost, 2, field, keys.min(top.weight)]);
                    return Est::new(cost, Shape::scalar(), tree);
                }
                let mut shape = operand.shape.elements();
                if FUNCTIONS.contains(&select.field.as_str()) {
                    shape = shape.join(&operand.shape);
                }
                Est::new(add(&[operand.cost, 2, field]), shape, tree)
            }
            Expr::List(list) => {
                let items: Vec<Est> = list.elements.iter().map(|i| self.expr(i)).collect();
                let n = items.len() as u64;
                let elements = items
                    .iter()
                    .fold(None::<Shape>, |acc, i| {
                        Some(acc.map_or_else(|| i.shape.clone(), |a| a.join(&i.shape)))
                    })
                    .unwrap_or_else(Shape::scalar);
                let top = Level {
                    items: n,
                    bytes: 0,
                    weight: add(&[1, sum(items.iter().map(|i| i.shape.top().weight))]),
                };
                let cost = add(&[1, n, sum(items.iter().map(|i| i.cost))]);
                let tree = add(&[1, sum(items.iter().map(|i| i.tree))]);
                Est::new(cost, Shape::container(top, elements), tree)
            }
            Expr::Map(map) => {
                let mut cost = 1u64;
                let mut weight = 1u64;
                let mut tree = 1u64;
                let mut elements: Option<Shape> = None;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return unbounded();
                    };
                    let key = self.expr(&entry.key);
                    let value = self.expr(&entry.value);
                    // Converting the key and hashing it reads all of it.
                    cost = add(&[cost, 4, key.cost, value.cost, key.shape.top().weight]);
                    weight = add(&[weight, key.shape.top().weight, value.shape.top().weight]);
                    tree = add(&[tree, key.tree, value.tree]);
                    let both = key.shape.join(&value.shape);
                    elements = Some(elements.map_or(both.clone(), |e| e.join(&both)));
                }
                let top = Level {
                    items: map.entries.len() as u64,
                    bytes: 0,
                    weight,
                };
                Est::new(
                    cost,
                    Shape::container(top, elements.unwrap_or_else(Shape::scalar)),
                    tree,
                )
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Struct(_) | Expr::Unspecified => unbounded(),
        }
    }

    fn ident(&self, name: &str) -> Est {
        // The library looks a name up scope by scope, hashing it each time.
        let cost = add(&[1, mul(self.scopes.len() as u64 + 1, name.len() as u64 + 1)]);
        let shape = match self.scopes.iter().rev().find(|(n, _)| *n == name) {
            Some((_, shape)) => shape.clone(),
            None if name == "object" => self.object.clone(),
            None => Shape::scalar(),
        };
        Est::new(cost, shape, add(&[1, name.len() as u64]))
    }

    fn call(&mut self, id: u64, call: &'a CallExpr) -> Est {
        let target = call.target.as_deref().map(|t| self.expr(t));
        let args: Vec<Est> = call.args.iter().map(|a| self.expr(a)).collect();
        let name = call.func_name.as_str();
        let inputs = add(&[
            target.as_ref().map_or(0, |t| t.cost),
            sum(args.iter().map(|a| a.cost)),
        ]);
        let tree = add(&[
            1,
            name.len() as u64,
            target.as_ref().map_or(0, |t| t.tree),
            sum(args.iter().map(|a| a.tree)),
        ]);
        if let Some((cost, shape)) = operator(name, &args) {
            return Est::new(add(&[1, cost]), shape, tree);
        }
        // A function call: the library clones the name and the argument trees.
        let all: Vec<&Est> = target.iter().chain(args.iter()).collect();
        let weights = sum(all.iter().map(|a| a.shape.top().weight));
        let bytes = sum(all.iter().map(|a| a.shape.top().bytes));
        let (work, shape) = match name {
            "size" => (1, Shape::scalar()),
            "startsWith" | "endsWith" => (bytes, Shape::scalar()),
            "matches" => {
                let haystack = all.first().map_or(0, |a| a.shape.top().bytes);
                let cost = match self.regexes.get(&id) {
                    Some(pattern) => regex_cost(*pattern, haystack, bytes),
                    None => u64::MAX,
                };
                (cost, Shape::scalar())
            }
            "string" => (
                add(&[mul(3, bytes), CONVERTED_BYTES]),
                Shape::string(mul(3, bytes).max(CONVERTED_BYTES)),
            ),
            "bytes" => (add(&[bytes, 1]), Shape::string(bytes)),
            "double" | "int" | "uint" | "duration" | "timestamp" => {
                (add(&[bytes, CONVERTED_BYTES]), Shape::scalar())
            }
            "max" | "min" => {
                let shape = all.iter().fold(Shape::scalar(), |s, a| {
                    s.join(&a.shape).join(&a.shape.elements())
                });
                (weights, shape)
            }
            _ => (add(&[weights, 1]), Shape::scalar()),
        };
        // Cloning a node allocates: a few units each.
        let overhead = add(&[
            2,
            name.len() as u64,
            mul(4, sum(args.iter().map(|a| a.tree))),
        ]);
        Est::new(add(&[overhead, inputs, work]), shape, tree)
    }

    fn comprehension(&mut self, c: &'a ComprehensionExpr) -> Est {
        let range = self.expr(&c.iter_range);
        let init = self.expr(&c.accu_init);
        let n = range.shape.top().items;
        let accu_ident = self.ident_cost_in_loop(&c.accu_var);
        self.scopes.push((&c.iter_var, range.shape.elements()));
        let Some(form) = Form::of(c) else {
            self.scopes.pop();
            return unbounded();
        };
        // The user's parts do not see the accumulator (its name, `@result`,
        // cannot be written), so each is estimated once, whatever its bound.
        self.scopes.push((&c.accu_var, Shape::scalar()));
        let (step, accu, parts) = match form {
            Form::And(body) => {
                let body = self.expr(body);
                (add(&[1, accu_ident, body.cost]), Shape::scalar(), body.tree)
            }
            Form::Or(body) => {
                let body = self.expr(body);
                let accu = init.shape.join(&body.shape);
                (add(&[1, accu_ident, body.cost]), accu, body.tree)
            }
            Form::Count(body) => {
                let body = self.expr(body);
                (
                    add(&[4, mul(2, accu_ident), body.cost]),
                    Shape::scalar(),
                    body.tree,
                )
            }
            Form::Append { filter, element } => {
                let filter = filter.map(|f| self.expr(f));
                let element = self.expr(element);
                let parts = add(&[element.tree, filter.as_ref().map_or(0, |f| f.tree)]);
                let filter = filter.map_or(0, |f| add(&[1, f.cost]));
                let accu = Shape::container(
                    Level {
                        items: n,
                        bytes: 0,
                        weight: add(&[1, mul(n, element.shape.top().weight)]),
                    },
                    element.shape,
                );
                // `@result + [element]` copies the accumulator: the library
                // holds it in the scope too, so it is never appended in place.
                let copy = add(&[accu.top().items, 1]);
                let step = add(&[filter, mul(2, accu_ident), 3, element.cost, copy]);
                (step, accu, parts)
            }
        };
        self.scopes.pop();
        self.scopes.push((&c.accu_var, accu.clone()));
        let cond = self.expr(&c.loop_cond);
        let result = self.expr(&c.result);
        self.scopes.pop();
        self.scopes.pop();
        // Each step also binds both variables and drops the old accumulator.
        let binds = add(&[4, c.iter_var.len() as u64, c.accu_var.len() as u64]);
        let per_item = add(&[cond.cost, step, binds, accu.top().items]);
        let cost = add(&[range.cost, init.cost, 2, mul(n, per_item), result.cost]);
        let tree = add(&[range.tree, init.tree, cond.tree, result.tree, parts, 16]);
        Est::new(cost, result.shape, tree)
    }

    /// The cost of looking up a comprehension variable inside its loop.
    fn ident_cost_in_loop(&self, name: &str) -> u64 {
        add(&[1, mul(self.scopes.len() as u64 + 2, name.len() as u64 + 1)])
    }
}

/// The operators the library evaluates itself, with their cost beyond their
/// operands' and the shape of their result.
fn operator(name: &str, args: &[Est]) -> Option<(u64, Shape)> {
    let shape = |a: &Est| a.shape.top();
    match args {
        [c, t, f] if name == op::CONDITIONAL => {
            Some((add(&[c.cost, t.cost.max(f.cost)]), t.shape.join(&f.shape)))
        }
        [a, b] => {
            let operands = add(&[a.cost, b.cost]);
            let (x, y) = (shape(a), shape(b));
            let (work, result) = match name {
                op::LOGICAL_AND => (0, Shape::scalar()),
                op::LOGICAL_OR => (0, a.shape.join(&b.shape)),
                op::ADD => {
                    let top = Level {
                        items: add(&[x.items, y.items]),
                        bytes: add(&[x.bytes, y.bytes]),
                        weight: add(&[x.weight, y.weight]).saturating_sub(1).max(1),
                    };
                    let elements = a.shape.elements().join(&b.shape.elements());
                    (
                        add(&[x.items, y.items, x.bytes, y.bytes]),
                        Shape::container(top, elements),
                    )
                }
                op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO => (0, Shape::scalar()),
                op::EQUALS
                | op::NOT_EQUALS
                | op::LESS
                | op::LESS_EQUALS
                | op::GREATER
                | op::GREATER_EQUALS => {
                    // Comparing stops at the first difference, which may be
                    // a map key of either side that is hashed in full.
                    let key = a.shape.longest_string().max(b.shape.longest_string());
                    (add(&[x.weight.min(y.weight), key]), Shape::scalar())
                }
                op::IN => (add(&[x.weight, mul(2, y.weight)]), Shape::scalar()),
                op::INDEX => (
                    add(&[1, y.weight]),
                    a.shape.elements().join(&Shape::string(4)),
                ),
                _ => return None,
            };
            Some((add(&[operands, work]), result))
        }
        [a] if matches!(name, op::LOGICAL_NOT | op::NEGATE | op::NOT_STRICTLY_FALSE) => {
            Some((a.cost, Shape::scalar()))
        }
        _ => None,
    }
}

/// Matching `haystack` bytes against a pattern (and compiling it, when it
/// is compiled at every call); `bytes` counts the pattern's own bytes, hashed
/// to find it. A match that falls back from the lazy DFA walks the automaton
/// for each byte, so its cost grows with the compiled size.
fn regex_cost(pattern: Pattern, haystack: u64, bytes: u64) -> u64 {
    let compile = if pattern.per_call {
        add(&[mul(16, pattern.size), 10_000])
    } else {
        0
    };
    add(&[compile, bytes, mul(add(&[haystack, 1]), pattern.size / 64)])
}

fn unbounded() -> Est {
    Est::new(u64::MAX, Shape::scalar(), u64::MAX)
}

/// The comprehensions the parser's macros build, by what their step does.
enum Form<'a> {
    /// `all`: `@result && body`.
    And(&'a IdedExpr),
    /// `exists`: `@result || body`.
    Or(&'a IdedExpr),
    /// `exists_one`: `body ? @result + 1 : @result`.
    Count(&'a IdedExpr),
    /// `map` and `filter`: `@result + [element]`, possibly under
    /// `filter ? … : @result`, from an empty list.
    Append {
        filter: Option<&'a IdedExpr>,
        element: &'a IdedExpr,
    },
}

impl<'a> Form<'a> {
    fn of(c: &'a ComprehensionExpr) -> Option<Self> {
        let accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
        let call = |e: &'a IdedExpr| match &e.expr {
            Expr::Call(call) if call.target.is_none() => Some(call),
            _ => None,
        };
        let append = |e: &'a IdedExpr| {
            let add = call(e).filter(|a| a.func_name == op::ADD)?;
            match (add.args.as_slice(), &c.accu_init.expr) {
                ([a, list], Expr::List(init)) if accu(a) && init.elements.is_empty() => {
                    match &list.expr {
                        Expr::List(l) if l.elements.len() == 1 => l.elements.first(),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        let step = call(&c.loop_step)?;
        match (step.func_name.as_str(), step.args.as_slice()) {
            (op::LOGICAL_AND, [a, body]) if accu(a) => Some(Form::And(body)),
            (op::LOGICAL_OR, [a, body]) if accu(a) => Some(Form::Or(body)),
            (op::ADD, _) => Some(Form::Append {
                filter: None,
                element: append(&c.loop_step)?,
            }),
            (op::CONDITIONAL, [cond, then, otherwise]) if accu(otherwise) => {
                if let Some(element) = append(then) {
                    return Some(Form::Append {
                        filter: Some(cond),
                        element,
                    });
                }
                let inc = call(then).filter(|a| a.func_name == op::ADD)?;
                match (inc.args.as_slice(), &c.accu_init.expr) {
                    ([a, one], Expr::Literal(Val::Int(0)))
                        if accu(a) && matches!(one.expr, Expr::Literal(Val::Int(1))) =>
                    {
                        Some(Form::Count(cond))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::compile::compile_expression;
    use super::super::{COST_BUDGET, patterns, to_cel};
    use super::*;
    use std::thread;
    use std::time::{Duration, Instant};

    /// A job with `n` arguments and labels and an image name of `10 n`
    /// bytes of `a` and `x` at random (which defeats the lazy DFA of some
    /// patterns).
    fn job(n: usize) -> Cel {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let image: String = (0..10 * n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                if seed.is_multiple_of(2) { 'a' } else { 'x' }
            })
            .collect();
        let labels: serde_json::Map<String, serde_json::Value> = (0..n)
            .map(|i| (format!("l{i}"), format!("v{i}").into()))
            .collect();
        to_cel(&serde_json::json!({
            "apiVersion": "gitfleet/v1", "kind": "Job",
            "metadata": {"name": "large", "labels": labels, "annotations": {}},
            "spec": {"queue": "q", "replicas": 1, "gpusPerReplica": 1, "image": image,
                     "command": (0..n).map(|i| format!("arg{i}")).collect::<Vec<_>>(), "env": {}}
        }))
    }

    /// Each rule runs against the largest document (of a ladder) for which
    /// it is within the budget: near the budget, whatever it does, it takes
    /// a few tens of milliseconds at most in a debug build. The printed
    /// nanoseconds per unit calibrate the budget.
    #[test]
    fn rules_near_the_budget_run_quickly() {
        let rules = [
            "object.spec.command.all(c, c.size() < 10)",
            "object.spec.command.map(c, c + c).size() > 0",
            "object.spec.command.filter(c, c.startsWith('arg1')).size() > 0",
            "object.spec.command.all(a, object.spec.command.exists(b, a == b))",
            "object.spec.command.exists_one(c, c in ['arg1', 'arg2', 'arg3', 'arg4', 'arg5'])",
            "object.spec.command.all(c, {'a': c, 'b': c, 'c': c}.size() == 3)",
            "object.spec.command.all(c, string(c) == c)",
            "object.spec.command.all(c, [1].all(a, [1].all(b, [1].all(d, c == c))))",
            "object.metadata.labels.all(k, k in object.metadata.labels)",
            "object.spec.command.all(c, has(object.metadata.name))",
            "object.spec.command.exists_one(c, c.matches('^arg[0-9]+$'))",
            "object.spec.command.exists_one(c, c.matches('(?i)^[a-z]+[0-9]{1,4}$'))",
            "object.spec.image.matches('(a|x)*a(a|x){12}b')",
            "object.spec.image.matches('[ax]*a[ax]{500}c')",
            "object.spec.command.map(c, [c, c]).map(l, l + l).size() > 0",
            "object.spec.image + object.spec.image + object.spec.image == object.spec.image",
            "[object.spec.image].map(a, [a + a].map(b, [b + b].map(c, c + c))).size() > 0",
            "object.spec.command.exists(c, size([c, c, c, c, c, c, c, c, c, c, c, c]) == 0)",
        ];
        let ladder: Vec<usize> = (0..14).map(|i| 1 << i).collect();
        thread::Builder::new()
            .stack_size(super::super::STACK_BYTES)
            .spawn(move || {
                let mut root = cel_interpreter::Context::default();
                root.add_function("matches", patterns::matches);
                let docs: Vec<(Cel, Shape)> = (ladder.iter())
                    .map(|&n| {
                        let doc = job(n);
                        let shape = Shape::of(&doc);
                        (doc, shape)
                    })
                    .collect();
                for rule in rules {
                    let compiled = compile_expression(rule).unwrap();
                    let cost = |(_, shape): &&(Cel, Shape)| {
                        estimate(&compiled.tree, shape, &compiled.regexes)
                    };
                    let Some(doc) = docs.iter().rev().find(|d| cost(d) <= COST_BUDGET) else {
                        panic!("{rule}: over the budget even for the smallest document");
                    };
                    let mut ctx = root.new_inner_scope();
                    ctx.add_variable_from_value("object", doc.0.clone());
                    let start = Instant::now();
                    let _ = cel_interpreter::Value::resolve(&compiled.tree, &ctx);
                    let took = start.elapsed();
                    let cost = cost(&doc);
                    eprintln!(
                        "{cost:>8} {:>8.3} ms {:>5.1} ns/unit weight {:<6} {rule}",
                        took.as_secs_f64() * 1e3,
                        took.as_secs_f64() * 1e9 / cost as f64,
                        doc.1.top().weight,
                    );
                    assert!(took < Duration::from_millis(500), "{rule}: {took:?}");
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
