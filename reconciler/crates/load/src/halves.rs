//! A large file parsed in two halves at once.
//!
//! The reconcile loop re-reads the one file a commit changed; a file of
//! 1,000 jobs (200 KB) took about 4 ms to parse and type-check on one core.
//! Cut at a document marker (`---` alone on its line) near its middle, its
//! halves are parsed and typed on two threads. Only what the fast YAML path
//! takes without a problem is done so (every document clean, no duplicate
//! key, the node budget not exceeded): anything else is left to the whole
//! file's parse, which says what is wrong with positions, so the result is
//! always that of parsing the file whole.

use std::ops::Range;

use model::diag::Diagnostic;

use crate::yaml::{self, Node, NodeBudget};
use crate::{Documents, SourceFile, push_documents};

/// Files smaller than this are parsed whole (a thread is not worth it).
const MIN_BYTES: usize = 64 * 1024;

/// `file`'s documents and diagnostics (`text` is its contents), parsed in
/// two halves on two threads; `None` when the file is too small, has no
/// marker to cut at, or a half is not plainly clean YAML (the caller then
/// parses it whole). The nodes are taken from `nodes` only on success.
pub(crate) fn parse_in_halves(
    file: &SourceFile,
    text: &str,
    keep_trees: bool,
    nodes: &NodeBudget,
) -> Option<(Documents, Vec<Diagnostic>)> {
    if text.len() < MIN_BYTES {
        return None;
    }
    let (cut, line) = cut_near_middle(text)?;
    let half = |range: Range<usize>, line: u32| -> Option<(Documents, Vec<Diagnostic>, usize)> {
        let (parsed, count) = clean_documents_in(text, range, line)?;
        let mut docs = Documents::default();
        let mut diagnostics = Vec::new();
        push_documents(file, parsed, &mut docs, &mut diagnostics, keep_trees);
        Some((docs, diagnostics, count))
    };
    let (first, second) = std::thread::scope(|scope| {
        // No thread to be had: the file is parsed whole.
        let second = std::thread::Builder::new()
            .spawn_scoped(scope, || half(cut..text.len(), line))
            .ok()?;
        let first = half(0..cut, 1);
        // A half that panicked is parsed again whole (and panics there).
        Some((first, second.join().ok().flatten()))
    })?;
    let (mut docs, mut diagnostics, first_count) = first?;
    let (second_docs, second_diagnostics, second_count) = second?;
    if !nodes.take_if_left(first_count + second_count) {
        return None;
    }
    docs.append(second_docs);
    diagnostics.extend(second_diagnostics);
    Some((docs, diagnostics))
}

/// The non-empty documents of the lines of `text` in `range` (starting at
/// line `line`) and their number of nodes, when the fast path takes them
/// all and no mapping repeats a key; `None` otherwise.
fn clean_documents_in(text: &str, range: Range<usize>, line: u32) -> Option<(Vec<Node>, usize)> {
    let (docs, count) = crate::yaml_fast::documents_counted_in(text, range, line)?;
    Some((yaml::non_empty_without_duplicates(docs).ok()?, count))
}

/// The start of the first line at or after the middle of `text` that is a
/// document marker (`---`, trailing spaces allowed, as the fast path reads
/// one), and its line number; `None` when there is none.
fn cut_near_middle(text: &str) -> Option<(usize, u32)> {
    let s = text.as_bytes();
    let mut at = s[..text.len() / 2].iter().rposition(|&b| b == b'\n')? + 1;
    while at < s.len() {
        let end = s[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(s.len(), |i| at + i);
        if is_marker(&s[at..end]) {
            let line = 1 + s[..at].iter().filter(|&&b| b == b'\n').count();
            return Some((at, u32::try_from(line).ok()?));
        }
        at = end + 1;
    }
    None
}

/// Whether a line (without its `\n`) is a document marker alone.
pub(crate) fn is_marker(line: &[u8]) -> bool {
    line.trim_ascii_end() == b"---"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may stop at the first surprise
mod tests {
    use super::*;

    fn job(i: usize) -> String {
        format!(
            "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {{name: job-{i}}}\nspec:\n  queue: team-{q}\n  priorityClass: normal\n  replicas: 1\n  gpusPerReplica: {g}\n  command: [python, train.py]\n",
            q = i % 7,
            g = 1 + i % 8
        )
    }

    fn source(text: &str) -> SourceFile {
        SourceFile::new("jobs.yaml", text.as_bytes().to_vec())
    }

    #[test]
    fn a_large_file_in_halves_is_the_file_parsed_whole() {
        let jobs: Vec<String> = (0..1_000).map(job).collect();
        let text = jobs.join("---\n");
        assert!(text.len() >= MIN_BYTES);
        let budget = NodeBudget::new(yaml::MAX_FLEET_NODES);
        let (docs, diagnostics) =
            parse_in_halves(&source(&text), &text, false, &budget).expect("cut in halves");
        assert!(diagnostics.is_empty());
        let mut whole = Documents::default();
        let mut whole_diagnostics = Vec::new();
        let whole_budget = NodeBudget::new(yaml::MAX_FLEET_NODES);
        crate::parse_file(
            &source(&text),
            &mut whole,
            &mut whole_diagnostics,
            false,
            &whole_budget,
            false,
        );
        assert_eq!(docs.jobs.len(), 1_000);
        let names = |d: &Documents| -> Vec<(String, u32)> {
            d.jobs
                .iter()
                .map(|j| (j.object.name().to_string(), j.object.origin.pos.line))
                .collect()
        };
        assert_eq!(names(&docs), names(&whole));
        assert!(
            docs.jobs
                .iter()
                .zip(&whole.jobs)
                .all(|(a, b)| a.object.spec == b.object.spec)
        );
        assert_eq!(budget.used(), whole_budget.used());
    }

    #[test]
    fn a_half_with_a_problem_is_left_to_the_whole_parse() {
        let mut jobs: Vec<String> = (0..1_000).map(job).collect();
        // A repeated key in the second half.
        jobs[900].push_str("  replicas: 2\n");
        let text = jobs.join("---\n");
        let budget = NodeBudget::new(yaml::MAX_FLEET_NODES);
        assert!(parse_in_halves(&source(&text), &text, false, &budget).is_none());
        assert_eq!(budget.used(), 0, "nothing taken");
        // A document of the wrong shape is typed in its half, reported alike.
        let mut jobs: Vec<String> = (0..1_000).map(job).collect();
        jobs[10] = jobs[10].replace("replicas: 1", "replicas: many");
        let text = jobs.join("---\n");
        let (docs, diagnostics) =
            parse_in_halves(&source(&text), &text, false, &budget).expect("clean YAML");
        assert_eq!(docs.jobs.len(), 999);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert_eq!(diagnostics[0].origin.pos.line, 1 + 10 * 10 + 6);
    }

    #[test]
    fn small_files_and_files_without_markers_are_parsed_whole() {
        let budget = NodeBudget::new(yaml::MAX_FLEET_NODES);
        let small = job(1);
        assert!(parse_in_halves(&source(&small), &small, false, &budget).is_none());
        let big = format!("items:\n{}", "  - x: 1\n".repeat(10_000));
        assert!(big.len() >= MIN_BYTES);
        assert!(cut_near_middle(&big).is_none());
        assert!(parse_in_halves(&source(&big), &big, false, &budget).is_none());
    }
}
