//! The fleet's jobs by name, kept from one revision to the next while the
//! job names stay the same, in the same order.
//!
//! A commit that edits jobs in place (a command, a limit) keeps every name
//! where it was: checking that costs one look-up per job, where building
//! the table again costs an insertion (and a copy of the name) per job —
//! a few milliseconds against about fifteen on 150,000 jobs, for each of
//! observing, building the observed state, carrying a plan out and prune
//! protection. Those milliseconds are spared too when the index is known to
//! hold: it was made or checked for the same revision, or for the one the
//! load changed in place keeping every job's name ([`JobIndex::refresh_for`]).

use model::spec::{Fleet, JobSpec, Object};
use rustc_hash::FxHashMap;

/// Positions of a fleet's jobs by name (Fx-hashed, as the load's and the
/// engine's tables of names).
#[derive(Debug, Default)]
pub(crate) struct JobIndex {
    by_name: FxHashMap<Box<str>, u32>,
    /// The names in the fleet's order: compared one after the other, they
    /// tell whether the index still holds faster than a look-up each.
    names: Vec<Box<str>>,
    /// How many times the index was made: the same while it held for every
    /// fleet given since.
    generation: u64,
    /// The revision whose fleet the index was last made for or found to
    /// hold (a revision's fleet is its files': the same names every time).
    revision: Option<Box<str>>,
}

impl JobIndex {
    /// Makes this the index of `fleet`'s jobs; whether it already was (the
    /// same names at the same places).
    pub(crate) fn refresh(&mut self, fleet: &Fleet) -> bool {
        if self.holds(fleet) {
            return true;
        }
        self.revision = None;
        self.by_name.clear();
        self.by_name.reserve(fleet.jobs.len());
        self.names.clear();
        for (i, job) in fleet.jobs.iter().enumerate() {
            // A name given twice (an invalid fleet) maps to its last job,
            // as a table collected from the list would.
            self.by_name.insert(job.name().into(), position(i));
            self.names.push(job.name().into());
        }
        self.generation += 1;
        false
    }

    /// [`JobIndex::refresh`] for `fleet`, the fleet of `revision`, without
    /// comparing 100,000s of names when the index is known to hold: it was
    /// made for (or found to hold) that revision's fleet, or that of
    /// `same_names_as`, a revision whose fleet has the same job names at
    /// the same places (the load changed it in place, each job keeping its
    /// name). Debug builds compare the names anyway.
    pub(crate) fn refresh_for(
        &mut self,
        fleet: &Fleet,
        revision: &str,
        same_names_as: Option<&str>,
    ) -> bool {
        let known = self.generation > 0
            && self
                .revision
                .as_deref()
                .is_some_and(|r| r == revision || Some(r) == same_names_as);
        let held = if known {
            debug_assert!(self.holds(fleet), "a job index known to hold does not");
            true
        } else {
            self.refresh(fleet)
        };
        if self.revision.as_deref() != Some(revision) {
            self.revision = Some(revision.into());
        }
        held
    }

    /// How many times the index was made: unchanged, every fleet given
    /// since had the same job names in the same order.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether this indexes `fleet`'s jobs: each name maps to its own
    /// place (with a name given twice one of them does not, and the index
    /// is made again every time: such fleets are refused anyway).
    fn holds(&self, fleet: &Fleet) -> bool {
        self.generation > 0
            && self.names.len() == fleet.jobs.len()
            && self.by_name.len() == self.names.len()
            && fleet
                .jobs
                .iter()
                .zip(&self.names)
                .all(|(job, name)| job.name() == &**name)
    }

    /// Whether a job of that name is in the fleet last indexed.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Look-ups by name in `fleet`, the fleet of `revision`, when this
    /// indexes it already.
    pub(crate) fn specs_held<'a>(&'a self, fleet: &'a Fleet, revision: &str) -> Option<Specs<'a>> {
        let known = self.generation > 0 && self.revision.as_deref() == Some(revision);
        debug_assert!(
            !known || self.holds(fleet),
            "a job index known to hold does not"
        );
        (known || self.holds(fleet)).then_some(Specs { fleet, index: self })
    }

    /// Look-ups by name in `fleet`, indexed first.
    pub(crate) fn specs<'a>(&'a mut self, fleet: &'a Fleet) -> Specs<'a> {
        self.refresh(fleet);
        Specs { fleet, index: self }
    }

    /// [`JobIndex::specs`] for the fleet of `revision`
    /// ([`JobIndex::refresh_for`]).
    pub(crate) fn specs_for<'a>(&'a mut self, fleet: &'a Fleet, revision: &str) -> Specs<'a> {
        self.refresh_for(fleet, revision, None);
        Specs { fleet, index: self }
    }
}

/// A job's place in its fleet (fleets hold far fewer than 2^32 jobs: the
/// load's limits stop them long before).
fn position(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// Job specs by name, for look-ups while observing, building the observed
/// state and carrying actions out (never walked).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Specs<'a> {
    fleet: &'a Fleet,
    index: &'a JobIndex,
}

impl<'a> Specs<'a> {
    /// The job named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Object<JobSpec>> {
        let i = *self.index.by_name.get(name)?;
        self.fleet.jobs.get(i as usize)
    }

    /// Whether the fleet has a job named `name`.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.index.contains(name)
    }

    /// [`JobIndex::generation`] of the index looked in.
    pub(crate) fn generation(&self) -> u64 {
        self.index.generation()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may stop at the first surprise
mod tests {
    use super::*;

    fn fleet(names: &[&str]) -> Fleet {
        let jobs = names
            .iter()
            .map(|name| Object {
                metadata: model::spec::Metadata {
                    name: (*name).to_string(),
                    labels: Default::default(),
                    annotations: Default::default(),
                },
                spec: serde_json::from_value(serde_json::json!({
                    "queue": "q",
                    "gpusPerReplica": 1,
                }))
                .unwrap(),
                origin: model::diag::Origin::new("jobs.yaml".into(), Default::default()),
            })
            .collect();
        Fleet {
            jobs,
            ..Fleet::default()
        }
    }

    /// The straightforward table: the last job of each name.
    fn by_collect(fleet: &Fleet) -> FxHashMap<&str, usize> {
        fleet
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.name(), i))
            .collect()
    }

    fn agrees(index: &mut JobIndex, fleet: &Fleet, probes: &[&str]) {
        let table = by_collect(fleet);
        let specs = index.specs(fleet);
        for name in probes {
            let expected = table.get(name).map(|i| &fleet.jobs[*i]);
            assert_eq!(
                specs.get(name).map(std::ptr::from_ref),
                expected.map(std::ptr::from_ref),
                "{name}"
            );
            assert_eq!(specs.contains_key(name), expected.is_some(), "{name}");
        }
    }

    #[test]
    fn kept_while_the_names_stay_and_made_again_when_they_move() {
        let probes = ["a", "b", "c", "d", "x"];
        let mut index = JobIndex::default();
        let empty = Fleet::default();
        assert!(!index.refresh(&empty), "a new index, even of no jobs");
        assert!(index.refresh(&empty));
        let first = fleet(&["a", "b", "c"]);
        assert!(!index.refresh(&first), "other names");
        let generation = index.generation();
        agrees(&mut index, &first, &probes);
        // The same names in the same places (contents may differ).
        let same = fleet(&["a", "b", "c"]);
        assert!(index.refresh(&same));
        agrees(&mut index, &same, &probes);
        assert_eq!(index.generation(), generation, "kept");
        assert!(index.specs_held(&same, "r").is_some());
        assert!(index.specs_held(&fleet(&["a", "b"]), "r").is_none());
        for changed in [
            fleet(&["a", "c", "b"]),
            fleet(&["a", "b"]),
            fleet(&["a", "b", "c", "d"]),
            fleet(&["a", "b", "d"]),
            fleet(&[]),
        ] {
            let mut kept = JobIndex::default();
            kept.refresh(&first);
            let generation = kept.generation();
            assert!(!kept.refresh(&changed), "{:?}", by_collect(&changed));
            assert_eq!(kept.generation(), generation + 1);
            agrees(&mut kept, &changed, &probes);
        }
    }

    #[test]
    fn a_name_given_twice_finds_its_last_job_and_is_never_kept() {
        let twice = fleet(&["a", "b", "a"]);
        let mut index = JobIndex::default();
        index.refresh(&twice);
        assert!(!index.refresh(&twice), "made again every time");
        agrees(&mut index, &twice, &["a", "b", "c"]);
    }

    #[test]
    fn a_revision_known_to_hold_is_not_compared_and_any_other_is() {
        let probes = ["a", "b", "c", "x"];
        let abc = fleet(&["a", "b", "c"]);
        let mut index = JobIndex::default();
        assert!(!index.refresh_for(&abc, "r1", None), "made");
        let generation = index.generation();
        // Known: the same revision, or one whose fleet has r1's names.
        assert!(index.refresh_for(&abc, "r1", None));
        assert!(index.refresh_for(&fleet(&["a", "b", "c"]), "r2", Some("r1")));
        assert!(index.specs_held(&abc, "r2").is_some());
        assert_eq!(index.generation(), generation, "kept");
        // Not known: compared (kept when the names are the same)...
        assert!(index.refresh_for(&abc, "r3", Some("r1")), "compared");
        assert_eq!(index.generation(), generation);
        // ...and made again when they are not; the revision it was known
        // for is forgotten with its names.
        let ab = fleet(&["a", "b"]);
        assert!(!index.refresh_for(&ab, "r4", None));
        assert_eq!(index.generation(), generation + 1);
        agrees(&mut index, &ab, &probes);
        index.refresh(&abc);
        assert_eq!(index.generation(), generation + 2);
        assert!(!index.refresh_for(&ab, "r4", None), "r4's names are gone");
        assert_eq!(index.generation(), generation + 3);
        agrees(&mut index, &ab, &probes);
        assert!(index.specs_held(&abc, "r5").is_none(), "compared");
    }
}
