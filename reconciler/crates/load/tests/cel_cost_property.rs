#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

//! Property: a rule that the loader accepts (not refused, not over the cost
//! budget for a document) runs fast and allocates little, whatever it is.
//!
//! Random well-typed rules (comprehensions nested in comprehensions, string
//! and list concatenation, literals, regular expressions, document fields)
//! run against documents from tiny to large. Time and peak heap are
//! measured around each load; a counting allocator sees every allocation,
//! the policy thread's included. This file holds one test so nothing else
//! allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gitfleet_load::{SourceFile, load_fleet};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A deterministic generator of random rules.
struct Gen {
    seed: u64,
    vars: Vec<(String, Ty)>,
    next_var: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Str,
    Int,
    Bool,
    /// A list of strings.
    List,
    /// A list of lists of strings.
    Lists,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed % n as u64) as usize
    }

    fn var(&mut self, ty: Ty) -> Option<String> {
        let found: Vec<String> = self
            .vars
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n.clone())
            .collect();
        (!found.is_empty()).then(|| found[self.below(found.len())].clone())
    }

    /// A comprehension over `range` (of list type `of`) whose body has type `body`.
    fn comprehension(&mut self, d: usize, macro_name: &str, of: Ty, body: Ty) -> String {
        let range = self.expr(d - 1, of);
        let name = format!("v{}", self.next_var);
        self.next_var += 1;
        let elem = if of == Ty::Lists { Ty::List } else { Ty::Str };
        self.vars.push((name.clone(), elem));
        let inner = self.expr(d - 1, body);
        self.vars.pop();
        format!("{range}.{macro_name}({name}, {inner})")
    }

    fn expr(&mut self, d: usize, ty: Ty) -> String {
        let leaf = d == 0 || self.below(4) == 0;
        if let (true, Some(v)) = (self.below(3) == 0, self.var(ty)) {
            return v;
        }
        match ty {
            Ty::Str => match if leaf { self.below(3) } else { self.below(6) } {
                0 => format!("'{}'", "s".repeat(self.below(40))),
                1 => "object.metadata.name".to_string(),
                2 => "object.spec.image".to_string(),
                3 => format!(
                    "{} + {}",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
                4 => format!("string({})", self.expr(d - 1, Ty::Int)),
                _ => format!(
                    "({} ? {} : {})",
                    self.expr(d - 1, Ty::Bool),
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
            },
            Ty::Int => match if leaf { 0 } else { self.below(4) } {
                0 => self.below(100).to_string(),
                1 => format!("size({})", self.expr(d - 1, Ty::List)),
                2 => format!("size({})", self.expr(d - 1, Ty::Str)),
                _ => format!(
                    "({} + {})",
                    self.expr(d - 1, Ty::Int),
                    self.expr(d - 1, Ty::Int)
                ),
            },
            Ty::Bool => match if leaf { self.below(2) } else { self.below(14) } {
                0 => "true".to_string(),
                1 => "has(object.spec.image)".to_string(),
                2 => format!(
                    "{} < {}",
                    self.expr(d - 1, Ty::Int),
                    self.expr(d - 1, Ty::Int)
                ),
                3 => format!(
                    "{} == {}",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
                4 => format!(
                    "{} in {}",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::List)
                ),
                5 => format!(
                    "{}.startsWith({})",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
                6 => format!("{}.matches('^s*[a-z0-9]+$')", self.expr(d - 1, Ty::Str)),
                7 => format!(
                    "{} == {}",
                    self.expr(d - 1, Ty::List),
                    self.expr(d - 1, Ty::List)
                ),
                8 => format!(
                    "({} || {})",
                    self.expr(d - 1, Ty::Bool),
                    self.expr(d - 1, Ty::Bool)
                ),
                9 => format!(
                    "{}.contains({})",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
                10 => self.comprehension(d, "exists_one", Ty::List, Ty::Bool),
                11 => self.comprehension(d, "exists", Ty::Lists, Ty::Bool),
                12 => self.comprehension(d, "all", Ty::List, Ty::Bool),
                _ => format!("!({})", self.expr(d - 1, Ty::Bool)),
            },
            Ty::List => match if leaf { self.below(3) } else { self.below(7) } {
                0 => "object.spec.command".to_string(),
                1 => "object.metadata.labels.map(k, k)".to_string(),
                2 => {
                    let n = self.below(30);
                    let items: Vec<String> = (0..n).map(|i| format!("'i{i}'")).collect();
                    format!("[{}]", items.join(", "))
                }
                3 => format!(
                    "{} + {}",
                    self.expr(d - 1, Ty::List),
                    self.expr(d - 1, Ty::List)
                ),
                4 => self.comprehension(d, "map", Ty::List, Ty::Str),
                5 => self.comprehension(d, "filter", Ty::List, Ty::Bool),
                _ => format!(
                    "[{}, {}]",
                    self.expr(d - 1, Ty::Str),
                    self.expr(d - 1, Ty::Str)
                ),
            },
            Ty::Lists => match if leaf { 0 } else { self.below(3) } {
                0 => format!(
                    "[object.spec.command, {}]",
                    self.expr(d.saturating_sub(1), Ty::List)
                ),
                1 => self.comprehension(d, "map", Ty::List, Ty::List),
                _ => format!(
                    "{} + {}",
                    self.expr(d - 1, Ty::Lists),
                    self.expr(d - 1, Ty::Lists)
                ),
            },
        }
    }
}

/// A job with `args` command arguments, `labels` labels and an image name of
/// `image` bytes.
fn job(name: &str, args: usize, labels: usize, image: usize) -> String {
    let command: Vec<String> = (0..args).map(|i| format!("a{i}")).collect();
    let labels: Vec<String> = (0..labels).map(|i| format!("l{i}: v")).collect();
    format!(
        "---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: {name}, labels: {{{}}}}}\nspec: {{queue: q, gpusPerReplica: 1, image: {}, command: [{}]}}\n",
        labels.join(", "),
        "s".repeat(image.max(1)),
        command.join(", ")
    )
}

#[test]
fn accepted_rules_run_fast_and_allocate_little() {
    // Generous for a debug build on a busy machine: the budget is about
    // 10 ms of evaluation per document here.
    const FAST: Duration = Duration::from_secs(2);
    const SMALL: usize = 128 << 20;
    let fleet = format!(
        "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {{name: q}}\nspec: {{}}\n{}{}{}",
        job("tiny", 1, 0, 1),
        job("medium", 100, 20, 1_000),
        job("large", 2_000, 200, 20_000),
    );
    let mut g = Gen {
        seed: 0x9e37_79b9_7f4a_7c15,
        vars: Vec::new(),
        next_var: 0,
    };
    let (mut accepted, mut over_budget, mut slowest, mut largest) = (0, 0, Duration::ZERO, 0);
    for _ in 0..300 {
        let rule = g.expr(6, Ty::Bool);
        if rule.len() > 9_000 {
            continue;
        }
        let text = format!(
            "{fleet}---\napiVersion: gitfleet/v1\nkind: Policy\nmetadata: {{name: p}}\nspec:\n  rules:\n    - expression: |-\n        {rule}\n"
        );
        let files = [SourceFile::new("f.yaml", text)];
        let before = CURRENT.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let start = Instant::now();
        let loaded = load_fleet(&files);
        let took = start.elapsed();
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        let budget = loaded
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("cost budget"))
            .count();
        assert!(
            !loaded.diagnostics.iter().any(|d| d.message.contains("not evaluated:") && !d.message.contains("cost budget")),
            "{:#?}",
            loaded.diagnostics
        );
        over_budget += budget;
        // Rules over the budget for some documents still run for others.
        accepted += 3usize.saturating_sub(budget);
        if budget < 3 {
            assert!(took < FAST, "{took:?} for {rule}");
            assert!(peak < SMALL, "{peak} bytes for {rule}");
            slowest = slowest.max(took);
            largest = largest.max(peak);
        }
    }
    eprintln!(
        "{accepted} evaluations accepted, {over_budget} over the budget; slowest load {slowest:?}, largest heap growth {} KiB",
        largest / 1024
    );
    assert!(
        accepted > 100 && over_budget > 30,
        "{accepted} accepted, {over_budget} over the budget"
    );
}
