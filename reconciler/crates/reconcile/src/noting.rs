//! Which pending jobs of a new plan the last noted plan did not have, with
//! the same reason.
//!
//! The loop records each pending job with its reason; a new plan's jobs
//! that the last plan noted (no record written since) with the same reason
//! need nothing written. The two lists are walked side by side: a job
//! placed, or one that moved, shifts every later position, so the walk
//! looks a little ahead in the last list to find its place again rather
//! than taking every later job for new (which sent a commit that placed one
//! job through a look-up of all 150,000 records). A plan shares one reason
//! between the jobs held back alike, but two plans do not share theirs:
//! each pair of reasons is compared once.

use std::sync::Arc;

use model::plan::Pending;
use rustc_hash::FxHashMap;

/// How far ahead in the last plan's list a job is looked for.
const LOOK_AHEAD: usize = 64;

/// The jobs of `pending` (a new plan's) that `noted` (the last noted
/// plan's) does not have with the same reason, in order, at most `limit + 1`
/// of them (more than `limit`: too many to look up one by one). A job of
/// `pending` counts as noted only when paired with an entry of `noted` of
/// the same name and reason; pairs keep both lists' order, each entry
/// paired once.
pub(crate) fn unnoted<'p>(
    pending: &'p [Pending],
    noted: &[Pending],
    limit: usize,
) -> Vec<&'p Pending> {
    let mut reasons = SameReasons::default();
    let mut out = Vec::new();
    let mut at = 0;
    for job in pending {
        let paired = noted
            .get(at..)
            .unwrap_or_default()
            .iter()
            .take(LOOK_AHEAD)
            .position(|n| n.job == job.job);
        match paired {
            Some(skip) if reasons.same(&noted[at + skip].reason, &job.reason) => at += skip + 1,
            Some(skip) => {
                at += skip + 1;
                out.push(job);
            }
            None => out.push(job),
        }
        if out.len() > limit {
            break;
        }
    }
    out
}

/// Answers whether two reasons say the same, remembering each pair of
/// reasons (by address) it compared. Its answers hold while both reasons
/// are alive: keep it no longer than the plans it compares.
#[derive(Default)]
struct SameReasons {
    /// The last pair asked about (runs of jobs held back alike are common).
    last: Option<(usize, usize, bool)>,
    /// Every pair compared.
    seen: FxHashMap<(usize, usize), bool>,
}

impl SameReasons {
    /// Whether `a` and `b` say the same.
    fn same(&mut self, a: &Arc<str>, b: &Arc<str>) -> bool {
        if Arc::ptr_eq(a, b) {
            return true;
        }
        let key = (
            Arc::as_ptr(a).cast::<u8>() as usize,
            Arc::as_ptr(b).cast::<u8>() as usize,
        );
        if let Some((x, y, same)) = self.last
            && (x, y) == key
        {
            return same;
        }
        let same = *self.seen.entry(key).or_insert_with(|| **a == **b);
        self.last = Some((key.0, key.1, same));
        same
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(job: &Arc<str>, reason: &Arc<str>) -> Pending {
        Pending {
            job: job.clone(),
            reason: reason.clone(),
            queue: None,
            waiting_for: None,
        }
    }

    /// The plain answer: each job looked up among those noted.
    fn unnoted_plain<'p>(pending: &'p [Pending], noted: &[Pending]) -> Vec<&'p Pending> {
        pending
            .iter()
            .filter(|p| !noted.iter().any(|n| n.job == p.job && n.reason == p.reason))
            .collect()
    }

    #[test]
    fn jobs_placed_moved_or_with_new_reasons_are_unnoted_the_rest_noted() {
        let names: Vec<Arc<str>> = (0..500).map(|i| format!("job-{i}").into()).collect();
        let quota: Arc<str> = "queue at its limit".into();
        let quota_again: Arc<str> = "queue at its limit".into();
        let room: Arc<str> = "no room".into();
        let noted: Vec<Pending> = names.iter().map(|n| entry(n, &quota)).collect();
        // The same jobs, reasons as words alike: nothing to note.
        let same: Vec<Pending> = names.iter().map(|n| entry(n, &quota_again)).collect();
        assert!(unnoted(&same, &noted, 1_000).is_empty());
        // Job 3 placed (gone), job 10 moved to the end, job 20's reason
        // changed, a new job before job 400: those two unnoted, whatever
        // the shift.
        let fresh: Arc<str> = "job-new".into();
        let mut changed: Vec<Pending> = Vec::new();
        for (i, n) in names.iter().enumerate() {
            match i {
                3 | 10 => {}
                20 => changed.push(entry(n, &room)),
                400 => {
                    changed.push(entry(&fresh, &quota));
                    changed.push(entry(n, &quota));
                }
                _ => changed.push(entry(n, &quota)),
            }
        }
        changed.push(entry(&names[10], &quota));
        let found: Vec<&str> = unnoted(&changed, &noted, 1_000)
            .iter()
            .map(|p| &*p.job)
            .collect();
        // Job 10 moved past the look-ahead: unnoted (looked up, rewritten
        // alike), never taken for noted when it was not.
        assert_eq!(found, ["job-20", "job-new", "job-10"]);
        // Whatever is paired is noted, so every job the plain answer finds
        // is found.
        let plain: Vec<&str> = unnoted_plain(&changed, &noted)
            .iter()
            .map(|p| &*p.job)
            .collect();
        assert!(
            plain.iter().all(|j| found.contains(j)),
            "{plain:?} in {found:?}"
        );
        // Too many: stops past the limit.
        let other: Vec<Pending> = names.iter().map(|n| entry(n, &room)).collect();
        assert_eq!(unnoted(&other, &noted, 10).len(), 11);
    }

    proptest::proptest! {
        /// Never a job taken for noted that the last plan did not note with
        /// its reason; a plan noted again entire has nothing unnoted.
        #[test]
        fn only_jobs_noted_with_their_reason_are_taken_for_noted(
            noted in proptest::collection::vec((0u8..60, 0u8..3), 0..120),
            edits in proptest::collection::vec((0usize..120, 0u8..4, 0u8..60, 0u8..3), 0..12),
        ) {
            let names: Vec<Arc<str>> = (0..60).map(|i| format!("job-{i}").into()).collect();
            let reasons: Vec<Arc<str>> = ["quota", "room", "gang"].iter().map(|r| (*r).into()).collect();
            let old: Vec<Pending> = noted
                .iter()
                .map(|&(j, r)| entry(&names[usize::from(j)], &reasons[usize::from(r)]))
                .collect();
            proptest::prop_assert!(unnoted(&old, &old, usize::MAX).is_empty());
            let mut new = old.clone();
            for (at, what, j, r) in edits {
                let at = at.min(new.len());
                let e = entry(&names[usize::from(j)], &reasons[usize::from(r)]);
                match what {
                    0 => new.insert(at, e),
                    1 if at < new.len() => { new.remove(at); }
                    2 if at < new.len() => new[at] = e,
                    _ => {
                        if at < new.len() {
                            let moved = new.remove(at);
                            new.push(moved);
                        }
                    }
                }
            }
            let found = unnoted(&new, &old, usize::MAX);
            for p in unnoted_plain(&new, &old) {
                proptest::prop_assert!(found.iter().any(|f| std::ptr::eq(*f, p)));
            }
        }
    }

    #[test]
    fn reasons_are_the_same_when_their_words_are() {
        let quota: Arc<str> = "queue team-a is at its limit".into();
        let quota_again: Arc<str> = "queue team-a is at its limit".into();
        let resources: Arc<str> = "no node has 8 free GPUs".into();
        let mut reasons = SameReasons::default();
        for _ in 0..3 {
            assert!(reasons.same(&quota, &quota));
            assert!(reasons.same(&quota, &quota_again));
            assert!(reasons.same(&quota_again, &quota));
            assert!(!reasons.same(&quota, &resources));
            assert!(!reasons.same(&resources, &quota_again));
            assert!(reasons.same(&resources, &resources));
        }
    }
}
