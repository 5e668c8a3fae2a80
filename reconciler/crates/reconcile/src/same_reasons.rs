//! Comparing the reasons of two plans' pending jobs, each pair once.
//!
//! A plan shares one reason between the jobs held back alike, but two
//! plans do not share theirs: comparing the last plan's 100,000 pending
//! jobs with the new one's read every reason's words twice. Here each pair
//! of shared reasons is compared once.

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// Answers whether two reasons say the same, remembering each pair of
/// reasons (by address) it compared. Its answers hold while both reasons
/// are alive: keep it no longer than the plans it compares.
#[derive(Default)]
pub(crate) struct SameReasons {
    /// The last pair asked about (runs of jobs held back alike are common).
    last: Option<(usize, usize, bool)>,
    /// Every pair compared.
    seen: FxHashMap<(usize, usize), bool>,
}

impl SameReasons {
    /// Whether `a` and `b` say the same.
    pub(crate) fn same(&mut self, a: &Arc<str>, b: &Arc<str>) -> bool {
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
