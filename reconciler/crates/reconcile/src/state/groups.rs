//! Values of the `intents` and `audit` tables: a group of consecutive
//! sequences in one value, keyed by its last sequence (so the next free
//! sequence is the last key's plus one, as with one value a key).
//!
//! A group of one is a JSON object, as every value was before groups (such
//! states read unchanged); a longer group is a JSON array, its sequences
//! `key - len + 1 ..= key`. Which intents of a group are done is kept
//! beside it ([`Progress`]): rewriting a plan's intents at each outcome
//! batch would cost as much as the plan's size each time.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// One value for `items` (at least one): a JSON object for one, an array
/// for more.
pub(super) fn encode<T: Serialize>(items: &[T]) -> String {
    match items {
        [one] => super::to_json(one),
        many => super::to_json(&many),
    }
}

/// The items of a group's value (an object is a group of one).
pub(super) fn decode<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_json::Error> {
    if text.trim_start().starts_with('[') {
        serde_json::from_str(text)
    } else {
        serde_json::from_str(text).map(|one| vec![one])
    }
}

/// The first sequence of a group of `len` keyed `key` (its last).
pub(super) fn first_id(key: u64, len: usize) -> u64 {
    (key + 1).saturating_sub(len as u64)
}

/// How many intents a group has and which are done: `LEN;A-B,C-D`, the
/// done ones as half-open ranges of indices into the group, in order
/// (`LEN;` for none). Outcomes are recorded in plan order, so it is one
/// range in practice, whatever the number of batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Progress {
    len: usize,
    done: Vec<(usize, usize)>,
}

impl Progress {
    /// A group of `len` with none done.
    pub(super) fn new(len: usize) -> Progress {
        Progress {
            len,
            done: Vec::new(),
        }
    }

    /// The group's length.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Marks index `i` done (outside the group: ignored).
    pub(super) fn mark(&mut self, i: usize) {
        if i >= self.len || self.is_done(i) {
            return;
        }
        let at = self.done.partition_point(|(_, end)| *end < i);
        match self.done.get_mut(at) {
            // Right after a range: grow it, and join the next if it now touches.
            Some(range) if range.1 == i => {
                range.1 = i + 1;
                if let Some(&(start, end)) = self.done.get(at + 1)
                    && start == i + 1
                {
                    self.done[at].1 = end;
                    self.done.remove(at + 1);
                }
            }
            Some(range) if range.0 == i + 1 => range.0 = i,
            _ => self.done.insert(at, (i, i + 1)),
        }
    }

    /// Whether index `i` is done.
    pub(super) fn is_done(&self, i: usize) -> bool {
        let at = self.done.partition_point(|(_, end)| *end <= i);
        self.done.get(at).is_some_and(|(start, _)| *start <= i)
    }

    /// Whether every intent of the group is done.
    pub(super) fn all_done(&self) -> bool {
        self.done == [(0, self.len)] || self.len == 0
    }

    /// The stored form.
    pub(super) fn encode(&self) -> String {
        let ranges: Vec<String> = self
            .done
            .iter()
            .map(|(start, end)| format!("{start}-{end}"))
            .collect();
        format!("{};{}", self.len, ranges.join(","))
    }

    /// Reads [`Progress::encode`]'s form.
    pub(super) fn decode(text: &str) -> Option<Progress> {
        let (len, ranges) = text.split_once(';')?;
        let len = len.parse().ok()?;
        let mut done = Vec::new();
        for range in ranges.split(',').filter(|r| !r.is_empty()) {
            let (start, end) = range.split_once('-')?;
            let (start, end): (usize, usize) = (start.parse().ok()?, end.parse().ok()?);
            if start >= end || end > len || done.last().is_some_and(|(_, e)| *e >= start) {
                return None;
            }
            done.push((start, end));
        }
        Some(Progress { len, done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_is_an_object_and_more_an_array() {
        assert_eq!(encode(&[1]), "1");
        assert_eq!(encode(&[1, 2]), "[1,2]");
        assert_eq!(decode::<u32>("1").unwrap(), [1]);
        assert_eq!(decode::<u32>(" [1,2]").unwrap(), [1, 2]);
        assert_eq!(first_id(10, 1), 10);
        assert_eq!(first_id(10, 3), 8);
    }

    #[test]
    fn progress_reads_back_and_rejects_nonsense() {
        let mut p = Progress::new(10);
        assert_eq!(p.encode(), "10;");
        for i in [0, 1, 2, 5, 9, 4] {
            p.mark(i);
        }
        assert_eq!(p.encode(), "10;0-3,4-6,9-10");
        assert_eq!(Progress::decode(&p.encode()), Some(p));
        for bad in ["", "x;", "3;0-4", "3;2-1", "5;0-2,1-3", "5;0-"] {
            assert_eq!(Progress::decode(bad), None, "{bad}");
        }
    }

    proptest! {
        /// Marking in any order is the same as a set of indices.
        #[test]
        fn progress_is_a_set_of_indices(len in 0usize..40, marks in proptest::collection::vec(0usize..45, 0..60)) {
            let mut p = Progress::new(len);
            let mut set = std::collections::BTreeSet::new();
            for i in marks {
                p.mark(i);
                if i < len {
                    set.insert(i);
                }
                prop_assert!(p.done.windows(2).all(|w| w[0].1 < w[1].0), "{:?}", p.done);
            }
            for i in 0..len + 5 {
                prop_assert_eq!(p.is_done(i), set.contains(&i));
            }
            prop_assert_eq!(p.all_done(), set.len() == len);
            prop_assert_eq!(Progress::decode(&p.encode()), Some(p));
        }
    }
}
